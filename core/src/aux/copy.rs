// SPDX-License-Identifier: MIT OR Apache-2.0
//! `copy_aux`: AUX bytes into an output sink (`perf_output_copy_aux`,
//! `kernel/events/ring_buffer.c`).

use super::handle::AuxHandle;
use crate::abi::PAGE_SIZE;
use crate::error::{Error, Result};
use crate::ring::OutputSink;

/// Copies the AUX bytes `[from, to)` of `handle`'s area, circularly, into
/// `sink`; returns how many bytes were copied.
///
/// Positions are masked with the area size (in 64 bits, not the `int`
/// arithmetic of Linux's `perf_aux_size`). `from > to` wraps through the end of the area;
/// **`from == to`
/// copies the whole area**, oldest byte (`from`) first, exactly as Linux
/// does — callers must not ask for zero bytes this way. Each call of the
/// sink takes one AUX page, or a run of pages that follow each other in
/// memory (Linux copies page by page; the bytes are the same). `EFAULT` if
/// the sink takes fewer bytes than given (Linux's `perf_output_copy`
/// remainder).
///
/// Called from `snapshot_aux`, in PMI context: the tracer must not write the
/// range during the copy (the PMU stops it first, as `pt_event_snapshot_aux` does).
#[inline]
pub fn copy_aux<S: OutputSink + ?Sized>(
    handle: &AuxHandle<'_, '_>,
    sink: &mut S,
    from: u64,
    to: u64,
) -> Result<u64> {
    // SAFETY: an area's pages are valid for reads for its life (an
    // `AuxArea` invariant), a power of two of them.
    unsafe { copy_aux_pages(handle.area().pages(), sink, from, to) }
}

/// [`copy_aux`] over an AUX buffer given as its pages (one pointer per 4 KiB
/// page, a power of two of them, in buffer order): for drivers whose AUX
/// buffer is not an [`AuxArea`](super::AuxArea), such as the kernel's in a
/// module. `EINVAL` if the page count is not a power of two.
///
/// # Safety
/// Every page must be valid for reads of 4096 bytes during the call, and
/// the tracer must not write the range `[from, to)` meanwhile.
#[inline]
pub unsafe fn copy_aux_pages<S: OutputSink + ?Sized>(
    pages: &[*mut u8],
    sink: &mut S,
    from: u64,
    to: u64,
) -> Result<u64> {
    if !pages.len().is_power_of_two() {
        return Err(Error::Invalid);
    }
    let mask = (pages.len() * PAGE_SIZE) as u64 - 1;
    let page = PAGE_SIZE as u64;
    let (mut from, to) = (from & mask, to & mask);
    let mut len = 0;
    loop {
        // What is left before `to`, or before the area's end when the copy
        // wraps (or is the whole area).
        let limit = if to > from {
            to - from
        } else {
            mask + 1 - from
        };
        let index = (from / page) as usize;
        let Some(&base) = pages.get(index) else {
            // `from <= mask` keeps the index inside the area.
            crate::warn_on_once!(true, "AUX copy from a page past the area");
            return Err(Error::Fault);
        };
        // To the page's end, and on over the pages that follow it in memory
        // (a high-order allocation's): one piece where Linux copies page by
        // page, the same bytes in the same order.
        let mut chunk = (page - from % page).min(limit);
        let mut next = index + 1;
        while chunk < limit
            && pages.get(next) == Some(&base.wrapping_add((next - index) * PAGE_SIZE))
        {
            chunk = (chunk + page).min(limit);
            next += 1;
        }
        let src = base.wrapping_add((from % page) as usize);
        // SAFETY: `src..src + chunk` lies in AUX pages that follow each other
        // in memory (`pages[index..next]`, checked above), valid for reads
        // (this function's contract); the tracer does not write them during
        // the copy.
        let bytes = unsafe { core::slice::from_raw_parts(src.cast_const(), chunk as usize) };
        if sink.copy(bytes) != 0 {
            return Err(Error::Fault);
        }
        len += chunk;
        from = (from + chunk) & mask;
        if from == to {
            return Ok(len);
        }
    }
}
/// `size` zero bytes into `sink`, in pieces of at most 512; returns how
/// many it took (fewer when it stops taking them). PMI-safe.
///
/// What a sample's AUX block holds past what the PMU copied
/// (`sample::write`), and all of it when the PMU has nothing to copy: a
/// kernel module's `snapshot_aux` with no open transaction. A user gets there:
/// `perf_mmap_close()` of the AUX area stops the event and frees the
/// buffer some time later, and a sampler that overflows in between still
/// asks for `perf_aux_size()` bytes. Intel PT `WARN`s
/// (`pt_event_snapshot_aux`), and `perf_aux_sample_output()` `WARN`s at a
/// short copy and leaves the rest of the record unwritten; both perfaux
/// modules write zeros instead, so the sample carries an AUX block with no
/// trace in it and the kernel stays quiet (a deviation
/// `docs/kernel-modules.md` states).
pub fn copy_zeros<S: OutputSink + ?Sized>(sink: &mut S, size: u64) -> u64 {
    static ZEROS: [u8; 512] = [0; 512];
    let mut done = 0u64;
    while done < size {
        let n = (size - done).min(ZEROS.len() as u64) as usize;
        let piece = ZEROS.get(..n).unwrap_or_default();
        if sink.copy(piece) != 0 {
            break;
        }
        done += n as u64;
    }
    done
}
