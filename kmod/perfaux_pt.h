/* SPDX-License-Identifier: GPL-2.0 */
/*
 * perfaux_pt: what the module's files share. perfaux_glue.c is the PMU
 * (its callbacks, the AUX buffers, the timer tracer, module set-up),
 * perfaux_step.c the single-step tracer of user code, perfaux_sysfs.c the
 * intel_pt-compatible caps/ and format/ attributes.
 */
#ifndef PERFAUX_PT_H
#define PERFAUX_PT_H

#include <linux/hrtimer.h>
#include <linux/perf_event.h>

#include "../include/perfaux.h"

/*
 * Per CPU: the Rust driver of the CPU, the AUX handle of its transaction,
 * the PT event added here, the ticker, and the single-step tracer of the
 * thread the event follows on this CPU.
 *
 * step and step_task are touched with interrupts off on this CPU only
 * (PMU callbacks, the debug trap, the hooks of perfaux_step.c, the
 * snapshot), never from NMI.
 */
struct pax_cpu {
	struct perfaux_pt_cpu pt;
	struct perf_output_handle handle;
	struct perf_event *event;	/* between add and del (pt->handle.event) */
	struct hrtimer timer;
	struct perfaux_stepper step;
	struct task_struct *step_task;	/* the thread stepped here, or NULL */
	bool ready;			/* pt initialized */
};
DECLARE_PER_CPU(struct pax_cpu, pax_cpu);

/* event->hw.config: this event's user code is single-stepped. */
#define PAX_HW_STEP 1ULL

/* perfaux_glue.c */
void pax_handle_pmis(struct pax_cpu *c, int pmis);

/* perfaux_step.c */
extern bool step_user;
int pax_step_init(void);
void pax_step_exit(void);
bool pax_step_wanted(struct perf_event *event);
void pax_step_start(struct pax_cpu *c, struct perf_event *event);
void pax_step_stop(struct pax_cpu *c);
void pax_step_sample_point(struct pax_cpu *c);
int pax_step_cpu_init(struct pax_cpu *c);
void pax_step_cpu_fini(struct pax_cpu *c);

/* perfaux_sysfs.c */
extern const struct attribute_group *pax_attr_groups[];
int pax_sysfs_init(void);

#endif
