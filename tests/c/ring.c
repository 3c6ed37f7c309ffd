/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The data ring through include/perfaux.h alone: records written in pieces
 * and read back byte for byte, wakeups, a nested (NMI-style) writer, lost
 * records when the reader falls behind, and a table of bad inputs for every
 * ring function, each with its errno. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "perfaux.h"

/* The storage types are what the size and alignment constants say. */
#define SAME(type, size)                                                     \
	_Static_assert(sizeof(type) == (size), #type " size");               \
	_Static_assert(_Alignof(type) == PERFAUX_OBJECT_ALIGN, #type " alignment")
SAME(perfaux_ring, PERFAUX_RING_SIZE);
SAME(perfaux_output_handle, PERFAUX_OUTPUT_HANDLE_SIZE);
SAME(perfaux_consumer, PERFAUX_CONSUMER_SIZE);
SAME(perfaux_aux_area, PERFAUX_AUX_AREA_SIZE);
SAME(perfaux_aux_handle, PERFAUX_AUX_HANDLE_SIZE);
SAME(perfaux_pt_cpu, PERFAUX_PT_CPU_SIZE);
SAME(perfaux_pt_buffer, PERFAUX_PT_BUFFER_SIZE);
SAME(perfaux_event, PERFAUX_EVENT_SIZE);

#define CHUNKS 4
#define PAGE 4096

static unsigned wakeups;

static void on_wakeup(void *ctx)
{
	(*(unsigned *)ctx)++;
}

/* A record of `size` bytes: a header of type 0x1000 + n, then a pattern. */
static void make_record(unsigned char *r, size_t size, unsigned n)
{
	uint32_t type = 0x1000 + n;
	uint16_t misc = 0, sz = (uint16_t)size;
	memcpy(r, &type, 4);
	memcpy(r + 4, &misc, 2);
	memcpy(r + 6, &sz, 2);
	for (size_t i = 8; i < size; i++)
		r[i] = (unsigned char)(n * 7 + i);
}

static void write_record(perfaux_ring *ring, const unsigned char *r, size_t size)
{
	perfaux_output_handle h;
	memset(&h, 0, sizeof(h));
	EXPECT(perfaux_output_begin(&h, ring, size, NULL), 0);
	/* In two pieces, as a sample's fields go in. */
	EXPECT(perfaux_output_copy(&h, r, 8), 0);
	EXPECT(perfaux_output_copy(&h, r + 8, size - 8), 0);
	/* Nothing goes past the reservation. */
	EXPECT(perfaux_output_copy(&h, r, 8), 8);
	EXPECT(perfaux_output_end(&h), 0);
	EXPECT(perfaux_output_end(&h), -EINVAL);
}

int main(void)
{
	void *user = aligned_alloc(PAGE, PAGE);
	void *chunks[CHUNKS];
	for (int i = 0; i < CHUNKS; i++)
		chunks[i] = aligned_alloc(PAGE, PAGE);
	perfaux_ring ring;
	perfaux_consumer cons;
	memset(&ring, 0, sizeof(ring));
	memset(&cons, 0, sizeof(cons));
	perfaux_ring_config cfg = {
		.flags = 0,
		.reserved = 0,
		.watermark = PAGE,
		.wakeup = { on_wakeup, &wakeups },
	};
	EXPECT(perfaux_ring_init(&ring, user, chunks, CHUNKS, 0, &cfg), 0);
	EXPECT(perfaux_ring_init(&ring, user, chunks, CHUNKS, 0, &cfg), -EBUSY);
	EXPECT(perfaux_consumer_init(&cons, user, chunks, CHUNKS, 0), 0);
	EXPECT(perfaux_consumer_init(&cons, user, chunks, CHUNKS, 0), -EBUSY);

	/* 500 records of 16..808 bytes, read back after every ten. */
	unsigned char rec[1024], back[1024];
	for (unsigned round = 0; round < 50; round++) {
		for (unsigned i = 0; i < 10; i++) {
			unsigned n = round * 10 + i;
			make_record(rec, 16 + 8 * (n % 100), n);
			write_record(&ring, rec, 16 + 8 * (n % 100));
		}
		CHECK(perfaux_consumer_refresh(&cons) > 0);
		for (unsigned i = 0; i < 10; i++) {
			unsigned n = round * 10 + i;
			size_t size = 16 + 8 * (n % 100);
			make_record(rec, size, n);
			EXPECT(perfaux_consumer_next(&cons, back, sizeof(back)), size);
			CHECK(memcmp(rec, back, size) == 0);
		}
		EXPECT(perfaux_consumer_next(&cons, back, sizeof(back)), 0);
		EXPECT(perfaux_consumer_commit(&cons), 0);
	}
	CHECK(wakeups > 0);

	/* A nested writer (an NMI inside a task's record): both records
	 * complete, in reservation order. */
	perfaux_output_handle outer, inner;
	memset(&outer, 0, sizeof(outer));
	memset(&inner, 0, sizeof(inner));
	make_record(rec, 64, 1);
	EXPECT(perfaux_output_begin(&outer, &ring, 64, NULL), 0);
	EXPECT(perfaux_output_copy(&outer, rec, 32), 0);
	make_record(back, 32, 2);
	EXPECT(perfaux_output_begin(&inner, &ring, 32, NULL), 0);
	EXPECT(perfaux_output_copy(&inner, back, 32), 0);
	EXPECT(perfaux_output_end(&inner), 0);
	EXPECT(perfaux_output_copy(&outer, rec + 32, 32), 0);
	EXPECT(perfaux_output_end(&outer), 0);
	perfaux_consumer_refresh(&cons);
	EXPECT(perfaux_consumer_next(&cons, back, sizeof(back)), 64);
	CHECK(memcmp(rec, back, 64) == 0);
	EXPECT(perfaux_consumer_next(&cons, back, sizeof(back)), 32);
	EXPECT(perfaux_consumer_commit(&cons), 0);

	/* A reader that falls behind: refused records, then a LOST record
	 * (type 2) saying how many, before the next one. */
	int refused = 0;
	for (unsigned n = 0; n < 40; n++) {
		perfaux_output_handle h;
		memset(&h, 0, sizeof(h));
		int r = perfaux_output_begin(&h, &ring, 1024, NULL);
		if (r == -ENOSPC) {
			refused++;
			continue;
		}
		EXPECT(r, 0);
		make_record(rec, 1024, n);
		/* The header, 8 bytes left as they are, the rest. */
		EXPECT(perfaux_output_copy(&h, rec, 8), 0);
		EXPECT(perfaux_output_skip(&h, 8), 0);
		EXPECT(perfaux_output_copy(&h, rec + 16, 1008), 0);
		EXPECT(perfaux_output_end(&h), 0);
	}
	CHECK(refused > 0);
	perfaux_consumer_refresh(&cons);
	long long got;
	while ((got = perfaux_consumer_next(&cons, back, sizeof(back))) > 0)
		EXPECT(got, 1024);
	EXPECT(got, 0);
	EXPECT(perfaux_consumer_commit(&cons), 0);
	perfaux_output_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.id = 77;
	make_record(rec, 16, 9);
	{
		perfaux_output_handle h;
		memset(&h, 0, sizeof(h));
		EXPECT(perfaux_output_begin(&h, &ring, 16, &ev), 0);
		EXPECT(perfaux_output_copy(&h, rec, 16), 0);
		EXPECT(perfaux_output_end(&h), 0);
	}
	perfaux_consumer_refresh(&cons);
	EXPECT(perfaux_consumer_next(&cons, back, sizeof(back)), 24);
	uint32_t type;
	uint64_t id, lost;
	memcpy(&type, back, 4);
	memcpy(&id, back + 8, 8);
	memcpy(&lost, back + 16, 8);
	EXPECT(type, 2);
	EXPECT(id, 77);
	EXPECT(lost, refused);
	/* Too small a buffer: -ENOMEM, and the record stays. */
	EXPECT(perfaux_consumer_next(&cons, back, 8), -ENOMEM);
	EXPECT(perfaux_consumer_next(&cons, back, sizeof(back)), 16);
	CHECK(memcmp(rec, back, 16) == 0);
	EXPECT(perfaux_consumer_commit(&cons), 0);

	/* Bad inputs, one row per refusal. */
	perfaux_ring fresh;
	perfaux_consumer fresh_cons;
	perfaux_output_handle closed, h2;
	memset(&fresh, 0, sizeof(fresh));
	memset(&fresh_cons, 0, sizeof(fresh_cons));
	memset(&closed, 0, sizeof(closed));
	memset(&h2, 0, sizeof(h2));
	perfaux_ring_config bad_flags = cfg, bad_reserved = cfg;
	bad_flags.flags = 0x100;
	bad_reserved.reserved = 1;
	perfaux_output_event bad_event = ev, bad_type = ev;
	bad_event.reserved = 1;
	bad_type.has_sample_id = 1;
	bad_type.sample_id.sample_type = 1ull << 40;
	void *null_chunks[CHUNKS] = { chunks[0], NULL, chunks[2], chunks[3] };
	char unaligned[sizeof(perfaux_ring) + 8];
	perfaux_ring *misaligned = (perfaux_ring *)(void *)(unaligned + 1);
	struct bad_input table[] = {
		{ "init: NULL ring", perfaux_ring_init(NULL, user, chunks, CHUNKS, 0, NULL), -EINVAL },
		{ "init: misaligned ring", perfaux_ring_init(misaligned, user, chunks, CHUNKS, 0, NULL), -EINVAL },
		{ "init: NULL user page", perfaux_ring_init(&fresh, NULL, chunks, CHUNKS, 0, NULL), -EINVAL },
		{ "init: misaligned user page", perfaux_ring_init(&fresh, (char *)user + 4, chunks, CHUNKS, 0, NULL), -EINVAL },
		{ "init: NULL chunk array", perfaux_ring_init(&fresh, user, NULL, CHUNKS, 0, NULL), -EINVAL },
		{ "init: a NULL chunk", perfaux_ring_init(&fresh, user, null_chunks, CHUNKS, 0, NULL), -EINVAL },
		{ "init: 3 chunks", perfaux_ring_init(&fresh, user, chunks, 3, 0, NULL), -EINVAL },
		{ "init: order 21", perfaux_ring_init(&fresh, user, chunks, CHUNKS, 21, NULL), -EINVAL },
		{ "init: unknown flags", perfaux_ring_init(&fresh, user, chunks, CHUNKS, 0, &bad_flags), -EINVAL },
		{ "init: reserved field", perfaux_ring_init(&fresh, user, chunks, CHUNKS, 0, &bad_reserved), -EINVAL },
		{ "fini: NULL", perfaux_ring_fini(NULL), -EINVAL },
		{ "fini: never initialized", perfaux_ring_fini(&fresh), -EINVAL },
		{ "begin: NULL handle", perfaux_output_begin(NULL, &ring, 16, NULL), -EINVAL },
		{ "begin: uninitialized ring", perfaux_output_begin(&h2, &fresh, 16, NULL), -EINVAL },
		{ "begin: NULL ring", perfaux_output_begin(&h2, NULL, 16, NULL), -EINVAL },
		{ "begin: size 0", perfaux_output_begin(&h2, &ring, 0, NULL), -EINVAL },
		{ "begin: size 65536", perfaux_output_begin(&h2, &ring, 65536, NULL), -EINVAL },
		{ "begin: reserved event field", perfaux_output_begin(&h2, &ring, 16, &bad_event), -EINVAL },
		{ "begin: unknown sample_type bit", perfaux_output_begin(&h2, &ring, 16, &bad_type), -EINVAL },
		{ "copy: NULL handle", perfaux_output_copy(NULL, rec, 8), -EINVAL },
		{ "copy: handle never opened", perfaux_output_copy(&closed, rec, 8), -EINVAL },
		{ "skip: handle never opened", perfaux_output_skip(&closed, 8), -EINVAL },
		{ "end: NULL handle", perfaux_output_end(NULL), -EINVAL },
		{ "end: handle never opened", perfaux_output_end(&closed), -EINVAL },
		{ "consumer init: NULL", perfaux_consumer_init(NULL, user, chunks, CHUNKS, 0), -EINVAL },
		{ "consumer init: NULL user page", perfaux_consumer_init(&fresh_cons, NULL, chunks, CHUNKS, 0), -EINVAL },
		{ "consumer init: 3 chunks", perfaux_consumer_init(&fresh_cons, user, chunks, 3, 0), -EINVAL },
		{ "refresh: never initialized", perfaux_consumer_refresh(&fresh_cons), -EINVAL },
		{ "next: never initialized", perfaux_consumer_next(&fresh_cons, back, sizeof(back)), -EINVAL },
		{ "next: NULL buffer", perfaux_consumer_next(&cons, NULL, 16), -EINVAL },
		{ "commit: NULL", perfaux_consumer_commit(NULL), -EINVAL },
		{ "consumer fini: never initialized", perfaux_consumer_fini(&fresh_cons), -EINVAL },
	};
	int failed = check_table(table, sizeof(table) / sizeof(table[0]));
	/* A handle that is open refuses a second begin; NULL bytes refused. */
	EXPECT(perfaux_output_begin(&h2, &ring, 16, NULL), 0);
	EXPECT(perfaux_output_begin(&h2, &ring, 16, NULL), -EBUSY);
	EXPECT(perfaux_output_copy(&h2, NULL, 8), -EINVAL);
	EXPECT(perfaux_output_skip(&h2, 16), 0);
	EXPECT(perfaux_output_end(&h2), 0);

	EXPECT(perfaux_consumer_fini(&cons), 0);
	EXPECT(perfaux_consumer_fini(&cons), -EINVAL);
	EXPECT(perfaux_ring_fini(&ring), 0);
	EXPECT(perfaux_ring_fini(&ring), -EINVAL);
	for (int i = 0; i < CHUNKS; i++)
		free(chunks[i]);
	free(user);
	if (failed)
		return 1;
	printf("ring: 500 records, %u wakeups, %d refused and reported lost, %zu bad inputs refused\n",
	       wakeups, refused, sizeof(table) / sizeof(table[0]));
	return 0;
}
