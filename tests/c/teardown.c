/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Tearing down in the wrong order, through include/perfaux.h alone: every
 * `_fini` (and `_end`) of an object that another live object still refers
 * to returns -EBUSY and touches nothing, in every state a teardown can
 * reach; every other one succeeds, and the test frees that object's
 * storage and memory at once, so that valgrind reports any later use of
 * it. The kernel's counts are the model: rb->refcount, rb->aux_refcount,
 * event->refcount. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "perfaux.h"

/* The engine's padding bytes are undefined to valgrind; copies compared
 * byte for byte are marked defined (the copies only: the storage keeps
 * its state for valgrind's other checks). */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

/* Whether n bytes at a and b are equal, defined or not. */
static int same_bytes(void *a, void *b, size_t n)
{
	VALGRIND_MAKE_MEM_DEFINED(a, n);
	VALGRIND_MAKE_MEM_DEFINED(b, n);
	return memcmp(a, b, n) == 0;
}

#define PAGE 4096

/* The objects, each referring only to objects before it. */
enum obj {
	RING,    /* the data ring */
	AREA,    /* an AUX area attached to the ring */
	BUF,     /* the PT state of the area's buffer */
	CPU,     /* a PT CPU object writing into ring, area and buffer */
	LEADER,  /* a PT event on the CPU object, its buffer the ring and area */
	SAMPLER, /* a sampler in the leader's group, its output the leader's */
	CHILD,   /* an inherited child of the sampler */
	OUT,     /* an output handle open on the ring */
	AUXH,    /* an AUX transaction open on the area */
	NOBJ
};

static const char *const names[NOBJ] = {
	"ring", "aux area", "pt buffer", "pt cpu", "leader", "sampler", "child",
	"output handle", "aux handle",
};

/* refs[o]: the objects o refers to, as a bit mask. */
static const unsigned refs[NOBJ] = {
	[RING] = 0,
	[AREA] = 1u << RING,
	[BUF] = 1u << AREA,
	[CPU] = 1u << RING | 1u << AREA | 1u << BUF,
	[LEADER] = 1u << CPU | 1u << RING | 1u << AREA,
	[SAMPLER] = 1u << LEADER,
	[CHILD] = 1u << SAMPLER,
	[OUT] = 1u << RING,
	[AUXH] = 1u << AREA,
};

static size_t storage_size(enum obj o)
{
	switch (o) {
	case RING: return sizeof(perfaux_ring);
	case AREA: return sizeof(perfaux_aux_area);
	case BUF: return sizeof(perfaux_pt_buffer);
	case CPU: return sizeof(perfaux_pt_cpu);
	case LEADER:
	case SAMPLER:
	case CHILD: return sizeof(perfaux_event);
	case OUT: return sizeof(perfaux_output_handle);
	case AUXH: return sizeof(perfaux_aux_handle);
	default: return 0;
	}
}

/* One build: each object's storage, and the memory the ring, the area and
 * the buffer are over (freed with their owner). */
struct world {
	void *obj[NOBJ];
	void *user, *data, *aux, *tables;
	unsigned live;
};

static int counter_add(void *ctx, uint64_t id, uint32_t flags, uint32_t paused)
{
	(void)ctx, (void)id, (void)flags, (void)paused;
	return 0;
}
static void counter_del(void *ctx, uint64_t id, uint32_t flags) { (void)ctx, (void)id, (void)flags; }

static const perfaux_pmu_ops counter = { PERFAUX_CAP_NO_NMI, 0, counter_add, counter_del,
					 NULL, NULL, NULL, NULL };

/* A normalized attr of `type` (1: a counter, 8: Intel PT). */
static void attr(unsigned char out[PERFAUX_ATTR_SIZE], uint32_t type)
{
	unsigned char a[PERFAUX_ATTR_SIZE];
	uint32_t size = PERFAUX_ATTR_SIZE;
	uint64_t period = 1000;

	memset(a, 0, sizeof(a));
	memcpy(a, &type, 4);
	memcpy(a + 4, &size, 4);
	memcpy(a + 16, &period, 8);
	EXPECT(perfaux_attr_copy(a, sizeof(a), out, PERFAUX_ATTR_SIZE), 0);
}

static void *page(void)
{
	void *p = aligned_alloc(PAGE, PAGE);
	CHECK(p != NULL);
	return p;
}

static void build(struct world *w)
{
	static unsigned char pt_attr[PERFAUX_ATTR_SIZE], c_attr[PERFAUX_ATTR_SIZE];
	static const unsigned char zero[sizeof(perfaux_pt_cpu)];

	attr(pt_attr, 8);
	attr(c_attr, 1);
	memset(w, 0, sizeof(*w));
	for (int o = 0; o < NOBJ; o++) {
		w->obj[o] = aligned_alloc(PERFAUX_OBJECT_ALIGN, storage_size(o));
		CHECK(w->obj[o] != NULL);
		memcpy(w->obj[o], zero, storage_size(o));
	}
	w->user = page();
	w->data = page();
	w->aux = page();
	w->tables = page();
	EXPECT(perfaux_ring_init(w->obj[RING], w->user, &w->data, 1, 0, NULL), 0);
	EXPECT(perfaux_aux_area_init(w->obj[AREA], w->obj[RING], &w->aux, 1, NULL), 0);
	EXPECT(perfaux_pt_buffer_init_area(w->obj[BUF], w->tables, 1, w->obj[AREA], NULL), 0);
	EXPECT(perfaux_pt_cpu_init_area(w->obj[CPU], w->obj[BUF], w->obj[AREA], w->obj[RING], NULL,
					NULL, NULL, 1024),
	       0);
	EXPECT(perfaux_event_open_pt(w->obj[LEADER], pt_attr, w->obj[CPU], 1, 0, NULL, NULL), 0);
	EXPECT(perfaux_event_set_buffer(w->obj[LEADER], w->obj[RING], w->obj[AREA]), 0);
	EXPECT(perfaux_event_open(w->obj[SAMPLER], c_attr, &counter, 2, 0, w->obj[LEADER], NULL), 0);
	EXPECT(perfaux_event_join_group(w->obj[SAMPLER]), 0);
	EXPECT(perfaux_event_set_output(w->obj[SAMPLER], w->obj[LEADER]), 0);
	EXPECT(perfaux_event_open(w->obj[CHILD], c_attr, &counter, 3, 0, NULL, w->obj[SAMPLER]), 0);
	EXPECT(perfaux_output_begin(w->obj[OUT], w->obj[RING], 8, NULL), 0);
	EXPECT(perfaux_aux_begin(w->obj[AUXH], w->obj[AREA]), 0);
	w->live = (1u << NOBJ) - 1;
}

/* Ends object o: its fini, or the end of a handle. */
static int end(struct world *w, enum obj o)
{
	static const uint32_t header[2] = { 9, 8 }; /* type, misc and size */

	switch (o) {
	case RING: return perfaux_ring_fini(w->obj[o]);
	case AREA: return perfaux_aux_area_fini(w->obj[o]);
	case BUF: return perfaux_pt_buffer_fini(w->obj[o]);
	case CPU: return perfaux_pt_cpu_fini(w->obj[o]);
	case LEADER:
	case SAMPLER:
	case CHILD: return perfaux_event_fini(w->obj[o]);
	case OUT:
		/* An end succeeds whatever the record holds; give it a header. */
		if (perfaux_output_copy(w->obj[o], header, sizeof(header)) < 0)
			return -EINVAL;
		return perfaux_output_end(w->obj[o]);
	case AUXH: return perfaux_aux_end(w->obj[o], 0, w->obj[RING], NULL);
	default: return -EINVAL;
	}
}

/* Frees what died with object o: its storage and the memory it was over. */
static void release(struct world *w, enum obj o)
{
	free(w->obj[o]);
	w->obj[o] = NULL;
	if (o == RING) {
		free(w->user);
		free(w->data);
	} else if (o == AREA) {
		free(w->aux);
	} else if (o == BUF) {
		free(w->tables);
	}
	w->live &= ~(1u << o);
}

/* Whether a live object other than o refers to o. */
static int referred(const struct world *w, enum obj o)
{
	for (int p = 0; p < NOBJ; p++)
		if ((w->live >> p & 1) && (refs[p] >> o & 1))
			return 1;
	return 0;
}

/* Ends o as the model says it must go: -EBUSY with its storage and the
 * ring's user page byte for byte as they were, or 0 (then freed). */
static void try_end(struct world *w, enum obj o, unsigned *refused)
{
	static unsigned char before[sizeof(perfaux_pt_cpu)], after[sizeof(perfaux_pt_cpu)];
	static unsigned char user_before[PAGE], user_after[PAGE];
	size_t n = storage_size(o);
	int busy = referred(w, o);

	memcpy(before, w->obj[o], n);
	if (w->live & 1u << RING)
		memcpy(user_before, w->user, PAGE);
	int r = end(w, o);
	if (busy) {
		if (r != -EBUSY) {
			fprintf(stderr, "%s with live objects %#x: %d, expected -EBUSY\n", names[o],
				w->live, r);
			exit(1);
		}
		memcpy(after, w->obj[o], n);
		CHECK(same_bytes(before, after, n));
		if (w->live & 1u << RING) {
			memcpy(user_after, w->user, PAGE);
			CHECK(same_bytes(user_before, user_after, PAGE));
		}
		(*refused)++;
	} else {
		if (r != 0) {
			fprintf(stderr, "%s with live objects %#x: %d, expected 0\n", names[o], w->live,
				r);
			exit(1);
		}
		release(w, o);
	}
}

/* Whether the live set `mask` is one a teardown can reach: every live
 * object's references are live. */
static int reachable(unsigned mask)
{
	for (int o = 0; o < NOBJ; o++)
		if ((mask >> o & 1) && (refs[o] & ~mask))
			return 0;
	return 1;
}

/* The repro: the C quick start torn down ring first while the PT
 * event is still added (its AUX transaction open), then in order. */
static void quick_start_backwards(void)
{
	struct world w;
	static unsigned char before[sizeof(perfaux_pt_cpu)], after[sizeof(perfaux_pt_cpu)];

	build(&w);
	/* Only the ring, area, buffer and CPU object, as the quick start has. */
	for (int o = NOBJ - 1; o > CPU; o--) {
		EXPECT(end(&w, o), 0);
		release(&w, o);
	}
	EXPECT(perfaux_pt_add(w.obj[CPU], PERFAUX_EF_START, 1, 1 << 10, 0), 0);
	const perfaux_trace_event on = { .kind = PERFAUX_TRACE_ENABLE, .target = 0x400000 };
	CHECK(perfaux_pt_trace(w.obj[CPU], &on) >= 0);
	EXPECT(perfaux_ring_fini(w.obj[RING]), -EBUSY);
	EXPECT(perfaux_aux_area_fini(w.obj[AREA]), -EBUSY);
	EXPECT(perfaux_pt_buffer_fini(w.obj[BUF]), -EBUSY);
	/* The transaction is open: the CPU object refuses too, untouched. */
	memcpy(before, w.obj[CPU], sizeof(perfaux_pt_cpu));
	EXPECT(perfaux_pt_cpu_fini(w.obj[CPU]), -EBUSY);
	memcpy(after, w.obj[CPU], sizeof(perfaux_pt_cpu));
	CHECK(same_bytes(before, after, sizeof(perfaux_pt_cpu)));
	/* del ends the transaction: PERF_RECORD_AUX into the live ring. */
	uint64_t head_before;
	memcpy(&head_before, (char *)w.user + 1024, 8);
	EXPECT(perfaux_pt_del(w.obj[CPU], PERFAUX_EF_UPDATE), 0);
	uint64_t head_after;
	memcpy(&head_after, (char *)w.user + 1024, 8);
	CHECK(head_after > head_before);
	for (int o = CPU; o >= RING; o--) {
		EXPECT(end(&w, o), 0);
		release(&w, o);
	}
}

int main(void)
{
	unsigned states = 0, refused = 0, ended = 0;

	for (unsigned mask = 0; mask < 1u << NOBJ; mask++) {
		if (!reachable(mask))
			continue;
		struct world w;

		build(&w);
		/* Reach the state: end what is not in it, newest first (a
		 * correct order, since references point to older objects). */
		for (int o = NOBJ - 1; o >= 0; o--) {
			if (!(mask >> o & 1)) {
				EXPECT(end(&w, o), 0);
				release(&w, o);
			}
		}
		/* Every live object's end, oldest first: most are refused. */
		for (int o = 0; o < NOBJ; o++)
			if (w.live >> o & 1) {
				try_end(&w, o, &refused);
				ended++;
			}
		/* The rest, newest first. */
		for (int o = NOBJ - 1; o >= 0; o--)
			if (w.live >> o & 1) {
				EXPECT(end(&w, o), 0);
				release(&w, o);
			}
		states++;
	}
	quick_start_backwards();
	CHECK(refused > 0);
	printf("teardown: %u reachable states, %u ends tried, %u refused with -EBUSY\n", states,
	       ended, refused);
	return 0;
}
