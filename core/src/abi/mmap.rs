// SPDX-License-Identifier: MIT OR Apache-2.0
//! `struct perf_event_mmap_page`: the first page of a perf mapping (uapi header).

use super::attr::assert_offsets;
use static_assertions::const_assert_eq;

/// The user page of a perf ring: self-monitoring fields, then the data-ring
/// and AUX-area positions the kernel and the consumer exchange.
///
/// The position fields (`data_head` ... `aux_tail`) are shared with another
/// CPU while a ring is live; `core::ring` and `core::aux` access them only
/// atomically through pointers, never through a `&mut` to this struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PerfEventMmapPage {
    /// Version number of this structure (the core leaves it 0).
    pub version: u32,
    /// Lowest version this is compatible with.
    pub compat_version: u32,
    /// Seqlock for the self-monitoring fields.
    pub lock: u32,
    /// Hardware event identifier (rdpmc index + 1, or 0).
    pub index: u32,
    /// Add to the hardware event value.
    pub offset: i64,
    /// Time the event was active.
    pub time_enabled: u64,
    /// Time the event was running.
    pub time_running: u64,
    /// `cap_bit0`, `cap_bit0_is_deprecated`, `cap_user_rdpmc`, `cap_user_time`,
    /// `cap_user_time_zero`, `cap_user_time_short` (see [`mmap_caps`]).
    pub capabilities: u64,
    /// Width of the counter for rdpmc.
    pub pmc_width: u16,
    /// Time conversion: shift.
    pub time_shift: u16,
    /// Time conversion: multiplier.
    pub time_mult: u32,
    /// Time conversion: offset.
    pub time_offset: u64,
    /// Time conversion: zero point.
    pub time_zero: u64,
    /// Header size up to `__reserved` (the core writes 96).
    pub size: u32,
    /// Reserved.
    pub reserved_1: u32,
    /// Time conversion: cycles for `cap_user_time_short`.
    pub time_cycles: u64,
    /// Time conversion: mask for `cap_user_time_short`.
    pub time_mask: u64,
    /// Pads the header to 1 KiB.
    pub reserved: [u8; 928],
    /// Kernel-written, free-running head of the data ring.
    pub data_head: u64,
    /// Consumer-written tail of the data ring (honoured in writable mode).
    pub data_tail: u64,
    /// Offset of the data ring in the mapping (the kernel writes PAGE_SIZE).
    pub data_offset: u64,
    /// Size of the data ring in bytes.
    pub data_size: u64,
    /// Kernel-written, free-running head of the AUX area.
    pub aux_head: u64,
    /// Consumer-written tail of the AUX area (honoured in writable mode).
    pub aux_tail: u64,
    /// Offset of the AUX area in the mapping (written by user space before mapping it).
    pub aux_offset: u64,
    /// Size of the AUX area (written by user space before mapping it).
    pub aux_size: u64,
}

/// Size of [`PerfEventMmapPage`].
pub const PERF_MMAP_PAGE_SIZE: usize = 1088;
/// What the core stores in [`PerfEventMmapPage::size`]: `offsetof(__reserved)`.
pub const PERF_MMAP_PAGE_HEADER_SIZE: u32 = 96;

const_assert_eq!(
    core::mem::size_of::<PerfEventMmapPage>(),
    PERF_MMAP_PAGE_SIZE
);
const_assert_eq!(core::mem::align_of::<PerfEventMmapPage>(), 8);

/// Byte offsets of every field of [`PerfEventMmapPage`] (uapi header).
pub mod mmap_offsets {
    #![allow(missing_docs)]
    pub const VERSION: usize = 0;
    pub const COMPAT_VERSION: usize = 4;
    pub const LOCK: usize = 8;
    pub const INDEX: usize = 12;
    pub const OFFSET: usize = 16;
    pub const TIME_ENABLED: usize = 24;
    pub const TIME_RUNNING: usize = 32;
    pub const CAPABILITIES: usize = 40;
    pub const PMC_WIDTH: usize = 48;
    pub const TIME_SHIFT: usize = 50;
    pub const TIME_MULT: usize = 52;
    pub const TIME_OFFSET: usize = 56;
    pub const TIME_ZERO: usize = 64;
    pub const SIZE: usize = 72;
    pub const RESERVED_1: usize = 76;
    pub const TIME_CYCLES: usize = 80;
    pub const TIME_MASK: usize = 88;
    pub const RESERVED: usize = 96;
    pub const DATA_HEAD: usize = 1024;
    pub const DATA_TAIL: usize = 1032;
    pub const DATA_OFFSET: usize = 1040;
    pub const DATA_SIZE: usize = 1048;
    pub const AUX_HEAD: usize = 1056;
    pub const AUX_TAIL: usize = 1064;
    pub const AUX_OFFSET: usize = 1072;
    pub const AUX_SIZE: usize = 1080;
}

assert_offsets!(PerfEventMmapPage {
    version => mmap_offsets::VERSION,
    compat_version => mmap_offsets::COMPAT_VERSION,
    lock => mmap_offsets::LOCK,
    index => mmap_offsets::INDEX,
    offset => mmap_offsets::OFFSET,
    time_enabled => mmap_offsets::TIME_ENABLED,
    time_running => mmap_offsets::TIME_RUNNING,
    capabilities => mmap_offsets::CAPABILITIES,
    pmc_width => mmap_offsets::PMC_WIDTH,
    time_shift => mmap_offsets::TIME_SHIFT,
    time_mult => mmap_offsets::TIME_MULT,
    time_offset => mmap_offsets::TIME_OFFSET,
    time_zero => mmap_offsets::TIME_ZERO,
    size => mmap_offsets::SIZE,
    reserved_1 => mmap_offsets::RESERVED_1,
    time_cycles => mmap_offsets::TIME_CYCLES,
    time_mask => mmap_offsets::TIME_MASK,
    reserved => mmap_offsets::RESERVED,
    data_head => mmap_offsets::DATA_HEAD,
    data_tail => mmap_offsets::DATA_TAIL,
    data_offset => mmap_offsets::DATA_OFFSET,
    data_size => mmap_offsets::DATA_SIZE,
    aux_head => mmap_offsets::AUX_HEAD,
    aux_tail => mmap_offsets::AUX_TAIL,
    aux_offset => mmap_offsets::AUX_OFFSET,
    aux_size => mmap_offsets::AUX_SIZE,
});

/// Bits of [`PerfEventMmapPage::capabilities`].
pub mod mmap_caps {
    /// `cap_bit0` (deprecated, always 0).
    pub const BIT0: u64 = 1 << 0;
    /// `cap_bit0_is_deprecated` (the core sets it).
    pub const BIT0_IS_DEPRECATED: u64 = 1 << 1;
    /// `cap_user_rdpmc`.
    pub const USER_RDPMC: u64 = 1 << 2;
    /// `cap_user_time`.
    pub const USER_TIME: u64 = 1 << 3;
    /// `cap_user_time_zero`.
    pub const USER_TIME_ZERO: u64 = 1 << 4;
    /// `cap_user_time_short`.
    pub const USER_TIME_SHORT: u64 = 1 << 5;
}

impl PerfEventMmapPage {
    /// An all-zero page header.
    pub const fn zeroed() -> Self {
        PerfEventMmapPage {
            version: 0,
            compat_version: 0,
            lock: 0,
            index: 0,
            offset: 0,
            time_enabled: 0,
            time_running: 0,
            capabilities: 0,
            pmc_width: 0,
            time_shift: 0,
            time_mult: 0,
            time_offset: 0,
            time_zero: 0,
            size: 0,
            reserved_1: 0,
            time_cycles: 0,
            time_mask: 0,
            reserved: [0; 928],
            data_head: 0,
            data_tail: 0,
            data_offset: 0,
            data_size: 0,
            aux_head: 0,
            aux_tail: 0,
            aux_offset: 0,
            aux_size: 0,
        }
    }
}

impl Default for PerfEventMmapPage {
    fn default() -> Self {
        Self::zeroed()
    }
}
