/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sysfs files the guest's test programs use (check.c, pmu_fuzz.c):
 * a PMU's type, and CPU hotplug.
 */
#ifndef PERFAUX_GUEST_SYSFS_H
#define PERFAUX_GUEST_SYSFS_H

#include <stdio.h>

/* perf_event_attr.type for the PMU registered as name, or -1. */
static inline int pmu_type_of(const char *name)
{
	char path[256];
	FILE *f;
	int t = -1;

	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/type", name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &t) != 1)
			t = -1;
		fclose(f);
	}
	return t;
}

/* Takes CPU cpu offline (on 0) or brings it online (1): 0, or -1 (errno). */
static inline int cpu_online(int cpu, int on)
{
	char path[64];
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	f = fopen(path, "w");
	if (!f)
		return -1;
	r = fprintf(f, "%d\n", on) < 0;
	r |= fclose(f) != 0;
	return r ? -1 : 0;
}

#endif /* PERFAUX_GUEST_SYSFS_H */
