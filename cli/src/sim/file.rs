// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the run's perf.data file says about the machine, before any ring
//! is read: its events and ids, its feature sections, and the records
//! `perf record` synthesizes at the start (`ID_INDEX`, `AUXTRACE_INFO`,
//! the kernel's `MMAP`, each thread's `COMM` and `MMAP2`).

use perfaux::abi::misc;
use perfaux::ring::SampleId;

use super::code::Code;
use super::config::{Config, ID_FIELDS, PT_TYPE, leader_attr, leader_name, sampler_attr};
use super::elf;
use super::program::Thread;
use crate::perfdata::synth::{self, IdIndexEntry, Mapping};
use crate::perfdata::{BuildId, Features, GroupDesc, WriterEvent};

/// The program's name (its COMM).
pub const PROGRAM: &str = "perfaux-demo";

/// The file's events: the PT leader, then each counter, each with one id
/// per CPU.
pub fn events(config: &Config) -> Vec<WriterEvent> {
    let ids = |k: usize| (0..config.cpus).map(|c| config.event_id(c, k)).collect();
    let leader = WriterEvent {
        attr: leader_attr(config),
        name: leader_name(config).into(),
        ids: ids(0),
    };
    let samplers = config
        .counters
        .iter()
        .enumerate()
        .map(|(k, counter)| WriterEvent {
            attr: sampler_attr(*counter, config),
            name: format!(
                "{}{}",
                counter.name(),
                if config.kernel { "" } else { ":u" }
            ),
            ids: ids(k + 1),
        });
    std::iter::once(leader).chain(samplers).collect()
}

/// `PERF_RECORD_ID_INDEX`: every id writes to its CPU's mmap, per CPU.
pub fn id_index(config: &Config) -> Vec<u8> {
    let entries: Vec<IdIndexEntry> = (0..config.cpus)
        .flat_map(|c| {
            (0..=config.counters.len()).map(move |k| IdIndexEntry {
                id: config.event_id(c, k),
                idx: c as u64,
                cpu: c as u64,
                tid: u64::MAX,
            })
        })
        .collect();
    synth::id_index(&entries)
}

/// `PERF_RECORD_AUXTRACE_INFO` of the simulated Intel PT: how perf
/// decodes the trace.
pub fn auxtrace_info() -> Vec<u8> {
    // perf time = TSC / 2 (the 2 GHz TSC); context switches come as
    // PERF_RECORD_SWITCH_CPU_WIDE.
    synth::intel_pt_info(PT_TYPE, 1, true)
}

/// The trailer of a record `perf record` synthesizes for CPU `cpu`'s
/// leader about task `pid`/`tid` (time 0: it precedes the trace).
fn synthesized(config: &Config, cpu: usize, pid: u32, tid: u32) -> SampleId {
    let id = config.event_id(cpu, 0);
    SampleId {
        sample_type: ID_FIELDS,
        pid,
        tid,
        time: 0,
        id,
        stream_id: id,
        cpu: cpu as u32,
    }
}

/// The kernel's `PERF_RECORD_MMAP` of the traced handler (`--kernel`).
pub fn kernel_mmap(config: &Config, kernel: &Code) -> Vec<u8> {
    let start = elf::load_base(kernel);
    synth::kernel_mmap(
        start,
        kernel.end() - start,
        &synthesized(config, 0, u32::MAX, 0),
    )
}

/// `PERF_RECORD_COMM` and `PERF_RECORD_MMAP2` of `thread` on CPU `cpu`,
/// running `code` from the ELF at [`Config::binary`] with `build_id`.
pub fn thread_records(
    config: &Config,
    cpu: usize,
    thread: &Thread,
    code: &Code,
    build_id: &[u8; 20],
) -> [Vec<u8>; 2] {
    let pid = thread.pid;
    let trailer = synthesized(config, cpu, pid, pid);
    let start = elf::load_base(code);
    let map = Mapping {
        pid,
        start,
        len: code.end() - start,
        path: &config.binary,
        build_id,
    };
    [
        synth::comm(pid, pid, PROGRAM, &trailer),
        synth::mmap2(&map, &trailer),
    ]
}

fn read_proc(path: &str, fallback: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| fallback.to_owned())
}

/// The feature sections: this host's names, the simulated CPUs, the
/// group, the program's build-id; an AUXTRACE index the writer fills.
pub fn features(config: &Config, build_id: &[u8; 20]) -> Features {
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
            members: 1 + config.counters.len() as u32,
        }],
        event_names: Vec::new(),
        build_ids: vec![BuildId {
            pid: -1,
            misc: misc::USER,
            id: build_id.to_vec(),
            path: config.binary.clone(),
        }],
        auxtrace_index: Some(Vec::new()),
        branch_stack: config.branches.is_some(),
    }
}
