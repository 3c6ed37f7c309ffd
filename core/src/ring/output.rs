// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`OutputHandle`]: reserving, writing and publishing one record
//! (`perf_output_begin` / `copy` / `skip` / `end`, `kernel/events/ring_buffer.c`).
//!
//! Memory ordering with the consumer (the kernel's A/B/C/D, in
//! `perf_output_put_handle` and the `data_head` comment of `<linux/perf_event.h>`):
//!
//! ```text
//!   writer (this module)              consumer (Consumer)
//!   if (LOAD data_tail) {      (A)    LOAD data_head            (C: Acquire)
//!       STORE record bytes            LOAD record bytes
//!       STORE data_head        (B)    STORE data_tail           (D: fence + Release)
//!   }
//! ```
//! A: the `data_tail` load is Acquire (the kernel relies on a control
//! dependency; Acquire is stronger). B: the `data_head` store is Release.

use core::marker::PhantomData;

use super::buffer::Ring;
use super::hook::{Mutation, NestHook, Point};
use super::pages::Chunks;
use super::sample_id::{OutputEvent, SampleId};
use super::sink::OutputSink;
use crate::abi::{MAX_RECORD_SIZE, PerfEventHeader, record_type};
use crate::error::{Error, Result};
use crate::sync::{Ordering, barrier, copy_to};

/// Size of a `PERF_RECORD_LOST` before its sample_id trailer.
const LOST_RECORD_SIZE: usize = 24;

/// An open reservation in a [`Ring`]: `begin` made it, `copy`/`skip`/`put_*`
/// fill it, and `end` (or dropping the handle) publishes it.
///
/// Writes never go past the reservation: what does not fit is reported as
/// not written, where Linux would silently overrun into the next record.
#[must_use = "a record is published when its handle ends"]
pub struct OutputHandle<'r, 'a, H: NestHook> {
    ring: &'r Ring<'a, H>,
    /// The ring's chunks, known to be there (`begin` checked).
    chunks: Chunks<'r, 'a>,
    /// Chunk index of `addr` (`handle->page`).
    chunk: usize,
    /// Where the next byte goes.
    addr: *mut u8,
    /// Bytes left in the current chunk (`handle->size`).
    left_in_chunk: usize,
    /// Bytes of the reservation not yet written or skipped.
    left: usize,
    /// `rb->wakeup` when the handle was opened (`handle->wakeup`).
    wakeup: u64,
    /// A handle belongs to the context that opened it.
    _not_send: PhantomData<*mut u8>,
}

impl<'a, H: NestHook> Ring<'a, H> {
    /// Reserves `size` bytes for one record (`perf_output_begin`), in the
    /// ring's direction. `source` describes the output event, for the
    /// `PERF_RECORD_LOST` that goes first when records were dropped since the
    /// last one (its size is added to the reservation, and `source`'s
    /// sample_id is refreshed as `__perf_output_begin` does).
    ///
    /// Errors:
    /// - `ENOSPC` when the ring is paused (counting a lost record unless the
    ///   ring has no data pages), or when the consumer's `data_tail` leaves
    ///   less than `size` bytes free in writable mode (counting a lost record;
    ///   a record of the whole data size never fits: `CIRC_SPACE` is at most
    ///   size - 1);
    /// - `EINVAL` for `size` 0 or above 65535 (nothing counted).
    ///
    /// May be called from any context of the ring's CPU, nested.
    #[inline(always)]
    pub fn begin<'r, S: OutputEvent>(
        &'r self,
        size: usize,
        source: &mut S,
    ) -> Result<OutputHandle<'r, 'a, H>> {
        self.begin_sample(size, source, |_| {})
    }

    /// [`begin`](Self::begin) for a sample: when a `PERF_RECORD_LOST` goes
    /// first, `refresh` gets the sample_id trailer it carried, which the
    /// sample carries too (`__perf_output_begin` re-runs
    /// `perf_event_header__init_id` on the sample's `perf_sample_data`, so
    /// the sample's task, time, ids and CPU are those of the LOST record).
    /// `refresh` runs only then, before the handle is returned, and not
    /// without `sample_id_all` (there is no trailer).
    #[inline(always)]
    pub fn begin_sample<'r, S: OutputEvent>(
        &'r self,
        size: usize,
        source: &mut S,
        refresh: impl FnOnce(&SampleId),
    ) -> Result<OutputHandle<'r, 'a, H>> {
        if size == 0 || size > MAX_RECORD_SIZE {
            return Err(Error::Invalid);
        }
        // Relaxed: a plain flag (see `pause`).
        if self.paused.load(Ordering::Relaxed) {
            if self.data_size() != 0 {
                // Local (same-CPU) RMW: a nested writer may count too.
                self.lost.fetch_add(1);
            }
            return Err(Error::NoSpace);
        }
        // SAFETY: the ring is not paused (checked above), and a ring without
        // chunks is paused forever (type invariant): the chunks are there.
        // The handle keeps the proof; its writes index them unchecked.
        let chunks = unsafe { self.pages.chunks_unchecked() };

        // Local load; the count itself is taken with `swap` when the LOST
        // record is written (a nested failure in between is included).
        let have_lost = self.lost.load() != 0;
        let lost_size = if have_lost {
            LOST_RECORD_SIZE + source.id_header_size()
        } else {
            0
        };
        let size = (size + lost_size) as u64;

        // perf_output_get_handle: raise the nest count; only the outermost
        // writer will publish.
        // Plain same-CPU load and store (the kernel's volatile `nest++`): a
        // nested writer restores `nest` before we resume, so no RMW is needed.
        self.nest.store(self.nest.load().wrapping_add(1));
        // Local load: `end` compares it with the generation then.
        let wakeup = self.wakeup.load();
        barrier();
        self.hook.at(self, Point::BeginNested);

        // `perf_output_begin` picks `__perf_output_begin`'s forward or
        // backward instance once; each is compiled without the other's
        // arithmetic.
        let reserved = if self.backward {
            self.reserve::<true>(size)
        } else {
            self.reserve::<false>(size)
        };
        let Some((start, written)) = reserved else {
            return Err(self.fail(wakeup));
        };
        self.hook.at(self, Point::BeginReserved);

        // Local load and RMW: only this CPU's writers move the generation;
        // the outermost `end` compares it with its snapshot.
        if written.wrapping_sub(self.wakeup.load()) > self.watermark {
            self.wakeup.fetch_add(self.watermark);
        }

        let (chunk, addr, left_in_chunk) = chunks.locate(start);
        let mut handle = OutputHandle {
            ring: self,
            chunks,
            chunk,
            addr,
            left_in_chunk,
            left: size as usize,
            wakeup,
            _not_send: PhantomData,
        };
        if have_lost {
            // By value, out of line: the handle's address never escapes
            // the hot path, so it can stay in registers there.
            handle = handle.with_lost(source, refresh);
            self.hook.at(self, Point::BeginLostWritten);
        }
        Ok(handle)
    }

    /// Moves `head` on by `size` bytes in the ring's direction, `BACKWARD`
    /// known at compile time (Linux's `__perf_output_begin(..., backward)`,
    /// instantiated as `perf_output_begin_forward` and `_backward`): the
    /// record's start and the byte count written with it (the negated head
    /// when backward), or `None` when, in writable mode, the consumer's
    /// `data_tail` leaves less than `size` bytes free.
    #[inline(always)]
    fn reserve<const BACKWARD: bool>(&self, size: u64) -> Option<(u64, u64)> {
        let mask = self.data_size() - 1;
        let (offset, head) = loop {
            // A: Acquire pairs with the consumer's Release store of
            // data_tail (D): the bytes it freed are no longer read.
            let tail = self.data_tail_word().load(Ordering::Acquire);
            self.hook.at(self, Point::BeginTailLoaded);
            // Local load; the compare-and-swap below pairs with the
            // nested writers' own compare-and-swaps on this CPU.
            let offset = self.head.load();
            self.hook.at(self, Point::BeginHeadLoaded);
            if !self.overwrite {
                // CIRC_SPACE: at most data_size - 1 bytes outstanding.
                let space = if BACKWARD {
                    offset.wrapping_sub(tail.wrapping_add(1)) & mask
                } else {
                    tail.wrapping_sub(offset.wrapping_add(1)) & mask
                };
                if space < size {
                    return None;
                }
            }
            let head = if BACKWARD {
                offset.wrapping_sub(size)
            } else {
                offset.wrapping_add(size)
            };
            // A nested writer that reserved since our load makes this fail: retry.
            if self.head.compare_exchange(offset, head).is_ok() {
                break (offset, head);
            }
        };
        // `__perf_output_begin`: "We rely on the implied barrier() by
        // local_cmpxchg() to ensure none of the data stores below can be
        // lifted up by the compiler." The x86 asm is one; the portable
        // fallback is not, so the barrier is explicit.
        barrier();
        // Backward: the record starts at the new head, and the byte count
        // written so far is the negated head.
        Some(if BACKWARD {
            (head, head.wrapping_neg())
        } else {
            (offset, head)
        })
    }

    /// The *fail* path of `begin`: count the record lost and leave as `end` does.
    #[cold]
    fn fail(&self, wakeup: u64) -> Error {
        // Local RMW, as in the paused path.
        self.lost.fetch_add(1);
        self.put_handle(wakeup);
        Error::NoSpace
    }

    /// `perf_output_put_handle`: the outermost writer publishes
    /// `head` as `data_head`, re-checking for a nested writer that reserved
    /// meanwhile; inner writers only lower `nest`.
    #[inline(always)]
    fn put_handle(&self, handle_wakeup: u64) {
        // Plain same-CPU accesses to `nest` (READ_ONCE/WRITE_ONCE): ordered
        // against `head` and `data_head` by the compiler fences below.
        let nest = self.nest.load();
        if nest > 1 {
            self.nest.store(nest - 1);
            self.hook.at(self, Point::EndInner);
            return;
        }
        loop {
            // The head load must follow the nest increment (compiler order):
            // an earlier load could miss a nested writer's reservation.
            barrier();
            // Local load: every reservation on this CPU (ours and nested
            // ones) is in it.
            let head = self.head.load();
            self.hook.at(self, Point::EndHeadLoaded);
            if H::MUTATION == Mutation::NestDropBeforePublish {
                self.nest.store(0);
                self.hook.at(self, Point::EndNestDropped);
            }
            // B: Release pairs with the consumer's Acquire load of data_head
            // (C): the record bytes are visible before the new head.
            self.data_head_word().store(head, Ordering::Release);
            self.hook.at(self, Point::EndPublished);
            // Publish before dropping nest: otherwise a nested writer could
            // publish a newer head that this store then takes back.
            barrier();
            if H::MUTATION != Mutation::NestDropBeforePublish {
                self.nest.store(0);
                self.hook.at(self, Point::EndNestDropped);
            }
            // Drop nest before re-reading head, or the last nested update
            // could be missed.
            barrier();
            if H::MUTATION == Mutation::NoRecheck || head == self.head.load() {
                break;
            }
            // A writer interrupted us after our head load and did not
            // publish (it saw nest > 1): publish again.
            self.nest.store(1);
        }
        // Local load: compared with this writer's snapshot from `begin`.
        if handle_wakeup != self.wakeup.load() {
            if let Some(w) = self.waker {
                w.wakeup();
            }
        }
    }
}

impl<H: NestHook> OutputHandle<'_, '_, H> {
    /// Bytes of the reservation not yet written or skipped.
    #[inline(always)]
    pub fn remaining(&self) -> usize {
        self.left
    }

    /// Copies `buf` into the record (`perf_output_copy`), across chunk
    /// boundaries and the end of the ring. Returns how many bytes were **not**
    /// copied: 0, or what would have gone past the reservation.
    #[inline(always)]
    pub fn copy(&mut self, buf: &[u8]) -> usize {
        let (now, rest) = buf.split_at(buf.len().min(self.left));
        self.walk(now.len(), |dst, from, n| {
            // `walk` hands out pieces inside `0..now.len()`: `get` never
            // misses, and leaves no panic path in the writer.
            if let Some(src) = now.get(from..from + n) {
                // SAFETY: `dst` is valid for `n <= left_in_chunk` bytes of the
                // reserved record (walk's contract); `src` is caller memory,
                // not ring memory, so they do not overlap.
                unsafe { copy_to(dst, src) }
            }
        });
        rest.len()
    }

    /// Skips `len` bytes of the record, leaving them as they are
    /// (`perf_output_skip`). Returns how many bytes were **not** skipped.
    #[inline]
    pub fn skip(&mut self, len: usize) -> usize {
        let n = len.min(self.left);
        self.walk(n, |_, _, _| {});
        len - n
    }

    /// Copies a `u64` (`perf_output_put`). Returns the bytes not copied.
    #[inline(always)]
    pub fn put_u64(&mut self, v: u64) -> usize {
        self.copy(&v.to_ne_bytes())
    }

    /// Copies a record header. Returns the bytes not copied.
    #[inline(always)]
    pub fn put_header(&mut self, h: PerfEventHeader) -> usize {
        self.copy(&h.to_ne_bytes())
    }

    /// Copies a `sample_id` trailer (`perf_event__output_id_sample`).
    /// Returns the bytes not copied.
    #[inline]
    pub fn put_sample_id(&mut self, id: &SampleId) -> usize {
        let mut buf = [0u8; super::sample_id::MAX_SAMPLE_ID_SIZE];
        let n = id.encode(&mut buf);
        let (bytes, _) = buf.split_at(n.min(buf.len()));
        self.copy(bytes)
    }

    /// Counts a sample toward `wakeup_events` (Linux does it in
    /// `perf_output_sample` when the event has no `watermark`): every
    /// `wakeup_events` samples the consumer is woken at `end`. 0 disables.
    pub fn count_sample(&mut self, wakeup_events: u32) {
        if wakeup_events == 0 {
            return;
        }
        // Local RMWs: only this CPU's writers count samples.
        let events = self.ring.events.fetch_add(1).wrapping_add(1);
        if events >= u64::from(wakeup_events) {
            self.ring
                .events
                .fetch_add(u64::from(wakeup_events).wrapping_neg());
            self.ring.wakeup.fetch_add(1);
        }
    }

    /// Publishes the record (`perf_output_end`). Dropping the handle does the same.
    pub fn end(self) {}

    /// Walks `n <= left` bytes of the reservation, chunk piece by chunk
    /// piece, calling `f(dst, offset_in_walk, piece_len)` for each.
    #[inline(always)]
    fn walk(&mut self, n: usize, mut f: impl FnMut(*mut u8, usize, usize)) {
        // Fast path: the bytes fit in the current chunk with room to spare.
        if n < self.left_in_chunk {
            self.ring.hook.at(self.ring, Point::CopyPiece);
            f(self.addr, 0, n);
            self.addr = self.addr.wrapping_add(n);
            self.left_in_chunk -= n;
            self.left -= n;
            return;
        }
        self.walk_chunks(n, f);
    }

    /// The general walk, crossing chunks (and the ring's end).
    #[inline(always)]
    fn walk_chunks(&mut self, n: usize, mut f: impl FnMut(*mut u8, usize, usize)) {
        let mut done = 0;
        while done < n {
            self.ring.hook.at(self.ring, Point::CopyPiece);
            let piece = self.left_in_chunk.min(n - done);
            f(self.addr, done, piece);
            done += piece;
            self.left_in_chunk -= piece;
            // `wrapping_add` keeps this safe; the pointer stays within the
            // chunk or one past its end, and is replaced below in that case.
            self.addr = self.addr.wrapping_add(piece);
            if self.left_in_chunk == 0 {
                self.chunk = self.chunk.wrapping_add(1); // masked by `chunk()`
                self.addr = self.chunks.chunk(self.chunk);
                self.left_in_chunk = self.chunks.chunk_size();
            }
        }
        self.left -= n;
    }

    /// The handle after the `PERF_RECORD_LOST` that precedes the record,
    /// `refresh` given the sample_id trailer it carried.
    #[cold]
    #[inline(never)]
    fn with_lost<S: OutputEvent>(
        mut self,
        source: &mut S,
        refresh: impl FnOnce(&SampleId),
    ) -> Self {
        if let Some(id) = self.write_lost(source) {
            refresh(&id);
        }
        self
    }

    /// Writes the `PERF_RECORD_LOST` that precedes the record (`__perf_output_begin`'s
    /// `lost_event`).
    /// Returns the sample_id trailer it wrote, if any.
    #[cold]
    fn write_lost<S: OutputEvent>(&mut self, source: &mut S) -> Option<SampleId> {
        let trailer = source.sample_id();
        let trailer_size = trailer.map_or(0, |t| t.size());
        let header = PerfEventHeader {
            type_: record_type::LOST,
            misc: 0,
            size: (LOST_RECORD_SIZE + trailer_size) as u16,
        };
        let _ = self.put_header(header);
        let _ = self.put_u64(source.id());
        // Local swap (`local_xchg`): takes the count, including failures of
        // writers that interrupted us since `begin` looked at it.
        let _ = self.put_u64(self.ring.lost.swap(0));
        if let Some(t) = trailer {
            let _ = self.put_sample_id(&t);
        }
        trailer
    }
}

impl<H: NestHook> OutputSink for OutputHandle<'_, '_, H> {
    #[inline(always)]
    fn copy(&mut self, bytes: &[u8]) -> usize {
        OutputHandle::copy(self, bytes)
    }
}

impl<H: NestHook> Drop for OutputHandle<'_, '_, H> {
    #[inline(always)]
    fn drop(&mut self) {
        self.ring.put_handle(self.wakeup);
    }
}
