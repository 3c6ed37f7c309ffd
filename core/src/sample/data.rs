// SPDX-License-Identifier: MIT OR Apache-2.0
//! The values a sample carries, as the caller (the event and PMU layers)
//! supplies them: Linux's `struct perf_sample_data`.

/// One member's values in a `PERF_FORMAT_GROUP` read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadGroupEntry {
    /// Counter value.
    pub value: u64,
    /// Event id (`PERF_FORMAT_ID`).
    pub id: u64,
    /// Lost samples (`PERF_FORMAT_LOST`).
    pub lost: u64,
}

/// The `PERF_SAMPLE_READ` values; which are written depends on `read_format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadValues<'s> {
    /// `PERF_FORMAT_TOTAL_TIME_ENABLED`.
    pub time_enabled: u64,
    /// `PERF_FORMAT_TOTAL_TIME_RUNNING`.
    pub time_running: u64,
    /// The event's own value, id and lost count (without `PERF_FORMAT_GROUP`).
    pub this: ReadGroupEntry,
    /// Every member, leader first (with `PERF_FORMAT_GROUP`).
    pub group: &'s [ReadGroupEntry],
}

/// `PERF_SAMPLE_BRANCH_STACK` data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BranchStack<'s> {
    /// `hw_idx`, written when `branch_sample_type` has `HW_INDEX`.
    pub hw_index: u64,
    /// Entries: from, to, flags (24 bytes each).
    pub entries: &'s [[u64; 3]],
    /// Per-entry counters, written when `branch_sample_type` has `COUNTERS`
    /// (Linux 6.8); must have as many entries as `entries`.
    pub counters: &'s [u64],
}

/// Sampled registers (`PERF_SAMPLE_REGS_USER` / `REGS_INTR`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs<'s> {
    /// `PERF_SAMPLE_REGS_ABI_*`; 0 (none) writes no registers.
    pub abi: u64,
    /// One value per bit of the attr's mask, lowest bit first.
    pub values: &'s [u64],
}

/// `PERF_SAMPLE_STACK_USER` data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackUser<'s> {
    /// The user stack from the stack pointer up (what could be copied);
    /// `None`: no user registers, so no dump (size 0).
    pub stack: Option<&'s [u8]>,
}

/// Every value a `PERF_RECORD_SAMPLE` can carry. Only the fields named by
/// the event's `sample_type` are written; the others are ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleData<'s> {
    /// `header.misc` (`PERF_RECORD_MISC_*`: CPU mode, exact IP).
    pub misc: u16,
    /// IP.
    pub ip: u64,
    /// TID: process id.
    pub pid: u32,
    /// TID: thread id.
    pub tid: u32,
    /// TIME.
    pub time: u64,
    /// ADDR.
    pub addr: u64,
    /// ID and IDENTIFIER: the primary (parent's) event id.
    pub id: u64,
    /// STREAM_ID: the event's own id.
    pub stream_id: u64,
    /// CPU.
    pub cpu: u32,
    /// PERIOD.
    pub period: u64,
    /// READ.
    pub read: ReadValues<'s>,
    /// CALLCHAIN: the instruction pointers (context markers included).
    pub callchain: &'s [u64],
    /// RAW: the raw bytes; `None` writes the empty RAW (size 4, one zero u32).
    pub raw: Option<&'s [u8]>,
    /// BRANCH_STACK; `None` writes only `nr = 0`.
    pub branch_stack: Option<BranchStack<'s>>,
    /// REGS_USER.
    pub regs_user: Regs<'s>,
    /// STACK_USER.
    pub stack_user: StackUser<'s>,
    /// WEIGHT or WEIGHT_STRUCT (the same u64).
    pub weight: u64,
    /// DATA_SRC.
    pub data_src: u64,
    /// TRANSACTION.
    pub transaction: u64,
    /// REGS_INTR.
    pub regs_intr: Regs<'s>,
    /// PHYS_ADDR.
    pub phys_addr: u64,
    /// CGROUP.
    pub cgroup: u64,
    /// DATA_PAGE_SIZE.
    pub data_page_size: u64,
    /// CODE_PAGE_SIZE.
    pub code_page_size: u64,
}
