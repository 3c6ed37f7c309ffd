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
#include <linux/hrtimer.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/slab.h>
#include <asm/irq_regs.h>
#include <asm/msr.h>
#include <asm/io.h>

#include "../include/perfaux.h"

static unsigned int period_us = 500;
module_param(period_us, uint, 0444);
MODULE_PARM_DESC(period_us, "Microseconds between trace ticks per CPU (default 500)");

static unsigned int psb_period = 4096;
module_param(psb_period, uint, 0444);
MODULE_PARM_DESC(psb_period, "Bytes between PSB+ packet sequences (256..1048576, default 4096)");

typedef unsigned int (*output_copy_fn)(struct perf_output_handle *, const void *, unsigned int);
static output_copy_fn output_copy;

/* One AUX buffer (what setup_aux returns): the Rust PMU and its memory. */
struct pax_buf {
	struct perfaux_pt pt;
	void *tables;
	size_t nr_tables;
	void **pages;
	int nr_pages;
	struct perf_event *event;
};

/* Per CPU: the AUX handle of the event running here, and the ticker. */
struct pax_cpu {
	struct perf_output_handle handle;
	struct pax_buf *active;
	struct hrtimer timer;
	bool traced;
};
static DEFINE_PER_CPU(struct pax_cpu, pax_cpu);

static struct pmu pax_pmu;

void perfaux_platform_panic(void);
void perfaux_platform_panic(void)
{
	BUG();
}

/* AUX transactions: the kernel's, on this CPU's handle. */
static int pax_begin(void *ctx, uint64_t *head, uint64_t *space, uint64_t *wakeup)
{
	struct pax_buf *buf = ctx;
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);

	if (perf_aux_output_begin(&c->handle, buf->event) != buf)
		return -ENOSPC;
	*head = c->handle.head;
	*space = c->handle.size;
	*wakeup = c->handle.wakeup;
	return 0;
}

static void pax_flag(void *ctx, uint64_t flags)
{
	perf_aux_output_flag(&this_cpu_ptr(&pax_cpu)->handle, flags);
}

static void pax_end(void *ctx, uint64_t size, int has_head, uint64_t head)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);

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

static void pax_free_aux(void *aux)
{
	struct pax_buf *buf = aux;

	if (perfaux_pt_fini(&buf->pt))
		pr_warn("perfaux_pt: freeing a buffer whose PMU was not stopped\n");
	free_pages_exact(buf->tables, buf->nr_tables * PAGE_SIZE);
	kfree(buf->pages);
	kfree(buf);
}

static void *pax_setup_aux(struct perf_event *event, void **pages, int nr_pages, bool overwrite)
{
	perfaux_aux_ops ops = { pax_begin, pax_flag, pax_end, NULL };
	perfaux_phys_map phys = { pax_to_phys, pax_to_virt, NULL };
	struct pax_buf *buf;
	int r;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return NULL;
	buf->nr_tables = nr_pages / 500 + 2;
	buf->tables = alloc_pages_exact(buf->nr_tables * PAGE_SIZE, GFP_KERNEL | __GFP_ZERO);
	buf->pages = kmalloc_array(nr_pages, sizeof(void *), GFP_KERNEL);
	if (!buf->tables || !buf->pages)
		goto fail;
	memcpy(buf->pages, pages, nr_pages * sizeof(void *));
	buf->nr_pages = nr_pages;
	buf->event = event;
	ops.ctx = buf;
	r = perfaux_pt_init_ops(&buf->pt, buf->tables, buf->nr_tables, buf->pages, nr_pages,
				overwrite ? 1 : 0, &ops, &phys, psb_period);
	if (r) {
		pr_warn("perfaux_pt: setup_aux of %d pages: %d\n", nr_pages, r);
		goto fail;
	}
	/* Checked by pax_event_init already: cannot fail. */
	perfaux_pt_set_config(&buf->pt, event->attr.config);
	event->pmu_private = buf;
	return buf;
fail:
	if (buf->tables)
		free_pages_exact(buf->tables, buf->nr_tables * PAGE_SIZE);
	kfree(buf->pages);
	kfree(buf);
	return NULL;
}

static int pax_event_init(struct perf_event *event)
{
	if (event->attr.type != pax_pmu.type)
		return -ENOENT;
	/* pt_event_init: the Intel PT format bits this tracer implements. */
	return perfaux_pt_check_config(event->attr.config);
}

static int pax_add(struct perf_event *event, int flags)
{
	struct pax_buf *buf = event->pmu_private;
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);
	int r;

	if (c->active)
		return -EBUSY;
	if (!buf) {
		/* No AUX mapping: nothing to trace into (Intel PT fails too). */
		event->hw.state = PERF_HES_STOPPED;
		return (flags & PERF_EF_START) ? -EINVAL : 0;
	}
	r = perfaux_pt_add(&buf->pt, (flags & PERF_EF_START) ? PERFAUX_EF_START : 0, 0);
	if (r)
		return r;
	c->active = buf;
	c->traced = false;
	event->hw.state = (flags & PERF_EF_START) ? 0 : PERF_HES_STOPPED;
	return 0;
}

static void pax_del(struct perf_event *event, int flags)
{
	struct pax_buf *buf = event->pmu_private;
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);

	if (buf && c->active == buf) {
		perfaux_pt_del(&buf->pt, PERFAUX_EF_UPDATE);
		c->active = NULL;
	}
	event->hw.state = PERF_HES_STOPPED;
}

static void pax_start(struct perf_event *event, int flags)
{
	struct pax_buf *buf = event->pmu_private;

	if (!buf)
		return;
	perfaux_pt_start(&buf->pt, 0, 0);
	event->hw.state = 0;
}

static void pax_stop(struct perf_event *event, int flags)
{
	struct pax_buf *buf = event->pmu_private;

	if (buf)
		perfaux_pt_stop(&buf->pt, (flags & PERF_EF_UPDATE) ? PERFAUX_EF_UPDATE : 0, 0);
	event->hw.state |= PERF_HES_STOPPED;
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
	struct pax_buf *buf = event->pmu_private;
	perfaux_sink sink = { pax_sink_copy, handle };
	int64_t r;

	if (!buf)
		return 0;
	r = perfaux_pt_snapshot_aux(&buf->pt, &sink, size);
	return r < 0 ? 0 : r;
}

static void pax_trace(struct pax_buf *buf, const perfaux_trace_event *e)
{
	int pmis = perfaux_pt_trace(&buf->pt, e);

	/* The ToPA PMIs the writes raised (full-trace mode): handle them now,
	 * as the hardware's PMI would, right after the write. */
	while (pmis-- > 0)
		perfaux_pt_handle_pmi(&buf->pt);
}

static enum hrtimer_restart pax_tick(struct hrtimer *t)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);
	struct pt_regs *regs = get_irq_regs();
	struct pax_buf *buf = c->active;

	hrtimer_forward_now(t, ns_to_ktime((u64)period_us * NSEC_PER_USEC));
	if (buf && regs && !(buf->event->hw.state & PERF_HES_STOPPED)) {
		bool user = user_mode(regs);
		bool wanted = user ? !buf->event->attr.exclude_user : !buf->event->attr.exclude_kernel;
		u64 ip = instruction_pointer(regs);
		const perfaux_trace_event time = {
			.kind = PERFAUX_TRACE_TIME,
			.value = rdtsc_ordered(),
		};
		const perfaux_trace_event enable = { .kind = PERFAUX_TRACE_ENABLE, .target = ip };
		/* Into code that is not traced: FUP at the interrupted IP, TIP.PGD. */
		const perfaux_trace_event leave = { .kind = PERFAUX_TRACE_ASYNC, .from = ip };

		if (!wanted) {
			/* The interrupted context is excluded: tracing went off on
			 * the way there, at a user IP this timer tracer never saw:
			 * a TIP.PGD without one. */
			const perfaux_trace_event off = { .kind = PERFAUX_TRACE_DISABLE };

			if (c->traced)
				pax_trace(buf, &off);
			c->traced = false;
		} else {
			/* The time first, so that a first PSB+ carries it. */
			pax_trace(buf, &time);
			if (!c->traced)
				pax_trace(buf, &enable);
			c->traced = true;
			if (!buf->event->attr.exclude_kernel) {
				/* The interrupt: FUP at the interrupted IP, TIP into
				 * the handler, and TIP back on the return. */
				const perfaux_trace_event irq = {
					.kind = PERFAUX_TRACE_ASYNC,
					.flags = PERFAUX_TRACE_HAS_TARGET,
					.target = (u64)pax_tick,
					.from = ip,
				};
				const perfaux_trace_event iret = {
					.kind = PERFAUX_TRACE_INDIRECT_JUMP,
					.target = ip,
				};

				pax_trace(buf, &irq);
				pax_trace(buf, &iret);
			} else {
				/* Into the untraced kernel and back. */
				pax_trace(buf, &leave);
				pax_trace(buf, &enable);
			}
		}
	}
	return HRTIMER_RESTART;
}

static void pax_start_timer(void *unused)
{
	struct pax_cpu *c = this_cpu_ptr(&pax_cpu);

	hrtimer_init(&c->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	c->timer.function = pax_tick;
	hrtimer_start(&c->timer, ns_to_ktime((u64)period_us * NSEC_PER_USEC),
		      HRTIMER_MODE_REL_PINNED_HARD);
}

static void pax_stop_timer(void *unused)
{
	hrtimer_cancel(&this_cpu_ptr(&pax_cpu)->timer);
}

static struct pmu pax_pmu = {
	.module = THIS_MODULE,
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

static int __init pax_init(void)
{
	struct kprobe kp = { .symbol_name = "perf_output_copy" };
	int r;

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
	r = perf_pmu_register(&pax_pmu, "perfaux_pt", -1);
	if (r) {
		pr_err("perfaux_pt: perf_pmu_register: %d\n", r);
		return r;
	}
	on_each_cpu(pax_start_timer, NULL, 1);
	pr_info("perfaux_pt: registered, type %d, tick %u us, PSB every %u bytes\n", pax_pmu.type,
		period_us, psb_period);
	return 0;
}

static void __exit pax_exit(void)
{
	on_each_cpu(pax_stop_timer, NULL, 1);
	perf_pmu_unregister(&pax_pmu);
	pr_info("perfaux_pt: unregistered\n");
}

module_init(pax_init);
module_exit(pax_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("A PT-style AUX PMU whose driver is perfaux's Rust PT PMU");
MODULE_AUTHOR("perfaux");
