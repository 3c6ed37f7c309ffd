/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* What the C ABI tests share: assertions that name the file, line and
 * expression and exit non-zero; bad-input tables; a collecting sink. */
#ifndef PERFAUX_TEST_CHECK_H
#define PERFAUX_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: failed: %s\n", __FILE__,     \
				__LINE__, #cond);                            \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define EXPECT(expr, want)                                                   \
	do {                                                                 \
		long long got_ = (long long)(expr);                          \
		long long want_ = (long long)(want);                         \
		if (got_ != want_) {                                         \
			fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", \
				__FILE__, __LINE__, #expr, got_, want_);     \
			exit(1);                                             \
		}                                                            \
	} while (0)

/* One row of a bad-input table: what was called, what it returned, and
 * the errno it must return. */
struct bad_input {
	const char *what;
	long long got, want;
};

/* Reports every row that did not get its errno; returns how many. */
static inline int check_table(const struct bad_input *rows, size_t n)
{
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		if (rows[i].got != rows[i].want) {
			fprintf(stderr, "bad input \"%s\": %lld, expected %lld\n", rows[i].what,
				rows[i].got, rows[i].want);
			failed++;
		}
	}
	return failed;
}

/* A perfaux_sink target: bytes collected into a fixed buffer. */
struct collect {
	unsigned char *buf;
	size_t len, cap;
};

/* The sink's copy: takes what fits, returns what did not. */
static inline size_t sink_copy(void *ctx, const void *bytes, size_t len)
{
	struct collect *c = ctx;
	size_t n = len <= c->cap - c->len ? len : c->cap - c->len;
	memcpy(c->buf + c->len, bytes, n);
	c->len += n;
	return len - n;
}

#endif
