// SPDX-License-Identifier: MIT OR Apache-2.0
//! The simulated machine behind `perfaux record`: N CPUs, each with the
//! engine's data ring and AUX area over its own pages, a software PT tracer
//! behind a `PtPmu`, and a group of a PT leader with sampling counters under
//! it, exactly as `perf record -e '{intel_pt//,cycles}' --aux-sample` sets
//! them up. The synthetic program drives the tracers; counter overflows are
//! PMIs that call `Event::overflow`; the rings are drained as `perf record`
//! drains them, into a perf.data [`Writer`].
//!
//! The run is a pure function of its [`Config`]: one host thread plays the
//! CPUs in turn, simulated time is counted in cycles, and every random
//! choice comes from the seed, so the same seed writes the same bytes.

pub mod code;
pub mod elf;
pub mod memory;
pub mod program;
pub mod records;
pub mod truth;

use std::cell::{Cell, RefCell};
use std::io::{Seek, Write};
use std::ops::ControlFlow;

use perfaux::PmuCaps;
use perfaux::abi::{PerfEventAttr, attr_flags, aux_flags, misc, record_type, sample_type as st};
use perfaux::aux::{AuxArea, AuxConfig, AuxConsumer};
use perfaux::event::{Buffer, Event, EventConfig};
use perfaux::pmu::{EventInfo, Platform, Pmu};
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::config::bits as pt_bits;
use perfaux::pt::pmu::{AreaPtPmu, PtPmu};
use perfaux::pt::stream::{PacketSink, TraceEvent};
use perfaux::pt::topa::{IdentityMap, TopaTable, tables_for_pages};
use perfaux::pt::tracer::{SoftTracer, TraceHw};
use perfaux::ring::{Consumer, FixedEvent, Ring, RingConfig, SampleId};
use perfaux::sample::{IrqMask, SampleData};

use self::code::{Code, Shape};
use self::memory::CpuMemory;
use self::program::{KERNEL_TEXT_START, TEXT_START, Thread};
use self::truth::{Branch, CpuTruth, SamplePoint};
use crate::perfdata::{
    AUXTRACE_INTEL_PT, BuildId, Features, GroupDesc, PipeWriter, RecordWriter, Writer, WriterEvent,
    intel_pt_priv, parse_sample, user_record,
};
use crate::rng::SplitMix64;

/// The `attr.type` of the simulated `intel_pt` PMU.
pub const PT_TYPE: u32 = 8;
/// The tracer's PSB period for `psb_period=0`: 2 KiB, as the hardware's.
const PSB_BASE: u64 = 2048;
/// Bytes between PSB+ sequences: `psb_period=0`, 2^(0+11), the smallest
/// Intel PT offers, so that every default 4 KiB sample holds a PSB (a
/// decoder's sync point) with room to spare.
pub const PSB_PERIOD: u64 = PSB_BASE;
/// The perf time of the first simulated cycle (ns).
pub const START_NS: u64 = 1_000_000_000;
/// The simulated CPUs run at 2 GHz: two cycles a nanosecond, and so does
/// the TSC: perf time = TSC / 2 (`time_shift` 1, `time_mult` 1).
pub const CYCLES_PER_NS: u64 = 2;
/// The program's name (its COMM).
pub const PROGRAM: &str = "perfaux-demo";
/// Cycles each CPU runs before the rings are drained (100 µs).
const QUANTUM: u64 = 200_000;
/// Cycles a thread runs before the CPU switches to the next (1 ms).
const TIMESLICE: u64 = 2_000_000;
/// Cycles between TSC packets (10 µs).
const TSC_EVERY: u64 = 20_000;
/// One step in this many takes an interrupt.
const IRQ_ONE_IN: u64 = 5000;
/// Cycles an interrupt spends in the kernel.
const IRQ_CYCLES: u64 = 1200;
/// Cycles a PMI spends in the kernel (the sample is taken halfway).
const PMI_CYCLES: u64 = 600;
/// Cycles on each side of a context switch's records.
const SWITCH_CYCLES: u64 = 400;
/// Threads per CPU.
const THREADS_PER_CPU: usize = 2;

/// How the PT leader's AUX area is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Overwrite (snapshot) area; samplers carry the newest trace bytes.
    Snapshot,
    /// Writable area; the trace is read whole (`PERF_RECORD_AUX` +
    /// `PERF_RECORD_AUXTRACE`); samplers carry no AUX data (Intel PT takes
    /// AUX samples from snapshot buffers only).
    Full,
}

/// A sampling counter of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// `cycles` (PERF_COUNT_HW_CPU_CYCLES).
    Cycles,
    /// `instructions` (PERF_COUNT_HW_INSTRUCTIONS).
    Instructions,
    /// `branches` (PERF_COUNT_HW_BRANCH_INSTRUCTIONS).
    Branches,
}

impl Counter {
    /// The name perf shows.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Cycles => "cycles",
            Counter::Instructions => "instructions",
            Counter::Branches => "branches",
        }
    }

    fn config(self) -> u64 {
        match self {
            Counter::Cycles => 0,
            Counter::Instructions => 1,
            Counter::Branches => 4,
        }
    }
}

/// When the run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After this much simulated time (ns) on every CPU.
    Duration(u64),
    /// Once this many samples are in the file.
    Samples(u64),
}

/// Everything that determines a run (and so the file's bytes).
#[derive(Clone, Debug)]
pub struct Config {
    /// Simulated CPUs.
    pub cpus: usize,
    /// When to stop.
    pub stop: Stop,
    /// Counter events between samples.
    pub period: u64,
    /// `attr.aux_sample_size` of the samplers (snapshot mode).
    pub aux_sample_size: u32,
    /// AUX area pages per CPU (a power of two).
    pub aux_pages: usize,
    /// Data ring pages per CPU (a power of two).
    pub data_pages: usize,
    /// The seed of every random choice.
    pub seed: u64,
    /// Snapshot or full-trace.
    pub mode: Mode,
    /// The sampling counters (at least one).
    pub counters: Vec<Counter>,
    /// The command line, for the file's cmdline feature.
    pub cmdline: Vec<String>,
    /// Trace the kernel's interrupt handler too (`intel_pt//` instead of
    /// `intel_pt//u`).
    pub kernel: bool,
    /// Keep what the ground truth needs and render it ([`Outputs::truth`]).
    pub truth: bool,
    /// The path the MMAP2 records give the program's ELF (where the caller
    /// writes [`Outputs::elf`]).
    pub binary: String,
}

impl Config {
    /// Refuses what the kernel would refuse, or what makes no run.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=256).contains(&self.cpus) {
            return Err(format!("--cpus {}: between 1 and 256", self.cpus));
        }
        if self.period == 0 {
            return Err("--period 0: a counter must overflow after at least one event".into());
        }
        if !self.data_pages.is_power_of_two() {
            return Err(format!(
                "--data-pages {}: the data ring is a power of two pages (perf_mmap: EINVAL)",
                self.data_pages
            ));
        }
        if !self.aux_pages.is_power_of_two() {
            return Err(format!(
                "--aux-pages {}: the AUX area is a power of two pages (perf_mmap: EINVAL)",
                self.aux_pages
            ));
        }
        if self.mode == Mode::Full && self.aux_pages < 2 {
            return Err(
                "--aux-pages 1 with --mode full: a writable AUX area needs two chunks at least (rb_alloc_aux: EINVAL)"
                    .into(),
            );
        }
        if self.mode == Mode::Snapshot && self.aux_sample_size == 0 {
            return Err("--aux-sample-size 0: snapshot mode samples need an AUX size".into());
        }
        if self.counters.is_empty() {
            return Err("no sampling event".into());
        }
        let buffers = self.cpus as u64 * (self.aux_pages as u64 + self.data_pages as u64) * 4096;
        if buffers > MAX_BUFFER_BYTES {
            return Err(format!(
                "--aux-pages {} --data-pages {} on {} CPUs: {:.1} GiB of buffers, above the {} GiB the simulator takes (perf record is held to perf_event_mlock_kb the same way)",
                self.aux_pages,
                self.data_pages,
                self.cpus,
                buffers as f64 / (1u64 << 30) as f64,
                MAX_BUFFER_BYTES >> 30
            ));
        }
        if self.mode == Mode::Snapshot {
            let aux = self
                .aux_sample_size
                .min(max_aux_per_sample(self))
                .min((self.aux_pages * 4096).min(u32::MAX as usize) as u32)
                & !7;
            let sample = (sample_fixed_bytes(self) + aux) as usize;
            if sample > self.data_pages * 4096 {
                return Err(format!(
                    "--data-pages {}: a sample with {aux} bytes of trace takes {sample} bytes, more than the {}-byte data ring holds: every sample would be lost",
                    self.data_pages,
                    self.data_pages * 4096
                ));
            }
        }
        match self.stop {
            Stop::Duration(0) | Stop::Samples(0) => {
                Err("nothing to record: zero duration or samples".into())
            }
            _ => Ok(()),
        }
    }
}

/// What a run wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// `PERF_RECORD_SAMPLE` records.
    pub samples: u64,
    /// Samples that carried AUX data.
    pub aux_samples: u64,
    /// Bytes of AUX data in samples.
    pub aux_sample_bytes: u64,
    /// `PERF_RECORD_AUX` records.
    pub aux_records: u64,
    /// `PERF_RECORD_AUX` records flagged TRUNCATED.
    pub aux_truncated: u64,
    /// Bytes of AUX data in `PERF_RECORD_AUXTRACE` records.
    pub auxtrace_bytes: u64,
    /// Records the data rings dropped (sum of `PERF_RECORD_LOST.lost`).
    pub lost_records: u64,
    /// Samples the rings refused (the events' lost-sample counts).
    pub lost_samples: u64,
    /// Trace events whose packets the tracers lost: their AUX areas were
    /// full (the TRUNCATED records), the consumer behind.
    pub lost_trace_events: u64,
    /// Records of every type.
    pub records: u64,
    /// Trace bytes the tracers wrote.
    pub trace_bytes: u64,
    /// Simulated time per CPU (ns).
    pub simulated_ns: u64,
    /// Bytes of the data section.
    pub data_bytes: u64,
    /// The progress callback stopped the run before its end.
    pub interrupted: bool,
}

/// How far a run has come, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Done, from 0 to 1.
    pub fraction: f64,
    /// Samples written so far.
    pub samples: u64,
    /// Bytes of records written so far (the file's data section).
    pub bytes: u64,
}

/// The platform of one simulated CPU: its id, its clock and the thread on it.
struct CpuPlatform {
    cpu: u32,
    now: Cell<u64>,
    current: Cell<(u32, u32)>,
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

/// The sample and trailer fields of every event: perf needs the same
/// `sample_id` layout in all of them, and IDENTIFIER to find the event.
const ID_FIELDS: u64 = st::TID | st::TIME | st::CPU | st::IDENTIFIER;

/// The PT leader's name in the file.
fn leader_name(config: &Config) -> &'static str {
    if config.kernel {
        "intel_pt//"
    } else {
        "intel_pt//u"
    }
}

/// The PT leader's attr, as `perf record -e intel_pt//u` opens it: TSC
/// packets, return compression, `psb_period=0`, context switch records.
pub fn leader_attr(config: &Config) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = PT_TYPE;
    a.config = pt_bits::TSC;
    a.sample_period = 1;
    a.sample_type = st::IP | ID_FIELDS;
    a.flags = attr_flags::SAMPLE_ID_ALL | attr_flags::EXCLUDE_GUEST | attr_flags::CONTEXT_SWITCH;
    if !config.kernel {
        a.flags |= attr_flags::EXCLUDE_KERNEL | attr_flags::EXCLUDE_HV;
    }
    if config.mode == Mode::Full {
        a.aux_watermark = 0; // half the area, the kernel's default
    }
    a
}

/// A sampler's attr (`cycles:u`, or `cycles` with `--kernel`).
pub fn sampler_attr(counter: Counter, config: &Config) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = 0; // PERF_TYPE_HARDWARE
    a.config = counter.config();
    a.sample_period = config.period;
    a.sample_type = st::IP | st::PERIOD | ID_FIELDS;
    if config.mode == Mode::Snapshot {
        a.sample_type |= st::AUX;
        a.aux_sample_size = config.aux_sample_size;
    }
    a.flags = attr_flags::SAMPLE_ID_ALL | attr_flags::EXCLUDE_GUEST;
    if !config.kernel {
        a.flags |= attr_flags::EXCLUDE_KERNEL | attr_flags::EXCLUDE_HV;
    }
    a
}

/// The most memory a run's data rings and AUX areas take, all CPUs together.
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;

/// The most AUX bytes one sample of `config`'s samplers carries: a sample
/// is at most 65535 bytes, so the kernel clamps `aux_sample_size` to what
/// fits beside the other fields, rounded down to 8 (`perf_prepare_sample`).
pub fn max_aux_per_sample(config: &Config) -> u32 {
    (65535 - sample_fixed_bytes(config)) & !7
}

/// The bytes of a sample besides its AUX data: the header, the fields
/// (every one these samplers carry is 8 bytes) and the AUX size word.
fn sample_fixed_bytes(config: &Config) -> u32 {
    let attr = sampler_attr(Counter::Cycles, config);
    8 + 8 * (attr.sample_type & !st::AUX).count_ones() + 8
}

/// The ids: the leader of CPU `cpu`, then its samplers.
fn event_id(cpu: usize, index: usize, counters: usize) -> u64 {
    1 + (cpu * (counters + 1) + index) as u64
}

/// One CPU's moving parts that are not engine objects.
struct CpuState {
    threads: Vec<Thread>,
    current: usize,
    cycles: u64,
    next_switch: u64,
    next_tsc: u64,
    counts: Vec<u64>,
    rng: SplitMix64,
    /// What the CPU did, for `--truth` (kept only then).
    truth: CpuTruth,
}

/// What a run leaves besides the perf.data file.
pub struct Outputs {
    /// The program's ELF, to write at [`Config::binary`].
    pub elf: Vec<u8>,
    /// The kernel handler's ELF (`--kernel`), for `perf script --vmlinux`.
    pub kernel_elf: Option<Vec<u8>>,
    /// The ground truth ([`truth::render`]), if asked for.
    pub truth: Option<String>,
    /// With the truth: every byte each CPU's tracer wrote, in order (its
    /// AUX offsets: byte `i` went to AUX offset `i`).
    pub streams: Vec<Vec<u8>>,
}

/// The user program and, with `--kernel`, the interrupt handler.
pub struct Programs {
    /// The user program.
    pub user: Code,
    /// The handler, when the kernel is traced.
    pub kernel: Option<Code>,
}

impl Programs {
    /// The programs of `config`'s seed.
    pub fn generate(config: &Config) -> Programs {
        let mut rng = SplitMix64::new(config.seed ^ 0x636f_6465); // "code"
        let user = Code::generate(
            Shape {
                text_base: TEXT_START,
                functions: 48,
                levels: 6,
                prefix: "demo",
                handler: false,
                tables: true,
                jumps: true,
            },
            &mut rng,
        );
        // The handler: conditional branches only, then `iretq`, so that
        // every branch in it has a packet of its own (a direct jump before
        // the `iretq` would be walked after the TSC that precedes it).
        let kernel = config.kernel.then(|| {
            Code::generate(
                Shape {
                    text_base: KERNEL_TEXT_START,
                    functions: 1,
                    levels: 1,
                    prefix: "perfaux_irq",
                    handler: true,
                    tables: false,
                    jumps: false,
                },
                &mut rng,
            )
        });
        Programs { user, kernel }
    }
}

/// The program's ELF and the kernel handler's (`--kernel`) for `config`,
/// as the run's [`Outputs`] will hold them: the simulated code depends on
/// the configuration alone, so they can be written before the run (a pipe's
/// reader resolves symbols while the stream flows).
pub fn images(config: &Config) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
    let programs = Programs::generate(config);
    Ok((
        elf::image(&programs.user)?,
        programs.kernel.as_ref().map(elf::image).transpose()?,
    ))
}

/// Runs the simulation of `config`, writing a perf.data file into `out`.
pub fn record<W: Write + Seek>(
    config: &Config,
    out: W,
    progress: &mut dyn FnMut(Progress) -> ControlFlow<()>,
) -> Result<(Summary, W, Outputs), String> {
    let (summary, writer, outputs, features) = run(
        config,
        move |events, _| Writer::create(out, events),
        progress,
    )?;
    let out = writer
        .finish(&features)
        .map_err(|e| format!("writing: {e}"))?;
    Ok((summary, out, outputs))
}

/// Runs the simulation of `config`, writing perf.data in perf's pipe
/// format into `out`, which need not seek (standard output, a pipe into
/// `perf script -i -`): the records stream out as the run makes them.
pub fn record_pipe<W: Write>(
    config: &Config,
    out: W,
    progress: &mut dyn FnMut(Progress) -> ControlFlow<()>,
) -> Result<(Summary, W, Outputs), String> {
    let (summary, writer, outputs, _) = run(
        config,
        move |events, features| PipeWriter::create(out, events, features),
        progress,
    )?;
    let out = writer.finish().map_err(|e| format!("writing: {e}"))?;
    Ok((summary, out, outputs))
}

/// The run: the writer `start` makes from the file's events and features
/// gets every record; returned with the features for the file format's end.
fn run<R: RecordWriter>(
    config: &Config,
    start: impl FnOnce(&[WriterEvent], &Features) -> std::io::Result<R>,
    progress: &mut dyn FnMut(Progress) -> ControlFlow<()>,
) -> Result<(Summary, R, Outputs, Features), String> {
    config.check()?;
    let cpus = config.cpus;
    let counters = config.counters.len();
    let mut seed_rng = SplitMix64::new(config.seed);
    let programs = Programs::generate(config);
    let code = &programs.user;

    // The engine objects, layer by layer (each borrows the ones before).
    let overwrite = config.mode == Mode::Snapshot;
    let memories = (0..cpus)
        .map(|_| CpuMemory::new(config.data_pages, config.aux_pages, overwrite))
        .collect::<Result<Vec<_>, _>>()?;
    let platforms: Vec<CpuPlatform> = (0..cpus)
        .map(|c| CpuPlatform {
            cpu: c as u32,
            now: Cell::new(START_NS),
            current: Cell::new((0, 0)),
        })
        .collect();
    let rings = memories
        .iter()
        .map(|m| {
            // SAFETY: the pages live in `memories`, which outlives every
            // ring; only this ring writes them and only `drain` reads them.
            unsafe { Ring::new(m.user_page(), m.data_pages(), 0, RingConfig::default()) }
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("data ring: {e:?}"))?;
    let areas = memories
        .iter()
        .map(|m| {
            let aux = AuxConfig {
                overwrite,
                ..AuxConfig::default()
            };
            // SAFETY: as for the rings: the AUX pages live in `memories`,
            // written only by the tracer, read by `drain` below aux_head.
            unsafe { AuxArea::new(m.user_page(), m.aux_pages(), aux, ()) }
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("AUX area: {e:?}"))?;
    let mut tables: Vec<Vec<TopaTable>> = (0..cpus)
        .map(|_| vec![TopaTable::new(); tables_for_pages(config.aux_pages)])
        .collect();
    let tracers: Vec<SoftTracer<'_>> = (0..cpus)
        .map(|_| SoftTracer::new(&IdentityMap, PSB_BASE))
        .collect();
    let taps: Vec<RefCell<StreamTap>> = (0..cpus)
        .map(|_| RefCell::new(StreamTap::default()))
        .collect();
    if config.truth {
        for (t, tap) in tracers.iter().zip(&taps) {
            t.set_tap(Some(tap));
        }
    }
    let leader_attr = leader_attr(config);
    // `setup_aux`: the PT state of each CPU's AUX buffer.
    let mut pt_buffers = Vec::new();
    for (c, t) in tables.iter_mut().enumerate() {
        // SAFETY: the AUX memory outlives the run; only the tracer writes it.
        let buffer = unsafe { PtBuffer::new(t, memories[c].aux_pages(), overwrite, &IdentityMap) }
            .map_err(|e| format!("ToPA: {e:?}"))?;
        pt_buffers.push(buffer);
    }
    let mut pts = Vec::new();
    for (c, buffer) in pt_buffers.iter().enumerate() {
        let id = event_id(c, 0, counters);
        let pt = PtPmu::new(
            &tracers[c],
            &IdentityMap,
            buffer,
            &areas[c],
            &rings[c],
            leader_record_event(&leader_attr, id, c),
        )
        .map_err(|e| format!("PT PMU: {e:?}"))?
        .with_platform(&platforms[c]);
        pts.push(pt);
    }
    let buffers: Vec<Buffer<'_>> = (0..cpus)
        .map(|c| Buffer {
            ring: &rings[c],
            aux: Some(&areas[c]),
        })
        .collect();
    let leaders = (0..cpus)
        .map(|c| {
            Event::open(EventConfig {
                attr: leader_attr,
                pmu: &pts[c],
                id: event_id(c, 0, counters),
                cpu: c as i32,
                leader: None,
                parent: None,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|rule| format!("opening the PT leader: {rule:?}"))?;
    let counter_pmu = CounterPmu;
    let sampler_attrs: Vec<PerfEventAttr> = config
        .counters
        .iter()
        .map(|&k| sampler_attr(k, config))
        .collect();
    let mut samplers = Vec::new();
    for (c, leader) in leaders.iter().enumerate() {
        for (k, attr) in sampler_attrs.iter().enumerate() {
            let e = Event::open(EventConfig {
                attr: *attr,
                pmu: &counter_pmu,
                id: event_id(c, k + 1, counters),
                cpu: c as i32,
                leader: Some(leader),
                parent: None,
            })
            .map_err(|rule| format!("opening a sampler: {rule:?}"))?;
            samplers.push(e);
        }
    }
    for (c, leader) in leaders.iter().enumerate() {
        leader.set_buffer(&buffers[c]);
    }
    for (i, s) in samplers.iter().enumerate() {
        s.join_group();
        s.set_output(&leaders[i / counters])
            .map_err(|e| format!("set_output: {e:?}"))?;
    }

    // The file: the events, then what perf record synthesizes first.
    let mut file_events = vec![WriterEvent {
        attr: leader_attr,
        name: leader_name(config).into(),
        ids: (0..cpus).map(|c| event_id(c, 0, counters)).collect(),
    }];
    for (k, counter) in config.counters.iter().enumerate() {
        file_events.push(WriterEvent {
            attr: sampler_attrs[k],
            name: format!(
                "{}{}",
                counter.name(),
                if config.kernel { "" } else { ":u" }
            ),
            ids: (0..cpus).map(|c| event_id(c, k + 1, counters)).collect(),
        });
    }
    let binary = elf::build_id(code);
    let features = features(config, counters, &binary);
    let mut writer = start(&file_events, &features).map_err(|e| format!("writing: {e}"))?;
    let mut sink = Sink {
        writer: &mut writer,
        events: &file_events,
        summary: Summary::default(),
        scratch: vec![0; 1 << 16],
    };
    sink.write(&records::id_index(cpus, counters))?;
    sink.write(&auxtrace_info())?;
    if let Some(k) = &programs.kernel {
        sink.write(&records::kernel_mmap(
            k,
            ID_FIELDS,
            event_id(0, 0, counters),
        ))?;
    }
    let mut states = Vec::new();
    for (c, platform) in platforms.iter().enumerate() {
        let mut threads = Vec::new();
        for t in 0..THREADS_PER_CPU {
            let pid = 1000 + (c * THREADS_PER_CPU + t) as u32;
            let thread = Thread::new(pid, pid, code, 0, seed_rng.next_u64());
            let id = event_id(c, 0, counters);
            sink.write(&records::comm(pid, pid, PROGRAM, c, id, ID_FIELDS))?;
            sink.write(&records::mmap2(
                pid,
                elf::load_base(code),
                code.end() - elf::load_base(code),
                &config.binary,
                &binary,
                c,
                id,
                ID_FIELDS,
            ))?;
            threads.push(thread);
        }
        platform.current.set((threads[0].pid, threads[0].tid));
        states.push(CpuState {
            threads,
            current: 0,
            cycles: 0,
            next_switch: TIMESLICE,
            next_tsc: TSC_EVERY,
            counts: vec![0; counters],
            rng: SplitMix64::new(seed_rng.next_u64()),
            truth: CpuTruth::default(),
        });
    }
    let machine = Machine {
        config,
        code,
        kernel: programs.kernel.as_ref(),
        platforms: &platforms,
        tracers: &tracers,
        pts: &pts,
        samplers: &samplers,
        rings: &rings,
        leader_attr: &leader_attr,
        ids: (0..cpus).map(|c| event_id(c, 0, counters)).collect(),
    };
    for (c, leader) in leaders.iter().enumerate() {
        leader
            .sched_in(&platforms[c])
            .map_err(|e| format!("scheduling the group on CPU {c}: {e:?}"))?;
        machine.start_tracing(c, &mut states[c]);
    }

    // Reads CPU `c`'s rings into the file (`Sink::drain` with its memory).
    let drain = |sink: &mut Sink<'_, R>, c: usize, truth: &mut CpuTruth| {
        sink.drain(&memories[c], c, config.mode, &platforms[c], truth)
    };
    let mut round = 0u64;
    let mut interrupted = false;
    loop {
        for (c, state) in states.iter_mut().enumerate() {
            machine.run_quantum(c, state);
            if areas[c].take_disable_request() {
                // The kernel disables the leader (the AUX consumer fell
                // behind), from an interrupt (the irq_work of
                // `perf_event_disable_inatomic`): the CPU enters the kernel
                // (FUP + TIP.PGD, as at the end of the run). The simulator
                // reads what there is and re-enables the group
                // (PERF_EVENT_IOC_ENABLE), so that tracing goes on after
                // the loss; the return to user space starts the trace
                // again (TIP.PGE).
                machine.stop_tracing(c, state);
                leaders[c].sched_out();
                drain(&mut sink, c, &mut state.truth)?;
                leaders[c].enable();
                leaders[c]
                    .sched_in(&platforms[c])
                    .map_err(|e| format!("re-enabling the group on CPU {c}: {e:?}"))?;
                machine.start_tracing(c, state);
            }
            drain(&mut sink, c, &mut state.truth)?;
        }
        sink.write(&finished_round())?;
        round += 1;
        let done = match config.stop {
            Stop::Duration(ns) => (round * QUANTUM / CYCLES_PER_NS) as f64 / ns as f64,
            Stop::Samples(n) => sink.summary.samples as f64 / n as f64,
        };
        let go_on = progress(Progress {
            fraction: done.min(1.0),
            samples: sink.summary.samples,
            bytes: sink.writer.data_size(),
        });
        if go_on.is_break() {
            // Stopped early (Ctrl-C): the run ends as a finished one does,
            // so the file is complete, only shorter.
            interrupted = true;
            break;
        }
        if done >= 1.0 {
            break;
        }
    }
    for (c, leader) in leaders.iter().enumerate() {
        // The run ends as `perf record` ends it: the CPU enters the kernel
        // (the trace ends with FUP + TIP.PGD, pinning every branch before
        // it), then the event is disabled.
        machine.stop_tracing(c, &mut states[c]);
        leader.sched_out();
        drain(&mut sink, c, &mut states[c].truth)?;
    }
    sink.write(&finished_round())?;
    let mut summary = sink.summary;
    summary.interrupted = interrupted;
    summary.simulated_ns = round * QUANTUM / CYCLES_PER_NS;
    summary.trace_bytes = tracers.iter().map(SoftTracer::written).sum();
    summary.lost_samples = samplers.iter().map(Event::lost_samples).sum();
    summary.lost_trace_events = tracers.iter().map(SoftTracer::lost_events).sum();
    summary.data_bytes = writer.data_size();
    for (t, tracer) in tracers.iter().enumerate() {
        tracer.set_tap(None);
        states[t].truth.stream = std::mem::take(&mut taps[t].borrow_mut().0);
    }
    let mut cpus: Vec<CpuTruth> = states.into_iter().map(|s| s.truth).collect();
    let truth = config
        .truth
        .then(|| truth::render(&cpus, config.mode == Mode::Full));
    let outputs = Outputs {
        elf: elf::image(code)?,
        kernel_elf: programs.kernel.as_ref().map(elf::image).transpose()?,
        truth,
        streams: cpus
            .iter_mut()
            .map(|c| std::mem::take(&mut c.stream))
            .collect(),
    };
    Ok((summary, writer, outputs, features))
}

/// Keeps every byte a tracer writes (the truth's PSB positions).
#[derive(Default)]
struct StreamTap(Vec<u8>);

impl PacketSink for StreamTap {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
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

/// The engine objects the CPUs run on.
struct Machine<'m, 'p, 'x, 'a, 'g> {
    config: &'m Config,
    code: &'m Code,
    kernel: Option<&'m Code>,
    platforms: &'m [CpuPlatform],
    tracers: &'m [SoftTracer<'p>],
    pts: &'m [AreaPtPmu<'x, 'a>],
    samplers: &'m [Event<'g>],
    rings: &'m [Ring<'a>],
    leader_attr: &'m PerfEventAttr,
    ids: Vec<u64>,
}

impl Machine<'_, '_, '_, '_, '_> {
    /// perf time (ns) of CPU cycle count `cycles`.
    fn ns(cycles: u64) -> u64 {
        START_NS + cycles / CYCLES_PER_NS
    }

    /// The TSC at `cycles` (a 2 GHz TSC: perf time = TSC / 2).
    fn tsc(cycles: u64) -> u64 {
        (START_NS * CYCLES_PER_NS) + cycles
    }

    /// Time passes on CPU `c`: its clock and its tracer's TSC follow.
    fn tick(&self, c: usize, s: &mut CpuState, cycles: u64) {
        s.cycles += cycles;
        self.platforms[c].now.set(Self::ns(s.cycles));
        self.tracers[c].set_clock(Self::tsc(s.cycles));
    }

    /// The leader was just scheduled in (its tracer is on): tracing of the
    /// current thread begins with a timestamp and TIP.PGE.
    fn start_tracing(&self, c: usize, s: &mut CpuState) {
        self.tick(c, s, 0);
        self.trace(c, s, TraceEvent::Frequency(20));
        self.trace(c, s, TraceEvent::Time(Self::tsc(s.cycles)));
        let t = &s.threads[s.current];
        let ip = t.ip(self.code);
        self.trace_branch(c, s, TraceEvent::Enable(ip), Some((0, ip)));
    }

    /// The current thread leaves for the kernel for good (the end of the
    /// recording): FUP + TIP.PGD, or FUP + TIP into the handler.
    fn stop_tracing(&self, c: usize, s: &mut CpuState) {
        let ip = s.threads[s.current].ip(self.code);
        let to = self.kernel.map(|k| k.functions[0].start);
        self.trace_branch(
            c,
            s,
            TraceEvent::Async { from: ip, to },
            Some((ip, to.unwrap_or(0))),
        );
    }

    /// Runs CPU `c` for one quantum.
    fn run_quantum(&self, c: usize, s: &mut CpuState) {
        let end = s.cycles + QUANTUM;
        while s.cycles < end {
            if s.cycles >= s.next_switch {
                self.context_switch(c, s);
            }
            if s.rng.below(IRQ_ONE_IN) == 0 {
                // An interrupt arrives between two instructions of a block.
                let t = &mut s.threads[s.current];
                let k = s.rng.below(t.straight_left(self.code) as u64 + 1) as usize;
                let n = t.advance(self.code, k);
                self.retire(c, s, n, false);
                self.kernel_entry(c, s, IRQ_CYCLES, |_, _| {});
            }
            let step = s.threads[s.current].step(self.code, 0);
            self.trace_branch(c, s, step.event, step.taken);
            self.retire(
                c,
                s,
                step.instructions,
                step.taken.is_some() || matches!(step.event, TraceEvent::Conditional { .. }),
            );
        }
    }

    /// Traces `event`, which made no branch of its own.
    fn trace(&self, c: usize, s: &mut CpuState, event: TraceEvent) {
        self.trace_branch(c, s, event, None);
    }

    /// Traces `event` and, if it transferred control, records the branch
    /// for the truth (with the current thread and the tracer's position).
    fn trace_branch(
        &self,
        c: usize,
        s: &mut CpuState,
        event: TraceEvent,
        taken: Option<(u64, u64)>,
    ) {
        let tracer = &self.tracers[c];
        // Only `--truth` needs to know (the default run skips the query).
        // A TIP.PGE starts packet generation if TraceEn is set.
        let traced = self.config.truth
            && (tracer.generating()
                || (matches!(event, TraceEvent::Enable(_)) && tracer.enabled()));
        let index = tracer.next_event();
        tracer.trace(event);
        if let (Some((from, to)), true) = (taken, traced) {
            s.truth.branches.push(Branch {
                from,
                to,
                tid: s.threads[s.current].tid,
                time: Self::ns(s.cycles),
                pos: tracer.written(),
                event: index,
            });
        }
        if self.config.mode == Mode::Full && tracer.take_pmi() > 0 {
            // The ToPA PMI of an INT region, taken right after the write
            // that filled it.
            self.pts[c].handle_pmi();
        }
        if let Some(lost) = tracer.take_loss() {
            // A STOP region filled: these events' packets never reached
            // the output (this one's among them, perhaps).
            s.truth.lose(lost);
        }
    }

    /// `instructions` retired (a branch among them if `branch`): their
    /// cycles, the periodic TSC, and the counters' overflows (PMIs).
    fn retire(&self, c: usize, s: &mut CpuState, instructions: u64, branch: bool) {
        if self.config.truth && self.tracers[c].generating() {
            s.truth.instructions += instructions;
        }
        let cycles = instructions * (1 + s.rng.below(3));
        self.tick(c, s, cycles);
        if s.cycles >= s.next_tsc {
            self.trace(c, s, TraceEvent::Time(Self::tsc(s.cycles)));
            s.next_tsc = s.cycles + TSC_EVERY;
        }
        let counters = self.config.counters.len();
        for k in 0..counters {
            s.counts[k] += match self.config.counters[k] {
                Counter::Cycles => cycles,
                Counter::Instructions => instructions,
                Counter::Branches => u64::from(branch),
            };
            if s.counts[k] >= self.config.period {
                s.counts[k] -= self.config.period;
                self.pmi(c, s, c * counters + k);
            }
        }
    }

    /// A counter overflowed: the PMI enters the kernel (FUP + TIP.PGD when
    /// it is not traced), the sampler's overflow takes the sample with the
    /// trace's newest bytes, and the return to the interrupted code
    /// re-enables tracing after a TSC at or past the sample's time.
    fn pmi(&self, c: usize, s: &mut CpuState, sampler: usize) {
        self.kernel_entry(c, s, PMI_CYCLES, |m, s| {
            let ip = s.threads[s.current].ip(m.code);
            let data = SampleData {
                misc: misc::USER,
                ip,
                period: m.config.period,
                ..SampleData::default()
            };
            let end = m.tracers[c].written();
            // A refused sample is counted by the event (lost_samples).
            if m.samplers[sampler].overflow(&m.platforms[c], &data).is_ok() && m.config.truth {
                s.truth.samples.push(SamplePoint {
                    tid: s.threads[s.current].tid,
                    time: m.platforms[c].now.get(),
                    ip,
                    end,
                    size: 0, // the drain reads it from the record
                });
            }
        });
    }

    /// The CPU enters the kernel at the current thread's next instruction
    /// for `cycles`, running `inside` halfway, and returns. With the kernel
    /// excluded: FUP + TIP.PGD, then TSC + TIP.PGE back. With it traced:
    /// FUP + TIP into the handler, its code, and `iretq` back (TIP) after a
    /// TSC.
    fn kernel_entry(
        &self,
        c: usize,
        s: &mut CpuState,
        cycles: u64,
        inside: impl FnOnce(&Self, &mut CpuState),
    ) {
        let ip = s.threads[s.current].ip(self.code);
        match self.kernel {
            None => {
                self.trace_branch(
                    c,
                    s,
                    TraceEvent::Async { from: ip, to: None },
                    Some((ip, 0)),
                );
                self.tick(c, s, cycles / 2);
                inside(self, s);
                self.tick(c, s, cycles - cycles / 2);
                self.trace(c, s, TraceEvent::Time(Self::tsc(s.cycles)));
                // Back to the current thread (a switch may have changed it).
                let back = s.threads[s.current].ip(self.code);
                self.trace_branch(c, s, TraceEvent::Enable(back), Some((0, back)));
            }
            Some(k) => {
                let mut handler = Thread::new(0, 0, k, 0, s.rng.next_u64());
                let entry = handler.ip(k);
                self.trace_branch(
                    c,
                    s,
                    TraceEvent::Async {
                        from: ip,
                        to: Some(entry),
                    },
                    Some((ip, entry)),
                );
                self.tick(c, s, cycles / 2);
                inside(self, s);
                self.tick(c, s, cycles - cycles / 2);
                self.trace(c, s, TraceEvent::Time(Self::tsc(s.cycles)));
                let back = s.threads[s.current].ip(self.code);
                loop {
                    let step = handler.step(k, back);
                    if self.config.truth && self.tracers[c].generating() {
                        s.truth.instructions += step.instructions;
                    }
                    self.trace_branch(c, s, step.event, step.taken);
                    self.tick(c, s, step.instructions);
                    if step.iret {
                        break;
                    }
                }
            }
        }
    }

    /// The scheduler switches CPU `c` to its next thread, from the timer
    /// interrupt: the old thread's trace ends (FUP + TIP.PGD, or FUP + TIP
    /// into the handler), `PERF_RECORD_SWITCH_CPU_WIDE` out and in are
    /// written between the trace's timestamps, and the trace goes on in the
    /// new thread after a TSC (TIP.PGE, or the handler's `iretq`).
    fn context_switch(&self, c: usize, s: &mut CpuState) {
        s.next_switch += TIMESLICE;
        if s.threads.len() < 2 {
            return;
        }
        self.kernel_entry(c, s, 2 * SWITCH_CYCLES, |m, s| {
            let old = s.current;
            let next = (old + 1) % s.threads.len();
            let (o, n) = (&s.threads[old], &s.threads[next]);
            let (o, n) = ((o.pid, o.tid), (n.pid, n.tid));
            m.switch_record(c, true, o, n);
            m.tick(c, s, 2);
            s.current = next;
            m.platforms[c].current.set(n);
            m.switch_record(c, false, n, o);
        });
    }

    /// `perf_event_switch_output` for the leader (`context_switch`): the
    /// record in its ring, with the trailer of the task it is about.
    fn switch_record(&self, c: usize, out: bool, task: (u32, u32), other: (u32, u32)) {
        let id = self.ids[c];
        let mut event = FixedEvent {
            id,
            sample_id: Some(SampleId {
                sample_type: self.leader_attr.sample_type,
                pid: task.0,
                tid: task.1,
                time: self.platforms[c].now.get(),
                id,
                stream_id: id,
                cpu: c as u32,
            }),
        };
        // A full ring drops it and counts it lost (PERF_RECORD_LOST), as
        // the kernel's does.
        let _ = records::write_switch(&self.rings[c], &mut event, out, other);
    }
}

/// Moves records from the rings into the file, counting what it moves.
struct Sink<'w, R: RecordWriter> {
    writer: &'w mut R,
    events: &'w [WriterEvent],
    summary: Summary,
    scratch: Vec<u8>,
}

impl<R: RecordWriter> Sink<'_, R> {
    fn write(&mut self, record: &[u8]) -> Result<(), String> {
        self.summary.records += 1;
        self.writer
            .record(record)
            .map_err(|e| format!("writing: {e}"))
    }

    fn account(&mut self, r: &[u8], truth: &mut CpuTruth) -> Result<(), String> {
        let header = perfaux::ring::read_header(r).ok_or("a record without a header")?;
        let word = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().unwrap_or([0; 8]));
        match header.type_ {
            record_type::SAMPLE => {
                self.summary.samples += 1;
                let id = word(8);
                let attr = self
                    .events
                    .iter()
                    .find(|e| e.ids.contains(&id))
                    .map(|e| e.attr)
                    .ok_or_else(|| format!("a sample of unknown id {id}"))?;
                let s = parse_sample(&attr, r).map_err(|e| format!("our own sample: {e}"))?;
                let aux = s.aux.map_or(0, <[u8]>::len) as u64;
                if aux > 0 {
                    self.summary.aux_samples += 1;
                    self.summary.aux_sample_bytes += aux;
                }
                // Samples leave a CPU's ring in the order its PMIs took them.
                if let Some(p) = truth.samples.get_mut(truth.drained) {
                    p.size = aux;
                    truth.drained += 1;
                }
            }
            record_type::LOST => self.summary.lost_records += word(16),
            record_type::AUX => {
                self.summary.aux_records += 1;
                if word(24) & aux_flags::TRUNCATED != 0 {
                    self.summary.aux_truncated += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Reads CPU `c`'s data ring, then (full-trace mode) its new AUX data,
    /// as `perf record` does each round.
    fn drain(
        &mut self,
        mem: &CpuMemory,
        c: usize,
        mode: Mode,
        platform: &CpuPlatform,
        truth: &mut CpuTruth,
    ) -> Result<(), String> {
        // SAFETY: the ring memory lives in `mem`; this is its only consumer.
        let mut consumer = unsafe { Consumer::new(mem.user_page(), mem.data_pages(), 0) }
            .map_err(|e| format!("data ring consumer: {e:?}"))?;
        consumer.refresh();
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(record) = consumer.next_record(&mut scratch) {
            let record = record.map_err(|e| format!("CPU {c}: a malformed ring record: {e:?}"))?;
            self.account(record, truth)?;
            self.write(record)?;
        }
        consumer.commit();
        self.scratch = scratch;
        if mode == Mode::Full {
            // SAFETY: the AUX area in `mem` is writable in full-trace mode,
            // and this is its only consumer.
            let mut aux = unsafe { AuxConsumer::new(mem.user_page(), mem.aux_pages()) }
                .map_err(|e| format!("AUX consumer: {e:?}"))?;
            aux.refresh();
            // Everything up to aux_head, padded to 8 bytes as `perf record`
            // pads it; the next record starts at aux_head (the padding is
            // outside the stream: perf's overlap logic and `dump --check`
            // drop it). aux_head moves only after whole packets (the PMI
            // and the end of a transaction read the hardware's position),
            // so no record ends inside a packet unless the trace stopped.
            let len = aux.available() as usize;
            if len > 0 {
                let padded = len.next_multiple_of(8);
                let mut record = auxtrace(padded as u64, aux.position(), platform.now.get(), c);
                let at = record.len();
                record.resize(at + padded, 0);
                aux.read_to_slice(&mut record[at..at + len]);
                aux.commit();
                self.summary.auxtrace_bytes += len as u64;
                self.summary.records += 1;
                self.writer
                    .record(&record)
                    .map_err(|e| format!("writing: {e}"))?;
            }
        }
        Ok(())
    }
}

fn header(type_: u32, misc: u16, size: usize) -> Vec<u8> {
    let mut r = Vec::with_capacity(size);
    r.extend_from_slice(&type_.to_le_bytes());
    r.extend_from_slice(&misc.to_le_bytes());
    r.extend_from_slice(&(size as u16).to_le_bytes());
    r
}

fn finish(mut r: Vec<u8>) -> Vec<u8> {
    let size = r.len() as u16;
    r[6..8].copy_from_slice(&size.to_le_bytes());
    r
}

fn finished_round() -> Vec<u8> {
    header(user_record::FINISHED_ROUND, 0, 8)
}

/// `PERF_RECORD_AUXTRACE_INFO` of Intel PT: how perf decodes the trace.
fn auxtrace_info() -> Vec<u8> {
    let mut priv_ = [0u64; intel_pt_priv::REQUIRED];
    priv_[intel_pt_priv::PMU_TYPE] = u64::from(PT_TYPE);
    // perf time = TSC / 2 (the 2 GHz TSC).
    priv_[intel_pt_priv::TIME_SHIFT] = 1;
    priv_[intel_pt_priv::TIME_MULT] = 1;
    priv_[intel_pt_priv::TIME_ZERO] = 0;
    priv_[intel_pt_priv::CAP_USER_TIME_ZERO] = 1;
    // The config masks of `tsc` and `noretcomp` (perf tests config & mask).
    priv_[intel_pt_priv::TSC_BIT] = pt_bits::TSC;
    priv_[intel_pt_priv::NORETCOMP_BIT] = pt_bits::NORETCOMP;
    // Context switches come as PERF_RECORD_SWITCH_CPU_WIDE.
    priv_[intel_pt_priv::HAVE_SCHED_SWITCH] = 3;
    // `perf record --aux-sample` is not snapshot mode (-S), whatever the
    // AUX area's mode; a full trace is not either.
    priv_[intel_pt_priv::SNAPSHOT_MODE] = 0;
    priv_[intel_pt_priv::PER_CPU_MMAPS] = 1;
    let mut r = header(user_record::AUXTRACE_INFO, 0, 0);
    r.extend_from_slice(&AUXTRACE_INTEL_PT.to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    for w in priv_ {
        r.extend_from_slice(&w.to_le_bytes());
    }
    finish(r)
}

/// `PERF_RECORD_AUXTRACE` for `size` bytes from AUX offset `offset` of CPU `cpu`.
fn auxtrace(size: u64, offset: u64, reference: u64, cpu: usize) -> Vec<u8> {
    let mut r = header(user_record::AUXTRACE, 0, user_record::AUXTRACE_SIZE);
    r.extend_from_slice(&size.to_le_bytes());
    r.extend_from_slice(&offset.to_le_bytes());
    r.extend_from_slice(&reference.to_le_bytes());
    r.extend_from_slice(&(cpu as u32).to_le_bytes()); // idx: the CPU's mmap
    r.extend_from_slice(&u32::MAX.to_le_bytes()); // tid: -1, per-CPU
    r.extend_from_slice(&(cpu as u32).to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    r
}

fn read_proc(path: &str, fallback: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| fallback.to_owned())
}

fn features(config: &Config, counters: usize, build_id: &[u8; 20]) -> Features {
    Features {
        hostname: Some(read_proc("/proc/sys/kernel/hostname", "localhost")),
        osrelease: Some(read_proc("/proc/sys/kernel/osrelease", "unknown")),
        version: Some(format!("perfaux {}", env!("CARGO_PKG_VERSION"))),
        arch: Some("x86_64".into()),
        nr_cpus: Some((config.cpus as u32, config.cpus as u32)),
        cmdline: Some(config.cmdline.clone()),
        pmu_mappings: vec![
            (1, "software".into()),
            (4, "cpu".into()),
            (PT_TYPE, "intel_pt".into()),
        ],
        groups: vec![GroupDesc {
            name: "{anon_group}".into(),
            leader: 0,
            members: 1 + counters as u32,
        }],
        event_names: Vec::new(),
        build_ids: vec![BuildId {
            pid: -1,
            misc: misc::USER,
            id: build_id.to_vec(),
            path: config.binary.clone(),
        }],
        auxtrace_index: Some(Vec::new()),
    }
}
