// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Rule`]: which check refused an attr, and the errno Linux gives for it.

use crate::error::Error;

/// The rule an attr broke: each check of [`copy_attr`](super::copy_attr),
/// [`validate_attr`](super::validate_attr) and
/// [`check_event`](super::check_event) has its own variant, so a caller can
/// say *why* as well as which errno ([`Rule::error`]).
///
/// ```
/// use perfaux::attr::Rule;
/// use perfaux::Error;
/// assert_eq!(Rule::AuxLeaderWithoutSnapshot.error(), Error::Invalid);
/// assert_eq!(Error::from(Rule::UnknownTailNonZero), Error::TooBig);
/// println!("{}", Rule::AuxLeaderWithoutSnapshot); // a sentence for humans
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    // Size negotiation (`perf_copy_attr`, `copy_struct_from_user`).
    /// The `size` field (bytes 4..8) is not readable.
    SizeUnreadable,
    /// `size` is below 64 or above 4096.
    SizeOutOfRange,
    /// `size` is above 136 and a byte past the 136 known ones is not zero.
    UnknownTailNonZero,
    /// The attr's bytes reach past the readable memory.
    AttrUnreadable,

    // Post-copy checks (`perf_copy_attr`).
    /// A reserved bit is set: flag bits 38..63, `__reserved_2`, or `aux_action` bits 3..31.
    ReservedBits,
    /// `sample_type` has a bit from 25 up.
    UnknownSampleType,
    /// `read_format` has a bit from 5 up.
    UnknownReadFormat,
    /// `branch_sample_type` has a bit Linux does not define.
    UnknownBranchType,
    /// `branch_sample_type` has only privilege-level bits, no branch type.
    NoBranchType,
    /// Kernel or hypervisor branches without permission to profile the kernel.
    BranchPrivilege,
    /// `sample_regs_user` is empty or names registers x86-64 cannot sample.
    RegsUserMask,
    /// The platform has no user stack dumps for `PERF_SAMPLE_STACK_USER`.
    NoUserStackDump,
    /// `sample_stack_user` is 65535 or more, or not a multiple of 8.
    StackUserSize,
    /// `sample_regs_intr` is empty or names registers x86-64 cannot sample.
    RegsIntrMask,
    /// `PERF_SAMPLE_CGROUP` without cgroup perf support.
    CgroupUnsupported,
    /// `PERF_SAMPLE_WEIGHT` together with `PERF_SAMPLE_WEIGHT_STRUCT`.
    WeightAndWeightStruct,
    /// `inherit_thread` without `inherit`.
    InheritThreadWithoutInherit,
    /// `remove_on_exec` together with `enable_on_exec`.
    RemoveOnExecWithEnableOnExec,
    /// `sigtrap` without `remove_on_exec`.
    SigtrapWithoutRemoveOnExec,

    // Open-time checks (`sys_perf_event_open`, `perf_event_alloc`, `perf_get_aux_event`).
    /// Extended (XMM) registers on a PMU that cannot sample them.
    ExtendedRegs,
    /// An `exclude_*` flag on a PMU that cannot exclude.
    NoExclude,
    /// `aux_output` on a PMU without AUX-output capability.
    AuxOutputUnsupported,
    /// `aux_output` together with `aux_pause` or `aux_resume`.
    AuxOutputWithPauseResume,
    /// `aux_pause` together with `aux_resume`.
    AuxPauseAndResume,
    /// `aux_start_paused` on a PMU that cannot pause its AUX trace.
    AuxStartPausedUnsupported,
    /// A sampling event (`sample_period != 0`) on a PMU that cannot interrupt.
    SamplingUnsupported,
    /// `use_clockid` with a clock Linux does not offer for perf.
    UnknownClock,
    /// A clock that is not NMI-safe on a PMU that samples from NMI.
    ClockNotNmiSafe,
    /// The event's clock differs from its group leader's.
    GroupClockMismatch,
    /// A group sibling (not the leader) is `pinned` or `exclusive`.
    SiblingPinnedOrExclusive,
    /// The `group_fd` event is itself a sibling, not a group leader.
    LeaderNotGroupLeader,
    /// The event and its group leader are bound to different CPUs.
    GroupCpuMismatch,
    /// `aux_output`/`aux_sample_size`/`aux_pause`/`aux_resume` without a group leader.
    AuxEventWithoutLeader,
    /// `aux_output` together with `aux_sample_size`.
    AuxOutputAndSampleSize,
    /// `aux_output` under a leader that is not an AUX instruction tracer.
    AuxOutputLeaderMismatch,
    /// `aux_pause`/`aux_resume` under a leader whose PMU cannot pause.
    AuxLeaderCannotPause,
    /// `aux_sample_size` under a leader whose PMU has no `snapshot_aux`.
    AuxLeaderWithoutSnapshot,

    // The PMU's own checks (`pmu->event_init`).
    /// The PMU refused the event's `config` (Intel PT: `pt_event_valid`).
    PmuRefusedConfig,
}

impl Rule {
    /// Whether the rule is one of the group block of `sys_perf_event_open`
    /// (leader, clock, CPU, pinned/exclusive), checked after the PMU's
    /// `event_init`.
    pub const fn in_group_block(self) -> bool {
        use Rule::*;
        matches!(
            self,
            LeaderNotGroupLeader | GroupClockMismatch | GroupCpuMismatch | SiblingPinnedOrExclusive
        )
    }

    /// Whether the rule is one of `perf_get_aux_event`'s, checked after the
    /// group block.
    pub const fn after_group_block(self) -> bool {
        use Rule::*;
        matches!(
            self,
            AuxEventWithoutLeader
                | AuxOutputAndSampleSize
                | AuxOutputLeaderMismatch
                | AuxLeaderCannotPause
                | AuxLeaderWithoutSnapshot
        )
    }

    /// The errno Linux returns when this rule is broken.
    pub const fn error(self) -> Error {
        use Rule::*;
        match self {
            SizeUnreadable | AttrUnreadable => Error::Fault,
            SizeOutOfRange | UnknownTailNonZero => Error::TooBig,
            BranchPrivilege => Error::Access,
            NoUserStackDump => Error::NoSys,
            ExtendedRegs
            | AuxOutputUnsupported
            | AuxOutputWithPauseResume
            | AuxStartPausedUnsupported
            | SamplingUnsupported => Error::NotSupported,
            ReservedBits
            | UnknownSampleType
            | UnknownReadFormat
            | UnknownBranchType
            | NoBranchType
            | RegsUserMask
            | StackUserSize
            | RegsIntrMask
            | CgroupUnsupported
            | WeightAndWeightStruct
            | InheritThreadWithoutInherit
            | RemoveOnExecWithEnableOnExec
            | SigtrapWithoutRemoveOnExec
            | NoExclude
            | AuxPauseAndResume
            | UnknownClock
            | ClockNotNmiSafe
            | GroupClockMismatch
            | SiblingPinnedOrExclusive
            | LeaderNotGroupLeader
            | GroupCpuMismatch
            | AuxEventWithoutLeader
            | AuxOutputAndSampleSize
            | AuxOutputLeaderMismatch
            | AuxLeaderCannotPause
            | AuxLeaderWithoutSnapshot
            | PmuRefusedConfig => Error::Invalid,
        }
    }

    /// One sentence saying what is wrong.
    pub const fn describe(self) -> &'static str {
        use Rule::*;
        match self {
            SizeUnreadable => "the size field (bytes 4..8) is not readable",
            SizeOutOfRange => "size is below 64 (PERF_ATTR_SIZE_VER0) or above 4096",
            UnknownTailNonZero => {
                "size is above 136 and a byte past the 136 known ones is not zero"
            }
            AttrUnreadable => "the attr's bytes reach past the readable memory",
            ReservedBits => {
                "a reserved bit is set (flag bits 38..63, __reserved_2, or aux_action bits 3..31)"
            }
            UnknownSampleType => "sample_type has a bit Linux does not define (25 and up)",
            UnknownReadFormat => "read_format has a bit Linux does not define (5 and up)",
            UnknownBranchType => "branch_sample_type has a bit Linux does not define (20 and up)",
            NoBranchType => "branch_sample_type has no branch-type bit, only privilege levels",
            BranchPrivilege => {
                "kernel or hypervisor branch capture needs permission to profile the kernel"
            }
            RegsUserMask => "sample_regs_user is empty or names registers x86-64 cannot sample",
            NoUserStackDump => "this platform cannot dump user stacks (PERF_SAMPLE_STACK_USER)",
            StackUserSize => "sample_stack_user is 65535 or more, or not a multiple of 8",
            RegsIntrMask => "sample_regs_intr is empty or names registers x86-64 cannot sample",
            CgroupUnsupported => "PERF_SAMPLE_CGROUP needs cgroup perf support",
            WeightAndWeightStruct => {
                "PERF_SAMPLE_WEIGHT and PERF_SAMPLE_WEIGHT_STRUCT exclude each other"
            }
            InheritThreadWithoutInherit => "inherit_thread needs inherit",
            RemoveOnExecWithEnableOnExec => "remove_on_exec and enable_on_exec exclude each other",
            SigtrapWithoutRemoveOnExec => "sigtrap needs remove_on_exec",
            ExtendedRegs => "the PMU cannot sample the extended (XMM) registers",
            NoExclude => "the PMU cannot honour exclude_* flags",
            AuxOutputUnsupported => "aux_output needs a PMU with AUX-output capability",
            AuxOutputWithPauseResume => "aux_output excludes aux_pause and aux_resume",
            AuxPauseAndResume => "aux_pause and aux_resume exclude each other",
            AuxStartPausedUnsupported => {
                "aux_start_paused needs a PMU that can pause its AUX trace"
            }
            SamplingUnsupported => "the PMU cannot sample (no overflow interrupt)",
            UnknownClock => {
                "clockid is not a clock perf offers (REALTIME, MONOTONIC, MONOTONIC_RAW, BOOTTIME, TAI)"
            }
            ClockNotNmiSafe => "the clock cannot be read from NMI, where this PMU samples",
            GroupClockMismatch => "the event's clock differs from its group leader's",
            SiblingPinnedOrExclusive => "only a group leader may be pinned or exclusive",
            LeaderNotGroupLeader => "the group_fd event is a sibling, not a group leader",
            GroupCpuMismatch => "the event and its group leader are bound to different CPUs",
            AuxEventWithoutLeader => {
                "aux_output, aux_sample_size, aux_pause and aux_resume need a group leader (the AUX event)"
            }
            AuxOutputAndSampleSize => "aux_output and aux_sample_size exclude each other",
            AuxOutputLeaderMismatch => {
                "aux_output needs an AUX instruction-trace leader this PMU can write into"
            }
            AuxLeaderCannotPause => {
                "aux_pause and aux_resume need a leader whose PMU can pause its AUX trace"
            }
            AuxLeaderWithoutSnapshot => {
                "aux_sample_size needs a leader whose PMU implements snapshot_aux"
            }
            PmuRefusedConfig => {
                "the PMU's event_init refused the config (intel_pt: a format bit it does not offer)"
            }
        }
    }
}

impl From<Rule> for Error {
    fn from(rule: Rule) -> Error {
        rule.error()
    }
}

impl core::fmt::Display for Rule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.error().name(), self.describe())
    }
}

impl core::error::Error for Rule {}
