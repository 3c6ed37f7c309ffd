// SPDX-License-Identifier: GPL-2.0
/*
 * perfaux_pt: a PT-style AUX PMU for the Linux perf core, whose driver is
 * perfaux's Rust PT PMU (through include/perfaux.h): ToPA tables over the
 * AUX pages setup_aux receives, a software tracer writing Intel PT packets,
 * snapshot_aux copying the newest trace bytes into the sample.
 *
 * The tracer is fed by real activity: a per-CPU hrtimer records where the
 * traced context was interrupted (TIP.PGE/PGD as the event's exclude_user
 * and exclude_kernel say, then TSC, FUP at the interrupted IP, TIP to the
 * handler and back). AUX output goes through perf_aux_output_begin/end;
 * snapshot_aux writes through perf_output_copy, found at load time with a
 * kprobe (it is not exported). Links the Rust core under its MIT option.
 */
#include <linux/cpuhotplug.h>
#include <linux/hrtimer.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/slab.h>
#include <asm/irq_regs.h>
#include <asm/msr.h>
#include <asm/tsc.h>
#include <asm/io.h>

#include "perfaux_pt.h"

static unsigned int period_us = 500;
module_param(period_us, uint, 0444);
MODULE_PARM_DESC(period_us, "Microseconds between trace ticks per CPU (default 500)");

static char *pmu_name = "perfaux_pt";
module_param(pmu_name, charp, 0444);
MODULE_PARM_DESC(pmu_name,
		 "The PMU's name (default perfaux_pt; intel_pt on a machine without Intel PT lets the stock perf tool use it)");

static unsigned int psb_period = 4096;
module_param(psb_period, uint, 0444);
MODULE_PARM_DESC(psb_period, "Bytes between PSB+ packet sequences (256..1048576, default 4096)");

typedef unsigned int (*output_copy_fn)(struct perf_output_handle *, const void *, unsigned int);
static output_copy_fn output_copy;

/*
 * The driver's state is split as Intel PT's is (arch/x86/events/intel/pt.c:
 * the per-CPU struct pt and the per-buffer struct pt_buffer). A buffer is
 * reached only through the AUX transaction open on a CPU's handle
 * (perf_get_aux()), which holds aux_refcount: nothing here keeps a buffer
 * past free_aux (an AUX munmap stops the event and frees the buffer while
 * the event stays on its CPU).
 */

/* One AUX buffer (what setup_aux returns: rb->aux_priv). */
struct pax_buf {
	struct perfaux_pt_buffer pt;
	void *tables;
	size_t nr_tables;
	void **pages;
};

DEFINE_PER_CPU(struct pax_cpu, pax_cpu);

static struct pmu pax_pmu;
static enum cpuhp_state pax_hp_state;

/* Called by the Rust core's panic handler, which no path reaches (checked at build). */
void perfaux_platform_panic(void)
{
	BUG();
}

/* The engine's WARN_ON_ONCE sites (states its contracts rule out). */
static void pax_warn(const char *msg, size_t len)
{
	WARN(1, "perfaux_pt: %.*s\n", (int)len, msg);
}

/*
 * AUX transactions: the kernel's, on this CPU's handle, for the event added
 * here. begin hands the Rust driver the buffer's PT state (aux_priv).
 */
static int pax_begin(void *ctx, const struct perfaux_pt_buffer **out, uint64_t *head,
		     uint64_t *space, uint64_t *wakeup)
{
	struct pax_cpu *c = ctx;
	struct pax_buf *buf;

	if (!c->event)
		return -ENOSPC;
	buf = perf_aux_output_begin(&c->handle, c->event);
	if (!buf)
		return -ENOSPC;
	*out = &buf->pt;
	*head = c->handle.head;
	*space = c->handle.size;
	*wakeup = c->handle.wakeup;
	return 0;
}

static void pax_flag(void *ctx, uint64_t flags)
{
	struct pax_cpu *c = ctx;

	perf_aux_output_flag(&c->handle, flags);
}

static void pax_end(void *ctx, uint64_t size, int has_head, uint64_t head)
{
	struct pax_cpu *c = ctx;

	if (has_head)
		c->handle.head = head;
	perf_aux_output_end(&c->handle, size);
}

static uint64_t pax_to_phys(void *ctx, const void *virt)
{
	return virt_to_phys((void *)virt);
}

static void *pax_to_virt(void *ctx, uint64_t phys)
{
	return phys_to_virt(phys);
}

static const perfaux_phys_map pax_phys = {
	.to_phys = pax_to_phys,
	.to_virt = pax_to_virt,
	.ctx = NULL,
};

static void pax_free_buf(struct pax_buf *buf)
{
	if (buf->tables)
		free_pages_exact(buf->tables, buf->nr_tables * PAGE_SIZE);
	kfree(buf->pages);
	kfree(buf);
}

/*
 * The buffer's module reference goes last: after it, no instruction of
 * this module runs (module_put() is a tail call, which kmod/test checks in
 * the object), so rmmod may free the module's text as soon as it drops.
 */
static void pax_free_aux(void *aux)
{
	struct pax_buf *buf = aux;

	/*
	 * The kernel frees a buffer only after its last transaction ended;
	 * a leaked buffer keeps its reference, and the module with it.
	 */
	if (perfaux_pt_buffer_fini(&buf->pt)) {
		pr_err("perfaux_pt: BUG: free_aux of a buffer a transaction holds; leaking it\n");
		return;
	}
	pax_free_buf(buf);
	module_put(THIS_MODULE);
}

static void *pax_setup_aux(struct perf_event *event, void **pages, int nr_pages, bool overwrite)
{
	struct pax_buf *buf;
	int r;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return NULL;
	buf->nr_tables = perfaux_pt_tables_for_pages(nr_pages);
	buf->tables = alloc_pages_exact(buf->nr_tables * PAGE_SIZE, GFP_KERNEL | __GFP_ZERO);
	buf->pages = kmalloc_array(nr_pages, sizeof(void *), GFP_KERNEL);
	if (!buf->tables || !buf->pages)
		goto fail;
	memcpy(buf->pages, pages, nr_pages * sizeof(void *));
	r = perfaux_pt_buffer_init(&buf->pt, buf->tables, buf->nr_tables, buf->pages, nr_pages,
				   overwrite ? 1 : 0, &pax_phys);
	if (r) {
		pr_warn("perfaux_pt: setup_aux of %d pages: %d\n", nr_pages, r);
		goto fail;
	}
	/*
	 * The buffer holds the module until free_aux: the ring buffer calls
	 * rb->free_aux when its last AUX mapping goes, which can be after the
	 * event (and with it the event's module reference) is gone: an event
	 * whose output was set to this one maps the same ring and AUX area.
	 * Called for an event of this PMU, which holds the module already.
	 */
	__module_get(THIS_MODULE);
	return buf;
fail:
	pax_free_buf(buf);
	return NULL;
}

static int pax_event_init(struct perf_event *event)
{
	if (event->attr.type != pax_pmu.type)
		return -ENOENT;
	/* pt_event_init: the Intel PT format bits this tracer implements. */
	if (perfaux_pt_check_config(event->attr.config))
		return -EINVAL;
	if (has_branch_stack(event))
		return -EOPNOTSUPP;
	event->hw.config = 0;
	/*
	 * Per task, the single-step tracer follows the event's thread; CPU
	 * wide, every user thread while it runs on the CPU, perf included, as
	 * Intel PT does.
	 */
	if (pax_step_wanted(event))
		event->hw.config = PAX_HW_STEP;
	return 0;
}

/* Whether a transaction is open on this CPU (Intel PT: perf_get_aux()). */
static bool pax_tracing(struct pax_cpu *c)
{
	return perf_get_aux(&c->handle) != NULL;
}

static void pax_start(struct perf_event *event, int flags)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);

	if (WARN_ON_ONCE(c->event != event))
		return;
	perfaux_pt_start(&c->pt, 0, 0);
	/* pt_event_start: no buffer (unmapped, full) leaves it stopped. */
	event->hw.state = pax_tracing(c) ? 0 : PERF_HES_STOPPED;
	if (!event->hw.state)
		pax_step_start(c, event);
}

static void pax_stop(struct perf_event *event, int flags)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);

	if (c->event != event)
		return;
	pax_step_stop(c);
	perfaux_pt_stop(&c->pt, (flags & PERF_EF_UPDATE) ? PERFAUX_EF_UPDATE : 0, 0);
	event->hw.state |= PERF_HES_STOPPED;
}

static int pax_add(struct perf_event *event, int flags)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);
	int r;

	/* pt_event_add: one PT event per CPU. */
	if (c->event)
		return -EBUSY;
	c->event = event;
	perfaux_pt_tick_reset(&c->pt);
	r = perfaux_pt_add(&c->pt, (flags & PERF_EF_START) ? PERFAUX_EF_START : 0, event->id,
			   event->attr.config, 0);
	if (r) {
		/* A start that cannot trace (no AUX buffer) fails the add. */
		c->event = NULL;
		event->hw.state = PERF_HES_STOPPED;
		return r == -EBUSY ? -EBUSY : -EINVAL;
	}
	event->hw.state = pax_tracing(c) ? 0 : PERF_HES_STOPPED;
	/* add with PERF_EF_START starts it: the core calls no ->start. */
	if ((flags & PERF_EF_START) && !event->hw.state)
		pax_step_start(c, event);
	return 0;
}

static void pax_del(struct perf_event *event, int flags)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);

	pax_stop(event, PERF_EF_UPDATE);
	if (c->event == event)
		c->event = NULL;
}

static void pax_read(struct perf_event *event)
{
}

/* snapshot_aux writes into the sample's handle through perf_output_copy. */
static size_t pax_sink_copy(void *ctx, const void *bytes, size_t len)
{
	return output_copy(ctx, bytes, len);
}

static long pax_snapshot_aux(struct perf_event *event, struct perf_output_handle *handle,
			     unsigned long size)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);
	const perfaux_sink sink = { .copy = pax_sink_copy, .ctx = handle };
	int64_t r;

	pax_step_sample_point(c);
	r = perfaux_pt_snapshot_aux(&c->pt, &sink, size);
	if (r > 0)
		return r;
	/*
	 * Nothing to copy: no transaction is open here (the AUX area is being
	 * unmapped). Zeros instead of Intel PT's WARN, so the sample's AUX
	 * block is whole (perfaux::aux::copy_zeros says why).
	 */
	return perfaux_sink_copy_zeros(&sink, size);
}

/*
 * The ToPA PMIs the tracer's writes raised (full-trace mode): handle them
 * now, as the hardware's PMI would, right after the write.
 */
void pax_handle_pmis(struct pax_cpu *c, int pmis)
{
	while (pmis-- > 0)
		perfaux_pt_handle_pmi(&c->pt);
}

static enum hrtimer_restart pax_tick(struct hrtimer *t)
{
	struct pax_cpu *c = container_of(t, struct pax_cpu, timer);
	struct pt_regs *regs = get_irq_regs();
	struct perf_event *event;
	perfaux_tick tick = { 0 };

	hrtimer_forward_now(t, ns_to_ktime((u64)period_us * NSEC_PER_USEC));
	/* As intel_pt_interrupt: only with a transaction open, for its event. */
	if (!regs || !pax_tracing(c))
		return HRTIMER_RESTART;
	event = c->handle.event;
	/* A single-stepped event's trace is the stepper's alone. */
	if ((event->hw.state & PERF_HES_STOPPED) || (event->hw.config & PAX_HW_STEP))
		return HRTIMER_RESTART;
	/* What the interrupt looks like in the trace: perfaux::soft_pt::tick. */
	tick.ip = instruction_pointer(regs);
	tick.tsc = rdtsc_ordered();
	tick.handler = (u64)pax_tick;
	tick.user = user_mode(regs);
	tick.exclude_user = event->attr.exclude_user;
	tick.exclude_kernel = event->attr.exclude_kernel;
	perfaux_pt_tick(&c->pt, &tick);
	return HRTIMER_RESTART;
}

/* CPU hotplug: the ticker runs on a CPU while it is online. */
static int pax_cpu_online(unsigned int cpu)
{
	struct pax_cpu *c = per_cpu_ptr(&pax_cpu, cpu);

	hrtimer_init(&c->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	c->timer.function = pax_tick;
	hrtimer_start(&c->timer, ns_to_ktime((u64)period_us * NSEC_PER_USEC),
		      HRTIMER_MODE_REL_PINNED_HARD);
	return 0;
}

static int pax_cpu_offline(unsigned int cpu)
{
	hrtimer_cancel(&per_cpu_ptr(&pax_cpu, cpu)->timer);
	return 0;
}

static struct pmu pax_pmu = {
	.module = THIS_MODULE,
	.attr_groups = pax_attr_groups,
	.task_ctx_nr = perf_sw_context,
	.capabilities = PERF_PMU_CAP_EXCLUSIVE | PERF_PMU_CAP_ITRACE,
	.event_init = pax_event_init,
	.add = pax_add,
	.del = pax_del,
	.start = pax_start,
	.stop = pax_stop,
	.read = pax_read,
	.setup_aux = pax_setup_aux,
	.free_aux = pax_free_aux,
	.snapshot_aux = pax_snapshot_aux,
};

static void pax_fini_cpus(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		struct pax_cpu *c = per_cpu_ptr(&pax_cpu, cpu);

		if (c->ready && perfaux_pt_cpu_fini(&c->pt))
			pr_err("perfaux_pt: BUG: CPU %d still holds an AUX transaction\n", cpu);
		if (c->ready)
			pax_step_cpu_fini(c);
		c->ready = false;
	}
}

static int __init pax_init(void)
{
	struct kprobe kp = { .symbol_name = "perf_output_copy" };
	int cpu, r;

	if (psb_period < 256 || psb_period > (1 << 20) || period_us == 0) {
		pr_err("perfaux_pt: bad parameters (psb_period %u, period_us %u)\n", psb_period,
		       period_us);
		return -EINVAL;
	}
	r = register_kprobe(&kp);
	if (r) {
		pr_err("perfaux_pt: cannot find perf_output_copy (kprobe: %d); snapshot_aux needs it\n",
		       r);
		return r;
	}
	output_copy = (output_copy_fn)kp.addr;
	unregister_kprobe(&kp);
	r = pax_sysfs_init();
	if (r) {
		pr_err("perfaux_pt: sysfs attributes: %d\n", r);
		return r;
	}
	perfaux_set_warn_hook(pax_warn);
	for_each_possible_cpu(cpu) {
		struct pax_cpu *c = per_cpu_ptr(&pax_cpu, cpu);
		const perfaux_aux_ops ops = {
			.begin = pax_begin,
			.flag = pax_flag,
			.end = pax_end,
			.ctx = c,
		};

		r = perfaux_pt_cpu_init(&c->pt, &ops, &pax_phys, psb_period);
		if (!r) {
			/* The CBR of every PSB+: CYC packets count TSC ticks. */
			r = perfaux_pt_set_tsc_khz(&c->pt, tsc_khz);
			if (!r)
				r = pax_step_cpu_init(c);
			if (r)
				perfaux_pt_cpu_fini(&c->pt);
		}
		if (r) {
			pr_err("perfaux_pt: CPU %d: %d\n", cpu, r);
			goto fail_cpus;
		}
		c->ready = true;
	}
	r = pax_step_init();
	if (r)
		goto fail_cpus;
	r = perf_pmu_register(&pax_pmu, pmu_name, -1);
	if (r) {
		pr_err("perfaux_pt: perf_pmu_register as %s: %d\n", pmu_name, r);
		goto fail_step;
	}
	r = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "perf/perfaux_pt:online", pax_cpu_online,
			      pax_cpu_offline);
	if (r < 0) {
		pr_err("perfaux_pt: cpuhp_setup_state: %d\n", r);
		goto fail_pmu;
	}
	pax_hp_state = r;
	pr_info("perfaux_pt: registered as %s, type %d, tick %u us, PSB every %u bytes%s\n",
		pmu_name, pax_pmu.type, period_us, psb_period,
		step_user ? ", user code single-stepped" : "");
	return 0;
fail_pmu:
	perf_pmu_unregister(&pax_pmu);
fail_step:
	pax_step_exit();
fail_cpus:
	pax_fini_cpus();
	perfaux_set_warn_hook(NULL);
	return r;
}

static void __exit pax_exit(void)
{
	/* No event is left (pmu.module holds the module while one exists). */
	cpuhp_remove_state(pax_hp_state);
	perf_pmu_unregister(&pax_pmu);
	pax_step_exit();
	pax_fini_cpus();
	perfaux_set_warn_hook(NULL);
	pr_info("perfaux_pt: unregistered\n");
}

module_init(pax_init);
module_exit(pax_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("A PT-style AUX PMU whose driver is perfaux's Rust PT PMU");
MODULE_AUTHOR("perfaux");
