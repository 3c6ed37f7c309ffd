// SPDX-License-Identifier: GPL-2.0-or-later
//! The side-band records the kernel writes into a traced task's rings
//! (`perf_event_comm_output`, `perf_event_mmap_output`,
//! `perf_event_task_output`), written by the plugin through the engine's
//! ring as it sees the program's system calls.

use perfaux::abi::{PerfEventHeader, misc, record_type};
use perfaux::ring::{FixedEvent, Ring, SampleId};

/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM of an exec.
const MISC_COMM_EXEC: u16 = 1 << 13;

/// One mapping for `PERF_RECORD_MMAP2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mmap {
    /// First address.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// The file's device (major, minor) and inode.
    pub dev: (u32, u32),
    /// The file's inode.
    pub ino: u64,
    /// `PROT_*`.
    pub prot: u32,
    /// `MAP_*`.
    pub flags: u32,
    /// The file's path.
    pub path: String,
}

/// Writes one record of `type_` with `body` and `trailer`'s sample_id into
/// `ring`. A full ring drops it and counts it lost (`PERF_RECORD_LOST`),
/// as the kernel's does.
fn write(ring: &Ring<'_>, type_: u32, misc: u16, body: &[u8], trailer: SampleId) {
    let size = 8 + body.len() + trailer.size();
    let Ok(size16) = u16::try_from(size) else {
        return;
    };
    let mut event = FixedEvent {
        id: trailer.id,
        sample_id: Some(trailer),
    };
    let Ok(mut h) = ring.begin(size, &mut event) else {
        return;
    };
    h.put_header(PerfEventHeader {
        type_,
        misc,
        size: size16,
    });
    h.copy(body);
    h.put_sample_id(&trailer);
    h.end();
}

/// `name` NUL-terminated and padded to 8 bytes, as the kernel lays out
/// the strings of its records.
fn put_name(body: &mut Vec<u8>, name: &str) {
    body.extend_from_slice(name.as_bytes());
    body.push(0);
    body.resize(body.len().next_multiple_of(8), 0);
}

/// `PERF_RECORD_COMM` of `pid`/`tid` named `comm` (an exec's if `exec`).
pub fn comm(ring: &Ring<'_>, pid: u32, tid: u32, comm: &str, exec: bool, trailer: SampleId) {
    let mut body = Vec::with_capacity(32);
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&tid.to_le_bytes());
    // The kernel's comm is at most 15 bytes (TASK_COMM_LEN).
    let name: String = comm.chars().take(15).collect();
    put_name(&mut body, &name);
    let misc = misc::USER | if exec { MISC_COMM_EXEC } else { 0 };
    write(ring, record_type::COMM, misc, &body, trailer);
}

/// `PERF_RECORD_MMAP2` of `map` in `pid`/`tid`.
pub fn mmap2(ring: &Ring<'_>, pid: u32, tid: u32, map: &Mmap, trailer: SampleId) {
    let mut body = Vec::with_capacity(64 + map.path.len());
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&tid.to_le_bytes());
    for v in [map.start, map.len, map.pgoff] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&map.dev.0.to_le_bytes());
    body.extend_from_slice(&map.dev.1.to_le_bytes());
    body.extend_from_slice(&map.ino.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes()); // ino_generation
    body.extend_from_slice(&map.prot.to_le_bytes());
    body.extend_from_slice(&map.flags.to_le_bytes());
    put_name(&mut body, &map.path);
    write(ring, record_type::MMAP2, misc::USER, &body, trailer);
}

/// `PERF_RECORD_FORK` (a new task) or `PERF_RECORD_EXIT` (`exit`):
/// `pid`/`tid`, its parent `ppid`/`ptid`, at `time`.
pub fn task(
    ring: &Ring<'_>,
    exit: bool,
    (pid, tid): (u32, u32),
    (ppid, ptid): (u32, u32),
    time: u64,
    trailer: SampleId,
) {
    let mut body = Vec::with_capacity(24);
    for v in [pid, ppid, tid, ptid] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&time.to_le_bytes());
    let type_ = if exit {
        record_type::EXIT
    } else {
        record_type::FORK
    };
    write(ring, type_, 0, &body, trailer);
}
