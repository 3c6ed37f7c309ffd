// SPDX-License-Identifier: MIT OR Apache-2.0
//! `sample_type`, `read_format` and `branch_sample_type` bits (uapi header).

/// `PERF_SAMPLE_*` bits of `perf_event_attr::sample_type`, as Linux 6.18 has them.
pub mod sample_type {
    /// `PERF_SAMPLE_IP`.
    pub const IP: u64 = 1 << 0;
    /// `PERF_SAMPLE_TID`.
    pub const TID: u64 = 1 << 1;
    /// `PERF_SAMPLE_TIME`.
    pub const TIME: u64 = 1 << 2;
    /// `PERF_SAMPLE_ADDR`.
    pub const ADDR: u64 = 1 << 3;
    /// `PERF_SAMPLE_READ`.
    pub const READ: u64 = 1 << 4;
    /// `PERF_SAMPLE_CALLCHAIN`.
    pub const CALLCHAIN: u64 = 1 << 5;
    /// `PERF_SAMPLE_ID`.
    pub const ID: u64 = 1 << 6;
    /// `PERF_SAMPLE_CPU`.
    pub const CPU: u64 = 1 << 7;
    /// `PERF_SAMPLE_PERIOD`.
    pub const PERIOD: u64 = 1 << 8;
    /// `PERF_SAMPLE_STREAM_ID`.
    pub const STREAM_ID: u64 = 1 << 9;
    /// `PERF_SAMPLE_RAW`.
    pub const RAW: u64 = 1 << 10;
    /// `PERF_SAMPLE_BRANCH_STACK`.
    pub const BRANCH_STACK: u64 = 1 << 11;
    /// `PERF_SAMPLE_REGS_USER`.
    pub const REGS_USER: u64 = 1 << 12;
    /// `PERF_SAMPLE_STACK_USER`.
    pub const STACK_USER: u64 = 1 << 13;
    /// `PERF_SAMPLE_WEIGHT`.
    pub const WEIGHT: u64 = 1 << 14;
    /// `PERF_SAMPLE_DATA_SRC`.
    pub const DATA_SRC: u64 = 1 << 15;
    /// `PERF_SAMPLE_IDENTIFIER`.
    pub const IDENTIFIER: u64 = 1 << 16;
    /// `PERF_SAMPLE_TRANSACTION`.
    pub const TRANSACTION: u64 = 1 << 17;
    /// `PERF_SAMPLE_REGS_INTR`.
    pub const REGS_INTR: u64 = 1 << 18;
    /// `PERF_SAMPLE_PHYS_ADDR`.
    pub const PHYS_ADDR: u64 = 1 << 19;
    /// `PERF_SAMPLE_AUX`: the sample carries the newest AUX bytes of its AUX leader.
    pub const AUX: u64 = 1 << 20;
    /// `PERF_SAMPLE_CGROUP`.
    pub const CGROUP: u64 = 1 << 21;
    /// `PERF_SAMPLE_DATA_PAGE_SIZE`.
    pub const DATA_PAGE_SIZE: u64 = 1 << 22;
    /// `PERF_SAMPLE_CODE_PAGE_SIZE`.
    pub const CODE_PAGE_SIZE: u64 = 1 << 23;
    /// `PERF_SAMPLE_WEIGHT_STRUCT`.
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
    /// `PERF_SAMPLE_MAX` (not ABI): the first undefined bit.
    pub const MAX: u64 = 1 << 25;
    /// `PERF_SAMPLE_WEIGHT_TYPE`: either weight format.
    pub const WEIGHT_TYPE: u64 = WEIGHT | WEIGHT_STRUCT;
    /// Every defined bit.
    pub const KNOWN: u64 = MAX - 1;
    /// Every defined bit with its name (the `PERF_*_` prefix left off).
    pub const NAMES: &[(&str, u64)] = &[
        ("IP", IP),
        ("TID", TID),
        ("TIME", TIME),
        ("ADDR", ADDR),
        ("READ", READ),
        ("CALLCHAIN", CALLCHAIN),
        ("ID", ID),
        ("CPU", CPU),
        ("PERIOD", PERIOD),
        ("STREAM_ID", STREAM_ID),
        ("RAW", RAW),
        ("BRANCH_STACK", BRANCH_STACK),
        ("REGS_USER", REGS_USER),
        ("STACK_USER", STACK_USER),
        ("WEIGHT", WEIGHT),
        ("DATA_SRC", DATA_SRC),
        ("IDENTIFIER", IDENTIFIER),
        ("TRANSACTION", TRANSACTION),
        ("REGS_INTR", REGS_INTR),
        ("PHYS_ADDR", PHYS_ADDR),
        ("AUX", AUX),
        ("CGROUP", CGROUP),
        ("DATA_PAGE_SIZE", DATA_PAGE_SIZE),
        ("CODE_PAGE_SIZE", CODE_PAGE_SIZE),
        ("WEIGHT_STRUCT", WEIGHT_STRUCT),
    ];
}

/// `PERF_FORMAT_*` bits of `perf_event_attr::read_format`.
pub mod read_format {
    /// `PERF_FORMAT_TOTAL_TIME_ENABLED`.
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    /// `PERF_FORMAT_TOTAL_TIME_RUNNING`.
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    /// `PERF_FORMAT_ID`.
    pub const ID: u64 = 1 << 2;
    /// `PERF_FORMAT_GROUP`.
    pub const GROUP: u64 = 1 << 3;
    /// `PERF_FORMAT_LOST`.
    pub const LOST: u64 = 1 << 4;
    /// `PERF_FORMAT_MAX` (not ABI): the first undefined bit.
    pub const MAX: u64 = 1 << 5;
    /// Every defined bit.
    pub const KNOWN: u64 = MAX - 1;
    /// Every defined bit with its name (the `PERF_*_` prefix left off).
    pub const NAMES: &[(&str, u64)] = &[
        ("TOTAL_TIME_ENABLED", TOTAL_TIME_ENABLED),
        ("TOTAL_TIME_RUNNING", TOTAL_TIME_RUNNING),
        ("ID", ID),
        ("GROUP", GROUP),
        ("LOST", LOST),
    ];
}

/// `PERF_SAMPLE_BRANCH_*` bits of `perf_event_attr::branch_sample_type`.
pub mod branch_sample_type {
    /// `PERF_SAMPLE_BRANCH_USER`: user-level branches.
    pub const USER: u64 = 1 << 0;
    /// `PERF_SAMPLE_BRANCH_KERNEL`: kernel-level branches.
    pub const KERNEL: u64 = 1 << 1;
    /// `PERF_SAMPLE_BRANCH_HV`: hypervisor-level branches.
    pub const HV: u64 = 1 << 2;
    /// `PERF_SAMPLE_BRANCH_ANY`.
    pub const ANY: u64 = 1 << 3;
    /// `PERF_SAMPLE_BRANCH_ANY_CALL`.
    pub const ANY_CALL: u64 = 1 << 4;
    /// `PERF_SAMPLE_BRANCH_ANY_RETURN`.
    pub const ANY_RETURN: u64 = 1 << 5;
    /// `PERF_SAMPLE_BRANCH_IND_CALL`.
    pub const IND_CALL: u64 = 1 << 6;
    /// `PERF_SAMPLE_BRANCH_ABORT_TX`.
    pub const ABORT_TX: u64 = 1 << 7;
    /// `PERF_SAMPLE_BRANCH_IN_TX`.
    pub const IN_TX: u64 = 1 << 8;
    /// `PERF_SAMPLE_BRANCH_NO_TX`.
    pub const NO_TX: u64 = 1 << 9;
    /// `PERF_SAMPLE_BRANCH_COND`.
    pub const COND: u64 = 1 << 10;
    /// `PERF_SAMPLE_BRANCH_CALL_STACK`.
    pub const CALL_STACK: u64 = 1 << 11;
    /// `PERF_SAMPLE_BRANCH_IND_JUMP`.
    pub const IND_JUMP: u64 = 1 << 12;
    /// `PERF_SAMPLE_BRANCH_CALL`.
    pub const CALL: u64 = 1 << 13;
    /// `PERF_SAMPLE_BRANCH_NO_FLAGS`.
    pub const NO_FLAGS: u64 = 1 << 14;
    /// `PERF_SAMPLE_BRANCH_NO_CYCLES`.
    pub const NO_CYCLES: u64 = 1 << 15;
    /// `PERF_SAMPLE_BRANCH_TYPE_SAVE`.
    pub const TYPE_SAVE: u64 = 1 << 16;
    /// `PERF_SAMPLE_BRANCH_HW_INDEX`.
    pub const HW_INDEX: u64 = 1 << 17;
    /// `PERF_SAMPLE_BRANCH_PRIV_SAVE`.
    pub const PRIV_SAVE: u64 = 1 << 18;
    /// `PERF_SAMPLE_BRANCH_COUNTERS` (Linux 6.8).
    pub const COUNTERS: u64 = 1 << 19;
    /// `PERF_SAMPLE_BRANCH_MAX` (not ABI): the first undefined bit.
    pub const MAX: u64 = 1 << 20;
    /// `PERF_SAMPLE_BRANCH_PLM_ALL`: the privilege-level bits.
    pub const PLM_ALL: u64 = USER | KERNEL | HV;
    /// The privilege levels whose capture needs kernel-profiling permission.
    pub const PERM_PLM: u64 = KERNEL | HV;
    /// Every defined bit with its name (the `PERF_*_` prefix left off).
    pub const NAMES: &[(&str, u64)] = &[
        ("USER", USER),
        ("KERNEL", KERNEL),
        ("HV", HV),
        ("ANY", ANY),
        ("ANY_CALL", ANY_CALL),
        ("ANY_RETURN", ANY_RETURN),
        ("IND_CALL", IND_CALL),
        ("ABORT_TX", ABORT_TX),
        ("IN_TX", IN_TX),
        ("NO_TX", NO_TX),
        ("COND", COND),
        ("CALL_STACK", CALL_STACK),
        ("IND_JUMP", IND_JUMP),
        ("CALL", CALL),
        ("NO_FLAGS", NO_FLAGS),
        ("NO_CYCLES", NO_CYCLES),
        ("TYPE_SAVE", TYPE_SAVE),
        ("HW_INDEX", HW_INDEX),
        ("PRIV_SAVE", PRIV_SAVE),
        ("COUNTERS", COUNTERS),
    ];
}

/// `struct perf_branch_entry`'s third word (`include/uapi/linux/perf_event.h`,
/// Linux 6.1): the flags of one `PERF_SAMPLE_BRANCH_STACK` entry, after its
/// `from` and `to`.
pub mod branch_flags {
    /// `mispred`: the target was mispredicted.
    pub const MISPRED: u64 = 1 << 0;
    /// `predicted`: the target was predicted.
    pub const PREDICTED: u64 = 1 << 1;
    /// `in_tx`: the branch was in a transaction.
    pub const IN_TX: u64 = 1 << 2;
    /// `abort`: the branch aborted a transaction.
    pub const ABORT: u64 = 1 << 3;
    /// `cycles` (16 bits): cycles since the previous branch.
    pub const CYCLES_SHIFT: u32 = 4;
    /// `type` (4 bits): a `PERF_BR_*` from [`branch_type`](super::branch_type),
    /// written with `PERF_SAMPLE_BRANCH_TYPE_SAVE`.
    pub const TYPE_SHIFT: u32 = 20;
    /// `spec` (2 bits): `PERF_BR_SPEC_*`.
    pub const SPEC_SHIFT: u32 = 24;
    /// `new_type` (4 bits): `PERF_BR_NEW_*`, when `type` is
    /// `PERF_BR_EXTEND_ABI`.
    pub const NEW_TYPE_SHIFT: u32 = 26;
    /// `priv` (3 bits): a `PERF_BR_PRIV_*`, written with
    /// `PERF_SAMPLE_BRANCH_PRIV_SAVE`.
    pub const PRIV_SHIFT: u32 = 30;
    /// `PERF_BR_PRIV_USER`: the branch's target is user code.
    pub const PRIV_USER: u64 = 1;
}

/// `PERF_BR_*`: the branch types of [`branch_flags::TYPE_SHIFT`].
pub mod branch_type {
    /// `PERF_BR_UNKNOWN`.
    pub const UNKNOWN: u64 = 0;
    /// `PERF_BR_COND`: a conditional branch.
    pub const COND: u64 = 1;
    /// `PERF_BR_UNCOND`: an unconditional direct branch.
    pub const UNCOND: u64 = 2;
    /// `PERF_BR_IND`: an indirect branch.
    pub const IND: u64 = 3;
    /// `PERF_BR_CALL`: a direct call.
    pub const CALL: u64 = 4;
    /// `PERF_BR_IND_CALL`: an indirect call.
    pub const IND_CALL: u64 = 5;
    /// `PERF_BR_RET`: a function return.
    pub const RET: u64 = 6;
}

/// x86-64 register numbering for `sample_regs_user` / `sample_regs_intr`
/// (`arch/x86/include/uapi/asm/perf_regs.h`).
pub mod x86_regs {
    /// `PERF_REG_X86_DS`.
    pub const DS: u32 = 12;
    /// `PERF_REG_X86_ES`.
    pub const ES: u32 = 13;
    /// `PERF_REG_X86_FS`.
    pub const FS: u32 = 14;
    /// `PERF_REG_X86_GS`.
    pub const GS: u32 = 15;
    /// `PERF_REG_X86_64_MAX`: one past R15.
    pub const X86_64_MAX: u32 = 24;
    /// `PERF_REG_X86_XMM0`: first XMM register (each takes two bits).
    pub const XMM0: u32 = 32;
    /// Segment registers the kernel cannot sample on x86-64 (`REG_NOSUPPORT`).
    pub const NOT_SUPPORTED: u64 = (1 << DS) | (1 << ES) | (1 << FS) | (1 << GS);
    /// `PERF_REG_X86_RESERVED`: bits between the last GPR and XMM0.
    pub const RESERVED: u64 = ((1 << XMM0) - 1) & !((1 << X86_64_MAX) - 1);
    /// The extended (XMM) registers: a PMU needs the extended-regs capability.
    pub const EXTENDED_MASK: u64 = !((1u64 << XMM0) - 1);
}

/// `PERF_SAMPLE_REGS_ABI_*`: the ABI word in front of sampled registers.
pub mod regs_abi {
    /// `PERF_SAMPLE_REGS_ABI_NONE`: no registers follow.
    pub const NONE: u64 = 0;
    /// `PERF_SAMPLE_REGS_ABI_32`.
    pub const ABI_32: u64 = 1;
    /// `PERF_SAMPLE_REGS_ABI_64`.
    pub const ABI_64: u64 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covers(names: &[(&str, u64)], known: u64) {
        let mut all = 0;
        for (name, bit) in names {
            assert_eq!(bit.count_ones(), 1, "{name}");
            assert_eq!(all & bit, 0, "{name} listed twice");
            all |= bit;
        }
        assert_eq!(all, known);
    }

    #[test]
    fn name_tables_cover_every_defined_bit_once() {
        covers(sample_type::NAMES, sample_type::KNOWN);
        covers(read_format::NAMES, read_format::KNOWN);
        covers(branch_sample_type::NAMES, branch_sample_type::MAX - 1);
        covers(
            crate::abi::attr_flags::NAMES,
            crate::abi::attr_flags::KNOWN & !crate::abi::attr_flags::PRECISE_IP_MASK,
        );
    }
}
