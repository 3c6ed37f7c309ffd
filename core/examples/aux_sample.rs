// SPDX-License-Identifier: MIT OR Apache-2.0
//! One AUX sample, end to end, as a program: the group `perf record -e
//! '{intel_pt//,cycles}' --aux-sample=4096` sets up (the crate's front page
//! walks through the same code), then `SAMPLES` overflows of the sampler,
//! each a `PERF_RECORD_SAMPLE` whose AUX block `snapshot_aux` fills.
//!
//! `scripts/count-indirect-calls` runs it under gdb and counts the indirect
//! calls one sample makes (`one_sample`): what every PMI pays for the
//! engine's seams.

use perfaux::PmuCaps;
use perfaux::abi::{PerfEventAttr, PerfEventMmapPage, sample_type as st};
use perfaux::aux::{AuxArea, AuxConfig};
use perfaux::event::{Buffer, Event, EventConfig};
use perfaux::pmu::{EventInfo, Platform, Pmu};
use perfaux::pt::topa::{IdentityMap, TopaTable};
use perfaux::pt::{buffer::PtBuffer, pmu::PtPmu};
use perfaux::ring::{Consumer, FixedEvent, Ring, RingConfig};
use perfaux::sample::{IrqMask, SampleData};
use perfaux::soft_pt::stream::TraceEvent;
use perfaux::soft_pt::tracer::SoftTracer;

#[repr(C, align(4096))]
struct Page([u8; 4096]);

/// The sampling event's PMU: a counter that overflows when asked.
struct Cycles;
impl Pmu for Cycles {
    fn caps(&self) -> PmuCaps {
        PmuCaps::NONE
    }
    fn add(&self, _: &EventInfo<'_>, _: u32) -> perfaux::Result<()> {
        Ok(())
    }
    fn del(&self, _: &EventInfo<'_>, _: u32) {}
    fn start(&self, _: &EventInfo<'_>, _: u32) {}
    fn stop(&self, _: &EventInfo<'_>, _: u32) {}
}

/// CPU 0 in its PMI: interrupts masked already.
struct Cpu0;
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
        1_000
    }
    fn current(&self) -> (u32, u32) {
        (42, 42)
    }
}

const SAMPLES: usize = 4;
const AUX_PAGES: usize = 16;

/// The sampler overflows once: one `PERF_RECORD_SAMPLE` with its AUX block.
#[inline(never)]
fn one_sample(cycles: &Event<'_>) -> perfaux::Result<()> {
    let data = SampleData {
        ip: 0x40_1234,
        ..SampleData::default()
    };
    cycles.overflow(&Cpu0, &data).map(|_| ())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut user = Box::new(Page([0; 4096]));
    let mut data: Vec<Page> = (0..64).map(|_| Page([0; 4096])).collect();
    let mut aux: Vec<Page> = (0..AUX_PAGES).map(|_| Page([0; 4096])).collect();
    let user_page = user.0.as_mut_ptr().cast::<PerfEventMmapPage>();
    let data_pages: Vec<*mut u8> = data.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
    let aux_pages: Vec<*mut u8> = aux.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
    // SAFETY: live, aligned, disjoint pages, used only by these objects.
    let ring = unsafe { Ring::new(user_page, &data_pages, 0, RingConfig::default())? };
    let snapshot_mode = AuxConfig {
        overwrite: true,
        ..AuxConfig::default()
    };
    // SAFETY: as above; `user_page` is the ring's.
    let area = unsafe { AuxArea::new(user_page, &aux_pages, snapshot_mode)? };
    let mut tables = [TopaTable::new()];
    // SAFETY: as above; only the tracer this buffer programs writes them.
    let pt_buffer = unsafe { PtBuffer::new(&mut tables, &aux_pages, true, &IdentityMap)? };
    let tracer = SoftTracer::new(&IdentityMap, 4096);
    let pt = PtPmu::new(
        &tracer,
        &IdentityMap,
        &pt_buffer,
        &area,
        &ring,
        FixedEvent::default(),
    )?;

    let mut pt_attr = PerfEventAttr::new(136);
    pt_attr.type_ = 8;
    let leader = Event::open(EventConfig {
        attr: pt_attr,
        pmu: &pt,
        id: 1,
        cpu: 0,
        leader: None,
        parent: None,
    })
    .map_err(|rule| format!("{rule:?}"))?;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    leader.set_buffer(&buffer);
    let mut attr = PerfEventAttr::new(136);
    attr.sample_period = 100_000;
    attr.sample_type = st::IP | st::TID | st::TIME | st::AUX;
    attr.aux_sample_size = 4096;
    let cycles = Event::open(EventConfig {
        attr,
        pmu: &Cycles,
        id: 2,
        cpu: 0,
        leader: Some(&leader),
        parent: None,
    })
    .map_err(|rule| format!("{rule:?}"))?;
    cycles.join_group();
    cycles.set_output(&leader)?;
    leader.sched_in(&Cpu0)?;

    // SAFETY: the ring's memory, in writable mode; the only consumer.
    let mut consumer = unsafe { Consumer::new(user_page, &data_pages, 0)? };
    let mut scratch = vec![0u8; 65536];
    let mut samples = 0;
    for _ in 0..SAMPLES {
        // Traced code runs, then the counter overflows: the PMI.
        tracer.trace(TraceEvent::Enable(0x40_0000));
        for i in 0..20_000 {
            tracer.trace(TraceEvent::Conditional {
                taken: i % 3 != 0,
                next: 0x40_0000,
            });
        }
        one_sample(&cycles)?;
        consumer.refresh();
        while let Some(record) = consumer.next_record(&mut scratch) {
            let record = record?;
            samples += usize::from(perfaux::ring::read_header(record).map(|h| h.type_) == Some(9));
        }
        consumer.commit();
    }
    if samples != SAMPLES {
        return Err(format!("{samples} samples read back, {SAMPLES} written").into());
    }
    println!("{samples} AUX samples of 4096 bytes written and read back");
    Ok(())
}
