// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_sanity - unencrypted btrfs basics: big file round trip, subvolume +
 * snapshot isolation (and a read-only snapshot), reflinks with FICLONERANGE
 * and FICLONE (shared extents, copy-on-write), then `btrfs check`.
 */
#include "lab.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#define BTRFS_FIRST_FREE_OBJECTID 256	/* inode number of a subvolume root */
#define KiB 1024u
#define MiB (1024u * 1024u)

static const char *dev, *mnt;

/* Create @path with @len bytes and fsync it.  Returns 1 on success. */
static int create_synced(const char *path, const void *buf, size_t len)
{
	return CHECK_OK(write_file(path, buf, len), "write_file(%s)", path) &&
	       CHECK_OK(fsync_path(path), "fsync(%s)", path);
}

/* pwrite @len bytes of @buf at @off into @path and fsync.  1 on success. */
static int overwrite_synced(const char *path, const void *buf, size_t len,
			    off_t off)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ok;

	if (!CHECK_OK(fd, "open(%s, O_WRONLY)", path))
		return 0;
	ok = CHECK_OK(pwrite_all(fd, buf, len, off), "pwrite(%s)", path) &&
	     CHECK_OK(fsync(fd), "fsync(%s)", path);
	close(fd);
	return ok;
}

static void drop_caches(void)
{
	CHECK_OK(lab_drop_caches("3"), "echo 3 > /proc/sys/vm/drop_caches");
}

/* ---- big file -------------------------------------------------------------- */

static void test_big_file(void)
{
	size_t len = 4 * MiB + 1234;
	unsigned char *buf = lab_pattern(len, 1);
	char path[PATH_MAX];

	printf("== big file\n");
	PATHF(path, "%s/big", mnt);
	if (create_synced(path, buf, len)) {
		CHECK_FILE_EQUALS(path, buf, len);
		drop_caches();
		CHECK_FILE_EQUALS(path, buf, len);
	}
	free(buf);
}

/* ---- subvolumes and snapshots ---------------------------------------------- */

/* @path must be a subvolume root: inode 256 on its own (anonymous) st_dev. */
static void check_is_subvolume(const char *path)
{
	struct stat st, root;

	if (!CHECK_OK(stat(path, &st), "stat(%s)", path) ||
	    !CHECK_OK(stat(mnt, &root), "stat(%s)", mnt))
		return;
	CHECK(S_ISDIR(st.st_mode), "%s: expected a directory", path);
	CHECK(st.st_ino == BTRFS_FIRST_FREE_OBJECTID,
	      "%s: subvolume root inode expected %d, got %llu", path,
	      BTRFS_FIRST_FREE_OBJECTID, (unsigned long long)st.st_ino);
	CHECK(st.st_dev != root.st_dev,
	      "%s: st_dev expected to differ from the top subvolume's (0x%llx)",
	      path, (unsigned long long)root.st_dev);
}

struct snap_paths {
	char subvol[PATH_MAX], snap[PATH_MAX], rosnap[PATH_MAX];
	char file[PATH_MAX], snap_file[PATH_MAX], rosnap_file[PATH_MAX];
	char later[PATH_MAX], snap_later[PATH_MAX];
};

static void snap_paths_init(struct snap_paths *p)
{
	PATHF(p->subvol, "%s/subvol", mnt);
	PATHF(p->snap, "%s/snap", mnt);
	PATHF(p->rosnap, "%s/snap-ro", mnt);
	PATHF(p->file, "%s/data", p->subvol);
	PATHF(p->snap_file, "%s/data", p->snap);
	PATHF(p->rosnap_file, "%s/data", p->rosnap);
	PATHF(p->later, "%s/created-after-snapshot", p->subvol);
	PATHF(p->snap_later, "%s/created-after-snapshot", p->snap);
}

/* The read-only snapshot refuses writes with EROFS. */
static void check_rosnap(const struct snap_paths *p, const void *content,
			 size_t len)
{
	int fd, err;

	check_is_subvolume(p->rosnap);
	CHECK_FILE_EQUALS(p->rosnap_file, content, len);
	errno = 0;
	fd = open(p->rosnap_file, O_WRONLY | O_CLOEXEC);
	err = errno;
	if (fd >= 0)
		close(fd);
	EXPECT_ERRNO(fd, err, EROFS, "open(%s, O_WRONLY) in a read-only snapshot",
		     p->rosnap_file);
}

static void test_subvol_snapshot(void)
{
	size_t len = 256 * KiB + 77, mod_len = 8 * KiB;
	off_t mod_off = 4 * KiB;
	unsigned char *orig = lab_pattern(len, 2), *mod = lab_pattern(mod_len, 3);
	unsigned char *changed = lab_xmalloc(len);
	struct snap_paths p;
	struct stat st;

	printf("== subvolume and snapshots\n");
	snap_paths_init(&p);
	memcpy(changed, orig, len);
	memcpy(changed + mod_off, mod, mod_len);
	if (!CHECK(run("btrfs subvolume create %s", p.subvol) == 0,
		   "btrfs subvolume create %s", p.subvol))
		goto out;
	check_is_subvolume(p.subvol);
	if (!create_synced(p.file, orig, len))
		goto out;
	if (!CHECK(run("btrfs subvolume snapshot %s %s", p.subvol, p.snap) == 0,
		   "btrfs subvolume snapshot %s %s", p.subvol, p.snap))
		goto out;
	check_is_subvolume(p.snap);
	CHECK_FILE_EQUALS(p.snap_file, orig, len);

	/* Changing the original must not show through the snapshot. */
	if (overwrite_synced(p.file, mod, mod_len, mod_off)) {
		CHECK_FILE_EQUALS(p.file, changed, len);
		CHECK_FILE_EQUALS(p.snap_file, orig, len);
	}
	if (create_synced(p.later, mod, mod_len))
		CHECK_ERRNO(stat(p.snap_later, &st), ENOENT,
			    "stat(%s): file created after the snapshot",
			    p.snap_later);

	if (CHECK(run("btrfs subvolume snapshot -r %s %s", p.subvol,
		      p.rosnap) == 0,
		  "btrfs subvolume snapshot -r %s %s", p.subvol, p.rosnap))
		check_rosnap(&p, changed, len);

	drop_caches();
	CHECK_FILE_EQUALS(p.file, changed, len);
	CHECK_FILE_EQUALS(p.snap_file, orig, len);
out:
	free(orig);
	free(mod);
	free(changed);
}

/* ---- reflinks ---------------------------------------------------------------- */

/* Every extent of @fd is reported as shared, and they cover @len bytes. */
static void check_all_extents_shared(int fd, const char *path, size_t len)
{
	const unsigned int max = 64;
	size_t sz = sizeof(struct fiemap) + max * sizeof(struct fiemap_extent);
	struct fiemap *fm = lab_xmalloc(sz);
	unsigned long long covered = 0;
	unsigned int i;

	memset(fm, 0, sz);
	fm->fm_start = 0;
	fm->fm_length = FIEMAP_MAX_OFFSET;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = max;
	if (!CHECK_OK(ioctl(fd, FS_IOC_FIEMAP, fm), "FS_IOC_FIEMAP on %s", path))
		goto out;
	CHECK(fm->fm_mapped_extents >= 1 && fm->fm_mapped_extents <= max,
	      "%s: expected 1..%u mapped extents, got %u", path, max,
	      fm->fm_mapped_extents);
	for (i = 0; i < fm->fm_mapped_extents && i < max; i++) {
		const struct fiemap_extent *fe = &fm->fm_extents[i];

		covered += fe->fe_length;
		CHECK(fe->fe_flags & FIEMAP_EXTENT_SHARED,
		      "%s: extent %u (logical %llu, length %llu, flags 0x%x) not shared after FICLONE",
		      path, i, (unsigned long long)fe->fe_logical,
		      (unsigned long long)fe->fe_length, fe->fe_flags);
	}
	CHECK(covered >= len, "%s: extents cover %llu bytes, expected >= %zu",
	      path, covered, len);
out:
	free(fm);
}

/* Open (creating/truncating) a clone destination. */
static int open_dst(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	CHECK_OK(fd, "open(%s, O_CREAT)", path);
	return fd;
}

static int clone_range(int dst, int src, off_t src_off, size_t len,
		       off_t dst_off)
{
	struct file_clone_range r;

	memset(&r, 0, sizeof(r));
	r.src_fd = src;
	r.src_offset = (unsigned long long)src_off;
	r.src_length = len;
	r.dest_offset = (unsigned long long)dst_off;
	return ioctl(dst, FICLONERANGE, &r);
}

/* FICLONERANGE of an aligned range; then overwrite the source (CoW). */
static void test_clone_range(int srcfd, const char *src, unsigned char *cur)
{
	const size_t off = 64 * KiB, len = 256 * KiB, size = 1 * MiB;
	unsigned char *old = lab_xmalloc(len), *newdata = lab_pattern(len, 5);
	char dst[PATH_MAX];
	int dstfd;

	PATHF(dst, "%s/clone-range-dst", mnt);
	memcpy(old, cur + off, len);
	dstfd = open_dst(dst);
	if (dstfd < 0)
		goto out;
	if (CHECK_OK(clone_range(dstfd, srcfd, (off_t)off, len, 0),
		     "FICLONERANGE %s[%zu,+%zu) -> %s", src, off, len, dst))
		CHECK_FILE_EQUALS(dst, old, len);
	close(dstfd);

	if (overwrite_synced(src, newdata, len, (off_t)off)) {
		memcpy(cur + off, newdata, len);
		CHECK_FILE_EQUALS(src, cur, size);
		CHECK_FILE_EQUALS(dst, old, len);
		drop_caches();
		CHECK_FILE_EQUALS(src, cur, size);
		CHECK_FILE_EQUALS(dst, old, len);
	}
out:
	free(old);
	free(newdata);
}

/* Unaligned source offsets are rejected with EINVAL. */
static void test_clone_unaligned(int srcfd)
{
	char dst[PATH_MAX];
	int dstfd;

	PATHF(dst, "%s/clone-unaligned-dst", mnt);
	dstfd = open_dst(dst);
	if (dstfd < 0)
		return;
	CHECK_ERRNO(clone_range(dstfd, srcfd, 100, 64 * KiB, 0), EINVAL,
		    "FICLONERANGE with unaligned source offset 100");
	close(dstfd);
}

/* FICLONE of the whole file: same bytes, shared extents, CoW on overwrite. */
static void test_clone_whole(int srcfd, const char *src, unsigned char *cur)
{
	const size_t size = 1 * MiB, len = 128 * KiB;
	unsigned char *copy = lab_xmalloc(size), *newdata = lab_pattern(len, 6);
	char dst[PATH_MAX];
	int dstfd;

	PATHF(dst, "%s/clone-whole-dst", mnt);
	memcpy(copy, cur, size);
	dstfd = open_dst(dst);
	if (dstfd < 0)
		goto out;
	if (CHECK_OK(ioctl(dstfd, FICLONE, srcfd), "FICLONE %s -> %s", src,
		     dst)) {
		CHECK_FILE_EQUALS(dst, copy, size);
		check_all_extents_shared(dstfd, dst, size);
	}
	close(dstfd);

	if (overwrite_synced(src, newdata, len, 0)) {
		memcpy(cur, newdata, len);
		CHECK_FILE_EQUALS(src, cur, size);
		CHECK_FILE_EQUALS(dst, copy, size);
		drop_caches();
		CHECK_FILE_EQUALS(dst, copy, size);
	}
out:
	free(copy);
	free(newdata);
}

static void test_reflink(void)
{
	const size_t size = 1 * MiB;
	unsigned char *cur = lab_pattern(size, 4);	/* current source content */
	char src[PATH_MAX];
	int srcfd;

	printf("== reflink\n");
	PATHF(src, "%s/clone-src", mnt);
	if (!create_synced(src, cur, size))
		goto out;
	srcfd = open(src, O_RDONLY | O_CLOEXEC);
	if (!CHECK_OK(srcfd, "open(%s)", src))
		goto out;
	test_clone_range(srcfd, src, cur);
	test_clone_unaligned(srcfd);
	test_clone_whole(srcfd, src, cur);
	close(srcfd);
out:
	free(cur);
}

/* ---- driver ------------------------------------------------------------------ */

static void setup(void)
{
	int st;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	st = lab_mkfs("mkfs.btrfs -q -f", dev);
	if (st == 127)
		lab_skip("mkfs.btrfs not found (install btrfs-progs)");
	if (st != 0)
		lab_die("mkfs.btrfs failed with status %d", st);
	if (lab_mount(dev, mnt, "btrfs", NULL) != 0) {
		if (errno == ENODEV)
			lab_skip("kernel does not support btrfs");
		lab_die("cannot mount %s", dev);
	}
}

int main(void)
{
	setup();
	test_big_file();
	test_subvol_snapshot();
	test_reflink();
	if (CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		CHECK(run("btrfs check --readonly %s", dev) == 0,
		      "btrfs check --readonly %s", dev);
	return lab_result("btrfs_sanity");
}
