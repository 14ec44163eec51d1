// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_badinput - bad input gets a clean error, never an oops:
 *
 *  1. garbage arguments to the fscrypt ioctls on btrfs: EFAULT or EINVAL
 *     (and ENODATA/ENOTTY-free answers where fscrypt documents them);
 *  2. a corrupted fscrypt context item on disk, with a valid metadata
 *     checksum so that only the tree-checker can catch it: the access fails
 *     with EUCLEAN or EIO and the kernel log names the fscrypt context.
 *     Two corruptions: an unknown context version, and version 1 with the
 *     40-byte size of a version 2 context.
 *
 * The console check of the runner fails the run if any of this oopses.
 */
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
#include <linux/fscrypt.h>

#define KEY_SEED 0xbad1u
#define SB_OFFSET 65536
/* In a v2 context the master key identifier follows 8 bytes of header. */
#define CTX_ID_OFFSET 8
#define FSCRYPT_CONTEXT_V2_VERSION 2
/* FS_IOC_GET_ENCRYPTION_NONCE returns the 16-byte file nonce. */
#define FILE_NONCE_SIZE 16

static const char *dev, *mnt;

/* ---- crc32c (Castagnoli), as btrfs checksums its metadata --------------- */

static uint32_t crc32c(const unsigned char *p, size_t len)
{
	static uint32_t table[256];
	uint32_t crc = ~0u;
	size_t i;

	if (!table[1]) {
		for (i = 0; i < 256; i++) {
			uint32_t c = (uint32_t)i;
			int k;

			for (k = 0; k < 8; k++)
				c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			table[i] = c;
		}
	}
	for (i = 0; i < len; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static uint32_t get_le32(const unsigned char *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(unsigned char *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

/* ---- 1. ioctl garbage ------------------------------------------------------ */

static void test_ioctls(void)
{
	char dir[PATH_MAX], file[PATH_MAX], plainf[PATH_MAX];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct fscrypt_policy_v2 pol;
	struct fscrypt_add_key_arg add = { 0 };
	struct fscrypt_remove_key_arg rm = { 0 };
	unsigned char nonce[FILE_NONCE_SIZE];
	int dfd = -1, ffd = -1, pfd = -1, mfd;

	PATHF(dir, "%s/enc", mnt);
	PATHF(file, "%s/enc/f", mnt);
	PATHF(plainf, "%s/plain", mnt);
	if (!CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key") ||
	    !CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir))
		return;
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	mfd = open(mnt, O_RDONLY | O_DIRECTORY);
	if (!CHECK_OK(dfd, "open %s", dir) || !CHECK_OK(mfd, "open %s", mnt))
		goto out;

	CHECK_ERRNO(ioctl(dfd, FS_IOC_SET_ENCRYPTION_POLICY, NULL), EFAULT,
		    "SET_ENCRYPTION_POLICY(NULL)");
	CHECK_ERRNO(ioctl(dfd, FS_IOC_SET_ENCRYPTION_POLICY, (void *)8),
		    EFAULT, "SET_ENCRYPTION_POLICY(bad pointer)");
	lab_default_policy(&pol, id);
	pol.version = 7;
	CHECK_ERRNO(ioctl(dfd, FS_IOC_SET_ENCRYPTION_POLICY, &pol), EINVAL,
		    "policy version 7");
	lab_default_policy(&pol, id);
	pol.contents_encryption_mode = 99;
	CHECK_ERRNO(ioctl(dfd, FS_IOC_SET_ENCRYPTION_POLICY, &pol), EINVAL,
		    "contents mode 99");
	lab_default_policy(&pol, id);
	pol.flags |= FSCRYPT_POLICY_FLAG_IV_INO_LBLK_64;
	CHECK_ERRNO(ioctl(dfd, FS_IOC_SET_ENCRYPTION_POLICY, &pol), EINVAL,
		    "IV_INO_LBLK_64 (btrfs has no stable inode numbers)");

	CHECK_ERRNO(ioctl(mfd, FS_IOC_ADD_ENCRYPTION_KEY, NULL), EFAULT,
		    "ADD_ENCRYPTION_KEY(NULL)");
	add.key_spec.type = 9;
	add.raw_size = 64;
	CHECK_ERRNO(ioctl(mfd, FS_IOC_ADD_ENCRYPTION_KEY, &add), EINVAL,
		    "key_spec type 9");
	add.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	add.raw_size = 0;
	CHECK_ERRNO(ioctl(mfd, FS_IOC_ADD_ENCRYPTION_KEY, &add), EINVAL,
		    "raw_size 0");
	rm.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	memcpy(rm.key_spec.u.identifier, id, sizeof(id));
	rm.__reserved[0] = 1;
	CHECK_ERRNO(ioctl(mfd, FS_IOC_REMOVE_ENCRYPTION_KEY, &rm), EINVAL,
		    "REMOVE_ENCRYPTION_KEY with reserved bits");
	CHECK_ERRNO(ioctl(mfd, FS_IOC_GET_ENCRYPTION_KEY_STATUS, NULL), EFAULT,
		    "GET_ENCRYPTION_KEY_STATUS(NULL)");

	/* the directory is still unencrypted after all of that */
	CHECK_ERRNO(ioctl(dfd, FS_IOC_GET_ENCRYPTION_POLICY_EX, &pol), ENODATA,
		    "GET_ENCRYPTION_POLICY_EX of an unencrypted dir");
	if (!CHECK_OK(lab_set_policy(dir, id), "set a valid policy"))
		goto out;
	CHECK_ERRNO(ioctl(dfd, FS_IOC_GET_ENCRYPTION_POLICY_EX, NULL), EFAULT,
		    "GET_ENCRYPTION_POLICY_EX(NULL)");
	ffd = open(file, O_CREAT | O_RDWR, 0644);
	pfd = open(plainf, O_CREAT | O_RDWR, 0644);
	if (CHECK_OK(ffd, "create %s", file)) {
		CHECK_ERRNO(ioctl(ffd, FS_IOC_GET_ENCRYPTION_NONCE, NULL), EFAULT,
			    "GET_ENCRYPTION_NONCE(NULL)");
		CHECK_OK(ioctl(ffd, FS_IOC_GET_ENCRYPTION_NONCE, nonce),
			 "GET_ENCRYPTION_NONCE");
	}
	if (CHECK_OK(pfd, "create %s", plainf))
		CHECK_ERRNO(ioctl(pfd, FS_IOC_GET_ENCRYPTION_NONCE, nonce),
			    ENODATA, "GET_ENCRYPTION_NONCE of a plain file");
out:
	if (ffd >= 0)
		close(ffd);
	if (pfd >= 0)
		close(pfd);
	if (dfd >= 0)
		close(dfd);
	if (mfd >= 0)
		close(mfd);
}

/* ---- 2. corrupted contexts --------------------------------------------------- */

/*
 * Set the version byte of every fscrypt context of key @id on @dev to
 * @version, keeping the tree block checksums valid.  Returns the number of
 * contexts changed, or -1 (with the failure recorded).
 */
static int corrupt_contexts(const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
			    unsigned char version)
{
	struct raw_needle needle = {
		.label = "master key identifier",
		.data = id,
		.len = FSCRYPT_KEY_IDENTIFIER_SIZE,
	};
	unsigned char sb[4096], *blk = NULL;
	uint32_t nodesize;
	int changed = 0;
	size_t i;

	if (!CHECK_OK(raw_read(dev, SB_OFFSET, sb, sizeof(sb)), "read superblock"))
		return -1;
	nodesize = get_le32(sb + 0x94);	/* btrfs_super_block::nodesize */
	if (!CHECK(nodesize >= 4096 && nodesize <= 65536 &&
		   !(nodesize & (nodesize - 1)), "implausible nodesize %u",
		   nodesize))
		return -1;
	if (!CHECK_OK(raw_scan(dev, &needle, 1), "scan %s", dev))
		return -1;
	CHECK(needle.count == (long long)needle.noffs,
	      "%lld copies of the key identifier, more than the %d kept",
	      needle.count, RAW_NEEDLE_MAX_OFFS);
	blk = lab_xmalloc(nodesize);
	for (i = 0; i < needle.noffs; i++) {
		uint64_t off = needle.offs[i], start = off - off % nodesize;
		size_t in = off - start;

		if (in < CTX_ID_OFFSET ||
		    !CHECK_OK(raw_read(dev, start, blk, nodesize), "read block"))
			continue;
		/* a v2 context in a tree block of this fs with a valid csum */
		if (blk[in - CTX_ID_OFFSET] != FSCRYPT_CONTEXT_V2_VERSION ||
		    memcmp(blk + 32, sb + 32, 16) ||
		    get_le32(blk) != crc32c(blk + 32, nodesize - 32))
			continue;
		blk[in - CTX_ID_OFFSET] = version;
		put_le32(blk, crc32c(blk + 32, nodesize - 32));
		if (!CHECK_OK(raw_write_sync(dev, start, blk, nodesize),
			      "rewrite tree block at %llu",
			      (unsigned long long)start))
			break;
		changed++;
	}
	free(blk);
	return changed;
}

static void test_corrupt_context(unsigned char version, const char *logmsg)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char sv[PATH_MAX], enc[PATH_MAX], f[PATH_MAX];
	unsigned char data[8192];
	char marker[64];
	struct stat st;
	int n, r, e;

	fill_pattern(data, sizeof(data), version);
	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s: %s", dev, strerror(errno));
	/* a subvolume of its own, so that the filesystem still mounts */
	PATHF(sv, "%s/sv", mnt);
	PATHF(enc, "%s/sv/enc", mnt);
	PATHF(f, "%s/sv/enc/victim", mnt);
	if (!CHECK(run("btrfs subvolume create %s >/dev/null", sv) == 0,
		   "subvolume create") ||
	    !CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key") ||
	    !CHECK_OK(mkdir(enc, 0755), "mkdir") ||
	    !CHECK_OK(lab_set_policy(enc, id), "set policy") ||
	    !CHECK_OK(write_file(f, data, sizeof(data)), "write %s", f)) {
		lab_umount(mnt);
		return;
	}
	CHECK_OK(lab_umount(mnt), "umount");

	n = corrupt_contexts(id, version);
	if (!CHECK(n >= 1, "no fscrypt context of the key found on %s", dev))
		return;
	printf("set the version of %d context cop%s to %u\n", n,
	       n == 1 ? "y" : "ies", version);

	/* only log lines after this marker count (never dmesg -C: KUnit) */
	snprintf(marker, sizeof(marker), "lab-badinput-%u-%d", version, getpid());
	CHECK(run("echo %s > /dev/kmsg", marker) == 0, "write to /dev/kmsg");
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "mount after corruption"))
		return;
	CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key");
	errno = 0;
	r = stat(f, &st);
	e = errno;
	CHECK(r < 0 && (e == EUCLEAN || e == EIO),
	      "stat of a file behind a corrupted context: expected EUCLEAN or EIO, got %s",
	      r < 0 ? strerror(e) : "success");
	CHECK(run("dmesg | sed -n '/%s/,$p' | grep -F '%s'", marker, logmsg) == 0,
	      "no kernel log line \"%s\" after the corruption", logmsg);
	CHECK_OK(lab_umount(mnt), "umount after corruption");
}

int main(void)
{
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");

	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s: %s", dev, strerror(errno));
	test_ioctls();
	CHECK_OK(lab_umount(mnt), "umount");

	test_corrupt_context(9, "unknown version 9");
	test_corrupt_context(1, "version 1 has size 28, item size 40");
	return lab_result("btrfs_fscrypt_badinput");
}
