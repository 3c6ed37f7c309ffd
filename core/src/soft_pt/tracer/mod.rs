// SPDX-License-Identifier: MIT OR Apache-2.0
//! A software tracer ([`SoftTracer`]), programmed through the driver's
//! seam ([`TraceHw`]), that writes a [`PacketStream`] through ToPA tables
//! exactly as the hardware does: region by region, following END links (the last back to the
//! first), raising a PMI when an INT region fills and stopping when a STOP
//! region fills.
//!
//! Where the output stops (a STOP region filled), perfaux's tracer is
//! stricter than the SDM requires, so that a decoder never meets a torn
//! packet: the packets of one trace event reach the output whole or not at
//! all. Those that do not fit in what is left of a STOP region are dropped
//! and the region is filled with PAD, so the driver sees it full
//! (`pt_handle_status` flags TRUNCATED only then); the next packet after
//! the restart is a PSB+ (see [`PacketStream::resync`]). The events whose
//! packets were lost are reported ([`SoftTracer::take_loss`]), so that a
//! model of the decode can leave them out.
//!
//! The tracer is split along its seams: this file, the write loop (trace
//! events in, through the packet generator, to the output); `output`,
//! where the packets go (the write window and its commit protocol, the
//! walk through the ToPA tables); `direct`, a direct run's view of the
//! window; `regs`, the registers the driver programs ([`TraceHw`]);
//! `output_regs`, the output MSRs under a PMI inside a write; and
//! [`Hooks`], what tests and tools see of a write.

use core::cell::UnsafeCell;
use core::ops::Range;

use crate::pt::config::{PtConfig, rtit_ctl};
use crate::pt::hw::STATUS_PACKET_BYTE_CNT;
#[cfg(doc)]
use crate::pt::hw::TraceHw;
use crate::pt::topa::PhysMap;
use crate::sync::{LocalBool, LocalPtr, LocalU32, LocalU64, barrier};

use super::stream::{DirectRun, PacketStream, TraceEvent};
use direct::Direct;
use output::Output;
use output_regs::OutputRegs;

mod direct;
mod hooks;
mod output;
mod output_regs;
mod regs;

pub use hooks::{Hooks, NoHooks, Taps};

/// The most bytes the packets of one trace event take: a PSB+ (PSB 16,
/// FUP 9, MODE.Exec 2, TSC 8, CBR 4, PSBEND 2), a TNT flush (8), then FUP
/// and TIP (9 each), each after a CYC (at most 10), with room to spare.
const UNIT_CAP: usize = 128;

/// PAD bytes for the end of a STOP region a unit did not fit in.
static PAD_FILL: [u8; UNIT_CAP] = [0; UNIT_CAP];

/// A software stand-in for the tracer of one CPU.
///
/// Single-CPU object: trace events and the driver's MSR accesses come from
/// that CPU (possibly nested: a PMI's driver code runs between two events).
///
/// `K` is what tests and tools see of its writes ([`Hooks`]); the default,
/// [`NoHooks`], compiles to nothing.
pub struct SoftTracer<'p, K: Hooks = NoHooks> {
    phys: &'p dyn PhysMap,
    /// The packet generator, created at the first packet.
    ///
    /// # Invariants
    /// Only `trace` (and `trace_all`), `generating`, `disable` and
    /// `configure` touch it, on this CPU (the type is not `Sync`), and only
    /// while `writing` is clear; a write sets `writing` for as long as it
    /// holds a `&mut` to it, so a PMI that interrupts the write (the
    /// `interrupt` hook) and calls back into the tracer never makes a second
    /// reference.
    stream: UnsafeCell<Option<PacketStream>>,
    /// The bytes of an event's packets being gathered (see `Output`), kept
    /// here so that no event pays for a fresh buffer. Under the same discipline as
    /// `stream`: only the holder of `writing` touches it.
    unit: UnsafeCell<[u8; UNIT_CAP]>,
    /// `trace` is writing packets (it holds the stream). Set and cleared
    /// around the write with `barrier()`, so a PMI on this CPU sees it set
    /// for every access the write makes.
    writing: LocalBool,
    /// The PSB period of `PSBFreq` 0.
    psb_base: u64,
    /// `IA32_RTIT_CTL`: `TraceEn`, `ToPA` and the configuration fields (a
    /// new configuration starts a new stream).
    ctl: LocalU64,
    /// The timestamp counter, running whether tracing is on or not.
    clock: LocalU64,
    /// The core:bus ratio, 0 while none is known (a new stream's CBR).
    ratio: LocalU32,
    /// `IA32_RTIT_OUTPUT_BASE` and `IA32_RTIT_OUTPUT_MASK_PTRS`, and what
    /// a PMI did to them inside a write (see [`OutputRegs`]).
    regs: OutputRegs,
    /// `IA32_RTIT_STATUS`.
    status: LocalU64,
    /// `PacketByteCnt` as of the last completed write, unsaturated (see
    /// `packet_byte_cnt`; a PMI inside a write sees the count before it).
    packet_bytes: LocalU64,
    /// The driver wrote `PacketByteCnt` 0 (an event's first configuration):
    /// the next write starts a new packet stream, PSB+ first, packet
    /// generation off until a TIP.PGE. perfaux's tracer keeps packet state
    /// across the TraceEn toggles of one event (a snapshot's stop and
    /// restart is invisible in its trace), so this is where one event's
    /// state (PacketEn, the last IP, the return stack) ends: nothing of it
    /// leaks into the next event's trace.
    fresh: LocalBool,
    /// The output generation: one more at every driver write of
    /// `RTIT_CTL` or of the output MSRs (`set_ctl`, `set_output`), from task
    /// context or from a PMI inside a write. A write window is good only in
    /// the generation it was opened in: the tables may have changed
    /// meanwhile (the hardware re-reads them when TraceEn is set), and a
    /// PMI may have moved the output. This is the only window state the
    /// driver's side writes; the window itself is the writer's.
    generation: LocalU64,
    /// The write window: where the output position is in memory, and the
    /// bytes left from there to the end of its ToPA region, valid while
    /// `window_gen` is the current `generation` (else, or with no room,
    /// the next write takes the general path, which walks the tables and
    /// opens a new one). A unit shorter than the window goes straight in,
    /// with no table walk and no address translation: it cannot reach the
    /// region's end, so no END link, INT or STOP can be in its way.
    ///
    /// Only the holder of `writing` reads or writes these three: a PMI that
    /// interrupts a write only moves `generation` on, so the interrupted
    /// writer never sees its window shrink under it (see `commit`).
    window: LocalPtr<u8>,
    window_room: LocalU64,
    window_gen: LocalU64,
    /// The bound of a direct run's conditional branches: an index into the
    /// events of the run in progress, below which a branch goes on with no
    /// other check (see `Direct::bound_branches`). Set by the writer after
    /// every event that is not a branch; cleared by every new generation,
    /// so that one load and compare stands for both the TNT's room and the
    /// check for a PMI.
    branch_bound: LocalU64,
    /// ToPA PMIs raised and not yet taken.
    pmi: LocalU32,
    /// The output stopped (a STOP region filled, or a table error) inside
    /// the write in progress: set by `halt`, taken by the writer, which
    /// then resynchronises the stream.
    halted: LocalBool,
    /// Trace events fed to the packet generator so far (the index of the
    /// next one, see [`next_event`](SoftTracer::next_event)).
    events: LocalU64,
    /// The events whose packets were lost since the last `take_loss`:
    /// `lost_start..lost_end`, empty when `lost_start >= lost_end`.
    lost_start: LocalU64,
    lost_end: LocalU64,
    /// The output stopped and the driver has not set TraceEn again: the
    /// events meanwhile are lost too.
    output_stopped: LocalBool,
    /// Events lost in all (see [`lost_events`](SoftTracer::lost_events)).
    lost_events: LocalU64,
    /// Bytes written into the output since creation (a direct run without
    /// hooks counts its bytes once, at its end: see `Direct::finish`).
    written: LocalU64,
    /// What tests and tools see of the writes.
    hooks: K,
}

impl<'p> SoftTracer<'p> {
    /// A stopped tracer whose `PSBFreq` 0 means a PSB+ every `psb_base`
    /// bytes (2 KiB on hardware; tests take smaller ones), configured as
    /// [`PtConfig::default`] with TSC packets on until a driver programs it.
    pub fn new(phys: &'p dyn PhysMap, psb_base: u64) -> Self {
        SoftTracer::with_hooks(phys, psb_base, NoHooks)
    }
}

impl<'p, K: Hooks> SoftTracer<'p, K> {
    /// The tracer of [`new`](SoftTracer::new), its writes seen by `hooks`.
    pub fn with_hooks(phys: &'p dyn PhysMap, psb_base: u64, hooks: K) -> Self {
        let config = PtConfig {
            tsc: true,
            ..PtConfig::default()
        };
        SoftTracer {
            phys,
            stream: UnsafeCell::new(None),
            unit: UnsafeCell::new([0; UNIT_CAP]),
            writing: LocalBool::new(false),
            psb_base,
            ctl: LocalU64::new(config.rtit_ctl() | rtit_ctl::TOPA),
            clock: LocalU64::new(0),
            ratio: LocalU32::new(0),
            regs: OutputRegs::new(0, 0x7f),
            status: LocalU64::new(0),
            packet_bytes: LocalU64::new(0),
            fresh: LocalBool::new(false),
            generation: LocalU64::new(0),
            window: LocalPtr::null(),
            window_room: LocalU64::new(0),
            window_gen: LocalU64::new(0),
            branch_bound: LocalU64::new(0),
            pmi: LocalU32::new(0),
            halted: LocalBool::new(false),
            events: LocalU64::new(0),
            lost_start: LocalU64::new(0),
            lost_end: LocalU64::new(0),
            output_stopped: LocalBool::new(false),
            lost_events: LocalU64::new(0),
            written: LocalU64::new(0),
            hooks,
        }
    }

    /// What sees the tracer's writes.
    pub fn hooks(&self) -> &K {
        &self.hooks
    }

    /// Sets or clears `RTIT_CTL` bits. Ends the output generation: a driver
    /// may have changed the tables while TraceEn was clear.
    fn set_ctl(&self, bits: u64, on: bool) {
        self.next_generation();
        let ctl = self.ctl.load();
        self.ctl.store(if on { ctl | bits } else { ctl & !bits });
    }

    /// Whether `TraceEn` is set.
    fn tracing(&self) -> bool {
        self.ctl.load() & rtit_ctl::TRACE_EN != 0
    }

    /// Something happened on the CPU: the packets for it go to the output
    /// while tracing is on, and are not generated at all while it is off.
    #[inline(always)]
    pub fn trace(&self, event: TraceEvent) {
        // Most events are conditional branches, and most of those only add
        // a TNT bit: that path touches a few words and writes nothing out.
        if let TraceEvent::Conditional { taken, next } = event {
            if self.try_tnt(taken, next) {
                return;
            }
        }
        self.trace_all(core::slice::from_ref(&event));
    }

    /// Traces `events` in order, as [`trace`](Self::trace) traces each: the
    /// packets of every event reach the output whole before the next event
    /// is looked at, so a PMI between two events sees the same output
    /// position, status and trace as it would between two `trace` calls.
    /// What is shared is the work around the events: the packet generator
    /// is taken once for the run (not once an event), the driver's MSR
    /// state is read again only when a PMI has written it (a new output
    /// generation), and the events a program makes every few instructions
    /// (branches, calls, returns, timestamps) go through the generator's
    /// fast path straight into the current ToPA region, each committed at
    /// its end as any other.
    ///
    /// This is how a tracer fed from a recorded or simulated instruction
    /// stream goes fastest.
    pub fn trace_all(&self, events: &[TraceEvent]) {
        let mut rest = events;
        while let Some((&event, after)) = rest.split_first() {
            if !self.tracing() || self.writing.load() {
                self.untraced(event);
                rest = after;
            } else {
                rest = self.trace_run(rest);
            }
        }
    }

    /// A conditional branch that only adds a TNT bit to the packet
    /// generator (no packet is due: see [`PacketStream::try_tnt`]); `false`
    /// when it takes the general path.
    #[inline(always)]
    fn try_tnt(&self, taken: bool, next: u64) -> bool {
        if !self.tracing() || self.writing.load() || self.fresh.load() {
            return false;
        }
        self.writing.store(true);
        barrier();
        // SAFETY: `writing` was clear and is now set: no other reference to
        // the stream exists or is made until it is cleared (the invariant).
        let stream = unsafe { &mut *self.stream.get() };
        let done = stream.as_mut().is_some_and(|s| s.try_tnt(taken, next));
        if done {
            self.events.store(self.events.load() + 1);
        }
        barrier();
        self.regs.release(&self.writing);
        done
    }

    /// An event while tracing is off, or inside a packet write: only the
    /// clock moves, and the event counts as lost if the output stopped.
    #[cold]
    fn untraced(&self, event: TraceEvent) {
        if let TraceEvent::Time(tsc) = event {
            self.clock.store(tsc);
        }
        // An event inside a packet write cannot happen on hardware (only a
        // PMI can interrupt it, and a PMI traces nothing): it is dropped.
        if !self.tracing() && self.output_stopped.load() {
            self.lost_events.store(self.lost_events.load() + 1);
        }
    }

    /// Traces events from the start of `events`, tracing on and no write in
    /// progress, for as long as tracing stays on; returns those left.
    #[inline(never)]
    fn trace_run<'e>(&self, events: &'e [TraceEvent]) -> &'e [TraceEvent] {
        self.writing.store(true);
        barrier();
        // SAFETY: `writing` was clear and is now set: no other reference to
        // the stream exists or is made until it is cleared (the invariant).
        let slot = unsafe { &mut *self.stream.get() };
        let mut stream = self.writable_stream(slot);
        // The clock only moves by a Time event or a `set_clock`, which is a
        // new generation: the stream takes it here and after every one.
        stream.set_clock(self.clock.load());
        let mut generation = self.generation.load();
        let mut index = self.events.load();
        let mut out = Output::new(self);
        let mut rest = events;
        while let Some((&event, after)) = rest.split_first() {
            // A PMI between two events may have stopped tracing or asked
            // for a new stream (`PacketByteCnt` 0); each such write is a
            // new output generation.
            let now = self.generation.load();
            if now != generation {
                generation = now;
                if !self.tracing() {
                    break;
                }
                stream = self.writable_stream(slot);
                stream.set_clock(self.clock.load());
                out.reload();
            }
            // The events a program makes every few instructions, straight
            // into the window while it has room, committed one by one.
            if out.direct_ready() {
                let run = self.direct_run(stream, rest, &mut out);
                rest = rest.get(run.fed..).unwrap_or_default();
                index += run.fed as u64;
                if let Some((n, pending)) = run.uncommitted {
                    // A PMI inside the last event kept its bytes out (it
                    // moved the output, or left tracing off): they go out
                    // again where the output is now, if tracing is on.
                    out.gather_window(n);
                    self.end_event(stream, &mut out, pending, index - 1);
                }
                if run.fed > 0 {
                    continue;
                }
            }
            // A loop's worth of conditional branches, a bit each, checking
            // for a PMI's write between them as above.
            if let TraceEvent::Conditional { .. } = event {
                let gathered = stream.gather_tnt(rest, || self.generation.load() == generation);
                if gathered > 0 {
                    index += gathered as u64;
                    rest = rest.get(gathered..).unwrap_or_default();
                    continue;
                }
            }
            rest = after;
            if let TraceEvent::Time(tsc) = event {
                // The stream's clock moves in `feed`; this is the tracer's.
                self.clock.store(tsc);
            }
            let pending = stream.unwritten_events();
            stream.feed(event, &mut out);
            self.end_event(stream, &mut out, pending, index);
            index += 1;
        }
        out.close();
        self.events.store(index);
        self.set_packet_bytes(stream.packet_bytes());
        barrier();
        self.regs.release(&self.writing);
        rest
    }

    /// A direct run of `stream` over the start of `events` into `out`'s
    /// window ([`PacketStream::feed_direct`]). A function of its own, so
    /// that the run's loop has the registers to itself: inlined into
    /// `trace_run`, it shares them with the general path's, and spills.
    #[inline(never)]
    fn direct_run(
        &self,
        stream: &mut PacketStream,
        events: &[TraceEvent],
        out: &mut Output<'_, 'p, K>,
    ) -> DirectRun {
        let mut direct = Direct::new(out);
        let run = stream.feed_direct(events, &mut direct);
        direct.finish(out);
        run
    }

    /// Ends the trace event `index`, whose packets went to `out` and which
    /// left `pending` events unwritten before it (see
    /// [`PacketStream::unwritten_events`]): writes what is left of its
    /// packets, starts the stream over if the output stopped in them, and
    /// reports the stream's `PacketByteCnt` from here on.
    #[inline(always)]
    fn end_event(
        &self,
        stream: &mut PacketStream,
        out: &mut Output<'_, 'p, K>,
        pending: u64,
        index: u64,
    ) {
        let delivered = out.end_event();
        if self.halted.load() {
            // The output stopped in this event's packets. Lost: the events
            // whose outcomes were in the dropped packets (those pending
            // before, and this one), or, when the packets fit, those still
            // pending in the generator; the stream starts over.
            let first = if delivered {
                (index + 1).saturating_sub(stream.unwritten_events())
            } else {
                index.saturating_sub(pending)
            };
            self.resync(stream, first..index + 1);
        }
        self.set_packet_bytes(stream.packet_bytes());
    }

    /// `RTIT_STATUS.PacketByteCnt` as `status` reports it from here on:
    /// `count`, saturated to the field's 17 bits when it is read (a write
    /// sets it after every event: one store, no clamp).
    #[inline(always)]
    fn set_packet_bytes(&self, count: u64) {
        self.packet_bytes.store(count);
    }

    /// `RTIT_STATUS.PacketByteCnt`: the count, saturated to its 17 bits.
    fn packet_byte_cnt(&self) -> u64 {
        self.packet_bytes.load().min(STATUS_PACKET_BYTE_CNT >> 32)
    }

    /// The packet generator to write with, from `slot`: a new one when the
    /// driver asked for a new stream (`fresh`) or there is none yet.
    #[inline]
    fn writable_stream<'s>(&self, slot: &'s mut Option<PacketStream>) -> &'s mut PacketStream {
        if self.fresh.load() {
            self.fresh.store(false);
            *slot = None;
        }
        match slot {
            Some(s) => s,
            None => self.new_stream(slot),
        }
    }

    /// The packet generator of a new stream, in `slot`, for the
    /// configuration `RTIT_CTL` holds.
    #[cold]
    fn new_stream<'s>(&self, slot: &'s mut Option<PacketStream>) -> &'s mut PacketStream {
        let stream = slot.insert(PacketStream::with_config(self.psb_base, self.config()));
        stream.set_ratio(self.ratio.load() as u8);
        stream
    }

    /// The output stopped: records the events `lost` and restarts the
    /// stream (see [`PacketStream::resync`]).
    fn resync(&self, stream: &mut PacketStream, lost: Range<u64>) {
        self.halted.store(false);
        self.lost_events
            .store(self.lost_events.load() + (lost.end - lost.start));
        if !lost.is_empty() {
            if self.lost_start.load() >= self.lost_end.load() {
                self.lost_start.store(lost.start);
            } else {
                self.lost_start
                    .store(self.lost_start.load().min(lost.start));
            }
            self.lost_end.store(self.lost_end.load().max(lost.end));
        }
        stream.resync();
    }

    /// The index the next trace event gets (0 for the first event traced,
    /// counting only events traced while TraceEn was set), as
    /// [`take_loss`](Self::take_loss) reports them.
    pub fn next_event(&self) -> u64 {
        self.events.load()
    }

    /// Trace events lost so far because the output stopped (a STOP region
    /// filled): those whose packets were dropped or cut off
    /// ([`take_loss`](Self::take_loss)) and those that happened until the
    /// driver restarted tracing.
    pub fn lost_events(&self) -> u64 {
        self.lost_events.load()
    }

    /// Takes the indexes of the events whose packets a stopped output lost
    /// since the last call (merged into one range if there were several).
    /// Their outcomes are not in the trace; the trace goes on from the PSB+
    /// after the restart.
    pub fn take_loss(&self) -> Option<Range<u64>> {
        let lost = self.lost_start.load()..self.lost_end.load();
        self.lost_start.store(0);
        self.lost_end.store(0);
        (!lost.is_empty()).then_some(lost)
    }

    /// The timestamp counter now reads `tsc` (no packet; later PSB+ blocks
    /// carry it).
    pub fn set_clock(&self, tsc: u64) {
        self.clock.store(tsc);
        // A write in progress (this is a PMI's call) takes the new clock
        // before its next event.
        self.next_generation();
    }

    /// The core:bus ratio the CPU runs at: every PSB+ of the streams
    /// started after this carries it in a CBR (0: none known, no CBR).
    /// A tracer in cycle-accurate mode whose cycles are TSC ticks
    /// ([`PacketStream`]'s cycle model) gives the TSC's ratio: its
    /// frequency / 100 MHz.
    pub fn set_ratio(&self, ratio: u8) {
        self.ratio.store(u32::from(ratio));
    }

    /// The timestamp counter reads `tsc` as an instruction retires: in
    /// cycle-accurate mode, the clock the next CYC counts to
    /// ([`set_clock`](Self::set_clock)); otherwise nothing, as nothing
    /// needs it. A single-step tracer calls it at every step.
    #[inline]
    pub fn retire_clock(&self, tsc: u64) {
        if self.ctl.load() & rtit_ctl::CYC_EN != 0 {
            self.set_clock(tsc);
        }
    }

    /// The configuration `RTIT_CTL` holds.
    pub fn config(&self) -> PtConfig {
        PtConfig::from_rtit_ctl(self.ctl.load())
    }

    /// Whether packet generation is on (between TIP.PGE and TIP.PGD, with
    /// TraceEn set).
    pub fn generating(&self) -> bool {
        if !self.tracing() || self.writing.load() || self.fresh.load() {
            return false;
        }
        // SAFETY: `writing` is clear: no `&mut` to the stream exists, and
        // this shared one ends here (the invariant).
        unsafe { (*self.stream.get()).as_ref() }.is_some_and(PacketStream::enabled)
    }

    /// Takes the ToPA PMIs raised since the last call (an INT region filled).
    pub fn take_pmi(&self) -> u32 {
        let n = self.pmi.load();
        self.pmi.store(0);
        n
    }

    /// Bytes written to the output so far.
    pub fn written(&self) -> u64 {
        self.written.load()
    }

    /// Whether output goes through ToPA tables (else single-range).
    pub fn uses_topa(&self) -> bool {
        self.ctl.load() & rtit_ctl::TOPA != 0
    }

    /// Counts `bytes` just written, and shows them to the hooks.
    fn written_piece(&self, bytes: &[u8]) {
        self.written.store(self.written.load() + bytes.len() as u64);
        if K::ANY {
            self.hooks.written(bytes);
        }
    }

    /// The output stops: `bit` (Stopped or Error) goes into `RTIT_STATUS`
    /// and TraceEn is cleared, as the hardware clears TriggerEn.
    fn halt(&self, bit: u64) {
        self.status.store(self.status.load() | bit);
        self.set_ctl(rtit_ctl::TRACE_EN, false);
        self.halted.store(true);
        self.output_stopped.store(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pt::hw::TraceHw;
    use crate::pt::topa::IdentityMap;

    /// A driver write to the tracer's registers, by name.
    type DriverWrite<'a> = (&'a str, &'a dyn Fn(&SoftTracer<'_>));

    /// Every write the driver makes, a PMI's among them, clears the bound
    /// a direct run's conditional branches go by as it moves the
    /// generation: a run in progress takes no further branch without
    /// seeing the write (`Direct::bound_branches`).
    #[test]
    fn every_driver_write_clears_the_branch_bound() {
        let tracer = SoftTracer::new(&IdentityMap, 4096);
        let writes: [DriverWrite<'_>; 7] = [
            ("set_output", &|t| t.set_output(0x1000, 0x7f)),
            ("enable", &|t| t.enable()),
            ("disable", &|t| t.disable()),
            ("set_topa", &|t| t.set_topa(false)),
            ("configure", &|t| {
                let config = t.config();
                t.configure(PtConfig {
                    tsc: !config.tsc,
                    ..config
                })
            }),
            ("set_status", &|t| {
                t.set_packet_bytes(5);
                t.set_status(0)
            }),
            ("set_clock", &|t| t.set_clock(7)),
        ];
        for (name, write) in writes {
            tracer.branch_bound.store(100);
            let generation = tracer.generation.load();
            write(&tracer);
            assert_ne!(tracer.generation.load(), generation, "{name}");
            assert_eq!(tracer.branch_bound.load(), 0, "{name}");
        }
    }
}
