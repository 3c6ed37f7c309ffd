// SPDX-License-Identifier: MIT OR Apache-2.0
// A test program for `perfaux record -- PROGRAM`: the control flow a
// tracer must get right, in one deterministic program. Threads, a forked
// child, recursion, calls through a table of function pointers, a switch
// compiled to a jump table, a signal handler (entered and left through the
// kernel), and `rep movsb`.
//
//   workload [ITERATIONS]   run everything; exit 0
//   workload crash          run a little, then dereference a null pointer
//   workload timer          spin in a loop of conditional branches while an
//                           interval timer's signal interrupts it between
//                           any two blocks (at least 300 signals and
//                           250,000 rounds)
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t fib(int n) {
    return n < 2 ? (uint64_t)n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) static uint64_t op_add(uint64_t a) { return a + 3; }
__attribute__((noinline)) static uint64_t op_mul(uint64_t a) { return a * 7; }
__attribute__((noinline)) static uint64_t op_xor(uint64_t a) { return a ^ 0x5555; }
__attribute__((noinline)) static uint64_t op_shift(uint64_t a) { return (a << 3) | (a >> 61); }

static uint64_t (*const table[])(uint64_t) = {op_add, op_mul, op_xor, op_shift};

// Dense cases: the compiler makes a jump table (an indirect jmp).
__attribute__((noinline)) static uint64_t dispatch(unsigned k, uint64_t v) {
    switch (k % 8) {
    case 0: return v + 1;
    case 1: return v * 3;
    case 2: return v - 7;
    case 3: return v ^ 0xff;
    case 4: return v << 1;
    case 5: return v >> 1;
    case 6: return ~v;
    default: return v + k;
    }
}

__attribute__((noinline)) static void copy(char *dst, const char *src, size_t n) {
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static volatile sig_atomic_t signals;

static void on_signal(int sig) {
    signals += sig;
}

static uint64_t work(unsigned iterations, unsigned seed) {
    static char a[4096], b[4096];
    uint64_t v = seed;
    for (unsigned i = 0; i < iterations; i++) {
        v = table[(v + i) % 4](v);
        v = dispatch(i + seed, v);
        if (i % 64 == 0) {
            v += fib(12);
            copy(a, b, 1000 + i % 1000);
        }
    }
    return v;
}

static void *thread_main(void *arg) {
    pthread_setname_np(pthread_self(), "worker");
    sink += work(3000, (unsigned)(uintptr_t)arg);
    return NULL;
}

static volatile int alarms;

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

// A loop of unpredictable conditional branches, interrupted by SIGALRM
// every 200 us until 300 have come, and at least 250,000 rounds long
// (about 6 M instructions): the alarms count wall-clock time, so on a slow
// or loaded host they alone would leave the tests fewer samples to check.
__attribute__((noinline)) static uint64_t spin(void) {
    volatile uint64_t acc = 0, x = 12345;
    for (uint64_t i = 0; alarms < 300 || i < 250000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (x & 1)
            acc += i;
        else
            acc ^= i;
    }
    return acc;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "timer") == 0) {
        signal(SIGALRM, on_alarm);
        struct itimerval it = {{0, 200}, {0, 200}};
        setitimer(ITIMER_REAL, &it, NULL);
        sink = spin();
        printf("workload: %d alarms\n", (int)alarms);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "crash") == 0) {
        sink = work(200, 1);
        volatile int *p = NULL;
        return *p;
    }
    unsigned iterations = argc > 1 ? (unsigned)atoi(argv[1]) : 5000;
    signal(SIGUSR1, on_signal);
    sink = work(iterations, 1);
    raise(SIGUSR1);
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, thread_main, (void *)(i + 2));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pid_t child = fork();
    if (child == 0) {
        sink = work(iterations / 2, 9);
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    sink += work(100, 4);
    printf("workload: %llu signals=%d child=%d\n", (unsigned long long)(sink & 0xffff),
           (int)signals, WEXITSTATUS(status));
    return 0;
}
