// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel inlines and macros perfaux_rs calls, as functions Rust can
 * call: 6.12's rust/helpers/ (which upstream grows the same way, one small
 * wrapper per inline) covers none of them. Each is the kernel's own
 * definition, so the module restates no kernel internal (no per-CPU
 * offsets, no address-space layout, no WARN() of its own).
 */
#include <linux/bug.h>
#include <linux/cpumask.h>
#include <linux/hardirq.h>
#include <linux/hrtimer.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/signal.h>
#include <linux/tracepoint.h>
#include <asm/io.h>
#include <asm/irq_regs.h>
#include <asm/msr.h>
#include <asm/sigframe.h>
#include <asm/tsc.h>

#include "perf_helper.h"

void pax_module_get(struct module *module)
{
	__module_get(module);
}

void *pax_alloc_percpu(size_t size, size_t align)
{
	return __alloc_percpu(size, align);
}

void *pax_this_cpu_ptr(void *base)
{
	return this_cpu_ptr((void __percpu *)base);
}

void *pax_per_cpu_ptr(void *base, unsigned int cpu)
{
	return per_cpu_ptr((void __percpu *)base, cpu);
}

bool pax_cpu_possible(unsigned int cpu)
{
	return cpu < nr_cpu_ids && cpu_possible(cpu);
}

unsigned int pax_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

struct pt_regs *pax_get_irq_regs(void)
{
	return get_irq_regs();
}

bool pax_user_mode(struct pt_regs *regs)
{
	return user_mode(regs);
}

unsigned long pax_instruction_pointer(struct pt_regs *regs)
{
	return instruction_pointer(regs);
}

u64 pax_rdtsc_ordered(void)
{
	return rdtsc_ordered();
}

unsigned int pax_tsc_khz(void)
{
	return tsc_khz;
}

u64 pax_hrtimer_forward_now(struct hrtimer *timer, s64 interval_ns)
{
	return hrtimer_forward_now(timer, ns_to_ktime(interval_ns));
}

phys_addr_t pax_virt_to_phys(const void *addr)
{
	return virt_to_phys((void *)addr);
}

void *pax_phys_to_virt(phys_addr_t phys)
{
	return phys_to_virt(phys);
}

void pax_warn(const char *message, int len)
{
	/* WARN(): the cut-here banner, the stack, taint W, panic_on_warn. */
	WARN(1, "perfaux_rs: %.*s\n", len, message);
}

/* The traced task (the single-step tracer's hooks, kmod/rust/task). */
struct task_struct *pax_current(void)
{
	return current;
}

struct pt_regs *pax_current_user_regs(void)
{
	return task_pt_regs(current);
}

bool pax_current_is_user_task(void)
{
	return !(current->flags & PF_KTHREAD) && current->mm;
}

bool pax_user_64bit_mode(struct pt_regs *regs)
{
	return user_64bit_mode(regs);
}

void pax_set_forced_tf(void)
{
	set_thread_flag(TIF_FORCED_TF);
}

bool pax_test_forced_tf(void)
{
	return test_thread_flag(TIF_FORCED_TF);
}

bool pax_test_and_clear_forced_tf(void)
{
	return test_and_clear_thread_flag(TIF_FORCED_TF);
}

/* A task that cannot run: either side of a context switch (task/mod.rs). */
struct pt_regs *pax_task_user_regs(struct task_struct *task)
{
	return task_pt_regs(task);
}

bool pax_task_is_user_task(struct task_struct *task)
{
	return !(task->flags & PF_KTHREAD) && task->mm;
}

bool pax_task_test_singlestep(struct task_struct *task)
{
	return test_tsk_thread_flag(task, TIF_SINGLESTEP);
}

void pax_task_set_forced_tf(struct task_struct *task)
{
	set_tsk_thread_flag(task, TIF_FORCED_TF);
}

bool pax_task_test_and_clear_forced_tf(struct task_struct *task)
{
	return test_and_clear_tsk_thread_flag(task, TIF_FORCED_TF);
}

bool pax_test_singlestep(void)
{
	return test_thread_flag(TIF_SINGLESTEP);
}

unsigned long pax_local_irq_save(void)
{
	unsigned long flags;

	local_irq_save(flags);
	return flags;
}

void pax_local_irq_restore(unsigned long flags)
{
	local_irq_restore(flags);
}

bool pax_in_nmi(void)
{
	return in_nmi();
}

bool pax_in_hardirq(void)
{
	return in_hardirq();
}

void pax_tracepoint_synchronize_unregister(void)
{
	tracepoint_synchronize_unregister();
}

/* Where a 64-bit rt_sigframe at the user stack pointer sp saves the IP. */
unsigned long pax_rt_sigframe_ip(unsigned long sp)
{
	return (unsigned long)&((struct rt_sigframe __user *)sp)->uc.uc_mcontext.ip;
}

/* Whether a signal is delivered with a 64-bit frame (not ia32 or x32). */
bool pax_ksignal_native(struct ksignal *ksig)
{
	return !(ksig->ka.sa.sa_flags & (SA_IA32_ABI | SA_X32_ABI));
}

