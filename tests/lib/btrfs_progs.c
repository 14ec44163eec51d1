// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_progs.c - running the image's patched btrfs-progs; see btrfs_progs.h.
 */
#include "btrfs_progs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lab.h"

int lab_run_capture(const char *cmd, const char *dev, char **out)
{
	char full[1024], line[4096];
	size_t len = 0, cap = 0;
	char *buf = NULL;
	FILE *p;
	int st;

	if (out)
		*out = NULL;
	if (dev)
		PATHF(full, "%s %s 2>&1", cmd, dev);
	else
		PATHF(full, "%s 2>&1", cmd);
	printf("+ %s\n", full);
	fflush(stdout);
	p = popen(full, "r");
	if (!p) {
		printf("popen failed: " LAB_ERR_FMT "\n", LAB_ERR_ARGS(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), p)) {
		size_t n = strlen(line);

		printf("  | %s%s", line, n && line[n - 1] == '\n' ? "" : "\n");
		if (len + n + 1 > cap) {
			cap = (len + n + 1) * 2;
			buf = realloc(buf, cap);
			if (!buf)
				lab_die("out of memory");
		}
		memcpy(buf + len, line, n);
		len += n;
		buf[len] = '\0';
	}
	st = pclose(p);
	st = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	printf("  exit status %d\n", st);
	if (!buf)
		buf = calloc(1, 1);
	if (out)
		*out = buf;
	else
		free(buf);
	return st;
}

int lab_btrfs_progs_patched(char *why, size_t size)
{
	char *out = NULL;
	int st, ok;

	st = lab_run_capture("btrfs version", NULL, &out);
	ok = st == 0 && out && strstr(out, LAB_BTRFS_PROGS_TAG);
	if (!ok) {
		snprintf(why, size,
			 "the image has no patched btrfs-progs (`btrfs version` exit %d: %.80s); rebuild it with make image",
			 st, out && *out ? strtok(out, "\n") : "no output");
	} else if (!strstr(out, LAB_BTRFS_PROGS_EXTENT_CTX_TAG)) {
		ok = 0;
		snprintf(why, size,
			 "the image's patched btrfs-progs predate the 6.12 format, ENCRYPT bit 40 (`btrfs version`: %.100s); rebuild it with make image",
			 strtok(out, "\n"));
	}
	free(out);
	return ok;
}

/* Skip (or, if the test already failed, let that stand) without them. */
static int need_patched_progs(const char *what)
{
	char why[256];

	if (lab_btrfs_progs_patched(why, sizeof(why)))
		return 1;
	if (lab_failures) {
		printf("NOTE: cannot check %s: %s\n", what, why);
		return 0;
	}
	lab_skip("cannot check %s with btrfs check: %s", what, why);
}

int lab_btrfs_progs_output(const char *args, const char *dev, char **out)
{
	char cmd[256];

	if (!need_patched_progs(dev)) {
		*out = calloc(1, 1);
		return -1;
	}
	PATHF(cmd, "btrfs %s", args);
	return lab_run_capture(cmd, dev, out);
}

int lab_btrfs_check_output(const char *dev, char **out)
{
	return lab_btrfs_progs_output("check --readonly", dev, out);
}

int lab_btrfs_check_errors(const char *dev)
{
	char *out = NULL, *line, *save = NULL;
	int st, n = 0;

	st = lab_btrfs_check_output(dev, &out);
	if (st == 0 && out && strstr(out, "no error found")) {
		free(out);
		return 0;
	}
	for (line = out ? strtok_r(out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		if ((strstr(line, "ERROR") || strstr(line, "error")) &&
		    !strstr(line, "no error found"))
			n++;
	free(out);
	return n ? n : 1;
}

/*
 * In `btrfs version` of the programs whose lowmem mode verifies fscrypt as
 * the original mode does (patch 0010 of patches/btrfs-progs/); older ones'
 * lowmem mode passes what the original mode refuses.
 */
#define LAB_BTRFS_PROGS_LOWMEM_TAG "lowmem check"

/* Is @line (without its newline) one of the lines of @buf? */
static int has_line(const char *buf, const char *line, size_t len)
{
	const char *p = buf;

	while ((p = strstr(p, line))) {
		if ((p == buf || p[-1] == '\n') &&
		    (p[len] == '\n' || p[len] == '\0'))
			return 1;
		p += len;
	}
	return 0;
}

/*
 * The first fscrypt error line of check's output @a ("ERROR: root R inode
 * I ..." or "ERROR: root R dir I ...", which both modes print alike) that
 * @b lacks, copied to @line; 0 if none.
 */
static int fscrypt_error_only_in(const char *a, const char *b, char *line,
				 size_t size)
{
	const char *p, *end;
	size_t len;
	unsigned long long r, i;
	char kind[8];

	for (p = a; p && *p; p = end ? end + 1 : NULL) {
		end = strchr(p, '\n');
		len = end ? (size_t)(end - p) : strlen(p);
		if (sscanf(p, "ERROR: root %llu %7[a-z] %llu", &r, kind, &i) != 3 ||
		    (strcmp(kind, "inode") && strcmp(kind, "dir")))
			continue;
		snprintf(line, size, "%.*s", (int)len, p);
		if (len < size && !has_line(b, line, len))
			return 1;
	}
	return 0;
}

int lab_btrfs_check_clean(const char *dev, const char *what)
{
	char *out = NULL, *low = NULL, *ver = NULL;
	char line[512];
	int st, st_low, lowmem, ok;

	if (!need_patched_progs(what))
		return 0;
	printf("btrfs check --readonly of %s (%s), unmounted, original mode:\n", what, dev);
	st = lab_run_capture("btrfs check --readonly", dev, &out);
	ok = CHECK(st == 0 && out && strstr(out, "no error found"),
		   "btrfs check --readonly (original mode) %s (%s): exit status %d, not clean (output above)",
		   dev, what, st);

	/*
	 * Lowmem mode must say the same: each mode is what some user runs,
	 * and the series makes them check fscrypt alike.  Cheap on the tests'
	 * small filesystems, even under emulation.
	 */
	lab_run_capture("btrfs version", NULL, &ver);
	lowmem = ver && strstr(ver, LAB_BTRFS_PROGS_LOWMEM_TAG);
	free(ver);
	if (!lowmem) {
		printf("NOTE: lowmem mode not run: the image's btrfs-progs predate its fscrypt checks (no \"%s\" in btrfs version); rebuild it with make image\n",
		       LAB_BTRFS_PROGS_LOWMEM_TAG);
		free(out);
		return ok;
	}
	printf("btrfs check --readonly --mode lowmem of %s (%s):\n", what, dev);
	st_low = lab_run_capture("btrfs check --readonly --mode lowmem", dev, &low);
	ok &= CHECK(st_low == 0 && low && strstr(low, "no error found"),
		    "btrfs check --readonly --mode lowmem %s (%s): exit status %d, not clean (output above)",
		    dev, what, st_low);
	ok &= CHECK(st == st_low,
		    "btrfs check %s (%s): the modes disagree: original mode exits %d, lowmem mode %d",
		    dev, what, st, st_low);
	if (out && low && fscrypt_error_only_in(out, low, line, sizeof(line)))
		ok &= CHECK(0, "btrfs check %s (%s): the modes disagree: only the original mode reports \"%s\"",
			    dev, what, line);
	if (out && low && fscrypt_error_only_in(low, out, line, sizeof(line)))
		ok &= CHECK(0, "btrfs check %s (%s): the modes disagree: only lowmem mode reports \"%s\"",
			    dev, what, line);
	free(out);
	free(low);
	return ok;
}
