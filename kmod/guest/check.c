// SPDX-License-Identifier: GPL-2.0
/*
 * The guest side of kmod/test: drives perfaux_pt through perf_event_open
 * as a user would, and checks what the kernel hands back. Prints one
 * "PASS <case>" or "FAIL <case>: why" line per case and "ALL PASS" last.
 *
 * Cases: a snapshot-mode leader with cpu-clock and task-clock samplers
 * asking for 4 KiB and 64 KiB of AUX data (sizes by the kernel's rules,
 * payloads that decode as Intel PT with plausible TIP/FUP addresses and
 * TSCs that never go back); a full-trace leader read through
 * aux_head/aux_tail and PERF_RECORD_AUX; aux_sample_size under a leader
 * without AUX (EINVAL); an AUX mmap on a software event (EOPNOTSUPP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
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

static int pmu_type(void)
{
	FILE *f = fopen("/sys/bus/event_source/devices/perfaux_pt/type", "r");
	int t = -1;
	if (f) {
		if (fscanf(f, "%d", &t) != 1)
			t = -1;
		fclose(f);
	}
	return t;
}

/* ---- a minimal Intel PT packet decoder ---- */
struct decoded {
	unsigned long packets, psbs, tips, fups, tscs;
	int bad;            /* an undecodable packet after sync */
	int bad_ip;         /* a TIP/FUP address that is neither user nor kernel */
	unsigned long kernel_ips, user_ips;
	int tsc_back;       /* a TSC lower than the one before */
	uint64_t last_tsc;
};

static int plausible(uint64_t ip)
{
	return (ip >= 0xffff800000000000ull) || (ip != 0 && ip < 0x0000800000000000ull);
}

static const unsigned char PSB[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
				       2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

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
			switch (b[i + 1]) {
			case 0x82: len = 16; if (i + 16 <= n && memcmp(b + i, PSB, 16) == 0) d->psbs++; else { d->bad++; return 1; } break;
			case 0x23: len = 2; break;  /* PSBEND */
			case 0x03: len = 4; break;  /* CBR */
			case 0xa3: len = 8; break;  /* long TNT */
			case 0xf3: len = 2; break;  /* OVF */
			case 0x83: len = 2; break;  /* TraceStop */
			case 0x43: len = 8; break;  /* PIP */
			case 0x73: len = 7; break;  /* TMA */
			default: d->bad++; return 1;
			}
		} else if (c == 0x19) {
			len = 8;
			if (i + 8 <= n) {
				uint64_t t = 0;
				memcpy(&t, b + i + 1, 7);
				if (t < d->last_tsc)
					d->tsc_back++;
				d->last_tsc = t;
				d->tscs++;
			}
		} else if (c == 0x59 || c == 0x99) {
			len = 2; /* MTC, MODE */
		} else if ((c & 1) == 0) {
			len = 1; /* short TNT */
		} else if ((c & 0x1f) == 0x0d || (c & 0x1f) == 0x11 || (c & 0x1f) == 0x01 || (c & 0x1f) == 0x1d) {
			unsigned ipb = c >> 5;
			size_t bytes;
			switch (ipb) {
			case 0: bytes = 0; break;
			case 1: bytes = 2; break;
			case 2: bytes = 4; break;
			case 3: case 4: bytes = 6; break;
			case 6: bytes = 8; break;
			default: d->bad++; return 1;
			}
			len = 1 + bytes;
			if (i + len <= n && bytes) {
				uint64_t v = 0, ip = *last_ip;
				memcpy(&v, b + i + 1, bytes);
				if (ipb == 1) ip = (ip & ~0xffffull) | v;
				else if (ipb == 2) ip = (ip & ~0xffffffffull) | v;
				else if (ipb == 3) ip = (uint64_t)((int64_t)(v << 16) >> 16);
				else if (ipb == 4) ip = (ip & ~0xffffffffffffull) | v;
				else ip = v;
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

static int map_ring(struct ring *r, int aux_prot)
{
	r->page = mmap(NULL, (1 + DATA_PAGES) * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->page == MAP_FAILED)
		return -errno;
	r->data = (unsigned char *)r->page + PAGE;
	if (!aux_prot)
		return 0;
	r->aux_size = AUX_PAGES * PAGE;
	r->page->aux_offset = (1 + DATA_PAGES) * PAGE;
	r->page->aux_size = r->aux_size;
	r->aux = mmap(NULL, r->aux_size, aux_prot, MAP_SHARED, r->fd, r->page->aux_offset);
	if (r->aux == MAP_FAILED)
		return -errno;
	return 0;
}

static void workload(int ms)
{
	struct timespec s, t;
	clock_gettime(CLOCK_MONOTONIC, &s);
	volatile unsigned long x = 0;
	do {
		for (int i = 0; i < 10000; i++)
			x += i * 7;
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
	uint64_t head = __atomic_load_n(&r->page->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->page->data_tail;
	size_t size = DATA_PAGES * PAGE;
	static unsigned char rec[65536];
	while (tail < head) {
		struct perf_event_header h;
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

static void check_sample(void *ctx, const unsigned char *r, size_t n)
{
	struct sample_check *checks = ctx, *c = NULL;
	uint32_t type;
	memcpy(&type, r, 4);
	if (type == PERF_RECORD_LOST && n >= 24) {
		uint64_t lost;
		memcpy(&lost, r + 16, 8);
		lost_records += lost;
		return;
	}
	if (type != PERF_RECORD_SAMPLE || n < 8 + 4 * 8)
		return;
	uint64_t id, aux;
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
	/* TSCs must not go back within one snapshot (snapshots overlap, so
	 * the next one may start earlier than this one ends). */
	struct decoded one = { 0 };
	uint64_t last_ip = 0;
	if (decode(r + 8 + 5 * 8, aux, &one, &last_ip))
		c->with_psb++;
	else if (aux >= PSB_PERIOD + 256)
		one.bad++; /* a large snapshot without a PSB */
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

static void snapshot_case(int type, int exclude_kernel)
{
	struct perf_event_attr a;
	base_attr(&a, type, PT_CONFIG_TSC);
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
	a.sample_id_all = 1;
	a.disabled = 1;
	a.exclude_kernel = exclude_kernel;
	lost_records = 0;
	struct ring lr = { 0 };
	lr.fd = peo(&a, -1);
	if (lr.fd < 0) {
		FAIL("snapshot", "perf_event_open(perfaux_pt): %s", strerror(errno));
		return;
	}
	int r = map_ring(&lr, PROT_READ); /* read-only AUX: snapshot mode */
	if (r) {
		FAIL("snapshot", "mmap: %s", strerror(-r));
		return;
	}
	struct { uint64_t config, period, aux; const char *name; } samplers[2] = {
		{ PERF_COUNT_SW_CPU_CLOCK, 200000, 4096,
		  exclude_kernel ? "snapshot exclude_kernel cpu-clock 4096" : "snapshot cpu-clock 4096" },
		{ PERF_COUNT_SW_TASK_CLOCK, 2000000, 65536,
		  exclude_kernel ? "snapshot exclude_kernel task-clock 65536" : "snapshot task-clock 65536" },
	};
	int fds[2];
	for (int i = 0; i < 2; i++) {
		base_attr(&a, PERF_TYPE_SOFTWARE, samplers[i].config);
		a.sample_period = samplers[i].period;
		a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
				PERF_SAMPLE_TIME | PERF_SAMPLE_AUX;
		a.sample_id_all = 1;
		a.aux_sample_size = samplers[i].aux;
		fds[i] = peo(&a, lr.fd);
		if (fds[i] < 0 || ioctl(fds[i], PERF_EVENT_IOC_SET_OUTPUT, lr.fd)) {
			FAIL(samplers[i].name, "open/set_output: %s", strerror(errno));
			return;
		}
	}
	struct sample_check checks[2];
	memset(checks, 0, sizeof(checks));
	for (int i = 0; i < 2; i++) {
		ioctl(fds[i], PERF_EVENT_IOC_ID, &checks[i].id);
		checks[i].name = samplers[i].name;
		checks[i].aux_sample_size = samplers[i].aux;
		checks[i].aux_buffer = lr.aux_size;
	}
	ioctl(lr.fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
	for (int round = 0; round < 40; round++) {
		workload(10);
		read_records(&lr, check_sample, checks); /* keep up with the samples */
	}
	ioctl(lr.fd, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
	read_records(&lr, check_sample, checks);
	for (int i = 0; i < 2; i++) {
		struct sample_check c = checks[i];
		if (c.samples == 0 || c.with_aux == 0)
			FAIL(c.name, "%lu samples, %lu with AUX data", c.samples, c.with_aux);
		else if (c.bad_size)
			FAIL(c.name, "%d AUX sizes break the kernel's rules", c.bad_size);
		else if (c.d.bad || c.d.bad_ip || c.d.tsc_back)
			FAIL(c.name, "bad packets %d, implausible IPs %d, TSCs going back %d", c.d.bad,
			     c.d.bad_ip, c.d.tsc_back);
		else if (c.d.tips + c.d.fups == 0 || c.d.tscs == 0)
			FAIL(c.name, "no TIP/FUP or TSC in %lu payloads", c.with_psb);
		else if (exclude_kernel && (c.d.kernel_ips || !c.d.user_ips))
			FAIL(c.name, "exclude_kernel, yet %lu kernel and %lu user addresses", c.d.kernel_ips,
			     c.d.user_ips);
		else if (!exclude_kernel && (!c.d.kernel_ips || !c.d.user_ips))
			FAIL(c.name, "%lu kernel and %lu user addresses: both are traced", c.d.kernel_ips,
			     c.d.user_ips);
		else
			printf("PASS %s: %lu samples, %lu with AUX data, %lu decoded (%lu packets, %lu TIP, %lu FUP, %lu TSC; %lu kernel, %lu user addresses), %lu records lost\n",
			       c.name, c.samples, c.with_aux, c.with_psb, c.d.packets, c.d.tips, c.d.fups,
			       c.d.tscs, c.d.kernel_ips, c.d.user_ips, lost_records);
	}
	close(fds[0]);
	close(fds[1]);
	munmap(lr.aux, lr.aux_size);
	munmap(lr.page, (1 + DATA_PAGES) * PAGE);
	close(lr.fd);
}

struct aux_records {
	unsigned long records, truncated;
	uint64_t bytes;
};

static void count_aux(void *ctx, const unsigned char *r, size_t n)
{
	struct aux_records *a = ctx;
	uint32_t type;
	memcpy(&type, r, 4);
	if (type != PERF_RECORD_AUX || n < 32)
		return;
	uint64_t size, flags;
	memcpy(&size, r + 16, 8);
	memcpy(&flags, r + 24, 8);
	a->records++;
	a->bytes += size;
	if (flags & PERF_AUX_FLAG_TRUNCATED)
		a->truncated++;
}

static void full_case(int type)
{
	struct perf_event_attr a;
	base_attr(&a, type, PT_CONFIG_TSC);
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IDENTIFIER;
	a.sample_id_all = 1;
	a.disabled = 1;
	struct ring lr = { 0 };
	lr.fd = peo(&a, -1);
	if (lr.fd < 0) {
		FAIL("full-trace", "perf_event_open: %s", strerror(errno));
		return;
	}
	int r = map_ring(&lr, PROT_READ | PROT_WRITE); /* writable AUX: full trace */
	if (r) {
		FAIL("full-trace", "mmap: %s", strerror(-r));
		return;
	}
	static unsigned char stream[4 << 20];
	size_t len = 0;
	struct aux_records ar = { 0 };
	ioctl(lr.fd, PERF_EVENT_IOC_ENABLE, 0);
	for (int round = 0; round < 20; round++) {
		workload(20);
		read_records(&lr, count_aux, &ar);
		uint64_t head = __atomic_load_n(&lr.page->aux_head, __ATOMIC_ACQUIRE);
		uint64_t tail = lr.page->aux_tail;
		for (; tail < head && len < sizeof(stream); tail++)
			stream[len++] = lr.aux[tail % lr.aux_size];
		__atomic_store_n(&lr.page->aux_tail, tail, __ATOMIC_RELEASE);
	}
	ioctl(lr.fd, PERF_EVENT_IOC_DISABLE, 0);
	read_records(&lr, count_aux, &ar);
	uint64_t head = __atomic_load_n(&lr.page->aux_head, __ATOMIC_ACQUIRE);
	for (uint64_t tail = lr.page->aux_tail; tail < head && len < sizeof(stream); tail++)
		stream[len++] = lr.aux[tail % lr.aux_size];
	struct decoded d = { 0 };
	uint64_t last_ip = 0;
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
	munmap(lr.aux, lr.aux_size);
	munmap(lr.page, (1 + DATA_PAGES) * PAGE);
	close(lr.fd);
}

static void error_cases(void)
{
	struct perf_event_attr a;
	base_attr(&a, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK);
	a.sample_period = 100000;
	int leader = peo(&a, -1);
	base_attr(&a, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
	a.sample_period = 100000;
	a.sample_type = PERF_SAMPLE_AUX;
	a.aux_sample_size = 4096;
	int fd = peo(&a, leader);
	if (leader < 0 || fd >= 0 || errno != EINVAL)
		FAIL("aux_sample_size without an AUX leader", "open gave %d (%s)", fd, strerror(errno));
	else
		printf("PASS aux_sample_size without an AUX leader: EINVAL\n");
	struct ring r = { 0 };
	r.fd = leader;
	int m = map_ring(&r, PROT_READ);
	if (m != -EOPNOTSUPP)
		FAIL("AUX mmap on a software event", "mmap gave %d", m);
	else
		printf("PASS AUX mmap on a software event: EOPNOTSUPP\n");
	close(leader);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int type = pmu_type();
	if (type < 0) {
		printf("FAIL perfaux_pt: no such PMU in /sys/bus/event_source/devices\n");
		return 1;
	}
	printf("perfaux_pt is PMU type %d\n", type);
	snapshot_case(type, 0);
	snapshot_case(type, 1);
	full_case(type);
	error_cases();
	if (failures)
		printf("%d FAILED\n", failures);
	else
		printf("ALL PASS\n");
	return failures != 0;
}
