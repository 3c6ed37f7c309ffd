/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The C quick start of docs/c.md, compiled and run by the tests: a data
 * ring and a snapshot-mode AUX area over your own pages, the PT state of
 * that area's buffer and the PT driver of one CPU, a little trace, and a
 * snapshot of its newest bytes into your own sink.
 *
 * Build: cargo build --release -p perfaux-ffi
 *        cc -I include tests/c/quickstart.c target/release/libperfaux_ffi.a \
 *           -lpthread -ldl -lm -o target/quickstart
 *
 * The storage rules: every perfaux object lives in storage you declare
 * (struct perfaux_ring and friends, PERFAUX_OBJECT_ALIGN-aligned), zeroed
 * before its first init; objects refer to each other in place, so none may
 * move while initialized, and they are torn down in reverse order (a fini
 * of an object still referred to returns -EBUSY and changes nothing). Pages
 * (the user page, data chunks, AUX pages, ToPA tables) are 4 KiB aligned.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfaux.h"

#define PAGE 4096

struct copy {
	unsigned char buf[PAGE];
	size_t len;
};

/* A sink takes len bytes and returns how many it could NOT take. */
static size_t take(void *ctx, const void *bytes, size_t len)
{
	struct copy *c = ctx;
	size_t n = len < sizeof(c->buf) - c->len ? len : sizeof(c->buf) - c->len;

	memcpy(c->buf + c->len, bytes, n);
	c->len += n;
	return len - n;
}

int main(void)
{
	void *user = aligned_alloc(PAGE, PAGE), *data[4], *aux[4], *tables;
	perfaux_ring ring;
	perfaux_aux_area area;
	perfaux_pt_buffer buffer;
	perfaux_pt_cpu cpu;
	perfaux_aux_config overwrite;
	struct copy snap = { .len = 0 };
	const perfaux_sink sink = { .copy = take, .ctx = &snap };
	int failed = 0;

	for (int i = 0; i < 4; i++) {
		data[i] = aligned_alloc(PAGE, PAGE);
		aux[i] = aligned_alloc(PAGE, PAGE);
	}
	tables = aligned_alloc(PAGE, PAGE);
	memset(&ring, 0, sizeof(ring));
	memset(&area, 0, sizeof(area));
	memset(&buffer, 0, sizeof(buffer));
	memset(&cpu, 0, sizeof(cpu));
	memset(&overwrite, 0, sizeof(overwrite));
	overwrite.flags = PERFAUX_AUX_OVERWRITE; /* snapshot mode */

	/* The ring, then its AUX area, then the PT buffer over the area's
	 * pages (setup_aux), then the CPU's driver tracing into it. */
	failed |= perfaux_ring_init(&ring, user, data, 4, 0, NULL);
	failed |= perfaux_aux_area_init(&area, &ring, aux, 4, &overwrite);
	failed |= perfaux_pt_buffer_init_area(&buffer, tables, 1, &area, NULL);
	failed |= perfaux_pt_cpu_init_area(&cpu, &buffer, &area, &ring, NULL, NULL, NULL, 4096);
	/* pmu->add with PERF_EF_START: event 1, attr.config = intel_pt's tsc bit. */
	failed |= perfaux_pt_add(&cpu, PERFAUX_EF_START, 1, 1 << 10, 0);

	/* What the CPU does: tracing on at 0x400000, then branches. */
	const perfaux_trace_event on = { .kind = PERFAUX_TRACE_ENABLE, .target = 0x400000 };

	failed |= perfaux_pt_trace(&cpu, &on) < 0;
	for (int i = 0; i < 2000; i++) {
		const perfaux_trace_event b = {
			.kind = PERFAUX_TRACE_CONDITIONAL,
			.flags = i % 3 ? PERFAUX_TRACE_TAKEN : 0,
			.target = 0x400000,
		};

		failed |= perfaux_pt_trace(&cpu, &b) < 0;
	}

	/* A sample's AUX block: the newest 256 bytes of trace, from PMI context. */
	if (perfaux_pt_snapshot_aux(&cpu, &sink, 256) != 256)
		failed = 1;
	printf("quickstart: %lld trace bytes written, a %zu-byte snapshot taken\n",
	       (long long)perfaux_pt_written(&cpu), snap.len);

	/* Tear down in reverse: del (ends the transaction), then the rest. */
	failed |= perfaux_pt_del(&cpu, PERFAUX_EF_UPDATE);
	failed |= perfaux_pt_cpu_fini(&cpu);
	failed |= perfaux_pt_buffer_fini(&buffer);
	failed |= perfaux_aux_area_fini(&area);
	failed |= perfaux_ring_fini(&ring);
	for (int i = 0; i < 4; i++) {
		free(data[i]);
		free(aux[i]);
	}
	free(tables);
	free(user);
	if (failed) {
		printf("quickstart: FAILED\n");
		return 1;
	}
	return 0;
}
