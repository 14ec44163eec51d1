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

int lab_btrfs_check_clean(const char *dev, const char *what)
{
	char *out = NULL;
	int st, ok;

	if (!need_patched_progs(what))
		return 0;
	printf("btrfs check --readonly of %s (%s), unmounted:\n", what, dev);
	st = lab_run_capture("btrfs check --readonly", dev, &out);
	ok = CHECK(st == 0 && out && strstr(out, "no error found"),
		   "btrfs check --readonly %s (%s): exit status %d, not clean (output above)",
		   dev, what, st);
	free(out);
	return ok;
}
