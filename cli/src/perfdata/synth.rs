// SPDX-License-Identifier: MIT OR Apache-2.0
//! The records `perf record` synthesizes into a file, laid out as
//! `tools/perf/util/synthetic-events.c`, `tools/perf/util/auxtrace.c` and
//! `tools/perf/builtin-record.c` write them: `ID_INDEX`, `COMM`, `MMAP2`,
//! the kernel's `MMAP`, `AUXTRACE_INFO`, `AUXTRACE` and `FINISHED_ROUND`.
//! Each builder returns one whole record, its header's size filled in.
//!
//! The builders know the layouts; what goes in them (ids, CPUs, the PT
//! configuration) is the caller's.

use perfaux::abi::{misc, record_type};
use perfaux::ring::SampleId;

use super::{AUXTRACE_INTEL_PT, intel_pt_priv, user_record};

/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: MMAP2 carries a build-id.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `PROT_READ | PROT_EXEC`.
const PROT_RX: u32 = 0x1 | 0x4;
/// `MAP_PRIVATE`.
const MAP_PRIVATE: u32 = 0x2;

/// A record under construction: the header first, its size patched in by
/// [`Builder::finish`].
struct Builder(Vec<u8>);

impl Builder {
    fn new(type_: u32, misc: u16) -> Builder {
        let mut r = Vec::with_capacity(64);
        r.extend_from_slice(&type_.to_le_bytes());
        r.extend_from_slice(&misc.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        Builder(r)
    }

    fn u32(mut self, v: u32) -> Builder {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn u64(mut self, v: u64) -> Builder {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn bytes(mut self, b: &[u8]) -> Builder {
        self.0.extend_from_slice(b);
        self
    }

    /// A NUL-terminated name padded to 8 bytes (at least one NUL), as
    /// `perf_event__synthesize_comm` and `_mmap_events` pad them.
    fn name(mut self, name: &str) -> Builder {
        self.0.extend_from_slice(name.as_bytes());
        let padded = self.0.len() + 8 - name.len() % 8;
        self.0.resize(padded, 0);
        self
    }

    /// The `sample_id` trailer (`sample_id_all`) of `id`'s fields.
    fn trailer(self, id: &SampleId) -> Builder {
        let mut buf = [0u8; 48];
        let n = id.encode(&mut buf);
        self.bytes(&buf[..n])
    }

    fn finish(mut self) -> Vec<u8> {
        let size = self.0.len() as u16;
        self.0[6..8].copy_from_slice(&size.to_le_bytes());
        self.0
    }
}

/// One entry of `PERF_RECORD_ID_INDEX`: which mmap (perf's queue) an
/// event id writes to, and its CPU and task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdIndexEntry {
    /// The event id.
    pub id: u64,
    /// The index of the mmap the id's records arrive in.
    pub idx: u64,
    /// The CPU, or `u64::MAX` for a per-task event.
    pub cpu: u64,
    /// The task, or `u64::MAX` for a per-CPU event.
    pub tid: u64,
}

/// `PERF_RECORD_ID_INDEX` (`perf_event__synthesize_id_index`).
pub fn id_index(entries: &[IdIndexEntry]) -> Vec<u8> {
    entries
        .iter()
        .fold(
            Builder::new(user_record::ID_INDEX, 0).u64(entries.len() as u64),
            |r, e| r.u64(e.id).u64(e.idx).u64(e.cpu).u64(e.tid),
        )
        .finish()
}

/// `PERF_RECORD_COMM` of thread `pid`/`tid`, with `trailer`.
pub fn comm(pid: u32, tid: u32, name: &str, trailer: &SampleId) -> Vec<u8> {
    Builder::new(record_type::COMM, 0)
        .u32(pid)
        .u32(tid)
        .name(name)
        .trailer(trailer)
        .finish()
}

/// What a `PERF_RECORD_MMAP2` maps: `path` (with its build-id) at `start`
/// for `len` bytes, page offset 0, readable and executable, private.
#[derive(Clone, Copy, Debug)]
pub struct Mapping<'a> {
    /// The process.
    pub pid: u32,
    /// The first address.
    pub start: u64,
    /// Bytes mapped.
    pub len: u64,
    /// The file.
    pub path: &'a str,
    /// Its GNU build-id.
    pub build_id: &'a [u8; 20],
}

/// `PERF_RECORD_MMAP2` of `map`, with the build-id form of the record
/// (`PERF_RECORD_MISC_MMAP_BUILD_ID`), with `trailer`.
pub fn mmap2(map: &Mapping<'_>, trailer: &SampleId) -> Vec<u8> {
    Builder::new(record_type::MMAP2, misc::USER | MISC_MMAP_BUILD_ID)
        .u32(map.pid)
        .u32(map.pid)
        .u64(map.start)
        .u64(map.len)
        .u64(0) // pgoff
        // The union's 24 bytes: the size, 3 reserved, the 20-byte id.
        .bytes(&[map.build_id.len() as u8, 0, 0, 0])
        .bytes(map.build_id)
        .u32(PROT_RX)
        .u32(MAP_PRIVATE)
        .name(map.path)
        .trailer(trailer)
        .finish()
}

/// The kernel's `PERF_RECORD_MMAP` (`[kernel.kallsyms]_text`, pid -1) of
/// the text at `start` for `len` bytes, which `perf script --vmlinux FILE`
/// maps (`perf_event__synthesize_kernel_mmap`: the page offset is the
/// start).
pub fn kernel_mmap(start: u64, len: u64, trailer: &SampleId) -> Vec<u8> {
    Builder::new(record_type::MMAP, misc::KERNEL)
        .u32(u32::MAX)
        .u32(0)
        .u64(start)
        .u64(len)
        .u64(start)
        .name("[kernel.kallsyms]_text")
        .trailer(trailer)
        .finish()
}

/// `PERF_RECORD_FINISHED_ROUND`: every record before it may be sorted and
/// delivered.
pub fn finished_round() -> Vec<u8> {
    Builder::new(user_record::FINISHED_ROUND, 0).finish()
}

/// `PERF_RECORD_AUXTRACE_INFO` of Intel PT (`intel_pt_info_fill`): the
/// type, then the private words perf's decoder is configured from.
pub fn intel_pt_auxtrace_info(priv_: &[u64; intel_pt_priv::REQUIRED]) -> Vec<u8> {
    priv_
        .iter()
        .fold(
            Builder::new(user_record::AUXTRACE_INFO, 0)
                .u32(AUXTRACE_INTEL_PT)
                .u32(0),
            |r, &w| r.u64(w),
        )
        .finish()
}

/// `PERF_RECORD_AUXTRACE_INFO` of perfaux's Intel PT PMU (`attr.type`
/// `pmu_type`), as its tracers write traces: perf time is the TSC shifted
/// right by `time_shift` (`time_mult` 1, `time_zero` 0); the `tsc` and
/// `noretcomp` config bits as masks (perf tests config & mask); context
/// switches as `PERF_RECORD_SWITCH_CPU_WIDE` if `sched_switch`
/// (`have_sched_switch` 3), else none (0: the AUXTRACE records name the
/// thread); per-CPU mmaps; not snapshot mode (`perf record --aux-sample`
/// is not `-S`, whatever the AUX area's mode).
pub fn intel_pt_info(pmu_type: u32, time_shift: u64, sched_switch: bool) -> Vec<u8> {
    use perfaux::pt::config::bits as pt_bits;
    let mut priv_ = [0u64; intel_pt_priv::REQUIRED];
    priv_[intel_pt_priv::PMU_TYPE] = u64::from(pmu_type);
    priv_[intel_pt_priv::TIME_SHIFT] = time_shift;
    priv_[intel_pt_priv::TIME_MULT] = 1;
    priv_[intel_pt_priv::TIME_ZERO] = 0;
    priv_[intel_pt_priv::CAP_USER_TIME_ZERO] = 1;
    priv_[intel_pt_priv::TSC_BIT] = pt_bits::TSC;
    priv_[intel_pt_priv::NORETCOMP_BIT] = pt_bits::NORETCOMP;
    priv_[intel_pt_priv::HAVE_SCHED_SWITCH] = if sched_switch { 3 } else { 0 };
    priv_[intel_pt_priv::SNAPSHOT_MODE] = 0;
    priv_[intel_pt_priv::PER_CPU_MMAPS] = 1;
    intel_pt_auxtrace_info(&priv_)
}

/// `PERF_RECORD_AUXTRACE` announcing `size` bytes of AUX data from AUX
/// offset `offset`, read at time `reference`, of mmap `idx` (per CPU:
/// `tid` is `u32::MAX`). The data follows the record (its header's size
/// does not count it).
pub fn auxtrace(size: u64, offset: u64, reference: u64, idx: u32, tid: u32, cpu: u32) -> Vec<u8> {
    let r = Builder::new(user_record::AUXTRACE, 0)
        .u64(size)
        .u64(offset)
        .u64(reference)
        .u32(idx)
        .u32(tid)
        .u32(cpu)
        .u32(0)
        .finish();
    debug_assert_eq!(r.len(), user_record::AUXTRACE_SIZE);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perfdata::{parse_trailer, trailer_size};
    use perfaux::abi::{PerfEventAttr, sample_type as st};

    fn header(r: &[u8]) -> (u32, u16, u16) {
        (
            u32::from_le_bytes(r[0..4].try_into().unwrap()),
            u16::from_le_bytes(r[4..6].try_into().unwrap()),
            u16::from_le_bytes(r[6..8].try_into().unwrap()),
        )
    }

    fn trailer(fields: u64) -> SampleId {
        SampleId {
            sample_type: fields,
            pid: 7,
            tid: 8,
            time: 0,
            id: 3,
            stream_id: 3,
            cpu: 2,
        }
    }

    #[test]
    fn every_record_states_its_own_size() {
        let t = trailer(st::TID | st::TIME | st::CPU | st::IDENTIFIER);
        let map = Mapping {
            pid: 7,
            start: 0x400000,
            len: 0x1000,
            path: "/bin/x",
            build_id: &[0xab; 20],
        };
        for r in [
            id_index(&[]),
            comm(7, 8, "demo", &t),
            mmap2(&map, &t),
            kernel_mmap(0xffff_ffff_8100_0000, 0x1000, &t),
            finished_round(),
            intel_pt_auxtrace_info(&[0; intel_pt_priv::REQUIRED]),
            auxtrace(64, 0, 1, 0, u32::MAX, 0),
        ] {
            assert_eq!(header(&r).2 as usize, r.len());
            assert_eq!(r.len() % 8, 0, "records are 8-byte multiples");
        }
    }

    #[test]
    fn names_are_nul_terminated_even_at_a_multiple_of_eight() {
        let t = trailer(0);
        // "demo1234" is 8 bytes: the record needs 8 more for the NUL.
        let r = comm(1, 1, "demo1234", &t);
        assert_eq!(&r[16..24], b"demo1234");
        assert_eq!(&r[24..32], &[0u8; 8]);
        assert_eq!(r.len(), 32);
    }

    #[test]
    fn the_trailer_parses_back() {
        let fields = st::TID | st::TIME | st::CPU | st::IDENTIFIER;
        let mut attr = PerfEventAttr::new(136);
        attr.sample_type = fields;
        let r = comm(7, 8, "demo", &trailer(fields));
        assert_eq!(trailer_size(&attr), 32);
        let t = parse_trailer(&attr, &r).unwrap();
        assert_eq!(t.tid, Some((7, 8)));
        assert_eq!(t.id, Some(3));
        assert_eq!(t.cpu, Some(2));
    }

    #[test]
    fn id_index_lists_every_entry() {
        let e = IdIndexEntry {
            id: 5,
            idx: 1,
            cpu: 1,
            tid: u64::MAX,
        };
        let r = id_index(&[e, e]);
        assert_eq!(r.len(), 8 + 8 + 2 * 32);
        assert_eq!(u64::from_le_bytes(r[8..16].try_into().unwrap()), 2);
        assert_eq!(u64::from_le_bytes(r[16..24].try_into().unwrap()), 5);
    }
}
