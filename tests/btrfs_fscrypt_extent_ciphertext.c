// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_extent_ciphertext - btrfs's per-extent fscrypt keys, checked
 * on disk: the file extent items carry the right contexts, and every data
 * block on the device is exactly the ciphertext an independent computation
 * (lib/fscrypt_ref.c) gives for its extent's key and IV.
 *
 *  1. a fresh btrfs (single data and metadata: each block stored once),
 *     default mount options, so that new encrypted regular files get a key
 *     per extent; a random master key, whose identifier must be the
 *     HKDF-SHA512 one;
 *  2. a v2 policy on an empty directory and files in it, the first three
 *     made of several extents (every write is fsynced, so each is an
 *     extent):
 *       pieces:   blocks [0,4), [4,6), [6,7) and 1000 bytes; then block 2
 *                 overwritten, which splits the first extent: its tail
 *                 [3,4) keeps the first extent's key, at extent offset 3;
 *       clone:    blocks [0,2); then FICLONERANGE of pieces' blocks [1,3)
 *                 (taken before the overwrite) to blocks [2,4), i.e. the
 *                 first extent of pieces at extent offset 1 and at another
 *                 file offset; then a block and 100 bytes;
 *       prealloc: blocks [0,2); fallocate of [2,6); block 3 written, which
 *                 splits the preallocated extent around it;
 *     and reflinks whose destination offset is below, equal to or above
 *     the offset of their source inside its extent (ec_clones[]): a source
 *     file "src" of one EC_SRC_BLOCKS-block extent, and files with clones
 *     of part of it (the second half to offset 0 and to block 2: below;
 *     [8,24) to block 8: equal; to block 12: above), of whole extents
 *     (pieces' [4,6) to block 0, a lower file offset but equal to the
 *     extent offset 0; all of src to block 2: above) and of a split piece
 *     (pieces' [3,4), extent offset 3, to block 0: below).  Below means
 *     that the item's file offset minus its extent offset, where the extent
 *     would begin in the file, is negative; its IVs still count from the
 *     extent's start;
 *  3. while mounted (BTRFS_IOC_TREE_SEARCH_V2 on the file's subvolume):
 *     - inode flags: the directory is ENCRYPT but not ENCRYPT_PER_EXTENT,
 *       the files are both;
 *     - every file extent item: a regular or preallocated extent (no
 *       inline, no hole), encryption 2, item size 87 (53 + the 34-byte
 *       context), no compression, context version 1, contents mode
 *       AES-256-XTS, the master key's identifier; the items cover each
 *       file without gap or overlap;
 *     - nonces: equal for all items of one extent (same disk_bytenr: the
 *       split pieces and the reflink), different between extents, and none
 *       equal to an inode's nonce;
 *     - the reflinked item points at pieces' block 1 with a nonzero extent
 *       offset and the same context; the preallocated pieces are
 *       PREALLOC items with a context, which FIEMAP reports unwritten;
 *     - for every block, FIEMAP's address equals the one the item gives
 *       (disk_bytenr + extent offset + position in the item);
 *     - each reflink of ec_clones[] is an item of its source's extent, at
 *       the source's extent offset, with its context, and lies below, at or
 *       above that offset as the case says;
 *     - every file reads back byte-exact: right after it was made, and
 *       again after dropping the caches;
 *  4. after unmounting, every written block, read with O_DIRECT where FIEMAP
 *     says (mapped through the chunk tree), must equal AES-256-XTS with the
 *     extent key HKDF-SHA512(master key, "fscrypt\0" || 9 || extent nonce)
 *     and IV = (extent offset + file position - item file offset) / block
 *     size, of the plaintext padded with zeros; the file contents read
 *     through the filesystem must be the plaintext (zeros where
 *     preallocated);
 *  5. negative controls, none of which may match any block: the same with a
 *     flipped master-key bit; IV = the file's logical block (where that is
 *     the right IV, the next block); IV counted from the item's file
 *     offset, ignoring the extent offset (items with a nonzero one); the
 *     per-inode-key ciphertext (context 2, the inode's nonce, IV = logical
 *     block).  And the IV rule must have been exercised: blocks whose IV
 *     differs from their logical block, blocks at a nonzero extent offset,
 *     and blocks shared by two files must all have been compared;
 *  6. mounted again (the key added again), caches dropped: every file reads
 *     back byte-exact.
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
#include <sys/stat.h>
#include <unistd.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>

#define EC_MAX_BLOCKS 72	/* no file is longer */
#define EC_SRC_BLOCKS 64	/* the one extent of src */
#define EC_TAIL_PIECES 1000	/* bytes in the last block of pieces */
#define EC_TAIL_CLONE 100	/* and of clone */
#define EC_ITEM_SIZE (LAB_BTRFS_FILE_EXTENT_SIZE + LAB_FSCRYPT_EXTENT_CTX_SIZE)

enum {
	EC_PIECES, EC_CLONE, EC_PREALLOC,
	/* reflinks to destination offsets below/at/above the extent offset */
	EC_SRC, EC_BELOW0, EC_BELOW, EC_EQUAL, EC_ABOVE, EC_WHOLE, EC_TAIL,
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

struct ec_file {
	const char *label;
	char path[PATH_MAX];
	uint8_t *data;			/* what the file holds */
	size_t size;
	uint64_t ino;
	uint8_t nonce[FREF_NONCE_SIZE];	/* the inode's */
	int have_nonce;
	struct raw_extent *ext;		/* FIEMAP */
	size_t next;
	struct lab_btrfs_file_extent *fe;	/* file extent items */
	size_t nfe;
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
	/* totals */
	size_t extents, prealloc_items;
	size_t blocks, prealloc_blocks, copies_read, copies_ok;
	size_t iv_not_lblk, nonzero_eo, shared;
};

/* ---- making the files ------------------------------------------------------ */

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

/* Fresh random data at [@off, @off+@len) of @f, written and fsynced. */
static void ec_write(struct ec_ctx *c, struct ec_file *f, size_t off,
		     size_t len)
{
	int fd = ec_open(f, O_WRONLY | O_CREAT);

	if (off + len > EC_MAX_BLOCKS * c->bs)
		lab_die("test bug: write beyond %d blocks", EC_MAX_BLOCKS);
	lab_random(f->data + off, len);
	if (!CHECK_OK(pwrite_all(fd, f->data + off, len, (off_t)off),
		      "write %zu bytes at %zu of %s", len, off, f->path) ||
	    !CHECK_OK(fsync(fd), "fsync %s", f->path))
		lab_die("cannot make the test files");
	close(fd);
	ec_grow(f, off + len);
}

/* FICLONERANGE @src[@src_off, +@len) to @dst at @dst_off. */
static void ec_clone(struct ec_file *dst, size_t dst_off,
		     const struct ec_file *src, size_t src_off, size_t len)
{
	struct file_clone_range r;
	int sfd = ec_open(src, O_RDONLY), dfd = ec_open(dst, O_WRONLY | O_CREAT);

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
	ec_grow(dst, dst_off + len);
}

/* fallocate(mode 0) [@off, @off+@len) of @f: a preallocated extent. */
static void ec_prealloc(struct ec_file *f, size_t off, size_t len)
{
	int fd = ec_open(f, O_WRONLY);

	if (!CHECK_OK(fallocate(fd, 0, (off_t)off, (off_t)len),
		      "fallocate [%zu, +%zu) of %s", off, len, f->path) ||
	    !CHECK_OK(fsync(fd), "fsync %s", f->path))
		lab_die("cannot make the test files");
	close(fd);
	/* f->data is zero there: unwritten extents read as zeros */
	ec_grow(f, off + len);
}

static void ec_make_files(struct ec_ctx *c)
{
	struct ec_file *p = &c->files[EC_PIECES], *cl = &c->files[EC_CLONE];
	struct ec_file *pa = &c->files[EC_PREALLOC];
	static const char *const labels[EC_NFILES] = {
		"pieces", "clone", "prealloc", "src", "clone-below-0",
		"clone-below", "clone-equal", "clone-above", "clone-whole",
		"clone-tail",
	};
	const size_t bs = c->bs;
	struct fscrypt_policy_v2 pol;
	size_t i;

	if (!CHECK_OK(mkdir(c->dir, 0755), "mkdir %s", c->dir))
		lab_die("cannot create the encrypted directory");
	lab_default_policy(&pol, c->id);
	if (!CHECK_OK(lab_set_policy_v2(c->dir, &pol),
		      "FS_IOC_SET_ENCRYPTION_POLICY on %s", c->dir))
		lab_die("cannot set the policy");
	for (i = 0; i < EC_NFILES; i++) {
		c->files[i].label = labels[i];
		c->files[i].data = calloc(EC_MAX_BLOCKS, bs);
		if (!c->files[i].data)
			lab_die("out of memory");
		PATHF(c->files[i].path, "%s/%s", c->dir, labels[i]);
	}
	ec_write(c, p, 0, 4 * bs);
	ec_write(c, p, 4 * bs, 2 * bs);
	ec_write(c, p, 6 * bs, bs + EC_TAIL_PIECES);

	ec_write(c, cl, 0, 2 * bs);
	ec_clone(cl, 2 * bs, p, bs, 2 * bs);
	ec_write(c, cl, 4 * bs, bs + EC_TAIL_CLONE);

	ec_write(c, p, 2 * bs, bs);	/* after the clone: clone keeps the old block */

	ec_write(c, pa, 0, 2 * bs);
	ec_prealloc(pa, 2 * bs, 4 * bs);
	ec_write(c, pa, 3 * bs, bs);

	/* one write, one fsync: one extent of EC_SRC_BLOCKS blocks */
	ec_write(c, &c->files[EC_SRC], 0, EC_SRC_BLOCKS * bs);
	for (i = 0; i < EC_NCLONES; i++) {
		const struct ec_clone_case *k = &ec_clones[i];

		printf("clone %zu: %s -> %s: %s\n", i, c->files[k->src].label,
		       c->files[k->dst].label, k->what);
		if (k->own)
			ec_write(c, &c->files[k->dst], 0, k->own * bs);
		ec_clone(&c->files[k->dst], k->dst_blk * bs, &c->files[k->src],
			 k->src_blk * bs, k->nblk * bs);
	}
	CHECK_OK(fsync_path(c->dir), "fsync %s", c->dir);
}

/* Every file must read back as written (after dropping the caches). */
static void ec_check_read_back(struct ec_ctx *c, const char *when)
{
	size_t i;

	if (!CHECK_OK(lab_drop_caches("3"), "drop caches"))
		return;
	for (i = 0; i < EC_NFILES; i++) {
		const struct ec_file *f = &c->files[i];

		printf("read back %s (%s): %s\n", f->label, when,
		       CHECK_FILE_EQUALS(f->path, f->data, f->size) ?
		       "byte-exact" : "WRONG");
	}
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

static void ec_print_items(const struct ec_file *f)
{
	const struct lab_btrfs_file_extent *x;
	char id[2 * FREF_ID_SIZE + 1], nonce[2 * FREF_NONCE_SIZE + 1];
	size_t i;

	printf("file %s: ino %llu, %zu bytes, %zu file extent item(s), %zu FIEMAP extent(s):\n",
	       f->label, (unsigned long long)f->ino, f->size, f->nfe, f->next);
	for (i = 0; i < f->nfe; i++) {
		x = &f->fe[i];
		printf("  item [%llu, +%llu) %s disk_bytenr %llu disk_num_bytes %llu offset %llu encryption %u compression %u size %u",
		       (unsigned long long)x->file_offset,
		       (unsigned long long)x->num_bytes, ec_type_name(x->type),
		       (unsigned long long)x->disk_bytenr,
		       (unsigned long long)x->disk_num_bytes,
		       (unsigned long long)x->offset, x->encryption,
		       x->compression, x->item_size);
		if (x->tail_len >= LAB_FSCRYPT_EXTENT_CTX_SIZE)
			printf(" ctx v%u mode %u id %s nonce %s",
			       x->ctx[LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF],
			       x->ctx[LAB_FSCRYPT_EXTENT_CTX_MODE_OFF],
			       lab_hex(id, x->ctx + LAB_FSCRYPT_EXTENT_CTX_ID_OFF, FREF_ID_SIZE),
			       lab_hex(nonce, x->ctx + LAB_FSCRYPT_EXTENT_CTX_NONCE_OFF,
				       FREF_NONCE_SIZE));
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
		      "%s: inode flags 0x%llx lack BTRFS_INODE_ENCRYPT_PER_EXTENT (bit 13): a new file on a default mount must be encrypted per extent",
		      what, (unsigned long long)flags);
	else
		CHECK(!(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT),
		      "%s: inode flags 0x%llx have BTRFS_INODE_ENCRYPT_PER_EXTENT (bit 13), which only regular files may have",
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
		f->ino = st.st_ino;
		f->have_nonce = CHECK_OK(lab_get_nonce(f->path, f->nonce),
					 "FS_IOC_GET_ENCRYPTION_NONCE on %s", f->path);
		CHECK((uint64_t)st.st_size == f->size, "%s: size %llu, expected %zu",
		      f->path, (unsigned long long)st.st_size, f->size);
		ec_print_items(f);
		ec_check_flags(f->label, f->path, f->ino, 1);
	}
}

/* ---- the items ---------------------------------------------------------------- */

static const uint8_t *ec_nonce(const struct lab_btrfs_file_extent *x)
{
	return x->ctx + LAB_FSCRYPT_EXTENT_CTX_NONCE_OFF;
}

/* The item of @f covering file offset @pos, or NULL. */
static const struct lab_btrfs_file_extent *ec_item_at(const struct ec_file *f,
						      uint64_t pos)
{
	size_t i;

	for (i = 0; i < f->nfe; i++)
		if (f->fe[i].file_offset <= pos &&
		    pos - f->fe[i].file_offset < f->fe[i].num_bytes)
			return &f->fe[i];
	return NULL;
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

/* Each item by itself, and how the items of @f cover it. */
static void ec_check_file_items(struct ec_ctx *c, const struct ec_file *f)
{
	const uint64_t end = (f->size + c->bs - 1) / c->bs * c->bs;
	const struct lab_btrfs_file_extent *x;
	char a[2 * FREF_ID_SIZE + 1];
	uint64_t next = 0;
	size_t i;

	for (i = 0; i < f->nfe; i++) {
		x = &f->fe[i];
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
			   (unsigned long long)x->file_offset))
			continue;
		if (x->type == BTRFS_FILE_EXTENT_PREALLOC)
			c->prealloc_items++;
		CHECK(x->encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT,
		      "%s: item at %llu has encryption %u, expected %u (per-extent keys)",
		      f->label, (unsigned long long)x->file_offset, x->encryption,
		      LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT);
		CHECK(x->compression == 0, "%s: item at %llu has compression %u",
		      f->label, (unsigned long long)x->file_offset, x->compression);
		if (!CHECK(x->item_size == EC_ITEM_SIZE,
			   "%s: item at %llu is %u bytes, expected %d (file extent item + extent context)",
			   f->label, (unsigned long long)x->file_offset, x->item_size,
			   EC_ITEM_SIZE))
			continue;
		CHECK(x->ctx[LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF] == LAB_FSCRYPT_EXTENT_CTX_V1,
		      "%s: item at %llu: context version %u, expected %u", f->label,
		      (unsigned long long)x->file_offset,
		      x->ctx[LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF], LAB_FSCRYPT_EXTENT_CTX_V1);
		CHECK(x->ctx[LAB_FSCRYPT_EXTENT_CTX_MODE_OFF] == FSCRYPT_MODE_AES_256_XTS,
		      "%s: item at %llu: context contents mode %u, expected %u (AES-256-XTS)",
		      f->label, (unsigned long long)x->file_offset,
		      x->ctx[LAB_FSCRYPT_EXTENT_CTX_MODE_OFF], FSCRYPT_MODE_AES_256_XTS);
		CHECK(memcmp(x->ctx + LAB_FSCRYPT_EXTENT_CTX_ID_OFF, c->id, FREF_ID_SIZE) == 0,
		      "%s: item at %llu: context key identifier %s is not the master key's",
		      f->label, (unsigned long long)x->file_offset,
		      lab_hex(a, x->ctx + LAB_FSCRYPT_EXTENT_CTX_ID_OFF, FREF_ID_SIZE));
	}
	CHECK(next >= end, "%s: the items end at %llu, the file's blocks at %llu",
	      f->label, (unsigned long long)next, (unsigned long long)end);
}

/* Usable for the nonce and data checks: a data extent with a whole context. */
static int ec_item_ok(const struct lab_btrfs_file_extent *x)
{
	return (x->type == BTRFS_FILE_EXTENT_REG ||
		x->type == BTRFS_FILE_EXTENT_PREALLOC) &&
	       x->disk_bytenr != 0 && x->item_size == EC_ITEM_SIZE;
}

/* An item with the file it belongs to. */
struct ec_ref {
	const struct ec_file *f;
	const struct lab_btrfs_file_extent *x;
};

/*
 * Across all files: one context per extent (disk_bytenr), different extents
 * different nonces, no extent nonce equal to an inode nonce.
 */
static void ec_check_nonces(struct ec_ctx *c)
{
	struct ec_ref *refs;
	size_t n = 0, total = 0, i, j;
	int first;

	for (i = 0; i < EC_NFILES; i++)
		total += c->files[i].nfe;
	refs = lab_xmalloc(total * sizeof(*refs));
	for (i = 0; i < EC_NFILES; i++)
		for (j = 0; j < c->files[i].nfe; j++)
			if (ec_item_ok(&c->files[i].fe[j]))
				refs[n++] = (struct ec_ref){ &c->files[i], &c->files[i].fe[j] };
	for (i = 0; i < n; i++) {
		const struct ec_ref *a = &refs[i];

		for (j = 0; j < EC_NFILES; j++)
			CHECK(!c->files[j].have_nonce ||
			      memcmp(ec_nonce(a->x), c->files[j].nonce, FREF_NONCE_SIZE) != 0,
			      "%s: the item at %llu has the inode nonce of %s as its extent nonce",
			      a->f->label, (unsigned long long)a->x->file_offset,
			      c->files[j].label);
		first = 1;
		for (j = 0; j < n; j++) {
			const struct ec_ref *b = &refs[j];

			if (j == i)
				continue;
			if (b->x->disk_bytenr == a->x->disk_bytenr) {
				first &= j > i;
				if (j > i)
					CHECK(memcmp(a->x->ctx, b->x->ctx, LAB_FSCRYPT_EXTENT_CTX_SIZE) == 0,
					      "items of one extent (disk_bytenr %llu) have different contexts: %s at %llu and %s at %llu",
					      (unsigned long long)a->x->disk_bytenr,
					      a->f->label, (unsigned long long)a->x->file_offset,
					      b->f->label, (unsigned long long)b->x->file_offset);
			} else if (j > i) {
				CHECK(memcmp(ec_nonce(a->x), ec_nonce(b->x), FREF_NONCE_SIZE) != 0,
				      "different extents (disk_bytenr %llu and %llu) have the same nonce: %s at %llu and %s at %llu",
				      (unsigned long long)a->x->disk_bytenr,
				      (unsigned long long)b->x->disk_bytenr,
				      a->f->label, (unsigned long long)a->x->file_offset,
				      b->f->label, (unsigned long long)b->x->file_offset);
			}
		}
		c->extents += first;	/* counted at its first item */
	}
	free(refs);
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
		if (!CHECK(src && dst && ec_item_ok(src) && ec_item_ok(dst),
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
		    !CHECK(memcmp(dst->ctx, src->ctx, LAB_FSCRYPT_EXTENT_CTX_SIZE) == 0,
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

/* What the construction in ec_make_files() must have produced. */
static void ec_check_layout(struct ec_ctx *c)
{
	const struct ec_file *p = &c->files[EC_PIECES], *cl = &c->files[EC_CLONE];
	const struct ec_file *pa = &c->files[EC_PREALLOC];
	const struct lab_btrfs_file_extent *src, *dst, *x;
	const uint64_t bs = c->bs;
	size_t i, n = 0, j;
	int dup;

	/* pieces: four fsynced writes, four extents at least */
	for (i = 0; i < p->nfe; i++) {
		if (!ec_item_ok(&p->fe[i]))
			continue;
		for (dup = 0, j = 0; j < i; j++)
			dup |= ec_item_ok(&p->fe[j]) &&
			       p->fe[j].disk_bytenr == p->fe[i].disk_bytenr;
		n += !dup;
	}
	CHECK(n >= 4, "pieces: %zu distinct extents, expected at least 4 (four fsynced writes)", n);
	x = ec_item_at(p, 3 * bs);
	CHECK(x && ec_item_ok(x) && x->offset != 0,
	      "pieces: block 3 (the tail of the first extent, split by the overwrite of block 2) should be at a nonzero extent offset, is at %llu",
	      x ? (unsigned long long)x->offset : 0ULL);

	/* clone: its block 2 is pieces' block 1 as first written */
	src = ec_item_at(p, bs);
	dst = ec_item_at(cl, 2 * bs);
	if (CHECK(src && dst && ec_item_ok(src) && ec_item_ok(dst),
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
		CHECK(memcmp(dst->ctx, src->ctx, LAB_FSCRYPT_EXTENT_CTX_SIZE) == 0,
		      "clone: the reflinked item's context differs from its source's");
	}
	x = ec_item_at(cl, 3 * bs);
	CHECK(x && ec_item_ok(x) && x->disk_bytenr == (dst ? dst->disk_bytenr : 0),
	      "clone: block 3 is not in the reflinked extent");

	/* prealloc: blocks 2, 4 and 5 preallocated (one extent), 3 written */
	for (i = 2; i < 6; i++) {
		x = ec_item_at(pa, i * bs);
		CHECK(x && ec_item_ok(x) &&
		      x->type == (i == 3 ? BTRFS_FILE_EXTENT_REG : BTRFS_FILE_EXTENT_PREALLOC),
		      "prealloc: block %zu should be in a %s item with a context, is in %s",
		      i, i == 3 ? "regular" : "preallocated",
		      x ? ec_type_name(x->type) : "none");
	}
	src = ec_item_at(pa, 2 * bs);
	dst = ec_item_at(pa, 4 * bs);
	CHECK(src && dst && src->disk_bytenr == dst->disk_bytenr && dst->offset != 0,
	      "prealloc: the preallocated pieces around block 3 should be one extent, the second at a nonzero extent offset");

	/* src: one item, one extent, all of it */
	x = ec_item_at(&c->files[EC_SRC], 0);
	CHECK(c->files[EC_SRC].nfe == 1 && x && ec_item_ok(x) && x->offset == 0 &&
	      x->num_bytes == EC_SRC_BLOCKS * bs &&
	      x->disk_num_bytes == EC_SRC_BLOCKS * bs,
	      "src: %zu item(s), expected one item of the whole %d-block extent",
	      c->files[EC_SRC].nfe, EC_SRC_BLOCKS);
	for (i = 0; i < EC_NCLONES; i++)
		ec_check_clone(c, &ec_clones[i]);
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
			if (ec_item_ok(&c->files[i].fe[j]) &&
			    c->files[i].fe[j].disk_bytenr == x->disk_bytenr)
				return 1;
	}
	return 0;
}

/* Every written block of item @x of @f against the reference (unmounted). */
static void ec_check_item_data(struct ec_ctx *c, const struct ec_file *f,
			       const struct lab_btrfs_file_extent *x,
			       const uint8_t *inode_key, struct fblk_block *b)
{
	uint8_t key[FREF_XTS_KEY_SIZE], bad[FREF_XTS_KEY_SIZE];
	uint64_t offs[RAW_BTRFS_MAX_STRIPES];
	uint64_t pos, lblk, iv, rel, addr;
	int shared = ec_shared(c, f, x), ncopies, k, r;

	if (fref_per_extent_key(c->mk, sizeof(c->mk), ec_nonce(x), key, sizeof(key)) ||
	    fref_per_extent_key(c->bad_mk, sizeof(c->bad_mk), ec_nonce(x), bad, sizeof(bad)))
		lab_die("cannot derive the extent keys");
	for (pos = x->file_offset; pos < x->file_offset + x->num_bytes && pos < f->size;
	     pos += c->bs) {
		lblk = pos / c->bs;
		rel = (pos - x->file_offset) / c->bs;
		iv = (x->offset + (pos - x->file_offset)) / c->bs;
		addr = x->disk_bytenr + x->offset + (pos - x->file_offset);
		snprintf(b->what, sizeof(b->what),
			 "file %s: block %llu (extent IV %llu, extent offset %llu)",
			 f->label, (unsigned long long)lblk, (unsigned long long)iv,
			 (unsigned long long)x->offset);
		fblk_plaintext(b, f->data, f->size, lblk, c->bs);
		b->nctl = 0;
		snprintf(b->ctl_what[b->nctl], sizeof(b->ctl_what[0]),
			 "ciphertext made with a flipped master-key bit");
		if (fref_encrypt_block(key, iv, b->pt, b->want, c->bs) ||
		    fref_encrypt_block(bad, iv, b->pt, b->ctl[b->nctl++], c->bs))
			lab_die("reference encryption failed");
		snprintf(b->ctl_what[b->nctl], sizeof(b->ctl_what[0]),
			 "ciphertext with IV %llu (%s)",
			 (unsigned long long)(lblk != iv ? lblk : iv + 1),
			 lblk != iv ? "the file's logical block" : "the next block");
		if (fref_encrypt_block(key, lblk != iv ? lblk : iv + 1, b->pt,
				       b->ctl[b->nctl++], c->bs))
			lab_die("reference encryption failed");
		if (x->offset != 0) {
			snprintf(b->ctl_what[b->nctl], sizeof(b->ctl_what[0]),
				 "ciphertext with IV %llu (counted from the item, ignoring its extent offset)",
				 (unsigned long long)rel);
			if (fref_encrypt_block(key, rel, b->pt, b->ctl[b->nctl++], c->bs))
				lab_die("reference encryption failed");
		}
		if (inode_key) {
			snprintf(b->ctl_what[b->nctl], sizeof(b->ctl_what[0]),
				 "per-inode-key ciphertext (context 2, inode nonce, IV %llu)",
				 (unsigned long long)lblk);
			if (fref_encrypt_block(inode_key, lblk, b->pt, b->ctl[b->nctl++], c->bs))
				lab_die("reference encryption failed");
		}
		c->blocks++;
		c->iv_not_lblk += iv != lblk;
		c->nonzero_eo += x->offset != 0;
		c->shared += shared;
		ncopies = raw_btrfs_map(c->chunks, c->nchunks, addr, c->bs, offs);
		if (!CHECK(ncopies > 0, "%s: address %llu does not map to the device",
			   b->what, (unsigned long long)addr))
			continue;
		for (k = 0; k < ncopies; k++) {
			c->copies_read++;
			r = fblk_check_copy(c->dev, c->bs, offs[k], b, 1);
			c->copies_ok += r == 1;
		}
	}
}

static void ec_check_file_data(struct ec_ctx *c, const struct ec_file *f)
{
	uint8_t inode_key[FREF_XTS_KEY_SIZE];
	const struct lab_btrfs_file_extent *x;
	struct fblk_block b;
	uint64_t pos;
	size_t i;

	if (f->have_nonce &&
	    fref_per_file_key(c->mk, sizeof(c->mk), f->nonce, inode_key, sizeof(inode_key)))
		lab_die("cannot derive the per-file key");
	fblk_alloc(&b, c->bs);
	b.encrypted = 1;
	b.want_what = "per-extent-key reference ciphertext";
	for (i = 0; i < f->nfe; i++) {
		x = &f->fe[i];
		if (!ec_item_ok(x))
			continue;
		if (x->type == BTRFS_FILE_EXTENT_PREALLOC) {
			for (pos = x->file_offset;
			     pos < x->file_offset + x->num_bytes && pos < f->size;
			     pos += c->bs)
				c->prealloc_blocks++;
			continue;
		}
		ec_check_item_data(c, f, x, f->have_nonce ? inode_key : NULL, &b);
	}
	fblk_free(&b);
}

/* ---- driver ----------------------------------------------------------------------- */

int main(void)
{
	static struct ec_ctx ctx;
	struct ec_ctx *c = &ctx;
	const struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f -d single -m single",
		.mount_opts = NULL,	/* default: per-extent keys */
	};
	size_t i, j, nblocks = 0;

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) != 0)
		lab_skip("the kernel does not advertise per-extent keys on btrfs (no %s)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	c->dev = lab_env("SCRATCH_DEV");
	c->mnt = lab_env("SCRATCH_MNT");
	PATHF(c->dir, "%s/enc", c->mnt);
	printf("btrfs per-extent key ciphertext check (%s on %s, mkfs \"%s\", default mount options)\n",
	       c->dev, c->mnt, btrfs.mkfs_cmd);
	if (fref_selftest())
		lab_die("the reference model fails its own self-test");
	lab_random(c->mk, sizeof(c->mk));
	memcpy(c->bad_mk, c->mk, sizeof(c->mk));
	c->bad_mk[0] ^= 0x01;

	lab_fscrypt_fs_setup(&btrfs, c->dev, c->mnt, NULL, c->mk, sizeof(c->mk), c->id);
	c->bs = fblk_block_size(c->mnt);
	fblk_check_key_identifier(c->mk, sizeof(c->mk), c->id);

	ec_make_files(c);
	ec_learn(c);
	ec_check_read_back(c, "after dropping the caches");
	printf("== file extent items\n");
	for (i = 0; i < EC_NFILES; i++)
		ec_check_file_items(c, &c->files[i]);
	ec_check_nonces(c);
	ec_check_layout(c);
	for (i = 0; i < EC_NFILES; i++)
		for (j = 0; j < c->files[i].nfe; j++)
			if (ec_item_ok(&c->files[i].fe[j]))
				ec_check_item_fiemap(c, &c->files[i], &c->files[i].fe[j]);
	printf("%zu extents in %d files, %zu preallocated item(s)\n",
	       c->extents, EC_NFILES, c->prealloc_items);
	CHECK(c->prealloc_items >= 1, "no preallocated extent item found");
	fblk_btrfs_chunks(c->mnt, &c->chunks, &c->nchunks);
	if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
		lab_die("cannot unmount before reading the device");

	printf("== data blocks\n");
	for (i = 0; i < EC_NFILES; i++) {
		ec_check_file_data(c, &c->files[i]);
		nblocks += (c->files[i].size + c->bs - 1) / c->bs;
	}
	printf("%zu of %zu block copies read from the device equal the per-extent-key reference ciphertext (%zu written blocks, %zu preallocated, %zu blocks in %d files)\n",
	       c->copies_ok, c->copies_read, c->blocks, c->prealloc_blocks, nblocks,
	       EC_NFILES);
	printf("IV rule exercised: %zu block(s) whose IV is not their logical block, %zu at a nonzero extent offset, %zu in an extent shared with another file\n",
	       c->iv_not_lblk, c->nonzero_eo, c->shared);
	CHECK(c->blocks + c->prealloc_blocks == nblocks,
	      "%zu written + %zu preallocated blocks are in the items, the files have %zu",
	      c->blocks, c->prealloc_blocks, nblocks);
	CHECK(c->copies_read >= c->blocks && c->copies_ok == c->copies_read,
	      "%zu of %zu copies of %zu blocks match", c->copies_ok, c->copies_read,
	      c->blocks);
	CHECK(c->iv_not_lblk > 0 && c->nonzero_eo > 0 && c->shared > 0,
	      "the IV rule was not exercised: %zu blocks with IV != logical block, %zu at a nonzero extent offset, %zu shared",
	      c->iv_not_lblk, c->nonzero_eo, c->shared);

	printf("== mounted again\n");
	if (CHECK_OK(lab_fscrypt_fs_mount(&btrfs, c->dev, c->mnt, NULL),
		     "mount %s again", c->dev) &&
	    CHECK_OK(lab_add_raw_key(c->mnt, c->mk, sizeof(c->mk), c->id),
		     "add the master key again")) {
		ec_check_read_back(c, "after remounting");
		if (CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
			lab_btrfs_check_clean(c->dev, "the multi-extent files' filesystem");
	}

	for (i = 0; i < EC_NFILES; i++) {
		free(c->files[i].data);
		free(c->files[i].ext);
		free(c->files[i].fe);
	}
	free(c->chunks);
	return lab_result("btrfs_fscrypt_extent_ciphertext");
}
