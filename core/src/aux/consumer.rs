// SPDX-License-Identifier: MIT OR Apache-2.0
//! The consumer side of a writable AUX area: what `perf record` does with
//! the AUX mapping (`auxtrace_mmap__read_head`, `__auxtrace_mmap__read`,
//! `auxtrace_mmap__write_tail` in `tools/perf/util/auxtrace.c`). It sees
//! only the user page and the AUX pages.
//!
//! The two words of the user page and who orders what around them:
//!
//! ```text
//!   engine (AuxHandle, the tracer's CPU)      consumer (AuxConsumer)
//!
//!   A: load aux_tail (Acquire)    <-------    D: fence; store aux_tail (Release)
//!      hand [head, tail + size)                  (the reads of [tail, D's
//!      to the tracer, which writes it            value) are done before)
//!   B: store aux_head (Release)   ------->    C: load aux_head (Acquire)
//!      (the AUX bytes below it                   read [tail, C's value)
//!      are written before)
//! ```
//!
//! A is `AuxArea::begin`'s load (Linux `perf_aux_output_begin`: the
//! control dependency of `handle->size` on it); B the stores of
//! `AuxHandle::end` and `skip` (`perf_aux_output_end`'s
//! `WRITE_ONCE(rb->user_page->aux_head)` after `smp_wmb()`).

use core::ptr::addr_of_mut;

use super::copy::copy_aux_pages;
use crate::abi::{PAGE_SIZE, PerfEventMmapPage};
use crate::error::{Error, Result};
use crate::ring::OutputSink;
use crate::ring::pages::check_user_page;
use crate::sync::{AtomicU64, Ordering, fence, shared_u64};

/// Reads the data of a writable (not overwrite) AUX area in order:
/// [`refresh`](Self::refresh) loads `aux_head` (C), the reads copy
/// `[aux_tail, aux_head)` out, [`commit`](Self::commit) stores `aux_tail`
/// (D) to give the space back.
///
/// ```no_run
/// # use perfaux::aux::AuxConsumer;
/// # fn demo(mut aux: AuxConsumer<'_>) {
/// let mut trace = [0u8; 65536];
/// aux.refresh();
/// let from = aux.position();
/// let n = aux.read_to_slice(&mut trace);
/// println!("AUX bytes {from:#x}..{:#x}", from + n as u64);
/// aux.commit();
/// # }
/// ```
///
/// # Invariants
/// `pages` is a non-empty power of two of 4 KiB-aligned, non-null pages;
/// `pos <= head` in free-running arithmetic (`head - pos` never exceeds
/// the area size as the engine writes it).
pub struct AuxConsumer<'a> {
    /// The ring's user page: `aux_head` is read, `aux_tail` written here.
    user_page: *mut PerfEventMmapPage,
    /// The AUX pages, one pointer per 4 KiB page, in buffer order.
    pages: &'a [*mut u8],
    /// Free-running position of the next byte to read; `commit` stores it
    /// as `aux_tail`. Only this consumer writes it.
    pos: u64,
    /// The `aux_head` the last `refresh` loaded.
    head: u64,
}

// SAFETY: the consumer holds pointers to caller memory valid for 'a (its
// constructor's contract) and touches the shared words only atomically; it
// can run on any thread (the consumer's CPU).
unsafe impl Send for AuxConsumer<'_> {}

impl<'a> AuxConsumer<'a> {
    /// A consumer of the AUX area whose user page and pages these are,
    /// starting at the current `aux_tail`. `EINVAL` for a null or
    /// misaligned user page, no pages, a count that is not a power of two,
    /// or a null or misaligned page.
    ///
    /// # Safety
    /// The memory must be that of a live [`AuxArea`](super::AuxArea) in
    /// **writable** (not overwrite) mode, valid for `'a`, with no other
    /// consumer: in writable mode the engine never hands
    /// `[aux_tail, aux_head)` to the tracer, which is what makes reading
    /// it sound.
    pub unsafe fn new(user_page: *mut PerfEventMmapPage, pages: &'a [*mut u8]) -> Result<Self> {
        check_user_page(user_page)?;
        let page_ok = |p: &*mut u8| !p.is_null() && (*p as usize) % PAGE_SIZE == 0;
        if !pages.len().is_power_of_two() || !pages.iter().all(page_ok) {
            return Err(Error::Invalid);
        }
        // INVARIANT: the pages were just checked; pos == head.
        let mut c = AuxConsumer {
            user_page,
            pages,
            pos: 0,
            head: 0,
        };
        // Relaxed: only this consumer writes aux_tail.
        c.pos = c.tail_word().load(Ordering::Relaxed);
        c.head = c.pos;
        Ok(c)
    }

    fn head_word(&self) -> &AtomicU64 {
        // SAFETY: within the live user page (the constructor's contract),
        // 8-aligned (checked), accessed only atomically by the engine and
        // by this consumer.
        unsafe { shared_u64(addr_of_mut!((*self.user_page).aux_head)) }
    }

    fn tail_word(&self) -> &AtomicU64 {
        // SAFETY: as for `head_word`.
        unsafe { shared_u64(addr_of_mut!((*self.user_page).aux_tail)) }
    }

    /// The area size in bytes.
    pub fn size(&self) -> u64 {
        (self.pages.len() * PAGE_SIZE) as u64
    }

    /// Loads `aux_head`; returns the bytes published and not yet read.
    pub fn refresh(&mut self) -> u64 {
        // C: Acquire pairs with the engine's Release store of aux_head (B):
        // the AUX bytes below the head are visible.
        let head = self.head_word().load(Ordering::Acquire);
        // INVARIANT: a head behind the read position (an engine's bug) is
        // not taken; one further ahead than the area is clamped in
        // `available`.
        if head.wrapping_sub(self.pos) <= self.size() {
            self.head = head;
        }
        self.available()
    }

    /// Bytes between the read position and the last loaded `aux_head`.
    pub fn available(&self) -> u64 {
        self.head.wrapping_sub(self.pos).min(self.size())
    }

    /// The free-running AUX offset of the next byte to read (what a
    /// `PERF_RECORD_AUXTRACE` record calls its `offset`).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Copies up to `max` of the available bytes into `sink`, oldest first,
    /// at most a page per call of the sink; returns how many. `EFAULT` if
    /// the sink takes fewer than given (nothing is consumed then, though the
    /// sink may hold part of the bytes).
    pub fn read<S: OutputSink + ?Sized>(&mut self, sink: &mut S, max: u64) -> Result<u64> {
        let len = self.available().min(max);
        if len == 0 {
            return Ok(0);
        }
        let from = self.pos;
        // SAFETY: the pages are live for 'a and the engine does not write
        // [aux_tail, aux_head) in writable mode (the constructor's
        // contract); `len` is non-zero, so `from != to` unless it is the
        // whole area, which copy_aux_pages then copies, as wanted.
        let copied = unsafe { copy_aux_pages(self.pages, sink, from, from.wrapping_add(len))? };
        self.pos = self.pos.wrapping_add(copied);
        Ok(copied)
    }

    /// Copies as many available bytes as fit into `out`; returns how many.
    pub fn read_to_slice(&mut self, out: &mut [u8]) -> usize {
        struct Slice<'s> {
            out: &'s mut [u8],
            at: usize,
        }
        impl OutputSink for Slice<'_> {
            fn copy(&mut self, bytes: &[u8]) -> usize {
                let Some(dst) = self.out.get_mut(self.at..self.at + bytes.len()) else {
                    // `max` bounds the bytes the copy hands over.
                    crate::warn_on_once!(true, "AUX read past the caller's slice");
                    return bytes.len();
                };
                dst.copy_from_slice(bytes);
                self.at += bytes.len();
                0
            }
        }
        let max = out.len() as u64;
        let mut sink = Slice { out, at: 0 };
        // The sink takes every byte `read` gives it (at most `max`).
        self.read(&mut sink, max).map_or(0, |n| n as usize)
    }

    /// Marks every byte below the last loaded `aux_head` as read, without
    /// looking at it (commit to give the space back).
    pub fn skip_to_head(&mut self) {
        self.pos = self.head;
    }

    /// Gives the bytes read so far back to the engine (`aux_tail`).
    pub fn commit(&mut self) {
        // D: the AUX loads are complete before the tail store; a full fence
        // as perf's auxtrace_mmap__write_tail (smp_mb()), then Release,
        // which pairs with the engine's Acquire load of aux_tail (A).
        fence(Ordering::SeqCst);
        self.tail_word().store(self.pos, Ordering::Release);
    }
}
