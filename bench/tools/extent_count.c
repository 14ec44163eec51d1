// SPDX-License-Identifier: GPL-2.0
/*
 * extent_count [-s] FILE...: print "<extents> <file>" for each file, counting
 * the extents FIEMAP reports (after syncing the file, so delayed allocation
 * has happened). With -s, print "<extents> <shared> <file>", where <shared>
 * is the number of those extents flagged FIEMAP_EXTENT_SHARED (shared with
 * a reflinked copy or a snapshot). Exit status 1 if any file could not be
 * mapped, 2 on a usage error.
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define BATCH 1024

/* Number of extents of @fd (and of shared ones in @shared), or -1. */
static long long count_extents(int fd, long long *shared)
{
	size_t size = sizeof(struct fiemap) + BATCH * sizeof(struct fiemap_extent);
	struct fiemap *fm = calloc(1, size);
	unsigned long long start = 0;
	long long count = 0;

	*shared = 0;
	if (!fm)
		return -1;
	for (;;) {
		struct fiemap_extent *last;
		unsigned int i;

		memset(fm, 0, size);
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			free(fm);
			return -1;
		}
		if (fm->fm_mapped_extents == 0)
			break;
		count += fm->fm_mapped_extents;
		for (i = 0; i < fm->fm_mapped_extents; i++)
			if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_SHARED)
				(*shared)++;
		last = &fm->fm_extents[fm->fm_mapped_extents - 1];
		if (last->fe_flags & FIEMAP_EXTENT_LAST)
			break;
		start = last->fe_logical + last->fe_length;
	}
	free(fm);
	return count;
}

int main(int argc, char **argv)
{
	int i, first = 1, show_shared = 0, ret = 0;

	if (argc > 1 && strcmp(argv[1], "-s") == 0) {
		show_shared = 1;
		first = 2;
	}
	if (argc <= first) {
		fprintf(stderr, "usage: %s [-s] FILE...\n", argv[0]);
		return 2;
	}
	for (i = first; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY);
		long long shared = 0;
		long long n = fd < 0 ? -1 : count_extents(fd, &shared);

		if (n < 0) {
			fprintf(stderr, "extent_count: %s: %m\n", argv[i]);
			ret = 1;
		} else if (show_shared) {
			printf("%lld %lld %s\n", n, shared, argv[i]);
		} else {
			printf("%lld %s\n", n, argv[i]);
		}
		if (fd >= 0)
			close(fd);
	}
	return ret;
}
