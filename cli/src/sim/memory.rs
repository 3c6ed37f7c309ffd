// SPDX-License-Identifier: MIT OR Apache-2.0
//! The memory one simulated CPU's perf buffer lives in, allocated as the
//! kernel would: a user page, data pages, and AUX pages in the largest
//! naturally aligned blocks (Linux's `rb_alloc_aux` prefers high orders,
//! up to 2 MiB here, so the ToPA tables stay short).

use std::alloc::{Layout, alloc_zeroed, dealloc};

use perfaux::abi::{PAGE_SIZE, PerfEventMmapPage};

/// One zeroed allocation, aligned to `align`.
struct Block {
    ptr: *mut u8,
    layout: Layout,
}

impl Block {
    fn new(len: usize, align: usize) -> Result<Block, String> {
        let layout = Layout::from_size_align(len, align)
            .map_err(|_| format!("cannot lay out {len} bytes aligned to {align}"))?;
        // SAFETY: `len` is a non-zero multiple of PAGE_SIZE (callers pass
        // whole pages).
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("out of memory allocating {len} bytes"));
        }
        Ok(Block { ptr, layout })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// Pages per AUX block. A snapshot area gets the largest power of two that
/// fits (capped at 2 MiB), as `rb_alloc_aux` hands out when memory is not
/// fragmented: few ToPA regions, no markers needed. A writable area gets
/// single pages, as `rb_alloc_aux` falls back to on fragmented memory: the
/// PT driver places STOP/INT on region boundaries and, for a head that is
/// not page aligned, one region early (`pt_buffer_reset_markers`), so
/// half-buffer regions would stop the trace (TRUNCATED) every other
/// transaction even with a consumer that keeps up; page regions cost at
/// most a page.
pub fn block_pages(aux_pages: usize, overwrite: bool) -> usize {
    if overwrite {
        aux_pages.clamp(1, 512)
    } else {
        1
    }
}

/// A CPU's perf buffer memory: user page, data pages, AUX pages.
pub struct CpuMemory {
    user: Block,
    _data: Block,
    data_pages: Vec<*mut u8>,
    _aux: Vec<Block>,
    aux_pages: Vec<*mut u8>,
}

impl CpuMemory {
    /// `data_pages` data pages (one contiguous block, order 0 pages) and
    /// `aux_pages` AUX pages in blocks of [`block_pages`]; both counts must
    /// be powers of two.
    pub fn new(data_pages: usize, aux_pages: usize, overwrite: bool) -> Result<CpuMemory, String> {
        let user = Block::new(PAGE_SIZE, PAGE_SIZE)?;
        let data = Block::new(data_pages * PAGE_SIZE, PAGE_SIZE)?;
        let data_ptrs = (0..data_pages)
            .map(|i| data.ptr.wrapping_add(i * PAGE_SIZE))
            .collect();
        let per_block = block_pages(aux_pages, overwrite);
        let blocks = (0..aux_pages / per_block)
            .map(|_| Block::new(per_block * PAGE_SIZE, per_block * PAGE_SIZE))
            .collect::<Result<Vec<_>, _>>()?;
        let aux_ptrs = blocks
            .iter()
            .flat_map(|b| (0..per_block).map(move |i| b.ptr.wrapping_add(i * PAGE_SIZE)))
            .collect();
        Ok(CpuMemory {
            user,
            _data: data,
            data_pages: data_ptrs,
            _aux: blocks,
            aux_pages: aux_ptrs,
        })
    }

    /// The user page (`perf_event_mmap_page`).
    pub fn user_page(&self) -> *mut PerfEventMmapPage {
        self.user.ptr.cast()
    }

    /// The data pages.
    pub fn data_pages(&self) -> &[*mut u8] {
        &self.data_pages
    }

    /// The AUX pages, one pointer per 4 KiB page.
    pub fn aux_pages(&self) -> &[*mut u8] {
        &self.aux_pages
    }
}
