// SPDX-License-Identifier: MIT OR Apache-2.0
// A compute benchmark for `perfaux record -- PROGRAM` (BENCHMARKS.md): a
// deterministic, single-threaded mix of what CPU-bound code does:
// sorting through a comparison function, a prime sieve, hashing strings
// into a table, and recursion.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static int compare(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static uint64_t sieve(unsigned n) {
    char *composite = calloc(n + 1, 1);
    uint64_t sum = 0;
    for (unsigned i = 2; i <= n; i++) {
        if (composite[i])
            continue;
        sum += i;
        for (unsigned j = 2 * i; j <= n; j += i)
            composite[j] = 1;
    }
    free(composite);
    return sum;
}

static uint64_t hash_words(unsigned words) {
    enum { BUCKETS = 4096 };
    static uint32_t counts[BUCKETS];
    char word[16];
    uint64_t total = 0;
    for (unsigned w = 0; w < words; w++) {
        unsigned len = 3 + next() % 10;
        for (unsigned i = 0; i < len; i++)
            word[i] = 'a' + next() % 26;
        word[len] = 0;
        uint32_t h = 2166136261u;
        for (const char *p = word; *p; p++)
            h = (h ^ (uint8_t)*p) * 16777619u;
        total += ++counts[h % BUCKETS];
    }
    return total;
}

static uint64_t ackermann_like(unsigned depth, unsigned width) {
    if (depth == 0)
        return width;
    uint64_t s = 0;
    for (unsigned i = 0; i < width; i++)
        s += ackermann_like(depth - 1, (width + i) % 5 + 1);
    return s;
}

int main(int argc, char **argv) {
    unsigned scale = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    uint64_t result = 0;
    for (unsigned round = 0; round < scale; round++) {
        unsigned n = 200000;
        uint32_t *v = malloc(n * sizeof *v);
        for (unsigned i = 0; i < n; i++)
            v[i] = (uint32_t)next();
        qsort(v, n, sizeof *v, compare);
        result += v[n / 2];
        free(v);
        result += sieve(2000000);
        result += hash_words(200000);
        result += ackermann_like(7, 4);
    }
    printf("compute: %llu\n", (unsigned long long)result);
    return 0;
}
