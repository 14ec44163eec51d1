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
 *     a valid metadata checksum; after a remount and the key, the kernel
 *     must answer as the case says.  By default btrfs writes version 2
 *     contexts (40 bytes, a key group's key and the extent's number in the
 *     group: 93-byte items); under `mount -o remount,fscrypt_extents_per_key=1`
 *     version 1 contexts (34 bytes, a key per extent: 87-byte items).
 *       - rejected by fscrypt when the extent is loaded: the file opens,
 *         read() fails (EUCLEAN, or EIO), fscrypt warns "Rejecting extent
 *         encryption context (WHY, LEN bytes, version V)" naming the
 *         inode, and btrfs logs "bad extent encryption context in root R
 *         ino I offset 0 (extent at B)" with the victim's inode and disk
 *         bytenr.  Version 2: a flipped bit of the key identifier (master
 *         key differs), version 9 (unknown version), version 2 -> 1 in the
 *         93-byte item (wrong size, 40 bytes, version 1), contents mode 127
 *         (contents mode differs), flags 1 and reserved byte 0x80 (unknown
 *         flags).  Version 1: key
 *         identifier, version 9, version 1 -> 2 in the 87-byte item (wrong
 *         size, 34 bytes, version 2), mode 127;
 *       - extent number 2^32 - 1, the largest one its 32 bits hold: accepted
 *         (every extent number is valid): the file reads without an error, but not
 *         the data written (another IV), nothing is logged, and btrfs check
 *         finds the filesystem clean;
 *       - rejected by btrfs's check of the item against the per-extent
 *         inode when the extent is loaded ("has encryption 129/0, the inode
 *         needs 130"): encryption 0x82 -> 0x81 and 0x82 -> 0 with the item cut to the
 *         53 bytes of an item without a context, which the tree-checker
 *         accepts;
 *       - rejected by the tree-checker, the whole leaf (the file does not
 *         even open, and the partner in that leaf fails too): the item cut
 *         to 92 bytes (53 + 39, neither version's size: "invalid item size
 *         for reg/prealloc file extent, have 92 expect 93"), encryption
 *         0x82 -> 0x81 with the item left at 93 bytes ("have 93 expect 53"),
 *         and 0x82 -> 1, upstream's value for "context in its own item",
 *         with the item cut to 53 bytes ("invalid encryption for file
 *         extent, have 0x1").  An upstream-layout extent is refused, never
 *         read as data with the wrong key.
 *     Every case has a second encrypted file, the partner, whose file
 *     extent item is in the same leaf as the victim's, checked, else the
 *     case fails as vacuous: the subvolume's ROOT_ITEM says its tree is a
 *     single leaf (level 0) at bytenr B, and on the device the newest copy
 *     of the block at B holds both items and is the one the edit changed
 *     (generations alone cannot tell the live leaf: a leaf written out
 *     during a transaction is COWed again in it).  Where the extent is
 *     rejected at load, the error must stay with the victim: the partner
 *     reads back byte-exact, the victim stats, and the directory stats and
 *     lists both names;
 *  4. an inline file extent item in an encrypted regular file (per-inode
 *     keys, mount option fscrypt_per_inode_keys, when the kernel has
 *     per-extent keys): the 53-byte item of the victim's only extent, at
 *     file offset 0 (its leaf found by the file's nonce, in its inode's
 *     fscrypt context), is rewritten into an inline extent that the
 *     tree-checker accepts (type 0, compression 0, encryption 0 as the
 *     series requires of inline extents, ram_bytes = 53 - 21 = 32, the
 *     inline bytes a plaintext marker).  Encrypted files never get inline
 *     extents, so reading it must fail with EUCLEAN and the log must say
 *     "inline extent in encrypted file of root R ino I offset 0", instead
 *     of handing the marker out as file contents; the partner in the same
 *     leaf still reads back.
 *
 *  5. (per-extent keys) a preallocated extent past EOF of an encrypted
 *     file rewritten to encryption 0, its inode to NODATACOW (not
 *     PREALLOC), then written into at EOF and fsynced: the write fails
 *     cleanly (EIO or EUCLEAN, "has encryption 0, the inode needs 130"),
 *     with no kernel warning, and the partner in the same leaf reads back.
 *
 * The console check of the runner fails the run if any of this oopses.
 *
 * Every corruption of 2.-4. (but the valid extent number 2^32 - 1) must
 * also be found by the image's patched `btrfs check --readonly`
 * (patches/btrfs-progs/): before the edit the same filesystem checks clean
 * (so the check can tell), after it the check exits non-zero and names the
 * victim's inode (and, for extents, the file offset) with the reason (for
 * extent contexts, the reason as btrfs-progs words it, which is not
 * fscrypt's wording).  Two corruptions only the checker is asked about, since the kernel has nothing to refuse: the victim's context item
 * turned into an unknown key type (an encrypted inode without a context),
 * and, with per-extent keys, encryption 0x82 -> 0 with the item cut to 53
 * bytes (an unencrypted extent in an encrypted file; the kernel must fail
 * the read too).  On the inode without a context, `btrfs check --repair`
 * must refuse, saying so, and leave it as it was (a read-only check then
 * reports the same).  Without the patched btrfs-progs the test skips,
 * saying so.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "btrfs_raw.h"
#include "crc32c.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/falloc.h>
#include <linux/btrfs_tree.h>
#include <linux/fscrypt.h>

#define KEY_SEED 0xbad1u
#define SB_OFFSET 65536
/* In a v2 context the master key identifier follows 8 bytes of header. */
#define CTX_ID_OFFSET 8
#define FSCRYPT_CONTEXT_V2_VERSION 2
/* FS_IOC_GET_ENCRYPTION_NONCE returns the 16-byte file nonce. */
#define FILE_NONCE_SIZE 16
#define BLK_SIZE 4096

static const char *dev, *mnt;

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

/* struct btrfs_file_extent_item: where the fields are */
#define FE_RAM_BYTES offsetof(struct btrfs_file_extent_item, ram_bytes)
#define FE_COMPRESSION offsetof(struct btrfs_file_extent_item, compression)
#define FE_ENCRYPTION offsetof(struct btrfs_file_extent_item, encryption)
#define FE_OTHER_ENCODING offsetof(struct btrfs_file_extent_item, other_encoding)
#define FE_TYPE offsetof(struct btrfs_file_extent_item, type)
/* inline data starts where a regular extent's disk_bytenr is */
#define FE_INLINE_DATA offsetof(struct btrfs_file_extent_item, disk_bytenr)
#define FE_SIZE LAB_BTRFS_FILE_EXTENT_SIZE
/* the item's encryption byte is this many bytes before its context */
#define FE_ENCRYPTION_BEFORE_CTX (FE_SIZE - LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF)
/* extent contexts of a victim that the corruption cases take */
#define MAX_EXTENT_CTX 4

/*
 * The victim is the file whose item is corrupted; the partner (when the
 * case has one) an intact encrypted file in the same directory, written in
 * the same transaction, so its items are in the same leaf.
 */
static char victim[PATH_MAX], partner[PATH_MAX], enc_dir[PATH_MAX];

/*
 * For a case with a partner: the subvolume tree's root as the root tree
 * says after the last commit (read while mounted), the bytes only the
 * partner's item holds, and what the device showed before the edit.  With
 * a root of level 0 the tree is that one leaf, which therefore holds every
 * item of the subvolume; the device must agree (the newest copy of that
 * block holds the victim's and the partner's bytes, and no block holding
 * them is newer), and the edit must have changed that block.  The block's
 * generation alone cannot tell: a leaf written out in the middle of a
 * transaction is COWed again in the same one, so copies at two addresses
 * can have the same generation.
 */
struct leaf_share {
	uint64_t root, root_gen;	/* bytenr and generation of the root */
	uint8_t root_level;
	const void *needle;
	size_t len;
	/* if not NULL: bytes the partner's leaf must hold as well */
	const void *also;
	size_t also_len;
	/* results */
	int victim_in_root, partner_in_root;
	uint64_t victim_gen;		/* of the root block holding the victim */
	int live_leaf_edited;
};

/*
 * Change one tree block in place: @in is where the searched bytes are in
 * @blk.  Returns 1 if it changed the block, 0 if the block is not the one.
 */
typedef int (*tree_edit_fn)(unsigned char *blk, uint32_t nodesize, size_t in,
			    void *arg);

/*
 * Read the tree block at device offset @start into @blk; 1 if it is one of
 * this filesystem's (the fsid of @sb) with a valid crc32c.
 */
static int read_tree_block(uint64_t start, unsigned char *blk,
			   uint32_t nodesize, const unsigned char *sb)
{
	if (!CHECK_OK(raw_read(dev, start, blk, nodesize), "read block at %llu",
		      (unsigned long long)start))
		return 0;
	return !memcmp(blk + BRAW_HDR_FSID, sb + BRAW_HDR_FSID, 16) &&
	       braw_csum_ok(blk, nodesize);
}

/*
 * Do the valid leaves holding the bytes of @nd (scanned) put them in the
 * block at logical address @root, in its newest copy, with no newer block
 * holding them elsewhere?  That copy's generation goes to *@gen.  With
 * @also, that copy must hold the @also_len bytes at @also too.
 */
static int in_root_leaf(const struct raw_needle *nd, unsigned char *blk,
			uint32_t nodesize, const unsigned char *sb,
			uint64_t root, uint64_t *gen, const void *also,
			size_t also_len)
{
	uint64_t newest = 0, g;
	int has_also = 0;
	size_t i;

	*gen = 0;
	for (i = 0; i < nd->noffs; i++) {
		uint64_t off = nd->offs[i], start = off - off % nodesize;
		size_t in = off - start;

		if (in + nd->len > nodesize ||
		    !read_tree_block(start, blk, nodesize, sb) ||
		    blk[BRAW_HDR_LEVEL] != 0 || memcmp(blk + in, nd->data, nd->len))
			continue;
		g = braw_le64(blk + BRAW_HDR_GENERATION);
		if (g > newest)
			newest = g;
		if (braw_le64(blk + BRAW_HDR_BYTENR) == root && g > *gen) {
			*gen = g;
			has_also = !also || memmem(blk, nodesize, also, also_len);
		}
	}
	return *gen != 0 && *gen == newest && has_also;
}

/*
 * Every tree block of this filesystem on @dev (its fsid, a valid crc32c)
 * that holds the @len bytes at @needle goes through @edit; the blocks it
 * changes get their checksum fixed and are written back, so that only
 * what checks the items (the tree-checker, fscrypt) can catch the change.
 * Every copy is changed (DUP metadata, older copies).  With @share, the
 * same scan finds the partner's bytes, and *@share says which leaves held
 * both before the edit.  Returns the number of blocks changed, or -1 (with
 * the failure recorded).
 */
static int rewrite_tree_blocks(const char *label, const void *needle,
			       size_t len, tree_edit_fn edit, void *arg,
			       struct leaf_share *share)
{
	struct raw_needle nd[2] = {
		{ .label = label, .data = needle, .len = len },
		{ .label = "partner's item" },
	};
	unsigned char sb[4096], *blk = NULL;
	uint32_t nodesize;
	int changed = 0;
	size_t i, n = 1;

	if (!CHECK_OK(raw_read(dev, SB_OFFSET, sb, sizeof(sb)), "read superblock"))
		return -1;
	nodesize = braw_le32(sb + 0x94);	/* btrfs_super_block::nodesize */
	if (!CHECK(nodesize >= 4096 && nodesize <= 65536 &&
		   !(nodesize & (nodesize - 1)), "implausible nodesize %u",
		   nodesize))
		return -1;
	if (share) {
		nd[1].data = share->needle;
		nd[1].len = share->len;
		n = 2;
	}
	if (!CHECK_OK(raw_scan(dev, nd, n), "scan %s for the %s", dev, label))
		return -1;
	for (i = 0; i < n; i++)
		CHECK(nd[i].count == (long long)nd[i].noffs,
		      "%lld copies of the %s, more than the %d kept",
		      nd[i].count, nd[i].label, RAW_NEEDLE_MAX_OFFS);
	blk = lab_xmalloc(nodesize);
	if (share) {
		uint64_t pgen;

		share->victim_in_root =
			in_root_leaf(&nd[0], blk, nodesize, sb, share->root,
				     &share->victim_gen, NULL, 0);
		share->partner_in_root =
			in_root_leaf(&nd[1], blk, nodesize, sb, share->root,
				     &pgen, share->also, share->also_len);
		share->live_leaf_edited = 0;
		printf("subvolume tree root %llu (level %u, generation %llu): the newest copy on %s holds the victim's item: %s, the partner's: %s\n",
		       (unsigned long long)share->root, share->root_level,
		       (unsigned long long)share->root_gen, dev,
		       share->victim_in_root ? "yes" : "no",
		       share->partner_in_root ? "yes" : "no");
	}
	for (i = 0; i < nd[0].noffs; i++) {
		uint64_t off = nd[0].offs[i], start = off - off % nodesize;
		size_t in = off - start;

		/* read again: an earlier edit may have changed the block */
		if (in + len > nodesize ||
		    !read_tree_block(start, blk, nodesize, sb) ||
		    memcmp(blk + in, needle, len) ||
		    !edit(blk, nodesize, in, arg))
			continue;
		braw_csum(blk, nodesize);
		if (!CHECK_OK(raw_write_sync(dev, start, blk, nodesize),
			      "rewrite tree block at %llu",
			      (unsigned long long)start))
			break;
		if (share && braw_le64(blk + BRAW_HDR_BYTENR) == share->root &&
		    braw_le64(blk + BRAW_HDR_GENERATION) == share->victim_gen)
			share->live_leaf_edited = 1;
		changed++;
	}
	free(blk);
	return changed;
}

/*
 * The root of the tree of the subvolume holding @path, from its ROOT_ITEM
 * in the root tree (BTRFS_IOC_TREE_SEARCH of tree 1): its bytenr,
 * generation and level go to *@share.  Call after sync(), just before
 * unmounting.  0 or -1 (failure recorded).
 */
static int read_subvol_root(const char *path, struct leaf_share *share)
{
	struct btrfs_root_item ri;
	int len;

	memset(&ri, 0, sizeof(ri));
	len = lab_btrfs_root_item(path, NULL, &ri, sizeof(ri));
	if (!CHECK_OK(len, "the ROOT_ITEM of the subvolume of %s", path) ||
	    !CHECK((size_t)len >= offsetof(struct btrfs_root_item, level) + 1,
		   "the ROOT_ITEM of the subvolume of %s has %d bytes", path, len))
		return -1;
	share->root = le64toh(ri.bytenr);
	share->root_gen = le64toh(ri.generation);
	share->root_level = ri.level;
	return 0;
}

/*
 * The case is only worth something if the victim's and the partner's items
 * were in one leaf, and that leaf got the corruption.
 */
static int check_shared_leaf(const char *what, const struct leaf_share *share)
{
	int ok = CHECK(share->root_level == 0,
		       "%s: the subvolume tree has level %u, not a single leaf: cannot tell that the victim and the partner share a leaf",
		       what, share->root_level);

	ok = ok && CHECK(share->victim_in_root && share->partner_in_root,
			 "%s: the newest copy of the subvolume's only leaf %llu on %s holds the victim's item: %s, the partner's: %s; the partner check would prove nothing",
			 what, (unsigned long long)share->root, dev,
			 share->victim_in_root ? "yes" : "no",
			 share->partner_in_root ? "yes" : "no");
	ok = ok && CHECK(share->live_leaf_edited,
			 "%s: the live leaf %llu (generation %llu) was not among the blocks changed",
			 what, (unsigned long long)share->root,
			 (unsigned long long)share->victim_gen);
	if (ok)
		printf("%s: the victim's and the partner's items are both in leaf %llu, the subvolume's only one, and it was changed\n",
		       what, (unsigned long long)share->root);
	return ok;
}

/*
 * The slot of the item of @type whose data starts at @in in the leaf @blk
 * and is @size bytes long, or -1.
 */
static int find_item(const unsigned char *blk, uint32_t nodesize, size_t in,
		     uint8_t type, uint32_t size)
{
	struct braw_key key;
	uint32_t slot;

	if (!braw_leaf_sane(blk, nodesize))
		return -1;
	for (slot = 0; slot < braw_nritems(blk); slot++) {
		braw_item_key(blk, slot, &key);
		if (key.type == type && braw_item_start(blk, slot) == in &&
		    braw_item_size(blk, slot) == size)
			return (int)slot;
	}
	return -1;
}

/* The slot of the item with key (@objectid, @type, @offset) in @blk, or -1. */
static int find_item_by_key(const unsigned char *blk, uint32_t nodesize,
			    uint64_t objectid, uint8_t type, uint64_t offset)
{
	struct braw_key key;
	uint32_t slot;

	if (!braw_leaf_sane(blk, nodesize))
		return -1;
	for (slot = 0; slot < braw_nritems(blk); slot++) {
		braw_item_key(blk, slot, &key);
		if (key.objectid == objectid && key.type == type &&
		    key.offset == offset)
			return (int)slot;
	}
	return -1;
}

/*
 * A fresh filesystem mounted with @opts (may be NULL), then remounted with
 * @remount if that is not NULL, with an encrypted file, victim[]
 * (sv/enc/victim), holding @data, and if @pdata is not NULL the partner
 * (sv/enc/partner) holding @pdata, both written back in one transaction;
 * left mounted.  The files are in a subvolume of their own, so that the
 * filesystem still mounts when a leaf of it is rejected.
 */
static int make_victim(uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
		       const void *data, size_t len, const char *opts,
		       const char *remount, const void *pdata, size_t plen)
{
	char sv[PATH_MAX];

	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (lab_mount(dev, mnt, "btrfs", opts))
		lab_die("mount %s -o %s: %s", dev, opts ? opts : "(none)",
			strerror(errno));
	if (remount && run("mount -o remount,%s %s", remount, mnt))
		lab_die("mount -o remount,%s %s failed", remount, mnt);
	PATHF(sv, "%s/sv", mnt);
	PATHF(enc_dir, "%s/sv/enc", mnt);
	PATHF(victim, "%s/victim", enc_dir);
	PATHF(partner, "%s/partner", enc_dir);
	if (!CHECK(run("btrfs subvolume create %s >/dev/null", sv) == 0,
		   "subvolume create") ||
	    !CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key") ||
	    !CHECK_OK(mkdir(enc_dir, 0755), "mkdir") ||
	    !CHECK_OK(lab_set_policy(enc_dir, id), "set policy") ||
	    !CHECK_OK(write_file(victim, data, len), "write %s", victim) ||
	    (pdata && !CHECK_OK(write_file(partner, pdata, plen), "write %s",
				partner))) {
		lab_umount(mnt);
		return -1;
	}
	return 0;
}

/*
 * Mark the kernel log with @marker (only later lines count; never dmesg -C:
 * it would erase the KUnit results), mount again with @opts and add the key.
 */
static int remount_marked(const char *marker,
			  uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
			  const char *opts)
{
	CHECK(lab_log_mark("%s", marker) == 0, "write to /dev/kmsg");
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "mount after corruption"))
		return -1;
	CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key");
	return 0;
}

/*
 * After the victim failed: the rest of its leaf is fine.  The directory
 * stats and lists both names, the victim's inode stats, and the partner
 * reads back byte-exact (the mount is fresh: nothing of it is cached).
 */
static void expect_partner_intact(const char *what, const void *pdata,
				  size_t plen)
{
	int seen_victim = 0, seen_partner = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;

	CHECK_OK(stat(enc_dir, &st), "%s: stat of the directory %s", what,
		 enc_dir);
	CHECK_OK(stat(victim, &st), "%s: stat of the victim %s", what, victim);
	d = opendir(enc_dir);
	if (CHECK(d != NULL, "%s: opendir %s: " LAB_ERR_FMT, what, enc_dir,
		  LAB_ERR_ARGS(errno))) {
		errno = 0;
		while ((de = readdir(d))) {
			seen_victim |= !strcmp(de->d_name, "victim");
			seen_partner |= !strcmp(de->d_name, "partner");
		}
		CHECK(errno == 0, "%s: readdir %s: " LAB_ERR_FMT, what, enc_dir,
		      LAB_ERR_ARGS(errno));
		closedir(d);
		CHECK(seen_victim && seen_partner,
		      "%s: readdir of %s: victim %s, partner %s", what, enc_dir,
		      seen_victim ? "listed" : "missing",
		      seen_partner ? "listed" : "missing");
	}
	if (CHECK_FILE_EQUALS(partner, pdata, plen))
		printf("%s: the partner in the same leaf reads back byte-exact\n",
		       what);
}

/*
 * Unmounted, after a corruption of @what: the patched btrfs check must exit
 * non-zero and say "inode @ino" followed by @msg (e.g. ": bad fscrypt
 * context item (size 40, version 9)" or " file extent at offset 0: ...").
 */
static void expect_check_finds(const char *what, uint64_t ino, const char *msg)
{
	char want[256];
	char *out = NULL;
	int st;

	snprintf(want, sizeof(want), "inode %llu%s", (unsigned long long)ino, msg);
	printf("%s: btrfs check --readonly must exit non-zero and report \"%s\"\n",
	       what, want);
	st = lab_btrfs_check_output(dev, &out);
	if (st != -1) {
		CHECK(st != 0, "%s: btrfs check --readonly exited 0 on the corrupted filesystem", what);
		CHECK(strstr(out, want) != NULL,
		      "%s: btrfs check --readonly did not report \"%s\" (output above)",
		      what, want);
	}
	free(out);
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

static void test_corrupt_context(unsigned char version, const char *logmsg,
				 const char *progs_msg)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	unsigned char data[8192];
	char marker[64], what[64];
	struct stat st;
	uint64_t ino = 0;
	int n, r, e;

	snprintf(what, sizeof(what), "context version %u", version);
	fill_pattern(data, sizeof(data), version);
	if (make_victim(id, data, sizeof(data), NULL, NULL, NULL, 0))
		return;
	if (CHECK_OK(stat(victim, &st), "stat %s", victim))
		ino = st.st_ino;
	CHECK_OK(lab_umount(mnt), "umount");
	lab_btrfs_check_clean(dev, "the victim's filesystem, before the corruption");

	n = rewrite_tree_blocks("master key identifier", id, sizeof(id),
				edit_inode_ctx_version, &version, NULL);
	if (!CHECK(n >= 1, "no fscrypt context of the key found on %s", dev))
		return;
	printf("set the version of %d context cop%s to %u\n", n,
	       n == 1 ? "y" : "ies", version);

	snprintf(marker, sizeof(marker), "lab-badinput-%u-%d", version, getpid());
	if (remount_marked(marker, id, NULL))
		return;
	errno = 0;
	r = stat(victim, &st);
	e = errno;
	CHECK(r < 0 && (e == EUCLEAN || e == EIO),
	      "stat of a file behind a corrupted context: expected EUCLEAN or EIO, got %s",
	      r < 0 ? strerror(e) : "success");
	CHECK(lab_log_has(logmsg),
	      "no kernel log line \"%s\" after the corruption", logmsg);
	if (CHECK_OK(lab_umount(mnt), "umount after corruption"))
		expect_check_finds(what, ino, progs_msg);
}

/* ---- 3. corrupted extent contexts (per-extent keys) -------------------------- */

/* An item size that fits neither version of the context: 53 + 39. */
#define ODD_CTX_SIZE 39
/* The largest extent number a version 2 context holds (__le32). */
#define EXTENT_NR_MAX 0xffffffffULL
/* upstream's btrfs fscrypt series (v7): "context in its own item" */
#define UPSTREAM_ENCRYPTION 1
/* The mount option under which btrfs writes version 1 contexts. */
#define V1_OPT "fscrypt_extents_per_key=1"

/* How the kernel must answer a corrupted extent. */
enum ec_outcome {
	/*
	 * fscrypt rejects the context when the extent is loaded (-EUCLEAN):
	 * the file opens, read() fails (EUCLEAN; EIO would do), fscrypt
	 * warns "Rejecting extent encryption context (@why, @log_len bytes,
	 * version @log_version)" naming the inode, and btrfs logs "bad
	 * extent encryption context in root R ino I offset 0 (extent at B)"
	 * with the victim's disk bytenr; the partner in the same leaf reads
	 * back.
	 */
	AT_LOAD,
	/*
	 * btrfs rejects the item against its inode when the extent is
	 * loaded: the file opens, read() fails (EIO or EUCLEAN), a line
	 * matching @log_ere; the partner reads back.
	 */
	IN_BTRFS,
	/*
	 * The tree-checker rejects the leaf: opening or reading the file
	 * fails (EIO or EUCLEAN), a line matching @log_ere, and the partner,
	 * in the same leaf, does not read either.
	 */
	TREE_CHECKER,
	/*
	 * The context is valid (if wrong): the file reads without an error
	 * (but not the data written), nothing is logged, and btrfs check
	 * finds the filesystem clean.
	 */
	ACCEPTED,
};

struct extent_case {
	const char *tag;	/* log marker; letters, digits, '-' */
	const char *what;
	int version;		/* of the contexts written: 2, or 1 (V1_OPT) */
	tree_edit_fn edit;	/* called with the case as its argument */
	unsigned int off;	/* edit_ctx_byte(): which byte of the context */
	uint64_t value;		/* what the edit writes */
	unsigned int cut;	/* edit_cut(): bytes cut from the item's end */
	enum ec_outcome outcome;
	const char *why;	/* AT_LOAD */
	unsigned int log_len, log_version;
	const char *log_ere;	/* IN_BTRFS, TREE_CHECKER */
	/* what btrfs check must say after "inode INO" (not for ACCEPTED) */
	const char *progs_msg;
};

static size_t ctx_size(const struct extent_case *ec)
{
	return ec->version == LAB_FSCRYPT_EXTENT_CTX_V1 ?
	       LAB_FSCRYPT_EXTENT_CTX_V1_SIZE : LAB_FSCRYPT_EXTENT_CTX_V2_SIZE;
}

/*
 * How much of a context the device is scanned for: a version 1 context
 * whole; of a version 2 one all but the extent number, so that the needle
 * ends in the random key nonce.  Ending in the number's zero bytes, it
 * would make the scan (Boyer-Moore-Horspool) step one byte at a time over
 * the zeros that most of the device holds.  The key nonce is the file's
 * key group's, so the prefix finds every extent of the group; the edits
 * check the item around each find.
 */
static size_t ctx_needle_len(const struct extent_case *ec)
{
	return ec->version == LAB_FSCRYPT_EXTENT_CTX_V1 ?
	       LAB_FSCRYPT_EXTENT_CTX_V1_SIZE : LAB_FSCRYPT_EXTENT_CTX_V2_NR_OFF;
}

/*
 * The bytes at @in are the context of the case's version that follows a
 * file extent item with encryption 0x82 of the size of that version (the
 * searched bytes are the context, or its first ctx_needle_len() bytes).
 * The item's slot, or -1.
 */
static int extent_ctx_slot(const unsigned char *blk, uint32_t nodesize,
			   size_t in, const struct extent_case *ec)
{
	if (in < FE_SIZE ||
	    blk[in - FE_ENCRYPTION_BEFORE_CTX] != LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT ||
	    blk[in + LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF] != ec->version)
		return -1;
	return find_item(blk, nodesize, in - FE_SIZE, BTRFS_EXTENT_DATA_KEY,
			 FE_SIZE + ctx_size(ec));
}

/* One byte of the context (version, mode, flags, reserved) := value. */
static int edit_ctx_byte(unsigned char *blk, uint32_t nodesize, size_t in,
			 void *arg)
{
	const struct extent_case *ec = arg;

	if (extent_ctx_slot(blk, nodesize, in, ec) < 0)
		return 0;
	blk[in + ec->off] = (unsigned char)ec->value;
	return 1;
}

/* A flipped bit of the master key identifier (of either version). */
static int edit_ctx_key_id(unsigned char *blk, uint32_t nodesize, size_t in,
			   void *arg)
{
	const struct extent_case *ec = arg;

	if (extent_ctx_slot(blk, nodesize, in, ec) < 0)
		return 0;
	blk[in + (ec->version == LAB_FSCRYPT_EXTENT_CTX_V1 ?
		  LAB_FSCRYPT_EXTENT_CTX_V1_ID_OFF :
		  LAB_FSCRYPT_EXTENT_CTX_V2_ID_OFF)] ^= 0x01;
	return 1;
}

/* The extent number of a version 2 context := value. */
static int edit_ctx_nr(unsigned char *blk, uint32_t nodesize, size_t in,
		       void *arg)
{
	const struct extent_case *ec = arg;

	if (ec->version != LAB_FSCRYPT_EXTENT_CTX_V2 ||
	    extent_ctx_slot(blk, nodesize, in, ec) < 0)
		return 0;
	braw_put_le32(blk + in + LAB_FSCRYPT_EXTENT_CTX_V2_NR_OFF,
		      (uint32_t)ec->value);
	return 1;
}

/* The item's encryption := value, its size left as it is. */
static int edit_encryption(unsigned char *blk, uint32_t nodesize, size_t in,
			   void *arg)
{
	const struct extent_case *ec = arg;

	if (extent_ctx_slot(blk, nodesize, in, ec) < 0)
		return 0;
	blk[in - FE_ENCRYPTION_BEFORE_CTX] = (unsigned char)ec->value;
	return 1;
}

/*
 * The item's encryption := value, and its last @cut bytes (of the context)
 * cut off, as btrfs_truncate_item() does it: the data of this item and of
 * the items after it (stored below it) move up by @cut bytes, and their
 * offsets with them.  So the leaf stays well-formed, and only the checks
 * of the item itself (its size, its encryption against its inode) can
 * object.
 */
static int edit_cut(unsigned char *blk, uint32_t nodesize, size_t in,
		    void *arg)
{
	const struct extent_case *ec = arg;
	const uint32_t cut = ec->cut, keep = FE_SIZE + ctx_size(ec) - cut;
	int slot = extent_ctx_slot(blk, nodesize, in, ec);

	if (slot < 0 || cut == 0 || cut > ctx_size(ec) ||
	    braw_item_resize(blk, nodesize, (uint32_t)slot, keep, 0))
		return 0;
	blk[braw_item_start(blk, (uint32_t)slot) +
	    LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF] = (unsigned char)ec->value;
	return 1;
}

/*
 * Read the victim back: returns the bytes read (at most @len + 1), or -1
 * with the error in *@err; *@open_failed says whether open() failed.
 */
static ssize_t read_victim(const char *path, unsigned char *buf, size_t len,
			   int *err, int *open_failed)
{
	ssize_t n;
	int fd;

	*open_failed = 0;
	errno = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*err = errno;
		*open_failed = 1;
		return -1;
	}
	errno = 0;
	n = lab_pread_full(fd, buf, len + 1, 0);
	*err = errno;
	close(fd);
	return n;
}

/* The victim must answer as the case says. */
static void expect_outcome(const struct extent_case *ec, const void *data,
			   size_t len)
{
	unsigned char *buf = lab_xmalloc(len + 1);
	int e, open_failed;
	ssize_t n;

	n = read_victim(victim, buf, len, &e, &open_failed);
	if (n < 0)
		printf("%s: %s() of the file failed with " LAB_ERR_FMT "\n",
		       ec->what, open_failed ? "open" : "read", LAB_ERR_ARGS(e));
	else
		printf("%s: read() of the file returned %zd bytes, %s\n", ec->what,
		       n, (size_t)n == len && !memcmp(buf, data, len) ?
		       "the data written" : "not the data written");
	switch (ec->outcome) {
	case AT_LOAD:
	case IN_BTRFS:
		CHECK(n < 0 && !open_failed && (e == EIO || e == EUCLEAN),
		      "%s: want open() to succeed and read() to fail with EIO or EUCLEAN",
		      ec->what);
		break;
	case TREE_CHECKER:
		CHECK(n < 0 && (e == EIO || e == EUCLEAN),
		      "%s: want open() or read() to fail with EIO or EUCLEAN", ec->what);
		break;
	case ACCEPTED:
		CHECK(n == (ssize_t)len && memcmp(buf, data, len) != 0,
		      "%s: want all %zu bytes read without an error, and not the data written (another IV)",
		      ec->what, len);
		break;
	}
	free(buf);
}

/*
 * The contexts of the file extent items of @path (sync'ed before), which
 * must all have encryption 0x82 and a context of @ec's version: up to @max
 * into @ctx, the disk bytenr of the item at file offset 0 into *@bytenr.
 * The number of items, or -1 (failure recorded).
 */
static int extent_ctxs(const char *path, const struct extent_case *ec,
		       unsigned char ctx[][LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE],
		       size_t max, uint64_t *bytenr)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_fscrypt_extent_ctx c;
	size_t nfe = 0, nctx = 0, i;
	struct stat st;

	*bytenr = 0;
	if (!CHECK_OK(stat(path, &st), "stat %s", path) ||
	    !CHECK_OK(lab_btrfs_file_extents(path, st.st_ino, &fe, &nfe),
		      "file extent items of %s through TREE_SEARCH_V2", path))
		return -1;
	for (i = 0; i < nfe; i++) {
		if (fe[i].encryption != LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT ||
		    fe[i].item_size != FE_SIZE + ctx_size(ec) ||
		    fe[i].tail_len != ctx_size(ec) ||
		    lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &c) ||
		    c.version != ec->version || nctx == max)
			continue;
		memcpy(ctx[nctx++], fe[i].ctx, ctx_size(ec));
		if (fe[i].file_offset == 0)
			*bytenr = fe[i].disk_bytenr;
	}
	CHECK(nctx >= 1 && nctx == nfe && *bytenr,
	      "%s: %zu file extent item(s), %zu with encryption 0x82 and a version %d context of %zu bytes (want all; one at offset 0): not encrypted per extent as the kernel advertises",
	      path, nfe, nctx, ec->version, ctx_size(ec));
	free(fe);
	return nctx == nfe && nctx >= 1 ? (int)nctx : -1;
}

static void test_corrupt_extent(const struct extent_case *ec, uint32_t seed)
{
	unsigned char ctx[MAX_EXTENT_CTX][LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE];
	unsigned char pctx[1][LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct leaf_share share = { .needle = pctx[0], .len = ctx_needle_len(ec) };
	unsigned char data[8192], pdata[8192];
	char marker[64], ere[256];
	uint64_t bytenr = 0, pbytenr;
	int n = 0, r, nctx, have_partner;
	struct stat st;
	size_t i;

	printf("== extent context corruption: %s (version %d contexts%s)\n",
	       ec->what, ec->version,
	       ec->version == LAB_FSCRYPT_EXTENT_CTX_V1 ? ", written after mount -o remount," V1_OPT : "");
	fill_pattern(data, sizeof(data), seed);
	fill_pattern(pdata, sizeof(pdata), seed ^ 0x5a5a0000u);
	if (make_victim(id, data, sizeof(data), NULL,
			ec->version == LAB_FSCRYPT_EXTENT_CTX_V1 ? V1_OPT : NULL,
			pdata, sizeof(pdata)))
		return;
	sync();		/* writeback: the file extent items exist now */
	memset(&st, 0, sizeof(st));
	CHECK_OK(stat(victim, &st), "stat %s", victim);
	nctx = extent_ctxs(victim, ec, ctx, MAX_EXTENT_CTX, &bytenr);
	have_partner = extent_ctxs(partner, ec, pctx, 1, &pbytenr) == 1;
	sync();
	have_partner = have_partner && read_subvol_root(victim, &share) == 0;
	CHECK_OK(lab_umount(mnt), "umount");
	if (nctx < 1)
		return;
	lab_btrfs_check_clean(dev, "the victim's filesystem, before the corruption");

	for (i = 0; i < (size_t)nctx; i++) {
		r = rewrite_tree_blocks("extent context", ctx[i], ctx_needle_len(ec),
					ec->edit, (void *)ec,
					i == 0 && have_partner ? &share : NULL);
		if (r < 0)
			return;
		n += r;
	}
	if (!CHECK(n >= 1, "%s: no tree block with the victim's extent context found on %s",
		   ec->what, dev))
		return;
	printf("%s: changed %d tree block cop%s\n", ec->what, n, n == 1 ? "y" : "ies");
	if (have_partner)
		have_partner = check_shared_leaf(ec->what, &share);

	snprintf(marker, sizeof(marker), "lab-badinput-%s-%d", ec->tag, getpid());
	if (remount_marked(marker, id, NULL))
		return;
	expect_outcome(ec, data, sizeof(data));
	switch (ec->outcome) {
	case AT_LOAD:
		snprintf(ere, sizeof(ere),
			 "inode %llu[)]: Rejecting extent encryption context [(]%s, %u bytes, version %u[)]",
			 (unsigned long long)st.st_ino, ec->why, ec->log_len,
			 ec->log_version);
		CHECK(lab_log_has(ere),
		      "%s: no kernel log line matching \"%s\"", ec->what, ere);
		snprintf(ere, sizeof(ere),
			 "bad extent encryption context in root [0-9]+ ino %llu offset 0 [(]extent at %llu[)]",
			 (unsigned long long)st.st_ino, (unsigned long long)bytenr);
		CHECK(lab_log_has(ere),
		      "%s: no kernel log line matching \"%s\"", ec->what, ere);
		break;
	case IN_BTRFS:
	case TREE_CHECKER:
		CHECK(lab_log_has(ec->log_ere),
		      "%s: no kernel log line matching \"%s\"", ec->what,
		      ec->log_ere);
		break;
	case ACCEPTED:
		CHECK(!lab_log_has("Rejecting extent encryption context|bad extent encryption context|invalid item size"),
		      "%s: the kernel logged a rejection (above) of a valid context",
		      ec->what);
		break;
	}
	if (have_partner && ec->outcome != TREE_CHECKER) {
		expect_partner_intact(ec->what, pdata, sizeof(pdata));
	} else if (have_partner) {
		unsigned char buf[sizeof(pdata) + 1];
		int e, open_failed;
		ssize_t got = read_victim(partner, buf, sizeof(pdata), &e,
					  &open_failed);

		printf("%s: the partner, in the rejected leaf: %s\n", ec->what,
		       got < 0 ? strerror(e) : "read back");
		CHECK(got < 0, "%s: the partner in the same leaf read back: the leaf was not rejected as a whole",
		      ec->what);
	}
	if (!CHECK_OK(lab_umount(mnt), "umount after corruption"))
		return;
	if (ec->outcome == ACCEPTED)
		lab_btrfs_check_clean(dev, "a valid (if wrong) extent context");
	else
		expect_check_finds(ec->what, st.st_ino, ec->progs_msg);
}

#define V1 LAB_FSCRYPT_EXTENT_CTX_V1
#define V2 LAB_FSCRYPT_EXTENT_CTX_V2
#define V1_SIZE LAB_FSCRYPT_EXTENT_CTX_V1_SIZE
#define V2_SIZE LAB_FSCRYPT_EXTENT_CTX_V2_SIZE
#define CTX_VERSION LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF
#define CTX_MODE LAB_FSCRYPT_EXTENT_CTX_MODE_OFF
/* A contents mode the policy does not have (the policy's is AES-256-XTS). */
#define BAD_CTX_MODE 127

static const struct extent_case extent_cases[] = {
	/* version 2 contexts (the default): fscrypt says why at load */
	{ "v2-key-id", "flipped bit of the master key identifier", V2,
	  edit_ctx_key_id, 0, 0, 0, AT_LOAD,
	  "master key is not one the filesystem allows for the file", V2_SIZE, V2, NULL,
	  " file extent at offset 0: extent context does not fit the inode: master key is neither the policy's nor recorded by the subvolume" },
	{ "v2-version", "context version 9", V2,
	  edit_ctx_byte, CTX_VERSION, 9, 0, AT_LOAD,
	  "unknown version", V2_SIZE, 9, NULL,
	  " file extent at offset 0: bad extent context (version 9): unknown extent context version" },
	{ "v2-wrong-size", "version 2 -> 1 in a 93-byte item", V2,
	  edit_ctx_byte, CTX_VERSION, V1, 0, AT_LOAD,
	  "wrong size", V2_SIZE, V1, NULL,
	  " file extent at offset 0: bad extent context (version 1): wrong size for its version" },
	{ "v2-mode", "contents mode 127", V2,
	  edit_ctx_byte, CTX_MODE, BAD_CTX_MODE, 0, AT_LOAD,
	  "contents mode differs from the file's policy", V2_SIZE, V2, NULL,
	  " file extent at offset 0: bad extent context (version 2): invalid contents mode" },
	{ "v2-flags", "flags 0x01", V2,
	  edit_ctx_byte, LAB_FSCRYPT_EXTENT_CTX_V2_FLAGS_OFF, 1, 0, AT_LOAD,
	  "unknown flags", V2_SIZE, V2, NULL,
	  " file extent at offset 0: bad extent context (version 2): unknown flags" },
	{ "v2-reserved", "reserved byte 0x80", V2,
	  edit_ctx_byte, LAB_FSCRYPT_EXTENT_CTX_V2_RESERVED_OFF, 0x80, 0, AT_LOAD,
	  "unknown flags", V2_SIZE, V2, NULL,
	  " file extent at offset 0: bad extent context (version 2): nonzero reserved byte" },
	/* every number the field holds is valid, the largest too */
	{ "v2-nr-max", "extent number 2^32 - 1", V2,
	  edit_ctx_nr, 0, EXTENT_NR_MAX, 0, ACCEPTED,
	  NULL, 0, 0, NULL, NULL },
	/* version 1 contexts (fscrypt_extents_per_key=1) */
	{ "v1-key-id", "flipped bit of the master key identifier", V1,
	  edit_ctx_key_id, 0, 0, 0, AT_LOAD,
	  "master key is not one the filesystem allows for the file", V1_SIZE, V1, NULL,
	  " file extent at offset 0: extent context does not fit the inode: master key is neither the policy's nor recorded by the subvolume" },
	{ "v1-version", "context version 9", V1,
	  edit_ctx_byte, CTX_VERSION, 9, 0, AT_LOAD,
	  "unknown version", V1_SIZE, 9, NULL,
	  " file extent at offset 0: bad extent context (version 9): unknown extent context version" },
	{ "v1-wrong-size", "version 1 -> 2 in an 87-byte item", V1,
	  edit_ctx_byte, CTX_VERSION, V2, 0, AT_LOAD,
	  "wrong size", V1_SIZE, V2, NULL,
	  " file extent at offset 0: bad extent context (version 2): wrong size for its version" },
	{ "v1-mode", "contents mode 127", V1,
	  edit_ctx_byte, CTX_MODE, BAD_CTX_MODE, 0, AT_LOAD,
	  "contents mode differs from the file's policy", V1_SIZE, V1, NULL,
	  " file extent at offset 0: bad extent context (version 1): invalid contents mode" },
	/* the item's size and encryption */
	{ "size-92", "item cut to 92 bytes (53 + 39: neither version's size)", V2,
	  edit_cut, 0, LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT,
	  LAB_FSCRYPT_EXTENT_CTX_V2_SIZE - ODD_CTX_SIZE, TREE_CHECKER, NULL, 0, 0,
	  "invalid item size for reg/prealloc file extent, have 92 expect 93",
	  " file extent at offset 0: item size 92 does not match encryption 130, expected 93" },
	/*
	 * The item keeps its 93 bytes: the tree-checker's size rule for
	 * per-inode encryption (53 bytes) rejects the leaf.
	 */
	{ "encryption", "encryption 0x82 -> 0x81, item size left at 93", V2,
	  edit_encryption, 0, LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE, 0, TREE_CHECKER,
	  NULL, 0, 0, "invalid item size for reg/prealloc file extent, have 93 expect 53",
	  " file extent at offset 0: item size 93 does not match encryption 129, expected 53" },
	/*
	 * Upstream's layout for the same extent: encryption 1, the context in
	 * an item of its own.  Not a value of this format: the tree-checker
	 * refuses the leaf rather than read the extent with another key.
	 */
	{ "upstream-encryption", "encryption 0x82 -> 1 (upstream's), item cut to 53 bytes", V2,
	  edit_cut, 0, UPSTREAM_ENCRYPTION, V2_SIZE, TREE_CHECKER,
	  NULL, 0, 0, "invalid encryption for file extent, have 0x1",
	  " file extent at offset 0: unknown encryption 1" },
	{ "encryption-cut", "encryption 0x82 -> 0x81, item cut to 53 bytes", V2,
	  edit_cut, 0, LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE, V2_SIZE, IN_BTRFS,
	  NULL, 0, 0, "has encryption 129, the inode needs 130",
	  " file extent at offset 0: encryption 129, but the inode needs 130" },
	{ "plain-cut", "encryption 0x82 -> 0, item cut to 53 bytes", V2,
	  edit_cut, 0, LAB_BTRFS_ENCRYPTION_NONE, V2_SIZE, IN_BTRFS,
	  NULL, 0, 0, "has encryption 0, the inode needs 130",
	  " file extent at offset 0: unencrypted file extent in an encrypted inode" },
};

/* ---- 4. an inline extent in an encrypted file ----------------------------- */

#define INLINE_LEN (FE_SIZE - FE_INLINE_DATA)	/* 32 bytes in a 53-byte item */

/*
 * What edit_make_inline() changes: the item (@ino, EXTENT_DATA, 0) holding
 * @item, in a leaf found by the nonce of the inode's fscrypt context (16
 * random bytes, a fast needle: the item itself is mostly zero bytes, which
 * makes a scan of the whole device crawl).
 */
struct inline_edit {
	uint64_t ino;
	unsigned char item[FE_SIZE];
	unsigned char data[INLINE_LEN];
};

/*
 * The victim's 53-byte item of a regular extent at file offset 0 becomes
 * an inline extent the tree-checker accepts: type inline, no compression,
 * encryption 0 (inline extents are never encrypted), ram_bytes = item
 * size - 21, and the marker as its data.
 */
static int edit_make_inline(unsigned char *blk, uint32_t nodesize, size_t in,
			    void *arg)
{
	const struct inline_edit *ie = arg;
	unsigned char *fe;
	int slot;

	(void)in;
	/* (a sane leaf: the item's data lies inside the block) */
	slot = find_item_by_key(blk, nodesize, ie->ino, BTRFS_EXTENT_DATA_KEY, 0);
	if (slot < 0 || braw_item_size(blk, (uint32_t)slot) != FE_SIZE)
		return 0;
	fe = blk + braw_item_start(blk, (uint32_t)slot);
	if (memcmp(fe, ie->item, FE_SIZE) ||
	    fe[FE_TYPE] != BTRFS_FILE_EXTENT_REG ||
	    fe[FE_ENCRYPTION] != LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE)
		return 0;
	braw_put_le64(fe + FE_RAM_BYTES, INLINE_LEN);
	fe[FE_COMPRESSION] = 0;		/* BTRFS_COMPRESS_NONE */
	fe[FE_ENCRYPTION] = LAB_BTRFS_ENCRYPTION_NONE;
	fe[FE_OTHER_ENCODING] = 0;
	fe[FE_OTHER_ENCODING + 1] = 0;
	fe[FE_TYPE] = BTRFS_FILE_EXTENT_INLINE;
	memcpy(fe + FE_INLINE_DATA, ie->data, INLINE_LEN);
	return 1;
}

/*
 * The only file extent item of @path (sync'ed before), which must be the
 * 53-byte item of a regular extent with per-inode encryption at offset 0:
 * its bytes into @item, its inode number into *@ino.  0 or -1.
 */
static int only_inode_key_item(const char *path, unsigned char item[FE_SIZE],
			       uint64_t *ino)
{
	struct lab_btrfs_item *items = NULL;
	uint64_t flags = 0;
	struct stat st;
	size_t n = 0;
	int ok;

	if (!CHECK_OK(stat(path, &st), "stat %s", path) ||
	    !CHECK_OK(lab_btrfs_search(path, st.st_ino, BTRFS_EXTENT_DATA_KEY,
				       &items, &n),
		      "file extent items of %s through TREE_SEARCH_V2", path))
		return -1;
	*ino = st.st_ino;
	ok = CHECK(n == 1 && items[0].offset == 0 && items[0].len == FE_SIZE &&
		   items[0].data[FE_TYPE] == BTRFS_FILE_EXTENT_REG &&
		   items[0].data[FE_ENCRYPTION] == LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE,
		   "%s: %zu file extent item(s) (first: offset %llu, %u bytes, type %u, encryption %u), expected one regular extent at 0 with per-inode encryption",
		   path, n, n ? (unsigned long long)items[0].offset : 0ULL,
		   n ? items[0].len : 0, n ? items[0].data[FE_TYPE] : 0,
		   n && items[0].len > FE_ENCRYPTION ? items[0].data[FE_ENCRYPTION] : 0);
	if (ok)
		memcpy(item, items[0].data, FE_SIZE);
	lab_btrfs_items_free(items, n);
	if (ok && CHECK_OK(lab_btrfs_inode_flags(path, st.st_ino, &flags),
			   "inode flags of %s", path))
		ok = CHECK((flags & LAB_BTRFS_INODE_ENCRYPT) &&
			   !(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT),
			   "%s: inode flags 0x%llx, expected ENCRYPT without ENCRYPT_PER_EXTENT",
			   path, (unsigned long long)flags);
	return ok ? 0 : -1;
}

static void test_inline_extent(int extent_keys)
{
	/* the option exists, and is needed, only beside per-extent keys */
	const char *opts = extent_keys ? LAB_BTRFS_PER_INODE_KEYS_OPT : NULL;
	unsigned char pitem[FE_SIZE], buf[BLK_SIZE + 1];
	unsigned char data[BLK_SIZE], pdata[BLK_SIZE];
	unsigned char nonce[FILE_NONCE_SIZE], pnonce[FILE_NONCE_SIZE];
	static struct inline_edit ie;
	struct leaf_share share = {
		.needle = pnonce, .len = sizeof(pnonce),
		.also = pitem, .also_len = sizeof(pitem),
	};
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char marker[64], hex[INLINE_LEN], ere[160];
	const char *what = "inline extent in an encrypted file";
	unsigned char *inline_data = ie.data;
	uint64_t pino = 0;
	ssize_t got;
	int n, fd, e;

	printf("== %s (per-inode keys%s)\n", what,
	       opts ? ", mount option " LAB_BTRFS_PER_INODE_KEYS_OPT : "");
	/* printable, so that a leak of it shows in the log */
	lab_random_hex(hex, (INLINE_LEN - 12) / 2);
	memcpy(inline_data, "LAB-INLINE-", 11);
	memcpy(inline_data + 11, hex, INLINE_LEN - 12);
	inline_data[INLINE_LEN - 1] = '.';
	fill_pattern(data, sizeof(data), 0x1e1e0001u);
	fill_pattern(pdata, sizeof(pdata), 0x1e1e0002u);
	/* one block each: one extent, at file offset 0 */
	if (make_victim(id, data, sizeof(data), opts, NULL, pdata, sizeof(pdata)))
		return;
	sync();
	n = only_inode_key_item(victim, ie.item, &ie.ino) == 0 &&
	    only_inode_key_item(partner, pitem, &pino) == 0 &&
	    CHECK_OK(lab_get_nonce(victim, nonce), "nonce of %s", victim) &&
	    CHECK_OK(lab_get_nonce(partner, pnonce), "nonce of %s", partner);
	sync();
	n = n && read_subvol_root(victim, &share) == 0;
	CHECK_OK(lab_umount(mnt), "umount");
	if (!n)
		return;
	lab_btrfs_check_clean(dev, "the victim's filesystem, before the corruption");

	n = rewrite_tree_blocks("victim's nonce", nonce, sizeof(nonce),
				edit_make_inline, &ie, &share);
	if (!CHECK(n >= 1, "%s: no tree block with the victim's item found on %s",
		   what, dev))
		return;
	printf("%s: changed %d tree block cop%s\n", what, n, n == 1 ? "y" : "ies");
	n = check_shared_leaf(what, &share);

	snprintf(marker, sizeof(marker), "lab-badinput-inline-%d", getpid());
	if (remount_marked(marker, id, opts))
		return;
	errno = 0;
	fd = open(victim, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (CHECK(fd >= 0, "%s: open() failed with " LAB_ERR_FMT
		  "; only the extent is bad, the file should open and read() fail",
		  what, LAB_ERR_ARGS(e))) {
		errno = 0;
		got = lab_pread_full(fd, buf, sizeof(buf), 0);
		e = errno;
		close(fd);
		if (got < 0)
			printf("%s: read() failed with " LAB_ERR_FMT "\n", what,
			       LAB_ERR_ARGS(e));
		if (got < 0)
			CHECK(e == EUCLEAN,
			      "%s: read() failed with " LAB_ERR_FMT ", expected EUCLEAN",
			      what, LAB_ERR_ARGS(e));
		else
			CHECK(0, "%s: read() returned %zd bytes instead of failing with EUCLEAN%s",
			      what, got,
			      got >= (ssize_t)INLINE_LEN &&
			      !memcmp(buf, inline_data, INLINE_LEN) ?
			      ": the inline bytes were handed out as file contents" : "");
	}
	snprintf(ere, sizeof(ere),
		 "inline extent in encrypted file of root [0-9]+ ino %llu offset 0",
		 (unsigned long long)ie.ino);
	CHECK(lab_log_has(ere),
	      "%s: no kernel log line matching \"%s\"", what, ere);
	if (n)
		expect_partner_intact(what, pdata, sizeof(pdata));
	if (CHECK_OK(lab_umount(mnt), "umount after corruption"))
		expect_check_finds(what, ie.ino,
				   " file extent at offset 0: inline (unencrypted) extent in an encrypted regular file");
}

/* ---- 5. an encrypted inode without its context item (checker only) -------- */

/* Unknown to btrfs, and between the inode's refs (12) and its extents (108). */
#define UNKNOWN_KEY_TYPE (LAB_BTRFS_FSCRYPT_INODE_CTX_KEY - 1)
#define CTX_NONCE_OFFSET 24	/* in a v2 inode context */
#define CTX_V2_SIZE 40

/* The key type of the context item whose nonce is at @in: 46 -> 45. */
static int edit_ctx_key_type(unsigned char *blk, uint32_t nodesize, size_t in,
			     void *arg)
{
	int slot;

	(void)arg;
	if (in < CTX_NONCE_OFFSET)
		return 0;
	slot = find_item(blk, nodesize, in - CTX_NONCE_OFFSET,
			 LAB_BTRFS_FSCRYPT_INODE_CTX_KEY, CTX_V2_SIZE);
	if (slot < 0)
		return 0;
	braw_item_hdr(blk, (uint32_t)slot)[BRAW_ITEM_TYPE] = UNKNOWN_KEY_TYPE;
	return 1;
}

/*
 * `btrfs check --repair` cannot rebuild a context without the key, and any
 * repair it knows (a new inode item, relinking) would expose ciphertext as
 * plaintext: it must refuse, name the inode and exit non-zero.
 */
static void expect_repair_refused(const char *what, uint64_t ino)
{
	char want[128];
	char *out = NULL;
	int st;

	snprintf(want, sizeof(want), "inode %llu is encrypted (fscrypt): not repairing",
		 (unsigned long long)ino);
	printf("%s: btrfs check --repair must refuse: \"%s\"\n", what, want);
	st = lab_btrfs_progs_output("check --repair --force", dev, &out);
	if (st != -1) {
		CHECK(st != 0, "%s: btrfs check --repair exited 0", what);
		CHECK(strstr(out, want) != NULL,
		      "%s: btrfs check --repair did not say \"%s\" (output above)",
		      what, want);
	}
	free(out);
}

static void test_missing_context(void)
{
	const char *what = "encrypted inode without its context item";
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	unsigned char data[8192], nonce[FILE_NONCE_SIZE];
	struct stat st;
	int n;

	printf("== %s\n", what);
	fill_pattern(data, sizeof(data), 0xc7c70001u);
	if (make_victim(id, data, sizeof(data), NULL, NULL, NULL, 0))
		return;
	n = CHECK_OK(stat(victim, &st), "stat %s", victim) &&
	    CHECK_OK(lab_get_nonce(victim, nonce), "nonce of %s", victim);
	if (!CHECK_OK(lab_umount(mnt), "umount") || !n)
		return;
	lab_btrfs_check_clean(dev, "the victim's filesystem, before the corruption");
	n = rewrite_tree_blocks("victim's nonce", nonce, sizeof(nonce),
				edit_ctx_key_type, NULL, NULL);
	if (!CHECK(n >= 1, "%s: no tree block with the victim's context item found on %s",
		   what, dev))
		return;
	printf("%s: changed %d tree block cop%s (key type %d -> %d)\n", what, n,
	       n == 1 ? "y" : "ies", LAB_BTRFS_FSCRYPT_INODE_CTX_KEY,
	       UNKNOWN_KEY_TYPE);
	expect_check_finds(what, st.st_ino,
			   ": encrypted inode (flag ENCRYPT) has no fscrypt context item");
	expect_repair_refused(what, st.st_ino);
	expect_check_finds("after the refused repair", st.st_ino,
			   ": encrypted inode (flag ENCRYPT) has no fscrypt context item");
}

/* ---- 5. a write into a preallocated extent marked unencrypted ------------ */

#define PREALLOC_LEN (256 * 1024)
#define PREALLOC_WRITE 16384
#define INODE_ITEM_FLAGS 64		/* btrfs_inode_item::flags */
#define INODE_NODATASUM (1ULL << 0)
#define INODE_NODATACOW (1ULL << 1)
#define INODE_PREALLOC (1ULL << 4)

struct prealloc_edit {
	struct extent_case ec;
	uint64_t ino;
};

/*
 * The victim's preallocated extent (past EOF) loses its context and says
 * encryption 0, as edit_cut() does it, and the victim's inode item, in the
 * same leaf, becomes NODATACOW|NODATASUM without PREALLOC: a buffered
 * write at EOF then looks up no extent (btrfs_set_extent_delalloc() skips
 * that past EOF when the inode is not PREALLOC), and writeback goes
 * through run_delalloc_nocow(), whose verdict on the extent is the point.
 */
static int edit_prealloc_nocow(unsigned char *blk, uint32_t nodesize,
			       size_t in, void *arg)
{
	struct prealloc_edit *pe = arg;
	int islot = find_item_by_key(blk, nodesize, pe->ino,
				     BTRFS_INODE_ITEM_KEY, 0);
	unsigned char *flags;
	uint64_t v;

	if (islot < 0 || extent_ctx_slot(blk, nodesize, in, &pe->ec) < 0)
		return 0;
	flags = blk + braw_item_start(blk, (uint32_t)islot) + INODE_ITEM_FLAGS;
	v = braw_le64(flags);
	v = (v | INODE_NODATACOW | INODE_NODATASUM) & ~INODE_PREALLOC;
	if (!edit_cut(blk, nodesize, in, &pe->ec))
		return 0;
	/* the cut moved the items stored below the extent's: find it again */
	islot = find_item_by_key(blk, nodesize, pe->ino, BTRFS_INODE_ITEM_KEY, 0);
	if (islot < 0)
		return 0;
	flags = blk + braw_item_start(blk, (uint32_t)islot) + INODE_ITEM_FLAGS;
	braw_put_le64(flags, v);
	return 1;
}

/*
 * Review round 2, finding 2: whether a range of an encrypted file may be
 * written in place (NOCOW) must come from the inode, not from the extent.
 * The victim's preallocated extent past EOF (encryption 0x82, a version 2
 * context) is rewritten, with a valid checksum, to encryption 0 at the 53
 * bytes of an unencrypted item, and its inode to NODATACOW without
 * PREALLOC.  Writing at EOF and fsyncing must fail cleanly (EIO or EUCLEAN,
 * "has encryption 0, the inode needs 130" naming the victim's inode) instead
 * of writing back through the NOCOW path, which had no extent key for it
 * and warned in btrfs_fscrypt_write_extent_info().  No kernel warning, and
 * the partner in the same leaf reads back.
 */
static void test_crafted_prealloc_write(void)
{
	struct prealloc_edit pe = {
		.ec = {
			"prealloc-nocow", "preallocated extent past EOF: encryption 0x82 -> 0, item cut to 53 bytes; inode NODATACOW, not PREALLOC",
			LAB_FSCRYPT_EXTENT_CTX_V2, edit_cut, 0, LAB_BTRFS_ENCRYPTION_NONE,
			LAB_FSCRYPT_EXTENT_CTX_V2_SIZE, IN_BTRFS, NULL, 0, 0, NULL, NULL,
		},
	};
	const struct extent_case *ec = &pe.ec;
	unsigned char ctx[MAX_EXTENT_CTX][LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	unsigned char data[PREALLOC_WRITE], pdata[8192];
	char marker[64], ere[256];
	uint64_t bytenr;
	int fd, n = 0, r, nctx, ret, e;
	struct stat st;

	printf("== %s, then written into and fsynced\n", ec->what);
	fill_pattern(data, sizeof(data), 0x9a11u);
	fill_pattern(pdata, sizeof(pdata), 0x9a12u);
	if (make_victim(id, data, 0, NULL, NULL, pdata, sizeof(pdata)))
		return;
	fd = open(victim, O_WRONLY | O_CLOEXEC);
	if (!CHECK_OK(fd, "open %s", victim)) {
		lab_umount(mnt);
		return;
	}
	ret = CHECK_OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, PREALLOC_LEN),
		       "fallocate (keep size) %s", victim);
	close(fd);
	sync();
	CHECK_OK(stat(victim, &st), "stat %s", victim);
	pe.ino = st.st_ino;
	nctx = ret ? extent_ctxs(victim, ec, ctx, MAX_EXTENT_CTX, &bytenr) : -1;
	CHECK_OK(lab_umount(mnt), "umount");
	if (nctx < 1)
		return;
	for (r = 0; r < nctx; r++) {
		ret = rewrite_tree_blocks("extent context", ctx[r],
					  ctx_needle_len(ec), edit_prealloc_nocow,
					  &pe, NULL);
		if (ret < 0)
			return;
		n += ret;
	}
	if (!CHECK(n >= 1, "%s: no tree block with the victim's extent context and inode item found on %s",
		   ec->what, dev))
		return;
	printf("%s: changed %d tree block cop%s\n", ec->what, n, n == 1 ? "y" : "ies");

	snprintf(marker, sizeof(marker), "lab-badinput-%s-%d", ec->tag, getpid());
	if (remount_marked(marker, id, NULL))
		return;
	fd = open(victim, O_WRONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open %s after the corruption", victim)) {
		/* a buffered write may already refuse; else fsync must */
		ret = pwrite_all(fd, data, sizeof(data), 0);
		e = errno;
		printf("%s: buffered write of %zu bytes at EOF: %s\n", ec->what,
		       sizeof(data), ret ? strerror(e) : "ok");
		if (!ret) {
			ret = fsync(fd);
			e = errno;
			printf("%s: fsync: %s\n", ec->what,
			       ret ? strerror(e) : "ok");
		}
		CHECK(ret != 0 && (e == EIO || e == EUCLEAN),
		      "%s: writing into the crafted extent: %s, want EIO or EUCLEAN",
		      ec->what, ret ? lab_errname(e) : "success");
		close(fd);
	}
	snprintf(ere, sizeof(ere),
		 "file extent of root [0-9]+ ino %llu offset 0 has encryption 0, the inode needs 130",
		 (unsigned long long)st.st_ino);
	CHECK(lab_log_has(ere), "%s: no kernel log line matching \"%s\"",
	      ec->what, ere);
	if (!CHECK(!lab_log_has(LAB_LOG_SPLAT_ERE),
		   "%s: the kernel warned (log above), where a clean error was due",
		   ec->what))
		lab_log_show(40);
	expect_partner_intact(ec->what, pdata, sizeof(pdata));
	CHECK_OK(lab_umount(mnt), "umount after the crafted write");
}

int main(void)
{
	int extent_keys;
	size_t i;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");

	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s: %s", dev, strerror(errno));
	test_ioctls();
	CHECK_OK(lab_umount(mnt), "umount");

	test_corrupt_context(9, "unknown version 9",
			     ": bad fscrypt context item (size 40, version 9): unknown context version");
	test_corrupt_context(1, "version 1 has size 28, item size 40",
			     ": bad fscrypt context item (size 40, version 1): wrong size for its version");
	extent_keys = access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0;
	if (!extent_keys) {
		printf("no %s: btrfs has per-inode keys only, no extent contexts to corrupt\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
	} else {
		for (i = 0; i < sizeof(extent_cases) / sizeof(extent_cases[0]); i++)
			test_corrupt_extent(&extent_cases[i], 0xe0u + (uint32_t)i);
	}
	test_inline_extent(extent_keys);
	test_missing_context();
	if (extent_keys)
		test_crafted_prealloc_write();
	return lab_result("btrfs_fscrypt_badinput");
}
