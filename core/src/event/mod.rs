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
//!
//! One concern per file: here the event, its states, opening it
//! (`perf_event_alloc` with the checks of [`check_event`]) and joining a
//! group (`perf_group_attach`); `output.rs` where its records go
//! (`perf_event_set_output`, `setup_aux`); `sched.rs` scheduling a group as
//! one unit (`group_sched_in`); `group.rs` leaving it (`perf_group_detach`);
//! `overflow.rs` the sample path (`__perf_event_overflow`).

use core::cell::Cell;
use core::ptr;

use crate::abi::PerfEventAttr;
use crate::attr::{GroupLeader, Rule, check_event, needs_aux_event};
use crate::aux::AuxArea;
use crate::pmu::{EventInfo, Platform, Pmu};
use crate::ring::{OutputEvent, Ring, SampleId};
use crate::sync::{AtomicBool, AtomicI32, AtomicPtr, AtomicU8, AtomicU64, LocalBool, Ordering};

mod group;
mod output;
mod overflow;
mod sched;

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
pub struct Buffer<'g> {
    /// The data ring.
    pub ring: &'g Ring<'g>,
    /// The AUX area, if mapped.
    pub aux: Option<&'g AuxArea<'g>>,
}

/// An event: a counter or tracer on a PMU, alone or in a group.
///
/// Who writes what: `state`, `oncpu` are written by scheduling (on the
/// event's CPU, interrupts masked) and read by PMIs on that CPU; the AUX
/// link and the output buffer are set up with interrupts masked and read by
/// PMIs; `lost_samples` is counted by PMIs.
pub struct Event<'g> {
    attr: PerfEventAttr,
    id: u64,
    cpu: i32,
    pmu: &'g dyn Pmu,
    parent: Option<&'g Event<'g>>,
    leader: Option<&'g Event<'g>>,
    first_sibling: Cell<Option<&'g Event<'g>>>,
    next_sibling: Cell<Option<&'g Event<'g>>>,
    state: AtomicU8,
    oncpu: AtomicI32,
    aux_event: AtomicPtr<Event<'g>>,
    buffer: AtomicPtr<Buffer<'g>>,
    itrace_started: AtomicBool,
    aux_paused: LocalBool,
    lost_samples: AtomicU64,
}

/// What an event is opened with.
pub struct EventConfig<'g> {
    /// The validated attr ([`copy_attr`](crate::attr::copy_attr)).
    pub attr: PerfEventAttr,
    /// Its PMU.
    pub pmu: &'g dyn Pmu,
    /// Its id (`event->id`).
    pub id: u64,
    /// The CPU it is bound to, or -1 (per task).
    pub cpu: i32,
    /// The group leader (`group_fd`), if any.
    pub leader: Option<&'g Event<'g>>,
    /// The parent, for an inherited child.
    pub parent: Option<&'g Event<'g>>,
}

impl<'g> Event<'g> {
    /// Opens an event: the open-time checks ([`check_event`]) against its
    /// PMU and leader, then the AUX leader link (`perf_get_aux_event`): a
    /// sampler with `aux_sample_size`/`aux_output`/`aux_pause`/`aux_resume`
    /// links to its leader. Starts `Off` if `attr.disabled`, else `Inactive`.
    /// Call [`join_group`](Self::join_group) next for a sibling.
    ///
    /// `pmu->event_init` runs before the group block, as in
    /// `perf_event_alloc`: a rule of the group block or after it is reported
    /// only if the PMU accepts the config.
    pub fn open(config: EventConfig<'g>) -> core::result::Result<Self, Rule> {
        let leader_info = config.leader.map(|l| GroupLeader {
            attr: &l.attr,
            caps: l.pmu.caps(),
            is_leader: l.leader.is_none(),
            same_cpu: l.cpu == config.cpu,
        });
        let checked = check_event(&config.attr, config.pmu.caps(), leader_info);
        if let Err(rule) = checked {
            if !rule.in_group_block() && !rule.after_group_block() {
                return Err(rule);
            }
        }
        // `pmu->event_init` (in `perf_event_alloc`, before the group
        // block). Linux runs it before its PMU capability checks; here they
        // come first, which matters only for an attr both refuse.
        if config.pmu.event_init(&config.attr).is_err() {
            return Err(Rule::PmuRefusedConfig);
        }
        checked?;
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
            aux_paused: LocalBool::new(config.attr.aux_start_paused()),
            lost_samples: AtomicU64::new(0),
        })
    }

    /// Adds this event to its leader's sibling list (set-up path).
    pub fn join_group(&'g self) {
        let Some(l) = self.leader else {
            return;
        };
        // `perf_group_attach`'s list_add_tail: the group is scheduled (and
        // undone, and closed) in the order its members joined.
        let mut last = None;
        let mut s = l.first_sibling.get();
        while let Some(e) = s {
            if ptr::eq(e, self) {
                return; // a member already
            }
            last = Some(e);
            s = e.next_sibling.get();
        }
        self.next_sibling.set(None);
        match last {
            None => l.first_sibling.set(Some(self)),
            Some(tail) => tail.next_sibling.set(Some(self)),
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
    pub fn aux_event(&self) -> Option<&'g Event<'g>> {
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
            // A same-CPU flag (hw.aux_paused), written only by this
            // CPU in `aux_pause_resume` with interrupts masked.
            aux_paused: self.aux_paused.load(),
        }
    }
}
/// An event's identity for its side-band records (`perf_event_header__init_id`).
struct Identity<'e, 'g> {
    event: &'e Event<'g>,
    platform: &'e dyn Platform,
}

impl OutputEvent for Identity<'_, '_> {
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
