// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_key_removal_writeback - writeback and key setup racing with
 * FS_IOC_REMOVE_ENCRYPTION_KEY / FS_IOC_ADD_ENCRYPTION_KEY, under lockdep.
 *
 * With per-extent keys (mounted with fscrypt_extents_per_key=2, so that
 * groups are short), writeback derives a key whenever a file starts a key
 * group (cow_file_range -> fscrypt_prepare_new_extent ->
 * fscrypt_derive_extent_key, under the master key's mk_sem): every other
 * extent, and the first one after the inode was loaded, e.g. after the
 * dropper evicted a closed file.  Meanwhile key setup of an inode that is
 * opened holds mk_sem across GFP_KERNEL allocations, and key removal and
 * re-adding take it for writing.  For a fixed time, concurrently:
 *
 *  - WRITERS processes make buffered writes of small random pieces (from a
 *    few bytes to a few blocks, aligned or not) to two files each, one
 *    kept open all along and one closed and reopened now and then, with
 *    fsync and sync_file_range in between;
 *  - a creator makes new files (key setup of a new inode), fsyncs them,
 *    and reopens older ones (key setup of an existing inode) and checks
 *    their contents;
 *  - a remover loops FS_IOC_REMOVE_ENCRYPTION_KEY / FS_IOC_ADD_ENCRYPTION_KEY:
 *    every removal must return 0, with no status flag but
 *    FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY (files stay open);
 *  - a dropper writes 3 to /proc/sys/vm/drop_caches every second or two.
 *
 * While the key is removed, opening a file that is not open and creating
 * one fail (ENOKEY, or ENOENT for a name that has become a no-key name);
 * that is expected, counted, and must have happened at least once (else
 * the removals did nothing).  Any other error of a write, fsync,
 * sync_file_range or read is a failure, and so is a file opened with the
 * key that does not read back what was written.
 *
 * Writers record every byte whose fsync succeeded.  At the end the key is
 * re-added, and every such byte must read back, after dropping caches,
 * after a complete removal (all files closed: status 0, key ABSENT) and
 * re-adding, and after a remount; so must every new file.
 *
 * Then the same with per-inode keys (mount option fscrypt_per_inode_keys).
 * A lockdep report (or any splat) fails the run through the console check
 * of the runner: the test passing on the debug kernel is the proof that
 * this locking is sound.  A child still running long after the stop (a
 * deadlock) fails the test.
 */
#include "btrfs_progs.h"
#include "btrfs_items.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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
#define RUN_S_EXTENT 30
#define RUN_S_INODE 20
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

/* Every counter has one writer (a child); the parent reads at the end. */
struct shared {
	volatile int stop;
	long removals, removals_busy, adds, drops;
	long writes[WRITERS], fsyncs[WRITERS], ranges[WRITERS];
	long reopens[WRITERS], reopen_nokey[WRITERS];
	long creates, create_nokey, checks, check_nokey;
	int nnew;
	struct newfile nf[MAX_NEW];
	struct wfile wf[WRITERS][FILES_PER_WRITER];
};

static struct shared *sh;
static char enc[PATH_MAX];
static uint8_t master[LAB_MASTER_KEY_SIZE];
static uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];

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

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The errors a file access may get while the key is removed. */
static int keyless_errno(int e)
{
	return e == ENOKEY || e == ENOENT;
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
				sh->reopen_nokey[w]++;
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
			sh->check_nokey++;
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
				sleep_ms(20);
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

static int remover(void)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint32_t flags;

	while (!sh->stop) {
		sleep_ms(100 + rnd(300));
		flags = 0;
		if (!CHECK_OK(lab_remove_key(mnt, key_id, &flags),
			      "remover: FS_IOC_REMOVE_ENCRYPTION_KEY"))
			break;
		sh->removals++;
		if (flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY)
			sh->removals_busy++;
		CHECK(!(flags & ~FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY),
		      "remover: removal status flags 0x%x, expected 0 or FILES_BUSY (0x%x)",
		      flags, FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY);
		sleep_ms(100 + rnd(300));
		/* always ends with the key there */
		if (!CHECK_OK(lab_add_raw_key(mnt, master, sizeof(master), id),
			      "remover: FS_IOC_ADD_ENCRYPTION_KEY"))
			break;
		sh->adds++;
		CHECK(!memcmp(id, key_id, sizeof(id)),
		      "remover: the key came back with another identifier");
	}
	return lab_failures;
}

static int dropper(void)
{
	int fd;

	while (!sh->stop) {
		sleep_ms(1000 + rnd(1500));
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

static pid_t start_child(int i)
{
	pid_t pid;
	int ret, w, f;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		lab_die("fork: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (pid > 0)
		return pid;
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
		ret = writer(i);
	else if (i == WRITERS)
		ret = creator();
	else if (i == WRITERS + 1)
		ret = remover();
	else
		ret = dropper();
	fflush(NULL);
	/* never the parent's exit handlers (they unmount) */
	_exit(ret > 100 ? 100 : ret);
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
			if (now_ms() >= deadline_ms)
				break;
			sleep_ms(50);
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

/* Every byte fsynced, and every new file, reads back. */
static void verify_all(const char *when)
{
	char path[PATH_MAX];
	unsigned char *expect = lab_xmalloc(MAX_NEW_LEN);
	size_t len, i, bad, first, checked;
	unsigned char *got;
	int w, f, k;

	CHECK_OK(lab_drop_caches("3"), "drop caches");
	for (w = 0; w < WRITERS; w++) {
		for (f = 0; f < FILES_PER_WRITER; f++) {
			const struct wfile *wf = &sh->wf[w][f];

			wfile_path(path, sizeof(path), w, f);
			got = read_file(path, &len);
			if (!CHECK(got != NULL, "%s: read %s: " LAB_ERR_FMT, when,
				   path, LAB_ERR_ARGS(errno)))
				continue;
			bad = checked = 0;
			first = FSIZE;
			for (i = 0; i < FSIZE; i++) {
				if (wf->dirty[i])
					continue;
				checked++;
				if (i >= len || got[i] != wf->durable[i]) {
					if (!bad++)
						first = i;
				}
			}
			CHECK(len == FSIZE, "%s: %s has %zu bytes, expected %u",
			      when, path, len, FSIZE);
			CHECK(bad == 0,
			      "%s: %s: %zu of the %zu fsynced bytes differ, the first at %zu",
			      when, path, bad, checked, first);
			free(got);
		}
	}
	for (k = 0; k < sh->nnew; k++) {
		if (!sh->nf[k].done)
			continue;
		newfile_path(path, sizeof(path), k);
		fill_pattern(expect, sh->nf[k].len, newfile_seed(k));
		CHECK_FILE_EQUALS(path, expect, sh->nf[k].len);
	}
	printf("# %s: checked %d writer files and %d new files\n", when,
	       WRITERS * FILES_PER_WRITER, sh->nnew);
	free(expect);
}

/*
 * With every file closed, a removal must complete: status 0 and the key
 * ABSENT (a second try is allowed after a sync, since closing may leave
 * inodes to be evicted).  Names are then no-key names.
 */
static void remove_completely(void)
{
	char path[PATH_MAX];
	uint32_t flags = 0;
	int fd;

	sync();
	if (!CHECK_OK(lab_remove_key(mnt, key_id, &flags),
		      "remove the key, all files closed"))
		return;
	if (flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY) {
		printf("# removal with all files closed: flags 0x%x, trying again\n",
		       flags);
		CHECK_OK(lab_drop_caches("3"), "drop caches");
		flags = 0;
		CHECK_OK(lab_remove_key(mnt, key_id, &flags),
			 "remove the key again, all files closed");
	}
	CHECK(flags == 0, "removal with all files closed: status flags 0x%x",
	      flags);
	CHECK(lab_key_status(mnt, key_id) == FSCRYPT_KEY_STATUS_ABSENT,
	      "key status after the removal with all files closed is %d, not ABSENT",
	      lab_key_status(mnt, key_id));
	wfile_path(path, sizeof(path), 0, 0);
	errno = 0;
	fd = open(path, O_RDONLY);
	CHECK(fd < 0 && keyless_errno(errno),
	      "open %s without the key: %s", path,
	      fd >= 0 ? "success" : strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* ---- one run ---------------------------------------------------------------------- */

static void print_counts(void)
{
	long writes = 0, fsyncs = 0, ranges = 0, reopens = 0, reopen_nokey = 0;
	int w;

	for (w = 0; w < WRITERS; w++) {
		writes += sh->writes[w];
		fsyncs += sh->fsyncs[w];
		ranges += sh->ranges[w];
		reopens += sh->reopens[w];
		reopen_nokey += sh->reopen_nokey[w];
	}
	printf("# writers: %ld writes, %ld fsyncs, %ld sync_file_range, %ld reopens (%ld without the key)\n",
	       writes, fsyncs, ranges, reopens, reopen_nokey);
	printf("# creator: %ld files created (%ld refused without the key), %ld checked (%ld not opened without the key)\n",
	       sh->creates, sh->create_nokey, sh->checks, sh->check_nokey);
	printf("# remover: %ld removals (%ld with FILES_BUSY), %ld adds; dropper: %ld drops\n",
	       sh->removals, sh->removals_busy, sh->adds, sh->drops);
	CHECK(writes > 0 && fsyncs > 0, "the writers got nothing done");
	CHECK(sh->removals > 0, "the key was never removed");
	CHECK(reopen_nokey + sh->create_nokey + sh->check_nokey > 0,
	      "no open or create ever failed for want of the key: did the removals do anything?");
}

/* Returns -1 if a child got stuck in the kernel: then nothing is safe. */
static int run_variant(const char *label, const char *opts, int per_extent,
		       int run_s)
{
	struct lab_fscrypt_fs fs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
		.mount_opts = opts,
	};
	pid_t pids[CHILDREN];
	char path[PATH_MAX], marker[80];
	uint64_t flags = 0;
	struct stat st;
	int w, f, i;

	printf("== %s: %d s\n", label, run_s);
	lab_random(master, sizeof(master));
	lab_fscrypt_fs_setup(&fs, dev, mnt, NULL, master, sizeof(master), key_id);
	PATHF(enc, "%s/enc", mnt);
	if (!CHECK_OK(mkdir(enc, 0755), "mkdir %s", enc) ||
	    !CHECK_OK(lab_set_policy(enc, key_id), "policy on %s", enc))
		goto out_umount;
	memset(sh, 0, sizeof(*sh));
	for (w = 0; w < WRITERS; w++) {
		for (f = 0; f < FILES_PER_WRITER; f++) {
			fill_pattern(sh->wf[w][f].durable, FSIZE,
				     0x77000000u + (uint32_t)(w * FILES_PER_WRITER + f));
			wfile_path(path, sizeof(path), w, f);
			if (!CHECK_OK(write_file(path, sh->wf[w][f].durable, FSIZE),
				      "create %s", path) ||
			    !CHECK_OK(fsync_path(path), "fsync %s", path))
				goto out_umount;
		}
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
		pids[i] = start_child(i);
	/* only the writers hold the files, so that the end can close them all */
	for (w = 0; w < WRITERS; w++)
		for (f = 0; f < FILES_PER_WRITER; f++) {
			close(fds[w][f]);
			fds[w][f] = -1;
		}
	sleep_ms(run_s * 1000L);
	sh->stop = 1;
	if (wait_children(pids, now_ms() + STOP_GRACE_S * 1000LL)) {
		printf("# a child is stuck: not touching the filesystem any more\n");
		return -1;
	}
	print_counts();

	CHECK(lab_key_status(mnt, key_id) == FSCRYPT_KEY_STATUS_PRESENT,
	      "the key is not present after the remover re-added it");
	verify_all("after the race, the key re-added");
	remove_completely();
	if (CHECK_OK(lab_add_raw_key(mnt, master, sizeof(master), key_id),
		     "add the key after the complete removal"))
		verify_all("after a complete removal and re-adding");
	CHECK(run("dmesg | sed -n '/%s/,$p' | grep -E 'BTRFS (error|critical|warning)|fscrypt.*(rror|Unable)'",
		  marker) != 0,
	      "the kernel logged btrfs or fscrypt errors during the race (above)");
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		return 0;
	if (!CHECK_OK(lab_fscrypt_fs_mount(&fs, dev, mnt, NULL), "mount again"))
		return 0;
	if (CHECK_OK(lab_add_raw_key(mnt, master, sizeof(master), key_id),
		     "add the key after the remount"))
		verify_all("after a remount");
out_umount:
	for (w = 0; w < WRITERS; w++)
		for (f = 0; f < FILES_PER_WRITER; f++)
			if (fds[w][f] >= 0) {
				close(fds[w][f]);
				fds[w][f] = -1;
			}
	if (CHECK_OK(lab_umount(mnt), "umount"))
		lab_btrfs_check_clean(dev, "the filesystem after the removal race");
	return 0;
}

int main(void)
{
	int w, f, stuck, ret;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
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
				    "fscrypt_extents_per_key=2", 1, RUN_S_EXTENT);
		if (!stuck)
			stuck = run_variant("per-inode keys (mount option "
					    LAB_BTRFS_PER_INODE_KEYS_OPT ")",
					    LAB_BTRFS_PER_INODE_KEYS_OPT, 0,
					    RUN_S_INODE);
	} else {
		printf("# no %s: btrfs has per-inode keys only; running that variant alone\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
		stuck = run_variant("per-inode keys (the only mode)", NULL, 0,
				    RUN_S_INODE);
	}
	ret = lab_result("btrfs_fscrypt_key_removal_writeback");
	if (stuck) {
		/* the exit handlers would unmount, and hang with the child */
		fflush(NULL);
		_exit(ret);
	}
	return ret;
}
