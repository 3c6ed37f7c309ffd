// SPDX-License-Identifier: GPL-2.0-or-later
//! What one guest thread gets, over its slot's pages, as a CPU gets it in
//! the kernel for `perf record -e '{intel_pt//u,instructions:u}'`: the data
//! ring and AUX area (`perf_mmap`, `rb_alloc_aux`), the PT driver's ToPA
//! buffer (`pt_buffer_setup_aux`), the software tracer behind the PT PMU,
//! and the group of the PT leader with its sampler writing into the
//! leader's buffer (`PERF_EVENT_IOC_SET_OUTPUT`); or, for branch stacks
//! alone (`perf record -e instructions:u -b`), the sampler by itself.
//!
//! The objects borrow one another as the kernel's refer to each other by
//! pointer. A slot is claimed once and its thread's engine lives until the
//! process ends, so they are allocated once and never freed: a few KiB per
//! traced thread, for the life of its process.

use std::cell::Cell;

use perfaux::PmuCaps;
use perfaux::abi::PerfEventAttr;
use perfaux::aux::{AuxArea, AuxConfig};
use perfaux::event::{Buffer, Event, EventConfig};
use perfaux::pmu::{EventInfo, Platform, Pmu};
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::pmu::{AreaPtPmu, PtPmu};
use perfaux::pt::topa::{IdentityMap, TopaTable, tables_for_pages};
use perfaux::ring::{FixedEvent, Ring, RingConfig, SampleId};
use perfaux::sample::IrqMask;
use perfaux::soft_pt::tracer::SoftTracer;
use perfaux_qemu_session::{Mode, event_id};

use crate::session::Session;

/// The tracer's PSB period: 2 KiB, `psb_period=0`, so that every sample's
/// 4 KiB holds a PSB+ (a decoder's sync point) with the clock current.
const PSB_BASE: u64 = 2048;

/// perf time now: the session's clock (`CLOCK_MONOTONIC` ns, the trace's
/// TSC too).
pub use perfaux_qemu_session::now;

/// The platform of one guest thread: its slot is its CPU.
pub struct ThreadPlatform {
    cpu: u32,
    /// The (pid, tid) on the CPU.
    pub current: Cell<(u32, u32)>,
}

impl IrqMask for ThreadPlatform {
    // The PMI is taken between two blocks by the thread itself: nothing
    // interrupts the engine.
    fn save(&self) -> usize {
        0
    }
    fn restore(&self, _: usize) {}
}

impl Platform for ThreadPlatform {
    fn cpu(&self) -> u32 {
        self.cpu
    }
    fn clock(&self) -> u64 {
        now()
    }
    fn current(&self) -> (u32, u32) {
        self.current.get()
    }
}

/// The sampler's PMU: the plugin counts, the PMU only says what it is.
struct CounterPmu;

impl Pmu for CounterPmu {
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

/// The PT driver of a thread: it programs the thread's tracer, which the
/// instrumentation also feeds, over an identity address map.
pub type ThreadPt = AreaPtPmu<'static, 'static, &'static SoftTracer<'static>, IdentityMap>;

/// A thread's PT half: the AUX area, the software tracer, and the PT PMU
/// over them.
pub struct Pt {
    /// The leader's AUX area.
    pub area: &'static AuxArea<'static>,
    /// The software PT tracer.
    pub tracer: &'static SoftTracer<'static>,
    /// The PT PMU over `tracer`, `area` and the ring.
    pub pmu: &'static ThreadPt,
}

/// One thread's engine objects.
pub struct Engine {
    /// The slot (the thread's CPU).
    pub slot: u32,
    /// The thread's platform.
    pub platform: &'static ThreadPlatform,
    /// The leader's data ring.
    pub ring: &'static Ring<'static>,
    /// The PT half; `None` when the sampler alone records
    /// ([`Mode::Branches`]).
    pub pt: Option<Pt>,
    /// The group leader: the PT event, or the sampler when there is no PT.
    pub leader: &'static Event<'static>,
    /// The sampler, when the run samples.
    pub sampler: Option<&'static Event<'static>>,
}

/// The trailer of records about `pid`/`tid` from slot `slot`'s leader.
pub fn trailer(attr: &PerfEventAttr, slot: u32, pid: u32, tid: u32, time: u64) -> SampleId {
    let id = event_id(slot, 0);
    SampleId {
        sample_type: attr.sample_type,
        pid,
        tid,
        time,
        id,
        stream_id: id,
        cpu: slot,
    }
}

impl Engine {
    /// The tracer's clock reads `tsc` from now on (no tracer: nothing).
    pub fn set_clock(&self, tsc: u64) {
        if let Some(pt) = &self.pt {
            pt.tracer.set_clock(tsc);
        }
    }

    /// Sets up slot `slot` of `session` for thread `pid`/`tid`, its group
    /// scheduled in (tracing on, no packet generated until the first
    /// block).
    pub fn new(session: &'static Session, slot: u32, pid: u32, tid: u32) -> Result<Engine, String> {
        let h = session.header();
        let mode = session.layout().mode();
        let platform: &'static ThreadPlatform = Box::leak(Box::new(ThreadPlatform {
            cpu: slot,
            current: Cell::new((pid, tid)),
        }));
        let data: &'static [*mut u8] = Box::leak(session.data_pages(slot).into_boxed_slice());
        // SAFETY: the slot's pages are in the session mapping, alive for
        // the process; this thread claimed the slot, so only this ring
        // writes them and only the recorder's consumer reads them.
        let ring = unsafe { Ring::new(session.user_page(slot), data, 0, RingConfig::default()) }
            .map_err(|e| format!("data ring: {e:?}"))?;
        let ring: &'static Ring<'static> = Box::leak(Box::new(ring));
        let pt = match mode {
            Mode::Branches => None,
            Mode::Sample | Mode::Full => Some(Self::pt(session, slot, ring, platform)?),
        };
        // The PT event leads; without one, the sampler (branch stacks alone).
        let pmu: &'static dyn Pmu = match &pt {
            Some(pt) => pt.pmu,
            None => &CounterPmu,
        };
        let leader = Event::open(EventConfig {
            attr: h.leader_attr,
            pmu,
            id: event_id(slot, 0),
            cpu: slot as i32,
            leader: None,
            parent: None,
        })
        .map_err(|rule| format!("opening the leader: {rule:?}"))?;
        let leader: &'static Event<'static> = Box::leak(Box::new(leader));
        let events: &'static Buffer<'static> = Box::leak(Box::new(Buffer {
            ring,
            aux: pt.as_ref().map(|pt| pt.area),
        }));
        leader.set_buffer(events);
        let sampler = if mode == Mode::Branches {
            Some(leader)
        } else if h.sampler_attr.sample_period != 0 {
            let e = Event::open(EventConfig {
                attr: h.sampler_attr,
                pmu: &CounterPmu,
                id: event_id(slot, 1),
                cpu: slot as i32,
                leader: Some(leader),
                parent: None,
            })
            .map_err(|rule| format!("opening the sampler: {rule:?}"))?;
            let e: &'static Event<'static> = Box::leak(Box::new(e));
            e.join_group();
            e.set_output(leader)
                .map_err(|e| format!("set_output: {e:?}"))?;
            Some(e)
        } else {
            None
        };
        leader
            .sched_in(platform)
            .map_err(|e| format!("scheduling the group in: {e:?}"))?;
        Ok(Engine {
            slot,
            platform,
            ring,
            pt,
            leader,
            sampler,
        })
    }

    /// The PT half of slot `slot`: its AUX area (snapshot in sample mode),
    /// the ToPA buffer over it, the tracer, and the PT PMU writing
    /// `PERF_RECORD_AUX` into `ring`.
    fn pt(
        session: &'static Session,
        slot: u32,
        ring: &'static Ring<'static>,
        platform: &'static ThreadPlatform,
    ) -> Result<Pt, String> {
        let overwrite = session.layout().mode() == Mode::Sample;
        let aux: &'static [*mut u8] = Box::leak(session.aux_pages(slot).into_boxed_slice());
        let config = AuxConfig {
            overwrite,
            ..AuxConfig::default()
        };
        // SAFETY: as for the ring: the AUX pages are the claimed slot's;
        // the tracer writes them and the recorder reads them below aux_head.
        let area = unsafe { AuxArea::new(session.user_page(slot), aux, config) }
            .map_err(|e| format!("AUX area: {e:?}"))?;
        let area: &'static AuxArea<'static> = Box::leak(Box::new(area));
        let tracer: &'static SoftTracer<'static> =
            Box::leak(Box::new(SoftTracer::new(&IdentityMap, PSB_BASE)));
        let tables: &'static mut [TopaTable] =
            Box::leak(vec![TopaTable::new(); tables_for_pages(aux.len())].into_boxed_slice());
        // SAFETY: the AUX pages are the slot's, alive for the process; only
        // the tracer writes them through this buffer.
        let buffer = unsafe { PtBuffer::new(tables, aux, overwrite, &IdentityMap) }
            .map_err(|e| format!("ToPA: {e:?}"))?;
        let buffer: &'static PtBuffer<'static> = Box::leak(Box::new(buffer));
        let record_event = FixedEvent {
            id: event_id(slot, 0),
            sample_id: Some(trailer(&session.header().leader_attr, slot, 0, 0, 0)),
        };
        let pmu = PtPmu::new(tracer, IdentityMap, buffer, area, ring, record_event)
            .map_err(|e| format!("PT PMU: {e:?}"))?
            .with_platform(platform);
        let pmu: &'static ThreadPt = Box::leak(Box::new(pmu));
        Ok(Pt { area, tracer, pmu })
    }
}
