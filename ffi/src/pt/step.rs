// SPDX-License-Identifier: MIT OR Apache-2.0
//! The single-step tracer in C (`struct perfaux_stepper`): one CPU's view
//! of the thread it single-steps (`perfaux::soft_pt::step::Stepper`), writing
//! into that CPU's software tracer (`struct perfaux_pt_cpu`). A kernel
//! module sets EFLAGS.TF on the traced thread's return to user mode and
//! calls, with interrupts off on the stepper's CPU (never from NMI):
//! - `perfaux_step` from its debug-trap handler, with the bytes of the
//!   instruction at `perfaux_step_pending`;
//! - `perfaux_step_leave` when the thread entered the kernel (system-call
//!   exit, signal delivery, the PMI of a sample, a context switch);
//! - `perfaux_step_resume` with where the kernel returns it to user code
//!   (a thread first seen inside a system call: its return address; the
//!   system-call exit corrects it).

use core::ffi::c_int;
use core::mem::{align_of, size_of};
use core::ptr::addr_of_mut;

use perfaux::Error;
use perfaux::soft_pt::step::{Entry, StepError, Stepper};
use perfaux::soft_pt::stream::TraceEvent;

use super::cpu::{CpuBox, cpu_ref, perfaux_pt_cpu};
use crate::storage::{live_box, usable};

/// Words of `struct perfaux_stepper`.
pub const PERFAUX_STEPPER_WORDS: usize = 8;
/// Size in bytes of `struct perfaux_stepper` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_STEPPER_SIZE: usize = PERFAUX_STEPPER_WORDS * 8;

/// `perfaux_step_leave`: a system call instruction at `ip` ran, as the
/// system-call exit path reports it (`ip`: the return address minus 2,
/// before the kernel changed it for a restart, `execve` or `sigreturn`).
pub const PERFAUX_STEP_SYSCALL: u32 = 1;
/// `perfaux_step_leave`: the kernel was entered with `ip` saved as the
/// thread's next user instruction (an interrupt, exception, signal or
/// context switch).
pub const PERFAUX_STEP_INTERRUPTED: u32 = 2;

/// Storage of one CPU's single-step tracer. Opaque.
#[repr(C)]
pub struct perfaux_stepper {
    /// Opaque.
    pub opaque: [u64; PERFAUX_STEPPER_WORDS],
}

/// What the thread's trace holds so far, from `perfaux_step_get_stats`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct perfaux_step_stats {
    /// Instructions retired: what a decoder of the trace counts.
    pub retired: u64,
    /// Traps where the trace had to resynchronize (an instruction that did
    /// not decode, a kernel entry nobody reported): each lost an instruction.
    pub resyncs: u64,
}

const _: () = assert!(size_of::<perfaux_step_stats>() == 16);
const _: () = assert!(core::mem::offset_of!(perfaux_step_stats, retired) == 0);
const _: () = assert!(core::mem::offset_of!(perfaux_step_stats, resyncs) == 8);

/// What `struct perfaux_stepper` holds.
#[repr(C)]
struct StepperBox {
    live: u64,
    stepper: Stepper,
    resyncs: u64,
}

/// `-ENOENT`: the stepper follows no thread (an errno the engine's
/// `Error` has no use for elsewhere).
const NOT_FOLLOWING: c_int = -2;

const STEPPER_LIVE: u64 = 0x7065_7266_7374_6570; // "perfstep"

const _: () = {
    assert!(size_of::<StepperBox>() <= size_of::<perfaux_stepper>());
    assert!(align_of::<StepperBox>() <= align_of::<perfaux_stepper>());
};

/// The initialized stepper at `p`, if it is one.
///
/// # Safety
/// `p` NULL or `struct perfaux_stepper` storage that no other call uses
/// while the returned reference lives (the callers' contract: one CPU,
/// interrupts off, never NMI).
unsafe fn stepper_mut<'a>(p: *mut perfaux_stepper) -> Option<&'a mut StepperBox> {
    // SAFETY: NULL or stepper storage (this function's `# Safety`); the
    // live word says it holds an initialized box, and nothing else uses it
    // now, so the exclusive reference is sound.
    unsafe { live_box::<_, StepperBox>(p, STEPPER_LIVE).map(|b| &mut *b) }
}

/// Initializes a stepper that follows no thread yet. Returns 0, `-EINVAL`
/// for NULL or misaligned storage, `-EBUSY` if it is initialized.
///
/// # Safety
/// `stepper` NULL or valid for writes of `sizeof(struct perfaux_stepper)`
/// bytes, not moved while initialized, and used by one call at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_stepper_init(stepper: *mut perfaux_stepper) -> c_int {
    if !usable(stepper) {
        return Error::Invalid.errno();
    }
    // SAFETY: stepper storage, used by this call only (the contract).
    if unsafe { stepper_mut(stepper) }.is_some() {
        return Error::Busy.errno();
    }
    let b = stepper.cast::<StepperBox>();
    // SAFETY: valid storage for a StepperBox (asserted size and alignment);
    // the live word goes last.
    unsafe {
        addr_of_mut!((*b).stepper).write(Stepper::new());
        addr_of_mut!((*b).resyncs).write(0);
        addr_of_mut!((*b).live).write(STEPPER_LIVE);
    }
    0
}

/// Tears a stepper down (its storage may be initialized again). Returns 0,
/// or `-EINVAL` if it is not an initialized stepper.
///
/// # Safety
/// As for `perfaux_stepper_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_stepper_fini(stepper: *mut perfaux_stepper) -> c_int {
    // SAFETY: NULL or stepper storage, one call at a time (the contract).
    let Some(b) = (unsafe { stepper_mut(stepper) }) else {
        return Error::Invalid.errno();
    };
    b.live = 0;
    0
}

/// Feeds `event` to the CPU's tracer, counting the ToPA PMIs it raises.
fn feed<'a>(cpu: &'a CpuBox, pmis: &'a mut u32) -> impl FnMut(TraceEvent) + 'a {
    move |event| {
        cpu.tracer().trace(event);
        *pmis = pmis.saturating_add(cpu.tracer().take_pmi());
    }
}

/// A PMI count as the C functions return it.
fn pmi_count(pmis: u32) -> c_int {
    pmis.min(i32::MAX as u32) as c_int
}

/// The two objects of a call, or `-EINVAL`.
///
/// # Safety
/// `stepper` as `stepper_mut` needs; `cpu` NULL or PT CPU storage.
unsafe fn both<'a>(
    stepper: *mut perfaux_stepper,
    cpu: *mut perfaux_pt_cpu,
) -> Result<(&'a mut StepperBox, &'a CpuBox), c_int> {
    // SAFETY: the callers pass their own `# Safety` on.
    match unsafe { (stepper_mut(stepper), cpu_ref(cpu)) } {
        (Some(s), Some(c)) => Ok((s, c)),
        _ => Err(Error::Invalid.errno()),
    }
}

/// Where `perfaux_step` needs instruction bytes from: stores the address in
/// `*ip` and returns 0, or returns `-ENOENT` when the stepper follows no
/// thread or the thread's resume address is unknown, `-EINVAL` for a bad
/// argument.
///
/// # Safety
/// `stepper` as for `perfaux_stepper_init`; `ip` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_step_pending(
    stepper: *mut perfaux_stepper,
    ip: *mut u64,
) -> c_int {
    // SAFETY: NULL or stepper storage, one call at a time (the contract).
    let Some(b) = (unsafe { stepper_mut(stepper) }) else {
        return Error::Invalid.errno();
    };
    if !usable(ip) {
        return Error::Invalid.errno();
    }
    match b.stepper.pending() {
        Some(pending) => {
            // SAFETY: non-null, aligned, writable (the contract).
            unsafe { ip.write(pending) };
            0
        }
        None => NOT_FOLLOWING,
    }
}

/// A single-step trap: the instruction at `perfaux_step_pending`, whose
/// first `len` bytes are at `code` (give 15 when you can; fewer where the
/// page ends), ran and the thread now runs `next`; `tsc` is the time stamp
/// counter. Writes its packets into `cpu`'s tracer. Returns the number of
/// ToPA PMIs the writes raised (call `perfaux_pt_handle_pmi` for each),
/// `-ENOENT` when the stepper follows no thread (nothing written),
/// `-EINVAL` for a bad argument. An instruction that does not decode is
/// written as an overflow and counted in `perfaux_step_get_stats`.
///
/// # Safety
/// `stepper` as for `perfaux_stepper_init`; `cpu` NULL or PT CPU storage;
/// `code` readable for `len` bytes (or NULL with `len` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_step(
    stepper: *mut perfaux_stepper,
    cpu: *mut perfaux_pt_cpu,
    code: *const u8,
    len: usize,
    next: u64,
    tsc: u64,
) -> c_int {
    // SAFETY: this function's `# Safety` is `both`'s.
    let (s, c) = match unsafe { both(stepper, cpu) } {
        Ok(pair) => pair,
        Err(e) => return e,
    };
    let code: &[u8] = match (code.is_null(), len) {
        (_, 0) => &[],
        (true, _) => return Error::Invalid.errno(),
        // SAFETY: readable for `len` bytes (the contract); bytes need no
        // alignment.
        (false, len) => unsafe { core::slice::from_raw_parts(code, len) },
    };
    let mut pmis = 0;
    c.tracer().retire_clock(tsc);
    match s.stepper.step(code, next, tsc, &mut feed(c, &mut pmis)) {
        Ok(()) => {}
        Err(StepError::Idle) => return NOT_FOLLOWING,
        Err(StepError::Code(_) | StepError::UnreportedKernelEntry) => s.resyncs += 1,
    }
    pmi_count(pmis)
}

/// The thread entered the kernel: `how` is `PERFAUX_STEP_SYSCALL` with `ip`
/// the system call instruction, or `PERFAUX_STEP_INTERRUPTED` with `ip`
/// the user IP the kernel saved. Writes TIP.PGD, or FUP + TIP.PGD for an
/// interruption before the pending instruction ran; nothing when the
/// thread is not in traced user code. Returns the number of ToPA PMIs the
/// writes raised, or `-EINVAL` for a bad argument.
///
/// # Safety
/// As for `perfaux_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_step_leave(
    stepper: *mut perfaux_stepper,
    cpu: *mut perfaux_pt_cpu,
    how: u32,
    ip: u64,
) -> c_int {
    // SAFETY: this function's `# Safety` is `both`'s.
    let (s, c) = match unsafe { both(stepper, cpu) } {
        Ok(pair) => pair,
        Err(e) => return e,
    };
    let entry = match how {
        PERFAUX_STEP_SYSCALL => Entry::SystemCall(ip),
        PERFAUX_STEP_INTERRUPTED => Entry::Interrupted(ip),
        _ => return Error::Invalid.errno(),
    };
    let mut pmis = 0;
    s.stepper.leave(entry, &mut feed(c, &mut pmis));
    pmi_count(pmis)
}

/// The thread goes back to user code at `ip` (the stepper starts following
/// it if it did not): the next `perfaux_step` writes TSC + TIP.PGE(`ip`)
/// first. Returns 0, or `-EINVAL` for a bad argument.
///
/// # Safety
/// As for `perfaux_stepper_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_step_resume(stepper: *mut perfaux_stepper, ip: u64) -> c_int {
    // SAFETY: NULL or stepper storage, one call at a time (the contract).
    let Some(b) = (unsafe { stepper_mut(stepper) }) else {
        return Error::Invalid.errno();
    };
    b.stepper.resume_at(ip);
    0
}

/// Stops following the thread, which is in the kernel with `ip` saved as
/// its next user instruction (FUP + TIP.PGD if it was in user code before
/// that instruction, TIP.PGD if that instruction trapped). Returns the
/// number of ToPA PMIs the writes raised, or `-EINVAL`.
///
/// # Safety
/// As for `perfaux_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_step_stop(
    stepper: *mut perfaux_stepper,
    cpu: *mut perfaux_pt_cpu,
    ip: u64,
) -> c_int {
    // SAFETY: this function's `# Safety` is `both`'s.
    let (s, c) = match unsafe { both(stepper, cpu) } {
        Ok(pair) => pair,
        Err(e) => return e,
    };
    let mut pmis = 0;
    s.stepper.stop(ip, &mut feed(c, &mut pmis));
    pmi_count(pmis)
}

/// Whether the stepper follows a thread: 1, 0, or `-EINVAL`.
///
/// # Safety
/// As for `perfaux_stepper_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_step_following(stepper: *mut perfaux_stepper) -> c_int {
    // SAFETY: NULL or stepper storage, one call at a time (the contract).
    match unsafe { stepper_mut(stepper) } {
        Some(b) => c_int::from(b.stepper.following()),
        None => Error::Invalid.errno(),
    }
}

/// Stores the stepper's counts in `*stats`. Returns 0 or `-EINVAL`.
///
/// # Safety
/// As for `perfaux_stepper_init`; `stats` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_step_get_stats(
    stepper: *mut perfaux_stepper,
    stats: *mut perfaux_step_stats,
) -> c_int {
    // SAFETY: NULL or stepper storage, one call at a time (the contract).
    let Some(b) = (unsafe { stepper_mut(stepper) }) else {
        return Error::Invalid.errno();
    };
    if stats.is_null() {
        return Error::Invalid.errno();
    }
    let out = perfaux_step_stats {
        retired: b.stepper.retired(),
        resyncs: b.resyncs,
    };
    // SAFETY: non-null and writable (the contract); any alignment.
    unsafe { stats.write_unaligned(out) };
    0
}
