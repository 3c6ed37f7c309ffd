// SPDX-License-Identifier: MIT OR Apache-2.0
//! A software last-branch record: the taken branches of a flow, filtered as
//! an event's `branch_sample_type` asks, kept as Intel's LBR MSRs keep
//! them (a ring of the newest [`LBR_DEPTH`]), and read newest first into a
//! sample's `PERF_SAMPLE_BRANCH_STACK` (`arch/x86/events/intel/lbr.c`:
//! `intel_pmu_lbr_read_64`, the filter of `intel_pmu_setup_sw_lbr_filter`
//! and `intel_pmu_lbr_filter`).
//!
//! It records user branches only, the ones whose source and target are
//! both user code (what `-j any,u` keeps of a hardware LBR: the privilege
//! of an entry is its target's, `branch_type()` in
//! `arch/x86/events/utils.c`); the transfers into and out of the kernel
//! (system calls, interrupts, their returns) are not branches a flow sees.
//! The prediction flags are left 0 (a flow knows no predictor; perf prints
//! `-`, where a hardware entry says `P` or `M`), as are `cycles`, `in_tx`
//! and `abort`.
//!
//! An [`Lbr`] is plain state of the context that owns it, as the MSRs are
//! of their CPU: the code that feeds it takes the samples that read it.
//!
//! ```
//! use perfaux::abi::branch_sample_type as br;
//! use perfaux::lbr::{BranchFilter, BranchKind, Lbr};
//!
//! let filter = BranchFilter::new(br::ANY_CALL | br::USER).unwrap();
//! let mut lbr = Lbr::new(filter);
//! lbr.record(0x1000, 0x2000, BranchKind::Call);
//! lbr.record(0x2010, 0x1005, BranchKind::Return); // not a call: filtered
//! lbr.record(0x1008, 0x3000, BranchKind::IndirectCall);
//! let mut stack = [[0; 3]; 32];
//! let entries = lbr.read(&mut stack);
//! assert_eq!(entries.len(), 2);
//! assert_eq!((entries[0][0], entries[0][1]), (0x1008, 0x3000)); // newest first
//! ```

use crate::abi::{branch_flags, branch_sample_type as br, branch_type};

/// Entries an [`Lbr`] keeps: 32, the depth of Intel's LBR since Skylake
/// (`x86_pmu.lbr_nr`).
pub const LBR_DEPTH: usize = 32;

// The ring's index arithmetic wraps (`Lbr::slot`): exact only for a power
// of two.
const _: () = assert!(LBR_DEPTH.is_power_of_two());

/// What a taken branch instruction is (`X86_BR_*` of the branches a user
/// program makes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BranchKind {
    /// A taken conditional branch (`Jcc`, `LOOP`, `JrCXZ`): `X86_BR_JCC`.
    Conditional,
    /// A direct unconditional jump: `X86_BR_JMP`.
    Jump,
    /// An indirect jump: `X86_BR_IND_JMP`.
    IndirectJump,
    /// A direct call: `X86_BR_CALL`.
    Call,
    /// An indirect call: `X86_BR_IND_CALL`.
    IndirectCall,
    /// A return: `X86_BR_RET`.
    Return,
}

impl BranchKind {
    /// The `PERF_BR_*` type a sample's entry carries for it
    /// (`common_branch_type()` in `arch/x86/events/utils.c`).
    pub const fn perf_type(self) -> u64 {
        match self {
            BranchKind::Conditional => branch_type::COND,
            BranchKind::Jump => branch_type::UNCOND,
            BranchKind::IndirectJump => branch_type::IND,
            BranchKind::Call => branch_type::CALL,
            BranchKind::IndirectCall => branch_type::IND_CALL,
            BranchKind::Return => branch_type::RET,
        }
    }

    /// This kind's bit in [`BranchFilter`]'s kind mask.
    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A `branch_sample_type` an [`Lbr`] cannot serve: the bit it cannot
/// serve and why, for the caller to refuse the event with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unserved {
    /// The `PERF_SAMPLE_BRANCH_*` bit.
    pub bit: u64,
    /// Why, in a few words.
    pub reason: &'static str,
}

/// The part of `branch_sample_type` an [`Lbr`] applies when it records
/// and when it writes an entry's flags.
///
/// # Invariants
/// `kinds` has at least one bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BranchFilter {
    /// [`BranchKind::bit`]s of the kinds recorded.
    kinds: u8,
    /// The flags word's bits every entry carries besides its type.
    save_type: bool,
    save_priv: bool,
    no_flags: bool,
}

impl BranchFilter {
    /// The filter of `branch_sample_type` (`PERF_SAMPLE_BRANCH_*`), as the
    /// kernel holds it after `perf_copy_attr` (a privilege level set).
    ///
    /// # Errors
    /// The first bit that asks for what a flow of user branches cannot
    /// give: kernel or hypervisor branches, transactions, the call-stack
    /// mode, per-entry counters, or no branch kind at all.
    pub fn new(branch_sample_type: u64) -> Result<BranchFilter, Unserved> {
        const REFUSED: [(u64, &str); 6] = [
            (
                br::KERNEL,
                "kernel branches are not recorded (user only: u)",
            ),
            (
                br::HV,
                "hypervisor branches are not recorded (user only: u)",
            ),
            (br::ABORT_TX, "no transactions are recorded"),
            (br::IN_TX, "no transactions are recorded"),
            (br::CALL_STACK, "the call-stack mode is not modelled"),
            (br::COUNTERS, "no per-branch event counters are kept"),
        ];
        if let Some(&(bit, reason)) = REFUSED
            .iter()
            .find(|(bit, _)| branch_sample_type & bit != 0)
        {
            return Err(Unserved { bit, reason });
        }
        if branch_sample_type & !(br::MAX - 1) != 0 {
            return Err(Unserved {
                bit: branch_sample_type & !(br::MAX - 1),
                reason: "not a branch_sample_type bit Linux defines",
            });
        }
        let has = |bit: u64| branch_sample_type & bit != 0;
        let kinds = if has(br::ANY) {
            0x3f
        } else {
            let mut k = 0;
            if has(br::ANY_CALL) {
                k |= BranchKind::Call.bit() | BranchKind::IndirectCall.bit();
            }
            if has(br::CALL) {
                k |= BranchKind::Call.bit();
            }
            if has(br::IND_CALL) {
                k |= BranchKind::IndirectCall.bit();
            }
            if has(br::ANY_RETURN) {
                k |= BranchKind::Return.bit();
            }
            if has(br::COND) {
                k |= BranchKind::Conditional.bit();
            }
            if has(br::IND_JUMP) {
                k |= BranchKind::IndirectJump.bit();
            }
            k
        };
        if kinds == 0 {
            return Err(Unserved {
                bit: 0,
                reason: "no branch kind asked for (any, any_call, any_ret, ind_call, call, cond, ind_jmp)",
            });
        }
        // INVARIANT: `kinds` is not 0, checked above.
        Ok(BranchFilter {
            kinds,
            save_type: has(br::TYPE_SAVE),
            save_priv: has(br::PRIV_SAVE),
            no_flags: has(br::NO_FLAGS),
        })
    }

    /// Whether a branch of `kind` is recorded.
    pub const fn keeps(&self, kind: BranchKind) -> bool {
        self.kinds & kind.bit() != 0
    }

    /// The flags word of an entry for a branch of `kind`.
    pub const fn flags(&self, kind: BranchKind) -> u64 {
        if self.no_flags {
            return 0;
        }
        let mut flags = 0;
        if self.save_type {
            flags |= kind.perf_type() << branch_flags::TYPE_SHIFT;
        }
        if self.save_priv {
            flags |= branch_flags::PRIV_USER << branch_flags::PRIV_SHIFT;
        }
        flags
    }
}

/// Whether `ip` is a kernel address (`kernel_ip()` on x86-64: the upper
/// half of the address space).
const fn kernel_ip(ip: u64) -> bool {
    ip >> 63 != 0
}

/// The newest [`LBR_DEPTH`] branches a [`BranchFilter`] keeps, as the LBR
/// MSRs hold them: a ring whose top of stack (`TOS`) is the newest.
///
/// # Invariants
/// `len <= LBR_DEPTH`, and `top < LBR_DEPTH`; the entries at `top`,
/// `top - 1`, ... (modulo [`LBR_DEPTH`]), `len` of them, are the newest
/// branches recorded, newest first.
#[derive(Clone, Debug)]
pub struct Lbr {
    filter: BranchFilter,
    entries: [[u64; 3]; LBR_DEPTH],
    top: usize,
    len: usize,
    /// Branches recorded since the start (wrapping).
    recorded: u64,
    /// The flags word of each [`BranchKind`] (by its discriminant),
    /// worked out once, as the PMU programs `LBR_SELECT` once.
    flags: [u64; 6],
}

impl Lbr {
    /// An empty record that keeps what `filter` keeps.
    pub const fn new(filter: BranchFilter) -> Lbr {
        // In the kinds' declaration order, their discriminants.
        let flags = [
            filter.flags(BranchKind::Conditional),
            filter.flags(BranchKind::Jump),
            filter.flags(BranchKind::IndirectJump),
            filter.flags(BranchKind::Call),
            filter.flags(BranchKind::IndirectCall),
            filter.flags(BranchKind::Return),
        ];
        // INVARIANT: empty.
        Lbr {
            filter,
            entries: [[0; 3]; LBR_DEPTH],
            top: LBR_DEPTH - 1,
            len: 0,
            recorded: 0,
            flags,
        }
    }

    /// The filter.
    pub const fn filter(&self) -> &BranchFilter {
        &self.filter
    }

    /// The entry of a branch the filter keeps, `None` for one it drops.
    #[inline(always)]
    fn entry(&self, from: u64, to: u64, kind: BranchKind) -> Option<[u64; 3]> {
        let user = from != 0 && to != 0 && !kernel_ip(from | to);
        let flags = self.flags.get(kind as usize).copied().unwrap_or(0);
        (user && self.filter.keeps(kind)).then_some([from, to, flags])
    }

    /// A branch of `kind` from `from` to `to` was taken: recorded as the
    /// newest if the filter keeps it. Returns whether it was.
    // Always inlined: a flow calls it for every taken branch.
    #[inline(always)]
    pub fn record(&mut self, from: u64, to: u64, kind: BranchKind) -> bool {
        let Some(entry) = self.entry(from, to, kind) else {
            return false;
        };
        // INVARIANT: `top` stays below LBR_DEPTH and the new newest entry
        // is at it; `len` grows to at most LBR_DEPTH.
        self.top = self.slot(-1);
        self.entries[self.top] = entry;
        self.len = self.len.saturating_add(1).min(LBR_DEPTH);
        self.recorded = self.recorded.wrapping_add(1);
        true
    }

    /// A branch learnt late: it was taken before the `newer` newest
    /// entries recorded since (a signal's interrupted block, whose exit is
    /// known only when the handler returns). Recorded in its place if the
    /// filter keeps it and it is still among the newest [`LBR_DEPTH`];
    /// returns whether it was.
    pub fn record_before(&mut self, newer: usize, from: u64, to: u64, kind: BranchKind) -> bool {
        if newer >= LBR_DEPTH || newer > self.len {
            return false;
        }
        let Some(entry) = self.entry(from, to, kind) else {
            return false;
        };
        // The newer entries move up one place (the oldest falls off when
        // full), and the late one takes the place below them.
        self.top = self.slot(-1);
        for i in 0..newer as isize {
            self.entries[self.slot(i)] = self.entries[self.slot(i + 1)];
        }
        self.entries[self.slot(newer as isize)] = entry;
        // INVARIANT: one more entry, at most LBR_DEPTH; `top` in range.
        self.len = self.len.saturating_add(1).min(LBR_DEPTH);
        self.recorded = self.recorded.wrapping_add(1);
        true
    }

    /// The index of the entry `back` places below the top (the top's
    /// next for -1), in the ring: the arithmetic wraps and the depth, a
    /// power of two, divides 2^64, so the remainder is the ring's index
    /// and below [`LBR_DEPTH`], no bounds check and no overflow to fail.
    #[inline(always)]
    const fn slot(&self, back: isize) -> usize {
        self.top.wrapping_sub(back as usize) % LBR_DEPTH
    }

    /// Branches recorded since the start (wrapping): the difference of two
    /// readings is the `newer` of [`record_before`](Self::record_before).
    pub const fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Forgets every entry (`intel_pmu_lbr_reset`).
    pub fn reset(&mut self) {
        // INVARIANT: empty.
        self.len = 0;
    }

    /// The entries, newest first, copied into `stack`: what a sample's
    /// `PERF_SAMPLE_BRANCH_STACK` carries.
    pub fn read<'s>(&self, stack: &'s mut [[u64; 3]; LBR_DEPTH]) -> &'s [[u64; 3]] {
        for (i, entry) in stack.iter_mut().take(self.len).enumerate() {
            *entry = self.entries[self.slot(i as isize)];
        }
        &stack[..self.len.min(LBR_DEPTH)]
    }

    /// The `hw_idx` of a sample (`PERF_SAMPLE_BRANCH_HW_INDEX`): the
    /// ring's top of stack, as `intel_pmu_lbr_read_64` reports `TOS`.
    pub const fn hw_index(&self) -> u64 {
        self.top as u64
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    const ALL: [BranchKind; 6] = [
        BranchKind::Conditional,
        BranchKind::Jump,
        BranchKind::IndirectJump,
        BranchKind::Call,
        BranchKind::IndirectCall,
        BranchKind::Return,
    ];

    fn any() -> Lbr {
        Lbr::new(BranchFilter::new(br::ANY | br::USER).unwrap())
    }

    fn stack(lbr: &Lbr) -> Vec<[u64; 3]> {
        let mut s = [[0; 3]; LBR_DEPTH];
        lbr.read(&mut s).to_vec()
    }

    #[test]
    fn keeps_the_newest_thirty_two_newest_first() {
        let mut lbr = any();
        assert!(stack(&lbr).is_empty());
        for i in 1..=100u64 {
            assert!(lbr.record(i, i + 0x1000, BranchKind::Jump));
            let s = stack(&lbr);
            let expect: Vec<u64> = (1..=i).rev().take(LBR_DEPTH).collect();
            assert_eq!(s.iter().map(|e| e[0]).collect::<Vec<_>>(), expect);
        }
        lbr.reset();
        assert!(stack(&lbr).is_empty());
    }

    #[test]
    fn kernel_and_unknown_ends_are_not_user_branches() {
        let mut lbr = any();
        assert!(!lbr.record(0xffff_ffff_8100_0000, 0x1000, BranchKind::Return));
        assert!(!lbr.record(0x1000, 0xffff_ffff_8100_0000, BranchKind::Call));
        assert!(!lbr.record(0, 0x1000, BranchKind::Jump));
        assert!(!lbr.record(0x1000, 0, BranchKind::Jump));
        assert!(stack(&lbr).is_empty());
    }

    #[test]
    fn each_filter_word_keeps_the_kinds_the_kernel_keeps() {
        let cases: [(u64, &[BranchKind]); 7] = [
            (br::ANY, &ALL),
            (br::ANY_CALL, &[BranchKind::Call, BranchKind::IndirectCall]),
            (br::CALL, &[BranchKind::Call]),
            (br::IND_CALL, &[BranchKind::IndirectCall]),
            (br::ANY_RETURN, &[BranchKind::Return]),
            (br::COND, &[BranchKind::Conditional]),
            (br::IND_JUMP, &[BranchKind::IndirectJump]),
        ];
        for (bits, kept) in cases {
            let f = BranchFilter::new(bits | br::USER).unwrap();
            for kind in ALL {
                assert_eq!(f.keeps(kind), kept.contains(&kind), "{bits:#x} {kind:?}");
            }
        }
        let both = BranchFilter::new(br::COND | br::ANY_RETURN | br::USER).unwrap();
        assert!(both.keeps(BranchKind::Conditional) && both.keeps(BranchKind::Return));
        assert!(!both.keeps(BranchKind::Jump));
    }

    #[test]
    fn what_a_user_flow_cannot_give_is_refused_by_name() {
        for bit in [
            br::KERNEL,
            br::HV,
            br::ABORT_TX,
            br::IN_TX,
            br::CALL_STACK,
            br::COUNTERS,
        ] {
            assert_eq!(BranchFilter::new(br::ANY | bit).unwrap_err().bit, bit);
        }
        assert_eq!(BranchFilter::new(br::USER).unwrap_err().bit, 0);
        assert_eq!(
            BranchFilter::new(br::ANY | br::MAX).unwrap_err().bit,
            br::MAX
        );
        // Served: no transactions happen, no cycles are counted.
        assert!(BranchFilter::new(br::ANY | br::NO_TX | br::NO_CYCLES | br::HW_INDEX).is_ok());
    }

    #[test]
    fn flags_carry_the_type_and_privilege_when_asked() {
        let plain = BranchFilter::new(br::ANY).unwrap();
        assert_eq!(plain.flags(BranchKind::Return), 0);
        let typed = BranchFilter::new(br::ANY | br::TYPE_SAVE | br::PRIV_SAVE).unwrap();
        for kind in ALL {
            let f = typed.flags(kind);
            assert_eq!((f >> branch_flags::TYPE_SHIFT) & 0xf, kind.perf_type());
            assert_eq!(
                (f >> branch_flags::PRIV_SHIFT) & 0x7,
                branch_flags::PRIV_USER
            );
            assert_eq!(f & 0xf_ffff, 0, "no prediction, transaction or cycles");
        }
        let bare = BranchFilter::new(br::ANY | br::TYPE_SAVE | br::NO_FLAGS).unwrap();
        assert_eq!(bare.flags(BranchKind::Call), 0);
    }

    /// A model: every kept branch in a list, with late ones inserted.
    #[test]
    fn a_late_branch_takes_its_place_among_the_newest() {
        let mut lbr = any();
        let mut model: Vec<u64> = Vec::new(); // oldest first
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for from in 1..2000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if rng % 4 == 0 {
                let newer = (rng >> 8) as usize % 40;
                let kept = lbr.record_before(newer, from, 0x10, BranchKind::Jump);
                let fits = newer < LBR_DEPTH && newer <= model.len().min(LBR_DEPTH);
                assert_eq!(kept, fits, "newer {newer}");
                if kept {
                    model.insert(model.len() - newer, from);
                }
            } else {
                lbr.record(from, 0x10, BranchKind::Jump);
                model.push(from);
            }
            let expect: Vec<u64> = model.iter().rev().take(LBR_DEPTH).copied().collect();
            let got: Vec<u64> = stack(&lbr).iter().map(|e| e[0]).collect();
            assert_eq!(got, expect);
        }
    }

    #[test]
    fn hw_index_is_the_top_of_stack() {
        let mut lbr = any();
        lbr.record(1, 2, BranchKind::Jump);
        assert_eq!(lbr.hw_index(), 0);
        for _ in 0..LBR_DEPTH {
            lbr.record(1, 2, BranchKind::Jump);
        }
        assert_eq!(lbr.hw_index(), 0);
    }
}
