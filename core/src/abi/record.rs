// SPDX-License-Identifier: MIT OR Apache-2.0
//! Record header, record types, and the fixed-layout record bodies (`enum perf_event_type`
//! in the uapi header).

use super::attr::assert_offsets;
use static_assertions::const_assert_eq;

/// `struct perf_event_header`: 8 bytes in front of every record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PerfEventHeader {
    /// `enum perf_event_type` (a `PERF_RECORD_*` value).
    pub type_: u32,
    /// `PERF_RECORD_MISC_*` bits.
    pub misc: u16,
    /// Size of the whole record, header included; a multiple of 8 for every
    /// record the kernel writes.
    pub size: u16,
}
const_assert_eq!(core::mem::size_of::<PerfEventHeader>(), 8);
assert_offsets!(PerfEventHeader { type_ => header_offsets::TYPE, misc => header_offsets::MISC, size => header_offsets::SIZE });

impl PerfEventHeader {
    /// The header's 8 bytes as a record carries them (native byte order).
    ///
    /// ```
    /// use perfaux::abi::{PerfEventHeader, record_type};
    /// let h = PerfEventHeader { type_: record_type::SAMPLE, misc: 2, size: 48 };
    /// let b = h.to_ne_bytes();
    /// assert_eq!(&b[..4], &record_type::SAMPLE.to_ne_bytes());
    /// assert_eq!(&b[4..6], &2u16.to_ne_bytes());
    /// assert_eq!(&b[6..], &48u16.to_ne_bytes());
    /// ```
    #[inline(always)]
    pub fn to_ne_bytes(self) -> [u8; 8] {
        let [t0, t1, t2, t3] = self.type_.to_ne_bytes();
        let [m0, m1] = self.misc.to_ne_bytes();
        let [s0, s1] = self.size.to_ne_bytes();
        [t0, t1, t2, t3, m0, m1, s0, s1]
    }
}

mod header_offsets {
    pub const TYPE: usize = 0;
    pub const MISC: usize = 4;
    pub const SIZE: usize = 6;
}

/// The largest record a `u16` size can describe.
pub const MAX_RECORD_SIZE: usize = u16::MAX as usize;

/// `PERF_RECORD_*`: values of [`PerfEventHeader::type_`].
pub mod record_type {
    /// `PERF_RECORD_MMAP`.
    pub const MMAP: u32 = 1;
    /// `PERF_RECORD_LOST`: records were dropped; body [`LostRecord`](super::LostRecord).
    pub const LOST: u32 = 2;
    /// `PERF_RECORD_COMM`.
    pub const COMM: u32 = 3;
    /// `PERF_RECORD_EXIT`.
    pub const EXIT: u32 = 4;
    /// `PERF_RECORD_THROTTLE`.
    pub const THROTTLE: u32 = 5;
    /// `PERF_RECORD_UNTHROTTLE`.
    pub const UNTHROTTLE: u32 = 6;
    /// `PERF_RECORD_FORK`.
    pub const FORK: u32 = 7;
    /// `PERF_RECORD_READ`.
    pub const READ: u32 = 8;
    /// `PERF_RECORD_SAMPLE`.
    pub const SAMPLE: u32 = 9;
    /// `PERF_RECORD_MMAP2`.
    pub const MMAP2: u32 = 10;
    /// `PERF_RECORD_AUX`: new AUX data; body [`AuxRecord`](super::AuxRecord).
    pub const AUX: u32 = 11;
    /// `PERF_RECORD_ITRACE_START`: body [`ItraceStartRecord`](super::ItraceStartRecord).
    pub const ITRACE_START: u32 = 12;
    /// `PERF_RECORD_LOST_SAMPLES`: body [`LostSamplesRecord`](super::LostSamplesRecord).
    pub const LOST_SAMPLES: u32 = 13;
    /// `PERF_RECORD_SWITCH`.
    pub const SWITCH: u32 = 14;
    /// `PERF_RECORD_SWITCH_CPU_WIDE`.
    pub const SWITCH_CPU_WIDE: u32 = 15;
    /// `PERF_RECORD_NAMESPACES`.
    pub const NAMESPACES: u32 = 16;
    /// `PERF_RECORD_KSYMBOL`.
    pub const KSYMBOL: u32 = 17;
    /// `PERF_RECORD_BPF_EVENT`.
    pub const BPF_EVENT: u32 = 18;
    /// `PERF_RECORD_CGROUP`.
    pub const CGROUP: u32 = 19;
    /// `PERF_RECORD_TEXT_POKE`.
    pub const TEXT_POKE: u32 = 20;
    /// `PERF_RECORD_AUX_OUTPUT_HW_ID`: body [`AuxOutputHwIdRecord`](super::AuxOutputHwIdRecord).
    pub const AUX_OUTPUT_HW_ID: u32 = 21;
    /// `PERF_RECORD_MAX` (not ABI) as of Linux 6.1.
    pub const MAX: u32 = 22;
}

/// `PERF_RECORD_MISC_*` bits of [`PerfEventHeader::misc`].
pub mod misc {
    /// `PERF_RECORD_MISC_CPUMODE_MASK`.
    pub const CPUMODE_MASK: u16 = 7;
    /// `PERF_RECORD_MISC_CPUMODE_UNKNOWN`.
    pub const CPUMODE_UNKNOWN: u16 = 0;
    /// `PERF_RECORD_MISC_KERNEL`.
    pub const KERNEL: u16 = 1;
    /// `PERF_RECORD_MISC_USER`.
    pub const USER: u16 = 2;
    /// `PERF_RECORD_MISC_HYPERVISOR`.
    pub const HYPERVISOR: u16 = 3;
    /// `PERF_RECORD_MISC_GUEST_KERNEL`.
    pub const GUEST_KERNEL: u16 = 4;
    /// `PERF_RECORD_MISC_GUEST_USER`.
    pub const GUEST_USER: u16 = 5;
    /// `PERF_RECORD_MISC_PROC_MAP_PARSE_TIMEOUT`.
    pub const PROC_MAP_PARSE_TIMEOUT: u16 = 1 << 12;
    /// `PERF_RECORD_MISC_MMAP_DATA` / `COMM_EXEC` / `FORK_EXEC` / `SWITCH_OUT`.
    pub const BIT13: u16 = 1 << 13;
    /// `PERF_RECORD_MISC_EXACT_IP` / `SWITCH_OUT_PREEMPT` / `MMAP_BUILD_ID`.
    pub const EXACT_IP: u16 = 1 << 14;
    /// `PERF_RECORD_MISC_EXT_RESERVED`.
    pub const EXT_RESERVED: u16 = 1 << 15;
}

/// `PERF_AUX_FLAG_*`: the `flags` of a `PERF_RECORD_AUX`.
pub mod aux_flags {
    /// `PERF_AUX_FLAG_TRUNCATED`: the record was truncated to fit.
    pub const TRUNCATED: u64 = 0x01;
    /// `PERF_AUX_FLAG_OVERWRITE`: snapshot mode, data was overwritten.
    pub const OVERWRITE: u64 = 0x02;
    /// `PERF_AUX_FLAG_PARTIAL`: the record contains gaps.
    pub const PARTIAL: u64 = 0x04;
    /// `PERF_AUX_FLAG_COLLISION`: sample collided with another.
    pub const COLLISION: u64 = 0x08;
    /// `PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK`: PMU-specific trace format.
    pub const PMU_FORMAT_TYPE_MASK: u64 = 0xff00;
    /// `PERF_AUX_FLAG_CORESIGHT_FORMAT_CORESIGHT`.
    pub const CORESIGHT_FORMAT_CORESIGHT: u64 = 0x0000;
    /// `PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW`.
    pub const CORESIGHT_FORMAT_RAW: u64 = 0x0100;
}

/// Body of `PERF_RECORD_LOST` (before any sample_id trailer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LostRecord {
    /// Record header (type [`record_type::LOST`], misc 0).
    pub header: PerfEventHeader,
    /// Id of the event whose records were lost.
    pub id: u64,
    /// How many records were lost.
    pub lost: u64,
}
const_assert_eq!(core::mem::size_of::<LostRecord>(), 24);
assert_offsets!(LostRecord { header => body_offsets::HEADER, id => body_offsets::W0, lost => body_offsets::W1 });

/// Body of `PERF_RECORD_AUX` (before any sample_id trailer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuxRecord {
    /// Record header (type [`record_type::AUX`], misc 0).
    pub header: PerfEventHeader,
    /// Free-running offset of the new data in the AUX area.
    pub aux_offset: u64,
    /// Size of the new data.
    pub aux_size: u64,
    /// [`aux_flags`] bits.
    pub flags: u64,
}
const_assert_eq!(core::mem::size_of::<AuxRecord>(), 32);
assert_offsets!(AuxRecord {
    header => body_offsets::HEADER,
    aux_offset => body_offsets::W0,
    aux_size => body_offsets::W1,
    flags => body_offsets::W2,
});

/// Body of `PERF_RECORD_ITRACE_START` (before any sample_id trailer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ItraceStartRecord {
    /// Record header (type [`record_type::ITRACE_START`], misc 0).
    pub header: PerfEventHeader,
    /// Process id of the traced task.
    pub pid: u32,
    /// Thread id of the traced task.
    pub tid: u32,
}
const_assert_eq!(core::mem::size_of::<ItraceStartRecord>(), 16);
assert_offsets!(ItraceStartRecord { header => body_offsets::HEADER, pid => body_offsets::W0, tid => body_offsets::W0_HI });

/// Body of `PERF_RECORD_AUX_OUTPUT_HW_ID` (before any sample_id trailer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuxOutputHwIdRecord {
    /// Record header (type [`record_type::AUX_OUTPUT_HW_ID`]).
    pub header: PerfEventHeader,
    /// Hardware id of the `aux_output` event (x86: the counter index).
    pub hw_id: u64,
}
const_assert_eq!(core::mem::size_of::<AuxOutputHwIdRecord>(), 16);
assert_offsets!(AuxOutputHwIdRecord { header => body_offsets::HEADER, hw_id => body_offsets::W0 });

/// Body of `PERF_RECORD_LOST_SAMPLES` (before any sample_id trailer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LostSamplesRecord {
    /// Record header (type [`record_type::LOST_SAMPLES`]).
    pub header: PerfEventHeader,
    /// How many samples were lost.
    pub lost: u64,
}
const_assert_eq!(core::mem::size_of::<LostSamplesRecord>(), 16);
assert_offsets!(LostSamplesRecord { header => body_offsets::HEADER, lost => body_offsets::W0 });

/// Offsets shared by the fixed bodies: the header, then 8-byte words.
mod body_offsets {
    pub const HEADER: usize = 0;
    pub const W0: usize = 8;
    pub const W0_HI: usize = 12;
    pub const W1: usize = 16;
    pub const W2: usize = 24;
}
