// SPDX-License-Identifier: MIT OR Apache-2.0
//! Events and groups (`perf_get_aux_event`, `perf_event_set_output`,
//! `perf_prepare_sample_aux`, `perf_event_aux_pause` in `kernel/events/core.c`): the AUX
//! leader link, event states and the CPU an event is active on, output
//! redirection, inherited children writing through their parent's buffer,
//! and the overflow flow (prepare, begin, output, end).
//!
//! Events live in caller storage and refer to each other by `&'g`
//! references; links that can be torn down while samples are taken (the
//! AUX leader link, the output buffer) are atomic pointers.

use core::cell::Cell;
use core::ptr;

use crate::abi::{PerfEventAttr, sample_type as st};
use crate::attr::{EventClock, GroupLeader, Rule, check_event, needs_aux_event};
use crate::aux::{AuxArea, write_itrace_start};
use crate::caps::PmuCaps;
use crate::error::{Error, Result};
use crate::pmu::{EventInfo, Platform, Pmu, ef};
use crate::ring::{OutputEvent, OutputSink, Ring, SampleId};
use crate::sample::{AuxSampling, SampleData, SampleLayout, SnapshotAux, write_sample};
use crate::sync::{AtomicBool, AtomicI32, AtomicPtr, AtomicU8, AtomicU64, Ordering};

/// `enum perf_event_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EventState {
    /// Disabled.
    Off = 0,
    /// Enabled, not on a PMU.
    Inactive = 1,
    /// On the PMU of [`Event::oncpu`].
    Active = 2,
    /// Will not be scheduled until re-enabled (its AUX leader went away).
    Error = 3,
}

impl EventState {
    fn from_u8(v: u8) -> EventState {
        match v {
            1 => EventState::Inactive,
            2 => EventState::Active,
            3 => EventState::Error,
            _ => EventState::Off,
        }
    }
}

/// The buffer an event writes into: a data ring and, for an AUX event, its
/// AUX area (Linux `struct perf_buffer`).
pub struct Buffer<'g, P = ()> {
    /// The data ring.
    pub ring: &'g Ring<'g>,
    /// The AUX area, if mapped.
    pub aux: Option<&'g AuxArea<'g, P>>,
}

/// An event: a counter or tracer on a PMU, alone or in a group.
///
/// Who writes what: `state`, `oncpu` are written by scheduling (on the
/// event's CPU, interrupts masked) and read by PMIs on that CPU; the AUX
/// link and the output buffer are set up with interrupts masked and read by
/// PMIs; `lost_samples` is counted by PMIs.
pub struct Event<'g, P = ()> {
    attr: PerfEventAttr,
    id: u64,
    cpu: i32,
    pmu: &'g dyn Pmu,
    parent: Option<&'g Event<'g, P>>,
    leader: Option<&'g Event<'g, P>>,
    first_sibling: Cell<Option<&'g Event<'g, P>>>,
    next_sibling: Cell<Option<&'g Event<'g, P>>>,
    state: AtomicU8,
    oncpu: AtomicI32,
    aux_event: AtomicPtr<Event<'g, P>>,
    buffer: AtomicPtr<Buffer<'g, P>>,
    itrace_started: AtomicBool,
    aux_paused: AtomicBool,
    lost_samples: AtomicU64,
}

/// What an event is opened with.
pub struct EventConfig<'g, P = ()> {
    /// The validated attr ([`copy_attr`](crate::attr::copy_attr)).
    pub attr: PerfEventAttr,
    /// Its PMU.
    pub pmu: &'g dyn Pmu,
    /// Its id (`event->id`).
    pub id: u64,
    /// The CPU it is bound to, or -1 (per task).
    pub cpu: i32,
    /// The group leader (`group_fd`), if any.
    pub leader: Option<&'g Event<'g, P>>,
    /// The parent, for an inherited child.
    pub parent: Option<&'g Event<'g, P>>,
}

impl<'g, P> Event<'g, P> {
    /// Opens an event: the open-time checks ([`check_event`]) against its
    /// PMU and leader, then the AUX leader link (`perf_get_aux_event`): a
    /// sampler with `aux_sample_size`/`aux_output`/`aux_pause`/`aux_resume`
    /// links to its leader. Starts `Off` if `attr.disabled`, else `Inactive`.
    /// Call [`join_group`](Self::join_group) next for a sibling.
    ///
    /// Beyond [`check_event`], the group block checks what needs the events
    /// themselves, in Linux's order: the leader must be a group leader, then
    /// (after the clock) both must be bound to the same CPU (`sys_perf_event_open`'s group checks).
    pub fn open(config: EventConfig<'g, P>) -> core::result::Result<Self, Rule> {
        let leader_info = config.leader.map(|l| GroupLeader {
            attr: &l.attr,
            caps: l.pmu.caps(),
        });
        let checked = check_event(&config.attr, config.pmu.caps(), leader_info);
        if let Err(rule) = checked {
            if !rule.after_group_block() && !is_group_rule(rule) {
                return Err(rule);
            }
        }
        // `pmu->event_init` (in `perf_event_alloc`, before the group
        // block). Linux runs it before its PMU capability checks; here they
        // come first, which matters only for an attr both refuse.
        if config.pmu.event_init(&config.attr).is_err() {
            return Err(Rule::PmuRefusedConfig);
        }
        match (checked, config.leader) {
            (checked, Some(leader)) => {
                if leader.leader.is_some() {
                    return Err(Rule::LeaderNotGroupLeader);
                }
                if checked == Err(Rule::GroupClockMismatch) {
                    return Err(Rule::GroupClockMismatch);
                }
                if leader.cpu != config.cpu {
                    return Err(Rule::GroupCpuMismatch);
                }
                checked?;
            }
            (checked, None) => checked?,
        }
        let state = if config.attr.disabled() {
            EventState::Off
        } else {
            EventState::Inactive
        };
        let aux_event = match (needs_aux_event(&config.attr), config.leader) {
            (true, Some(l)) => ptr::from_ref(l).cast_mut(),
            _ => ptr::null_mut(),
        };
        Ok(Event {
            attr: config.attr,
            id: config.id,
            cpu: config.cpu,
            pmu: config.pmu,
            parent: config.parent,
            leader: config.leader,
            first_sibling: Cell::new(None),
            next_sibling: Cell::new(None),
            state: AtomicU8::new(state as u8),
            oncpu: AtomicI32::new(-1),
            aux_event: AtomicPtr::new(aux_event),
            buffer: AtomicPtr::new(ptr::null_mut()),
            itrace_started: AtomicBool::new(false),
            aux_paused: AtomicBool::new(config.attr.aux_start_paused()),
            lost_samples: AtomicU64::new(0),
        })
    }

    /// Adds this event to its leader's sibling list (set-up path).
    pub fn join_group(&'g self) {
        if let Some(l) = self.leader {
            self.next_sibling.set(l.first_sibling.get());
            l.first_sibling.set(Some(self));
        }
    }

    /// The event's attr.
    pub fn attr(&self) -> &PerfEventAttr {
        &self.attr
    }

    /// The event's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The state now.
    pub fn state(&self) -> EventState {
        // Relaxed: READ_ONCE(event->state); written by scheduling on this CPU.
        EventState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// The CPU the event is active on, or -1.
    pub fn oncpu(&self) -> i32 {
        // Relaxed: READ_ONCE(event->oncpu), as `state`.
        self.oncpu.load(Ordering::Relaxed)
    }

    /// Samples dropped because the ring had no room (`PERF_FORMAT_LOST`).
    pub fn lost_samples(&self) -> u64 {
        // Relaxed: a statistic.
        self.lost_samples.load(Ordering::Relaxed)
    }

    /// The AUX leader this event samples from, if linked.
    pub fn aux_event(&self) -> Option<&'g Event<'g, P>> {
        // Acquire pairs with the Release stores that set or clear the link.
        let p = self.aux_event.load(Ordering::Acquire);
        // SAFETY: the link only ever holds null or a `&'g Event` (set in
        // `open` from `config.leader`), valid for 'g.
        unsafe { p.as_ref() }
    }

    fn info(&self) -> EventInfo<'_> {
        EventInfo {
            attr: &self.attr,
            id: self.id,
            cpu: self.cpu,
            // Relaxed: same-CPU flag (hw.aux_paused), written only by this
            // CPU in `aux_pause_resume` with interrupts masked.
            aux_paused: self.aux_paused.load(Ordering::Relaxed),
        }
    }

    /// Gives the event its own buffer (the mmap of its fd).
    pub fn set_buffer(&self, buffer: &'g Buffer<'g, P>) {
        // Release: the buffer's set-up before the pointer (pairs with the
        // Acquire load in `buffer()`).
        self.buffer
            .store(ptr::from_ref(buffer).cast_mut(), Ordering::Release);
    }

    /// The buffer this event's records go to: its own, or its parent's for
    /// an inherited child (Linux `ring_buffer_get` follows `event->parent`).
    pub fn buffer(&self) -> Option<&'g Buffer<'g, P>> {
        let owner = self.parent.unwrap_or(self);
        // Acquire pairs with the Release store in `set_buffer`/`set_output`.
        let p = owner.buffer.load(Ordering::Acquire);
        // SAFETY: the pointer is null or a `&'g Buffer` stored by
        // `set_buffer`/`set_output`, valid for 'g.
        unsafe { p.as_ref() }
    }

    /// Prepares the PMU for an AUX area over `pages` (`rb_alloc_aux` →
    /// `pmu->setup_aux`, `rb_alloc_aux`): `EOPNOTSUPP` if the PMU has no AUX area;
    /// for a PMU that needs one contiguous block (`AUX_NO_SG`) in overwrite
    /// mode, `ENOMEM` unless the pages are one block (`rb_alloc_aux` for
    /// `PERF_PMU_CAP_AUX_NO_SG`); then
    /// whatever the PMU's `setup_aux` says. Build the [`AuxArea`] over the
    /// same pages afterwards, and call [`free_aux`](Self::free_aux) when it
    /// is released.
    pub fn setup_aux(&self, pages: &[*mut u8], overwrite: bool) -> Result<()> {
        let caps = self.pmu.caps();
        if !caps.contains(PmuCaps::AUX) {
            return Err(Error::NotSupported);
        }
        if caps.contains(PmuCaps::AUX_NO_SG) && overwrite {
            let contiguous = pages
                .windows(2)
                .all(|w| w[1] as usize == (w[0] as usize).wrapping_add(crate::abi::PAGE_SIZE));
            if !contiguous {
                return Err(Error::NoMemory);
            }
        }
        self.pmu.setup_aux(&self.info(), pages, overwrite)
    }

    /// Tells the PMU the AUX area is gone (`pmu->free_aux`).
    pub fn free_aux(&self) {
        self.pmu.free_aux(&self.info());
    }

    /// Redirects this event's output into `target`'s buffer
    /// (`PERF_EVENT_IOC_SET_OUTPUT`, `perf_event_set_output`): `EINVAL` for itself, another
    /// CPU, another clock, mixed `write_backward`, two AUX events of
    /// different PMUs (`perf_event_set_output`'s `pmu != pmu` check), a target without a
    /// buffer, or an event
    /// that has a buffer of its own already.
    pub fn set_output(&self, target: &'g Event<'g, P>) -> Result<()> {
        if ptr::eq(self, target) || self.cpu != target.cpu {
            return Err(Error::Invalid);
        }
        if EventClock::of(&self.attr).ok() != EventClock::of(&target.attr).ok()
            || self.attr.write_backward() != target.attr.write_backward()
        {
            return Err(Error::Invalid);
        }
        let has_aux = |e: &Event<'g, P>| e.pmu.caps().contains(PmuCaps::AUX);
        if has_aux(self) && has_aux(target) && !ptr::addr_eq(self.pmu, target.pmu) {
            return Err(Error::Invalid);
        }
        // Relaxed: set-up path; the caller serializes set-up of one event.
        if !self.buffer.load(Ordering::Relaxed).is_null() {
            return Err(Error::Invalid);
        }
        let buffer = target.buffer().ok_or(Error::Invalid)?;
        self.set_buffer(buffer);
        Ok(())
    }

    /// Schedules the event (and, for a leader, its group) onto `platform`'s
    /// CPU (`event_sched_in`): an ITRACE PMU's event first emits
    /// `PERF_RECORD_ITRACE_START` (once); events in `Error` or `Off` stay off.
    pub fn sched_in(&self, platform: &dyn Platform) -> Result<()> {
        if self.state() != EventState::Inactive {
            return Ok(());
        }
        if self.pmu.caps().contains(PmuCaps::ITRACE)
            && !self.itrace_started.swap(true, Ordering::Relaxed)
        {
            if let Some(b) = self.buffer() {
                let (pid, tid) = platform.current();
                let _ = write_itrace_start(
                    b.ring,
                    &mut Identity {
                        event: self,
                        platform,
                    },
                    pid,
                    tid,
                );
            }
        }
        // Always START, as `event_sched_in`: a paused AUX event is added and
        // its transaction opened, but the PMU sees `aux_paused` and leaves
        // the trace off until a resume.
        self.pmu.add(&self.info(), ef::START)?;
        // Relaxed (both): same-CPU state, read by PMIs on this CPU only after
        // these stores in program order.
        self.oncpu.store(platform.cpu() as i32, Ordering::Relaxed);
        self.state
            .store(EventState::Active as u8, Ordering::Relaxed);
        let mut s = self.first_sibling.get();
        while let Some(e) = s {
            e.sched_in(platform)?;
            s = e.next_sibling.get();
        }
        Ok(())
    }

    /// Takes the event (and its group) off the PMU (`event_sched_out`).
    pub fn sched_out(&self) {
        let mut s = self.first_sibling.get();
        while let Some(e) = s {
            e.sched_out();
            s = e.next_sibling.get();
        }
        if self.state() == EventState::Active {
            self.state
                .store(EventState::Inactive as u8, Ordering::Relaxed);
            self.pmu.del(&self.info(), ef::UPDATE);
            self.oncpu.store(-1, Ordering::Relaxed);
        }
    }

    /// Enables the event (`PERF_EVENT_IOC_ENABLE`): `Off` and `Error` become
    /// `Inactive`. A sampler whose AUX leader went away then runs unlinked
    /// and its samples carry no AUX data (`perf_put_aux_event`).
    pub fn enable(&self) {
        if matches!(self.state(), EventState::Off | EventState::Error) {
            self.state
                .store(EventState::Inactive as u8, Ordering::Relaxed);
        }
    }

    /// Closes the event (`perf_group_detach` + `perf_put_aux_event`): taken
    /// off the PMU and out of its leader's sibling list; if it is an AUX
    /// leader, every sibling linked to it loses the link and goes to
    /// `Error` (`perf_put_aux_event`).
    pub fn close(&self) {
        self.sched_out();
        // Relaxed: same-CPU state (set-up path).
        self.state.store(EventState::Off as u8, Ordering::Relaxed);
        // A sibling leaves its leader's list (`perf_group_detach`'s
        // `list_del_init`): the group is scheduled without it from now on,
        // and nothing in the group refers to it any more.
        if let Some(l) = self.leader {
            let mut prev: Option<&Event<'g, P>> = None;
            let mut s = l.first_sibling.get();
            while let Some(e) = s {
                if ptr::eq(e, self) {
                    let next = e.next_sibling.get();
                    match prev {
                        None => l.first_sibling.set(next),
                        Some(p) => p.next_sibling.set(next),
                    }
                    break;
                }
                prev = Some(e);
                s = e.next_sibling.get();
            }
            self.next_sibling.set(None);
        }
        let mut s = self.first_sibling.get();
        while let Some(e) = s {
            // Relaxed load: only set-up paths write the link, and this is one.
            if ptr::eq(e.aux_event.load(Ordering::Relaxed), self) {
                // Release pairs with the Acquire in `aux_event()`.
                e.aux_event.store(ptr::null_mut(), Ordering::Release);
                e.sched_out();
                // Relaxed: same-CPU state (set-up path).
                e.state.store(EventState::Error as u8, Ordering::Relaxed);
            }
            s = e.next_sibling.get();
        }
        self.first_sibling.set(None);
    }

    /// The overflow of a sampling event (`__perf_event_overflow` →
    /// `perf_event_output`), from PMI context: pause the AUX leader first if
    /// `aux_pause`; write the sample (with `aux_sample_size`, the AUX block
    /// from the leader's `snapshot_aux`) into the output buffer; resume the
    /// leader after if `aux_resume` (`perf_event_aux_pause`, Linux 6.13).
    ///
    /// `data` gives what the PMI knows (IP, misc, period, addr and the other
    /// payload fields); TID, TIME, ID, STREAM_ID and CPU are the event's and
    /// `platform`'s, whatever `data` says, as in Linux.
    ///
    /// `ENOSPC` when there is no buffer (nothing counted) or the ring refused
    /// the sample (counted in [`lost_samples`](Self::lost_samples); the AUX
    /// PMU is not touched).
    pub fn overflow(&self, platform: &dyn Platform, data: &SampleData<'_>) -> Result<SampleLayout> {
        let leader = self.aux_event();
        if self.attr.aux_pause() {
            if let Some(l) = leader {
                l.aux_pause_resume(true);
            }
        }
        let result = self.output_sample(platform, data, leader);
        if self.attr.aux_resume() {
            if let Some(l) = leader {
                l.aux_pause_resume(false);
            }
        }
        result
    }

    fn output_sample(
        &self,
        platform: &dyn Platform,
        data: &SampleData<'_>,
        leader: Option<&Event<'g, P>>,
    ) -> Result<SampleLayout> {
        let output = self.parent.unwrap_or(self);
        let Some(buffer) = output.buffer() else {
            return Err(Error::NoSpace);
        };
        let snapshot = leader.map(|l| LeaderSnapshot { leader: l });
        let sampling = match (&snapshot, leader) {
            (Some(snap), Some(l))
                if self.attr.sample_type & st::AUX != 0 && self.attr.aux_sample_size != 0 =>
            {
                l.buffer().and_then(|b| b.aux).map(|area| {
                    let active_here =
                        l.state() == EventState::Active && l.oncpu() == platform.cpu() as i32;
                    AuxSampling {
                        area,
                        pmu: snap as &dyn SnapshotAux,
                        active_here,
                    }
                })
            }
            _ => None,
        };
        // The identity fields come from the event and the platform, as
        // `perf_prepare_sample` fills them (`__perf_event_header__init_id`):
        // the current task, the event clock, the primary (parent's) id, the
        // event's own id, this CPU.
        let (pid, tid) = platform.current();
        let data = SampleData {
            pid,
            tid,
            time: platform.clock(),
            id: self.parent.map_or(self.id, |p| p.id),
            stream_id: self.id,
            cpu: platform.cpu(),
            ..*data
        };
        // The sampling event names itself in a PERF_RECORD_LOST
        // (`lost_event.id = event->id`) and in the refreshed identity.
        let mut identity = Identity {
            event: self,
            platform,
        };
        let result = write_sample(
            buffer.ring,
            &mut identity,
            &self.attr,
            &data,
            sampling.as_ref(),
            platform,
        );
        if result == Err(Error::NoSpace) {
            // Relaxed: a statistic (event->lost_samples).
            self.lost_samples.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Pauses (`true`) or resumes the AUX trace of this AUX leader, once per
    /// state change, with interrupts masked by the caller (PMI).
    fn aux_pause_resume(&self, pause: bool) {
        if self.state() != EventState::Active {
            return;
        }
        // Relaxed: same-CPU flag (hw.aux_paused).
        if self.aux_paused.swap(pause, Ordering::Relaxed) == pause {
            return;
        }
        if pause {
            self.pmu.stop(&self.info(), ef::PAUSE);
        } else {
            self.pmu.start(&self.info(), ef::RESUME);
        }
    }
}

/// The rules of the group block that `check_event` can decide alone.
fn is_group_rule(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::GroupClockMismatch | Rule::SiblingPinnedOrExclusive
    )
}

/// The AUX leader's `snapshot_aux`, as the sample layer calls it.
struct LeaderSnapshot<'e, 'g, P> {
    leader: &'e Event<'g, P>,
}

impl<P> SnapshotAux for LeaderSnapshot<'_, '_, P> {
    fn snapshot_aux(&self, sink: &mut dyn OutputSink, size: u64) -> i64 {
        self.leader
            .pmu
            .snapshot_aux(&self.leader.info(), sink, size)
    }
}

/// An event's identity for its side-band records (`perf_event_header__init_id`).
struct Identity<'e, 'g, P> {
    event: &'e Event<'g, P>,
    platform: &'e dyn Platform,
}

impl<P> OutputEvent for Identity<'_, '_, P> {
    fn id(&self) -> u64 {
        self.event.id
    }

    fn id_header_size(&self) -> usize {
        if self.event.attr.sample_id_all() {
            SampleId {
                sample_type: self.event.attr.sample_type,
                ..SampleId::default()
            }
            .size()
        } else {
            0
        }
    }

    fn sample_id(&mut self) -> Option<SampleId> {
        if !self.event.attr.sample_id_all() {
            return None;
        }
        let (pid, tid) = self.platform.current();
        let primary = self.event.parent.map_or(self.event.id, |p| p.id);
        Some(SampleId {
            sample_type: self.event.attr.sample_type,
            pid,
            tid,
            time: self.platform.clock(),
            id: primary,
            stream_id: self.event.id,
            cpu: self.platform.cpu(),
        })
    }
}
