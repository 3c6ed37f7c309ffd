// SPDX-License-Identifier: MIT OR Apache-2.0
//! PMU capabilities: what a PMU can do, as the open-time rules need to know.
//!
//! Linux keeps these as `PERF_PMU_CAP_*` bits plus the presence of callbacks
//! (`setup_aux`, `snapshot_aux`, `aux_output_match`). The kernel's bit values
//! are internal and were renumbered between releases (6.13 added `PERF_PMU_CAP_AUX_PAUSE`),
//! so perfaux
//! has its own, stable numbering; the C ABI exports it as `PERFAUX_CAP_*`.

/// A set of PMU capabilities.
///
/// ```
/// use perfaux::PmuCaps;
/// let pt = PmuCaps::AUX | PmuCaps::SNAPSHOT_AUX | PmuCaps::ITRACE | PmuCaps::EXCLUSIVE;
/// assert!(pt.contains(PmuCaps::SNAPSHOT_AUX));
/// assert!(!pt.contains(PmuCaps::AUX_PAUSE));
/// assert_eq!(PmuCaps::from_bits(1 << 31), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PmuCaps(u32);

impl PmuCaps {
    /// No capability (a plain counting/sampling PMU).
    pub const NONE: PmuCaps = PmuCaps(0);
    /// The PMU has an AUX area (Linux: implements `setup_aux`; `has_aux()`).
    pub const AUX: PmuCaps = PmuCaps(1 << 0);
    /// The PMU implements `snapshot_aux`: it can be the AUX leader of samplers
    /// with `aux_sample_size`.
    pub const SNAPSHOT_AUX: PmuCaps = PmuCaps(1 << 1);
    /// `PERF_PMU_CAP_AUX_PAUSE`: the AUX trace can be paused and resumed.
    pub const AUX_PAUSE: PmuCaps = PmuCaps(1 << 2);
    /// `PERF_PMU_CAP_AUX_OUTPUT`: the PMU's events may set `aux_output`
    /// (and it implements `aux_output_match`, accepting ITRACE leaders).
    pub const AUX_OUTPUT: PmuCaps = PmuCaps(1 << 3);
    /// `PERF_PMU_CAP_ITRACE`: an instruction tracer (Intel PT-like).
    pub const ITRACE: PmuCaps = PmuCaps(1 << 4);
    /// `PERF_PMU_CAP_EXCLUSIVE`: one event per context at a time.
    pub const EXCLUSIVE: PmuCaps = PmuCaps(1 << 5);
    /// `PERF_PMU_CAP_NO_NMI`: the PMU never runs in NMI context, so any clock is usable.
    pub const NO_NMI: PmuCaps = PmuCaps(1 << 6);
    /// `PERF_PMU_CAP_NO_INTERRUPT`: the PMU cannot sample.
    pub const NO_INTERRUPT: PmuCaps = PmuCaps(1 << 7);
    /// `PERF_PMU_CAP_EXTENDED_REGS`: the PMU can sample the extended (XMM) registers.
    pub const EXTENDED_REGS: PmuCaps = PmuCaps(1 << 8);
    /// `PERF_PMU_CAP_NO_EXCLUDE`: the PMU cannot honour any `exclude_*` flag.
    pub const NO_EXCLUDE: PmuCaps = PmuCaps(1 << 9);
    /// `PERF_PMU_CAP_AUX_NO_SG`: the AUX area must be one contiguous block.
    pub const AUX_NO_SG: PmuCaps = PmuCaps(1 << 10);

    /// Every capability perfaux defines.
    pub const ALL: PmuCaps = PmuCaps((1 << 11) - 1);

    /// Every capability with a short name (as the `perfaux` tool spells them).
    pub const NAMES: &[(&'static str, PmuCaps)] = &[
        ("aux", Self::AUX),
        ("snapshot-aux", Self::SNAPSHOT_AUX),
        ("aux-pause", Self::AUX_PAUSE),
        ("aux-output", Self::AUX_OUTPUT),
        ("itrace", Self::ITRACE),
        ("exclusive", Self::EXCLUSIVE),
        ("no-nmi", Self::NO_NMI),
        ("no-interrupt", Self::NO_INTERRUPT),
        ("extended-regs", Self::EXTENDED_REGS),
        ("no-exclude", Self::NO_EXCLUDE),
        ("aux-no-sg", Self::AUX_NO_SG),
    ];

    /// The set from raw bits; `None` if a bit is not defined.
    pub const fn from_bits(bits: u32) -> Option<PmuCaps> {
        if bits & !Self::ALL.0 != 0 {
            None
        } else {
            Some(PmuCaps(bits))
        }
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every capability of `other` is in `self`.
    pub const fn contains(self, other: PmuCaps) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of two sets.
    pub const fn union(self, other: PmuCaps) -> PmuCaps {
        PmuCaps(self.0 | other.0)
    }
}

impl core::ops::BitOr for PmuCaps {
    type Output = PmuCaps;
    fn bitor(self, rhs: PmuCaps) -> PmuCaps {
        self.union(rhs)
    }
}

impl core::ops::BitOrAssign for PmuCaps {
    fn bitor_assign(&mut self, rhs: PmuCaps) {
        *self = self.union(rhs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_every_capability_once() {
        let mut all = PmuCaps::NONE;
        for (name, cap) in PmuCaps::NAMES {
            assert_eq!(cap.bits().count_ones(), 1, "{name}");
            assert!(!all.contains(*cap), "{name} listed twice");
            all |= *cap;
        }
        assert_eq!(all, PmuCaps::ALL);
        assert_eq!(PmuCaps::from_bits(PmuCaps::ALL.bits()), Some(PmuCaps::ALL));
    }
}
