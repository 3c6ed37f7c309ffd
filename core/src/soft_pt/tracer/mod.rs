// SPDX-License-Identifier: MIT OR Apache-2.0
//! The tracer seam ([`TraceHw`]) and a software tracer ([`SoftTracer`]) that
//! writes a [`PacketStream`] through ToPA tables exactly as the hardware
//! does: region by region, following END links (the last back to the
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

use core::cell::{Cell, RefCell, UnsafeCell};
use core::ops::Range;

use crate::sync::{LocalBool, LocalPtr, LocalU32, LocalU64, barrier, copy_to_memory};

use crate::pt::config::{PtConfig, rtit_ctl};
use crate::pt::hw::{STATUS_ERROR, STATUS_PACKET_BYTE_CNT, STATUS_STOPPED, TraceHw};
use crate::pt::topa::{PhysMap, TENTS_PER_PAGE, TopaEntry, TopaPosition, TopaTable};

use super::stream::{
    DIRECT_EVENT_MAX, DirectOutput, DirectRun, PacketSink, PacketStream, TraceEvent,
};
use output_regs::OutputRegs;

mod output_regs;

/// The most bytes the packets of one trace event take: a PSB+ (PSB 16,
/// FUP 9, MODE.Exec 2, TSC 8, CBR 4, PSBEND 2), a TNT flush (8), then FUP
/// and TIP (9 each), with room to spare.
const UNIT_CAP: usize = 128;

/// PAD bytes for the end of a STOP region a unit did not fit in.
static PAD_FILL: [u8; UNIT_CAP] = [0; UNIT_CAP];

/// A software stand-in for the tracer of one CPU.
///
/// Single-CPU object: trace events and the driver's MSR accesses come from
/// that CPU (possibly nested: a PMI's driver code runs between two events).
pub struct SoftTracer<'p> {
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
    /// Sees every byte written to the output (models in tests and tools).
    /// Instrumentation, set while nothing traces (see `set_tap`).
    tap: Cell<Option<&'p RefCell<dyn PacketSink + 'p>>>,
    /// Called after each piece written to a region: where a PMI can arrive
    /// in the middle of a write (tests). Set while nothing traces.
    interrupt: Cell<Option<&'p dyn Fn()>>,
}

impl<'p> SoftTracer<'p> {
    /// A stopped tracer whose `PSBFreq` 0 means a PSB+ every `psb_base`
    /// bytes (2 KiB on hardware; tests take smaller ones), configured as
    /// [`PtConfig::default`] with TSC packets on until a driver programs it.
    pub fn new(phys: &'p dyn PhysMap, psb_base: u64) -> SoftTracer<'p> {
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
            tap: Cell::new(None),
            interrupt: Cell::new(None),
        }
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

    /// Runs `f` after every piece the tracer writes into a region, as a
    /// PMI arriving in the middle of a write would (tests). Set-up only:
    /// call it while no trace event or PMI is running on the tracer.
    pub fn set_interrupt(&self, f: Option<&'p dyn Fn()>) {
        self.interrupt.set(f);
    }

    /// Shows every byte the tracer writes to its output to `tap` as well.
    /// Set-up only, as [`set_interrupt`](Self::set_interrupt).
    pub fn set_tap(&self, tap: Option<&'p RefCell<dyn PacketSink + 'p>>) {
        self.tap.set(tap);
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
    #[inline]
    fn trace_run<'e>(&self, events: &'e [TraceEvent]) -> &'e [TraceEvent] {
        if self.hooked() {
            self.trace_run_hooked::<true>(events)
        } else {
            self.trace_run_hooked::<false>(events)
        }
    }

    /// [`trace_run`](Self::trace_run), its direct runs telling the tap and
    /// the interrupt hook only if `HOOKS` (see [`hooked`](Self::hooked)).
    #[inline(never)]
    fn trace_run_hooked<'e, const HOOKS: bool>(
        &self,
        events: &'e [TraceEvent],
    ) -> &'e [TraceEvent] {
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
                let run = self.direct_run::<HOOKS>(stream, rest, &mut out);
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
    fn direct_run<const HOOKS: bool>(
        &self,
        stream: &mut PacketStream,
        events: &[TraceEvent],
        out: &mut Output<'_, 'p>,
    ) -> DirectRun {
        let mut direct = Direct::<HOOKS>::new(out);
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
        out: &mut Output<'_, 'p>,
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
        slot.insert(PacketStream::with_config(self.psb_base, self.config()))
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

    /// Tells the tap and the interrupt hook about `bytes` just written.
    fn written_piece(&self, bytes: &[u8]) {
        self.written.store(self.written.load() + bytes.len() as u64);
        if let Some(tap) = self.tap.get() {
            if let Ok(mut t) = tap.try_borrow_mut() {
                t.write(bytes);
            }
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

    /// Writes one unit of packets at the output position: all of it, or,
    /// when it does not fit before the end of a STOP region, PAD up to that
    /// end and none of it. Returns whether the unit was written.
    #[inline]
    fn emit(&self, bytes: &[u8]) -> bool {
        if !self.tracing() {
            return false;
        }
        let (dst, room, mark) = self.window();
        if (bytes.len() as u64) < room {
            // SAFETY: the window holds more than `bytes.len()` bytes
            // (`open_window`), memory the driver handed to the tracer, which
            // `bytes` (the tracer's unit buffer or a constant) does not
            // overlap.
            unsafe { copy_to_memory(dst, bytes) };
            if self.commit(mark, dst, bytes.len()) {
                self.window.store(dst.wrapping_add(bytes.len()));
                self.window_room.store(room - bytes.len() as u64);
                return true;
            }
            // A PMI moved the output meanwhile: write the unit again where
            // the output is now.
        }
        let written = self.emit_slow(bytes);
        self.open_window();
        written
    }

    /// The write window: where it is, the bytes it holds (0 when it was
    /// closed, or opened in an earlier output generation) and the mark a
    /// write into it commits with.
    #[inline]
    fn window(&self) -> (*mut u8, u64, WindowMark) {
        let generation = self.settled_generation();
        let mark = WindowMark {
            generation,
            mask_ptrs: self.regs.mask_ptrs(),
        };
        let room = if self.window_gen.load() == mark.generation {
            self.window_room.load()
        } else {
            0
        };
        (self.window.load(), room, mark)
    }

    /// The `n` bytes at `at`, the start of the window `mark` names, were
    /// written, fewer than it holds: the output position moves past them,
    /// the tap sees them, and the interrupt hook may run (a PMI after a
    /// piece written); the caller moves the window on. `false`, with
    /// nothing done, when a PMI has written the output MSRs since the mark
    /// was taken: the window is gone, and the bytes must be written again
    /// where the output is now.
    ///
    /// A PMI may arrive anywhere in a write, the hardware's never can:
    /// this is where the write becomes visible, at once. The output
    /// position (`MASK_PTRS`) moves by one plain store, which a PMI sees
    /// entirely done or not at all: inside a write, a PMI never stores into
    /// the output registers (its `set_output` is deferred, and it reads a
    /// view frozen where the first PMI found the output; see
    /// [`OutputRegs`]). The generation read after the store says whether a
    /// PMI came since the mark; if one did, [`OutputRegs::resolve`] says
    /// whether it saw the event (then the event is out) or came before the
    /// store (then the event follows it, or goes round again when the PMI
    /// moved the output or left tracing off). The window's own fields are
    /// the writer's alone, so a PMI landing between the two can never make
    /// the window look larger than it is: its `generation` step leaves it
    /// stale.
    #[inline]
    fn commit(&self, mark: WindowMark, at: *mut u8, n: usize) -> bool {
        self.commit_hooked::<true>(mark, at, n, || {})
    }

    /// [`commit`](Self::commit), telling the tap and the interrupt hook
    /// only if `HOOKS` (see [`hooked`](Self::hooked)), and calling
    /// `interrupted` if a PMI came since the mark, whether the bytes are out
    /// or not. Without `HOOKS` (a direct run's commit) the caller counts
    /// the bytes in `written`.
    #[inline(always)]
    fn commit_hooked<const HOOKS: bool>(
        &self,
        mark: WindowMark,
        at: *mut u8,
        n: usize,
        interrupted: impl FnOnce(),
    ) -> bool {
        // The offset (bits 63:32) stays inside the region: no carry.
        let moved = mark.mask_ptrs + ((n as u64) << 32);
        self.regs.publish(moved);
        // Pairs with `next_generation`: a driver write since the mark was
        // taken moved it (the barrier in `publish` orders the load).
        if self.generation.load() != mark.generation {
            interrupted();
            if !self.regs.resolve(mark.mask_ptrs, moved, || self.tracing()) {
                return false;
            }
        }
        if !HOOKS {
            return true;
        }
        // SAFETY: the `n` bytes at `at` were just written by this tracer,
        // which nothing else writes meanwhile (the region is the tracer's);
        // the view ends with this call.
        self.written_piece(unsafe { core::slice::from_raw_parts(at.cast_const(), n) });
        if let Some(f) = self.interrupt.get() {
            f();
        }
        true
    }

    /// Whether a tap or an interrupt hook is set. They are set only while
    /// nothing traces, so a write reads this once: a write without them
    /// (every write outside tests and tools) then tests for neither after
    /// each packet.
    #[inline(always)]
    fn hooked(&self) -> bool {
        self.tap.get().is_some() || self.interrupt.get().is_some()
    }

    /// Ends the output generation (see `generation`): the write window
    /// closes, and a write in progress commits nothing (see `commit`).
    #[inline]
    fn next_generation(&self) {
        self.generation
            .store(self.generation.load().wrapping_add(1));
        // Pairs with `Direct::bound_branches`: a direct run in progress
        // takes no further branch without looking at the generation.
        self.branch_bound.store(0);
        self.regs.driver_wrote(self.writing.load());
    }

    /// The output generation, once the driver writes that came into this
    /// write are settled (see [`OutputRegs`]): the writer's view of the
    /// registers is current for it. A PMI after the read moves it on.
    #[inline]
    fn settled_generation(&self) -> u64 {
        loop {
            self.regs.settle();
            barrier();
            let generation = self.generation.load();
            barrier();
            // Pairs with `next_generation`: a PMI between the settle and the
            // read above left something to settle.
            if !self.regs.interrupted() {
                return generation;
            }
        }
    }

    /// Opens the write window at the output position, if tracing through
    /// ToPA into a region with room left (an END link, a full region and
    /// single-range output take the general path).
    fn open_window(&self) {
        // The generation first: a PMI from here on leaves the window stale.
        let generation = self.settled_generation();
        self.window_room.store(0);
        if !self.tracing() || !self.uses_topa() {
            return;
        }
        let pos = TopaPosition::from_mask_ptrs(0, self.regs.mask_ptrs());
        let entry = self.entry(self.regs.base(), pos.index);
        if entry.is_end() || pos.offset >= entry.size() {
            return;
        }
        self.window
            .store(self.phys.to_virt(entry.base() + pos.offset));
        self.window_room.store(entry.size() - pos.offset);
        self.window_gen.store(generation);
    }

    /// [`emit`](Self::emit) where the unit may reach the end of the
    /// current region: through the tables.
    #[cold]
    fn emit_slow(&self, bytes: &[u8]) -> bool {
        if !self.uses_topa() {
            self.emit_single(bytes);
            return true;
        }
        match self.room_before_stop(bytes.len() as u64) {
            Some(room) => {
                if let Some(pad) = PAD_FILL.get(..room as usize) {
                    self.emit_topa(pad);
                }
                if self.tracing() {
                    // The STOP region was full already (nothing written).
                    self.halt(STATUS_STOPPED);
                }
                false
            }
            None => self.emit_topa(bytes),
        }
    }

    /// The ToPA entry `index` of the table at physical address `base`.
    fn entry(&self, base: u64, index: usize) -> TopaEntry {
        let table = self.phys.to_virt(base).cast::<TopaTable>().cast_const();
        // SAFETY: the driver programs OUTPUT_BASE (and END links) with live
        // table pages (the TraceHw contract, as for hardware); the index is
        // kept inside the page.
        unsafe { (*table).entries[index.min(TENTS_PER_PAGE - 1)] }
    }

    /// The bytes left before the end of the first STOP region ahead, if
    /// fewer than `len`: a unit of `len` bytes does not fit. `None` when it
    /// does (or the walk ends: the write itself finds out why).
    fn room_before_stop(&self, len: u64) -> Option<u64> {
        self.regs.settle();
        let mut base = self.regs.base();
        let mut pos = TopaPosition::from_mask_ptrs(0, self.regs.mask_ptrs());
        let mut room = 0;
        // A unit is at most UNIT_CAP bytes and a region at least 4 KiB: the
        // walk ends within the current region, an END link and the next.
        for _ in 0..8 {
            let entry = self.entry(base, pos.index);
            if entry.is_end() {
                base = entry.base();
                pos.index = 0;
                pos.offset = 0;
                continue;
            }
            room += entry.size().saturating_sub(pos.offset);
            if entry.stop() {
                return (room < len).then_some(room);
            }
            if room >= len {
                return None;
            }
            pos.index += 1;
            pos.offset = 0;
        }
        None
    }

    /// Single-range output: one range of `(MASK_PTRS & 0xffffffff) + 1`
    /// bytes at `OUTPUT_BASE`, wrapping at its end.
    fn emit_single(&self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.tracing() {
            // A PMI's set_output between two pieces takes effect here.
            self.regs.settle();
            let mask = self.regs.mask_ptrs();
            let size = (mask & 0xffff_ffff) + 1;
            let off = (mask >> 32) % size;
            let n = (size - off).min(bytes.len() as u64) as usize;
            let dst = self.phys.to_virt(self.regs.base() + off);
            // SAFETY: `dst..dst + n` lies in the range the driver programmed
            // (the AUX page it handed to the tracer).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
            self.written_piece(&bytes[..n]);
            bytes = &bytes[n..];
            let next = (off + n as u64) % size;
            self.regs.set_mask_ptrs((mask & 0xffff_ffff) | (next << 32));
            if let Some(f) = self.interrupt.get() {
                f();
            }
        }
    }

    /// Writes `bytes` through the ToPA tables at the output position, as
    /// the hardware would, region by region; stops where a STOP region
    /// fills. Returns whether every byte was written.
    fn emit_topa(&self, mut bytes: &[u8]) -> bool {
        let mut guard = 0;
        while !bytes.is_empty() && self.tracing() {
            guard += 1;
            if guard > 1 << 20 {
                // A table ring without regions: the hardware would hang; stop.
                self.halt(STATUS_ERROR);
                return false;
            }
            // A PMI's set_output between two pieces takes effect here.
            self.regs.settle();
            let mut pos = TopaPosition::from_mask_ptrs(0, self.regs.mask_ptrs());
            let entry = self.entry(self.regs.base(), pos.index);
            if entry.is_end() {
                self.regs.set_base(entry.base());
                pos.index = 0;
                pos.offset = 0;
                self.regs.set_mask_ptrs(pos.mask_ptrs());
                continue;
            }
            let room = entry.size() - pos.offset;
            if room == 0 {
                // A region left full by a STOP: nothing more is written.
                self.halt(STATUS_STOPPED);
                return false;
            }
            let n = room.min(bytes.len() as u64) as usize;
            let dst = self.phys.to_virt(entry.base() + pos.offset);
            // SAFETY: `dst..dst + n` lies in the region the entry describes,
            // memory the driver handed to the tracer (the AUX pages).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
            self.written_piece(&bytes[..n]);
            bytes = &bytes[n..];
            if let Some(f) = self.interrupt.get() {
                // The write position first, so that a PMI sees it.
                let mut at = pos;
                at.offset += n as u64;
                if at.offset < entry.size() {
                    self.regs.set_mask_ptrs(at.mask_ptrs());
                    f();
                }
            }
            pos.offset += n as u64;
            if pos.offset == entry.size() {
                if entry.int() {
                    self.pmi.store(self.pmi.load() + 1);
                }
                if entry.stop() {
                    self.regs.set_mask_ptrs(pos.mask_ptrs());
                    self.halt(STATUS_STOPPED);
                    return bytes.is_empty();
                }
                pos.index += 1;
                pos.offset = 0;
            }
            self.regs.set_mask_ptrs(pos.mask_ptrs());
        }
        bytes.is_empty()
    }
}

/// What a write into the window commits against (see
/// [`SoftTracer::commit`]): the output generation and position it started
/// in.
#[derive(Clone, Copy)]
struct WindowMark {
    generation: u64,
    mask_ptrs: u64,
}

/// Where a write puts its packets: the output of one write of the tracer
/// (one holding of `writing`), trace event by trace event, the packets of
/// each reaching the output whole or not at all (see [`SoftTracer::emit`]).
///
/// Where the write window holds more than an event's packets can take, they
/// are written straight into it (*direct*): every byte lands strictly
/// inside the current region, where no END link, INT or STOP can be met, so
/// the event's packets are whole by construction, and the output position
/// moves past them at the event's end (see [`SoftTracer::commit`]).
/// Otherwise they are gathered in the tracer's unit buffer and handed to
/// [`SoftTracer::emit`] at the end, which writes them all or pads the STOP
/// region instead.
///
/// The window is held here for the write, and stored back into the tracer
/// at its end and around every `emit` (which moves it).
///
/// A PMI may interrupt an event's direct write half done; it sees the
/// output position before the event (as it does a gathered one). When it
/// moved the output or left tracing off, the event's commit fails and its
/// bytes are gathered and emitted where the output is after the PMI (see
/// [`SoftTracer::commit`]).
struct Output<'t, 'p> {
    tracer: &'t SoftTracer<'p>,
    /// The write window: its free space starts here, ...
    window: *mut u8,
    /// ... and holds this many bytes (0: none), ...
    room: u64,
    /// ... for writes committed against this mark.
    mark: WindowMark,
    /// The current event's bytes are going to the window (else to the unit
    /// buffer).
    direct: bool,
    /// Bytes of the current event written and not handed out, at most
    /// `UNIT_CAP`.
    len: usize,
    /// Some of the current event's bytes were not written.
    dropped: bool,
}

impl<'t, 'p> Output<'t, 'p> {
    /// The output of a write of `tracer`, which must hold `writing` (its
    /// unit buffer is this output's until it is cleared).
    #[inline]
    fn new(tracer: &'t SoftTracer<'p>) -> Self {
        let (window, room, mark) = tracer.window();
        Output {
            tracer,
            window,
            room,
            mark,
            direct: room > UNIT_CAP as u64,
            len: 0,
            dropped: false,
        }
    }

    /// Takes the tracer's window again (after a PMI's write, or an `emit`);
    /// what is still to come of the current event goes direct only if it
    /// did and the window has room.
    #[inline]
    fn reload(&mut self) {
        let (window, room, mark) = self.tracer.window();
        self.window = window;
        self.room = room;
        self.mark = mark;
        self.direct &= room > UNIT_CAP as u64;
    }

    /// Stores the window back into the tracer (before an `emit`, and at the
    /// write's end).
    #[inline]
    fn store(&self) {
        self.tracer.window.store(self.window);
        self.tracer.window_room.store(self.room);
        self.tracer.window_gen.store(self.mark.generation);
    }

    /// Where the current event's next byte goes.
    #[inline(always)]
    fn dst(&self) -> *mut u8 {
        let base = if self.direct {
            self.window
        } else {
            self.tracer.unit.get().cast::<u8>()
        };
        base.wrapping_add(self.len)
    }

    /// Hands the bytes of the current event written so far to the output:
    /// moves the output position past them (direct), or emits them
    /// (gathered). An event that goes on after a flush gathers, as the
    /// window may have moved.
    #[inline(always)]
    fn flush(&mut self) {
        if self.len == 0 {
            return;
        }
        if self.direct {
            self.direct = false;
            if self.tracer.commit(self.mark, self.window, self.len) {
                self.window = self.window.wrapping_add(self.len);
                self.room -= self.len as u64;
                self.mark.mask_ptrs += (self.len as u64) << 32;
                self.len = 0;
                return;
            }
            // A PMI inside this event kept its bytes out (see
            // `SoftTracer::commit`): they go out again through `emit`.
            self.gather_window(self.len);
        }
        self.emit_gathered();
    }

    /// The current event's `n` bytes at the window, which did not commit
    /// (in `flush`, or the last event of a direct run), go to the unit
    /// buffer: the event goes on gathered, and ending it emits them where
    /// the output is now, without committing them a second time.
    fn gather_window(&mut self, n: usize) {
        let n = n.min(UNIT_CAP);
        // SAFETY: the event wrote its `n <= UNIT_CAP` bytes at `window`, the
        // AUX memory, which a PMI does not free; the unit buffer (this
        // output's, see `new`) holds `UNIT_CAP` bytes and is not the output.
        unsafe {
            core::ptr::copy_nonoverlapping(self.window, self.tracer.unit.get().cast::<u8>(), n)
        };
        self.len = n;
        self.direct = false;
    }

    /// [`flush`](Self::flush) of the bytes gathered in the unit buffer.
    #[inline(never)]
    fn emit_gathered(&mut self) {
        let unit = self.tracer.unit.get().cast::<u8>();
        // SAFETY: the first `len <= UNIT_CAP` bytes of the unit buffer were
        // written by this output, which holds it (`new`).
        let bytes = unsafe { core::slice::from_raw_parts(unit.cast_const(), self.len) };
        self.store();
        self.dropped |= !self.tracer.emit(bytes);
        self.reload();
        self.len = 0;
    }

    /// Ends the current trace event: writes what is left of its packets;
    /// returns whether every byte was written. The next event goes direct
    /// if the window has room for it.
    #[inline]
    fn end_event(&mut self) -> bool {
        self.flush();
        let delivered = !self.dropped;
        self.dropped = false;
        self.direct = self.room > UNIT_CAP as u64;
        delivered
    }

    /// Ends the write: the window goes back to the tracer.
    #[inline]
    fn close(self) {
        self.store();
    }

    /// Whether the next event can go straight into the window by
    /// [`PacketStream::feed_direct`]: nothing of an event is held, and the
    /// window has room for the most any event writes.
    #[inline(always)]
    fn direct_ready(&self) -> bool {
        self.len == 0 && self.room > UNIT_CAP as u64
    }
}

// A direct run's events fit where `direct_ready` lets it write.
const _: () = assert!(DIRECT_EVENT_MAX <= UNIT_CAP);

/// A write's [`Output`] as a direct run's: its window and mark, copied out
/// for the run and handed back at its end ([`finish`](Self::finish)), so
/// that they live in registers while the run writes through raw pointers.
/// `HOOKS` says whether the tracer's tap or interrupt hook is set
/// ([`SoftTracer::hooked`], read once for the run).
///
/// # Invariants
/// The free part of the window the output held when the run began starts
/// at `at` and ends `UNIT_CAP` bytes or more past `limit`: while
/// `at < limit`, more than `UNIT_CAP` bytes are free at `at`.
struct Direct<'t, 'p, const HOOKS: bool> {
    tracer: &'t SoftTracer<'p>,
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

impl<'t, 'p, const HOOKS: bool> Direct<'t, 'p, HOOKS> {
    /// The window of `out`, which is [`direct_ready`](Output::direct_ready).
    #[inline(always)]
    fn new(out: &Output<'t, 'p>) -> Self {
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
    fn finish(self, out: &mut Output<'t, 'p>) {
        let used = self.at as usize - out.window as usize;
        out.window = self.at;
        out.room -= used as u64;
        out.mark = self.mark;
        if !HOOKS {
            let written = &self.tracer.written;
            written.store(written.load() + used as u64);
        }
    }
}

impl<const HOOKS: bool> DirectOutput for Direct<'_, '_, HOOKS> {
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
        if !HOOKS {
            return;
        }
        if let Some(f) = self.tracer.interrupt.get() {
            f();
        }
    }

    #[inline(always)]
    fn commit(&mut self, n: usize) -> bool {
        let limit = &mut self.limit;
        let at = self.at;
        // INVARIANT: `limit` only comes nearer. A PMI came since the mark:
        // this event is the run's last (the window is the PMI's to judge,
        // and the general path takes a new one).
        if !self
            .tracer
            .commit_hooked::<HOOKS>(self.mark, at, n, || *limit = at)
        {
            return false;
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

impl PacketSink for Output<'_, '_> {
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        if bytes.len() <= UNIT_CAP - self.len {
            // SAFETY: the event's bytes start at the unit buffer or at the
            // window, which hold `UNIT_CAP` bytes and more than that (see
            // `end_event`), and `len + bytes.len() <= UNIT_CAP`; `bytes` is
            // a packet on the stack or a constant, not the output or the
            // unit buffer.
            unsafe { copy_to_memory(self.dst(), bytes) };
            self.len += bytes.len();
            if self.direct {
                if let Some(f) = self.tracer.interrupt.get() {
                    f();
                }
            }
        } else {
            self.write_split(bytes);
        }
    }
}

impl Output<'_, '_> {
    /// [`write`](PacketSink::write) of more than is left of `UNIT_CAP`:
    /// more than one event makes (UNIT_CAP bounds it), so the event's
    /// packets are split, still in order.
    #[cold]
    fn write_split(&mut self, bytes: &[u8]) {
        self.flush();
        if bytes.len() <= UNIT_CAP {
            // SAFETY: as in `write`, with `len` 0 after the flush.
            unsafe { copy_to_memory(self.dst(), bytes) };
            self.len = bytes.len();
        } else {
            self.store();
            self.dropped |= !self.tracer.emit(bytes);
            self.reload();
        }
    }
}

impl TraceHw for SoftTracer<'_> {
    fn enable(&self) {
        self.output_stopped.store(false);
        self.set_ctl(rtit_ctl::TRACE_EN, true);
    }

    fn disable(&self) {
        // Branches gathered but not emitted go out first, as the hardware
        // flushes its TNT buffer when TraceEn drops. When a PMI interrupted
        // a write, `writing` is set (the write holds the stream), so
        // nothing is flushed into the middle of that write: like the
        // hardware's, its writes are never split, and it completes once
        // tracing is on again.
        if self.tracing() && !self.writing.load() {
            self.writing.store(true);
            barrier();
            // SAFETY: `writing` was clear and is now set, as in `trace`.
            let stream = unsafe { (*self.stream.get()).as_mut() };
            // (A stop with no branch outcome waiting writes nothing: the
            // output is not opened, as on every snapshot's stop but the
            // first after a run of branches.)
            if let Some(stream) = stream.and_then(|s| (!s.stop_quietly()).then_some(s)) {
                let pending = stream.unwritten_events();
                let mut out = Output::new(self);
                stream.stop(&mut out);
                let delivered = out.end_event();
                out.close();
                if self.halted.load() {
                    // The flush met a STOP: lost are the events it held if
                    // it did not fit, else those no packet covers yet.
                    let end = self.events.load();
                    let uncovered = if delivered {
                        stream.unwritten_events()
                    } else {
                        pending
                    };
                    self.resync(stream, end.saturating_sub(uncovered)..end);
                }
            }
            barrier();
            self.regs.release(&self.writing);
        }
        self.set_ctl(rtit_ctl::TRACE_EN, false);
    }

    fn enabled(&self) -> bool {
        self.tracing()
    }

    fn set_topa(&self, topa: bool) {
        self.set_ctl(rtit_ctl::TOPA, topa);
    }

    fn set_output(&self, base: u64, mask_ptrs: u64) {
        self.next_generation();
        // Inside a write (this is a PMI's call), deferred until the writer
        // settles (see `OutputRegs`).
        self.regs.set(self.writing.load(), base, mask_ptrs);
    }

    fn output(&self) -> (u64, u64) {
        self.regs.read()
    }

    fn configure(&self, config: PtConfig) {
        if config != self.config() {
            // A new configuration: the next packet starts a new stream
            // (PSB+ first). Drivers configure with tracing off.
            self.next_generation();
            let ctl = self.ctl.load();
            self.ctl.store(ctl & !rtit_ctl::CONFIG | config.rtit_ctl());
            if !self.tracing() && !self.writing.load() {
                // SAFETY: `writing` is clear: no reference to the stream
                // exists (the invariant); this write ends here.
                unsafe { *self.stream.get() = None };
            }
        }
    }

    fn status(&self) -> u64 {
        self.status.load() | (self.packet_byte_cnt() << 32)
    }

    fn set_status(&self, status: u64) {
        self.status.store(status & !STATUS_PACKET_BYTE_CNT);
        let count = (status & STATUS_PACKET_BYTE_CNT) >> 32;
        if count != self.packet_byte_cnt() {
            // Only 0 can be written in effect: the count restarts, and the
            // hardware sends a PSB when it is 0 (see `fresh`).
            self.packet_bytes.store(0);
            self.fresh.store(true);
            self.next_generation();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
