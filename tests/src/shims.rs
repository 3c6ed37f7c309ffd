// SPDX-License-Identifier: MIT OR Apache-2.0
//! Small stand-ins the PT tests share: a platform on CPU 0, a counting PMU,
//! a model that keeps every trace byte, and a decodability check.

use perfaux::pmu::{EventInfo, Platform, Pmu};
use perfaux::sample::IrqMask;
use perfaux::soft_pt::stream::PacketSink;
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

/// Every byte a tracer wrote, in order (tap it with `Taps::set_tap`).
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

thread_local! {
    /// The interrupt handler of the running test case (see [`with_interrupt`]).
    static INTERRUPT: std::cell::Cell<Option<*const (dyn Fn() + 'static)>> =
        const { std::cell::Cell::new(None) };
}

/// Runs `body` with `handler` installed as this thread's interrupt: every
/// [`interrupt`] call during `body` runs it. A `'static` function can then
/// stand for a PMI in objects (tracers, sinks) that must not borrow the
/// events which borrow them.
pub fn with_interrupt<R>(handler: &dyn Fn(), body: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            INTERRUPT.with(|c| c.set(None));
        }
    }
    // SAFETY: only the lifetime is erased; `Clear` removes the pointer when
    // this function returns or unwinds, while `handler` is still borrowed,
    // and the pointer is used only on this thread.
    let erased: *const (dyn Fn() + 'static) =
        unsafe { std::mem::transmute(handler as *const dyn Fn()) };
    let previous = INTERRUPT.with(|c| c.replace(Some(erased)));
    assert!(previous.is_none(), "with_interrupt does not nest");
    let _clear = Clear;
    body()
}

/// Runs the handler [`with_interrupt`] installed, if any: an interrupt
/// arriving at this point.
pub fn interrupt() {
    if let Some(f) = INTERRUPT.with(std::cell::Cell::get) {
        // SAFETY: `with_interrupt` stores a pointer to a handler it borrows
        // for as long as the pointer is stored.
        unsafe { (*f)() }
    }
}

/// One CPU's PT set-up over test memory: the ring and AUX area, the
/// software tracer (tapped by a model of its whole stream) and the PT PMU.
pub struct Pt<'p, 'x> {
    /// The data ring (`PERF_RECORD_AUX` goes there).
    pub ring: &'p perfaux::ring::Ring<'x>,
    /// The AUX area.
    pub area: &'p perfaux::aux::AuxArea<'x>,
    /// The software tracer.
    pub tracer: &'p perfaux::soft_pt::tracer::SoftTracer<'x, perfaux::soft_pt::tracer::Taps<'x>>,
    /// Every byte the tracer wrote.
    pub model: &'p std::cell::RefCell<StreamModel>,
    /// The PMU.
    pub pmu: &'p perfaux::pt::pmu::AreaPtPmu<
        'x,
        'x,
        &'x perfaux::soft_pt::tracer::SoftTracer<'x, perfaux::soft_pt::tracer::Taps<'x>>,
        perfaux::pt::topa::IdentityMap,
    >,
}

/// Builds a [`Pt`] over `mem` and `aux` (overwrite mode for ring and area if
/// `overwrite`), a PSB+ every `psb_period` bytes, `PERF_RECORD_AUX` for
/// `record_event`, and runs `f` with it.
pub fn with_pt<R>(
    mem: &crate::mem::RingMemory,
    aux: &crate::mem::AuxMemory,
    overwrite: bool,
    psb_period: u64,
    record_event: perfaux::ring::FixedEvent,
    f: impl FnOnce(&Pt<'_, '_>) -> R,
) -> R {
    use perfaux::pt::topa::{IdentityMap, TopaTable};
    let ring = mem.ring(perfaux::ring::RingConfig {
        overwrite,
        ..perfaux::ring::RingConfig::default()
    });
    let area = mem.aux_area(
        aux,
        perfaux::aux::AuxConfig {
            overwrite,
            ..perfaux::aux::AuxConfig::default()
        },
    );
    let mut tables = vec![TopaTable::new(); perfaux::pt::topa::tables_for_pages(aux.pages().len())];
    // SAFETY: the test memory outlives the buffer; only the tracer writes it.
    let buffer = unsafe {
        perfaux::pt::buffer::PtBuffer::new(&mut tables, aux.pages(), overwrite, &IdentityMap)
    }
    .expect("ToPA tables");
    let tracer = perfaux::soft_pt::tracer::SoftTracer::with_hooks(
        &IdentityMap,
        psb_period,
        perfaux::soft_pt::tracer::Taps::new(),
    );
    let model = std::cell::RefCell::new(StreamModel::default());
    tracer.hooks().set_tap(Some(&model));
    let pmu =
        perfaux::pt::pmu::PtPmu::new(&tracer, IdentityMap, &buffer, &area, &ring, record_event)
            .expect("a PT PMU over the area");
    f(&Pt {
        ring: &ring,
        area: &area,
        tracer: &tracer,
        model: &model,
        pmu: &pmu,
    })
}
