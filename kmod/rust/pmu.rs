// SPDX-License-Identifier: GPL-2.0
//! The PMU the perf core drives: `struct pmu` and its callbacks over each
//! CPU's [`PaxCpu`], as Intel PT's (arch/x86/events/intel/pt.c) over its
//! per-CPU `struct pt`, with the AUX buffers of [`crate::buffer`].

use kernel::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};

use kernel::prelude::*;
use kernel::types::Opaque;
use perfaux::pmu::ef;
use perfaux::ring::OutputSink;

use crate::cpu::PaxCpu;
use crate::percpu::PerCpu;
use crate::{bindings, buffer, sysfs};

/// `perf_output_copy()` (kernel/events/internal.h): copies `len` bytes
/// into the output handle's record, returns how many did not fit.
pub(crate) type OutputCopy = unsafe extern "C" fn(
    handle: *mut bindings::perf_output_handle,
    buf: *const c_void,
    len: c_uint,
) -> c_uint;

/// The module's PMU: the `struct pmu` registered with the perf core and the
/// driver of every CPU.
///
/// # Invariants
/// Lives in memory that does not move (a `KBox`) from before
/// `perf_pmu_register()` until after `perf_pmu_unregister()`; the perf core
/// calls the callbacks only with events of this `pmu`, so `event->pmu`
/// leads back here.
pub(crate) struct Pax {
    pmu: Opaque<bindings::pmu>,
    cpus: PerCpu<PaxCpu>,
    output_copy: OutputCopy,
}

// SAFETY: `pmu` belongs to the perf core once registered and is not touched
// here after; each CPU's driver is touched on that CPU only (PaxCpu's
// rules); `output_copy` is a function.
unsafe impl Send for Pax {}
// SAFETY: as for `Send`.
unsafe impl Sync for Pax {}

// The kernel's PERF_EF_* are the crate's.
const _: () = assert!(
    bindings::PERF_EF_START == ef::START
        && bindings::PERF_EF_UPDATE == ef::UPDATE
        && bindings::PERF_HES_STOPPED == 1
);

/// `hw.state` after a start (`pt_event_start`): running with a transaction
/// open, else stopped (no buffer: unmapped, or full).
///
/// # Safety
/// `event` is the perf core's event, in one of its callbacks.
unsafe fn set_started(event: *mut bindings::perf_event, c: &PaxCpu) {
    let state = if c.tracing() {
        0
    } else {
        bindings::PERF_HES_STOPPED as c_int
    };
    // SAFETY: the perf core's event (this function's `# Safety`).
    unsafe { (*event).hw.state = state };
}

impl Pax {
    /// The PMU, not yet registered, with each CPU's driver built (ticking
    /// every `period_ns` once its CPU is online, a PSB+ every `psb_period`
    /// bytes) and `snapshot_aux` writing through `output_copy`.
    pub(crate) fn new(
        period_ns: i64,
        psb_period: u64,
        output_copy: OutputCopy,
    ) -> Result<KBox<Pax>> {
        let cpus = PerCpu::new(|_, p| {
            // SAFETY: per-CPU memory, which does not move until the
            // PerCpu drops it.
            unsafe { PaxCpu::init(p, period_ns, psb_period) }
        })?;
        let pmu = bindings::pmu {
            module: (&raw const crate::params::__this_module).cast_mut().cast(),
            attr_groups: sysfs::groups(),
            task_ctx_nr: bindings::perf_event_task_context_perf_sw_context as c_int,
            capabilities: (bindings::PERF_PMU_CAP_EXCLUSIVE | bindings::PERF_PMU_CAP_ITRACE)
                as c_int,
            event_init: Some(event_init),
            add: Some(add),
            del: Some(del),
            start: Some(start),
            stop: Some(stop),
            read: Some(read),
            setup_aux: Some(buffer::setup_aux),
            free_aux: Some(buffer::free_aux),
            snapshot_aux: Some(snapshot_aux),
            ..Default::default()
        };
        Ok(KBox::new(
            Pax {
                pmu: Opaque::new(pmu),
                cpus,
                output_copy,
            },
            kernel::alloc::flags::GFP_KERNEL,
        )?)
    }

    /// Registers the PMU as `name` (`perf_pmu_register()`); it returns the
    /// PMU's type.
    ///
    /// # Safety
    /// `self` does not move until [`Pax::unregister`]; `name` lives as long.
    pub(crate) unsafe fn register(&self, name: *const c_char) -> Result<c_int> {
        // SAFETY: `pmu` is filled in and stays put (this function's
        // `# Safety`).
        let r = unsafe { bindings::perf_pmu_register(self.pmu.get(), name, -1) };
        if r != 0 {
            return Err(Error::from_errno(r));
        }
        // SAFETY: registered: `type` is set and no longer changes.
        Ok(unsafe { (*self.pmu.get()).type_ })
    }

    /// `perf_pmu_unregister()`. No event is left: `pmu.module` holds the
    /// module while one exists.
    ///
    /// # Safety
    /// Registered by [`Pax::register`], once.
    pub(crate) unsafe fn unregister(&self) {
        // SAFETY: registered (this function's `# Safety`).
        unsafe { bindings::perf_pmu_unregister(self.pmu.get()) };
    }

    /// The driver of CPU `cpu`, if it is a possible CPU.
    pub(crate) fn cpu(&self, cpu: c_uint) -> Option<&PaxCpu> {
        self.cpus.get(cpu)
    }

    /// The module's PMU behind an event of it.
    ///
    /// # Safety
    /// `event` is an event of this PMU, alive during the call (the perf
    /// core's callbacks).
    unsafe fn of<'a>(event: *mut bindings::perf_event) -> &'a Pax {
        // SAFETY: `event->pmu` is the `pmu` field of the Pax (the type
        // invariant; `Opaque` is transparent), alive while events are.
        unsafe { &*kernel::container_of!((*event).pmu, Pax, pmu) }
    }

    /// This CPU's driver.
    ///
    /// # Safety
    /// Interrupts off (the PMU callbacks, the PMI), for as long as the
    /// reference is used.
    unsafe fn this_cpu(&self) -> &PaxCpu {
        // SAFETY: interrupts off: no preemption (this function's `# Safety`).
        unsafe { self.cpus.this_cpu() }
    }
}

/// `pmu->event_init` (`pt_event_init`): events of this PMU whose config the
/// tracer implements.
///
/// # Safety
/// Called by the perf core for an event being opened on this PMU.
unsafe extern "C" fn event_init(event: *mut bindings::perf_event) -> c_int {
    // SAFETY: the perf core's event, being initialized for this PMU.
    let (pax, event) = unsafe { (Pax::of(event), &mut *event) };
    // SAFETY: registered: `type` no longer changes.
    if event.attr.type_ != unsafe { (*pax.pmu.get()).type_ } as u32 {
        return ENOENT.to_errno();
    }
    // pt_event_valid(): the Intel PT format bits this tracer implements.
    if perfaux::pt::config::PtConfig::from_attr(event.attr.config).is_err() {
        return EINVAL.to_errno();
    }
    // has_branch_stack().
    if event.attr.sample_type & bindings::perf_event_sample_format_PERF_SAMPLE_BRANCH_STACK as u64
        != 0
    {
        return -(bindings::EOPNOTSUPP as c_int);
    }
    event.hw.__bindgen_anon_1.__bindgen_anon_1.config = 0;
    0
}

/// `pmu->add` (`pt_event_add`): one PT event per CPU; with
/// `PERF_EF_START`, opens the AUX transaction and starts tracing.
///
/// # Safety
/// Called by the perf core for an event of this PMU, with interrupts off on
/// the event's CPU.
unsafe extern "C" fn add(event: *mut bindings::perf_event, flags: c_int) -> c_int {
    // SAFETY: a callback: interrupts are off, `event` alive.
    let c = unsafe { Pax::of(event).this_cpu() };
    if !c.event().is_null() {
        return EBUSY.to_errno();
    }
    c.set_event(event);
    // pt_event_add() reads the event's id and attr.config; this PMU does
    // not offer aux_pause, so the event is never paused.
    // SAFETY: the perf core's event, alive during its callback.
    let (id, config) = unsafe { ((*event).id, (*event).attr.config) };
    if let Err(e) = c.pmu().add(id, config, false, flags as u32 & ef::START) {
        // A start that cannot trace (no AUX buffer) fails the add.
        c.set_event(core::ptr::null_mut());
        // SAFETY: the perf core's event.
        unsafe { (*event).hw.state = bindings::PERF_HES_STOPPED as c_int };
        return if e == perfaux::Error::Busy {
            EBUSY
        } else {
            EINVAL
        }
        .to_errno();
    }
    // SAFETY: the perf core's event, in its callback.
    unsafe { set_started(event, c) };
    0
}

/// `pmu->del`: stops tracing and ends the transaction.
///
/// # Safety
/// Called by the perf core for an event of this PMU, with interrupts off on
/// the event's CPU.
unsafe extern "C" fn del(event: *mut bindings::perf_event, _flags: c_int) {
    // SAFETY: a callback: interrupts off, `event` alive.
    unsafe { stop(event, bindings::PERF_EF_UPDATE as c_int) };
    // SAFETY: as above.
    let c = unsafe { Pax::of(event).this_cpu() };
    if c.event() == event {
        c.set_event(core::ptr::null_mut());
    }
}

/// `pmu->start` (`pt_event_start`): a new transaction if none is open.
///
/// # Safety
/// Called by the perf core for an event of this PMU, with interrupts off on
/// the event's CPU.
unsafe extern "C" fn start(event: *mut bindings::perf_event, _flags: c_int) {
    // SAFETY: a callback: interrupts off, `event` alive.
    let c = unsafe { Pax::of(event).this_cpu() };
    if perfaux::warn_on_once!(
        c.event() != event,
        "start of an event not added on this CPU"
    ) {
        return;
    }
    c.pmu().start(false, 0);
    // SAFETY: the perf core's event, in its callback.
    unsafe { set_started(event, c) };
}

/// `pmu->stop` (`pt_event_stop`): with `PERF_EF_UPDATE`, ends the
/// transaction.
///
/// # Safety
/// Called by the perf core for an event of this PMU, with interrupts off on
/// the event's CPU.
unsafe extern "C" fn stop(event: *mut bindings::perf_event, flags: c_int) {
    // SAFETY: a callback: interrupts off, `event` alive.
    let c = unsafe { Pax::of(event).this_cpu() };
    if c.event() != event {
        return;
    }
    c.pmu().stop(false, flags as u32 & ef::UPDATE);
    // SAFETY: the perf core's event.
    unsafe { (*event).hw.state |= bindings::PERF_HES_STOPPED as c_int };
}

/// `pmu->read`: a tracer has no count.
///
/// # Safety
/// Called by the perf core for an event of this PMU, with interrupts off on
/// the event's CPU.
unsafe extern "C" fn read(_event: *mut bindings::perf_event) {}

/// The sample being written, through `perf_output_copy()`.
struct HandleSink {
    copy: OutputCopy,
    handle: *mut bindings::perf_output_handle,
}

impl OutputSink for HandleSink {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        let len = bytes.len().min(c_uint::MAX as usize);
        // SAFETY: the handle of the record `snapshot_aux` is writing, `len`
        // readable bytes.
        let left = unsafe { (self.copy)(self.handle, bytes.as_ptr().cast(), len as c_uint) };
        bytes.len() - len + (left as usize).min(len)
    }
}

/// `pmu->snapshot_aux` (`pt_event_snapshot_aux`), from the PMI: the newest
/// `size` trace bytes into the sample's record.
///
/// # Safety
/// Called by the perf core in the PMI (or with interrupts off) on the
/// sampler's CPU, where `event`, this PMU's AUX event, runs; `handle` is the
/// sample's open output handle.
unsafe extern "C" fn snapshot_aux(
    event: *mut bindings::perf_event,
    handle: *mut bindings::perf_output_handle,
    size: c_ulong,
) -> c_long {
    // SAFETY: the PMI (NMI) on the sampler's CPU, where this AUX event
    // runs; `event` alive.
    let pax = unsafe { Pax::of(event) };
    // SAFETY: as above: interrupts are off.
    let c = unsafe { pax.this_cpu() };
    let mut sink = HandleSink {
        copy: pax.output_copy,
        handle,
    };
    let r = c.pmu().snapshot_aux(&mut sink, size as u64);
    if let Ok(n @ 1..) = r {
        return n.min(c_long::MAX as u64) as c_long;
    }
    // Nothing to copy: no transaction is open here (the AUX area is being
    // unmapped). Zeros instead of Intel PT's WARN, so the sample's AUX
    // block is whole (`copy_zeros` says why).
    perfaux::aux::copy_zeros(&mut sink, size as u64).min(c_long::MAX as u64) as c_long
}
