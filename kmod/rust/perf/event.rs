// SPDX-License-Identifier: GPL-2.0
//! `struct perf_event` as a PMU callback sees it.

use kernel::ffi::c_int;
use kernel::types::Opaque;

use crate::bindings;

/// `PERF_HES_STOPPED`: the event is not counting (`hw.state`).
pub(crate) const HES_STOPPED: c_int = bindings::PERF_HES_STOPPED as c_int;

/// `EOPNOTSUPP`, which 6.12's `kernel::error::code` lacks.
pub(crate) fn eopnotsupp() -> kernel::error::Error {
    kernel::error::Error::from_errno(-(bindings::EOPNOTSUPP as c_int))
}

/// A perf event of the driver's PMU, borrowed for one callback.
///
/// # Invariants
/// Wraps a `struct perf_event` the perf core keeps alive for as long as
/// the reference (the duration of a callback); the fields read here are
/// the perf core's to set before the callback (`attr`, `id`) or the PMU's
/// own (`hw.state`, `hw.config`), which the perf core calls it for under
/// its own exclusion (interrupts off on the event's CPU, or the event being
/// initialized).
#[repr(transparent)]
pub(crate) struct Event(Opaque<bindings::perf_event>);

impl Event {
    /// The event at `ptr`.
    ///
    /// # Safety
    /// `ptr` is an event the perf core passed to a PMU callback now
    /// running; the reference does not outlive the callback.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::perf_event) -> &'a Event {
        // SAFETY: `Event` is a transparent `Opaque<perf_event>`, and the
        // event lives for the callback (this function's `# Safety`).
        // INVARIANT: the perf core's event, for the callback.
        unsafe { &*ptr.cast::<Event>() }
    }

    /// The C pointer, for the perf core's calls and for identity.
    pub(crate) fn as_ptr(&self) -> *mut bindings::perf_event {
        self.0.get()
    }

    /// The `struct pmu` the event belongs to (`event->pmu`).
    pub(crate) fn pmu(&self) -> *mut bindings::pmu {
        // SAFETY: set before any callback and never changed (the type
        // invariant).
        unsafe { (*self.0.get()).pmu }
    }

    /// `attr.type`.
    pub(crate) fn attr_type(&self) -> u32 {
        // SAFETY: the perf core's attr copy, read-only after open.
        unsafe { (*self.0.get()).attr.type_ }
    }

    /// `attr.config`.
    pub(crate) fn config(&self) -> u64 {
        // SAFETY: as `attr_type`.
        unsafe { (*self.0.get()).attr.config }
    }

    /// `attr.sample_type`.
    pub(crate) fn sample_type(&self) -> u64 {
        // SAFETY: as `attr_type`.
        unsafe { (*self.0.get()).attr.sample_type }
    }

    /// `has_branch_stack()`: the samples carry a branch stack.
    pub(crate) fn has_branch_stack(&self) -> bool {
        let branch_stack = bindings::perf_event_sample_format_PERF_SAMPLE_BRANCH_STACK;
        self.sample_type() & branch_stack as u64 != 0
    }

    /// `attr.exclude_user`.
    pub(crate) fn exclude_user(&self) -> bool {
        // SAFETY: as `attr_type`.
        unsafe { (*self.0.get()).attr.exclude_user() != 0 }
    }

    /// `attr.exclude_kernel`.
    pub(crate) fn exclude_kernel(&self) -> bool {
        // SAFETY: as `attr_type`.
        unsafe { (*self.0.get()).attr.exclude_kernel() != 0 }
    }

    /// The event's id (`event->id`).
    pub(crate) fn id(&self) -> u64 {
        // SAFETY: set at open, read-only after.
        unsafe { (*self.0.get()).id }
    }

    /// `hw.state` (`PERF_HES_*`).
    pub(crate) fn hw_state(&self) -> c_int {
        // SAFETY: the PMU's field, read in its callbacks (the type
        // invariant).
        unsafe { (*self.0.get()).hw.state }
    }

    /// Whether `hw.state` says [`HES_STOPPED`].
    pub(crate) fn is_stopped(&self) -> bool {
        self.hw_state() & HES_STOPPED != 0
    }

    /// Sets `hw.state`.
    pub(crate) fn set_hw_state(&self, state: c_int) {
        // SAFETY: the PMU's field, written in its callbacks under the perf
        // core's exclusion (the type invariant).
        unsafe { (*self.0.get()).hw.state = state };
    }

    /// `hw.config` (the PMU's own word of the event).
    pub(crate) fn hw_config(&self) -> u64 {
        // SAFETY: the PMU's field, read in its callbacks (the type
        // invariant).
        unsafe { (*self.0.get()).hw.__bindgen_anon_1.__bindgen_anon_1.config }
    }

    /// The task whose context holds the event (`ctx->task`), for
    /// identity: the one it was opened or inherited for, or another of its
    /// fork family once the perf core swapped their contexts at a context
    /// switch (`perf_event_context_sched_out()`, which leaves the event
    /// running); null for a CPU-wide event, `TASK_TOMBSTONE` once the task
    /// exited.
    pub(crate) fn ctx_task(&self) -> *const bindings::task_struct {
        // SAFETY: an event keeps its context while the PMU sees it (the
        // type invariant). The perf core writes `ctx->task` with
        // WRITE_ONCE() under `ctx->lock`; a volatile read of the aligned
        // word is READ_ONCE(), whole.
        unsafe { core::ptr::read_volatile(&raw const (*(*self.0.get()).ctx).task).cast_const() }
    }

    /// Whether the event is attached to a task (`PERF_ATTACH_TASK`), not
    /// CPU-wide.
    pub(crate) fn attached_to_task(&self) -> bool {
        // SAFETY: set at open, before `event_init`.
        unsafe { (*self.0.get()).attach_state & bindings::PAX_PERF_ATTACH_TASK != 0 }
    }

    /// Sets `hw.config` (the PMU's own word of the event).
    pub(crate) fn set_hw_config(&self, config: u64) {
        // SAFETY: as `set_hw_state`.
        unsafe { (*self.0.get()).hw.__bindgen_anon_1.__bindgen_anon_1.config = config };
    }
}
