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
mod config;
mod cpu;
mod drain;
pub mod elf;
mod file;
mod machine;
pub mod memory;
mod period;
pub mod program;
pub mod truth;

use std::io::{Seek, Write};
use std::ops::ControlFlow;

use perfaux::event::Event;
use perfaux::soft_pt::tracer::SoftTracer;

pub use self::config::{
    CYCLES_PER_NS, Config, Counter, MAX_BUFFER_BYTES, Mode, PSB_PERIOD, PT_TYPE, QUANTUM_NS,
    START_NS, Stop, leader_attr, max_aux_per_sample, sampler_attr,
};
pub use self::file::PROGRAM;

use self::code::{Code, Shape};
use self::config::QUANTUM;
use self::cpu::{Arena, Cpu, EventArena, Setup};
use self::drain::Sink;
pub use self::drain::Summary;
use self::program::{KERNEL_TEXT_START, TEXT_START};
use self::truth::CpuTruth;
use crate::perfdata::synth::finished_round;
use crate::perfdata::{Features, PipeWriter, RecordWriter, Writer, WriterEvent};
use crate::rng::SplitMix64;

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

/// The user program's shape: 48 functions called six deep.
const USER_SHAPE: Shape = Shape {
    text_base: TEXT_START,
    functions: 48,
    levels: 6,
    prefix: "demo",
    handler: false,
    tables: true,
    jumps: true,
};

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
        let user = Code::generate(USER_SHAPE, &mut rng);
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

/// An ELF the run names, with its build-id.
pub struct Image {
    /// The ELF file.
    pub bytes: Vec<u8>,
    /// Its `NT_GNU_BUILD_ID`.
    pub build_id: [u8; 20],
}

/// The program's ELF and the kernel handler's (`--kernel`) for `config`,
/// as the run's [`Outputs`] will hold them: the simulated code depends on
/// the configuration alone, so they can be written before the run (a pipe's
/// reader resolves symbols while the stream flows).
pub fn images(config: &Config) -> Result<(Image, Option<Image>), String> {
    let programs = Programs::generate(config);
    let image = |code: &Code| -> Result<Image, String> {
        Ok(Image {
            bytes: elf::image(code)?,
            build_id: elf::build_id(code),
        })
    };
    Ok((
        image(&programs.user)?,
        programs.kernel.as_ref().map(image).transpose()?,
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
    let programs = Programs::generate(config);
    let code = &programs.user;
    let setup = Setup::new(config, code, programs.kernel.as_ref());
    let arena = Arena::default();
    let events = EventArena::default();
    let mut seeds = SplitMix64::new(config.seed);
    let mut cpus = (0..config.cpus)
        .map(|c| Cpu::new(c, &setup, &arena, &events, &mut seeds))
        .collect::<Result<Vec<_>, _>>()?;

    // The file: the events, then what perf record synthesizes first.
    let file_events = file::events(config);
    let build_id = elf::build_id(code);
    let features = file::features(config, &build_id);
    let mut writer = start(&file_events, &features).map_err(|e| format!("writing: {e}"))?;
    let mut sink = Sink::new(&mut writer, &file_events);
    sink.write(&file::id_index(config))?;
    sink.write(&file::auxtrace_info())?;
    if let Some(k) = &programs.kernel {
        sink.write(&file::kernel_mmap(config, k))?;
    }
    for cpu in &cpus {
        for thread in &cpu.threads {
            for r in file::thread_records(config, cpu.index, thread, code, &build_id) {
                sink.write(&r)?;
            }
        }
    }
    for cpu in &mut cpus {
        cpu.leader
            .sched_in(cpu.platform)
            .map_err(|e| format!("scheduling the group on CPU {}: {e:?}", cpu.index))?;
        cpu.start_tracing();
    }

    let mut round = 0u64;
    let mut interrupted = false;
    // Samples written so far (`--samples`: each CPU may write what the run
    // still needs, so that it writes exactly that many).
    let mut written = 0u64;
    loop {
        for cpu in &mut cpus {
            if let Stop::Samples(n) = config.stop {
                cpu.sample_budget = Some(n.saturating_sub(written));
            }
            let budget = cpu.sample_budget;
            cpu.run_quantum();
            written += budget.zip(cpu.sample_budget).map_or(0, |(b, a)| b - a);
            if cpu.area.take_disable_request() {
                // The kernel disables the leader (the AUX consumer fell
                // behind), from an interrupt (the irq_work of
                // `perf_event_disable_inatomic`): the CPU enters the kernel
                // (FUP + TIP.PGD, as at the end of the run). The simulator
                // reads what there is and re-enables the group
                // (PERF_EVENT_IOC_ENABLE), so that tracing goes on after
                // the loss; the return to user space starts the trace
                // again (TIP.PGE).
                cpu.stop_tracing();
                cpu.leader.sched_out();
                sink.drain(cpu)?;
                cpu.leader.enable();
                cpu.leader
                    .sched_in(cpu.platform)
                    .map_err(|e| format!("re-enabling the group on CPU {}: {e:?}", cpu.index))?;
                cpu.start_tracing();
            }
            sink.drain(cpu)?;
        }
        sink.write(&finished_round())?;
        round += 1;
        let done = match config.stop {
            Stop::Duration(ns) => (round * QUANTUM / CYCLES_PER_NS) as f64 / ns as f64,
            Stop::Samples(n) => written as f64 / n as f64,
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
    for cpu in &mut cpus {
        // The run ends as `perf record` ends it: the CPU enters the kernel
        // (the trace ends with FUP + TIP.PGD, pinning every branch before
        // it), then the event is disabled.
        cpu.stop_tracing();
        cpu.leader.sched_out();
        sink.drain(cpu)?;
    }
    sink.write(&finished_round())?;
    let mut summary = sink.summary;
    summary.interrupted = interrupted;
    summary.simulated_ns = round * QUANTUM / CYCLES_PER_NS;
    summary.trace_bytes = cpus.iter().map(|c| SoftTracer::written(c.tracer)).sum();
    summary.lost_samples = cpus
        .iter()
        .flat_map(|c| &c.samplers)
        .map(|s| Event::lost_samples(s))
        .sum();
    summary.lost_trace_events = cpus.iter().map(|c| c.tracer.lost_events()).sum();
    summary.data_bytes = writer.data_size();
    let mut truths: Vec<CpuTruth> = cpus.into_iter().map(Cpu::into_truth).collect();
    let truth = config.truth.then(|| {
        truth::render(
            &truths,
            config.mode == Mode::Full,
            config.branches.is_some(),
        )
    });
    let outputs = Outputs {
        elf: elf::image(code)?,
        kernel_elf: programs.kernel.as_ref().map(elf::image).transpose()?,
        truth,
        streams: truths
            .iter_mut()
            .map(|c| std::mem::take(&mut c.stream))
            .collect(),
    };
    Ok((summary, writer, outputs, features))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use perfaux::soft_pt::stream::TraceEvent;

    use super::program::Thread;
    use super::*;

    /// Every seed's program calls every one of its functions: a short run
    /// of one thread (what the truth lists) enters each, for 20 seeds and
    /// two that once ran only `main` and one callee.
    #[test]
    fn every_function_runs_in_a_short_run_of_any_seed() {
        for seed in (0..20).chain([987, 31337]) {
            let mut rng = SplitMix64::new(seed ^ 0x636f_6465);
            let code = Code::generate(USER_SHAPE, &mut rng);
            let mut thread = Thread::new(1, 1, &code, 0, seed);
            let mut entered = BTreeSet::from([0]);
            for _ in 0..20_000 {
                if let TraceEvent::Call { target, .. } = thread.step(&code, 0).event {
                    let f = code.functions.iter().position(|f| f.start == target);
                    entered.extend(f);
                }
            }
            let missing: Vec<&str> = (0..code.functions.len())
                .filter(|f| !entered.contains(f))
                .map(|f| code.functions[f].name.as_str())
                .collect();
            assert!(missing.is_empty(), "seed {seed}: never called: {missing:?}");
        }
    }
}
