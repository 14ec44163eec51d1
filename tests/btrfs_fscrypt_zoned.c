// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_zoned - encryption on a zoned btrfs is refused, cleanly.
 *
 * Zoned btrfs writes data with zone append bios, and
 * bio_add_zone_append_page() merges physically contiguous pages into one
 * bvec, which fscrypt's write-bio encryption cannot take (it encrypts page
 * by page into bounce pages).  Before the fix, FS_IOC_SET_ENCRYPTION_POLICY
 * succeeded on a zoned btrfs and the first writeback of an encrypted file
 * hit a WARN in fscrypt_encrypt_write_bio() and failed.  The series now
 * refuses to set a policy there, with EOPNOTSUPP and a log line.
 *
 * The zoned device is a memory-backed null_blk device made through configfs
 * (lib/nullb.c; CONFIG_BLK_DEV_NULL_BLK, CONFIG_BLK_DEV_ZONED in
 * patches/config).  For
 * each key mode (a default mount, and fscrypt_per_inode_keys):
 *
 *  - an unencrypted file written, fsynced and read back after a cache drop
 *    shows that the zoned filesystem itself works;
 *  - FS_IOC_SET_ENCRYPTION_POLICY on an empty directory fails EOPNOTSUPP;
 *  - the directory is left unencrypted (GET_ENCRYPTION_POLICY: ENODATA),
 *    files made in it afterwards are plain and read back;
 *  - the kernel log names the refusal.
 *
 * And a superblock that claims both ZONED and ENCRYPT (crafted: no kernel
 * makes one) is refused at mount with EINVAL and a log line; with the ZONED
 * bit taken away again the filesystem mounts and its encrypted file reads
 * back.  This runs on the ordinary scratch disk (SCRATCH_DEV), whose
 * superblock is easy to rewrite with a valid checksum.
 *
 * Each filesystem ends with the patched `btrfs check --readonly`, which must
 * find it clean.  A console WARN (the old failure) fails the run by itself.
 */
#include "btrfs_items.h"
#include "fscrypt_fs.h"
#include "btrfs_progs.h"
#include "crc32c.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "nullb.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/fs.h>

#define TEST_NAME "btrfs_fscrypt_zoned"
#define ZONED_SIZE_MB 1024
#define ZONE_SIZE_MB 16
#define KEY_SEED 0x20dedu
#define DATA_LEN (256 * 1024)
#define REFUSAL_LOG "encryption is not supported on zoned"
#define MOUNT_REFUSAL_LOG "cannot mount: encryption is not supported on zoned"

/* The primary btrfs superblock and the fields this test touches. */
#define SB_OFFSET 65536
#define SB_SIZE 4096
#define SB_CSUM_START 32
#define SB_MAGIC_OFF 64
#define SB_INCOMPAT_OFF 188
#define INCOMPAT_ZONED (1ULL << 12)
#define INCOMPAT_ENCRYPT LAB_BTRFS_INCOMPAT_ENCRYPT

static char dev[PATH_MAX];	/* the zoned device, /dev/... */

static size_t log_mentions(const char *needle)
{
	char *log = NULL;
	size_t n = 0;
	FILE *p = popen("dmesg", "r");
	size_t len = 0, cap = 0;
	char buf[4096];
	size_t got;

	if (!p)
		return 0;
	while ((got = fread(buf, 1, sizeof(buf), p)) > 0) {
		if (len + got + 1 > cap) {
			cap = 2 * (len + got + 1);
			log = realloc(log, cap);
			if (!log)
				lab_die("out of memory");
		}
		memcpy(log + len, buf, got);
		len += got;
	}
	pclose(p);
	if (log) {
		log[len] = '\0';
		n = count_occurrences(log, len, needle, strlen(needle));
	}
	free(log);
	return n;
}

static void one_mode(const char *mnt, const char *opts)
{
	const char *label = opts ? opts : "default mount";
	char dir[PATH_MAX], plain[PATH_MAX], inside[PATH_MAX];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct fscrypt_get_policy_ex_arg pol;
	unsigned char *data = lab_xmalloc(DATA_LEN);
	size_t before;

	printf("\n# zoned btrfs, %s\n", label);
	if (!CHECK(lab_mkfs("mkfs.btrfs -q -f -m single -d single", dev) == 0,
		   "mkfs.btrfs on the zoned device %s", dev))
		goto out;
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "mount %s (%s)", dev,
		      label))
		goto out;

	/* Control: the zoned filesystem works for plain files. */
	fill_pattern(data, DATA_LEN, 7);
	PATHF(plain, "%s/plain", mnt);
	CHECK_OK(write_file(plain, data, DATA_LEN), "write %s", plain);
	CHECK_OK(fsync_path(plain), "fsync %s", plain);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(plain, data, DATA_LEN);

	PATHF(dir, "%s/enc", mnt);
	CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir);
	CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key on %s", mnt);
	before = log_mentions(REFUSAL_LOG);
	CHECK_ERRNO(lab_set_policy(dir, id), EOPNOTSUPP,
		    "set a v2 policy on %s (zoned, %s)", dir, label);
	CHECK(log_mentions(REFUSAL_LOG) > before,
	      "no kernel log line containing \"%s\" after the refusal",
	      REFUSAL_LOG);
	CHECK_ERRNO(lab_get_policy_ex(dir, &pol), ENODATA,
		    "%s has a policy after the refused set", dir);

	/* Files made in the directory are plain and durable. */
	fill_pattern(data, DATA_LEN, 8);
	PATHF(inside, "%s/file", dir);
	CHECK_OK(write_file(inside, data, DATA_LEN), "write %s", inside);
	CHECK_OK(fsync_path(inside), "fsync %s", inside);
	CHECK_ERRNO(lab_get_policy_ex(inside, &pol), ENODATA,
		    "%s is encrypted", inside);
	CHECK_OK(lab_umount(mnt), "unmount %s", mnt);
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "remount %s", dev))
		goto out;
	CHECK_FILE_EQUALS(inside, data, DATA_LEN);
	fill_pattern(data, DATA_LEN, 7);
	CHECK_FILE_EQUALS(plain, data, DATA_LEN);
	if (CHECK_OK(lab_umount(mnt), "unmount %s", mnt))
		lab_btrfs_check_clean(dev, label);
out:
	free(data);
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++, v >>= 8)
		p[i] = v & 0xff;
}

/* Write @sb as the primary superblock of @disk, with a valid checksum. */
static int write_super(const char *disk, unsigned char *sb)
{
	uint32_t crc = lab_crc32c(sb + SB_CSUM_START, SB_SIZE - SB_CSUM_START);
	int fd, ret = 0;

	memset(sb, 0, SB_CSUM_START);
	sb[0] = crc & 0xff;
	sb[1] = crc >> 8 & 0xff;
	sb[2] = crc >> 16 & 0xff;
	sb[3] = crc >> 24;
	fd = open(disk, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (pwrite(fd, sb, SB_SIZE, SB_OFFSET) != SB_SIZE || fsync(fd) < 0 ||
	    ioctl(fd, BLKFLSBUF, 0) < 0)
		ret = -1;
	close(fd);
	return ret;
}

static void crafted_zoned_super(const char *disk, const char *mnt)
{
	unsigned char sb[SB_SIZE], orig[SB_SIZE];
	char dir[PATH_MAX], file[PATH_MAX];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	unsigned char *data = lab_xmalloc(DATA_LEN);
	uint64_t incompat;
	size_t before;
	int fd;

	printf("\n# a regular btrfs whose superblock claims ZONED and ENCRYPT\n");
	if (!CHECK(lab_mkfs("mkfs.btrfs -q -f", disk) == 0, "mkfs.btrfs %s",
		   disk) ||
	    !CHECK_OK(lab_mount(disk, mnt, "btrfs", NULL), "mount %s", disk))
		goto out;
	PATHF(dir, "%s/enc", mnt);
	PATHF(file, "%s/file", dir);
	fill_pattern(data, DATA_LEN, 9);
	CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir);
	CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key");
	CHECK_OK(lab_set_policy(dir, id), "set policy on %s (not zoned)", dir);
	CHECK_OK(write_file(file, data, DATA_LEN), "write %s", file);
	CHECK_OK(lab_umount(mnt), "unmount %s", mnt);

	fd = open(disk, O_RDONLY | O_CLOEXEC);
	if (!CHECK(fd >= 0 && pread(fd, orig, SB_SIZE, SB_OFFSET) == SB_SIZE,
		   "read the superblock of %s", disk)) {
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	if (!CHECK(!memcmp(orig + SB_MAGIC_OFF, "_BHRfS_M", 8),
		   "no btrfs magic at %d on %s", SB_OFFSET, disk))
		goto out;
	incompat = get_le64(orig + SB_INCOMPAT_OFF);
	if (!CHECK(incompat & INCOMPAT_ENCRYPT,
		   "incompat 0x%llx lacks ENCRYPT after setting a policy",
		   (unsigned long long)incompat))
		goto out;

	memcpy(sb, orig, SB_SIZE);
	put_le64(sb + SB_INCOMPAT_OFF, incompat | INCOMPAT_ZONED);
	if (!CHECK_OK(write_super(disk, sb), "write the crafted superblock"))
		goto out;
	before = log_mentions(MOUNT_REFUSAL_LOG);
	CHECK_ERRNO(mount(disk, mnt, "btrfs", 0, NULL), EINVAL,
		    "mount %s with ZONED|ENCRYPT in its superblock", disk);
	CHECK(log_mentions(MOUNT_REFUSAL_LOG) > before,
	      "no kernel log line containing \"%s\" after the refused mount",
	      MOUNT_REFUSAL_LOG);

	/* Without the ZONED bit it is the filesystem it was. */
	memcpy(sb, orig, SB_SIZE);
	if (!CHECK_OK(write_super(disk, sb), "restore the superblock") ||
	    !CHECK_OK(lab_mount(disk, mnt, "btrfs", NULL), "mount %s again",
		      disk))
		goto out;
	CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key again");
	CHECK_FILE_EQUALS(file, data, DATA_LEN);
	if (CHECK_OK(lab_umount(mnt), "unmount %s", mnt))
		lab_btrfs_check_clean(disk, "the encrypted btrfs whose superblock was restored");
out:
	free(data);
}

int main(void)
{
	const char *mnt = lab_env("SCRATCH_MNT");
	const char *zdev;
	char why[256];

	crafted_zoned_super(lab_env("SCRATCH_DEV"), mnt);
	zdev = lab_nullb_zoned("labzoned", ZONED_SIZE_MB, ZONE_SIZE_MB, why,
			       sizeof(why));
	if (!zdev)
		lab_skip("%s", why);
	PATHF(dev, "%s", zdev);
	one_mode(mnt, NULL);
	one_mode(mnt, LAB_BTRFS_PER_INODE_KEYS_OPT);
	return lab_result(TEST_NAME);
}
