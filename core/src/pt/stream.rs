// SPDX-License-Identifier: MIT OR Apache-2.0
//! The packet stream a tracer produces for a sequence of trace events, as
//! Intel PT hardware would: conditional branches gathered into TNT packets
//! (flushed before any other packet), indirect branches as TIP, asynchronous
//! events as FUP + TIP, tracing enable/disable as TIP.PGE/TIP.PGD, and a PSB+
//! block (PSB, FUP, MODE.Exec, TSC, CBR, PSBEND) every PSB period, after
//! which IPs are compressed from scratch.

use super::packet::{
    ExecMode, IpCompressor, IpPacket, LONG_TNT_MAX, OVF, PAD, PSB, PSBEND, SHORT_TNT_MAX, cbr,
    long_tnt, mode_exec, mtc, short_tnt, tsc,
};

/// Where packet bytes go.
pub trait PacketSink {
    /// Appends `bytes`.
    fn write(&mut self, bytes: &[u8]);
}

/// What happened on the traced CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceEvent {
    /// A conditional branch, taken or not (a TNT bit).
    Branch(bool),
    /// An indirect branch or return to `target` (TIP).
    Indirect(u64),
    /// An asynchronous event (interrupt, exception) at `from`, going to `to` (FUP + TIP).
    Async {
        /// Where the interrupted code was.
        from: u64,
        /// The handler.
        to: u64,
    },
    /// Tracing enabled at `ip` (TIP.PGE).
    Enable(u64),
    /// Tracing disabled; the next IP if known (TIP.PGD).
    Disable(Option<u64>),
    /// The execution mode changed (MODE.Exec).
    Mode(ExecMode),
    /// A timestamp (TSC).
    Time(u64),
    /// The core:bus ratio changed (CBR).
    Frequency(u8),
    /// A mini time counter tick (MTC).
    Tick(u8),
    /// Padding (PAD).
    Pad,
    /// The tracer lost packets (OVF).
    Overflow,
}

/// The tracer's packet generator.
#[derive(Clone, Debug)]
pub struct PacketStream {
    ip: IpCompressor,
    /// Branch outcomes not yet emitted, oldest most significant.
    tnt_bits: u64,
    tnt_count: u8,
    /// Bytes between PSBs (`RTIT_CTL.PSBFreq`: 2K << n).
    psb_period: u64,
    since_psb: u64,
    /// State repeated in every PSB+ block.
    current_ip: u64,
    enabled: bool,
    mode: ExecMode,
    time: u64,
    ratio: u8,
}

impl PacketStream {
    /// A generator emitting a PSB+ block every `psb_period` bytes (at least 256).
    pub fn new(psb_period: u64) -> PacketStream {
        PacketStream {
            ip: IpCompressor::default(),
            tnt_bits: 0,
            tnt_count: 0,
            psb_period: psb_period.max(256),
            since_psb: u64::MAX, // the first packet is preceded by a PSB+
            current_ip: 0,
            enabled: false,
            mode: ExecMode::Bits64,
            time: 0,
            ratio: 0,
        }
    }

    /// The PSB period in bytes.
    pub fn psb_period(&self) -> u64 {
        self.psb_period
    }

    /// Emits the packets for `event` into `sink`.
    pub fn feed(&mut self, event: TraceEvent, sink: &mut dyn PacketSink) {
        if self.since_psb >= self.psb_period {
            self.flush_tnt(sink);
            self.psb_plus(sink);
        }
        match event {
            TraceEvent::Branch(taken) => {
                self.tnt_bits = (self.tnt_bits << 1) | u64::from(taken);
                self.tnt_count += 1;
                if self.tnt_count == LONG_TNT_MAX {
                    self.flush_tnt(sink);
                }
            }
            TraceEvent::Indirect(target) => {
                self.flush_tnt(sink);
                self.ip_packet(IpPacket::Tip, Some(target), sink);
                self.current_ip = target;
            }
            TraceEvent::Async { from, to } => {
                self.flush_tnt(sink);
                self.ip_packet(IpPacket::Fup, Some(from), sink);
                self.ip_packet(IpPacket::Tip, Some(to), sink);
                self.current_ip = to;
            }
            TraceEvent::Enable(ip) => {
                self.flush_tnt(sink);
                self.ip_packet(IpPacket::TipPge, Some(ip), sink);
                self.current_ip = ip;
                self.enabled = true;
            }
            TraceEvent::Disable(ip) => {
                self.flush_tnt(sink);
                self.ip_packet(IpPacket::TipPgd, ip, sink);
                self.enabled = false;
            }
            TraceEvent::Mode(mode) => {
                self.flush_tnt(sink);
                self.mode = mode;
                self.put(&mode_exec(mode), sink);
            }
            TraceEvent::Time(t) => {
                self.flush_tnt(sink);
                self.time = t & ((1 << 56) - 1);
                self.put(&tsc(self.time), sink);
            }
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
                self.put(&OVF, sink);
            }
        }
    }

    /// Emits the branch outcomes gathered so far (before a stop, say).
    pub fn flush_tnt(&mut self, sink: &mut dyn PacketSink) {
        match self.tnt_count {
            0 => {}
            n if n <= SHORT_TNT_MAX => self.put(&[short_tnt(self.tnt_bits as u8, n)], sink),
            n => self.put(&long_tnt(self.tnt_bits, n), sink),
        }
        self.tnt_bits = 0;
        self.tnt_count = 0;
    }

    /// The PSB+ block: PSB, the current IP (FUP, when tracing), MODE.Exec,
    /// TSC, CBR, PSBEND. IP compression restarts after it.
    fn psb_plus(&mut self, sink: &mut dyn PacketSink) {
        self.since_psb = 0;
        self.put(&PSB, sink);
        self.ip.reset();
        if self.enabled {
            self.ip_packet(IpPacket::Fup, Some(self.current_ip), sink);
        }
        self.put(&mode_exec(self.mode), sink);
        self.put(&tsc(self.time), sink);
        self.put(&cbr(self.ratio), sink);
        self.put(&PSBEND, sink);
    }

    fn ip_packet(&mut self, kind: IpPacket, ip: Option<u64>, sink: &mut dyn PacketSink) {
        let mut buf = [0u8; 9];
        let n = self.ip.encode(kind, ip, &mut buf);
        self.put(&buf[..n], sink);
    }

    fn put(&mut self, bytes: &[u8], sink: &mut dyn PacketSink) {
        self.since_psb = self.since_psb.saturating_add(bytes.len() as u64);
        sink.write(bytes);
    }
}
