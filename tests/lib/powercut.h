/* SPDX-License-Identifier: GPL-2.0 */
/*
 * powercut.h - what the power-cut test programs (tests/powercut/, one
 * boot per cut, run by tests/run-powercut.sh) share: the log of durable
 * operations on the second scratch disk and its replay, the lines the host
 * reads, the workload's random numbers, the comparison of a file with its
 * model, and the command line.
 *
 * The log (on SCRATCH_DEV2, kept from boot to boot): 512-byte records, one
 * per sector, written with O_DIRECT|O_DSYNC (durable when the write
 * returns) at the slot the program hands out; each carries a crc32c of its
 * sector, the run's id and its own slot number, so that a torn, unwritten
 * or stale sector is recognised and skipped.  Sector 0 is the header (the
 * run's id, and what else the program keeps there).  Every operation
 * writes an INTENT record (everything needed to redo it) before it starts
 * and a COMMIT record after it is durable; each boot's work starts with an
 * EPOCH record.  A program's records and header are its own structs, which
 * start with the fields PCUT_REC_HEAD and PCUT_HDR_HEAD, so that the log
 * can seal, read and pair them without knowing the rest.
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef POWERCUT_H
#define POWERCUT_H

#include <stddef.h>
#include <stdint.h>

#include "lab.h"

/* ---- the log ------------------------------------------------------------------- */

#define PCUT_SECTOR		512u		/* one record per sector */
#define PCUT_LOG_GAP		4096u		/* invalid slots that end the scan */

/* What a record is (PCUT_REC_HEAD::type). */
enum pcut_type { PCUT_T_EPOCH = 1, PCUT_T_INTENT, PCUT_T_COMMIT };

/* The first members of every record of the log, in this order. */
#define PCUT_REC_HEAD							\
	uint32_t magic;		/* the program's record magic */	\
	uint32_t crc;		/* crc32c of the sector's bytes 8..511 */ \
	uint64_t run_id;						\
	uint64_t seq;		/* the slot it was written to */	\
	uint64_t ref;		/* commit: the slot of its intent */	\
	uint32_t epoch;		/* the "work" boot that wrote it, from 1 */ \
	uint16_t type		/* enum pcut_type */

/* The first members of the header (sector 0), in this order. */
#define PCUT_HDR_HEAD							\
	uint32_t magic;		/* the program's header magic */	\
	uint32_t crc;		/* as in a record */			\
	uint32_t version;						\
	uint32_t seed;		/* the SEED of the first boot's work */	\
	uint64_t run_id

struct pcut_rec {
	PCUT_REC_HEAD;
};

struct pcut_hdr {
	PCUT_HDR_HEAD;
};

/*
 * A program's log: the format of its header and records (set by the
 * program; each of them at most PCUT_SECTOR bytes), and its device (set by
 * pcut_log_open()).
 */
struct pcut_log {
	uint32_t hdr_magic, hdr_version, rec_magic;
	size_t hdr_size, rec_size;
	const char *dev;
	int fd;
	uint64_t slots;		/* the device's sectors: slot 0 the header */
};

/* The initializer of a program's struct pcut_log, not yet open. */
#define PCUT_LOG_INIT(hmagic, hversion, rmagic, hdr_type, rec_type) {	\
	.hdr_magic = (hmagic), .hdr_version = (hversion),		\
	.rec_magic = (rmagic), .hdr_size = sizeof(hdr_type),		\
	.rec_size = sizeof(rec_type), .fd = -1,				\
}

/*
 * Open @dev (O_RDWR | O_DIRECT | O_DSYNC) as the device of @lg.  Dies if it
 * is not a block device, or its logical blocks are bigger than a record.
 */
void pcut_log_open(struct pcut_log *lg, const char *dev);

/*
 * The header @hdr (lg->hdr_size bytes) of a new run: 0 but for its magic,
 * version, @seed and a random run id.
 */
void pcut_log_hdr_init(const struct pcut_log *lg, void *hdr, uint32_t seed);

/*
 * Write the @size bytes at @data (a header or a record, complete), padded
 * with zeroes and sealed (its crc), as the sector @slot: durable when it
 * returns.
 */
int pcut_log_put(const struct pcut_log *lg, uint64_t slot, const void *data,
		 size_t size);

/*
 * The record @rec (lg->rec_size bytes) to the sector @slot: its magic, the
 * run id @run_id, its slot (seq) and @epoch are filled in, in *@rec too,
 * then pcut_log_put().  The caller hands out the slot (below lg->slots).
 */
int pcut_log_emit(const struct pcut_log *lg, uint64_t slot, uint64_t run_id,
		  uint32_t epoch, void *rec);

/* What pcut_log_read() found on the device. */
struct pcut_log_scan {
	int have_hdr;		/* sector 0 holds a sealed header of the format */
	size_t n;		/* the valid records of the run */
	uint64_t end;		/* the slot after the last valid record */
	uint64_t holes;		/* slots before end without a valid record */
	uint64_t foreign;	/* sealed records of another run */
};

/*
 * Read the log: the header into @hdr (lg->hdr_size bytes), and every valid
 * record of its run (sealed, with the record magic, the header's run id
 * and its own slot number), in slot order, into a malloc()ed array of
 * scan->n records of lg->rec_size bytes, which is returned (NULL if there
 * is none).  The scan ends PCUT_LOG_GAP slots after the last valid record,
 * at the end of the device, or at once without a valid header.  Dies on a
 * read error.
 */
void *pcut_log_read(const struct pcut_log *lg, void *hdr, struct pcut_log_scan *scan);

/*
 * The log as "verify" starts with it: pcut_log_open(@dev), then
 * pcut_log_read().  Without a valid header (the first boot's work did not
 * get as far as writing it), the host's line says the verify failed
 * (reason=no-log-header) and scan->have_hdr is 0: return LAB_FAIL.
 */
void *pcut_log_verify_open(struct pcut_log *lg, const char *dev, void *hdr,
			   struct pcut_log_scan *scan);

/*
 * "powercut: LOG ERROR: ..." about the record @rec (its operation @op and
 * file @file, as the program numbers them): a record against the log's
 * rules, or against the model built from it.  Counted in *@count; the
 * first 10 are printed.
 */
void pcut_log_error(uint64_t *count, const void *rec, uint32_t op, uint32_t file,
		    const char *why);

/* ---- the replay: intents paired with their commits ------------------------------ */

struct pcut_replay {
	const void **intent;	/* by slot: the valid intent written there */
	unsigned char *done;	/* by slot: the intent has its commit */
	uint64_t nslots;
	uint32_t epochs, last_epoch;
	uint64_t committed, aborted;	/* commits: done, not done */
	uint64_t pending;		/* intents without a commit: in flight */
};

/* What the program does with the records, in slot order; @ctx is its model. */
struct pcut_replay_ops {
	/* An intent: 1 if well-formed (it is then noted), 0 if not. */
	int (*intent)(void *ctx, const void *in);
	/*
	 * The commit @c of the intent @in: 1 if it says the operation was
	 * done (the program has applied it), 0 if not.
	 */
	int (*commit)(void *ctx, const void *in, const void *c);
	/* An intent left without its commit: in flight at the cut. */
	void (*inflight)(void *ctx, const void *in);
	/* A record against the log's rules ("malformed intent", ...). */
	void (*bad)(void *ctx, const void *r, const char *why);
};

/*
 * Replay the @n records @recs (pcut_log_read(), slots below @end) into
 * @rp: epoch records are counted; an intent is noted at its slot; a commit
 * must name the slot of an intent without a commit yet; a record of
 * another type is bad.  Then the intents left without a commit, in slot
 * order.  Dies without memory.
 */
void pcut_replay(const struct pcut_log *lg, const void *recs, size_t n,
		 uint64_t end, struct pcut_replay *rp,
		 const struct pcut_replay_ops *ops, void *ctx);
void pcut_replay_free(struct pcut_replay *rp);

/* ---- the host's lines, the workload's random numbers ------------------------------ */

/*
 * A line the host parses ("powercut: working", "powercut-verify: ..."):
 * through /dev/kmsg, because the console never splits a printk record,
 * while other output may land in the middle of a line written to
 * /dev/console; and to stdout (the host prefers the kernel's copy).  Keep
 * it below the 1024 bytes of a printk record.
 */
void pcut_host_line(const char *fmt, ...) LAB_PRINTF(1, 2);

/*
 * The workload's choices, a function of the run's SEED, the boot (@epoch)
 * and @stream (e.g. the process): this process's generator (xorshift64*).
 */
void pcut_rng_init(uint32_t seed, uint32_t epoch, uint32_t stream);
uint32_t pcut_rnd32(void);
/* Uniform in [0, n); n > 0. */
uint32_t pcut_rnd(uint32_t n);

/* ---- a file against its model -------------------------------------------------- */

/* What an operation in flight may have put at [off, off + len): data. */
struct pcut_cand {
	uint32_t off, len;
	unsigned char *data;
};

/*
 * Compare @got (@got_len bytes read from the file) with its model @m of
 * @size bytes (0 beyond), where the @nc candidates @c may also show.  The
 * bytes of [0, @size) that are neither the model's value nor the value of
 * a candidate covering them, those missing from a short file included,
 * are lost: their number is returned, the first of them in *@first (else
 * the end of both).  In *@wrong, the bytes beyond @size that are neither 0
 * nor a candidate's value.
 */
uint64_t pcut_count_lost(const unsigned char *m, uint32_t size,
			 const unsigned char *got, size_t got_len,
			 const struct pcut_cand *c, int nc, uint64_t *wrong,
			 uint64_t *first);

/*
 * The control of that comparison, once per verify (*@done): the model with
 * one byte flipped where @got agreed with it and no candidate covers it
 * must give exactly one lost byte more than @lost, else the comparison is
 * blind.  Returns 0 if *@done already, or there is no such byte (another
 * file will be tried); else sets *@done and returns 1 if the count was
 * right (a line says so), -1 if not, with the byte in *@at and the count
 * in *@lost2.  @what names the file.  A program reports -1 as an error
 * with PCUT_CONTROL_BLIND_FMT (@what, *@at, *@lost2, @lost + 1, each
 * unsigned long long but @what).
 */
int pcut_control(const char *what, const unsigned char *m, uint32_t size,
		 const unsigned char *got, size_t got_len,
		 const struct pcut_cand *c, int nc, uint64_t lost, int *done,
		 uint64_t *at, uint64_t *lost2);

#define PCUT_CONTROL_BLIND_FMT \
	"control: a byte flipped in the model of %s (at %llu) gave %llu lost bytes, expected %llu: the comparison is blind"

/* ---- the command line --------------------------------------------------------- */

/*
 * The command line tests/run-powercut.sh gives a power-cut program, one
 * boot per cut: "verify [--self-check]" for the previous cut (the program's
 * @verify, with --self-check: 1), then "work SEED CUT [--mkfs]" (@work;
 * --mkfs: the first boot, @first 1), which runs until the host kills the
 * VM.  Returns what the one called returns; dies with the usage on
 * anything else.
 */
int pcut_main(int argc, char **argv, int (*verify)(int selfcheck),
	      int (*work)(uint32_t seed, uint32_t cut, int first));

#endif /* POWERCUT_H */
