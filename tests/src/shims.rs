// SPDX-License-Identifier: MIT OR Apache-2.0
//! Small stand-ins the PT tests share: a platform on CPU 0, a counting PMU,
//! a model that keeps every trace byte, and a decodability check.

use perfaux::pmu::{EventInfo, Platform, Pmu};
use perfaux::pt::stream::PacketSink;
use perfaux::sample::IrqMask;
use perfaux::{PmuCaps, Result};

/// The platform of a single CPU 0, with interrupts already masked.
pub struct Cpu0;

impl IrqMask for Cpu0 {
    fn save(&self) -> usize {
        0
    }
    fn restore(&self, _: usize) {}
}

impl Platform for Cpu0 {
    fn cpu(&self) -> u32 {
        0
    }
    fn clock(&self) -> u64 {
        0
    }
    fn current(&self) -> (u32, u32) {
        (1, 1)
    }
}

/// A counting PMU like cpu-clock (software: no NMI).
pub struct CountingPmu;

impl Pmu for CountingPmu {
    fn caps(&self) -> PmuCaps {
        PmuCaps::NO_NMI
    }
    fn add(&self, _: &EventInfo<'_>, _: u32) -> Result<()> {
        Ok(())
    }
    fn del(&self, _: &EventInfo<'_>, _: u32) {}
    fn start(&self, _: &EventInfo<'_>, _: u32) {}
    fn stop(&self, _: &EventInfo<'_>, _: u32) {}
}

/// Every byte a tracer wrote, in order (tap it with `SoftTracer::set_tap`).
#[derive(Default)]
pub struct StreamModel(pub Vec<u8>);

impl PacketSink for StreamModel {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

/// Whether `iptr-decoder` decodes `bytes` from their first PSB on.
pub fn decodes(bytes: &[u8]) -> bool {
    struct Nop;
    impl iptr_decoder::HandlePacket for Nop {
        type Error = std::convert::Infallible;
        fn at_decode_begin(&mut self) -> std::result::Result<(), Self::Error> {
            Ok(())
        }
    }
    iptr_decoder::decode(bytes, iptr_decoder::DecodeOptions::default(), &mut Nop).is_ok()
}
