// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PMU callbacks of a PT CPU object (`pmu->add/del/start/stop`,
//! `snapshot_aux`, the ToPA PMI), called by C on the object's CPU.

use core::ffi::c_int;

use perfaux::Error;
use perfaux::pmu::ef;

use super::cpu::{cpu_ref, perfaux_pt_cpu};
use crate::sink::{CSink, perfaux_sink, snapshot_to_c};
use crate::storage::read_in;

/// `PERF_EF_START` (add: start right away).
pub const PERFAUX_EF_START: u32 = 0x01;
/// `PERF_EF_RELOAD`.
pub const PERFAUX_EF_RELOAD: u32 = 0x02;
/// `PERF_EF_UPDATE` (stop/del: publish what was traced).
pub const PERFAUX_EF_UPDATE: u32 = 0x04;
/// `PERF_EF_PAUSE` (stop: pause the trace, `aux_pause`).
pub const PERFAUX_EF_PAUSE: u32 = 0x08;
/// `PERF_EF_RESUME` (start: resume the trace, `aux_resume`).
pub const PERFAUX_EF_RESUME: u32 = 0x10;

const _: () = assert!(
    PERFAUX_EF_START == ef::START
        && PERFAUX_EF_RELOAD == ef::RELOAD
        && PERFAUX_EF_UPDATE == ef::UPDATE
        && PERFAUX_EF_PAUSE == ef::PAUSE
        && PERFAUX_EF_RESUME == ef::RESUME
);

fn flags_ok(flags: u32, allowed: u32) -> bool {
    flags & !allowed == 0
}

/// The PSB frequencies the tracer offers, as the `intel_pt` PMU's
/// `caps/psb_periods` reports them: bit `n` set when `psb_period=n` (a PSB+
/// every `2 KiB << n` of output) is accepted.
pub const PERFAUX_PT_PSB_PERIODS: u32 = 0x3f;

const _: () = assert!(PERFAUX_PT_PSB_PERIODS as u64 == perfaux::pt::config::PSB_PERIODS);

/// `pt_event_init`'s check of an event's `attr.config` (the Intel PT format
/// bits: `pt`, `tsc`, `noretcomp`, `branch`, `psb_period`; `cyc`, `mtc`,
/// `pwr_evt`, `event`, `notnt`, `ptw` and `fup_on_ptw` are not offered):
/// call it when an event is created. Returns 0, or `-EINVAL` for a
/// configuration Linux's `pt_event_valid` would refuse on this tracer.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_pt_check_config(attr_config: u64) -> c_int {
    match perfaux::pt::config::PtConfig::from_attr(attr_config) {
        Ok(_) => 0,
        Err(e) => e.errno(),
    }
}

/// `pmu->add`: puts the PT event `event_id` (a kernel's `event->id`),
/// configured by its `attr_config`, on this CPU (one at a time) and, with
/// `PERFAUX_EF_START`, opens an AUX transaction and starts tracing (not if
/// `aux_paused`). An event's first start on this CPU clears the PSB byte
/// counter, so its trace begins with a PSB+ (`pt_config`). Returns 0,
/// `-EBUSY` if an event is on already, `-EINVAL` for a bad `cpu`, flags or
/// configuration, or the error that kept it from starting (`-ENOSPC`: no
/// room in the buffer).
///
/// # Safety
/// `cpu` NULL or PT CPU storage; called on its CPU with interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_add(
    cpu: *mut perfaux_pt_cpu,
    flags: u32,
    event_id: u64,
    attr_config: u64,
    aux_paused: u32,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_START) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    match b.pmu.add(event_id, attr_config, aux_paused != 0, flags) {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// `pmu->del`: stops tracing and ends the transaction (a `PERF_RECORD_AUX`
/// or the `end` callback). Returns 0 or `-EINVAL`.
///
/// # Safety
/// As `perfaux_pt_add`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_del(cpu: *mut perfaux_pt_cpu, flags: u32) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_UPDATE) {
        return Error::Invalid.errno();
    }
    b.pmu.del();
    0
}

/// `pmu->start`: starts tracing (a new transaction if none is open), or
/// with `PERFAUX_EF_RESUME` resumes a paused trace (`aux_paused` is the
/// event's `hw.aux_paused` after the change). Returns 0 or `-EINVAL`.
///
/// # Safety
/// As `perfaux_pt_add`; `RESUME` may come from PMI context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_start(
    cpu: *mut perfaux_pt_cpu,
    flags: u32,
    aux_paused: u32,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_RELOAD | PERFAUX_EF_RESUME) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    b.pmu.start(aux_paused != 0, flags);
    0
}

/// `pmu->stop`: stops tracing (with `PERFAUX_EF_UPDATE`, ending the
/// transaction), or with `PERFAUX_EF_PAUSE` pauses it. Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// As `perfaux_pt_add`; `PAUSE` may come from PMI context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_stop(
    cpu: *mut perfaux_pt_cpu,
    flags: u32,
    aux_paused: u32,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_UPDATE | PERFAUX_EF_PAUSE) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    b.pmu.stop(aux_paused != 0, flags);
    0
}

/// `pmu->snapshot_aux` (Linux's `pt_event_snapshot_aux`): stops tracing,
/// copies the newest `size` bytes of the buffer, ending at the write
/// position, into `sink`, and restarts tracing if it was on (and not
/// paused). Returns the bytes copied; 0 with no open transaction, a
/// writable buffer, or from inside the driver's own update; `-EFAULT` if
/// the sink took fewer bytes; `-EINVAL` for a bad `cpu` or sink.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; `sink` NULL or readable; called on the PMU's
/// CPU from PMI context or with interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_snapshot_aux(
    cpu: *mut perfaux_pt_cpu,
    sink: *const perfaux_sink,
    size: u64,
) -> i64 {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return i64::from(Error::Invalid.errno());
    };
    // SAFETY: NULL or readable (the caller's contract).
    let Some(sink) = (unsafe { read_in(sink) }).filter(|s| s.copy.is_some()) else {
        return i64::from(Error::Invalid.errno());
    };
    snapshot_to_c(b.pmu.snapshot_aux(&mut CSink(sink), size))
}

/// The ToPA PMI handler (`intel_pt_interrupt`): stops, ends the
/// transaction with what was written, begins the next and traces on (unless
/// stopped). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; called from the PMI on the PMU's CPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_handle_pmi(cpu: *mut perfaux_pt_cpu) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    b.pmu.handle_pmi();
    0
}
