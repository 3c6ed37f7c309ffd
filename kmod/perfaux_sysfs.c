// SPDX-License-Identifier: GPL-2.0
/*
 * The sysfs attributes of perfaux_pt's PMU, those of Intel PT's
 * (arch/x86/events/intel/pt.c): format/, the attr.config bits perf parses
 * intel_pt/.../ terms into; caps/, what the tracer implements, as CPUID
 * leaf 0x14 would report it for hardware that does the same; and the
 * timing attributes. perf reads them to build its default configuration
 * and to check the user's; with the module registered as intel_pt
 * (pmu_name=intel_pt) the stock perf tool records from it as from the real
 * PMU.
 *
 * The tables are the engine's (perfaux::pt::sysfs, which the Rust module
 * registers too): pax_sysfs_init() builds the attributes from them, by
 * index, before the PMU is registered.
 */
#include <linux/device.h>
#include <linux/perf_event.h>
#include <linux/sysfs.h>

#include "perfaux_pt.h"

/* format/ and the timing attributes: a string; caps/: a number (pt_cap_show). */
static ssize_t pax_str_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute, attr);

	return sysfs_emit(buf, "%s\n", (const char *)ea->var);
}

static ssize_t pax_cap_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute, attr);

	return sysfs_emit(buf, "%lx\n", (unsigned long)ea->var);
}

static struct dev_ext_attribute pax_format[PERFAUX_PT_FORMAT_ATTRS];
static struct attribute *pax_format_attrs[PERFAUX_PT_FORMAT_ATTRS + 1];
static struct dev_ext_attribute pax_caps[PERFAUX_PT_CAP_ATTRS];
static struct attribute *pax_cap_attrs[PERFAUX_PT_CAP_ATTRS + 1];
static struct dev_ext_attribute pax_timing[PERFAUX_PT_TIMING_ATTRS];
static struct attribute *pax_timing_attrs[PERFAUX_PT_TIMING_ATTRS + 1];

static const struct attribute_group pax_format_group = {
	.name = "format",
	.attrs = pax_format_attrs,
};

static const struct attribute_group pax_cap_group = {
	.name = "caps",
	.attrs = pax_cap_attrs,
};

static const struct attribute_group pax_timing_group = {
	.attrs = pax_timing_attrs,
};

const struct attribute_group *pax_attr_groups[] = {
	&pax_cap_group,
	&pax_format_group,
	&pax_timing_group,
	NULL,
};

/* A read-only attribute `name` whose show() is given `var`. */
static void pax_attr(struct dev_ext_attribute *ea, struct attribute **slot, const char *name,
		     ssize_t (*show)(struct device *, struct device_attribute *, char *), void *var)
{
	sysfs_attr_init(&ea->attr.attr);
	ea->attr.attr.name = name;
	ea->attr.attr.mode = 0444;
	ea->attr.show = show;
	ea->var = var;
	*slot = &ea->attr.attr;
}

int pax_sysfs_init(void)
{
	const char *name, *text;
	unsigned int i;
	u64 value;
	int r;

	for (i = 0; i < PERFAUX_PT_FORMAT_ATTRS; i++) {
		r = perfaux_pt_format_attr(i, &name, &text);
		if (r)
			return r;
		pax_attr(&pax_format[i], &pax_format_attrs[i], name, pax_str_show, (void *)text);
	}
	for (i = 0; i < PERFAUX_PT_CAP_ATTRS; i++) {
		r = perfaux_pt_cap_attr(i, &name, &value);
		if (r)
			return r;
		pax_attr(&pax_caps[i], &pax_cap_attrs[i], name, pax_cap_show,
			 (void *)(unsigned long)value);
	}
	for (i = 0; i < PERFAUX_PT_TIMING_ATTRS; i++) {
		r = perfaux_pt_timing_attr(i, &name, &text);
		if (r)
			return r;
		pax_attr(&pax_timing[i], &pax_timing_attrs[i], name, pax_str_show, (void *)text);
	}
	return 0;
}
