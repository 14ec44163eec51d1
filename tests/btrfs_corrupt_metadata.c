// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_corrupt_metadata - the damaged btrfs metadata with which the fuzzer
 * (btrfs_fscrypt_fuzz, issue #14) made the kernel warn or BUG, replayed on
 * an UNENCRYPTED btrfs (both bugs are btrfs's, not the encryption's).  Each
 * must give a clean error, and no WARNING, BUG, Oops or failed assertion
 * may appear in the kernel log.  Each case makes its own filesystem (mkfs
 * -m single -b 128M, so that a damaged leaf has no good copy); leaves are
 * changed on the unmounted device with their checksums recomputed, so that
 * the kernel meets the damage itself, not a checksum error.
 *
 *  inc_ref (fuzz image 124, a read-write mount): a subvolume sv of 64
 *    files, a snapshot snap of it, then sv rewritten, so that snap's
 *    leaves are its own (FULL_BACKREF).  One byte of the disk_bytenr of a
 *    regular file extent item in a leaf of snap is changed: it points at
 *    no extent.  Reading snap's files updates their atimes; at the commit
 *    (syncfs), COWing the leaf adds a reference to every extent in it
 *    (btrfs_inc_ref()) and the extent item is not found.  Wanted: the
 *    commit fails (syncfs: EUCLEAN or EIO, or a transaction abort line in
 *    the log), the log names the damaged bytenr ("extent item not found
 *    for insert, bytenr B"), the filesystem is read-only afterwards
 *    (EROFS), it unmounts, and it mounts again (read-only) with sv's files
 *    intact.  Before the fix: WARNING in lookup_inline_extent_backref().
 *
 *  nlink0 (fuzz image 349, a read-only mount): the inode item of a regular
 *    file gets nlink 0.  The file is read on a read-only mount and its
 *    inode evicted (drop_caches), then the filesystem is unmounted.
 *    Wanted: the log says the inode is not deleted ("read-only, not
 *    deleting inode I root 5 with no links"), the unmount goes through,
 *    the read-only mount changed nothing on the device, and the filesystem
 *    mounts again with the file readable.  Before the fix: the eviction
 *    deleted the inode in a transaction that the read-only filesystem never
 *    commits, and at unmount close_ctree() failed ASSERT(!found) (a kernel
 *    BUG with CONFIG_BTRFS_ASSERT: the guest panics).
 *
 *  orphan (the same bug without damage, and orphan cleanup kept): a file is
 *    unlinked while open, and the filesystem is saved with its orphan item
 *    (the image of a crash at that moment) and written back.  On a
 *    read-only mount the orphan inode is opened by a file handle
 *    (open_by_handle_at(), as an NFS server would), read, closed and
 *    evicted: wanted as for nlink0, the inode left alone and the device
 *    unchanged.  Then orphan cleanup must still delete it, once on a
 *    remount from read-only to read-write (which runs orphan cleanup before
 *    the filesystem stops being read-only) and once on a read-write mount:
 *    afterwards neither its inode item nor its orphan item is on disk.
 *
 * On a kernel without the fixes, the console check fails the run (the
 * WARNING of inc_ref; the BUG of nlink0, which ends the boot).  To watch one
 * case alone: BTRFS_CORRUPT_METADATA_ONLY=orphan (a comma-separated list).
 */
#include "btrfs_items.h"
#include "btrfs_raw.h"
#include "lab.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#define DISK_BYTENR_OFF 21	/* in struct btrfs_file_extent_item */
#define NLINK_OFF	40	/* in struct btrfs_inode_item */
#define INODE_ITEM_SIZE	160
#define NFILES		64
#define SNAP_TREE	257	/* sv is subvolume 256, snap 257 */
#define ORPHAN_LEN	65536

static const char *dev, *mnt;

static int selected(const char *name)
{
	const char *only = getenv("BTRFS_CORRUPT_METADATA_ONLY");
	char list[256], item[64];

	if (!only || !*only)
		return 1;
	snprintf(list, sizeof(list), ",%s,", only);
	snprintf(item, sizeof(item), ",%s,", name);
	if (!strstr(list, item)) {
		printf("== %s: not run (BTRFS_CORRUPT_METADATA_ONLY=%s)\n", name, only);
		return 0;
	}
	return 1;
}

/* ---- the kernel log ----------------------------------------------------- */

/* Mark the kernel log: only lines after the mark count for this case. */
static void mark_log(const char *name)
{
	static int n;

	CHECK(lab_log_mark("lab-corrupt-metadata-%s-%d", name, ++n) == 0,
	      "write to /dev/kmsg");
}

/*
 * Show the log since the mark (not btrfs_print_leaf()'s indented item lines)
 * and fail if it holds a splat.
 */
static void expect_clean_log(const char *what)
{
	lab_log_show(40);
	CHECK(!lab_log_has(LAB_LOG_SPLAT_ERE),
	      "%s: the kernel log has a warning, BUG, oops or failed assertion", what);
}

/* ---- making and changing filesystems ------------------------------------ */

static void mkfs_mount(void)
{
	/* lab_mkfs(): with a test configuration's mkfs options too. */
	if (lab_mkfs("mkfs.btrfs -q -f -m single -b 128M", dev) ||
	    lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mkfs or mount of %s failed", dev);
}

/* Read-only, with a test configuration's options too (tests/configs/). */
static int mount_ro(void)
{
	const char *opts = getenv(LAB_BTRFS_MOUNT_OPTS_ENV);

	printf("mount -o ro%s%s %s %s\n", opts ? "," : "", opts ? opts : "", dev,
	       mnt);
	return mount(dev, mnt, "btrfs", MS_RDONLY, opts);
}

/* Append @len bytes of pattern @seed to @rel (under the mount) and fsync. */
static void put(const char *rel, size_t len, uint32_t seed)
{
	char path[PATH_MAX];
	unsigned char *buf = lab_pattern(len, seed);
	int fd;

	PATHF(path, "%s/%s", mnt, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, buf, len) || fsync(fd))
		lab_die("write %s: %s", path, strerror(errno));
	close(fd);
	free(buf);
}

/* Read every file of @dir to the end (their atimes change). */
static void read_dir(const char *dir)
{
	char path[PATH_MAX], buf[65536];
	struct dirent *de;
	DIR *d = opendir(dir);
	int fd;

	if (!CHECK(d != NULL, "opendir %s: " LAB_ERR_FMT, dir, LAB_ERR_ARGS(errno)))
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		PATHF(path, "%s/%s", dir, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
	closedir(d);
}

/*
 * Change the first item of @type in the leaves of tree @tree for which @edit
 * returns 1, and write the leaf back (checksum recomputed).  Dies if there
 * is none.  The filesystem must be unmounted.
 */
typedef int (*edit_fn)(unsigned char *item, uint32_t size,
		       const struct braw_key *key, void *arg);

static void edit_first(uint64_t tree, uint8_t type, edit_fn edit, void *arg)
{
	struct braw_block *b;
	unsigned char *blk;
	struct braw_fs fs;
	size_t n, i;
	uint32_t s;

	if (braw_open(&fs, dev) || braw_live_blocks(&fs, &b, &n))
		lab_die("read the trees of %s: %s", dev, strerror(errno));
	blk = lab_xmalloc(fs.nodesize);
	for (i = 0; i < n; i++) {
		if (b[i].level || b[i].tree != tree || braw_read_block(&fs, b[i].logical, blk))
			continue;
		for (s = 0; s < braw_nritems(blk); s++) {
			struct braw_key k;

			braw_item_key(blk, s, &k);
			if (k.type != type ||
			    !edit(blk + braw_item_start(blk, s), braw_item_size(blk, s), &k, arg))
				continue;
			printf("changed leaf %llu (tree %llu) item %u (%llu %u %llu)\n",
			       (unsigned long long)b[i].logical, (unsigned long long)tree, s,
			       (unsigned long long)k.objectid, k.type,
			       (unsigned long long)k.offset);
			if (braw_write_block(&fs, b[i].logical, blk))
				lab_die("write the leaf: %s", strerror(errno));
			free(blk);
			free(b);
			braw_close(&fs);
			return;
		}
	}
	lab_die("no item of type %u to change in tree %llu", type,
		(unsigned long long)tree);
}

/* What tree 5 holds about inode @ino: its inode item (nlink) and orphan item. */
struct ino_state {
	int inode_item, orphan_item;
	uint32_t nlink;
};

static void fs_tree_state(uint64_t ino, struct ino_state *st)
{
	struct braw_block *b;
	unsigned char *blk;
	struct braw_fs fs;
	size_t n, i;
	uint32_t s;

	memset(st, 0, sizeof(*st));
	if (braw_open(&fs, dev) || braw_live_blocks(&fs, &b, &n))
		lab_die("read the trees of %s: %s", dev, strerror(errno));
	blk = lab_xmalloc(fs.nodesize);
	for (i = 0; i < n; i++) {
		if (b[i].level || b[i].tree != BTRFS_FS_TREE_OBJECTID ||
		    braw_read_block(&fs, b[i].logical, blk))
			continue;
		for (s = 0; s < braw_nritems(blk); s++) {
			struct braw_key k;

			braw_item_key(blk, s, &k);
			if (k.objectid == ino && k.type == BTRFS_INODE_ITEM_KEY &&
			    braw_item_size(blk, s) == INODE_ITEM_SIZE) {
				st->inode_item = 1;
				st->nlink = braw_le32(blk + braw_item_start(blk, s) + NLINK_OFF);
			}
			if (k.objectid == BTRFS_ORPHAN_OBJECTID &&
			    k.type == BTRFS_ORPHAN_ITEM_KEY && k.offset == ino)
				st->orphan_item = 1;
		}
	}
	free(blk);
	free(b);
	braw_close(&fs);
	printf("tree 5 on %s: inode %llu %s (nlink %u), orphan item %s\n", dev,
	       (unsigned long long)ino, st->inode_item ? "present" : "absent",
	       st->nlink, st->orphan_item ? "present" : "absent");
}

/* The bytes of the device that a mount can look at (btrfs_raw.h). */
static void save_image(struct braw_image *img)
{
	struct braw_fs fs;

	memset(img, 0, sizeof(*img));
	if (braw_open(&fs, dev) || braw_image_ranges(&fs, img) ||
	    braw_image_read(img, dev))
		lab_die("save the image of %s: %s", dev, strerror(errno));
	braw_close(&fs);
}

static void expect_device_unchanged(const struct braw_image *img, const char *what)
{
	uint64_t first = 0;
	long diff = braw_image_compare(img, dev, &first);

	CHECK(diff == 0, "%s: %ld block(s) of the device changed (the first at %llu)",
	      what, diff, (unsigned long long)first);
}

/*
 * Unmount the read-only mount on which inode @ino, with no links, was
 * evicted: the unmount must go through, the log must say the inode was
 * left alone, no splat may follow the case's marker, and the device must
 * hold what it held before the mount.  0, or -1 if the unmount failed.
 */
static int umount_ro_inode_kept(uint64_t ino, const char *what,
				const struct braw_image *img)
{
	char ere[160], msg[128];

	printf("unmounting (before the fix: assertion failed: !found, a kernel BUG)\n");
	fflush(stdout);
	if (!CHECK_OK(umount(mnt), "umount of the read-only mount"))
		return -1;
	snprintf(ere, sizeof(ere),
		 "read-only, not deleting inode %llu root 5 with no links",
		 (unsigned long long)ino);
	CHECK(lab_log_has(ere), "the kernel log does not say that inode %llu is left alone",
	      (unsigned long long)ino);
	snprintf(msg, sizeof(msg), "%s, read-only", what);
	expect_clean_log(msg);
	snprintf(msg, sizeof(msg), "%s: the read-only mount", what);
	expect_device_unchanged(img, msg);
	return 0;
}

/* ---- inc_ref: a file extent item that points at no extent ----------------- */

struct bytenr_edit {
	uint64_t old, new;
};

/* A regular extent: one byte of its disk_bytenr, as in fuzz image 124. */
static int edit_bytenr(unsigned char *fe, uint32_t size, const struct braw_key *k,
		       void *arg)
{
	struct bytenr_edit *e = arg;

	(void)k;
	if (size < 53 || fe[20] != BTRFS_FILE_EXTENT_REG ||
	    !braw_le64(fe + DISK_BYTENR_OFF))
		return 0;
	e->old = braw_le64(fe + DISK_BYTENR_OFF);
	fe[DISK_BYTENR_OFF + 2] = 0x02;
	e->new = braw_le64(fe + DISK_BYTENR_OFF);
	printf("disk_bytenr %llu -> %llu\n", (unsigned long long)e->old,
	       (unsigned long long)e->new);
	return 1;
}

/* sv/f<i> after the three appends of test_inc_ref(). */
static void expect_sv_file(int i)
{
	unsigned char *buf = lab_xmalloc(8192 + 8192 + 4096);
	char path[PATH_MAX];

	fill_pattern(buf, 8192, (uint32_t)i);
	fill_pattern(buf + 8192, 8192, (uint32_t)i + 1000);
	fill_pattern(buf + 16384, 4096, (uint32_t)i + 2000);
	PATHF(path, "%s/sv/f%d", mnt, i);
	CHECK_FILE_EQUALS(path, buf, 8192 + 8192 + 4096);
	free(buf);
}

static void test_inc_ref(void)
{
	struct bytenr_edit e = { 0 };
	char path[PATH_MAX], name[32], ere[160];
	int fd, r, err, i;

	printf("== inc_ref: a file extent item of a snapshot's leaf points at no extent\n");
	mkfs_mount();
	/*
	 * Enough files for sv's tree to have several leaves, so that the
	 * snapshot shares them (a snapshot of a one-leaf tree gets a copy).
	 */
	lab_btrfs_subvol(mnt, "sv", -1);
	for (i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "sv/f%d", i);
		put(name, 8192, (uint32_t)i);
		put(name, 8192, (uint32_t)i + 1000);
	}
	PATHF(path, "%s/sv", mnt);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	lab_btrfs_subvol(mnt, "snap", fd);
	close(fd);
	/*
	 * sv COWs every leaf away: the snapshot's leaves, now only its own,
	 * get FULL_BACKREF, and COWing one of them later from the snapshot
	 * adds a reference (btrfs_inc_ref()) for every extent in it.
	 */
	for (i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "sv/f%d", i);
		put(name, 4096, (uint32_t)i + 2000);
	}
	if (lab_umount(mnt))
		lab_die("umount");
	edit_first(SNAP_TREE, BTRFS_EXTENT_DATA_KEY, edit_bytenr, &e);

	mark_log("inc_ref");
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "mount after the change"))
		return;
	PATHF(path, "%s/snap", mnt);
	read_dir(path);
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	errno = 0;
	r = syncfs(fd);
	err = errno;
	close(fd);
	if (r)
		printf("syncfs: " LAB_ERR_FMT "\n", LAB_ERR_ARGS(err));
	else
		printf("syncfs: success\n");
	snprintf(ere, sizeof(ere), "extent item not found for insert, bytenr %llu ",
		 (unsigned long long)e.new);
	CHECK(lab_log_has(ere), "the kernel log does not name the damaged bytenr %llu",
	      (unsigned long long)e.new);
	CHECK((r && (err == EUCLEAN || err == EIO)) ||
	      lab_log_has("BTRFS: error \\(device [^)]*\\) in [A-Za-z0-9_]+:[0-9]+: errno=-(117|5) "),
	      "the commit neither failed with EUCLEAN or EIO nor aborted the transaction");
	PATHF(path, "%s/new-file", mnt);
	errno = 0;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	err = errno;
	if (fd >= 0)
		close(fd);
	EXPECT_ERRNO(fd, err, EROFS, "create a file after the transaction abort");
	CHECK_OK(lab_umount(mnt), "umount after the transaction abort");
	expect_clean_log("inc_ref");

	/* The last committed state is intact. */
	if (CHECK_OK(mount_ro(), "mount -o ro again")) {
		expect_sv_file(0);
		expect_sv_file(NFILES - 1);
		CHECK_OK(umount(mnt), "umount");
	}
}

/* ---- nlink0: an inode item with nlink 0, on a read-only mount ------------- */

/* The inode item of *@arg (an inode number): nlink 0, as in fuzz image 349. */
static int edit_nlink(unsigned char *ii, uint32_t size, const struct braw_key *k,
		      void *arg)
{
	if (size != INODE_ITEM_SIZE || k->objectid != *(uint64_t *)arg)
		return 0;
	printf("nlink %u -> 0\n", braw_le32(ii + NLINK_OFF));
	braw_put_le32(ii + NLINK_OFF, 0);
	return 1;
}

/* Read @path (on a read-only mount) and compare it with pattern @seed. */
static void read_back(const char *path, int fd, size_t len, uint32_t seed)
{
	unsigned char *want = lab_pattern(len, seed), *got = lab_xmalloc(len + 1);
	ssize_t n = lab_pread_full(fd, got, len + 1, 0);

	if (CHECK(n >= 0, "read %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno)))
		CHECK((size_t)n == len && !memcmp(got, want, len),
		      "%s: %zd bytes, not the %zu written (or other contents)",
		      path, n, len);
	free(want);
	free(got);
}

static void test_nlink0(void)
{
	struct braw_image img;
	char path[PATH_MAX];
	struct stat st;
	uint64_t ino;
	int fd;

	printf("== nlink0: an inode item with nlink 0, read on a read-only mount\n");
	mkfs_mount();
	put("f", 8192, 1);
	PATHF(path, "%s/f", mnt);
	if (stat(path, &st))
		lab_die("stat %s: %s", path, strerror(errno));
	ino = st.st_ino;
	if (lab_umount(mnt))
		lab_die("umount");
	edit_first(BTRFS_FS_TREE_OBJECTID, BTRFS_INODE_ITEM_KEY, edit_nlink, &ino);
	save_image(&img);

	mark_log("nlink0");
	if (!CHECK_OK(mount_ro(), "mount -o ro after the change"))
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open %s (nlink 0)", path)) {
		read_back(path, fd, 8192, 1);
		close(fd);
	}
	/* Evict the inode. */
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	if (umount_ro_inode_kept(ino, "nlink0", &img))
		goto out;

	/* It mounts again, and the file still reads. */
	if (CHECK_OK(mount_ro(), "mount -o ro again")) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (CHECK_OK(fd, "open %s again", path)) {
			read_back(path, fd, 8192, 1);
			close(fd);
		}
		CHECK_OK(umount(mnt), "umount");
	}
out:
	braw_image_free(&img);
}

/*
 * Unmount, then tree 5 must hold neither the inode item nor the orphan item
 * of @ino: @what (a mount that ran orphan cleanup) deleted the inode.
 */
static void expect_orphan_gone(uint64_t ino, const char *what)
{
	struct ino_state st;

	CHECK_OK(lab_umount(mnt), "umount");
	fs_tree_state(ino, &st);
	CHECK(!st.inode_item && !st.orphan_item,
	      "%s left orphan inode %llu (inode item %d, orphan item %d)",
	      what, (unsigned long long)ino, st.inode_item, st.orphan_item);
}

/* ---- orphan: an orphan inode reached on a read-only mount ------------------ */

static void test_orphan(void)
{
	struct file_handle *fh = lab_xmalloc(sizeof(*fh) + MAX_HANDLE_SZ);
	struct braw_image img = { 0 };
	struct ino_state st;
	char path[PATH_MAX];
	struct stat sb;
	int fd, mfd, mount_id;
	uint64_t ino;

	printf("== orphan: an unlinked inode's orphan item, a read-only mount, orphan cleanup\n");
	mkfs_mount();
	put("o", ORPHAN_LEN, 7);
	PATHF(path, "%s/o", mnt);
	fh->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, path, fh, &mount_id, 0)) {
		if (errno == EOPNOTSUPP || errno == ENOSYS) {
			printf("SKIP orphan: name_to_handle_at: %s\n", strerror(errno));
			CHECK_OK(lab_umount(mnt), "umount");
			free(fh);
			return;
		}
		lab_die("name_to_handle_at %s: %s", path, strerror(errno));
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) || unlink(path) || syncfs(fd))
		lab_die("open, unlink and syncfs %s: %s", path, strerror(errno));
	ino = sb.st_ino;
	/* On the device now: inode @ino with nlink 0, and its orphan item. */
	save_image(&img);
	close(fd);
	CHECK_OK(lab_umount(mnt), "umount");
	fs_tree_state(ino, &st);
	CHECK(!st.inode_item && !st.orphan_item,
	      "the last close on a read-write mount did not delete inode %llu",
	      (unsigned long long)ino);

	/* The image of a crash while the file was open and unlinked. */
	if (braw_image_write(&img, dev))
		lab_die("write the image back: %s", strerror(errno));
	fs_tree_state(ino, &st);
	if (!CHECK(st.inode_item && st.nlink == 0 && st.orphan_item,
		   "the saved image has no orphan inode %llu", (unsigned long long)ino))
		goto out;

	mark_log("orphan");
	if (!CHECK_OK(mount_ro(), "mount -o ro of the image with the orphan"))
		goto out;
	mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = open_by_handle_at(mfd, fh, O_RDONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open_by_handle_at the orphan inode %llu", (unsigned long long)ino)) {
		read_back("the orphan", fd, ORPHAN_LEN, 7);
		close(fd);
	}
	close(mfd);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	if (umount_ro_inode_kept(ino, "orphan", &img))
		goto out;

	/* A remount to read-write cleans the orphan up. */
	mark_log("orphan-remount");
	if (CHECK_OK(mount_ro(), "mount -o ro")) {
		printf("mount -o remount,rw %s\n", mnt);
		CHECK_OK(mount(dev, mnt, "btrfs", MS_REMOUNT, NULL), "remount read-write");
		expect_orphan_gone(ino, "a remount to read-write");
		expect_clean_log("orphan, remount read-write");
	}

	/* So does a read-write mount. */
	if (braw_image_write(&img, dev))
		lab_die("write the image back: %s", strerror(errno));
	mark_log("orphan-rw");
	if (CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "mount read-write")) {
		expect_orphan_gone(ino, "a read-write mount");
		expect_clean_log("orphan, read-write mount");
	}
out:
	braw_image_free(&img);
	free(fh);
}

int main(void)
{
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (selected("inc_ref"))
		test_inc_ref();
	if (selected("nlink0"))
		test_nlink0();
	if (selected("orphan"))
		test_orphan();
	return lab_result("btrfs_corrupt_metadata");
}
