/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Assertions for the C ABI tests: each failure names the file, line and
 * expression, and exits non-zero. */
#ifndef PERFAUX_TEST_CHECK_H
#define PERFAUX_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
