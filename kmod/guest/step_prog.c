// SPDX-License-Identifier: GPL-2.0
// The traced program of the single-step tracer's guest test (work in progress, not yet run by kmod/test):
// built with gcc -O1 -static -nostdlib -fno-pie -no-pie -fno-stack-protector.
/* A tiny freestanding program: loops, calls, indirect calls, returns, syscalls. */
static long sys3(long n, long a, long b, long c) {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
__attribute__((noinline)) static int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int twice(int x) { return leaf(x) + leaf(x + 1); }
static int (*volatile fp)(int) = twice;
void _start(void) {
	volatile int acc = 0;
	for (int i = 0; i < 2000; i++) {
		if (i & 1) acc += fp(i); else acc -= leaf(i);
		if (i % 500 == 0) sys3(39, 0, 0, 0); /* getpid */
	}
	sys3(60, acc & 0, 0, 0);
}
