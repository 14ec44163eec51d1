// SPDX-License-Identifier: GPL-2.0
/*
 * fscrypt_raw_scan.c - no plaintext of an encrypted directory reaches the
 * device.
 *
 *  1. mkfs, mount, add a random master key, set a v2 policy on an empty
 *     directory;
 *  2. in it: files holding a 64-byte marker (unique to this run) repeated
 *     over MiBs, at an odd stride so that copies straddle blocks, and in
 *     small files (which btrfs may store inline in its metadata); names and
 *     a symlink target carrying the run's tag, one name 200 bytes long, a
 *     subdirectory with a file;
 *  3. read everything back (the files really hold the marker), fsync each
 *     file and directory, sync, unmount;
 *  4. scan the whole device (O_DIRECT): the marker, the tag, every name and
 *     the symlink target must occur 0 times;
 *  5. control: mount again, write the very same tree into an unencrypted
 *     directory, unmount, scan again: now every one of them must be found
 *     (the marker at least as often as it was written), or the scan is
 *     blind and step 4 proved nothing.
 *
 * The tag and marker are random per run, so data that earlier tests or runs
 * left on the scratch device cannot be mistaken for a leak.
 */
#include "btrfs_progs.h"
#include "fscrypt_ondisk.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define RS_MARKER_LEN 64
#define RS_TAG_HEX 16
#define RS_LONG_NAME_LEN 200
#define RS_MAX_FILES 8
#define MiB (1024u * 1024u)

struct rs_file {
	char rel[2 * NAME_MAX + 2];	/* relative to the top directory */
	size_t size;
	unsigned char *data;
	size_t copies;			/* marker copies in data */
};

struct rs_ctx {
	const struct lab_fscrypt_fs *fs;
	const char *dev, *mnt;
	char tag[RS_TAG_HEX + 1];
	char marker[RS_MARKER_LEN + 1];
	char subdir[NAME_MAX + 1], link[NAME_MAX + 1], target[NAME_MAX + 1];
	struct rs_file files[RS_MAX_FILES];
	size_t nfiles;
	size_t total_copies;
};

enum rs_fill { RS_REPEAT, RS_STRIDE };

static void rs_add_file(struct rs_ctx *c, const char *rel, size_t size,
			enum rs_fill fill, size_t stride, size_t first)
{
	struct rs_file *f = &c->files[c->nfiles++];
	size_t off;

	PATHF(f->rel, "%s", rel);
	f->size = size;
	f->data = lab_xmalloc(size);
	if (fill == RS_REPEAT) {
		stamp_marker(f->data, size, c->marker, RS_MARKER_LEN, RS_MARKER_LEN);
	} else {
		lab_random(f->data, size);
		for (off = first; off + RS_MARKER_LEN <= size; off += stride)
			memcpy(f->data + off, c->marker, RS_MARKER_LEN);
	}
	f->copies = count_occurrences(f->data, size, c->marker, RS_MARKER_LEN);
	c->total_copies += f->copies;
}

static void rs_plan(struct rs_ctx *c)
{
	char rel[2 * NAME_MAX + 2], name[NAME_MAX + 1];
	size_t n;

	lab_random_hex(c->tag, RS_TAG_HEX / 2);
	/* exactly 64 bytes, the tag in it */
	n = (size_t)snprintf(c->marker, sizeof(c->marker),
			     "<fscrypt-lab-PLAINTEXT-MARKER:%s:", c->tag);
	while (n < RS_MARKER_LEN) {
		c->marker[n] = (char)('A' + n % 26);
		n++;
	}
	c->marker[RS_MARKER_LEN] = '\0';
	PATHF(c->subdir, "rs-%s-subdirectory", c->tag);
	PATHF(c->link, "rs-%s-symlink", c->tag);
	PATHF(c->target, "rs-%s-symlink-target-says-this-in-plaintext", c->tag);

	PATHF(rel, "rs-%s-big-repeated", c->tag);
	rs_add_file(c, rel, 3 * MiB, RS_REPEAT, 0, 0);
	PATHF(rel, "rs-%s-big-odd-stride", c->tag);
	rs_add_file(c, rel, 2 * MiB + 100, RS_STRIDE, 4099, 4000);
	PATHF(rel, "rs-%s-small-100", c->tag);
	rs_add_file(c, rel, 100, RS_STRIDE, 1000, 20);
	PATHF(rel, "rs-%s-small-3000", c->tag);
	rs_add_file(c, rel, 3000, RS_STRIDE, 200, 0);
	/* a 200-byte name, the file holding just the marker */
	n = (size_t)snprintf(name, sizeof(name), "rs-%s-long-name-", c->tag);
	while (n < RS_LONG_NAME_LEN) {
		name[n] = (char)('a' + n % 26);
		n++;
	}
	name[n] = '\0';
	rs_add_file(c, name, RS_MARKER_LEN, RS_REPEAT, 0, 0);
	PATHF(rel, "%s/rs-%s-inner", c->subdir, c->tag);
	rs_add_file(c, rel, 1 * MiB, RS_REPEAT, 0, 0);
	printf("run tag %s; marker \"%s\"; %zu marker copies in %zu files\n",
	       c->tag, c->marker, c->total_copies, c->nfiles);
}

/* Write the tree under @top, read it back, fsync everything. */
static void rs_write_tree(const struct rs_ctx *c, const char *top)
{
	char path[PATH_MAX], sub[PATH_MAX];
	unsigned char *got;
	size_t i, len;

	PATHF(sub, "%s/%s", top, c->subdir);
	if (!CHECK_OK(mkdir(sub, 0755), "mkdir %s", sub))
		lab_die("cannot create %s", sub);
	for (i = 0; i < c->nfiles; i++) {
		const struct rs_file *f = &c->files[i];

		PATHF(path, "%s/%s", top, f->rel);
		if (!CHECK_OK(write_file(path, f->data, f->size), "write %s", path) ||
		    !CHECK_OK(fsync_path(path), "fsync %s", path))
			lab_die("cannot write the test files");
	}
	PATHF(path, "%s/%s", top, c->link);
	CHECK_OK(symlink(c->target, path), "symlink %s", path);
	CHECK_OK(fsync_path(sub), "fsync %s", sub);
	CHECK_OK(fsync_path(top), "fsync %s", top);
	sync();
	/* The files really hold the marker (so 0 on the device means something). */
	for (i = 0; i < c->nfiles; i++) {
		const struct rs_file *f = &c->files[i];

		PATHF(path, "%s/%s", top, f->rel);
		got = read_file(path, &len);
		if (!CHECK(got != NULL, "reading back %s: " LAB_ERR_FMT, path,
			   LAB_ERR_ARGS(errno)))
			continue;
		CHECK(len == f->size && memcmp(got, f->data, len) == 0,
		      "%s does not read back as written", path);
		CHECK(count_occurrences(got, len, c->marker, RS_MARKER_LEN) == f->copies,
		      "%s: expected %zu marker copies when read through the filesystem",
		      path, f->copies);
		free(got);
	}
}

/*
 * The strings looked for: the run's tag first (every other one contains it,
 * so the scan searches only for it: raw_scan_anchored()), then the marker,
 * every name and the symlink target.
 */
static size_t rs_needles(const struct rs_ctx *c, struct raw_needle *nd,
			 size_t max)
{
	size_t n = 0, i;
	const char *base;

	if (max < c->nfiles + 5)
		lab_die("needle array too small");
	memset(nd, 0, max * sizeof(*nd));
	nd[n++] = (struct raw_needle){ .label = "run tag", .data = c->tag, .len = RS_TAG_HEX };
	nd[n++] = (struct raw_needle){ .label = "data marker", .data = c->marker, .len = RS_MARKER_LEN };
	nd[n++] = (struct raw_needle){ .label = "subdirectory name", .data = c->subdir, .len = strlen(c->subdir) };
	nd[n++] = (struct raw_needle){ .label = "symlink name", .data = c->link, .len = strlen(c->link) };
	nd[n++] = (struct raw_needle){ .label = "symlink target", .data = c->target, .len = strlen(c->target) };
	for (i = 0; i < c->nfiles; i++) {
		base = strrchr(c->files[i].rel, '/');
		base = base ? base + 1 : c->files[i].rel;
		nd[n++] = (struct raw_needle){ .label = "file name", .data = base, .len = strlen(base) };
	}
	return n;
}

static int rs_scan(const struct rs_ctx *c, struct raw_needle *nd, size_t n,
		   const char *what)
{
	size_t i;

	printf("== scan %s (%s)\n", c->dev, what);
	if (!CHECK_OK(raw_scan_anchored(c->dev, nd, n), "scanning %s", c->dev))
		return -1;
	for (i = 0; i < n; i++) {
		printf("  %-18s %.40s%s: %lld", nd[i].label, (const char *)nd[i].data,
		       nd[i].len > 40 ? "..." : "", nd[i].count);
		if (nd[i].count)
			printf(", first at device offset %llu",
			       (unsigned long long)nd[i].offs[0]);
		printf("\n");
	}
	return 0;
}

int fscrypt_raw_scan_test(const struct lab_fscrypt_fs *fs)
{
	static struct rs_ctx ctx;
	struct rs_ctx *c = &ctx;
	struct raw_needle nd[RS_MAX_FILES + 5];
	uint8_t mk[64], id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char enc[PATH_MAX], plain[PATH_MAX], title[128];
	size_t n, i;

	c->fs = fs;
	c->dev = lab_env("SCRATCH_DEV");
	c->mnt = lab_env("SCRATCH_MNT");
	printf("fscrypt raw device scan on %s (%s on %s, mkfs \"%s\")\n",
	       fs->name, c->dev, c->mnt, fs->mkfs_cmd);
	rs_plan(c);
	lab_random(mk, sizeof(mk));
	lab_fscrypt_fs_setup(fs, c->dev, c->mnt, NULL, mk, sizeof(mk), id);

	printf("== encrypted directory\n");
	PATHF(enc, "%s/enc", c->mnt);
	if (!CHECK_OK(mkdir(enc, 0755), "mkdir %s", enc) ||
	    !CHECK_OK(lab_set_policy(enc, id), "FS_IOC_SET_ENCRYPTION_POLICY on %s", enc))
		lab_die("cannot make the encrypted directory");
	rs_write_tree(c, enc);
	if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
		lab_die("cannot unmount");
	n = rs_needles(c, nd, sizeof(nd) / sizeof(nd[0]));
	if (rs_scan(c, nd, n, "encrypted tree only") == 0)
		for (i = 0; i < n; i++)
			CHECK(nd[i].count == 0, "plaintext %s \"%.60s\" of the encrypted directory is on %s %lld time(s), first at device offset %llu",
			      nd[i].label, (const char *)nd[i].data, c->dev, nd[i].count,
			      (unsigned long long)nd[i].offs[0]);

	printf("== control: the same tree in an unencrypted directory\n");
	if (lab_fscrypt_fs_mount(fs, c->dev, c->mnt, NULL) != 0)
		lab_die("cannot mount %s again", c->dev);
	PATHF(plain, "%s/plain", c->mnt);
	if (!CHECK_OK(mkdir(plain, 0755), "mkdir %s", plain))
		lab_die("cannot make the control directory");
	rs_write_tree(c, plain);
	if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
		lab_die("cannot unmount");
	if (rs_scan(c, nd, n, "after the unencrypted control") == 0) {
		CHECK(nd[1].count >= (long long)c->total_copies,
		      "control: the marker was written %zu times in plaintext but the scan finds it %lld times: the scan is blind, the encrypted result proves nothing",
		      c->total_copies, nd[1].count);
		for (i = 0; i < n; i++)
			if (i != 1)	/* the marker: checked above */
				CHECK(nd[i].count >= 1, "control: plaintext %s \"%.60s\" was written unencrypted but the scan does not find it: the scan is blind",
				      nd[i].label, (const char *)nd[i].data);
	}
	for (i = 0; i < c->nfiles; i++)
		free(c->files[i].data);
	if (strcmp(fs->name, "btrfs") == 0)
		lab_btrfs_check_clean(c->dev, "the scanned filesystem (encrypted and control trees)");
	PATHF(title, "fscrypt raw device scan on %s", fs->name);
	return lab_result(title);
}
