// SPDX-License-Identifier: MIT OR Apache-2.0
// A benchmark for BOLT from perfaux's branch stacks (docs/cli.md: BOLT without
// LBR): a program whose hot code is spread thin, as in large programs.
// 4096 small functions (512 with -DSMALL, quick to build for tests) run
// once a round from one loop, in an order that strides through the source; each has a hot path of a few instructions
// and, inline beside it, a cold path several times its size that the
// input almost never takes, and a memo check whose outcome the compiler
// guesses wrong. A profile knows which is which, and BOLT packs the hot
// paths together in call order (block reordering, function splitting,
// function ordering). `layout N` runs N rounds and prints a checksum.
// Build: cc -O2 -Wl,--emit-relocs -o layout layout.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static volatile uint64_t sink;

// A memo table that always hits once warm: the compiler guesses the
// equality false and lays the refill out as the fall-through; a profile
// knows better.
static uint32_t memo[8192];

__attribute__((noinline)) static uint64_t refill(int slot, uint32_t key, uint64_t x) {
    memo[slot] = key;
    return x ^ (x >> 17) ^ key;
}

// The cold path: a hash of real work, taken about once in 4096 calls.
#define COLD(n)                                                              \
    do {                                                                     \
        uint64_t h = x ^ (n);                                                \
        for (int i = 0; i < 4; i++) {                                        \
            h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 29;          \
            h += (uint64_t)(n) * 0x9e3779b97f4a7c15ull; h ^= h << 7;         \
            h *= 0xc4ceb9fe1a85ec53ull; h ^= h >> 31; h += x >> (i + 1);     \
            if (h & 1) sink += h; else sink ^= h;                            \
        }                                                                    \
        x = h;                                                               \
    } while (0)

#define FN(n)                                                                \
    __attribute__((noinline)) static uint64_t f##n(uint64_t x) {             \
        if ((x & 0xfff) == (n))                                              \
            COLD(n);                                                         \
        if (memo[(n) & 8191] == (uint32_t)(n))                                \
            x += (n) * 2654435761u;                                          \
        else                                                                 \
            x = refill((n) & 8191, (uint32_t)(n), x);                         \
        return x * 6364136223846793005ull + 1442695040888963407ull;          \
    }

#define FN8(n) FN(n##0) FN(n##1) FN(n##2) FN(n##3) FN(n##4) FN(n##5) FN(n##6) FN(n##7)
#define FN64(n) FN8(n##0) FN8(n##1) FN8(n##2) FN8(n##3) FN8(n##4) FN8(n##5) FN8(n##6) FN8(n##7)
#define FN512(n) FN64(n##0) FN64(n##1) FN64(n##2) FN64(n##3) FN64(n##4) FN64(n##5) FN64(n##6) FN64(n##7)
#ifdef SMALL
FN512(1)
#else
FN512(1) FN512(2) FN512(3) FN512(4) FN512(5) FN512(6) FN512(7) FN512(10)
#endif

// Every function once a round, by direct calls (predicted perfectly), in
// an order that strides through the source: each call lands about 2 KiB
// from the one before, so the hot paths touch 4096 cache lines scattered
// over 800 KiB of code until a profile packs them in call order.
#define C(p, a, b) x = f##p##a##b(x); sum += x >> 60;
#define CT(p, b) C(p, 0, b) C(p, 1, b) C(p, 2, b) C(p, 3, b) C(p, 4, b) C(p, 5, b) C(p, 6, b) C(p, 7, b)
#define CALLS(p) CT(p, 0) CT(p, 1) CT(p, 2) CT(p, 3) CT(p, 4) CT(p, 5) CT(p, 6) CT(p, 7)
#define CALLS8(p) CALLS(p##0) CALLS(p##1) CALLS(p##2) CALLS(p##3) CALLS(p##4) CALLS(p##5) CALLS(p##6) CALLS(p##7)

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 2000;
    uint64_t x = 0x2545f4914f6cdd1dull, sum = 0;
    for (long r = 0; r < rounds; r++) {
#ifdef SMALL
        CALLS8(1)
#else
        CALLS8(10) CALLS8(7) CALLS8(3) CALLS8(5) CALLS8(1) CALLS8(6) CALLS8(2) CALLS8(4)
#endif
    }
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
