// SPDX-License-Identifier: GPL-2.0
/*
 * The traced program of kmod/test's perf phase: perf records it through the
 * module's single-step tracer (intel_pt//u) and decodes it with its own
 * Intel PT decoder. Freestanding (no libc: every instruction it runs is in
 * this file, so the decoded flow is small and exact); built with
 *   gcc -O1 -static -nostdlib -fno-pie -no-pie -fno-stack-protector
 * One argument picks the workload:
 *   loop    loops, direct and indirect calls, returns, system calls, REP
 *           string instructions (one instruction each, however many
 *           iterations), and a move to the other CPU (of two) every 500
 *           iterations, so that the trace is split between the CPUs'
 *           buffers
 *   short   a short loop (for a program another traced one executes)
 *   delay   says "spinning 1", spins until a file named "go" appears in
 *           its directory (perf-check makes it once the module has
 *           stepped enough of the spin: progress counted, not time, so a
 *           loaded host changes nothing; a failsafe ends the spin after
 *           2^38 TSC cycles, about two minutes), then a short loop:
 *           perf record -D, or its --control once the line is out,
 *           enables the event while it spins, in user code
 *   thread  the loop in a second thread (clone(CLONE_THREAD)) and in the
 *           first, which waits for it (the tid the kernel sets and clears,
 *           and a futex)
 *   fork    the loop in a forked child and in the parent, which waits
 *           for it and prints its wait status (0: it exited normally;
 *           5, SIGTRAP, if it had inherited a TF nobody handles)
 *   signal  the loop with signal handlers run from a system call's return
 *           (kill), from an interrupt (an interval timer, at any
 *           instruction), from a sleep the timer cuts short (EINTR) and
 *           from a wait for a sleeping child, which the kernel restarts
 *           after the handler (SA_RESTART); it prints how many times its
 *           handler ran
 */

#define SYS_write 1
#define SYS_access 21
#define SYS_nanosleep 35
#define SYS_getpid 39
#define SYS_fork 57
#define SYS_exit 60
#define SYS_wait4 61
#define SYS_kill 62
#define SYS_rt_sigaction 13
#define SYS_setitimer 38
#define SYS_clone 56
#define SYS_futex 202
#define SYS_sched_setaffinity 203

/* VM FS FILES SIGHAND THREAD SYSVSEM PARENT_SETTID CHILD_CLEARTID */
#define CLONE_THREAD_FLAGS 0x00350f00UL
#define FUTEX_WAIT 0

#define SIGUSR1 10
#define SIGALRM 14
#define SA_RESTART 0x10000000UL
#define SA_RESTORER 0x04000000UL

static long sys4(long n, long a, long b, long c, long d)
{
	long r;
	register long r10 __asm__("r10") = d;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
}

__attribute__((noinline)) static int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int twice(int x) { return leaf(x) + leaf(x + 1); }
static int (*volatile fp)(int) = twice;
static volatile int handled;

static char from[64], to[64];

/* n bytes by REP MOVSB, then 8 by REP STOSQ. */
static void copy(long n)
{
	void *d = to, *s = from;
	long qwords = 1;

	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	d = to;
	__asm__ volatile("rep stosq" : "+D"(d), "+c"(qwords) : "a"(0L) : "memory");
}

static void work(int n, int migrate)
{
	volatile int acc = 0;

	for (int i = 0; i < n; i++) {
		if (i & 1)
			acc += fp(i);
		else
			acc -= leaf(i);
		if (i % 500 == 0)
			sys4(SYS_getpid, 0, 0, 0, 0);
		if (i % 100 == 0)
			copy(i % 64 + 1);
		if (migrate && i % 500 == 250) {
			unsigned long cpu = 1UL << (i / 500 % 2);

			sys4(SYS_sched_setaffinity, 0, sizeof(cpu), (long)&cpu, 0);
		}
	}
}

static unsigned long rdtsc(void)
{
	unsigned int lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (unsigned long)hi << 32 | lo;
}

static void on_signal(int sig)
{
	handled++;
	leaf(sig);
}

/* "name n\n" on standard output: what the guest test checks the decode against. */
static void report(const char *name, unsigned long n)
{
	char buf[64], *p = buf + sizeof(buf);
	int len = 0;

	*--p = '\n';
	do
		*--p = '0' + n % 10;
	while (n /= 10);
	*--p = ' ';
	while (name[len])
		len++;
	p -= len;
	for (int i = 0; i < len; i++)
		p[i] = name[i];
	sys4(SYS_write, 1, (long)p, buf + sizeof(buf) - p, 0);
}

/* The sigreturn trampoline the kernel's signal frame returns to. */
void restore_rt(void);
__asm__(".text\n.globl restore_rt\nrestore_rt:\n\tmov $15, %eax\n\tsyscall\n\thlt\n");

struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

struct timeval { long sec, usec; };
struct itimerval { struct timeval interval, value; };
struct timespec { long sec, nsec; };

static void signals(void)
{
	/*
	 * Every signal blocked while the handler runs: a SIGALRM inside the
	 * SIGUSR1 handler's handled++ would otherwise lose a count (seen: the
	 * program said 769, the decode showed the 771 handler runs there were).
	 */
	struct kernel_sigaction sa = { on_signal, SA_RESTORER | SA_RESTART, restore_rt, ~0UL };
	struct itimerval every = { { 0, 2000 }, { 0, 2000 } }, off = { { 0, 0 }, { 0, 0 } };
	struct timespec nap = { 0, 5000000 };
	long pid = sys4(SYS_getpid, 0, 0, 0, 0);

	sys4(SYS_rt_sigaction, SIGUSR1, (long)&sa, 0, 8);
	sys4(SYS_rt_sigaction, SIGALRM, (long)&sa, 0, 8);
	sys4(SYS_setitimer, 0, (long)&every, 0, 0);
	for (int round = 0; round < 4; round++) {
		work(400, 0);
		sys4(SYS_kill, pid, SIGUSR1, 0, 0);
		sys4(SYS_nanosleep, (long)&nap, 0, 0, 0);
	}
	long child = sys4(SYS_fork, 0, 0, 0, 0);
	if (child == 0) {
		sys4(SYS_nanosleep, (long)&nap, 0, 0, 0);
		sys4(SYS_exit, 0, 0, 0, 0);
	}
	sys4(SYS_wait4, child, 0, 0, 0);
	sys4(SYS_setitimer, 0, (long)&off, 0, 0);
	report("handled", handled);
}

static char thread_stack[16384] __attribute__((aligned(16)));
static volatile int thread_tid;

static void thread_main(void)
{
	work(600, 0);
}

/*
 * A thread running fn on thread_stack, then exiting; returns its tid. The
 * new thread starts after the system call with the caller's registers but
 * its own stack, so it may use nothing of the caller's frame: it calls fn
 * through a register and exits in the same asm block.
 */
static long spawn(void (*fn)(void))
{
	register long r10 __asm__("r10") = (long)&thread_tid;
	register long r8 __asm__("r8") = 0;
	long r;

	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "call *%%rbx\n\t"
			 "mov $60, %%eax\n\t"
			 "xor %%edi, %%edi\n\t"
			 "syscall\n\t"
			 "hlt\n"
			 "1:"
			 : "=a"(r)
			 : "a"(SYS_clone), "D"(CLONE_THREAD_FLAGS), "S"(thread_stack + sizeof(thread_stack)),
			   "d"(&thread_tid), "r"(r10), "r"(r8), "b"(fn)
			 : "rcx", "r11", "memory");
	return r;
}

__attribute__((used)) static void start_c(long *sp)
{
	const char *mode = sp[0] > 1 ? (const char *)sp[2] : "loop";

	if (mode[0] == 'd') {
		unsigned long end;

		/* This process runs the program now (perf's child has exec'd). */
		report("spinning", 1);
		end = rdtsc() + (1UL << 38);

		while (sys4(SYS_access, (long)"go", 0, 0, 0) != 0 && rdtsc() < end)
			for (volatile int i = 0; i < 256; i++)
				;
		work(300, 0);
	} else if (mode[0] == 't') {
		long tid = spawn(thread_main);
		int now;

		work(900, 0);
		/*
		 * The kernel set thread_tid before the thread ran, and clears it
		 * and wakes us when the thread exits.
		 */
		while ((now = thread_tid) != 0)
			sys4(SYS_futex, (long)&thread_tid, FUTEX_WAIT, now, 0);
		report("thread joined", tid > 0);
	} else if (mode[0] == 'f') {
		long child = sys4(SYS_fork, 0, 0, 0, 0);

		int status = -1;

		work(child == 0 ? 600 : 900, 0);
		if (child > 0) {
			sys4(SYS_wait4, child, (long)&status, 0, 0);
			report("child status", status);
		}
	} else if (mode[0] == 's' && mode[1] == 'h') {
		work(200, 0);
	} else if (mode[0] == 's') {
		signals();
	} else {
		work(2000, 1);
	}
	sys4(SYS_exit, 0, 0, 0, 0);
}

/* The entry: the stack holds argc, then argv. */
__asm__(".text\n.globl _start\n_start:\n\tmov %rsp, %rdi\n\tand $-16, %rsp\n\tcall start_c\n\thlt\n");
