// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record -- PROGRAM`: a real, unmodified x86-64 program traced
//! under QEMU user mode, with the perfaux engine inside the emulator
//! playing the kernel (the `perfaux-qemu` plugin), written as the perf.data
//! file `perf record -e intel_pt//u` (or, with AUX samples,
//! `perf record -e '{intel_pt//u,instructions:u}' --aux-sample`) writes on
//! a machine with Intel PT.
//!
//! The recorder sets up the session ([`session`]), starts the emulator on
//! the program ([`launch`]), and drains the slots while it runs
//! ([`drain`]), as `perf record` drains its mmaps.

pub mod buildid;
pub mod drain;
pub mod launch;
pub mod session;
pub mod truth;

use std::ffi::OsString;
use std::io::{Seek, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perfaux::abi::{PerfEventAttr, attr_flags, misc, sample_type as st};
use perfaux::pt::config::bits as pt_bits;
pub use perfaux_qemu_session::Mode;
use perfaux_qemu_session::{Layout, event_id};

use self::drain::Drain;
pub use self::drain::Summary;
use self::session::Session;
use crate::perfdata::synth::{self, IdIndexEntry};
use crate::perfdata::{BuildId, Features, GroupDesc, Writer, WriterEvent};

/// The `attr.type` of the `intel_pt` PMU in the file (the simulator's).
pub use crate::sim::PT_TYPE;

/// The sample and trailer fields of every event: the same `sample_id`
/// layout in all of them, IDENTIFIER to find the event.
const ID_FIELDS: u64 = st::TID | st::TIME | st::CPU | st::IDENTIFIER;

/// perf time now: the session's clock (`CLOCK_MONOTONIC` ns, the trace's
/// TSC too).
pub use perfaux_qemu_session::now;

/// A recording of a program.
#[derive(Clone, Debug)]
pub struct Options {
    /// The program and its arguments.
    pub program: Vec<OsString>,
    /// A full trace, or AUX samples.
    pub mode: Mode,
    /// Instructions between samples (AUX-sample mode).
    pub period: u64,
    /// `attr.aux_sample_size` (AUX-sample mode).
    pub aux_sample_size: u32,
    /// Data ring pages per thread.
    pub data_pages: u32,
    /// AUX pages per thread.
    pub aux_pages: u32,
    /// Threads that can be traced over the whole run.
    pub max_threads: u32,
    /// The command line, for the file's cmdline feature.
    pub cmdline: Vec<String>,
    /// Keep the ground truth ([`Outcome::truth`]).
    pub truth: bool,
    /// The samples' `branch_sample_type` when they carry branch stacks
    /// (`-b`, `-j`); alone ([`Mode::Branches`]) or beside AUX samples.
    pub branches: Option<u64>,
}

/// The side band every leader carries (COMM, MMAP2, FORK/EXIT), as perf's
/// tracking event would.
const SIDE_BAND: u64 = attr_flags::MMAP
    | attr_flags::MMAP2
    | attr_flags::COMM
    | attr_flags::COMM_EXEC
    | attr_flags::TASK;

/// The leader's attr. The PT leader, as `perf record -e intel_pt//u` opens
/// it: TSC packets, return compression, `psb_period=0`, with the side
/// band. For branch stacks alone, the sampler (`instructions:u -b`) with
/// the side band.
pub fn leader_attr(options: &Options) -> PerfEventAttr {
    let mode = options.mode;
    if mode == Mode::Branches {
        let mut a = sampler_attr(options);
        a.flags |= SIDE_BAND;
        return a;
    }
    let mut a = PerfEventAttr::new(136);
    a.type_ = PT_TYPE;
    a.config = pt_bits::TSC;
    a.sample_period = 1;
    a.sample_type = st::IP | ID_FIELDS;
    a.flags = attr_flags::SAMPLE_ID_ALL
        | attr_flags::EXCLUDE_GUEST
        | attr_flags::EXCLUDE_KERNEL
        | attr_flags::EXCLUDE_HV
        | SIDE_BAND;
    if mode == Mode::Full {
        a.aux_watermark = 0; // half the area, the kernel's default
    }
    a
}

/// The sampler's attr, `instructions:u` every `period` retired user
/// instructions, with `aux_sample_size` bytes of trace (AUX samples) and
/// branch stacks (`-b`); period 0 when the run does not sample.
pub fn sampler_attr(options: &Options) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = 0; // PERF_TYPE_HARDWARE
    a.config = 1; // PERF_COUNT_HW_INSTRUCTIONS
    a.sample_type = st::IP | st::PERIOD | ID_FIELDS;
    a.flags = attr_flags::SAMPLE_ID_ALL
        | attr_flags::EXCLUDE_GUEST
        | attr_flags::EXCLUDE_KERNEL
        | attr_flags::EXCLUDE_HV;
    if options.mode == Mode::Sample {
        a.sample_type |= st::AUX;
        a.aux_sample_size = options.aux_sample_size;
    }
    if options.mode != Mode::Full {
        a.sample_period = options.period;
    }
    if let Some(bits) = options.branches {
        a.sample_type |= st::BRANCH_STACK;
        a.branch_sample_type = bits;
    }
    a
}

/// The file's events: the PT leader, and the sampler when there is one,
/// each with one id per slot.
fn events(options: &Options, leader: PerfEventAttr, sampler: PerfEventAttr) -> Vec<WriterEvent> {
    let ids = |k| (0..options.max_threads).map(|s| event_id(s, k)).collect();
    if options.mode == Mode::Branches {
        return vec![WriterEvent {
            attr: leader,
            name: "instructions:u".into(),
            ids: ids(0),
        }];
    }
    let mut events = vec![WriterEvent {
        attr: leader,
        name: "intel_pt//u".into(),
        ids: ids(0),
    }];
    if options.mode == Mode::Sample {
        events.push(WriterEvent {
            attr: sampler,
            name: "instructions:u".into(),
            ids: ids(1),
        });
    }
    events
}

/// `PERF_RECORD_ID_INDEX`: each slot's ids write to its own mmap.
fn id_index(options: &Options) -> Vec<u8> {
    let k = if options.mode == Mode::Sample { 2 } else { 1 };
    let entries: Vec<IdIndexEntry> = (0..options.max_threads)
        .flat_map(|s| {
            (0..k).map(move |k| IdIndexEntry {
                id: event_id(s, k),
                idx: u64::from(s),
                cpu: u64::from(s),
                tid: u64::MAX,
            })
        })
        .collect();
    synth::id_index(&entries)
}

/// `PERF_RECORD_AUXTRACE_INFO`: how perf decodes the trace. The TSC is
/// perf time (`CLOCK_MONOTONIC` ns): shift 0. No context switch records:
/// each thread has a slot (a CPU) of its own, and the AUXTRACE records
/// name the thread.
fn auxtrace_info() -> Vec<u8> {
    synth::intel_pt_info(PT_TYPE, 0, false)
}

/// The GNU build-id of the ELF file at `path`.
pub fn build_id(path: &str) -> Option<Vec<u8>> {
    use object::Object as _;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

fn read_proc(path: &str, fallback: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| fallback.to_owned())
}

/// The feature sections.
fn features(options: &Options, threads: u32, build_ids: Vec<BuildId>) -> Features {
    let cpus = threads.max(1);
    Features {
        hostname: Some(read_proc("/proc/sys/kernel/hostname", "localhost")),
        osrelease: Some(read_proc("/proc/sys/kernel/osrelease", "unknown")),
        version: Some(format!("perfaux {}", env!("CARGO_PKG_VERSION"))),
        arch: Some("x86_64".into()),
        nr_cpus: Some((cpus, cpus)),
        cmdline: Some(options.cmdline.clone()),
        pmu_mappings: vec![
            (1, "software".into()),
            (4, "cpu".into()),
            (PT_TYPE, "intel_pt".into()),
        ],
        groups: if options.mode == Mode::Sample {
            vec![GroupDesc {
                name: "{anon_group}".into(),
                leader: 0,
                members: 2,
            }]
        } else {
            Vec::new()
        },
        event_names: Vec::new(),
        build_ids,
        auxtrace_index: (options.mode != Mode::Branches).then(Vec::new),
        branch_stack: options.branches.is_some(),
    }
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Killed(i32),
}

impl Ended {
    /// The status a shell reports: the exit status, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            Ended::Exited(c) => c,
            Ended::Killed(s) => 128 + s,
        }
    }
}

/// What a recording leaves besides the file.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// What was written.
    pub summary: Summary,
    /// How the program ended.
    pub ended: Ended,
    /// Every file the program mapped executable, with its build-id.
    pub binaries: Vec<(String, Option<Vec<u8>>)>,
    /// The recording was stopped (`stop` was set) before the program ended.
    pub interrupted: bool,
    /// Every traced thread.
    pub threads: Vec<drain::ThreadEnd>,
    /// The ground truth ([`truth::render`]), if asked for.
    pub truth: Option<String>,
    /// The emulator's peak resident memory (KiB; the largest of its
    /// processes that it waited for).
    pub emulator_rss_kib: u64,
    /// The recorder's own peak resident memory (KiB), the session's pages
    /// it read included.
    pub recorder_rss_kib: u64,
}

/// This process's peak resident memory (KiB).
fn own_rss_kib() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a plain query into a local.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss as u64
}

/// Records `options.program` into `out`; `stop` (Ctrl-C) ends the
/// recording early, with a complete file.
pub fn record<W: Write + Seek>(
    options: &Options,
    out: W,
    stop: &AtomicBool,
) -> Result<(Outcome, W), String> {
    // The user's mistakes first, then what the machine lacks.
    let program = launch::resolve(&options.program)?;
    let qemu = launch::qemu()?;
    let plugin = launch::plugin()?;
    if options.period == 0 && options.mode != Mode::Full {
        return Err("-c 0: a counter must overflow after at least one instruction".into());
    }
    if let Some(bits) = options.branches {
        crate::branch_filter::check(bits)?;
    }
    let aux_pages = if options.mode == Mode::Branches {
        0
    } else {
        options.aux_pages
    };
    let layout = Layout::new(
        options.max_threads,
        options.data_pages,
        aux_pages,
        options.mode,
    )
    .map_err(|e| e.to_string())?;
    let leader = leader_attr(options);
    let sampler = if options.mode == Mode::Branches {
        leader
    } else {
        sampler_attr(options)
    };
    let session = Session::create(layout, leader, sampler)?;
    let file_events = events(options, leader, sampler);
    let mut writer = Writer::create(out, &file_events).map_err(|e| format!("writing: {e}"))?;
    let mut drain = Drain::new(&session, sampler);
    writer
        .record(&id_index(options))
        .and_then(|()| match options.mode {
            Mode::Branches => Ok(()),
            Mode::Sample | Mode::Full => writer.record(&auxtrace_info()),
        })
        .map_err(|e| format!("writing: {e}"))?;
    let truth_dir = if options.truth {
        Some(
            tempfile::Builder::new()
                .prefix("perfaux-truth-")
                .tempdir()
                .map_err(|e| format!("a directory for the truth: {e}"))?,
        )
    } else {
        None
    };
    let mut child = launch::spawn(
        &qemu,
        &plugin,
        session.fd(),
        truth_dir.as_ref().map(|d| d.path()),
        &program,
    )?;
    let mut interrupted = false;
    let mut terminated_at = None;
    let (ended, emulator_rss_kib) = loop {
        let moved = drain.round(&mut writer)?;
        if let Some((ended, rusage)) = child.reap()? {
            break (ended, rusage.ru_maxrss as u64);
        }
        if stop.load(Ordering::Relaxed) && !interrupted {
            // Ctrl-C reached the program too (one process group); if it
            // goes on, it is asked to end, as perf record asks its
            // workload (SIGTERM).
            interrupted = true;
            terminated_at = Some(std::time::Instant::now());
        }
        if let Some(at) = terminated_at {
            if at.elapsed() > Duration::from_millis(500) {
                child.terminate();
                terminated_at = None;
            }
        }
        if moved == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    drain.close(&mut writer)?;
    let binaries: Vec<(String, Option<Vec<u8>>)> = drain
        .paths
        .iter()
        .map(|p| (p.clone(), build_id(p)))
        .collect();
    let build_ids = binaries
        .iter()
        .filter_map(|(p, id)| {
            id.as_ref().map(|id| BuildId {
                pid: -1,
                misc: misc::USER,
                id: id.clone(),
                path: p.clone(),
            })
        })
        .collect();
    let summary = drain.summary.clone();
    let threads = std::mem::take(&mut drain.threads);
    let truth = truth_dir
        .as_ref()
        .map(|d| truth::render(d.path(), &threads))
        .transpose()?;
    let out = writer
        .finish(&features(options, summary.threads, build_ids))
        .map_err(|e| format!("writing: {e}"))?;
    Ok((
        Outcome {
            summary,
            ended,
            binaries,
            interrupted,
            threads,
            truth,
            emulator_rss_kib,
            recorder_rss_kib: own_rss_kib(),
        },
        out,
    ))
}

/// A recording's default output buffer sizes, as `perf record` takes them
/// for Intel PT as root: 512 KiB of data ring and 4 MiB of AUX area.
pub const DEFAULT_DATA_PAGES: u32 = 128;
/// See [`DEFAULT_DATA_PAGES`].
pub const DEFAULT_AUX_PAGES: u32 = 1024;

/// The path of the plugin `record` would use (for messages).
pub fn plugin_path() -> Result<PathBuf, String> {
    launch::plugin()
}
