// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_key_removal_writeback - writeback and key setup racing with
 * FS_IOC_REMOVE_ENCRYPTION_KEY / FS_IOC_ADD_ENCRYPTION_KEY, under lockdep
 * (after xfstests generic/595 and generic/580; issue #14, part 3).
 *
 * With per-extent keys (mounted with fscrypt_extents_per_key=2, so that
 * groups are short), writeback derives a key whenever a file starts a key
 * group (cow_file_range -> fscrypt_prepare_new_extent ->
 * fscrypt_derive_extent_key, under the master key's mk_sem): every other
 * extent, and the first one after the inode was loaded, e.g. after the
 * dropper evicted a closed file.  Meanwhile key setup of an inode that is
 * opened holds mk_sem across GFP_KERNEL allocations, and key removal and
 * re-adding take it for writing.  The filesystem holds files of two master
 * keys: A, the one removed and re-added, and B, which stays.  For a fixed
 * time, concurrently:
 *
 *  - WRITERS processes make buffered writes of small random pieces (from a
 *    few bytes to a few blocks, aligned or not) to two files each, one
 *    kept open all along and one closed and reopened now and then, with
 *    fsync and sync_file_range in between;
 *  - a creator makes new files (key setup of a new inode), fsyncs them,
 *    and reopens older ones (key setup of an existing inode) and checks
 *    their contents;
 *  - a remover loops FS_IOC_REMOVE_ENCRYPTION_KEY / FS_IOC_ADD_ENCRYPTION_KEY
 *    of key A.  Since the writers keep files open, every removal must
 *    return 0 with the status flag FILES_BUSY and nothing else, and leave
 *    the key INCOMPLETELY_REMOVED; then a file of key A that nobody has
 *    open must refuse to open (ENOKEY), while a file of key B must open
 *    and read back.  After re-adding, the key must be PRESENT (added by
 *    this user, one user) and the file of key A must open and read back;
 *  - a dropper writes 3 to /proc/sys/vm/drop_caches every second or two.
 *
 * Key B is removed too, while files of key A have pinned it (per-extent
 * keys only; issue #36): two files of key A ("pin files") hold a block
 * cloned from a file of key B, and the remover keeps them open.  After
 * every third cycle of key A it reads them whole (their page cache dropped
 * first, so that key B's extent key is set up again) and removes key B:
 * the removal must return 0 with no flag but FILES_BUSY, and key B be
 * INCOMPLETELY_REMOVED if FILES_BUSY, ABSENT if not; FILES_BUSY (the pin)
 * must come at least once in the run.  With key B away, a file of key B
 * nobody has open refuses to open (ENOKEY, or ENOENT once its directory is
 * locked), the pin files' blocks of key A read back, and their block of
 * key B reads back or fails with ENOKEY (both counted), never wrong.  Key B
 * is added again and the pin files read back whole.
 *
 * While the key is removed, opening a file that is not open and creating
 * one fail (ENOKEY, or ENOENT for a name that has become a no-key name);
 * that is expected, counted, and must have happened at least once (else
 * the removals did nothing).  Any other error of a write, fsync,
 * sync_file_range or read is a failure, and so is a file opened with the
 * key that does not read back what was written.
 *
 * The remover stops first, with the key added; then the others.  Writers
 * record every byte whose fsync succeeded.  Then every such byte must read
 * back, after dropping caches; then the removal sequence of generic/580:
 * with a file open, a removal reports FILES_BUSY and leaves the key
 * INCOMPLETELY_REMOVED, unopened files refuse to open and new files to be
 * created (ENOKEY), the open file still writes and fsyncs; once it is
 * closed, a second removal completes (status 0, key ABSENT), names are
 * no-key names (a plaintext name: ENOENT; a no-key name: ENOKEY), key B's
 * files still read; after re-adding, everything reads back again, and
 * after a remount.
 *
 * A file whose extents are under two master keys (per-extent keys only):
 * FICLONERANGE from a file of key B gives a file of key A a block of key B;
 * a dedupe then finds them different, and key B's policy on the file is
 * refused.  Key B is removed: that block reads ENOKEY, the rest of the
 * file reads; once key B is back, the whole file reads as written.  With
 * per-inode keys the clone and the dedupe are refused (EOPNOTSUPP).
 *
 * Then the same with per-inode keys (mount option fscrypt_per_inode_keys).
 * A lockdep report (or any splat) fails the run through the console check
 * of the runner: the test passing on the debug kernel is the proof that
 * this locking is sound.  A child still running long after the stop (a
 * deadlock) fails the test.
 *
 * Environment (all optional):
 *   KEYLOAD_SECONDS   seconds of load per key mode (default 30 with
 *                     per-extent keys, 20 with per-inode keys)
 *   KEYLOAD_PROGRESS  print a LAB-PROGRESS line on the console every N
 *                     seconds of load (default 0: none)
 *   KEYLOAD_FIGURES   where to write the figures (default
 *                     $RESULTS/keyload-figures.tsv; neither set: no file):
 *                     one "key<TAB>value" line each, summed over the
 *                     key modes:
 *       cycles                 removals of key A followed by a re-add
 *       removals_busy          removals that returned FILES_BUSY
 *       removals_complete      removals that returned 0 (key ABSENT after)
 *       enokey_seen            opens and creates refused for want of the
 *                              key: ENOKEY, or ENOENT for a name that had
 *                              become a no-key name
 *       fsynced_bytes_checked  fsynced bytes compared by the last check
 *                              (after the remount)
 *       bytes_lost             the most fsynced bytes any check found
 *                              wrong or missing (must be 0)
 *       duration_s             seconds of load
 *       b_removals             removals of key B beside the open pin files
 *       b_removals_pinned      of them, those that returned FILES_BUSY
 *       pinned_reads           reads of a pin file's block of key B that
 *                              gave its data while key B was away
 *       pinned_reads_enokey    such reads refused with ENOKEY
 */
#include "btrfs_progs.h"
#include "btrfs_items.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/btrfs.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096u
#define WRITERS 3
#define FILES_PER_WRITER 2	/* [0] stays open, [1] is reopened */
#define FSIZE (48 * BLK)
#define MAX_PIECE (4 * BLK)
#define MAX_NEW 256
#define MAX_NEW_LEN (5 * BLK)
/* Files of key A nobody keeps open, and files of key B. */
#define COLD_FILES 4
#define OTHER_FILES 4
/*
 * Files of key A holding a block of key B (per-extent keys only), which the
 * remover keeps open: they pin key B when it removes it.
 */
#define PIN_FILES 2
#define PIN_LEN (4 * BLK)
#define PIN_BLK 2		/* the block of key B */
#define B_CYCLE_EVERY 3		/* key B's removal after every third of A's */
#define SMALL_LEN (2 * BLK + 100)
#define RUN_S_EXTENT 30
#define RUN_S_INODE 20
#define MAX_RUN_S (24 * 3600)
/* How long children may take to stop after being told to. */
#define STOP_GRACE_S 180
#define CHILDREN (WRITERS + 3)

static const char *dev, *mnt;

/* ---- what the children share with the parent --------------------------- */

struct wfile {
	unsigned char durable[FSIZE];	/* contents at the last good fsync */
	unsigned char dirty[FSIZE];	/* 1: written since then */
};

struct newfile {
	uint32_t len;
	int done;		/* written, fsynced and closed */
};

/*
 * Every counter has one writer (a child, or the parent while no child
 * runs); the parent reads them for progress lines and at the end.
 */
struct shared {
	volatile int stop;		/* writers, creator, dropper */
	volatile int stop_remover;	/* told first */
	volatile int remover_done;	/* the remover left its loop */
	long removals, removals_busy, adds, drops;
	long cold_nokey, cold_reads, other_reads;
	long writes[WRITERS], fsyncs[WRITERS], ranges[WRITERS];
	long reopens[WRITERS], reopen_nokey[WRITERS], reopen_noent[WRITERS];
	long creates, create_nokey, checks, check_nokey, check_noent;
	/* key B removed while files of key A hold (pin) its extents */
	int pins;			/* the pin files exist (per-extent keys) */
	long b_removals, b_pinned, b_adds, b_refused;
	long pin_reads_ok, pin_reads_nokey, pin_checks;
	int nnew;
	struct newfile nf[MAX_NEW];
	struct wfile wf[WRITERS][FILES_PER_WRITER];
};

/* The figures of one key mode, and their sums. */
struct keyload_figures {
	long cycles;			/* removals followed by a re-add */
	long removals_busy;		/* status FILES_BUSY */
	long removals_complete;		/* status 0, key ABSENT after */
	long enokey, enoent;		/* opens/creates refused, key removed */
	long b_removals, b_pinned;	/* key B removed; FILES_BUSY (pinned) */
	long pin_reads_ok, pin_reads_nokey;	/* key B block of a pin file, B away */
	unsigned long long checked;	/* fsynced bytes of the last check */
	unsigned long long lost;	/* the most any check found wrong */
	long long secs;			/* of load */
};

/* Fsynced bytes compared by one check, and how many of them differed. */
struct verify_count {
	unsigned long long checked, lost;
};

static struct shared *sh;
static char enc[PATH_MAX], encb[PATH_MAX];
static uint8_t master[LAB_MASTER_KEY_SIZE], master_b[LAB_MASTER_KEY_SIZE];
static uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
static uint8_t key_id_b[FSCRYPT_KEY_IDENTIFIER_SIZE];
static long progress_s;

static void wfile_path(char *out, size_t size, int w, int f)
{
	lab_pathf(out, size, "%s/w%d%c", enc, w, f ? 'b' : 'a');
}

static void newfile_path(char *out, size_t size, int k)
{
	lab_pathf(out, size, "%s/n%d", enc, k);
}

static uint32_t newfile_seed(int k)
{
	return 0x6e000000u + (uint32_t)k;
}

/* Cold file @k: key A, in the writers' directory, opened by the remover only. */
static void cold_path(char *out, size_t size, int k)
{
	lab_pathf(out, size, "%s/c%d", enc, k);
}

static uint32_t cold_seed(int k)
{
	return 0x63000000u + (uint32_t)k;
}

/* File @k of key B. */
static void other_path(char *out, size_t size, int k)
{
	lab_pathf(out, size, "%s/b%d", encb, k);
}

static uint32_t other_seed(int k)
{
	return 0x62000000u + (uint32_t)k;
}

/* Pin file @k: key A, with block PIN_BLK cloned from block 0 of file @k of key B. */
static void pin_path(char *out, size_t size, int k)
{
	lab_pathf(out, size, "%s/p%d", enc, k);
}

static uint32_t pin_seed(int k)
{
	return 0x70000000u + (uint32_t)k;
}

/* What pin file @k holds: PIN_LEN bytes into @buf. */
static void pin_expect(unsigned char *buf, int k)
{
	unsigned char *b = lab_pattern(SMALL_LEN, other_seed(k));

	fill_pattern(buf, PIN_LEN, pin_seed(k));
	memcpy(buf + PIN_BLK * BLK, b, BLK);
	free(b);
}

/* ---- small helpers -------------------------------------------------------- */

static uint64_t rng_state;

static void rng_seed(void)
{
	lab_random(&rng_state, sizeof(rng_state));
	rng_state |= 1;
}

/* xorshift64* */
static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dULL) >> 32) % n;
}

/* The errors a file access may get while the key is removed. */
static int keyless_errno(int e)
{
	return e == ENOKEY || e == ENOENT;
}

/* Count keyless errno @e in *@nokey or *@noent. */
static void count_keyless(int e, long *nokey, long *noent)
{
	if (e == ENOKEY)
		(*nokey)++;
	else
		(*noent)++;
}

/* A non-negative number of seconds from the environment, or @def. */
static long env_seconds(const char *name, long def, long min)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > MAX_RUN_S)
		lab_die("%s=%s: expected a number of seconds from %ld to %d",
			name, s, min, MAX_RUN_S);
	return v;
}

/*
 * Read @path whole and compare it with @len bytes of @expect, leaving out
 * the bytes where @skip (may be NULL) is set; a missing or short file
 * loses the bytes it lacks.  Adds to *@vc; returns 1 if all matched.
 */
static int verify_file(const char *when, const char *path,
		       const unsigned char *expect, size_t len,
		       const unsigned char *skip, struct verify_count *vc)
{
	size_t glen = 0, i, checked = 0, bad = 0, first = len;
	unsigned char *got;
	int e;

	errno = 0;
	got = read_file(path, &glen);
	e = errno;
	for (i = 0; i < len; i++) {
		if (skip && skip[i])
			continue;
		checked++;
		if (!got || i >= glen || got[i] != expect[i]) {
			if (!bad++)
				first = i;
		}
	}
	vc->checked += checked;
	vc->lost += bad;
	if (!CHECK(got != NULL, "%s: read %s: " LAB_ERR_FMT, when, path,
		   LAB_ERR_ARGS(e)))
		return 0;
	CHECK(glen == len, "%s: %s has %zu bytes, expected %zu", when, path,
	      glen, len);
	CHECK(bad == 0,
	      "%s: %s: %zu of the %zu fsynced bytes differ, the first at %zu",
	      when, path, bad, checked, first);
	free(got);
	return bad == 0 && glen == len;
}

/*
 * Open @path, which must succeed, and check that it holds @len bytes of
 * fill_pattern(@seed).  For the remover: @buf and @expect hold SMALL_LEN + 1.
 */
static int read_back(const char *who, const char *path, size_t len,
		     uint32_t seed, unsigned char *buf, unsigned char *expect)
{
	ssize_t n;
	int fd, e;

	errno = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!CHECK_OK(fd, "%s: open %s", who, path))
		return 0;
	errno = 0;
	n = lab_pread_full(fd, buf, len + 1, 0);
	e = errno;
	close(fd);
	fill_pattern(expect, len, seed);
	if (!CHECK(n == (ssize_t)len, "%s: read %s: %zd of %zu bytes, " LAB_ERR_FMT,
		   who, path, n, len, LAB_ERR_ARGS(n < 0 ? e : 0)))
		return 0;
	return CHECK(lab_first_diff(buf, expect, len) == len,
		     "%s: %s differs at byte %zu", who, path,
		     lab_first_diff(buf, expect, len));
}

/*
 * Key A's status must be @status; if PRESENT, added by this user, who is
 * its only user; if not, with no user and no flag.
 */
static int check_key_status(const char *when, int status)
{
	struct fscrypt_get_key_status_arg arg;
	uint32_t want_flags = 0, want_users = 0;

	if (!CHECK_OK(lab_get_key_status(mnt, key_id, &arg),
		      "%s: FS_IOC_GET_ENCRYPTION_KEY_STATUS", when))
		return 0;
	if (status == FSCRYPT_KEY_STATUS_PRESENT) {
		want_flags = FSCRYPT_KEY_STATUS_FLAG_ADDED_BY_SELF;
		want_users = 1;
	}
	return CHECK(arg.status == (uint32_t)status &&
		     arg.status_flags == want_flags &&
		     arg.user_count == want_users,
		     "%s: key status %u, flags 0x%x, %u users; expected %d, 0x%x, %u",
		     when, arg.status, arg.status_flags, arg.user_count, status,
		     want_flags, want_users);
}

/* ---- the children ------------------------------------------------------------ */

static int fds[WRITERS][FILES_PER_WRITER];

static int writer(int w)
{
	static unsigned char cur[FILES_PER_WRITER][FSIZE];
	static unsigned char piece[MAX_PIECE];
	char path[PATH_MAX];
	uint32_t iter = 0, closed_at = 0;
	int f, e;

	for (f = 0; f < FILES_PER_WRITER; f++)
		memcpy(cur[f], sh->wf[w][f].durable, FSIZE);
	while (!sh->stop) {
		struct wfile *wf;
		uint32_t len, off;
		int fd;

		iter++;
		f = fds[w][1] >= 0 && rnd(3) == 0;
		fd = fds[w][f];
		wf = &sh->wf[w][f];
		if (rnd(2))
			len = 1 + rnd(BLK);		/* part of a block */
		else
			len = BLK * (1 + rnd(MAX_PIECE / BLK));
		off = rnd(FSIZE - len + 1);
		if (rnd(2))
			off -= off % BLK;
		fill_pattern(piece, len, (uint32_t)w << 28 ^ (uint32_t)f << 27 ^ iter);
		if (!CHECK_OK(pwrite_all(fd, piece, len, off),
			      "writer %d: pwrite %u bytes at %u of w%d%c", w, len,
			      off, w, f ? 'b' : 'a'))
			break;
		sh->writes[w]++;
		memcpy(cur[f] + off, piece, len);
		memset(wf->dirty + off, 1, len);
		switch (rnd(8)) {
		case 0:
		case 1:
		case 2:
			if (!CHECK_OK(fsync(fd), "writer %d: fsync of w%d%c", w,
				      w, f ? 'b' : 'a'))
				break;
			sh->fsyncs[w]++;
			memcpy(wf->durable, cur[f], FSIZE);
			memset(wf->dirty, 0, FSIZE);
			break;
		case 3:
			CHECK_OK(sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE),
				 "writer %d: sync_file_range(WRITE)", w);
			sh->ranges[w]++;
			break;
		case 4:
			CHECK_OK(sync_file_range(fd, off, len,
						 SYNC_FILE_RANGE_WAIT_BEFORE |
						 SYNC_FILE_RANGE_WRITE |
						 SYNC_FILE_RANGE_WAIT_AFTER),
				 "writer %d: sync_file_range(WAIT|WRITE|WAIT)", w);
			sh->ranges[w]++;
			break;
		default:
			break;
		}
		/*
		 * Close the second file now and then, and reopen it some
		 * writes later (by then caches may have been dropped or the
		 * key removed, and the open must set the key up again).
		 */
		if (fds[w][1] >= 0 && iter % 16 == 0) {
			close(fds[w][1]);
			fds[w][1] = -1;
			closed_at = iter;
		}
		if (fds[w][1] < 0 && iter - closed_at >= 6 && iter % 2 == 0) {
			wfile_path(path, sizeof(path), w, 1);
			errno = 0;
			fds[w][1] = open(path, O_RDWR | O_CLOEXEC);
			e = errno;
			if (fds[w][1] >= 0)
				sh->reopens[w]++;
			else if (keyless_errno(e))
				count_keyless(e, &sh->reopen_nokey[w],
					      &sh->reopen_noent[w]);
			else
				CHECK(0, "writer %d: reopen %s: " LAB_ERR_FMT, w,
				      path, LAB_ERR_ARGS(e));
		}
	}
	/* the key may be removed right now: the open files must not care */
	for (f = 0; f < FILES_PER_WRITER; f++) {
		if (fds[w][f] < 0)
			continue;
		if (CHECK_OK(fsync(fds[w][f]), "writer %d: last fsync of w%d%c",
			     w, w, f ? 'b' : 'a')) {
			memcpy(sh->wf[w][f].durable, cur[f], FSIZE);
			memset(sh->wf[w][f].dirty, 0, FSIZE);
		}
		close(fds[w][f]);
	}
	return lab_failures;
}

/* Read new file @k, which must be whole; a keyless open is counted. */
static void check_new_file(int k, unsigned char *buf, unsigned char *expect)
{
	char path[PATH_MAX];
	uint32_t len = sh->nf[k].len;
	ssize_t n;
	int fd, e;

	newfile_path(path, sizeof(path), k);
	errno = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd < 0) {
		if (keyless_errno(e))
			count_keyless(e, &sh->check_nokey, &sh->check_noent);
		else
			CHECK(0, "creator: open %s: " LAB_ERR_FMT, path,
			      LAB_ERR_ARGS(e));
		return;
	}
	/* opened with the key: it must read back, key removed or not */
	errno = 0;
	n = lab_pread_full(fd, buf, len + 1, 0);
	e = errno;
	close(fd);
	fill_pattern(expect, len, newfile_seed(k));
	if (CHECK(n == (ssize_t)len, "creator: read %s: %zd of %u bytes, " LAB_ERR_FMT,
		  path, n, len, LAB_ERR_ARGS(n < 0 ? e : 0)))
		CHECK(lab_first_diff(buf, expect, len) == len,
		      "creator: %s differs at byte %zu", path,
		      lab_first_diff(buf, expect, len));
	sh->checks++;
}

static int creator(void)
{
	static unsigned char buf[MAX_NEW_LEN + 1], expect[MAX_NEW_LEN];
	char path[PATH_MAX];
	int fd, e, k;

	while (!sh->stop) {
		k = sh->nnew;
		if (k < MAX_NEW) {
			uint32_t len = 1 + rnd(MAX_NEW_LEN);

			newfile_path(path, sizeof(path), k);
			errno = 0;
			fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
			e = errno;
			if (fd < 0) {
				/* no key: a new inode gets no key either */
				if (!CHECK(e == ENOKEY, "creator: create %s: " LAB_ERR_FMT
					   ", expected success or ENOKEY", path,
					   LAB_ERR_ARGS(e)))
					break;
				sh->create_nokey++;
				lab_sleep_ms(20);
			} else {
				fill_pattern(expect, len, newfile_seed(k));
				if (!CHECK_OK(write_all(fd, expect, len),
					      "creator: write %s", path) ||
				    !CHECK_OK(fsync(fd), "creator: fsync %s", path)) {
					close(fd);
					break;
				}
				close(fd);
				sh->nf[k].len = len;
				sh->nf[k].done = 1;
				sh->nnew = k + 1;
				sh->creates++;
			}
		}
		if (sh->nnew > 0)
			check_new_file((int)rnd((uint32_t)sh->nnew), buf, expect);
	}
	return lab_failures;
}

/*
 * Key A was removed while the writers hold files open: a cold file, which
 * nobody has open, must refuse to open with ENOKEY (its directory stays
 * unlocked, pinned by the writers' files, so its name still resolves);
 * a file of key B must open and read back.
 */
static void remover_check_removed(unsigned char *buf, unsigned char *expect)
{
	char path[PATH_MAX];
	int k = (int)rnd(COLD_FILES), fd, e;

	cold_path(path, sizeof(path), k);
	errno = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd >= 0) {
		CHECK(0, "remover: %s, which nobody had open, opened after the key was removed",
		      path);
		close(fd);
	} else if (CHECK(e == ENOKEY,
			 "remover: open %s with the key removed: " LAB_ERR_FMT
			 ", expected ENOKEY", path, LAB_ERR_ARGS(e))) {
		sh->cold_nokey++;
	}
	k = (int)rnd(OTHER_FILES);
	other_path(path, sizeof(path), k);
	if (read_back("remover (key B stays)", path, SMALL_LEN, other_seed(k),
		      buf, expect))
		sh->other_reads++;
}

/*
 * Key B removed while files of key A hold its extents (per-extent keys): the
 * remover keeps the pin files open and has just read each whole (its page
 * cache dropped first, so that the read sets up the extent keys, key B's
 * included).  Those files pin key B: the removal should say FILES_BUSY
 * (counted; at least one must, see print_counts()) and leave key B
 * INCOMPLETELY_REMOVED, else it is complete (ABSENT).  With key B away, a
 * file of key B that nobody has open refuses to open (ENOKEY, or ENOENT
 * once its directory has no key); a pin file's blocks of key A read back,
 * and its block of key B reads back or fails with ENOKEY (counted), never
 * wrong.  Key B is added again and the pin files read back whole.
 */
static void remover_b_cycle(const int *pinfd, unsigned char *buf, unsigned char *expect)
{
	static unsigned char pbuf[PIN_LEN], pexp[PIN_LEN];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char path[PATH_MAX];
	uint32_t flags = 0;
	ssize_t n;
	int k, fd, e, st;

	for (k = 0; k < PIN_FILES; k++) {
		pin_expect(pexp, k);
		posix_fadvise(pinfd[k], 0, 0, POSIX_FADV_DONTNEED);
		n = lab_pread_full(pinfd[k], pbuf, PIN_LEN, 0);
		CHECK(n == PIN_LEN && !memcmp(pbuf, pexp, PIN_LEN),
		      "remover: pin file p%d before key B's removal: %zd bytes, %s", k, n,
		      n == PIN_LEN ? "different" : strerror(errno));
	}
	if (!CHECK_OK(lab_remove_key(mnt, key_id_b, &flags),
		      "remover: FS_IOC_REMOVE_ENCRYPTION_KEY of key B"))
		return;
	sh->b_removals++;
	CHECK(!(flags & ~FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY),
	      "remover: key B's removal: status flags 0x%x", flags);
	if (flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY)
		sh->b_pinned++;
	st = lab_key_status(mnt, key_id_b);
	CHECK(st == (flags ? FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED :
			     FSCRYPT_KEY_STATUS_ABSENT),
	      "remover: key B's status %d after a removal with status flags 0x%x", st,
	      flags);
	/* nobody holds key B's own files */
	k = (int)rnd(OTHER_FILES);
	other_path(path, sizeof(path), k);
	errno = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd >= 0) {
		CHECK(0, "remover: %s (key B) opened with key B removed", path);
		close(fd);
	} else if (CHECK(keyless_errno(e), "remover: open %s with key B removed: "
			 LAB_ERR_FMT ", expected ENOKEY or ENOENT", path,
			 LAB_ERR_ARGS(e))) {
		sh->b_refused++;
	}
	for (k = 0; k < PIN_FILES; k++) {
		uint32_t b;

		pin_expect(pexp, k);
		for (b = 0; b < PIN_LEN / BLK; b++) {
			errno = 0;
			n = pread(pinfd[k], pbuf, BLK, (off_t)b * BLK);
			e = errno;
			if (n == BLK && !memcmp(pbuf, pexp + b * BLK, BLK)) {
				if (b == PIN_BLK)
					sh->pin_reads_ok++;
				continue;
			}
			if (b == PIN_BLK && n < 0 && e == ENOKEY) {
				sh->pin_reads_nokey++;
				continue;
			}
			CHECK(0, "remover: pin file p%d, block %u (key %c) with key B removed: %zd bytes, %s",
			      k, b, b == PIN_BLK ? 'B' : 'A', n,
			      n == BLK ? "different" : strerror(e));
		}
	}
	if (!CHECK_OK(lab_add_raw_key(mnt, master_b, sizeof(master_b), id),
		      "remover: add key B again"))
		return;
	sh->b_adds++;
	CHECK(!memcmp(id, key_id_b, sizeof(id)),
	      "remover: key B came back with another identifier");
	for (k = 0; k < PIN_FILES; k++) {
		pin_expect(pexp, k);
		posix_fadvise(pinfd[k], 0, 0, POSIX_FADV_DONTNEED);
		n = lab_pread_full(pinfd[k], pbuf, PIN_LEN, 0);
		if (CHECK(n == PIN_LEN && !memcmp(pbuf, pexp, PIN_LEN),
			  "remover: pin file p%d after key B came back: %zd bytes, %s", k,
			  n, n == PIN_LEN ? "different" : strerror(errno)))
			sh->pin_checks++;
	}
	k = (int)rnd(OTHER_FILES);
	other_path(path, sizeof(path), k);
	read_back("remover (key B re-added)", path, SMALL_LEN, other_seed(k), buf, expect);
}

static int remover(void)
{
	static unsigned char buf[SMALL_LEN + 1], expect[SMALL_LEN];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char path[PATH_MAX];
	uint32_t flags;
	int k, pinfd[PIN_FILES], cycle = 0;

	for (k = 0; k < PIN_FILES; k++) {
		pinfd[k] = -1;
		if (!sh->pins)
			continue;
		pin_path(path, sizeof(path), k);
		pinfd[k] = open(path, O_RDONLY | O_CLOEXEC);
		if (!CHECK_OK(pinfd[k], "remover: open %s", path))
			sh->pins = 0;
	}
	while (!sh->stop_remover) {
		lab_sleep_ms(100 + rnd(300));
		flags = 0;
		if (!CHECK_OK(lab_remove_key(mnt, key_id, &flags),
			      "remover: FS_IOC_REMOVE_ENCRYPTION_KEY"))
			break;
		sh->removals++;
		if (flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY)
			sh->removals_busy++;
		/* the writers' files are open all along */
		CHECK(flags == FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY,
		      "remover: removal %ld with files open: status flags 0x%x, expected FILES_BUSY (0x%x) alone",
		      sh->removals, flags,
		      FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY);
		check_key_status("remover: after a removal with files open",
				 FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED);
		remover_check_removed(buf, expect);
		lab_sleep_ms(100 + rnd(300));
		/* always ends with the key there */
		if (!CHECK_OK(lab_add_raw_key(mnt, master, sizeof(master), id),
			      "remover: FS_IOC_ADD_ENCRYPTION_KEY"))
			break;
		sh->adds++;
		CHECK(!memcmp(id, key_id, sizeof(id)),
		      "remover: the key came back with another identifier");
		check_key_status("remover: after re-adding the key",
				 FSCRYPT_KEY_STATUS_PRESENT);
		k = (int)rnd(COLD_FILES);
		cold_path(path, sizeof(path), k);
		if (read_back("remover (key re-added)", path, SMALL_LEN,
			      cold_seed(k), buf, expect))
			sh->cold_reads++;
		if (sh->pins && ++cycle % B_CYCLE_EVERY == 0 && !sh->stop_remover)
			remover_b_cycle(pinfd, buf, expect);
	}
	for (k = 0; k < PIN_FILES; k++)
		if (pinfd[k] >= 0)
			close(pinfd[k]);
	sh->remover_done = 1;
	return lab_failures;
}

static int dropper(void)
{
	int fd;

	while (!sh->stop) {
		lab_sleep_ms(1000 + rnd(1500));
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
		if (!CHECK_OK(fd, "open drop_caches"))
			break;
		CHECK(write(fd, "3", 1) == 1, "drop_caches: " LAB_ERR_FMT,
		      LAB_ERR_ARGS(errno));
		close(fd);
		sh->drops++;
	}
	return lab_failures;
}

/* Child @i: writers first, then the creator, remover and dropper. */
static const char *child_name(int i, char *buf, size_t size)
{
	static const char *const others[] = { "creator", "remover", "dropper" };

	if (i < WRITERS)
		snprintf(buf, size, "writer %d", i);
	else
		snprintf(buf, size, "%s", others[i - WRITERS]);
	return buf;
}

/* Child @arg (lab_child_start(): never the parent's exit handlers). */
static int child_main(void *arg)
{
	int i = (int)(intptr_t)arg, w, f;

	rng_seed();
	lab_failures = 0;
	/* only a writer keeps files open, and only its own */
	for (w = 0; w < WRITERS; w++)
		for (f = 0; f < FILES_PER_WRITER; f++)
			if (w != i && fds[w][f] >= 0) {
				close(fds[w][f]);
				fds[w][f] = -1;
			}
	if (i < WRITERS)
		return writer(i);
	if (i == WRITERS)
		return creator();
	if (i == WRITERS + 1)
		return remover();
	return dropper();
}

/*
 * Wait for all children until @deadline_ms; their failures count as ours.
 * Returns 0 if all ended, -1 if one is stuck (it is killed; if it does not
 * die, it is in the kernel for good and nothing after is safe).
 */
static int wait_children(pid_t *pids, long long deadline_ms)
{
	int left = CHILDREN, st, i, stuck = 0;
	char name[32];
	pid_t r;

	while (left > 0) {
		r = waitpid(-1, &st, WNOHANG);
		if (r < 0 && errno != EINTR)
			lab_die("waitpid: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		if (r <= 0) {
			if (lab_now_ms() >= deadline_ms)
				break;
			lab_sleep_ms(50);
			continue;
		}
		for (i = 0; i < CHILDREN; i++)
			if (pids[i] == r)
				break;
		if (i == CHILDREN)
			continue;
		pids[i] = 0;
		left--;
		child_name(i, name, sizeof(name));
		if (WIFSIGNALED(st))
			CHECK(0, "%s killed by signal %d (%s)", name,
			      WTERMSIG(st), strsignal(WTERMSIG(st)));
		else if (WEXITSTATUS(st))
			lab_failures += WEXITSTATUS(st);
	}
	for (i = 0; i < CHILDREN; i++) {
		if (!pids[i])
			continue;
		CHECK(0, "%s still running %d s after the stop: deadlock?",
		      child_name(i, name, sizeof(name)), STOP_GRACE_S);
		run("cat /proc/%d/stack", (int)pids[i]);
		kill(pids[i], SIGKILL);
		stuck = 1;
	}
	return stuck ? -1 : 0;
}

/* ---- checking what is on the filesystem ---------------------------------------- */

/*
 * Every byte fsynced, every new file, the cold files and key B's files read
 * back, after dropping caches.  Returns what was compared.
 */
static struct verify_count verify_all(const char *when)
{
	struct verify_count vc = { 0, 0 };
	char path[PATH_MAX];
	unsigned char *expect = lab_xmalloc(MAX_NEW_LEN);
	int w, f, k;

	CHECK_OK(lab_drop_caches("3"), "drop caches");
	for (w = 0; w < WRITERS; w++) {
		for (f = 0; f < FILES_PER_WRITER; f++) {
			wfile_path(path, sizeof(path), w, f);
			verify_file(when, path, sh->wf[w][f].durable, FSIZE,
				    sh->wf[w][f].dirty, &vc);
		}
	}
	for (k = 0; k < sh->nnew; k++) {
		if (!sh->nf[k].done)
			continue;
		newfile_path(path, sizeof(path), k);
		fill_pattern(expect, sh->nf[k].len, newfile_seed(k));
		verify_file(when, path, expect, sh->nf[k].len, NULL, &vc);
	}
	for (k = 0; k < COLD_FILES; k++) {
		cold_path(path, sizeof(path), k);
		fill_pattern(expect, SMALL_LEN, cold_seed(k));
		verify_file(when, path, expect, SMALL_LEN, NULL, &vc);
	}
	for (k = 0; k < OTHER_FILES; k++) {
		other_path(path, sizeof(path), k);
		fill_pattern(expect, SMALL_LEN, other_seed(k));
		verify_file(when, path, expect, SMALL_LEN, NULL, &vc);
	}
	for (k = 0; sh->pins && k < PIN_FILES; k++) {
		unsigned char pexp[PIN_LEN];

		pin_path(path, sizeof(path), k);
		pin_expect(pexp, k);
		verify_file(when, path, pexp, PIN_LEN, NULL, &vc);
	}
	printf("# %s: %d writer files, %d new files, %d cold files, %d files of key B, %d files of key A with a block of key B: %llu fsynced bytes checked, %llu wrong\n",
	       when, WRITERS * FILES_PER_WRITER, sh->nnew, COLD_FILES,
	       OTHER_FILES, sh->pins ? PIN_FILES : 0, vc.checked, vc.lost);
	free(expect);
	return vc;
}

static void note_verify(struct keyload_figures *fig, struct verify_count vc)
{
	fig->checked = vc.checked;
	if (vc.lost > fig->lost)
		fig->lost = vc.lost;
}

/*
 * Open every entry of key A's directory by the no-key name readdir gives
 * now that the key is ABSENT: each must fail with ENOKEY.  Returns how many.
 */
static long open_nokey_names(struct keyload_figures *fig)
{
	char path[PATH_MAX];
	struct dirent *de;
	long n = 0;
	DIR *d;
	int fd, e;

	d = opendir(enc);
	if (!CHECK(d != NULL, "opendir %s without the key: " LAB_ERR_FMT, enc,
		   LAB_ERR_ARGS(errno)))
		return 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		CHECK(strcmp(de->d_name, "w0a") != 0,
		      "readdir of %s without the key shows the plaintext name w0a",
		      enc);
		PATHF(path, "%s/%s", enc, de->d_name);
		errno = 0;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		e = errno;
		if (fd >= 0) {
			CHECK(0, "open %s by its no-key name: success without the key",
			      path);
			close(fd);
			continue;
		}
		if (CHECK(e == ENOKEY, "open %s by its no-key name: " LAB_ERR_FMT
			  ", expected ENOKEY", path, LAB_ERR_ARGS(e)))
			fig->enokey++;
		n++;
	}
	closedir(d);
	return n;
}

/*
 * The removal sequence of generic/580, after the race, with key A present
 * and nothing open: a removal with a file open, then a second one once it
 * is closed; then the key is added again.  Counts into *@fig.
 */

/*
 * With every file closed, an inode may still be held for a moment: btrfs
 * drops some inode references from its cleaner thread (delayed iputs),
 * which drop_caches does not wait for. FILES_BUSY then means "try again
 * later" (fscrypt.rst); try again, for at most RETRY_BUSY_TRIES x 100 ms,
 * after a sync that wakes the cleaner (BTRFS_IOC_SYNC) and a cache drop.
 * If the last inode goes between two tries, fscrypt completes the removal
 * itself and the next try finds no key (ENOKEY): that is success.  A key
 * still busy after that is a failure of the caller's check.
 */
#define RETRY_BUSY_TRIES 30
static void retry_busy_removal(uint32_t *flags)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY);
	int tries, r;

	for (tries = 1; tries <= RETRY_BUSY_TRIES &&
	     (*flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY); tries++) {
		if (fd >= 0)
			CHECK_OK(ioctl(fd, BTRFS_IOC_SYNC, NULL), "BTRFS_IOC_SYNC %s",
				 mnt);
		CHECK_OK(lab_drop_caches("3"), "drop caches");
		usleep(100 * 1000);
		*flags = 0;
		r = lab_remove_key(mnt, key_id, flags);
		if (r < 0 && errno == ENOKEY) {
			/*
			 * The last inode went between two tries, and with
			 * its last active reference fscrypt finished the
			 * removal the busy one started: nothing is left to
			 * remove (the caller checks that the key is absent).
			 */
			printf("# removal with all files closed: completed by fscrypt when the last inode went (try %d: ENOKEY)\n",
			       tries);
			break;
		}
		if (!CHECK_OK(r, "remove the key again (try %d), all files closed",
			      tries))
			break;
	}
	printf("# removal with all files closed: busy at first, flags 0x%x after %d more tr%s\n",
	       *flags, tries - 1, tries == 2 ? "y" : "ies");
	if (fd >= 0)
		close(fd);
}

static void removal_sequence(struct keyload_figures *fig)
{
	static unsigned char buf[SMALL_LEN + 1], expect[SMALL_LEN];
	struct wfile *wf = &sh->wf[0][0];
	unsigned char piece[100];
	char path[PATH_MAX], cold[PATH_MAX], newp[PATH_MAX];
	uint32_t flags = 0;
	long names;
	int fd, fd2, e;

	wfile_path(path, sizeof(path), 0, 0);
	cold_path(cold, sizeof(cold), 0);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (!CHECK_OK(fd, "open %s for the removal sequence", path))
		return;

	/* 1. a file is open: the removal is incomplete */
	if (!CHECK_OK(lab_remove_key(mnt, key_id, &flags),
		      "remove the key, %s open", path)) {
		close(fd);
		return;
	}
	if (flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY)
		fig->removals_busy++;
	CHECK(flags == FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY,
	      "removal with %s open: status flags 0x%x, expected FILES_BUSY (0x%x)",
	      path, flags, FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY);
	check_key_status("after the removal with a file open",
			 FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED);
	errno = 0;
	fd2 = open(cold, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd2 >= 0) {
		CHECK(0, "%s opened after the key was removed", cold);
		close(fd2);
	} else if (CHECK(e == ENOKEY, "open %s, key incompletely removed: "
			 LAB_ERR_FMT ", expected ENOKEY", cold, LAB_ERR_ARGS(e))) {
		fig->enokey++;
	}
	PATHF(newp, "%s/after-removal", enc);
	errno = 0;
	fd2 = open(newp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	e = errno;
	if (fd2 >= 0) {
		CHECK(0, "%s created after the key was removed", newp);
		close(fd2);
	} else if (CHECK(e == ENOKEY, "create %s, key incompletely removed: "
			 LAB_ERR_FMT ", expected ENOKEY", newp,
			 LAB_ERR_ARGS(e))) {
		fig->enokey++;
	}
	/* the open file still works, writeback and fsync included */
	fill_pattern(piece, sizeof(piece), 0x580);
	if (CHECK_OK(pwrite_all(fd, piece, sizeof(piece), 5 * BLK - 10),
		     "write to %s after the removal", path) &&
	    CHECK_OK(fsync(fd), "fsync %s after the removal", path)) {
		memcpy(wf->durable + 5 * BLK - 10, piece, sizeof(piece));
		memset(wf->dirty + 5 * BLK - 10, 0, sizeof(piece));
	}
	if (CHECK(lab_pread_full(fd, buf, sizeof(piece), 5 * BLK - 10) ==
		  (ssize_t)sizeof(piece), "read %s after the removal", path))
		CHECK(!memcmp(buf, piece, sizeof(piece)),
		      "%s: the write after the removal does not read back", path);
	close(fd);

	/* 2. nothing open: a second removal completes */
	flags = 0;
	if (!CHECK_OK(lab_remove_key(mnt, key_id, &flags),
		      "remove the key again, all files closed"))
		return;
	if (flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY) {
		fig->removals_busy++;
		retry_busy_removal(&flags);
	}
	if (CHECK(flags == 0, "removal with all files closed: status flags 0x%x",
		  flags))
		fig->removals_complete++;
	check_key_status("after the removal with all files closed",
			 FSCRYPT_KEY_STATUS_ABSENT);
	/* the directory is locked too: plaintext names are not found */
	errno = 0;
	fd2 = open(path, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd2 >= 0) {
		CHECK(0, "%s opened by its plaintext name without the key", path);
		close(fd2);
	} else if (CHECK(e == ENOENT, "open %s by its plaintext name, key absent: "
			 LAB_ERR_FMT ", expected ENOENT", path, LAB_ERR_ARGS(e))) {
		fig->enoent++;
	}
	names = open_nokey_names(fig);
	CHECK(names >= WRITERS * FILES_PER_WRITER + COLD_FILES,
	      "%ld entries in %s without the key, expected at least %d", names,
	      enc, WRITERS * FILES_PER_WRITER + COLD_FILES);
	/* key B stays */
	CHECK(lab_key_status(mnt, key_id_b) == FSCRYPT_KEY_STATUS_PRESENT,
	      "key B is not present after key A's removal");
	other_path(newp, sizeof(newp), 0);
	read_back("key A absent, key B stays", newp, SMALL_LEN, other_seed(0),
		  buf, expect);

	/* 3. back */
	if (CHECK_OK(lab_add_raw_key(mnt, master, sizeof(master), key_id),
		     "add the key after the complete removal")) {
		fig->cycles++;
		check_key_status("after re-adding the removed key",
				 FSCRYPT_KEY_STATUS_PRESENT);
	}
	printf("# removal sequence: %ld entries refused by their no-key names\n",
	       names);
}

/* Create the files of the run: fill_pattern(@seed) of @len, fsynced. */
static int make_file(const char *path, size_t len, uint32_t seed)
{
	unsigned char *buf = lab_pattern(len, seed);
	int ok;

	ok = CHECK_OK(write_file(path, buf, len), "create %s", path) &&
	     CHECK_OK(fsync_path(path), "fsync %s", path);
	free(buf);
	return ok;
}

/* ---- a file whose extents are under two master keys ------------------------------- */

/*
 * A file of key A with a block of key B.  With per-extent keys, a
 * FICLONERANGE from a file of key B gives it one (the policies differ in
 * the key only); then a dedupe finds the contents different, key B's
 * policy on the file is refused (EEXIST), and removing key B must lose
 * nothing: the block reads ENOKEY while key B is away, the rest of the
 * file reads, and everything reads back once key B is added again.  With
 * per-inode keys, the clone and the dedupe are refused (EOPNOTSUPP).
 */
static void two_key_file(int per_extent)
{
	struct {
		struct file_dedupe_range r;
		struct file_dedupe_range_info info;
	} dd;
	struct file_clone_range fcr;
	struct fscrypt_policy_v2 pol;
	struct verify_count vc = { 0, 0 };
	char a[PATH_MAX], b[PATH_MAX];
	unsigned char *expect = lab_pattern(4 * BLK, 0x2b2b);
	unsigned char *bexpect = lab_pattern(4 * BLK, 0x2b2b);
	unsigned char blk[BLK];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	int fa = -1, fb = -1, fd, tries;
	uint32_t flags = 0;
	size_t k;

	PATHF(a, "%s/mix-a", enc);
	PATHF(b, "%s/mix-b", encb);
	if (!make_file(a, 4 * BLK, 0x2b2b) || !make_file(b, 4 * BLK, 0x2b2b))
		goto out;
	fa = open(a, O_RDWR | O_CLOEXEC);
	fb = open(b, O_RDWR | O_CLOEXEC);
	if (!CHECK_OK(fa, "open %s", a) || !CHECK_OK(fb, "open %s", b))
		goto out;

	memset(&fcr, 0, sizeof(fcr));
	fcr.src_fd = fb;
	fcr.src_length = BLK;
	fcr.dest_offset = 2 * BLK;
	if (!per_extent)
		CHECK_ERRNO(ioctl(fa, FICLONERANGE, &fcr), EOPNOTSUPP,
			    "FICLONERANGE of a block of %s (key B) into %s (key A)", b, a);
	else if (CHECK_OK(ioctl(fa, FICLONERANGE, &fcr),
			  "FICLONERANGE of a block of %s (key B) into %s (key A)", b, a))
		memcpy(expect + 2 * BLK, bexpect, BLK);	/* b's block 0 */

	memset(&dd, 0, sizeof(dd));
	dd.r.src_length = 4 * BLK;
	dd.r.dest_count = 1;
	dd.info.dest_fd = fa;
	if (CHECK_OK(ioctl(fb, FIDEDUPERANGE, &dd),
		     "FIDEDUPERANGE of %s (key B) into %s (key A)", b, a))
		CHECK(dd.info.status == (per_extent ? FILE_DEDUPE_RANGE_DIFFERS : -EOPNOTSUPP),
		      "FIDEDUPERANGE of %s (key B) into %s (key A): status %d, expected %d",
		      b, a, dd.info.status,
		      per_extent ? FILE_DEDUPE_RANGE_DIFFERS : -EOPNOTSUPP);

	lab_default_policy(&pol, key_id_b);
	CHECK_ERRNO(lab_set_policy_v2(a, &pol), EEXIST, "key B's policy on %s (key A)", a);
	close(fa);
	close(fb);
	fa = fb = -1;
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	verify_file("file of key A with a block of key B", a, expect, 4 * BLK, NULL, &vc);
	if (!per_extent)
		goto out;

	/* key B away: its block of a reads ENOKEY, nothing else changes */
	for (tries = 0; tries < 30; tries++) {
		CHECK_OK(lab_drop_caches("3"), "drop caches");
		if (!CHECK_OK(lab_remove_key(mnt, key_id_b, &flags), "remove key B"))
			goto out;
		if (lab_key_status(mnt, key_id_b) == FSCRYPT_KEY_STATUS_ABSENT)
			break;
		lab_sleep_ms(100);
	}
	CHECK(lab_key_status(mnt, key_id_b) == FSCRYPT_KEY_STATUS_ABSENT,
	      "key B still %d after %d removals, all its files closed",
	      lab_key_status(mnt, key_id_b), tries + 1);
	fd = open(a, O_RDONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open %s without key B", a)) {
		for (k = 0; k < 4; k++) {
			ssize_t r;

			errno = 0;
			r = pread(fd, blk, BLK, (off_t)(k * BLK));
			if (k == 2)
				EXPECT_ERRNO(r, errno, ENOKEY,
					     "%s: read of the key B block without key B", a);
			else
				CHECK(r == BLK && !memcmp(blk, expect + k * BLK, BLK),
				      "%s: block %zu without key B: %zd bytes, %s", a, k,
				      r, r == BLK ? "different" : strerror(errno));
		}
		close(fd);
	}
	if (CHECK_OK(lab_add_raw_key(mnt, master_b, sizeof(master_b), id), "add key B again")) {
		CHECK_OK(lab_drop_caches("3"), "drop caches");
		verify_file("key B back", a, expect, 4 * BLK, NULL, &vc);
		verify_file("key B back", b, bexpect, 4 * BLK, NULL, &vc);
	}
out:
	free(expect);
	free(bexpect);
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
}

/*
 * The pin files (per-extent keys): PIN_LEN bytes of key A each, block
 * PIN_BLK of which a FICLONERANGE from block 0 of file k of key B; fsynced.
 * The remover keeps them open (remover_b_cycle()).
 */
static int make_pins(void)
{
	struct file_clone_range fcr;
	unsigned char pexp[PIN_LEN];
	struct verify_count vc = { 0, 0 };
	char path[PATH_MAX], bpath[PATH_MAX];
	int k, fd, fb, ok;

	for (k = 0; k < PIN_FILES; k++) {
		pin_path(path, sizeof(path), k);
		other_path(bpath, sizeof(bpath), k);
		if (!make_file(path, PIN_LEN, pin_seed(k)))
			return 0;
		fd = open(path, O_RDWR | O_CLOEXEC);
		fb = open(bpath, O_RDONLY | O_CLOEXEC);
		memset(&fcr, 0, sizeof(fcr));
		fcr.src_fd = fb;
		fcr.src_length = BLK;
		fcr.dest_offset = PIN_BLK * BLK;
		ok = CHECK_OK(fd, "open %s", path) && CHECK_OK(fb, "open %s", bpath) &&
		     CHECK_OK(ioctl(fd, FICLONERANGE, &fcr),
			      "FICLONERANGE of block 0 of %s (key B) into %s (key A)", bpath,
			      path) &&
		     CHECK_OK(fsync(fd), "fsync %s", path);
		if (fd >= 0)
			close(fd);
		if (fb >= 0)
			close(fb);
		if (!ok)
			return 0;
		pin_expect(pexp, k);
		if (!verify_file("a pin file", path, pexp, PIN_LEN, NULL, &vc))
			return 0;
	}
	sh->pins = 1;
	printf("# %d files of key A with block %d cloned from a file of key B: they pin key B while the remover holds them\n",
	       PIN_FILES, PIN_BLK);
	return 1;
}

/* ---- one run ---------------------------------------------------------------------- */

static long sum_writers(const long *v)
{
	long s = 0;
	int w;

	for (w = 0; w < WRITERS; w++)
		s += v[w];
	return s;
}

static void print_counts(struct keyload_figures *fig)
{
	long writes = sum_writers(sh->writes), fsyncs = sum_writers(sh->fsyncs);
	long reopen_nokey = sum_writers(sh->reopen_nokey);
	long reopen_noent = sum_writers(sh->reopen_noent);

	printf("# writers: %ld writes, %ld fsyncs, %ld sync_file_range, %ld reopens (%ld ENOKEY, %ld ENOENT without the key)\n",
	       writes, fsyncs, sum_writers(sh->ranges), sum_writers(sh->reopens),
	       reopen_nokey, reopen_noent);
	printf("# creator: %ld files created (%ld ENOKEY without the key), %ld checked (%ld ENOKEY, %ld ENOENT without the key)\n",
	       sh->creates, sh->create_nokey, sh->checks, sh->check_nokey,
	       sh->check_noent);
	printf("# remover: %ld removals (%ld with FILES_BUSY), %ld adds; cold files: %ld ENOKEY with the key removed, %ld read back after re-adding; %ld reads of key B's files with key A removed\n",
	       sh->removals, sh->removals_busy, sh->adds, sh->cold_nokey,
	       sh->cold_reads, sh->other_reads);
	printf("# dropper: %ld drops\n", sh->drops);
	if (sh->pins)
		printf("# key B pinned by files of key A: %ld removals of key B (%ld FILES_BUSY, pinned by the %d open files of key A holding its extents), %ld re-adds; with key B away, %ld opens of its own files refused, the pinned block read %ld times and refused (ENOKEY) %ld times; %ld pin files read back whole after\n",
		       sh->b_removals, sh->b_pinned, PIN_FILES, sh->b_adds, sh->b_refused,
		       sh->pin_reads_ok, sh->pin_reads_nokey, sh->pin_checks);
	CHECK(!sh->pins || sh->adds < B_CYCLE_EVERY ||
	      (sh->b_removals > 0 && sh->b_pinned > 0),
	      "key B was removed %ld times beside open files of key A holding its extents, and never reported FILES_BUSY: did they pin it?",
	      sh->b_removals);
	fig->b_removals += sh->b_removals;
	fig->b_pinned += sh->b_pinned;
	fig->pin_reads_ok += sh->pin_reads_ok;
	fig->pin_reads_nokey += sh->pin_reads_nokey;
	CHECK(writes > 0 && fsyncs > 0, "the writers got nothing done");
	CHECK(sh->removals > 0, "the key was never removed");
	CHECK(reopen_nokey + reopen_noent + sh->create_nokey + sh->check_nokey +
	      sh->check_noent + sh->cold_nokey > 0,
	      "no open or create ever failed for want of the key: did the removals do anything?");
	fig->cycles += sh->adds;
	fig->removals_busy += sh->removals_busy;
	fig->enokey += reopen_nokey + sh->create_nokey + sh->check_nokey +
		       sh->cold_nokey;
	fig->enoent += reopen_noent + sh->check_noent;
}

static void progress(const char *mode, long long start, int run_s)
{
	lab_console_line("LAB-PROGRESS keyload %s [%llds/%ds]: %ld cycles, %ld writes, %ld fsyncs, %ld refused without the key\n",
		     mode, (lab_now_ms() - start) / 1000, run_s, sh->adds,
		     sum_writers(sh->writes), sum_writers(sh->fsyncs),
		     sum_writers(sh->reopen_nokey) + sum_writers(sh->reopen_noent) +
		     sh->create_nokey + sh->check_nokey + sh->check_noent +
		     sh->cold_nokey);
}

/* Let the load run @run_s seconds; stop the remover first, then the rest. */
static int run_load(pid_t *pids, const char *mode, int run_s,
		    struct keyload_figures *fig)
{
	long long start = lab_now_ms(), end = start + run_s * 1000LL, next, t;

	next = progress_s ? start + progress_s * 1000LL : end;
	for (;;) {
		t = lab_now_ms();
		if (t >= end)
			break;
		lab_sleep_ms((long)((next < end ? next : end) - t));
		if (progress_s && lab_now_ms() >= next && lab_now_ms() < end) {
			progress(mode, start, run_s);
			next += progress_s * 1000LL;
		}
	}
	fig->secs += (lab_now_ms() - start + 500) / 1000;
	/* the writers keep their files open until the remover has stopped */
	sh->stop_remover = 1;
	t = lab_now_ms() + STOP_GRACE_S * 1000LL;
	while (!sh->remover_done && lab_now_ms() < t)
		lab_sleep_ms(50);
	sh->stop = 1;
	if (progress_s)
		progress(mode, start, run_s);
	return wait_children(pids, lab_now_ms() + STOP_GRACE_S * 1000LL);
}

static void print_figures(const char *what, const struct keyload_figures *f)
{
	printf("# figures %s: %ld cycles, %ld removals FILES_BUSY, %ld complete, %ld ENOKEY + %ld ENOENT seen, %llu fsynced bytes checked, %llu lost, %lld s of load; key B removed %ld times beside files of key A holding its extents, %ld of them FILES_BUSY (pinned), its pinned blocks read %ld times and refused %ld times while it was away\n",
	       what, f->cycles, f->removals_busy, f->removals_complete,
	       f->enokey, f->enoent, f->checked, f->lost, f->secs, f->b_removals,
	       f->b_pinned, f->pin_reads_ok, f->pin_reads_nokey);
}

/* Returns -1 if a child got stuck in the kernel: then nothing is safe. */
static int run_variant(const char *label, const char *mode, const char *opts,
		       int per_extent, int run_s, struct keyload_figures *fig)
{
	struct lab_fscrypt_fs fs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
		.mount_opts = opts,
	};
	pid_t pids[CHILDREN];
	char path[PATH_MAX], marker[80];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint64_t flags = 0;
	struct stat st;
	int w, f, i, k;

	memset(fig, 0, sizeof(*fig));
	printf("== %s: %d s\n", label, run_s);
	lab_random(master, sizeof(master));
	lab_random(master_b, sizeof(master_b));
	lab_fscrypt_fs_setup(&fs, dev, mnt, NULL, master, sizeof(master), key_id);
	PATHF(enc, "%s/enc", mnt);
	PATHF(encb, "%s/enc-b", mnt);
	if (!CHECK_OK(mkdir(enc, 0755), "mkdir %s", enc) ||
	    !CHECK_OK(lab_set_policy(enc, key_id), "policy on %s", enc) ||
	    !CHECK_OK(lab_add_raw_key(mnt, master_b, sizeof(master_b), key_id_b),
		      "add key B") ||
	    !CHECK_OK(mkdir(encb, 0755), "mkdir %s", encb) ||
	    !CHECK_OK(lab_set_policy(encb, key_id_b), "policy on %s", encb))
		goto out_umount;
	memset(sh, 0, sizeof(*sh));
	for (w = 0; w < WRITERS; w++) {
		for (f = 0; f < FILES_PER_WRITER; f++) {
			fill_pattern(sh->wf[w][f].durable, FSIZE,
				     0x77000000u + (uint32_t)(w * FILES_PER_WRITER + f));
			wfile_path(path, sizeof(path), w, f);
			if (!make_file(path, FSIZE,
				       0x77000000u + (uint32_t)(w * FILES_PER_WRITER + f)))
				goto out_umount;
		}
	}
	for (k = 0; k < COLD_FILES; k++) {
		cold_path(path, sizeof(path), k);
		if (!make_file(path, SMALL_LEN, cold_seed(k)))
			goto out_umount;
	}
	for (k = 0; k < OTHER_FILES; k++) {
		other_path(path, sizeof(path), k);
		if (!make_file(path, SMALL_LEN, other_seed(k)))
			goto out_umount;
	}
	/* the files really are encrypted the way this run is about */
	wfile_path(path, sizeof(path), 0, 0);
	if (CHECK_OK(stat(path, &st), "stat %s", path) &&
	    CHECK_OK(lab_btrfs_inode_flags(path, st.st_ino, &flags),
		     "inode flags of %s", path))
		CHECK((flags & LAB_BTRFS_INODE_ENCRYPT) &&
		      !(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT) == !per_extent,
		      "%s: inode flags 0x%llx, expected ENCRYPT %s ENCRYPT_PER_EXTENT",
		      path, (unsigned long long)flags,
		      per_extent ? "with" : "without");

	two_key_file(per_extent);
	if (per_extent && !make_pins())
		goto out_umount;

	snprintf(marker, sizeof(marker), "lab-key-removal-writeback-%d-%s",
		 getpid(), per_extent ? "extent" : "inode");
	run("echo %s > /dev/kmsg", marker);
	for (w = 0; w < WRITERS; w++) {
		for (f = 0; f < FILES_PER_WRITER; f++) {
			wfile_path(path, sizeof(path), w, f);
			fds[w][f] = open(path, O_RDWR | O_CLOEXEC);
			if (!CHECK_OK(fds[w][f], "open %s", path))
				goto out_umount;
		}
	}
	for (i = 0; i < CHILDREN; i++)
		pids[i] = lab_child_start(child_main, (void *)(intptr_t)i);
	/* only the writers hold the files, so that the end can close them all */
	for (w = 0; w < WRITERS; w++)
		for (f = 0; f < FILES_PER_WRITER; f++) {
			close(fds[w][f]);
			fds[w][f] = -1;
		}
	if (run_load(pids, mode, run_s, fig)) {
		printf("# a child is stuck: not touching the filesystem any more\n");
		print_figures(mode, fig);
		return -1;
	}
	print_counts(fig);

	CHECK(lab_key_status(mnt, key_id) == FSCRYPT_KEY_STATUS_PRESENT,
	      "the key is not present after the remover re-added it");
	note_verify(fig, verify_all("after the race, the key re-added"));
	removal_sequence(fig);
	if (lab_key_status(mnt, key_id) == FSCRYPT_KEY_STATUS_PRESENT)
		note_verify(fig, verify_all("after a complete removal and re-adding"));
	CHECK(run("dmesg | sed -n '/%s/,$p' | grep -E 'BTRFS (error|critical|warning)|fscrypt.*(rror|Unable)'",
		  marker) != 0,
	      "the kernel logged btrfs or fscrypt errors during the race (above)");
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		goto out_figures;
	if (!CHECK_OK(lab_fscrypt_fs_mount(&fs, dev, mnt, NULL), "mount again"))
		goto out_figures;
	if (CHECK_OK(lab_add_raw_key(mnt, master, sizeof(master), id),
		     "add key A after the remount") &&
	    CHECK_OK(lab_add_raw_key(mnt, master_b, sizeof(master_b), id),
		     "add key B after the remount"))
		note_verify(fig, verify_all("after a remount"));
out_umount:
	for (w = 0; w < WRITERS; w++)
		for (f = 0; f < FILES_PER_WRITER; f++)
			if (fds[w][f] >= 0) {
				close(fds[w][f]);
				fds[w][f] = -1;
			}
	if (CHECK_OK(lab_umount(mnt), "umount"))
		lab_btrfs_check_clean(dev, "the filesystem after the removal race");
out_figures:
	print_figures(mode, fig);
	return 0;
}

/* The figures file: $KEYLOAD_FIGURES, else $RESULTS/keyload-figures.tsv. */
static void write_figures(const struct keyload_figures *t)
{
	const char *path = getenv("KEYLOAD_FIGURES");
	const char *results = getenv("RESULTS");
	char buf[PATH_MAX];
	FILE *out;

	if (!path || !*path) {
		if (!results || !*results) {
			printf("# neither KEYLOAD_FIGURES nor RESULTS is set: no figures file\n");
			return;
		}
		PATHF(buf, "%s/keyload-figures.tsv", results);
		path = buf;
	}
	out = fopen(path, "w");
	if (!CHECK(out != NULL, "create %s: " LAB_ERR_FMT, path,
		   LAB_ERR_ARGS(errno)))
		return;
	fprintf(out, "cycles\t%ld\n", t->cycles);
	fprintf(out, "removals_busy\t%ld\n", t->removals_busy);
	fprintf(out, "removals_complete\t%ld\n", t->removals_complete);
	fprintf(out, "enokey_seen\t%ld\n", t->enokey + t->enoent);
	fprintf(out, "fsynced_bytes_checked\t%llu\n", t->checked);
	fprintf(out, "bytes_lost\t%llu\n", t->lost);
	fprintf(out, "duration_s\t%lld\n", t->secs);
	fprintf(out, "b_removals\t%ld\n", t->b_removals);
	fprintf(out, "b_removals_pinned\t%ld\n", t->b_pinned);
	fprintf(out, "pinned_reads\t%ld\n", t->pin_reads_ok);
	fprintf(out, "pinned_reads_enokey\t%ld\n", t->pin_reads_nokey);
	CHECK(fclose(out) == 0, "write %s: " LAB_ERR_FMT, path,
	      LAB_ERR_ARGS(errno));
	printf("# figures written to %s\n", path);
}

static void add_figures(struct keyload_figures *t,
			const struct keyload_figures *f)
{
	t->cycles += f->cycles;
	t->removals_busy += f->removals_busy;
	t->removals_complete += f->removals_complete;
	t->enokey += f->enokey;
	t->enoent += f->enoent;
	t->checked += f->checked;
	t->lost += f->lost;
	t->secs += f->secs;
	t->b_removals += f->b_removals;
	t->b_pinned += f->b_pinned;
	t->pin_reads_ok += f->pin_reads_ok;
	t->pin_reads_nokey += f->pin_reads_nokey;
}

int main(void)
{
	struct keyload_figures fig, total = { 0 };
	int w, f, stuck, ret, run_extent, run_inode;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	run_extent = (int)env_seconds("KEYLOAD_SECONDS", RUN_S_EXTENT, 1);
	run_inode = (int)env_seconds("KEYLOAD_SECONDS", RUN_S_INODE, 1);
	progress_s = env_seconds("KEYLOAD_PROGRESS", 0, 0);
	for (w = 0; w < WRITERS; w++)
		for (f = 0; f < FILES_PER_WRITER; f++)
			fds[w][f] = -1;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		lab_die("mmap: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	rng_seed();

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0) {
		/*
		 * Key groups of two extents: writeback then derives a key
		 * for every other extent it writes, as a key per extent did
		 * for every one, so the race with mk_sem stays frequent, and
		 * the extents between take the group's key.
		 */
		stuck = run_variant("per-extent keys, key groups of two extents "
				    "(mount option fscrypt_extents_per_key=2)",
				    "per-extent", "fscrypt_extents_per_key=2", 1,
				    run_extent, &fig);
		add_figures(&total, &fig);
		if (!stuck) {
			stuck = run_variant("per-inode keys (mount option "
					    LAB_BTRFS_PER_INODE_KEYS_OPT ")",
					    "per-inode", LAB_BTRFS_PER_INODE_KEYS_OPT,
					    0, run_inode, &fig);
			add_figures(&total, &fig);
		}
	} else {
		printf("# no %s: btrfs has per-inode keys only; running that variant alone\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
		stuck = run_variant("per-inode keys (the only mode)", "per-inode",
				    NULL, 0, run_inode, &fig);
		add_figures(&total, &fig);
	}
	print_figures("all key modes", &total);
	CHECK(total.lost == 0, "%llu fsynced bytes lost", total.lost);
	write_figures(&total);
	ret = lab_result("btrfs_fscrypt_key_removal_writeback");
	if (stuck) {
		/* the exit handlers would unmount, and hang with the child */
		fflush(NULL);
		_exit(ret);
	}
	return ret;
}
