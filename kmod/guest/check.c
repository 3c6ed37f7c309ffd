// SPDX-License-Identifier: GPL-2.0
/*
 * The guest side of kmod/test: drives perfaux_pt through perf_event_open
 * as a user would, and checks what the kernel hands back. Prints one
 * "PASS <case>" or "FAIL <case>: why" line per case and "ALL PASS" last.
 * PERFAUX_PMU and PERFAUX_MODULE name the PMU and its module when they are
 * not perfaux_pt (the Rust module's, say).
 *
 * Cases: a snapshot-mode leader with cpu-clock and task-clock samplers
 * asking for 4 KiB and 64 KiB of AUX data, the task moved to the next CPU
 * every 10 ms (sizes by the kernel's rules, payloads that decode as Intel
 * PT with plausible TIP/FUP addresses and TSCs that never go back, across
 * the CPUs' tracers); a full-trace leader read through
 * aux_head/aux_tail and PERF_RECORD_AUX; aux_sample_size under a leader
 * without AUX (EINVAL); an AUX mmap on a software event (EOPNOTSUPP).
 *
 * Then the fault suite: every way a user can end an event's life while it
 * runs (munmap of the AUX area or of both mappings while enabled, close of
 * the leader or the sampler first, exit and exec of a traced task, fork
 * with inherit, 100 rounds of open/mmap/enable/close per task and per CPU
 * on every CPU, rmmod while events are open or while only another event's
 * fd maps the AUX area, CPU hotplug), each followed by
 * a trace that must still work.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sysfs.h"

#define PAGE 4096
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define DATA_PAGES 256
#define AUX_PAGES 32
#define PSB_PERIOD 4096

static int failures;

#define FAIL(name, ...)                                                      \
	do {                                                                 \
		printf("FAIL %s: ", name);                                   \
		printf(__VA_ARGS__);                                         \
		printf("\n");                                                \
		failures++;                                                  \
	} while (0)

static long peo(struct perf_event_attr *a, int group)
{
	return syscall(SYS_perf_event_open, a, 0, -1, group, 0);
}

/*
 * The PMU and the module under test: perfaux_pt for both unless the
 * environment names others (PERFAUX_PMU, PERFAUX_MODULE), as for the Rust
 * module, perfaux_rs.
 */
static const char *name_from_env(const char *var)
{
	const char *v = getenv(var);

	return v && *v ? v : "perfaux_pt";
}

static int pmu_type(void)
{
	return pmu_type_of(name_from_env("PERFAUX_PMU"));
}

/* ---- a minimal Intel PT packet decoder ---- */
struct decoded {
	unsigned long packets, psbs, tips, fups, tscs;
	int bad;            /* an undecodable packet after sync */
	size_t bad_at;      /* where the first one is */
	int bad_ip;         /* a TIP/FUP address that is neither user nor kernel */
	unsigned long kernel_ips, user_ips;
	int tsc_back;       /* a TSC lower than the one before */
	uint64_t last_tsc;
	int in_psb;         /* between a PSB and its PSBEND */
	size_t back_at;     /* the first TSC that went back: where, */
	uint64_t back_from, back_to; /* from what, to what */
	int back_in_psb;    /* and whether in a PSB+ */
};

static int plausible(uint64_t ip)
{
	return (ip >= 0xffff800000000000ull) || (ip != 0 && ip < 0x0000800000000000ull);
}

static const unsigned char PSB[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
				       2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

/* The length of the extended packet 0x02 <c2>, or 0 for an unknown one. */
static size_t ext_len(unsigned char c2)
{
	switch (c2) {
	case 0x82: /* PSB */
		return 16;
	case 0x23: /* PSBEND */
	case 0xf3: /* OVF */
	case 0x83: /* TraceStop */
		return 2;
	case 0x03: /* CBR */
		return 4;
	case 0xa3: /* long TNT */
	case 0x43: /* PIP */
		return 8;
	case 0x73: /* TMA */
		return 7;
	default:
		return 0;
	}
}

/* The IP bytes of a TIP/FUP whose IPBytes field is ipb, or -1. */
static int ip_bytes(unsigned int ipb)
{
	static const int bytes[8] = { 0, 2, 4, 6, 6, -1, 8, -1 };

	return bytes[ipb & 7];
}

/* Decodes b[0..n) from its first PSB; returns 0 if there is none. */
static int decode(const unsigned char *b, size_t n, struct decoded *d, uint64_t *last_ip)
{
	size_t i = 0;

	while (i + 16 <= n && memcmp(b + i, PSB, 16) != 0)
		i++;
	if (i + 16 > n)
		return 0;
	while (i < n) {
		unsigned char c = b[i];
		size_t len;

		d->packets++;
		if (c == 0x00) {
			len = 1;
		} else if (c == 0x02) {
			if (i + 1 >= n)
				break;
			len = ext_len(b[i + 1]);
			if (!len || (b[i + 1] == 0x82 && (i + 16 > n || memcmp(b + i, PSB, 16) != 0))) {
				d->bad++;
				d->bad_at = i;
				return 1;
			}
			if (b[i + 1] == 0x82) {
				d->psbs++;
				d->in_psb = 1;
			} else if (b[i + 1] == 0x23) {
				d->in_psb = 0;
			}
		} else if (c == 0x19) {
			len = 8;
			if (i + 8 <= n) {
				uint64_t t = 0;

				memcpy(&t, b + i + 1, 7);
				if (t < d->last_tsc && !d->tsc_back++) {
					d->back_at = i;
					d->back_from = d->last_tsc;
					d->back_to = t;
					d->back_in_psb = d->in_psb;
				}
				d->last_tsc = t;
				d->tscs++;
			}
		} else if (c == 0x59 || c == 0x99) {
			len = 2; /* MTC, MODE */
		} else if ((c & 1) == 0) {
			len = 1; /* short TNT */
		} else if ((c & 0x1f) == 0x0d || (c & 0x1f) == 0x11 || (c & 0x1f) == 0x01 || (c & 0x1f) == 0x1d) {
			unsigned int ipb = c >> 5;
			int bytes = ip_bytes(ipb);
			uint64_t v = 0, ip = *last_ip;

			if (bytes < 0) {
				d->bad++;
				d->bad_at = i;
				return 1;
			}
			len = 1 + bytes;
			if (i + len <= n && bytes > 0) {
				memcpy(&v, b + i + 1, (size_t)bytes);
				if (ipb == 1)
					ip = (ip & ~0xffffull) | v;
				else if (ipb == 2)
					ip = (ip & ~0xffffffffull) | v;
				else if (ipb == 3)
					ip = (uint64_t)((int64_t)(v << 16) >> 16);
				else if (ipb == 4)
					ip = (ip & ~0xffffffffffffull) | v;
				else
					ip = v;
				*last_ip = ip;
				if (!plausible(ip))
					d->bad_ip++;
				else if (ip >= 0xffff800000000000ull)
					d->kernel_ips++;
				else
					d->user_ips++;
			}
			if ((c & 0x1f) == 0x1d)
				d->fups++;
			else
				d->tips++;
		} else {
			d->bad++;
			d->bad_at = i;
			return 1;
		}
		if (i + len > n)
			break; /* the window ends inside a packet */
		i += len;
	}
	return 1;
}

/* ---- rings ---- */
struct ring {
	int fd;
	struct perf_event_mmap_page *page;
	unsigned char *data;
	unsigned char *aux;
	size_t aux_size;
};

/* Maps r->fd's ring and, if aux_prot, its AUX area; -errno on failure. */
static int map_ring(struct ring *r, int aux_prot)
{
	r->page = mmap(NULL, (1 + DATA_PAGES) * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->page == MAP_FAILED) {
		r->page = NULL;
		return -errno;
	}
	r->data = (unsigned char *)r->page + PAGE;
	if (!aux_prot)
		return 0;
	r->aux_size = AUX_PAGES * PAGE;
	r->page->aux_offset = (1 + DATA_PAGES) * PAGE;
	r->page->aux_size = r->aux_size;
	r->aux = mmap(NULL, r->aux_size, aux_prot, MAP_SHARED, r->fd, r->page->aux_offset);
	if (r->aux == MAP_FAILED) {
		r->aux = NULL;
		return -errno;
	}
	return 0;
}

static void unmap_ring(struct ring *r)
{
	if (r->aux)
		munmap(r->aux, r->aux_size);
	if (r->page)
		munmap(r->page, (1 + DATA_PAGES) * PAGE);
	r->aux = NULL;
	r->page = NULL;
}

static void workload(int ms)
{
	struct timespec s, t;
	unsigned long x = 0;

	clock_gettime(CLOCK_MONOTONIC, &s);
	do {
		for (int i = 0; i < 10000; i++)
			x += i * 7;
		__asm__ volatile("" : : "r"(x)); /* keep the loop */
		getppid(); /* a trip into the kernel */
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - s.tv_sec) * 1000 + (t.tv_nsec - s.tv_nsec) / 1000000 < ms);
}

/* intel_pt's `tsc` format bit (config:10): TSC packets in the trace. */
#define PT_CONFIG_TSC (1ull << 10)

static void base_attr(struct perf_event_attr *a, uint32_t type, uint64_t config)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = type;
	a->config = config;
	a->disabled = 0;
}

/* Reads every record of the data ring; calls f for each. */
static void read_records(struct ring *r, void (*f)(void *, const unsigned char *, size_t), void *ctx)
{
	static unsigned char rec[65536];
	uint64_t head = __atomic_load_n(&r->page->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->page->data_tail;
	size_t size = DATA_PAGES * PAGE;
	struct perf_event_header h;

	while (tail < head) {
		for (size_t i = 0; i < sizeof(h); i++)
			((unsigned char *)&h)[i] = r->data[(tail + i) % size];
		if (h.size < 8)
			break;
		for (size_t i = 0; i < h.size; i++)
			rec[i] = r->data[(tail + i) % size];
		f(ctx, rec, h.size);
		tail += h.size;
	}
	__atomic_store_n(&r->page->data_tail, tail, __ATOMIC_RELEASE);
}

struct sample_check {
	const char *name;
	uint64_t id;
	uint64_t aux_sample_size;
	size_t aux_buffer;
	unsigned long samples, with_aux, with_psb;
	struct decoded d;
	int bad_size;
};

static unsigned long lost_records;
static int exclude_kernel_check; /* the snapshot case running excludes the kernel */

/*
 * The zero bytes a snapshot starts with: buffer the tracer has not written
 * yet (a sample taken early in the trace sees mostly zeros).
 */
static uint64_t leading_zeros(const unsigned char *p, uint64_t n)
{
	uint64_t i = 0;

	while (i < n && p[i] == 0)
		i++;
	return i;
}

/*
 * Prints where a sample's AUX data went wrong (DIAG_BAD set, the first few
 * samples): the bytes around a bad packet, and the first TSC that went back.
 */
static void diagnose(const unsigned char *p, uint64_t aux, const struct decoded *one, int synced)
{
	static int shown;
	size_t at = synced ? one->bad_at : 0;

	if (!getenv("DIAG_BAD") || shown++ >= 4)
		return;
	if (one->bad || (exclude_kernel_check && one->kernel_ips)) {
		printf("DIAG %s at %zu of %llu (kernel IPs %lu):", synced ? "bad packet" : "no PSB",
		       at, (unsigned long long)aux, one->kernel_ips);
		for (size_t k = at > 24 ? at - 24 : 0; k < at + 24 && k < aux; k++)
			printf("%s%02x", k == at ? " [" : " ", p[k]);
		printf("\n");
	}
	if (one->tsc_back)
		printf("DIAG TSC back at %zu of %llu (%s): %llu -> %llu (-%llu)\n", one->back_at,
		       (unsigned long long)aux, one->back_in_psb ? "in PSB+" : "after PSBEND",
		       (unsigned long long)one->back_from, (unsigned long long)one->back_to,
		       (unsigned long long)(one->back_from - one->back_to));
}

static void check_sample(void *ctx, const unsigned char *r, size_t n)
{
	struct sample_check *checks = ctx, *c = NULL;
	struct decoded one = { 0 };
	uint64_t id, aux, lost, last_ip = 0;
	uint32_t type;
	int synced;

	memcpy(&type, r, 4);
	if (type == PERF_RECORD_LOST && n >= 24) {
		memcpy(&lost, r + 16, 8);
		lost_records += lost;
		return;
	}
	if (type != PERF_RECORD_SAMPLE || n < 8 + 4 * 8)
		return;
	memcpy(&id, r + 8, 8); /* IDENTIFIER */
	for (int i = 0; i < 2; i++)
		if (checks[i].id == id)
			c = &checks[i];
	if (!c)
		return;
	/* IDENTIFIER, IP, TID, TIME, then the AUX size. */
	memcpy(&aux, r + 8 + 4 * 8, 8);
	c->samples++;
	if (aux % 8 || aux > c->aux_sample_size || aux > c->aux_buffer || 8 + 5 * 8 + aux != n)
		c->bad_size++;
	if (aux == 0)
		return;
	c->with_aux++;
	/*
	 * TSCs must not go back within one snapshot (snapshots overlap, so
	 * the next one may start earlier than this one ends).
	 */
	synced = decode(r + 8 + 5 * 8, aux, &one, &last_ip);
	if (synced)
		c->with_psb++;
	else if (aux - leading_zeros(r + 8 + 5 * 8, aux) >= PSB_PERIOD + 256)
		one.bad++; /* a large snapshot of trace without a PSB */
	if (one.bad || one.tsc_back || (exclude_kernel_check && one.kernel_ips))
		diagnose(r + 8 + 5 * 8, aux, &one, synced);
	c->d.packets += one.packets;
	c->d.psbs += one.psbs;
	c->d.tips += one.tips;
	c->d.fups += one.fups;
	c->d.tscs += one.tscs;
	c->d.bad += one.bad;
	c->d.bad_ip += one.bad_ip;
	c->d.tsc_back += one.tsc_back;
	c->d.kernel_ips += one.kernel_ips;
	c->d.user_ips += one.user_ips;
}

static void report_sample_check(const struct sample_check *c, int exclude_kernel)
{
	const struct decoded *d = &c->d;

	if (c->samples == 0 || c->with_aux == 0)
		FAIL(c->name, "%lu samples, %lu with AUX data", c->samples, c->with_aux);
	else if (c->bad_size)
		FAIL(c->name, "%d AUX sizes break the kernel's rules", c->bad_size);
	else if (d->bad || d->bad_ip || d->tsc_back)
		FAIL(c->name, "bad packets %d, implausible IPs %d, TSCs going back %d", d->bad,
		     d->bad_ip, d->tsc_back);
	else if (d->tips + d->fups == 0 || d->tscs == 0)
		FAIL(c->name, "no TIP/FUP or TSC in %lu payloads", c->with_psb);
	else if (exclude_kernel && (d->kernel_ips || !d->user_ips))
		FAIL(c->name, "exclude_kernel, yet %lu kernel and %lu user addresses", d->kernel_ips,
		     d->user_ips);
	else if (!exclude_kernel && (!d->kernel_ips || !d->user_ips))
		FAIL(c->name, "%lu kernel and %lu user addresses: both are traced", d->kernel_ips,
		     d->user_ips);
	else
		printf("PASS %s: %lu samples, %lu with AUX data, %lu decoded (%lu packets, %lu TIP, %lu FUP, %lu TSC; %lu kernel, %lu user addresses), %lu records lost\n",
		       c->name, c->samples, c->with_aux, c->with_psb, d->packets, d->tips, d->fups,
		       d->tscs, d->kernel_ips, d->user_ips, lost_records);
}

static int on_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static void snapshot_case(int type, int exclude_kernel)
{
	struct {
		uint64_t config, period, aux;
		const char *name;
	} samplers[2] = {
		{ PERF_COUNT_SW_CPU_CLOCK, 200000, 4096,
		  exclude_kernel ? "snapshot exclude_kernel cpu-clock 4096" : "snapshot cpu-clock 4096" },
		{ PERF_COUNT_SW_TASK_CLOCK, 2000000, 65536,
		  exclude_kernel ? "snapshot exclude_kernel task-clock 65536" :
				   "snapshot task-clock 65536" },
	};
	struct sample_check checks[2];
	struct perf_event_attr a;
	struct ring lr = { 0 };
	int fds[2] = { -1, -1 };
	int cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t allowed; /* the task's CPUs, given back at the end */
	int r;

	memset(checks, 0, sizeof(checks));
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		FAIL("snapshot", "sched_getaffinity: %s", strerror(errno));
		return;
	}
	base_attr(&a, type, PT_CONFIG_TSC);
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
	a.sample_id_all = 1;
	a.disabled = 1;
	a.exclude_kernel = exclude_kernel;
	exclude_kernel_check = exclude_kernel;
	lost_records = 0;
	lr.fd = peo(&a, -1);
	if (lr.fd < 0) {
		FAIL("snapshot", "perf_event_open(perfaux_pt): %s", strerror(errno));
		return;
	}
	r = map_ring(&lr, PROT_READ); /* read-only AUX: snapshot mode */
	if (r) {
		FAIL("snapshot", "mmap: %s", strerror(-r));
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		base_attr(&a, PERF_TYPE_SOFTWARE, samplers[i].config);
		a.sample_period = samplers[i].period;
		a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
				PERF_SAMPLE_TIME | PERF_SAMPLE_AUX;
		a.sample_id_all = 1;
		a.aux_sample_size = samplers[i].aux;
		fds[i] = peo(&a, lr.fd);
		if (fds[i] < 0 || ioctl(fds[i], PERF_EVENT_IOC_SET_OUTPUT, lr.fd) ||
		    ioctl(fds[i], PERF_EVENT_IOC_ID, &checks[i].id)) {
			FAIL(samplers[i].name, "open/set_output/id: %s", strerror(errno));
			goto out;
		}
		checks[i].name = samplers[i].name;
		checks[i].aux_sample_size = samplers[i].aux;
		checks[i].aux_buffer = lr.aux_size;
	}
	if (ioctl(lr.fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP)) {
		FAIL("snapshot", "enable: %s", strerror(errno));
		goto out;
	}
	/*
	 * The per-task trace follows the task from CPU to CPU: each round
	 * moves it to the next one, so one buffer holds every CPU's packets.
	 */
	for (int round = 0; round < 40; round++) {
		if (on_cpu(round % cpus)) {
			FAIL("snapshot", "sched_setaffinity(%d): %s", round % cpus, strerror(errno));
			goto out;
		}
		workload(10);
		read_records(&lr, check_sample, checks); /* keep up with the samples */
	}
	if (ioctl(lr.fd, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP)) {
		FAIL("snapshot", "disable: %s", strerror(errno));
		goto out;
	}
	read_records(&lr, check_sample, checks);
	for (int i = 0; i < 2; i++)
		report_sample_check(&checks[i], exclude_kernel);
out:
	sched_setaffinity(0, sizeof(allowed), &allowed);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	unmap_ring(&lr);
	close(lr.fd);
}

struct aux_records {
	unsigned long records, truncated;
	uint64_t bytes;
};

static void count_aux(void *ctx, const unsigned char *r, size_t n)
{
	struct aux_records *a = ctx;
	uint64_t size, flags;
	uint32_t type;

	memcpy(&type, r, 4);
	if (type != PERF_RECORD_AUX || n < 32)
		return;
	memcpy(&size, r + 16, 8);
	memcpy(&flags, r + 24, 8);
	a->records++;
	a->bytes += size;
	if (flags & PERF_AUX_FLAG_TRUNCATED)
		a->truncated++;
}

/* Appends the AUX bytes from aux_tail to aux_head to stream, and frees them. */
static void drain_aux(struct ring *r, unsigned char *stream, size_t cap, size_t *len)
{
	uint64_t head = __atomic_load_n(&r->page->aux_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->page->aux_tail;

	for (; tail < head && *len < cap; tail++)
		stream[(*len)++] = r->aux[tail % r->aux_size];
	__atomic_store_n(&r->page->aux_tail, tail, __ATOMIC_RELEASE);
}

static void full_case(int type)
{
	static unsigned char stream[4 << 20];
	struct aux_records ar = { 0 };
	struct perf_event_attr a;
	struct ring lr = { 0 };
	struct decoded d = { 0 };
	uint64_t last_ip = 0;
	size_t len = 0;
	int r;

	base_attr(&a, type, PT_CONFIG_TSC);
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
	a.sample_id_all = 1;
	a.disabled = 1;
	lr.fd = peo(&a, -1);
	if (lr.fd < 0) {
		FAIL("full-trace", "perf_event_open: %s", strerror(errno));
		return;
	}
	r = map_ring(&lr, PROT_READ | PROT_WRITE); /* writable AUX: full trace */
	if (r) {
		FAIL("full-trace", "mmap: %s", strerror(-r));
		goto out;
	}
	if (ioctl(lr.fd, PERF_EVENT_IOC_ENABLE, 0)) {
		FAIL("full-trace", "enable: %s", strerror(errno));
		goto out;
	}
	for (int round = 0; round < 20; round++) {
		workload(20);
		read_records(&lr, count_aux, &ar);
		drain_aux(&lr, stream, sizeof(stream), &len);
	}
	if (ioctl(lr.fd, PERF_EVENT_IOC_DISABLE, 0)) {
		FAIL("full-trace", "disable: %s", strerror(errno));
		goto out;
	}
	read_records(&lr, count_aux, &ar);
	drain_aux(&lr, stream, sizeof(stream), &len);
	if (ar.records == 0 || len == 0)
		FAIL("full-trace", "%lu PERF_RECORD_AUX, %zu bytes", ar.records, len);
	else if (ar.bytes != len)
		FAIL("full-trace", "PERF_RECORD_AUX say %llu bytes, aux_head/aux_tail gave %zu",
		     (unsigned long long)ar.bytes, len);
	else if (!decode(stream, len, &d, &last_ip) || d.bad || d.bad_ip || d.tsc_back)
		FAIL("full-trace", "the stream does not decode: bad %d, IPs %d, TSCs %d", d.bad,
		     d.bad_ip, d.tsc_back);
	else if (d.psbs == 0 || d.tips + d.fups == 0)
		FAIL("full-trace", "no PSB or TIP/FUP in %zu bytes", len);
	else
		printf("PASS full-trace: %lu PERF_RECORD_AUX (%lu truncated), %zu bytes decoded (%lu packets, %lu PSB, %lu TIP, %lu FUP, %lu TSC)\n",
		       ar.records, ar.truncated, len, d.packets, d.psbs, d.tips, d.fups, d.tscs);
out:
	unmap_ring(&lr);
	close(lr.fd);
}

static void error_cases(void)
{
	struct perf_event_attr a;
	struct ring r = { 0 };
	int leader, fd, m;

	base_attr(&a, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK);
	a.sample_period = 100000;
	leader = peo(&a, -1);
	base_attr(&a, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
	a.sample_period = 100000;
	a.sample_type = PERF_SAMPLE_AUX;
	a.aux_sample_size = 4096;
	fd = peo(&a, leader);
	if (leader < 0 || fd >= 0 || errno != EINVAL)
		FAIL("aux_sample_size without an AUX leader", "open gave %d (%s)", fd, strerror(errno));
	else
		printf("PASS aux_sample_size without an AUX leader: EINVAL\n");
	if (fd >= 0)
		close(fd);
	r.fd = leader;
	m = map_ring(&r, PROT_READ);
	if (m != -EOPNOTSUPP)
		FAIL("AUX mmap on a software event", "mmap gave %d", m);
	else
		printf("PASS AUX mmap on a software event: EOPNOTSUPP\n");
	unmap_ring(&r);
	close(leader);
}

/* ---- the fault suite: every way a user can end an event's life while it runs ---- */

static long peo_on(struct perf_event_attr *a, pid_t pid, int cpu, int group)
{
	return syscall(SYS_perf_event_open, a, pid, cpu, group, 0);
}

/*
 * A snapshot-mode group: a perfaux_pt leader and a cpu-clock sampler with
 * PERF_SAMPLE_AUX writing into the leader's ring.
 */
struct group {
	int leader, sampler;
	struct ring r;
	uint64_t id;
};

static void group_close(struct group *g)
{
	unmap_ring(&g->r);
	if (g->sampler >= 0)
		close(g->sampler);
	if (g->leader >= 0)
		close(g->leader);
	memset(g, 0, sizeof(*g));
	g->leader = -1;
	g->sampler = -1;
}

static int group_open(struct group *g, int type, pid_t pid, int cpu, int inherit)
{
	struct perf_event_attr a;

	memset(g, 0, sizeof(*g));
	g->leader = -1;
	g->sampler = -1;
	base_attr(&a, type, PT_CONFIG_TSC);
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
	a.sample_id_all = 1;
	a.disabled = 1;
	a.inherit = inherit;
	g->leader = peo_on(&a, pid, cpu, -1);
	if (g->leader < 0)
		goto fail;
	/* The ring first: SET_OUTPUT needs the leader's buffer. */
	g->r.fd = g->leader;
	if (map_ring(&g->r, PROT_READ))
		goto fail;
	base_attr(&a, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK);
	a.sample_period = 100000;
	a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
			PERF_SAMPLE_TIME | PERF_SAMPLE_AUX;
	a.sample_id_all = 1;
	a.aux_sample_size = 4096;
	a.inherit = inherit;
	g->sampler = peo_on(&a, pid, cpu, g->leader);
	if (g->sampler < 0)
		goto fail;
	if (ioctl(g->sampler, PERF_EVENT_IOC_SET_OUTPUT, g->leader))
		goto fail;
	if (ioctl(g->sampler, PERF_EVENT_IOC_ID, &g->id))
		goto fail;
	return 0;
fail:
	{
		int e = errno;

		group_close(g);
		errno = e;
	}
	return -1;
}

/*
 * Enables or disables the whole group. An enable ends with a short sleep:
 * since Linux 6.12 ("perf: Optimize context reschedule for single PMU
 * cases"), enabling an event reschedules only its own PMU's events, and a
 * software sampler under an AUX leader in the software context (Intel PT's
 * task_ctx_nr, and this PMU's) has a PMU context of its own, which the
 * group is not in: the sampler's enable does not put the group on, and it
 * runs without its sampler until the task's context is next scheduled in
 * whole. The sleep is that reschedule. 6.1 reschedules every PMU and needs
 * none.
 */
static int group_enable(struct group *g, int on)
{
	int r = ioctl(g->leader, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE,
		      PERF_IOC_FLAG_GROUP);

	if (!r && on)
		usleep(1000);
	return r;
}

/* group_open and group_enable; on failure a FAIL line for case `name`. */
static int group_start(struct group *g, int type, pid_t pid, int cpu, int inherit,
		       const char *name)
{
	if (group_open(g, type, pid, cpu, inherit)) {
		FAIL(name, "open: %s", strerror(errno));
		return -1;
	}
	if (group_enable(g, 1)) {
		FAIL(name, "enable: %s", strerror(errno));
		group_close(g);
		return -1;
	}
	return 0;
}

/*
 * Samples of g's sampler read from its ring, and how many carried AUX
 * data that decodes; pid_only: count only that process's samples.
 */
struct tally {
	uint64_t id;
	pid_t pid_only;
	unsigned long samples, with_aux, decoded, bad;
	unsigned long nonzero; /* AUX bytes that are not 0, in all samples */
	unsigned char first[32]; /* the first sample's first AUX bytes */
};

static void tally_sample(void *ctx, const unsigned char *r, size_t n)
{
	struct tally *t = ctx;
	uint32_t type, pid;
	uint64_t id, aux;
	struct decoded d = { 0 };
	uint64_t last_ip = 0;

	memcpy(&type, r, 4);
	if (type != PERF_RECORD_SAMPLE || n < 8 + 5 * 8)
		return;
	memcpy(&id, r + 8, 8);
	memcpy(&pid, r + 8 + 2 * 8, 4);
	if (t->pid_only && (pid_t)pid != t->pid_only)
		return;
	memcpy(&aux, r + 8 + 4 * 8, 8);
	t->samples++;
	if (aux == 0 || 8 + 5 * 8 + aux != n)
		return;
	if (t->with_aux++ == 0)
		memcpy(t->first, r + 48, aux < 32 ? aux : 32);
	for (uint64_t i = 0; i < aux; i++)
		t->nonzero += r[48 + i] != 0;
	if (decode(r + 8 + 5 * 8, aux, &d, &last_ip) && !d.bad && !d.bad_ip)
		t->decoded++;
	else if (d.bad || d.bad_ip)
		t->bad++;
}

static void tally_read(struct group *g, struct tally *t)
{
	read_records(&g->r, tally_sample, t);
}

/* A fresh group on this task traces: the module still works. */
static int trace_works(int type, const char *name)
{
	struct group g;
	struct tally t = { 0 };

	if (group_open(&g, type, 0, -1, 0)) {
		FAIL(name, "then a new group does not open: %s", strerror(errno));
		return -1;
	}
	t.id = g.id;
	if (group_enable(&g, 1)) {
		FAIL(name, "then enable: %s", strerror(errno));
		group_close(&g);
		return -1;
	}
	workload(30);
	if (group_enable(&g, 0))
		FAIL(name, "then disable: %s", strerror(errno));
	tally_read(&g, &t);
	if (!t.decoded) {
		unsigned long psbs = 0, nz = 0;

		for (size_t i = 0; i + 16 <= g.r.aux_size; i++)
			psbs += memcmp(g.r.aux + i, PSB, 16) == 0;
		for (size_t i = 0; i < g.r.aux_size; i++)
			nz += g.r.aux[i] != 0;
		printf("DIAG %s: buffer has %lu PSBs, %lu nonzero bytes, aux_head %llu; at 0: %02x %02x %02x %02x %02x %02x %02x %02x\n",
		       name, psbs, nz, (unsigned long long)g.r.page->aux_head, g.r.aux[0], g.r.aux[1], g.r.aux[2], g.r.aux[3], g.r.aux[4], g.r.aux[5], g.r.aux[6], g.r.aux[7]);
	}
	group_close(&g);
	if (!t.decoded || t.bad) {
		FAIL(name, "then a new trace: %lu samples, %lu with AUX, %lu decode, %lu bad, %lu nonzero bytes, first %02x %02x %02x %02x %02x %02x %02x %02x",
		     t.samples, t.with_aux, t.decoded, t.bad, t.nonzero, t.first[0], t.first[1], t.first[2], t.first[3], t.first[4], t.first[5], t.first[6], t.first[7]);
		return -1;
	}
	return 0;
}

static void pass_after(int type, const char *name, const char *what)
{
	if (trace_works(type, name) == 0)
		printf("PASS %s: %s; a new trace after it decodes\n", name, what);
}

static void fault_munmap_aux(int type, int unused)
{
	const char *name = "fault: munmap AUX while enabled, re-enable, re-mmap";
	struct group g;
	struct tally t = { 0 };

	(void)unused;
	if (group_start(&g, type, 0, -1, 0, name))
		return;
	workload(20);
	munmap(g.r.aux, g.r.aux_size);
	g.r.aux = NULL;
	workload(20);			/* ticks and samples with the buffer gone */
	if (group_enable(&g, 0) || group_enable(&g, 1))
		goto fail_errno;
	workload(10);			/* no AUX buffer: the leader cannot start */
	if (group_enable(&g, 0))
		goto fail_errno;
	g.r.aux = mmap(NULL, g.r.aux_size, PROT_READ, MAP_SHARED, g.leader, g.r.page->aux_offset);
	if (g.r.aux == MAP_FAILED) {
		g.r.aux = NULL;
		goto fail_errno;
	}
	read_records(&g.r, tally_sample, &t);	/* drop what came before */
	memset(&t, 0, sizeof(t));
	t.id = g.id;
	if (group_enable(&g, 1))
		goto fail_errno;
	/*
	 * The same event in a new buffer: as on Intel PT (no first-round
	 * clear of the PSB counter), the trace there starts mid-stream and
	 * becomes decodable at its first periodic PSB: run past a few,
	 * reading the ring as it goes (10 rounds, or up to 2 s on a guest
	 * slow enough that the first PSB comes later: the tracer writes per
	 * timer tick, and a loaded host delivers fewer).
	 */
	for (int round = 0; round < 200 && (round < 10 || !t.decoded); round++) {
		workload(10);
		tally_read(&g, &t);
	}
	if (group_enable(&g, 0))
		goto fail_errno;
	tally_read(&g, &t);
	group_close(&g);
	if (!t.decoded || t.bad) {
		FAIL(name, "after the re-mmap: %lu samples, %lu with AUX, %lu decode, %lu bad",
		     t.samples, t.with_aux, t.decoded, t.bad);
		return;
	}
	printf("PASS %s: %lu samples after the re-mmap, %lu decode\n", name, t.samples,
	       t.decoded);
	return;
fail_errno:
	FAIL(name, "%s", strerror(errno));
	group_close(&g);
}

static void fault_munmap_all(int type, int unused)
{
	const char *name = "fault: munmap ring and AUX while enabled";
	struct group g;

	(void)unused;
	if (group_start(&g, type, 0, -1, 0, name))
		return;
	workload(20);
	unmap_ring(&g.r);
	workload(20);
	group_close(&g);
	pass_after(type, name, "the events ran on with no buffer");
}

static void fault_close(int type, int leader_first)
{
	const char *name = leader_first ? "fault: close the leader while enabled, sampler open" :
					  "fault: close the sampler while enabled, then the leader";
	struct group g;

	if (group_start(&g, type, 0, -1, 0, name))
		return;
	workload(20);
	if (leader_first) {
		close(g.leader);
		g.leader = -1;
	} else {
		close(g.sampler);
		g.sampler = -1;
	}
	workload(20);
	group_close(&g);
	pass_after(type, name, "closed while running");
}

/*
 * A child that waits for the go on a pipe, works, then exits (or execs
 * this checker with --spin, which works and exits).
 */
static pid_t spawn(int *go, int do_exec)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(2);
		if (do_exec) {
			execl("/proc/self/exe", "check", "--spin", (char *)NULL);
			_exit(3);
		}
		workload(30);
		_exit(0);
	}
	close(p[0]);
	*go = p[1];
	return pid;
}

static void fault_task(int type, int do_exec)
{
	const char *name = do_exec ? "fault: exec of a traced task" :
				     "fault: exit of a traced task";
	struct group g;
	struct tally t = { 0 };
	int go, status;
	pid_t pid = spawn(&go, do_exec);

	if (pid < 0) {
		FAIL(name, "fork: %s", strerror(errno));
		return;
	}
	if (group_start(&g, type, pid, -1, 0, name)) {
		kill(pid, SIGKILL);
		close(go);
		waitpid(pid, &status, 0);
		return;
	}
	t.id = g.id;
	if (write(go, "g", 1) != 1)
		FAIL(name, "pipe: %s", strerror(errno));
	close(go);
	waitpid(pid, &status, 0);
	tally_read(&g, &t);
	group_close(&g);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		FAIL(name, "the child ended with status %#x", status);
		return;
	}
	if (!t.decoded || t.bad) {
		FAIL(name, "%lu samples of the child, %lu with AUX, %lu decode, %lu bad", t.samples,
		     t.with_aux, t.decoded, t.bad);
		return;
	}
	printf("PASS %s: %lu samples of the child, %lu decode\n", name, t.samples, t.decoded);
}

static void fault_inherit(int type, int unused)
{
	const char *name = "fault: fork with inherit";
	struct group g;
	struct tally t = { 0 };
	int status;
	pid_t pid;

	(void)unused;
	/*
	 * As perf record does: per-CPU mmaps of a task's inherited events (an
	 * inherited per-task event cannot be mmapped). The child inherits the
	 * affinity, so it runs where the events are.
	 */
	if (on_cpu(0)) {
		FAIL(name, "sched_setaffinity: %s", strerror(errno));
		return;
	}
	if (group_start(&g, type, 0, 0, 1, name))
		return;
	pid = fork();
	if (pid == 0) {
		workload(40);
		_exit(0);
	}
	workload(10);
	waitpid(pid, &status, 0);
	if (group_enable(&g, 0))
		FAIL(name, "disable: %s", strerror(errno));
	t.id = g.id;
	t.pid_only = pid;
	tally_read(&g, &t);
	group_close(&g);
	if (!t.decoded || t.bad) {
		FAIL(name, "%lu samples of the child, %lu with AUX, %lu decode, %lu bad", t.samples,
		     t.with_aux, t.decoded, t.bad);
		return;
	}
	printf("PASS %s: the inherited events traced the child (%lu samples, %lu decode)\n",
	       name, t.samples, t.decoded);
}

static void fault_churn(int type, int per_cpu)
{
	const char *name = per_cpu ? "fault: 100 rounds per CPU on every CPU" :
				     "fault: 100 rounds per task on every CPU";
	int cpus = sysconf(_SC_NPROCESSORS_ONLN), rounds = 0;

	for (int cpu = 0; cpu < cpus; cpu++) {
		if (on_cpu(cpu)) {
			FAIL(name, "sched_setaffinity(%d): %s", cpu, strerror(errno));
			return;
		}
		for (int i = 0; i < 100; i++, rounds++) {
			struct group g;

			if (group_start(&g, type, per_cpu ? -1 : 0, per_cpu ? cpu : -1, 0, name))
				return;
			workload(1 + i % 3);
			/*
			 * Every ending in turn: unmap AUX first, close first,
			 * or disable first.
			 */
			switch (i % 3) {
			case 0:
				munmap(g.r.aux, g.r.aux_size);
				g.r.aux = NULL;
				break;
			case 1:
				close(g.leader);
				g.leader = -1;
				break;
			default:
				if (group_enable(&g, 0))
					FAIL(name, "disable: %s", strerror(errno));
				break;
			}
			group_close(&g);
		}
	}
	on_cpu(0);
	{
		char what[64];

		snprintf(what, sizeof(what), "%d rounds on %d CPUs", rounds, cpus);
		pass_after(type, name, what);
	}
}

static void fault_rmmod(int type, int unused)
{
	const char *name = "fault: rmmod while events are open";
	struct group g;
	long r;

	(void)unused;
	if (group_start(&g, type, 0, -1, 0, name))
		return;
	workload(5);
	r = syscall(SYS_delete_module, name_from_env("PERFAUX_MODULE"), O_NONBLOCK);
	if (r == 0) {
		FAIL(name, "the module was removed under open events");
		return;
	}
	if (errno != EWOULDBLOCK && errno != EBUSY) {
		FAIL(name, "delete_module: %s", strerror(errno));
		group_close(&g);
		return;
	}
	workload(5);
	group_close(&g);
	pass_after(type, name, "refused (EWOULDBLOCK/EBUSY)");
}

/*
 * rmmod after the event is gone but not its AUX area: the sampler's output
 * is the leader's, so the sampler's fd maps the leader's ring and AUX area
 * too; the leader closed and unmapped, that AUX buffer lives on, and the
 * ring buffer frees it through the module's free_aux (rb->free_aux) when
 * its last mapping goes. Until then the module must stay: each AUX buffer
 * holds it (setup_aux to free_aux). Without that, the rmmod succeeds and
 * the munmap jumps into the freed module.
 */
static void fault_rmmod_aux(int type, int unused)
{
	const char *name = "fault: rmmod while another event's fd maps the AUX area";
	struct group g;
	struct ring r = { 0 };
	long removed;

	(void)unused;
	if (group_start(&g, type, 0, -1, 0, name))
		return;
	workload(5);
	r.fd = g.sampler;
	if (map_ring(&r, PROT_READ)) {
		FAIL(name, "the sampler's mappings: %s", strerror(errno));
		unmap_ring(&r);
		group_close(&g);
		return;
	}
	unmap_ring(&g.r);
	close(g.leader);
	g.leader = -1;
	workload(5);
	removed = syscall(SYS_delete_module, name_from_env("PERFAUX_MODULE"), O_NONBLOCK);
	if (removed == 0) {
		/* What follows jumps into freed module text: say so first. */
		printf("FAIL %s: the module was removed under a live AUX buffer\n", name);
		fflush(stdout);
		failures++;
	} else if (errno != EWOULDBLOCK && errno != EBUSY) {
		FAIL(name, "delete_module: %s", strerror(errno));
	}
	unmap_ring(&r);
	group_close(&g);
	if (removed == 0)
		return;
	pass_after(type, name, "refused until the AUX area's last mapping went");
}

static void fault_hotplug(int type, int unused)
{
	const char *name = "fault: CPU 1 offline and online with a per-CPU group on it";
	struct group g;

	(void)unused;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		FAIL(name, "one CPU online");
		return;
	}
	if (group_start(&g, type, -1, 1, 0, name))
		return;
	workload(10);
	if (cpu_online(1, 0)) {
		FAIL(name, "offline: %s", strerror(errno));
		group_close(&g);
		return;
	}
	workload(20);
	if (cpu_online(1, 1)) {
		FAIL(name, "online: %s", strerror(errno));
		group_close(&g);
		return;
	}
	workload(10);
	group_close(&g);
	if (on_cpu(1)) {
		FAIL(name, "CPU 1 back: %s", strerror(errno));
		return;
	}
	pass_after(type, name, "the ticker stopped and started with the CPU");
	on_cpu(0);
}

/* The fault cases, by the words their names start with (after "fault: "). */
static const struct fault_case {
	const char *key;
	void (*run)(int type, int arg);
	int arg;
} fault_cases[] = {
	{ "munmap-aux", fault_munmap_aux, 0 },
	{ "munmap-all", fault_munmap_all, 0 },
	{ "close-leader", fault_close, 1 },
	{ "close-sampler", fault_close, 0 },
	{ "exit", fault_task, 0 },
	{ "exec", fault_task, 1 },
	{ "inherit", fault_inherit, 0 },
	{ "churn-task", fault_churn, 0 },
	{ "churn-cpu", fault_churn, 1 },
	{ "rmmod", fault_rmmod, 0 },
	{ "rmmod-aux", fault_rmmod_aux, 0 },
	{ "hotplug", fault_hotplug, 0 },
};

/* Runs the fault cases whose key is `only` (NULL: all). */
static void fault_suite(int type, const char *only)
{
	for (size_t i = 0; i < ARRAY_SIZE(fault_cases); i++)
		if (!only || strcmp(only, fault_cases[i].key) == 0)
			fault_cases[i].run(type, fault_cases[i].arg);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--spin") == 0) {
		/* The exec'd image of the exec fault case. */
		workload(30);
		return 0;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int type = pmu_type();

	if (type < 0) {
		printf("FAIL %s: no such PMU in /sys/bus/event_source/devices\n", name_from_env("PERFAUX_PMU"));
		return 1;
	}
	printf("%s is PMU type %d\n", name_from_env("PERFAUX_PMU"), type);
	if (argc > 2 && strcmp(argv[1], "--snapshot") == 0) {
		/* The snapshot cases alone, n times: check --snapshot <n>. */
		for (int n = atoi(argv[2]); n > 0; n--) {
			snapshot_case(type, 0);
			snapshot_case(type, 1);
		}
		printf(failures ? "%d FAILED\n" : "ALL PASS\n", failures);
		return failures != 0;
	}
	if (argc > 2 && strcmp(argv[1], "--fault") == 0) {
		/* One fault case alone: check --fault <key> (see fault_cases). */
		fault_suite(type, argv[2]);
		printf(failures ? "%d FAILED\n" : "ALL PASS\n", failures);
		return failures != 0;
	}
	snapshot_case(type, 0);
	snapshot_case(type, 1);
	full_case(type);
	error_cases();
	fault_suite(type, NULL);
	if (failures)
		printf("%d FAILED\n", failures);
	else
		printf("ALL PASS\n");
	return failures != 0;
}
