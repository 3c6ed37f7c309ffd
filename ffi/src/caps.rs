// SPDX-License-Identifier: MIT OR Apache-2.0
//! `PERFAUX_CAP_*`: PMU capability bits for `perfaux_event_check`.
//!
//! The values are perfaux's own (Linux's internal `PERF_PMU_CAP_*` numbers
//! are not ABI and changed between releases); a test checks them against
//! [`perfaux::PmuCaps`].

/// The PMU has an AUX area (Linux: it implements `setup_aux`).
pub const PERFAUX_CAP_AUX: u32 = 1 << 0;
/// The PMU implements `snapshot_aux`: it can lead samplers with `aux_sample_size`.
pub const PERFAUX_CAP_SNAPSHOT_AUX: u32 = 1 << 1;
/// The AUX trace can be paused and resumed (`PERF_PMU_CAP_AUX_PAUSE`).
pub const PERFAUX_CAP_AUX_PAUSE: u32 = 1 << 2;
/// The PMU's events may set `aux_output` (`PERF_PMU_CAP_AUX_OUTPUT`).
pub const PERFAUX_CAP_AUX_OUTPUT: u32 = 1 << 3;
/// An instruction tracer (`PERF_PMU_CAP_ITRACE`).
pub const PERFAUX_CAP_ITRACE: u32 = 1 << 4;
/// One event per context at a time (`PERF_PMU_CAP_EXCLUSIVE`).
pub const PERFAUX_CAP_EXCLUSIVE: u32 = 1 << 5;
/// The PMU never runs in NMI context (`PERF_PMU_CAP_NO_NMI`); software events have it.
pub const PERFAUX_CAP_NO_NMI: u32 = 1 << 6;
/// The PMU cannot sample (`PERF_PMU_CAP_NO_INTERRUPT`).
pub const PERFAUX_CAP_NO_INTERRUPT: u32 = 1 << 7;
/// The PMU samples the extended (XMM) registers (`PERF_PMU_CAP_EXTENDED_REGS`).
pub const PERFAUX_CAP_EXTENDED_REGS: u32 = 1 << 8;
/// The PMU cannot honour `exclude_*` flags (`PERF_PMU_CAP_NO_EXCLUDE`).
pub const PERFAUX_CAP_NO_EXCLUDE: u32 = 1 << 9;
/// The AUX area must be one contiguous block (`PERF_PMU_CAP_AUX_NO_SG`).
pub const PERFAUX_CAP_AUX_NO_SG: u32 = 1 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use perfaux::PmuCaps;

    #[test]
    fn cap_bits_match_the_core() {
        let pairs = [
            (PERFAUX_CAP_AUX, PmuCaps::AUX),
            (PERFAUX_CAP_SNAPSHOT_AUX, PmuCaps::SNAPSHOT_AUX),
            (PERFAUX_CAP_AUX_PAUSE, PmuCaps::AUX_PAUSE),
            (PERFAUX_CAP_AUX_OUTPUT, PmuCaps::AUX_OUTPUT),
            (PERFAUX_CAP_ITRACE, PmuCaps::ITRACE),
            (PERFAUX_CAP_EXCLUSIVE, PmuCaps::EXCLUSIVE),
            (PERFAUX_CAP_NO_NMI, PmuCaps::NO_NMI),
            (PERFAUX_CAP_NO_INTERRUPT, PmuCaps::NO_INTERRUPT),
            (PERFAUX_CAP_EXTENDED_REGS, PmuCaps::EXTENDED_REGS),
            (PERFAUX_CAP_NO_EXCLUDE, PmuCaps::NO_EXCLUDE),
            (PERFAUX_CAP_AUX_NO_SG, PmuCaps::AUX_NO_SG),
        ];
        let mut all = 0;
        for (c, rust) in pairs {
            assert_eq!(c, rust.bits());
            all |= c;
        }
        assert_eq!(all, PmuCaps::ALL.bits(), "every capability is exported");
    }
}
