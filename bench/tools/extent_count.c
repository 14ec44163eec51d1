// SPDX-License-Identifier: GPL-2.0
/*
 * extent_count [-s] FILE...: print "<extents> <file>" for each file, counting
 * the extents FIEMAP reports (raw_fiemap() of tests/lib/rawdev.c, which
 * syncs the file first, so delayed allocation has happened). With -s, print
 * "<extents> <shared> <file>", where <shared> is the number of those
 * extents flagged FIEMAP_EXTENT_SHARED (shared with a reflinked copy or a
 * snapshot). Exit status 1 if any file could not be mapped, 2 on a usage
 * error.
 */
#include <linux/fiemap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawdev.h"

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
		struct raw_extent *ext;
		size_t n, j, shared = 0;

		if (raw_fiemap(argv[i], &ext, &n)) {
			fprintf(stderr, "extent_count: %s: %m\n", argv[i]);
			ret = 1;
			continue;
		}
		for (j = 0; j < n; j++)
			if (ext[j].flags & FIEMAP_EXTENT_SHARED)
				shared++;
		if (show_shared)
			printf("%zu %zu %s\n", n, shared, argv[i]);
		else
			printf("%zu %s\n", n, argv[i]);
		free(ext);
	}
	return ret;
}
