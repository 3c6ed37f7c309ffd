/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Events and AUX sampling through include/perfaux.h alone: a PT leader in
 * snapshot mode and a counter (a C PMU) grouped under it with
 * PERF_SAMPLE_AUX; every sample's AUX block equals a direct snapshot of the
 * trace taken right after; a sampler without a leader is refused as Linux
 * refuses it; a full ring counts lost samples; bad inputs get their errno. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "perfaux.h"

#define PAGE 4096
#define DATA_CHUNKS 8
#define AUX_PAGES 8
#define AUX_SAMPLE 2048

/* perf_event_attr fields, by offset (the uapi layout). */
static void put32(unsigned char *a, size_t off, uint32_t v) { memcpy(a + off, &v, 4); }
static void put64(unsigned char *a, size_t off, uint64_t v) { memcpy(a + off, &v, 8); }

#define ST_IP (1u << 0)
#define ST_TID (1u << 1)
#define ST_TIME (1u << 2)
#define ST_CPU (1u << 7)
#define ST_PERIOD (1u << 8)
#define ST_IDENTIFIER (1u << 16)
#define ST_AUX (1u << 20)
#define SAMPLE_ID_ALL (1ull << 18)

/* A normalized attr, through perfaux_attr_copy as perf_event_open would. */
static void attr(unsigned char out[PERFAUX_ATTR_SIZE], uint32_t type, uint64_t period,
		 uint64_t sample_type, uint32_t aux_sample_size)
{
	unsigned char a[PERFAUX_ATTR_SIZE];
	memset(a, 0, sizeof(a));
	put32(a, 0, type);
	put32(a, 4, PERFAUX_ATTR_SIZE);
	put64(a, 16, period);
	put64(a, 24, sample_type);
	put64(a, 40, SAMPLE_ID_ALL);
	put32(a, 112, aux_sample_size);
	EXPECT(perfaux_attr_copy(a, sizeof(a), out, PERFAUX_ATTR_SIZE), 0);
}

static uint64_t now = 5000;
static uint64_t clock_now(void *ctx) { (void)ctx; return ++now; }
static uint32_t cpu_id(void *ctx) { (void)ctx; return 0; }
static void current_task(void *ctx, uint32_t *pid, uint32_t *tid)
{
	(void)ctx;
	*pid = 42;
	*tid = 43;
}

static unsigned adds, dels;
static int counter_add(void *ctx, uint64_t id, uint32_t flags, uint32_t paused)
{
	(void)ctx, (void)id, (void)flags, (void)paused;
	adds++;
	return 0;
}
static void counter_del(void *ctx, uint64_t id, uint32_t flags)
{
	(void)ctx, (void)id, (void)flags;
	dels++;
}

static uint64_t word(const unsigned char *r, size_t off)
{
	uint64_t v;
	memcpy(&v, r + off, 8);
	return v;
}

int main(void)
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
	perfaux_event leader, sampler, orphan, never;
	memset(&ring, 0, sizeof(ring));
	memset(&cons, 0, sizeof(cons));
	memset(&area, 0, sizeof(area));
	memset(&pt, 0, sizeof(pt));
	memset(&buf, 0, sizeof(buf));
	memset(&leader, 0, sizeof(leader));
	memset(&sampler, 0, sizeof(sampler));
	memset(&orphan, 0, sizeof(orphan));
	memset(&never, 0, sizeof(never));
	EXPECT(perfaux_ring_init(&ring, user, data, DATA_CHUNKS, 0, NULL), 0);
	EXPECT(perfaux_consumer_init(&cons, user, data, DATA_CHUNKS, 0), 0);
	perfaux_aux_config ac;
	memset(&ac, 0, sizeof(ac));
	ac.flags = PERFAUX_AUX_OVERWRITE;
	EXPECT(perfaux_aux_area_init(&area, &ring, aux, AUX_PAGES, &ac), 0);
	perfaux_platform plat = { cpu_id, clock_now, current_task, NULL, NULL, NULL };
	EXPECT(perfaux_pt_buffer_init_area(&buf, tables, 1, &area, NULL), 0);
	EXPECT(perfaux_pt_cpu_init_area(&pt, &buf, &area, &ring, NULL, &plat, NULL, 1024), 0);

	unsigned char pt_attr[PERFAUX_ATTR_SIZE], s_attr[PERFAUX_ATTR_SIZE];
	attr(pt_attr, 8, 1, ST_TID | ST_TIME | ST_IDENTIFIER, 0);
	attr(s_attr, 1, 1000, ST_IDENTIFIER | ST_IP | ST_TID | ST_TIME | ST_CPU | ST_PERIOD | ST_AUX,
	     AUX_SAMPLE);
	perfaux_pmu_ops counter = { PERFAUX_CAP_NO_NMI, 0, counter_add, counter_del, NULL, NULL, NULL, NULL };

	/* A sampler asking for AUX data without an AUX leader: Linux's EINVAL. */
	EXPECT(perfaux_event_open(&orphan, s_attr, &counter, 9, 0, NULL, NULL), -EINVAL);

	EXPECT(perfaux_event_open_pt(&leader, pt_attr, &pt, 1, 0, NULL, NULL), 0);
	EXPECT(perfaux_event_set_buffer(&leader, &ring, &area), 0);
	EXPECT(perfaux_event_open(&sampler, s_attr, &counter, 2, 0, &leader, NULL), 0);
	EXPECT(perfaux_event_open(&sampler, s_attr, &counter, 2, 0, &leader, NULL), -EBUSY);
	EXPECT(perfaux_event_join_group(&sampler), 0);
	EXPECT(perfaux_event_set_output(&sampler, &leader), 0);
	EXPECT(perfaux_event_sched_in(&leader, &plat), 0);
	EXPECT(adds, 1);

	/* The traced program. */
	perfaux_trace_event en = { .kind = PERFAUX_TRACE_ENABLE, .target = 0x400000 };
	EXPECT(perfaux_pt_trace(&pt, &en), 0);
	unsigned samples = 0;
	unsigned char rec[4096], direct[AUX_SAMPLE];
	for (unsigned i = 0; i < 20000; i++) {
		perfaux_trace_event b = { .kind = PERFAUX_TRACE_CONDITIONAL,
					   .flags = i % 3 == 0 ? PERFAUX_TRACE_TAKEN : 0,
					   .target = 0x400000 };
		EXPECT(perfaux_pt_trace(&pt, &b), 0);
		if (i % 7 == 0) {
			perfaux_trace_event t = { .kind = PERFAUX_TRACE_INDIRECT_JUMP,
						   .target = 0x400000 + (i % 512) * 64 };
			EXPECT(perfaux_pt_trace(&pt, &t), 0);
		}
		if (i % 1000 != 999)
			continue;
		perfaux_sample_data d;
		memset(&d, 0, sizeof(d));
		d.misc = 2; /* user */
		d.ip = 0x400000 + i;
		d.period = 1000;
		EXPECT(perfaux_event_overflow(&sampler, &plat, &d), 8 + 7 * 8 + AUX_SAMPLE);
		struct collect c = { direct, 0, sizeof(direct) };
		perfaux_sink sink = { sink_copy, &c };
		EXPECT(perfaux_pt_snapshot_aux(&pt, &sink, AUX_SAMPLE), AUX_SAMPLE);
		/* The sample, as the consumer reads it. */
		perfaux_consumer_refresh(&cons);
		long long n;
		while ((n = perfaux_consumer_next(&cons, rec, sizeof(rec))) > 0) {
			uint32_t type;
			memcpy(&type, rec, 4);
			if (type != 9)
				continue;
			EXPECT(n, 8 + 7 * 8 + AUX_SAMPLE);
			EXPECT(word(rec, 8), 2);                      /* IDENTIFIER */
			EXPECT(word(rec, 16), 0x400000 + i);          /* IP */
			EXPECT(word(rec, 24), 42 | (43ull << 32));    /* TID */
			CHECK(word(rec, 32) > 5000);                  /* TIME */
			EXPECT(word(rec, 40), 0);                     /* CPU */
			EXPECT(word(rec, 48), 1000);                  /* PERIOD */
			EXPECT(word(rec, 56), AUX_SAMPLE);            /* AUX size */
			CHECK(memcmp(rec + 64, direct, AUX_SAMPLE) == 0);
			samples++;
		}
		EXPECT(n, 0);
		EXPECT(perfaux_consumer_commit(&cons), 0);
	}
	EXPECT(samples, 20);
	EXPECT(perfaux_event_lost_samples(&sampler), 0);

	/* A reader that does not read: the ring refuses, the event counts. */
	int refused = 0;
	for (int i = 0; i < 64; i++) {
		perfaux_sample_data d;
		memset(&d, 0, sizeof(d));
		d.period = 1;
		int r = perfaux_event_overflow(&sampler, &plat, &d);
		if (r == -ENOSPC)
			refused++;
		else
			CHECK(r > 0);
	}
	CHECK(refused > 0);
	EXPECT(perfaux_event_lost_samples(&sampler), refused);

	/* Bad inputs. */
	perfaux_pmu_ops bad_caps = counter, bad_reserved = counter;
	bad_caps.caps = 1u << 30;
	bad_reserved.reserved = 1;
	perfaux_sample_data bad_data, raw_null;
	memset(&bad_data, 0, sizeof(bad_data));
	memset(&raw_null, 0, sizeof(raw_null));
	bad_data.reserved1 = 1;
	raw_null.raw_len = 4;
	struct bad_input table[] = {
		{ "open: NULL event", perfaux_event_open(NULL, pt_attr, &counter, 3, 0, NULL, NULL), -EINVAL },
		{ "open: NULL attr", perfaux_event_open(&never, NULL, &counter, 3, 0, NULL, NULL), -EINVAL },
		{ "open: NULL pmu", perfaux_event_open(&never, pt_attr, NULL, 3, 0, NULL, NULL), -EINVAL },
		{ "open: unknown caps", perfaux_event_open(&never, pt_attr, &bad_caps, 3, 0, NULL, NULL), -EINVAL },
		{ "open: reserved field", perfaux_event_open(&never, pt_attr, &bad_reserved, 3, 0, NULL, NULL), -EINVAL },
		{ "open: cpu -2", perfaux_event_open(&never, pt_attr, &counter, 3, -2, NULL, NULL), -EINVAL },
		{ "open: leader never opened", perfaux_event_open(&never, s_attr, &counter, 3, 0, &orphan, NULL), -EINVAL },
		{ "open_pt: PMU never initialized", perfaux_event_open_pt(&never, pt_attr, NULL, 3, 0, NULL, NULL), -EINVAL },
		{ "join: never opened", perfaux_event_join_group(&never), -EINVAL },
		{ "set_buffer: never opened", perfaux_event_set_buffer(&never, &ring, NULL), -EINVAL },
		{ "set_buffer: NULL ring", perfaux_event_set_buffer(&leader, NULL, NULL), -EINVAL },
		{ "set_output: NULL target", perfaux_event_set_output(&sampler, NULL), -EINVAL },
		{ "set_output: never opened", perfaux_event_set_output(&never, &leader), -EINVAL },
		{ "sched_in: NULL platform", perfaux_event_sched_in(&leader, NULL), -EINVAL },
		{ "sched_out: never opened", perfaux_event_sched_out(&never), -EINVAL },
		{ "enable: never opened", perfaux_event_enable(&never), -EINVAL },
		{ "lost_samples: never opened", perfaux_event_lost_samples(&never), -EINVAL },
		{ "overflow: NULL data", perfaux_event_overflow(&sampler, &plat, NULL), -EINVAL },
		{ "overflow: NULL platform", perfaux_event_overflow(&sampler, NULL, &bad_data), -EINVAL },
		{ "overflow: reserved field", perfaux_event_overflow(&sampler, &plat, &bad_data), -EINVAL },
		{ "overflow: NULL raw with a length", perfaux_event_overflow(&sampler, &plat, &raw_null), -EINVAL },
		{ "overflow: never opened", perfaux_event_overflow(&never, &plat, &bad_data), -EINVAL },
		{ "fini: never opened", perfaux_event_fini(&never), -EINVAL },
	};
	int failed = check_table(table, sizeof(table) / sizeof(table[0]));

	/* Tear down in reverse: the sampler, then the leader (its close stops
	 * PT: a PERF_RECORD_AUX), then what they used. */
	EXPECT(perfaux_event_fini(&sampler), 0);
	EXPECT(perfaux_event_fini(&leader), 0);
	EXPECT(dels, 1); /* the group went off its PMUs */
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
	if (failed)
		return 1;
	printf("event: %u AUX samples equal to direct snapshots, %d refused and counted lost, %zu bad inputs refused\n",
	       samples, refused, sizeof(table) / sizeof(table[0]));
	return 0;
}
