// SPDX-License-Identifier: MIT OR Apache-2.0
//! The per-buffer object (`struct perfaux_pt_buffer`): the ToPA tables over
//! one AUX buffer's pages, made by `setup_aux`, ended by `free_aux`.

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of_mut};

use perfaux::abi::PAGE_SIZE;
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::topa::TopaTable;
use perfaux::{Error, warn_on_once};

use crate::aux::{area_hold, perfaux_aux_area};
use crate::platform::{CPhysMap, perfaux_phys_map};
use crate::storage::{Hold, Users, live_box, usable};

/// Words of `struct perfaux_pt_buffer`.
pub const PERFAUX_PT_BUFFER_WORDS: usize = 16;
/// Size in bytes of `struct perfaux_pt_buffer` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_PT_BUFFER_SIZE: usize = PERFAUX_PT_BUFFER_WORDS * 8;

/// Storage of the PT driver's state of one AUX buffer (what `setup_aux`
/// returns). Opaque.
#[repr(C)]
pub struct perfaux_pt_buffer {
    /// Opaque.
    pub opaque: [u64; PERFAUX_PT_BUFFER_WORDS],
}

/// What `struct perfaux_pt_buffer` holds.
#[repr(C)]
pub(super) struct BufferBox {
    live: u64,
    /// The PT CPU objects tracing into the buffer.
    pub(super) users: Users,
    /// The AUX area whose pages the buffer covers, if it is an area's.
    area: Option<Hold<'static>>,
    pub(super) buffer: PtBuffer<'static>,
}

const BUFFER_LIVE: u64 = 0x7065_7266_7074_6266; // "perfptbf"

const _: () = {
    assert!(size_of::<BufferBox>() <= size_of::<perfaux_pt_buffer>());
    assert!(align_of::<BufferBox>() <= align_of::<perfaux_pt_buffer>());
};

/// The initialized PT buffer at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_pt_buffer` storage.
pub(super) unsafe fn buffer_ref<'a>(p: *const perfaux_pt_buffer) -> Option<&'a BufferBox> {
    // SAFETY: `p` is NULL or PT buffer storage (this function's `# Safety`),
    // which `live_box` needs; the live word says it was initialized and not
    // torn down.
    unsafe { live_box::<_, BufferBox>(p, BUFFER_LIVE).map(|b| &*b) }
}

/// The initialized PT buffer at `p` with a hold on it, for a CPU object
/// that traces into it: the buffer's `fini` is refused until the hold is
/// dropped.
///
/// # Safety
/// As [`buffer_ref`].
pub(super) unsafe fn buffer_hold<'a>(
    p: *const perfaux_pt_buffer,
) -> Option<(&'a PtBuffer<'static>, Hold<'a>)> {
    // SAFETY: as `buffer_ref` (this function's `# Safety`).
    unsafe { buffer_ref(p) }.map(|b| (&b.buffer, b.users.hold()))
}

/// Builds the BufferBox in `buf` over `pages`, its tables in `tables`.
///
/// # Safety
/// `buf` valid storage that does not move; `tables` valid for writes of
/// `nr_tables` 4 KiB pages, 4 KiB aligned, and `pages` valid for reads and
/// writes, for the buffer's life (until `perfaux_pt_buffer_fini`).
unsafe fn build_buffer(
    buf: *mut perfaux_pt_buffer,
    tables: *mut c_void,
    nr_tables: usize,
    pages: &'static [*mut u8],
    overwrite: bool,
    phys: *const perfaux_phys_map,
    area: Option<Hold<'static>>,
) -> c_int {
    if !usable(buf) || tables.is_null() || (tables as usize) % PAGE_SIZE != 0 || nr_tables == 0 {
        return Error::Invalid.errno();
    }
    if nr_tables > isize::MAX as usize / PAGE_SIZE {
        return Error::Invalid.errno();
    }
    // SAFETY: `buf` is NULL or `struct perfaux_pt_buffer` storage (this function's `# Safety`),
    // which is what `buffer_ref` needs.
    if unsafe { buffer_ref(buf) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let Some(phys) = (unsafe { CPhysMap::read(phys) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: the table pages are the caller's for the buffer's life;
    // zeroed first, so the slice holds valid (all-zero) tables.
    let tables: &'static mut [TopaTable] = unsafe {
        ptr::write_bytes(tables.cast::<u8>(), 0, nr_tables * PAGE_SIZE);
        core::slice::from_raw_parts_mut(tables.cast::<TopaTable>(), nr_tables)
    };
    // SAFETY: the pages are valid for the buffer's life and written only by
    // the tracer of a CPU object holding its transaction (the contract).
    let buffer = match unsafe { PtBuffer::new(tables, pages, overwrite, &phys) } {
        Ok(b) => b,
        Err(e) => return e.errno(),
    };
    let b = buf.cast::<BufferBox>();
    // SAFETY: valid storage for a BufferBox (asserted, the contract); the
    // live word goes last.
    unsafe {
        addr_of_mut!((*b).users).write(Users::new());
        addr_of_mut!((*b).area).write(area);
        addr_of_mut!((*b).buffer).write(buffer);
        addr_of_mut!((*b).live).write(BUFFER_LIVE);
    }
    0
}

/// Regions one ToPA table page holds (the last of its 507 entries links to
/// the next table).
pub const PERFAUX_PT_REGIONS_PER_TABLE: usize = 506;
const _: () = assert!(PERFAUX_PT_REGIONS_PER_TABLE == perfaux::pt::topa::REGIONS_PER_TABLE);

/// The ToPA table pages `perfaux_pt_buffer_init` needs at most for
/// `nr_pages` AUX pages (one region per page when none are contiguous);
/// the `PERFAUX_PT_TABLES_FOR_PAGES(nr_pages)` macro gives the same
/// number as a constant expression.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_pt_tables_for_pages(nr_pages: usize) -> usize {
    perfaux::pt::topa::tables_for_pages(nr_pages)
}

/// Initializes the PT state of one AUX buffer (`setup_aux`): `nr_pages`
/// 4 KiB pages (`pages`, one pointer per page, a power of two), overwrite
/// (snapshot) mode if `overwrite` is 1, its ToPA tables in `tables`
/// (`nr_tables` 4 KiB-aligned pages, `perfaux_pt_tables_for_pages(nr_pages)`
/// of them at most), physical
/// addresses through `phys` (NULL: identity; a kernel passes
/// `virt_to_phys`/`phys_to_virt`, the same map as the CPU objects').
///
/// Returns 0, `-EINVAL` for bad arguments (NULL or misaligned storage, a
/// page count that is not a power of two, a NULL page, one of the two phys
/// callbacks only), `-ENOMEM` if the tables are too few, `-EBUSY` if `buf`
/// is initialized.
///
/// # Safety
/// `buf` valid for writes of `sizeof(struct perfaux_pt_buffer)` bytes and
/// not moved until `perfaux_pt_buffer_fini`; `tables`, the page array and
/// the pages valid for as long, the pages written by nothing but the tracer
/// of the CPU object holding the buffer's transaction; `phys` NULL or
/// readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_buffer_init(
    buf: *mut perfaux_pt_buffer,
    tables: *mut c_void,
    nr_tables: usize,
    pages: *const *mut c_void,
    nr_pages: usize,
    overwrite: c_int,
    phys: *const perfaux_phys_map,
) -> c_int {
    if !usable(pages)
        || !nr_pages.is_power_of_two()
        || nr_pages > isize::MAX as usize / size_of::<*mut u8>()
        || !(0..=1).contains(&overwrite)
    {
        return Error::Invalid.errno();
    }
    // SAFETY: `nr_pages` readable pointers that outlive the buffer.
    let pages: &'static [*mut u8] =
        unsafe { core::slice::from_raw_parts(pages.cast::<*mut u8>(), nr_pages) };
    // SAFETY: `buf` is storage that does not move, `tables` and the pages
    // valid for the buffer's life, `phys` NULL or readable (this function's
    // `# Safety`): `build_buffer`'s clauses.
    unsafe { build_buffer(buf, tables, nr_tables, pages, overwrite == 1, phys, None) }
}

/// Initializes the PT state of a perfaux AUX `area`'s buffer (its pages,
/// its mode), tables and `phys` as for `perfaux_pt_buffer_init`. Returns 0,
/// `-EINVAL` (`area` not initialized, bad arguments), `-ENOMEM` or `-EBUSY`.
///
/// The buffer holds the area: the area's `fini` is refused until the
/// buffer's.
///
/// # Safety
/// As `perfaux_pt_buffer_init`; `area` NULL or AUX area storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_buffer_init_area(
    buf: *mut perfaux_pt_buffer,
    tables: *mut c_void,
    nr_tables: usize,
    area: *const perfaux_aux_area,
    phys: *const perfaux_phys_map,
) -> c_int {
    // SAFETY: `area` is NULL or `struct perfaux_aux_area` storage (this function's `# Safety`),
    // which is what `area_ref` needs.
    let Some((area, hold)) = (unsafe { area_hold(area) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: an area's pages are valid for its life, which the hold makes
    // outlast the buffer; only the tracer writes them.
    unsafe {
        build_buffer(
            buf,
            tables,
            nr_tables,
            area.pages(),
            area.is_overwrite(),
            phys,
            Some(hold),
        )
    }
}

/// Ends the PT state of one AUX buffer (`free_aux`) and lets go of its
/// area. Returns 0, `-EBUSY` (and nothing changes) while a PT CPU object
/// traces into it (tear that down first) or while a transaction holds it
/// (and warns: the kernel never does this), `-EINVAL` if `buf` is not an
/// initialized buffer.
///
/// # Safety
/// `buf` NULL or buffer storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_buffer_fini(buf: *mut perfaux_pt_buffer) -> c_int {
    // SAFETY: `buf` is NULL or `struct perfaux_pt_buffer` storage (this function's `# Safety`),
    // which is what `buffer_ref` needs.
    let Some(b) = (unsafe { buffer_ref(buf) }) else {
        return Error::Invalid.errno();
    };
    if b.users.in_use() {
        return Error::Busy.errno();
    }
    if warn_on_once!(
        b.buffer.is_held(),
        "free_aux of a PT buffer a transaction holds"
    ) {
        return Error::Busy.errno();
    }
    let b = buf.cast::<BufferBox>();
    // SAFETY: live: marked dead, then dropped once, then the hold on the
    // area whose pages it covered.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        ptr::drop_in_place(addr_of_mut!((*b).buffer));
        ptr::drop_in_place(addr_of_mut!((*b).area));
    }
    0
}
