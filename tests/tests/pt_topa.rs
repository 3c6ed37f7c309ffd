// SPDX-License-Identifier: MIT OR Apache-2.0
//! ToPA tables (`topa_insert_table`, `pt_buffer_setup_aux`): layouts for one page, mixed chunk
//! orders, the largest region, many tables; position encoding round trips.

use perfaux::Error;
use perfaux::abi::PAGE_SIZE;
use perfaux::pt::topa::{
    IdentityMap, TENTS_PER_PAGE, Topa, TopaEntry, TopaPosition, TopaTable, tables_for_pages,
};
use perfaux_tests::mem::AuxMemory;

fn tables(n: usize) -> Vec<TopaTable> {
    vec![TopaTable::new(); n]
}

/// (order, base) of every region, and whether each table ends with the right link.
fn layout(topa: &Topa<'_>) -> Vec<(u32, u64)> {
    let t = topa.tables();
    for (i, table) in t.iter().enumerate() {
        let link = table.entries[table.last as usize];
        let next = &t[(i + 1) % t.len()];
        assert!(link.is_end(), "table {i} ends with an END entry");
        assert_eq!(
            link.base(),
            std::ptr::from_ref(next) as u64,
            "table {i} links to the next (the last to the first)"
        );
        assert!(
            table.entries[..table.last as usize]
                .iter()
                .all(|e| !e.is_end() && !e.int() && !e.stop())
        );
    }
    t.iter()
        .flat_map(|table| {
            table.entries[..table.last as usize]
                .iter()
                .map(|e| (e.order(), e.base()))
        })
        .collect()
}

#[test]
fn one_page() {
    let aux = AuxMemory::new(1, 0);
    let mut t = tables(1);
    let topa = Topa::build(&mut t, aux.pages(), &IdentityMap).unwrap();
    assert_eq!(layout(&topa), [(0, aux.pages()[0] as u64)]);
    assert_eq!(topa.size(), 4096);
}

#[test]
fn mixed_chunk_orders_become_one_region_each() {
    // Blocks of 4, 1, 2 and 1 pages (as Linux's allocator may fall back).
    let aux = AuxMemory::mixed(&[2, 0, 1, 0]);
    let mut t = tables(1);
    let topa = Topa::build(&mut t, aux.pages(), &IdentityMap).unwrap();
    let p = aux.pages();
    assert_eq!(
        layout(&topa),
        [
            (2, p[0] as u64),
            (0, p[4] as u64),
            (1, p[5] as u64),
            (0, p[7] as u64)
        ]
    );
    assert_eq!(topa.size(), 8 * 4096);
    // Every page offset maps to its region and back.
    for off in (0..topa.size()).step_by(512) {
        let pos = topa.position_of(off);
        assert_eq!(topa.offset_of(pos), Some(off));
        let e = topa.entry(pos.table, pos.index).expect("a region");
        let page = (off / 4096) as usize;
        assert_eq!(
            e.base() + pos.offset,
            p[page] as u64 + off % 4096,
            "offset {off}"
        );
    }
}

#[test]
fn the_largest_region() {
    let aux = AuxMemory::new(1 << 15, 15); // one 128 MiB block
    let mut t = tables(1);
    let topa = Topa::build(&mut t, aux.pages(), &IdentityMap).unwrap();
    assert_eq!(layout(&topa), [(15, aux.pages()[0] as u64)]);
    assert_eq!(topa.size(), 128 << 20);
    assert_eq!(topa.entry(0, 0).map(|e| e.size()), Some(128 << 20));
    // Positions outside the tables (a broken tracer) are no region.
    assert_eq!(topa.entry(0, 1), None, "past the last region");
    assert_eq!(topa.entry(1, 0), None, "past the last table");
    let wild = perfaux::pt::topa::TopaPosition {
        table: 3,
        index: 0,
        offset: 0,
    };
    assert_eq!(topa.offset_of(wild), None);
}

#[test]
fn twice_the_largest_region_is_two_regions() {
    let aux = AuxMemory::new(1 << 16, 16); // 256 MiB in one block
    let mut t = tables(1);
    let topa = Topa::build(&mut t, aux.pages(), &IdentityMap).unwrap();
    let l = layout(&topa);
    assert_eq!(l.len(), 2);
    assert!(l.iter().all(|&(o, _)| o == 15));
}

#[test]
fn many_regions_chain_tables() {
    let aux = AuxMemory::scattered(1024);
    let mut t = tables(3);
    let topa = Topa::build(&mut t, aux.pages(), &IdentityMap).unwrap();
    assert_eq!(topa.tables().len(), 3);
    assert_eq!(topa.regions(), 1024);
    let per_table = TENTS_PER_PAGE - 1;
    assert_eq!(topa.tables()[0].last as usize, per_table);
    assert_eq!(topa.tables()[2].last as usize, 1024 - 2 * per_table);
    assert_eq!(topa.tables()[1].offset, (per_table * PAGE_SIZE) as u64);
    assert_eq!(layout(&topa).len(), 1024);
    // Positions round trip across tables, and advancing walks every region once.
    let mut pos = TopaPosition::default();
    let mut wrapped = false;
    for region in 0..1024u64 {
        assert!(!wrapped);
        assert_eq!(topa.offset_of(pos), Some(region * 4096));
        assert_eq!(
            topa.position_of(region * 4096 + 100),
            TopaPosition { offset: 100, ..pos }
        );
        (pos, wrapped) = topa.advance(pos);
    }
    assert!(
        wrapped && pos == TopaPosition::default(),
        "back to the first region of the first table"
    );
    // Too few table pages.
    let mut t = tables(2);
    assert_eq!(
        Topa::build(&mut t, aux.pages(), &IdentityMap).err(),
        Some(Error::NoMemory)
    );
}

#[test]
fn a_full_region_is_the_start_of_the_next() {
    let aux = AuxMemory::scattered(4);
    let mut t = tables(1);
    let topa = Topa::build(&mut t, aux.pages(), &IdentityMap).unwrap();
    let full = TopaPosition {
        table: 0,
        index: 1,
        offset: 4096,
    };
    assert_eq!(topa.offset_of(full), Some(2 * 4096));
    // And the hardware's MASK_PTRS encoding of it round trips.
    assert_eq!(TopaPosition::from_mask_ptrs(0, full.mask_ptrs()), full);
}

#[test]
fn bad_input_is_refused() {
    let aux = AuxMemory::new(4, 0);
    let mut t = tables(1);
    assert_eq!(
        Topa::build(&mut t, &aux.pages()[..3], &IdentityMap).err(),
        Some(Error::Invalid)
    );
    assert_eq!(
        Topa::build(&mut t, &[], &IdentityMap).err(),
        Some(Error::Invalid)
    );
    assert_eq!(
        Topa::build(&mut [], aux.pages(), &IdentityMap).err(),
        Some(Error::NoMemory)
    );
    assert_eq!(TopaEntry::region(4096, 0).map(|e| e.base()), Ok(4096));
}

/// `tables_for_pages` is exactly what a buffer of pages that are never
/// contiguous (one region each) needs: it builds with that many tables and
/// is refused with one fewer.
#[test]
fn tables_for_pages_is_exact_for_one_region_per_page() {
    for pages in [1usize, 2, 256, 512, 1024, 2048] {
        let aux = AuxMemory::scattered(pages);
        let need = tables_for_pages(pages);
        let mut t = tables(need);
        let topa = Topa::build(&mut t, aux.pages(), &IdentityMap).unwrap();
        assert_eq!(topa.regions(), pages, "{pages} pages: one region each");
        assert_eq!(topa.tables().len(), need, "{pages} pages");
        layout(&topa);
        let mut fewer = tables(need - 1);
        assert_eq!(
            Topa::build(&mut fewer, aux.pages(), &IdentityMap).err(),
            Some(Error::NoMemory),
            "{pages} pages in {} tables",
            need - 1
        );
    }
}
