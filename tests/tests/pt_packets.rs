// SPDX-License-Identifier: MIT OR Apache-2.0
//! The Intel PT packet encoder against an independent decoder
//! (`iptr-decoder`): random packet sequences decode into exactly what was
//! fed in, IPs reconstructed with the decoder's own last-IP logic.

use std::convert::Infallible;
use std::num::NonZero;

use iptr_decoder::utils::reconstruct_ip_and_update_last;
use iptr_decoder::{DecodeOptions, DecoderContext, HandlePacket, IpReconstructionPattern};
use perfaux::pt::packet::{
    ExecMode, IpCompressor, IpPacket, OVF, PAD, PSB, PSBEND, cbr, long_tnt, mode_exec, mtc,
    short_tnt, tsc,
};
use perfaux::pt::stream::{PacketSink, PacketStream, TraceEvent};
use proptest::prelude::*;

#[derive(Clone, Debug, PartialEq)]
enum Ev {
    Psb,
    PsbEnd,
    Pad,
    Ovf,
    /// Branch outcomes, oldest first.
    Tnt(Vec<bool>),
    Ip(IpPacket, Option<u64>),
    Tsc(u64),
    Mtc(u8),
    Cbr(u8),
    Mode(ExecMode),
}

fn encode(events: &[Ev]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ip = IpCompressor::default();
    for e in events {
        match e {
            Ev::Psb => {
                out.extend_from_slice(&PSB);
                ip.reset();
            }
            Ev::PsbEnd => out.extend_from_slice(&PSBEND),
            Ev::Pad => out.push(PAD),
            Ev::Ovf => out.extend_from_slice(&OVF),
            Ev::Tnt(bits) => {
                let value = bits.iter().fold(0u64, |acc, &b| (acc << 1) | u64::from(b));
                if bits.len() <= 6 {
                    out.push(short_tnt(value as u8, bits.len() as u8));
                } else {
                    out.extend_from_slice(&long_tnt(value, bits.len() as u8));
                }
            }
            Ev::Ip(kind, target) => {
                let mut buf = [0u8; 9];
                let n = ip.encode(*kind, *target, &mut buf);
                out.extend_from_slice(&buf[..n]);
            }
            Ev::Tsc(v) => out.extend_from_slice(&tsc(*v)),
            Ev::Mtc(c) => out.extend_from_slice(&mtc(*c)),
            Ev::Cbr(r) => out.extend_from_slice(&cbr(*r)),
            Ev::Mode(m) => out.extend_from_slice(&mode_exec(*m)),
        }
    }
    out
}

#[derive(Default)]
struct Collect {
    events: Vec<Ev>,
    last_ip: u64,
}

impl Collect {
    fn ip(&mut self, kind: IpPacket, pattern: IpReconstructionPattern) {
        let target =
            reconstruct_ip_and_update_last(&mut self.last_ip, pattern).then_some(self.last_ip);
        self.events.push(Ev::Ip(kind, target));
    }
}

impl HandlePacket for Collect {
    type Error = Infallible;
    fn at_decode_begin(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
    fn on_psb_packet(&mut self, _: &DecoderContext) -> Result<(), Infallible> {
        self.last_ip = 0;
        self.events.push(Ev::Psb);
        Ok(())
    }
    fn on_psbend_packet(&mut self, _: &DecoderContext) -> Result<(), Infallible> {
        self.events.push(Ev::PsbEnd);
        Ok(())
    }
    fn on_pad_packet(&mut self, _: &DecoderContext) -> Result<(), Infallible> {
        self.events.push(Ev::Pad);
        Ok(())
    }
    fn on_ovf_packet(&mut self, _: &DecoderContext) -> Result<(), Infallible> {
        self.events.push(Ev::Ovf);
        Ok(())
    }
    fn on_short_tnt_packet(
        &mut self,
        _: &DecoderContext,
        byte: NonZero<u8>,
        highest_bit: u32,
    ) -> Result<(), Infallible> {
        let b = byte.get();
        self.events.push(Ev::Tnt(
            (1..=highest_bit).rev().map(|i| (b >> i) & 1 == 1).collect(),
        ));
        Ok(())
    }
    fn on_long_tnt_packet(
        &mut self,
        _: &DecoderContext,
        payload: NonZero<u64>,
        highest_bit: u32,
    ) -> Result<(), Infallible> {
        let p = payload.get();
        let bits = if highest_bit == u32::MAX {
            Vec::new()
        } else {
            (0..=highest_bit).rev().map(|i| (p >> i) & 1 == 1).collect()
        };
        self.events.push(Ev::Tnt(bits));
        Ok(())
    }
    fn on_tip_packet(
        &mut self,
        _: &DecoderContext,
        p: IpReconstructionPattern,
    ) -> Result<(), Infallible> {
        self.ip(IpPacket::Tip, p);
        Ok(())
    }
    fn on_tip_pge_packet(
        &mut self,
        _: &DecoderContext,
        p: IpReconstructionPattern,
    ) -> Result<(), Infallible> {
        self.ip(IpPacket::TipPge, p);
        Ok(())
    }
    fn on_tip_pgd_packet(
        &mut self,
        _: &DecoderContext,
        p: IpReconstructionPattern,
    ) -> Result<(), Infallible> {
        self.ip(IpPacket::TipPgd, p);
        Ok(())
    }
    fn on_fup_packet(
        &mut self,
        _: &DecoderContext,
        p: IpReconstructionPattern,
    ) -> Result<(), Infallible> {
        self.ip(IpPacket::Fup, p);
        Ok(())
    }
    fn on_tsc_packet(&mut self, _: &DecoderContext, v: u64) -> Result<(), Infallible> {
        self.events.push(Ev::Tsc(v));
        Ok(())
    }
    fn on_mtc_packet(&mut self, _: &DecoderContext, c: u8) -> Result<(), Infallible> {
        self.events.push(Ev::Mtc(c));
        Ok(())
    }
    fn on_cbr_packet(&mut self, _: &DecoderContext, r: u8) -> Result<(), Infallible> {
        self.events.push(Ev::Cbr(r));
        Ok(())
    }
    fn on_mode_packet(&mut self, _: &DecoderContext, leaf: u8, mode: u8) -> Result<(), Infallible> {
        assert_eq!(leaf, 0, "only MODE.Exec is written");
        self.events.push(Ev::Mode(match mode & 0b11 {
            0b01 => ExecMode::Bits64,
            0b10 => ExecMode::Bits32,
            _ => ExecMode::Bits16,
        }));
        Ok(())
    }
}

fn decode(bytes: &[u8]) -> Vec<Ev> {
    let mut c = Collect::default();
    iptr_decoder::decode(bytes, DecodeOptions::default(), &mut c)
        .expect("iptr-decoder decodes the stream");
    c.events
}

/// Canonical x86-64 addresses, often close to each other (so that every
/// compression form is used), in user and kernel halves.
fn address() -> impl Strategy<Value = u64> {
    prop_oneof![
        (0u64..0x10_0000).prop_map(|o| 0x0040_0000 + o),
        (0u64..0x10_0000).prop_map(|o| 0x7fff_f000_0000 + o),
        (0u64..0x10_0000).prop_map(|o| 0xffff_ffff_8100_0000 + o),
        any::<u64>().prop_map(|a| (((a << 16) as i64) >> 16) as u64),
    ]
}

fn event() -> impl Strategy<Value = Ev> {
    let kind = prop_oneof![
        Just(IpPacket::Tip),
        Just(IpPacket::TipPge),
        Just(IpPacket::TipPgd),
        Just(IpPacket::Fup)
    ];
    prop_oneof![
        1 => Just(Ev::Psb),
        1 => Just(Ev::PsbEnd),
        1 => Just(Ev::Pad),
        1 => Just(Ev::Ovf),
        6 => proptest::collection::vec(any::<bool>(), 1..=47).prop_map(Ev::Tnt),
        8 => (kind, proptest::option::weighted(0.9, address())).prop_map(|(k, a)| Ev::Ip(k, a)),
        2 => (0u64..1 << 56).prop_map(Ev::Tsc),
        1 => any::<u8>().prop_map(Ev::Mtc),
        1 => any::<u8>().prop_map(Ev::Cbr),
        1 => prop_oneof![Just(ExecMode::Bits16), Just(ExecMode::Bits32), Just(ExecMode::Bits64)].prop_map(Ev::Mode),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 800, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_decoder_reads_back_what_was_encoded(rest in proptest::collection::vec(event(), 0..200)) {
        let mut events = vec![Ev::Psb, Ev::PsbEnd];
        events.extend(rest);
        let bytes = encode(&events);
        prop_assert_eq!(decode(&bytes), events);
    }
}

struct VecSink(Vec<u8>);
impl PacketSink for VecSink {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

/// The trace events a decoded packet list stands for; PSB+ blocks are
/// checked (their FUP is the current IP while tracing) and dropped.
fn events_of(packets: &[Ev]) -> Vec<TraceEvent> {
    let mut out = Vec::new();
    let mut in_psb = false;
    let mut pending_fup = None;
    let mut current_ip = 0;
    let mut enabled = false;
    for p in packets {
        match p {
            Ev::Psb => in_psb = true,
            Ev::PsbEnd => in_psb = false,
            _ if in_psb => {
                if let Ev::Ip(IpPacket::Fup, ip) = p {
                    assert!(
                        enabled && *ip == Some(current_ip),
                        "PSB+ carries the current IP"
                    );
                }
            }
            Ev::Tnt(bits) => out.extend(bits.iter().map(|&b| TraceEvent::Branch(b))),
            Ev::Ip(IpPacket::Fup, ip) => pending_fup = *ip,
            Ev::Ip(IpPacket::Tip, Some(t)) => {
                current_ip = *t;
                out.push(match pending_fup.take() {
                    Some(from) => TraceEvent::Async { from, to: *t },
                    None => TraceEvent::Indirect(*t),
                });
            }
            Ev::Ip(IpPacket::TipPge, Some(ip)) => {
                current_ip = *ip;
                enabled = true;
                out.push(TraceEvent::Enable(*ip));
            }
            Ev::Ip(IpPacket::TipPgd, ip) => {
                enabled = false;
                out.push(TraceEvent::Disable(*ip));
            }
            Ev::Mode(m) => out.push(TraceEvent::Mode(*m)),
            Ev::Tsc(t) => out.push(TraceEvent::Time(*t)),
            Ev::Cbr(r) => out.push(TraceEvent::Frequency(*r)),
            Ev::Mtc(c) => out.push(TraceEvent::Tick(*c)),
            Ev::Pad => out.push(TraceEvent::Pad),
            Ev::Ovf => out.push(TraceEvent::Overflow),
            other => panic!("unexpected packet {other:?}"),
        }
    }
    out
}

fn trace_event() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        12 => any::<bool>().prop_map(TraceEvent::Branch),
        4 => address().prop_map(TraceEvent::Indirect),
        2 => (address(), address()).prop_map(|(from, to)| TraceEvent::Async { from, to }),
        1 => address().prop_map(TraceEvent::Enable),
        1 => proptest::option::of(address()).prop_map(TraceEvent::Disable),
        1 => prop_oneof![Just(ExecMode::Bits32), Just(ExecMode::Bits64)].prop_map(TraceEvent::Mode),
        1 => (0u64..1 << 56).prop_map(TraceEvent::Time),
        1 => any::<u8>().prop_map(TraceEvent::Frequency),
        1 => any::<u8>().prop_map(TraceEvent::Tick),
        1 => Just(TraceEvent::Pad),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_stream_decodes_into_the_events_fed_in(
        first in address(),
        events in proptest::collection::vec(trace_event(), 0..400),
        period in 256u64..2048,
    ) {
        let mut stream = PacketStream::new(period);
        let mut sink = VecSink(Vec::new());
        let mut fed = vec![TraceEvent::Enable(first)];
        fed.extend(events);
        for &e in &fed {
            stream.feed(e, &mut sink);
        }
        stream.flush_tnt(&mut sink);
        let bytes = sink.0;
        prop_assert_eq!(events_of(&decode(&bytes)), fed);
        // A PSB at least every period plus one PSB+ block plus the longest packet.
        let psbs: Vec<usize> = bytes.windows(16).enumerate().filter(|(_, w)| *w == PSB).map(|(i, _)| i).collect();
        prop_assert_eq!(psbs[0], 0);
        let bound = period as usize + 64;
        for w in psbs.windows(2) {
            prop_assert!(w[1] - w[0] <= bound, "PSBs {} bytes apart", w[1] - w[0]);
        }
        prop_assert!(bytes.len() - psbs[psbs.len() - 1] <= bound);
    }
}
