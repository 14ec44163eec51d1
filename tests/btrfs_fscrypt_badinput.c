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
 *     40-byte size of a version 2 context;
 *  3. when the kernel encrypts files per extent (LAB_BTRFS_EXTENT_KEYS_FEATURE),
 *     a corrupted file extent item of such a file, found by its extent
 *     context (read with BTRFS_IOC_TREE_SEARCH_V2 before unmounting), with
 *     a valid metadata checksum; after a remount and the key, reading the
 *     file fails with EIO or EUCLEAN (which one is printed) and the kernel
 *     log says why:
 *       - a flipped bit of the master key identifier in the context, and
 *         context version 9: the tree-checker does not look inside the
 *         context, fscrypt rejects it ("Rejecting extent encryption
 *         context" and/or btrfs's "bad extent encryption context");
 *       - encryption 2 -> 1 with the item cut to the 53 bytes of an item
 *         without a context, which the tree-checker accepts: btrfs's check
 *         of the item against the per-extent inode ("has encryption 1, the
 *         inode needs 2");
 *       - encryption 2 -> 1 alone: the 87-byte item then breaks the
 *         tree-checker's size rule for encryption 1, so the leaf may be
 *         rejected as a whole (the file does not even open); either
 *         message is accepted.
 *
 * The console check of the runner fails the run if any of this oopses.
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
#include <linux/btrfs_tree.h>
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

/* struct btrfs_header: 101 bytes, then the item array (leaves). */
#define HDR_SIZE 101
#define HDR_NRITEMS 96
#define HDR_LEVEL 100
/* struct btrfs_item: disk key (17 bytes), le32 offset, le32 size. */
#define ITEM_SIZE 25
#define ITEM_TYPE 8
#define ITEM_OFFSET 17
#define ITEM_DATA_SIZE 21
#define FE_SIZE LAB_BTRFS_FILE_EXTENT_SIZE
/* the item's encryption byte is this many bytes before its context */
#define FE_ENCRYPTION_BEFORE_CTX (FE_SIZE - LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF)
#define EXTENT_CTX_SIZE LAB_FSCRYPT_EXTENT_CTX_SIZE
#define MAX_EXTENT_CTX 4

static char victim[PATH_MAX];

/*
 * Change one tree block in place: @in is where the searched bytes are in
 * @blk.  Returns 1 if it changed the block, 0 if the block is not the one.
 */
typedef int (*tree_edit_fn)(unsigned char *blk, uint32_t nodesize, size_t in,
			    void *arg);

/*
 * Every tree block of this filesystem on @dev (its fsid, a valid crc32c)
 * that holds the @len bytes at @needle goes through @edit; the blocks it
 * changes get their checksum fixed and are written back, so that only
 * what checks the items (the tree-checker, fscrypt) can catch the change.
 * Every copy is changed (DUP metadata, older copies).  Returns the number
 * of blocks changed, or -1 (with the failure recorded).
 */
static int rewrite_tree_blocks(const char *label, const void *needle,
			       size_t len, tree_edit_fn edit, void *arg)
{
	struct raw_needle nd = { .label = label, .data = needle, .len = len };
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
	if (!CHECK_OK(raw_scan(dev, &nd, 1), "scan %s for the %s", dev, label))
		return -1;
	CHECK(nd.count == (long long)nd.noffs,
	      "%lld copies of the %s, more than the %d kept", nd.count, label,
	      RAW_NEEDLE_MAX_OFFS);
	blk = lab_xmalloc(nodesize);
	for (i = 0; i < nd.noffs; i++) {
		uint64_t off = nd.offs[i], start = off - off % nodesize;
		size_t in = off - start;

		/* read again: an earlier edit may have changed the block */
		if (in + len > nodesize ||
		    !CHECK_OK(raw_read(dev, start, blk, nodesize), "read block"))
			continue;
		if (memcmp(blk + 32, sb + 32, 16) ||
		    get_le32(blk) != crc32c(blk + 32, nodesize - 32) ||
		    memcmp(blk + in, needle, len) ||
		    !edit(blk, nodesize, in, arg))
			continue;
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

/*
 * A fresh filesystem with an encrypted file, victim[] (sv/enc/victim),
 * holding @data; left mounted.  The file is in a subvolume of its own, so
 * that the filesystem still mounts when a leaf of it is rejected.
 */
static int make_victim(uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
		       const void *data, size_t len)
{
	char sv[PATH_MAX], enc[PATH_MAX];

	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s: %s", dev, strerror(errno));
	PATHF(sv, "%s/sv", mnt);
	PATHF(enc, "%s/sv/enc", mnt);
	PATHF(victim, "%s/sv/enc/victim", mnt);
	if (!CHECK(run("btrfs subvolume create %s >/dev/null", sv) == 0,
		   "subvolume create") ||
	    !CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key") ||
	    !CHECK_OK(mkdir(enc, 0755), "mkdir") ||
	    !CHECK_OK(lab_set_policy(enc, id), "set policy") ||
	    !CHECK_OK(write_file(victim, data, len), "write %s", victim)) {
		lab_umount(mnt);
		return -1;
	}
	return 0;
}

/*
 * Mark the kernel log with @marker (only later lines count; never dmesg -C:
 * it would erase the KUnit results), mount again and add the key.
 */
static int remount_marked(const char *marker,
			  uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	CHECK(run("echo %s > /dev/kmsg", marker) == 0, "write to /dev/kmsg");
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "mount after corruption"))
		return -1;
	CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key");
	return 0;
}

/* Is there a kernel log line matching the extended regex @ere after @marker? */
static int log_has(const char *marker, const char *ere)
{
	return run("dmesg | sed -n '/%s/,$p' | grep -E '%s'", marker, ere) == 0;
}

/* The version of an fscrypt context item, v2 expected. */
static int edit_inode_ctx_version(unsigned char *blk, uint32_t nodesize,
				  size_t in, void *arg)
{
	unsigned char *hdr;

	(void)nodesize;
	if (in < CTX_ID_OFFSET)
		return 0;
	/*
	 * A v2 context: version, contents and names modes, flags, 4 reserved
	 * bytes, then the key identifier.  (Extent contexts hold the key
	 * identifier too, after 2 bytes of their own.)
	 */
	hdr = blk + in - CTX_ID_OFFSET;
	if (hdr[0] != FSCRYPT_CONTEXT_V2_VERSION ||
	    hdr[1] != FSCRYPT_MODE_AES_256_XTS || hdr[2] != FSCRYPT_MODE_AES_256_CTS)
		return 0;
	hdr[0] = *(unsigned char *)arg;
	return 1;
}

static void test_corrupt_context(unsigned char version, const char *logmsg)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	unsigned char data[8192];
	char marker[64];
	struct stat st;
	int n, r, e;

	fill_pattern(data, sizeof(data), version);
	if (make_victim(id, data, sizeof(data)))
		return;
	CHECK_OK(lab_umount(mnt), "umount");

	n = rewrite_tree_blocks("master key identifier", id, sizeof(id),
				edit_inode_ctx_version, &version);
	if (!CHECK(n >= 1, "no fscrypt context of the key found on %s", dev))
		return;
	printf("set the version of %d context cop%s to %u\n", n,
	       n == 1 ? "y" : "ies", version);

	snprintf(marker, sizeof(marker), "lab-badinput-%u-%d", version, getpid());
	if (remount_marked(marker, id))
		return;
	errno = 0;
	r = stat(victim, &st);
	e = errno;
	CHECK(r < 0 && (e == EUCLEAN || e == EIO),
	      "stat of a file behind a corrupted context: expected EUCLEAN or EIO, got %s",
	      r < 0 ? strerror(e) : "success");
	CHECK(log_has(marker, logmsg),
	      "no kernel log line \"%s\" after the corruption", logmsg);
	CHECK_OK(lab_umount(mnt), "umount after corruption");
}

/* ---- 3. corrupted extent contexts (per-extent keys) -------------------------- */

/*
 * The bytes at @in are an extent context that follows a file extent item
 * with encryption 2 (the searched bytes are the whole context).
 */
static int is_extent_ctx(const unsigned char *blk, size_t in)
{
	return in >= FE_SIZE &&
	       blk[in - FE_ENCRYPTION_BEFORE_CTX] == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT &&
	       blk[in + LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF] == LAB_FSCRYPT_EXTENT_CTX_V1;
}

static int edit_ctx_key_id(unsigned char *blk, uint32_t nodesize, size_t in,
			   void *arg)
{
	(void)nodesize;
	(void)arg;
	if (!is_extent_ctx(blk, in))
		return 0;
	blk[in + LAB_FSCRYPT_EXTENT_CTX_ID_OFF] ^= 0x01;
	return 1;
}

static int edit_ctx_version(unsigned char *blk, uint32_t nodesize, size_t in,
			    void *arg)
{
	(void)nodesize;
	(void)arg;
	if (!is_extent_ctx(blk, in))
		return 0;
	blk[in + LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF] = 9;
	return 1;
}

/* encryption 2 -> 1, the item still 87 bytes long */
static int edit_encryption(unsigned char *blk, uint32_t nodesize, size_t in,
			   void *arg)
{
	(void)nodesize;
	(void)arg;
	if (!is_extent_ctx(blk, in))
		return 0;
	blk[in - FE_ENCRYPTION_BEFORE_CTX] = LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE;
	return 1;
}

/*
 * encryption 2 -> 1, and the item cut to the 53 bytes that encryption 1
 * has (the context dropped), as btrfs_truncate_item() does it: the data of
 * this item and of the items after it (stored below it) move up by 34
 * bytes, and their offsets with them.  So the leaf is one the tree-checker
 * accepts, and only the check of the item against its inode can object.
 */
static int edit_encryption_and_size(unsigned char *blk, uint32_t nodesize,
				    size_t in, void *arg)
{
	const uint32_t diff = EXTENT_CTX_SIZE;
	uint32_t nritems, slot, i, data_end;
	size_t item = in - FE_SIZE;	/* where the item's data starts */
	unsigned char *it;

	(void)arg;
	if (!is_extent_ctx(blk, in) || blk[HDR_LEVEL] != 0)
		return 0;
	nritems = get_le32(blk + HDR_NRITEMS);
	if (nritems == 0 || HDR_SIZE + (size_t)nritems * ITEM_SIZE > nodesize)
		return 0;
	for (slot = 0; slot < nritems; slot++) {
		it = blk + HDR_SIZE + (size_t)slot * ITEM_SIZE;
		if (it[ITEM_TYPE] == BTRFS_EXTENT_DATA_KEY &&
		    HDR_SIZE + (size_t)get_le32(it + ITEM_OFFSET) == item &&
		    get_le32(it + ITEM_DATA_SIZE) == FE_SIZE + EXTENT_CTX_SIZE)
			break;
	}
	if (slot == nritems)
		return 0;
	data_end = HDR_SIZE + get_le32(blk + HDR_SIZE + (size_t)(nritems - 1) * ITEM_SIZE +
				       ITEM_OFFSET);
	if (data_end > item || item + FE_SIZE + EXTENT_CTX_SIZE > nodesize)
		return 0;
	memmove(blk + data_end + diff, blk + data_end, item + FE_SIZE - data_end);
	memset(blk + data_end, 0, diff);
	for (i = slot; i < nritems; i++) {
		it = blk + HDR_SIZE + (size_t)i * ITEM_SIZE;
		put_le32(it + ITEM_OFFSET, get_le32(it + ITEM_OFFSET) + diff);
	}
	put_le32(blk + HDR_SIZE + (size_t)slot * ITEM_SIZE + ITEM_DATA_SIZE, FE_SIZE);
	blk[item + diff + LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF] =
		LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE;
	return 1;
}

struct extent_case {
	const char *tag;	/* log marker; letters, digits, '-' */
	const char *what;
	tree_edit_fn edit;
	const char *log_ere;	/* the kernel must log a line matching this */
	/* only the extent is bad: the file must open, and read() must fail */
	int inode_ok;
};

/* The victim must not read back: record how it fails. */
static void expect_unreadable(const struct extent_case *ec, const void *data,
			      size_t len)
{
	unsigned char *buf = lab_xmalloc(len + 1);
	ssize_t n;
	int fd, e;

	errno = 0;
	fd = open(victim, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd < 0) {
		printf("%s: open() of the file failed with " LAB_ERR_FMT "\n",
		       ec->what, LAB_ERR_ARGS(e));
		CHECK(!ec->inode_ok,
		      "%s: open() failed with " LAB_ERR_FMT "; only the extent is corrupt, the file should open and read() fail",
		      ec->what, LAB_ERR_ARGS(e));
		CHECK(e == EIO || e == EUCLEAN,
		      "%s: open() failed with " LAB_ERR_FMT ", expected EIO or EUCLEAN",
		      ec->what, LAB_ERR_ARGS(e));
		free(buf);
		return;
	}
	errno = 0;
	n = lab_pread_full(fd, buf, len + 1, 0);
	e = errno;
	close(fd);
	if (n < 0) {
		printf("%s: read() failed with " LAB_ERR_FMT "\n", ec->what,
		       LAB_ERR_ARGS(e));
		CHECK(e == EIO || e == EUCLEAN,
		      "%s: read() failed with " LAB_ERR_FMT ", expected EIO or EUCLEAN",
		      ec->what, LAB_ERR_ARGS(e));
	} else {
		CHECK(0, "%s: read() of the file returned %zd bytes (%s) instead of failing",
		      ec->what, n,
		      (size_t)n == len && memcmp(buf, data, len) == 0 ?
		      "the data written" : "not the data written");
	}
	free(buf);
}

static void test_corrupt_extent(const struct extent_case *ec, uint32_t seed)
{
	unsigned char ctx[MAX_EXTENT_CTX][EXTENT_CTX_SIZE];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct lab_btrfs_file_extent *fe = NULL;
	unsigned char data[8192];
	char marker[64];
	size_t nfe = 0, nctx = 0, i;
	struct stat st;
	int n = 0, r;

	printf("== extent context corruption: %s\n", ec->what);
	fill_pattern(data, sizeof(data), seed);
	if (make_victim(id, data, sizeof(data)))
		return;
	sync();		/* writeback: the file extent items exist now */
	if (CHECK_OK(stat(victim, &st), "stat %s", victim) &&
	    CHECK_OK(lab_btrfs_file_extents(victim, st.st_ino, &fe, &nfe),
		     "file extent items of %s through TREE_SEARCH_V2", victim)) {
		for (i = 0; i < nfe; i++)
			if (fe[i].encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT &&
			    fe[i].item_size == FE_SIZE + EXTENT_CTX_SIZE &&
			    nctx < MAX_EXTENT_CTX)
				memcpy(ctx[nctx++], fe[i].ctx, EXTENT_CTX_SIZE);
		CHECK(nctx >= 1 && nctx == nfe,
		      "victim: %zu file extent item(s), %zu with encryption 2 and an extent context: the file is not encrypted per extent as the kernel advertises",
		      nfe, nctx);
	}
	free(fe);
	CHECK_OK(lab_umount(mnt), "umount");
	if (nctx == 0)
		return;

	for (i = 0; i < nctx; i++) {
		r = rewrite_tree_blocks("extent context", ctx[i], EXTENT_CTX_SIZE,
					ec->edit, NULL);
		if (r < 0)
			return;
		n += r;
	}
	if (!CHECK(n >= 1, "%s: no tree block with the victim's extent context found on %s",
		   ec->what, dev))
		return;
	printf("%s: changed %d tree block cop%s\n", ec->what, n, n == 1 ? "y" : "ies");

	snprintf(marker, sizeof(marker), "lab-badinput-%s-%d", ec->tag, getpid());
	if (remount_marked(marker, id))
		return;
	expect_unreadable(ec, data, sizeof(data));
	CHECK(log_has(marker, ec->log_ere),
	      "%s: no kernel log line matching \"%s\" after the corruption",
	      ec->what, ec->log_ere);
	CHECK_OK(lab_umount(mnt), "umount after corruption");
}

static const struct extent_case extent_cases[] = {
	{ "extent-key-id", "master key identifier of the extent context",
	  edit_ctx_key_id,
	  "Rejecting extent encryption context|bad extent encryption context", 1 },
	{ "extent-version", "extent context version 9",
	  edit_ctx_version,
	  "Rejecting extent encryption context|bad extent encryption context", 1 },
	/*
	 * The item keeps its 87 bytes: the tree-checker's size rule (53 bytes
	 * unless encryption is 2) may reject the leaf before the inode check
	 * can; either message will do.
	 */
	{ "extent-encryption", "encryption 2 -> 1, item size left at 87",
	  edit_encryption,
	  "invalid item size for reg/prealloc file extent|has encryption 1, the inode needs 2", 0 },
	{ "extent-encryption-cut", "encryption 2 -> 1, item cut to 53 bytes",
	  edit_encryption_and_size,
	  "has encryption 1, the inode needs 2", 1 },
};

int main(void)
{
	size_t i;

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
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) != 0) {
		printf("no %s: btrfs has per-inode keys only, no extent contexts to corrupt\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
	} else {
		for (i = 0; i < sizeof(extent_cases) / sizeof(extent_cases[0]); i++)
			test_corrupt_extent(&extent_cases[i], 0xe0u + (uint32_t)i);
	}
	return lab_result("btrfs_fscrypt_badinput");
}
