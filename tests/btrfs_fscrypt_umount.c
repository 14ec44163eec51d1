// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_umount - unmount right after writing encrypted files, while
 * btrfs itself still holds their inodes.
 *
 * The sync at the start of an unmount waits until the ordered extents of
 * the written data are complete, not until their last reference is gone.
 * The last put of an ordered extent drops its inode through a delayed
 * iput, which, once evict_inodes() has passed over the inode (it was still
 * in use), only close_ctree() runs, from ->put_super.  Such an inode still
 * holds its fscrypt info, with an active reference to its master key (and,
 * with per-extent keys, its extent maps hold extent keys that hold the
 * master key too).  The fscrypt keyring must outlive it: when the keyring
 * was destroyed before ->put_super, fscrypt_destroy_keyring() warned about
 * the extra reference and the inode's eviction then put its master key
 * through a freed keyring (a NULL pointer dereference), as a CI run saw
 * once in btrfs_fscrypt_key_removal_writeback.
 *
 * That window is a few instructions wide.  The test-only knob
 * btrfs.ordered_put_delay_ms holds the last put of an encrypted file's
 * ordered extent back for a while after its waiters were woken, so that
 * every unmount here opens it: the unmount then takes at least that long,
 * which the test checks, so that it cannot pass without having opened the
 * window.
 *
 * For per-extent keys (the default) and per-inode keys (mount option
 * fscrypt_per_inode_keys): mkfs, mount, add a key, write files in an
 * encrypted directory without syncing them, unmount with the knob set.
 * The kernel log since the unmount must hold no warning or oops; the
 * files must read back after mounting again and adding the key.  SKIP if
 * the kernel has no such knob or btrfs no fscrypt.
 */
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KNOB "/sys/module/btrfs/parameters/ordered_put_delay_ms"
#define DELAY_MS 3000
#define NFILES 4
#define FILE_LEN (64 * 1024 + 123)	/* a few extents and a partial block */

static const char *dev, *mnt;

static int set_knob(unsigned int ms)
{
	FILE *f = fopen(KNOB, "w");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%u\n", ms) > 0;
	ok &= fclose(f) == 0;
	return ok ? 0 : -1;
}

static void file_path(char *out, size_t size, int i)
{
	lab_pathf(out, size, "%s/enc/file%d", mnt, i);
}

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)(seed >> 16);
	}
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void run_case(const char *label, const char *opts)
{
	static const struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
	};
	uint8_t key[64], id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	unsigned char *data = lab_xmalloc(FILE_LEN);
	char path[PATH_MAX];
	long start, took;
	int i, ret;

	printf("== %s: write %d files, unmount with %s=%d\n", label, NFILES,
	       KNOB, DELAY_MS);
	lab_random(key, sizeof(key));
	lab_fscrypt_fs_setup(&btrfs, dev, mnt, opts, key, sizeof(key), id);
	lab_pathf(path, sizeof(path), "%s/enc", mnt);
	if (!CHECK_OK(mkdir(path, 0755), "mkdir %s", path) ||
	    !CHECK_OK(lab_set_policy(path, id), "set policy on %s", path))
		goto out_umount;
	for (i = 0; i < NFILES; i++) {
		file_path(path, sizeof(path), i);
		fill(data, FILE_LEN, (unsigned int)i + 1);
		CHECK_OK(write_file(path, data, FILE_LEN), "write %s", path);
	}

	if (!CHECK(set_knob(DELAY_MS) == 0, "set %s: " LAB_ERR_FMT, KNOB,
		   LAB_ERR_ARGS(errno)))
		goto out_umount;
	lab_log_mark("lab-umount-%s", label);
	start = now_ms();
	ret = lab_umount(mnt);
	took = now_ms() - start;
	CHECK(set_knob(0) == 0, "reset %s", KNOB);
	if (!CHECK(ret == 0, "%s: unmount failed", label))
		return;
	printf("%s: the unmount took %ld ms\n", label, took);
	/*
	 * Each ordered extent's last put waited DELAY_MS; the unmount waits
	 * for them in close_ctree().  If it did not take that long, the
	 * window was not open and this case proved nothing.
	 */
	CHECK(took >= DELAY_MS * 9 / 10,
	      "%s: the unmount took %ld ms, less than the %d ms the knob holds an ordered extent's last put: the window was not opened",
	      label, took, DELAY_MS);
	lab_log_show(30);
	CHECK(!lab_log_has(LAB_LOG_SPLAT_ERE),
	      "%s: the kernel log has a warning or oops since the unmount", label);

	if (!CHECK_OK(lab_fscrypt_fs_mount(&btrfs, dev, mnt, opts),
		      "%s: mount again", label))
		goto out;
	if (!CHECK_OK(lab_add_raw_key(mnt, key, sizeof(key), id),
		      "%s: add the key again", label))
		goto out_umount;
	for (i = 0; i < NFILES; i++) {
		file_path(path, sizeof(path), i);
		fill(data, FILE_LEN, (unsigned int)i + 1);
		CHECK_FILE_EQUALS(path, data, FILE_LEN);
	}
out_umount:
	set_knob(0);
	lab_umount(mnt);
out:
	free(data);
}

int main(void)
{
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (access(KNOB, W_OK))
		lab_skip("%s: " LAB_ERR_FMT
			 " (the kernel lacks the lab's test-only btrfs knob)",
			 KNOB, LAB_ERR_ARGS(errno));
	run_case("per-extent-keys", NULL);
	run_case("per-inode-keys", LAB_BTRFS_PER_INODE_KEYS_OPT);
	return lab_result("btrfs_fscrypt_umount");
}
