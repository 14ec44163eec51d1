// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_extent_ciphertext - btrfs's per-extent fscrypt keys and their
 * key groups, checked on disk: the file extent items carry the right
 * contexts, and every data block on the device is exactly the ciphertext an
 * independent computation (lib/fscrypt_ref.c) gives for its extent's key and
 * tweak.
 *
 * The format (the key-group patches of the series): a regular or preallocated
 * extent of a file encrypted per extent (inode flag bit 13, item encryption
 * 2) has its 53-byte file extent item followed by an fscrypt extent context,
 * told apart by its first byte: version 2 (40 bytes: mode, flags 0, reserved
 * 0, key identifier, the key nonce of the key group the extent was written
 * in, the extent's number in that group), written by default; version 1 (34
 * bytes: mode, key identifier, a nonce of the extent's own), written under
 * fscrypt_extents_per_key=1.  The key is HKDF-SHA512(master key, "fscrypt\0"
 * || 9 || key nonce); the XTS tweak of data unit b of the extent (b counted
 * from the start of the extent as first written) is le64(b) || le64(extent
 * number), the number 0 for version 1.  A file's key group lives in its inode
 * in memory: the extents it writes get numbers 0, 1, 2, ... under one nonce
 * until the inode is loaded again; fscrypt_extents_per_key=N caps a group at
 * N extents.  Files made under fscrypt_per_inode_keys have per-inode keys
 * (encryption 1, no context, IV = logical block).
 *
 *  1. a fresh btrfs (single data and metadata: each block stored once), a
 *     random master key whose identifier must be the HKDF-SHA512 one, a v2
 *     policy on an empty directory, and these files in it (every write is
 *     fsynced, so each makes an extent; the test keeps a model of every
 *     block: which write made its extent, its block in that write, which
 *     file and mount wrote it, and the key mode then):
 *     - default mount options (key groups; /proc/mounts has no
 *       fscrypt_extents_per_key):
 *       pieces:   blocks [0,4), [4,6), [6,7) and 1000 bytes; then block 2
 *                 overwritten, which splits the first extent: its tail
 *                 [3,4) keeps the first extent's context, at extent offset 3;
 *       clone:    blocks [0,2); then FICLONERANGE of pieces' blocks [1,3)
 *                 (taken before the overwrite) to blocks [2,4), i.e. the
 *                 first extent of pieces at extent offset 1 and at another
 *                 file offset; then a block and 100 bytes;
 *       prealloc: blocks [0,2); fallocate of [2,6); block 3 written, which
 *                 splits the preallocated extent around it;
 *       reflinks whose destination offset is below, equal to or above the
 *       offset of their source inside its extent (ec_clones[]): a source
 *       file "src" of one EC_SRC_BLOCKS-block extent, and files with clones
 *       of part of it (the second half to offset 0 and to block 2: below;
 *       [8,24) to block 8: equal; to block 12: above), of whole extents
 *       (pieces' [4,6) to block 0, a lower file offset but equal to the
 *       extent offset 0; all of src to block 2: above) and of a split piece
 *       (pieces' [3,4), extent offset 3, to block 0: below).  Below means
 *       that the item's file offset minus its extent offset, where the
 *       extent would begin in the file, is negative; its IVs still count
 *       from the extent's start;
 *       many:     EC_MANY one-block extents, one key group; the even blocks
 *                 hold the same plaintext;
 *       groups:   blocks [0,2) and [2,4) (key group A);
 *       mixed:    blocks [0,2) (its group);
 *     - remount,fscrypt_extents_per_key=1 (version 1 contexts):
 *       v1:       blocks [0,3), [3,5); block 1 overwritten (splits the first);
 *       mixed:    blocks [2,4), then v1's block 4 (extent offset 1) cloned
 *                 to block 4;
 *     - remount,fscrypt_extents_per_key=EC_CAP: capped: EC_CAPPED one-block
 *       extents, so groups of 3, 3 and 1;
 *     - remount,fscrypt_extents_per_key=0 (shown no more), then
 *       remount,fscrypt_per_inode_keys:
 *       inode-keys: a new file, so per-inode keys: blocks [0,3), [3,5)
 *                 (in a subvolume of its own, inode-sv, with the same
 *                 policy: a subvolume holding a file with per-inode keys
 *                 is never snapshotted, and the top one is below);
 *       mixed:    blocks [5,7) and 500 bytes: still its version 2 group,
 *                 the same as before the two interludes;
 *     - remount,fscrypt_per_extent_keys: inode-keys: a block and 300 bytes,
 *       block 1 overwritten (still per-inode keys);
 *     - unmounted and mounted again (the key added again): groups: blocks
 *       [4,6), block 1 overwritten (key group B: the inode was loaded
 *       again); a snapshot of the filesystem's top subvolume; groups: blocks
 *       [6,8) (group B still); groups-snap (the snapshot's groups): block 2
 *       overwritten (splits A's second extent in the snapshot only), blocks
 *       [6,8) and 300 bytes (key group C, a new inode in memory);
 *  2. while mounted (BTRFS_IOC_TREE_SEARCH_V2 on each file's subvolume):
 *     - inode flags: the directory is ENCRYPT but not ENCRYPT_PER_EXTENT,
 *       the files are both, inode-keys only ENCRYPT;
 *     - every file extent item: a regular or preallocated extent (no
 *       inline, no hole), no compression; encryption 2 with a context of
 *       the version the model says (version 2: 93-byte item, flags and
 *       reserved 0, extent number < 2^32; version 1: 87-byte item), contents
 *       mode AES-256-XTS, the master key's identifier; or, for inode-keys,
 *       encryption 1 and a 53-byte item; the items cover each file without
 *       gap or overlap; each item's blocks come from one write, and the
 *       item's extent offset puts every block at its place in that write;
 *     - contexts across all files: equal for all items of one extent (same
 *       disk_bytenr: split pieces, reflinks, the snapshot); different
 *       extents never share (key nonce, extent number), a version 1 nonce
 *       is its extent's alone, and no nonce is an inode's nonce;
 *     - key groups (extents sharing a key nonce): written by one file in one
 *       mount under one setting; numbers rising in the order the extents
 *       were written; at most N per group under fscrypt_extents_per_key=N;
 *       without a cap, one group per file and mount: the groups of "many",
 *       of "groups" before and after the remount (A, B, B continued after
 *       the snapshot), of the snapshot's writes (C), of "mixed" (kept
 *       across the version 1 and per-inode-key interludes) as above;
 *     - the reflinks, splits and preallocated pieces are where they should
 *       be (below); FIEMAP agrees with the items for every block;
 *     - every file reads back byte-exact: right after it was made, after
 *       dropping the caches, and after remounting with
 *       fscrypt_extents_per_key=1, with fscrypt_per_inode_keys and with the
 *       defaults again (caches dropped each time);
 *  3. after unmounting, every written block, read with O_DIRECT where FIEMAP
 *     says (mapped through the chunk tree), must equal AES-256-XTS under its
 *     extent's key with tweak (extent offset + file position - item file
 *     offset) / block size || extent number, or for inode-keys under the
 *     per-inode key (context 2) with IV = logical block, of the plaintext
 *     padded with zeros; the blocks of "many" that hold the same plaintext
 *     at the same place in extents of one group must all differ on disk;
 *  4. negative controls, none of which may match any block copy: the same
 *     with a flipped master-key bit; IV = the file's logical block (where
 *     that is the right IV, the next block); IV counted from the item's file
 *     offset, ignoring the extent offset (items with a nonzero one); the
 *     per-inode-key ciphertext (context 2, the inode's nonce, IV = logical
 *     block); the tweak without the extent number (extents numbered > 0);
 *     another key group's key (another group's nonce, the same tweak).  And
 *     the rules must have been exercised: blocks whose IV differs from
 *     their logical block, at a nonzero extent offset, shared by two files,
 *     with a nonzero extent number, in version 1 extents, with per-inode
 *     keys;
 *  5. mounted again from scratch with fscrypt_extents_per_key=1, with
 *     fscrypt_per_inode_keys and with the defaults (the key added each
 *     time): every file reads back byte-exact; then the patched
 *     `btrfs check` must find the filesystem clean.
 *
 * SKIP when the kernel does not advertise per-extent keys
 * (LAB_BTRFS_EXTENT_KEYS_FEATURE), or its btrfs has no fscrypt ioctls.
 */
#include "btrfs_progs.h"
#include "btrfs_items.h"
#include "fscrypt_blocks.h"
#include "fscrypt_fs.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>

#define EC_MAX_BLOCKS 72	/* no file is longer */
#define EC_SRC_BLOCKS 64	/* the one extent of src */
#define EC_MANY 16		/* one-block extents of many, one key group */
#define EC_CAP 3		/* fscrypt_extents_per_key while capped is written */
#define EC_CAPPED 7		/* one-block extents of capped: groups of 3, 3, 1 */
#define EC_TAIL_PIECES 1000	/* bytes in the last block of pieces */
#define EC_TAIL_CLONE 100	/* and of clone */
#define EC_TAIL_MIXED 500	/* and of mixed */
#define EC_TAIL_SMALL 300	/* and of inode-keys and groups-snap */
#define EC_ITEM_SIZE_V1 (LAB_BTRFS_FILE_EXTENT_SIZE + LAB_FSCRYPT_EXTENT_CTX_V1_SIZE)
#define EC_ITEM_SIZE_V2 (LAB_BTRFS_FILE_EXTENT_SIZE + LAB_FSCRYPT_EXTENT_CTX_V2_SIZE)
#define EC_MAX_NR (1ULL << 32)	/* extent numbers are below it */
#define EC_SNAP "snap"		/* the snapshot of the top subvolume */
/* inode-keys's subvolume: one holding per-inode keys is never snapshotted */
#define EC_INODE_SV "inode-sv"

static const struct lab_fscrypt_fs ec_btrfs = {
	.name = "btrfs",
	.mkfs_cmd = "mkfs.btrfs -q -f -d single -m single",
	.mount_opts = NULL,	/* default: per-extent keys in key groups */
};

enum {
	EC_PIECES, EC_CLONE, EC_PREALLOC,
	/* reflinks to destination offsets below/at/above the extent offset */
	EC_SRC, EC_BELOW0, EC_BELOW, EC_EQUAL, EC_ABOVE, EC_WHOLE, EC_TAIL,
	/* key groups and key modes */
	EC_MANYF, EC_GROUPS, EC_GROUPS_SNAP, EC_V1, EC_MIXED, EC_CAPPEDF,
	EC_INODE,
	EC_NFILES
};

/*
 * One FICLONERANGE of ec_clones[]: @own blocks of fresh data written to
 * [0, @own) of @dst first, then @src's blocks [@src_blk, +@nblk) cloned to
 * block @dst_blk of @dst.  @rel: where the destination offset is against the
 * offset of the source block inside its extent (-1 below, 0 equal, 1 above).
 */
struct ec_clone_case {
	int dst, src;
	size_t own, src_blk, nblk, dst_blk;
	int rel;
	const char *what;
};

static const struct ec_clone_case ec_clones[] = {
	{ EC_BELOW0, EC_SRC, 0, EC_SRC_BLOCKS / 2, EC_SRC_BLOCKS / 2, 0, -1,
	  "second half of src's extent to offset 0" },
	{ EC_BELOW, EC_SRC, 2, EC_SRC_BLOCKS / 2, EC_SRC_BLOCKS / 2, 2, -1,
	  "second half of src's extent to block 2" },
	{ EC_EQUAL, EC_SRC, 8, 8, 16, 8, 0, "src's blocks [8,24) to block 8" },
	{ EC_ABOVE, EC_SRC, 12, 8, 16, 12, 1, "src's blocks [8,24) to block 12" },
	{ EC_WHOLE, EC_PIECES, 0, 4, 2, 0, 0,
	  "pieces' whole extent [4,6) to block 0 (a lower file offset)" },
	{ EC_WHOLE, EC_SRC, 0, 0, EC_SRC_BLOCKS, 2, 1,
	  "src's whole extent to block 2 (a higher file offset)" },
	{ EC_TAIL, EC_PIECES, 0, 3, 1, 0, -1,
	  "pieces' block 3 (split piece at extent offset 3) to block 0" },
};
#define EC_NCLONES (sizeof(ec_clones) / sizeof(ec_clones[0]))

/* How an extent is encrypted: by the model, or by what its item says. */
enum ec_kind { EC_K_NONE, EC_K_V2, EC_K_V1, EC_K_INODE };

static const char *const ec_kind_names[] = {
	"nothing usable", "a version 2 context (key group)",
	"a version 1 context (key per extent)", "per-inode keys (no context)",
};

/*
 * The model of one block of a file: how the extent it is in was made.
 * Reflinks and the snapshot copy it; writes and fallocate make it new.
 */
struct ec_blk {
	uint8_t kind;		/* enum ec_kind: what the extent must have */
	uint8_t owner;		/* the file (index) that wrote the extent */
	uint16_t epoch;		/* the mount it was written in (0, 1, ...) */
	uint32_t cap;		/* fscrypt_extents_per_key then */
	uint32_t wseq;		/* the write or fallocate that made the extent */
	uint32_t unit;		/* the block's index in that write: the IV */
};

/* What an item's own bytes say. */
struct ec_item {
	int kind;			/* EC_K_NONE: not usable (failure recorded) */
	struct lab_fscrypt_extent_ctx ctx;	/* EC_K_V1, EC_K_V2 */
};

struct ec_file {
	const char *label;
	char path[PATH_MAX];
	uint8_t *data;			/* what the file holds */
	size_t size;
	int created, per_inode;		/* made under fscrypt_per_inode_keys */
	struct ec_blk blk[EC_MAX_BLOCKS];
	uint64_t ino;
	uint8_t nonce[FREF_NONCE_SIZE];	/* the inode's */
	int have_nonce;
	struct raw_extent *ext;		/* FIEMAP */
	size_t next;
	struct lab_btrfs_file_extent *fe;	/* file extent items */
	struct ec_item *it;		/* and what they say, in the same order */
	size_t nfe;
};

/* One extent encrypted per extent, at the first item that references it. */
struct ec_ext {
	const struct ec_file *f;
	const struct lab_btrfs_file_extent *x;
	const struct ec_item *it;
	const struct ec_blk *m;		/* the model of the item's first block */
	size_t group;			/* index of its nonce in ec_ctx::nonces */
};

/* The negative controls, in the order they are listed. */
enum {
	EC_C_MK, EC_C_LBLK, EC_C_EO, EC_C_INODE, EC_C_NONR, EC_C_GROUP,
	EC_C_DUN128, EC_NCTL
};

static const char *const ec_ctl_names[EC_NCTL] = {
	"ciphertext made with a flipped master-key bit",
	"IV = the file's logical block (the next block where that is the right IV)",
	"IV counted from the item, ignoring its extent offset",
	"the per-inode-key ciphertext (context 2, inode nonce, IV = logical block)",
	"the tweak without the extent number (high 64 bits zero)",
	"another key group's key (its nonce, the same tweak)",
	"the 128-bit tweak (extent number in tweak bytes 8-15, the 6.1 series' layout)",
};

struct ec_ctx {
	const char *dev, *mnt;
	char dir[PATH_MAX];
	unsigned bs;
	uint8_t mk[LAB_MASTER_KEY_SIZE], bad_mk[LAB_MASTER_KEY_SIZE];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct ec_file files[EC_NFILES];
	struct raw_btrfs_chunk *chunks;
	size_t nchunks;
	/* the state the model needs */
	unsigned epoch, cap;
	int per_inode_mount;
	uint32_t wseq;
	uint8_t *same_pt;		/* the plaintext of many's even blocks */
	/* extents encrypted per extent, and their key nonces (distinct) */
	struct ec_ext *exts;
	size_t nexts;
	uint8_t (*nonces)[FREF_NONCE_SIZE];
	size_t nnonces;
	/* totals */
	size_t extents, prealloc_items, items_v1, items_v2, items_inode;
	size_t blocks, prealloc_blocks, copies_read, copies_ok;
	size_t blocks_v2, blocks_v1, blocks_inode;
	size_t iv_not_lblk, nonzero_eo, shared, nonzero_nr;
	size_t ctl_compared[EC_NCTL], ctl_matched[EC_NCTL];
	/* many's blocks of the same plaintext, as read from the device */
	uint8_t *same_raw[EC_MANY / 2];
	uint64_t same_nr[EC_MANY / 2];
	size_t nsame;
};

/* ---- mounts and key modes ----------------------------------------------------- */

/*
 * The mount options /proc/mounts shows for c->mnt must include the option
 * @has (if not NULL) and no option beginning with @lacks (if not NULL).
 */
static void ec_check_mount_opts(const struct ec_ctx *c, const char *how,
				const char *has, const char *lacks)
{
	char dev[256], dir[PATH_MAX], type[64], opts[1024], *tok, *save2;
	char *text, *line, *save = NULL;
	int found = 0, seen_has = 0, seen_lacks = 0;
	size_t len;

	text = read_file("/proc/mounts", &len);

	if (!CHECK(text, "read /proc/mounts"))
		return;
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "%255s %4095s %63s %1023s", dev, dir, type, opts) != 4 ||
		    strcmp(dir, c->mnt) != 0)
			continue;
		found = 1;	/* the last line for the mount point counts */
		seen_has = seen_lacks = 0;
		printf("mount options (%s): %s\n", how, opts);
		for (tok = strtok_r(opts, ",", &save2); tok;
		     tok = strtok_r(NULL, ",", &save2)) {
			seen_has |= has && strcmp(tok, has) == 0;
			seen_lacks |= lacks && strncmp(tok, lacks, strlen(lacks)) == 0;
		}
	}
	free(text);
	if (!CHECK(found, "%s: %s is not in /proc/mounts", how, c->mnt))
		return;
	if (has)
		CHECK(seen_has, "%s: /proc/mounts does not show %s for %s", how,
		      has, c->mnt);
	if (lacks)
		CHECK(!seen_lacks, "%s: /proc/mounts shows an option %s... for %s",
		      how, lacks, c->mnt);
}

/* mount -o remount,@opt (mount(2) MS_REMOUNT: btrfs keeps the other options). */
static void ec_remount(struct ec_ctx *c, const char *opt, const char *has,
		       const char *lacks)
{
	char how[128];

	printf("mount -o remount,%s %s\n", opt, c->mnt);
	if (!CHECK_OK(mount(c->dev, c->mnt, "btrfs", MS_REMOUNT, opt),
		      "mount -o remount,%s %s", opt, c->mnt))
		lab_die("cannot switch the key mode");
	snprintf(how, sizeof(how), "after remount,%s", opt);
	ec_check_mount_opts(c, how, has, lacks);
}

/*
 * Mount again (unmounted) with @opts (may be NULL), and add the key again.
 * Returns 0, or -1 (failure recorded, unmounted).
 */
static int ec_mount_again(struct ec_ctx *c, const char *opts)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];

	if (!CHECK_OK(lab_fscrypt_fs_mount(&ec_btrfs, c->dev, c->mnt, opts),
		      "mount %s%s%s", c->dev, opts ? " -o " : "", opts ? opts : ""))
		return -1;
	if (!CHECK_OK(lab_add_raw_key(c->mnt, c->mk, sizeof(c->mk), id),
		      "add the master key again")) {
		lab_umount(c->mnt);
		return -1;
	}
	CHECK(memcmp(id, c->id, sizeof(id)) == 0,
	      "the key identifier changed between mounts");
	c->epoch++;	/* every inode is loaded anew: new key groups */
	return 0;
}

/* ---- making the files (and the model) ------------------------------------------ */

static int ec_open(const struct ec_file *f, int flags)
{
	int fd = open(f->path, flags | O_CLOEXEC, 0644);

	if (!EXPECT_OK(fd, errno, "open %s", f->path))
		lab_die("cannot make the test files");
	return fd;
}

static void ec_grow(struct ec_file *f, size_t end)
{
	if (end > f->size)
		f->size = end;
}

/* A file is created by its first write: it takes the key mode of then. */
static void ec_created(struct ec_ctx *c, struct ec_file *f)
{
	if (f->created)
		return;
	f->created = 1;
	f->per_inode = c->per_inode_mount;
}

/* The blocks of [@off, @off+@len) of @f are in a new extent made now. */
static void ec_model_new(struct ec_ctx *c, struct ec_file *f, size_t off,
			 size_t len)
{
	size_t b, first = off / c->bs, last = (off + len - 1) / c->bs;

	c->wseq++;
	for (b = first; b <= last; b++) {
		f->blk[b].kind = f->per_inode ? EC_K_INODE :
				 c->cap == 1 ? EC_K_V1 : EC_K_V2;
		f->blk[b].owner = (uint8_t)(f - c->files);
		f->blk[b].epoch = (uint16_t)c->epoch;
		f->blk[b].cap = c->cap;
		f->blk[b].wseq = c->wseq;
		f->blk[b].unit = (uint32_t)(b - first);
	}
}

/*
 * @src (fresh random data if NULL) at [@off, @off+@len) of @f, written and
 * fsynced: one new extent.
 */
static void ec_write_data(struct ec_ctx *c, struct ec_file *f, size_t off,
			  size_t len, const uint8_t *src)
{
	int fd;

	if (off + len > EC_MAX_BLOCKS * c->bs || off % c->bs)
		lab_die("test bug: write [%zu, +%zu) beyond %d blocks or unaligned",
			off, len, EC_MAX_BLOCKS);
	ec_created(c, f);
	fd = ec_open(f, O_WRONLY | O_CREAT);
	if (src)
		memcpy(f->data + off, src, len);
	else
		lab_random(f->data + off, len);
	if (!CHECK_OK(pwrite_all(fd, f->data + off, len, (off_t)off),
		      "write %zu bytes at %zu of %s", len, off, f->path) ||
	    !CHECK_OK(fsync(fd), "fsync %s", f->path))
		lab_die("cannot make the test files");
	close(fd);
	ec_grow(f, off + len);
	ec_model_new(c, f, off, len);
}

static void ec_write(struct ec_ctx *c, struct ec_file *f, size_t off, size_t len)
{
	ec_write_data(c, f, off, len, NULL);
}

/* FICLONERANGE @src[@src_off, +@len) to @dst at @dst_off. */
static void ec_clone(struct ec_ctx *c, struct ec_file *dst, size_t dst_off,
		     const struct ec_file *src, size_t src_off, size_t len)
{
	struct file_clone_range r;
	int sfd, dfd;

	ec_created(c, dst);
	sfd = ec_open(src, O_RDONLY);
	dfd = ec_open(dst, O_WRONLY | O_CREAT);
	memset(&r, 0, sizeof(r));
	r.src_fd = sfd;
	r.src_offset = src_off;
	r.src_length = len;
	r.dest_offset = dst_off;
	if (!CHECK_OK(ioctl(dfd, FICLONERANGE, &r),
		      "FICLONERANGE %s [%zu, +%zu) -> %s at %zu (per-extent keys allow sharing)",
		      src->path, src_off, len, dst->path, dst_off) ||
	    !CHECK_OK(fsync(dfd), "fsync %s", dst->path))
		lab_die("cannot make the test files");
	close(sfd);
	close(dfd);
	memcpy(dst->data + dst_off, src->data + src_off, len);
	memcpy(&dst->blk[dst_off / c->bs], &src->blk[src_off / c->bs],
	       len / c->bs * sizeof(dst->blk[0]));
	ec_grow(dst, dst_off + len);
}

/* fallocate(mode 0) [@off, @off+@len) of @f: a preallocated extent. */
static void ec_prealloc(struct ec_ctx *c, struct ec_file *f, size_t off,
			size_t len)
{
	int fd = ec_open(f, O_WRONLY);

	if (!CHECK_OK(fallocate(fd, 0, (off_t)off, (off_t)len),
		      "fallocate [%zu, +%zu) of %s", off, len, f->path) ||
	    !CHECK_OK(fsync(fd), "fsync %s", f->path))
		lab_die("cannot make the test files");
	close(fd);
	/* f->data is zero there: unwritten extents read as zeros */
	ec_grow(f, off + len);
	ec_model_new(c, f, off, len);
}

/* Snapshot the top subvolume to c->mnt/EC_SNAP; groups-snap is its groups. */
static void ec_snapshot(struct ec_ctx *c)
{
	struct btrfs_ioctl_vol_args_v2 va;
	struct ec_file *o = &c->files[EC_GROUPS], *s = &c->files[EC_GROUPS_SNAP];
	int dfd = open(c->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	memset(&va, 0, sizeof(va));
	va.fd = open(c->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(va.name, sizeof(va.name), "%s", EC_SNAP);
	printf("snapshot %s -> %s/%s\n", c->mnt, c->mnt, EC_SNAP);
	if (!CHECK_OK(dfd, "open %s", c->mnt) || !CHECK_OK(va.fd, "open %s", c->mnt) ||
	    !CHECK_OK(ioctl(dfd, BTRFS_IOC_SNAP_CREATE_V2, &va),
		      "BTRFS_IOC_SNAP_CREATE_V2 of %s as %s/%s", c->mnt, c->mnt,
		      EC_SNAP))
		lab_die("cannot snapshot");
	close(va.fd);
	close(dfd);
	memcpy(s->data, o->data, EC_MAX_BLOCKS * c->bs);
	memcpy(s->blk, o->blk, sizeof(s->blk));
	s->size = o->size;
	s->created = 1;
	s->per_inode = o->per_inode;
}

static void ec_make_files(struct ec_ctx *c)
{
	struct ec_file *f = c->files;
	static const char *const labels[EC_NFILES] = {
		"pieces", "clone", "prealloc", "src", "clone-below-0",
		"clone-below", "clone-equal", "clone-above", "clone-whole",
		"clone-tail", "many", "groups", "groups-snap", "v1", "mixed",
		"capped", "inode-keys",
	};
	const size_t bs = c->bs;
	struct fscrypt_policy_v2 pol;
	char inode_dir[PATH_MAX];
	size_t i;

	if (!CHECK_OK(mkdir(c->dir, 0755), "mkdir %s", c->dir))
		lab_die("cannot create the encrypted directory");
	lab_default_policy(&pol, c->id);
	if (!CHECK_OK(lab_set_policy_v2(c->dir, &pol),
		      "FS_IOC_SET_ENCRYPTION_POLICY on %s", c->dir))
		lab_die("cannot set the policy");
	/*
	 * inode-keys gets a subvolume of its own, with the same policy: a
	 * subvolume holding a file with per-inode keys is never snapshotted,
	 * and the top subvolume is.
	 */
	lab_btrfs_subvol(c->mnt, EC_INODE_SV, -1);
	PATHF(inode_dir, "%s/%s/enc", c->mnt, EC_INODE_SV);
	if (!CHECK_OK(mkdir(inode_dir, 0755), "mkdir %s", inode_dir) ||
	    !CHECK_OK(lab_set_policy_v2(inode_dir, &pol),
		      "FS_IOC_SET_ENCRYPTION_POLICY on %s", inode_dir))
		lab_die("cannot make the encrypted directory of inode-keys");
	for (i = 0; i < EC_NFILES; i++) {
		f[i].label = labels[i];
		f[i].data = calloc(EC_MAX_BLOCKS, bs);
		if (!f[i].data)
			lab_die("out of memory");
		if (i == EC_GROUPS_SNAP)
			PATHF(f[i].path, "%s/%s/%s/%s", c->mnt, EC_SNAP,
			      strrchr(c->dir, '/') + 1, labels[EC_GROUPS]);
		else if (i == EC_INODE)
			PATHF(f[i].path, "%s/%s", inode_dir, labels[i]);
		else
			PATHF(f[i].path, "%s/%s", c->dir, labels[i]);
	}

	printf("== default mount options: key groups\n");
	ec_check_mount_opts(c, "default", "fscrypt_per_extent_keys",
			    "fscrypt_extents_per_key=");
	ec_write(c, &f[EC_PIECES], 0, 4 * bs);
	ec_write(c, &f[EC_PIECES], 4 * bs, 2 * bs);
	ec_write(c, &f[EC_PIECES], 6 * bs, bs + EC_TAIL_PIECES);

	ec_write(c, &f[EC_CLONE], 0, 2 * bs);
	ec_clone(c, &f[EC_CLONE], 2 * bs, &f[EC_PIECES], bs, 2 * bs);
	ec_write(c, &f[EC_CLONE], 4 * bs, bs + EC_TAIL_CLONE);

	/* after the clone: clone keeps the old block */
	ec_write(c, &f[EC_PIECES], 2 * bs, bs);

	ec_write(c, &f[EC_PREALLOC], 0, 2 * bs);
	ec_prealloc(c, &f[EC_PREALLOC], 2 * bs, 4 * bs);
	ec_write(c, &f[EC_PREALLOC], 3 * bs, bs);

	/* one write, one fsync: one extent of EC_SRC_BLOCKS blocks */
	ec_write(c, &f[EC_SRC], 0, EC_SRC_BLOCKS * bs);
	for (i = 0; i < EC_NCLONES; i++) {
		const struct ec_clone_case *k = &ec_clones[i];

		printf("clone %zu: %s -> %s: %s\n", i, f[k->src].label,
		       f[k->dst].label, k->what);
		if (k->own)
			ec_write(c, &f[k->dst], 0, k->own * bs);
		ec_clone(c, &f[k->dst], k->dst_blk * bs, &f[k->src],
			 k->src_blk * bs, k->nblk * bs);
	}

	/* many extents in one group; the even ones with the same plaintext */
	lab_random(c->same_pt, bs);
	for (i = 0; i < EC_MANY; i++)
		ec_write_data(c, &f[EC_MANYF], i * bs, bs,
			      i % 2 ? NULL : c->same_pt);
	ec_write(c, &f[EC_GROUPS], 0, 2 * bs);
	ec_write(c, &f[EC_GROUPS], 2 * bs, 2 * bs);
	ec_write(c, &f[EC_MIXED], 0, 2 * bs);

	printf("== fscrypt_extents_per_key=1: a key per extent, version 1 contexts\n");
	ec_remount(c, "fscrypt_extents_per_key=1", "fscrypt_extents_per_key=1", NULL);
	c->cap = 1;
	ec_write(c, &f[EC_V1], 0, 3 * bs);
	ec_write(c, &f[EC_V1], 3 * bs, 2 * bs);
	ec_write(c, &f[EC_V1], bs, bs);
	ec_write(c, &f[EC_MIXED], 2 * bs, 2 * bs);
	ec_clone(c, &f[EC_MIXED], 4 * bs, &f[EC_V1], 4 * bs, bs);

	printf("== fscrypt_extents_per_key=%d: key groups of at most %d extents\n",
	       EC_CAP, EC_CAP);
	{
		char opt[64];

		snprintf(opt, sizeof(opt), "fscrypt_extents_per_key=%d", EC_CAP);
		ec_remount(c, opt, opt, NULL);
	}
	c->cap = EC_CAP;
	for (i = 0; i < EC_CAPPED; i++)
		ec_write(c, &f[EC_CAPPEDF], i * bs, bs);
	ec_remount(c, "fscrypt_extents_per_key=0", NULL, "fscrypt_extents_per_key=");
	c->cap = 0;

	printf("== fscrypt_per_inode_keys: new files get per-inode keys\n");
	ec_remount(c, "fscrypt_per_inode_keys", "fscrypt_per_inode_keys",
		   "fscrypt_per_extent_keys");
	c->per_inode_mount = 1;
	ec_write(c, &f[EC_INODE], 0, 3 * bs);
	ec_write(c, &f[EC_INODE], 3 * bs, 2 * bs);
	/* mixed is encrypted per extent: its group goes on */
	ec_write(c, &f[EC_MIXED], 5 * bs, 2 * bs + EC_TAIL_MIXED);
	ec_remount(c, "fscrypt_per_extent_keys", "fscrypt_per_extent_keys",
		   "fscrypt_per_inode_keys");
	c->per_inode_mount = 0;
	ec_write(c, &f[EC_INODE], 5 * bs, bs + EC_TAIL_SMALL);
	ec_write(c, &f[EC_INODE], bs, bs);
	CHECK_OK(fsync_path(c->dir), "fsync %s", c->dir);

	printf("== mounted again: new key groups; a snapshot\n");
	if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt) ||
	    ec_mount_again(c, NULL))
		lab_die("cannot mount again");
	ec_check_mount_opts(c, "mounted again", "fscrypt_per_extent_keys",
			    "fscrypt_extents_per_key=");
	ec_write(c, &f[EC_GROUPS], 4 * bs, 2 * bs);
	ec_write(c, &f[EC_GROUPS], bs, bs);
	ec_snapshot(c);
	ec_write(c, &f[EC_GROUPS], 6 * bs, 2 * bs);
	ec_write(c, &f[EC_GROUPS_SNAP], 2 * bs, bs);
	ec_write(c, &f[EC_GROUPS_SNAP], 6 * bs, 2 * bs + EC_TAIL_SMALL);
	CHECK_OK(fsync_path(c->dir), "fsync %s", c->dir);
}

/* Every file must read back as written (after dropping the caches). */
static void ec_check_read_back(struct ec_ctx *c, const char *when)
{
	size_t i, ok = 0;

	if (!CHECK_OK(lab_drop_caches("3"), "drop caches"))
		return;
	for (i = 0; i < EC_NFILES; i++) {
		const struct ec_file *f = &c->files[i];

		if (CHECK_FILE_EQUALS(f->path, f->data, f->size))
			ok++;
		else
			printf("read back %s (%s): WRONG\n", f->label, when);
	}
	printf("read back (%s, caches dropped): %zu of %d files byte-exact\n",
	       when, ok, EC_NFILES);
}

/* ---- learning where things are (mounted) ------------------------------------- */

static const char *ec_type_name(uint8_t type)
{
	switch (type) {
	case BTRFS_FILE_EXTENT_INLINE:
		return "inline";
	case BTRFS_FILE_EXTENT_REG:
		return "regular";
	case BTRFS_FILE_EXTENT_PREALLOC:
		return "prealloc";
	}
	return "?";
}

/* The first 8 bytes of a nonce, in hex: enough to tell groups apart in logs. */
static const char *ec_short(char out[17], const uint8_t *nonce)
{
	return lab_hex(out, nonce, 8);
}

static void ec_print_items(const struct ec_file *f)
{
	const struct lab_btrfs_file_extent *x;
	struct lab_fscrypt_extent_ctx d;
	char id[2 * FREF_ID_SIZE + 1], nonce[2 * FREF_NONCE_SIZE + 1];
	size_t i;

	printf("file %s: ino %llu, %zu bytes, %zu file extent item(s), %zu FIEMAP extent(s)%s:\n",
	       f->label, (unsigned long long)f->ino, f->size, f->nfe, f->next,
	       f->per_inode ? ", made under fscrypt_per_inode_keys" : "");
	for (i = 0; i < f->nfe; i++) {
		x = &f->fe[i];
		printf("  item [%llu, +%llu) %s disk_bytenr %llu disk_num_bytes %llu offset %llu encryption %u compression %u size %u",
		       (unsigned long long)x->file_offset,
		       (unsigned long long)x->num_bytes, ec_type_name(x->type),
		       (unsigned long long)x->disk_bytenr,
		       (unsigned long long)x->disk_num_bytes,
		       (unsigned long long)x->offset, x->encryption,
		       x->compression, x->item_size);
		if (x->tail_len && lab_fscrypt_extent_ctx_decode(x->ctx, x->tail_len, &d) == 0) {
			printf(" ctx v%u mode %u", d.version, d.mode);
			if (d.version == LAB_FSCRYPT_EXTENT_CTX_V2)
				printf(" flags %u reserved %u", d.flags, d.reserved);
			printf(" id %s nonce %s", lab_hex(id, d.key_id, FREF_ID_SIZE),
			       lab_hex(nonce, d.nonce, FREF_NONCE_SIZE));
			if (d.version == LAB_FSCRYPT_EXTENT_CTX_V2)
				printf(" extent_nr %llu", (unsigned long long)d.extent_nr);
		} else if (x->tail_len) {
			printf(" %u context bytes, version byte %u: UNDECODABLE",
			       x->tail_len, x->ctx[LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF]);
		}
		printf("\n");
	}
	for (i = 0; i < f->next; i++)
		printf("  FIEMAP [%llu, +%llu) @%llu flags 0x%x\n",
		       (unsigned long long)f->ext[i].logical,
		       (unsigned long long)f->ext[i].length,
		       (unsigned long long)f->ext[i].physical, f->ext[i].flags);
}

static void ec_check_flags(const char *what, const char *path, uint64_t ino,
			   int per_extent)
{
	uint64_t flags;

	if (!CHECK_OK(lab_btrfs_inode_flags(path, ino, &flags),
		      "inode item of %s (ino %llu) through TREE_SEARCH_V2", path,
		      (unsigned long long)ino))
		return;
	printf("%s: inode flags 0x%llx\n", what, (unsigned long long)flags);
	CHECK(flags & LAB_BTRFS_INODE_ENCRYPT,
	      "%s: inode flags 0x%llx lack BTRFS_INODE_ENCRYPT (bit 12)", what,
	      (unsigned long long)flags);
	if (per_extent)
		CHECK(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT,
		      "%s: inode flags 0x%llx lack BTRFS_INODE_ENCRYPT_PER_EXTENT (bit 13): a new file without fscrypt_per_inode_keys must be encrypted per extent",
		      what, (unsigned long long)flags);
	else
		CHECK(!(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT),
		      "%s: inode flags 0x%llx have BTRFS_INODE_ENCRYPT_PER_EXTENT (bit 13), which only regular files made without fscrypt_per_inode_keys may have",
		      what, (unsigned long long)flags);
}

static void ec_learn(struct ec_ctx *c)
{
	struct stat st;
	size_t i;

	sync();
	if (CHECK_OK(stat(c->dir, &st), "stat %s", c->dir))
		ec_check_flags("directory", c->dir, st.st_ino, 0);
	for (i = 0; i < EC_NFILES; i++) {
		struct ec_file *f = &c->files[i];

		CHECK_FILE_EQUALS(f->path, f->data, f->size);
		if (!CHECK_OK(stat(f->path, &st), "stat %s", f->path) ||
		    !CHECK_OK(raw_fiemap(f->path, &f->ext, &f->next), "FIEMAP of %s", f->path) ||
		    !CHECK_OK(lab_btrfs_file_extents(f->path, st.st_ino, &f->fe, &f->nfe),
			      "file extent items of %s through TREE_SEARCH_V2", f->path))
			lab_die("cannot learn where file %s is", f->label);
		f->it = calloc(f->nfe ? f->nfe : 1, sizeof(*f->it));
		if (!f->it)
			lab_die("out of memory");
		f->ino = st.st_ino;
		f->have_nonce = CHECK_OK(lab_get_nonce(f->path, f->nonce),
					 "FS_IOC_GET_ENCRYPTION_NONCE on %s", f->path);
		CHECK((uint64_t)st.st_size == f->size, "%s: size %llu, expected %zu",
		      f->path, (unsigned long long)st.st_size, f->size);
		ec_print_items(f);
		ec_check_flags(f->label, f->path, f->ino, !f->per_inode);
	}
}

/* ---- the items ---------------------------------------------------------------- */

/* The index of the item of @f covering file offset @pos, or -1. */
static long ec_item_idx(const struct ec_file *f, uint64_t pos)
{
	size_t i;

	for (i = 0; i < f->nfe; i++)
		if (f->fe[i].file_offset <= pos &&
		    pos - f->fe[i].file_offset < f->fe[i].num_bytes)
			return (long)i;
	return -1;
}

/* The item of @f covering file offset @pos, or NULL. */
static const struct lab_btrfs_file_extent *ec_item_at(const struct ec_file *f,
						      uint64_t pos)
{
	long i = ec_item_idx(f, pos);

	return i < 0 ? NULL : &f->fe[i];
}

/* What the item at file offset @pos of @f says, or NULL. */
static const struct ec_item *ec_it_at(const struct ec_file *f, uint64_t pos)
{
	long i = ec_item_idx(f, pos);

	return i < 0 ? NULL : &f->it[i];
}

/* Usable for the nonce and data checks: a data extent whose item decoded. */
static int ec_item_ok(const struct ec_file *f, const struct lab_btrfs_file_extent *x)
{
	return f->it[x - f->fe].kind != EC_K_NONE;
}

static int ec_per_extent(int kind)
{
	return kind == EC_K_V1 || kind == EC_K_V2;
}

/* The key nonce of the per-extent-key item at @pos of @f, or NULL. */
static const uint8_t *ec_nonce_at(const struct ec_file *f, uint64_t pos)
{
	const struct ec_item *it = ec_it_at(f, pos);

	return it && ec_per_extent(it->kind) ? it->ctx.nonce : NULL;
}

/* Do the items @a and @b carry the same context, byte for byte? */
static int ec_same_ctx(const struct lab_btrfs_file_extent *a,
		       const struct lab_btrfs_file_extent *b)
{
	size_t n = a->tail_len < sizeof(a->ctx) ? a->tail_len : sizeof(a->ctx);

	return a->item_size == b->item_size && a->tail_len == b->tail_len &&
	       memcmp(a->ctx, b->ctx, n) == 0;
}

/* The FIEMAP extent of @f covering file offset @pos, or NULL. */
static const struct raw_extent *ec_fiemap_at(const struct ec_file *f,
					     uint64_t pos)
{
	size_t i;

	for (i = 0; i < f->next; i++)
		if (f->ext[i].logical <= pos &&
		    pos - f->ext[i].logical < f->ext[i].length)
			return &f->ext[i];
	return NULL;
}

/*
 * Decode item @i of @f by its own bytes (which kind of encryption, which
 * context), and check it against the model of its blocks.  Returns the kind
 * found, EC_K_NONE if the item cannot be used.
 */
static int ec_check_item(struct ec_ctx *c, struct ec_file *f, size_t i)
{
	const struct lab_btrfs_file_extent *x = &f->fe[i];
	struct ec_item *it = &f->it[i];
	const struct ec_blk *m = &f->blk[x->file_offset / c->bs], *mb;
	const unsigned long long at = x->file_offset;
	char a[2 * FREF_ID_SIZE + 1];
	uint64_t pos;
	int kind;

	CHECK(x->compression == 0, "%s: item at %llu has compression %u",
	      f->label, at, x->compression);
	if (x->encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE) {
		if (!CHECK(x->item_size == LAB_BTRFS_FILE_EXTENT_SIZE,
			   "%s: item at %llu with per-inode keys (encryption 1) is %u bytes, expected %d (no context)",
			   f->label, at, x->item_size, LAB_BTRFS_FILE_EXTENT_SIZE))
			return EC_K_NONE;
		kind = EC_K_INODE;
	} else if (x->encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT) {
		if (!CHECK(x->item_size == EC_ITEM_SIZE_V1 || x->item_size == EC_ITEM_SIZE_V2,
			   "%s: item at %llu is %u bytes, expected %d (a version 2 context) or %d (version 1)",
			   f->label, at, x->item_size, EC_ITEM_SIZE_V2, EC_ITEM_SIZE_V1) ||
		    !CHECK_OK(lab_fscrypt_extent_ctx_decode(x->ctx, x->tail_len, &it->ctx),
			      "%s: item at %llu: the %u context bytes (version byte %u) are no valid extent context",
			      f->label, at, x->tail_len,
			      x->ctx[LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF]))
			return EC_K_NONE;
		kind = it->ctx.version == LAB_FSCRYPT_EXTENT_CTX_V2 ? EC_K_V2 : EC_K_V1;
		CHECK(it->ctx.mode == FSCRYPT_MODE_AES_256_XTS,
		      "%s: item at %llu: context contents mode %u, expected %u (AES-256-XTS)",
		      f->label, at, it->ctx.mode, FSCRYPT_MODE_AES_256_XTS);
		CHECK(memcmp(it->ctx.key_id, c->id, FREF_ID_SIZE) == 0,
		      "%s: item at %llu: context key identifier %s is not the master key's",
		      f->label, at, lab_hex(a, it->ctx.key_id, FREF_ID_SIZE));
		if (kind == EC_K_V2) {
			CHECK(it->ctx.flags == 0 && it->ctx.reserved == 0,
			      "%s: item at %llu: version 2 context with flags %u, reserved %u; both must be 0",
			      f->label, at, it->ctx.flags, it->ctx.reserved);
			CHECK(it->ctx.extent_nr < EC_MAX_NR,
			      "%s: item at %llu: extent number %llu, not below 2^32",
			      f->label, at, (unsigned long long)it->ctx.extent_nr);
		}
	} else {
		CHECK(0, "%s: item at %llu has encryption %u; a data extent of an encrypted file must have 1 or 2",
		      f->label, at, x->encryption);
		return EC_K_NONE;
	}
	CHECK(kind == m->kind,
	      "%s: item at %llu has %s, but its extent was written with %s (file made %s, fscrypt_extents_per_key=%u then)",
	      f->label, at, ec_kind_names[kind], ec_kind_names[m->kind],
	      f->per_inode ? "under fscrypt_per_inode_keys" : "per extent",
	      m->cap);
	/* the item's blocks: one write, each at its place in it */
	for (pos = x->file_offset; pos < x->file_offset + x->num_bytes && pos < f->size;
	     pos += c->bs) {
		mb = &f->blk[pos / c->bs];
		if (!CHECK(mb->wseq == m->wseq,
			   "%s: the item at %llu holds blocks %llu and %llu, written by different writes (%u and %u)",
			   f->label, at, at / c->bs, (unsigned long long)(pos / c->bs),
			   m->wseq, mb->wseq))
			break;
		if (kind != EC_K_INODE &&
		    !CHECK((x->offset + (pos - x->file_offset)) / c->bs == mb->unit,
			   "%s: block %llu is block %u of the write that made its extent, but the item (extent offset %llu) puts it at block %llu of the extent (or the write was split into several extents)",
			   f->label, (unsigned long long)(pos / c->bs), mb->unit,
			   (unsigned long long)x->offset,
			   (unsigned long long)((x->offset + (pos - x->file_offset)) / c->bs)))
			break;
	}
	return kind;
}

/* Each item by itself, and how the items of @f cover it. */
static void ec_check_file_items(struct ec_ctx *c, struct ec_file *f)
{
	const uint64_t end = (f->size + c->bs - 1) / c->bs * c->bs;
	const struct lab_btrfs_file_extent *x;
	uint64_t next = 0;
	size_t i;

	for (i = 0; i < f->nfe; i++) {
		x = &f->fe[i];
		f->it[i].kind = EC_K_NONE;
		CHECK(x->file_offset == next,
		      "%s: item at file offset %llu, but the previous one ends at %llu (gap or overlap)",
		      f->label, (unsigned long long)x->file_offset,
		      (unsigned long long)next);
		next = x->file_offset + x->num_bytes;
		if (!CHECK(x->type == BTRFS_FILE_EXTENT_REG ||
			   x->type == BTRFS_FILE_EXTENT_PREALLOC,
			   "%s: item at %llu is of type %u (%s); an encrypted file has only regular and preallocated extents",
			   f->label, (unsigned long long)x->file_offset, x->type,
			   ec_type_name(x->type)) ||
		    !CHECK(x->disk_bytenr != 0,
			   "%s: item at %llu is a hole; none was made", f->label,
			   (unsigned long long)x->file_offset) ||
		    !CHECK(x->file_offset < EC_MAX_BLOCKS * c->bs,
			   "%s: item at %llu beyond the test's files", f->label,
			   (unsigned long long)x->file_offset))
			continue;
		if (x->type == BTRFS_FILE_EXTENT_PREALLOC)
			c->prealloc_items++;
		f->it[i].kind = ec_check_item(c, f, i);
		c->items_v2 += f->it[i].kind == EC_K_V2;
		c->items_v1 += f->it[i].kind == EC_K_V1;
		c->items_inode += f->it[i].kind == EC_K_INODE;
	}
	CHECK(next >= end, "%s: the items end at %llu, the file's blocks at %llu",
	      f->label, (unsigned long long)next, (unsigned long long)end);
}

/* An item with the file it belongs to. */
struct ec_ref {
	const struct ec_file *f;
	const struct lab_btrfs_file_extent *x;
	const struct ec_item *it;
};

static const struct ec_blk *ec_model_of(const struct ec_ctx *c,
					const struct ec_file *f,
					const struct lab_btrfs_file_extent *x)
{
	return &f->blk[x->file_offset / c->bs];
}

/* The index of @nonce in c->nonces, adding it if new. */
static size_t ec_nonce_idx(struct ec_ctx *c, const uint8_t *nonce)
{
	size_t i;

	for (i = 0; i < c->nnonces; i++)
		if (memcmp(c->nonces[i], nonce, FREF_NONCE_SIZE) == 0)
			return i;
	memcpy(c->nonces[c->nnonces], nonce, FREF_NONCE_SIZE);
	return c->nnonces++;
}

/*
 * Across all files: one context per extent (disk_bytenr: split pieces,
 * reflinks, the snapshot); different extents never the same (key nonce,
 * extent number), a version 1 nonce only in its own extent; no nonce equal
 * to an inode nonce.  Collects the extents (c->exts) and nonces (c->nonces).
 */
static void ec_check_contexts(struct ec_ctx *c)
{
	struct ec_ref *refs;
	size_t n = 0, total = 0, i, j;
	int first;

	for (i = 0; i < EC_NFILES; i++)
		total += c->files[i].nfe;
	refs = lab_xmalloc((total + 1) * sizeof(*refs));
	c->exts = lab_xmalloc((total + 1) * sizeof(*c->exts));
	c->nonces = lab_xmalloc((total + 1) * sizeof(*c->nonces));
	for (i = 0; i < EC_NFILES; i++)
		for (j = 0; j < c->files[i].nfe; j++)
			if (ec_per_extent(c->files[i].it[j].kind))
				refs[n++] = (struct ec_ref){ &c->files[i], &c->files[i].fe[j],
							     &c->files[i].it[j] };
	for (i = 0; i < n; i++) {
		const struct ec_ref *a = &refs[i];

		for (j = 0; j < EC_NFILES; j++)
			CHECK(!c->files[j].have_nonce ||
			      memcmp(a->it->ctx.nonce, c->files[j].nonce, FREF_NONCE_SIZE) != 0,
			      "%s: the item at %llu has the inode nonce of %s as its key nonce",
			      a->f->label, (unsigned long long)a->x->file_offset,
			      c->files[j].label);
		first = 1;
		for (j = 0; j < n; j++) {
			const struct ec_ref *b = &refs[j];
			int same_nonce, one_v1;

			if (j == i)
				continue;
			if (b->x->disk_bytenr == a->x->disk_bytenr) {
				first &= j > i;
				if (j < i)
					continue;
				CHECK(ec_same_ctx(a->x, b->x),
				      "items of one extent (disk_bytenr %llu) have different contexts: %s at %llu and %s at %llu",
				      (unsigned long long)a->x->disk_bytenr,
				      a->f->label, (unsigned long long)a->x->file_offset,
				      b->f->label, (unsigned long long)b->x->file_offset);
				CHECK(ec_model_of(c, a->f, a->x)->wseq == ec_model_of(c, b->f, b->x)->wseq,
				      "test model: %s at %llu and %s at %llu share disk_bytenr %llu but were made by different writes",
				      a->f->label, (unsigned long long)a->x->file_offset,
				      b->f->label, (unsigned long long)b->x->file_offset,
				      (unsigned long long)a->x->disk_bytenr);
				continue;
			}
			if (j < i)
				continue;
			same_nonce = memcmp(a->it->ctx.nonce, b->it->ctx.nonce,
					    FREF_NONCE_SIZE) == 0;
			one_v1 = a->it->kind == EC_K_V1 || b->it->kind == EC_K_V1;
			CHECK(!same_nonce || (!one_v1 &&
					      a->it->ctx.extent_nr != b->it->ctx.extent_nr),
			      "different extents (disk_bytenr %llu and %llu) share %s: %s at %llu (v%u, extent number %llu) and %s at %llu (v%u, extent number %llu)",
			      (unsigned long long)a->x->disk_bytenr,
			      (unsigned long long)b->x->disk_bytenr,
			      one_v1 ? "a key nonce, one of them a version 1 context's" :
				       "key nonce and extent number",
			      a->f->label, (unsigned long long)a->x->file_offset,
			      a->it->ctx.version, (unsigned long long)a->it->ctx.extent_nr,
			      b->f->label, (unsigned long long)b->x->file_offset,
			      b->it->ctx.version, (unsigned long long)b->it->ctx.extent_nr);
		}
		if (first) {	/* counted at its first item */
			struct ec_ext *e = &c->exts[c->nexts++];

			e->f = a->f;
			e->x = a->x;
			e->it = a->it;
			e->m = ec_model_of(c, a->f, a->x);
			e->group = ec_nonce_idx(c, a->it->ctx.nonce);
		}
	}
	c->extents = c->nexts;
	free(refs);
}

/*
 * The key groups: the extents that share a key nonce (version 2).  Each must
 * have been written by one file in one mount under one setting, with numbers
 * rising in the order of the writes, at most N under
 * fscrypt_extents_per_key=N; without a cap, a file writes one group per
 * mount.
 */
static void ec_check_groups(struct ec_ctx *c)
{
	size_t g, h, i, j, k, n, *mem = lab_xmalloc((c->nexts + 1) * sizeof(*mem));
	const struct ec_blk *m0, *m1;
	char hex[17], nrs[512], files[512], capbuf[64];
	size_t ngroups = 0, largest = 0;

	printf("== key groups\n");
	for (g = 0; g < c->nnonces; g++) {
		for (n = 0, i = 0; i < c->nexts; i++)
			if (c->exts[i].group == g)
				mem[n++] = i;
		if (n == 0 || c->exts[mem[0]].it->kind != EC_K_V2)
			continue;	/* version 1: checked alone above */
		ngroups++;
		largest = n > largest ? n : largest;
		/* in the order of the writes */
		for (i = 1; i < n; i++)
			for (j = i; j > 0 && c->exts[mem[j - 1]].m->wseq > c->exts[mem[j]].m->wseq; j--) {
				k = mem[j];
				mem[j] = mem[j - 1];
				mem[j - 1] = k;
			}
		m0 = c->exts[mem[0]].m;
		nrs[0] = files[0] = '\0';
		for (i = 0; i < n; i++) {
			const struct ec_ext *e = &c->exts[mem[i]];

			snprintf(nrs + strlen(nrs), sizeof(nrs) - strlen(nrs), "%s%llu",
				 i ? " " : "", (unsigned long long)e->it->ctx.extent_nr);
			CHECK(e->m->owner == m0->owner && e->m->epoch == m0->epoch &&
			      e->m->cap == m0->cap,
			      "key group %s: holds extents written by %s in mount %u (fscrypt_extents_per_key=%u) and by %s in mount %u (=%u): a group belongs to one inode while it is in memory",
			      ec_short(hex, c->nonces[g]), c->files[m0->owner].label,
			      m0->epoch, m0->cap, c->files[e->m->owner].label,
			      e->m->epoch, e->m->cap);
			if (i > 0)
				CHECK(e->it->ctx.extent_nr > c->exts[mem[i - 1]].it->ctx.extent_nr,
				      "key group %s: extent numbers do not rise in the order the extents were written: %llu, then %llu (%s at %llu)",
				      ec_short(hex, c->nonces[g]),
				      (unsigned long long)c->exts[mem[i - 1]].it->ctx.extent_nr,
				      (unsigned long long)e->it->ctx.extent_nr, e->f->label,
				      (unsigned long long)e->x->file_offset);
			if (m0->cap >= 2)
				CHECK(e->it->ctx.extent_nr < m0->cap,
				      "key group %s: extent number %llu under fscrypt_extents_per_key=%u",
				      ec_short(hex, c->nonces[g]),
				      (unsigned long long)e->it->ctx.extent_nr, m0->cap);
		}
		for (k = 0; k < EC_NFILES; k++) {
			const struct ec_file *f = &c->files[k];
			int refd = 0;

			for (i = 0; i < f->nfe && !refd; i++)
				for (j = 0; j < n && !refd; j++)
					refd = ec_per_extent(f->it[i].kind) &&
					       f->fe[i].disk_bytenr == c->exts[mem[j]].x->disk_bytenr;
			if (refd)
				snprintf(files + strlen(files), sizeof(files) - strlen(files),
					 "%s%s", files[0] ? ", " : "", f->label);
		}
		capbuf[0] = '\0';
		if (m0->cap >= 2)
			snprintf(capbuf, sizeof(capbuf), " (fscrypt_extents_per_key=%u)",
				 m0->cap);
		printf("key group %zu: nonce %s..., written by %s in mount %u%s: %zu extent(s), numbers %s (in write order); items in %s\n",
		       ngroups, ec_short(hex, c->nonces[g]), c->files[m0->owner].label,
		       m0->epoch, capbuf, n, nrs, files);
		if (m0->cap >= 2)
			CHECK(n <= m0->cap, "key group %s: %zu extents under fscrypt_extents_per_key=%u",
			      ec_short(hex, c->nonces[g]), n, m0->cap);
		/* no cap: one group per file and mount */
		for (h = 0; h < c->nexts; h++) {
			m1 = c->exts[h].m;
			if (c->exts[h].group <= g || c->exts[h].it->kind != EC_K_V2 ||
			    m0->cap != 0 || m1->cap != 0)
				continue;
			CHECK(m1->owner != m0->owner || m1->epoch != m0->epoch,
			      "%s wrote extents in mount %u without fscrypt_extents_per_key, but in two key groups: %s... and %s... (%s at %llu)",
			      c->files[m0->owner].label, m0->epoch,
			      ec_short(hex, c->nonces[g]),
			      lab_hex(nrs, c->nonces[c->exts[h].group], 8),
			      c->exts[h].f->label,
			      (unsigned long long)c->exts[h].x->file_offset);
		}
	}
	printf("%zu extents encrypted per extent (%zu key nonces): %zu key group(s) of version 2 extents, the largest of %zu extents\n",
	       c->nexts, c->nnonces, ngroups, largest);
	free(mem);
}

/*
 * The reflink @k: every cloned block is in an item of the source block's
 * extent, at the source block's extent offset, with the same context; and
 * the destination offset lies below, at or above that extent offset, as
 * @k->rel says.
 */
static void ec_check_clone(struct ec_ctx *c, const struct ec_clone_case *k)
{
	const struct ec_file *s = &c->files[k->src], *d = &c->files[k->dst];
	const struct lab_btrfs_file_extent *src, *dst;
	const uint64_t bs = c->bs;
	uint64_t soff, doff, seo, deo, b;
	int rel;

	for (b = 0; b < k->nblk; b++) {
		soff = (k->src_blk + b) * bs;
		doff = (k->dst_blk + b) * bs;
		src = ec_item_at(s, soff);
		dst = ec_item_at(d, doff);
		if (!CHECK(src && dst && ec_item_ok(s, src) && ec_item_ok(d, dst),
			   "%s: no data items at %s's offset %llu and %s's offset %llu",
			   k->what, s->label, (unsigned long long)soff, d->label,
			   (unsigned long long)doff))
			return;
		seo = src->offset + (soff - src->file_offset);
		deo = dst->offset + (doff - dst->file_offset);
		if (!CHECK(dst->disk_bytenr == src->disk_bytenr && deo == seo,
			   "%s: %s's block %llu is at disk_bytenr %llu + %llu, %s's block %llu at disk_bytenr %llu + %llu: the reflink does not share it",
			   k->what, d->label, (unsigned long long)(doff / bs),
			   (unsigned long long)dst->disk_bytenr, (unsigned long long)deo,
			   s->label, (unsigned long long)(soff / bs),
			   (unsigned long long)src->disk_bytenr, (unsigned long long)seo) ||
		    !CHECK(ec_same_ctx(dst, src),
			   "%s: the item of %s at %llu has another context than its source",
			   k->what, d->label, (unsigned long long)dst->file_offset))
			return;
		if (b > 0)
			continue;
		/* where the extent would begin in the destination file */
		rel = doff < seo ? -1 : doff > seo;
		printf("%s: %s item at file offset %llu, extent offset %llu: the extent begins at file offset %s%llu (%s the extent offset)\n",
		       k->what, d->label, (unsigned long long)dst->file_offset,
		       (unsigned long long)dst->offset, rel < 0 ? "-" : "",
		       (unsigned long long)(rel < 0 ? seo - doff : doff - seo),
		       rel < 0 ? "below" : rel == 0 ? "at" : "above");
		CHECK(rel == k->rel,
		      "%s: the destination offset %llu should be %s the extent offset %llu (the case is not what it claims)",
		      k->what, (unsigned long long)doff,
		      k->rel < 0 ? "below" : k->rel == 0 ? "at" : "above",
		      (unsigned long long)seo);
	}
}

/* Distinct extents (disk_bytenr) among the usable items of @f. */
static size_t ec_distinct_extents(const struct ec_file *f)
{
	size_t i, j, n = 0;
	int dup;

	for (i = 0; i < f->nfe; i++) {
		if (!ec_item_ok(f, &f->fe[i]))
			continue;
		for (dup = 0, j = 0; j < i; j++)
			dup |= ec_item_ok(f, &f->fe[j]) &&
			       f->fe[j].disk_bytenr == f->fe[i].disk_bytenr;
		n += !dup;
	}
	return n;
}

/* Do blocks @ba of @a and @bb of @b lie in one extent at one extent offset? */
static int ec_same_block(const struct ec_ctx *c, const struct ec_file *a,
			 uint64_t ba, const struct ec_file *b, uint64_t bb)
{
	const struct lab_btrfs_file_extent *x = ec_item_at(a, ba * c->bs);
	const struct lab_btrfs_file_extent *y = ec_item_at(b, bb * c->bs);

	return x && y && ec_item_ok(a, x) && ec_item_ok(b, y) &&
	       x->disk_bytenr == y->disk_bytenr &&
	       x->offset + (ba * c->bs - x->file_offset) ==
	       y->offset + (bb * c->bs - y->file_offset) &&
	       ec_same_ctx(x, y);
}

/* Are the key nonces of blocks @ba of @a and @bb of @b both there and equal? */
static int ec_same_nonce(const struct ec_ctx *c, const struct ec_file *a,
			 uint64_t ba, const struct ec_file *b, uint64_t bb)
{
	const uint8_t *x = ec_nonce_at(a, ba * c->bs), *y = ec_nonce_at(b, bb * c->bs);

	return x && y && memcmp(x, y, FREF_NONCE_SIZE) == 0;
}

/* The extent number of block @blk of @f (~0 if it has none). */
static uint64_t ec_nr_at(const struct ec_ctx *c, const struct ec_file *f, uint64_t blk)
{
	const struct ec_item *it = ec_it_at(f, blk * c->bs);

	return it && it->kind == EC_K_V2 ? it->ctx.extent_nr : ~0ULL;
}

/* What the first part of ec_make_files() (before the key groups) must have made. */
static void ec_check_layout_extents(struct ec_ctx *c)
{
	const struct ec_file *p = &c->files[EC_PIECES], *cl = &c->files[EC_CLONE];
	const struct ec_file *pa = &c->files[EC_PREALLOC];
	const struct lab_btrfs_file_extent *src, *dst, *x;
	const uint64_t bs = c->bs;
	size_t i, n;

	/* pieces: four fsynced writes, four extents at least */
	n = ec_distinct_extents(p);
	CHECK(n >= 4, "pieces: %zu distinct extents, expected at least 4 (four fsynced writes)", n);
	x = ec_item_at(p, 3 * bs);
	CHECK(x && ec_item_ok(p, x) && x->offset != 0,
	      "pieces: block 3 (the tail of the first extent, split by the overwrite of block 2) should be at a nonzero extent offset, is at %llu",
	      x ? (unsigned long long)x->offset : 0ULL);
	CHECK(ec_same_block(c, p, 0, p, 0) && ec_same_nonce(c, p, 0, p, 3) &&
	      ec_nr_at(c, p, 0) == ec_nr_at(c, p, 3),
	      "pieces: blocks 0 and 3, split pieces of one extent, should share its context");

	/* clone: its block 2 is pieces' block 1 as first written */
	src = ec_item_at(p, bs);
	dst = ec_item_at(cl, 2 * bs);
	if (CHECK(src && dst && ec_item_ok(p, src) && ec_item_ok(cl, dst),
		  "clone: no data items at pieces' block 1 and clone's block 2")) {
		CHECK(dst->disk_bytenr == src->disk_bytenr &&
		      dst->offset + (2 * bs - dst->file_offset) ==
		      src->offset + (bs - src->file_offset),
		      "clone: block 2 is at disk_bytenr %llu + %llu, pieces' block 1 at disk_bytenr %llu + %llu: the reflink does not share it",
		      (unsigned long long)dst->disk_bytenr,
		      (unsigned long long)(dst->offset + (2 * bs - dst->file_offset)),
		      (unsigned long long)src->disk_bytenr,
		      (unsigned long long)(src->offset + (bs - src->file_offset)));
		CHECK(dst->offset != 0,
		      "clone: the reflinked item at %llu has extent offset 0; it should start inside the source extent",
		      (unsigned long long)dst->file_offset);
		CHECK(ec_same_ctx(dst, src),
		      "clone: the reflinked item's context differs from its source's");
	}
	x = ec_item_at(cl, 3 * bs);
	CHECK(x && ec_item_ok(cl, x) && x->disk_bytenr == (dst ? dst->disk_bytenr : 0),
	      "clone: block 3 is not in the reflinked extent");
	CHECK(!ec_same_nonce(c, cl, 0, p, 0),
	      "clone: its own extents are in the key group of pieces");

	/* prealloc: blocks 2, 4 and 5 preallocated (one extent), 3 written */
	for (i = 2; i < 6; i++) {
		x = ec_item_at(pa, i * bs);
		CHECK(x && ec_item_ok(pa, x) &&
		      x->type == (i == 3 ? BTRFS_FILE_EXTENT_REG : BTRFS_FILE_EXTENT_PREALLOC),
		      "prealloc: block %zu should be in a %s item with a context, is in %s",
		      i, i == 3 ? "regular" : "preallocated",
		      x ? ec_type_name(x->type) : "none");
	}
	src = ec_item_at(pa, 2 * bs);
	dst = ec_item_at(pa, 4 * bs);
	CHECK(src && dst && src->disk_bytenr == dst->disk_bytenr && dst->offset != 0,
	      "prealloc: the preallocated pieces around block 3 should be one extent, the second at a nonzero extent offset");
	CHECK(ec_same_nonce(c, pa, 0, pa, 2) && ec_same_nonce(c, pa, 0, pa, 3) &&
	      ec_nr_at(c, pa, 0) < ec_nr_at(c, pa, 2) &&
	      ec_nr_at(c, pa, 2) < ec_nr_at(c, pa, 3),
	      "prealloc: the written, preallocated and then written extents should be numbers rising in one key group: %llu, %llu, %llu",
	      (unsigned long long)ec_nr_at(c, pa, 0), (unsigned long long)ec_nr_at(c, pa, 2),
	      (unsigned long long)ec_nr_at(c, pa, 3));

	/* src: one item, one extent, all of it */
	x = ec_item_at(&c->files[EC_SRC], 0);
	CHECK(c->files[EC_SRC].nfe == 1 && x && ec_item_ok(&c->files[EC_SRC], x) &&
	      x->offset == 0 && x->num_bytes == EC_SRC_BLOCKS * bs &&
	      x->disk_num_bytes == EC_SRC_BLOCKS * bs,
	      "src: %zu item(s), expected one item of the whole %d-block extent",
	      c->files[EC_SRC].nfe, EC_SRC_BLOCKS);
	for (i = 0; i < EC_NCLONES; i++)
		ec_check_clone(c, &ec_clones[i]);
}

/* What the key group and key mode part of ec_make_files() must have made. */
static void ec_check_layout_groups(struct ec_ctx *c)
{
	const struct ec_file *many = &c->files[EC_MANYF], *g = &c->files[EC_GROUPS];
	const struct ec_file *gs = &c->files[EC_GROUPS_SNAP], *v1 = &c->files[EC_V1];
	const struct ec_file *mx = &c->files[EC_MIXED], *cp = &c->files[EC_CAPPEDF];
	const struct ec_file *ik = &c->files[EC_INODE];
	const struct lab_btrfs_file_extent *x;
	const uint64_t bs = c->bs;
	char a[17], b[17], d[17];
	size_t i, n;
	int ok;

	/* many: EC_MANY extents, one group, numbers 0, 1, ... in write order */
	n = ec_distinct_extents(many);
	for (ok = 1, i = 0; i < EC_MANY; i++)
		ok &= ec_same_nonce(c, many, 0, many, i) && ec_nr_at(c, many, i) == i;
	printf("many: %zu extent(s); %s\n", n,
	       ok ? "one key group, extent numbers 0..15 in write order" :
		    "NOT one key group numbered in write order");
	CHECK(n == EC_MANY && ok,
	      "many: %zu extents, expected %d one-block extents in one key group numbered 0..%d in the order they were written",
	      n, EC_MANY, EC_MANY - 1);

	/* groups: A before the remount, B after it, also after the snapshot */
	ok = ec_nonce_at(g, 0) && ec_nonce_at(g, 1 * bs) && ec_nonce_at(g, 6 * bs);
	if (CHECK(ok, "groups: blocks 0, 1 and 6 should have key nonces")) {
		printf("groups: group A %s... (blocks 0, 2-3, before the remount), B %s... (blocks 1, 4-7, after it; 6-7 after the snapshot)\n",
		       ec_short(a, ec_nonce_at(g, 0)), ec_short(b, ec_nonce_at(g, 1 * bs)));
		CHECK(ec_same_nonce(c, g, 0, g, 2) && ec_nr_at(c, g, 0) == 0 &&
		      ec_nr_at(c, g, 2) == 1,
		      "groups: blocks 0 and 2 (its first two writes) should be extents 0 and 1 of one group, are %llu and %llu",
		      (unsigned long long)ec_nr_at(c, g, 0), (unsigned long long)ec_nr_at(c, g, 2));
		CHECK(!ec_same_nonce(c, g, 0, g, 4),
		      "groups: the writes after the remount are in the group of before it");
		CHECK(ec_same_nonce(c, g, 4, g, 1) && ec_same_nonce(c, g, 4, g, 6) &&
		      ec_nr_at(c, g, 4) == 0 && ec_nr_at(c, g, 1) == 1 &&
		      ec_nr_at(c, g, 6) == 2,
		      "groups: blocks 4, 1 and 6 (written after the remount, the last after the snapshot) should be extents 0, 1, 2 of one new group, are %llu, %llu, %llu",
		      (unsigned long long)ec_nr_at(c, g, 4), (unsigned long long)ec_nr_at(c, g, 1),
		      (unsigned long long)ec_nr_at(c, g, 6));
		/* the split of A's first extent by the overwrite of block 1 */
		x = ec_item_at(g, 0);
		CHECK(x && x->num_bytes == c->bs,
		      "groups: the overwrite of block 1 should have cut A's first extent to block 0");
	}

	/* groups-snap: A and B shared, C its own */
	ok = ec_nonce_at(gs, 2 * bs) != NULL;
	if (CHECK(ok, "groups-snap: block 2 should have a key nonce")) {
		printf("groups-snap: group C %s... (blocks 2, 6-8, written to the snapshot)\n",
		       ec_short(d, ec_nonce_at(gs, 2 * bs)));
		CHECK(ec_same_nonce(c, gs, 2, gs, 6) && ec_nr_at(c, gs, 2) == 0 &&
		      ec_nr_at(c, gs, 6) == 1,
		      "groups-snap: blocks 2 and 6 should be extents 0 and 1 of one new group, are %llu and %llu",
		      (unsigned long long)ec_nr_at(c, gs, 2), (unsigned long long)ec_nr_at(c, gs, 6));
		CHECK(!ec_same_nonce(c, gs, 2, g, 0) && !ec_same_nonce(c, gs, 2, g, 1),
		      "groups-snap: the snapshot's writes are in a group of the original file");
	}
	for (i = 0; i < 6; i++)
		if (i != 2)
			CHECK(ec_same_block(c, gs, i, g, i),
			      "groups-snap: block %zu should be the original's (same extent, offset and context)",
			      i);
	x = ec_item_at(gs, 3 * c->bs);
	CHECK(x && x->offset == c->bs,
	      "groups-snap: block 3 should be A's second extent at extent offset %u (split in the snapshot), is at %llu",
	      c->bs, x ? (unsigned long long)x->offset : 0ULL);
	CHECK(!ec_same_block(c, gs, 6, g, 6),
	      "groups-snap: block 6 was written to the snapshot, but is the original's");

	/* v1: three extents of its own keys, the first split */
	n = ec_distinct_extents(v1);
	CHECK(n == 3, "v1: %zu distinct extents, expected 3", n);
	CHECK(ec_same_block(c, v1, 0, v1, 0) && ec_same_nonce(c, v1, 0, v1, 2) &&
	      !ec_same_nonce(c, v1, 0, v1, 1) && !ec_same_nonce(c, v1, 0, v1, 3),
	      "v1: blocks 0 and 2 should share the first extent's context, blocks 1 and 3 have contexts of their own");

	/* mixed: its group lived through the version 1 and per-inode-key mounts */
	CHECK(ec_same_nonce(c, mx, 0, mx, 5) && ec_nr_at(c, mx, 0) == 0 &&
	      ec_nr_at(c, mx, 5) == 1,
	      "mixed: blocks 0 and 5 (written before and after the fscrypt_extents_per_key=1 and fscrypt_per_inode_keys remounts) should be extents 0 and 1 of one group, are %llu and %llu",
	      (unsigned long long)ec_nr_at(c, mx, 0), (unsigned long long)ec_nr_at(c, mx, 5));
	CHECK(ec_same_block(c, mx, 4, v1, 4),
	      "mixed: block 4 should be v1's block 4 (a version 1 extent at extent offset 1)");
	x = ec_item_at(mx, 4 * c->bs);
	CHECK(x && x->offset == c->bs,
	      "mixed: the reflinked version 1 item should be at extent offset %u", c->bs);

	/* capped: groups of EC_CAP */
	for (ok = 1, i = 0; i < EC_CAPPED; i++)
		ok &= ec_same_nonce(c, cp, i, cp, i / EC_CAP * EC_CAP) &&
		      ec_nr_at(c, cp, i) == i % EC_CAP &&
		      (i < EC_CAP || !ec_same_nonce(c, cp, i, cp, i - EC_CAP));
	printf("capped: %s\n", ok ? "key groups of 3, 3 and 1 extents, numbered 0 1 2, 0 1 2, 0" :
				   "NOT key groups of 3, 3 and 1");
	CHECK(ok, "capped: %d one-block extents under fscrypt_extents_per_key=%d should be groups of %d numbered from 0",
	      EC_CAPPED, EC_CAP, EC_CAP);

	/* inode-keys: every item with per-inode keys (the kind check) */
	n = 0;
	for (i = 0; i < ik->nfe; i++)
		n += ik->it[i].kind == EC_K_INODE;
	CHECK(n == ik->nfe && n >= 4,
	      "inode-keys: %zu of %zu items with per-inode keys, expected all of at least 4",
	      n, ik->nfe);
}

/* ---- data ---------------------------------------------------------------------- */

/* Check the blocks of item @x of @f that hold data (mounted: FIEMAP only). */
static void ec_check_item_fiemap(const struct ec_ctx *c, const struct ec_file *f,
				 const struct lab_btrfs_file_extent *x)
{
	const struct raw_extent *m;
	uint64_t pos, addr;

	for (pos = x->file_offset; pos < x->file_offset + x->num_bytes && pos < f->size;
	     pos += c->bs) {
		addr = x->disk_bytenr + x->offset + (pos - x->file_offset);
		m = ec_fiemap_at(f, pos);
		if (!CHECK(m, "%s: no FIEMAP extent at file offset %llu", f->label,
			   (unsigned long long)pos))
			continue;
		CHECK(m->physical + (pos - m->logical) == addr,
		      "%s: file offset %llu: FIEMAP says address %llu, the file extent item %llu",
		      f->label, (unsigned long long)pos,
		      (unsigned long long)(m->physical + (pos - m->logical)),
		      (unsigned long long)addr);
		if (x->type == BTRFS_FILE_EXTENT_PREALLOC)
			CHECK(m->flags & FIEMAP_EXTENT_UNWRITTEN,
			      "%s: file offset %llu is preallocated, but FIEMAP flags 0x%x lack UNWRITTEN",
			      f->label, (unsigned long long)pos, m->flags);
		else
			CHECK(!(m->flags & FBLK_BAD_EXTENT_FLAGS),
			      "%s: file offset %llu: FIEMAP flags 0x%x: not plain blocks at an address",
			      f->label, (unsigned long long)pos, m->flags);
	}
}

/* Is the extent of @x also referenced by an item of another file? */
static int ec_shared(const struct ec_ctx *c, const struct ec_file *f,
		     const struct lab_btrfs_file_extent *x)
{
	size_t i, j;

	for (i = 0; i < EC_NFILES; i++) {
		if (&c->files[i] == f)
			continue;
		for (j = 0; j < c->files[i].nfe; j++)
			if (ec_item_ok(&c->files[i], &c->files[i].fe[j]) &&
			    c->files[i].fe[j].disk_bytenr == x->disk_bytenr)
				return 1;
	}
	return 0;
}

/* The reference keys of one item, and of the file it is in. */
struct ec_keys {
	uint8_t key[FREF_XTS_KEY_SIZE];		/* what the block is under */
	uint8_t bad[FREF_XTS_KEY_SIZE];		/* the same, flipped master-key bit */
	uint8_t other[FREF_XTS_KEY_SIZE];	/* another key group's */
	const uint8_t *inode_key;		/* the per-inode key, or NULL */
	char other_nonce[17];
};

/* A key nonce of another group than @nonce (there are always several). */
static const uint8_t *ec_other_nonce(const struct ec_ctx *c, const uint8_t *nonce)
{
	size_t i;

	for (i = 0; i < c->nnonces; i++)
		if (memcmp(c->nonces[i], nonce, FREF_NONCE_SIZE) == 0)
			return c->nonces[(i + 1) % c->nnonces];
	return c->nnonces ? c->nonces[0] : NULL;
}

/*
 * A control of the block in @b, or what it should be: its plaintext under
 * @key at data unit @unit of extent @nr of a key group (DUN nr << 32 | unit;
 * for per-inode keys and version 1 contexts @nr is 0 and @unit the IV).
 */
static void ec_ctl(uint8_t *ctl, const uint8_t *key, uint64_t unit,
		   uint64_t nr, const struct fblk_block *b, unsigned bs)
{
	if (fref_encrypt_extent_unit(key, nr, unit, b->pt, ctl, bs))
		lab_die("reference encryption failed");
}

/* Every written block of item @i of @f against the reference (unmounted). */
static void ec_check_item_data(struct ec_ctx *c, const struct ec_file *f,
			       size_t i, const struct ec_keys *k,
			       struct fblk_block *b, uint8_t *ctl[EC_NCTL])
{
	const struct lab_btrfs_file_extent *x = &f->fe[i];
	const struct ec_item *it = &f->it[i];
	const int per_extent = ec_per_extent(it->kind);
	const uint64_t nr = per_extent ? it->ctx.extent_nr : 0;
	uint64_t offs[RAW_BTRFS_MAX_STRIPES];
	uint64_t pos, lblk, unit, rel, addr;
	int shared = ec_shared(c, f, x), ncopies, have[EC_NCTL], j, r, q;

	for (pos = x->file_offset; pos < x->file_offset + x->num_bytes && pos < f->size;
	     pos += c->bs) {
		lblk = pos / c->bs;
		rel = (pos - x->file_offset) / c->bs;
		unit = (x->offset + (pos - x->file_offset)) / c->bs;
		addr = x->disk_bytenr + x->offset + (pos - x->file_offset);
		fblk_plaintext(b, f->data, f->size, lblk, c->bs);
		memset(have, 0, sizeof(have));
		if (per_extent) {
			snprintf(b->what, sizeof(b->what),
				 "file %s: block %llu (v%u extent, data unit %llu of extent %llu, extent offset %llu)",
				 f->label, (unsigned long long)lblk, it->ctx.version,
				 (unsigned long long)unit, (unsigned long long)nr,
				 (unsigned long long)x->offset);
			ec_ctl(b->want, k->key, unit, nr, b, c->bs);
			ec_ctl(ctl[EC_C_MK], k->bad, unit, nr, b, c->bs);
			ec_ctl(ctl[EC_C_LBLK], k->key, lblk != unit ? lblk : unit + 1, nr,
			       b, c->bs);
			have[EC_C_MK] = have[EC_C_LBLK] = 1;
			if (x->offset != 0) {
				ec_ctl(ctl[EC_C_EO], k->key, rel, nr, b, c->bs);
				have[EC_C_EO] = 1;
			}
			if (k->inode_key) {
				ec_ctl(ctl[EC_C_INODE], k->inode_key, lblk, 0, b, c->bs);
				have[EC_C_INODE] = 1;
			}
			if (nr != 0) {
				ec_ctl(ctl[EC_C_NONR], k->key, unit, 0, b, c->bs);
				have[EC_C_NONR] = 1;
			}
			ec_ctl(ctl[EC_C_GROUP], k->other, unit, nr, b, c->bs);
			have[EC_C_GROUP] = 1;
			if (nr != 0) {
				if (fref_encrypt_block_tweak(k->key, unit, nr, b->pt,
							     ctl[EC_C_DUN128], c->bs))
					lab_die("reference encryption failed");
				have[EC_C_DUN128] = 1;
			}
			b->want_what = "per-extent-key reference ciphertext";
		} else {
			snprintf(b->what, sizeof(b->what),
				 "file %s: block %llu (per-inode key, IV %llu)",
				 f->label, (unsigned long long)lblk,
				 (unsigned long long)lblk);
			ec_ctl(b->want, k->key, lblk, 0, b, c->bs);
			ec_ctl(ctl[EC_C_MK], k->bad, lblk, 0, b, c->bs);
			ec_ctl(ctl[EC_C_LBLK], k->key, lblk + 1, 0, b, c->bs);
			have[EC_C_MK] = have[EC_C_LBLK] = 1;
			b->want_what = "per-inode-key reference ciphertext";
		}
		b->nctl = 0;	/* the controls are compared here, below */
		c->blocks++;
		c->blocks_v2 += it->kind == EC_K_V2;
		c->blocks_v1 += it->kind == EC_K_V1;
		c->blocks_inode += it->kind == EC_K_INODE;
		if (per_extent) {
			c->iv_not_lblk += unit != lblk;
			c->nonzero_eo += x->offset != 0;
			c->nonzero_nr += nr != 0;
		}
		c->shared += shared;
		ncopies = raw_btrfs_map(c->chunks, c->nchunks, addr, c->bs, offs);
		if (!CHECK(ncopies > 0, "%s: address %llu does not map to the device",
			   b->what, (unsigned long long)addr))
			continue;
		for (q = 0; q < ncopies; q++) {
			c->copies_read++;
			r = fblk_check_copy(c->dev, c->bs, offs[q], b, 1);
			if (r < 0)
				continue;
			c->copies_ok += r == 1;
			for (j = 0; j < EC_NCTL; j++) {
				if (!have[j])
					continue;
				c->ctl_compared[j]++;
				if (memcmp(ctl[j], b->raw, c->bs) != 0)
					continue;
				c->ctl_matched[j]++;
				CHECK(0, "negative control: %s at device offset %llu also matches %s%s%s: the comparison is vacuous",
				      b->what, (unsigned long long)offs[q], ec_ctl_names[j],
				      j == EC_C_GROUP ? " " : "",
				      j == EC_C_GROUP ? k->other_nonce : "");
			}
			/* many's blocks of the same plaintext, one copy each */
			if (f == &c->files[EC_MANYF] && lblk % 2 == 0 && q == 0 &&
			    c->nsame < EC_MANY / 2) {
				c->same_raw[c->nsame] = lab_xmalloc(c->bs);
				memcpy(c->same_raw[c->nsame], b->raw, c->bs);
				c->same_nr[c->nsame++] = nr;
			}
		}
	}
}

static void ec_check_file_data(struct ec_ctx *c, const struct ec_file *f)
{
	uint8_t inode_key[FREF_XTS_KEY_SIZE], bad_inode_key[FREF_XTS_KEY_SIZE];
	uint8_t *ctl[EC_NCTL];
	const struct lab_btrfs_file_extent *x;
	const uint8_t *other;
	struct ec_keys k;
	struct fblk_block b;
	uint64_t pos;
	size_t i;

	if (f->have_nonce &&
	    (fref_per_file_key(c->mk, sizeof(c->mk), f->nonce, inode_key, sizeof(inode_key)) ||
	     fref_per_file_key(c->bad_mk, sizeof(c->bad_mk), f->nonce, bad_inode_key,
			       sizeof(bad_inode_key))))
		lab_die("cannot derive the per-file key");
	fblk_alloc(&b, c->bs);
	b.encrypted = 1;
	for (i = 0; i < EC_NCTL; i++)
		ctl[i] = lab_xmalloc(c->bs);
	for (i = 0; i < f->nfe; i++) {
		x = &f->fe[i];
		if (!ec_item_ok(f, x))
			continue;
		if (x->type == BTRFS_FILE_EXTENT_PREALLOC) {
			for (pos = x->file_offset;
			     pos < x->file_offset + x->num_bytes && pos < f->size;
			     pos += c->bs)
				c->prealloc_blocks++;
			continue;
		}
		memset(&k, 0, sizeof(k));
		if (ec_per_extent(f->it[i].kind)) {
			other = ec_other_nonce(c, f->it[i].ctx.nonce);
			if (fref_per_extent_key(c->mk, sizeof(c->mk), f->it[i].ctx.nonce,
						k.key, sizeof(k.key)) ||
			    fref_per_extent_key(c->bad_mk, sizeof(c->bad_mk),
						f->it[i].ctx.nonce, k.bad, sizeof(k.bad)) ||
			    !other ||
			    fref_per_extent_key(c->mk, sizeof(c->mk), other, k.other,
						sizeof(k.other)))
				lab_die("cannot derive the extent keys");
			ec_short(k.other_nonce, other);
			k.inode_key = f->have_nonce ? inode_key : NULL;
		} else {
			if (!CHECK(f->have_nonce,
				   "%s: no inode nonce, so no per-inode key to check its blocks with",
				   f->label))
				continue;
			memcpy(k.key, inode_key, sizeof(k.key));
			memcpy(k.bad, bad_inode_key, sizeof(k.bad));
		}
		ec_check_item_data(c, f, i, &k, &b, ctl);
	}
	for (i = 0; i < EC_NCTL; i++)
		free(ctl[i]);
	fblk_free(&b);
}

/*
 * many's even blocks hold one plaintext, each at block 0 of an extent of one
 * group: only the extent number in the tweak tells them apart, so their
 * ciphertexts must all differ.
 */
static void ec_check_same_plaintext(struct ec_ctx *c)
{
	size_t i, j, distinct = 0;
	int dup;

	for (i = 0; i < c->nsame; i++) {
		for (dup = 0, j = 0; j < i; j++)
			dup |= memcmp(c->same_raw[i], c->same_raw[j], c->bs) == 0;
		distinct += !dup;
	}
	for (i = 0; i < c->nsame; i++)
		for (j = i + 1; j < c->nsame; j++)
			if (memcmp(c->same_raw[i], c->same_raw[j], c->bs) == 0)
				CHECK(0, "many: the extents numbered %llu and %llu of one key group hold the same plaintext at block 0 and the SAME ciphertext: the tweak lacks the extent number",
				      (unsigned long long)c->same_nr[i],
				      (unsigned long long)c->same_nr[j]);
	printf("one key group, one plaintext: %zu blocks at block 0 of extents of many's group hold %zu different ciphertexts\n",
	       c->nsame, distinct);
	CHECK(c->nsame == EC_MANY / 2, "many: %zu blocks of the repeated plaintext compared, expected %d",
	      c->nsame, EC_MANY / 2);
	for (i = 0; i < c->nsame; i++)
		free(c->same_raw[i]);
}

/* ---- driver ----------------------------------------------------------------------- */

/* The three key modes, each as a remount and as a mount from scratch. */
static const struct ec_mode {
	const char *remount, *mount;	/* options of each (mount: NULL = none) */
	const char *has, *lacks;	/* what /proc/mounts must then show */
	const char *what;
} ec_modes[] = {
	{ "fscrypt_extents_per_key=1", "fscrypt_extents_per_key=1",
	  "fscrypt_extents_per_key=1", "fscrypt_per_inode_keys",
	  "fscrypt_extents_per_key=1" },
	{ "fscrypt_extents_per_key=0,fscrypt_per_inode_keys", "fscrypt_per_inode_keys",
	  "fscrypt_per_inode_keys", "fscrypt_extents_per_key=",
	  "fscrypt_per_inode_keys" },
	{ "fscrypt_per_extent_keys", NULL, "fscrypt_per_extent_keys",
	  "fscrypt_extents_per_key=", "default options: key groups" },
};
#define EC_NMODES (sizeof(ec_modes) / sizeof(ec_modes[0]))

int main(void)
{
	static struct ec_ctx ctx;
	struct ec_ctx *c = &ctx;
	char when[160];
	size_t i, j, nblocks = 0;
	int mounted;

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) != 0)
		lab_skip("the kernel does not advertise per-extent keys on btrfs (no %s)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	c->dev = lab_env("SCRATCH_DEV");
	c->mnt = lab_env("SCRATCH_MNT");
	PATHF(c->dir, "%s/enc", c->mnt);
	printf("btrfs per-extent key ciphertext check, key groups and key modes (%s on %s, mkfs \"%s\", default mount options, then remounts)\n",
	       c->dev, c->mnt, ec_btrfs.mkfs_cmd);
	if (fref_selftest())
		lab_die("the reference model fails its own self-test");
	lab_random(c->mk, sizeof(c->mk));
	memcpy(c->bad_mk, c->mk, sizeof(c->mk));
	c->bad_mk[0] ^= 0x01;

	lab_fscrypt_fs_setup(&ec_btrfs, c->dev, c->mnt, NULL, c->mk, sizeof(c->mk), c->id);
	c->bs = fblk_block_size(c->mnt);
	fblk_check_key_identifier(c->mk, sizeof(c->mk), c->id);
	c->same_pt = lab_xmalloc(c->bs);

	ec_make_files(c);
	printf("== where the files are\n");
	ec_learn(c);
	ec_check_read_back(c, "mounted, as made");
	printf("== file extent items\n");
	for (i = 0; i < EC_NFILES; i++)
		ec_check_file_items(c, &c->files[i]);
	ec_check_contexts(c);
	ec_check_groups(c);
	printf("== reflinks, splits, snapshot, key groups\n");
	ec_check_layout_extents(c);
	ec_check_layout_groups(c);
	for (i = 0; i < EC_NFILES; i++)
		for (j = 0; j < c->files[i].nfe; j++)
			if (ec_item_ok(&c->files[i], &c->files[i].fe[j]))
				ec_check_item_fiemap(c, &c->files[i], &c->files[i].fe[j]);
	printf("%zu extents encrypted per extent in %d files; items: %zu with version 2 contexts, %zu with version 1 contexts, %zu with per-inode keys, %zu preallocated\n",
	       c->extents, EC_NFILES, c->items_v2, c->items_v1, c->items_inode,
	       c->prealloc_items);
	CHECK(c->prealloc_items >= 1, "no preallocated extent item found");
	CHECK(c->items_v2 > 0 && c->items_v1 > 0 && c->items_inode > 0,
	      "not every key mode has items: %zu v2, %zu v1, %zu per-inode",
	      c->items_v2, c->items_v1, c->items_inode);

	printf("== read back under every key mode (remounted)\n");
	for (i = 0; i < EC_NMODES; i++) {
		ec_remount(c, ec_modes[i].remount, ec_modes[i].has, ec_modes[i].lacks);
		snprintf(when, sizeof(when), "remounted with %s", ec_modes[i].what);
		ec_check_read_back(c, when);
	}
	fblk_btrfs_chunks(c->mnt, &c->chunks, &c->nchunks);
	if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
		lab_die("cannot unmount before reading the device");

	printf("== data blocks\n");
	for (i = 0; i < EC_NFILES; i++) {
		ec_check_file_data(c, &c->files[i]);
		nblocks += (c->files[i].size + c->bs - 1) / c->bs;
	}
	printf("%zu of %zu block copies read from the device equal the reference ciphertext (%zu written blocks: %zu in version 2 extents, %zu in version 1 extents, %zu with per-inode keys; %zu preallocated; %zu blocks in %d files)\n",
	       c->copies_ok, c->copies_read, c->blocks, c->blocks_v2, c->blocks_v1,
	       c->blocks_inode, c->prealloc_blocks, nblocks, EC_NFILES);
	printf("IV rule exercised: %zu block(s) whose IV is not their logical block, %zu at a nonzero extent offset, %zu in an extent shared with another file, %zu with a nonzero extent number in the tweak\n",
	       c->iv_not_lblk, c->nonzero_eo, c->shared, c->nonzero_nr);
	for (i = 0; i < EC_NCTL; i++) {
		printf("negative control, %s: matched %zu of %zu block copies\n",
		       ec_ctl_names[i], c->ctl_matched[i], c->ctl_compared[i]);
		CHECK(c->ctl_compared[i] > 0, "negative control never compared: %s",
		      ec_ctl_names[i]);
	}
	ec_check_same_plaintext(c);
	CHECK(c->blocks + c->prealloc_blocks == nblocks,
	      "%zu written + %zu preallocated blocks are in the items, the files have %zu",
	      c->blocks, c->prealloc_blocks, nblocks);
	CHECK(c->copies_read >= c->blocks && c->copies_ok == c->copies_read,
	      "%zu of %zu copies of %zu blocks match", c->copies_ok, c->copies_read,
	      c->blocks);
	CHECK(c->iv_not_lblk > 0 && c->nonzero_eo > 0 && c->shared > 0 &&
	      c->nonzero_nr > 0 && c->blocks_v1 > 0 && c->blocks_inode > 0,
	      "the rules were not all exercised: %zu blocks with IV != logical block, %zu at a nonzero extent offset, %zu shared, %zu with a nonzero extent number, %zu in version 1 extents, %zu with per-inode keys",
	      c->iv_not_lblk, c->nonzero_eo, c->shared, c->nonzero_nr,
	      c->blocks_v1, c->blocks_inode);

	printf("== mounted again under every key mode\n");
	mounted = 0;
	for (i = 0; i < EC_NMODES; i++) {
		if (ec_mount_again(c, ec_modes[i].mount) != 0)
			break;
		mounted = 1;
		snprintf(when, sizeof(when), "mounted again with %s", ec_modes[i].what);
		ec_check_mount_opts(c, when, ec_modes[i].has, ec_modes[i].lacks);
		ec_check_read_back(c, when);
		if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
			break;
		mounted = 0;
	}
	if (!mounted)
		lab_btrfs_check_clean(c->dev, "the key group files' filesystem");

	for (i = 0; i < EC_NFILES; i++) {
		free(c->files[i].data);
		free(c->files[i].ext);
		free(c->files[i].fe);
		free(c->files[i].it);
	}
	free(c->exts);
	free(c->nonces);
	free(c->chunks);
	free(c->same_pt);
	return lab_result("btrfs_fscrypt_extent_ciphertext");
}
