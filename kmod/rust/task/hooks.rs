// SPDX-License-Identifier: GPL-2.0
//! Where a tracer of user code learns that the traced task entered or left
//! the kernel, registered as one [`Registration`] for a [`UserHooks`]
//! implementation:
//! - the debug trap: a die notifier for `DIE_DEBUG` (`exc_debug_user()` ->
//!   `notify_debug()`, interrupts off), for single-step traps (DR6.BS) of
//!   TF the kernel set (`TIF_FORCED_TF`) and no debugger did
//!   (`TIF_SINGLESTEP`);
//! - the system-call exit: the `sys_exit` tracepoint (`syscall_exit_work()`,
//!   before signals are handled): every system call's return address, and
//!   where `execve()` starts the new program;
//! - signal delivery: a kprobe on `signal_setup_done()`, after
//!   `handle_signal()` saved the interrupted state in the 64-bit frame at
//!   the user stack pointer, pointed the IP at the handler and cleared TF;
//! - the context switch out: the `sched_switch` tracepoint (`__schedule()`,
//!   before `context_switch()`), with the incoming task;
//! - the context switch in: a kprobe on `__perf_event_task_sched_in()`,
//!   which `finish_task_switch()` calls on the incoming task before
//!   `finish_task()` lets the outgoing one run again (only while perf has
//!   task events: `perf_sched_events`), the point where a tracer learns
//!   that the perf core moved a running event from one task to the other
//!   without stopping it (a context swap, `perf_event_context_sched_out()`).
//!
//! Every hook runs with interrupts off on the task's CPU, never from NMI.

use core::marker::PhantomData;
use kernel::ffi::{c_int, c_long, c_ulong, c_void};
use kernel::prelude::*;
use kernel::types::Opaque;

use super::{current, read_user, IrqsOff, SwitchingTask, UserRegs};
use crate::bindings;

/// What a tracer of user code does at each hook; see the module
/// documentation for when each runs. Interrupts are off in all five.
pub(crate) trait UserHooks: 'static {
    /// A single-step trap of the tracer's TF in user code: the current
    /// task's instruction before `regs.ip()` ran. The tracer keeps TF in
    /// `regs`, or disarms it ([`current::disarm`]).
    fn debug_trap(regs: UserRegs);

    /// A system call returns to user code: `regs` is the current task's
    /// user frame (64-bit code), `ret` the call's return value.
    fn syscall_exit(regs: UserRegs, ret: i64);

    /// A signal handler is about to run in the current task: `regs` (its
    /// user frame, 64-bit) points at the handler; `interrupted` is the IP
    /// the frame saved, if it can be read.
    fn signal_delivered(regs: UserRegs, interrupted: Option<u64>);

    /// The current task is about to be switched out on this CPU for
    /// `next`, which cannot run until the hook returns.
    fn switching(next: &SwitchingTask<'_>);

    /// The current task was just switched in on this CPU in place of
    /// `prev`, which cannot run until the hook returns.
    fn switched_in(prev: &SwitchingTask<'_>);
}

/// The five hooks of `T`, registered.
///
/// # Invariants
/// Boxed (it never moves) while registered; `notifier`, `kprobe`,
/// `sched_in` and the probes on the tracepoints (`tracepoints`, both
/// non-null) are registered exactly when their `*_on` field says so, and
/// `drop` unregisters them.
pub(crate) struct Registration<T: UserHooks> {
    notifier: Opaque<bindings::notifier_block>,
    kprobe: Opaque<bindings::kprobe>,
    sched_in: Opaque<bindings::kprobe>,
    tracepoints: Tracepoints,
    notifier_on: bool,
    kprobe_on: bool,
    sched_in_on: bool,
    sys_exit_on: bool,
    sched_switch_on: bool,
    _hooks: PhantomData<T>,
}

// SAFETY: the registered structures belong to the kernel once registered;
// this value only unregisters them, from whichever CPU drops it.
unsafe impl<T: UserHooks> Send for Registration<T> {}
// SAFETY: shared references give no access to anything.
unsafe impl<T: UserHooks> Sync for Registration<T> {}

impl<T: UserHooks> Registration<T> {
    /// Registers the five hooks, or none (the error of the first that
    /// failed; `ENOENT` without the `sys_exit` tracepoint, which needs
    /// `CONFIG_FTRACE_SYSCALLS`).
    pub(crate) fn register() -> Result<KBox<Self>> {
        let mut reg = KBox::new(
            Registration {
                notifier: Opaque::new(bindings::notifier_block {
                    notifier_call: Some(on_die::<T>),
                    ..Default::default()
                }),
                kprobe: Opaque::new(bindings::kprobe {
                    symbol_name: c"signal_setup_done".as_ptr().cast(),
                    pre_handler: Some(on_signal_setup_done::<T>),
                    ..Default::default()
                }),
                sched_in: Opaque::new(bindings::kprobe {
                    symbol_name: c"__perf_event_task_sched_in".as_ptr().cast(),
                    pre_handler: Some(on_sched_in::<T>),
                    ..Default::default()
                }),
                tracepoints: Tracepoints {
                    sys_exit: core::ptr::null_mut(),
                    sched_switch: core::ptr::null_mut(),
                },
                notifier_on: false,
                kprobe_on: false,
                sched_in_on: false,
                sys_exit_on: false,
                sched_switch_on: false,
                _hooks: PhantomData,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `find_tracepoints` writes into the `Tracepoints` it is
        // given, during the call.
        unsafe {
            bindings::for_each_kernel_tracepoint(
                Some(find_tracepoints),
                (&raw mut reg.tracepoints).cast(),
            )
        };
        if reg.tracepoints.sys_exit.is_null() || reg.tracepoints.sched_switch.is_null() {
            pr_err!(
                "step_user needs the sys_exit (CONFIG_FTRACE_SYSCALLS) and sched_switch tracepoints\n"
            );
            return Err(ENOENT);
        }
        // SAFETY: the kernel's tracepoint, and a probe of its prototype
        // (`void (*)(void *, struct pt_regs *, long)`).
        let r = unsafe {
            bindings::tracepoint_probe_register(
                reg.tracepoints.sys_exit,
                on_sys_exit::<T> as *mut c_void,
                core::ptr::null_mut(),
            )
        };
        registered(r, "sys_exit tracepoint")?;
        // INVARIANT: registered; `drop` unregisters it from here on.
        reg.sys_exit_on = true;
        // SAFETY: the kernel's tracepoint, and a probe of its prototype
        // (`void (*)(void *, bool, struct task_struct *, struct task_struct
        // *, unsigned int)`).
        let r = unsafe {
            bindings::tracepoint_probe_register(
                reg.tracepoints.sched_switch,
                on_sched_switch::<T> as *mut c_void,
                core::ptr::null_mut(),
            )
        };
        registered(r, "sched_switch tracepoint")?;
        reg.sched_switch_on = true;
        // SAFETY: a kprobe naming a symbol, boxed until unregistered.
        let r = unsafe { bindings::register_kprobe(reg.kprobe.get()) };
        registered(r, "kprobe on signal_setup_done")?;
        reg.kprobe_on = true;
        // SAFETY: as the kprobe above.
        let r = unsafe { bindings::register_kprobe(reg.sched_in.get()) };
        registered(r, "kprobe on __perf_event_task_sched_in")?;
        reg.sched_in_on = true;
        // SAFETY: a notifier block, boxed until unregistered.
        let r = unsafe { bindings::register_die_notifier(reg.notifier.get()) };
        registered(r, "register_die_notifier")?;
        reg.notifier_on = true;
        Ok(reg)
    }
}

impl<T: UserHooks> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: each registered above (the type invariant), unregistered
        // once; the calls wait for the hooks running now.
        unsafe {
            if self.notifier_on {
                bindings::unregister_die_notifier(self.notifier.get());
            }
            if self.sched_in_on {
                bindings::unregister_kprobe(self.sched_in.get());
            }
            if self.kprobe_on {
                bindings::unregister_kprobe(self.kprobe.get());
            }
            if self.sched_switch_on {
                bindings::tracepoint_probe_unregister(
                    self.tracepoints.sched_switch,
                    on_sched_switch::<T> as *mut c_void,
                    core::ptr::null_mut(),
                );
            }
            if self.sys_exit_on {
                bindings::tracepoint_probe_unregister(
                    self.tracepoints.sys_exit,
                    on_sys_exit::<T> as *mut c_void,
                    core::ptr::null_mut(),
                );
            }
            if self.sched_switch_on || self.sys_exit_on {
                bindings::pax_tracepoint_synchronize_unregister();
            }
        }
    }
}

/// `Ok` for a registration call that returned 0; its error otherwise,
/// logged as `what`'s.
fn registered(r: c_int, what: &str) -> Result {
    if r != 0 {
        pr_err!("{}: {}\n", what, r);
        return Err(Error::from_errno(r));
    }
    Ok(())
}

/// The kernel's tracepoints the hooks probe, found by name.
struct Tracepoints {
    sys_exit: *mut bindings::tracepoint,
    sched_switch: *mut bindings::tracepoint,
}

/// `for_each_kernel_tracepoint()`'s callback: notes `sys_exit` and
/// `sched_switch`.
///
/// # Safety
/// `tp` is a kernel tracepoint; `found` points to a [`Tracepoints`].
unsafe extern "C" fn find_tracepoints(tp: *mut bindings::tracepoint, found: *mut c_void) {
    // SAFETY: the tracepoint's name is a NUL-terminated string; `found` is
    // the caller's (this function's `# Safety`), not otherwise borrowed
    // during the walk.
    unsafe {
        let found = &mut *found.cast::<Tracepoints>();
        let name = core::ffi::CStr::from_ptr((*tp).name.cast::<core::ffi::c_char>());
        if name == c"sys_exit" {
            found.sys_exit = tp;
        } else if name == c"sched_switch" {
            found.sched_switch = tp;
        }
    }
}

/// The die notifier: single-step traps of the tracer's TF.
///
/// # Safety
/// Called by the die notifier chain: `data` is its `struct die_args`,
/// whose `err` for `DIE_DEBUG` points to DR6 (`notify_debug()`).
unsafe extern "C" fn on_die<T: UserHooks>(
    _nb: *mut bindings::notifier_block,
    val: c_ulong,
    data: *mut c_void,
) -> c_int {
    const DONE: c_int = bindings::PAX_NOTIFY_DONE as c_int;
    if val != bindings::die_val_DIE_DEBUG as c_ulong || data.is_null() {
        return DONE;
    }
    // SAFETY: the chain's arguments (this function's `# Safety`), for the
    // duration of the call.
    let (regs, dr6) = unsafe {
        let args = &*data.cast::<bindings::die_args>();
        (UserRegs::from_raw(args.regs), args.err as *mut c_ulong)
    };
    let Some(regs) = regs else {
        return DONE;
    };
    // SAFETY: DR6 as the trap saved it (see above).
    if dr6.is_null() || !regs.user_mode() || unsafe { *dr6 } & bindings::PAX_DR_STEP as c_ulong == 0
    {
        return DONE;
    }
    // Not TF the tracer set: a debugger's, or the program's own (POPF).
    if !current::forced_tf() || current::singlestepped() {
        return DONE;
    }
    T::debug_trap(regs);
    // SAFETY: as above; the step is handled, no SIGTRAP for it.
    unsafe { *dr6 &= !(bindings::PAX_DR_STEP as c_ulong) };
    bindings::PAX_NOTIFY_STOP as c_int
}

/// The `sys_exit` tracepoint's probe.
///
/// # Safety
/// Called by the tracepoint with the exiting system call's frame.
unsafe extern "C" fn on_sys_exit<T: UserHooks>(
    _data: *mut c_void,
    regs: *mut bindings::pt_regs,
    ret: c_long,
) {
    let _irqs = IrqsOff::new();
    // SAFETY: the tracepoint's frame, for the call.
    let Some(regs) = (unsafe { UserRegs::from_raw(regs) }) else {
        return;
    };
    let own = current::user_regs().is_some_and(|r| r.as_ptr() == regs.as_ptr());
    if own && regs.user_64bit_mode() {
        T::syscall_exit(regs, ret as i64);
    }
}

/// The kprobe on `signal_setup_done(int failed, struct ksignal *ksig, int
/// stepping)`.
///
/// # Safety
/// Called by the kprobe at the function's entry: `kregs` holds its
/// arguments (`di`, `si`).
unsafe extern "C" fn on_signal_setup_done<T: UserHooks>(
    _p: *mut bindings::kprobe,
    kregs: *mut bindings::pt_regs,
) -> c_int {
    // SAFETY: the probed call's registers (this function's `# Safety`).
    let (failed, ksig) = unsafe { ((*kregs).di, (*kregs).si as *mut bindings::ksignal) };
    // No frame when it failed; ia32 and x32 frames are not traced.
    // SAFETY: `ksig` is the call's signal, for the call.
    if failed != 0 || ksig.is_null() || !unsafe { bindings::pax_ksignal_native(ksig) } {
        return 0;
    }
    let _irqs = IrqsOff::new();
    let Some(regs) = current::user_regs() else {
        return 0;
    };
    if !regs.user_64bit_mode() {
        return 0;
    }
    // SAFETY: computes an address in the user frame; no access.
    let at = unsafe { bindings::pax_rt_sigframe_ip(regs.sp() as c_ulong) };
    let mut saved = [0u8; 8];
    let interrupted = read_user(at as u64, &mut saved).then(|| u64::from_ne_bytes(saved));
    T::signal_delivered(regs, interrupted);
    0
}

/// The kprobe on `__perf_event_task_sched_in(struct task_struct *prev,
/// struct task_struct *task)`.
///
/// # Safety
/// Called by the kprobe at the function's entry: `kregs` holds its
/// arguments (`di`, `si`), from `finish_task_switch()` on the incoming
/// task, interrupts off, before `finish_task(prev)`.
unsafe extern "C" fn on_sched_in<T: UserHooks>(
    _p: *mut bindings::kprobe,
    kregs: *mut bindings::pt_regs,
) -> c_int {
    // SAFETY: the probed call's `prev`, switched out on this CPU and held
    // off it until `finish_task()` (this function's `# Safety`); the value
    // lives for this call only.
    let prev = unsafe { SwitchingTask::from_raw((*kregs).di as *mut bindings::task_struct) };
    // Off already (the runqueue lock); kept off whatever the caller.
    let _irqs = IrqsOff::new();
    if let Some(prev) = prev {
        T::switched_in(&prev);
    }
    0
}

/// The `sched_switch` tracepoint's probe.
///
/// # Safety
/// Called by the tracepoint from `__schedule()` with the runqueue lock held,
/// interrupts off: `prev` is the current task, `next` this CPU's pick,
/// which cannot run anywhere before `context_switch()`.
unsafe extern "C" fn on_sched_switch<T: UserHooks>(
    _data: *mut c_void,
    _preempt: bool,
    _prev: *mut bindings::task_struct,
    next: *mut bindings::task_struct,
    _prev_state: kernel::ffi::c_uint,
) {
    // SAFETY: the switch's incoming task, held off every CPU until
    // `context_switch()` (this function's `# Safety`); the value lives for
    // this call only.
    let next = unsafe { SwitchingTask::from_raw(next) };
    // Off already (the runqueue lock); kept off whatever the caller.
    let _irqs = IrqsOff::new();
    if let Some(next) = next {
        T::switching(&next);
    }
}
