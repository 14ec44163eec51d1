// SPDX-License-Identifier: GPL-2.0
/* An unmounted btrfs on its raw device; see btrfs_raw.h. */
#include "btrfs_raw.h"
#include "crc32c.h"
#include "lab.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/btrfs_tree.h>

/* struct btrfs_super_block: the fields used here */
#define SB_MAGIC		64
#define SB_GENERATION		72
#define SB_ROOT			80
#define SB_CHUNK_ROOT		88
#define SB_LOG_ROOT		96
#define SB_TOTAL_BYTES		112
#define SB_SECTORSIZE		144
#define SB_NODESIZE		148
#define SB_SYS_ARRAY_SIZE	160
#define SB_INCOMPAT		188
#define SB_CSUM_TYPE		196
#define SB_METADATA_UUID	571
#define SB_SYS_ARRAY		811
#define SB_SYS_ARRAY_MAX	2048
#define BTRFS_MAGIC_LE		0x4D5F53665248425FULL	/* "_BHRfS_M" */
#define INCOMPAT_METADATA_UUID	(1ULL << 10)

/* struct btrfs_chunk: 48 bytes, then num_stripes struct btrfs_stripe (32) */
#define CHUNK_LENGTH		0
#define CHUNK_TYPE		24
#define CHUNK_NUM_STRIPES	44
#define CHUNK_SIZE		48
#define STRIPE_DEVID		0
#define STRIPE_OFFSET		8
#define STRIPE_SIZE		32

#define DISK_KEY_SIZE		17
#define IO_ALIGN		4096u
#define IO_CHUNK		(1u << 20)

static void *braw_alloc(size_t len)
{
	void *p;

	if (posix_memalign(&p, IO_ALIGN, len ? len : IO_ALIGN))
		lab_die("out of memory allocating %zu aligned bytes", len);
	return p;
}

static int braw_fail(int err, const char *fmt, ...) LAB_PRINTF(2, 3);
static int braw_fail(int err, const char *fmt, ...)
{
	va_list ap;

	printf("btrfs_raw: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	errno = err;
	return -1;
}

void braw_csum(unsigned char *blk, uint32_t len)
{
	memset(blk, 0, BRAW_CSUM_SIZE);
	braw_put_le32(blk, lab_crc32c(blk + BRAW_CSUM_SIZE, len - BRAW_CSUM_SIZE));
}

int braw_csum_ok(const unsigned char *blk, uint32_t len)
{
	return braw_le32(blk) == lab_crc32c(blk + BRAW_CSUM_SIZE, len - BRAW_CSUM_SIZE);
}

/* ---- the chunk map ------------------------------------------------------------------- */

/* Add the chunk at @logical described by the @len bytes at @c, unless known. */
static int add_chunk(struct braw_fs *fs, uint64_t logical, const unsigned char *c,
		     size_t len)
{
	struct raw_btrfs_chunk *ck, *grown;
	unsigned s, ns;
	size_t i;

	if (len < CHUNK_SIZE)
		return braw_fail(EUCLEAN, "chunk item at %llu: %zu bytes",
				 (unsigned long long)logical, len);
	ns = braw_le16(c + CHUNK_NUM_STRIPES);
	if (ns == 0 || len < CHUNK_SIZE + (size_t)ns * STRIPE_SIZE)
		return braw_fail(EUCLEAN, "chunk item at %llu: %u stripes in %zu bytes",
				 (unsigned long long)logical, ns, len);
	if (ns > RAW_BTRFS_MAX_STRIPES)
		return braw_fail(EINVAL, "chunk at %llu has %u stripes, more than %d",
				 (unsigned long long)logical, ns,
				 RAW_BTRFS_MAX_STRIPES);
	for (i = 0; i < fs->nchunks; i++)
		if (fs->chunks[i].logical == logical)
			return 0;
	grown = realloc(fs->chunks, (fs->nchunks + 1) * sizeof(*grown));
	if (!grown)
		lab_die("out of memory for the chunk map");
	fs->chunks = grown;
	ck = &fs->chunks[fs->nchunks++];
	memset(ck, 0, sizeof(*ck));
	ck->logical = logical;
	ck->length = braw_le64(c + CHUNK_LENGTH);
	ck->type = braw_le64(c + CHUNK_TYPE);
	ck->nstripes = ns;
	for (s = 0; s < ns; s++) {
		const unsigned char *st = c + CHUNK_SIZE + (size_t)s * STRIPE_SIZE;

		ck->devid[s] = braw_le64(st + STRIPE_DEVID);
		ck->physical[s] = braw_le64(st + STRIPE_OFFSET);
		if (ck->devid[s] != 1)
			return braw_fail(EINVAL, "chunk at %llu has a stripe on devid %llu: one device (devid 1) only",
					 (unsigned long long)logical,
					 (unsigned long long)ck->devid[s]);
	}
	return 0;
}

static int parse_sys_chunk_array(struct braw_fs *fs)
{
	uint32_t size = braw_le32(fs->sb + SB_SYS_ARRAY_SIZE), pos = 0;
	const unsigned char *a = fs->sb + SB_SYS_ARRAY;

	if (size > SB_SYS_ARRAY_MAX)
		return braw_fail(EUCLEAN, "sys_chunk_array_size %u", size);
	while (pos + DISK_KEY_SIZE + CHUNK_SIZE <= size) {
		const unsigned char *key = a + pos, *c = key + DISK_KEY_SIZE;
		size_t len = CHUNK_SIZE + (size_t)braw_le16(c + CHUNK_NUM_STRIPES) * STRIPE_SIZE;

		if (key[BRAW_ITEM_TYPE] != BTRFS_CHUNK_ITEM_KEY ||
		    pos + DISK_KEY_SIZE + len > size)
			return braw_fail(EUCLEAN, "bad sys_chunk_array entry at %u", pos);
		if (add_chunk(fs, braw_le64(key + BRAW_ITEM_KEY_OFFSET), c, len))
			return -1;
		pos += DISK_KEY_SIZE + (uint32_t)len;
	}
	return fs->nchunks ? 0 : braw_fail(EUCLEAN, "no system chunk in the superblock");
}

/* ---- a set of block addresses ------------------------------------------------------------ */

struct addr_set {
	uint64_t *slot;		/* 0 = empty (no tree block is at 0) */
	size_t cap, n;
};

static size_t addr_hash(uint64_t a, size_t cap)
{
	return (size_t)((a * 0x9e3779b97f4a7c15ULL) >> 17) & (cap - 1);
}

/* Add @a; 1 if it was new. */
static int addr_add(struct addr_set *s, uint64_t a)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		struct addr_set g = { .cap = s->cap ? 2 * s->cap : 256 };

		g.slot = calloc(g.cap, sizeof(*g.slot));
		if (!g.slot)
			lab_die("out of memory for a block set");
		for (i = 0; i < s->cap; i++)
			if (s->slot[i])
				addr_add(&g, s->slot[i]);
		free(s->slot);
		*s = g;
	}
	for (i = addr_hash(a, s->cap); s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (s->slot[i] == a)
			return 0;
	s->slot[i] = a;
	s->n++;
	return 1;
}

/* ---- tree blocks ------------------------------------------------------------------------ */

int braw_map(const struct braw_fs *fs, uint64_t logical, uint64_t len,
	     uint64_t phys[RAW_BTRFS_MAX_STRIPES])
{
	int n = raw_btrfs_map(fs->chunks, fs->nchunks, logical, len, phys);

	if (n < 0)
		errno = EINVAL;
	return n;
}

int braw_read_block(const struct braw_fs *fs, uint64_t logical,
		    unsigned char *blk)
{
	uint64_t phys[RAW_BTRFS_MAX_STRIPES];

	if (braw_map(fs, logical, fs->nodesize, phys) < 1)
		return -1;
	if (raw_read(fs->dev, phys[0], blk, fs->nodesize))
		return -1;
	if (memcmp(blk + BRAW_HDR_FSID, fs->fsid, 16) ||
	    braw_le64(blk + BRAW_HDR_BYTENR) != logical ||
	    !braw_csum_ok(blk, fs->nodesize))
		return braw_fail(EUCLEAN, "no valid tree block at logical %llu (device offset %llu)",
				 (unsigned long long)logical,
				 (unsigned long long)phys[0]);
	return 0;
}

int braw_write_block(const struct braw_fs *fs, uint64_t logical,
		     unsigned char *blk)
{
	uint64_t phys[RAW_BTRFS_MAX_STRIPES];
	int n, i;

	n = braw_map(fs, logical, fs->nodesize, phys);
	if (n < 1)
		return -1;
	braw_csum(blk, fs->nodesize);
	for (i = 0; i < n; i++)
		if (raw_write_sync(fs->dev, phys[i], blk, fs->nodesize))
			return -1;
	return 0;
}

void braw_item_key(const unsigned char *blk, uint32_t slot,
		   struct braw_key *key)
{
	const unsigned char *it = blk + BRAW_HDR_SIZE + (size_t)slot * BRAW_ITEM_SIZE;

	key->objectid = braw_le64(it);
	key->type = it[BRAW_ITEM_TYPE];
	key->offset = braw_le64(it + BRAW_ITEM_KEY_OFFSET);
}

/*
 * Walk the tree whose root is at @root, adding its blocks to @seen and
 * @out; @visit, if not NULL, is called with every leaf.
 */
typedef int (*leaf_fn)(struct braw_fs *fs, const unsigned char *leaf, void *arg);

struct walk_out {
	struct braw_block *b;
	size_t n, cap;
};

static int walk_tree(struct braw_fs *fs, uint64_t root, uint64_t tree,
		     struct addr_set *seen, struct walk_out *out, leaf_fn visit,
		     void *arg)
{
	unsigned char *blk = braw_alloc(fs->nodesize);
	uint64_t *stack = NULL;
	size_t sp = 0, cap = 0;
	int ret = 0;

	if (!addr_add(seen, root))
		goto done;
	stack = lab_xmalloc(sizeof(*stack) * (cap = 64));
	stack[sp++] = root;
	while (sp) {
		uint64_t at = stack[--sp];
		uint32_t n, i;
		uint8_t level;

		if (braw_read_block(fs, at, blk)) {
			ret = -1;
			break;
		}
		level = blk[BRAW_HDR_LEVEL];
		n = braw_nritems(blk);
		if (out) {
			if (out->n == out->cap) {
				out->cap = out->cap ? 2 * out->cap : 64;
				out->b = realloc(out->b, out->cap * sizeof(*out->b));
				if (!out->b)
					lab_die("out of memory for the block list");
			}
			out->b[out->n].logical = at;
			out->b[out->n].tree = tree;
			out->b[out->n].level = level;
			out->n++;
		}
		if (level == 0) {
			if (!braw_leaf_sane(blk, fs->nodesize)) {
				ret = braw_fail(EUCLEAN, "leaf at %llu of tree %lld is not sane",
						(unsigned long long)at, (long long)tree);
				break;
			}
			if (visit && visit(fs, blk, arg)) {
				ret = -1;
				break;
			}
			continue;
		}
		if (BRAW_HDR_SIZE + (size_t)n * BRAW_KEY_PTR_SIZE > fs->nodesize) {
			ret = braw_fail(EUCLEAN, "node at %llu has %u pointers",
					(unsigned long long)at, n);
			break;
		}
		for (i = 0; i < n; i++) {
			uint64_t child = braw_le64(blk + BRAW_HDR_SIZE +
						   (size_t)i * BRAW_KEY_PTR_SIZE +
						   BRAW_KEY_PTR_BLOCKPTR);

			if (!addr_add(seen, child))
				continue;
			if (sp == cap) {
				cap *= 2;
				stack = realloc(stack, cap * sizeof(*stack));
				if (!stack)
					lab_die("out of memory for a tree walk");
			}
			stack[sp++] = child;
		}
	}
done:
	free(stack);
	free(blk);
	return ret;
}

/* Chunk tree leaves: every CHUNK_ITEM into the map. */
static int visit_chunk_leaf(struct braw_fs *fs, const unsigned char *leaf,
			    void *arg)
{
	uint32_t i, n = braw_nritems(leaf);
	struct braw_key k;

	(void)arg;
	for (i = 0; i < n; i++) {
		braw_item_key(leaf, i, &k);
		if (k.type == BTRFS_CHUNK_ITEM_KEY &&
		    add_chunk(fs, k.offset, leaf + braw_item_start(leaf, i),
			      braw_item_size(leaf, i)))
			return -1;
	}
	return 0;
}

int braw_open(struct braw_fs *fs, const char *dev)
{
	struct addr_set seen = { 0 };
	int ret;

	memset(fs, 0, sizeof(*fs));
	fs->dev = dev;
	if (raw_read(dev, BRAW_SB_OFFSET, fs->sb, BRAW_SB_SIZE))
		return -1;
	if (braw_le64(fs->sb + SB_MAGIC) != BTRFS_MAGIC_LE)
		return braw_fail(EINVAL, "%s: no btrfs superblock", dev);
	if (braw_le16(fs->sb + SB_CSUM_TYPE) != 0)
		return braw_fail(EINVAL, "%s: checksum type %u, only crc32c (0) is handled",
				 dev, braw_le16(fs->sb + SB_CSUM_TYPE));
	if (!braw_csum_ok(fs->sb, BRAW_SB_SIZE))
		return braw_fail(EUCLEAN, "%s: superblock checksum mismatch", dev);
	memcpy(fs->fsid, fs->sb + ((braw_le64(fs->sb + SB_INCOMPAT) &
				    INCOMPAT_METADATA_UUID) ?
				   SB_METADATA_UUID : BRAW_HDR_FSID), 16);
	fs->nodesize = braw_le32(fs->sb + SB_NODESIZE);
	fs->sectorsize = braw_le32(fs->sb + SB_SECTORSIZE);
	fs->total_bytes = braw_le64(fs->sb + SB_TOTAL_BYTES);
	fs->generation = braw_le64(fs->sb + SB_GENERATION);
	fs->root = braw_le64(fs->sb + SB_ROOT);
	fs->chunk_root = braw_le64(fs->sb + SB_CHUNK_ROOT);
	if (fs->nodesize < 4096 || fs->nodesize > 65536 ||
	    (fs->nodesize & (fs->nodesize - 1)))
		return braw_fail(EINVAL, "%s: nodesize %u", dev, fs->nodesize);
	if (parse_sys_chunk_array(fs))
		goto fail;
	ret = walk_tree(fs, fs->chunk_root, BTRFS_CHUNK_TREE_OBJECTID, &seen,
			NULL, visit_chunk_leaf, NULL);
	free(seen.slot);
	if (ret == 0)
		return 0;
fail:
	ret = errno;
	braw_close(fs);
	errno = ret;
	return -1;
}

void braw_close(struct braw_fs *fs)
{
	free(fs->chunks);
	fs->chunks = NULL;
	fs->nchunks = 0;
}

/* ---- every live tree block ------------------------------------------------------------ */

struct roots {
	uint64_t *root, *tree;
	size_t n;
};

/* Root tree leaves: the root of every ROOT_ITEM's tree. */
static int visit_root_leaf(struct braw_fs *fs, const unsigned char *leaf,
			   void *arg)
{
	struct roots *r = arg;
	uint32_t i, n = braw_nritems(leaf);
	struct braw_key k;

	(void)fs;
	for (i = 0; i < n; i++) {
		const unsigned char *ri = leaf + braw_item_start(leaf, i);
		uint64_t bytenr;

		braw_item_key(leaf, i, &k);
		if (k.type != BTRFS_ROOT_ITEM_KEY ||
		    braw_item_size(leaf, i) < offsetof(struct btrfs_root_item, level) + 1)
			continue;
		bytenr = braw_le64(ri + offsetof(struct btrfs_root_item, bytenr));
		if (!bytenr)
			continue;
		r->root = realloc(r->root, (r->n + 1) * sizeof(*r->root));
		r->tree = realloc(r->tree, (r->n + 1) * sizeof(*r->tree));
		if (!r->root || !r->tree)
			lab_die("out of memory for the tree roots");
		r->root[r->n] = bytenr;
		r->tree[r->n] = k.objectid;
		r->n++;
	}
	return 0;
}

static int cmp_block(const void *a, const void *b)
{
	const struct braw_block *x = a, *y = b;

	return x->logical < y->logical ? -1 : x->logical > y->logical;
}

int braw_live_blocks(const struct braw_fs *fs_in, struct braw_block **out,
		     size_t *n)
{
	struct braw_fs *fs = (struct braw_fs *)fs_in;	/* visitors only read */
	struct addr_set seen = { 0 };
	struct walk_out wo = { 0 };
	struct roots r = { 0 };
	uint64_t log_root = braw_le64(fs->sb + SB_LOG_ROOT);
	int ret;
	size_t i;

	ret = walk_tree(fs, fs->chunk_root, BTRFS_CHUNK_TREE_OBJECTID, &seen,
			&wo, NULL, NULL);
	if (!ret)
		ret = walk_tree(fs, fs->root, BTRFS_ROOT_TREE_OBJECTID, &seen,
				&wo, visit_root_leaf, &r);
	for (i = 0; !ret && i < r.n; i++)
		ret = walk_tree(fs, r.root[i], r.tree[i], &seen, &wo, NULL, NULL);
	if (!ret && log_root)
		ret = walk_tree(fs, log_root, (uint64_t)BTRFS_TREE_LOG_OBJECTID,
				&seen, &wo, NULL, NULL);
	free(r.root);
	free(r.tree);
	free(seen.slot);
	if (ret) {
		free(wo.b);
		return -1;
	}
	qsort(wo.b, wo.n, sizeof(*wo.b), cmp_block);
	*out = wo.b;
	*n = wo.n;
	return 0;
}

/* ---- leaf items --------------------------------------------------------------------- */

int braw_leaf_sane(const unsigned char *blk, uint32_t nodesize)
{
	uint32_t n = braw_nritems(blk), i, end = nodesize - BRAW_HDR_SIZE;
	const unsigned char *it;

	if (blk[BRAW_HDR_LEVEL] != 0 ||
	    BRAW_HDR_SIZE + (size_t)n * BRAW_ITEM_SIZE > nodesize)
		return 0;
	for (i = 0; i < n; i++) {
		uint32_t off, size;

		it = blk + BRAW_HDR_SIZE + (size_t)i * BRAW_ITEM_SIZE;
		off = braw_le32(it + BRAW_ITEM_OFFSET);
		size = braw_le32(it + BRAW_ITEM_DATA_SIZE);
		if (size > end || off != end - size ||
		    off < (size_t)n * BRAW_ITEM_SIZE)
			return 0;
		end = off;
	}
	return 1;
}

uint32_t braw_leaf_free(const unsigned char *blk, uint32_t nodesize)
{
	uint32_t n = braw_nritems(blk);
	uint32_t low = n ? braw_item_start(blk, n - 1) : nodesize;

	return low - BRAW_HDR_SIZE - n * BRAW_ITEM_SIZE;
}

int braw_item_resize(unsigned char *blk, uint32_t nodesize, uint32_t slot,
		     uint32_t new_size, unsigned char fill)
{
	uint32_t n = braw_nritems(blk), i, off, old, low;
	unsigned char *it;

	if (!braw_leaf_sane(blk, nodesize) || slot >= n) {
		errno = EINVAL;
		return -1;
	}
	off = braw_item_start(blk, slot);
	old = braw_item_size(blk, slot);
	low = braw_item_start(blk, n - 1);
	if (new_size == old)
		return 0;
	if (new_size > old) {
		uint32_t d = new_size - old;

		if (braw_leaf_free(blk, nodesize) < d) {
			errno = ENOSPC;
			return -1;
		}
		/* the data of slots slot..n-1 moves d bytes down */
		memmove(blk + low - d, blk + low, off + old - low);
		memset(blk + off - d + old, fill, d);
		for (i = slot; i < n; i++) {
			it = braw_item_hdr(blk, i);
			braw_put_le32(it + BRAW_ITEM_OFFSET,
				      braw_le32(it + BRAW_ITEM_OFFSET) - d);
		}
	} else {
		uint32_t d = old - new_size;

		/* the first new_size bytes of the slot, and the later slots, move up */
		memmove(blk + low + d, blk + low, off + new_size - low);
		memset(blk + low, 0, d);
		for (i = slot; i < n; i++) {
			it = braw_item_hdr(blk, i);
			braw_put_le32(it + BRAW_ITEM_OFFSET,
				      braw_le32(it + BRAW_ITEM_OFFSET) + d);
		}
	}
	braw_put_le32(braw_item_hdr(blk, slot) + BRAW_ITEM_DATA_SIZE, new_size);
	return 0;
}

/* ---- an image of the bytes that matter --------------------------------------------------- */

static int cmp_range(const void *a, const void *b)
{
	const struct braw_range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static void add_range(struct braw_image *img, uint64_t off, uint64_t len)
{
	uint64_t end = (off + len + IO_ALIGN - 1) / IO_ALIGN * IO_ALIGN;

	off = off / IO_ALIGN * IO_ALIGN;
	img->r = realloc(img->r, (img->n + 1) * sizeof(*img->r));
	if (!img->r)
		lab_die("out of memory for the image ranges");
	img->r[img->n].off = off;
	img->r[img->n].len = end - off;
	img->r[img->n].data = NULL;
	img->n++;
}

int braw_image_ranges(const struct braw_fs *fs, struct braw_image *img)
{
	const uint64_t mirrored = BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 |
				  BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4;
	size_t i, m;
	unsigned s;
	int k;

	memset(img, 0, sizeof(*img));
	add_range(img, 0, fs->total_bytes < (1u << 20) ? fs->total_bytes : (1u << 20));
	for (k = 1; k < BRAW_SB_MIRRORS; k++)
		if (braw_sb_offset(k) + BRAW_SB_SIZE <= fs->total_bytes)
			add_range(img, braw_sb_offset(k), BRAW_SB_SIZE);
	for (i = 0; i < fs->nchunks; i++) {
		const struct raw_btrfs_chunk *c = &fs->chunks[i];
		uint64_t profile = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

		if (profile & ~mirrored) {
			braw_image_free(img);
			return braw_fail(EINVAL, "chunk %llu is striped (profile 0x%llx)",
					 (unsigned long long)c->logical,
					 (unsigned long long)profile);
		}
		for (s = 0; s < c->nstripes; s++)
			add_range(img, c->physical[s], c->length);
	}
	qsort(img->r, img->n, sizeof(*img->r), cmp_range);
	for (i = 0, m = 0; i < img->n; i++) {
		if (m && img->r[i].off <= img->r[m - 1].off + img->r[m - 1].len) {
			uint64_t end = img->r[i].off + img->r[i].len;

			if (end > img->r[m - 1].off + img->r[m - 1].len)
				img->r[m - 1].len = end - img->r[m - 1].off;
			continue;
		}
		img->r[m++] = img->r[i];
	}
	img->n = m;
	for (i = 0; i < img->n; i++)
		img->bytes += img->r[i].len;
	return 0;
}

int braw_image_read(struct braw_image *img, const char *dev)
{
	int fd = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC), e;
	size_t i;

	if (fd < 0)
		return -1;
	for (i = 0; i < img->n; i++) {
		struct braw_range *r = &img->r[i];
		ssize_t got;

		if (!r->data)
			r->data = braw_alloc(r->len);
		got = lab_pread_full(fd, r->data, r->len, (off_t)r->off);
		if (got != (ssize_t)r->len) {
			e = got < 0 ? errno : EIO;
			close(fd);
			errno = e;
			return -1;
		}
	}
	close(fd);
	return 0;
}

int braw_image_write(const struct braw_image *img, const char *dev)
{
	int fd = open(dev, O_WRONLY | O_DIRECT | O_CLOEXEC), e;
	size_t i;

	if (fd < 0)
		return -1;
	for (i = 0; i < img->n; i++) {
		const struct braw_range *r = &img->r[i];

		if (!r->data || pwrite_all(fd, r->data, r->len, (off_t)r->off)) {
			e = r->data ? errno : EINVAL;
			close(fd);
			errno = e;
			return -1;
		}
	}
	if (fsync(fd)) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

long braw_image_compare(const struct braw_image *img, const char *dev,
			uint64_t *first)
{
	unsigned char *buf = braw_alloc(IO_CHUNK);
	int fd = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC), e;
	long diff = 0;
	size_t i;

	if (fd < 0) {
		free(buf);
		return -1;
	}
	*first = 0;
	for (i = 0; i < img->n; i++) {
		const struct braw_range *r = &img->r[i];
		uint64_t pos, b;

		for (pos = 0; pos < r->len; pos += IO_CHUNK) {
			uint64_t len = r->len - pos < IO_CHUNK ? r->len - pos : IO_CHUNK;

			if (lab_pread_full(fd, buf, len, (off_t)(r->off + pos)) != (ssize_t)len) {
				e = errno ? errno : EIO;
				close(fd);
				free(buf);
				errno = e;
				return -1;
			}
			for (b = 0; b < len; b += IO_ALIGN) {
				if (!memcmp(buf + b, r->data + pos + b, IO_ALIGN))
					continue;
				if (!diff++)
					*first = r->off + pos + b;
			}
		}
	}
	close(fd);
	free(buf);
	return diff;
}

const unsigned char *braw_image_at(const struct braw_image *img, uint64_t off,
				   uint64_t len)
{
	size_t i;

	for (i = 0; i < img->n; i++)
		if (off >= img->r[i].off && off + len <= img->r[i].off + img->r[i].len)
			return img->r[i].data ? img->r[i].data + (off - img->r[i].off) : NULL;
	return NULL;
}

void braw_image_free(struct braw_image *img)
{
	size_t i;

	for (i = 0; i < img->n; i++)
		free(img->r[i].data);
	free(img->r);
	memset(img, 0, sizeof(*img));
}
