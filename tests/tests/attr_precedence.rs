// SPDX-License-Identifier: MIT OR Apache-2.0
//! When several rules fail at once, the one Linux checks first decides the
//! errno (`perf_copy_attr`, then `sys_perf_event_open`'s order). Each case breaks two or more rules and names the
//! rule that must win; [`Rule`] makes even EINVAL-vs-EINVAL order visible.

use perfaux::PmuCaps;
use perfaux::abi::{
    PerfEventAttr, attr_flags as f, aux_action, branch_sample_type as br, sample_type as st,
};
use perfaux::attr::{CopyPolicy, GroupLeader, Rule, check_event, copy_attr};

const SW: PmuCaps = PmuCaps::NO_NMI;
const PT: PmuCaps = PmuCaps::AUX
    .union(PmuCaps::SNAPSHOT_AUX)
    .union(PmuCaps::ITRACE)
    .union(PmuCaps::AUX_PAUSE);

/// perf_event_open's order: copy-in and post-copy checks, then the open checks.
fn open(
    attr: PerfEventAttr,
    caps: PmuCaps,
    leader: Option<(PerfEventAttr, PmuCaps)>,
) -> Result<(), Rule> {
    let mut user = attr.to_bytes();
    let attr = copy_attr(&mut user, &CopyPolicy::default())?;
    let leader = leader.as_ref().map(|(a, c)| GroupLeader::new(a, *c));
    check_event(&attr, caps, leader)
}

fn attr(edit: impl FnOnce(&mut PerfEventAttr)) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    edit(&mut a);
    a
}

#[test]
fn the_first_failing_rule_wins() {
    let plain_leader = Some((attr(|_| {}), SW));
    let pt_leader = Some((attr(|_| {}), PT));
    let cases: Vec<(&str, Result<(), Rule>, Rule)> = vec![
        (
            "size beats reserved bits",
            open(
                attr(|a| {
                    a.size = 63;
                    a.flags = 1 << 40;
                }),
                SW,
                None,
            ),
            Rule::SizeOutOfRange,
        ),
        (
            "reserved bits beat sample_type",
            open(
                attr(|a| {
                    a.reserved_2 = 1;
                    a.sample_type = 1 << 30;
                }),
                SW,
                None,
            ),
            Rule::ReservedBits,
        ),
        (
            "sample_type beats read_format",
            open(
                attr(|a| {
                    a.sample_type = 1 << 30;
                    a.read_format = 1 << 9;
                }),
                SW,
                None,
            ),
            Rule::UnknownSampleType,
        ),
        (
            "branch beats regs_user",
            open(
                attr(|a| {
                    a.sample_type = st::BRANCH_STACK | st::REGS_USER;
                    a.branch_sample_type = br::USER;
                }),
                SW,
                None,
            ),
            Rule::NoBranchType,
        ),
        (
            "stack_user beats weight",
            open(
                attr(|a| {
                    a.sample_type = st::STACK_USER | st::WEIGHT_TYPE;
                    a.sample_stack_user = 9;
                }),
                SW,
                None,
            ),
            Rule::StackUserSize,
        ),
        (
            "a later check beats the deferred regs_intr error",
            open(
                attr(|a| {
                    a.sample_type = st::REGS_INTR;
                    a.flags = f::SIGTRAP;
                }),
                SW,
                None,
            ),
            Rule::SigtrapWithoutRemoveOnExec,
        ),
        (
            "the deferred regs_intr error when nothing later fails",
            open(attr(|a| a.sample_type = st::REGS_INTR), SW, None),
            Rule::RegsIntrMask,
        ),
        (
            "copy-time rules beat open-time rules",
            open(
                attr(|a| {
                    a.flags = f::INHERIT_THREAD | f::AUX_OUTPUT;
                    a.aux_sample_size = 8;
                }),
                SW,
                None,
            ),
            Rule::InheritThreadWithoutInherit,
        ),
        (
            "extended regs beat aux_output",
            open(
                attr(|a| {
                    a.sample_regs_intr = 1 << 40;
                    a.flags = f::AUX_OUTPUT;
                }),
                SW,
                None,
            ),
            Rule::ExtendedRegs,
        ),
        (
            "missing AUX-output capability beats aux_output with aux_sample_size",
            open(
                attr(|a| {
                    a.flags = f::AUX_OUTPUT;
                    a.aux_sample_size = 8;
                }),
                SW,
                pt_leader,
            ),
            Rule::AuxOutputUnsupported,
        ),
        (
            "aux_output capability beats aux_pause with aux_resume",
            open(
                attr(|a| {
                    a.flags = f::AUX_OUTPUT;
                    a.aux_action = aux_action::PAUSE | aux_action::RESUME;
                }),
                SW,
                None,
            ),
            Rule::AuxOutputUnsupported,
        ),
        (
            "aux_pause with aux_resume beats aux_start_paused",
            open(
                attr(|a| {
                    a.aux_action = aux_action::PAUSE | aux_action::RESUME | aux_action::START_PAUSED
                }),
                SW,
                None,
            ),
            Rule::AuxPauseAndResume,
        ),
        (
            "no interrupt beats the clock",
            open(
                attr(|a| {
                    a.sample_period = 1;
                    a.flags = f::USE_CLOCKID;
                    a.clockid = 42;
                }),
                PmuCaps::NO_INTERRUPT,
                None,
            ),
            Rule::SamplingUnsupported,
        ),
        (
            "the clock beats the group rules",
            open(
                attr(|a| {
                    a.flags = f::USE_CLOCKID | f::PINNED;
                    a.clockid = 2;
                }),
                SW,
                plain_leader,
            ),
            Rule::UnknownClock,
        ),
        (
            "NMI safety of the clock beats the group rules",
            open(
                attr(|a| {
                    a.flags = f::USE_CLOCKID | f::PINNED;
                    a.clockid = 0;
                }),
                PmuCaps::NONE,
                plain_leader,
            ),
            Rule::ClockNotNmiSafe,
        ),
        (
            "the group clock beats pinned",
            open(
                attr(|a| {
                    a.flags = f::USE_CLOCKID | f::PINNED;
                    a.clockid = 1;
                }),
                SW,
                plain_leader,
            ),
            Rule::GroupClockMismatch,
        ),
        (
            "pinned sibling beats the AUX leader link",
            open(
                attr(|a| {
                    a.flags = f::PINNED;
                    a.aux_sample_size = 8;
                }),
                SW,
                plain_leader,
            ),
            Rule::SiblingPinnedOrExclusive,
        ),
        (
            "aux_output with aux_sample_size beats the leader match",
            open(
                attr(|a| {
                    a.flags = f::AUX_OUTPUT;
                    a.aux_sample_size = 8;
                }),
                PmuCaps::AUX_OUTPUT,
                plain_leader,
            ),
            Rule::AuxOutputAndSampleSize,
        ),
        (
            "aux_pause capability beats snapshot_aux",
            open(
                attr(|a| {
                    a.aux_action = aux_action::PAUSE;
                    a.aux_sample_size = 8;
                }),
                SW,
                Some((attr(|_| {}), PmuCaps::AUX | PmuCaps::ITRACE)),
            ),
            Rule::AuxLeaderCannotPause,
        ),
        (
            "no leader at all",
            open(attr(|a| a.aux_sample_size = 8), SW, None),
            Rule::AuxEventWithoutLeader,
        ),
    ];
    for (name, got, want) in cases {
        assert_eq!(got, Err(want), "{name}");
    }
}

#[test]
fn a_snapshot_leader_accepts_every_aux_sample_size() {
    for size in [1, 7, 8, 4096, 65535, 65536, u32::MAX] {
        let sampler = attr(|a| {
            a.sample_type = st::AUX;
            a.aux_sample_size = size;
        });
        assert_eq!(
            open(sampler, SW, Some((attr(|_| {}), PT))),
            Ok(()),
            "aux_sample_size {size}"
        );
    }
}
