// SPDX-License-Identifier: GPL-2.0
//! The single-step tracer of user code (`step_user`), as perfaux_pt.ko's
//! (kmod/perfaux_step.c): for an event that traces user code only
//! (`intel_pt//u`), the traced thread runs with EFLAGS.TF set, every
//! instruction it retires traps into the debug hook, and the perfaux
//! crate's stepper (`perfaux::soft_pt::step`) writes the Intel PT packets
//! hardware would: TNT for Jcc, TIP for RET and indirect branches, TIP.PGD
//! at a system call, FUP + TIP.PGD where an interrupt stops it, TSC +
//! TIP.PGE where the kernel returns it to user code. A per-task event steps
//! its thread; a CPU-wide one every user thread while it runs on the
//! event's CPU, as Intel PT traces whatever runs.
//!
//! Where the kernel sends the thread back to user code, and the changes it
//! makes to EFLAGS on the way, come from the hooks of `crate::task::hooks`
//! (the system-call exit, signal delivery, the context switch out, for a
//! CPU-wide event, and in: a context swap moves the running event to the
//! incoming thread) and from
//! the PMU's start and stop (context switches, enable, disable): the
//! thread's saved user IP.
//!
//! Every stepper call runs with interrupts off on the stepper's CPU and
//! never from NMI: the stepper is per CPU, for the one thread that CPU's
//! event follows. A trap's work is bounded whatever the thread runs: at
//! most 15 bytes of code read without faulting (an unreadable page makes
//! the step a resync, never a fault), one decode, and at most
//! `perfaux::soft_pt::step::MAX_EVENTS_PER_CALL` trace events.

use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::{AtomicU64, Ordering};

use perfaux::local::LocalPtr;
use perfaux::soft_pt::step::{Entry, StepError, Stepper};
use perfaux::soft_pt::stream::TraceEvent;

use crate::bindings;
use crate::cpu::PaxCpu;
use crate::perf::Event;
use crate::task::hooks::UserHooks;
use crate::task::{current, read_user, Current, SwitchingTask, UserRegs, UserTask};

/// `hw.config` of an event whose user code is single-stepped.
pub(crate) const HW_STEP: u64 = 1;

/// Instructions the steppers traced, summed over CPUs (the `retired`
/// parameter). Relaxed: a statistic, read whole.
pub(crate) static RETIRED: AtomicU64 = AtomicU64::new(0);
/// Single-step traps where the trace resynchronized, an instruction lost
/// (the `resyncs` parameter). Relaxed, as `RETIRED`.
pub(crate) static RESYNCS: AtomicU64 = AtomicU64::new(0);

/// Whether `event` is to be single-stepped: the tracer is on (`step_user`)
/// and the event traces user code only.
pub(crate) fn wanted(event: &Event) -> bool {
    crate::step_user() && event.exclude_kernel() && !event.exclude_user()
}

/// One CPU's stepper and the thread it follows.
///
/// # Invariants
/// Touched on its CPU only, with interrupts off, never from NMI (the PMU
/// callbacks, the hooks of `crate::task::hooks`, `snapshot_aux` from a hard
/// interrupt): no access nests in another.
pub(crate) struct StepCpu {
    stepper: UnsafeCell<Stepper>,
    /// The thread stepped here, or null.
    task: LocalPtr<bindings::task_struct>,
    /// Traps that resynchronized.
    resyncs: Cell<u64>,
    /// `(retired, resyncs)` as last added to the totals.
    counted: Cell<(u64, u64)>,
}

impl StepCpu {
    /// A stepper following no thread.
    pub(crate) fn new() -> StepCpu {
        StepCpu {
            stepper: UnsafeCell::new(Stepper::new()),
            task: LocalPtr::null(),
            resyncs: Cell::new(0),
            counted: Cell::new((0, 0)),
        }
    }

    fn pending(&self) -> Option<u64> {
        // SAFETY: no access nests (the type invariant).
        unsafe { (*self.stepper.get()).pending() }
    }

    /// Runs `f` on the stepper, then adds what it counted to the totals.
    fn with<R>(&self, f: impl FnOnce(&mut Stepper) -> R) -> R {
        // SAFETY: no access nests (the type invariant), so this is the
        // only reference while `f` runs.
        let stepper = unsafe { &mut *self.stepper.get() };
        let r = f(stepper);
        let now = (stepper.retired(), self.resyncs.get());
        let seen = self.counted.replace(now);
        RETIRED.fetch_add(now.0.wrapping_sub(seen.0), Ordering::Relaxed);
        RESYNCS.fetch_add(now.1.wrapping_sub(seen.1), Ordering::Relaxed);
        r
    }
}

impl PaxCpu {
    /// Whether this CPU's event is stepping the current thread now.
    fn stepping(&self) -> bool {
        let event = self.event();
        if self.step().task.load().cast_const() != current::task() || event.is_null() {
            return false;
        }
        // SAFETY: the event added here, alive until `del`, which runs with
        // interrupts off on this CPU and so not during this call.
        let event = unsafe { Event::from_raw(event) };
        event.hw_config() & HW_STEP != 0 && !event.is_stopped()
    }

    /// Feeds the stepper's events to the tracer.
    fn out(&self) -> impl FnMut(TraceEvent) + '_ {
        |e| self.trace(e)
    }

    /// The PMU starts `event` here (a context switch in, an enable,
    /// `enable_on_exec`): follow the thread from where it returns to user
    /// code. The thread is the one whose context holds the event
    /// ([`Event::ctx_task`]), not necessarily the one it was opened or
    /// inherited for: a context swap ([`Self::step_follow`]) moves a task's
    /// events to another task of its fork family for good.
    /// A CPU-wide event follows whichever user thread runs on its CPU
    /// ([`Self::step_switch`]).
    pub(crate) fn step_start(&self, event: &Event) {
        if event.hw_config() & HW_STEP == 0
            || (event.attached_to_task() && event.ctx_task() != current::task())
        {
            return;
        }
        self.step_follow_task(&Current);
    }

    /// Follows `task` from where it returns to user code: the current
    /// thread, or one that cannot run (either side of a context switch).
    fn step_follow_task(&self, task: &impl UserTask) {
        if !task.is_user_task() {
            return;
        }
        let Some(regs) = task.user_regs() else {
            return;
        };
        // A debugger single-steps it, or it is not 64-bit code.
        if task.singlestepped() || !regs.user_64bit_mode() {
            return;
        }
        // In a system call, the IP is its return address, which the
        // system-call exit may still change: it reports the real one.
        self.step().with(|s| s.resume_at(regs.ip()));
        self.step().task.store(task.task().cast_mut());
        task.arm(regs);
    }

    /// A context switch here is about to run `next`. A CPU-wide event
    /// traces every user thread while it runs on its CPU, as Intel PT
    /// does: the outgoing thread leaves the trace where it entered the
    /// kernel, the incoming one joins where it returns to user code.
    /// Per-task events need nothing here: the perf core stops and starts
    /// them (or swaps their contexts, [`Self::step_follow`]).
    fn step_switch(&self, next: &SwitchingTask<'_>) {
        let event = self.event();
        if event.is_null() {
            return;
        }
        // SAFETY: the event added here, alive until `del`, which runs with
        // interrupts off on this CPU and so not during this call.
        let event = unsafe { Event::from_raw(event) };
        if event.hw_config() & HW_STEP == 0 || event.attached_to_task() || event.is_stopped() {
            return;
        }
        self.step_stop();
        self.step_follow_task(next);
    }

    /// The PMU stops the event here: the thread leaves the trace.
    pub(crate) fn step_stop(&self) {
        let task = self.step().task.load();
        if task.is_null() {
            return;
        }
        let mut out = self.out();
        match current::user_regs() {
            Some(regs) if task.cast_const() == current::task() => {
                self.step().with(|s| s.stop(regs.ip(), &mut out));
                current::disarm(regs);
            }
            // Not in its context (cannot happen for a per-task event): an
            // asynchronous exit where it stood.
            _ => {
                let at = self.step().pending().unwrap_or(0);
                self.step().with(|s| s.stop(at, &mut out));
            }
        }
        self.step().task.store(core::ptr::null_mut());
    }

    /// A context switch in, in place of `prev`. The perf core swaps the
    /// contexts of two threads of a fork family whose inherited events are
    /// equivalent (a parent waiting for its child on the same CPU, say):
    /// `perf_event_context_sched_out()` sets `ctx->task` to the incoming
    /// thread and leaves the events running, no `del`, no `add`. Intel PT
    /// traces whatever runs; the stepper follows the event too: it stops
    /// the outgoing thread where it entered the kernel and takes up the
    /// incoming one where it returns to user code, as a stop and a start
    /// would.
    fn step_follow(&self, prev: &SwitchingTask<'_>) {
        let event = self.event();
        if event.is_null() {
            return;
        }
        // SAFETY: the event added here, alive until `del`, which runs with
        // interrupts off on this CPU and so not during this call.
        let event = unsafe { Event::from_raw(event) };
        let task = self.step().task.load().cast_const();
        if event.hw_config() & HW_STEP == 0
            || event.is_stopped()
            || task == current::task()
            || event.ctx_task() != current::task()
        {
            return;
        }
        match prev.user_regs() {
            Some(regs) if task == prev.task() => {
                let mut out = self.out();
                self.step().with(|s| s.stop(regs.ip(), &mut out));
                prev.disarm();
                self.step().task.store(core::ptr::null_mut());
            }
            // Not the thread switched out here (cannot happen): its next
            // trap disarms it.
            _ => self.step_stop(),
        }
        self.step_start(event);
    }

    /// A sample's snapshot is being taken: if it interrupted the stepped
    /// thread in user code, the trace says so first (FUP + TIP.PGD at the
    /// sample's IP, as hardware writes them when the interrupt disables a
    /// user-only trace), so that the snapshot ends at the sample point.
    pub(crate) fn step_sample_point(&self) {
        let Some(ip) = current::interrupted_user_ip() else {
            return;
        };
        if self.stepping() {
            let mut out = self.out();
            self.step()
                .with(|s| s.leave(Entry::Interrupted(ip), &mut out));
        }
    }
}

/// The instruction bytes at user address `ip`: up to 15, fewer where they
/// cannot be read; how many.
fn read_code(ip: u64, code: &mut [u8; 15]) -> usize {
    const PAGE: u64 = 4096;
    let first = (PAGE - ip % PAGE).min(15) as usize;
    if !read_user(ip, &mut code[..first]) {
        return 0;
    }
    if first < 15 && read_user(ip + first as u64, &mut code[first..]) {
        return 15;
    }
    first
}

/// This CPU's driver, from a hook (interrupts off), if the PMU is there.
fn this_cpu() -> Option<&'static PaxCpu> {
    // SAFETY: interrupts are off in every hook (`UserHooks`), so no
    // preemption while the reference is used; the hooks are registered
    // only while the PMU is.
    crate::pax().map(|pax| unsafe { pax.this_cpu_irqs_off() })
}

/// The single-step tracer's hooks.
pub(crate) struct Steps;

impl UserHooks for Steps {
    fn debug_trap(regs: UserRegs) {
        let Some(c) = this_cpu().filter(|c| c.stepping()) else {
            // Armed by an event that no longer steps it here.
            current::disarm(regs);
            return;
        };
        let mut code = [0u8; 15];
        let len = c.step().pending().map_or(0, |ip| read_code(ip, &mut code));
        // SAFETY: reads the TSC; no memory.
        let tsc = unsafe { bindings::pax_rdtsc_ordered() };
        c.pmu().hw().retire_clock(tsc);
        let mut out = c.out();
        let step = c.step();
        step.with(|s| {
            if let Err(StepError::Code(_) | StepError::UnreportedKernelEntry) =
                s.step(&code[..len], regs.ip(), tsc, &mut out)
            {
                step.resyncs.set(step.resyncs.get() + 1);
            }
        });
        // Keep TF whatever the instruction did to it (POPF).
        regs.set_trap_flag(true);
    }

    fn syscall_exit(regs: UserRegs, ret: i64) {
        let Some(c) = this_cpu().filter(|c| c.stepping()) else {
            return;
        };
        let mut out = c.out();
        // SYSCALL, SYSENTER and INT 0x80 are two bytes: the call was at
        // ip - 2.
        let at = regs.ip().wrapping_sub(2);
        c.step().with(|s| s.leave(Entry::SystemCall(at), &mut out));
        // A restart (arch_do_signal_or_restart(), later on this path) runs
        // the system call again; a signal handler taking over first is
        // reported by the signal hook.
        let restart = [
            bindings::PAX_ERESTARTSYS,
            bindings::PAX_ERESTARTNOINTR,
            bindings::PAX_ERESTARTNOHAND,
            bindings::PAX_ERESTART_RESTARTBLOCK,
        ]
        .iter()
        .any(|&e| ret == -(e as i64));
        let resume = if restart { at } else { regs.ip() };
        c.step().with(|s| s.resume_at(resume));
        // execve's start_thread() cleared TF.
        current::arm(regs);
    }

    fn signal_delivered(regs: UserRegs, interrupted: Option<u64>) {
        let Some(c) = this_cpu().filter(|c| c.stepping()) else {
            return;
        };
        // The frame cannot be read: an asynchronous exit where it stood.
        let saved = interrupted.or_else(|| c.step().pending()).unwrap_or(0);
        let mut out = c.out();
        c.step()
            .with(|s| s.leave(Entry::Interrupted(saved), &mut out));
        c.step().with(|s| s.resume_at(regs.ip()));
        current::arm(regs);
    }

    fn switching(next: &SwitchingTask<'_>) {
        if let Some(c) = this_cpu() {
            c.step_switch(next);
        }
    }

    fn switched_in(prev: &SwitchingTask<'_>) {
        if let Some(c) = this_cpu() {
            c.step_follow(prev);
        }
    }
}
