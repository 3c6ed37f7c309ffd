/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel APIs perfaux_rs calls that 6.12's Rust bindings do not cover
 * (the perf core above all): Kbuild runs the kernel's own bindgen command
 * on this header (see Kbuild) into perf_bindings.rs.
 */
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/errno.h>
#include <linux/gfp.h>
#include <linux/hrtimer.h>
#include <linux/kdebug.h>
#include <linux/kprobes.h>
#include <linux/moduleparam.h>
#include <linux/panic.h>
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/printk.h>
#include <linux/sysfs.h>
#include <linux/notifier.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <asm/debugreg.h>
#include <asm/irq_regs.h>
#include <asm/page.h>
#include <asm/ptrace.h>

/*
 * helpers.c: the kernel inlines and macros the module calls, as functions
 * (bindgen sees these declarations; the definitions are the kernel's own).
 */
void pax_module_get(struct module *module);
void *pax_alloc_percpu(size_t size, size_t align);
void *pax_this_cpu_ptr(void *base);
void *pax_per_cpu_ptr(void *base, unsigned int cpu);
bool pax_cpu_possible(unsigned int cpu);
unsigned int pax_nr_cpu_ids(void);
struct pt_regs *pax_get_irq_regs(void);
bool pax_user_mode(struct pt_regs *regs);
unsigned long pax_instruction_pointer(struct pt_regs *regs);
u64 pax_rdtsc_ordered(void);
unsigned int pax_tsc_khz(void);
u64 pax_hrtimer_forward_now(struct hrtimer *timer, s64 interval_ns);
phys_addr_t pax_virt_to_phys(const void *addr);
void *pax_phys_to_virt(phys_addr_t phys);
void pax_warn(const char *message, int len);
struct task_struct *pax_current(void);
struct pt_regs *pax_current_user_regs(void);
bool pax_current_is_user_task(void);
bool pax_user_64bit_mode(struct pt_regs *regs);
void pax_set_forced_tf(void);
bool pax_test_forced_tf(void);
bool pax_test_and_clear_forced_tf(void);
struct pt_regs *pax_task_user_regs(struct task_struct *task);
bool pax_task_is_user_task(struct task_struct *task);
bool pax_task_test_singlestep(struct task_struct *task);
void pax_task_set_forced_tf(struct task_struct *task);
bool pax_task_test_and_clear_forced_tf(struct task_struct *task);
bool pax_test_singlestep(void);
unsigned long pax_local_irq_save(void);
void pax_local_irq_restore(unsigned long flags);
bool pax_in_nmi(void);
bool pax_in_hardirq(void);
void pax_tracepoint_synchronize_unregister(void);
unsigned long pax_rt_sigframe_ip(unsigned long sp);
struct ksignal;
bool pax_ksignal_native(struct ksignal *ksig);

/* Constants whose macros bindgen cannot evaluate (an enum it can). */
enum {
	PAX_X86_EFLAGS_TF = X86_EFLAGS_TF,
	PAX_NOTIFY_DONE = NOTIFY_DONE,
	PAX_NOTIFY_STOP = NOTIFY_STOP,
	PAX_DR_STEP = DR_STEP,
	PAX_ERESTARTSYS = ERESTARTSYS,
	PAX_ERESTARTNOINTR = ERESTARTNOINTR,
	PAX_ERESTARTNOHAND = ERESTARTNOHAND,
	PAX_ERESTART_RESTARTBLOCK = ERESTART_RESTARTBLOCK,
	PAX_PERF_ATTACH_TASK = PERF_ATTACH_TASK,
};
