// SPDX-License-Identifier: GPL-2.0
//! One AUX buffer's PT state (what `setup_aux` returns, `rb->aux_priv`):
//! the perfaux crate's `PtBuffer` and the ToPA table pages it is built in,
//! as Intel PT's `struct pt_buffer` (arch/x86/events/intel/pt.c).

use core::ptr::NonNull;

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

impl PaxBuf {
    /// The ToPA tables over the AUX `pages` (or the single-range output of
    /// a 1-page snapshot buffer), in overwrite (snapshot) mode if
    /// `overwrite`: `pt_buffer_setup_aux()`. `pages` stay valid until the
    /// buffer is freed (the `PmuOps::setup_aux` contract).
    pub(crate) fn new(pages: &[*mut u8], overwrite: bool) -> Result<KBox<PaxBuf>> {
        let nr = pages.len();
        if !nr.is_power_of_two() {
            return Err(EINVAL);
        }
        // SAFETY: the perf core keeps the page array until after free_aux
        // returns (the `PmuOps::setup_aux` contract), which outlives the
        // PaxBuf and so the PtBuffer in it.
        let page_list: &'static [*mut u8] =
            unsafe { core::slice::from_raw_parts(pages.as_ptr(), nr) };
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

    /// `pt_buffer_free_aux()`: the perf core frees a buffer after the last
    /// AUX transaction on it ended (`aux_refcount`). `EBUSY` if one still
    /// holds it: the buffer is leaked.
    pub(crate) fn free(buf: KBox<PaxBuf>) -> Result {
        if buf.pt.is_held() {
            // The kernel never does this; a buffer a CPU still traces into
            // must not be freed under it.
            crate::warn::warn("free_aux of a buffer a transaction holds; leaking it");
            core::mem::forget(buf);
            return Err(EBUSY);
        }
        Ok(())
    }
}
