// SPDX-License-Identifier: MIT OR Apache-2.0
//! Open-time rules that depend only on the attrs and the PMU capabilities
//! of an event and of its group leader (`sys_perf_event_open`, `perf_event_alloc`,
//! `perf_get_aux_event` in `kernel/events/core.c`, with 6.13's AUX pause/resume).

use super::rule::Rule;
use crate::abi::{PerfEventAttr, x86_regs};
use crate::caps::PmuCaps;

/// The group leader an event is opened under (`group_fd`, without
/// `PERF_FLAG_FD_NO_GROUP`).
#[derive(Clone, Copy, Debug)]
pub struct GroupLeader<'a> {
    /// The leader's (already validated) attr.
    pub attr: &'a PerfEventAttr,
    /// The capabilities of the leader's PMU.
    pub caps: PmuCaps,
    /// The `group_fd` event leads its group (`group_leader->group_leader ==
    /// group_leader`): a sibling cannot be named as a leader.
    pub is_leader: bool,
    /// It is bound to the new event's CPU (`group_leader->cpu ==
    /// event->cpu`; both -1 for a per-task group).
    pub same_cpu: bool,
}

impl<'a> GroupLeader<'a> {
    /// A group leader with this attr and PMU, bound to the new event's CPU:
    /// what the attr-level checks see (set [`is_leader`](Self::is_leader)
    /// and [`same_cpu`](Self::same_cpu) when the events are known).
    pub const fn new(attr: &'a PerfEventAttr, caps: PmuCaps) -> Self {
        GroupLeader {
            attr,
            caps,
            is_leader: true,
            same_cpu: true,
        }
    }
}

/// The clock an event's time fields use (`perf_event_set_clock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventClock {
    /// No `use_clockid`: the perf clock (`local_clock`).
    Perf,
    /// `CLOCK_MONOTONIC` (NMI-safe).
    Monotonic,
    /// `CLOCK_MONOTONIC_RAW` (NMI-safe).
    MonotonicRaw,
    /// `CLOCK_REALTIME`.
    Realtime,
    /// `CLOCK_BOOTTIME`.
    Boottime,
    /// `CLOCK_TAI`.
    Tai,
}

impl EventClock {
    /// The clock of an attr; [`Rule::UnknownClock`] for an unknown `clockid`
    /// under `use_clockid`.
    pub const fn of(attr: &PerfEventAttr) -> Result<EventClock, Rule> {
        if !attr.use_clockid() {
            return Ok(EventClock::Perf);
        }
        Ok(match attr.clockid {
            0 => EventClock::Realtime,
            1 => EventClock::Monotonic,
            4 => EventClock::MonotonicRaw,
            7 => EventClock::Boottime,
            11 => EventClock::Tai,
            _ => return Err(Rule::UnknownClock),
        })
    }

    /// Whether the clock can be read from NMI context.
    pub const fn nmi_safe(self) -> bool {
        matches!(
            self,
            EventClock::Perf | EventClock::Monotonic | EventClock::MonotonicRaw
        )
    }
}

/// `perf_need_aux_event` (6.13+ `has_aux_action`): the event must be linked
/// to an AUX leader (`aux_output`, `aux_sample_size`, `aux_pause`, `aux_resume`).
pub const fn needs_aux_event(attr: &PerfEventAttr) -> bool {
    attr.aux_output() || attr.aux_sample_size != 0 || attr.aux_pause() || attr.aux_resume()
}

/// The open-time checks of `perf_event_open(2)` that attrs and PMU
/// capabilities decide, in Linux 6.18's order, for an attr that passed
/// [`copy_attr`](super::copy_attr). `leader` is `None` when the event opens
/// without a group (no `group_fd`, or `PERF_FLAG_FD_NO_GROUP`).
///
/// 1. PMU init (`perf_try_init_event`): extended (XMM) registers on a PMU
///    without them → `EOPNOTSUPP`; any `exclude_*` on a `NO_EXCLUDE` PMU → `EINVAL`.
/// 2. `perf_event_alloc`: `aux_output` on a PMU without
///    AUX-output capability, or together with `aux_pause`/`aux_resume` →
///    `EOPNOTSUPP`; `aux_pause` with `aux_resume` → `EINVAL`;
///    `aux_start_paused` on a PMU without AUX pause → `EOPNOTSUPP`.
/// 3. A sampling event (`sample_period != 0`) on a `NO_INTERRUPT` PMU → `EOPNOTSUPP`.
/// 4. `use_clockid`: unknown clock, or a clock not NMI-safe on a PMU that
///    runs in NMI context → `EINVAL`.
/// 5. The group block of `sys_perf_event_open`: `group_fd` names a sibling,
///    a clock other than the leader's, a leader bound to another CPU, or a
///    sibling that is `exclusive` or `pinned` → `EINVAL`.
/// 6. `perf_get_aux_event` when [`needs_aux_event`]: no leader;
///    `aux_output` with `aux_sample_size`; `aux_output` and the leader is not
///    an AUX instruction tracer this PMU matches; `aux_pause`/`aux_resume`
///    and the leader cannot pause; `aux_sample_size` and the leader's PMU has
///    no `snapshot_aux` → `EINVAL`.
///
/// Rules that need more than attrs and capabilities (CPU, task context,
/// `inherit` of a per-task group, permissions, group read size) are the
/// caller's.
pub fn check_event(
    attr: &PerfEventAttr,
    caps: PmuCaps,
    leader: Option<GroupLeader<'_>>,
) -> Result<(), Rule> {
    check_pmu_init(attr, caps)?;
    check_alloc_aux(attr, caps)?;

    if attr.sample_period != 0 && caps.contains(PmuCaps::NO_INTERRUPT) {
        return Err(Rule::SamplingUnsupported);
    }

    let clock = EventClock::of(attr)?;
    if !clock.nmi_safe() && !caps.contains(PmuCaps::NO_NMI) {
        return Err(Rule::ClockNotNmiSafe);
    }

    if let Some(leader) = leader {
        if !leader.is_leader {
            return Err(Rule::LeaderNotGroupLeader);
        }
        // An unusable leader clock cannot equal a usable one.
        if EventClock::of(leader.attr) != Ok(clock) {
            return Err(Rule::GroupClockMismatch);
        }
        if !leader.same_cpu {
            return Err(Rule::GroupCpuMismatch);
        }
        // Only a group leader can be exclusive or pinned.
        if attr.exclusive() || attr.pinned() {
            return Err(Rule::SiblingPinnedOrExclusive);
        }
    }

    if needs_aux_event(attr) {
        check_aux_leader(attr, caps, leader)?;
    }
    Ok(())
}

/// Step 1: the generic checks after a PMU's `event_init` accepted the event.
fn check_pmu_init(attr: &PerfEventAttr, caps: PmuCaps) -> Result<(), Rule> {
    let extended_regs = (attr.sample_regs_user | attr.sample_regs_intr) & x86_regs::EXTENDED_MASK;
    if extended_regs != 0 && !caps.contains(PmuCaps::EXTENDED_REGS) {
        return Err(Rule::ExtendedRegs);
    }
    let any_exclude = attr.exclude_idle()
        || attr.exclude_user()
        || attr.exclude_kernel()
        || attr.exclude_hv()
        || attr.exclude_guest()
        || attr.exclude_host();
    if any_exclude && caps.contains(PmuCaps::NO_EXCLUDE) {
        return Err(Rule::NoExclude);
    }
    Ok(())
}

/// Step 2: the AUX rules of `perf_event_alloc`.
fn check_alloc_aux(attr: &PerfEventAttr, caps: PmuCaps) -> Result<(), Rule> {
    if attr.aux_output() {
        if !caps.contains(PmuCaps::AUX_OUTPUT) {
            return Err(Rule::AuxOutputUnsupported);
        }
        if attr.aux_pause() || attr.aux_resume() {
            return Err(Rule::AuxOutputWithPauseResume);
        }
    }
    if attr.aux_pause() && attr.aux_resume() {
        return Err(Rule::AuxPauseAndResume);
    }
    if attr.aux_start_paused() && !caps.contains(PmuCaps::AUX_PAUSE) {
        return Err(Rule::AuxStartPausedUnsupported);
    }
    Ok(())
}

/// Step 6: `perf_get_aux_event` minus the reference it takes.
fn check_aux_leader(
    attr: &PerfEventAttr,
    caps: PmuCaps,
    leader: Option<GroupLeader<'_>>,
) -> Result<(), Rule> {
    let Some(leader) = leader else {
        return Err(Rule::AuxEventWithoutLeader);
    };
    if attr.aux_output() && attr.aux_sample_size != 0 {
        return Err(Rule::AuxOutputAndSampleSize);
    }
    // perf_aux_output_match: the leader has an AUX area and this PMU's
    // aux_output_match accepts it (x86: the leader is an Intel PT event).
    let output_match = leader.caps.contains(PmuCaps::AUX.union(PmuCaps::ITRACE))
        && caps.contains(PmuCaps::AUX_OUTPUT);
    if attr.aux_output() && !output_match {
        return Err(Rule::AuxOutputLeaderMismatch);
    }
    if (attr.aux_pause() || attr.aux_resume()) && !leader.caps.contains(PmuCaps::AUX_PAUSE) {
        return Err(Rule::AuxLeaderCannotPause);
    }
    if attr.aux_sample_size != 0 && !leader.caps.contains(PmuCaps::SNAPSHOT_AUX) {
        return Err(Rule::AuxLeaderWithoutSnapshot);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn check_event(
        attr: &PerfEventAttr,
        caps: PmuCaps,
        leader: Option<GroupLeader<'_>>,
    ) -> Result<(), Error> {
        super::check_event(attr, caps, leader).map_err(Error::from)
    }
    use crate::abi::{PERF_ATTR_SIZE_VER8, attr_flags, aux_action};

    const PT: PmuCaps = PmuCaps::AUX
        .union(PmuCaps::SNAPSHOT_AUX)
        .union(PmuCaps::ITRACE)
        .union(PmuCaps::EXCLUSIVE)
        .union(PmuCaps::AUX_PAUSE);
    const CORE: PmuCaps = PmuCaps::AUX_OUTPUT;
    const SW: PmuCaps = PmuCaps::NO_NMI;

    fn attr() -> PerfEventAttr {
        PerfEventAttr::new(PERF_ATTR_SIZE_VER8)
    }

    fn under(leader: &PerfEventAttr, caps: PmuCaps) -> Option<GroupLeader<'_>> {
        Some(GroupLeader::new(leader, caps))
    }

    #[test]
    fn aux_sample_size_needs_a_snapshot_aux_leader() {
        let pt = attr();
        let mut s = attr();
        s.aux_sample_size = 4096;
        assert_eq!(check_event(&s, SW, None), Err(Error::Invalid), "no leader");
        assert_eq!(
            check_event(&s, SW, under(&pt, SW)),
            Err(Error::Invalid),
            "sw leader"
        );
        let aux_without_snapshot = PmuCaps::AUX | PmuCaps::ITRACE;
        assert_eq!(
            check_event(&s, SW, under(&pt, aux_without_snapshot)),
            Err(Error::Invalid)
        );
        assert_eq!(check_event(&s, SW, under(&pt, PT)), Ok(()));
        s.aux_sample_size = u32::MAX;
        assert_eq!(
            check_event(&s, SW, under(&pt, PT)),
            Ok(()),
            "aux_sample_size u32::MAX"
        );
        // PERF_SAMPLE_AUX without aux_sample_size needs no leader.
        let mut o10 = attr();
        o10.sample_type = crate::abi::sample_type::AUX;
        assert_eq!(check_event(&o10, SW, None), Ok(()));
    }

    /// The group block in `sys_perf_event_open`'s order: a sibling named as
    /// the leader, then the clock, then the CPU, then pinned/exclusive.
    #[test]
    fn the_group_block_in_linux_order() {
        let leader = attr();
        let e = attr();
        let with = |is_leader, same_cpu, other_clock: bool, pinned: bool| {
            let mut l = leader;
            if other_clock {
                l.flags |= attr_flags::USE_CLOCKID;
                l.clockid = 1;
            }
            let mut e = e;
            if pinned {
                e.flags |= attr_flags::PINNED;
            }
            let g = GroupLeader {
                is_leader,
                same_cpu,
                ..GroupLeader::new(&l, SW)
            };
            super::check_event(&e, SW, Some(g))
        };
        assert_eq!(with(true, true, false, false), Ok(()));
        assert_eq!(
            with(false, false, true, true),
            Err(Rule::LeaderNotGroupLeader)
        );
        assert_eq!(with(true, false, true, true), Err(Rule::GroupClockMismatch));
        assert_eq!(with(true, false, false, true), Err(Rule::GroupCpuMismatch));
        assert_eq!(
            with(true, true, false, true),
            Err(Rule::SiblingPinnedOrExclusive)
        );
        for r in [
            Rule::LeaderNotGroupLeader,
            Rule::GroupClockMismatch,
            Rule::GroupCpuMismatch,
            Rule::SiblingPinnedOrExclusive,
        ] {
            assert!(r.in_group_block() && !r.after_group_block(), "{r:?}");
        }
    }

    #[test]
    fn aux_output_rules_and_precedence() {
        let pt = attr();
        let mut e = attr();
        e.flags = attr_flags::AUX_OUTPUT;
        assert_eq!(
            check_event(&e, SW, under(&pt, PT)),
            Err(Error::NotSupported),
            "aux_output without the capability"
        );
        assert_eq!(check_event(&e, CORE, under(&pt, PT)), Ok(()));
        assert_eq!(check_event(&e, CORE, None), Err(Error::Invalid));
        // The leader must be an AUX instruction tracer.
        assert_eq!(check_event(&e, CORE, under(&pt, SW)), Err(Error::Invalid));
        assert_eq!(
            check_event(&e, CORE, under(&pt, PmuCaps::AUX)),
            Err(Error::Invalid)
        );
        // With aux_sample_size, EINVAL from the leader link, but EOPNOTSUPP
        // first when the PMU lacks AUX output.
        e.aux_sample_size = 64;
        assert_eq!(check_event(&e, CORE, under(&pt, PT)), Err(Error::Invalid));
        assert_eq!(
            check_event(&e, SW, under(&pt, PT)),
            Err(Error::NotSupported)
        );
        // aux_output with aux_pause is EOPNOTSUPP even on an AUX-output PMU.
        e.aux_sample_size = 0;
        e.aux_action = aux_action::PAUSE;
        assert_eq!(
            check_event(&e, CORE, under(&pt, PT)),
            Err(Error::NotSupported)
        );
    }

    #[test]
    fn aux_pause_resume_rules() {
        let pt = attr();
        let mut e = attr();
        e.aux_action = aux_action::PAUSE | aux_action::RESUME;
        assert_eq!(check_event(&e, SW, under(&pt, PT)), Err(Error::Invalid));
        e.aux_action = aux_action::PAUSE;
        assert_eq!(check_event(&e, SW, under(&pt, PT)), Ok(()));
        assert_eq!(check_event(&e, SW, None), Err(Error::Invalid));
        let no_pause = PmuCaps::AUX | PmuCaps::SNAPSHOT_AUX | PmuCaps::ITRACE;
        assert_eq!(
            check_event(&e, SW, under(&pt, no_pause)),
            Err(Error::Invalid)
        );
        e.aux_action = aux_action::RESUME;
        assert_eq!(
            check_event(&e, SW, under(&pt, no_pause)),
            Err(Error::Invalid)
        );

        let mut l = attr();
        l.aux_action = aux_action::START_PAUSED;
        assert_eq!(check_event(&l, no_pause, None), Err(Error::NotSupported));
        assert_eq!(check_event(&l, PT, None), Ok(()));
    }

    #[test]
    fn group_rules() {
        let leader = attr();
        let mut e = attr();
        e.flags = attr_flags::PINNED;
        assert_eq!(check_event(&e, SW, None), Ok(()));
        assert_eq!(check_event(&e, SW, under(&leader, SW)), Err(Error::Invalid));
        e.flags = attr_flags::EXCLUSIVE;
        assert_eq!(check_event(&e, SW, under(&leader, SW)), Err(Error::Invalid));

        // Different clocks.
        let mut e = attr();
        e.flags = attr_flags::USE_CLOCKID;
        e.clockid = 1;
        assert_eq!(check_event(&e, SW, None), Ok(()));
        assert_eq!(check_event(&e, SW, under(&leader, SW)), Err(Error::Invalid));
        let mut mono_leader = attr();
        mono_leader.flags = attr_flags::USE_CLOCKID;
        mono_leader.clockid = 1;
        assert_eq!(check_event(&e, SW, under(&mono_leader, SW)), Ok(()));
        // clockid is ignored without use_clockid.
        let mut plain = attr();
        plain.clockid = 1;
        assert_eq!(check_event(&plain, SW, under(&leader, SW)), Ok(()));
    }

    #[test]
    fn clock_rules() {
        let mut e = attr();
        e.flags = attr_flags::USE_CLOCKID;
        for (id, ok_in_nmi) in [(0, false), (1, true), (4, true), (7, false), (11, false)] {
            e.clockid = id;
            assert_eq!(check_event(&e, SW, None), Ok(()));
            assert_eq!(
                check_event(&e, PmuCaps::NONE, None).is_ok(),
                ok_in_nmi,
                "clock {id}"
            );
        }
        for id in [-1, 2, 3, 5, 99] {
            e.clockid = id;
            assert_eq!(check_event(&e, SW, None), Err(Error::Invalid), "clock {id}");
        }
    }

    #[test]
    fn pmu_init_rules() {
        let mut e = attr();
        e.sample_regs_intr = 1 << 32;
        assert_eq!(check_event(&e, SW, None), Err(Error::NotSupported));
        assert_eq!(check_event(&e, PmuCaps::EXTENDED_REGS, None), Ok(()));
        let mut e = attr();
        e.flags = attr_flags::EXCLUDE_GUEST;
        assert_eq!(
            check_event(&e, PmuCaps::NO_EXCLUDE, None),
            Err(Error::Invalid)
        );
        let mut e = attr();
        e.sample_period = 1;
        assert_eq!(
            check_event(&e, PmuCaps::NO_INTERRUPT, None),
            Err(Error::NotSupported)
        );
    }
}
