// SPDX-License-Identifier: MIT OR Apache-2.0
//! One simulated CPU and the engine objects it runs on, set up as the
//! kernel sets up `perf record -e '{intel_pt//u,cycles:u}' --aux-sample`
//! on a CPU: the perf buffer's memory, its data ring and AUX area
//! (`perf_mmap`, `rb_alloc_aux`), the PT driver's ToPA buffer
//! (`pt_buffer_setup_aux`), the tracer behind the PT PMU, and the group of
//! the PT leader with its samplers writing into the leader's buffer
//! (`PERF_EVENT_IOC_SET_OUTPUT`).
//!
//! The engine's objects borrow one another (a ring its pages, the PT PMU
//! its tracer, buffer, area and ring, an event its PMU and its leader), as
//! the kernel's refer to each other by pointer. They live in a run's
//! [`Arena`], allocated once at set-up and freed together at the end, so
//! that one [`Cpu`] holds them all.

use std::cell::{Cell, RefCell};

use perfaux::PmuCaps;
use perfaux::abi::PerfEventAttr;
use perfaux::aux::{AuxArea, AuxConfig};
use perfaux::event::{Buffer, Event, EventConfig};
use perfaux::lbr::{BranchFilter, Lbr};
use perfaux::pmu::{EventInfo, Platform, Pmu};
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::pmu::{AreaPtPmu, PtPmu};
use perfaux::pt::topa::{IdentityMap, TopaTable, tables_for_pages};
use perfaux::ring::{FixedEvent, Ring, RingConfig, SampleId};
use perfaux::sample::IrqMask;
use perfaux::soft_pt::stream::PacketSink;
use perfaux::soft_pt::tracer::{SoftTracer, Taps};
use typed_arena::Arena as TypedArena;

use super::code::Code;
use super::config::{
    CYCLES_PER_NS, Config, Mode, PSB_BASE, START_NS, TIMESLICE, TSC_EVERY, leader_attr,
    sampler_attr,
};
use super::memory::CpuMemory;
use super::period::{Period, TICK_NS};
use super::program::Thread;
use super::truth::CpuTruth;
use crate::rng::SplitMix64;

/// The PT driver of a simulated CPU: it programs the CPU's tracer, which
/// the simulator also feeds, over an identity address map.
type SimPt<'m> = AreaPtPmu<'m, 'm, &'m SoftTracer<'m, Taps<'m>>, IdentityMap>;

/// Threads per CPU.
const THREADS_PER_CPU: usize = 2;

/// What every CPU of a run shares: the configuration, the code the
/// threads run, and the attrs of the group each CPU opens.
pub struct Setup<'a> {
    /// The run's configuration.
    pub config: &'a Config,
    /// The user program.
    pub code: &'a Code,
    /// The interrupt handler, when the kernel is traced.
    pub kernel: Option<&'a Code>,
    /// The PT leader's attr.
    pub leader_attr: PerfEventAttr,
    /// The samplers' attrs, one per counter of the configuration.
    pub sampler_attrs: Vec<PerfEventAttr>,
}

impl<'a> Setup<'a> {
    /// The set-up of `config` running `code` (and `kernel`'s handler).
    pub fn new(config: &'a Config, code: &'a Code, kernel: Option<&'a Code>) -> Setup<'a> {
        Setup {
            config,
            code,
            kernel,
            leader_attr: leader_attr(config),
            sampler_attrs: config
                .counters
                .iter()
                .map(|&k| sampler_attr(k, config))
                .collect(),
        }
    }
}

/// Where a run's buffers live: one typed arena per kind, each object
/// allocated once, at set-up, by [`Cpu::new`], and borrowed for `'m` by the
/// objects built after it (the ring and area by their pages, the PT buffer
/// by its tables). Nothing here has a destructor that reads another
/// object, so they may refer to each other and go together.
#[derive(Default)]
pub struct Arena<'m> {
    memories: TypedArena<CpuMemory>,
    platforms: TypedArena<CpuPlatform>,
    tables: TypedArena<Vec<TopaTable>>,
    rings: TypedArena<Ring<'m>>,
    areas: TypedArena<AuxArea<'m>>,
    tracers: TypedArena<SoftTracer<'m, Taps<'m>>>,
    taps: TypedArena<RefCell<StreamTap>>,
    pt_buffers: TypedArena<PtBuffer<'m>>,
}

/// Where a run's PMUs and events live, over an [`Arena`]: a PT PMU holds
/// the open transaction on its AUX area (its drop closes it), so it must
/// go before the area: declared after the `Arena`, this is dropped first.
/// The events borrow the PMUs and each other for `'e`.
#[derive(Default)]
pub struct EventArena<'m, 'e> {
    pts: TypedArena<SimPt<'m>>,
    buffers: TypedArena<Buffer<'e>>,
    events: TypedArena<Event<'e>>,
}

/// The platform of one simulated CPU: its id, its clock and the thread on
/// it. The machine sets the clock and the thread; the engine reads them.
pub struct CpuPlatform {
    cpu: u32,
    /// perf time (ns), as `perf_clock()` reads it.
    pub now: Cell<u64>,
    /// The (pid, tid) on the CPU.
    pub current: Cell<(u32, u32)>,
}

impl IrqMask for CpuPlatform {
    // One host thread plays every CPU and takes its PMIs at points it
    // chooses: there is nothing to mask.
    fn save(&self) -> usize {
        0
    }
    fn restore(&self, _: usize) {}
}

impl Platform for CpuPlatform {
    fn cpu(&self) -> u32 {
        self.cpu
    }
    fn clock(&self) -> u64 {
        self.now.get()
    }
    fn current(&self) -> (u32, u32) {
        self.current.get()
    }
}

/// The counters' PMU: the simulator counts, the PMU only says what it is.
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

/// Keeps every byte a tracer writes (the truth's PSB positions).
#[derive(Default)]
pub struct StreamTap(Vec<u8>);

impl PacketSink for StreamTap {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

/// One simulated CPU: its engine objects (in the run's [`Arena`] and
/// [`EventArena`]) and the
/// state of what runs on it.
///
/// # Invariants
///
/// `samplers` has one event per counter of the configuration, each in
/// `leader`'s group and writing to its buffer; `current < threads.len()`.
pub struct Cpu<'m, 'e> {
    /// The CPU's number.
    pub index: usize,
    /// What every CPU shares.
    pub setup: &'e Setup<'e>,
    /// The perf buffer's pages (the drain reads them as `perf record`).
    pub memory: &'m CpuMemory,
    /// The CPU's clock and current thread.
    pub platform: &'m CpuPlatform,
    /// The leader's data ring.
    pub ring: &'m Ring<'m>,
    /// The leader's AUX area.
    pub area: &'m AuxArea<'m>,
    /// The software PT tracer.
    pub tracer: &'m SoftTracer<'m, Taps<'m>>,
    /// What the tracer wrote, with `--truth`.
    tap: &'m RefCell<StreamTap>,
    /// The PT PMU over `tracer`, `area` and `ring`.
    pub pt: &'e SimPt<'m>,
    /// The PT leader.
    pub leader: &'e Event<'e>,
    /// The sampling counters, in the configuration's order.
    pub samplers: Vec<&'e Event<'e>>,
    /// The CPU's last-branch record, when samples carry branch stacks: one
    /// per CPU, flushed when a thread is switched in, as
    /// `intel_pmu_lbr_sched_task` flushes it for per-CPU events.
    pub lbr: Option<Lbr>,
    /// The threads that take turns on the CPU.
    pub threads: Vec<Thread>,
    /// The running thread's index in `threads`.
    pub current: usize,
    /// Cycles run so far.
    pub cycles: u64,
    /// When the scheduler next switches threads (cycles).
    pub next_switch: u64,
    /// When the next periodic TSC packet is due (cycles).
    pub next_tsc: u64,
    /// Each counter's period (fixed, or retuned in frequency mode).
    pub periods: Vec<Period>,
    /// When the scheduler tick next retunes counters in frequency mode
    /// (cycles).
    pub next_freq_tick: u64,
    /// Samples the CPU may still write (`--samples`: what the run still
    /// needs), or `None` for no limit. Its quantum ends when it reaches 0,
    /// so that a run writes exactly the samples asked for.
    pub sample_budget: Option<u64>,
    /// The CPU's random choices.
    pub rng: SplitMix64,
    /// What the CPU did, for `--truth` (kept only then).
    pub truth: CpuTruth,
}

impl<'m, 'e> Cpu<'m, 'e> {
    /// Sets up CPU `index`: its buffer, tracer, PT PMU and group, all in
    /// `arena` and `events`, and its threads, whose seeds and the CPU's come from
    /// `seeds`.
    pub fn new(
        index: usize,
        setup: &'e Setup<'e>,
        arena: &'m Arena<'m>,
        events: &'e EventArena<'m, 'e>,
        seeds: &mut SplitMix64,
    ) -> Result<Cpu<'m, 'e>, String> {
        let config = setup.config;
        let overwrite = config.mode == Mode::Snapshot;
        let memory: &CpuMemory = arena.memories.alloc(CpuMemory::new(
            config.data_pages,
            config.aux_pages,
            overwrite,
        )?);
        let platform: &CpuPlatform = arena.platforms.alloc(CpuPlatform {
            cpu: index as u32,
            now: Cell::new(START_NS),
            current: Cell::new((0, 0)),
        });
        // SAFETY: the pages belong to `memory`, in the arena for 'm like
        // the ring; only this ring writes them and only the drain's
        // consumer (`Sink::drain`) reads them.
        let ring = unsafe {
            Ring::new(
                memory.user_page(),
                memory.data_pages(),
                0,
                RingConfig::default(),
            )
        }
        .map_err(|e| format!("data ring: {e:?}"))?;
        let ring: &Ring<'m> = arena.rings.alloc(ring);
        let aux = AuxConfig {
            overwrite,
            ..AuxConfig::default()
        };
        // SAFETY: as for the ring: the AUX pages belong to `memory`; the
        // tracer writes them and the drain reads them only below aux_head.
        let area = unsafe { AuxArea::new(memory.user_page(), memory.aux_pages(), aux) }
            .map_err(|e| format!("AUX area: {e:?}"))?;
        let area: &AuxArea<'m> = arena.areas.alloc(area);
        let tracer: &SoftTracer<'m, Taps<'m>> =
            arena
                .tracers
                .alloc(SoftTracer::with_hooks(&IdentityMap, PSB_BASE, Taps::new()));
        let tap: &RefCell<StreamTap> = arena.taps.alloc(RefCell::default());
        if config.truth {
            tracer.hooks().set_tap(Some(tap));
        }
        // `setup_aux`: the PT state of the AUX buffer.
        let tables = arena
            .tables
            .alloc(vec![TopaTable::new(); tables_for_pages(config.aux_pages)]);
        // SAFETY: the AUX pages belong to `memory`, alive for 'm; only the
        // tracer writes them through this buffer.
        let buffer = unsafe { PtBuffer::new(tables, memory.aux_pages(), overwrite, &IdentityMap) }
            .map_err(|e| format!("ToPA: {e:?}"))?;
        let buffer: &PtBuffer<'m> = arena.pt_buffers.alloc(buffer);
        let leader_id = config.event_id(index, 0);
        let pt = PtPmu::new(
            tracer,
            IdentityMap,
            buffer,
            area,
            ring,
            leader_record_event(&setup.leader_attr, leader_id, index),
        )
        .map_err(|e| format!("PT PMU: {e:?}"))?
        .with_platform(platform);
        let pt: &SimPt<'m> = events.pts.alloc(pt);
        let buffer: &Buffer<'e> = events.buffers.alloc(Buffer {
            ring,
            aux: Some(area),
        });

        let leader = Event::open(EventConfig {
            attr: setup.leader_attr,
            pmu: pt,
            id: leader_id,
            cpu: index as i32,
            leader: None,
            parent: None,
        })
        .map_err(|rule| format!("opening the PT leader: {rule:?}"))?;
        let leader: &Event<'e> = events.events.alloc(leader);
        let mut samplers = Vec::with_capacity(setup.sampler_attrs.len());
        for (k, attr) in setup.sampler_attrs.iter().enumerate() {
            let e = Event::open(EventConfig {
                attr: *attr,
                pmu: &CounterPmu,
                id: config.event_id(index, k + 1),
                cpu: index as i32,
                leader: Some(leader),
                parent: None,
            })
            .map_err(|rule| format!("opening a sampler: {rule:?}"))?;
            samplers.push(&*events.events.alloc(e));
        }
        leader.set_buffer(buffer);
        for s in &samplers {
            s.join_group();
            s.set_output(leader)
                .map_err(|e| format!("set_output: {e:?}"))?;
        }

        let threads: Vec<Thread> = (0..THREADS_PER_CPU)
            .map(|t| {
                let pid = 1000 + (index * THREADS_PER_CPU + t) as u32;
                Thread::new(pid, pid, setup.code, 0, seeds.next_u64())
            })
            .collect();
        platform.current.set((threads[0].pid, threads[0].tid));
        // INVARIANT: one sampler per counter, each joined to `leader`'s
        // group with its output set to the leader's; `current` is 0 of
        // THREADS_PER_CPU (> 0) threads.
        Ok(Cpu {
            index,
            setup,
            memory,
            platform,
            ring,
            area,
            tracer,
            tap,
            pt,
            leader,
            samplers,
            lbr: config
                .branches
                .map(|bits| BranchFilter::new(bits).map(Lbr::new))
                .transpose()
                .map_err(|e| format!("branch stacks: {}", e.reason))?,
            threads,
            current: 0,
            cycles: 0,
            next_switch: TIMESLICE,
            next_tsc: TSC_EVERY,
            periods: config
                .counters
                .iter()
                .map(|_| match config.freq {
                    Some(f) => Period::frequency(f),
                    None => Period::fixed(config.period),
                })
                .collect(),
            next_freq_tick: TICK_NS * CYCLES_PER_NS,
            sample_budget: None,
            rng: SplitMix64::new(seeds.next_u64()),
            truth: CpuTruth::default(),
        })
    }

    /// The leader's id.
    pub fn leader_id(&self) -> u64 {
        self.setup.config.event_id(self.index, 0)
    }

    /// The CPU's truth with every byte its tracer wrote, the tap detached.
    pub fn into_truth(self) -> CpuTruth {
        self.tracer.hooks().set_tap(None);
        let mut truth = self.truth;
        truth.stream = std::mem::take(&mut self.tap.borrow_mut().0);
        truth
    }
}

/// The `PERF_RECORD_AUX` identity of CPU `c`'s leader.
fn leader_record_event(attr: &PerfEventAttr, id: u64, c: usize) -> FixedEvent {
    FixedEvent {
        id,
        sample_id: Some(SampleId {
            sample_type: attr.sample_type,
            id,
            stream_id: id,
            cpu: c as u32,
            ..SampleId::default()
        }),
    }
}
