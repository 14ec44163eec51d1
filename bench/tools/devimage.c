// SPDX-License-Identifier: GPL-2.0
/*
 * devimage save DEV IMG [RANGES]: copy the block device DEV into IMG, a
 * sparse file of DEV's size holding only DEV's non-zero 64 KiB blocks (the
 * zero ones stay holes). Reads DEV with O_DIRECT in 4 MiB pieces: all of
 * it, or only the byte ranges listed in the file RANGES ("START LENGTH"
 * per line), when the caller knows that nothing outside them was written.
 *
 * devimage btrfs-ranges MNT: the ranges of the device of the (single-device)
 * btrfs mounted on MNT that btrfs can have written: every chunk's stripes
 * (BTRFS_IOC_TREE_SEARCH of the chunk tree, tests/lib/rawdev.c), the first
 * MiB (superblock) and the first superblock mirror (64 MiB).
 *
 * devimage restore IMG DEV: make DEV hold exactly what IMG holds: zero the
 * whole device (BLKZEROOUT, which QEMU's virtio-blk does without moving
 * data), then write IMG's data segments (SEEK_DATA/SEEK_HOLE, so its holes
 * are never read) at their offsets with O_DIRECT, and flush. Nothing of
 * either stays in the page cache.
 *
 * Both print "<bytes of data> <seconds>" on success. Exit status 1 on an
 * error (message on stderr), 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "rawdev.h"

#define PIECE (4u << 20)
#define BLOCK (64u << 10)

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "devimage: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int all_zero(const unsigned char *p, size_t n)
{
	static const unsigned char zero[BLOCK];

	return memcmp(p, zero, n) == 0;
}

/* Copy [start, start + len) of @in into @out, leaving zero blocks out. */
static int save_range(int in, int out, unsigned char *buf, uint64_t start,
		      uint64_t len, uint64_t *data, const char *dev, const char *img)
{
	uint64_t off, end = start + len;

	for (off = start; off < end; off += PIECE) {
		size_t want = end - off < PIECE ? end - off : PIECE, b;
		ssize_t got = pread(in, buf, want, off);

		if (got != (ssize_t)want)
			return fail("read", dev);
		for (b = 0; b < want; b += BLOCK) {
			size_t n = want - b < BLOCK ? want - b : BLOCK;

			if (all_zero(buf + b, n))
				continue;
			if (pwrite(out, buf + b, n, off + b) != (ssize_t)n)
				return fail("write", img);
			*data += n;
		}
	}
	return 0;
}

static int do_save(const char *dev, const char *img, const char *ranges)
{
	int in = open(dev, O_RDONLY | O_DIRECT), out;
	uint64_t size, data = 0;
	unsigned long long start, len;
	double t0 = now();
	unsigned char *buf;
	FILE *rf = NULL;

	if (in < 0)
		return fail("open", dev);
	if (ioctl(in, BLKGETSIZE64, &size))
		return fail("BLKGETSIZE64", dev);
	out = open(img, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0)
		return fail("create", img);
	if (posix_memalign((void **)&buf, 4096, PIECE))
		return fail("allocate for", dev);
	if (!ranges) {
		if (save_range(in, out, buf, 0, size, &data, dev, img))
			return 1;
	} else if (!(rf = fopen(ranges, "r"))) {
		return fail("open", ranges);
	} else {
		while (fscanf(rf, "%llu %llu", &start, &len) == 2) {
			/* O_DIRECT: whole 4 KiB blocks, inside the device */
			uint64_t s = start & ~4095ull;
			uint64_t e = (start + len + 4095) & ~4095ull;

			if (e > size)
				e = size;
			if (s < e && save_range(in, out, buf, s, e - s, &data, dev, img))
				return 1;
		}
		if (!feof(rf)) {
			fprintf(stderr, "devimage: %s: not START LENGTH lines\n", ranges);
			return 1;
		}
		fclose(rf);
	}
	if (ftruncate(out, size) || fsync(out))
		return fail("finish", img);
	close(out);
	close(in);
	free(buf);
	printf("%llu %.1f\n", (unsigned long long)data, now() - t0);
	return 0;
}

static int do_restore(const char *img, const char *dev)
{
	int in = open(img, O_RDONLY), out = open(dev, O_WRONLY | O_DIRECT);
	uint64_t size, range[2], data = 0;
	off_t pos = 0, end, isize;
	double t0 = now();
	unsigned char *buf;

	if (in < 0)
		return fail("open", img);
	if (out < 0)
		return fail("open", dev);
	if (ioctl(out, BLKGETSIZE64, &size))
		return fail("BLKGETSIZE64", dev);
	isize = lseek(in, 0, SEEK_END);
	if (isize < 0 || (uint64_t)isize != size) {
		fprintf(stderr, "devimage: %s has %lld bytes, %s %llu\n", img,
			(long long)isize, dev, (unsigned long long)size);
		return 1;
	}
	range[0] = 0;
	range[1] = size;
	if (ioctl(out, BLKZEROOUT, range))
		return fail("BLKZEROOUT", dev);
	if (posix_memalign((void **)&buf, 4096, PIECE))
		return fail("allocate for", img);
	for (;;) {
		pos = lseek(in, pos, SEEK_DATA);
		if (pos < 0) {
			if (errno == ENXIO)
				break;	/* no data after pos */
			return fail("SEEK_DATA in", img);
		}
		end = lseek(in, pos, SEEK_HOLE);
		if (end < 0)
			return fail("SEEK_HOLE in", img);
		/* O_DIRECT wants 4 KiB alignment; the image's blocks are 64 KiB */
		pos &= ~(off_t)4095;
		end = (end + 4095) & ~(off_t)4095;
		while (pos < end) {
			size_t n = end - pos < PIECE ? end - pos : PIECE;

			if (pread(in, buf, n, pos) != (ssize_t)n)
				return fail("read", img);
			if (pwrite(out, buf, n, pos) != (ssize_t)n)
				return fail("write", dev);
			data += n;
			pos += n;
		}
	}
	if (fsync(out))
		return fail("flush", dev);
	close(out);
	close(in);
	free(buf);
	printf("%llu %.1f\n", (unsigned long long)data, now() - t0);
	return 0;
}

static int do_btrfs_ranges(const char *mnt)
{
	struct raw_btrfs_chunk *chunks;
	size_t n, i;
	unsigned s;

	if (raw_btrfs_chunks(mnt, &chunks, &n))
		return fail("read the chunk tree of", mnt);
	printf("0 1048576\n%llu 4096\n", 64ull << 20);
	for (i = 0; i < n; i++)
		for (s = 0; s < chunks[i].nstripes; s++) {
			if (chunks[i].devid[s] != 1) {
				fprintf(stderr, "devimage: %s: more than one device\n", mnt);
				return 1;
			}
			printf("%llu %llu\n", (unsigned long long)chunks[i].physical[s],
			       (unsigned long long)chunks[i].length);
		}
	free(chunks);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "save") == 0)
		return do_save(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (argc == 3 && strcmp(argv[1], "btrfs-ranges") == 0)
		return do_btrfs_ranges(argv[2]);
	if (argc == 4 && strcmp(argv[1], "restore") == 0)
		return do_restore(argv[2], argv[3]);
	fprintf(stderr, "usage: %s save DEV IMG [RANGES] | restore IMG DEV | btrfs-ranges MNT\n",
		argv[0]);
	return 2;
}
