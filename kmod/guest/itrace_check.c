// SPDX-License-Identifier: GPL-2.0
/*
 * kmod/test's per-sample verdict on what perf's Intel PT decoder made of
 * perfaux_pt's single-step trace (run in the guest, static, no perf code):
 *
 *   itrace_check BRANCHES HISTORIES
 *
 * BRANCHES is `perf script --itrace=b -F ip,addr` (other fields may lead) of a whole trace of a
 * deterministic program: its real branch sequence (the whole decode's
 * instruction count equals the steps the module took, and it has no
 * errors: kmod/guest/perf-check checks both). HISTORIES is
 * `perf script --itrace=L16 -F ip,brstack` of `perf record --aux-sample`
 * runs of the same program: each sample's IP and the branches perf
 * decoded from the AUX snapshot in the sample, newest first.
 *
 * A sample passes when its history is a run of consecutive branches of the
 * real sequence, and its IP lies on the straight line of code between the
 * newest of them and the next branch the program took: the history is the
 * program's own and ends where the sample was taken. An empty history
 * passes only at the program's start, before its first branch.
 *
 * Interrupts of a user-only trace show as an asynchronous exit and re-entry
 * at the same address (X => 0, then 0 => X): they depend on when timers
 * fired, so both sequences are compared without them; a history's oldest
 * entries when they are a re-entry (0 => X, its exit cut off by the ring's
 * size) are left out too.
 *
 * Prints one verdict line per failing sample (the first few) and a summary
 * ("history: N samples, N end at their IP"); exits 0 when every sample
 * passes and there is at least one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct branch {
	unsigned long from, to;
};

struct seq {
	struct branch *b;
	size_t len, cap;
};

static void push(struct seq *s, unsigned long from, unsigned long to)
{
	if (s->len == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->b = realloc(s->b, s->cap * sizeof(*s->b));
		if (!s->b) {
			perror("itrace_check");
			exit(2);
		}
	}
	s->b[s->len++] = (struct branch){ from, to };
}

/* Removes every asynchronous exit + re-entry pair (X => 0, 0 => X). */
static void drop_interrupts(struct seq *s)
{
	size_t out = 0;

	for (size_t i = 0; i < s->len; i++) {
		if (i + 1 < s->len && s->b[i].from && !s->b[i].to && !s->b[i + 1].from &&
		    s->b[i + 1].to == s->b[i].from) {
			i++;
			continue;
		}
		s->b[out++] = s->b[i];
	}
	s->len = out;
}

static FILE *open_or_die(const char *path)
{
	FILE *f = fopen(path, "r");

	if (!f) {
		perror(path);
		exit(2);
	}
	return f;
}

/*
 * `perf script --itrace=b -F ...,ip,addr`: "... <from> => <to>" per line
 * (the fields before the addresses, such as pid or flags, are skipped).
 */
static void read_branches(const char *path, struct seq *s)
{
	FILE *f = open_or_die(path);
	char line[512];

	while (fgets(line, sizeof(line), f)) {
		char *arrow = strstr(line, "=>"), *from = arrow;

		if (!arrow)
			continue;
		while (from > line && from[-1] == ' ')
			from--;
		while (from > line && strchr("0123456789abcdef", from[-1]))
			from--;
		push(s, strtoul(from, NULL, 16), strtoul(arrow + 2, NULL, 16));
	}
	fclose(f);
	drop_interrupts(s);
}

/*
 * Whether history h (oldest first) ends at whole[k] and matches the
 * branches before it, with ip between whole[k].to and the next branch.
 */
static int ends_at(const struct seq *whole, size_t k, const struct seq *h, unsigned long ip)
{
	if (k + 1 < h->len)
		return 0;
	for (size_t i = 0; i < h->len; i++) {
		const struct branch *want = &h->b[h->len - 1 - i], *got = &whole->b[k - i];

		if (want->from != got->from || want->to != got->to)
			return 0;
	}
	if (ip < whole->b[k].to)
		return 0;
	return k + 1 == whole->len || ip <= whole->b[k + 1].from;
}

int main(int argc, char **argv)
{
	struct seq whole = { 0 }, h = { 0 };
	size_t samples = 0, passed = 0, shown = 0;
	char line[16384];
	FILE *f;

	if (argc != 3) {
		fprintf(stderr, "usage: itrace_check BRANCHES HISTORIES\n");
		return 2;
	}
	read_branches(argv[1], &whole);
	if (!whole.len) {
		printf("FAIL history: no branches in %s\n", argv[1]);
		return 1;
	}
	f = open_or_die(argv[2]);
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;
		unsigned long ip = strtoul(p, &end, 16);
		size_t first = 0;
		int ok = 0;

		if (end == p)
			continue;
		samples++;
		/* "0xFROM/0xTO/..." entries, newest first: read, then reverse. */
		h.len = 0;
		for (p = end; (p = strstr(p, "0x")); ) {
			unsigned long from = strtoul(p, &end, 16), to;

			if (*end != '/')
				break;
			to = strtoul(end + 1, &end, 16);
			push(&h, from, to);
			p = end;
		}
		for (size_t i = 0; i < h.len / 2; i++) {
			struct branch t = h.b[i];

			h.b[i] = h.b[h.len - 1 - i];
			h.b[h.len - 1 - i] = t;
		}
		drop_interrupts(&h);
		while (first < h.len && !h.b[first].from)
			first++;
		memmove(h.b, h.b + first, (h.len - first) * sizeof(*h.b));
		h.len -= first;
		/*
		 * No branch before the sample: it was taken on the straight line
		 * from where the trace starts (0 => entry) to the first branch
		 * (a loaded host's first timer tick can come that early).
		 */
		if (!h.len)
			ok = !whole.b[0].from && ends_at(&whole, 0, &h, ip);
		for (size_t k = 0; h.len && !ok && k < whole.len; k++)
			ok = ends_at(&whole, k, &h, ip);
		if (ok) {
			passed++;
		} else if (shown++ < 5) {
			printf("FAIL history: sample at %#lx: %zu branches, not a run of the program's ending there:",
			       ip, h.len);
			for (size_t i = 0; i < h.len; i++)
				printf(" %#lx>%#lx", h.b[i].from, h.b[i].to);
			printf("\n");
		}
	}
	fclose(f);
	printf("history: %zu samples, %zu end at their IP\n", samples, passed);
	return samples && passed == samples ? 0 : 1;
}
