// SPDX-License-Identifier: MIT OR Apache-2.0
//! The Intel PT packet encoder against an independent decoder
//! (`iptr-decoder`): random packet sequences decode into exactly what was
//! fed in, IPs reconstructed with the decoder's own last-IP logic.

use std::convert::Infallible;
use std::num::NonZero;

use iptr_decoder::utils::reconstruct_ip_and_update_last;
use iptr_decoder::{DecodeOptions, DecoderContext, HandlePacket, IpReconstructionPattern};
use perfaux::soft_pt::packet::{
    ExecMode, IpCompressor, IpPacket, OVF, PAD, PSB, PSBEND, cbr, long_tnt, mode_exec, mtc,
    short_tnt, tsc,
};
use perfaux::soft_pt::stream::{PacketSink, PacketStream, TraceEvent};
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

/// One packet as the rules see it: TNT packets are split into their bits.
#[derive(Clone, Debug, PartialEq)]
enum Item {
    Bit(bool),
    Packet(Ev),
}

fn items(packets: &[Ev]) -> Vec<Item> {
    let mut out = Vec::new();
    for p in packets {
        match p {
            Ev::Tnt(bits) => out.extend(bits.iter().map(|&b| Item::Bit(b))),
            other => out.push(Item::Packet(other.clone())),
        }
    }
    out
}

/// An independent statement of the stream rules, checked against the
/// decoded packets of the events fed: which packets each event makes, that
/// every PSB+ carries the next instruction's IP (while packets are
/// generated), and that a return is compressed exactly when it goes to the
/// call site of the newest call since the last PSB+/enable/disable/OVF or
/// uncompressed return, and that no CBR says a ratio of 0.
struct RuleChecker {
    items: Vec<Item>,
    at: usize,
    ip: u64,
    enabled: bool,
    calls: Vec<u64>,
}

impl RuleChecker {
    fn expect(&mut self, want: Item, event: &TraceEvent) {
        assert_eq!(
            self.items.get(self.at),
            Some(&want),
            "for {event:?} at item {}",
            self.at
        );
        self.at += 1;
    }

    /// A PSB+ block at the current position, if its FUP (or its absence)
    /// says it came before the next event.
    fn psb_plus(&mut self) {
        while self.items.get(self.at) == Some(&Item::Packet(Ev::Psb)) {
            let end = self.at
                + self.items[self.at..]
                    .iter()
                    .position(|i| *i == Item::Packet(Ev::PsbEnd))
                    .expect("PSBEND");
            let fup = self.items[self.at..end].iter().find_map(|i| match i {
                Item::Packet(Ev::Ip(IpPacket::Fup, ip)) => Some(*ip),
                _ => None,
            });
            assert!(
                !self.items[self.at..end].contains(&Item::Packet(Ev::Cbr(0))),
                "a CBR of 0 in a PSB+: no ratio is known then"
            );
            match fup {
                Some(ip) if ip != Some(self.ip) => return, // it follows a later event
                Some(_) => assert!(self.enabled, "a PSB+ FUP only while packets are generated"),
                None => assert!(
                    !self.enabled,
                    "a PSB+ FUP of the next instruction while tracing"
                ),
            }
            self.at = end + 1;
            self.calls.clear();
        }
    }

    fn feed(&mut self, e: &TraceEvent) {
        self.psb_plus();
        let on = self.enabled;
        match *e {
            TraceEvent::Conditional { taken, next } => {
                if on {
                    self.expect(Item::Bit(taken), e);
                }
                self.ip = next;
            }
            TraceEvent::Jump { target } => self.ip = target,
            TraceEvent::Call {
                target,
                ret,
                indirect,
            } => {
                if on && indirect {
                    self.expect(Item::Packet(Ev::Ip(IpPacket::Tip, Some(target))), e);
                }
                self.calls.push(ret);
                self.ip = target;
            }
            TraceEvent::Return { target } => {
                if on {
                    if self.calls.pop() == Some(target) {
                        self.expect(Item::Bit(true), e);
                    } else {
                        // An uncompressed return forgets the older calls
                        // (libipt pops on compressed returns only).
                        self.expect(Item::Packet(Ev::Ip(IpPacket::Tip, Some(target))), e);
                        self.calls.clear();
                    }
                }
                self.ip = target;
            }
            TraceEvent::Indirect { target } => {
                if on {
                    self.expect(Item::Packet(Ev::Ip(IpPacket::Tip, Some(target))), e);
                }
                self.ip = target;
            }
            TraceEvent::Async { from, to } => {
                if on {
                    self.expect(Item::Packet(Ev::Ip(IpPacket::Fup, Some(from))), e);
                    match to {
                        Some(t) => self.expect(Item::Packet(Ev::Ip(IpPacket::Tip, Some(t))), e),
                        None => {
                            self.expect(Item::Packet(Ev::Ip(IpPacket::TipPgd, None)), e);
                            self.enabled = false;
                            self.calls.clear();
                        }
                    }
                }
                if let Some(t) = to {
                    self.ip = t;
                }
            }
            TraceEvent::Enable(ip) => {
                self.expect(Item::Packet(Ev::Ip(IpPacket::TipPge, Some(ip))), e);
                self.enabled = true;
                self.calls.clear();
                self.ip = ip;
            }
            TraceEvent::Disable(ip) => {
                if on {
                    self.expect(Item::Packet(Ev::Ip(IpPacket::TipPgd, ip)), e);
                    self.enabled = false;
                    self.calls.clear();
                }
            }
            TraceEvent::Mode(m) => self.expect(Item::Packet(Ev::Mode(m)), e),
            TraceEvent::Time(t) => self.expect(Item::Packet(Ev::Tsc(t)), e),
            // A ratio of 0 is none known: no CBR.
            TraceEvent::Frequency(0) => {}
            TraceEvent::Frequency(r) => self.expect(Item::Packet(Ev::Cbr(r)), e),
            TraceEvent::Tick(c) => self.expect(Item::Packet(Ev::Mtc(c)), e),
            TraceEvent::Pad => self.expect(Item::Packet(Ev::Pad), e),
            TraceEvent::Overflow => {
                self.expect(Item::Packet(Ev::Ovf), e);
                self.calls.clear();
            }
        }
    }
}

/// What a program does, turned into consistent trace events by
/// [`program_events`]: returns go to the newest call site or elsewhere.
#[derive(Clone, Debug)]
enum Act {
    Cond(bool, u64),
    Jump(u64),
    Call(u64, bool),
    Ret { to_caller: bool, elsewhere: u64 },
    Indirect(u64),
    Interrupt(Option<u64>),
    Other(TraceEvent),
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        12 => (any::<bool>(), address()).prop_map(|(t, a)| Act::Cond(t, a)),
        3 => address().prop_map(Act::Jump),
        4 => (address(), any::<bool>()).prop_map(|(a, i)| Act::Call(a, i)),
        4 => (proptest::bool::weighted(0.8), address()).prop_map(|(c, a)| Act::Ret { to_caller: c, elsewhere: a }),
        2 => address().prop_map(Act::Indirect),
        2 => proptest::option::of(address()).prop_map(Act::Interrupt),
        1 => address().prop_map(|a| Act::Other(TraceEvent::Enable(a))),
        1 => proptest::option::of(address()).prop_map(|a| Act::Other(TraceEvent::Disable(a))),
        1 => prop_oneof![Just(ExecMode::Bits32), Just(ExecMode::Bits64)].prop_map(|m| Act::Other(TraceEvent::Mode(m))),
        1 => (0u64..1 << 56).prop_map(|t| Act::Other(TraceEvent::Time(t))),
        1 => any::<u8>().prop_map(|r| Act::Other(TraceEvent::Frequency(r))),
        1 => any::<u8>().prop_map(|c| Act::Other(TraceEvent::Tick(c))),
        1 => Just(Act::Other(TraceEvent::Pad)),
        1 => Just(Act::Other(TraceEvent::Overflow)),
    ]
}

fn program_events(first: u64, acts: &[Act]) -> Vec<TraceEvent> {
    let mut ip = first;
    let mut stack = Vec::new();
    let mut out = vec![TraceEvent::Enable(first)];
    for a in acts {
        let e = match *a {
            Act::Cond(taken, target) => TraceEvent::Conditional {
                taken,
                next: if taken { target } else { ip + 2 },
            },
            Act::Jump(target) => TraceEvent::Jump { target },
            Act::Call(target, indirect) => {
                stack.push(ip + 5);
                TraceEvent::Call {
                    target,
                    ret: ip + 5,
                    indirect,
                }
            }
            Act::Ret {
                to_caller,
                elsewhere,
            } => {
                let target = stack.pop().filter(|_| to_caller).unwrap_or(elsewhere);
                TraceEvent::Return { target }
            }
            Act::Indirect(target) => TraceEvent::Indirect { target },
            Act::Interrupt(to) => TraceEvent::Async { from: ip, to },
            Act::Other(e) => e,
        };
        ip = match e {
            TraceEvent::Conditional { next, .. } => next,
            TraceEvent::Jump { target }
            | TraceEvent::Call { target, .. }
            | TraceEvent::Return { target }
            | TraceEvent::Indirect { target }
            | TraceEvent::Enable(target)
            | TraceEvent::Async {
                to: Some(target), ..
            } => target,
            _ => ip,
        };
        out.push(e);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_stream_follows_the_hardware_rules(
        first in address(),
        acts in proptest::collection::vec(act(), 0..400),
        period in 256u64..2048,
    ) {
        let mut stream = PacketStream::new(period);
        let mut sink = VecSink(Vec::new());
        let fed = program_events(first, &acts);
        for &e in &fed {
            stream.feed(e, &mut sink);
        }
        stream.flush_tnt(&mut sink);
        let bytes = sink.0;
        let mut checker = RuleChecker { items: items(&decode(&bytes)), at: 0, ip: 0, enabled: false, calls: Vec::new() };
        for e in &fed {
            checker.feed(e);
        }
        checker.psb_plus();
        prop_assert_eq!(checker.at, checker.items.len(), "packets nothing explains");
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
