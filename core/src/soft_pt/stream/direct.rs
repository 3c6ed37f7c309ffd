// SPDX-License-Identifier: MIT OR Apache-2.0
//! The packet generator's fast path: a run of the events a program makes
//! every few instructions (conditional branches, jumps, calls, returns,
//! indirect branches, timestamps), written straight into the tracer's
//! output window.
//!
//! [`PacketStream::feed`] makes the same packets for these events (the
//! tests compare the two byte for byte). It goes through a [`PacketSink`]
//! one packet at a time, so that every field of the generator lives in
//! memory: a write through the sink may alias any of them, and the
//! compiler loads and stores them again around each packet. Here the
//! fields every event touches (the TNT bits and the PSB byte count) are
//! held in locals for the whole run and stored back once at its end, and a
//! run of conditional branches reads nothing but its events and, between
//! two of them, the output generation (a PMI's mark).
//!
//! [`PacketSink`]: super::PacketSink

use super::{PacketStream, TraceEvent};
use crate::soft_pt::packet::{
    IpBytes, IpPacket, LONG_TNT_HEADER, LONG_TNT_MAX, SHORT_TNT_MAX, tsc,
};

/// The most bytes one event of a direct run writes: a long TNT (8 bytes)
/// flushed before a TIP with the full IP (9 bytes).
pub(crate) const DIRECT_EVENT_MAX: usize = 17;

/// The output a direct run writes into: the tracer's write window.
pub(crate) trait DirectOutput {
    /// Where the next event's packets go, with room for
    /// [`DIRECT_EVENT_MAX`] bytes there: the run begins with that room, and
    /// ends after a commit that leaves less ([`full`](Self::full)). A PMI
    /// that wrote the output MSRs since the last event is the next
    /// [`commit`](Self::commit)'s to resolve, or the next
    /// [`go_on`](Self::go_on)'s to see.
    fn window(&mut self) -> *mut u8;

    /// Counts the packet bytes the run commits from `packet_bytes`
    /// (`PacketByteCnt` as the run begins, below `psb_period`), and makes
    /// [`full`](Self::full) true once the count reaches `psb_period`: where
    /// the run must end for a PSB+ (`feed`'s). Called once, before the
    /// run's first event.
    fn count_packets(&mut self, packet_bytes: u64, psb_period: u64);

    /// `PacketByteCnt` after the bytes committed so far (see
    /// [`count_packets`](Self::count_packets)).
    fn packet_bytes(&self) -> u64;

    /// After a commit: the window has no room for another event's
    /// [`DIRECT_EVENT_MAX`] bytes, the packet count has reached the PSB
    /// period, or a PMI came into the event (the run ends with it, as it
    /// does when one came into an event that writes nothing). One compare
    /// for all three: the run's bytes move the window and the count alike,
    /// and a PMI's commit moves the window's end.
    fn full(&self) -> bool;

    /// Bounds the run's conditional branches: they go on while their index
    /// in the run is below `end` (see [`branch_bound`](Self::branch_bound)).
    /// A PMI from here on clears the bound; one before it is seen by the
    /// next [`go_on`](Self::go_on) or [`commit`](Self::commit), which
    /// the caller makes before it takes another branch.
    fn bound_branches(&mut self, end: usize);

    /// Whether the run goes on: no PMI wrote the output MSRs since the run
    /// began.
    fn go_on(&mut self) -> bool;

    /// The bound the last [`bound_branches`](Self::bound_branches) set, or
    /// 0 once a PMI has written the output MSRs since: the one check a
    /// conditional branch makes, for both the TNT's room and a PMI.
    fn branch_bound(&self) -> usize;

    /// A packet of the current event was written: where a PMI may arrive in
    /// the middle of an event (the tracer's interrupt hook, in tests).
    fn packet_written(&mut self);

    /// The current event's `n` packet bytes at the window are complete,
    /// and counted (see [`count_packets`](Self::count_packets)). Returns
    /// `false` when a PMI that came since the last event keeps them out (it
    /// did not see them, and moved the output or left tracing off): the
    /// bytes are not output, and the window stays where it was.
    fn commit(&mut self, n: usize) -> bool;

    /// A timestamp event: the tracer's clock now reads `tsc`.
    fn clock(&mut self, tsc: u64);
}

/// How a direct run ended.
pub(crate) struct DirectRun {
    /// The events fed to the generator, from the start of the run.
    pub fed: usize,
    /// The last event fed wrote this many bytes at the window and they did
    /// not commit (a PMI in the middle of the event kept them out),
    /// with the events a decoder could not walk past before that event
    /// (see [`PacketStream::unwritten_events`]). The caller writes the
    /// bytes again where the output is now.
    pub uncommitted: Option<(usize, u64)>,
}

/// The current event's packets, written at `at` (the window, which holds
/// [`DIRECT_EVENT_MAX`] bytes): their length so far.
struct EventBytes {
    at: *mut u8,
    len: usize,
}

impl EventBytes {
    /// Appends the one-byte packet `packet` (a short TNT).
    ///
    /// # Safety
    /// `at` holds [`DIRECT_EVENT_MAX`] writable bytes, and the event's
    /// packets, this one among them, take no more.
    #[inline(always)]
    unsafe fn put_byte<O: DirectOutput>(&mut self, packet: u8, out: &mut O) {
        // SAFETY: `at + len` lies within the `DIRECT_EVENT_MAX` writable
        // bytes at `at` (the caller's contract).
        unsafe { self.at.add(self.len).write(packet) };
        self.len += 1;
        out.packet_written();
    }

    /// Appends the 8-byte packet held in `packet` (a long TNT, a TSC),
    /// first byte lowest, straight from the register: a packet built in a
    /// register and copied through memory would be stored and loaded back.
    ///
    /// # Safety
    /// As for [`put_byte`](Self::put_byte).
    #[inline(always)]
    unsafe fn put_word<O: DirectOutput>(&mut self, packet: u64, out: &mut O) {
        // SAFETY: `at + len .. at + len + 8` lies within the
        // `DIRECT_EVENT_MAX` writable bytes at `at` (the caller's contract).
        unsafe { self.at.add(self.len).cast::<u64>().write_unaligned(packet) };
        self.len += 8;
        out.packet_written();
    }

    /// Appends the IP packet of `opcode` carrying `ip` as `bytes` says (not
    /// suppressed): the header, then the payload (the low bytes of `ip`)
    /// from the register, as [`IpCompressor::encode_packed`] lays it out.
    ///
    /// # Safety
    /// As for [`put_byte`](Self::put_byte).
    ///
    /// [`IpCompressor::encode_packed`]: crate::soft_pt::packet::IpCompressor::encode_packed
    #[inline(always)]
    unsafe fn put_ip<O: DirectOutput>(&mut self, opcode: u8, bytes: IpBytes, ip: u64, out: &mut O) {
        // SAFETY: the packet, `1 + bytes.payload_len()` bytes from
        // `at + len`, lies within the `DIRECT_EVENT_MAX` writable bytes at
        // `at` (the caller's contract); the stores below cover it.
        unsafe {
            let dst = self.at.add(self.len);
            dst.write(((bytes as u8) << 5) | opcode);
            let payload = dst.add(1);
            match bytes {
                IpBytes::Suppressed => {}
                IpBytes::Update16 => payload.cast::<u16>().write_unaligned(ip as u16),
                IpBytes::Update32 => payload.cast::<u32>().write_unaligned(ip as u32),
                IpBytes::SignExtended48 | IpBytes::Update48 => {
                    payload.cast::<u32>().write_unaligned(ip as u32);
                    payload
                        .add(4)
                        .cast::<u16>()
                        .write_unaligned((ip >> 32) as u16);
                }
                IpBytes::Full => payload.cast::<u64>().write_unaligned(ip),
            }
        }
        self.len += 1 + bytes.payload_len();
        out.packet_written();
    }
}

impl PacketStream {
    /// Feeds the events at the start of `events` as [`feed`](Self::feed)
    /// would, while each is a conditional branch, a jump, a call, a return,
    /// an indirect branch or a timestamp and no PSB+ is due, writing each
    /// event's packets at `out`'s window and committing them at the
    /// event's end. The run stops before any other event, before a PSB+,
    /// before a conditional branch that fills a long TNT, after a commit
    /// that leaves `out` full (no room for another event, a PSB+ due, or a
    /// PMI came into the event), after an event that writes nothing if a
    /// PMI came, and after an event whose bytes did not commit. Packet
    /// generation must be on with branch packets (else nothing is fed).
    ///
    /// One loop takes every event, so that a conditional branch costs its
    /// bit and one compare, nothing more: its bound
    /// ([`DirectOutput::branch_bound`]) stands for both the TNT's room and
    /// a PMI since the last event that was not a branch. The TNT bits are held
    /// under a stop bit (the packet's payload as it stands, no count
    /// beside them), and what a branch would write into the generator (the
    /// next IP, the newest bit's event) is written once for a loop's worth
    /// of them, taken from the last. The PSB byte count is the output's
    /// ([`DirectOutput::count_packets`]): only a write brings a PSB+ nearer,
    /// by the bytes it commits, so one compare after a commit covers both
    /// the window's end and the PSB+. The rest of the generator's state,
    /// which an event touches at most once, stays in `self`.
    #[inline(always)]
    pub(crate) fn feed_direct<O: DirectOutput>(
        &mut self,
        events: &[TraceEvent],
        out: &mut O,
    ) -> DirectRun {
        let mut run = DirectRun {
            fed: 0,
            uncommitted: None,
        };
        // Cycle-accurate mode times packets with CYCs, which `feed` puts.
        if !(self.enabled && self.config.branches)
            || self.since_psb >= self.psb_period
            || self.config.cyc
        {
            return run;
        }
        // The pending outcomes under their stop bit, 1 when there are none:
        // `tnt_bits < 1 << tnt_count` (the invariant), so the stop bit goes
        // right above them, and a branch shifts its outcome in below.
        let mut tnt = self.tnt_bits | (1 << self.tnt_count);
        // Every event of the run is fed: event `i` of the run is the
        // stream's event `first + i`.
        let first = self.events;
        // The events a decoder walks past and the newest bit's event, held
        // for the run: every writing event moves one of them, and they are
        // stored back once at its end.
        let (mut covered, mut last_bit) = (self.covered, self.last_bit);
        // What a conditional branch changes in the generator besides its
        // bit, the next IP and the newest bit's event, is written at the
        // next event that is not one, and at the run's end: a loop's worth
        // of branches writes it once.
        macro_rules! settle_branch {
            ($i:expr) => {
                if let Some(&TraceEvent::Conditional { next, .. }) =
                    $i.checked_sub(1).and_then(|last| events.get(last))
                {
                    self.current_ip = next;
                    last_bit = first + $i as u64 - 1;
                }
            };
        }

        // The pending TNT bits as a packet, before any other packet of the
        // event (`PacketStream::flush_tnt`, but for `covered`: the callers
        // set it). The packets of `short_tnt` and `long_tnt`, but for their
        // clamps and mask: the stop bit is in place already.
        macro_rules! put_tnt {
            ($bytes:expr) => {
                if tnt > 1 {
                    if tnt < 1 << (SHORT_TNT_MAX + 1) {
                        // SAFETY: the event's packets fit the window
                        // (`DIRECT_EVENT_MAX`); as for every packet below.
                        unsafe { $bytes.put_byte((tnt << 1) as u8, out) };
                    } else {
                        // SAFETY: as above.
                        unsafe { $bytes.put_word(LONG_TNT_HEADER | (tnt << 16), out) };
                    }
                    tnt = 1;
                }
            };
        }
        // A TIP to `target` after the pending bits (`PacketStream::tip`): a
        // decoder walks up to it, past this event (`$index`) and the bits'
        // branches before it.
        macro_rules! tip {
            ($bytes:expr, $target:expr, $index:expr) => {
                put_tnt!($bytes);
                let ip_bytes = self.ip.compress($target);
                // SAFETY: as above.
                unsafe { $bytes.put_ip(IpPacket::Tip.opcode(), ip_bytes, $target, out) };
                covered = $index + 1;
            };
        }

        // The index at which a conditional branch would fill the long TNT,
        // given the bits pending at event `i`: the bound of the branches
        // from `i` on, set again after every event that is not one (a
        // branch moves both the index and the bits by one).
        let full_at = |i: usize, tnt: u64| i + TNT_ROOM - usize::from(bits_below_stop(tnt));
        out.bound_branches(full_at(0, tnt));
        // Only a write brings a PSB+ nearer, and by the bytes it commits.
        out.count_packets(self.since_psb, self.psb_period);
        if !out.go_on() {
            return run;
        }
        let mut i = 0;
        while let Some(event) = events.get(i) {
            if let TraceEvent::Conditional { taken, .. } = *event {
                // A bit, unless it is the one that fills a long TNT (that
                // one emits the packet: `feed`'s) or a PMI came since the
                // last event that was not a branch: one bound says both.
                if i >= out.branch_bound() {
                    break;
                }
                tnt = (tnt << 1) | u64::from(taken);
                i += 1;
                continue;
            }
            let at = out.window();
            let index = first + i as u64;
            let mut bytes = EventBytes { at, len: 0 };
            let pending = index - covered;
            if let TraceEvent::Indirect { target } = *event {
                // The TIP moves the IP and empties the TNT bits, after which
                // the newest bit's event means nothing (`last_bit`): a
                // branch just before it leaves nothing to settle.
                tip!(bytes, target, index);
                self.current_ip = target;
            } else {
                settle_branch!(i);
            }
            // (Indirect branches were taken above, before the settle the
            // other events need. In run 8's session one `match` with the
            // settle in each other arm made about as many instructions
            // (28.5 per event on the bench's mix against 28.7) but measured
            // 5.7-5.9 us against 5.3-5.5: code placement, see BENCHMARKS.md.)
            match *event {
                TraceEvent::Indirect { .. } => {}
                TraceEvent::Time(t) => {
                    out.clock(t);
                    self.clock = t & ((1 << 56) - 1);
                    if self.config.tsc {
                        // The bits' branches are walked past once they are
                        // out (`PacketStream::flush_tnt`).
                        if tnt > 1 {
                            covered = covered.max(last_bit + 1);
                        }
                        put_tnt!(bytes);
                        // SAFETY: as above.
                        unsafe { bytes.put_word(u64::from_le_bytes(tsc(self.clock)), out) };
                    }
                }
                TraceEvent::Jump { target } => self.current_ip = target,
                TraceEvent::Call {
                    target,
                    ret,
                    indirect,
                } => {
                    if indirect {
                        tip!(bytes, target, index);
                    }
                    self.returns.push(ret);
                    self.current_ip = target;
                }
                TraceEvent::Return { target } => {
                    // A compressed return is a TNT bit: as a conditional
                    // branch's, one that fills a long TNT is `feed`'s.
                    if tnt >= 1 << TNT_ROOM {
                        break;
                    }
                    if self.config.return_compression && self.returns.pop_is(target) {
                        last_bit = index;
                        tnt = (tnt << 1) | 1;
                    } else {
                        // As `feed`'s: an uncompressed return empties the
                        // stack, so that libipt and perf pair alike.
                        self.returns.clear();
                        tip!(bytes, target, index);
                    }
                    self.current_ip = target;
                }
                _ => break,
            }
            i += 1;
            // (After a packet the bits are out: their room is whole.)
            out.bound_branches(if tnt == 1 {
                i + TNT_ROOM
            } else {
                full_at(i, tnt)
            });
            if bytes.len > 0 {
                if !out.commit(bytes.len) {
                    run.uncommitted = Some((bytes.len, pending));
                    break;
                }
                // The window's end or a PSB+ is near.
                if out.full() {
                    break;
                }
            } else if !out.go_on() {
                break;
            }
        }
        run.fed = i;
        settle_branch!(i);
        self.covered = covered;
        self.last_bit = last_bit;
        // INVARIANT: the outcomes below the stop bit, and only they.
        let count = bits_below_stop(tnt);
        self.tnt_bits = tnt ^ (1 << count);
        self.tnt_count = count;
        // The PSB byte count: the bytes committed, and those of an event that
        // did not commit (the caller writes them again). (The count is below
        // the period before an event, which adds at most DIRECT_EVENT_MAX:
        // the sum cannot overflow.)
        self.since_psb = out.packet_bytes() + run.uncommitted.map_or(0, |(n, _)| n as u64);
        self.events = first + i as u64;
        run
    }
}

/// How many outcomes `tnt`, TNT bits under their stop bit, holds: the stop
/// bit's position (`tnt` is at least 1, the stop bit alone).
#[inline(always)]
fn bits_below_stop(tnt: u64) -> u8 {
    // (`| 1` tells the compiler the word is not 0: one `bsr`.)
    (u64::BITS - 1 - (tnt | 1).leading_zeros()) as u8
}

/// The TNT bits a direct run gathers at most: one short of a full long TNT
/// (the bit that fills it emits it, which is `feed`'s).
const TNT_ROOM: usize = LONG_TNT_MAX as usize - 1;

#[cfg(test)]
mod tests {
    extern crate std;
    use std::format;
    use std::vec::Vec;

    use super::*;
    use crate::pt::config::PtConfig;
    use crate::soft_pt::stream::tests::Bytes;

    /// A window of one event's room (`buf`, which the test owns: a
    /// window's memory is never the output's own), whose commits append to
    /// `out`; the commit numbered `fail_at` (from 1) fails.
    struct Window {
        buf: *mut u8,
        out: Vec<u8>,
        commits: usize,
        fail_at: Option<usize>,
        packets: usize,
        bound: usize,
        /// A PMI comes after this many conditional branches have checked
        /// the bound (each checks it once): it clears the bound and moves
        /// the generation, so the window reports both from then on.
        pmi_after: Option<usize>,
        bound_checks: core::cell::Cell<usize>,
        /// The packet byte count and the PSB period (`count_packets`).
        packet_bytes: u64,
        psb_period: u64,
    }

    impl Window {
        /// A window over `buf` whose commit numbered `fail_at` fails.
        fn over(buf: &mut [u8; 64], fail_at: Option<usize>) -> Window {
            Window {
                buf: buf.as_mut_ptr(),
                out: Vec::new(),
                commits: 0,
                fail_at,
                packets: 0,
                bound: 0,
                pmi_after: None,
                bound_checks: core::cell::Cell::new(0),
                packet_bytes: 0,
                psb_period: 0,
            }
        }

        /// Whether the PMI has come.
        fn interrupted(&self) -> bool {
            self.pmi_after.is_some_and(|n| self.bound_checks.get() >= n)
        }
    }

    impl DirectOutput for Window {
        fn window(&mut self) -> *mut u8 {
            self.buf
        }
        fn count_packets(&mut self, packet_bytes: u64, psb_period: u64) {
            assert!(packet_bytes < psb_period);
            self.packet_bytes = packet_bytes;
            self.psb_period = psb_period;
        }
        fn packet_bytes(&self) -> u64 {
            self.packet_bytes
        }
        fn full(&self) -> bool {
            self.packet_bytes >= self.psb_period
        }
        fn bound_branches(&mut self, end: usize) {
            self.bound = end;
        }
        fn go_on(&mut self) -> bool {
            !self.interrupted()
        }
        fn branch_bound(&self) -> usize {
            if self.interrupted() {
                return 0;
            }
            self.bound_checks.set(self.bound_checks.get() + 1);
            self.bound
        }
        fn packet_written(&mut self) {
            self.packets += 1;
        }
        fn commit(&mut self, n: usize) -> bool {
            self.commits += 1;
            if self.fail_at == Some(self.commits) || self.interrupted() {
                return false;
            }
            // SAFETY: `buf` is the test's 64 bytes, of which the event wrote
            // the first `n <= DIRECT_EVENT_MAX`.
            self.out
                .extend_from_slice(unsafe { core::slice::from_raw_parts(self.buf, n) });
            self.packet_bytes += n as u64;
            true
        }
        fn clock(&mut self, _: u64) {}
    }

    /// A program of the events `feed_direct` takes, and some it leaves to
    /// `feed`, from a seed.
    fn program(seed: u64, len: usize) -> Vec<TraceEvent> {
        let mut state = seed;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 33
        };
        let ip = move |r: u64| match r % 4 {
            0 => 0x40_0000 + r % 0x100,
            1 => 0x40_0000 + r % 0x100_0000,
            2 => 0xffff_ffff_8100_0000 + r % 0x1000,
            _ => r << 20,
        };
        let mut events = Vec::from([TraceEvent::Enable(0x40_0000)]);
        // The calls' return addresses: most returns go back to the newest.
        let mut calls = Vec::new();
        for _ in 0..len {
            let r = next();
            let (a, b) = (ip(next()), ip(next()));
            let back = match (r % 40, r % 5) {
                (30..=32, 1..) => calls.pop().unwrap_or(b),
                _ => b,
            };
            if let 28..=29 = r % 40 {
                calls.push(b);
            }
            events.push(match r % 40 {
                0..=23 => TraceEvent::Conditional {
                    taken: r & 64 != 0,
                    next: a,
                },
                24..=27 => TraceEvent::Indirect { target: a },
                28..=29 => TraceEvent::Call {
                    target: a,
                    ret: b,
                    indirect: r & 64 != 0,
                },
                30..=32 => TraceEvent::Return { target: back },
                33 => TraceEvent::Jump { target: a },
                34..=35 => TraceEvent::Time(next()),
                36 => TraceEvent::Async {
                    from: a,
                    to: Some(b),
                },
                37 => TraceEvent::Disable(None),
                38 => TraceEvent::Enable(a),
                _ => TraceEvent::Mode(crate::soft_pt::packet::ExecMode::Bits64),
            });
        }
        events
    }

    #[test]
    fn a_direct_run_makes_what_feed_makes() {
        // Miri checks the raw writes on a few programs; the rest is for the
        // packets.
        let (seeds, len) = if cfg!(miri) { (1, 200) } else { (64, 3000) };
        for seed in 0..seeds {
            for tsc in [false, true] {
                let config = PtConfig {
                    tsc,
                    return_compression: seed % 3 != 0,
                    ..PtConfig::default()
                };
                let events = program(seed, len);
                let mut reference = PacketStream::with_config(256, config);
                let mut made = Bytes(Vec::new());
                let mut direct = PacketStream::with_config(256, config);
                let mut buf = [0u8; 64];
                let mut window = Window::over(&mut buf, None);
                let mut rest = &events[..];
                while !rest.is_empty() {
                    let run = direct.feed_direct(rest, &mut window);
                    assert!(run.uncommitted.is_none());
                    for &e in &rest[..run.fed] {
                        reference.feed(e, &mut made);
                    }
                    rest = &rest[run.fed..];
                    // The event the run stopped at goes through `feed`.
                    if let Some((&e, after)) = rest.split_first() {
                        reference.feed(e, &mut made);
                        let mut general = Bytes(Vec::new());
                        direct.feed(e, &mut general);
                        window.out.extend_from_slice(&general.0);
                        rest = after;
                    }
                    if !cfg!(miri) {
                        assert_eq!(
                            format!("{direct:?}"),
                            format!("{reference:?}"),
                            "seed {seed}"
                        );
                    }
                }
                assert_eq!(
                    format!("{direct:?}"),
                    format!("{reference:?}"),
                    "seed {seed}"
                );
                assert_eq!(window.out, made.0, "seed {seed}, tsc {tsc}");
                assert!(
                    window.packets > len / 10,
                    "seed {seed}: {} packets",
                    window.packets
                );
            }
        }
    }

    #[test]
    fn an_uncommitted_event_is_reported_with_what_was_pending_before_it() {
        let config = PtConfig::default();
        let events = program(7, 2000);
        let fail_ats: &[usize] = if cfg!(miri) {
            &[3]
        } else {
            &[1, 2, 5, 40, 100]
        };
        for &fail_at in fail_ats {
            let mut reference = PacketStream::with_config(256, config);
            let mut made = Bytes(Vec::new());
            let mut direct = PacketStream::with_config(256, config);
            let mut buf = [0u8; 64];
            let mut window = Window::over(&mut buf, Some(fail_at));
            let mut rest = &events[..];
            loop {
                let Some((&e, after)) = rest.split_first() else {
                    panic!("no commit failed (fail_at {fail_at})");
                };
                let run = direct.feed_direct(rest, &mut window);
                for &e in &rest[..run.fed.saturating_sub(1)] {
                    reference.feed(e, &mut made);
                }
                if let Some((n, pending)) = run.uncommitted {
                    // The failed event's bytes are the window's first `n`,
                    // the ones `feed` makes for it; `pending` is what was
                    // unwritten before it.
                    assert_eq!(pending, reference.unwritten_events());
                    let before = made.0.len();
                    reference.feed(rest[run.fed - 1], &mut made);
                    assert_eq!(buf[..n], made.0[before..], "fail_at {fail_at}");
                    assert_eq!(format!("{direct:?}"), format!("{reference:?}"));
                    break;
                }
                if run.fed > 0 {
                    reference.feed(rest[run.fed - 1], &mut made);
                    rest = &rest[run.fed..];
                    continue;
                }
                reference.feed(e, &mut made);
                let mut general = Bytes(Vec::new());
                direct.feed(e, &mut general);
                rest = after;
            }
        }
    }

    #[test]
    fn a_pmi_between_two_branches_ends_the_run_between_them() {
        // Branches after a TIP, so that the run has bits to gather and a
        // bound to keep; the PMI comes after `k` of them.
        let mut events = Vec::from([
            TraceEvent::Enable(0x40_0000),
            TraceEvent::Indirect { target: 0x40_1000 },
        ]);
        events.extend((0..20u64).map(|n| TraceEvent::Conditional {
            taken: n % 3 == 0,
            next: 0x40_1000 + 16 * n,
        }));
        events.push(TraceEvent::Indirect { target: 0x40_2000 });
        for k in 1..20 {
            let config = PtConfig::default();
            let mut reference = PacketStream::with_config(256, config);
            let mut made = Bytes(Vec::new());
            let mut direct = PacketStream::with_config(256, config);
            let mut general = Bytes(Vec::new());
            for stream in [&mut reference, &mut direct] {
                stream.feed(events[0], &mut made);
            }
            let mut buf = [0u8; 64];
            let mut window = Window::over(&mut buf, None);
            window.pmi_after = Some(k);
            let run = direct.feed_direct(&events[1..], &mut window);
            // The TIP and the `k` branches before the PMI, nothing after.
            assert_eq!(run.fed, 1 + k, "PMI after {k} branches");
            assert!(run.uncommitted.is_none());
            for &e in &events[1..2 + k] {
                reference.feed(e, &mut general);
            }
            assert_eq!(format!("{direct:?}"), format!("{reference:?}"), "k {k}");
        }
    }
}
