// SPDX-License-Identifier: MIT OR Apache-2.0
//! Table of Physical Addresses (`arch/x86/events/intel/pt.c`: `topa_insert_table`,
//! `pt_buffer_setup_aux`, `pt_update_head`): the output tables
//! an Intel PT tracer writes through, built over the AUX pages, and the
//! output position the hardware keeps in `IA32_RTIT_OUTPUT_BASE` /
//! `IA32_RTIT_OUTPUT_MASK_PTRS`.
//!
//! The tables live in caller pages ([`TopaTable`], one 4 KiB page each:
//! 507 entries and the driver's metadata, as Linux's `struct topa_page`).
//! Each physically contiguous run of AUX pages aligned to its size becomes
//! one region (up to 128 MiB; Linux takes the allocator's block orders, which
//! are such runs); regions follow buffer order; every table ends with an END
//! link to the next, the last one back to the first.

use crate::abi::PAGE_SIZE;
use crate::error::{Error, Result};

/// Entries per table page (Linux `TENTS_PER_PAGE`: a page minus 40 bytes of metadata).
pub const TENTS_PER_PAGE: usize = 507;

/// Regions one table holds: all its entries but the one after the last
/// region, the END entry linking to the next table (the last table's to
/// the first), as `topa_insert_table` leaves it.
pub const REGIONS_PER_TABLE: usize = TENTS_PER_PAGE - 1;

/// The ToPA tables [`Topa::build`] needs at most for a buffer of `pages`
/// 4 KiB pages: one region per page when no two pages are physically
/// contiguous, [`REGIONS_PER_TABLE`] regions per table. Contiguous,
/// aligned pages share a region and may need fewer; `build` takes more than
/// it needs and refuses fewer with `ENOMEM`.
///
/// ```
/// use perfaux::pt::topa::tables_for_pages;
/// assert_eq!(tables_for_pages(1), 1);
/// assert_eq!(tables_for_pages(256), 1);
/// assert_eq!(tables_for_pages(512), 2); // 506 regions, then 6 more
/// assert_eq!(tables_for_pages(1 << 20), 2073); // a 4 GiB buffer
/// ```
pub const fn tables_for_pages(pages: usize) -> usize {
    pages.div_ceil(REGIONS_PER_TABLE)
}
/// The largest region order: 4 KiB << 15 = 128 MiB.
pub const MAX_REGION_ORDER: u32 = 15;

/// One ToPA entry (`struct topa_entry`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct TopaEntry(pub u64);

impl TopaEntry {
    /// END: the entry links to the next table.
    pub const END: u64 = 1 << 0;
    /// INT: raise a PMI when this region fills.
    pub const INT: u64 = 1 << 2;
    /// STOP: stop tracing when this region fills.
    pub const STOP: u64 = 1 << 4;
    const SIZE_SHIFT: u32 = 6;
    const SIZE_MASK: u64 = 0xf << Self::SIZE_SHIFT;
    const BASE_SHIFT: u32 = 12;
    /// The 40-bit base field (bits 12..51).
    const BASE_MASK: u64 = ((1 << 40) - 1) << Self::BASE_SHIFT;

    /// A region of `4 KiB << order` bytes at physical address `phys`:
    /// `EINVAL` unless `order <= 15`, `phys` is aligned to the region's size
    /// and fits the 40-bit base field.
    pub const fn region(phys: u64, order: u32) -> Result<TopaEntry> {
        if order > MAX_REGION_ORDER || phys % ((PAGE_SIZE as u64) << order) != 0 || phys >> 52 != 0
        {
            return Err(Error::Invalid);
        }
        Ok(TopaEntry(phys | ((order as u64) << Self::SIZE_SHIFT)))
    }

    /// An END link to the table at physical address `phys` (page aligned).
    pub const fn link(phys: u64) -> Result<TopaEntry> {
        if phys % PAGE_SIZE as u64 != 0 || phys >> 52 != 0 {
            return Err(Error::Invalid);
        }
        Ok(TopaEntry(phys | Self::END))
    }

    /// The physical address in the base field.
    pub const fn base(self) -> u64 {
        self.0 & Self::BASE_MASK
    }

    /// The size code (region bytes = 4 KiB << code).
    pub const fn order(self) -> u32 {
        ((self.0 & Self::SIZE_MASK) >> Self::SIZE_SHIFT) as u32
    }

    /// The region's size in bytes.
    pub const fn size(self) -> u64 {
        (PAGE_SIZE as u64) << self.order()
    }

    /// Whether this is an END link.
    pub const fn is_end(self) -> bool {
        self.0 & Self::END != 0
    }

    /// Whether a PMI is raised when this region fills.
    pub const fn int(self) -> bool {
        self.0 & Self::INT != 0
    }

    /// Whether tracing stops when this region fills.
    pub const fn stop(self) -> bool {
        self.0 & Self::STOP != 0
    }

    /// This entry with the INT and STOP bits set as given.
    pub const fn with_marks(self, int: bool, stop: bool) -> TopaEntry {
        let mut v = self.0 & !(Self::INT | Self::STOP);
        if int {
            v |= Self::INT;
        }
        if stop {
            v |= Self::STOP;
        }
        TopaEntry(v)
    }
}

/// One table page: entries, then the driver's metadata (Linux `struct topa_page`).
#[repr(C, align(4096))]
#[derive(Clone, Copy, Debug)]
pub struct TopaTable {
    /// Regions, then an END link.
    pub entries: [TopaEntry; TENTS_PER_PAGE],
    /// Buffer offset of this table's first region.
    pub offset: u64,
    /// Bytes in this table's regions.
    pub size: u64,
    /// Number of region entries (the END link is at this index).
    pub last: u32,
    _reserved: [u8; 20],
}

static_assertions::const_assert_eq!(core::mem::size_of::<TopaTable>(), PAGE_SIZE);

impl TopaTable {
    /// Writes entry `index`, if the table has one there.
    fn set_entry(&mut self, index: usize, entry: TopaEntry) {
        if let Some(e) = self.entries.get_mut(index) {
            *e = entry;
        }
    }

    /// An empty table.
    pub const fn new() -> TopaTable {
        TopaTable {
            entries: [TopaEntry(0); TENTS_PER_PAGE],
            offset: 0,
            size: 0,
            last: 0,
            _reserved: [0; 20],
        }
    }
}

impl Default for TopaTable {
    fn default() -> Self {
        Self::new()
    }
}

/// Translates between the addresses the CPU uses and those the tracer
/// writes to (physical addresses for hardware; the identity for a software
/// tracer on the host; `virt_to_phys` in a kernel).
pub trait PhysMap {
    /// The physical address of `virt`.
    fn to_phys(&self, virt: *const u8) -> u64;
    /// The address the CPU uses for `phys`.
    fn to_virt(&self, phys: u64) -> *mut u8;
}

/// A reference maps as what it refers to: a driver holds its map by value,
/// and that value may be a borrow (`&IdentityMap`, `&dyn PhysMap`).
impl<T: PhysMap + ?Sized> PhysMap for &T {
    #[inline(always)]
    fn to_phys(&self, virt: *const u8) -> u64 {
        (**self).to_phys(virt)
    }
    #[inline(always)]
    fn to_virt(&self, phys: u64) -> *mut u8 {
        (**self).to_virt(phys)
    }
}

/// Virtual addresses are physical addresses (host simulation).
#[derive(Clone, Copy, Debug, Default)]
pub struct IdentityMap;

impl PhysMap for IdentityMap {
    fn to_phys(&self, virt: *const u8) -> u64 {
        virt as u64
    }
    fn to_virt(&self, phys: u64) -> *mut u8 {
        phys as usize as *mut u8
    }
}

/// Where the tracer writes next: the current table, the entry in it, and
/// the offset in that entry's region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TopaPosition {
    /// Index of the current table.
    pub table: usize,
    /// Index of the current entry in it.
    pub index: usize,
    /// Offset in the current region.
    pub offset: u64,
}

impl TopaPosition {
    /// The `IA32_RTIT_OUTPUT_MASK_PTRS` value: `0x7f | index << 7 | offset << 32`.
    pub const fn mask_ptrs(self) -> u64 {
        0x7f | ((self.index as u64) << 7) | (self.offset << 32)
    }

    /// The entry index and region offset of a `MASK_PTRS` value (the table
    /// comes from `OUTPUT_BASE`).
    pub const fn from_mask_ptrs(table: usize, value: u64) -> TopaPosition {
        TopaPosition {
            table,
            index: ((value & 0xffff_ff80) >> 7) as usize,
            offset: value >> 32,
        }
    }
}

/// ToPA tables built over an AUX buffer.
///
/// # Invariants
/// `1 <= count <= tables.len()`; the first `count` tables hold every region
/// of the buffer in order, each table ending with an END entry that links to
/// the next and the last to the first (a ring of tables, as
/// `topa_insert_table` builds it); `size` is the sum of the regions' sizes.
pub struct Topa<'t> {
    tables: &'t mut [TopaTable],
    /// Tables in use.
    count: usize,
    /// Buffer size in bytes.
    size: u64,
}

impl<'t> Topa<'t> {
    /// Builds the tables for `pages` (one pointer per 4 KiB page, in buffer
    /// order) in `tables`, each region marked with neither INT nor STOP.
    ///
    /// Errors: `EINVAL` for no pages, a page count that is not a power of
    /// two, a null page, or a page `PhysMap` cannot express (base field);
    /// `ENOMEM` if `tables` has too few pages for the regions.
    pub fn build(
        tables: &'t mut [TopaTable],
        pages: &[*mut u8],
        phys: &dyn PhysMap,
    ) -> Result<Topa<'t>> {
        let n = pages.len();
        if n == 0 || !n.is_power_of_two() || pages.iter().any(|p| p.is_null()) {
            return Err(Error::Invalid);
        }
        let Some(first) = tables.first_mut() else {
            return Err(Error::NoMemory);
        };
        *first = TopaTable::new();
        let head = phys.to_phys(core::ptr::from_ref(first).cast());
        let mut count = 1;
        let mut offset = 0u64;
        let mut i = 0;
        while let Some(&page) = pages.get(i) {
            let order = run_order(pages, i, phys);
            let entry = TopaEntry::region(phys.to_phys(page), order)?;
            // A full table links to a fresh one (the last slot keeps the END).
            let Some((done, rest)) = tables.split_at_mut_checked(count) else {
                crate::warn_on_once!(true, "ToPA build: more tables in use than given");
                return Err(Error::NoMemory);
            };
            let Some(current) = done.last_mut() else {
                crate::warn_on_once!(true, "ToPA build: no table in use");
                return Err(Error::NoMemory);
            };
            let current = if current.last as usize == TENTS_PER_PAGE - 1 {
                let Some(next) = rest.first_mut() else {
                    return Err(Error::NoMemory);
                };
                *next = TopaTable::new();
                next.offset = offset;
                let link = TopaEntry::link(phys.to_phys(core::ptr::from_ref(next).cast()))?;
                current.set_entry(current.last as usize, link);
                count += 1;
                next
            } else {
                current
            };
            current.set_entry(current.last as usize, entry);
            current.last += 1;
            current.size += entry.size();
            offset += entry.size();
            i += 1 << order;
        }
        // Close the ring: the last table links back to the first.
        let first_link = TopaEntry::link(head)?;
        let Some(last) = tables.get_mut(count - 1) else {
            crate::warn_on_once!(true, "ToPA build: the last table in use is not there");
            return Err(Error::NoMemory);
        };
        last.set_entry(last.last as usize, first_link);
        // INVARIANT: every page went into a region in order, the tables in
        // use (count, at least the first) are linked in a ring ending at the
        // first, and `offset` summed the regions' sizes.
        Ok(Topa {
            tables,
            count,
            size: offset,
        })
    }

    /// Buffer size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The tables in use.
    pub fn tables(&self) -> &[TopaTable] {
        // INVARIANT: `count <= tables.len()` (`build`).
        self.tables.get(..self.count).unwrap_or(&[])
    }

    /// Number of regions.
    pub fn regions(&self) -> usize {
        self.tables().iter().map(|t| t.last as usize).sum()
    }

    /// The region entry at `table`/`index`, if there is one (a position
    /// read from the hardware may point anywhere).
    pub fn entry(&self, table: usize, index: usize) -> Option<TopaEntry> {
        let t = self.tables().get(table)?;
        if index >= t.last as usize {
            return None;
        }
        t.entries.get(index).copied()
    }

    /// Sets the INT/STOP marks of one region (no such region: nothing).
    pub fn mark(&mut self, table: usize, index: usize, int: bool, stop: bool) {
        let Some(t) = self
            .tables
            .get_mut(..self.count)
            .and_then(|t| t.get_mut(table))
        else {
            return;
        };
        if index < t.last as usize {
            if let Some(e) = t.entries.get_mut(index) {
                *e = e.with_marks(int, stop);
            }
        }
    }

    /// The position of buffer offset `offset` (masked to the buffer size)
    /// (`pt_buffer_reset_offsets`).
    pub fn position_of(&self, offset: u64) -> TopaPosition {
        let offset = offset & (self.size - 1);
        for (t, table) in self.tables().iter().enumerate() {
            if offset < table.offset + table.size {
                let mut start = table.offset;
                let regions = table.entries.iter().take(table.last as usize);
                for (index, entry) in regions.enumerate() {
                    let size = entry.size();
                    if offset < start + size {
                        return TopaPosition {
                            table: t,
                            index,
                            offset: offset - start,
                        };
                    }
                    start += size;
                }
            }
        }
        // The offset is below the buffer's size, which the regions sum to.
        crate::warn_on_once!(true, "ToPA position of an offset past the regions");
        TopaPosition::default()
    }

    /// The buffer offset of a position (`pt_update_head`'s base): the
    /// table's offset, the regions before the entry, and the region offset.
    /// An offset equal to the region's size (the hardware has filled it and
    /// not moved on yet) gives the start of the next region.
    /// `None` for a position outside the tables (a broken tracer).
    pub fn offset_of(&self, pos: TopaPosition) -> Option<u64> {
        let t = self.tables().get(pos.table)?;
        if pos.index > t.last as usize {
            return None;
        }
        let before: u64 = t.entries.iter().take(pos.index).map(|e| e.size()).sum();
        Some(t.offset + before + pos.offset)
    }

    /// The position after `pos`'s region is full (`pt_buffer_advance`):
    /// the next region, the next table, or back to the first (wrapped).
    pub fn advance(&self, pos: TopaPosition) -> (TopaPosition, bool) {
        let mut next = TopaPosition {
            table: pos.table,
            index: pos.index + 1,
            offset: 0,
        };
        let last = self.tables().get(pos.table).map_or(0, |t| t.last as usize);
        if next.index >= last {
            next.index = 0;
            next.table += 1;
            if next.table == self.count {
                next.table = 0;
                return (next, true);
            }
        }
        (next, false)
    }
}

/// The order of the region starting at page `i`: the largest run of
/// physically contiguous pages, aligned in memory to its size (a region
/// base must be), at most 2^15 pages.
fn run_order(pages: &[*mut u8], i: usize, phys: &dyn PhysMap) -> u32 {
    let Some(&first) = pages.get(i) else {
        return 0;
    };
    let base = phys.to_phys(first);
    let mut order = 0;
    while order < MAX_REGION_ORDER {
        let next = order + 1;
        let len = 1usize << next;
        if i + len > pages.len() || base % ((PAGE_SIZE as u64) << next) != 0 {
            break;
        }
        let contiguous = (1usize << order..len).all(|j| {
            pages
                .get(i + j)
                .is_some_and(|&p| phys.to_phys(p) == base + (j * PAGE_SIZE) as u64)
        });
        if !contiguous {
            break;
        }
        order = next;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_fields() {
        let e = TopaEntry::region(0x1_2345_6000, 0).unwrap();
        assert_eq!(
            (e.base(), e.order(), e.size(), e.is_end()),
            (0x1_2345_6000, 0, 4096, false)
        );
        let e = TopaEntry::region(0x8000_0000, 15).unwrap();
        assert_eq!(e.size(), 128 << 20);
        assert_eq!(
            TopaEntry::region(0x1000, 1),
            Err(Error::Invalid),
            "not aligned to 8 KiB"
        );
        assert_eq!(
            TopaEntry::region(0, 16),
            Err(Error::Invalid),
            "no 256 MiB regions"
        );
        assert_eq!(
            TopaEntry::region(1 << 52, 0),
            Err(Error::Invalid),
            "past the 40-bit base"
        );
        assert!(TopaEntry::region((1 << 52) - 4096, 0).is_ok());
        let m = e.with_marks(true, true);
        assert!(m.int() && m.stop() && m.base() == e.base() && m.order() == 15);
        assert!(TopaEntry::link(0x5000).unwrap().is_end());
    }

    #[test]
    fn mask_ptrs_round_trip() {
        let p = TopaPosition {
            table: 2,
            index: 300,
            offset: 0x1234,
        };
        assert_eq!(p.mask_ptrs(), 0x7f | (300 << 7) | (0x1234 << 32));
        assert_eq!(TopaPosition::from_mask_ptrs(2, p.mask_ptrs()), p);
    }
}
