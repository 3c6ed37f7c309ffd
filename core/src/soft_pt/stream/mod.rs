// SPDX-License-Identifier: MIT OR Apache-2.0
//! The packet stream a tracer produces for what a CPU executes, with the
//! rules Intel PT hardware follows (Intel SDM vol. 3C, "Intel Processor
//! Trace"), so that a real decoder (Linux perf's `intel-pt-decoder.c`) can
//! walk the traced code with it:
//!
//! - conditional branches are TNT bits, gathered and flushed before any
//!   other packet; direct jumps and calls make no packet at all;
//! - indirect branches and far transfers are TIP; a near return is a taken
//!   TNT bit when return compression is on and it returns to the call site
//!   of the matching call the tracer saw since the last PSB (within the
//!   hardware's 64-entry call stack), a TIP otherwise;
//! - an asynchronous event (interrupt, exception, the PMI, a context switch)
//!   is `FUP(ip)`, where `ip` is the next instruction to execute, then `TIP`
//!   to the handler, or `TIP.PGD` when the handler is not traced;
//! - `TIP.PGE(ip)` when tracing (re)starts;
//! - a PSB+ block (PSB, FUP of the next instruction, MODE.Exec, TSC, CBR,
//!   PSBEND) every PSB period, after which IPs are compressed from scratch
//!   and no return is compressed against a call before it (perf's decoder
//!   clears its call stack at every PSB);
//! - in cycle-accurate mode (`cyc`), a CYC packet before each packet that
//!   times an instruction or event: the TNT packet of a branch that starts
//!   one (a CYC times its first branch only, as on hardware), TIP, TIP.PGE,
//!   TIP.PGD, FUP, and TSC. The cycle model: the core clock is the
//!   timestamp counter (the clock the platform gives, see
//!   [`PacketStream::set_clock`]), so that a CYC counts the TSC ticks since
//!   the last one, and a core:bus ratio equal to the TSC's (what perf's
//!   decoder takes as the maximum non-turbo ratio when the PMU reports
//!   none: TSC frequency / 100 MHz) makes perf's cycle-to-TSC factor 1.
//!   The counter starts from zero with each stream, as the hardware's
//!   resets when TriggerEn is cleared.
//!
//! ```
//! use perfaux::soft_pt::stream::{PacketSink, PacketStream, TraceEvent};
//! struct Bytes(Vec<u8>);
//! impl PacketSink for Bytes {
//!     fn write(&mut self, bytes: &[u8]) { self.0.extend_from_slice(bytes) }
//! }
//! let mut out = Bytes(Vec::new());
//! let mut s = PacketStream::new(4096);
//! s.set_clock(1000);
//! s.feed(TraceEvent::Enable(0x40_1000), &mut out);
//! s.feed(TraceEvent::Call { target: 0x40_2000, ret: 0x40_1005, indirect: false }, &mut out);
//! s.feed(TraceEvent::Return { target: 0x40_1005 }, &mut out); // compressed: one TNT bit
//! s.feed(TraceEvent::Async { from: 0x40_1010, to: None }, &mut out); // FUP + TIP.PGD
//! // The return's TNT bit, FUP (16 bits of IP changed), TIP.PGD (no IP).
//! assert_eq!(&out.0[out.0.len() - 5..], &[0b110, 0x3d, 0x10, 0x10, 0x01]);
//! ```

mod direct;

pub(crate) use direct::{DIRECT_EVENT_MAX, DirectOutput, DirectRun};

use super::packet::{
    ExecMode, IpCompressor, IpPacket, LONG_TNT_MAX, OVF, PAD, PSB, PSBEND, SHORT_TNT_MAX, cbr, cyc,
    long_tnt, mode_exec, mtc, short_tnt, tsc,
};
use crate::lbr::BranchKind;
use crate::pt::config::PtConfig;

/// Where packet bytes go.
pub trait PacketSink {
    /// Appends `bytes`.
    fn write(&mut self, bytes: &[u8]);
}

/// What happened on the traced CPU, as the tracer sees it: each
/// control-flow instruction that retired (with where execution goes next),
/// asynchronous events, and changes of tracing state, mode and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceEvent {
    /// A conditional branch (Jcc, LOOP, JRCXZ): one TNT bit. `next` is
    /// where execution continues: the target if taken, else the
    /// instruction after the branch.
    Conditional {
        /// Whether the branch was taken.
        taken: bool,
        /// The next instruction.
        next: u64,
    },
    /// A direct near JMP: no packet.
    Jump {
        /// Its target.
        target: u64,
    },
    /// A near CALL: no packet if direct, a TIP if indirect. The return
    /// address goes on the return-compression stack.
    Call {
        /// The callee.
        target: u64,
        /// The instruction after the call (where the matching return goes).
        ret: u64,
        /// An indirect call (through a register or memory).
        indirect: bool,
    },
    /// A near RET to `target`: a taken TNT bit if compressed, else a TIP.
    Return {
        /// Where it returned to.
        target: u64,
    },
    /// An indirect near JMP, or a far transfer (IRET, SYSRET, far JMP or
    /// CALL): a TIP.
    Indirect {
        /// Its target.
        target: u64,
    },
    /// An asynchronous event (interrupt, exception, PMI) taken with `from`
    /// the next instruction to execute: `FUP(from)`, then `TIP(to)` into a
    /// traced handler, or `TIP.PGD` (no IP) when `to` is `None`, the handler
    /// not traced (`exclude_kernel`), which disables packet generation.
    Async {
        /// The next instruction of the interrupted code.
        from: u64,
        /// The handler, if it is traced.
        to: Option<u64>,
    },
    /// Packet generation (re)starts at `ip`: TIP.PGE.
    Enable(u64),
    /// Packet generation stops synchronously, at a branch into code that is
    /// not traced: TIP.PGD with that branch's target, if known.
    Disable(Option<u64>),
    /// The execution mode changed (MODE.Exec).
    Mode(ExecMode),
    /// The timestamp counter reads `tsc`: a TSC packet (if TSC packets are
    /// on), and the clock of later PSB+ blocks.
    Time(u64),
    /// The core:bus ratio changed (CBR); 0 is no ratio known, which
    /// writes nothing.
    Frequency(u8),
    /// A mini time counter tick (MTC).
    Tick(u8),
    /// Padding (PAD).
    Pad,
    /// The tracer lost packets (OVF).
    Overflow,
}

impl TraceEvent {
    /// The kind of the taken branch this event reports, as a last-branch
    /// record keeps it: `None` for a conditional branch not taken and for
    /// what is no branch instruction (asynchronous exits, changes of
    /// tracing state, time).
    pub const fn branch_kind(&self) -> Option<BranchKind> {
        match self {
            TraceEvent::Conditional { taken: true, .. } => Some(BranchKind::Conditional),
            TraceEvent::Jump { .. } => Some(BranchKind::Jump),
            TraceEvent::Call {
                indirect: false, ..
            } => Some(BranchKind::Call),
            TraceEvent::Call { indirect: true, .. } => Some(BranchKind::IndirectCall),
            TraceEvent::Return { .. } => Some(BranchKind::Return),
            TraceEvent::Indirect { .. } => Some(BranchKind::IndirectJump),
            _ => None,
        }
    }
}

/// The bits of the timestamp counter a TSC packet carries.
const TSC_MASK: u64 = (1 << 56) - 1;

/// The core:bus ratio of a clock of `tsc_khz` kHz: its frequency in
/// units of the 100 MHz bus clock, rounded, as perf's decoder takes a TSC
/// frequency for the maximum non-turbo ratio when the PMU reports none
/// (`intel_pt_process_auxtrace_info()`);
/// 0 (none) for 0, and at most 255, what a CBR holds.
///
/// ```
/// use perfaux::soft_pt::stream::tsc_ratio;
/// assert_eq!(tsc_ratio(2_593_906), 26);
/// assert_eq!(tsc_ratio(0), 0);
/// assert_eq!(tsc_ratio(10_000), 1); // below 100 MHz still runs
/// ```
pub const fn tsc_ratio(tsc_khz: u32) -> u8 {
    if tsc_khz == 0 {
        return 0;
    }
    let r = (tsc_khz as u64 + 50_000) / 100_000;
    if r == 0 {
        1
    } else if r > 255 {
        255
    } else {
        r as u8
    }
}

/// When a CYC packet goes before a CYC-eligible one.
#[derive(Clone, Copy)]
enum CycWhen {
    /// When any cycles have passed, as many as `CycThresh` asks
    /// (`2^(n-1)` for n > 0).
    Counted,
    /// Whatever the count (before a TSC).
    Always,
}

/// The hardware's return-compression call stack depth.
pub const RETURN_STACK_DEPTH: usize = 64;

/// The return addresses of the calls the tracer saw, newest last; the
/// oldest is dropped when it overflows (its return is then a TIP).
#[derive(Clone, Copy, Debug)]
struct ReturnStack {
    ring: [u64; RETURN_STACK_DEPTH],
    /// Index of the next push.
    top: usize,
    /// Entries held, at most `RETURN_STACK_DEPTH`.
    len: usize,
}

impl ReturnStack {
    const EMPTY: ReturnStack = ReturnStack {
        ring: [0; RETURN_STACK_DEPTH],
        top: 0,
        len: 0,
    };

    // Indices are taken modulo the depth where they are used, so that no
    // bounds check (a panic path) is needed on the PMI side.
    fn push(&mut self, ret: u64) {
        self.ring[self.top % RETURN_STACK_DEPTH] = ret;
        self.top = (self.top + 1) % RETURN_STACK_DEPTH;
        self.len = (self.len + 1).min(RETURN_STACK_DEPTH);
    }

    /// Pops the newest entry (every return pops, as perf's decoder pops
    /// its stack at every RET) and says whether it is `target`.
    fn pop_is(&mut self, target: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        self.top = (self.top + RETURN_STACK_DEPTH - 1) % RETURN_STACK_DEPTH;
        self.len -= 1;
        self.ring[self.top % RETURN_STACK_DEPTH] == target
    }

    fn clear(&mut self) {
        self.len = 0;
    }
}

/// The tracer's packet generator.
#[derive(Clone)]
pub struct PacketStream {
    config: PtConfig,
    ip: IpCompressor,
    /// Branch outcomes not yet emitted, oldest most significant.
    ///
    /// INVARIANT: `tnt_bits < 1 << tnt_count`: only the outcomes' bits are
    /// set (each outcome shifts one bit in; emitting them clears both).
    tnt_bits: u64,
    tnt_count: u8,
    /// Bytes between PSBs (`RTIT_CTL.PSBFreq`: the base << n).
    psb_period: u64,
    since_psb: u64,
    /// The next instruction to execute (the PSB+ FUP).
    current_ip: u64,
    /// Packet generation is on (PacketEn).
    enabled: bool,
    mode: ExecMode,
    /// The timestamp counter.
    clock: u64,
    ratio: u8,
    /// In cycle-accurate mode, the clock at the last CYC packet, or when
    /// the cycle counter started (the first clock the stream had): `None`
    /// before then.
    cycles_from: Option<u64>,
    returns: ReturnStack,
    /// Events fed so far.
    events: u64,
    /// The index of the event of the newest TNT bit gathered, while there
    /// are bits (`tnt_count > 0`): only emitting them reads it, to move
    /// `covered` past it. With none it means nothing, and the direct run
    /// leaves it as it is where a TIP empties the bits.
    last_bit: u64,
    /// The events a decoder has walked past once it has every packet handed
    /// out so far: those up to the newest TNT bit flushed or IP packet put.
    /// The events after them (direct jumps and calls, which make no packet,
    /// among them) it reaches only with a later packet.
    covered: u64,
}

/// Every field but `last_bit` while no TNT bit is pending, where it means
/// nothing: two generators that will make the same packets print alike.
impl core::fmt::Debug for PacketStream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut s = f.debug_struct("PacketStream");
        s.field("config", &self.config)
            .field("ip", &self.ip)
            .field("tnt_bits", &self.tnt_bits)
            .field("tnt_count", &self.tnt_count)
            .field("psb_period", &self.psb_period)
            .field("since_psb", &self.since_psb)
            .field("current_ip", &self.current_ip)
            .field("enabled", &self.enabled)
            .field("mode", &self.mode)
            .field("clock", &self.clock)
            .field("ratio", &self.ratio)
            .field("cycles_from", &self.cycles_from)
            .field("returns", &self.returns)
            .field("events", &self.events);
        if self.tnt_count > 0 {
            s.field("last_bit", &self.last_bit);
        }
        s.field("covered", &self.covered).finish()
    }
}

impl PacketStream {
    /// A generator with the default configuration ([`PtConfig::default`]
    /// with TSC on) emitting a PSB+ every `psb_period` bytes (at least 256).
    pub fn new(psb_period: u64) -> PacketStream {
        let config = PtConfig {
            tsc: true,
            ..PtConfig::default()
        };
        PacketStream::with_config(psb_period, config)
    }

    /// A generator for `config`, whose `psb_freq` 0 is `psb_base` bytes
    /// (2 KiB on hardware; at least 256): a PSB+ every `psb_base <<
    /// config.psb_freq` bytes.
    pub fn with_config(psb_base: u64, config: PtConfig) -> PacketStream {
        PacketStream {
            config,
            ip: IpCompressor::default(),
            tnt_bits: 0,
            tnt_count: 0,
            psb_period: psb_base.clamp(256, 1 << 40) << config.psb_freq.min(15),
            since_psb: u64::MAX, // the first packet is preceded by a PSB+
            current_ip: 0,
            enabled: false,
            mode: ExecMode::Bits64,
            clock: 0,
            ratio: 0,
            cycles_from: None,
            returns: ReturnStack::EMPTY,
            events: 0,
            last_bit: 0,
            covered: 0,
        }
    }

    /// The PSB period in bytes.
    pub fn psb_period(&self) -> u64 {
        self.psb_period
    }

    /// The configuration.
    pub fn config(&self) -> PtConfig {
        self.config
    }

    /// The timestamp counter now reads `tsc` (no packet): later PSB+
    /// blocks carry it, as the hardware's carry the running TSC, and in
    /// cycle-accurate mode the next CYC counts the cycles up to it.
    pub fn set_clock(&mut self, tsc: u64) {
        self.clock = tsc & TSC_MASK;
        if self.cycles_from.is_none() && self.config.cyc {
            self.cycles_from = Some(self.clock);
        }
    }

    /// The core:bus ratio the CPU runs at (no packet): every later PSB+
    /// carries it in a CBR, as a `Frequency` event's does. 0: none known,
    /// no CBR.
    pub fn set_ratio(&mut self, ratio: u8) {
        self.ratio = ratio;
    }

    /// Whether packet generation is on (after TIP.PGE, before TIP.PGD).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Bytes emitted since the last PSB (`RTIT_STATUS.PacketByteCnt`),
    /// `u64::MAX` before the first.
    pub fn packet_bytes(&self) -> u64 {
        self.since_psb
    }

    /// How many of the events fed last a decoder would not walk past with
    /// the packets handed out so far: those after the newest TNT bit or IP
    /// packet out (pending TNT bits, and direct jumps and calls, which make
    /// no packet of their own). A tracer that loses the next packets loses
    /// those events too.
    pub fn unwritten_events(&self) -> u64 {
        self.events - self.covered
    }

    /// The packets handed out since the output last took one were lost
    /// (a ToPA STOP region filled): the stream starts over where a decoder
    /// can find it again. The pending TNT bits go, packet generation is off
    /// until the next TIP.PGE (the STOP cleared TriggerEn, which PacketEn
    /// needs), the return stack and IP compression are forgotten, and the
    /// next packet is a PSB+ (Intel PT may send one "for other
    /// micro-architectural conditions", SDM vol. 3C, PSB packet); the time,
    /// the core:bus ratio and the mode are kept, as the hardware keeps them.
    pub fn resync(&mut self) {
        self.tnt_bits = 0;
        self.tnt_count = 0;
        self.enabled = false;
        self.returns.clear();
        self.ip.reset();
        self.since_psb = u64::MAX;
        // What was not covered is lost (the caller accounts for it).
        self.covered = self.events;
    }

    /// [`feed`](Self::feed) of a conditional branch when that only gathers
    /// its TNT bit: packet generation on, no PSB+ due and room for the bit
    /// with no TNT packet to emit. Returns `false`, having done nothing,
    /// when it would emit a packet (feed it then).
    #[inline(always)]
    pub fn try_tnt(&mut self, taken: bool, next: u64) -> bool {
        let branch = TraceEvent::Conditional { taken, next };
        self.gather_tnt(core::slice::from_ref(&branch), || true) == 1
    }

    /// [`try_tnt`](Self::try_tnt) for the conditional branches at the start
    /// of `events`, while `go_on` says so (it is asked before each: a
    /// tracer's PMI may have stopped it between two events). Returns how
    /// many were gathered; feed the next event (if any) then.
    ///
    /// The TNT buffer stays in registers for the run: the bits of a loop's
    /// worth of branches cost a shift and an or each.
    #[inline(always)]
    pub fn gather_tnt(&mut self, events: &[TraceEvent], mut go_on: impl FnMut() -> bool) -> usize {
        if self.since_psb >= self.psb_period || !(self.enabled && self.config.branches) {
            return 0;
        }
        // The first bit of a TNT packet is timed by a CYC before it.
        if self.config.cyc && self.tnt_count == 0 {
            return 0;
        }
        let (mut bits, mut count, mut ip) = (self.tnt_bits, self.tnt_count, self.current_ip);
        let mut n = 0;
        for &event in events {
            let TraceEvent::Conditional { taken, next } = event else {
                break;
            };
            // One bit short of a full long TNT: the bit that fills it is
            // fed, which emits the packet.
            if count + 1 >= LONG_TNT_MAX || !go_on() {
                break;
            }
            bits = (bits << 1) | u64::from(taken);
            count += 1;
            ip = next;
            n += 1;
        }
        if n > 0 {
            self.tnt_bits = bits;
            self.tnt_count = count;
            self.current_ip = ip;
            self.events += n as u64;
            self.last_bit = self.events - 1;
        }
        n
    }

    /// Emits the packets for `event` into `sink`.
    ///
    /// The events of a program's every few instructions (branches, calls,
    /// returns, timestamps) are handled here, inline in the caller's loop;
    /// the rest (asynchronous events, mode and tracing changes) out of line.
    #[inline(always)]
    pub fn feed<S: PacketSink + ?Sized>(&mut self, event: TraceEvent, sink: &mut S) {
        self.events += 1;
        if self.since_psb >= self.psb_period {
            // The PSB+ carries the TSC as it reads now: a Time event's, if
            // that is what brought the PSB+ on. The clock held from before
            // may be far behind it: a tracer's clock moves only while it
            // traces, and a per-task trace comes to a CPU whose tracer last
            // ran some other time (its PSB+ would put a TSC in the buffer
            // lower than the other CPU's packets before it).
            // Likewise its CBR the ratio a Frequency event sets: a PSB+
            // before the first one would have none to give.
            match event {
                TraceEvent::Time(t) => self.set_clock(t),
                TraceEvent::Frequency(r) if r != 0 => self.ratio = r,
                _ => {}
            }
            self.flush_tnt(sink);
            self.psb_plus(sink);
        }
        // Branch packets need BranchEn and PacketEn (between TIP.PGE and
        // TIP.PGD); timing, mode and PSB+ packets only TraceEn.
        let branches = self.config.branches && self.enabled;
        match event {
            TraceEvent::Conditional { taken, next } => {
                if branches {
                    self.tnt(taken, sink);
                }
                self.current_ip = next;
            }
            TraceEvent::Jump { target } => self.current_ip = target,
            TraceEvent::Call {
                target,
                ret,
                indirect,
            } => {
                if branches && indirect {
                    self.tip(IpPacket::Tip, Some(target), sink);
                }
                self.returns.push(ret);
                self.current_ip = target;
            }
            TraceEvent::Return { target } => {
                if branches {
                    if self.config.return_compression && self.returns.pop_is(target) {
                        self.tnt(true, sink);
                    } else {
                        // A return not compressed empties the stack: libipt
                        // pops only on compressed returns, perf's decoder
                        // on every one, so only an empty stack leaves both
                        // pairing the next compressed return alike.
                        self.returns.clear();
                        self.tip(IpPacket::Tip, Some(target), sink);
                    }
                }
                self.current_ip = target;
            }
            TraceEvent::Indirect { target } => {
                if branches {
                    self.tip(IpPacket::Tip, Some(target), sink);
                }
                self.current_ip = target;
            }
            TraceEvent::Time(t) => {
                self.set_clock(t);
                if self.config.tsc {
                    self.flush_tnt(sink);
                    // Always, even of 0 cycles or below the threshold:
                    // perf's decoder counts the cycles after a TSC from it
                    // only when a CYC came just before it
                    // (intel_pt_calc_tsc_timestamp()).
                    self.cycles(CycWhen::Always, sink);
                    self.put(&tsc(self.clock), sink);
                }
            }
            _ => self.feed_rare(event, branches, sink),
        }
    }

    /// [`feed`](Self::feed) of the events that are not a program's every
    /// few instructions.
    #[inline(never)]
    fn feed_rare<S: PacketSink + ?Sized>(
        &mut self,
        event: TraceEvent,
        branches: bool,
        sink: &mut S,
    ) {
        match event {
            TraceEvent::Async { from, to } => {
                if branches {
                    self.tip(IpPacket::Fup, Some(from), sink);
                }
                match to {
                    Some(handler) => {
                        if branches {
                            self.tip(IpPacket::Tip, Some(handler), sink);
                        }
                        self.current_ip = handler;
                    }
                    None if self.enabled => self.disable(None, sink),
                    None => {}
                }
            }
            TraceEvent::Enable(ip) => {
                self.tip(IpPacket::TipPge, Some(ip), sink);
                self.current_ip = ip;
                self.enabled = true;
                self.returns.clear();
            }
            TraceEvent::Disable(ip) => {
                if self.enabled {
                    self.disable(ip, sink);
                }
            }
            TraceEvent::Mode(mode) => {
                self.flush_tnt(sink);
                self.mode = mode;
                self.put(&mode_exec(mode), sink);
            }
            // A ratio of 0 is none known: no CBR says it (the hardware
            // never writes one; libipt refuses it, perf's decoder would
            // divide by it).
            TraceEvent::Frequency(0) => {}
            TraceEvent::Frequency(r) => {
                self.flush_tnt(sink);
                self.ratio = r;
                self.put(&cbr(r), sink);
            }
            TraceEvent::Tick(c) => {
                self.flush_tnt(sink);
                self.put(&mtc(c), sink);
            }
            TraceEvent::Pad => {
                self.flush_tnt(sink);
                self.put(&[PAD], sink);
            }
            TraceEvent::Overflow => {
                self.flush_tnt(sink);
                self.returns.clear();
                self.put(&OVF, sink);
            }
            // `feed`'s own, which it never hands here.
            TraceEvent::Conditional { .. }
            | TraceEvent::Jump { .. }
            | TraceEvent::Call { .. }
            | TraceEvent::Return { .. }
            | TraceEvent::Indirect { .. }
            | TraceEvent::Time(_) => {}
        }
    }

    /// Emits the branch outcomes gathered so far (before a stop, say).
    #[inline(always)]
    pub fn flush_tnt<S: PacketSink + ?Sized>(&mut self, sink: &mut S) {
        if self.tnt_count > 0 {
            self.put_tnt(sink);
        }
    }

    /// [`flush_tnt`](Self::flush_tnt) with bits gathered (`tnt_count` > 0).
    #[inline(never)]
    fn put_tnt<S: PacketSink + ?Sized>(&mut self, sink: &mut S) {
        match self.tnt_count {
            n if n <= SHORT_TNT_MAX => self.put(&[short_tnt(self.tnt_bits as u8, n)], sink),
            n => self.put(&long_tnt(self.tnt_bits, n), sink),
        }
        self.covered = self.covered.max(self.last_bit + 1);
        self.tnt_bits = 0;
        self.tnt_count = 0;
    }

    /// [`stop`](Self::stop) when no branch outcome waits to be emitted, so
    /// that no packet is made: `false`, having done nothing, when some do.
    #[inline]
    pub fn stop_quietly(&mut self) -> bool {
        if self.tnt_count > 0 {
            return false;
        }
        self.returns.clear();
        true
    }

    /// Tracing stops (TraceEn cleared): the return stack is forgotten, as
    /// the decoder cannot know what ran meanwhile.
    pub fn stop<S: PacketSink + ?Sized>(&mut self, sink: &mut S) {
        self.flush_tnt(sink);
        self.returns.clear();
    }

    #[inline(always)]
    fn tnt<S: PacketSink + ?Sized>(&mut self, taken: bool, sink: &mut S) {
        if self.tnt_count == 0 {
            self.cycles(CycWhen::Counted, sink);
        }
        // This event's (`feed` counted it already).
        self.last_bit = self.events - 1;
        self.tnt_bits = (self.tnt_bits << 1) | u64::from(taken);
        self.tnt_count += 1;
        if self.tnt_count == LONG_TNT_MAX {
            self.flush_tnt(sink);
        }
    }

    fn disable<S: PacketSink + ?Sized>(&mut self, ip: Option<u64>, sink: &mut S) {
        self.tip(IpPacket::TipPgd, ip, sink);
        self.enabled = false;
        self.returns.clear();
    }

    /// The PSB+ block: PSB, the next instruction (FUP, when packets are
    /// generated), MODE.Exec, TSC (if on), CBR (once a ratio is known), PSBEND. IP compression and
    /// return compression restart after it.
    #[cold]
    fn psb_plus<S: PacketSink + ?Sized>(&mut self, sink: &mut S) {
        self.since_psb = 0;
        self.put(&PSB, sink);
        self.ip.reset();
        self.returns.clear();
        if self.enabled && self.config.branches {
            // A decoder walks to this FUP, past every event before the
            // current one. The whole IP: a decoder may read it before it
            // takes the PSB's reset of the last IP (IpCompressor::
            // encode_whole).
            let (packet, n) = self.ip.encode_whole(IpPacket::Fup, self.current_ip);
            self.put(packet.get(..n).unwrap_or(&packet), sink);
            self.covered = self.covered.max(self.events.saturating_sub(1));
        }
        self.put(&mode_exec(self.mode), sink);
        if self.config.tsc {
            self.put(&tsc(self.clock), sink);
        }
        // No CBR before a ratio is known (see `feed`'s Frequency(0)).
        if self.ratio != 0 {
            self.put(&cbr(self.ratio), sink);
        }
        self.put(&PSBEND, sink);
    }

    /// An IP packet of the current event, after the branch bits gathered
    /// before it: a decoder walks up to it.
    #[inline(always)]
    fn tip<S: PacketSink + ?Sized>(&mut self, kind: IpPacket, ip: Option<u64>, sink: &mut S) {
        self.flush_tnt(sink);
        self.cycles(CycWhen::Counted, sink);
        self.ip_packet(kind, ip, sink);
        self.covered = self.events;
    }

    /// In cycle-accurate mode, the CYC packet that times the packet about
    /// to be put, `when` says: the cycles counted go into it and counting
    /// starts again.
    #[inline(always)]
    fn cycles<S: PacketSink + ?Sized>(&mut self, when: CycWhen, sink: &mut S) {
        if self.config.cyc {
            self.put_cycles(when, sink);
        }
    }

    #[inline(never)]
    fn put_cycles<S: PacketSink + ?Sized>(&mut self, when: CycWhen, sink: &mut S) {
        let Some(from) = self.cycles_from else {
            return;
        };
        let n = self.clock.wrapping_sub(from) & TSC_MASK;
        let least = match (when, self.config.cyc_thresh) {
            (CycWhen::Always, _) => 0,
            (CycWhen::Counted, 0) => 1,
            (CycWhen::Counted, t) => 1u64 << (t.min(15) - 1),
        };
        if n < least {
            return;
        }
        let (packet, len) = cyc(n);
        self.put(packet.get(..len).unwrap_or(&packet), sink);
        self.cycles_from = Some(self.clock);
    }

    #[inline(always)]
    fn ip_packet<S: PacketSink + ?Sized>(&mut self, kind: IpPacket, ip: Option<u64>, sink: &mut S) {
        let (packet, n) = self.ip.encode_packed(kind, ip);
        self.put(packet.get(..n).unwrap_or(&packet), sink);
    }

    #[inline(always)]
    fn put<S: PacketSink + ?Sized>(&mut self, bytes: &[u8], sink: &mut S) {
        self.since_psb = self.since_psb.saturating_add(bytes.len() as u64);
        sink.write(bytes);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::soft_pt::packet::{IpBytes, PSB};

    #[test]
    fn a_trace_event_says_the_kind_of_its_taken_branch() {
        let c = |taken| TraceEvent::Conditional { taken, next: 1 };
        assert_eq!(c(true).branch_kind(), Some(BranchKind::Conditional));
        assert_eq!(c(false).branch_kind(), None);
        let call = |indirect| TraceEvent::Call {
            target: 1,
            ret: 2,
            indirect,
        };
        assert_eq!(call(false).branch_kind(), Some(BranchKind::Call));
        assert_eq!(call(true).branch_kind(), Some(BranchKind::IndirectCall));
        assert_eq!(
            TraceEvent::Jump { target: 1 }.branch_kind(),
            Some(BranchKind::Jump)
        );
        assert_eq!(
            TraceEvent::Return { target: 1 }.branch_kind(),
            Some(BranchKind::Return)
        );
        assert_eq!(
            TraceEvent::Indirect { target: 1 }.branch_kind(),
            Some(BranchKind::IndirectJump)
        );
        assert_eq!(TraceEvent::Async { from: 1, to: None }.branch_kind(), None);
        assert_eq!(TraceEvent::Enable(1).branch_kind(), None);
    }

    /// The bytes a stream makes (the fast path's tests take it too).
    pub(super) struct Bytes(pub(super) Vec<u8>);
    impl PacketSink for Bytes {
        fn write(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }
    }

    /// A stream already past its first PSB+, tracing at `ip`.
    fn tracing(config: PtConfig, ip: u64) -> (PacketStream, Bytes) {
        let mut s = PacketStream::with_config(1 << 20, config);
        let mut out = Bytes(Vec::new());
        s.feed(TraceEvent::Enable(ip), &mut out);
        out.0.clear();
        (s, out)
    }

    const RETCOMP: PtConfig = PtConfig {
        tsc: true,
        return_compression: true,
        branches: true,
        psb_freq: 0,
        cyc: false,
        cyc_thresh: 0,
    };

    #[test]
    fn an_asynchronous_disable_is_fup_then_tip_pgd() {
        let (mut s, mut out) = tracing(RETCOMP, 0x40_1000);
        s.feed(
            TraceEvent::Async {
                from: 0x40_1234,
                to: None,
            },
            &mut out,
        );
        // FUP with 16 bits of IP, then TIP.PGD with the IP suppressed.
        assert_eq!(out.0, [0x3d, 0x34, 0x12, IpPacket::TipPgd.opcode()]);
        assert!(!s.enabled());
        // Nothing for branches until TIP.PGE; time still flows.
        out.0.clear();
        s.feed(
            TraceEvent::Conditional {
                taken: true,
                next: 0x40_2000,
            },
            &mut out,
        );
        s.feed(TraceEvent::Indirect { target: 0x40_3000 }, &mut out);
        s.feed(
            TraceEvent::Async {
                from: 0x40_3000,
                to: None,
            },
            &mut out,
        );
        s.feed(TraceEvent::Disable(None), &mut out);
        assert!(out.0.is_empty());
        s.feed(TraceEvent::Time(77), &mut out);
        assert_eq!(out.0, tsc(77));
    }

    #[test]
    fn an_interrupt_into_traced_code_is_fup_then_tip() {
        let (mut s, mut out) = tracing(RETCOMP, 0x40_1000);
        s.feed(
            TraceEvent::Conditional {
                taken: false,
                next: 0x40_1006,
            },
            &mut out,
        );
        s.feed(
            TraceEvent::Async {
                from: 0x40_1006,
                to: Some(0x40_8000),
            },
            &mut out,
        );
        // The TNT bit first, then FUP and TIP.
        assert_eq!(out.0, [short_tnt(0, 1), 0x3d, 0x06, 0x10, 0x2d, 0x00, 0x80]);
    }

    #[test]
    fn the_psb_fup_is_the_next_instruction() {
        let mut s = PacketStream::with_config(256, RETCOMP);
        let mut out = Bytes(Vec::new());
        s.feed(TraceEvent::Enable(0x40_0000), &mut out);
        // Direct jumps and calls make no packet but move the IP: fill a
        // period with them and conditional branches, then look at the FUP
        // of the second PSB+.
        let mut ip = 0x40_0000;
        let mut expected = Vec::new();
        while out.0.len() < 600 {
            let psbs_before = out.0.windows(16).filter(|w| *w == PSB).count();
            expected.push(ip);
            let next = ip + 0x40;
            let event = match ip / 0x40 % 3 {
                0 => TraceEvent::Jump { target: next },
                1 => TraceEvent::Conditional { taken: true, next },
                _ => TraceEvent::Indirect { target: next },
            };
            s.feed(event, &mut out);
            let psbs_after = out.0.windows(16).filter(|w| *w == PSB).count();
            if psbs_after > psbs_before {
                let at = out.0.windows(16).rposition(|w| w == PSB).unwrap() + 16;
                // FUP with the whole IP (48 bits sign-extended), which no
                // last IP can change.
                assert_eq!(out.0[at] >> 5, IpBytes::SignExtended48 as u8);
                let mut six = [0u8; 4];
                six.copy_from_slice(&out.0[at + 1..at + 5]);
                assert_eq!(&out.0[at + 5..at + 7], &[0, 0]);
                let fup = u32::from_le_bytes(six);
                assert_eq!(
                    u64::from(fup),
                    ip,
                    "the IP before the event that follows the PSB+"
                );
                return;
            }
            ip = next;
        }
        panic!("no second PSB");
    }

    #[test]
    fn returns_compress_to_their_call_sites_only() {
        let (mut s, mut out) = tracing(RETCOMP, 0x40_1000);
        let call = |s: &mut PacketStream, out: &mut Bytes, ret| {
            s.feed(
                TraceEvent::Call {
                    target: 0x40_5000,
                    ret,
                    indirect: false,
                },
                out,
            )
        };
        call(&mut s, &mut out, 0x40_1005);
        call(&mut s, &mut out, 0x40_5005);
        // To the newest call site: a taken bit; to another site: a TIP.
        s.feed(TraceEvent::Return { target: 0x40_5005 }, &mut out);
        s.feed(TraceEvent::Return { target: 0x40_7777 }, &mut out);
        // The stack popped at the mismatch too: nothing is left to match.
        s.feed(TraceEvent::Return { target: 0x40_1005 }, &mut out);
        assert_eq!(out.0, [short_tnt(1, 1), 0x2d, 0x77, 0x77, 0x2d, 0x05, 0x10]);
        // noretcomp: every return a TIP.
        let (mut s, mut out) = tracing(
            PtConfig {
                return_compression: false,
                ..RETCOMP
            },
            0x40_1000,
        );
        call(&mut s, &mut out, 0x40_1005);
        s.feed(TraceEvent::Return { target: 0x40_1005 }, &mut out);
        assert_eq!(out.0, [0x2d, 0x05, 0x10]);
    }

    #[test]
    fn no_return_compresses_across_a_psb_or_a_disable() {
        let mut s = PacketStream::with_config(256, RETCOMP);
        let mut out = Bytes(Vec::new());
        s.feed(TraceEvent::Enable(0x40_1000), &mut out);
        s.feed(
            TraceEvent::Call {
                target: 0x40_5000,
                ret: 0x40_1005,
                indirect: false,
            },
            &mut out,
        );
        while s.since_psb < s.psb_period {
            s.feed(TraceEvent::Pad, &mut out);
        }
        let at = out.0.len();
        s.feed(TraceEvent::Return { target: 0x40_1005 }, &mut out);
        assert_eq!(out.0[at..at + 16], PSB, "a PSB+ came first");
        // (IP compressed against the PSB+ FUP, the callee.)
        assert_eq!(
            &out.0[out.0.len() - 3..],
            [0x2d, 0x05, 0x10],
            "so the return is a TIP"
        );
        let (mut s, mut out) = tracing(RETCOMP, 0x40_1000);
        s.feed(
            TraceEvent::Call {
                target: 0x40_5000,
                ret: 0x40_1005,
                indirect: false,
            },
            &mut out,
        );
        s.feed(
            TraceEvent::Async {
                from: 0x40_5000,
                to: None,
            },
            &mut out,
        );
        s.feed(TraceEvent::Enable(0x40_5000), &mut out);
        out.0.clear();
        s.feed(TraceEvent::Return { target: 0x40_1005 }, &mut out);
        assert_eq!(out.0, [0x2d, 0x05, 0x10]);
    }

    #[test]
    fn the_call_stack_holds_64_returns() {
        let (mut s, mut out) = tracing(RETCOMP, 0x40_0000);
        for i in 0..65u64 {
            s.feed(
                TraceEvent::Call {
                    target: 0x40_0000,
                    ret: 0x40_1000 + i,
                    indirect: false,
                },
                &mut out,
            );
        }
        for i in (0..65u64).rev() {
            s.feed(
                TraceEvent::Return {
                    target: 0x40_1000 + i,
                },
                &mut out,
            );
        }
        s.flush_tnt(&mut out);
        // 64 compressed returns in one long TNT and a short one, then the
        // oldest, dropped from the stack, as a TIP.
        let tips = out.0.iter().filter(|&&b| b == 0x2d).count();
        assert_eq!(tips, 1);
        assert_eq!(&out.0[out.0.len() - 3..], [0x2d, 0x00, 0x10]);
    }

    #[test]
    fn tsc_and_branches_follow_the_configuration() {
        let config = PtConfig {
            tsc: false,
            branches: false,
            ..RETCOMP
        };
        let mut s = PacketStream::with_config(2048, config);
        let mut out = Bytes(Vec::new());
        s.set_clock(5);
        s.feed(TraceEvent::Enable(0x40_0000), &mut out);
        let psb_plus = out.0.len();
        s.feed(TraceEvent::Time(9), &mut out);
        s.feed(
            TraceEvent::Conditional {
                taken: true,
                next: 1,
            },
            &mut out,
        );
        s.feed(TraceEvent::Indirect { target: 2 }, &mut out);
        s.feed(
            TraceEvent::Async {
                from: 2,
                to: Some(3),
            },
            &mut out,
        );
        s.flush_tnt(&mut out);
        // PSB, MODE.Exec, PSBEND, TIP.PGE: no TSC, no CBR (no ratio known
        // yet), no FUP, and no branch packets after it.
        assert_eq!(psb_plus, 16 + 2 + 2 + 5);
        assert_eq!(out.0.len(), psb_plus);
        assert_eq!(s.psb_period(), 2048);
        let s = PacketStream::with_config(
            2048,
            PtConfig {
                psb_freq: 3,
                ..RETCOMP
            },
        );
        assert_eq!(s.psb_period(), 16384);
    }

    #[test]
    fn psb_tsc_is_the_running_clock() {
        let mut s = PacketStream::with_config(256, RETCOMP);
        let mut out = Bytes(Vec::new());
        s.set_clock(0x1234);
        s.feed(TraceEvent::Enable(0x40_0000), &mut out);
        let at = out.0.windows(8).position(|w| w[0] == 0x19).unwrap();
        assert_eq!(out.0[at..at + 8], tsc(0x1234));
    }

    #[test]
    fn a_psb_due_at_a_time_event_carries_that_time() {
        // A stream whose clock was set long ago (a tracer on a CPU the
        // task comes back to): the PSB+ the new time brings on carries
        // the new time, and the TSC after it too; no TSC goes back.
        let mut s = PacketStream::with_config(256, RETCOMP);
        let mut out = Bytes(Vec::new());
        s.set_clock(0x1000);
        s.feed(TraceEvent::Time(0x9000), &mut out);
        // PSB, MODE.Exec, TSC, PSBEND (no FUP: generation is off; no CBR:
        // no ratio yet), then the event's own TSC.
        assert_eq!(out.0[..16], PSB);
        assert_eq!(out.0.len(), 16 + 2 + 8 + 2 + 8, "{:02x?}", out.0);
        assert_eq!(out.0[18..26], tsc(0x9000), "the PSB+'s TSC");
        assert_eq!(out.0[28..], tsc(0x9000), "the event's TSC");
    }

    /// No CBR is written before a ratio is known: not in a PSB+, not for
    /// a Frequency(0). A PSB+ due at the Frequency event that sets the
    /// ratio carries it (libipt refuses a CBR of 0; perf's decoder would
    /// divide by it).
    #[test]
    fn no_cbr_before_a_ratio_is_known() {
        let cbr_at = |b: &[u8]| b.windows(2).position(|w| w == [0x02, 0x03]);
        let mut s = PacketStream::with_config(256, RETCOMP);
        let mut out = Bytes(Vec::new());
        s.feed(TraceEvent::Frequency(0), &mut out);
        s.feed(TraceEvent::Frequency(20), &mut out);
        // The PSB+ (due at the first event, Frequency(0)) has no CBR; the
        // Frequency(20) writes CBR 20.
        let at = cbr_at(&out.0).expect("a CBR");
        assert_eq!(out.0[at..at + 4], cbr(20));
        assert_eq!(cbr_at(&out.0[at + 2..]), None, "one CBR, of 20");
        // A PSB+ due at the Frequency event itself carries its ratio.
        let mut s = PacketStream::with_config(256, RETCOMP);
        let mut out = Bytes(Vec::new());
        s.feed(TraceEvent::Frequency(20), &mut out);
        let at = cbr_at(&out.0).expect("the PSB+'s CBR");
        assert!(at < out.0.windows(2).position(|w| w == [0x02, 0x23]).unwrap());
        assert_eq!(out.0[at..at + 4], cbr(20));
    }

    /// A return that is not compressed empties the return stack: a later
    /// return compresses only against a call made after it, so libipt
    /// (which pops on compressed returns only) and perf's decoder (which
    /// pops on every return) pair it alike.
    #[test]
    fn an_uncompressed_return_empties_the_return_stack() {
        let (mut s, mut out) = tracing(RETCOMP, 0x40_1000);
        let call = |ret| TraceEvent::Call {
            target: 0x40_2000,
            ret,
            indirect: false,
        };
        s.feed(call(0x40_1005), &mut out);
        s.feed(call(0x40_2005), &mut out);
        // Not to where the last call returns: a TIP, and the stack is gone.
        s.feed(TraceEvent::Return { target: 0x40_7777 }, &mut out);
        let before = out.0.len();
        s.feed(TraceEvent::Return { target: 0x40_1005 }, &mut out);
        assert_eq!(
            out.0[before] & 0x1f,
            IpPacket::Tip.opcode(),
            "the older call's return is a TIP too: {:02x?}",
            &out.0[before..]
        );
    }

    #[test]
    fn unwritten_events_are_those_no_packet_walks_past_yet() {
        let (mut s, mut out) = tracing(RETCOMP, 0x40_1000);
        assert_eq!(s.unwritten_events(), 0, "the TIP.PGE is out");
        let cond = |taken| TraceEvent::Conditional {
            taken,
            next: 0x40_1100,
        };
        s.feed(cond(true), &mut out);
        s.feed(cond(false), &mut out);
        assert_eq!(s.unwritten_events(), 2, "two TNT bits gathered");
        s.feed(TraceEvent::Jump { target: 0x40_2000 }, &mut out);
        assert_eq!(s.unwritten_events(), 3, "a direct jump makes no packet");
        s.feed(TraceEvent::Time(5), &mut out);
        // The TSC flushed the TNT bits: a decoder walks to the second
        // branch, not past the jump after it (nor the TSC itself).
        assert_eq!(s.unwritten_events(), 2);
        s.feed(TraceEvent::Indirect { target: 0x40_3000 }, &mut out);
        assert_eq!(s.unwritten_events(), 0, "a TIP: walked to its branch");
    }

    #[test]
    fn a_resync_starts_over_at_a_psb_with_generation_off() {
        let (mut s, mut out) = tracing(RETCOMP, 0x40_1000);
        s.feed(
            TraceEvent::Call {
                target: 0x40_2000,
                ret: 0x40_1005,
                indirect: false,
            },
            &mut out,
        );
        s.feed(
            TraceEvent::Conditional {
                taken: true,
                next: 0x40_2010,
            },
            &mut out,
        );
        s.set_clock(0x77);
        s.resync();
        assert!(!s.enabled());
        assert_eq!(s.unwritten_events(), 0, "the caller counted them lost");
        out.0.clear();
        s.feed(TraceEvent::Return { target: 0x40_1005 }, &mut out);
        // PSB+ without FUP (no packet generation), the running TSC, no CBR
        // (no ratio set); no packet for the return, the TNT bit gathered
        // before is gone.
        assert_eq!(out.0[..16], PSB);
        assert_eq!(out.0.len(), 16 + 2 + 8 + 2, "{:02x?}", out.0);
        assert_eq!(out.0[18..26], tsc(0x77));
        s.feed(TraceEvent::Enable(0x40_1005), &mut out);
        s.feed(TraceEvent::Return { target: 0x40_9999 }, &mut out);
        // The return stack was forgotten: a TIP, not a compressed return.
        assert_eq!(out.0[out.0.len() - 3], IpPacket::Tip.opcode() | 1 << 5);
    }

    fn cycle_accurate(thresh: u8) -> PtConfig {
        PtConfig {
            tsc: true,
            cyc: true,
            cyc_thresh: thresh,
            ..PtConfig::default()
        }
    }

    /// The bytes of `cyc(n)`.
    fn cyc_bytes(n: u64) -> Vec<u8> {
        let (p, len) = cyc(n);
        p[..len].to_vec()
    }

    /// Cycle-accurate mode: a CYC of the clock's ticks since the last one
    /// before the TNT packet of a branch that starts one (not before the
    /// branches that join it), before TIP/FUP/TIP.PGD, and always before a
    /// TSC; none where no cycle passed.
    #[test]
    fn cyc_packets_count_the_clock_before_what_they_time() {
        let mut s = PacketStream::with_config(1 << 20, cycle_accurate(0));
        s.set_ratio(26);
        let mut out = Bytes(Vec::new());
        s.feed(TraceEvent::Time(1000), &mut out);
        // PSB+ (no FUP: not enabled; TSC, CBR), then CYC(0) and the TSC.
        let psb_plus = 16 + 2 + 8 + 4 + 2;
        assert_eq!(
            out.0[psb_plus..],
            [cyc_bytes(0), tsc(1000).to_vec()].concat()
        );
        out.0.clear();
        // TIP.PGE at the same time: no CYC.
        s.feed(TraceEvent::Enable(0x40_1000), &mut out);
        assert_eq!(out.0[0] & 0x1f, IpPacket::TipPge.opcode());
        out.0.clear();
        s.set_clock(1010);
        let branch = |taken| TraceEvent::Conditional {
            taken,
            next: 0x40_1000,
        };
        s.feed(branch(true), &mut out);
        assert_eq!(out.0, cyc_bytes(10), "the first bit's CYC, now");
        // The fast path takes a later bit, not a first one.
        assert!(s.try_tnt(true, 0x40_1000));
        s.set_clock(1050);
        s.feed(branch(false), &mut out);
        assert_eq!(out.0, cyc_bytes(10), "no CYC for a later bit");
        s.feed(TraceEvent::Indirect { target: 0x40_2000 }, &mut out);
        // The three bits (1 1 0), CYC(40), TIP.
        let tip = out.0.split_off(cyc_bytes(10).len() + 1);
        assert_eq!(out.0[cyc_bytes(10).len()], short_tnt(0b110, 3));
        assert_eq!(tip[..2], cyc_bytes(40)[..]);
        assert_eq!(tip[2] & 0x1f, IpPacket::Tip.opcode());
        out.0.clear();
        // An asynchronous disable at the same clock: FUP and TIP.PGD with
        // no CYC (no cycle passed since the TIP's).
        s.feed(
            TraceEvent::Async {
                from: 0x40_2004,
                to: None,
            },
            &mut out,
        );
        assert_eq!(out.0[0] & 0x1f, IpPacket::Fup.opcode());
        assert_eq!(out.0[out.0.len() - 1], IpPacket::TipPgd.opcode());
        out.0.clear();
        // Back 5,000 ticks later: CYC(5000) (two bytes) before the TSC.
        s.feed(TraceEvent::Time(6050), &mut out);
        assert_eq!(out.0, [cyc_bytes(5000), tsc(6050).to_vec()].concat());
    }

    /// `CycThresh` n: a CYC only once 2^(n-1) cycles have passed; the
    /// cycles go on counting until one is put. A TSC takes one anyway.
    #[test]
    fn a_cyc_threshold_holds_cycs_back_until_enough_cycles_passed() {
        let mut s = PacketStream::with_config(1 << 20, cycle_accurate(3));
        let mut out = Bytes(Vec::new());
        s.feed(TraceEvent::Time(100), &mut out);
        s.feed(TraceEvent::Enable(0x40_1000), &mut out);
        out.0.clear();
        s.set_clock(103);
        s.feed(TraceEvent::Indirect { target: 0x40_2000 }, &mut out);
        assert_eq!(out.0.len(), 3, "3 cycles < 4: no CYC {:02x?}", out.0);
        out.0.clear();
        s.set_clock(104);
        s.feed(TraceEvent::Indirect { target: 0x40_3000 }, &mut out);
        assert_eq!(out.0[..1], cyc_bytes(4)[..], "4 cycles since the last CYC");
        out.0.clear();
        s.set_clock(105);
        s.feed(TraceEvent::Time(105), &mut out);
        assert_eq!(out.0, [cyc_bytes(1), tsc(105).to_vec()].concat());
    }

    /// Without `cyc`, no CYC anywhere, and a new stream's counter starts
    /// at its first clock (TriggerEn set), not at zero.
    #[test]
    fn cycles_count_from_the_streams_first_clock_and_only_with_cyc() {
        for cyc in [false, true] {
            let config = PtConfig {
                cyc,
                ..cycle_accurate(0)
            };
            let mut s = PacketStream::with_config(1 << 20, config);
            let mut out = Bytes(Vec::new());
            s.set_clock(1 << 40);
            s.feed(TraceEvent::Enable(0x40_1000), &mut out);
            out.0.clear();
            s.set_clock((1 << 40) + 7);
            s.feed(TraceEvent::Indirect { target: 0x40_2000 }, &mut out);
            let expected = if cyc { cyc_bytes(7) } else { Vec::new() };
            assert_eq!(out.0[..out.0.len() - 3], expected[..], "cyc={cyc}");
        }
    }
}
