/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* AUX transactions and samples without the event layer, through
 * include/perfaux.h alone: a driver that writes AUX data itself (begin,
 * write, end: PERF_RECORD_AUX and aux_head; skip; a full area refused and
 * its disable requested), perf_output_copy_aux into a C sink, and samples
 * written from caller-kept events with their AUX block from a C
 * snapshot_aux; bad inputs get their errno. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "perfaux.h"

#define PAGE 4096
#define CHUNKS 4
#define AUX_PAGES 4
#define AUX_HEAD_OFFSET 1056 /* perf_event_mmap_page.aux_head */

static void put32(unsigned char *a, size_t off, uint32_t v) { memcpy(a + off, &v, 4); }
static void put64(unsigned char *a, size_t off, uint64_t v) { memcpy(a + off, &v, 8); }
static uint64_t word(const unsigned char *r, size_t off)
{
	uint64_t v;
	memcpy(&v, r + off, 8);
	return v;
}

/* A C snapshot_aux: the newest `size` bytes of a pattern. */
static unsigned char pattern[1024];
static int64_t snapshot(void *ctx, const perfaux_sink *sink, uint64_t size)
{
	(void)ctx;
	if (size > sizeof(pattern))
		size = sizeof(pattern);
	size_t left = sink->copy(sink->ctx, pattern + sizeof(pattern) - size, size);
	return left ? -EFAULT : (int64_t)size;
}

static void aux_write(void **pages, uint64_t at, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t pos = (at + i) % (AUX_PAGES * PAGE);
		((unsigned char *)pages[pos / PAGE])[pos % PAGE] = b[i];
	}
}

int main(void)
{
	void *user = aligned_alloc(PAGE, PAGE);
	void *data[CHUNKS], *aux[AUX_PAGES];
	for (int i = 0; i < CHUNKS; i++)
		data[i] = aligned_alloc(PAGE, PAGE);
	for (int i = 0; i < AUX_PAGES; i++)
		aux[i] = aligned_alloc(PAGE, PAGE);
	perfaux_ring ring;
	perfaux_consumer cons;
	perfaux_aux_area area;
	perfaux_aux_handle h, never;
	memset(&ring, 0, sizeof(ring));
	memset(&cons, 0, sizeof(cons));
	memset(&area, 0, sizeof(area));
	memset(&h, 0, sizeof(h));
	memset(&never, 0, sizeof(never));
	EXPECT(perfaux_ring_init(&ring, user, data, CHUNKS, 0, NULL), 0);
	EXPECT(perfaux_consumer_init(&cons, user, data, CHUNKS, 0), 0);
	EXPECT(perfaux_aux_area_init(&area, &ring, aux, AUX_PAGES, NULL), 0);

	/* A transaction that writes 1000 bytes. */
	unsigned char bytes[1000], back[1024], rec[256];
	for (int i = 0; i < 1000; i++)
		bytes[i] = (unsigned char)(i * 13);
	perfaux_output_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.id = 7;
	EXPECT(perfaux_aux_begin(&h, &area), 0);
	EXPECT(perfaux_aux_begin(&h, &area), -EBUSY);
	perfaux_aux_state st;
	EXPECT(perfaux_aux_get_state(&h, &st), 0);
	EXPECT(st.head, 0);
	EXPECT(st.space, AUX_PAGES * PAGE - 1);
	aux_write(aux, st.head, bytes, sizeof(bytes));
	struct collect c = { back, 0, sizeof(back) };
	perfaux_sink sink = { sink_copy, &c };
	EXPECT(perfaux_aux_copy(&h, &sink, 0, 1000), 1000);
	CHECK(memcmp(back, bytes, 1000) == 0);
	EXPECT(perfaux_aux_end(&h, 1000, &ring, &ev), 0);
	EXPECT(perfaux_aux_end(&h, 1000, &ring, &ev), -EINVAL);
	EXPECT(word(user, AUX_HEAD_OFFSET), 1000);
	perfaux_consumer_refresh(&cons);
	EXPECT(perfaux_consumer_next(&cons, rec, sizeof(rec)), 32);
	EXPECT(word(rec, 0) & 0xffffffff, 11); /* PERF_RECORD_AUX */
	EXPECT(word(rec, 8), 0);
	EXPECT(word(rec, 16), 1000);
	EXPECT(word(rec, 24), 0);
	EXPECT(perfaux_consumer_commit(&cons), 0);

	/* Skip, and flags. */
	EXPECT(perfaux_aux_begin(&h, &area), 0);
	EXPECT(perfaux_aux_skip(&h, 24), 0);
	EXPECT(perfaux_aux_skip(&h, 1 << 20), -ENOSPC);
	EXPECT(perfaux_aux_flag(&h, 4), 0); /* PARTIAL */
	EXPECT(perfaux_aux_get_state(&h, &st), 0);
	EXPECT(st.head, 1024);
	EXPECT(st.flags, 4);
	EXPECT(perfaux_aux_end(&h, 0, &ring, &ev), 0);
	perfaux_consumer_refresh(&cons);
	EXPECT(perfaux_consumer_next(&cons, rec, sizeof(rec)), 32);
	EXPECT(word(rec, 8), 1024);
	EXPECT(word(rec, 16), 0);
	EXPECT(word(rec, 24), 4);
	EXPECT(perfaux_consumer_commit(&cons), 0);

	/* Nobody reads the AUX data: the area fills, begin refuses. */
	int ended = 0;
	for (;;) {
		int r = perfaux_aux_begin(&h, &area);
		if (r == -ENOSPC)
			break;
		EXPECT(r, 0);
		EXPECT(perfaux_aux_get_state(&h, &st), 0);
		EXPECT(perfaux_aux_end(&h, st.space, &ring, &ev), 0);
		ended++;
		CHECK(ended < 10);
	}
	CHECK(ended >= 1);

	/* Samples from caller-kept events, the AUX block from a C snapshot. */
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (unsigned char)(255 - i);
	unsigned char a[PERFAUX_ATTR_SIZE], attr[PERFAUX_ATTR_SIZE];
	memset(a, 0, sizeof(a));
	put32(a, 0, 1);
	put32(a, 4, PERFAUX_ATTR_SIZE);
	put64(a, 16, 100);
	put64(a, 24, (1u << 16) | (1u << 1) | (1u << 2) | (1u << 20)); /* IDENTIFIER TID TIME AUX */
	put32(a, 112, 256);
	EXPECT(perfaux_attr_copy(a, sizeof(a), attr, sizeof(attr)), 0);
	perfaux_output_event who;
	memset(&who, 0, sizeof(who));
	who.id = 7;
	who.sample_id.pid = 100;
	who.sample_id.tid = 101;
	who.sample_id.time = 123456;
	who.sample_id.id = 7;
	perfaux_sample_data d;
	memset(&d, 0, sizeof(d));
	perfaux_sample_aux src = { &area, NULL, snapshot, NULL, 1, 0 };
	perfaux_sample_layout layout;
	EXPECT(perfaux_sample_prepare(attr, &d, &src, &layout), 0);
	EXPECT(layout.size, 8 + 8 * 4 + 256);
	EXPECT(layout.aux_size, 256);
	EXPECT(perfaux_sample_write(&ring, attr, &who, &d, &src, NULL), 8 + 8 * 4 + 256);
	perfaux_consumer_refresh(&cons);
	long long n;
	int samples = 0;
	while ((n = perfaux_consumer_next(&cons, back, sizeof(back))) > 0) {
		if ((word(back, 0) & 0xffffffff) != 9)
			continue;
		EXPECT(n, 8 + 8 * 4 + 256);
		EXPECT(word(back, 8), 7);
		EXPECT(word(back, 16), 100 | (101ull << 32));
		EXPECT(word(back, 24), 123456);
		EXPECT(word(back, 32), 256);
		CHECK(memcmp(back + 40, pattern + sizeof(pattern) - 256, 256) == 0);
		samples++;
	}
	EXPECT(samples, 1);
	EXPECT(perfaux_consumer_commit(&cons), 0);
	/* The leader not active here: the sample carries no AUX data. */
	perfaux_sample_aux elsewhere = src;
	elsewhere.active_here = 0;
	EXPECT(perfaux_sample_prepare(attr, &d, &elsewhere, &layout), 0);
	EXPECT(layout.aux_size, 0);
	EXPECT(perfaux_sample_write(&ring, attr, &who, &d, NULL, NULL), 8 + 8 * 4);

	/* Bad inputs. */
	perfaux_sample_aux no_source = src, bad_active = src, no_area = src;
	no_source.snapshot = NULL;
	bad_active.active_here = 2;
	perfaux_aux_area fresh;
	memset(&fresh, 0, sizeof(fresh));
	no_area.area = &fresh;
	perfaux_sample_data bad_data = d;
	bad_data.reserved0 = 1;
	perfaux_sink null_copy = { NULL, NULL };
	struct bad_input table[] = {
		{ "aux begin: NULL handle", perfaux_aux_begin(NULL, &area), -EINVAL },
		{ "aux begin: area never initialized", perfaux_aux_begin(&never, &fresh), -EINVAL },
		{ "aux state: never begun", perfaux_aux_get_state(&never, &st), -EINVAL },
		{ "aux flag: never begun", perfaux_aux_flag(&never, 4), -EINVAL },
		{ "aux skip: never begun", perfaux_aux_skip(&never, 8), -EINVAL },
		{ "aux set_head: never begun", perfaux_aux_set_head(&never, 8), -EINVAL },
		{ "aux copy: never begun", perfaux_aux_copy(&never, &sink, 0, 8), -EINVAL },
		{ "aux end: never begun", perfaux_aux_end(&never, 0, &ring, NULL), -EINVAL },
		{ "prepare: NULL attr", perfaux_sample_prepare(NULL, &d, NULL, &layout), -EINVAL },
		{ "prepare: NULL data", perfaux_sample_prepare(attr, NULL, NULL, &layout), -EINVAL },
		{ "prepare: NULL layout", perfaux_sample_prepare(attr, &d, NULL, NULL), -EINVAL },
		{ "prepare: reserved data field", perfaux_sample_prepare(attr, &bad_data, NULL, &layout), -EINVAL },
		{ "prepare: no snapshot source", perfaux_sample_prepare(attr, &d, &no_source, &layout), -EINVAL },
		{ "prepare: active_here 2", perfaux_sample_prepare(attr, &d, &bad_active, &layout), -EINVAL },
		{ "prepare: area never initialized", perfaux_sample_prepare(attr, &d, &no_area, &layout), -EINVAL },
		{ "write: NULL ring", perfaux_sample_write(NULL, attr, &who, &d, NULL, NULL), -EINVAL },
		{ "write: NULL event", perfaux_sample_write(&ring, attr, NULL, &d, NULL, NULL), -EINVAL },
		{ "write: NULL attr", perfaux_sample_write(&ring, NULL, &who, &d, NULL, NULL), -EINVAL },
		{ "write: reserved data field", perfaux_sample_write(&ring, attr, &who, &bad_data, NULL, NULL), -EINVAL },
	};
	int failed = check_table(table, sizeof(table) / sizeof(table[0]));
	/* On an open transaction: a sink without a callback. */
	perfaux_consumer_refresh(&cons);
	while (perfaux_consumer_next(&cons, back, sizeof(back)) > 0)
		;
	EXPECT(perfaux_consumer_commit(&cons), 0);
	EXPECT(perfaux_aux_area_fini(&area), 0);
	memset(&area, 0, sizeof(area));
	perfaux_aux_config ow;
	memset(&ow, 0, sizeof(ow));
	ow.flags = PERFAUX_AUX_OVERWRITE;
	EXPECT(perfaux_aux_area_init(&area, &ring, aux, AUX_PAGES, &ow), 0);
	EXPECT(perfaux_aux_begin(&h, &area), 0);
	EXPECT(perfaux_aux_copy(&h, &null_copy, 0, 8), -EINVAL);
	EXPECT(perfaux_aux_copy(&h, NULL, 0, 8), -EINVAL);
	EXPECT(perfaux_aux_get_state(&h, NULL), -EINVAL);
	EXPECT(perfaux_aux_set_head(&h, 4096), 0);
	EXPECT(perfaux_aux_end(&h, AUX_PAGES * PAGE, &ring, NULL), 0);
	EXPECT(word(user, AUX_HEAD_OFFSET), 4096);

	EXPECT(perfaux_aux_area_fini(&area), 0);
	EXPECT(perfaux_consumer_fini(&cons), 0);
	EXPECT(perfaux_ring_fini(&ring), 0);
	for (int i = 0; i < AUX_PAGES; i++)
		free(aux[i]);
	for (int i = 0; i < CHUNKS; i++)
		free(data[i]);
	free(user);
	if (failed)
		return 1;
	printf("sample: AUX transactions, a sample with a C snapshot, %zu bad inputs refused\n",
	       sizeof(table) / sizeof(table[0]) + 3);
	return 0;
}
