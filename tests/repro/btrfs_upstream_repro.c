// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_upstream_repro - reproducers, on an UNENCRYPTED btrfs, of what the
 * fuzzer (tests/btrfs_fscrypt_fuzz.c) found on encrypted images, to tell
 * whether the series has anything to do with it.  The case is the name the
 * program runs under (install it under both names):
 *
 *  btrfs_inc_ref_bad_bytenr (image 124 of seed 0x14f0001, a read-write
 *    mount): a file extent item in a leaf of a snapshot whose disk_bytenr
 *    points at no extent (one byte of it changed), in a leaf that became
 *    FULL_BACKREF when the snapshotted subvolume COWed it away.  Reading the
 *    snapshot's files updates their atimes; COWing the leaf adds a reference
 *    for every extent in it (btrfs_inc_ref()); the extent is not found and
 *    lookup_inline_extent_backref() warns (WARN_ON, fs/btrfs/extent-tree.c:880
 *    in the lab's 6.1), then the transaction is aborted with EIO.  The
 *    program exits 0 when the warning is in the kernel log.
 *
 *  btrfs_ro_evict_nlink0 (image 349, a read-only mount): an inode item
 *    with nlink 0 (a regular file's, nothing else changed).  The file is
 *    read on a read-only mount; when its inode is evicted,
 *    btrfs_evict_inode() deletes it, in a transaction that a read-only
 *    filesystem never commits, and at unmount close_ctree() finds it:
 *    "transaction N ... is not committed", then ASSERT(!found) in
 *    fs/btrfs/disk-io.c:4586: a kernel BUG with CONFIG_BTRFS_ASSERT (the
 *    debug kernel), which the lab's oops=panic turns into a dead guest.
 *    The program cannot report that itself: the console does.
 *
 * Not tests (they end with a kernel splat on purpose), so not in tests/:
 * built by hand and run as a job's tests (SCRATCH_DEV, SCRATCH_MNT):
 *   make -C tests OUT=/abs/dir /abs/dir/.obj/liblab.a
 *   gcc -D_GNU_SOURCE -Itests/lib -O2 -static -o /abs/dir/btrfs_inc_ref_bad_bytenr \
 *       tests/repro/btrfs_upstream_repro.c /abs/dir/.obj/liblab.a
 *   cp /abs/dir/btrfs_inc_ref_bad_bytenr /abs/dir/btrfs_ro_evict_nlink0
 */
#include "btrfs_raw.h"
#include "lab.h"

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
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
#define NFILES		64

static const char *dev, *mnt;

static void subvol(unsigned long cmd, const char *name, int src)
{
	struct btrfs_ioctl_vol_args va;
	int fd = open(mnt, O_RDONLY | O_DIRECTORY);

	memset(&va, 0, sizeof(va));
	va.fd = src;
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (fd < 0 || ioctl(fd, cmd, &va))
		lab_die("subvolume %s: %s", name, strerror(errno));
	close(fd);
}

static void put(const char *rel, size_t len, uint32_t seed)
{
	char path[PATH_MAX];
	unsigned char *buf = lab_pattern(len, seed);
	int fd;

	PATHF(path, "%s/%s", mnt, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0 || write_all(fd, buf, len) || fsync(fd))
		lab_die("write %s: %s", path, strerror(errno));
	close(fd);
	free(buf);
}

/* Read every file of @dir (their atimes change). */
static void read_dir(const char *dir)
{
	char path[PATH_MAX], buf[65536];
	struct dirent *de;
	DIR *d = opendir(dir);
	int fd;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		PATHF(path, "%s/%s", dir, de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
	closedir(d);
}

/*
 * Change the first item of @type of the live leaves of tree @tree for which
 * @edit returns 1 (checksum recomputed).  Dies if there is none.
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

/* A regular extent: one byte of its disk_bytenr, as in image 124. */
static int edit_bytenr(unsigned char *fe, uint32_t size, const struct braw_key *k,
		       void *arg)
{
	(void)k;
	(void)arg;
	if (size < 53 || fe[20] != BTRFS_FILE_EXTENT_REG ||
	    !braw_le64(fe + DISK_BYTENR_OFF))
		return 0;
	printf("disk_bytenr %llu", (unsigned long long)braw_le64(fe + DISK_BYTENR_OFF));
	fe[DISK_BYTENR_OFF + 2] = 0x02;
	printf(" -> %llu\n", (unsigned long long)braw_le64(fe + DISK_BYTENR_OFF));
	return 1;
}

static int repro_inc_ref(void)
{
	char path[PATH_MAX], name[32];
	int fd, warned;
	size_t i;

	/*
	 * Enough files for sv's tree to have several leaves, so that the
	 * snapshot shares them (a snapshot of a one-leaf tree gets a copy).
	 */
	subvol(BTRFS_IOC_SUBVOL_CREATE, "sv", 0);
	for (i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "sv/f%zu", i);
		put(name, 8192, (uint32_t)i);
		put(name, 8192, (uint32_t)i + 1000);
	}
	PATHF(path, "%s/sv", mnt);
	fd = open(path, O_RDONLY | O_DIRECTORY);
	subvol(BTRFS_IOC_SNAP_CREATE, "snap", fd);
	close(fd);
	/*
	 * sv COWs every leaf away: the snapshot's leaves, now only its own,
	 * get FULL_BACKREF, and COWing one of them later from the snapshot
	 * adds a reference (btrfs_inc_ref()) for every extent in it.
	 */
	for (i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "sv/f%zu", i);
		put(name, 4096, (uint32_t)i + 2000);
	}
	if (lab_umount(mnt))
		lab_die("umount");
	edit_first(257, BTRFS_EXTENT_DATA_KEY, edit_bytenr, NULL);
	run("echo lab-repro-begin > /dev/kmsg");
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount after the change: %s", strerror(errno));
	PATHF(path, "%s/snap", mnt);
	read_dir(path);
	sync();
	lab_umount(mnt);
	warned = run("dmesg | sed -n '/lab-repro-begin/,$p' | grep -E 'WARNING: CPU: .* lookup_inline_extent_backref'") == 0;
	run("dmesg | sed -n '/lab-repro-begin/,$p' | grep -v '^\\[ *[0-9.]*\\] \\s' | head -n 40");
	printf("%s\n", warned ? "REPRODUCED: the WARNING on an unencrypted btrfs" :
	       "not reproduced");
	return warned ? 0 : 1;
}

/* The inode item of @arg (an inode number): nlink 0, as in image 349. */
static int edit_nlink(unsigned char *ii, uint32_t size, const struct braw_key *k,
		      void *arg)
{
	if (size != 160 || k->objectid != *(uint64_t *)arg)
		return 0;
	printf("nlink %u -> 0\n", braw_le32(ii + NLINK_OFF));
	braw_put_le32(ii + NLINK_OFF, 0);
	return 1;
}

static int repro_ro_evict(void)
{
	char path[PATH_MAX], buf[4096];
	struct stat st;
	uint64_t ino;
	int fd;

	put("f", 8192, 1);
	PATHF(path, "%s/f", mnt);
	if (stat(path, &st))
		lab_die("stat %s: %s", path, strerror(errno));
	ino = st.st_ino;
	if (lab_umount(mnt))
		lab_die("umount");
	edit_first(BTRFS_FS_TREE_OBJECTID, BTRFS_INODE_ITEM_KEY, edit_nlink, &ino);
	if (mount(dev, mnt, "btrfs", MS_RDONLY, NULL))
		lab_die("mount -o ro after the change: %s", strerror(errno));
	printf("mounted read-only; reading %s (inode %llu, nlink 0)\n", path,
	       (unsigned long long)ino);
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
	lab_drop_caches("3");
	printf("unmounting: if the guest dies now (assertion failed: !found, a kernel BUG), it is reproduced\n");
	fflush(stdout);
	if (umount(mnt))
		lab_die("umount: %s", strerror(errno));
	printf("not reproduced: the unmount went through\n");
	return 1;
}

int main(int argc, char **argv)
{
	const char *name = basename(argv[0]);

	(void)argc;
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (run("mkfs.btrfs -q -f -m single -b 128M %s", dev) ||
	    lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mkfs or mount failed");
	if (!strcmp(name, "btrfs_inc_ref_bad_bytenr"))
		return repro_inc_ref();
	if (!strcmp(name, "btrfs_ro_evict_nlink0"))
		return repro_ro_evict();
	lab_die("run me as btrfs_inc_ref_bad_bytenr or btrfs_ro_evict_nlink0, not %s", name);
}
