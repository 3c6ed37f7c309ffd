/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The PT-style PMU through include/perfaux.h alone.
 *
 * Snapshot mode over a perfaux ring and AUX area: a program's trace goes
 * through ToPA into the area; snapshot_aux writes the newest 4 KiB through a
 * C sink, and they are the bytes ending where the PERF_RECORD_AUX of the
 * stop says the trace ended, with a PSB among them.
 *
 * Full-trace mode over a buffer whose transactions C runs (as a kernel
 * module does with perf_aux_output_begin/end): PMIs at the INT regions, and
 * the transactions' bytes, read as they end, are the whole trace. The
 * buffer's PT state cannot be ended while a transaction holds it.
 *
 * Then a table of bad inputs for every AUX-area and PT function. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "perfaux.h"

#define PAGE 4096
#define DATA_CHUNKS 4
#define AUX_PAGES 4
#define FULL_PAGES 8

static const unsigned char PSB[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
				       2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

static uint64_t now = 1000;

static uint64_t clock_now(void *ctx)
{
	(void)ctx;
	return ++now;
}

static uint32_t cpu_id(void *ctx)
{
	(void)ctx;
	return 3;
}

static void current_task(void *ctx, uint32_t *pid, uint32_t *tid)
{
	(void)ctx;
	*pid = 42;
	*tid = 43;
}

/* The warn hook: what the engine reported, once per site. */
static char last_warning[256];
static unsigned warnings;

static void on_warn(const char *msg, size_t len)
{
	if (len >= sizeof(last_warning))
		len = sizeof(last_warning) - 1;
	memcpy(last_warning, msg, len);
	last_warning[len] = 0;
	warnings++;
}

static int has_psb(const unsigned char *b, size_t n)
{
	for (size_t i = 0; i + 16 <= n; i++)
		if (memcmp(b + i, PSB, 16) == 0)
			return 1;
	return 0;
}

/* Traces `e`; each PMI it raised is taken at once, as the CPU takes it
 * after the write that raised it. Returns the PMIs. */
static int trace_and_take_pmis(perfaux_pt_cpu *pt, const perfaux_trace_event *e)
{
	int r = perfaux_pt_trace(pt, e);
	CHECK(r >= 0);
	for (int k = 0; k < r; k++)
		EXPECT(perfaux_pt_handle_pmi(pt), 0);
	return r;
}

/* The synthetic program: branches, returns, time. Returns PMIs raised. */
static int run_program(perfaux_pt_cpu *pt, unsigned steps)
{
	int pmis = 0;
	perfaux_trace_event e = { .kind = PERFAUX_TRACE_ENABLE, .target = 0x400000 };
	EXPECT(perfaux_pt_trace(pt, &e), 0);
	for (unsigned i = 0; i < steps; i++) {
		perfaux_trace_event b = { .kind = PERFAUX_TRACE_CONDITIONAL,
					   .flags = i % 3 == 0 ? PERFAUX_TRACE_TAKEN : 0,
					   .target = 0x400000 };
		pmis += trace_and_take_pmis(pt, &b);
		if (i % 5 == 0) {
			perfaux_trace_event t = { .kind = PERFAUX_TRACE_INDIRECT_JUMP,
						   .target = 0x400000 + (i % 4096) * 16 };
			pmis += trace_and_take_pmis(pt, &t);
		}
		if (i % 100 == 0) {
			perfaux_trace_event t = { .kind = PERFAUX_TRACE_TIME, .value = 1000000 + i };
			pmis += trace_and_take_pmis(pt, &t);
		}
	}
	return pmis;
}

static void snapshot_mode(void)
{
	void *user = aligned_alloc(PAGE, PAGE);
	void *data[DATA_CHUNKS], *aux[AUX_PAGES];
	for (int i = 0; i < DATA_CHUNKS; i++)
		data[i] = aligned_alloc(PAGE, PAGE);
	for (int i = 0; i < AUX_PAGES; i++)
		aux[i] = aligned_alloc(PAGE, PAGE);
	void *tables = aligned_alloc(PAGE, PAGE);
	perfaux_ring ring;
	perfaux_consumer cons;
	perfaux_aux_area area;
	perfaux_pt_cpu pt;
	perfaux_pt_buffer buf;
	memset(&ring, 0, sizeof(ring));
	memset(&cons, 0, sizeof(cons));
	memset(&area, 0, sizeof(area));
	memset(&pt, 0, sizeof(pt));
	memset(&buf, 0, sizeof(buf));
	EXPECT(perfaux_ring_init(&ring, user, data, DATA_CHUNKS, 0, NULL), 0);
	EXPECT(perfaux_consumer_init(&cons, user, data, DATA_CHUNKS, 0), 0);
	perfaux_aux_config ac;
	memset(&ac, 0, sizeof(ac));
	ac.flags = PERFAUX_AUX_OVERWRITE;
	EXPECT(perfaux_aux_area_init(&area, &ring, aux, AUX_PAGES, &ac), 0);
	/* PERF_RECORD_AUX trailers: TID | TIME | CPU | IDENTIFIER. */
	perfaux_output_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.id = 5;
	ev.has_sample_id = 1;
	ev.sample_id.sample_type = (1 << 1) | (1 << 2) | (1 << 7) | (1 << 16);
	ev.sample_id.id = 5;
	perfaux_platform plat = { cpu_id, clock_now, current_task, NULL, NULL, NULL };
	EXPECT(perfaux_pt_buffer_init_area(&buf, tables, 1, &area, NULL), 0);
	EXPECT(perfaux_pt_buffer_init_area(&buf, tables, 1, &area, NULL), -EBUSY);
	EXPECT(perfaux_pt_cpu_init_area(&pt, &buf, &area, &ring, &ev, &plat, NULL, 1024), 0);
	EXPECT(perfaux_pt_cpu_init_area(&pt, &buf, &area, &ring, &ev, &plat, NULL, 1024), -EBUSY);
	/* intel_pt/tsc/: TSC packets in every PSB+. */
	EXPECT(perfaux_pt_add(&pt, PERFAUX_EF_START, 1, 1 << 10, 0), 0);
	EXPECT(perfaux_pt_add(&pt, PERFAUX_EF_START, 1, 1 << 10, 0), -EBUSY);
	EXPECT(perfaux_pt_cpu_fini(&pt), -EBUSY);
	/* Torn down in the wrong order: the CPU object traces into the buffer,
	 * the area and the ring; each refuses with nothing touched, and without
	 * a warning (a caller's mistake, not a kernel bug). */
	uint64_t warns = perfaux_warn_count();
	EXPECT(perfaux_pt_buffer_fini(&buf), -EBUSY);
	EXPECT(perfaux_aux_area_fini(&area), -EBUSY);
	EXPECT(perfaux_ring_fini(&ring), -EBUSY);
	CHECK(perfaux_warn_count() == warns);
	EXPECT(run_program(&pt, 20000), 0); /* a snapshot buffer raises no PMI */
	int64_t written = perfaux_pt_written(&pt);
	CHECK(written > AUX_PAGES * PAGE); /* it wrapped */

	unsigned char snap[4096];
	struct collect c = { snap, 0, sizeof(snap) };
	perfaux_sink sink = { sink_copy, &c };
	EXPECT(perfaux_pt_snapshot_aux(&pt, &sink, sizeof(snap)), sizeof(snap));
	EXPECT(c.len, sizeof(snap));
	CHECK(has_psb(snap, sizeof(snap)));
	/* A sink that takes nothing: -EFAULT. */
	struct collect none = { snap, 0, 0 };
	perfaux_sink full = { sink_copy, &none };
	EXPECT(perfaux_pt_snapshot_aux(&pt, &full, 64), -EFAULT);

	/* Stop: PERF_RECORD_AUX (OVERWRITE) at the write position. */
	EXPECT(perfaux_pt_del(&pt, PERFAUX_EF_UPDATE), 0);
	EXPECT(perfaux_pt_snapshot_aux(&pt, &sink, 64), 0); /* no transaction */
	perfaux_consumer_refresh(&cons);
	unsigned char rec[256];
	int found = 0;
	long long n;
	while ((n = perfaux_consumer_next(&cons, rec, sizeof(rec))) > 0) {
		uint32_t type;
		memcpy(&type, rec, 4);
		if (type != 11)
			continue;
		uint64_t offset, size, flags, tidw, time, cpuw, id;
		memcpy(&offset, rec + 8, 8);
		memcpy(&size, rec + 16, 8);
		memcpy(&flags, rec + 24, 8);
		memcpy(&tidw, rec + 32, 8);
		memcpy(&time, rec + 40, 8);
		memcpy(&cpuw, rec + 48, 8);
		memcpy(&id, rec + 56, 8);
		EXPECT(n, 64);
		EXPECT(size, AUX_PAGES * PAGE);
		EXPECT(flags, 2); /* OVERWRITE */
		EXPECT(tidw, 42 | (43ull << 32));
		CHECK(time > 1000);
		EXPECT(cpuw, 3);
		EXPECT(id, 5);
		/* The snapshot is the 4 KiB that end at the write position. */
		size_t bufsize = AUX_PAGES * PAGE, end = offset % bufsize;
		for (size_t i = 0; i < sizeof(snap); i++) {
			size_t pos = (end + bufsize - sizeof(snap) + i) % bufsize;
			CHECK(snap[i] == ((unsigned char *)aux[pos / PAGE])[pos % PAGE]);
		}
		found++;
	}
	EXPECT(n, 0);
	EXPECT(found, 1);
	EXPECT(perfaux_pt_cpu_fini(&pt), 0);
	EXPECT(perfaux_pt_buffer_fini(&buf), 0);
	EXPECT(perfaux_aux_area_fini(&area), 0);
	EXPECT(perfaux_consumer_fini(&cons), 0);
	EXPECT(perfaux_ring_fini(&ring), 0);
	free(tables);
	for (int i = 0; i < AUX_PAGES; i++)
		free(aux[i]);
	for (int i = 0; i < DATA_CHUNKS; i++)
		free(data[i]);
	free(user);
	printf("pt snapshot: %lld trace bytes, a 4096-byte snapshot through a C sink\n",
	       (long long)written);
}

/* A writable buffer whose transactions C runs; the reader keeps up. */
struct cbuf {
	const perfaux_pt_buffer *buf; /* what setup_aux made; NULL: unmapped */
	void **pages;
	uint64_t head, tail, size;
	uint64_t flags;
	int open;
	unsigned char *stream;
	size_t len, cap;
	unsigned ends;
};

static int cb_begin(void *ctx, const perfaux_pt_buffer **buf, uint64_t *head, uint64_t *space,
		    uint64_t *wakeup)
{
	struct cbuf *b = ctx;
	if (b->open)
		return -EBUSY;
	if (!b->buf)
		return -ENOSPC; /* perf_aux_output_begin: no AUX buffer */
	*buf = b->buf;
	b->open = 1;
	b->flags = 0;
	*head = b->head;
	*space = b->size - (b->head - b->tail);
	*wakeup = b->head + b->size / 2;
	return 0;
}

static void cb_flag(void *ctx, uint64_t flags)
{
	((struct cbuf *)ctx)->flags |= flags;
}

static void cb_end(void *ctx, uint64_t size, int has_head, uint64_t head)
{
	struct cbuf *b = ctx;
	(void)head;
	CHECK(b->open && !has_head);
	CHECK(!(b->flags & 1)); /* never TRUNCATED: the reader keeps up */
	for (uint64_t i = 0; i < size; i++) {
		uint64_t pos = (b->head + i) % b->size;
		CHECK(b->len < b->cap);
		b->stream[b->len++] = ((unsigned char *)b->pages[pos / PAGE])[pos % PAGE];
	}
	b->head += size;
	b->tail = b->head; /* read at once */
	b->open = 0;
	b->ends++;
}

static void full_mode(void)
{
	void *pages[FULL_PAGES];
	for (int i = 0; i < FULL_PAGES; i++)
		pages[i] = aligned_alloc(PAGE, PAGE);
	void *tables = aligned_alloc(PAGE, PAGE);
	struct cbuf b;
	memset(&b, 0, sizeof(b));
	b.pages = pages;
	b.size = FULL_PAGES * PAGE;
	b.cap = 1 << 20;
	b.stream = malloc(b.cap);
	perfaux_aux_ops ops = { cb_begin, cb_flag, cb_end, &b };
	perfaux_pt_cpu pt;
	perfaux_pt_buffer buf;
	memset(&pt, 0, sizeof(pt));
	memset(&buf, 0, sizeof(buf));
	EXPECT(perfaux_pt_buffer_init(&buf, tables, 1, pages, FULL_PAGES, 0, NULL), 0);
	EXPECT(perfaux_pt_cpu_init(&pt, &ops, NULL, 1024), 0);
	/* No buffer mapped: the event cannot start (Intel PT's fail_stop). */
	EXPECT(perfaux_pt_add(&pt, PERFAUX_EF_START, 1, 0, 0), -EINVAL);
	b.buf = &buf;
	EXPECT(perfaux_pt_add(&pt, PERFAUX_EF_START, 1, 0, 0), 0);
	int pmis = run_program(&pt, 200000);
	CHECK(pmis > 2);
	/* snapshot_aux on a writable buffer copies nothing (Linux WARNs). */
	struct collect c = { NULL, 0, 0 };
	perfaux_sink sink = { sink_copy, &c };
	EXPECT(perfaux_pt_snapshot_aux(&pt, &sink, 64), 0);
	/* A transaction holds the buffer: refused, and the warn hook counts it
	 * (the kernel never frees a buffer a transaction holds). */
	uint64_t warns = perfaux_warn_count();
	EXPECT(perfaux_pt_buffer_fini(&buf), -EBUSY);
	CHECK(perfaux_warn_count() == warns + 1);
	CHECK(warnings == 1 && strstr(last_warning, "free_aux") != NULL);
	/* The AUX munmap: stop with UPDATE ends the transaction, then free_aux. */
	EXPECT(perfaux_pt_stop(&pt, PERFAUX_EF_UPDATE, 0), 0);
	CHECK(!b.open);
	EXPECT(perfaux_pt_buffer_fini(&buf), 0);
	b.buf = NULL;
	/* Trace events and a restart after it touch no buffer. */
	EXPECT(run_program(&pt, 1000), 0);
	EXPECT(perfaux_pt_start(&pt, 0, 0), 0);
	CHECK(!b.open);
	EXPECT(perfaux_pt_snapshot_aux(&pt, &sink, 64), 0);
	EXPECT(perfaux_pt_del(&pt, PERFAUX_EF_UPDATE), 0);
	EXPECT(b.len, perfaux_pt_written(&pt));
	CHECK(memcmp(b.stream, PSB, 16) == 0);
	EXPECT(perfaux_pt_cpu_fini(&pt), 0);
	printf("pt full trace: %zu bytes in %u transactions, %d PMIs, nothing lost\n", b.len,
	       b.ends, pmis);
	free(b.stream);
	free(tables);
	for (int i = 0; i < FULL_PAGES; i++)
		free(pages[i]);
}

static uint64_t half_phys(void *ctx, const void *virt)
{
	(void)ctx;
	return (uint64_t)(uintptr_t)virt;
}

/* The table count: the macro (a constant expression, for static storage)
 * and the function agree; one table up to 506 pages. */
static void table_count(void)
{
	static char one_mib_buffer_tables[PERFAUX_PT_TABLES_FOR_PAGES(256)];
	const size_t pages[] = { 1, 2, 256, 506, 507, 512, 1024, 1 << 20 };

	CHECK(sizeof(one_mib_buffer_tables) == 1);
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		CHECK(PERFAUX_PT_TABLES_FOR_PAGES(pages[i]) == perfaux_pt_tables_for_pages(pages[i]));
	CHECK(perfaux_pt_tables_for_pages(506) == 1 && perfaux_pt_tables_for_pages(507) == 2);
	CHECK(perfaux_pt_tables_for_pages(1 << 20) == 2073);
}

static void bad_inputs(void)
{
	void *user = aligned_alloc(PAGE, PAGE);
	void *data[1] = { aligned_alloc(PAGE, PAGE) };
	void *aux[AUX_PAGES];
	for (int i = 0; i < AUX_PAGES; i++)
		aux[i] = aligned_alloc(PAGE, PAGE);
	void *tables = aligned_alloc(PAGE, 2 * PAGE);
	perfaux_ring ring, no_ring;
	perfaux_aux_area area, no_area;
	perfaux_pt_cpu pt, no_pt;
	perfaux_pt_buffer buf, no_buf;
	memset(&ring, 0, sizeof(ring));
	memset(&no_ring, 0, sizeof(no_ring));
	memset(&area, 0, sizeof(area));
	memset(&no_area, 0, sizeof(no_area));
	memset(&pt, 0, sizeof(pt));
	memset(&no_pt, 0, sizeof(no_pt));
	memset(&buf, 0, sizeof(buf));
	memset(&no_buf, 0, sizeof(no_buf));
	EXPECT(perfaux_ring_init(&ring, user, data, 1, 0, NULL), 0);
	perfaux_aux_config bad_flags, bad_reserved;
	memset(&bad_flags, 0, sizeof(bad_flags));
	memset(&bad_reserved, 0, sizeof(bad_reserved));
	bad_flags.flags = 0x10;
	bad_reserved.reserved = 1;
	void *null_page[AUX_PAGES] = { aux[0], NULL, aux[2], aux[3] };
	void *odd_page[AUX_PAGES] = { aux[0], (char *)aux[1] + 64, aux[2], aux[3] };
	perfaux_aux_ops ops = { cb_begin, cb_flag, cb_end, NULL }, no_begin = ops;
	no_begin.begin = NULL;
	perfaux_phys_map half = { half_phys, NULL, NULL };
	perfaux_output_event bad_event;
	memset(&bad_event, 0, sizeof(bad_event));
	bad_event.reserved = 7;
	/* 2048 regions (every page the same, so none is contiguous) need five
	 * tables: two are too few. */
	void **many = malloc(2048 * sizeof(void *));
	for (int i = 0; i < 2048; i++)
		many[i] = aux[0];
	perfaux_sink null_copy = { NULL, NULL };
	perfaux_trace_event unknown = { .kind = 99 },
			    bad_branch = { .kind = PERFAUX_TRACE_CONDITIONAL, .flags = 2 },
			    bad_mode = { .kind = PERFAUX_TRACE_MODE, .value = 8 };
	struct bad_input table[] = {
		{ "aux init: NULL area", perfaux_aux_area_init(NULL, &ring, aux, AUX_PAGES, NULL), -EINVAL },
		{ "aux init: NULL ring", perfaux_aux_area_init(&no_area, NULL, aux, AUX_PAGES, NULL), -EINVAL },
		{ "aux init: ring never initialized", perfaux_aux_area_init(&no_area, &no_ring, aux, AUX_PAGES, NULL), -EINVAL },
		{ "aux init: NULL pages", perfaux_aux_area_init(&no_area, &ring, NULL, AUX_PAGES, NULL), -EINVAL },
		{ "aux init: no pages", perfaux_aux_area_init(&no_area, &ring, aux, 0, NULL), -EINVAL },
		{ "aux init: 3 pages", perfaux_aux_area_init(&no_area, &ring, aux, 3, NULL), -EINVAL },
		{ "aux init: a NULL page", perfaux_aux_area_init(&no_area, &ring, null_page, AUX_PAGES, NULL), -EINVAL },
		{ "aux init: a page not 4 KiB aligned", perfaux_aux_area_init(&no_area, &ring, odd_page, AUX_PAGES, NULL), -EINVAL },
		{ "aux init: unknown flags", perfaux_aux_area_init(&no_area, &ring, aux, AUX_PAGES, &bad_flags), -EINVAL },
		{ "aux init: reserved field", perfaux_aux_area_init(&no_area, &ring, aux, AUX_PAGES, &bad_reserved), -EINVAL },
		{ "aux fini: never initialized", perfaux_aux_area_fini(&no_area), -EINVAL },
		{ "buffer init: NULL buffer", perfaux_pt_buffer_init(NULL, tables, 1, aux, AUX_PAGES, 0, NULL), -EINVAL },
		{ "buffer init: NULL tables", perfaux_pt_buffer_init(&no_buf, NULL, 1, aux, AUX_PAGES, 0, NULL), -EINVAL },
		{ "buffer init: misaligned tables", perfaux_pt_buffer_init(&no_buf, (char *)tables + 8, 1, aux, AUX_PAGES, 0, NULL), -EINVAL },
		{ "buffer init: no tables", perfaux_pt_buffer_init(&no_buf, tables, 0, aux, AUX_PAGES, 0, NULL), -EINVAL },
		{ "buffer init: too few tables", perfaux_pt_buffer_init(&no_buf, tables, 2, many, 2048, 0, NULL), -ENOMEM },
		{ "buffer init: NULL pages", perfaux_pt_buffer_init(&no_buf, tables, 1, NULL, AUX_PAGES, 0, NULL), -EINVAL },
		{ "buffer init: 3 pages", perfaux_pt_buffer_init(&no_buf, tables, 1, aux, 3, 0, NULL), -EINVAL },
		{ "buffer init: a NULL page", perfaux_pt_buffer_init(&no_buf, tables, 1, null_page, AUX_PAGES, 0, NULL), -EINVAL },
		{ "buffer init: overwrite 2", perfaux_pt_buffer_init(&no_buf, tables, 1, aux, AUX_PAGES, 2, NULL), -EINVAL },
		{ "buffer init: one phys callback", perfaux_pt_buffer_init(&no_buf, tables, 1, aux, AUX_PAGES, 0, &half), -EINVAL },
		{ "buffer init: area never initialized", perfaux_pt_buffer_init_area(&no_buf, tables, 1, &no_area, NULL), -EINVAL },
		{ "buffer fini: never initialized", perfaux_pt_buffer_fini(&no_buf), -EINVAL },
		{ "cpu init: NULL cpu", perfaux_pt_cpu_init(NULL, &ops, NULL, 1024), -EINVAL },
		{ "cpu init: NULL ops", perfaux_pt_cpu_init(&no_pt, NULL, NULL, 1024), -EINVAL },
		{ "cpu init: ops without begin", perfaux_pt_cpu_init(&no_pt, &no_begin, NULL, 1024), -EINVAL },
		{ "cpu init: psb period 100", perfaux_pt_cpu_init(&no_pt, &ops, NULL, 100), -EINVAL },
		{ "cpu init: one phys callback", perfaux_pt_cpu_init(&no_pt, &ops, &half, 1024), -EINVAL },
		{ "cpu init: buffer never initialized", perfaux_pt_cpu_init_area(&no_pt, &no_buf, &area, &ring, NULL, NULL, NULL, 1024), -EINVAL },
		{ "cpu init: area never initialized", perfaux_pt_cpu_init_area(&no_pt, &no_buf, &no_area, &ring, NULL, NULL, NULL, 1024), -EINVAL },
		{ "cpu init: ring never initialized", perfaux_pt_cpu_init_area(&no_pt, &no_buf, &area, &no_ring, NULL, NULL, NULL, 1024), -EINVAL },
		{ "cpu fini: never initialized", perfaux_pt_cpu_fini(&no_pt), -EINVAL },
		{ "add: never initialized", perfaux_pt_add(&no_pt, 0, 1, 0, 0), -EINVAL },
		{ "check_config: mtc (not offered)", perfaux_pt_check_config(1 << 9), -EINVAL },
		{ "check_config: branch without pt", perfaux_pt_check_config(1 << 13), -EINVAL },
		{ "check_config: psb_period=6", perfaux_pt_check_config(6ull << 24), -EINVAL },
		{ "check_config: a bit outside the format", perfaux_pt_check_config(1 << 2), -EINVAL },
		{ "del: NULL", perfaux_pt_del(NULL, 0), -EINVAL },
		{ "start: never initialized", perfaux_pt_start(&no_pt, 0, 0), -EINVAL },
		{ "stop: never initialized", perfaux_pt_stop(&no_pt, 0, 0), -EINVAL },
		{ "snapshot: never initialized", perfaux_pt_snapshot_aux(&no_pt, &null_copy, 64), -EINVAL },
		{ "handle_pmi: never initialized", perfaux_pt_handle_pmi(&no_pt), -EINVAL },
		{ "trace: never initialized", perfaux_pt_trace(&no_pt, &unknown), -EINVAL },
		{ "written: NULL", perfaux_pt_written(NULL), -EINVAL },
	};
	int failed = check_table(table, sizeof(table) / sizeof(table[0]));
	/* On a live PMU: flags and arguments it does not take. */
	EXPECT(perfaux_aux_area_init(&area, &ring, aux, AUX_PAGES, NULL), 0);
	EXPECT(perfaux_aux_area_init(&area, &ring, aux, AUX_PAGES, NULL), -EBUSY);
	EXPECT(perfaux_pt_buffer_init_area(&buf, tables, 1, &area, NULL), 0);
	/* A buffer over other pages than the area's. */
	EXPECT(perfaux_pt_buffer_init(&no_buf, (char *)tables + PAGE, 1, null_page + 2, 2, 0, NULL), 0);
	EXPECT(perfaux_pt_cpu_init_area(&pt, &no_buf, &area, &ring, NULL, NULL, NULL, 1024), -EINVAL);
	EXPECT(perfaux_pt_buffer_fini(&no_buf), 0);
	EXPECT(perfaux_pt_cpu_init_area(&pt, &buf, &area, &ring, &bad_event, NULL, NULL, 1024), -EINVAL);
	EXPECT(perfaux_pt_cpu_init_area(&pt, &buf, &area, &ring, NULL, NULL, NULL, 1024), 0);
	EXPECT(perfaux_pt_add(&pt, 0x80, 1, 0, 0), -EINVAL);
	EXPECT(perfaux_pt_add(&pt, PERFAUX_EF_START, 1, 0, 2), -EINVAL);
	EXPECT(perfaux_pt_add(&pt, PERFAUX_EF_START, 1, 1 << 9, 0), -EINVAL); /* mtc */
	EXPECT(perfaux_pt_del(&pt, PERFAUX_EF_PAUSE), -EINVAL);
	EXPECT(perfaux_pt_start(&pt, PERFAUX_EF_START, 0), -EINVAL);
	EXPECT(perfaux_pt_stop(&pt, PERFAUX_EF_RESUME, 0), -EINVAL);
	EXPECT(perfaux_pt_snapshot_aux(&pt, NULL, 64), -EINVAL);
	EXPECT(perfaux_pt_snapshot_aux(&pt, &null_copy, 64), -EINVAL);
	EXPECT(perfaux_pt_trace(&pt, NULL), -EINVAL);
	EXPECT(perfaux_pt_trace(&pt, &unknown), -EINVAL);
	EXPECT(perfaux_pt_trace(&pt, &bad_branch), -EINVAL);
	EXPECT(perfaux_pt_trace(&pt, &bad_mode), -EINVAL);
	EXPECT(perfaux_pt_cpu_fini(&pt), 0);
	EXPECT(perfaux_pt_cpu_fini(&pt), -EINVAL);
	EXPECT(perfaux_pt_buffer_fini(&buf), 0);
	EXPECT(perfaux_pt_buffer_fini(&buf), -EINVAL);
	EXPECT(perfaux_aux_area_fini(&area), 0);
	EXPECT(perfaux_ring_fini(&ring), 0);
	free(many);
	free(tables);
	for (int i = 0; i < AUX_PAGES; i++)
		free(aux[i]);
	free(data[0]);
	free(user);
	if (failed)
		exit(1);
	printf("pt: %zu bad inputs refused\n", sizeof(table) / sizeof(table[0]) + 16);
}

int main(void)
{
	perfaux_set_warn_hook(on_warn);
	snapshot_mode();
	full_mode();
	table_count();
	bad_inputs();
	return 0;
}
