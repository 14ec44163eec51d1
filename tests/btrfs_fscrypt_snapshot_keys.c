// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_snapshot_keys - snapshots and encryption keys (review round
 * 2, findings 1 and 3):
 *
 *  1. read-only snapshots: FS_IOC_SET_ENCRYPTION_POLICY on an empty
 *     directory of a read-only snapshot, and on the empty root directory of
 *     another, fails with EROFS and a log line, and changes nothing: the
 *     snapshots' ROOT_ITEMs (BTRFS_IOC_TREE_SEARCH of the root tree) and the
 *     superblock's incompat flags (read from the device after sync) are
 *     byte-identical before and after, and the directories have no policy.
 *     fscrypt checks only ownership and mnt_want_write_file(), so btrfs has
 *     to refuse itself.  Control: the same ioctl on a read-write subvolume
 *     works and sets the ENCRYPT incompat bit (so the comparison can tell);
 *  2. per-inode keys (mount option fscrypt_per_inode_keys): a file's key
 *     comes from its inode's context and its IVs from file offsets, both
 *     copied by a snapshot, so the two copies would encrypt different data
 *     under one (key, tweak).  A snapshot of a subvolume holding such a
 *     file must fail with EOPNOTSUPP and a log line, also after a remount
 *     with per-extent keys (the subvolume's mark is on disk).  If the
 *     kernel takes the snapshot, the test shows the harm: it writes data
 *     sharing its first 16 bytes at offset 0 of both copies, reads the two
 *     new extents from the device, and fails if their first 16 ciphertext
 *     bytes (one AES-XTS block) are equal;
 *  3. per-extent keys (the default): the same snapshot is taken, and the
 *     two new extents' first 16 ciphertext bytes differ (each new extent
 *     has a new key group with a random nonce).
 *
 * Keys and data are random per run.
 */
#include "btrfs_items.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fscrypt.h>

#define TEST_NAME "btrfs_fscrypt_snapshot_keys"
#define KEY_SEED 0x5a9a0001u
#define SB_INCOMPAT_OFF (65536 + LAB_BTRFS_SB_INCOMPAT_OFF)
#define INCOMPAT_ENCRYPT LAB_BTRFS_INCOMPAT_ENCRYPT
#define BLK 4096
#define XTS_BLOCK 16

static const char *dev, *mnt;
static uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];

/* ---- helpers ----------------------------------------------------------- */

/*
 * The ROOT_ITEM of the subvolume whose root is @path into @buf (@size
 * bytes), its id into *@id; its length, or -1 (failure recorded).
 */
static int root_item(const char *path, uint64_t *id, unsigned char *buf,
		     size_t size)
{
	int len = lab_btrfs_root_item(path, id, buf, size);

	CHECK_OK(len, "the ROOT_ITEM of %s", path);
	return len;
}

/* The superblock's incompat flags, as on the device after a sync. */
static uint64_t sb_incompat(void)
{
	unsigned char sb[4096];
	uint64_t v;

	sync();
	if (raw_read(dev, 65536, sb, sizeof(sb)))
		lab_die("read the superblock of %s: %s", dev, strerror(errno));
	memcpy(&v, sb + SB_INCOMPAT_OFF - 65536, sizeof(v));
	return le64toh(v);
}

static void mkfs_mount(const char *opts)
{
	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (lab_mount(dev, mnt, "btrfs", opts))
		lab_die("mount %s -o %s: %s", dev, opts ? opts : "(none)",
			strerror(errno));
	if (lab_add_key(mnt, KEY_SEED, key_id)) {
		if (errno == ENOTTY || errno == EOPNOTSUPP)
			lab_skip("btrfs has no fscrypt ioctls: %s", strerror(errno));
		lab_die("FS_IOC_ADD_ENCRYPTION_KEY: %s", strerror(errno));
	}
}

static void subvol_create(const char *name)
{
	lab_btrfs_subvol(mnt, name, -1);
}

/*
 * BTRFS_IOC_SNAP_CREATE_V2 of @src as @name in the top directory, read-only
 * if @ro; 0 or -1 with errno.
 */
static int snapshot(const char *src, const char *name, int ro)
{
	struct btrfs_ioctl_vol_args_v2 va;
	char path[PATH_MAX];
	int top, ret, e;

	memset(&va, 0, sizeof(va));
	PATHF(path, "%s/%s", mnt, src);
	top = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	va.fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0 || va.fd < 0)
		lab_die("open %s or %s: %s", mnt, path, strerror(errno));
	va.flags = ro ? BTRFS_SUBVOL_RDONLY : 0;
	PATHF(va.name, "%s", name);
	ret = ioctl(top, BTRFS_IOC_SNAP_CREATE_V2, &va);
	e = errno;
	close(va.fd);
	close(top);
	errno = e;
	return ret;
}

/* @path has no encryption policy. */
static void expect_no_policy(const char *path)
{
	struct fscrypt_get_policy_ex_arg a;

	CHECK_ERRNO(lab_get_policy_ex(path, &a), ENODATA,
		    "FS_IOC_GET_ENCRYPTION_POLICY_EX %s (must have no policy)",
		    path);
}

/* ---- 1. read-only snapshots ----------------------------------------------- */

static void test_readonly_snapshots(void)
{
	unsigned char before[2][512], after[2][512];
	const char *names[2] = { "ro-sv", "ro-empty" };
	char dir[PATH_MAX], root[PATH_MAX], ctl[PATH_MAX];
	uint64_t ids[2], inc_before, inc_after;
	int len_before[2], len_after[2], i;

	printf("== 1. set-policy in read-only snapshots\n");
	mkfs_mount(NULL);
	subvol_create("sv");
	subvol_create("empty");
	PATHF(dir, "%s/sv/d", mnt);
	if (mkdir(dir, 0755))
		lab_die("mkdir %s: %s", dir, strerror(errno));
	if (snapshot("sv", "ro-sv", 1) || snapshot("empty", "ro-empty", 1))
		lab_die("read-only snapshots: %s", strerror(errno));
	inc_before = sb_incompat();
	printf("incompat flags before: 0x%llx\n", (unsigned long long)inc_before);
	/* mkfs sets several (no-holes, skinny metadata...): a sane read */
	CHECK(inc_before != 0, "incompat flags read as 0: not this superblock's");
	CHECK(!(inc_before & INCOMPAT_ENCRYPT),
	      "the ENCRYPT incompat bit is set before any policy");
	for (i = 0; i < 2; i++) {
		PATHF(root, "%s/%s", mnt, names[i]);
		len_before[i] = root_item(root, &ids[i], before[i],
					  sizeof(before[i]));
	}

	CHECK(lab_log_mark("lab-snapkeys-ro-%d", getpid()) == 0, "write to /dev/kmsg");
	PATHF(dir, "%s/ro-sv/d", mnt);
	PATHF(root, "%s/ro-empty", mnt);
	CHECK_ERRNO(lab_set_policy(dir, key_id), EROFS,
		    "FS_IOC_SET_ENCRYPTION_POLICY on the empty directory %s of a read-only snapshot",
		    dir);
	CHECK_ERRNO(lab_set_policy(root, key_id), EROFS,
		    "FS_IOC_SET_ENCRYPTION_POLICY on the empty root directory of the read-only snapshot %s",
		    root);
	CHECK(lab_log_has("cannot set an encryption policy on ino [0-9]+ of read-only subvolume [0-9]+"),
	      "no kernel log line about the refused policy");
	expect_no_policy(dir);
	expect_no_policy(root);

	inc_after = sb_incompat();
	printf("incompat flags after: 0x%llx\n", (unsigned long long)inc_after);
	CHECK(inc_after == inc_before,
	      "the superblock's incompat flags changed from 0x%llx to 0x%llx",
	      (unsigned long long)inc_before, (unsigned long long)inc_after);
	for (i = 0; i < 2; i++) {
		PATHF(root, "%s/%s", mnt, names[i]);
		len_after[i] = root_item(root, NULL, after[i], sizeof(after[i]));
		CHECK(len_before[i] > 0 && len_after[i] == len_before[i] &&
		      !memcmp(before[i], after[i], (size_t)len_before[i]),
		      "the ROOT_ITEM of the read-only snapshot %s (id %llu) changed (%d bytes, first difference at %zu)",
		      names[i], (unsigned long long)ids[i], len_after[i],
		      lab_first_diff(before[i], after[i],
				     len_before[i] > 0 ? (size_t)len_before[i] : 0));
	}

	/* again after a remount: nothing was written behind our back */
	CHECK_OK(lab_umount(mnt), "umount");
	if (CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "mount again")) {
		expect_no_policy(dir);
		expect_no_policy(root);
	}

	/* control: the same on the read-write original works */
	PATHF(ctl, "%s/sv/d", mnt);
	CHECK_OK(lab_add_key(mnt, KEY_SEED, key_id), "add the key again");
	CHECK_OK(lab_set_policy(ctl, key_id),
		 "control: FS_IOC_SET_ENCRYPTION_POLICY on %s (read-write)", ctl);
	CHECK(sb_incompat() & INCOMPAT_ENCRYPT,
	      "control: the ENCRYPT incompat bit is not set after a policy was set");
	CHECK_OK(lab_umount(mnt), "umount");
}

/* ---- 2. and 3. (key, tweak) of the two copies of a snapshot ------------- */

/* The device offset of the first block of @path's first extent, or 0. */
static uint64_t first_block_on_device(const char *path)
{
	struct raw_btrfs_chunk *chunks = NULL;
	uint64_t phys[RAW_BTRFS_MAX_STRIPES] = { 0 };
	struct raw_extent *ext = NULL;
	size_t n = 0, nchunks = 0;

	if (!CHECK_OK(raw_fiemap(path, &ext, &n), "FIEMAP %s", path) ||
	    !CHECK(n >= 1 && ext[0].logical == 0, "%s: no extent at offset 0", path) ||
	    !CHECK_OK(raw_btrfs_chunks(mnt, &chunks, &nchunks), "chunk tree") ||
	    !CHECK(raw_btrfs_map(chunks, nchunks, ext[0].physical, BLK, phys) >= 1,
		   "%s: cannot map logical %llu", path,
		   (unsigned long long)ext[0].physical))
		phys[0] = 0;
	else
		printf("%s: offset 0 at logical %llu, device offset %llu\n", path,
		       (unsigned long long)ext[0].physical,
		       (unsigned long long)phys[0]);
	free(ext);
	free(chunks);
	return phys[0];
}

/*
 * In the snapshot pair sv/snap: new data at offset 0 of each copy, the
 * same first 16 bytes, different after; returns whether the two new
 * extents' first 16 bytes on the device are equal (-1: could not tell).
 */
static int same_first_xts_block(void)
{
	unsigned char a[BLK], b[BLK], ca[XTS_BLOCK], cb[XTS_BLOCK];
	char fa[PATH_MAX], fb[PATH_MAX];
	uint64_t pa, pb;

	lab_random(a, sizeof(a));
	lab_random(b, sizeof(b));
	memcpy(b, a, XTS_BLOCK);
	PATHF(fa, "%s/sv/enc/f", mnt);
	PATHF(fb, "%s/snap/enc/f", mnt);
	if (!CHECK_OK(write_file(fa, a, sizeof(a)), "overwrite %s", fa) ||
	    !CHECK_OK(write_file(fb, b, sizeof(b)), "overwrite %s", fb))
		return -1;
	sync();
	pa = first_block_on_device(fa);
	pb = first_block_on_device(fb);
	if (!pa || !pb || !CHECK(pa != pb, "both copies' block 0 at device offset %llu",
				 (unsigned long long)pa))
		return -1;
	if (!CHECK_OK(lab_drop_caches("3"), "drop caches") ||
	    !CHECK_OK(raw_read(dev, pa, ca, sizeof(ca)), "read %s", dev) ||
	    !CHECK_OK(raw_read(dev, pb, cb, sizeof(cb)), "read %s", dev))
		return -1;
	CHECK(memcmp(ca, a, XTS_BLOCK) != 0, "%s's block 0 is plaintext on the device", fa);
	CHECK_FILE_EQUALS(fa, a, sizeof(a));
	CHECK_FILE_EQUALS(fb, b, sizeof(b));
	return !memcmp(ca, cb, XTS_BLOCK);
}

/* sv/enc/f, one block, written and synced under the mount's key mode. */
static void make_encrypted_file(void)
{
	unsigned char data[BLK];
	char enc[PATH_MAX], f[PATH_MAX];

	subvol_create("sv");
	PATHF(enc, "%s/sv/enc", mnt);
	PATHF(f, "%s/f", enc);
	lab_random(data, sizeof(data));
	if (mkdir(enc, 0755) || lab_set_policy(enc, key_id))
		lab_die("encrypted directory %s: %s", enc, strerror(errno));
	if (write_file(f, data, sizeof(data)) || fsync_path(f))
		lab_die("write %s: %s", f, strerror(errno));
	sync();
}

static void test_per_inode_keys(void)
{
	int same;

	printf("\n== 2. snapshot of a subvolume with per-inode-key files (mount -o %s)\n",
	       LAB_BTRFS_PER_INODE_KEYS_OPT);
	mkfs_mount(LAB_BTRFS_PER_INODE_KEYS_OPT);
	make_encrypted_file();
	CHECK(lab_log_mark("lab-snapkeys-inode-%d", getpid()) == 0, "write to /dev/kmsg");
	if (snapshot("sv", "snap", 0) == 0) {
		CHECK(0, "the snapshot of a subvolume holding files with per-inode keys was taken; it must fail with EOPNOTSUPP");
		same = same_first_xts_block();
		printf("per-inode keys: the two copies' new block 0 %s its first 16 ciphertext bytes\n",
		       same == 1 ? "SHARES" : same == 0 ? "does not share" : "(could not compare)");
		CHECK(same != 1, "per-inode keys: the snapshot's copies encrypted different data under one (key, tweak): equal first AES-XTS blocks on the device");
		CHECK_OK(lab_umount(mnt), "umount");
		return;
	}
	CHECK(errno == EOPNOTSUPP, "snapshot of a subvolume holding files with per-inode keys: " LAB_ERR_FMT ", want EOPNOTSUPP",
	      LAB_ERR_ARGS(errno));
	CHECK(lab_log_has("cannot snapshot subvolume [0-9]+: it holds files encrypted with per-inode keys"),
	      "no kernel log line saying why the snapshot was refused");

	/* the mark is on disk: refused after a remount in per-extent mode */
	CHECK_OK(lab_umount(mnt), "umount");
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "mount again"))
		return;
	CHECK_ERRNO(snapshot("sv", "snap", 1), EOPNOTSUPP,
		    "read-only snapshot after a remount with per-extent keys");
	/* a subvolume without such files still snapshots */
	subvol_create("other");
	CHECK_OK(snapshot("other", "other-snap", 0), "snapshot of a subvolume without per-inode-key files");
	CHECK_OK(lab_umount(mnt), "umount");
}

static void test_per_extent_keys(void)
{
	int same;

	printf("\n== 3. snapshot of a subvolume with per-extent-key files\n");
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK)) {
		printf("no %s: no per-extent keys in this kernel\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
		return;
	}
	mkfs_mount(NULL);
	make_encrypted_file();
	if (!CHECK_OK(snapshot("sv", "snap", 0), "snapshot of a subvolume with per-extent-key files")) {
		lab_umount(mnt);
		return;
	}
	same = same_first_xts_block();
	printf("per-extent keys: the two copies' new block 0 %s its first 16 ciphertext bytes\n",
	       same == 1 ? "SHARES" : same == 0 ? "does not share" : "(could not compare)");
	CHECK(same == 0, "per-extent keys: the two copies' new extents are not under different keys");
	CHECK_OK(lab_umount(mnt), "umount");
}

int main(void)
{
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");

	test_readonly_snapshots();
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0)
		test_per_inode_keys();
	else
		printf("\n== 2. skipped: without per-extent keys, %s is not a mount option\n",
		       LAB_BTRFS_PER_INODE_KEYS_OPT);
	test_per_extent_keys();
	return lab_result(TEST_NAME);
}
