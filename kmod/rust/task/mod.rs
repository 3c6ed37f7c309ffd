// SPDX-License-Identifier: GPL-2.0
//! The traced task as a tracer of user code sees it, in safe Rust: the
//! layer between the kernel's task, register and hook APIs (`bindings`,
//! `helpers.c`) and the single-step tracer (`crate::step`), which names no
//! binding of them itself, as `crate::perf` is to the PMU driver.
//!
//! - [`UserRegs`]: a task's saved user registers (`struct pt_regs`), with
//!   the trap flag the tracer arms;
//! - [`current`]: the running task, its user registers and the thread
//!   flags single-stepping uses (`TIF_FORCED_TF`, `TIF_SINGLESTEP`);
//! - [`SwitchingTask`]: the outgoing or the incoming task of a context
//!   switch on this CPU, which cannot run until the switch completes;
//! - [`UserTask`]: what a tracer does to either of them, the same way;
//! - [`IrqsOff`]: `local_irq_save()` as a guard;
//! - [`read_user`], which is `copy_from_user_nofault()`;
//! - [`hooks`]: the kernel entries and exits a tracer of user code hooks
//!   (the debug trap, the system-call exit, signal delivery, the context
//!   switch in), registered
//!   for a [`hooks::UserHooks`] implementation.
//!
//! What a newer kernel's `rust/kernel` covers of it: `kernel::task` (the
//! current task), `kernel::uaccess`; the register, flag and hook APIs have
//! no mainline counterpart yet.

pub(crate) mod hooks;

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::bindings;

/// EFLAGS.TF, the trap flag: a debug trap after every instruction.
const X86_EFLAGS_TF: u64 = bindings::PAX_X86_EFLAGS_TF as u64;

/// A task's saved user registers: the frame the kernel returns to user
/// code with (`task_pt_regs()`), or a frame a hook was handed.
///
/// # Invariants
/// Points to a `struct pt_regs` that lives at least as long as this value
/// and that only the current task (in the kernel, on its own frame) reads
/// and writes meanwhile, or, the frame of a task that cannot run
/// ([`SwitchingTask`]), only the holder of that task.
#[derive(Clone, Copy)]
pub(crate) struct UserRegs(NonNull<bindings::pt_regs>);

impl UserRegs {
    /// The registers at `regs`.
    ///
    /// # Safety
    /// `regs` is the current task's user frame or a frame a kernel hook
    /// passed for the duration of the hook, and the value does not
    /// outlive that.
    pub(crate) unsafe fn from_raw(regs: *mut bindings::pt_regs) -> Option<UserRegs> {
        // INVARIANT: the caller's frame (this function's `# Safety`).
        NonNull::new(regs).map(UserRegs)
    }

    /// The C pointer, for identity.
    pub(crate) fn as_ptr(self) -> *mut bindings::pt_regs {
        self.0.as_ptr()
    }

    /// The instruction pointer.
    pub(crate) fn ip(self) -> u64 {
        // SAFETY: a live frame (the type invariant).
        unsafe { (*self.0.as_ptr()).ip as u64 }
    }

    /// The stack pointer.
    pub(crate) fn sp(self) -> u64 {
        // SAFETY: as `ip`.
        unsafe { (*self.0.as_ptr()).sp as u64 }
    }

    /// Whether the frame is of user mode (`user_mode()`).
    pub(crate) fn user_mode(self) -> bool {
        // SAFETY: as `ip`.
        unsafe { bindings::pax_user_mode(self.0.as_ptr()) }
    }

    /// Whether the frame is of 64-bit user code (`user_64bit_mode()`).
    pub(crate) fn user_64bit_mode(self) -> bool {
        // SAFETY: as `ip`.
        unsafe { bindings::pax_user_64bit_mode(self.0.as_ptr()) }
    }

    /// Sets or clears EFLAGS.TF in the frame.
    pub(crate) fn set_trap_flag(self, on: bool) {
        // SAFETY: a live frame nobody else writes meanwhile (the type
        // invariant).
        unsafe {
            let flags = &mut (*self.0.as_ptr()).flags;
            if on {
                *flags |= X86_EFLAGS_TF as kernel::ffi::c_ulong;
            } else {
                *flags &= !(X86_EFLAGS_TF as kernel::ffi::c_ulong);
            }
        }
    }
}

/// The running task, as the tracer's hooks see it.
pub(crate) mod current {
    use super::UserRegs;
    use crate::bindings;

    /// The running task, for identity only (`current`).
    pub(crate) fn task() -> *const bindings::task_struct {
        // SAFETY: reads the per-CPU current task pointer.
        unsafe { bindings::pax_current() }
    }

    /// Whether it is a user task (not a kernel thread, and with an mm).
    pub(crate) fn is_user_task() -> bool {
        // SAFETY: reads the current task's flags and mm.
        unsafe { bindings::pax_current_is_user_task() }
    }

    /// Its user registers (`task_pt_regs(current)`), valid while it runs
    /// in the kernel: the caller uses them before returning to user code.
    pub(crate) fn user_regs() -> Option<UserRegs> {
        // SAFETY: the current task's own frame, at the top of its stack,
        // which lives as long as the task; only it writes the frame.
        unsafe { UserRegs::from_raw(bindings::pax_current_user_regs()) }
    }

    /// Whether a debugger single-steps it (`TIF_SINGLESTEP`).
    pub(crate) fn singlestepped() -> bool {
        // SAFETY: reads the current task's thread flags.
        unsafe { bindings::pax_test_singlestep() }
    }

    /// Whether TF in its frame is the kernel's (`TIF_FORCED_TF`).
    pub(crate) fn forced_tf() -> bool {
        // SAFETY: as `singlestepped`.
        unsafe { bindings::pax_test_forced_tf() }
    }

    /// Arms the trap flag in `regs`, its frame, marking it
    /// `TIF_FORCED_TF` (set by the kernel, as ptrace's
    /// `enable_single_step()` marks it), so that `copy_process()` clears TF
    /// in children and ptrace hides it.
    pub(crate) fn arm(regs: UserRegs) {
        // SAFETY: sets a flag of the current task.
        unsafe { bindings::pax_set_forced_tf() };
        regs.set_trap_flag(true);
    }

    /// Disarms what [`arm`] set, if it did.
    pub(crate) fn disarm(regs: UserRegs) {
        // SAFETY: clears a flag of the current task.
        if unsafe { bindings::pax_test_and_clear_forced_tf() } {
            regs.set_trap_flag(false);
        }
    }

    /// Whether the interrupted context of this hard interrupt is user
    /// code, and at which IP (`get_irq_regs()`); `None` outside one.
    pub(crate) fn interrupted_user_ip() -> Option<u64> {
        // SAFETY: context checks, no memory.
        if unsafe { bindings::pax_in_nmi() || !bindings::pax_in_hardirq() } {
            return None;
        }
        // SAFETY: in a hard interrupt: this CPU's irq regs, stable while
        // it runs, used before it returns.
        let regs = unsafe { UserRegs::from_raw(bindings::pax_get_irq_regs()) }?;
        regs.user_mode().then(|| regs.ip())
    }
}

/// A task on either side of a context switch on this CPU, as the hooks
/// hand it: the outgoing one after the switch
/// ([`hooks::UserHooks::switched_in`]), the incoming one before it
/// ([`hooks::UserHooks::switching`]).
///
/// # Invariants
/// Points to a task that is not running and cannot be run anywhere while
/// the value lives: the outgoing task until `finish_task_switch()` clears
/// its `on_cpu` (`finish_task()`), which `try_to_wake_up()` and migration
/// wait for; the incoming one, this CPU's pick under its runqueue lock,
/// until `context_switch()`. So its saved user frame and thread flags
/// change under nobody else.
pub(crate) struct SwitchingTask<'a>(NonNull<bindings::task_struct>, PhantomData<&'a ()>);

impl SwitchingTask<'_> {
    /// The task at `task`.
    ///
    /// # Safety
    /// `task` is the task a context switch on this CPU just switched out,
    /// before `finish_task()`, or the one it is about to switch in, before
    /// `context_switch()`; the value does not outlive that.
    pub(crate) unsafe fn from_raw<'a>(
        task: *mut bindings::task_struct,
    ) -> Option<SwitchingTask<'a>> {
        // INVARIANT: the caller's task (this function's `# Safety`).
        NonNull::new(task).map(|t| SwitchingTask(t, PhantomData))
    }
}

/// What a tracer of user code does to a task it steps, the same for the
/// current task ([`Current`]) and for a [`SwitchingTask`].
pub(crate) trait UserTask {
    /// The C pointer, for identity.
    fn task(&self) -> *const bindings::task_struct;
    /// Whether it is a user task (not a kernel thread, and with an mm).
    fn is_user_task(&self) -> bool;
    /// Its saved user registers (`task_pt_regs()`).
    fn user_regs(&self) -> Option<UserRegs>;
    /// Whether a debugger single-steps it (`TIF_SINGLESTEP`).
    fn singlestepped(&self) -> bool;
    /// Arms the trap flag in `regs`, its frame, marking it `TIF_FORCED_TF`
    /// (set by the kernel, as ptrace's `enable_single_step()` marks it),
    /// so that `copy_process()` clears TF in children and ptrace hides it.
    fn arm(&self, regs: UserRegs);
    /// Disarms what [`UserTask::arm`] set, if it did.
    fn disarm(&self);
}

/// The running task as a [`UserTask`].
pub(crate) struct Current;

impl UserTask for Current {
    fn task(&self) -> *const bindings::task_struct {
        current::task()
    }

    fn is_user_task(&self) -> bool {
        current::is_user_task()
    }

    fn user_regs(&self) -> Option<UserRegs> {
        current::user_regs()
    }

    fn singlestepped(&self) -> bool {
        current::singlestepped()
    }

    fn arm(&self, regs: UserRegs) {
        current::arm(regs);
    }

    fn disarm(&self) {
        if let Some(regs) = current::user_regs() {
            current::disarm(regs);
        }
    }
}

impl UserTask for SwitchingTask<'_> {
    fn task(&self) -> *const bindings::task_struct {
        self.0.as_ptr()
    }

    fn is_user_task(&self) -> bool {
        // SAFETY: reads a live task's flags and mm (the type invariant).
        unsafe { bindings::pax_task_is_user_task(self.0.as_ptr()) }
    }

    fn user_regs(&self) -> Option<UserRegs> {
        // SAFETY: the frame at the top of the task's stack, which lives as
        // long as the task; nobody else writes it while the task cannot
        // run (the type invariant).
        unsafe { UserRegs::from_raw(bindings::pax_task_user_regs(self.0.as_ptr())) }
    }

    fn singlestepped(&self) -> bool {
        // SAFETY: reads a live task's thread flags (the type invariant).
        unsafe { bindings::pax_task_test_singlestep(self.0.as_ptr()) }
    }

    fn arm(&self, regs: UserRegs) {
        // SAFETY: sets a flag of a live task (the type invariant).
        unsafe { bindings::pax_task_set_forced_tf(self.0.as_ptr()) };
        regs.set_trap_flag(true);
    }

    fn disarm(&self) {
        // SAFETY: clears a flag of a live task (the type invariant).
        if unsafe { bindings::pax_task_test_and_clear_forced_tf(self.0.as_ptr()) } {
            if let Some(regs) = self.user_regs() {
                regs.set_trap_flag(false);
            }
        }
    }
}

/// Interrupts off on this CPU until dropped (`local_irq_save()`).
pub(crate) struct IrqsOff(kernel::ffi::c_ulong);

impl IrqsOff {
    /// Turns interrupts off, saving their state.
    pub(crate) fn new() -> IrqsOff {
        // SAFETY: saves and disables; `drop` restores.
        IrqsOff(unsafe { bindings::pax_local_irq_save() })
    }
}

impl Drop for IrqsOff {
    fn drop(&mut self) {
        // SAFETY: the state `new` saved, on the same CPU (interrupts were
        // off since, so no migration).
        unsafe { bindings::pax_local_irq_restore(self.0) };
    }
}

/// Copies user memory at `addr` into `buf` without faulting
/// (`copy_from_user_nofault()`): false if any byte cannot be read.
pub(crate) fn read_user(addr: u64, buf: &mut [u8]) -> bool {
    // SAFETY: `buf` is writable for its length; the kernel checks the user
    // range and never faults on it.
    unsafe {
        bindings::copy_from_user_nofault(
            buf.as_mut_ptr().cast(),
            addr as usize as *const core::ffi::c_void,
            buf.len(),
        ) == 0
    }
}
