// SPDX-License-Identifier: GPL-2.0
/* The power-cut programs' log, host lines, random numbers; see powercut.h. */
#include "powercut.h"
#include "crc32c.h"
#include "fscrypt_fs.h"
#include "lab.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/fs.h>

#define PCUT_CHUNK_SLOTS	2048u		/* 1 MiB reads of the log */

_Static_assert(sizeof(struct pcut_rec) <= PCUT_SECTOR, "a record head must fit a sector");
_Static_assert(sizeof(struct pcut_hdr) <= PCUT_SECTOR, "a header head must fit a sector");

/* ---- the log ------------------------------------------------------------------- */

static void pcut_seal(unsigned char *sector)
{
	uint32_t crc = lab_crc32c(sector + 8, PCUT_SECTOR - 8);

	memcpy(sector + 4, &crc, 4);
}

static int pcut_sealed(const unsigned char *sector)
{
	uint32_t crc;

	memcpy(&crc, sector + 4, 4);
	return crc == lab_crc32c(sector + 8, PCUT_SECTOR - 8);
}

void pcut_log_open(struct pcut_log *lg, const char *dev)
{
	uint64_t bytes;
	int ssz;

	lg->dev = dev;
	lg->fd = open(dev, O_RDWR | O_DIRECT | O_DSYNC | O_CLOEXEC);
	if (lg->fd < 0)
		lab_die("open the log device %s: " LAB_ERR_FMT, dev, LAB_ERR_ARGS(errno));
	if (ioctl(lg->fd, BLKSSZGET, &ssz) || ioctl(lg->fd, BLKGETSIZE64, &bytes))
		lab_die("%s is not a block device: " LAB_ERR_FMT, dev, LAB_ERR_ARGS(errno));
	if (ssz > (int)PCUT_SECTOR)
		lab_die("%s has %d-byte logical blocks; the log's records are %u bytes",
			dev, ssz, PCUT_SECTOR);
	lg->slots = bytes / PCUT_SECTOR;
}

void pcut_log_hdr_init(const struct pcut_log *lg, void *hdr, uint32_t seed)
{
	struct pcut_hdr h;

	memset(&h, 0, sizeof(h));
	h.magic = lg->hdr_magic;
	h.version = lg->hdr_version;
	h.seed = seed;
	lab_random(&h.run_id, sizeof(h.run_id));
	memset(hdr, 0, lg->hdr_size);
	memcpy(hdr, &h, sizeof(h));
}

int pcut_log_put(const struct pcut_log *lg, uint64_t slot, const void *data,
		 size_t size)
{
	static unsigned char sec[PCUT_SECTOR] __attribute__((aligned(4096)));
	ssize_t n;

	memset(sec, 0, sizeof(sec));
	memcpy(sec, data, size);
	pcut_seal(sec);
	do
		n = pwrite(lg->fd, sec, PCUT_SECTOR, (off_t)(slot * PCUT_SECTOR));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)PCUT_SECTOR)
		return 0;
	if (n >= 0)
		errno = EIO;
	return -1;
}

int pcut_log_emit(const struct pcut_log *lg, uint64_t slot, uint64_t run_id,
		  uint32_t epoch, void *rec)
{
	struct pcut_rec h;

	memcpy(&h, rec, sizeof(h));
	h.magic = lg->rec_magic;
	h.run_id = run_id;
	h.seq = slot;
	h.epoch = epoch;
	memcpy(rec, &h, sizeof(h));
	return pcut_log_put(lg, slot, rec, lg->rec_size);
}

void *pcut_log_read(const struct pcut_log *lg, void *hdr, struct pcut_log_scan *scan)
{
	unsigned char *buf, *recs = NULL;
	struct pcut_hdr h;
	struct pcut_rec r;
	uint64_t base, slot, last = 0;
	size_t i, cnt, cap = 0;
	ssize_t got;

	memset(scan, 0, sizeof(*scan));
	memset(hdr, 0, lg->hdr_size);
	memset(&h, 0, sizeof(h));
	if (posix_memalign((void **)&buf, 4096, PCUT_CHUNK_SLOTS * PCUT_SECTOR))
		lab_die("out of memory for the log buffer");
	for (base = 0; base < lg->slots; base += PCUT_CHUNK_SLOTS) {
		cnt = lg->slots - base < PCUT_CHUNK_SLOTS ? lg->slots - base : PCUT_CHUNK_SLOTS;
		got = lab_pread_full(lg->fd, buf, cnt * PCUT_SECTOR, (off_t)(base * PCUT_SECTOR));
		if (got != (ssize_t)(cnt * PCUT_SECTOR))
			lab_die("reading the log on %s at sector %llu: " LAB_ERR_FMT, lg->dev,
				(unsigned long long)base, LAB_ERR_ARGS(got < 0 ? errno : EIO));
		for (i = 0; i < cnt; i++) {
			const unsigned char *sec = buf + i * PCUT_SECTOR;

			slot = base + i;
			if (slot == 0) {
				memcpy(hdr, sec, lg->hdr_size);
				memcpy(&h, sec, sizeof(h));
				scan->have_hdr = h.magic == lg->hdr_magic &&
						 h.version == lg->hdr_version && pcut_sealed(sec);
				if (!scan->have_hdr)
					goto out;
				continue;
			}
			memcpy(&r, sec, sizeof(r));
			if (r.magic != lg->rec_magic || !pcut_sealed(sec))
				continue;
			if (r.run_id != h.run_id || r.seq != slot) {
				scan->foreign++;
				continue;
			}
			if (scan->n == cap) {
				cap = cap ? 2 * cap : 4096;
				recs = realloc(recs, cap * lg->rec_size);
				if (!recs)
					lab_die("out of memory for %zu log records", cap);
			}
			memcpy(recs + scan->n++ * lg->rec_size, sec, lg->rec_size);
			last = slot;
		}
		if (base + cnt > last + PCUT_LOG_GAP)
			break;
	}
out:
	free(buf);
	scan->end = last + 1;
	scan->holes = last - scan->n;
	return recs;
}

void *pcut_log_verify_open(struct pcut_log *lg, const char *dev, void *hdr,
			   struct pcut_log_scan *scan)
{
	void *recs;

	pcut_log_open(lg, dev);
	recs = pcut_log_read(lg, hdr, scan);
	if (!scan->have_hdr)
		pcut_host_line("powercut-verify: result=FAIL reason=no-log-header (no valid header in sector 0 of %s: the first boot's work did not get as far as its setup)",
			       dev);
	return recs;
}

void pcut_log_error(uint64_t *count, const void *rec, uint32_t op, uint32_t file,
		    const char *why)
{
	struct pcut_rec h;

	memcpy(&h, rec, sizeof(h));
	++*count;
	if (*count <= 10)
		printf("powercut: LOG ERROR: record %llu (type %u, op %u, file %u): %s\n",
		       (unsigned long long)h.seq, h.type, op, file, why);
}

/* ---- the replay ---------------------------------------------------------------- */

void pcut_replay(const struct pcut_log *lg, const void *recs, size_t n,
		 uint64_t end, struct pcut_replay *rp,
		 const struct pcut_replay_ops *ops, void *ctx)
{
	const unsigned char *r;
	struct pcut_rec h;
	uint64_t seq;
	size_t k;

	memset(rp, 0, sizeof(*rp));
	rp->nslots = end;
	rp->intent = calloc(rp->nslots, sizeof(*rp->intent));
	rp->done = calloc(rp->nslots, 1);
	if (!rp->intent || !rp->done)
		lab_die("out of memory for %llu log slots", (unsigned long long)rp->nslots);
	for (k = 0; k < n; k++) {
		r = (const unsigned char *)recs + k * lg->rec_size;
		memcpy(&h, r, sizeof(h));
		switch (h.type) {
		case PCUT_T_EPOCH:
			rp->epochs++;
			if (h.epoch > rp->last_epoch)
				rp->last_epoch = h.epoch;
			break;
		case PCUT_T_INTENT:
			if (!ops->intent(ctx, r)) {
				ops->bad(ctx, r, "malformed intent");
				break;
			}
			rp->intent[h.seq] = r;
			break;
		case PCUT_T_COMMIT:
			if (h.ref >= rp->nslots || !rp->intent[h.ref]) {
				ops->bad(ctx, r, "commit without its intent");
				break;
			}
			if (rp->done[h.ref]) {
				ops->bad(ctx, r, "second commit of an intent");
				break;
			}
			rp->done[h.ref] = 1;
			if (ops->commit(ctx, rp->intent[h.ref], r))
				rp->committed++;
			else
				rp->aborted++;
			break;
		default:
			ops->bad(ctx, r, "unknown record type");
		}
	}
	for (seq = 0; seq < rp->nslots; seq++) {
		if (!rp->intent[seq] || rp->done[seq])
			continue;
		rp->pending++;
		ops->inflight(ctx, rp->intent[seq]);
	}
}

void pcut_replay_free(struct pcut_replay *rp)
{
	free(rp->intent);
	free(rp->done);
	memset(rp, 0, sizeof(*rp));
}

/* ---- the host's lines, the workload's random numbers ------------------------------ */

void pcut_host_line(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int fd, n, ok = 0;

	n = snprintf(line, sizeof(line), "<5>");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fflush(stdout);
	fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ok = write(fd, line, strlen(line)) == (ssize_t)strlen(line);
		close(fd);
	}
	/* also on stdout: the console may lose a late printk at the reboot */
	printf("%s%s\n", line + n, ok ? "" : " (not in the kernel log)");
}

static uint64_t pcut_rng_state;

void pcut_rng_init(uint32_t seed, uint32_t epoch, uint32_t stream)
{
	uint64_t s = (uint64_t)seed << 32 ^ (uint64_t)epoch << 8 ^ (uint64_t)stream;

	pcut_rng_state = lab_splitmix64(&s) | 1;
}

uint32_t pcut_rnd32(void)
{
	pcut_rng_state ^= pcut_rng_state >> 12;
	pcut_rng_state ^= pcut_rng_state << 25;
	pcut_rng_state ^= pcut_rng_state >> 27;
	return (uint32_t)((pcut_rng_state * 0x2545f4914f6cdd1dULL) >> 32);
}

uint32_t pcut_rnd(uint32_t n)
{
	return (uint32_t)(((uint64_t)pcut_rnd32() * n) >> 32);
}

/* ---- a file against its model -------------------------------------------------- */

uint64_t pcut_count_lost(const unsigned char *m, uint32_t size,
			 const unsigned char *got, size_t got_len,
			 const struct pcut_cand *c, int nc, uint64_t *wrong,
			 uint64_t *first)
{
	uint64_t lost = 0, b, end = got_len > size ? got_len : size;
	int i, ok;

	*wrong = 0;
	*first = end;
	for (b = 0; b < end; b++) {
		if (b >= got_len) {
			lost++;		/* b < size: the file is short */
			if (*first == end)
				*first = b;
			continue;
		}
		ok = got[b] == (b < size ? m[b] : 0);
		for (i = 0; !ok && i < nc; i++)
			ok = b >= c[i].off && b < (uint64_t)c[i].off + c[i].len &&
			     got[b] == c[i].data[b - c[i].off];
		if (ok)
			continue;
		if (b < size) {
			lost++;
			if (*first == end)
				*first = b;
		} else {
			(*wrong)++;
		}
	}
	return lost;
}

int pcut_control(const char *what, const unsigned char *m, uint32_t size,
		 const unsigned char *got, size_t got_len,
		 const struct pcut_cand *c, int nc, uint64_t lost, int *done,
		 uint64_t *at, uint64_t *lost2)
{
	uint64_t b, wrong, first, lim = got_len < size ? got_len : size;
	unsigned char *copy;
	int i, covered;

	if (*done)
		return 0;
	for (b = 0; b < lim; b++) {
		if (got[b] != m[b])
			continue;
		for (covered = 0, i = 0; i < nc; i++)
			covered |= b >= c[i].off && b < (uint64_t)c[i].off + c[i].len;
		if (!covered)
			break;
	}
	if (b == lim)
		return 0;
	copy = lab_xmalloc(size);
	memcpy(copy, m, size);
	copy[b] ^= 0x5a;
	*lost2 = pcut_count_lost(copy, size, got, got_len, c, nc, &wrong, &first);
	free(copy);
	*at = b;
	*done = 1;
	if (*lost2 != lost + 1)
		return -1;
	printf("powercut: control: one byte flipped in the model of %s is found as one lost byte\n",
	       what);
	return 1;
}

/* ---- the command line --------------------------------------------------------- */

static LAB_NORETURN void pcut_usage(const char *prog)
{
	lab_die("usage: %s work SEED CUT [--mkfs] | verify [--self-check]  (run by tests/run-powercut.sh, POWERCUT_BIN naming the program, one boot per cut)",
		prog);
}

int pcut_main(int argc, char **argv, int (*verify)(int selfcheck),
	      int (*work)(uint32_t seed, uint32_t cut, int first))
{
	char *end;
	unsigned long seed, cut;

	if (argc >= 2 && !strcmp(argv[1], "verify")) {
		if (argc > 3 || (argc == 3 && strcmp(argv[2], "--self-check")))
			pcut_usage(argv[0]);
		return verify(argc == 3);
	}
	if (argc < 4 || argc > 5 || strcmp(argv[1], "work") ||
	    (argc == 5 && strcmp(argv[4], "--mkfs")))
		pcut_usage(argv[0]);
	seed = strtoul(argv[2], &end, 0);
	if (*end)
		pcut_usage(argv[0]);
	cut = strtoul(argv[3], &end, 0);
	if (*end)
		pcut_usage(argv[0]);
	return work((uint32_t)seed, (uint32_t)cut, argc == 5);
}
