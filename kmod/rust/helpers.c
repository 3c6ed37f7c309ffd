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
#include <linux/hrtimer.h>
#include <linux/percpu.h>
#include <linux/ptrace.h>
#include <asm/io.h>
#include <asm/irq_regs.h>
#include <asm/msr.h>

#include "perf_helper.h"

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
