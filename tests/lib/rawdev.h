/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rawdev.h - looking at what a filesystem put on its block device: O_DIRECT
 * reads, a one-pass scan for several byte strings (with their offsets),
 * FIEMAP, and btrfs logical-to-device address mapping.
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef RAWDEV_H
#define RAWDEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- reading --------------------------------------------------------------- */

/*
 * Read @len bytes at byte offset @off of @dev with O_DIRECT (any offset and
 * length: the aligned span around them is read), so that the page cache
 * cannot show anything that is not on the medium.
 */
int raw_read(const char *dev, uint64_t off, void *buf, size_t len);

/* Write @len bytes at @off (both multiples of 4096) with O_DIRECT|O_DSYNC. */
int raw_write_sync(const char *dev, uint64_t off, const void *buf, size_t len);

/*
 * log_root in the btrfs superblock on @dev (O_DIRECT): 0 if no tree log is
 * left to replay, else its block; -1 if there is no readable btrfs
 * superblock.
 */
long long raw_btrfs_log_root(const char *dev);

/* ---- scanning ---------------------------------------------------------------- */

#define RAW_NEEDLE_MAX_OFFS 64

struct raw_needle {
	const char *label;		/* for messages */
	const void *data;
	size_t len;
	/* results */
	long long count;		/* all occurrences */
	size_t noffs;			/* offsets kept: min(count, MAX_OFFS) */
	uint64_t offs[RAW_NEEDLE_MAX_OFFS];
};

/*
 * One pass over the whole of @dev (O_DIRECT, big reads): count every
 * (possibly overlapping) occurrence of each needle, including ones straddling
 * read boundaries, and keep the device offsets of the first few.
 */
int raw_scan(const char *dev, struct raw_needle *needles, size_t n);

/*
 * The same results, faster when the needles share a distinctive string:
 * needles[0] is that string and every other needle contains it; only it is
 * searched for, and the others are compared where it occurs.  Dies if a
 * needle does not contain needles[0].
 */
int raw_scan_anchored(const char *dev, struct raw_needle *needles, size_t n);

/*
 * raw_scan() of the bytes [@start, @start+@len) of @dev only (@start and
 * @len multiples of 4096; the range is cut at the end of the device).  Offsets
 * reported are device offsets.  For a filesystem made smaller than its
 * device (mkfs.btrfs -b), which cannot have written beyond its size.
 */
int raw_scan_range(const char *dev, uint64_t start, uint64_t len,
		   struct raw_needle *needles, size_t n);

/* ---- FIEMAP ------------------------------------------------------------------ */

struct raw_extent {
	uint64_t logical;	/* byte offset in the file */
	uint64_t physical;	/* as FIEMAP reports it (btrfs: logical address) */
	uint64_t length;
	uint32_t flags;		/* FIEMAP_EXTENT_* */
};

/*
 * All extents of @path (FIEMAP_FLAG_SYNC: delayed allocation is done
 * first).  *@ext is malloc()ed; *@n may be 0.
 */
int raw_fiemap(const char *path, struct raw_extent **ext, size_t *n);

/* ---- btrfs address mapping ------------------------------------------------------ */

#define RAW_BTRFS_MAX_STRIPES 4

struct raw_btrfs_chunk {
	uint64_t logical, length, type;		/* type: BTRFS_BLOCK_GROUP_* */
	unsigned nstripes;
	uint64_t devid[RAW_BTRFS_MAX_STRIPES];
	uint64_t physical[RAW_BTRFS_MAX_STRIPES];
};

/*
 * The chunk tree of the btrfs mounted on @mnt (BTRFS_IOC_TREE_SEARCH of tree
 * 3): every chunk with its stripes.  *@chunks is malloc()ed.
 */
int raw_btrfs_chunks(const char *mnt, struct raw_btrfs_chunk **chunks,
		     size_t *n);

/*
 * Device offsets of btrfs logical address @logical (@len bytes, which must
 * not cross a chunk): one per copy (SINGLE: 1, DUP: 2), all on devid 1.
 * Returns the number of copies, or -1 (message printed) if the address is
 * in no chunk, crosses one, or its profile is striped (RAID*), which this
 * single-device lab does not map.
 */
int raw_btrfs_map(const struct raw_btrfs_chunk *chunks, size_t n,
		  uint64_t logical, uint64_t len,
		  uint64_t phys[RAW_BTRFS_MAX_STRIPES]);

/* One copy of a btrfs block: the device (btrfs devid) and the offset on it. */
struct raw_btrfs_copy {
	uint64_t devid, physical;
};

/*
 * Every copy of btrfs logical address @logical (@len bytes, which must not
 * cross a chunk), in stripe order, i.e. copies[k] is what btrfs calls
 * mirror k + 1: SINGLE 1 copy, DUP 2 (same device), RAID1 2, RAID1C3 3,
 * RAID1C4 4 (different devices).  Returns the number of copies, or -1
 * (message printed) if the address is in no chunk, crosses one, or its
 * profile is striped (RAID0/10/5/6).
 */
int raw_btrfs_map_copies(const struct raw_btrfs_chunk *chunks, size_t n,
			 uint64_t logical, uint64_t len,
			 struct raw_btrfs_copy copies[RAW_BTRFS_MAX_STRIPES]);

/*
 * The path (as the kernel knows it, e.g. "/dev/vdd") of the device @devid of
 * the btrfs mounted on @mnt (BTRFS_IOC_DEV_INFO), into @path[@size].
 */
int raw_btrfs_dev_path(const char *mnt, uint64_t devid, char *path,
		       size_t size);

/*
 * The error counters of device @devid of the btrfs mounted on @mnt
 * (BTRFS_IOC_GET_DEV_STATS, not reset), indexed by BTRFS_DEV_STAT_*_ERRS
 * of <linux/btrfs.h>: write, read, flush, corruption (checksum), generation.
 */
#define RAW_BTRFS_DEV_STATS 5
int raw_btrfs_dev_stats(const char *mnt, uint64_t devid,
			uint64_t stats[RAW_BTRFS_DEV_STATS]);

#endif /* RAWDEV_H */
