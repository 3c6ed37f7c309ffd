// SPDX-License-Identifier: MIT OR Apache-2.0
//! The records `perf record` synthesizes for the file (`ID_INDEX`, `COMM`,
//! `MMAP2`, the kernel's `MMAP`) and the one the kernel writes on a context
//! switch (`PERF_RECORD_SWITCH_CPU_WIDE`, into the leader's ring), with the
//! layouts of `tools/perf/util/synthetic-events.c` and
//! `kernel/events/core.c`.

use perfaux::abi::{PerfEventHeader, misc, record_type};
use perfaux::ring::{FixedEvent, Ring, SampleId};

use super::code::Code;
use crate::perfdata::user_record;

/// `PERF_RECORD_MISC_SWITCH_OUT`.
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: the task was preempted.
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: MMAP2 carries a build-id.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `PROT_READ | PROT_EXEC`.
const PROT_RX: u32 = 0x1 | 0x4;
/// `MAP_PRIVATE`.
const MAP_PRIVATE: u32 = 0x2;

fn header(type_: u32, misc: u16) -> Vec<u8> {
    let mut r = Vec::with_capacity(64);
    r.extend_from_slice(&type_.to_le_bytes());
    r.extend_from_slice(&misc.to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes());
    r
}

/// The `sample_id` trailer of a synthesized record (time 0).
fn trailer(r: &mut Vec<u8>, fields: u64, pid: u32, tid: u32, cpu: usize, id: u64) {
    let mut buf = [0u8; 48];
    let n = SampleId {
        sample_type: fields,
        pid,
        tid,
        time: 0,
        id,
        stream_id: id,
        cpu: cpu as u32,
    }
    .encode(&mut buf);
    r.extend_from_slice(&buf[..n]);
}

/// A NUL-terminated name padded to 8 bytes.
fn put_name(r: &mut Vec<u8>, name: &str) {
    r.extend_from_slice(name.as_bytes());
    r.resize(r.len() + 8 - name.len() % 8, 0);
}

fn finish(mut r: Vec<u8>) -> Vec<u8> {
    let size = r.len() as u16;
    r[6..8].copy_from_slice(&size.to_le_bytes());
    r
}

/// `PERF_RECORD_ID_INDEX`: for each event id, the mmap (queue) it writes
/// to, its CPU and its task (-1: per CPU). Ids are the leader of CPU `c`
/// then its `counters` samplers, as `event_id` numbers them.
pub fn id_index(cpus: usize, counters: usize) -> Vec<u8> {
    let mut r = header(user_record::ID_INDEX, 0);
    let n = cpus * (counters + 1);
    r.extend_from_slice(&(n as u64).to_le_bytes());
    for c in 0..cpus {
        for k in 0..=counters {
            let id = 1 + (c * (counters + 1) + k) as u64;
            for word in [id, c as u64, c as u64, u64::MAX] {
                r.extend_from_slice(&word.to_le_bytes());
            }
        }
    }
    finish(r)
}

/// `PERF_RECORD_COMM` of thread `pid`/`tid`.
pub fn comm(pid: u32, tid: u32, name: &str, cpu: usize, id: u64, fields: u64) -> Vec<u8> {
    let mut r = header(record_type::COMM, 0);
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&tid.to_le_bytes());
    put_name(&mut r, name);
    trailer(&mut r, fields, pid, tid, cpu, id);
    finish(r)
}

/// `PERF_RECORD_MMAP2` of `path` (with its build-id) at `start` for `len`
/// bytes, page offset 0, in process `pid`.
#[allow(clippy::too_many_arguments)]
pub fn mmap2(
    pid: u32,
    start: u64,
    len: u64,
    path: &str,
    build_id: &[u8; 20],
    cpu: usize,
    id: u64,
    fields: u64,
) -> Vec<u8> {
    let mut r = header(record_type::MMAP2, misc::USER | MISC_MMAP_BUILD_ID);
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&start.to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&0u64.to_le_bytes()); // pgoff
    r.push(build_id.len() as u8);
    r.extend_from_slice(&[0, 0, 0]);
    r.extend_from_slice(build_id); // the union's 24 bytes: size, 3 reserved, 20
    r.extend_from_slice(&PROT_RX.to_le_bytes());
    r.extend_from_slice(&MAP_PRIVATE.to_le_bytes());
    put_name(&mut r, path);
    trailer(&mut r, fields, pid, pid, cpu, id);
    finish(r)
}

/// The kernel's `PERF_RECORD_MMAP` (`[kernel.kallsyms]_text`, pid -1)
/// covering the handler's code, which `perf script --vmlinux FILE` maps.
pub fn kernel_mmap(kernel: &Code, fields: u64, id: u64) -> Vec<u8> {
    let start = super::elf::load_base(kernel);
    let mut r = header(record_type::MMAP, misc::KERNEL);
    r.extend_from_slice(&u32::MAX.to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    r.extend_from_slice(&start.to_le_bytes());
    r.extend_from_slice(&(kernel.end() - start).to_le_bytes());
    r.extend_from_slice(&start.to_le_bytes()); // pgoff: the kernel's is its start
    put_name(&mut r, "[kernel.kallsyms]_text");
    trailer(&mut r, fields, u32::MAX, 0, 0, id);
    finish(r)
}

/// Writes `PERF_RECORD_SWITCH_CPU_WIDE` into `ring` as
/// `perf_event_switch_output` does: `out` for the task leaving (with
/// `SWITCH_OUT` and, as for a preemption by the timer, `SWITCH_OUT_PREEMPT`),
/// else for the task coming in; `other` is the task on the other side; the
/// trailer (from `event`) names the task the record is about.
pub fn write_switch(
    ring: &Ring<'_>,
    event: &mut FixedEvent,
    out: bool,
    other: (u32, u32),
) -> perfaux::Result<()> {
    let trailer = event.sample_id.map_or(0, |s| s.size());
    let size = 8 + 8 + trailer;
    let misc = if out {
        MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT
    } else {
        0
    };
    let sample_id = event.sample_id;
    let mut h = ring.begin(size, event)?;
    let _ = h.put_header(PerfEventHeader {
        type_: record_type::SWITCH_CPU_WIDE,
        misc,
        size: size as u16,
    });
    let mut body = [0u8; 8];
    body[..4].copy_from_slice(&other.0.to_le_bytes());
    body[4..].copy_from_slice(&other.1.to_le_bytes());
    let _ = h.copy(&body);
    if let Some(id) = sample_id {
        let _ = h.put_sample_id(&id);
    }
    h.end();
    Ok(())
}
