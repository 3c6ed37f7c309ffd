// SPDX-License-Identifier: MIT OR Apache-2.0
//! A direct run's view of the write window: the stream's direct encoder
//! ([`PacketStream::feed_direct`](crate::soft_pt::stream::PacketStream::feed_direct))
//! writes the events a program makes every few instructions straight into
//! it, each committed at its end.

use crate::soft_pt::stream::{DIRECT_EVENT_MAX, DirectOutput};
use crate::sync::barrier;

use super::output::{Output, WindowMark};
use super::{Hooks, SoftTracer, UNIT_CAP};

// A direct run's events fit where `direct_ready` lets it write.
const _: () = assert!(DIRECT_EVENT_MAX <= UNIT_CAP);

/// A write's [`Output`] as a direct run's: its window and mark, copied out
/// for the run and handed back at its end ([`finish`](Self::finish)), so
/// that they live in registers while the run writes through raw pointers.
///
/// # Invariants
/// The free part of the window the output held when the run began starts
/// at `at` and ends `UNIT_CAP` bytes or more past `limit`: while
/// `at < limit`, more than `UNIT_CAP` bytes are free at `at`.
pub(super) struct Direct<'t, 'p, K: Hooks> {
    tracer: &'t SoftTracer<'p, K>,
    /// Where the window's free space starts.
    at: *mut u8,
    /// Where the run ends: `UNIT_CAP` bytes before the window's end, or
    /// earlier where a PSB+ is due (`count_packets`), or where the event a
    /// PMI came into began (`commit`).
    limit: *mut u8,
    /// The mark the run's writes commit against (see [`SoftTracer::commit`]).
    mark: WindowMark,
    /// Where in the address space `PacketByteCnt` would read 0: the count
    /// is the distance from here to `at` (the run's bytes move both alike).
    psb_origin: u64,
}

impl<'t, 'p, K: Hooks> Direct<'t, 'p, K> {
    /// The window of `out`, which is [`direct_ready`](Output::direct_ready).
    #[inline(always)]
    pub(super) fn new(out: &Output<'t, 'p, K>) -> Self {
        // INVARIANT: `room > UNIT_CAP` (`direct_ready`), so `limit` lies
        // after `window`, inside the window.
        Direct {
            tracer: out.tracer,
            at: out.window,
            limit: out
                .window
                .wrapping_add((out.room - UNIT_CAP as u64) as usize),
            mark: out.mark,
            psb_origin: 0,
        }
    }

    /// Hands the window back to `out`, moved past what the run committed,
    /// and counts those bytes as written (with `HOOKS`, each commit counted
    /// its own for the tap).
    #[inline(always)]
    pub(super) fn finish(self, out: &mut Output<'t, 'p, K>) {
        let used = self.at as usize - out.window as usize;
        out.window = self.at;
        out.room -= used as u64;
        out.mark = self.mark;
        if !K::ANY {
            let written = &self.tracer.written;
            written.store(written.load() + used as u64);
        }
    }
}

impl<K: Hooks> DirectOutput for Direct<'_, '_, K> {
    #[inline(always)]
    fn window(&mut self) -> *mut u8 {
        // The room is there: `at < limit` when the run begins, and `full`
        // ends it after the commit that reaches `limit`. A PMI since the
        // last event leaves the window where it was: the bytes go there,
        // and the commit resolves them as it does those of an event the PMI
        // came into (the protocol's test puts a PMI at every point of one),
        // then ends the run.
        self.at
    }

    #[inline(always)]
    fn count_packets(&mut self, packet_bytes: u64, psb_period: u64) {
        self.psb_origin = (self.at as u64).wrapping_sub(packet_bytes);
        let room = self.limit as usize - self.at as usize;
        let to_psb = psb_period - packet_bytes;
        // INVARIANT: `limit` only comes nearer.
        self.limit = self
            .at
            .wrapping_add(usize::try_from(to_psb).map_or(room, |b| b.min(room)));
    }

    #[inline(always)]
    fn packet_bytes(&self) -> u64 {
        (self.at as u64).wrapping_sub(self.psb_origin)
    }

    #[inline(always)]
    fn full(&self) -> bool {
        self.at >= self.limit
    }

    #[inline(always)]
    fn bound_branches(&mut self, end: usize) {
        // Pairs with `next_generation`'s clearing: a PMI after this store
        // clears the bound, one before it moved the generation, which the
        // caller's next load of it (after the barrier) sees.
        self.tracer.branch_bound.store(end as u64);
        barrier();
    }

    #[inline(always)]
    fn go_on(&mut self) -> bool {
        self.tracer.generation.load() == self.mark.generation
    }

    #[inline(always)]
    fn branch_bound(&self) -> usize {
        // Pairs with the stores above and in `next_generation`.
        self.tracer.branch_bound.load() as usize
    }

    #[inline(always)]
    fn packet_written(&mut self) {
        self.tracer.hooks.interrupt();
    }

    #[inline(always)]
    fn commit(&mut self, n: usize) -> bool {
        let limit = &mut self.limit;
        let at = self.at;
        // INVARIANT: `limit` only comes nearer. A PMI came since the mark:
        // this event is the run's last (the window is the PMI's to judge,
        // and the general path takes a new one).
        if !self.tracer.commit_at(self.mark, n, || *limit = at) {
            return false;
        }
        if K::ANY {
            // SAFETY: the `n` bytes at `at` were just written by this run,
            // in the window, which nothing else writes meanwhile.
            let bytes = unsafe { core::slice::from_raw_parts(at.cast_const(), n) };
            self.tracer.written_piece(bytes);
            self.tracer.hooks.interrupt();
        }
        self.at = self.at.wrapping_add(n);
        self.mark.mask_ptrs += (n as u64) << 32;
        self.tracer.set_packet_bytes(self.packet_bytes());
        true
    }

    #[inline(always)]
    fn clock(&mut self, tsc: u64) {
        // The stream's clock moves with it; this is the tracer's, which a
        // stream takes after a PMI's write (see `trace_run`).
        self.tracer.clock.store(tsc);
    }
}
