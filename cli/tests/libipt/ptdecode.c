/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Intel's reference decoder as a judge of perfaux's traces: libipt's
 * instruction flow decoder (pt_insn_*) walks a raw Intel PT stream against
 * the ELF files whose code ran, and prints every control transfer it
 * recovers, one "FROM TO" line each (hex), in decode order, as perfaux's
 * ground truth lists them: a taken branch (the branch instruction's
 * address, where it went), an asynchronous exit (where the code would have
 * gone on, 0), an asynchronous branch (FUP, TIP), and a start of tracing
 * (0, where it starts). A last line "errors N" counts what libipt reported
 * (and resynchronized after); the stream's end is not one.
 *
 *   ptdecode STREAM ELF...
 *
 * Built by cli/tests/libipt.rs: cc ptdecode.c -lipt.
 */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <intel-pt.h>

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "ptdecode: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	buf = malloc(n ? n : 1);
	if (!buf || fread(buf, 1, n, f) != (size_t)n) {
		fprintf(stderr, "ptdecode: %s: cannot read\n", path);
		exit(2);
	}
	fclose(f);
	*len = n;
	return buf;
}

/* Adds every PT_LOAD segment of the ELF file at `path` to `image`. */
static void add_elf(struct pt_image *image, const char *path)
{
	size_t len;
	uint8_t *bytes = slurp(path, &len);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)bytes;
	int added = 0;

	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len) {
		fprintf(stderr, "ptdecode: %s: not a 64-bit ELF file\n", path);
		exit(2);
	}
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(bytes + eh->e_phoff) + i;

		if (ph->p_type != PT_LOAD || !ph->p_filesz)
			continue;
		int r = pt_image_add_file(image, path, ph->p_offset, ph->p_filesz, NULL, ph->p_vaddr);
		if (r < 0) {
			fprintf(stderr, "ptdecode: %s: %s\n", path, pt_errstr(pt_errcode(r)));
			exit(2);
		}
		added++;
	}
	if (!added) {
		fprintf(stderr, "ptdecode: %s: no loadable segment\n", path);
		exit(2);
	}
	free(bytes);
}

/* The last instruction decoded, whose successor is not known yet. */
struct pending {
	int valid;
	struct pt_insn insn;
};

/* Whether an instruction of this class may go elsewhere than after it. */
static int transfers(enum pt_insn_class c)
{
	switch (c) {
	case ptic_call:
	case ptic_return:
	case ptic_jump:
	case ptic_cond_jump:
	case ptic_far_call:
	case ptic_far_return:
	case ptic_far_jump:
		return 1;
	default:
		return 0;
	}
}

/* The pending instruction's successor is at `next`: a branch that was
 * taken is printed (an unconditional one always is, even to the next
 * instruction: an indirect jump may go there; a conditional one when it
 * went elsewhere). */
static void resolve(struct pending *p, uint64_t next)
{
	if (p->valid && transfers(p->insn.iclass) &&
	    (p->insn.iclass != ptic_cond_jump || next != p->insn.ip + p->insn.size))
		printf("%llx %llx\n", (unsigned long long)p->insn.ip, (unsigned long long)next);
	p->valid = 0;
}

/* Handles the pending events; returns the decoder's status after them. */
static int events(struct pt_insn_decoder *d, int status, struct pending *p)
{
	while (status & pts_event_pending) {
		struct pt_event ev;

		status = pt_insn_event(d, &ev, sizeof(ev));
		if (status < 0)
			return status;
		switch (ev.type) {
		case ptev_enabled:
			p->valid = 0;
			printf("0 %llx\n", (unsigned long long)ev.variant.enabled.ip);
			break;
		case ptev_disabled:
			/* At a branch into code not traced: its target is not
			 * given; where it left is the pending branch. */
			if (p->valid)
				printf("%llx 0\n", (unsigned long long)p->insn.ip);
			p->valid = 0;
			break;
		case ptev_async_disabled:
			resolve(p, ev.variant.async_disabled.at);
			printf("%llx 0\n", (unsigned long long)ev.variant.async_disabled.at);
			break;
		case ptev_async_branch:
			resolve(p, ev.variant.async_branch.from);
			printf("%llx %llx\n", (unsigned long long)ev.variant.async_branch.from,
			       (unsigned long long)ev.variant.async_branch.to);
			break;
		case ptev_overflow:
			printf("overflow\n");
			p->valid = 0;
			break;
		default:
			break;
		}
	}
	return status;
}

int main(int argc, char **argv)
{
	struct pt_config config;
	struct pt_insn_decoder *d;
	struct pt_image *image;
	struct pending p = { 0 };
	size_t len;
	unsigned long errors = 0;
	uint8_t *trace;
	int status;

	if (argc < 3) {
		fprintf(stderr, "usage: ptdecode STREAM ELF...\n");
		return 2;
	}
	trace = slurp(argv[1], &len);
	pt_config_init(&config);
	config.begin = trace;
	config.end = trace + len;
	d = pt_insn_alloc_decoder(&config);
	if (!d) {
		fprintf(stderr, "ptdecode: cannot allocate a decoder\n");
		return 2;
	}
	image = pt_insn_get_image(d);
	for (int i = 2; i < argc; i++)
		add_elf(image, argv[i]);

	status = pt_insn_sync_forward(d);
	while (status != -pte_eos) {
		if (status < 0) {
			uint64_t at = 0;

			pt_insn_get_offset(d, &at);
			printf("error %s at %#llx\n", pt_errstr(pt_errcode(status)),
			       (unsigned long long)at);
			errors++;
			p.valid = 0;
			status = pt_insn_sync_forward(d);
			continue;
		}
		status = events(d, status, &p);
		if (status < 0)
			continue;
		if (status & pts_eos)
			break;
		struct pt_insn insn;

		status = pt_insn_next(d, &insn, sizeof(insn));
		if (status < 0)
			continue;
		resolve(&p, insn.ip);
		p.valid = 1;
		p.insn = insn;
	}
	printf("errors %lu\n", errors);
	pt_insn_free_decoder(d);
	free(trace);
	return 0;
}
