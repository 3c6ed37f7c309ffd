// SPDX-License-Identifier: MIT OR Apache-2.0
//! Events and groups in C: open (with the open-time checks), group
//! membership, the output buffer and its redirection, scheduling, and the
//! overflow flow that writes a sample, its AUX block taken through the
//! leader PMU's `snapshot_aux`.
//!
//! Events refer to each other (leader, parent, output target), to their PT
//! PMU and to their buffer in place: none may move while initialized, and
//! the `fini` of one that something still refers to is refused (`-EBUSY`).
//! Tear down in the reverse order of opening.

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of, addr_of_mut};

use perfaux::Error;
use perfaux::PmuCaps;
use perfaux::event::{Buffer, Event, EventConfig};
use perfaux::pmu::Pmu;

use crate::attr::read_attr;
use crate::aux::{area_hold, perfaux_aux_area};
use crate::platform::{perfaux_platform, read_platform};
use crate::pt::{cpu_ref, perfaux_pt_cpu};
use crate::ring::{perfaux_ring, ring_hold};
use crate::storage::{Hold, Users, live_box, read_in, usable};

mod overflow;
mod pmu_ops;

pub use overflow::*;
use pmu_ops::OpsPmu;
pub use pmu_ops::perfaux_pmu_ops;

/// Words of `struct perfaux_event`.
pub const PERFAUX_EVENT_WORDS: usize = 64;
/// Size in bytes of `struct perfaux_event` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_EVENT_SIZE: usize = PERFAUX_EVENT_WORDS * 8;

/// Storage of an event. Opaque.
#[repr(C)]
pub struct perfaux_event {
    /// Opaque.
    pub opaque: [u64; PERFAUX_EVENT_WORDS],
}

/// The PMU an event is on.
enum EventPmu {
    Ops(OpsPmu),
    Pt(&'static dyn Pmu),
}

#[repr(C)]
struct EventBox {
    live: u64,
    /// The events that name this one as leader, parent or output target.
    users: Users,
    holds: EventHolds,
    pmu: EventPmu,
    buffer: Option<Buffer<'static>>,
    event: Event<'static>,
}

/// What an event refers to in place, each held until the event's `fini`
/// (the buffer's until the next `set_buffer`): kept for their `Drop`, never
/// read.
#[derive(Default)]
struct EventHolds {
    _pt: Option<Hold<'static>>,
    _leader: Option<Hold<'static>>,
    _parent: Option<Hold<'static>>,
    _output: Option<Hold<'static>>,
    _ring: Option<Hold<'static>>,
    _area: Option<Hold<'static>>,
}

const EVENT_LIVE: u64 = 0x7065_7266_6576_6e74; // "perfevnt"

const _: () = {
    assert!(size_of::<EventBox>() <= size_of::<perfaux_event>());
    assert!(align_of::<EventBox>() <= align_of::<perfaux_event>());
};

/// The open event at `p`, if it is one.
///
/// # Safety
/// `p` NULL or event storage.
unsafe fn event_box<'a>(p: *const perfaux_event) -> Option<&'a EventBox> {
    // SAFETY: `p` is NULL or event storage (this function's `# Safety`),
    // which `live_box` needs; the live word says the box was opened and not
    // torn down.
    unsafe { live_box::<_, EventBox>(p, EVENT_LIVE).map(|b| &*b) }
}

/// The event at `p` with a hold on it (NULL: none), for an event that
/// refers to it; `Err` if `p` is not NULL and not an event.
///
/// # Safety
/// As [`event_box`].
unsafe fn held_event(
    p: *const perfaux_event,
) -> Result<Option<(&'static Event<'static>, Hold<'static>)>, ()> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: `p` is event storage (this function's `# Safety`: not NULL
    // here); the hold keeps the event open while the holder refers to it,
    // hence 'static.
    match unsafe { event_box(p) } {
        Some(b) => Ok(Some((&b.event, b.users.hold()))),
        None => Err(()),
    }
}

/// Opens an event on `pmu` in `ev`, as `perf_event_open` does after the
/// copy-in: `attr` is a normalized 136-byte attr (`perfaux_attr_copy`'s
/// output); `leader` the group leader (NULL: alone), `parent` the parent of
/// an inherited child (NULL: none); then call `perfaux_event_join_group`
/// for a sibling.
///
/// Returns 0, or the errno of the first open-time rule that refuses it
/// (`-EINVAL`, `-EOPNOTSUPP`, ... as Linux), `-EINVAL` for bad arguments,
/// `-EBUSY` if `ev` is open.
///
/// # Safety
/// `ev` valid for writes of `sizeof(struct perfaux_event)` bytes, not moved
/// until `perfaux_event_fini`; `attr` readable for 136 bytes; `pmu`,
/// `leader`, `parent` NULL or valid, outliving the event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_open(
    ev: *mut perfaux_event,
    attr: *const c_void,
    pmu: *const perfaux_pmu_ops,
    id: u64,
    cpu: i32,
    leader: *const perfaux_event,
    parent: *const perfaux_event,
) -> c_int {
    // SAFETY: NULL or readable (the caller's contract).
    let Some(ops) = (unsafe { read_in(pmu) })
        .filter(|o| o.reserved == 0 && PmuCaps::from_bits(o.caps).is_some())
    else {
        return Error::Invalid.errno();
    };
    // SAFETY: `ev`, `attr`, `leader` and `parent` are as `open` needs them
    // (this function's `# Safety` states its clauses); the ops were read
    // above and are kept by value.
    unsafe {
        open(
            ev,
            attr,
            (EventPmu::Ops(OpsPmu(ops)), None),
            id,
            cpu,
            leader,
            parent,
        )
    }
}

/// Opens an event on the PT PMU `pt` (an AUX leader, typically); as
/// `perfaux_event_open` otherwise.
///
/// The event holds `pt`: its `fini` is refused until the event's.
///
/// # Safety
/// As `perfaux_event_open`; `pt` NULL or PT CPU storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_open_pt(
    ev: *mut perfaux_event,
    attr: *const c_void,
    pt: *const perfaux_pt_cpu,
    id: u64,
    cpu: i32,
    leader: *const perfaux_event,
    parent: *const perfaux_event,
) -> c_int {
    // SAFETY: `pt` is NULL or PT CPU storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref::<'static>(pt) }) else {
        return Error::Invalid.errno();
    };
    // The hold keeps the PT CPU object (and so its PMU) initialized while
    // the event refers to it.
    let (pmu, hold) = b.pmu_hold();
    // SAFETY: `ev`, `attr`, `leader` and `parent` are as `open` needs them
    // (this function's `# Safety`).
    unsafe {
        open(
            ev,
            attr,
            (EventPmu::Pt(pmu), Some(hold)),
            id,
            cpu,
            leader,
            parent,
        )
    }
}

/// # Safety
/// As `perfaux_event_open`.
unsafe fn open(
    ev: *mut perfaux_event,
    attr: *const c_void,
    (pmu, pt): (EventPmu, Option<Hold<'static>>),
    id: u64,
    cpu: i32,
    leader: *const perfaux_event,
    parent: *const perfaux_event,
) -> c_int {
    if !usable(ev) || cpu < -1 {
        return Error::Invalid.errno();
    }
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's `# Safety`),
    // which is what `event_box` needs.
    if unsafe { event_box(ev) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: NULL or 136 readable bytes (the caller's contract).
    let Some(attr) = (unsafe { read_attr(attr) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `leader` and `parent` are NULL or `struct perfaux_event`
    // storage (this function's `# Safety`), which is what `held_event` needs.
    let (Ok(leader), Ok(parent)) = (unsafe { held_event(leader) }, unsafe { held_event(parent) })
    else {
        return Error::Invalid.errno();
    };
    let (leader, leader_hold) = leader.unzip();
    let (parent, parent_hold) = parent.unzip();
    let b = ev.cast::<EventBox>();
    // SAFETY: valid storage for an EventBox (asserted, the contract); the
    // PMU is written first and stays in place for the event to refer to.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        addr_of_mut!((*b).pmu).write(pmu);
        addr_of_mut!((*b).buffer).write(None);
    }
    // SAFETY: just written; lives as long as the storage.
    let pmu: &'static dyn Pmu = match unsafe { &*addr_of!((*b).pmu) } {
        EventPmu::Ops(o) => o,
        EventPmu::Pt(p) => *p,
    };
    let config = EventConfig {
        attr,
        pmu,
        id,
        cpu,
        leader,
        parent,
    };
    match Event::open(config) {
        Ok(event) => {
            let holds = EventHolds {
                _pt: pt,
                _leader: leader_hold,
                _parent: parent_hold,
                ..EventHolds::default()
            };
            // SAFETY: valid storage; the live word goes last.
            unsafe {
                addr_of_mut!((*b).users).write(Users::new());
                addr_of_mut!((*b).holds).write(holds);
                addr_of_mut!((*b).event).write(event);
                addr_of_mut!((*b).live).write(EVENT_LIVE);
            }
            0
        }
        Err(rule) => {
            // SAFETY: written above and not referred to by anything now.
            unsafe { ptr::drop_in_place(addr_of_mut!((*b).pmu)) };
            rule.error().errno()
        }
    }
}

/// Runs `f` on the open event at `ev`, or returns `-EINVAL`.
///
/// # Safety
/// `ev` NULL or event storage.
unsafe fn with_event(
    ev: *const perfaux_event,
    f: impl FnOnce(&'static Event<'static>) -> c_int,
) -> c_int {
    // SAFETY: `ev` is NULL or event storage (this function's `# Safety`),
    // and stays open for the call (no other call tears it down meanwhile,
    // the header's contract).
    match unsafe { event_box::<'static>(ev) } {
        Some(b) => f(&b.event),
        None => Error::Invalid.errno(),
    }
}

/// Adds an opened sibling to its leader's group (`perf_group_attach`).
/// Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ev` NULL or event storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_join_group(ev: *mut perfaux_event) -> c_int {
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's
    // `# Safety`), which is what `with_event` needs.
    unsafe {
        with_event(ev, |e| {
            e.join_group();
            0
        })
    }
}

/// Gives the event its own buffer: `ring` and, for an AUX event, `area`
/// (NULL: none), as mapping its fd does. Set-up path: no PMI of this event
/// may run meanwhile. The event holds both (their `fini` is refused) until
/// its own `fini` or the next `set_buffer`. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ev` NULL or event storage; `ring` and `area` NULL or storage of their
/// kinds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_set_buffer(
    ev: *mut perfaux_event,
    ring: *const perfaux_ring,
    area: *const perfaux_aux_area,
) -> c_int {
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's `# Safety`),
    // which is what `event_box` needs.
    if unsafe { event_box(ev) }.is_none() {
        return Error::Invalid.errno();
    }
    // SAFETY: `ring` is NULL or `struct perfaux_ring` storage (this function's `# Safety`),
    // which is what `ring_hold` needs; the hold keeps it initialized while
    // the event refers to it.
    let Some((ring, ring_users)) = (unsafe { ring_hold(ring) }) else {
        return Error::Invalid.errno();
    };
    let (aux, area_users) = if area.is_null() {
        (None, None)
    } else {
        // SAFETY: `area` is NULL or `struct perfaux_aux_area` storage (this
        // function's `# Safety`), which is what `area_hold` needs; as the ring.
        match unsafe { area_hold(area) } {
            Some((a, hold)) => (Some(a), Some(hold)),
            None => return Error::Invalid.errno(),
        }
    };
    let b = ev.cast::<EventBox>();
    // SAFETY: live (checked); the buffer slot is written in place, then the
    // event pointed at it (set-up path, the caller's contract); the holds
    // of a previous buffer are dropped as the new ones replace them.
    unsafe {
        addr_of_mut!((*b).buffer).write(Some(Buffer { ring, aux }));
        if let Some(buffer) = &*addr_of!((*b).buffer) {
            (*b).event.set_buffer(buffer);
        }
        (*b).holds._ring = Some(ring_users);
        (*b).holds._area = area_users;
    }
    0
}

/// Redirects the event's output into `target`'s buffer
/// (`PERF_EVENT_IOC_SET_OUTPUT`). Returns 0 or the errno Linux gives
/// (`-EINVAL` for a target on another CPU, with another clock, ...). The
/// event holds `target` (its `fini` is refused) until the event's `fini`.
///
/// # Safety
/// Both NULL or event storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_set_output(
    ev: *mut perfaux_event,
    target: *const perfaux_event,
) -> c_int {
    // SAFETY: `target` is NULL or `struct perfaux_event` storage (this function's `# Safety`),
    // which is what `held_event` needs.
    let Ok(Some((target, hold))) = (unsafe { held_event(target) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's
    // `# Safety`), which is what `event_box` needs.
    let Some(b) = (unsafe { event_box::<'static>(ev) }) else {
        return Error::Invalid.errno();
    };
    match b.event.set_output(target) {
        Ok(()) => {
            let b = ev.cast::<EventBox>();
            // SAFETY: live (checked); set-up path (the caller's contract).
            unsafe { (*b).holds._output = Some(hold) };
            0
        }
        Err(err) => err.errno(),
    }
}

/// Schedules the event, and a leader's group, on the platform's CPU as one
/// unit (`group_sched_in`). Returns 0, `-EINVAL` for bad arguments, or the
/// PMU's refusal of one member, after which the whole group is off again.
///
/// # Safety
/// `ev` NULL or event storage; `platform` readable; interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_sched_in(
    ev: *mut perfaux_event,
    platform: *const perfaux_platform,
) -> c_int {
    // SAFETY: `platform` is NULL or a readable `struct perfaux_platform` (this function's `#
    // Safety`), which is what `read_platform` needs.
    let Some(p) = (unsafe { read_platform(platform) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's
    // `# Safety`), which is what `with_event` needs.
    unsafe {
        with_event(ev, |e| match e.sched_in(&p) {
            Ok(()) => 0,
            Err(err) => err.errno(),
        })
    }
}

/// Takes the event (and a leader's group) off its PMU. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ev` NULL or event storage; interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_sched_out(ev: *mut perfaux_event) -> c_int {
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's
    // `# Safety`), which is what `with_event` needs.
    unsafe {
        with_event(ev, |e| {
            e.sched_out();
            0
        })
    }
}

/// Enables a disabled (or errored) event (`PERF_EVENT_IOC_ENABLE`).
/// Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ev` NULL or event storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_enable(ev: *mut perfaux_event) -> c_int {
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's
    // `# Safety`), which is what `with_event` needs.
    unsafe {
        with_event(ev, |e| {
            e.enable();
            0
        })
    }
}

/// The samples the event's ring refused, or `-EINVAL`.
///
/// # Safety
/// `ev` NULL or event storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_lost_samples(ev: *const perfaux_event) -> i64 {
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's `# Safety`),
    // which is what `event_box` needs.
    match unsafe { event_box(ev) } {
        Some(b) => b.event.lost_samples().min(i64::MAX as u64) as i64,
        None => i64::from(Error::Invalid.errno()),
    }
}

/// Closes the event (`perf_event_release`: off its PMU, out of its group)
/// and lets go of what it referred to (its leader, parent, output target,
/// PT CPU object, ring and AUX area). Returns 0, `-EBUSY` (and nothing
/// changes) while another event still refers to it as leader, parent or
/// output target (close those first: in-place storage cannot outlive its
/// `fini` as Linux's refcounted events do), or `-EINVAL`.
///
/// # Safety
/// `ev` NULL or event storage; no PMI of it may run, and no other call may
/// use it meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_fini(ev: *mut perfaux_event) -> c_int {
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's `# Safety`),
    // which is what `event_box` needs.
    let Some(b) = (unsafe { event_box(ev) }) else {
        return Error::Invalid.errno();
    };
    if b.users.in_use() {
        return Error::Busy.errno();
    }
    b.event.close();
    let b = ev.cast::<EventBox>();
    // SAFETY: live: marked dead, then dropped once (the event before the
    // PMU and buffer it refers to, the holds on other objects last).
    unsafe {
        addr_of_mut!((*b).live).write(0);
        ptr::drop_in_place(addr_of_mut!((*b).event));
        ptr::drop_in_place(addr_of_mut!((*b).buffer));
        ptr::drop_in_place(addr_of_mut!((*b).pmu));
        ptr::drop_in_place(addr_of_mut!((*b).holds));
    }
    0
}
