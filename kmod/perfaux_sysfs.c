// SPDX-License-Identifier: GPL-2.0
/*
 * The sysfs attributes of perfaux_pt's PMU, those of Intel PT's
 * (arch/x86/events/intel/pt.c): format/, the attr.config bits perf parses
 * intel_pt/.../ terms into, and caps/, what the tracer implements, as CPUID
 * leaf 0x14 would report it for hardware that does the same. perf reads
 * them to build its default configuration and to check the user's; with
 * the module registered as intel_pt (pmu_name=intel_pt) the stock perf tool
 * records from it as from the real PMU.
 */
#include <linux/device.h>
#include <linux/perf_event.h>
#include <linux/sysfs.h>

#include "perfaux_pt.h"

PMU_FORMAT_ATTR(pt, "config:0");
PMU_FORMAT_ATTR(cyc, "config:1");
PMU_FORMAT_ATTR(pwr_evt, "config:4");
PMU_FORMAT_ATTR(fup_on_ptw, "config:5");
PMU_FORMAT_ATTR(mtc, "config:9");
PMU_FORMAT_ATTR(tsc, "config:10");
PMU_FORMAT_ATTR(noretcomp, "config:11");
PMU_FORMAT_ATTR(ptw, "config:12");
PMU_FORMAT_ATTR(branch, "config:13");
PMU_FORMAT_ATTR(event, "config:31");
PMU_FORMAT_ATTR(notnt, "config:55");
PMU_FORMAT_ATTR(mtc_period, "config:14-17");
PMU_FORMAT_ATTR(cyc_thresh, "config:19-22");
PMU_FORMAT_ATTR(psb_period, "config:24-27");

static struct attribute *pax_format_attrs[] = {
	&format_attr_pt.attr,
	&format_attr_cyc.attr,
	&format_attr_pwr_evt.attr,
	&format_attr_event.attr,
	&format_attr_notnt.attr,
	&format_attr_fup_on_ptw.attr,
	&format_attr_mtc.attr,
	&format_attr_tsc.attr,
	&format_attr_noretcomp.attr,
	&format_attr_ptw.attr,
	&format_attr_branch.attr,
	&format_attr_mtc_period.attr,
	&format_attr_cyc_thresh.attr,
	&format_attr_psb_period.attr,
	NULL,
};

static const struct attribute_group pax_format_group = {
	.name = "format",
	.attrs = pax_format_attrs,
};

static ssize_t pax_cap_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute, attr);

	return sysfs_emit(buf, "%lx\n", (unsigned long)ea->var);
}

#define PAX_CAP(_name, _value)                                                   \
	static struct dev_ext_attribute pax_cap_##_name = {                      \
		__ATTR(_name, 0444, pax_cap_show, NULL), (void *)(unsigned long)(_value) \
	}

/*
 * What the software tracer does: ToPA output with several entries per
 * table, configurable PSB frequency (psb_cyc, psb_periods) and nothing
 * else: no MTC, CYC thresholds, PTWRITE, power or event trace, IP or CR3
 * filtering. pt_event_valid() refuses the config bits of what is 0 here,
 * and so does perfaux_pt_check_config().
 */
PAX_CAP(max_subleaf, 1);
PAX_CAP(cr3_filtering, 0);
PAX_CAP(psb_cyc, 1);
PAX_CAP(ip_filtering, 0);
PAX_CAP(mtc, 0);
PAX_CAP(ptwrite, 0);
PAX_CAP(power_event_trace, 0);
PAX_CAP(event_trace, 0);
PAX_CAP(tnt_disable, 0);
PAX_CAP(topa_output, 1);
PAX_CAP(topa_multiple_entries, 1);
PAX_CAP(single_range_output, 0);
PAX_CAP(output_subsys, 0);
PAX_CAP(payloads_lip, 0);
PAX_CAP(num_address_ranges, 0);
PAX_CAP(mtc_periods, 0);
PAX_CAP(cycle_thresholds, 0);
PAX_CAP(psb_periods, PERFAUX_PT_PSB_PERIODS);

static struct attribute *pax_cap_attrs[] = {
	&pax_cap_max_subleaf.attr.attr,
	&pax_cap_cr3_filtering.attr.attr,
	&pax_cap_psb_cyc.attr.attr,
	&pax_cap_ip_filtering.attr.attr,
	&pax_cap_mtc.attr.attr,
	&pax_cap_ptwrite.attr.attr,
	&pax_cap_power_event_trace.attr.attr,
	&pax_cap_event_trace.attr.attr,
	&pax_cap_tnt_disable.attr.attr,
	&pax_cap_topa_output.attr.attr,
	&pax_cap_topa_multiple_entries.attr.attr,
	&pax_cap_single_range_output.attr.attr,
	&pax_cap_output_subsys.attr.attr,
	&pax_cap_payloads_lip.attr.attr,
	&pax_cap_num_address_ranges.attr.attr,
	&pax_cap_mtc_periods.attr.attr,
	&pax_cap_cycle_thresholds.attr.attr,
	&pax_cap_psb_periods.attr.attr,
	NULL,
};

static const struct attribute_group pax_cap_group = {
	.name = "caps",
	.attrs = pax_cap_attrs,
};

/*
 * pt.c's timing attributes: the tracer's CBR packets carry ratio 0 and it
 * has no ART, so both are 0.
 */
static ssize_t max_nonturbo_ratio_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "0\n");
}
static DEVICE_ATTR_RO(max_nonturbo_ratio);

static ssize_t tsc_art_ratio_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "0:0\n");
}
static DEVICE_ATTR_RO(tsc_art_ratio);

static struct attribute *pax_timing_attrs[] = {
	&dev_attr_max_nonturbo_ratio.attr,
	&dev_attr_tsc_art_ratio.attr,
	NULL,
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
