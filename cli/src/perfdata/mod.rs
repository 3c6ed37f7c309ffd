// SPDX-License-Identifier: MIT OR Apache-2.0
//! The perf.data file format as Linux `perf` 6.1 reads it
//! (`tools/perf/util/header.c`, `session.c`): a 104-byte header, the attrs
//! with their id arrays, the data section of records, and feature sections
//! after the data. [`Writer`] produces files; [`PerfData`] reads them back
//! with every length checked.

mod body;
mod features;
mod inflate;
mod reader;
mod repair;
mod sample;
pub mod synth;
mod writer;

pub use body::{AuxRecord, LostRecord, sample_id, word_at};
pub use features::{BuildId, Features, GroupDesc, IndexEntry};
pub use inflate::inflate;
pub use reader::{FileEvent, FormatError, PerfData, Record, Records};
pub use repair::{Repaired, repair};
pub use sample::{
    ParsedBranchStack, ParsedSample, SampleIdTrailer, callchain_context, parse_sample,
    parse_trailer, trailer_size,
};
pub use writer::{PipeWriter, RecordWriter, Writer, WriterEvent};

/// `PERFILE2`, the magic of version 2 files, as stored (little endian).
pub const MAGIC: [u8; 8] = *b"PERFILE2";
/// `sizeof(struct perf_file_header)`.
pub const HEADER_SIZE: usize = 104;
/// `sizeof(struct perf_pipe_file_header)`: the magic and this size, the
/// header of perf's pipe format.
pub const PIPE_HEADER_SIZE: usize = 16;
/// The attr size written into files: perf 6.1 refuses anything larger than
/// `PERF_ATTR_SIZE_VER7` ("incompatible file format").
pub const FILE_ATTR_SIZE: usize = 128;
/// Feature sections are aligned like this (`NAME_ALIGN`, for strings).
pub const NAME_ALIGN: usize = 64;

/// Bits of the header's feature bitmap (`HEADER_*` in `util/header.h`).
pub mod feature {
    /// `HEADER_BUILD_ID`: the build-ids of the binaries the samples hit.
    pub const BUILD_ID: u32 = 2;
    /// `HEADER_HOSTNAME`: a string.
    pub const HOSTNAME: u32 = 3;
    /// `HEADER_OSRELEASE`: a string.
    pub const OSRELEASE: u32 = 4;
    /// `HEADER_VERSION`: the writer's version string.
    pub const VERSION: u32 = 5;
    /// `HEADER_ARCH`: a string.
    pub const ARCH: u32 = 6;
    /// `HEADER_NRCPUS`: available and online CPU counts (two u32).
    pub const NRCPUS: u32 = 7;
    /// `HEADER_CMDLINE`: the recording command line (string list).
    pub const CMDLINE: u32 = 11;
    /// `HEADER_EVENT_DESC`: every event's attr, name and ids.
    pub const EVENT_DESC: u32 = 12;
    /// `HEADER_BRANCH_STACK`: an empty section saying samples carry
    /// branch stacks (perf report's `--branch-history` asks for it).
    pub const BRANCH_STACK: u32 = 15;
    /// `HEADER_PMU_MAPPINGS`: PMU type numbers and names.
    pub const PMU_MAPPINGS: u32 = 16;
    /// `HEADER_GROUP_DESC`: event groups.
    pub const GROUP_DESC: u32 = 17;
    /// `HEADER_AUXTRACE`: the index of the AUXTRACE records (may be empty).
    pub const AUXTRACE: u32 = 18;
    /// `HEADER_LAST_FEATURE` (perf 6.1): in the pipe format, the feature
    /// record that ends the features.
    pub const LAST: u32 = 32;
    /// Whether perf writes the feature as a record in the pipe format
    /// (`feat_ops[].synthesize`: the `FEAT_OPR` features; `FEAT_OPN` ones
    /// such as the build-ids and the AUXTRACE index need a seekable file).
    pub fn in_pipe(bit: u32) -> bool {
        !matches!(
            bit,
            1 | BUILD_ID | BRANCH_STACK | AUXTRACE | 19 | 20 | 24 | 30
        )
    }
    /// Size of the bitmap in bits (`HEADER_FEAT_BITS`).
    pub const BITS: u32 = 256;

    /// The name perf gives a feature bit, for dumps.
    pub fn name(bit: u32) -> &'static str {
        match bit {
            HOSTNAME => "hostname",
            OSRELEASE => "osrelease",
            VERSION => "version",
            ARCH => "arch",
            NRCPUS => "nrcpus",
            CMDLINE => "cmdline",
            EVENT_DESC => "event_desc",
            PMU_MAPPINGS => "pmu_mappings",
            GROUP_DESC => "group_desc",
            BUILD_ID => "build_id",
            AUXTRACE => "auxtrace",
            1 => "tracing_data",
            8 => "cpudesc",
            9 => "cpuid",
            10 => "total_mem",
            13 => "cpu_topology",
            14 => "numa_topology",
            BRANCH_STACK => "branch_stack",
            19 => "stat",
            20 => "cache",
            21 => "sample_time",
            22 => "mem_topology",
            23 => "clockid",
            24 => "dir_format",
            25 => "bpf_prog_info",
            26 => "bpf_btf",
            27 => "compressed",
            28 => "cpu_pmu_caps",
            29 => "clock_data",
            30 => "hybrid_topology",
            31 => "pmu_caps",
            _ => "other",
        }
    }
}

/// Record types the perf tool adds to the kernel's (`enum perf_user_event_type`).
pub mod user_record {
    /// `PERF_RECORD_HEADER_ATTR`: an event's attr and ids (pipe format).
    pub const HEADER_ATTR: u32 = 64;
    /// `PERF_RECORD_FINISHED_ROUND`: everything before is sorted out.
    pub const FINISHED_ROUND: u32 = 68;
    /// `PERF_RECORD_ID_INDEX`: the mmap, CPU and task of each event id.
    pub const ID_INDEX: u32 = 69;
    /// `PERF_RECORD_AUXTRACE_INFO`: the AUX decoder's parameters.
    pub const AUXTRACE_INFO: u32 = 70;
    /// `PERF_RECORD_AUXTRACE`: a piece of AUX area data follows the record.
    pub const AUXTRACE: u32 = 71;
    /// `sizeof(struct perf_record_auxtrace)`: the record without its data.
    pub const AUXTRACE_SIZE: usize = 48;
    /// `PERF_RECORD_THREAD_MAP`: the threads recorded.
    pub const THREAD_MAP: u32 = 73;
    /// `PERF_RECORD_CPU_MAP`: the CPUs recorded.
    pub const CPU_MAP: u32 = 74;
    /// `PERF_RECORD_EVENT_UPDATE`: an event's name, unit, scale or CPUs.
    pub const EVENT_UPDATE: u32 = 78;
    /// `PERF_RECORD_HEADER_FEATURE`: a feature section (pipe format).
    pub const HEADER_FEATURE: u32 = 80;
    /// `PERF_RECORD_FINISHED_INIT`: the synthesized records are done.
    pub const FINISHED_INIT: u32 = 82;
}

/// `PERF_AUXTRACE_INTEL_PT`: the AUXTRACE_INFO type of Intel PT.
pub const AUXTRACE_INTEL_PT: u32 = 1;

/// The Intel PT words of `PERF_RECORD_AUXTRACE_INFO` (`tools/perf/util/intel-pt.h`).
pub mod intel_pt_priv {
    /// `INTEL_PT_PMU_TYPE`: the `intel_pt` PMU's `attr.type`.
    pub const PMU_TYPE: usize = 0;
    /// `INTEL_PT_TIME_SHIFT`: TSC to perf time conversion.
    pub const TIME_SHIFT: usize = 1;
    /// `INTEL_PT_TIME_MULT`.
    pub const TIME_MULT: usize = 2;
    /// `INTEL_PT_TIME_ZERO`.
    pub const TIME_ZERO: usize = 3;
    /// `INTEL_PT_CAP_USER_TIME_ZERO`.
    pub const CAP_USER_TIME_ZERO: usize = 4;
    /// `INTEL_PT_TSC_BIT`: the `tsc` bit of the PMU's config.
    pub const TSC_BIT: usize = 5;
    /// `INTEL_PT_NORETCOMP_BIT`: the `noretcomp` bit of the PMU's config.
    pub const NORETCOMP_BIT: usize = 6;
    /// `INTEL_PT_HAVE_SCHED_SWITCH`.
    pub const HAVE_SCHED_SWITCH: usize = 7;
    /// `INTEL_PT_SNAPSHOT_MODE`.
    pub const SNAPSHOT_MODE: usize = 8;
    /// `INTEL_PT_PER_CPU_MMAPS`.
    pub const PER_CPU_MMAPS: usize = 9;
    /// The words perf 6.1 requires (it reads more only when present).
    pub const REQUIRED: usize = 10;
}

/// Rounds `n` up to a multiple of 8 (records and their strings).
pub const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use perfaux::abi::sample_type as st;
    use perfaux::abi::{PerfEventAttr, attr_flags, branch_sample_type as bst, read_format as rf};

    use super::*;

    fn attr(sample_type: u64) -> PerfEventAttr {
        let mut a = PerfEventAttr::new(136);
        a.sample_type = sample_type;
        a.flags = attr_flags::SAMPLE_ID_ALL;
        a
    }

    fn events() -> [WriterEvent; 2] {
        [
            WriterEvent {
                attr: attr(st::IP | st::IDENTIFIER),
                name: "intel_pt//".into(),
                ids: vec![1, 3],
            },
            WriterEvent {
                attr: attr(st::IP | st::IDENTIFIER | st::AUX),
                name: "cycles".into(),
                ids: vec![2, 4],
            },
        ]
    }

    /// FINISHED_ROUND-typed records of 8 to 40 bytes.
    fn records() -> Vec<Vec<u8>> {
        (0..5u16)
            .map(|i| {
                let mut r = vec![0u8; 8 + 8 * usize::from(i)];
                r[0] = 68;
                r[6..8].copy_from_slice(&(8 + 8 * i).to_le_bytes());
                r
            })
            .collect()
    }

    fn features() -> Features {
        Features {
            hostname: Some("host".into()),
            osrelease: Some("6.1.0".into()),
            version: Some("v".into()),
            arch: Some("x86_64".into()),
            nr_cpus: Some((2, 2)),
            cmdline: Some(vec!["perfaux".into(), "record".into()]),
            pmu_mappings: vec![(8, "intel_pt".into())],
            groups: vec![GroupDesc {
                name: "{anon_group}".into(),
                leader: 0,
                members: 2,
            }],
            event_names: Vec::new(),
            build_ids: vec![BuildId {
                pid: -1,
                misc: 2,
                id: (1..=20).collect(),
                path: "/tmp/perf.data.perfaux-demo".into(),
            }],
            auxtrace_index: Some(Vec::new()),
            branch_stack: true,
        }
    }

    /// The events and records of `file` are those written.
    fn assert_written(file: &PerfData<'_>, written: &[WriterEvent], records: &[Vec<u8>]) {
        assert_eq!(file.events.len(), written.len());
        for (read, written) in file.events.iter().zip(written) {
            let mut expected = written.attr;
            expected.size = FILE_ATTR_SIZE as u32;
            assert_eq!(read.attr, expected);
            assert_eq!(read.ids, written.ids);
            assert_eq!(read.name, written.name);
        }
        let read: Vec<Vec<u8>> = file
            .records()
            .map(|r| r.unwrap())
            .filter(|r| {
                r.header.type_ != user_record::HEADER_ATTR
                    && r.header.type_ != user_record::HEADER_FEATURE
            })
            .map(|r| r.bytes.to_vec())
            .collect();
        assert_eq!(read, records);
        assert_eq!(file.event_of(4).unwrap().name, "cycles");
    }

    #[test]
    fn what_the_writer_writes_the_reader_reads() {
        let (events, records, features) = (events(), records(), features());
        let mut w = Writer::create(Cursor::new(Vec::new()), &events).unwrap();
        for r in &records {
            w.record(r).unwrap();
        }
        let bytes = w.finish(&features).unwrap().into_inner();
        let file = PerfData::parse(&bytes).unwrap();
        assert!(!file.pipe);
        assert_written(&file, &events, &records);
        assert_eq!(
            file.features,
            Features {
                event_names: vec!["intel_pt//".into(), "cycles".into()],
                ..features
            }
        );
        assert_eq!(
            file.feature_bits,
            [
                feature::BUILD_ID,
                feature::HOSTNAME,
                feature::OSRELEASE,
                feature::VERSION,
                feature::ARCH,
                feature::NRCPUS,
                feature::CMDLINE,
                feature::EVENT_DESC,
                feature::BRANCH_STACK,
                feature::PMU_MAPPINGS,
                feature::GROUP_DESC,
                feature::AUXTRACE
            ]
        );
    }

    #[test]
    fn what_the_pipe_writer_writes_the_reader_reads() {
        let (events, records, features) = (events(), records(), features());
        let mut w = PipeWriter::create(Vec::new(), &events, &features).unwrap();
        for r in &records {
            RecordWriter::record(&mut w, r).unwrap();
        }
        assert_eq!(w.data_size(), records.iter().map(|r| r.len() as u64).sum());
        let bytes = w.finish().unwrap();
        assert_eq!(bytes[..16], [&MAGIC[..], &16u64.to_le_bytes()].concat());
        let file = PerfData::parse(&bytes).unwrap();
        assert!(file.pipe && file.truncated.is_none());
        assert_written(&file, &events, &records);
        // The features perf writes to a pipe: not the build-ids, the
        // branch-stack flag nor the AUXTRACE index (no FEAT_OPR synthesis).
        assert_eq!(
            file.features,
            Features {
                event_names: vec!["intel_pt//".into(), "cycles".into()],
                build_ids: Vec::new(),
                auxtrace_index: None,
                branch_stack: false,
                ..features
            }
        );
        // Cut inside a record: what came before, and a truncation.
        let cut = PerfData::parse(&bytes[..bytes.len() - 4]).unwrap();
        assert!(cut.truncated.is_some());
        assert_eq!(
            cut.records().count(),
            cut.records().filter(Result::is_ok).count()
        );
    }

    #[test]
    fn an_attr_past_128_bytes_is_refused() {
        let mut a = attr(st::IP);
        a.config3 = 1;
        let e = WriterEvent {
            attr: a,
            name: "x".into(),
            ids: vec![1],
        };
        assert!(Writer::create(Cursor::new(Vec::new()), &[e]).is_err());
    }

    /// A sample with every variable-length field before the AUX block: the
    /// parser must find the AUX block where the kernel puts it, last.
    #[test]
    fn every_field_is_skipped_in_the_kernel_order() {
        let mut a = attr(
            st::IDENTIFIER
                | st::IP
                | st::TID
                | st::TIME
                | st::ADDR
                | st::ID
                | st::STREAM_ID
                | st::CPU
                | st::PERIOD
                | st::READ
                | st::CALLCHAIN
                | st::RAW
                | st::BRANCH_STACK
                | st::REGS_USER
                | st::STACK_USER
                | st::WEIGHT
                | st::DATA_SRC
                | st::TRANSACTION
                | st::REGS_INTR
                | st::PHYS_ADDR
                | st::CGROUP
                | st::DATA_PAGE_SIZE
                | st::CODE_PAGE_SIZE
                | st::AUX,
        );
        a.read_format = rf::GROUP | rf::ID | rf::TOTAL_TIME_ENABLED;
        a.branch_sample_type = bst::HW_INDEX;
        a.sample_regs_user = 0b111;
        a.sample_regs_intr = 0b11;
        let mut r: Vec<u8> = vec![9, 0, 0, 0, 0, 0, 0, 0];
        let mut put = |w: u64| r.extend_from_slice(&w.to_le_bytes());
        put(7); // IDENTIFIER
        put(0x40_1000); // IP
        put(5 | (6 << 32)); // TID
        put(1234); // TIME
        put(0); // ADDR
        put(7); // ID
        put(8); // STREAM_ID
        put(3); // CPU
        put(1000); // PERIOD
        put(2); // READ: nr
        put(99); // time_enabled
        for w in [1, 7, 2, 8] {
            put(w); // value, id x2
        }
        put(2); // CALLCHAIN nr
        put(0xffff_ffff_ffff_fe00);
        put(0x40_1000);
        r.extend_from_slice(&12u32.to_le_bytes()); // RAW size
        r.extend_from_slice(&[0xaa; 12]);
        let mut put = |w: u64| r.extend_from_slice(&w.to_le_bytes());
        put(1); // BRANCH_STACK nr
        put(5); // hw_idx
        for w in [1, 2, 3] {
            put(w);
        }
        put(2); // REGS_USER abi
        for w in [1, 2, 3] {
            put(w);
        }
        put(16); // STACK_USER size
        put(0);
        put(0);
        put(16); // dyn_size
        for w in [1, 2, 3] {
            put(w); // WEIGHT, DATA_SRC, TRANSACTION
        }
        put(2); // REGS_INTR abi
        put(1);
        put(2);
        for w in [1, 2, 3, 4] {
            put(w); // PHYS_ADDR, CGROUP, DATA/CODE_PAGE_SIZE
        }
        put(16); // AUX size
        r.extend_from_slice(b"0123456789abcdef");
        let size = r.len() as u16;
        r[6..8].copy_from_slice(&size.to_le_bytes());
        let s = parse_sample(&a, &r).unwrap();
        assert_eq!(s.id, Some(7));
        assert_eq!(s.ip, Some(0x40_1000));
        assert_eq!(s.tid, Some((5, 6)));
        assert_eq!(s.time, Some(1234));
        assert_eq!(s.cpu, Some(3));
        assert_eq!(s.period, Some(1000));
        assert_eq!(s.aux, Some(&b"0123456789abcdef"[..]));
        assert_eq!(s.aux_offset, r.len() - 24);
        // One byte short anywhere: an error naming what did not fit.
        let mut short = r[..r.len() - 8].to_vec();
        let size = short.len() as u16;
        short[6..8].copy_from_slice(&size.to_le_bytes());
        let e = parse_sample(&a, &short).unwrap_err();
        assert!(e.0.contains("the AUX data needs 16 bytes"), "{e}");
        // A sample_id trailer read from the end.
        let t = parse_trailer(&attr(st::TID | st::TIME | st::CPU | st::IDENTIFIER), &r).unwrap();
        assert_eq!(
            t.id,
            Some(u64::from_le_bytes(r[r.len() - 8..].try_into().unwrap()))
        );
    }
}
