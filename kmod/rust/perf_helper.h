/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel APIs perfaux_rs calls that 6.12's Rust bindings do not cover
 * (the perf core above all): Kbuild runs the kernel's own bindgen command
 * on this header (see Kbuild) into perf_bindings.rs.
 */
#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/gfp.h>
#include <linux/hrtimer.h>
#include <linux/kprobes.h>
#include <linux/moduleparam.h>
#include <linux/panic.h>
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/printk.h>
#include <linux/sysfs.h>
#include <asm/irq_regs.h>
#include <asm/page.h>
#include <asm/ptrace.h>
