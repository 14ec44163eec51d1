/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs_raw.h - an unmounted btrfs, read and changed on its raw device
 * without the kernel's help: the superblock, the chunk map (the superblock's
 * system chunk array, then the chunk tree), tree blocks by logical address
 * (fsid, bytenr and crc32c checked on read; crc32c recomputed and every copy
 * written on write), every live tree block (walked from the superblock and
 * every ROOT_ITEM), leaf items (key, offset, size; an item resized as the
 * kernel's btrfs_extend_item()/btrfs_truncate_item() do), and a saved image
 * of the bytes that matter (the first MiB, the superblock mirrors, every
 * chunk's stripes) that can be written back and compared.
 *
 * Only crc32c filesystems on one device (devid 1), with SINGLE or mirrored
 * (DUP, RAID1*) profiles, are handled; anything else is refused with EINVAL
 * (message printed).
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef BTRFS_RAW_H
#define BTRFS_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "rawdev.h"

/* ---- little-endian fields ------------------------------------------------------ */

static inline uint16_t braw_le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t braw_le32(const unsigned char *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t braw_le64(const unsigned char *p)
{
	return braw_le32(p) | (uint64_t)braw_le32(p + 4) << 32;
}

static inline void braw_put_le16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void braw_put_le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static inline void braw_put_le64(unsigned char *p, uint64_t v)
{
	braw_put_le32(p, (uint32_t)v);
	braw_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* ---- on-disk layout ---------------------------------------------------------------- */

#define BRAW_SB_OFFSET		65536ULL
#define BRAW_SB_SIZE		4096
#define BRAW_SB_MIRRORS		3	/* 64 KiB, 64 MiB, 256 GiB */
#define BRAW_CSUM_SIZE		32

/* struct btrfs_header: 101 bytes, then items (leaves) or key pointers (nodes) */
#define BRAW_HDR_FSID		32
#define BRAW_HDR_BYTENR		48
#define BRAW_HDR_FLAGS		56
#define BRAW_HDR_GENERATION	80
#define BRAW_HDR_OWNER		88
#define BRAW_HDR_NRITEMS	96
#define BRAW_HDR_LEVEL		100
#define BRAW_HDR_SIZE		101

/* struct btrfs_item: disk key (objectid 8, type 1, offset 8), le32 offset, le32 size */
#define BRAW_ITEM_SIZE		25
#define BRAW_ITEM_TYPE		8
#define BRAW_ITEM_KEY_OFFSET	9
#define BRAW_ITEM_OFFSET	17
#define BRAW_ITEM_DATA_SIZE	21

/* struct btrfs_key_ptr: disk key, le64 blockptr, le64 generation */
#define BRAW_KEY_PTR_SIZE	33
#define BRAW_KEY_PTR_BLOCKPTR	17

/* Device offset of superblock copy @i (0: the primary). */
static inline uint64_t braw_sb_offset(int i)
{
	return i == 0 ? BRAW_SB_OFFSET : (16384ULL << (12 * i));
}

/* ---- the filesystem ------------------------------------------------------------------ */

struct braw_fs {
	const char *dev;
	unsigned char sb[BRAW_SB_SIZE];
	uint8_t fsid[16];
	uint32_t nodesize, sectorsize;
	uint64_t total_bytes;		/* the filesystem's size (dev_item) */
	uint64_t generation;
	uint64_t root, chunk_root;	/* logical addresses of the tree roots */
	struct raw_btrfs_chunk *chunks;	/* rawdev.h: every chunk, stripes */
	size_t nchunks;
};

/*
 * Read the primary superblock of @dev (magic and crc32c checked) and the
 * whole chunk map.  The filesystem must not be mounted read-write.
 */
int braw_open(struct braw_fs *fs, const char *dev);
void braw_close(struct braw_fs *fs);

/*
 * The device offsets of every copy of the @len bytes at @logical (one
 * chunk); returns the number of copies, or -1.
 */
int braw_map(const struct braw_fs *fs, uint64_t logical, uint64_t len,
	     uint64_t phys[RAW_BTRFS_MAX_STRIPES]);

/* crc32c of a tree block (or superblock, @len 4096) into its first 4 bytes. */
void braw_csum(unsigned char *blk, uint32_t len);

/* Does @blk (nodesize bytes) hold a valid crc32c? */
int braw_csum_ok(const unsigned char *blk, uint32_t len);

/*
 * Read the tree block at @logical (its first copy) into @blk (nodesize
 * bytes).  Fails with EUCLEAN if it is not this filesystem's block at that
 * address with a valid checksum.
 */
int braw_read_block(const struct braw_fs *fs, uint64_t logical,
		    unsigned char *blk);

/* Recompute @blk's checksum and write it to every copy of @logical. */
int braw_write_block(const struct braw_fs *fs, uint64_t logical,
		     unsigned char *blk);

/* ---- every live tree block ------------------------------------------------------------ */

struct braw_block {
	uint64_t logical;
	uint64_t tree;		/* the tree it was first reached from */
	uint8_t level;
};

/*
 * Every tree block reachable from the superblock: the chunk tree, the root
 * tree and every tree of a ROOT_ITEM in it (subvolumes and snapshots
 * included), each block once (shared snapshot blocks too), in address
 * order.  *@out is malloc()ed.  Fails with EUCLEAN on an unreadable block.
 */
int braw_live_blocks(const struct braw_fs *fs, struct braw_block **out,
		     size_t *n);

/* ---- leaf items --------------------------------------------------------------------- */

struct braw_key {
	uint64_t objectid;
	uint8_t type;
	uint64_t offset;
};

static inline uint32_t braw_nritems(const unsigned char *blk)
{
	return braw_le32(blk + BRAW_HDR_NRITEMS);
}

/* Where item @slot's header is in its leaf. */
static inline unsigned char *braw_item_hdr(unsigned char *blk, uint32_t slot)
{
	return blk + BRAW_HDR_SIZE + (size_t)slot * BRAW_ITEM_SIZE;
}

void braw_item_key(const unsigned char *blk, uint32_t slot,
		   struct braw_key *key);

/* Offset of item @slot's data in its leaf (from the start of the block). */
static inline uint32_t braw_item_start(const unsigned char *blk, uint32_t slot)
{
	return BRAW_HDR_SIZE +
	       braw_le32(blk + BRAW_HDR_SIZE + (size_t)slot * BRAW_ITEM_SIZE +
			 BRAW_ITEM_OFFSET);
}

static inline uint32_t braw_item_size(const unsigned char *blk, uint32_t slot)
{
	return braw_le32(blk + BRAW_HDR_SIZE + (size_t)slot * BRAW_ITEM_SIZE +
			 BRAW_ITEM_DATA_SIZE);
}

/*
 * Is @blk a leaf whose item headers and data lie inside the block, the data
 * packed from the end in slot order, as the kernel writes them?
 */
int braw_leaf_sane(const unsigned char *blk, uint32_t nodesize);

/* Bytes between the end of the item headers and the lowest item data. */
uint32_t braw_leaf_free(const unsigned char *blk, uint32_t nodesize);

/*
 * Make item @slot of the sane leaf @blk @new_size bytes long, as the kernel
 * does: its data keeps its start (cut at the end, or extended at the end
 * with @fill's bytes, repeated), the data of the later slots moves with it
 * and their offsets follow.  Fails with ENOSPC if the leaf has no room,
 * EINVAL if it is not sane.
 */
int braw_item_resize(unsigned char *blk, uint32_t nodesize, uint32_t slot,
		     uint32_t new_size, unsigned char fill);

/* ---- an image of the bytes that matter --------------------------------------------------- */

struct braw_range {
	uint64_t off, len;
	unsigned char *data;	/* NULL until braw_image_read() */
};

struct braw_image {
	struct braw_range *r;
	size_t n;
	uint64_t bytes;		/* sum of the lengths */
};

/*
 * The ranges of @fs's device that a mount can look at: the first MiB (the
 * primary superblock and what precedes it), each superblock mirror inside
 * the filesystem, every stripe of every chunk; sorted, merged, 4 KiB aligned.
 */
int braw_image_ranges(const struct braw_fs *fs, struct braw_image *img);

/* Read the ranges of @img from @dev (O_DIRECT). */
int braw_image_read(struct braw_image *img, const char *dev);

/* Write them to @dev at the same offsets (O_DIRECT, synced). */
int braw_image_write(const struct braw_image *img, const char *dev);

/*
 * Compare @dev with @img; returns the number of 4 KiB blocks that differ
 * (the first one's offset in *@first), or -1.
 */
long braw_image_compare(const struct braw_image *img, const char *dev,
			uint64_t *first);

/* The bytes of @img at device offset @off (@len of them, in one range), or NULL. */
const unsigned char *braw_image_at(const struct braw_image *img, uint64_t off,
				   uint64_t len);

void braw_image_free(struct braw_image *img);

#endif /* BTRFS_RAW_H */
