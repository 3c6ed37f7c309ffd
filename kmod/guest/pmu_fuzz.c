// SPDX-License-Identifier: GPL-2.0
/*
 * A syscall fuzzer aimed at one PMU: perfaux_pt.ko's or perfaux_rs.ko's.
 *
 *   pmu_fuzz -p PMU -m MODULE.ko [-P "params"] [-s SEED] [-n OPS] [-w WORK] [-v]
 *
 * It runs OPS operations drawn from a generator seeded with SEED: sessions
 * of our PMU's event (random attr.config bits, exclude flags, inherit,
 * per-task or per-CPU, disabled or enable_on_exec) with samplers of every
 * software type grouped under it (random sample_type, read_format and
 * aux_sample_size), mmap and munmap of the ring and the AUX area at random
 * sizes and in random orders (read-only and read-write AUX), every
 * PERF_EVENT_IOC_*, read, poll, fork, exit and exec of traced tasks, close
 * in every order, CPU 1 offline and online, and an rmmod attempt every so
 * often (refused while our events live; between sessions the module is
 * unloaded and loaded again with the same parameters).
 *
 * Which operation runs, on which slot and with which arguments is a
 * function of the seed alone: every operation draws the same number of
 * random words whatever the earlier ones returned, so a seed replays the
 * same sequence (what each call returns can still differ with timing: a
 * sample lands or not). -v prints every operation before it runs; without
 * it a line every 500 operations says how far the run got, so that a
 * crash's seed and operation number lead to a -v replay.
 *
 * What it checks itself: every PERF_RECORD_SAMPLE in every ring parses
 * field by field to exactly its size, and its AUX data is no larger than
 * the aux_sample_size asked for; module load and unload work when nothing
 * is open; rmmod is refused while anything holds the module: our event
 * (an fd, or a mapping of its ring) or any AUX area of our PMU, even one
 * mapped through another event's fd after our event is gone (tried after
 * every close and munmap). The kernel's own checks (slub_debug=FZPU
 * poisoning, WARN, BUG) judge the rest: the test script reads the serial
 * log.
 *
 * At the end it prints one line the test script reads:
 *   pmu_fuzz: seed S: N ops (R ops/s), E events opened on PMU of O opens,
 *   A AUX areas mapped, P samples, X with AUX data, I instructions stepped,
 *   F forks, M module reloads (K refused while held, Q by an AUX area
 *   alone), C CPU hotplugs
 * and exits 0, or 1 after a "FAIL pmu_fuzz: ..." line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <poll.h>
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

#define PAGE 4096ul
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_SAMPLERS 4
#define MAX_CHILDREN 4

/* ---- the generator: splitmix64, a word per draw ---- */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* An operation's arguments: drawn all at once, used or not. */
#define DRAWS 12
struct draws {
	uint64_t w[DRAWS];
};

static void draw(struct draws *d)
{
	for (int i = 0; i < DRAWS; i++)
		d->w[i] = rnd();
}

/* 0..n-1 from word i. */
static unsigned pick(const struct draws *d, int i, unsigned n)
{
	return (unsigned)(d->w[i] % n);
}

/* True with probability num/den, from word i. */
static int chance(const struct draws *d, int i, unsigned num, unsigned den)
{
	return d->w[i] % den < num;
}

/* ---- the run's settings and counts ---- */
static const char *pmu_name = "perfaux_pt";
static const char *module_path;
static const char *module_params = "";
static char module_name[64];
static int pmu_type = -1;
static int verbose;
static unsigned long work_loops = 20000;
static int ncpus;

static struct {
	unsigned long ops, opens, opens_ours, aux_maps, aux_samples, samples, forks, reloads, hotplugs;
	unsigned long rmmod_refused, aux_only_refused;
} count;

static int failed;

#define FAIL(...)                                                            \
	do {                                                                 \
		printf("FAIL pmu_fuzz: op %lu: ", count.ops);                \
		printf(__VA_ARGS__);                                         \
		printf("\n");                                                \
		fflush(stdout);                                              \
		failed = 1;                                                  \
	} while (0)

#define LOG(...)                                                             \
	do {                                                                 \
		if (verbose) {                                               \
			printf("op %lu: ", count.ops);                       \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			fflush(stdout);                                      \
		}                                                            \
	} while (0)

/* ---- one session: our event, its samplers, their mappings ---- */
struct ring {
	void *base;        /* the user page and data pages, or NULL */
	size_t len;
	void *aux;         /* the AUX area, or NULL */
	size_t aux_len;
};

/* What a sampler's samples hold, found by the id every one starts with. */
struct layout {
	uint64_t id, sample_type, read_format, regs_user;
	uint32_t aux_sample_size;
};

struct member {
	int fd;            /* -1 when closed */
	struct ring ring;
	uint64_t tail;     /* how far this ring has been read */
	int reader;        /* this mapping reads the ring (no other does) */
};

/*
 * A ring mapped twice (an event whose output was set to another's maps
 * that one's ring) has one reader: each mapping's user page carries a
 * mark in its reserved bytes, which a second mapping finds there.
 */
static uint64_t next_mark = 1;

#define MAX_LAYOUTS 32

static struct session {
	struct member leader;
	struct member samplers[MAX_SAMPLERS];
	pid_t children[MAX_CHILDREN];
	int cpu;           /* -1: per task */
	/*
	 * Every sampler the session opened, closed or not: SET_OUTPUT sends
	 * samples into another event's ring, and a closed event's samples
	 * stay in the ring until read.
	 */
	struct layout layouts[MAX_LAYOUTS];
	unsigned nlayouts;
} s;

static struct member *slot(unsigned i)
{
	return i == 0 ? &s.leader : &s.samplers[(i - 1) % MAX_SAMPLERS];
}

#define SLOTS (1 + MAX_SAMPLERS)

static void session_reset(void)
{
	memset(&s, 0, sizeof(s));
	s.leader.fd = -1;
	for (int i = 0; i < MAX_SAMPLERS; i++)
		s.samplers[i].fd = -1;
	for (int i = 0; i < MAX_CHILDREN; i++)
		s.children[i] = 0;
	s.cpu = -1;
}

static int session_live(void)
{
	for (unsigned i = 0; i < SLOTS; i++)
		if (slot(i)->fd >= 0 || slot(i)->ring.base || slot(i)->ring.aux)
			return 1;
	return 0;
}

static long peo(struct perf_event_attr *a, pid_t pid, int cpu, int group, unsigned long flags)
{
	return syscall(SYS_perf_event_open, a, pid, cpu, group, flags);
}

/* ---- the work traced tasks do ---- */
static volatile uint64_t sink;

static void work(unsigned long loops)
{
	uint64_t x = loops;

	for (unsigned long i = 0; i < loops; i++) {
		/* Branches both ways, calls and returns: a trace to write. */
		x = (x & 1) ? 3 * x + 1 : x / 2;
		if (i % 64 == 0)
			sink += x;
	}
	sink += x;
}

/* ---- the ring: every sample parsed to its exact size ---- */
static size_t read_value_size(uint64_t read_format)
{
	size_t n = 8;

	n += read_format & PERF_FORMAT_TOTAL_TIME_ENABLED ? 8 : 0;
	n += read_format & PERF_FORMAT_TOTAL_TIME_RUNNING ? 8 : 0;
	n += read_format & PERF_FORMAT_ID ? 8 : 0;
	n += read_format & PERF_FORMAT_LOST ? 8 : 0;
	return n;
}

/* A bad record's first words, for the log. */
static void dump(const unsigned char *p, size_t size)
{
	for (size_t i = 0; i + 8 <= size && i < 160; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		printf("  +%zu: %016" PRIx64 "\n", i, w);
	}
}

static const struct layout *find_layout(uint64_t id)
{
	for (unsigned i = 0; i < s.nlayouts; i++)
		if (s.layouts[i].id == id)
			return &s.layouts[i];
	return NULL;
}

/*
 * The sample of size bytes (the header included) whose first avail bytes
 * are at p, in perf_output_sample()'s order for the layout of the sampler
 * its PERF_SAMPLE_IDENTIFIER names. Every field before the AUX data is in
 * the first avail bytes; the AUX data, last, is only counted. Returns the
 * AUX size it carries, or -1 with a FAIL when the fields do not add up to
 * its size.
 */
static long parse_sample(const unsigned char *p, size_t avail, size_t size)
{
	size_t o = sizeof(struct perf_event_header);
	const struct layout *m;
	uint64_t t, v;
	long aux = 0;

	if (size < o + 8) {
		FAIL("a sample of %zu bytes has no identifier", size);
		return -1;
	}
	memcpy(&v, p + o, 8);
	m = find_layout(v);
	if (!m) {
		FAIL("a sample of an event this session did not open (id %" PRIu64 ")", v);
		return -1;
	}
	t = m->sample_type;

#define TAKE(n)                                                              \
	do {                                                                 \
		if (o + (n) > size)                                          \
			goto short_;                                         \
		o += (n);                                                    \
	} while (0)
#define U64() (o + 8 <= avail ? (memcpy(&v, p + o, 8), o += 8, v) : (o = size + 1, 0))

	if (t & PERF_SAMPLE_IDENTIFIER)
		TAKE(8);
	if (t & PERF_SAMPLE_IP)
		TAKE(8);
	if (t & PERF_SAMPLE_TID)
		TAKE(8);
	if (t & PERF_SAMPLE_TIME)
		TAKE(8);
	if (t & PERF_SAMPLE_ADDR)
		TAKE(8);
	if (t & PERF_SAMPLE_ID)
		TAKE(8);
	if (t & PERF_SAMPLE_STREAM_ID)
		TAKE(8);
	if (t & PERF_SAMPLE_CPU)
		TAKE(8);
	if (t & PERF_SAMPLE_PERIOD)
		TAKE(8);
	if (t & PERF_SAMPLE_READ)
		TAKE(read_value_size(m->read_format));
	if (t & PERF_SAMPLE_CALLCHAIN) {
		uint64_t nr = U64();

		if (o > size || nr > 1024)
			goto short_;
		TAKE(nr * 8);
	}
	if (t & PERF_SAMPLE_REGS_USER) {
		uint64_t abi = U64();

		if (o > size)
			goto short_;
		if (abi)
			TAKE(8 * (size_t)__builtin_popcountll(m->regs_user));
	}
	if (t & PERF_SAMPLE_WEIGHT)
		TAKE(8);
	if (t & PERF_SAMPLE_DATA_SRC)
		TAKE(8);
	if (t & PERF_SAMPLE_TRANSACTION)
		TAKE(8);
	if (t & PERF_SAMPLE_PHYS_ADDR)
		TAKE(8);
	if (t & PERF_SAMPLE_DATA_PAGE_SIZE)
		TAKE(8);
	if (t & PERF_SAMPLE_CODE_PAGE_SIZE)
		TAKE(8);
	if (t & PERF_SAMPLE_AUX) {
		uint64_t n = U64();

		if (o > size)
			goto short_;
		/* perf_prepare_sample_aux(): at most what was asked, padded to 8. */
		if (n > ((m->aux_sample_size + 7ull) & ~7ull) || n % 8) {
			FAIL("a sample carries %" PRIu64 " bytes of AUX data, %u asked", n,
			     m->aux_sample_size);
			return -1;
		}
		TAKE(n);
		aux = (long)n;
	}
	if (o != size) {
		FAIL("a sample of type %#" PRIx64 " is %zu bytes, its fields %zu", t, size, o);
		dump(p, size);
		return -1;
	}
	return aux;
short_:
	FAIL("a sample of type %#" PRIx64 " is %zu bytes, too short for its fields", t, size);
	return -1;
#undef TAKE
#undef U64
}

/* Reads m's ring from where it stopped to the head, as perf does. */
static void drain(struct member *m)
{
	struct perf_event_mmap_page *pg = m->ring.base;
	/*
	 * A record's fields before its AUX data: a copy of the whole record
	 * would be up to 64 KiB per sample, each byte a single step when the
	 * fuzzer traces itself.
	 */
	unsigned char rec[8192];
	size_t data_size;
	uint64_t head;

	if (!pg || !m->reader || m->ring.len <= PAGE)
		return;
	data_size = m->ring.len - PAGE;
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	if (head - m->tail > data_size) {
		FAIL("data_head %" PRIu64 " runs %" PRIu64 " bytes past the tail, ring %zu",
		     head, head - m->tail, data_size);
		m->tail = head;
	}
	while (m->tail + sizeof(struct perf_event_header) <= head) {
		const unsigned char *data = (const unsigned char *)pg + PAGE;
		struct perf_event_header h;
		size_t off = m->tail % data_size;

		for (size_t i = 0; i < sizeof(h); i++)
			((unsigned char *)&h)[i] = data[(off + i) % data_size];
		if (h.size < sizeof(h) || m->tail + h.size > head) {
			FAIL("a record of size %u at %" PRIu64 ", head %" PRIu64, h.size, m->tail, head);
			m->tail = head;
			break;
		}
		if (h.type == PERF_RECORD_SAMPLE) {
			size_t avail = h.size < sizeof(rec) ? h.size : sizeof(rec);
			size_t first = avail < data_size - off ? avail : data_size - off;
			long aux;

			memcpy(rec, data + off, first);
			memcpy(rec + first, data, avail - first);
			aux = parse_sample(rec, avail, h.size);

			count.samples++;
			if (aux > 0)
				count.aux_samples++;
		}
		m->tail += h.size;
	}
	__atomic_store_n(&pg->data_tail, m->tail, __ATOMIC_RELEASE);
}

static void drain_all(void)
{
	for (unsigned i = 0; i < SLOTS; i++)
		drain(slot(i));
}

/* ---- the operations ---- */

/* Our event's attr.config: mostly what perf sets, sometimes any bits. */
static uint64_t random_config(const struct draws *d)
{
	static const uint64_t known[] = {
		1ull << 0,  /* pt */     1ull << 10, /* tsc */    1ull << 11, /* noretcomp */
		1ull << 13, /* branch */ 1ull << 1,  /* cyc */    1ull << 9,  /* mtc */
		1ull << 4,  /* pwr_evt */ 1ull << 12, /* ptw */   1ull << 5,  /* fup_on_ptw */
		1ull << 31, /* event */  1ull << 55, /* notnt */
	};
	uint64_t c;

	if (chance(d, 1, 1, 16))
		return d->w[2];
	c = (1ull << 0) | (1ull << 10) | (1ull << 13); /* perf's intel_pt//: pt, tsc, branch */
	/* pt, tsc, noretcomp and branch flip 1 in 8, the rest 1 in 32. */
	for (unsigned i = 0; i < ARRAY_SIZE(known); i++)
		if (((d->w[3] >> (5 * i)) & (i < 4 ? 7 : 31)) == 0)
			c ^= known[i];
	/* psb_period: 0-5 are served (caps/psb_periods 3f); 6-15 refused, 1 in 16. */
	c |= (uint64_t)(chance(d, 9, 1, 16) ? 6 + (d->w[9] >> 8) % 10 : (d->w[9] >> 8) % 6) << 24;
	return c;
}

/* A whole mapping goes: that cannot fail. */
static void unmap(void **p, size_t len)
{
	if (munmap(*p, len))
		FAIL("munmap of a whole mapping (%zu bytes): %s", len, strerror(errno));
	*p = NULL;
}

static void close_member(struct member *m)
{
	if (m->ring.aux)
		unmap(&m->ring.aux, m->ring.aux_len);
	if (m->ring.base) {
		drain(m);
		unmap(&m->ring.base, m->ring.len);
	}
	if (m->fd >= 0) {
		close(m->fd);
		m->fd = -1;
	}
}

static struct member *open_sampler(const struct draws *d, int perf_like);
static int map_ring(struct member *m, size_t pages);
static void map_aux(struct member *m, uint64_t offset, uint64_t size, int prot);

/*
 * What perf record -e '{PMU//,cpu-clock}' --aux-sample does next: the
 * leader's ring and AUX area (snapshot or full), one or two samplers
 * writing into the leader's ring, then the group enabled.
 */
static void set_up_like_perf(const struct draws *sub)
{
	struct member *l = &s.leader;
	unsigned n = 1 + pick(&sub[0], 0, 2);

	if (map_ring(l, 1 + (8ul << pick(&sub[0], 1, 4))))
		return;
	map_aux(l, l->ring.len, PAGE << (2 + pick(&sub[0], 2, 5)),
		chance(&sub[0], 3, 1, 2) ? PROT_READ : PROT_READ | PROT_WRITE);
	for (unsigned i = 0; i < n; i++) {
		struct member *m = open_sampler(&sub[1 + i], 1);

		if (!m || ioctl(m->fd, PERF_EVENT_IOC_SET_OUTPUT, l->fd))
			continue;
		/*
		 * A second reader, one time in four: the same ring and AUX
		 * area mapped through the sampler's fd, which can outlive the
		 * leader's.
		 */
		if (i == 0 && l->ring.aux && chance(&sub[0], 4, 1, 4) &&
		    map_ring(m, l->ring.len / PAGE) == 0)
			map_aux(m, m->ring.len, l->ring.aux_len, PROT_READ);
	}
	ioctl(l->fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
}

/*
 * Opens our event in a new session: per task (this task) or per CPU;
 * three times in four set up as perf record does.
 */
static void op_open_leader(const struct draws *d)
{
	struct perf_event_attr a = { .size = sizeof(a) };
	struct draws sub[3];
	int cpu = -1;
	long fd;

	/* Drawn whatever happens next, so the sequence stays the seed's. */
	for (unsigned i = 0; i < ARRAY_SIZE(sub); i++)
		draw(&sub[i]);
	if (s.leader.fd >= 0)
		return;
	a.type = pmu_type;
	a.config = random_config(d);
	a.exclude_kernel = chance(d, 5, 1, 2);
	a.exclude_user = chance(d, 5, 1, 5) && !a.exclude_kernel ? 1 : 0;
	a.exclude_hv = chance(d, 6, 1, 2);
	a.inherit = chance(d, 6, 1, 3) && (d->w[6] & 0x100);
	a.disabled = chance(d, 7, 1, 2);
	a.enable_on_exec = a.disabled && (d->w[7] & 0x100);
	if (chance(d, 4, 1, 4))
		cpu = (int)((d->w[4] >> 16) % (unsigned)ncpus);
	LOG("open %s config %#llx excl k%d u%d inherit %d disabled %d cpu %d", pmu_name,
	    (unsigned long long)a.config, a.exclude_kernel, a.exclude_user, a.inherit, a.disabled, cpu);
	fd = peo(&a, cpu >= 0 ? -1 : 0, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	count.opens++;
	if (fd < 0) {
		LOG("  %s", strerror(errno));
		return;
	}
	count.opens_ours++;
	s.leader.fd = (int)fd;
	s.cpu = cpu;
	if (!chance(d, 8, 1, 4))
		set_up_like_perf(sub);
}

/* Every software event type perf has, as samplers of the group. */
static const uint64_t sw_configs[] = {
	PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_TASK_CLOCK, PERF_COUNT_SW_PAGE_FAULTS,
	PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_CPU_MIGRATIONS, PERF_COUNT_SW_PAGE_FAULTS_MIN,
	PERF_COUNT_SW_PAGE_FAULTS_MAJ, PERF_COUNT_SW_ALIGNMENT_FAULTS, PERF_COUNT_SW_EMULATION_FAULTS,
	PERF_COUNT_SW_DUMMY, PERF_COUNT_SW_BPF_OUTPUT, PERF_COUNT_SW_CGROUP_SWITCHES,
};

/*
 * Sample types whose fields parse_sample() knows. Not PERF_SAMPLE_STACK_USER:
 * when the dump comes out empty with user registers at hand (seen in both
 * guest kernels), perf_output_sample_ustack() writes a dyn_size that
 * perf_prepare_sample() did not count, 8 bytes past the record's size,
 * which no reader can parse (perf's evsel__parse_sample() included).
 */
static const uint64_t sample_bits[] = {
	PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ADDR, PERF_SAMPLE_ID,
	PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU, PERF_SAMPLE_PERIOD, PERF_SAMPLE_READ,
	PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_WEIGHT,
	PERF_SAMPLE_DATA_SRC, PERF_SAMPLE_TRANSACTION, PERF_SAMPLE_PHYS_ADDR,
	PERF_SAMPLE_DATA_PAGE_SIZE, PERF_SAMPLE_CODE_PAGE_SIZE,
};

/* aux_sample_size: mostly what perf asks (4 KiB to 64 KiB), sometimes anything. */
static uint32_t random_aux_sample_size(const struct draws *d)
{
	switch (pick(d, 5, 8)) {
	case 0:
		return (uint32_t)d->w[6];
	case 1:
		return (uint32_t)(d->w[6] % 256);
	default:
		return 4096u << ((d->w[6] >> 8) % 5);
	}
}

/*
 * Adds a sampler to the session's group, asking for AUX data or not; as
 * perf record --aux-sample does (a clock asking for 4-64 KiB), if perf_like.
 * Returns it, or NULL.
 */
static struct member *open_sampler(const struct draws *d, int perf_like)
{
	struct perf_event_attr a = { .size = sizeof(a) };
	struct member *m = &s.samplers[pick(d, 0, MAX_SAMPLERS)];
	long fd;

	if (m->fd >= 0 || s.leader.fd < 0)
		return NULL;
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	a.type = PERF_TYPE_SOFTWARE;
	a.config = perf_like ? pick(d, 1, 2) : sw_configs[pick(d, 1, ARRAY_SIZE(sw_configs))];
	/* Clocks every 50-400 us, faults and switches every 1-4. */
	a.sample_period = a.config <= PERF_COUNT_SW_TASK_CLOCK ? 50000 * (1 + pick(d, 2, 8)) : 1 + pick(d, 2, 4);
	a.sample_type = PERF_SAMPLE_IDENTIFIER;
	for (unsigned i = 0; i < ARRAY_SIZE(sample_bits); i++)
		if ((d->w[3] >> i) & (d->w[3] >> (i + 20)) & 1)
			a.sample_type |= sample_bits[i];
	if (perf_like) {
		a.sample_type |= PERF_SAMPLE_AUX;
		a.aux_sample_size = 4096u << ((d->w[6] >> 8) % 5);
	} else if (!chance(d, 4, 1, 6)) {
		a.sample_type |= PERF_SAMPLE_AUX;
		a.aux_sample_size = random_aux_sample_size(d);
	}
	a.read_format = (d->w[7] & 0x1f) & (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
					    PERF_FORMAT_ID | PERF_FORMAT_LOST);
	a.sample_regs_user = d->w[7] >> 40 & 0xff00ff;
	a.exclude_kernel = (d->w[7] >> 12) & 1;
	a.exclude_callchain_kernel = (d->w[7] >> 13) & 1;
	a.inherit = (d->w[7] >> 14) & 1;
	a.disabled = !perf_like && chance(d, 4, 1, 8);
	a.wakeup_events = 1;
	LOG("open sampler %llu period %llu type %#llx aux %u", (unsigned long long)a.config,
	    (unsigned long long)a.sample_period, (unsigned long long)a.sample_type, a.aux_sample_size);
	fd = peo(&a, s.cpu >= 0 ? -1 : 0, s.cpu, s.leader.fd, PERF_FLAG_FD_CLOEXEC);
	count.opens++;
	if (fd < 0) {
		LOG("  %s", strerror(errno));
		return NULL;
	}
	m->fd = (int)fd;
	if (s.nlayouts == MAX_LAYOUTS) {
		/* Samples of a layout forgotten would read as another event's. */
		LOG("layout table full: the sampler is closed");
		close(m->fd);
		m->fd = -1;
		return NULL;
	}
	if (ioctl(m->fd, PERF_EVENT_IOC_ID, &s.layouts[s.nlayouts].id)) {
		FAIL("PERF_EVENT_IOC_ID: %s", strerror(errno));
		return NULL;
	}
	s.layouts[s.nlayouts].sample_type = a.sample_type;
	s.layouts[s.nlayouts].read_format = a.read_format;
	s.layouts[s.nlayouts].regs_user = a.sample_regs_user;
	s.layouts[s.nlayouts].aux_sample_size = a.aux_sample_size;
	s.nlayouts++;
	return m;
}

static void op_open_sampler(const struct draws *d)
{
	open_sampler(d, 0);
}

static int map_ring(struct member *m, size_t pages)
{
	uint64_t mark;
	void *p;

	LOG("mmap ring fd %d, %zu pages", m->fd, pages);
	p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	if (p == MAP_FAILED)
		return -1;
	m->ring.base = p;
	m->ring.len = pages * PAGE;
	m->reader = 1;
	memcpy(&mark, ((struct perf_event_mmap_page *)p)->__reserved, sizeof(mark));
	for (unsigned i = 0; i < SLOTS; i++) {
		struct member *o = slot(i);

		if (o != m && o->ring.base && o->reader &&
		    !memcmp(&mark, ((struct perf_event_mmap_page *)o->ring.base)->__reserved, sizeof(mark))
		    && mark) {
			LOG("  the ring fd %d reads", o->fd);
			m->reader = 0;
		}
	}
	if (m->reader) {
		mark = next_mark++;
		memcpy(((struct perf_event_mmap_page *)p)->__reserved, &mark, sizeof(mark));
	}
	/* The ring can outlive a mapping (the AUX area's vma holds it). */
	m->tail = ((struct perf_event_mmap_page *)p)->data_tail;
	return 0;
}

static void map_aux(struct member *m, uint64_t offset, uint64_t size, int prot)
{
	struct perf_event_mmap_page *pg = m->ring.base;
	void *p;

	pg->aux_offset = offset;
	pg->aux_size = size;
	LOG("mmap aux fd %d, offset %llu size %llu %s", m->fd, (unsigned long long)offset,
	    (unsigned long long)size, prot == PROT_READ ? "ro" : "rw");
	p = mmap(NULL, size, prot, MAP_SHARED, m->fd, (off_t)offset);
	if (p == MAP_FAILED)
		return;
	m->ring.aux = p;
	m->ring.aux_len = size;
	count.aux_maps++;
}

/* mmaps a member's ring (1 + 2^n pages, sometimes a wrong size). */
static void op_mmap_ring(const struct draws *d)
{
	struct member *m = slot(pick(d, 0, SLOTS));
	size_t pages = 1 + (1ul << pick(d, 1, 6));

	if (m->fd < 0 || m->ring.base)
		return;
	/*
	 * An event whose output is the leader's maps the leader's ring, if
	 * at its size: mostly that size, then.
	 */
	if (m != &s.leader && s.leader.ring.base && !chance(d, 3, 1, 4))
		pages = s.leader.ring.len / PAGE;
	if (chance(d, 2, 1, 16))
		pages += 1; /* not 1 + 2^n: EINVAL */
	map_ring(m, pages);
}

/*
 * mmaps the AUX area (2^n pages), read-only (snapshot) or read-write;
 * sometimes at a wrong offset or size.
 */
static void op_mmap_aux(const struct draws *d)
{
	struct member *m = slot(pick(d, 0, SLOTS));
	uint64_t offset, size = PAGE << pick(d, 2, 6);

	if (m->fd < 0 || !m->ring.base || m->ring.aux)
		return;
	/* The leader's AUX area, mapped again through another event's fd. */
	if (m != &s.leader && s.leader.ring.aux && !chance(d, 8, 1, 4))
		size = s.leader.ring.aux_len;
	offset = m->ring.len;
	if (chance(d, 4, 1, 16))
		offset += PAGE * (1 + pick(d, 5, 3)) - (d->w[5] & 1 ? PAGE / 2 : 0);
	if (chance(d, 6, 1, 32))
		size = (3 + pick(d, 7, 5)) * PAGE; /* not a power of two */
	map_aux(m, offset, size, chance(d, 3, 1, 2) ? PROT_READ : PROT_READ | PROT_WRITE);
}

/* munmap of the ring or the AUX area, whole or in part. */
static void op_munmap(const struct draws *d)
{
	struct member *m = slot(chance(d, 3, 1, 2) ? 0 : pick(d, 0, SLOTS));

	if (m->ring.aux && m->ring.aux_len > PAGE && chance(d, 2, 1, 4)) {
		/*
		 * A partial unmap splits the vma, which perf refuses
		 * (perf_mmap_may_split(), "perf/core: Prevent VMA split of
		 * buffer mappings", in both guest kernels): a split took
		 * references perf_mmap_close() never dropped.
		 */
		LOG("munmap aux tail page fd %d", m->fd);
		if (munmap((char *)m->ring.aux + m->ring.aux_len - PAGE, PAGE) == 0)
			FAIL("a partial munmap of the AUX area split it");
	} else if (chance(d, 1, 1, 2) && m->ring.aux) {
		LOG("munmap aux fd %d", m->fd);
		unmap(&m->ring.aux, m->ring.aux_len);
	} else if (m->ring.base) {
		/* With the AUX area still mapped, if so: its vma holds the ring. */
		LOG("munmap ring fd %d", m->fd);
		drain(m);
		unmap(&m->ring.base, m->ring.len);
	}
}

static void op_ioctl(const struct draws *d)
{
	struct member *m = slot(pick(d, 0, SLOTS));
	struct member *o = slot(pick(d, 1, SLOTS));
	unsigned long arg = chance(d, 3, 1, 2) ? PERF_IOC_FLAG_GROUP : 0;
	uint64_t v = 1 + d->w[4] % 1000000;
	uint64_t id;

	if (m->fd < 0)
		return;
	switch (pick(d, 2, 10)) {
	case 0:
		LOG("ioctl ENABLE fd %d %lu", m->fd, arg);
		ioctl(m->fd, PERF_EVENT_IOC_ENABLE, arg);
		break;
	case 1:
		LOG("ioctl DISABLE fd %d %lu", m->fd, arg);
		ioctl(m->fd, PERF_EVENT_IOC_DISABLE, arg);
		break;
	case 2:
		LOG("ioctl REFRESH fd %d", m->fd);
		ioctl(m->fd, PERF_EVENT_IOC_REFRESH, 1 + (int)(d->w[4] % 3));
		break;
	case 3:
		LOG("ioctl RESET fd %d %lu", m->fd, arg);
		ioctl(m->fd, PERF_EVENT_IOC_RESET, arg);
		break;
	case 4:
		LOG("ioctl PERIOD fd %d %llu", m->fd, (unsigned long long)v);
		ioctl(m->fd, PERF_EVENT_IOC_PERIOD, &v);
		break;
	case 5:
		LOG("ioctl SET_OUTPUT fd %d -> %d", m->fd, o->fd);
		ioctl(m->fd, PERF_EVENT_IOC_SET_OUTPUT, chance(d, 5, 1, 4) ? -1 : o->fd);
		break;
	case 6:
		LOG("ioctl PAUSE_OUTPUT fd %d %d", m->fd, (int)(d->w[4] & 1));
		ioctl(m->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, (unsigned long)(d->w[4] & 1));
		break;
	case 7:
		LOG("ioctl ID fd %d", m->fd);
		ioctl(m->fd, PERF_EVENT_IOC_ID, &id);
		break;
	case 8:
		LOG("ioctl SET_FILTER fd %d", m->fd);
		ioctl(m->fd, PERF_EVENT_IOC_SET_FILTER, "filter 0x1000/0x100");
		break;
	default:
		LOG("ioctl MODIFY_ATTRIBUTES fd %d", m->fd);
		{
			struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_BREAKPOINT };

			ioctl(m->fd, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, &a);
		}
		break;
	}
}

static void op_read_poll(const struct draws *d)
{
	struct member *m = slot(pick(d, 0, SLOTS));
	uint64_t buf[64];

	if (m->fd < 0)
		return;
	if (chance(d, 1, 1, 2)) {
		LOG("read fd %d", m->fd);
		if (read(m->fd, buf, 8 * (1 + pick(d, 2, 63))) < 0 && errno != ENOSPC)
			(void)0;
	} else {
		struct pollfd p = { .fd = m->fd, .events = POLLIN };

		LOG("poll fd %d", m->fd);
		poll(&p, 1, 0);
	}
	drain(m);
}

/* Runs the traced work here, then reads the rings. */
static void op_work(const struct draws *d)
{
	LOG("work %lu", work_loops);
	work(work_loops / 2 + d->w[0] % (work_loops + 1));
	if (chance(d, 1, 1, 4))
		sched_yield();
	if (chance(d, 2, 1, 8) && ncpus > 1) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET((int)pick(d, 3, (unsigned)ncpus), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	drain_all();
}

/* A traced child: works, maybe execs this program to work again, exits. */
static void op_fork(const struct draws *d, const char *self)
{
	unsigned i = pick(d, 0, MAX_CHILDREN);
	int exec = chance(d, 1, 1, 3);
	pid_t pid;

	if (s.children[i])
		return;
	LOG("fork %s", exec ? "exec" : "work");
	pid = fork();
	if (pid == 0) {
		char loops[32];

		work(work_loops);
		if (exec) {
			snprintf(loops, sizeof(loops), "%lu", work_loops);
			execl("/proc/self/exe", self, "-x", loops, (char *)NULL);
		}
		_exit(0);
	}
	if (pid > 0) {
		s.children[i] = pid;
		count.forks++;
	}
}

static void reap(const struct draws *d, int all)
{
	for (unsigned i = 0; i < MAX_CHILDREN; i++) {
		if (!s.children[i] || (!all && !chance(d, 2, 1, 2)))
			continue;
		/* Sometimes it goes before it is done. */
		if (!all && chance(d, 3, 1, 4))
			kill(s.children[i], SIGKILL);
		waitpid(s.children[i], NULL, 0);
		s.children[i] = 0;
	}
}

/* Closes an fd, the leader's half the time, unmapping its rings or not. */
static void op_close(const struct draws *d)
{
	struct member *m = slot(chance(d, 2, 1, 2) ? 0 : pick(d, 0, SLOTS));

	if (m->fd < 0)
		return;
	LOG("close fd %d%s", m->fd, chance(d, 1, 1, 2) ? " (mappings kept)" : "");
	drain(m);
	if (chance(d, 1, 1, 2)) {
		/* The mappings outlive the fd, as a user's may. */
		close(m->fd);
		m->fd = -1;
	} else {
		close_member(m);
	}
}

/* The session ends: everything closed and unmapped, in a random order. */
static void session_end(const struct draws *d)
{
	unsigned first = pick(d, 0, SLOTS);

	LOG("end session (from slot %u)", first);
	reap(d, 1);
	for (unsigned i = 0; i < SLOTS; i++)
		close_member(slot((first + i) % SLOTS));
	session_reset();
}

/*
 * CPU 1 offline and online, never under a live per-CPU session: closing a
 * per-CPU group's events after their CPU went offline and came back
 * deadlocked the 6.12 guest (CPU 1 spinning on ctx->lock in put_pmu_ctx()
 * from __free_event() inside __perf_remove_from_context(), which holds it;
 * no module frame on the stack), a perf core bug this fuzzer does not
 * chase. check.c's hotplug case runs the order that works.
 */
static void op_hotplug(void)
{
	if (ncpus < 2)
		return;
	LOG("cpu 1 offline, online");
	if (cpu_online(1, 0) == 0)
		count.hotplugs++;
	if (cpu_online(1, 1))
		FAIL("cpu 1 did not come back online: %s", strerror(errno));
}

static int load_module(void)
{
	int fd = open(module_path, O_RDONLY | O_CLOEXEC);
	long r;

	if (fd < 0)
		return -1;
	r = syscall(SYS_finit_module, fd, module_params, 0);
	close(fd);
	return r ? -1 : 0;
}

static unsigned long read_counter(const char *param);

/* Instructions the module's step tracer counted before its last unload. */
static unsigned long stepped_before;

/*
 * What holds the module: our event (its fd, or a mapping of its ring: the
 * vma holds the file, the file the event, the event the module:
 * perf_init_event()'s try_module_get()), or an AUX area, whoever mapped it:
 * an event whose output was set to ours maps our event's ring and AUX area,
 * and once our event is gone that AUX buffer is still freed through the
 * module's free_aux (rb->free_aux), so it must hold the module too.
 */
static int module_held(void)
{
	if (s.leader.fd >= 0 || s.leader.ring.base)
		return 1;
	for (unsigned i = 0; i < SLOTS; i++)
		if (slot(i)->ring.aux)
			return 1;
	return 0;
}

/*
 * rmmod: refused while the module is held; when it goes (always, with
 * must_go: no session and no child left), it comes back with the same
 * parameters.
 */
static void op_rmmod(int must_go)
{
	int held = module_held();
	unsigned long stepped = read_counter("retired");
	long r;

	LOG("rmmod %s (%s)", module_name, held ? "held" : must_go ? "nothing open" : "not held");
	r = syscall(SYS_delete_module, module_name, O_NONBLOCK);
	if (held && r == 0) {
		FAIL("rmmod %s succeeded while an event or an AUX area of its PMU lived", module_name);
		for (unsigned i = 0; i < SLOTS; i++)
			printf("  slot %u: fd %d ring %p aux %p\n", i, slot(i)->fd, slot(i)->ring.base,
			       slot(i)->ring.aux);
		return;
	}
	if (held || (r && !must_go)) {
		count.rmmod_refused += r != 0;
		/* Our event gone, its AUX area mapped through another's fd. */
		count.aux_only_refused += held && s.leader.fd < 0 && !s.leader.ring.base &&
					  !s.leader.ring.aux;
		return;
	}
	/* A closed event's last reference can be a moment behind its close. */
	for (int i = 0; r && (errno == EAGAIN || errno == EBUSY) && i < 200; i++) {
		usleep(10000);
		r = syscall(SYS_delete_module, module_name, O_NONBLOCK);
	}
	if (r) {
		FAIL("rmmod %s with nothing open: %s", module_name, strerror(errno));
		return;
	}
	stepped_before += stepped;
	if (load_module()) {
		FAIL("insmod %s %s: %s", module_path, module_params, strerror(errno));
		return;
	}
	count.reloads++;
	pmu_type = pmu_type_of(pmu_name);
	if (pmu_type < 0)
		FAIL("%s is not back after insmod", pmu_name);
}

static unsigned long read_counter(const char *param)
{
	char path[256];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/%s/parameters/%s", module_name, param);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/*
 * An operation that can end what holds the module; after it, while
 * something still does, rmmod must be refused.
 */
static void refuse_rmmod_if_held(void (*op)(const struct draws *), const struct draws *d)
{
	op(d);
	if (module_held())
		op_rmmod(0);
}

static void usage(void)
{
	fprintf(stderr, "usage: pmu_fuzz -p PMU -m MODULE.ko [-P params] [-s seed] [-n ops] [-w work] [-v]\n"
			"       pmu_fuzz -x LOOPS   (a traced child's work after exec)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;
	unsigned long ops = 1000, stepped;
	unsigned long stepped0;
	struct timespec t0, t1;
	double secs;
	const char *base;
	int opt;

	while ((opt = getopt(argc, argv, "p:m:P:s:n:w:vx:")) != -1) {
		switch (opt) {
		case 'p':
			pmu_name = optarg;
			break;
		case 'm':
			module_path = optarg;
			break;
		case 'P':
			module_params = optarg;
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			ops = strtoul(optarg, NULL, 0);
			break;
		case 'w':
			work_loops = strtoul(optarg, NULL, 0);
			break;
		case 'v':
			verbose = 1;
			break;
		case 'x':
			work(strtoul(optarg, NULL, 0));
			return 0;
		default:
			usage();
		}
	}
	if (!module_path)
		usage();
	base = strrchr(module_path, '/');
	snprintf(module_name, sizeof(module_name), "%s", base ? base + 1 : module_path);
	if (strlen(module_name) > 3 && !strcmp(module_name + strlen(module_name) - 3, ".ko"))
		module_name[strlen(module_name) - 3] = 0;
	pmu_type = pmu_type_of(pmu_name);
	if (pmu_type < 0) {
		printf("FAIL pmu_fuzz: no PMU %s\n", pmu_name);
		return 1;
	}
	ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	rng_state = seed;
	session_reset();
	signal(SIGPIPE, SIG_IGN);
	stepped0 = read_counter("retired");
	clock_gettime(CLOCK_MONOTONIC, &t0);

	for (count.ops = 0; count.ops < ops && !failed; count.ops++) {
		struct draws d;
		unsigned op;

		draw(&d);
		if (!verbose && count.ops % 500 == 0) {
			printf("pmu_fuzz: op %lu\n", count.ops);
			fflush(stdout);
		}
		/*
		 * A session opens, runs and ends: the open is likeliest with
		 * none, the end likelier the longer it has lived.
		 */
		op = (unsigned)(d.w[7] >> 32) % 100;
		if (s.leader.fd < 0 && !session_live()) {
			if (op < 3 && count.ops % 7 == 0)
				op_hotplug();
			else if (op < 6)
				op_rmmod(1);
			else
				op_open_leader(&d);
			continue;
		}
		if (op < 14)
			op_open_sampler(&d);
		else if (op < 24)
			op_mmap_ring(&d);
		else if (op < 32)
			op_mmap_aux(&d);
		else if (op < 52)
			op_work(&d);
		else if (op < 62)
			op_ioctl(&d);
		else if (op < 68)
			op_read_poll(&d);
		else if (op < 72)
			op_fork(&d, argv[0]);
		else if (op < 75)
			reap(&d, 0);
		else if (op < 77)
			refuse_rmmod_if_held(op_munmap, &d);
		else if (op < 80)
			refuse_rmmod_if_held(op_close, &d);
		else if (op < 81 && s.cpu < 0)
			op_hotplug();
		else if (op < 84)
			op_rmmod(0);
		else if (op < 91)
			op_work(&d);
		else
			session_end(&d);
	}
	if (session_live() || s.children[0] || s.children[1] || s.children[2] || s.children[3]) {
		struct draws d;

		draw(&d);
		session_end(&d);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* The module unloads cleanly after the run, and comes back. */
	op_rmmod(1);
	stepped = stepped_before + read_counter("retired") - stepped0;
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("pmu_fuzz: seed %" PRIu64 ": %lu ops (%.0f ops/s), %lu events opened on %s of %lu opens, "
	       "%lu AUX areas mapped, %lu samples, %lu with AUX data, %lu instructions stepped, "
	       "%lu forks, %lu module reloads (%lu refused while held, %lu by an AUX area alone), %lu CPU hotplugs\n",
	       seed, count.ops, secs > 0 ? (double)count.ops / secs : 0.0, count.opens_ours, pmu_name,
	       count.opens, count.aux_maps, count.samples, count.aux_samples, stepped, count.forks,
	       count.reloads, count.rmmod_refused, count.aux_only_refused, count.hotplugs);
	return failed;
}
