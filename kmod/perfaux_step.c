// SPDX-License-Identifier: GPL-2.0
/*
 * perfaux_pt's single-step tracer of user code (module parameter
 * step_user): for an event that traces user code only (intel_pt//u), the
 * traced thread runs with EFLAGS.TF set, every instruction it retires traps
 * into this module's DIE_DEBUG notifier, and the Rust core (perfaux_step:
 * the instruction classifier and the per-thread state) writes the Intel PT
 * packets hardware would: TNT for Jcc, TIP for RET and indirect branches,
 * TIP.PGD at a system call, FUP + TIP.PGD where an interrupt stops it,
 * TSC + TIP.PGE where the kernel returns it to user code. A per-task event
 * steps its thread; a CPU-wide one every user thread while it runs on the
 * event's CPU, as Intel PT traces whatever runs.
 *
 * Where the kernel sends the thread back to user code, and the changes it
 * makes to EFLAGS on the way, come from these hooks:
 * - the sys_exit tracepoint: every system call's return address (execve's
 *   new entry point, rt_sigreturn's interrupted IP, a restart's system
 *   call), and TF again (execve's start_thread() clears it);
 * - a kprobe on signal_setup_done(): signal delivery, after handle_signal()
 *   cleared TF: the interrupted IP saved in the frame, then the handler;
 * - the PMU's start and stop (context switches, enable, disable): the
 *   thread's saved user IP;
 * - a kprobe on __perf_event_task_sched_in(): a context switch that moved
 *   the running event to the incoming thread without a stop and a start
 *   (pax_sched_in());
 * - the sched_switch tracepoint: for a CPU-wide event, the thread leaving
 *   the CPU and the one coming in (pax_sched_switch()).
 * The thread is marked TIF_FORCED_TF (TF set by the kernel, as ptrace's
 * enable_single_step() marks it), so that copy_process() clears TF in
 * children (user_disable_single_step()) and ptrace hides it.
 *
 * Every stepper call runs with interrupts off on the stepper's CPU and
 * never from NMI: the stepper is per CPU, for the one thread that CPU's
 * event follows. A trap's work is bounded whatever the thread runs: at
 * most 15 bytes of code read without faulting (an unreadable page makes
 * the step a resync, never a fault), one decode, and at most
 * perfaux::soft_pt::step::MAX_EVENTS_PER_CALL (6) trace events, each a bounded
 * number of packet bytes; a REP string instruction traps per iteration but
 * does the same bounded work each time.
 */
#include <linux/kdebug.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/signal.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <asm/debugreg.h>
#include <asm/irq_regs.h>
#include <asm/msr.h>
#include <asm/ptrace.h>
#include <asm/sigframe.h>
#include <asm/syscall.h>

#include "perfaux_pt.h"

bool step_user;
module_param(step_user, bool, 0444);
MODULE_PARM_DESC(step_user,
		 "Trace the user code of user-only events (intel_pt//u) by single-stepping it (default 0: the timer tracer)");

/* What the steppers wrote, summed over CPUs (read-only parameters). */
static atomic64_t retired = ATOMIC64_INIT(0);
static atomic64_t resyncs = ATOMIC64_INIT(0);

static int pax_count_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n", (long long)atomic64_read(kp->arg));
}

static const struct kernel_param_ops pax_count_ops = { .get = pax_count_get };
module_param_cb(retired, &pax_count_ops, &retired, 0444);
MODULE_PARM_DESC(retired, "Instructions the single-step tracer has traced (what a decoder counts)");
module_param_cb(resyncs, &pax_count_ops, &resyncs, 0444);
MODULE_PARM_DESC(resyncs, "Single-step traps where the trace resynchronized (an instruction lost)");

/*
 * Per CPU, the stepper's counts as last added to the totals: the stepper's
 * own counts only grow, the difference is what to add.
 */
static DEFINE_PER_CPU(struct perfaux_step_stats, pax_counted);

/* After a stepper call: its ToPA PMIs, and the counts. */
static void pax_step_done(struct pax_cpu *c, int r)
{
	struct perfaux_step_stats *seen = this_cpu_ptr(&pax_counted);
	struct perfaux_step_stats now;

	if (r > 0)
		pax_handle_pmis(c, r);
	if (perfaux_step_get_stats(&c->step, &now))
		return;
	atomic64_add(now.retired - seen->retired, &retired);
	atomic64_add(now.resyncs - seen->resyncs, &resyncs);
	*seen = now;
}

bool pax_step_wanted(struct perf_event *event)
{
	return step_user && event->attr.exclude_kernel && !event->attr.exclude_user;
}

/* Whether this CPU's event is stepping the current thread now. */
static bool pax_stepping(struct pax_cpu *c)
{
	struct perf_event *event = c->event;

	return c->step_task == current && event && (event->hw.config & PAX_HW_STEP) &&
	       !(event->hw.state & PERF_HES_STOPPED);
}

/*
 * TF on in regs, task's saved user frame: the current thread, or one that
 * cannot run.
 */
static void pax_arm(struct task_struct *task, struct pt_regs *regs)
{
	set_tsk_thread_flag(task, TIF_FORCED_TF);
	regs->flags |= X86_EFLAGS_TF;
}

/*
 * TF off for a thread we stepped: the current one, or one that cannot run
 * (its user registers are saved and nobody else writes them).
 */
static void pax_disarm_task(struct task_struct *task)
{
	if (test_and_clear_tsk_thread_flag(task, TIF_FORCED_TF))
		task_pt_regs(task)->flags &= ~X86_EFLAGS_TF;
}

static void pax_disarm(struct pt_regs *regs)
{
	if (test_and_clear_thread_flag(TIF_FORCED_TF))
		regs->flags &= ~X86_EFLAGS_TF;
}

/*
 * Where the stepped thread stands as far as the stepper knows, for a kernel
 * entry whose saved IP cannot be read: an asynchronous exit there (0 when
 * it is already out of user code, where the IP only replaces the resume
 * address).
 */
static u64 pax_pending(struct pax_cpu *c)
{
	u64 pending;

	return perfaux_step_pending(&c->step, &pending) ? 0 : pending;
}

/*
 * Follow task from where it returns to user code: the current thread, or
 * one that cannot run (the incoming thread of a context switch).
 */
static void pax_step_follow(struct pax_cpu *c, struct task_struct *task)
{
	struct pt_regs *regs;

	if ((task->flags & PF_KTHREAD) || !task->mm)
		return;
	regs = task_pt_regs(task);
	/* A debugger single-steps it, or it is not 64-bit code. */
	if (test_tsk_thread_flag(task, TIF_SINGLESTEP) || !user_64bit_mode(regs))
		return;
	/*
	 * In a system call, regs->ip is its return address, which the
	 * system-call exit may still change: it reports the real one.
	 */
	perfaux_step_resume(&c->step, regs->ip);
	c->step_task = task;
	pax_arm(task, regs);
}

/* A CPU-wide event: it traces whichever user thread runs on its CPU. */
static bool pax_cpu_wide(struct perf_event *event)
{
	return !(event->attach_state & PERF_ATTACH_TASK);
}

/*
 * The PMU starts the event on this CPU (pmu->start: a context switch in,
 * an enable, enable_on_exec): follow the thread from where it returns to
 * user code. Per task, the thread is the one whose context holds the event
 * (ctx->task), not necessarily the one it was opened or inherited for
 * (hw.target): a context swap (pax_sched_in()) moves a task's events to
 * another task of the same fork family for good.
 *
 * CPU wide, the thread running here (pax_sched_switch() follows the rest).
 */
void pax_step_start(struct pax_cpu *c, struct perf_event *event)
{
	if (!(event->hw.config & PAX_HW_STEP) ||
	    (!pax_cpu_wide(event) && READ_ONCE(event->ctx->task) != current))
		return;
	pax_step_follow(c, current);
}

/* The PMU stops the event on this CPU: the thread leaves the trace here. */
void pax_step_stop(struct pax_cpu *c)
{
	struct pt_regs *regs;

	if (!c->step_task)
		return;
	if (c->step_task == current) {
		regs = task_pt_regs(current);
		pax_step_done(c, perfaux_step_stop(&c->step, &c->pt, regs->ip));
		pax_disarm(regs);
	} else {
		/* Not in its context (cannot happen for a per-task event). */
		pax_step_done(c, perfaux_step_stop(&c->step, &c->pt, pax_pending(c)));
	}
	c->step_task = NULL;
}

/*
 * A context switch in, on the incoming thread (__perf_event_task_sched_in(),
 * called by finish_task_switch() before finish_task(prev): prev cannot run
 * anywhere yet, its saved registers are ours to change; interrupts off).
 * perf_event_context_sched_out() swaps the contexts of two threads of a fork
 * family whose inherited events are equivalent (a parent waiting for its
 * child on the same CPU, say): it sets ctx->task to the incoming thread and
 * leaves the events running, no ->del, no ->add. Intel PT traces whatever
 * runs; the stepper follows the event too: it stops the outgoing thread
 * where it entered the kernel and takes up the incoming one where it
 * returns to user code, as a stop and a start would.
 */
static int pax_sched_in(struct kprobe *p, struct pt_regs *kregs)
{
	struct task_struct *prev = (struct task_struct *)kregs->di;
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);
	struct perf_event *event = c->event;

	if (!event || !(event->hw.config & PAX_HW_STEP) || (event->hw.state & PERF_HES_STOPPED) ||
	    c->step_task == current || READ_ONCE(event->ctx->task) != current)
		return 0;
	if (c->step_task == prev) {
		pax_step_done(c, perfaux_step_stop(&c->step, &c->pt, task_pt_regs(prev)->ip));
		pax_disarm_task(prev);
		c->step_task = NULL;
	} else {
		/* Not the thread switched out here (cannot happen): its trap disarms it. */
		pax_step_stop(c);
	}
	pax_step_start(c, event);
	return 0;
}

/*
 * A context switch (__schedule(), before context_switch(): prev is still
 * current; next is this CPU's pick and cannot run anywhere else, interrupts
 * off). A CPU-wide event traces every user thread while it runs on its
 * CPU, as Intel PT does: the outgoing thread leaves the trace where it
 * entered the kernel, the incoming one joins where it returns to user code.
 * Per-task events need nothing here: the perf core stops and starts them
 * (or swaps their contexts, pax_sched_in()).
 */
static void pax_sched_switch(void *data, bool preempt, struct task_struct *prev,
			     struct task_struct *next, unsigned int prev_state)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);
	struct perf_event *event = c->event;

	if (!event || !(event->hw.config & PAX_HW_STEP) || !pax_cpu_wide(event) ||
	    (event->hw.state & PERF_HES_STOPPED))
		return;
	pax_step_stop(c);
	pax_step_follow(c, next);
}

static struct kprobe pax_sched_in_kp = {
	.symbol_name = "__perf_event_task_sched_in",
	.pre_handler = pax_sched_in,
};

/*
 * A sample's snapshot is being taken: if it interrupted the stepped thread
 * in user code, the trace says so first (FUP + TIP.PGD at the sample's IP,
 * as hardware writes them when the interrupt disables a user-only trace),
 * so that the snapshot ends at the sample point.
 */
void pax_step_sample_point(struct pax_cpu *c)
{
	struct pt_regs *regs;

	if (in_nmi() || !in_hardirq() || !pax_stepping(c))
		return;
	regs = get_irq_regs();
	if (!regs || !user_mode(regs))
		return;
	pax_step_done(c, perfaux_step_leave(&c->step, &c->pt, PERFAUX_STEP_INTERRUPTED, regs->ip));
}

/* The instruction bytes at user address ip: up to 15, fewer where it cannot read. */
static size_t pax_read_code(u64 ip, u8 *buf)
{
	size_t first = min_t(size_t, 15, PAGE_SIZE - offset_in_page(ip));

	if (copy_from_user_nofault(buf, (const void __user *)ip, first))
		return 0;
	if (first < 15 && !copy_from_user_nofault(buf + first, (const void __user *)(ip + first), 15 - first))
		return 15;
	return first;
}

/* The single-step trap (exc_debug_user() -> notify_debug(), interrupts off). */
static int pax_debug_trap(struct notifier_block *nb, unsigned long val, void *data)
{
	struct die_args *args = data;
	struct pt_regs *regs = args->regs;
	unsigned long *dr6 = (unsigned long *)args->err;
	struct pax_cpu *c;
	u8 code[15];
	size_t len = 0;
	u64 pending;

	if (val != DIE_DEBUG || !regs || !user_mode(regs) || !(*dr6 & DR_STEP))
		return NOTIFY_DONE;
	/* Not TF we set: a debugger's, or the program's own (POPF). */
	if (!test_thread_flag(TIF_FORCED_TF) || test_thread_flag(TIF_SINGLESTEP))
		return NOTIFY_DONE;
	c = this_cpu_ptr(&pax_cpu);
	if (pax_stepping(c)) {
		if (!perfaux_step_pending(&c->step, &pending))
			len = pax_read_code(pending, code);
		pax_step_done(c, perfaux_step(&c->step, &c->pt, code, len, regs->ip, rdtsc_ordered()));
		/* Keep TF whatever the instruction did to it (POPF). */
		regs->flags |= X86_EFLAGS_TF;
	} else {
		/* Armed by an event that no longer steps it here. */
		pax_disarm(regs);
	}
	*dr6 &= ~DR_STEP;
	return NOTIFY_STOP;
}

static struct notifier_block pax_debug_nb = { .notifier_call = pax_debug_trap };

/* The system-call exit (syscall_exit_work(), before signals are handled). */
static void pax_sys_exit(void *data, struct pt_regs *regs, long ret)
{
	struct pax_cpu *c;
	unsigned long flags;
	u64 resume;

	local_irq_save(flags);
	c = this_cpu_ptr(&pax_cpu);
	if (!pax_stepping(c) || regs != task_pt_regs(current) || !user_64bit_mode(regs))
		goto out;
	/* SYSCALL, SYSENTER and INT 0x80 are two bytes: the call was at ip - 2. */
	pax_step_done(c, perfaux_step_leave(&c->step, &c->pt, PERFAUX_STEP_SYSCALL, regs->ip - 2));
	resume = regs->ip;
	/*
	 * A restart (arch_do_signal_or_restart(), later on this path) runs the
	 * system call again; a signal handler taking over first is reported
	 * by the signal hook.
	 */
	switch (ret) {
	case -ERESTARTSYS:
	case -ERESTARTNOINTR:
	case -ERESTARTNOHAND:
	case -ERESTART_RESTARTBLOCK:
		resume -= 2;
		break;
	}
	perfaux_step_resume(&c->step, resume);
	pax_arm(current, regs);	/* execve's start_thread() cleared TF */
out:
	local_irq_restore(flags);
}

/*
 * Signal delivery: handle_signal() saved the interrupted state in the frame
 * at regs->sp, pointed regs->ip at the handler, and cleared TF.
 */
static int pax_signal_delivered(struct kprobe *p, struct pt_regs *kregs)
{
	struct ksignal *ksig = (struct ksignal *)kregs->si;
	struct rt_sigframe __user *frame;
	struct pax_cpu *c;
	struct pt_regs *regs;
	unsigned long flags;
	u64 saved;

	/* signal_setup_done(failed, ksig, stepping): no frame when it failed. */
	if (kregs->di || !ksig || (ksig->ka.sa.sa_flags & (SA_IA32_ABI | SA_X32_ABI)))
		return 0;
	local_irq_save(flags);
	c = this_cpu_ptr(&pax_cpu);
	regs = task_pt_regs(current);
	if (!pax_stepping(c) || !user_64bit_mode(regs))
		goto out;
	frame = (struct rt_sigframe __user *)regs->sp;
	/* The frame cannot be read: an asynchronous exit where it stood. */
	if (copy_from_user_nofault(&saved, &frame->uc.uc_mcontext.ip, sizeof(saved)))
		saved = pax_pending(c);
	pax_step_done(c, perfaux_step_leave(&c->step, &c->pt, PERFAUX_STEP_INTERRUPTED, saved));
	perfaux_step_resume(&c->step, regs->ip);
	pax_arm(current, regs);
out:
	local_irq_restore(flags);
	return 0;
}

static struct kprobe pax_signal_kp = {
	.symbol_name = "signal_setup_done",
	.pre_handler = pax_signal_delivered,
};

static struct tracepoint *pax_sys_exit_tp, *pax_sched_switch_tp;

static void pax_find_tracepoints(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sys_exit"))
		pax_sys_exit_tp = tp;
	else if (!strcmp(tp->name, "sched_switch"))
		pax_sched_switch_tp = tp;
}

int pax_step_cpu_init(struct pax_cpu *c)
{
	c->step_task = NULL;
	return perfaux_stepper_init(&c->step);
}

void pax_step_cpu_fini(struct pax_cpu *c)
{
	perfaux_stepper_fini(&c->step);
}

/* The hooks, only with step_user (module load). */
int pax_step_init(void)
{
	int r;

	if (!step_user)
		return 0;
	for_each_kernel_tracepoint(pax_find_tracepoints, NULL);
	if (!pax_sys_exit_tp || !pax_sched_switch_tp) {
		pr_err("perfaux_pt: step_user needs the sys_exit (CONFIG_FTRACE_SYSCALLS) and sched_switch tracepoints\n");
		return -ENOENT;
	}
	r = tracepoint_probe_register(pax_sys_exit_tp, pax_sys_exit, NULL);
	if (r) {
		pr_err("perfaux_pt: sys_exit tracepoint: %d\n", r);
		return r;
	}
	r = tracepoint_probe_register(pax_sched_switch_tp, pax_sched_switch, NULL);
	if (r) {
		pr_err("perfaux_pt: sched_switch tracepoint: %d\n", r);
		goto fail_tp;
	}
	r = register_kprobe(&pax_signal_kp);
	if (r) {
		pr_err("perfaux_pt: kprobe on signal_setup_done: %d\n", r);
		goto fail_switch_tp;
	}
	r = register_kprobe(&pax_sched_in_kp);
	if (r) {
		pr_err("perfaux_pt: kprobe on __perf_event_task_sched_in: %d\n", r);
		goto fail_kp;
	}
	r = register_die_notifier(&pax_debug_nb);
	if (r) {
		pr_err("perfaux_pt: register_die_notifier: %d\n", r);
		goto fail_sched_kp;
	}
	return 0;
fail_sched_kp:
	unregister_kprobe(&pax_sched_in_kp);
fail_kp:
	unregister_kprobe(&pax_signal_kp);
fail_switch_tp:
	tracepoint_probe_unregister(pax_sched_switch_tp, pax_sched_switch, NULL);
fail_tp:
	tracepoint_probe_unregister(pax_sys_exit_tp, pax_sys_exit, NULL);
	tracepoint_synchronize_unregister();
	return r;
}

/*
 * Module unload: no event is left (each stop disarmed its thread), so no
 * thread has TF from us; the hooks go, and their running calls finish.
 */
void pax_step_exit(void)
{
	if (!step_user)
		return;
	unregister_die_notifier(&pax_debug_nb);
	unregister_kprobe(&pax_sched_in_kp);
	unregister_kprobe(&pax_signal_kp);
	tracepoint_probe_unregister(pax_sched_switch_tp, pax_sched_switch, NULL);
	tracepoint_probe_unregister(pax_sys_exit_tp, pax_sys_exit, NULL);
	tracepoint_synchronize_unregister();
}
