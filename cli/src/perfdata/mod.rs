// SPDX-License-Identifier: MIT OR Apache-2.0
//! The perf.data file format as Linux `perf` 6.1 reads it
//! (`tools/perf/util/header.c`, `session.c`): a 104-byte header, the attrs
//! with their id arrays, the data section of records, and feature sections
//! after the data. [`Writer`] produces files; [`PerfData`] reads them back
//! with every length checked.

mod features;
mod reader;
mod sample;
mod writer;

pub use features::{Features, GroupDesc};
pub use reader::{FileEvent, FormatError, PerfData, Record, Records};
pub use sample::{ParsedSample, SampleIdTrailer, parse_sample, parse_trailer};
pub use writer::{Writer, WriterEvent};

/// `PERFILE2`, the magic of version 2 files, as stored (little endian).
pub const MAGIC: [u8; 8] = *b"PERFILE2";
/// `sizeof(struct perf_file_header)`.
pub const HEADER_SIZE: usize = 104;
/// The attr size written into files: perf 6.1 refuses anything larger than
/// `PERF_ATTR_SIZE_VER7` ("incompatible file format").
pub const FILE_ATTR_SIZE: usize = 128;
/// Feature sections are aligned like this (`NAME_ALIGN`, for strings).
pub const NAME_ALIGN: usize = 64;

/// Bits of the header's feature bitmap (`HEADER_*` in `util/header.h`).
pub mod feature {
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
    /// `HEADER_PMU_MAPPINGS`: PMU type numbers and names.
    pub const PMU_MAPPINGS: u32 = 16;
    /// `HEADER_GROUP_DESC`: event groups.
    pub const GROUP_DESC: u32 = 17;
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
            _ => "other",
        }
    }
}

/// Record types the perf tool adds to the kernel's (`enum perf_user_event_type`).
pub mod user_record {
    /// `PERF_RECORD_FINISHED_ROUND`: everything before is sorted out.
    pub const FINISHED_ROUND: u32 = 68;
    /// `PERF_RECORD_AUXTRACE_INFO`: the AUX decoder's parameters.
    pub const AUXTRACE_INFO: u32 = 70;
    /// `PERF_RECORD_AUXTRACE`: a piece of AUX area data follows the record.
    pub const AUXTRACE: u32 = 71;
    /// `sizeof(struct perf_record_auxtrace)`: the record without its data.
    pub const AUXTRACE_SIZE: usize = 48;
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
