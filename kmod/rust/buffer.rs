// SPDX-License-Identifier: GPL-2.0
//! One AUX buffer's PT state (what `setup_aux` returns, `rb->aux_priv`):
//! the perfaux crate's `PtBuffer` and the ToPA table pages it is built in,
//! as Intel PT's `struct pt_buffer` (arch/x86/events/intel/pt.c).

use core::ptr::{self, NonNull};
use kernel::ffi::{c_int, c_void};

use kernel::alloc::{flags, KBox};
use kernel::prelude::*;
use perfaux::abi::PAGE_SIZE;
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::topa::{tables_for_pages, TopaTable};

use crate::bindings;
use crate::phys::KernelPhys;

/// The ToPA tables of one buffer: `nr` zeroed pages from
/// `alloc_pages_exact()`.
///
/// # Invariants
/// `pages` is `alloc_pages_exact(nr * PAGE_SIZE)`'s result, freed only by
/// `drop`.
struct TablePages {
    pages: NonNull<TopaTable>,
    nr: usize,
}

impl TablePages {
    fn new(nr: usize) -> Result<Self> {
        let bytes = nr.checked_mul(PAGE_SIZE).ok_or(ENOMEM)?;
        let gfp = kernel::bindings::GFP_KERNEL | kernel::bindings::__GFP_ZERO;
        // SAFETY: a plain allocation (`alloc_pages_exact()`, a macro over
        // this call); the result is checked for NULL.
        let p = unsafe { bindings::alloc_pages_exact_noprof(bytes, gfp) };
        // INVARIANT: the allocation of `nr` pages.
        Ok(TablePages {
            pages: NonNull::new(p.cast()).ok_or(ENOMEM)?,
            nr,
        })
    }
}

impl Drop for TablePages {
    fn drop(&mut self) {
        // SAFETY: the allocation (type invariant), freed once.
        unsafe { bindings::free_pages_exact(self.pages.as_ptr().cast(), self.nr * PAGE_SIZE) };
    }
}

/// What `setup_aux` makes for one AUX buffer.
///
/// # Invariants
/// `pt` is built over `tables` and over the page array `setup_aux` was
/// given, which the perf core keeps until after `free_aux` returns
/// (`__rb_free_aux()` calls `rb->free_aux(rb->aux_priv)` before it frees
/// the pages and `rb->aux_pages`).
pub(crate) struct PaxBuf {
    /// Declared first: dropped before the tables it points into.
    pub(crate) pt: PtBuffer<'static>,
    _tables: TablePages,
}

/// `pmu->setup_aux`: the ToPA tables over `nr_pages` AUX pages (or the
/// single-range output of a 1-page snapshot buffer), in overwrite
/// (snapshot) mode if `overwrite`. NULL on failure, as
/// `pt_buffer_setup_aux()`; the perf core then fails the AUX mmap.
///
/// # Safety
/// Called by the perf core: `pages` holds `nr_pages` page addresses that
/// stay valid until `free_aux` of the result returns.
pub(crate) unsafe extern "C" fn setup_aux(
    _event: *mut bindings::perf_event,
    pages: *mut *mut c_void,
    nr_pages: c_int,
    overwrite: bool,
) -> *mut c_void {
    // SAFETY: the perf core's page array (this function's `# Safety`).
    match unsafe { build(pages, nr_pages, overwrite) } {
        Ok(buf) => KBox::into_raw(buf).cast(),
        Err(e) => {
            pr_warn!("setup_aux of {} pages: {:?}\n", nr_pages, e);
            ptr::null_mut()
        }
    }
}

/// Builds the buffer for `setup_aux`.
///
/// # Safety
/// As `setup_aux`.
unsafe fn build(pages: *mut *mut c_void, nr_pages: c_int, overwrite: bool) -> Result<KBox<PaxBuf>> {
    let nr = usize::try_from(nr_pages).map_err(|_| EINVAL)?;
    if pages.is_null() || !nr.is_power_of_two() {
        return Err(EINVAL);
    }
    // SAFETY: `nr_pages` page addresses, valid until free_aux returns
    // (this function's `# Safety`), which outlives the PaxBuf.
    let page_list: &'static [*mut u8] = unsafe { core::slice::from_raw_parts(pages.cast(), nr) };
    let tables = TablePages::new(tables_for_pages(nr))?;
    // SAFETY: `tables.nr` zeroed pages (all-zero tables are valid ones),
    // owned by the PaxBuf, which drops the PtBuffer first.
    let table_list: &'static mut [TopaTable] =
        unsafe { core::slice::from_raw_parts_mut(tables.pages.as_ptr(), tables.nr) };
    // SAFETY: the AUX pages are the buffer's for as long as it lives (see
    // above) and only the tracer holding its transaction writes them.
    let pt = unsafe { PtBuffer::new(table_list, page_list, overwrite, &KernelPhys) }
        .map_err(|e| Error::from_errno(e.errno()))?;
    // INVARIANT: `pt` over `tables` and the core's page array.
    Ok(KBox::new(
        PaxBuf {
            pt,
            _tables: tables,
        },
        flags::GFP_KERNEL,
    )?)
}

/// `pmu->free_aux`: the perf core frees a buffer after the last AUX
/// transaction on it ended (`aux_refcount`).
///
/// # Safety
/// Called by the perf core with what `setup_aux` returned, once.
pub(crate) unsafe extern "C" fn free_aux(aux: *mut c_void) {
    if aux.is_null() {
        return;
    }
    // SAFETY: `setup_aux`'s `KBox::into_raw`, given back once.
    let buf = unsafe { KBox::from_raw(aux.cast::<PaxBuf>()) };
    if buf.pt.is_held() {
        // The kernel never does this; a buffer a CPU still traces into must
        // not be freed under it.
        crate::warn::warn("free_aux of a buffer a transaction holds; leaking it");
        core::mem::forget(buf);
    }
}
