// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_upstream_layout - a btrfs in the layout of upstream's
 * fscrypt series, and the half-converted disks between its layout and
 * ours, are refused cleanly by this kernel, never read as garbage; an
 * image of ours is refused by a checker that does not know it.
 *
 * Upstream's btrfs fscrypt series (v7, not merged;
 * patches/UPSTREAM-V7.md) and ours give encryption different numbers:
 *
 *                          upstream v7                ours (btrfs_items.h)
 *   incompat bit           15 (0x8000)                40
 *   inode flag             1 << 12                    1 << 20, per-extent + 1 << 21
 *   inode context item     (ino, 41, 0), 40 bytes     (ino, 46, 0), 40 bytes
 *   extent context         item (ino, 42, file off),  after the 53-byte file
 *                          34 bytes: v1, mode,        extent item: 34-byte v1
 *                          key id[16], nonce[16]      or 40-byte v2 context
 *   file extent encryption 1, item 53 bytes           0x82 (per extent), 0x81
 *
 * Neither kernel may take the other's disk for its own: a disk whose
 * meaning this kernel does not know must be refused with an error and a
 * log line, not decrypted with the wrong key, IV or extent.
 *
 *  1. The kernel makes the filesystem (mkfs.btrfs -b 256M): an unencrypted
 *     control file at the top level, and in a subvolume (so that the top
 *     level still mounts when the subvolume's leaf is refused) an encrypted
 *     directory (v2 policy, random key) holding a file of 6 extents of
 *     16 KiB, each written and fdatasync()ed alone, with per-extent keys
 *     (the default); random contents.  TREE_SEARCH_V2 must show 6 items
 *     with encryption 0x82 and a context; the subvolume's tree must be one
 *     leaf (level 0), so every item of the directory and the file is in it.
 *     Unmounted, the bytes that matter are saved (btrfs_raw.h) as "ours".
 *  2. Upstream's layout is crafted offline in that leaf: the inode flags of
 *     the encrypted inodes become 1 << 12 (20 and 21 cleared), the context
 *     items' key type 46 becomes 41 (no item of types 42-45 exists, so the
 *     order holds), each 0x82 file extent item is cut to 53 bytes with
 *     encryption 1, and an item (ino, 42, file offset) with the 34-byte
 *     version 1 context (the mode, key identifier and nonce of ours) is
 *     inserted in key order (tests/lib/btrfs_leaf.c); the leaf must stay
 *     sane and sorted and is written with its checksum recomputed.  Every
 *     superblock copy: bit 40 cleared, bit 15 set, crc32c recomputed.
 *     What was rewritten is printed; a rewrite that finds nothing fails.
 *     The result is saved as "upstream".  It is upstream's format, not a
 *     faithful translation of the data: our version 2 context names its
 *     key group's nonce and the extent's number in the group (the IVs'
 *     high bits), which upstream's version 1 context has no field for, so
 *     upstream would decrypt all but the group's first extent with wrong
 *     IVs.  What is tested is that this kernel refuses the layout.
 *  3. This kernel refuses to mount "upstream" (read-write and read-only)
 *     with EINVAL, and logs "cannot mount because of unknown incompat
 *     features (0x8000)" (btrfs_check_features()).
 *  4. Disks a damaged or half-done conversion leaves, each from a fresh
 *     copy of a saved image:
 *     (a) "upstream" with our incompat bit (40 set, 15 cleared): upstream's
 *         items behind a superblock this kernel accepts.  The tree-checker
 *         must refuse the leaf, naming the subvolume, the leaf and the
 *         directory's inode flag 0x1000 ("unknown incompat flags
 *         detected"); the mount may fail, or succeed with the control file
 *         reading back and the encrypted file failing (stat, open or read)
 *         with EUCLEAN or EIO;
 *     (b) "ours" with only the extents converted (encryption 1, the 42
 *         items), our inode flags and key 46 kept: the same, the
 *         tree-checker naming the file's extent at offset 0 ("invalid
 *         encryption for file extent, have 0x1");
 *     (c) "ours" with only the context items moved to key 41, our inode
 *         flags and extents kept: the one part of the conversion the
 *         tree-checker cannot see (key 41 means nothing to this kernel),
 *         leaving encrypted inodes without a context.  The mount works and
 *         the control file reads back; the encrypted file fails with
 *         EUCLEAN (or EIO), and btrfs logs "encrypted inode without a
 *         fscrypt context item: root R ino I" for the directory or the
 *         file (an inode flagged ENCRYPT without its context is corrupt;
 *         before the series said so, it was ENODATA, "No data
 *         available");
 *     (d) control: "ours" with only the 42 items inserted, the extents
 *         and everything else left ours.  This kernel ignores item types
 *         it does not know, so the whole leaf must pass the tree-checker
 *         and both files read back byte-exact, with no complaint in the
 *         log: the leaf surgery makes a sound leaf, and (b)'s refusal is
 *         encryption 1's.
 *     No read of the encrypted file may ever return a byte that is not
 *     its plaintext (the key is added first, so a misreading would show),
 *     and no splat may appear (the runner's console check fails the test
 *     on one too).
 *  5. Restored, "ours" mounts and both files read back byte-exact (so the
 *     refusals were the layout's, and the image restores faithfully).
 *     Debian's stock btrfs-progs 6.2 (/usr/bin/btrfs.debian in the image,
 *     vm-images/build-rootfs.sh), which knows neither encryption bit, is
 *     a checker that knows only layouts without ours: its `btrfs check
 *     --readonly` must exit non-zero on "ours" saying "couldn't open
 *     because of unsupported option features (10000000000)", exactly bit
 *     40, so it cannot misread what it refuses to open; and likewise on
 *     "upstream", naming 8000.  Control: it checks the freshly made, still
 *     unencrypted filesystem clean (exit 0).  Upstream's own btrfs-progs
 *     (progs-v3 in UPSTREAM-V7.md) add bit 15 only to their supported
 *     mask (ctree.h), and refuse an incompat bit outside it the same way
 *     (btrfs_check_fs_compatibility(), the check that printed the line
 *     above), so they refuse bit 40 too; this lab has no build of them to
 *     run.
 *
 * Skips without per-extent keys (LAB_BTRFS_EXTENT_KEYS_FEATURE) or fscrypt
 * ioctls on btrfs; without the stock btrfs-progs in the image, steps 1-4
 * and the restore of step 5 still run, and the test skips at the end
 * saying so (a failure before stands).  Nothing here depends on the
 * image's patched btrfs-progs.
 */
#include "btrfs_items.h"
#include "btrfs_leaf.h"
#include "btrfs_progs.h"
#include "btrfs_raw.h"
#include "fscrypt_fs.h"
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
#include <linux/btrfs_tree.h>
#include <linux/fs.h>

#define TEST_NAME "btrfs_fscrypt_upstream_layout"
#define FS_SIZE "256M"
#define NEXTENTS 6
#define EXTENT_LEN (16 * 1024)
#define FILE_LEN (NEXTENTS * EXTENT_LEN)
#define CONTROL_LEN 1500
#define BLK 4096

/* upstream v7's numbers (patches/UPSTREAM-V7.md, section 1) */
#define UP_INCOMPAT_ENCRYPT	(1ULL << 15)
#define UP_INODE_ENCRYPT	(1ULL << 12)
#define UP_INODE_CTX_KEY	41
#define UP_EXTENT_CTX_KEY	42
#define UP_ENCRYPTION_FSCRYPT	1
#define UP_EXTENT_CTX_V1	1
#define UP_EXTENT_CTX_SIZE	34	/* version, mode, key id[16], nonce[16] */

/* ours */
#define OUR_INCOMPAT_ENCRYPT	LAB_BTRFS_INCOMPAT_ENCRYPT
#define OUR_INODE_FLAGS		(LAB_BTRFS_INODE_ENCRYPT | LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT)
#define OUR_INODE_CTX_KEY	LAB_BTRFS_FSCRYPT_INODE_CTX_KEY
#define FSCRYPT_CTX_V2_SIZE	40	/* struct fscrypt_context_v2 */
#define FSCRYPT_CTX_V2		2

/* struct btrfs_file_extent_item and struct btrfs_inode_item fields */
#define FE_SIZE LAB_BTRFS_FILE_EXTENT_SIZE
#define FE_ENCRYPTION LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF
#define FE_TYPE offsetof(struct btrfs_file_extent_item, type)
#define II_FLAGS offsetof(struct btrfs_inode_item, flags)

/* struct btrfs_super_block */
#define SB_BYTENR 48
#define SB_MAGIC 64
#define SB_TOTAL_BYTES 112
#define SB_INCOMPAT LAB_BTRFS_SB_INCOMPAT_OFF

/* The parts of the conversion (craft()). */
enum {
	CONV_INODE_FLAGS = 1,	/* bits 20/21 -> 12 */
	CONV_CTX_KEY = 2,	/* key type 46 -> 41 */
	CONV_EXTENTS = 4,	/* 0x82 + context -> encryption 1 + item 42 */
	CONV_ALL = 7,
	CONV_KEEP_EXTENTS = 8,	/* with CONV_EXTENTS: add the 42s only */
};

static const char *dev, *mnt;
static char sv_path[PATH_MAX], enc_dir[PATH_MAX], enc_file[PATH_MAX];
static char control_path[PATH_MAX];
static uint32_t key_seed;
static uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
static unsigned char *plain, control[CONTROL_LEN];
static uint64_t svid, dir_ino, file_ino;
static uint64_t leaf_logical;	/* the subvolume tree's only block */

/* The file's extents as the kernel wrote them (TREE_SEARCH_V2). */
static struct {
	uint64_t off;
	uint8_t ctx[LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE];
	uint32_t len;
} ext[NEXTENTS];
static size_t next;

static struct braw_image img_ours, img_upstream;

/* ---- small helpers ------------------------------------------------------- */

static void flush_bdev(void)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (ioctl(fd, BLKFLSBUF, 0))
			printf("# BLKFLSBUF %s: " LAB_ERR_FMT "\n", dev,
			       LAB_ERR_ARGS(errno));
		close(fd);
	}
}

static char *hex(char *out, const uint8_t *p, size_t len)
{
	return lab_hex(out, p, len);
}

/* The primary superblock's incompat flags, as on the device. */
static uint64_t sb_incompat(void)
{
	unsigned char sb[BRAW_SB_SIZE];

	if (raw_read(dev, BRAW_SB_OFFSET, sb, sizeof(sb)))
		lab_die("read the superblock of %s: " LAB_ERR_FMT, dev,
			LAB_ERR_ARGS(errno));
	return braw_le64(sb + SB_INCOMPAT);
}

/* Write @img back to the device, and check that it is there. */
static int restore(const struct braw_image *img, const char *what)
{
	uint64_t first = 0;
	long d;

	if (!CHECK_OK(braw_image_write(img, dev), "write the image %s back to %s",
		      what, dev))
		return -1;
	flush_bdev();
	d = braw_image_compare(img, dev, &first);
	if (!CHECK(d == 0, "%s restored to %s: %ld blocks differ (first at %llu)",
		   what, dev, d, (unsigned long long)first))
		return -1;
	printf("restored the image \"%s\" (%llu bytes)\n", what,
	       (unsigned long long)img->bytes);
	return 0;
}

static int save(struct braw_image *img, const char *what)
{
	struct braw_fs fs;
	int ok;

	if (!CHECK_OK(braw_open(&fs, dev), "open the unmounted btrfs on %s", dev))
		return -1;
	ok = CHECK_OK(braw_image_ranges(&fs, img), "the ranges of %s", what) &&
	     CHECK_OK(braw_image_read(img, dev), "read the image %s", what);
	braw_close(&fs);
	if (ok)
		printf("saved the image \"%s\": %zu ranges, %llu bytes\n", what,
		       img->n, (unsigned long long)img->bytes);
	return ok ? 0 : -1;
}

/*
 * Read the encrypted file block by block: every byte a read returns must
 * be the plaintext's (counted into *@bad otherwise).  0 if the whole file
 * read back, else -1 with the error in *@err and the step in *@step.
 */
static int read_encrypted(const char *what, int *err, const char **step,
			  size_t *bad)
{
	unsigned char buf[BLK];
	struct stat st;
	size_t off = 0, i;
	ssize_t n;
	int fd;

	*bad = 0;
	*step = "stat";
	errno = 0;
	if (stat(enc_file, &st)) {
		*err = errno;
		return -1;
	}
	*step = "open";
	fd = open(enc_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	*step = "read";
	for (;;) {
		errno = 0;
		n = pread(fd, buf, sizeof(buf), (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = errno;
			close(fd);
			return -1;
		}
		if (n == 0)
			break;
		for (i = 0; i < (size_t)n; i++)
			if (off + i >= FILE_LEN || buf[i] != plain[off + i])
				(*bad)++;
		off += (size_t)n;
	}
	close(fd);
	CHECK(*bad == 0, "%s: read() returned %zu bytes that are not the plaintext (garbage)",
	      what, *bad);
	if (off != FILE_LEN) {
		*err = 0;
		*step = "size";
		CHECK(0, "%s: the encrypted file read back %zu bytes, written %d",
		      what, off, FILE_LEN);
		return -1;
	}
	return 0;
}

/* ---- 1. our filesystem ------------------------------------------------------ */

/*
 * Debian's btrfs-progs 6.2, kept as *.debian beside the links to the
 * patched ones (vm-images/build-rootfs.sh), or NULL with the reason.
 */
static const char *stock_btrfs(char *why, size_t size)
{
	static const char *const cands[] = {
		"/usr/bin/btrfs.debian", "/bin/btrfs.debian",
		"/usr/sbin/btrfs.debian", "/sbin/btrfs.debian",
		"/usr/bin/btrfs", "/bin/btrfs",
	};
	char real[PATH_MAX], cmd[PATH_MAX + 16];
	static char found[PATH_MAX];
	char *out = NULL;
	size_t i;
	int st;

	snprintf(why, size, "none of /usr/bin/btrfs.debian, /bin/btrfs.debian, /usr/bin/btrfs is Debian's btrfs-progs");
	for (i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		if (access(cands[i], X_OK) || !realpath(cands[i], real) ||
		    !strncmp(real, "/usr/local/", 11))
			continue;
		PATHF(cmd, "%s version", cands[i]);
		st = lab_run_capture(cmd, NULL, &out);
		if (st == 0 && out && strstr(out, "btrfs-progs v") &&
		    !strstr(out, LAB_BTRFS_PROGS_TAG)) {
			free(out);
			PATHF(found, "%s", cands[i]);
			return found;
		}
		free(out);
		out = NULL;
	}
	return NULL;
}

/*
 * `@bin check --readonly` of the unmounted filesystem: 0 if it exits 0
 * (@want == 0), else the unsupported incompat bits it names must be
 * exactly @want.
 */
static void stock_check(const char *bin, const char *what, uint64_t want)
{
	static const char refusal[] = "unsupported option features (";
	char cmd[PATH_MAX + 32], *out = NULL;
	const char *p;
	uint64_t v;
	int st;

	printf("stock btrfs check of %s:\n", what);
	PATHF(cmd, "%s check --readonly", bin);
	st = lab_run_capture(cmd, dev, &out);
	if (!want) {
		CHECK(st == 0, "control: stock btrfs check of %s exited %d, want 0 (it must open and pass a filesystem it knows)",
		      what, st);
		free(out);
		return;
	}
	CHECK(st > 0, "stock btrfs check of %s exited %d: want a non-zero exit (refused)",
	      what, st);
	p = out ? strstr(out, refusal) : NULL;
	if (CHECK(p != NULL, "stock btrfs check of %s did not say \"%s\" (output above)",
		  what, refusal)) {
		v = strtoull(p + strlen(refusal), NULL, 16);
		CHECK(v == want, "stock btrfs check of %s names the unsupported features %llx, want exactly %llx",
		      what, (unsigned long long)v, (unsigned long long)want);
		if (v == want)
			printf("stock btrfs check refuses %s: unsupported option features (%llx), exit %d\n",
			       what, (unsigned long long)v, st);
	}
	free(out);
}

static void make_ours(const char *stock)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_fscrypt_extent_ctx c;
	unsigned char ri[512];
	uint64_t flags;
	struct stat st;
	size_t nfe = 0, i;
	int fd, len;

	printf("== 1. our filesystem\n");
	if (lab_mkfs("mkfs.btrfs -q -f -b " FS_SIZE, dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (stock)
		stock_check(stock, "the fresh unencrypted filesystem", 0);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s: " LAB_ERR_FMT, dev, LAB_ERR_ARGS(errno));
	lab_random(&key_seed, sizeof(key_seed));
	if (lab_add_key(mnt, key_seed, key_id)) {
		if (errno == ENOTTY || errno == EOPNOTSUPP)
			lab_skip("btrfs has no fscrypt ioctls: " LAB_ERR_FMT,
				 LAB_ERR_ARGS(errno));
		lab_die("FS_IOC_ADD_ENCRYPTION_KEY: " LAB_ERR_FMT,
			LAB_ERR_ARGS(errno));
	}
	PATHF(sv_path, "%s/sv", mnt);
	PATHF(enc_dir, "%s/enc", sv_path);
	PATHF(enc_file, "%s/file", enc_dir);
	PATHF(control_path, "%s/control", mnt);
	lab_btrfs_subvol(mnt, "sv", -1);
	if (mkdir(enc_dir, 0755) || lab_set_policy(enc_dir, key_id))
		lab_die("encrypted directory %s: " LAB_ERR_FMT, enc_dir,
			LAB_ERR_ARGS(errno));

	plain = lab_xmalloc(FILE_LEN);
	lab_random(plain, FILE_LEN);
	lab_random(control, sizeof(control));
	fd = open(enc_file, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		lab_die("create %s: " LAB_ERR_FMT, enc_file, LAB_ERR_ARGS(errno));
	/* one extent per write: each is written back and completed alone */
	for (i = 0; i < NEXTENTS; i++)
		if (pwrite_all(fd, plain + i * EXTENT_LEN, EXTENT_LEN,
			       (off_t)(i * EXTENT_LEN)) || fdatasync(fd))
			lab_die("write extent %zu of %s: " LAB_ERR_FMT, i,
				enc_file, LAB_ERR_ARGS(errno));
	close(fd);
	if (write_file(control_path, control, sizeof(control)) ||
	    fsync_path(control_path))
		lab_die("write %s: " LAB_ERR_FMT, control_path, LAB_ERR_ARGS(errno));
	sync();

	if (stat(enc_dir, &st))
		lab_die("stat %s: " LAB_ERR_FMT, enc_dir, LAB_ERR_ARGS(errno));
	dir_ino = st.st_ino;
	if (stat(enc_file, &st))
		lab_die("stat %s: " LAB_ERR_FMT, enc_file, LAB_ERR_ARGS(errno));
	file_ino = st.st_ino;
	if (!CHECK_OK(lab_btrfs_file_extents(enc_file, file_ino, &fe, &nfe),
		      "file extent items of %s", enc_file))
		lab_die("cannot read the file extent items");
	for (i = 0; i < nfe; i++) {
		int ok = fe[i].encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT &&
			 fe[i].type == BTRFS_FILE_EXTENT_REG &&
			 fe[i].item_size == FE_SIZE + fe[i].tail_len &&
			 !lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &c);

		printf("extent at %llu: %u-byte item, encryption 0x%x, context version %u\n",
		       (unsigned long long)fe[i].file_offset, fe[i].item_size,
		       fe[i].encryption, ok ? c.version : 0);
		if (!ok || next == NEXTENTS)
			continue;
		ext[next].off = fe[i].file_offset;
		ext[next].len = fe[i].tail_len;
		memcpy(ext[next].ctx, fe[i].ctx, fe[i].tail_len);
		next++;
	}
	if (!CHECK(nfe == NEXTENTS && next == NEXTENTS,
		   "%s: %zu file extent items, %zu of them regular with encryption 0x82 and a valid context; want %d of %d (one per fdatasync()ed write)",
		   enc_file, nfe, next, NEXTENTS, NEXTENTS))
		lab_die("the file is not what the test needs");
	free(fe);

	CHECK(lab_btrfs_inode_flags(enc_file, file_ino, &flags) == 0 &&
	      (flags & OUR_INODE_FLAGS) == OUR_INODE_FLAGS,
	      "the file's inode flags lack ENCRYPT | ENCRYPT_PER_EXTENT");
	CHECK(lab_btrfs_inode_flags(enc_dir, dir_ino, &flags) == 0 &&
	      (flags & LAB_BTRFS_INODE_ENCRYPT),
	      "the directory's inode flags lack ENCRYPT");
	len = lab_btrfs_root_item(sv_path, &svid, ri, sizeof(ri));
	if (!CHECK(len > (int)offsetof(struct btrfs_root_item, level),
		   "the ROOT_ITEM of %s", sv_path))
		lab_die("no subvolume id");
	printf("subvolume %llu: root at %llu, level %u; directory ino %llu, file ino %llu\n",
	       (unsigned long long)svid,
	       (unsigned long long)braw_le64(ri + offsetof(struct btrfs_root_item, bytenr)),
	       ri[offsetof(struct btrfs_root_item, level)],
	       (unsigned long long)dir_ino, (unsigned long long)file_ino);

	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(enc_file, plain, FILE_LEN);
	CHECK_FILE_EQUALS(control_path, control, sizeof(control));
	if (lab_umount(mnt))
		lab_die("unmount %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
	flags = sb_incompat();
	printf("incompat flags: 0x%llx\n", (unsigned long long)flags);
	CHECK((flags & OUR_INCOMPAT_ENCRYPT) && !(flags & UP_INCOMPAT_ENCRYPT),
	      "incompat 0x%llx: want bit 40 (ours) set and bit 15 (upstream's) clear",
	      (unsigned long long)flags);
}

/* ---- 2. the conversion ------------------------------------------------------ */

/* The subvolume tree's only block, a leaf, into leaf_logical. */
static int find_leaf(const struct braw_fs *fs)
{
	struct braw_block *b = NULL;
	size_t n = 0, i, found = 0;
	int level = -1;

	if (!CHECK_OK(braw_live_blocks(fs, &b, &n), "walk the trees of %s", dev))
		return -1;
	for (i = 0; i < n; i++) {
		if (b[i].tree != svid)
			continue;
		found++;
		leaf_logical = b[i].logical;
		level = b[i].level;
	}
	free(b);
	if (!CHECK(found == 1 && level == 0,
		   "subvolume %llu's tree has %zu blocks (the last of level %d): want one leaf, so that every item of the file is in it",
		   (unsigned long long)svid, found, level))
		return -1;
	return 0;
}

struct conv_counts {
	int inodes, ctx_items, extents;
	int dir_flags, file_flags, dir_ctx, file_ctx;
};

static int convert_inode_flags(unsigned char *blk, struct conv_counts *cc)
{
	uint32_t n = braw_nritems(blk), slot;
	struct braw_key k;

	for (slot = 0; slot < n; slot++) {
		unsigned char *ii;
		uint64_t flags, nflags;

		braw_item_key(blk, slot, &k);
		if (k.type != BTRFS_INODE_ITEM_KEY ||
		    braw_item_size(blk, slot) < sizeof(struct btrfs_inode_item))
			continue;
		ii = blk + braw_item_start(blk, slot);
		flags = braw_le64(ii + II_FLAGS);
		if (!(flags & OUR_INODE_FLAGS))
			continue;
		nflags = (flags & ~OUR_INODE_FLAGS) | UP_INODE_ENCRYPT;
		braw_put_le64(ii + II_FLAGS, nflags);
		printf("  inode %llu: flags 0x%llx -> 0x%llx\n",
		       (unsigned long long)k.objectid, (unsigned long long)flags,
		       (unsigned long long)nflags);
		cc->inodes++;
		cc->dir_flags += k.objectid == dir_ino;
		cc->file_flags += k.objectid == file_ino;
	}
	return 0;
}

static int convert_ctx_keys(unsigned char *blk, struct conv_counts *cc)
{
	uint32_t n = braw_nritems(blk), slot;
	struct braw_key k;

	for (slot = 0; slot < n; slot++) {
		const unsigned char *d = blk + braw_item_start(blk, slot);

		braw_item_key(blk, slot, &k);
		if (k.type != OUR_INODE_CTX_KEY)
			continue;
		if (!CHECK(braw_item_size(blk, slot) == FSCRYPT_CTX_V2_SIZE &&
			   d[0] == FSCRYPT_CTX_V2,
			   "context item of inode %llu: %u bytes, version %u; want a %d-byte v2 context",
			   (unsigned long long)k.objectid,
			   braw_item_size(blk, slot), d[0], FSCRYPT_CTX_V2_SIZE))
			return -1;
		k.type = UP_INODE_CTX_KEY;
		braw_item_set_key(blk, slot, &k);
		printf("  inode %llu: context item (%llu, %d, %llu) -> (%llu, %d, %llu), 40-byte v2 context kept\n",
		       (unsigned long long)k.objectid, (unsigned long long)k.objectid,
		       OUR_INODE_CTX_KEY, (unsigned long long)k.offset,
		       (unsigned long long)k.objectid, UP_INODE_CTX_KEY,
		       (unsigned long long)k.offset);
		cc->ctx_items++;
		cc->dir_ctx += k.objectid == dir_ino;
		cc->file_ctx += k.objectid == file_ino;
	}
	return 0;
}

static int convert_extents(unsigned char *blk, uint32_t nodesize,
			   unsigned int what, struct conv_counts *cc)
{
	struct {
		struct braw_key key;
		uint8_t ctx[UP_EXTENT_CTX_SIZE];
	} add[64];
	uint32_t n = braw_nritems(blk), slot, size;
	struct lab_fscrypt_extent_ctx c;
	char idh[40], nonceh[40];
	size_t nadd = 0, i, j;
	struct braw_key k;

	/* cut every context off its item (frees room), then insert the 42s */
	for (slot = 0; slot < n; slot++) {
		unsigned char *fe = blk + braw_item_start(blk, slot);

		braw_item_key(blk, slot, &k);
		size = braw_item_size(blk, slot);
		if (k.type != BTRFS_EXTENT_DATA_KEY || size <= FE_SIZE ||
		    fe[FE_ENCRYPTION] != LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT)
			continue;
		if (!CHECK(fe[FE_TYPE] == BTRFS_FILE_EXTENT_REG &&
			   !lab_fscrypt_extent_ctx_decode(fe + FE_SIZE, size - FE_SIZE, &c) &&
			   nadd < sizeof(add) / sizeof(add[0]),
			   "extent item (%llu, 108, %llu): type %u, %u bytes: not a regular extent with a context (or too many)",
			   (unsigned long long)k.objectid,
			   (unsigned long long)k.offset, fe[FE_TYPE], size))
			return -1;
		add[nadd].key.objectid = k.objectid;
		add[nadd].key.type = UP_EXTENT_CTX_KEY;
		add[nadd].key.offset = k.offset;
		add[nadd].ctx[0] = UP_EXTENT_CTX_V1;
		add[nadd].ctx[1] = c.mode;
		memcpy(add[nadd].ctx + 2, c.key_id, FSCRYPT_KEY_IDENTIFIER_SIZE);
		memcpy(add[nadd].ctx + 18, c.nonce, 16);
		printf("  inode %llu: extent at %llu: %u-byte item (encryption 0x82, v%u context, extent nr %llu)%s\n",
		       (unsigned long long)k.objectid, (unsigned long long)k.offset,
		       size, c.version, (unsigned long long)c.extent_nr,
		       what & CONV_KEEP_EXTENTS ? " kept as it is" :
		       " -> 53 bytes, encryption 1");
		if (what & CONV_KEEP_EXTENTS) {
			nadd++;
			continue;
		}
		/* the context's bytes are cut: c points into them */
		if (!CHECK_OK(braw_item_resize(blk, nodesize, slot, FE_SIZE, 0),
			      "cut the item of the extent at %llu",
			      (unsigned long long)k.offset))
			return -1;
		fe = blk + braw_item_start(blk, slot);
		fe[FE_ENCRYPTION] = UP_ENCRYPTION_FSCRYPT;
		nadd++;
	}
	for (i = 0; i < nadd; i++) {
		uint32_t at;

		if (!CHECK_OK(braw_item_insert(blk, nodesize, &add[i].key,
					       add[i].ctx, UP_EXTENT_CTX_SIZE,
					       BRAW_INSERT_ROOT_LEAF, &at),
			      "insert (%llu, 42, %llu) (%u bytes free)",
			      (unsigned long long)add[i].key.objectid,
			      (unsigned long long)add[i].key.offset,
			      braw_leaf_free(blk, nodesize)))
			return -1;
		printf("  inserted (%llu, %d, %llu) at slot %u: v1 context, mode %u, key %s, nonce %s\n",
		       (unsigned long long)add[i].key.objectid, UP_EXTENT_CTX_KEY,
		       (unsigned long long)add[i].key.offset, at, add[i].ctx[1],
		       hex(idh, add[i].ctx + 2, 16), hex(nonceh, add[i].ctx + 18, 16));
		if (add[i].key.objectid != file_ino)
			continue;
		/* it must be the context the kernel showed for that extent */
		for (j = 0; j < next; j++) {
			if (ext[j].off != add[i].key.offset)
				continue;
			lab_fscrypt_extent_ctx_decode(ext[j].ctx, ext[j].len, &c);
			CHECK(add[i].ctx[1] == c.mode &&
			      !memcmp(add[i].ctx + 2, c.key_id, 16) &&
			      !memcmp(add[i].ctx + 18, c.nonce, 16),
			      "the extent at %llu: the converted context is not the one TREE_SEARCH showed",
			      (unsigned long long)ext[j].off);
			CHECK(!memcmp(add[i].ctx + 2, key_id, 16),
			      "the extent at %llu: the context's key is not the test's",
			      (unsigned long long)ext[j].off);
			cc->extents++;
		}
	}
	return 0;
}

/*
 * Rewrite the subvolume's leaf on the unmounted filesystem into upstream's
 * layout, the parts @what says.  0, or -1 (failure recorded).
 */
static int craft(unsigned int what, const char *label)
{
	struct conv_counts cc = { 0 };
	unsigned char *blk = NULL, *back = NULL;
	uint32_t bad = 0, before_items;
	struct braw_fs fs;
	int ret = -1;

	printf("rewriting the subvolume's leaf (%s):\n", label);
	if (!CHECK_OK(braw_open(&fs, dev), "open the unmounted btrfs on %s", dev))
		return -1;
	if (find_leaf(&fs))
		goto out;
	blk = lab_xmalloc(fs.nodesize);
	back = lab_xmalloc(fs.nodesize);
	if (!CHECK_OK(braw_read_block(&fs, leaf_logical, blk),
		      "read the leaf at %llu", (unsigned long long)leaf_logical) ||
	    !CHECK(braw_leaf_sane(blk, fs.nodesize) && braw_leaf_sorted(blk, NULL),
		   "the leaf at %llu is not sane and sorted before the rewrite",
		   (unsigned long long)leaf_logical))
		goto out;
	before_items = braw_nritems(blk);
	printf("  leaf %llu of subvolume %llu: %u items, %u bytes free (nodesize %u)\n",
	       (unsigned long long)leaf_logical, (unsigned long long)svid,
	       before_items, braw_leaf_free(blk, fs.nodesize), fs.nodesize);
	if ((what & CONV_INODE_FLAGS) && convert_inode_flags(blk, &cc))
		goto out;
	if ((what & CONV_CTX_KEY) && convert_ctx_keys(blk, &cc))
		goto out;
	if ((what & CONV_EXTENTS) && convert_extents(blk, fs.nodesize, what, &cc))
		goto out;

	/* nothing rewritten is a vacuous test */
	if (what & CONV_INODE_FLAGS)
		CHECK(cc.dir_flags == 1 && cc.file_flags == 1,
		      "%s: inode flags of the directory %d, of the file %d converted; want 1 and 1 (vacuous)",
		      label, cc.dir_flags, cc.file_flags);
	if (what & CONV_CTX_KEY)
		CHECK(cc.dir_ctx == 1 && cc.file_ctx == 1,
		      "%s: context items of the directory %d, of the file %d converted; want 1 and 1 (vacuous)",
		      label, cc.dir_ctx, cc.file_ctx);
	if (what & CONV_EXTENTS)
		CHECK(cc.extents == (int)next,
		      "%s: %d of the file's %zu extents converted (vacuous if 0)",
		      label, cc.extents, next);
	if (!CHECK(braw_leaf_sane(blk, fs.nodesize),
		   "%s: the rewritten leaf is not sane", label) ||
	    !CHECK(braw_leaf_sorted(blk, &bad),
		   "%s: the rewritten leaf's keys are out of order at slot %u",
		   label, bad))
		goto out;
	if (!CHECK_OK(braw_write_block(&fs, leaf_logical, blk),
		      "write the leaf at %llu", (unsigned long long)leaf_logical))
		goto out;
	flush_bdev();
	if (!CHECK_OK(braw_read_block(&fs, leaf_logical, back), "read the leaf back") ||
	    !CHECK(!memcmp(blk, back, fs.nodesize),
		   "the leaf read back is not the one written"))
		goto out;
	printf("  %s: %d inode flags, %d context item keys, %d extent contexts (as items 42) rewritten; the leaf now has %u items, %u bytes free, sane and sorted\n",
	       label, cc.inodes, cc.ctx_items, cc.extents, braw_nritems(blk),
	       braw_leaf_free(blk, fs.nodesize));
	ret = 0;
out:
	free(blk);
	free(back);
	braw_close(&fs);
	return ret;
}

/*
 * Every superblock copy on the device: incompat &= ~@clear, |= @set,
 * crc32c recomputed.  The number of copies changed (at least the primary).
 */
static int sb_edit(uint64_t clear, uint64_t set, const char *label)
{
	unsigned char sb[BRAW_SB_SIZE];
	uint64_t total = 0, off, inc, ninc;
	int i, changed = 0;

	for (i = 0; i < BRAW_SB_MIRRORS; i++) {
		off = braw_sb_offset(i);
		if (i && off + BRAW_SB_SIZE > total)
			break;
		if (!CHECK_OK(raw_read(dev, off, sb, sizeof(sb)),
			      "read superblock copy %d at %llu", i,
			      (unsigned long long)off))
			break;
		if (!CHECK(!memcmp(sb + SB_MAGIC, "_BHRfS_M", 8) &&
			   braw_csum_ok(sb, BRAW_SB_SIZE) &&
			   braw_le64(sb + SB_BYTENR) == off,
			   "superblock copy %d at %llu: no valid btrfs superblock",
			   i, (unsigned long long)off))
			break;
		if (!i)
			total = braw_le64(sb + SB_TOTAL_BYTES);
		inc = braw_le64(sb + SB_INCOMPAT);
		ninc = (inc & ~clear) | set;
		braw_put_le64(sb + SB_INCOMPAT, ninc);
		braw_csum(sb, BRAW_SB_SIZE);
		if (!CHECK_OK(raw_write_sync(dev, off, sb, sizeof(sb)),
			      "write superblock copy %d", i))
			break;
		printf("  superblock copy %d at %llu: incompat 0x%llx -> 0x%llx\n",
		       i, (unsigned long long)off, (unsigned long long)inc,
		       (unsigned long long)ninc);
		changed += inc != ninc;
	}
	flush_bdev();
	CHECK(changed >= 1 && (sb_incompat() & (clear | set)) == set,
	      "%s: %d superblock copies changed; the primary's incompat is 0x%llx",
	      label, changed, (unsigned long long)sb_incompat());
	return changed;
}

/* ---- 3. and 4. this kernel and the crafted disks ----------------------------- */

/* The kernel log's btrfs and fscrypt lines since the marker @tag. */
static void log_show(const char *tag)
{
	run("dmesg | sed -n '/lab-upstream-layout-%s-%d/,$p' | grep -E 'BTRFS|fscrypt' | head -n 16",
	    tag, getpid());
}

/* A mount that should not have worked: is what it shows right? */
static void read_back_all(const char *what)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	const char *step;
	size_t bad;
	int e;

	CHECK_FILE_EQUALS(control_path, control, sizeof(control));
	CHECK_OK(lab_add_key(mnt, key_seed, id), "%s: add the key", what);
	if (read_encrypted(what, &e, &step, &bad) == 0)
		printf("%s: the encrypted file reads back byte-exact\n", what);
	else
		printf("%s: %s of the encrypted file: " LAB_ERR_FMT "\n", what,
		       step, LAB_ERR_ARGS(e));
}

static void test_upstream_mount(void)
{
	static const char *const opts[] = { NULL, "ro" };
	int i, r, e;

	printf("\n== 3. this kernel mounts upstream's layout\n");
	for (i = 0; i < 2; i++) {
		const char *o = opts[i] ? opts[i] : "rw";

		CHECK(lab_log_mark("lab-upstream-layout-%s-%d", o, getpid()) == 0,
		      "write to /dev/kmsg");
		errno = 0;
		r = lab_mount(dev, mnt, "btrfs", opts[i]);
		e = errno;
		if (r == 0) {
			CHECK(0, "upstream's layout (incompat bit 15) mounted %s on this kernel: want EINVAL",
			      o);
			read_back_all("upstream's layout, mounted");
			CHECK_OK(lab_umount(mnt), "unmount");
		} else {
			printf("mount (%s) of upstream's layout: " LAB_ERR_FMT "\n",
			       o, LAB_ERR_ARGS(e));
			CHECK(e == EINVAL, "mount (%s) of upstream's layout failed with " LAB_ERR_FMT ", want EINVAL",
			      o, LAB_ERR_ARGS(e));
		}
		log_show(o);
		CHECK(lab_log_has("BTRFS error .*cannot mount because of unknown incompat features [(]0x8000[)]"),
		      "no kernel log line \"cannot mount because of unknown incompat features (0x8000)\" (%s)",
		      o);
		CHECK(!lab_log_has(LAB_LOG_SPLAT_ERE), "a kernel splat (above)");
	}
}

/*
 * A hybrid disk: the mount fails, or the control file reads back and the
 * encrypted file fails with EUCLEAN or EIO; a log line matches
 * @ere; with @leaf_refused, also btrfs's line about the read-time
 * corruption of the subvolume's leaf.  Never garbage, never a splat.
 */
static void hybrid_mount(const char *tag, const char *what, const char *ere,
			 int leaf_refused)
{
	char rt[256];
	const char *step;
	size_t bad = 0;
	int r, e = 0;

	CHECK(lab_log_mark("lab-upstream-layout-%s-%d", tag, getpid()) == 0,
	      "write to /dev/kmsg");
	errno = 0;
	r = lab_mount(dev, mnt, "btrfs", NULL);
	if (r < 0) {
		e = errno;
		printf("%s: mount: " LAB_ERR_FMT "\n", what, LAB_ERR_ARGS(e));
		CHECK(e == EUCLEAN || e == EIO || e == EINVAL,
		      "%s: the mount failed with " LAB_ERR_FMT ", want EUCLEAN, EIO or EINVAL",
		      what, LAB_ERR_ARGS(e));
	} else {
		printf("%s: mounted (the top level is intact)\n", what);
		if (CHECK_FILE_EQUALS(control_path, control, sizeof(control)))
			printf("%s: the control file reads back byte-exact\n", what);
		/* with the key, a misread would decrypt into something */
		CHECK_OK(lab_add_key(mnt, key_seed, key_id), "%s: add the key", what);
		r = read_encrypted(what, &e, &step, &bad);
		if (r == 0) {
			CHECK(0, "%s: the encrypted file read back (byte-exact) from a layout this kernel does not know: want an error",
			      what);
		} else {
			printf("%s: %s of the encrypted file: " LAB_ERR_FMT "\n",
			       what, step, LAB_ERR_ARGS(e));
			CHECK(e == EUCLEAN || e == EIO,
			      "%s: %s of the encrypted file failed with " LAB_ERR_FMT ", want EUCLEAN or EIO",
			      what, step, LAB_ERR_ARGS(e));
		}
		CHECK_OK(lab_umount(mnt), "%s: unmount", what);
	}
	log_show(tag);
	CHECK(lab_log_has(ere), "%s: no kernel log line matching \"%s\"", what, ere);
	if (leaf_refused) {
		snprintf(rt, sizeof(rt),
			 "BTRFS error .*read time tree block corruption detected on logical %llu",
			 (unsigned long long)leaf_logical);
		CHECK(lab_log_has(rt), "%s: no kernel log line matching \"%s\"",
		      what, rt);
	}
	CHECK(!lab_log_has(LAB_LOG_SPLAT_ERE), "%s: a kernel splat (above)", what);
}

/* The image must mount and read back byte-exact, without a complaint. */
static void control_mount(const char *tag, const char *what)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	const char *step;
	size_t bad;
	int e = 0;

	CHECK(lab_log_mark("lab-upstream-layout-%s-%d", tag, getpid()) == 0,
	      "write to /dev/kmsg");
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "%s: mount", what))
		return;
	CHECK_OK(lab_add_key(mnt, key_seed, id), "%s: add the key", what);
	if (CHECK(read_encrypted(what, &e, &step, &bad) == 0,
		  "%s: %s of the encrypted file failed: " LAB_ERR_FMT, what,
		  step, LAB_ERR_ARGS(e)) &
	    CHECK_FILE_EQUALS(control_path, control, sizeof(control)))
		printf("%s: both files read back byte-exact\n", what);
	CHECK_OK(lab_umount(mnt), "%s: unmount", what);
	log_show(tag);
	CHECK(!lab_log_has("corrupt leaf|read time tree block corruption|getting encryption context|Rejecting extent encryption context"),
	      "%s: the kernel complained (above)", what);
	CHECK(!lab_log_has(LAB_LOG_SPLAT_ERE), "%s: a kernel splat (above)", what);
}

static void test_hybrids(void)
{
	char ere[512];

	printf("\n== 4a. upstream's items, our incompat bit 40 (bit 15 cleared)\n");
	if (restore(&img_upstream, "upstream") == 0 &&
	    sb_edit(UP_INCOMPAT_ENCRYPT, OUR_INCOMPAT_ENCRYPT, "4a") >= 1) {
		/* the first encrypted inode in key order is the directory */
		snprintf(ere, sizeof(ere),
			 "BTRFS critical .*corrupt leaf: root=%llu block=%llu slot=[0-9]+ ino=%llu, unknown incompat flags detected: 0x%llx",
			 (unsigned long long)svid, (unsigned long long)leaf_logical,
			 (unsigned long long)dir_ino,
			 (unsigned long long)UP_INODE_ENCRYPT);
		hybrid_mount("a", "4a (upstream's items, bit 40)", ere, 1);
	}

	printf("\n== 4b. only the extents converted (encryption 1, items 42), our inode flags and key 46\n");
	if (restore(&img_ours, "ours") == 0 &&
	    craft(CONV_EXTENTS, "4b: extents only") == 0) {
		CHECK((sb_incompat() & (OUR_INCOMPAT_ENCRYPT | UP_INCOMPAT_ENCRYPT)) ==
		      OUR_INCOMPAT_ENCRYPT, "4b: the superblock is not ours");
		snprintf(ere, sizeof(ere),
			 "BTRFS critical .*corrupt leaf: root=%llu block=%llu slot=[0-9]+ ino=%llu file_offset=0, invalid encryption for file extent, have 0x1 ",
			 (unsigned long long)svid, (unsigned long long)leaf_logical,
			 (unsigned long long)file_ino);
		hybrid_mount("b", "4b (extents only)", ere, 1);
	}

	/*
	 * The one part the tree-checker cannot see: key 41 means nothing to
	 * this kernel, so the leaf is valid, and its encrypted inodes have no
	 * context: btrfs must call that corruption (EUCLEAN), not guess.
	 */
	printf("\n== 4c. only the inode context items moved to key 41, our inode flags and extents kept\n");
	if (restore(&img_ours, "ours") == 0 &&
	    craft(CONV_CTX_KEY, "4c: context item keys only") == 0) {
		snprintf(ere, sizeof(ere),
			 "BTRFS error .*encrypted inode without a fscrypt context item: root %llu ino (%llu|%llu)",
			 (unsigned long long)svid, (unsigned long long)dir_ino,
			 (unsigned long long)file_ino);
		hybrid_mount("c", "4c (context item keys only)", ere, 0);
	}

	/*
	 * Control for the leaf surgery: the 42 items inserted, nothing else
	 * changed.  This kernel ignores item types it does not know, so the
	 * whole leaf must pass the tree-checker and the file read back: the
	 * inserted items make a sound leaf, and 4b's refusal is encryption 1's.
	 */
	printf("\n== 4d. control: only the items 42 inserted, the extents and everything else ours\n");
	if (restore(&img_ours, "ours") == 0 &&
	    craft(CONV_EXTENTS | CONV_KEEP_EXTENTS, "4d: items 42 added only") == 0)
		control_mount("d", "4d (items 42 added to our layout)");
}

/* ---- 5. ours again; a checker that knows neither ---------------------------------- */

static void test_ours_and_stock(const char *stock, const char *stock_why)
{
	printf("\n== 5. our image restored; Debian's stock btrfs check\n");
	if (restore(&img_ours, "ours"))
		return;
	if (stock)
		stock_check(stock, "our image (incompat bit 40)", OUR_INCOMPAT_ENCRYPT);
	control_mount("ours", "control: our image restored");
	if (restore(&img_upstream, "upstream") == 0 && stock)
		stock_check(stock, "upstream's layout (incompat bit 15)", UP_INCOMPAT_ENCRYPT);
	if (!stock) {
		if (lab_failures)
			printf("NOTE: no stock btrfs check: %s\n", stock_why);
		else
			lab_skip("step 5 needs Debian's stock btrfs-progs: %s", stock_why);
	}
}

int main(void)
{
	char stock_why[256];
	const char *stock;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("no %s: this kernel's btrfs has no per-extent keys",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	stock = stock_btrfs(stock_why, sizeof(stock_why));
	printf("stock btrfs-progs: %s\n", stock ? stock : stock_why);

	make_ours(stock);
	if (save(&img_ours, "ours"))
		return lab_result(TEST_NAME);

	printf("\n== 2. crafting upstream's layout\n");
	if (craft(CONV_ALL, "upstream's layout") ||
	    sb_edit(OUR_INCOMPAT_ENCRYPT, UP_INCOMPAT_ENCRYPT, "upstream's layout") < 1 ||
	    save(&img_upstream, "upstream"))
		return lab_result(TEST_NAME);

	test_upstream_mount();
	test_hybrids();
	test_ours_and_stock(stock, stock_why);
	braw_image_free(&img_ours);
	braw_image_free(&img_upstream);
	free(plain);
	return lab_result(TEST_NAME);
}
