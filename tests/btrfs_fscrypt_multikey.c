// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_multikey - files that hold extents under several master keys
 * (issue #24: reflink across keys, a read with one key absent, key removal,
 * the record of a subvolume's keys), once per per-extent mode: key groups
 * (the default) and a key per extent (fscrypt_extents_per_key=1).
 *
 * Keys K1 and K2, both v2 with the default policy.  sv1/k1 has K1, sv1/k2 and
 * sv2/k2 have K2.  a (K1, 8 blocks) is cloned whole into b (sv2, K2: across
 * keys and subvolumes) and half into c (sv1/k2: across keys in one
 * subvolume), then b gets K2 data appended and one K1 block overwritten.
 *
 *  records:  each subvolume has a key item [256, 47, first 8 bytes of the
 *            identifier] for the key of each policy set in it, and for K1
 *            once a reflink brings K1 extents in; offset, identifier and
 *            flags (0) are checked, and a refused reflink adds none;
 *  contexts: b's and c's extent items name K1 for the cloned extents and K2
 *            for the new ones;
 *  data:     all files byte-exact with both keys (after dropping caches),
 *            and every block of b on the device equals the OpenSSL model's
 *            encryption under the key its context names, not the other key's;
 *  removal:  K1 removed while b is open and has read its K1 extents: the
 *            removal reports FILES_BUSY, the key is incompletely removed,
 *            b still reads byte-exact; closed and evicted, the key goes
 *            (removed again: absent);
 *  K2 only:  b's and c's K1 ranges fail with ENOKEY, their K2 ranges read;
 *            a K1 block overwritten whole, an append, a truncate, a new file
 *            all work, a partial overwrite of a K1 block fails ENOKEY; all
 *            survive a remount with only K2; with K1 back, everything reads
 *            byte-exact, including the block whose read failed before;
 *  refusals: reflink across policies that differ in flags (EINVAL); dedupe
 *            of K1 extents into a read-only snapshot that records only K2
 *            (EROFS, the snapshot's records unchanged), then into its
 *            writable origin (allowed, K1 recorded);
 *  corrupt:  an extent context rewritten offline to name a key the
 *            subvolume does not record: the read fails (EIO) with the log
 *            line "which the subvolume does not record", other files read;
 *            btrfs check runs clean on the untouched filesystem.
 */
#include "btrfs_items.h"
#include "btrfs_leaf.h"
#include "btrfs_progs.h"
#include "btrfs_raw.h"
#include "fscrypt_blocks.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>

#define BLK 4096u
#define NBLK 8u
#define SEED1 0x4b31u
#define SEED2 0x4b32u
#define EXTENT_KEYS_FEATURE "/sys/fs/btrfs/features/encrypt_extent_keys"
#define MKFS "mkfs.btrfs -q -f"

struct mk_file {
	char path[PATH_MAX];
	unsigned char *data;	/* what it must hold */
	size_t size;
};

static const char *dev, *mnt;
static uint8_t id1[FSCRYPT_KEY_IDENTIFIER_SIZE], id2[FSCRYPT_KEY_IDENTIFIER_SIZE];
static uint8_t mk1[LAB_MASTER_KEY_SIZE], mk2[LAB_MASTER_KEY_SIZE];
static char sv1[PATH_MAX], sv2[PATH_MAX], sv3[PATH_MAX], sv3ro[PATH_MAX];
static struct mk_file fa, fb, fc;

static void drop_caches(void)
{
	CHECK_OK(lab_drop_caches("3"), "drop caches");
}

static int open_rw(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644);

	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	return fd;
}

static uint64_t ino_of(const char *path)
{
	struct stat st;

	if (!CHECK_OK(stat(path, &st), "stat %s", path))
		return 0;
	return st.st_ino;
}

/* Grow @f's model to @end bytes (zeroes). */
static void model_grow(struct mk_file *f, size_t end)
{
	if (end <= f->size)
		return;
	f->data = realloc(f->data, end);
	if (!f->data)
		lab_die("out of memory");
	memset(f->data + f->size, 0, end - f->size);
	f->size = end;
}

/* Write @len bytes of pattern @seed at @off of @f, and into its model. */
static int put(struct mk_file *f, int fd, size_t off, size_t len,
	       uint32_t seed)
{
	unsigned char *buf = lab_pattern(len, seed);
	int ok = CHECK_OK(pwrite_all(fd, buf, len, off),
			  "write %zu bytes at %zu of %s", len, off, f->path);

	if (ok) {
		model_grow(f, off + len);
		memcpy(f->data + off, buf, len);
	}
	free(buf);
	return ok;
}

static void check_all(const char *when)
{
	printf("-- read back: %s\n", when);
	CHECK_FILE_EQUALS(fa.path, fa.data, fa.size);
	CHECK_FILE_EQUALS(fb.path, fb.data, fb.size);
	CHECK_FILE_EQUALS(fc.path, fc.data, fc.size);
}

/* The key items of the subvolume holding @path: do they name @want, exactly? */
static void check_records(const char *path, const char *what,
			  const uint8_t *const want[], size_t nwant)
{
	long n = lab_btrfs_check_key_records(path, what, want, nwant);

	if (n >= 0)
		printf("%s: %ld key item(s)\n", what, n);
}

/* Count the extents of @path whose contexts name K1 and K2 (others fail). */
static void count_contexts(const char *path, size_t *n1, size_t *n2)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_fscrypt_extent_ctx ctx;
	size_t n = 0, i;

	*n1 = *n2 = 0;
	if (!CHECK_OK(lab_btrfs_file_extents(path, ino_of(path), &fe, &n),
		      "file extent items of %s", path))
		return;
	for (i = 0; i < n; i++) {
		if (fe[i].encryption != LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT)
			continue;
		if (!CHECK_OK(lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &ctx),
			      "%s: context of the extent at %llu", path,
			      (unsigned long long)fe[i].file_offset))
			continue;
		if (!memcmp(ctx.key_id, id1, sizeof(id1)))
			++*n1;
		else if (CHECK(!memcmp(ctx.key_id, id2, sizeof(id2)),
			       "%s: extent at %llu names neither K1 nor K2", path,
			       (unsigned long long)fe[i].file_offset))
			++*n2;
	}
	free(fe);
}

/* pread of block @blk of @f: its data if @want_ok, else ENOKEY. */
static void check_block(const struct mk_file *f, int fd, size_t blk, int want_ok)
{
	unsigned char buf[BLK];
	ssize_t r;

	errno = 0;
	r = pread(fd, buf, BLK, (off_t)blk * BLK);
	if (want_ok) {
		if (CHECK(r == BLK, "%s: read of block %zu: %zd, %s", f->path, blk, r,
			  strerror(errno)))
			CHECK(!memcmp(buf, f->data + blk * BLK, BLK),
			      "%s: block %zu differs", f->path, blk);
	} else {
		EXPECT_ERRNO(r, errno, ENOKEY, "%s: read of K1 block %zu without K1",
			     f->path, blk);
	}
}

static int key_status(const uint8_t *id)
{
	return lab_key_status(mnt, id);
}

/* Remove K1 while b is open and has its K1 extents loaded; then finish. */
static void remove_k1_busy(void)
{
	uint32_t flags = 0;
	int fd, tries;
	unsigned char *buf = lab_xmalloc(fb.size);

	printf("-- remove K1 while %s is open\n", fb.path);
	drop_caches();
	fd = open(fb.path, O_RDONLY);
	if (!CHECK(fd >= 0, "open %s", fb.path)) {
		free(buf);
		return;
	}
	CHECK(lab_pread_full(fd, buf, fb.size, 0) == (ssize_t)fb.size &&
	      !memcmp(buf, fb.data, fb.size), "%s before the removal", fb.path);
	if (CHECK_OK(lab_remove_key(mnt, id1, &flags), "remove K1"))
		CHECK(flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY,
		      "K1 removed while b holds K1 extents: status flags 0x%x, expected FILES_BUSY",
		      flags);
	CHECK(key_status(id1) == FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED,
	      "K1 status %d while b holds its extents, expected incompletely removed",
	      key_status(id1));
	/* the open file keeps working, its page cache dropped or not */
	CHECK_OK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), "fadvise");
	memset(buf, 0, fb.size);
	CHECK(lab_pread_full(fd, buf, fb.size, 0) == (ssize_t)fb.size &&
	      !memcmp(buf, fb.data, fb.size),
	      "%s while K1 is incompletely removed", fb.path);
	close(fd);
	/* closed and evicted: the key goes; btrfs may drop inodes late */
	for (tries = 0; tries < 30 && key_status(id1) != FSCRYPT_KEY_STATUS_ABSENT;
	     tries++) {
		drop_caches();
		if (key_status(id1) == FSCRYPT_KEY_STATUS_ABSENT)
			break;
		lab_remove_key(mnt, id1, NULL);
		lab_sleep_ms(100);
	}
	CHECK(key_status(id1) == FSCRYPT_KEY_STATUS_ABSENT,
	      "K1 status %d after b was closed and evicted, expected absent",
	      key_status(id1));
	free(buf);
}

/* With only K2: what reads, what fails, and what writes work. */
static void k2_only(void)
{
	int fd, cfd, nfd;
	char newf[PATH_MAX];
	unsigned char blk[BLK];
	size_t i;

	printf("-- only K2 present\n");
	/* a K1 file: its plaintext name means nothing without K1 */
	CHECK_ERRNO(open(fa.path, O_RDONLY), ENOENT, "open %s (a K1 file) without K1",
		    fa.path);
	fd = open(fb.path, O_RDWR);
	cfd = open(fc.path, O_RDONLY);
	if (!CHECK(fd >= 0 && cfd >= 0, "open b and c with K2 only: %s",
		   strerror(errno)))
		goto out;
	/* b: blocks 0, 1, 3..7 are K1 (from a), 2 and 8, 9 are K2 */
	for (i = 0; i < fb.size / BLK; i++)
		check_block(&fb, fd, i, i == 2 || i >= NBLK);
	/* c: blocks 0..3 its own (K2), 4..7 cloned from a (K1) */
	for (i = 0; i < fc.size / BLK; i++)
		check_block(&fc, cfd, i, i < 4);

	/* writes under K2 */
	put(&fb, fd, 0, BLK, 0x600);	/* a K1 block, overwritten whole */
	memset(blk, 0x5a, sizeof(blk));
	CHECK_ERRNO(pwrite(fd, blk, 100, BLK + 10), ENOKEY,
		    "partial overwrite of K1 block 1 of b without K1");
	put(&fb, fd, fb.size, 2 * BLK, 0x601);	/* append */
	CHECK_OK(ftruncate(fd, fb.size - BLK / 2), "truncate b");
	fb.size -= BLK / 2;
	CHECK_OK(fsync(fd), "fsync b");
	check_block(&fb, fd, 0, 1);
	PATHF(newf, "%s/k2/new", sv2);
	nfd = open_rw(newf);
	if (nfd >= 0) {
		struct mk_file nf = { .data = NULL, .size = 0 };

		PATHF(nf.path, "%s", newf);
		put(&nf, nfd, 0, 3 * BLK, 0x602);
		CHECK_OK(fsync(nfd), "fsync %s", newf);
		close(nfd);
		drop_caches();
		CHECK_FILE_EQUALS(newf, nf.data, nf.size);
		free(nf.data);
	}
out:
	if (fd >= 0)
		close(fd);
	if (cfd >= 0)
		close(cfd);
}

/* Reflink and dedupe refusals; the records they must leave alone. */
static void refusals(void)
{
	struct {
		struct file_dedupe_range r;
		struct file_dedupe_range_info info;
	} dd;
	struct fscrypt_policy_v2 p;
	char d4[PATH_MAX], e[PATH_MAX], xk[PATH_MAX], x[PATH_MAX], xro[PATH_MAX];
	const uint8_t *only2[] = { id2 }, *both[] = { id1, id2 };
	int fdA, fdE = -1, fdX = -1, fdXro = -1;
	unsigned char *pa = lab_pattern(NBLK * BLK, 1);

	printf("-- refusals\n");
	fdA = open(fa.path, O_RDONLY);
	if (!CHECK(fdA >= 0, "open %s", fa.path))
		goto out;
	/* another policy flag: EINVAL, as across any other policies */
	PATHF(d4, "%s/pad16", sv2);
	PATHF(e, "%s/e", d4);
	lab_default_policy(&p, id2);
	p.flags = (p.flags & ~FSCRYPT_POLICY_FLAGS_PAD_MASK) |
		  (FSCRYPT_POLICY_FLAGS_PAD_16 == (p.flags & FSCRYPT_POLICY_FLAGS_PAD_MASK) ?
		   FSCRYPT_POLICY_FLAGS_PAD_32 : FSCRYPT_POLICY_FLAGS_PAD_16);
	if (CHECK_OK(mkdir(d4, 0755), "mkdir %s", d4) &&
	    CHECK_OK(lab_set_policy_v2(d4, &p), "policy with other flags on %s", d4)) {
		fdE = open_rw(e);
		if (fdE >= 0)
			CHECK_ERRNO(ioctl(fdE, FICLONE, fdA), EINVAL,
				    "reflink K1 -> K2 file whose policy has other flags");
	}

	/* sv3: K2 only; x there has a's plaintext; sv3ro its read-only snapshot */
	PATHF(xk, "%s/k2", sv3);
	PATHF(x, "%s/x", xk);
	PATHF(xro, "%s/k2/x", sv3ro);
	if (!CHECK(run("btrfs subvolume create %s >/dev/null", sv3) == 0,
		   "create %s", sv3) ||
	    !CHECK_OK(mkdir(xk, 0755), "mkdir %s", xk) ||
	    !CHECK_OK(lab_set_policy(xk, id2), "policy K2 on %s", xk) ||
	    !CHECK_OK(write_file(x, pa, NBLK * BLK), "write %s", x) ||
	    !CHECK_OK(fsync_path(x), "fsync %s", x) ||
	    !CHECK(run("btrfs subvolume snapshot -r %s %s >/dev/null", sv3, sv3ro) == 0,
		   "read-only snapshot %s", sv3ro))
		goto out;
	check_records(sv3ro, "read-only snapshot, before", only2, 1);
	memset(&dd, 0, sizeof(dd));
	dd.r.src_offset = 0;
	dd.r.src_length = NBLK * BLK;
	dd.r.dest_count = 1;
	fdXro = open(xro, O_RDONLY);
	if (CHECK(fdXro >= 0, "open %s", xro)) {
		dd.info.dest_fd = fdXro;
		if (CHECK_OK(ioctl(fdA, FIDEDUPERANGE, &dd), "FIDEDUPERANGE into %s", xro))
			CHECK(dd.info.status == -EROFS,
			      "dedupe of K1 extents into a read-only snapshot without K1: status %d, expected %d",
			      dd.info.status, -EROFS);
	}
	check_records(sv3ro, "read-only snapshot, after the refused dedupe", only2, 1);
	CHECK_FILE_EQUALS(xro, pa, NBLK * BLK);

	fdX = open(x, O_RDWR);
	if (CHECK(fdX >= 0, "open %s", x)) {
		memset(&dd.info, 0, sizeof(dd.info));
		dd.info.dest_fd = fdX;
		if (CHECK_OK(ioctl(fdA, FIDEDUPERANGE, &dd), "FIDEDUPERANGE into %s", x))
			CHECK(dd.info.status == FILE_DEDUPE_RANGE_SAME &&
			      dd.info.bytes_deduped == NBLK * BLK,
			      "dedupe of K1 extents into a K2 file: status %d, %llu bytes",
			      dd.info.status, (unsigned long long)dd.info.bytes_deduped);
	}
	check_records(sv3, "writable origin, after the dedupe", both, 2);
	drop_caches();
	CHECK_FILE_EQUALS(x, pa, NBLK * BLK);
out:
	free(pa);
	if (fdA >= 0)
		close(fdA);
	if (fdE >= 0)
		close(fdE);
	if (fdX >= 0)
		close(fdX);
	if (fdXro >= 0)
		close(fdXro);
}

/* Every block of b on the device: the model's ciphertext under its context's key. */
static void check_ciphertext(const struct lab_btrfs_file_extent *fe, size_t n,
			     const struct raw_btrfs_chunk *chunks, size_t nchunks)
{
	const uint8_t *mk[2] = { mk1, mk2 }, *id[2] = { id1, id2 };
	struct fblk_two_keys got;

	fblk_check_two_key_extents(dev, BLK, "b", fb.data, fb.size, fe, n, chunks, nchunks,
				   mk, id, &got);
	printf("b on the device: %zu blocks (%zu under K1), %zu copies equal the model\n",
	       got.blocks, got.under[0], got.ok);
	CHECK(got.blocks > 0 && got.under[0] > 0 && got.under[0] < got.blocks,
	      "b's blocks are not under both keys: %zu blocks, %zu under K1", got.blocks,
	      got.under[0]);
	CHECK(got.ok >= got.blocks, "%zu of %zu blocks equal the model", got.ok, got.blocks);
}

/* Rewrite, offline, the key identifier in the context of @path's first extent. */
static int corrupt_first_context(uint64_t tree, uint64_t ino)
{
	struct braw_fs fs;
	struct braw_block *blocks = NULL;
	struct braw_key key = { .objectid = ino, .type = 108, .offset = 0 };
	unsigned char *blk = NULL;
	size_t n = 0, i;
	uint32_t at, id_off;
	int slot, done = 0;

	if (!CHECK_OK(braw_open(&fs, dev), "open the unmounted btrfs on %s", dev))
		return 0;
	if (!CHECK_OK(braw_live_blocks(&fs, &blocks, &n), "find the tree blocks"))
		goto out;
	blk = lab_xmalloc(fs.nodesize);
	for (i = 0; i < n && !done; i++) {
		if (blocks[i].level != 0 || blocks[i].tree != tree ||
		    braw_read_block(&fs, blocks[i].logical, blk))
			continue;
		slot = braw_leaf_find(blk, &key, NULL);
		if (slot < 0)
			continue;
		at = braw_item_start(blk, (uint32_t)slot) + LAB_BTRFS_FILE_EXTENT_SIZE;
		id_off = blk[at] == LAB_FSCRYPT_EXTENT_CTX_V1 ?
			 LAB_FSCRYPT_EXTENT_CTX_V1_ID_OFF : LAB_FSCRYPT_EXTENT_CTX_V2_ID_OFF;
		blk[at + id_off] ^= 0xff;
		done = CHECK_OK(braw_write_block(&fs, blocks[i].logical, blk),
				"write the leaf back");
	}
	CHECK(done, "no leaf of tree %llu holds the first extent of ino %llu",
	      (unsigned long long)tree, (unsigned long long)ino);
out:
	free(blk);
	free(blocks);
	braw_close(&fs);
	return done;
}

static void round_trip(const char *opts, const char *label)
{
	const uint8_t *k1[] = { id1 }, *k2[] = { id2 }, *both[] = { id1, id2 };
	struct lab_btrfs_file_extent *fe = NULL;
	struct raw_btrfs_chunk *chunks = NULL;
	char d1[PATH_MAX], d2[PATH_MAX], d3[PATH_MAX];
	size_t nfe = 0, nchunks = 0, n1, n2;
	uint64_t sv2_id = 0, b_ino;
	struct file_clone_range fcr;
	int fdA, fdB, fdC;

	printf("== %s (mount options \"%s\")\n", label, opts);

	if (!*opts)
		opts = NULL;
	if (!CHECK(lab_mkfs(MKFS, dev) == 0, "mkfs") ||
	    !CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "mount %s", dev))
		return;
	if (!CHECK_OK(lab_add_key(mnt, SEED1, id1), "add K1") ||
	    !CHECK_OK(lab_add_key(mnt, SEED2, id2), "add K2"))
		goto out;
	PATHF(sv1, "%s/sv1", mnt);
	PATHF(sv2, "%s/sv2", mnt);
	PATHF(sv3, "%s/sv3", mnt);
	PATHF(sv3ro, "%s/sv3-ro", mnt);
	PATHF(d1, "%s/k1", sv1);
	PATHF(d3, "%s/k2", sv1);
	PATHF(d2, "%s/k2", sv2);
	if (!CHECK(run("btrfs subvolume create %s >/dev/null && btrfs subvolume create %s >/dev/null",
		       sv1, sv2) == 0, "create the subvolumes") ||
	    !CHECK_OK(mkdir(d1, 0755), "mkdir %s", d1) ||
	    !CHECK_OK(lab_set_policy(d1, id1), "policy K1 on %s", d1) ||
	    !CHECK_OK(mkdir(d3, 0755), "mkdir %s", d3) ||
	    !CHECK_OK(lab_set_policy(d3, id2), "policy K2 on %s", d3) ||
	    !CHECK_OK(mkdir(d2, 0755), "mkdir %s", d2) ||
	    !CHECK_OK(lab_set_policy(d2, id2), "policy K2 on %s", d2))
		goto out;
	check_records(sv1, "sv1 (policies K1, K2)", both, 2);
	check_records(sv2, "sv2 (policy K2)", k2, 1);
	check_records(mnt, "top level (no policy)", k1, 0);

	free(fa.data);
	free(fb.data);
	free(fc.data);
	memset(&fa, 0, sizeof(fa));
	memset(&fb, 0, sizeof(fb));
	memset(&fc, 0, sizeof(fc));
	PATHF(fa.path, "%s/a", d1);
	PATHF(fb.path, "%s/b", d2);
	PATHF(fc.path, "%s/c", d3);
	fdA = open_rw(fa.path);
	fdB = open_rw(fb.path);
	fdC = open_rw(fc.path);
	if (fdA < 0 || fdB < 0 || fdC < 0)
		goto out;
	put(&fa, fdA, 0, NBLK * BLK, 1);
	put(&fc, fdC, 0, 4 * BLK, 3);
	CHECK_OK(fsync(fdA), "fsync a");
	CHECK_OK(fsync(fdC), "fsync c");

	printf("-- reflink across keys\n");
	if (CHECK_OK(ioctl(fdB, FICLONE, fdA), "reflink a (K1) -> b (K2, other subvolume)")) {
		model_grow(&fb, fa.size);
		memcpy(fb.data, fa.data, fa.size);
	}
	fcr.src_fd = fdA;
	fcr.src_offset = 0;
	fcr.src_length = 4 * BLK;
	fcr.dest_offset = 4 * BLK;
	if (CHECK_OK(ioctl(fdC, FICLONERANGE, &fcr),
		     "reflink half of a (K1) -> c (K2, same subvolume)")) {
		model_grow(&fc, 8 * BLK);
		memcpy(fc.data + 4 * BLK, fa.data, 4 * BLK);
	}
	check_records(sv2, "sv2 after the reflink from sv1", both, 2);
	check_records(sv1, "sv1 after the reflink within it", both, 2);
	put(&fb, fdB, NBLK * BLK, 2 * BLK, 4);	/* append under K2 */
	put(&fb, fdB, 2 * BLK, BLK, 5);		/* overwrite a K1 block */
	CHECK_OK(fsync(fdB), "fsync b");
	CHECK_OK(fsync(fdC), "fsync c");
	close(fdA);
	close(fdB);
	close(fdC);
	drop_caches();
	check_all("both keys");
	count_contexts(fb.path, &n1, &n2);
	printf("b: %zu extent(s) under K1, %zu under K2\n", n1, n2);
	CHECK(n1 > 0 && n2 > 0, "b: %zu extents under K1, %zu under K2", n1, n2);
	count_contexts(fc.path, &n1, &n2);
	printf("c: %zu extent(s) under K1, %zu under K2\n", n1, n2);
	CHECK(n1 > 0 && n2 > 0, "c: %zu extents under K1, %zu under K2", n1, n2);

	refusals();

	/* the device: b's blocks under the key each context names */
	b_ino = ino_of(fb.path);
	CHECK_OK(lab_btrfs_file_extents(fb.path, b_ino, &fe, &nfe), "b's extent items");
	{
		unsigned char ri[512];

		CHECK_OK(lab_btrfs_root_item(sv2, &sv2_id, ri, sizeof(ri)), "sv2's root id");
	}
	fblk_btrfs_chunks(mnt, &chunks, &nchunks);
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		goto out_free;
	check_ciphertext(fe, nfe, chunks, nchunks);
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "mount again") ||
	    !CHECK_OK(lab_add_key(mnt, SEED1, id1), "add K1 again") ||
	    !CHECK_OK(lab_add_key(mnt, SEED2, id2), "add K2 again"))
		goto out_free;
	check_all("mounted again, both keys");

	remove_k1_busy();
	k2_only();
	if (!CHECK_OK(lab_umount(mnt), "umount") ||
	    !CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "mount with K2 only") ||
	    !CHECK_OK(lab_add_key(mnt, SEED2, id2), "add K2"))
		goto out_free;
	drop_caches();
	{
		int fd = open(fb.path, O_RDONLY);

		if (CHECK(fd >= 0, "open b after the remount")) {
			check_block(&fb, fd, 0, 1);
			check_block(&fb, fd, 1, 0);
			check_block(&fb, fd, 2, 1);
			check_block(&fb, fd, NBLK, 1);
			close(fd);
		}
	}
	CHECK_OK(lab_add_key(mnt, SEED1, id1), "add K1 back");
	check_all("K1 back, after a remount with K2 only");
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		goto out_free;
	lab_btrfs_check_clean(dev, "the filesystem of files under two keys");

	printf("-- an extent naming a key the subvolume does not record\n");
	if (corrupt_first_context(sv2_id, b_ino) &&
	    CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "mount the damaged filesystem") &&
	    CHECK_OK(lab_add_key(mnt, SEED1, id1), "add K1") &&
	    CHECK_OK(lab_add_key(mnt, SEED2, id2), "add K2")) {
		int fd = open(fb.path, O_RDONLY);
		unsigned char buf[BLK];

		lab_log_mark("multikey-corrupted-context");
		if (CHECK(fd >= 0, "open b: %s", strerror(errno))) {
			ssize_t r;

			errno = 0;
			r = pread(fd, buf, BLK, 0);
			CHECK(r == -1 && (errno == EUCLEAN || errno == EIO),
			      "read of an extent under an unrecorded key: %zd, %s (expected EUCLEAN or EIO)",
			      r, strerror(errno));
			close(fd);
		}
		CHECK(lab_log_has("which the subvolume does not record"),
		      "no log line names the unrecorded key");
		CHECK_FILE_EQUALS(fa.path, fa.data, fa.size);
		CHECK_OK(lab_umount(mnt), "umount");
	}
out_free:
	free(fe);
	free(chunks);
	return;
out:
	lab_umount(mnt);
}

int main(void)
{
	if (access(EXTENT_KEYS_FEATURE, F_OK) != 0)
		lab_skip("the kernel does not advertise per-extent keys on btrfs (no %s)",
			 EXTENT_KEYS_FEATURE);
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (fref_selftest())
		lab_die("the reference model fails its own self-test");
	lab_master_key(mk1, SEED1);
	lab_master_key(mk2, SEED2);
	round_trip("", "key groups");
	round_trip("fscrypt_extents_per_key=1", "a key per extent");
	free(fa.data);
	free(fb.data);
	free(fc.data);
	return lab_result("btrfs_fscrypt_multikey");
}
