// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_bounce_pool - btrfs writeback of encrypted files must not
 * wait forever on fscrypt's bounce-page pool.
 *
 * btrfs encrypts a whole write bio at submission
 * (fscrypt_encrypt_write_bio()); a bio holds up to 256 pages, the bounce-page
 * mempool 32 (fscrypto.num_prealloc_crypto_pages), and its pages come back
 * only when a bio completes.  If every bounce page may wait on the pool,
 * then under memory pressure (the page allocator failing, so bounce pages
 * come from the pool only) the 33rd page of a bio waits for pages that the
 * same, unsubmitted bio holds: writeback hangs.  Only the first page of a
 * bio may wait; later ones must not.
 *
 * The kernel's test-only knob /sys/module/fscrypto/parameters/
 * bounce_pool_only (bool) makes the pool's page allocator always fail.  The
 * test SKIPs, saying so, on a kernel without it.  With the knob set:
 *
 *   1. one writer: an 8 MiB encrypted file in 1 MiB buffered writes, then
 *      fsync (write bios of far more than 32 pages);
 *   2. two such writers at once, on two files;
 *
 * each in child processes with a 45 s deadline (a writer takes 1 to 4 s
 * under TCG): a writer still running then is a FAIL "writeback hung on the
 * bounce pool", and the two-writer step of that filesystem is not run (it
 * would only hang again, and the test must stay well under 3 minutes).
 * Then the knob is cleared (also on every failure path: an exit handler
 * restores it; a hung writer then gets 45 s to finish), caches are dropped
 * and every file must read back byte-exact, again after a remount.
 *
 * On btrfs with the default mount options (per-extent keys) and with
 * fscrypt_per_inode_keys.  What shows that the knob discriminates is the
 * series itself: with the old 0008 (every bounce page of a bio may wait on
 * the pool) both btrfs cases hang here, with the fix both finish in seconds
 * (reports/results/2026-12-05-status.md, "Review findings").  ext4 is no control: under this knob it
 * hangs on both kernels, because with unwritten extents (dioread_nolock,
 * the default) it frees the bounce pages of submitted bios only when the
 * whole io_end completes, i.e. after the writeback call that is waiting for
 * a bounce page; real memory pressure lets the pool's own allocations
 * reclaim, the knob does not.
 *
 * Keys, names and contents are random per run.
 */
#include "btrfs_progs.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEST_NAME "btrfs_fscrypt_bounce_pool"
#define KNOB "/sys/module/fscrypto/parameters/bounce_pool_only"
#define POOL_PARAM "/sys/module/fscrypto/parameters/num_prealloc_crypto_pages"
#define FILE_SIZE (8u << 20)
#define WRITE_SIZE (1u << 20)
#define MAX_WRITERS 2
/* A writer (write + fsync of FILE_SIZE) must be done by then. */
#define HANG_TIMEOUT_S 45
/* Once the knob is cleared, a hung writer gets this long to recover. */
#define RECOVER_TIMEOUT_S 45

struct writer {
	char path[PATH_MAX];
	unsigned char *data;
	size_t len;
	pid_t pid;
	int done;
	int hung;	/* was still running at the deadline */
};

static pid_t main_pid;
static char knob_orig[8] = "N";	/* what the knob said before the test */
static int knob_touched;
/* A writer could not be got out of the kernel: stop touching the fs. */
static int stuck;

/* ---- the knob ------------------------------------------------------------ */

/* "Y"/"N" (a bool module parameter) of the knob into @out, or -1. */
static int read_knob(char *out, size_t size)
{
	size_t len;
	char *s = read_file(KNOB, &len);

	if (!s)
		return -1;
	lab_pathf(out, size, "%.1s", s);
	free(s);
	return 0;
}

static int set_knob(int on)
{
	char now[8];

	knob_touched = 1;
	if (write_file(KNOB, on ? "1" : "0", 1)) {
		printf("write %d to %s: " LAB_ERR_FMT "\n", on, KNOB,
		       LAB_ERR_ARGS(errno));
		return -1;
	}
	if (read_knob(now, sizeof(now)))
		return -1;
	printf("%s = %s\n", KNOB, now);
	if (strcmp(now, on ? "Y" : "N") != 0) {
		printf("%s reads \"%s\" after writing %d\n", KNOB, now, on);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* Exit handler: never leave the page allocator of the pool failing. */
static void restore_knob(void)
{
	int on = strcmp(knob_orig, "Y") == 0;

	if (getpid() != main_pid || !knob_touched)
		return;
	if (write_file(KNOB, on ? "1" : "0", 1))
		printf("cleanup: cannot restore %s to %s: " LAB_ERR_FMT "\n",
		       KNOB, knob_orig, LAB_ERR_ARGS(errno));
	else
		printf("cleanup: %s restored to %s\n", KNOB, knob_orig);
	fflush(stdout);
}

/* ---- writers -------------------------------------------------------------- */

/* Child: FILE_SIZE bytes in WRITE_SIZE writes, then fsync. */
static int writer_child(void *arg)
{
	const struct writer *w = arg;
	size_t off;
	int fd, ret = 0;

	fd = open(w->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!CHECK_OK(fd, "create %s", w->path))
		return 1;
	for (off = 0; off < w->len; off += WRITE_SIZE) {
		size_t n = w->len - off < WRITE_SIZE ? w->len - off : WRITE_SIZE;

		if (!CHECK_OK(write_all(fd, w->data + off, n),
			      "write %zu bytes at %zu to %s", n, off, w->path)) {
			ret++;
			break;
		}
	}
	if (!ret && !CHECK_OK(fsync(fd), "fsync %s", w->path))
		ret++;
	if (!CHECK_OK(close(fd), "close %s", w->path))
		ret++;
	return ret;
}

/*
 * Wait for the writers not done yet until @deadline_ms.  With @report, a
 * writer still running then is a failure.  Returns how many still run.
 */
static int wait_writers(struct writer *w, int n, long long deadline_ms,
			const char *fs, int report)
{
	int i, code, running = 0;

	for (i = 0; i < n; i++) {
		if (w[i].done)
			continue;
		switch (lab_child_wait(w[i].pid, deadline_ms, &code)) {
		case LAB_CHILD_EXITED:
			w[i].done = 1;
			lab_failures += code;
			if (!report)
				printf("writer %d of %s finished once %s was cleared (exit %d)\n",
				       i + 1, w[i].path, KNOB, code);
			break;
		case LAB_CHILD_SIGNALED:
			w[i].done = 1;
			CHECK(0, "%s: writer %d of %s killed by signal %d (%s)",
			      fs, i + 1, w[i].path, code, strsignal(code));
			break;
		case LAB_CHILD_TIMEOUT:
			running++;
			w[i].hung = 1;
			if (report)
				CHECK(0, "%s: writeback hung on the bounce pool: writer %d (%u MiB in %u KiB writes + fsync of %s) not done after %d s with bounce_pool_only=1",
				      fs, i + 1, FILE_SIZE >> 20,
				      WRITE_SIZE >> 10, w[i].path,
				      HANG_TIMEOUT_S);
			break;
		}
	}
	return running;
}

/*
 * @n writers at once in @dir with the knob set; then clear it and check
 * what they wrote.  The writers' files stay in @w for a later check.
 * Returns -1 if the knob could not be set or a writer is stuck.
 */
static int run_writers(const char *fs, const char *dir, struct writer *w,
		       int n)
{
	long long start;
	char hex[17];
	uint32_t seed;
	int i, running;

	for (i = 0; i < n; i++) {
		lab_random_hex(hex, 8);
		PATHF(w[i].path, "%s/w%d-%s", dir, n, hex);
		w[i].len = FILE_SIZE;
		w[i].data = lab_xmalloc(w[i].len);
		lab_random(&seed, sizeof(seed));
		fill_pattern(w[i].data, w[i].len, seed);
		w[i].done = 0;
		w[i].hung = 0;
	}

	printf("%s: %d writer(s) at once, %u MiB each in %u KiB writes + fsync, bounce_pool_only=1\n",
	       fs, n, FILE_SIZE >> 20, WRITE_SIZE >> 10);
	if (!CHECK_OK(set_knob(1), "set %s", KNOB))
		return -1;
	start = lab_now_ms();
	for (i = 0; i < n; i++)
		w[i].pid = lab_child_start(writer_child, &w[i]);
	running = wait_writers(w, n, start + 1000LL * HANG_TIMEOUT_S, fs, 1);
	if (!running)
		printf("%s: %d writer(s) done in %lld ms\n", fs, n,
		       lab_now_ms() - start);
	CHECK_OK(set_knob(0), "clear %s", KNOB);
	if (running) {
		running = wait_writers(w, n,
				       lab_now_ms() + 1000LL * RECOVER_TIMEOUT_S,
				       fs, 0);
		for (i = 0; i < n; i++) {
			if (w[i].done)
				continue;
			if (!lab_child_kill(w[i].pid, 2000)) {
				printf("%s: writer %d is stuck in the kernel even with %s cleared\n",
				       fs, i + 1, KNOB);
				stuck = 1;
			}
			w[i].done = 1;
		}
		if (stuck)
			return -1;
	}
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	for (i = 0; i < n; i++)
		CHECK_FILE_EQUALS(w[i].path, w[i].data, w[i].len);
	return 0;
}

/* ---- one filesystem -------------------------------------------------------- */

static void fs_case(const struct lab_fscrypt_fs *fs, const char *label,
		    const char *dev, const char *mnt)
{
	struct writer w[1 + MAX_WRITERS];
	struct fscrypt_get_policy_ex_arg a;
	uint8_t key[64], id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char dir[PATH_MAX], hex[17];
	int i, nw = 0;

	printf("\n## %s\n", label);
	memset(w, 0, sizeof(w));
	lab_random(key, sizeof(key));
	lab_fscrypt_fs_setup(fs, dev, mnt, NULL, key, sizeof(key), id);
	lab_random_hex(hex, 8);
	PATHF(dir, "%s/enc-%s", mnt, hex);
	if (!CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir) ||
	    !CHECK_OK(lab_set_policy(dir, id), "set a v2 policy on %s", dir))
		goto out;

	if (run_writers(label, dir, &w[0], 1))
		goto out;
	if (w[0].hung) {
		printf("%s: not running %d writers at once: one already hung\n",
		       label, MAX_WRITERS);
		nw = 1;
	} else if (run_writers(label, dir, &w[1], MAX_WRITERS)) {
		goto out;
	} else {
		nw = 1 + MAX_WRITERS;
	}

	/* Encrypted, and on the disk: after a remount with the key again. */
	for (i = 0; i < nw; i++)
		if (CHECK_OK(lab_get_policy_ex(w[i].path, &a),
			     "FS_IOC_GET_ENCRYPTION_POLICY_EX %s", w[i].path))
			CHECK(a.policy.version == FSCRYPT_POLICY_V2,
			      "%s: policy version %u, not v2", w[i].path,
			      a.policy.version);
	if (!CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		goto out;
	if (!CHECK_OK(lab_fscrypt_fs_mount(fs, dev, mnt, NULL),
		      "mount %s again", dev))
		goto out;
	if (CHECK_OK(lab_add_raw_key(mnt, key, sizeof(key), id),
		     "add the key again on %s", mnt))
		for (i = 0; i < nw; i++)
			CHECK_FILE_EQUALS(w[i].path, w[i].data, w[i].len);
out:
	if (stuck) {
		/* umount would sync, and wait on the stuck writeback. */
		if (umount2(mnt, MNT_DETACH) == 0)
			printf("lazily detached %s (stuck)\n", mnt);
	} else if (CHECK_OK(lab_umount(mnt), "umount %s", mnt) &&
		   strcmp(fs->name, "btrfs") == 0) {
		lab_btrfs_check_clean(dev, label);
	}
	for (i = 0; i < 1 + MAX_WRITERS; i++)
		free(w[i].data);
	memset(key, 0, sizeof(key));
}

int main(void)
{
	static const struct lab_fscrypt_fs btrfs_extent = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
	};
	static const struct lab_fscrypt_fs btrfs_inode = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
		.mount_opts = LAB_BTRFS_PER_INODE_KEYS_OPT,
	};
	const char *dev = lab_env("SCRATCH_DEV"), *mnt = lab_env("SCRATCH_MNT");
	char pool[32] = "?";
	size_t len;
	char *s;
	int rc;

	main_pid = getpid();
	if (access(KNOB, F_OK) != 0)
		lab_skip("this kernel has no %s (the test-only knob that makes the fscrypt bounce-page pool's page allocator fail), so the memory pressure that exhausts the pool cannot be simulated",
			 KNOB);
	if (read_knob(knob_orig, sizeof(knob_orig)))
		lab_die("cannot read %s: " LAB_ERR_FMT, KNOB,
			LAB_ERR_ARGS(errno));
	atexit(restore_knob);
	s = read_file(POOL_PARAM, &len);
	if (s) {
		lab_pathf(pool, sizeof(pool), "%.*s", (int)strcspn(s, "\n"), s);
		free(s);
	}
	printf("# %s = %s, num_prealloc_crypto_pages = %s\n", KNOB, knob_orig,
	       pool);

	fs_case(&btrfs_extent, "btrfs, default mount options", dev, mnt);
	if (!stuck && access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0)
		fs_case(&btrfs_inode, "btrfs, " LAB_BTRFS_PER_INODE_KEYS_OPT,
			dev, mnt);
	else if (!stuck)
		printf("# %s absent: the default btrfs mount already uses per-inode keys\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
	if (stuck)
		CHECK(0, "a writer stayed stuck in the kernel; the remaining cases were not run");

	rc = lab_result(TEST_NAME);
	if (stuck) {
		/* Exit handlers would unmount, i.e. sync, and hang. */
		restore_knob();
		fflush(NULL);
		_exit(rc);
	}
	return rc;
}
