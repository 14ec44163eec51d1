// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_dirsync_crash PHASE - new encrypted inodes that reach the
 * btrfs tree log only because a directory was fsynced come back from log
 * replay with their fscrypt context.  Two boots, run by tests/run-phased.sh.
 *
 * The bug this catches: btrfs_log_inode() copies only the items up to the
 * xattrs (BTRFS_XATTR_ITEM_KEY, 24) of a directory and of an inode logged
 * with LOG_INODE_EXISTS, so the context item (BTRFS_FSCRYPT_INODE_CTX_KEY,
 * 41) of such an inode stayed out of the log.  A new file of an fsynced
 * directory is logged that way (log_new_dir_dentries()), and so is every new
 * directory.  After a crash, replay created those inodes with the ENCRYPT
 * flag and no context: opening a file fails with ENODATA, looking up a
 * directory (or anything in it) with EPERM ("inconsistent encryption
 * contexts" in the kernel log), and `btrfs check` says "encrypted inode
 * (flag ENCRYPT) has no fscrypt context item".
 *
 * phase 1: split SCRATCH_DEV into two partitions (an MBR written here; the
 *   image has no sfdisk) and make a btrfs on each: one with per-extent keys
 *   (the default, when the kernel has them: LAB_BTRFS_EXTENT_KEYS_FEATURE),
 *   one mounted with LAB_BTRFS_PER_INODE_KEYS_OPT; a kernel without
 *   per-extent keys gets only the first, in its only mode.  Both mounted
 *   with commit=300, so no periodic commit comes between the workload and
 *   the crash.  On each: add a random master key (with per-inode keys,
 *   first make a file in another encrypted directory: the first such file
 *   of a subvolume makes the fsyncs of its transaction commit), set the v2
 *   policy on a new directory enc (which commits a transaction), then, in
 *   enc (table below):
 *     - "synced": written and fsynced itself (a full logging), so its data
 *       is asserted in phase 2; the directory fsync logs it once more;
 *     - "newdir" with the file "newdir/f": new, then fsync of newdir;
 *     - "file", "sub" with "sub/inner", and the symlink "link": new, their
 *       data never fsynced, then fsync of enc (nothing else is synced).
 *   Then check that the superblock of each filesystem has a tree log
 *   (log_root) and the generation of the policy's commit: no transaction
 *   was committed during the workload, so replay has to create every new
 *   inode from the log alone.  Write a record (key seed, the nonces of all
 *   inodes) to block 0 of SCRATCH_DEV2 with O_DIRECT|O_DSYNC and reboot the
 *   VM at once with sysrq-b (run-vm.sh --expect-crash).
 *
 * phase 2: read the record; mount each filesystem (replaying its log);
 *   without the key enc lists its five entries, none by its plaintext name;
 *   add the key; every name of the table must be there, of its type, with
 *   STATX_ATTR_ENCRYPTED, its directory entries, its phase-1 nonce and the
 *   policy of enc; every directory must open and list exactly its entries,
 *   every file open and read, the symlink resolve to its target.  Only
 *   "synced" had its data fsynced, so only its content must be complete;
 *   the others may come back short or empty (their i_size was logged as it
 *   was last logged, 0 for a new file), but every 4 KiB block that was
 *   read must be the pattern phase 1 wrote there or zeroes, never other
 *   bytes.  Unmount and the image's patched `btrfs check --readonly` must
 *   find the filesystem clean (lib/btrfs_progs.c; without those btrfs-progs
 *   the test skips, saying so).
 */
#include "btrfs_progs.h"
#include "crc32c.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>

#define DSC_MAGIC "LABDSC01"
#define DSC_MOUNT_OPTS "commit=300"
#define DSC_BLOCK 4096
#define DSC_MAX_CASES 2

/* btrfs superblock at 64 KiB: magic at 64, generation at 72, log_root at 96 */
#define BTRFS_SB_OFF 65536
#define BTRFS_SB_MAGIC "_BHRfS_M"

/* The 1 GiB disk in two halves, in 512-byte sectors; the first 1 MiB is the MBR's. */
#define DSC_PART1_START 2048
#define DSC_PART2_START (512 * 2048)
#define DSC_PART_SECTORS (512 * 2048)

enum dsc_type { DSC_DIR, DSC_REG, DSC_LNK };

struct dsc_obj {
	const char *path;	/* relative to enc; "" is enc itself */
	enum dsc_type type;
	size_t size;		/* DSC_REG: bytes written */
	int synced;		/* DSC_REG: its data was fsynced */
	const char *target;	/* DSC_LNK */
	const char *fsync_after; /* fsync this (relative to enc) once made */
	const char *how;	/* how it gets into the log, for messages */
};

/* In the order phase 1 makes them; parents before their children. */
static const struct dsc_obj dsc_objs[] = {
	{ "", DSC_DIR, 0, 0, NULL, NULL,
	  "the encrypted directory, committed with its policy" },
	{ "synced", DSC_REG, 64 * 1024 + 123, 1, NULL, "synced",
	  "new file fsynced itself, then logged again (LOG_INODE_EXISTS) with enc" },
	{ "newdir", DSC_DIR, 0, 0, NULL, NULL,
	  "new directory, fsynced itself once its file f was made" },
	{ "newdir/f", DSC_REG, 1000, 0, NULL, "newdir",
	  "new file logged only by the fsync of newdir (LOG_INODE_EXISTS)" },
	{ "file", DSC_REG, 5000 + 7, 0, NULL, NULL,
	  "new file logged only by the fsync of enc (LOG_INODE_EXISTS)" },
	{ "sub", DSC_DIR, 0, 0, NULL, NULL,
	  "new directory logged only by the fsync of enc" },
	{ "sub/inner", DSC_REG, 3000, 0, NULL, NULL,
	  "new file in a new directory, logged only by the fsync of enc" },
	{ "link", DSC_LNK, 0, 0, "sub/inner", "",
	  "new symlink logged only by the fsync of enc" },
};
#define DSC_NOBJ (sizeof(dsc_objs) / sizeof(dsc_objs[0]))

struct dsc_case {
	const char *label;
	const char *opts;	/* key mode mount option, or NULL */
	const char *mode_tag;	/* what /proc/mounts must show, or NULL */
	char dev[PATH_MAX];	/* the partition */
	const char *mnt;
	char enc[PATH_MAX];
	struct lab_fscrypt_fs fs;
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	long long generation;	/* phase 1: of the policy's commit */
};

struct dsc_record {
	char magic[8];
	uint32_t ncases;
	uint32_t seed;		/* the master key and the contents */
	uint8_t nonce[DSC_MAX_CASES][DSC_NOBJ][16];
	uint32_t crc;		/* crc32c of everything above */
};

static struct dsc_case dsc_cases[DSC_MAX_CASES];
static unsigned int dsc_ncases;

/* ---- setup shared by both phases ------------------------------------------ */

/* The partition @n of @dev: /dev/vdd1, or /dev/nvme0n1p1. */
static void dsc_part_name(char *out, size_t size, const char *dev, int n)
{
	size_t len = strlen(dev);

	lab_pathf(out, size, "%s%s%d", dev,
		  len && dev[len - 1] >= '0' && dev[len - 1] <= '9' ? "p" : "", n);
}

static void dsc_wait_for(const char *path)
{
	int i;

	for (i = 0; i < 100 && access(path, F_OK) != 0; i++)
		lab_sleep_ms(100);
	if (access(path, F_OK) != 0)
		lab_die("%s did not appear: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
}

static void dsc_init_cases(const char *dev)
{
	int extent_keys = access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0;
	unsigned int i;

	dsc_cases[0].label = extent_keys ? "per-extent keys (the default)" :
			     "the kernel's only key mode (no per-extent keys)";
	dsc_cases[0].mode_tag = extent_keys ? "fscrypt_per_extent_keys" : NULL;
	dsc_cases[0].mnt = lab_env("SCRATCH_MNT");
	dsc_ncases = 1;
	if (extent_keys) {
		dsc_cases[1].label = "per-inode keys (" LAB_BTRFS_PER_INODE_KEYS_OPT ")";
		dsc_cases[1].opts = LAB_BTRFS_PER_INODE_KEYS_OPT;
		dsc_cases[1].mode_tag = LAB_BTRFS_PER_INODE_KEYS_OPT;
		dsc_cases[1].mnt = lab_env("SCRATCH_MNT2");
		dsc_ncases = 2;
	} else {
		printf("NOTE: %s is missing: this kernel has no per-extent keys, only one filesystem is tested\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
	}
	for (i = 0; i < dsc_ncases; i++) {
		struct dsc_case *c = &dsc_cases[i];

		dsc_part_name(c->dev, sizeof(c->dev), dev, (int)i + 1);
		PATHF(c->enc, "%s/enc", c->mnt);
		c->fs.name = "btrfs";
		c->fs.mkfs_cmd = "mkfs.btrfs -q -f";
		c->fs.mount_opts = c->opts;
	}
}

static void dsc_path(char *out, size_t size, const struct dsc_case *c,
		     const char *rel)
{
	lab_pathf(out, size, "%s%s%s", c->enc, *rel ? "/" : "", rel);
}

/* The superblock's generation and log_root; -1 if it is not readable. */
static int dsc_super(const char *dev, long long *generation, long long *log_root)
{
	uint8_t sb[104];
	uint64_t g = 0, l = 0;
	int i;

	if (raw_read(dev, BTRFS_SB_OFF, sb, sizeof(sb)) ||
	    memcmp(sb + 64, BTRFS_SB_MAGIC, 8) != 0)
		return -1;
	for (i = 7; i >= 0; i--) {
		g = (g << 8) | sb[72 + i];
		l = (l << 8) | sb[96 + i];
	}
	*generation = (long long)g;
	*log_root = (long long)l;
	return 0;
}

/* The content of a file of the table: independent of its length. */
static uint32_t dsc_seed(uint32_t seed, unsigned int obj)
{
	return seed * 31 + obj;
}

/* Does /proc/self/mounts show @tag among the options of @mnt? */
static int dsc_mount_has(const char *mnt, const char *tag)
{
	char pat[PATH_MAX + 2], line[4096];
	const char *next;
	char *mounts;
	int found = 0;
	size_t len;

	mounts = read_file("/proc/self/mounts", &len);
	if (!mounts)
		return 0;
	next = mounts;
	PATHF(pat, " %s ", mnt);
	while (!found && lab_next_line(&next, line, sizeof(line)))
		if (strstr(line, pat)) {
			printf("  /proc/self/mounts: %s\n", line);
			found = strstr(line, tag) != NULL;
		}
	free(mounts);
	return found;
}

/* ---- phase 1 ------------------------------------------------------------------ */

static void dsc_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = v >> 24;
}

/* Write an MBR with two partitions to @dev and have the kernel read it. */
static void dsc_partition(const char *dev)
{
	static const uint32_t start[2] = { DSC_PART1_START, DSC_PART2_START };
	uint8_t block[DSC_BLOCK];
	char part[PATH_MAX];
	int fd, i;

	memset(block, 0, sizeof(block));
	for (i = 0; i < 2; i++) {
		uint8_t *e = block + 446 + 16 * i;
		uint32_t sectors = DSC_PART_SECTORS - (i ? 0 : DSC_PART1_START);

		/* CHS fields say "use the LBA ones"; type 0x83 (Linux). */
		e[1] = 0xfe;
		e[2] = 0xff;
		e[3] = 0xff;
		e[4] = 0x83;
		e[5] = 0xfe;
		e[6] = 0xff;
		e[7] = 0xff;
		dsc_put_le32(e + 8, start[i]);
		dsc_put_le32(e + 12, sectors);
	}
	block[510] = 0x55;
	block[511] = 0xaa;
	printf("partitioning %s: two partitions of about 512 MiB\n", dev);
	if (!CHECK_OK(raw_write_sync(dev, 0, block, sizeof(block)),
		      "writing the partition table to %s", dev))
		lab_die("cannot partition %s", dev);
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (!CHECK_OK(fd, "open %s", dev) ||
	    !CHECK_OK(ioctl(fd, BLKRRPART), "BLKRRPART on %s", dev))
		lab_die("the kernel did not take the new partition table of %s", dev);
	close(fd);
	for (i = 1; i <= 2; i++) {
		dsc_part_name(part, sizeof(part), dev, i);
		dsc_wait_for(part);
	}
}

static void dsc_setup(struct dsc_case *c, const uint8_t *key, size_t keylen)
{
	long long lr;

	printf("== %s: %s on %s\n", c->label, c->dev, c->mnt);
	lab_fscrypt_fs_setup(&c->fs, c->dev, c->mnt, DSC_MOUNT_OPTS, key,
			     keylen, c->id);
	if (c->mode_tag)
		CHECK(dsc_mount_has(c->mnt, c->mode_tag),
		      "%s: /proc/self/mounts does not show %s: new files would not get the key mode this case is about",
		      c->mnt, c->mode_tag);
	/*
	 * The first file with per-inode keys of a subvolume marks it against
	 * snapshots, and makes fsyncs of its transaction commit it (so the
	 * mark is never behind a logged file): that file comes first, outside
	 * enc, before the commit below, so the workload's fsyncs stay logged.
	 */
	if (c->opts && !strcmp(c->opts, LAB_BTRFS_PER_INODE_KEYS_OPT)) {
		char pre[PATH_MAX], f[PATH_MAX];

		PATHF(pre, "%s/marked", c->mnt);
		PATHF(f, "%s/first", pre);
		if (!CHECK_OK(mkdir(pre, 0755), "mkdir %s", pre) ||
		    !CHECK_OK(lab_set_policy(pre, c->id),
			      "FS_IOC_SET_ENCRYPTION_POLICY on %s", pre) ||
		    !CHECK_OK(write_file(f, "x", 1), "create %s", f))
			lab_die("cannot make the first file with per-inode keys");
	}
	if (!CHECK_OK(mkdir(c->enc, 0755), "mkdir %s", c->enc) ||
	    !CHECK_OK(lab_set_policy(c->enc, c->id),
		      "FS_IOC_SET_ENCRYPTION_POLICY on %s", c->enc))
		lab_die("cannot make the encrypted directory");
	/* Setting the policy committed; no other commit may come before the crash. */
	if (dsc_super(c->dev, &c->generation, &lr) != 0)
		lab_die("no btrfs superblock readable on %s", c->dev);
	printf("superblock after setting the policy: generation %lld, log_root %lld\n",
	       c->generation, lr);
}

static void dsc_make(const struct dsc_case *c, const struct dsc_obj *o,
		     uint32_t seed)
{
	char path[PATH_MAX], sync_path[PATH_MAX];
	unsigned char *data;
	int fd;

	dsc_path(path, sizeof(path), c, o->path);
	switch (o->type) {
	case DSC_DIR:
		if (*o->path && !CHECK_OK(mkdir(path, 0755), "mkdir %s", path))
			lab_die("cannot make the directory");
		break;
	case DSC_REG:
		data = lab_pattern(o->size, seed);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (!CHECK_OK(fd, "create %s", path) ||
		    !CHECK_OK(write_all(fd, data, o->size), "write %s", path) ||
		    !CHECK_OK(close(fd), "close %s", path))
			lab_die("cannot write the file");
		free(data);
		break;
	case DSC_LNK:
		if (!CHECK_OK(symlink(o->target, path), "symlink %s -> %s",
			      path, o->target))
			lab_die("cannot make the symlink");
		break;
	}
	if (!o->fsync_after) {
		printf("  made %s (%s)\n", path, o->how);
		return;
	}
	dsc_path(sync_path, sizeof(sync_path), c, o->fsync_after);
	printf("  made %s, then fsync of %s only\n", path, sync_path);
	if (!CHECK_OK(fsync_path(sync_path), "fsync %s", sync_path))
		lab_die("the fsync failed");
}

static int dsc_phase1(const char *dev, const char *dev2)
{
	static struct dsc_record rec;
	uint8_t key[LAB_MASTER_KEY_SIZE], block[DSC_BLOCK];
	char path[PATH_MAX], hex[33];
	long long gen, lr;
	unsigned int i, j;

	memset(&rec, 0, sizeof(rec));
	memcpy(rec.magic, DSC_MAGIC, 8);
	lab_random(&rec.seed, sizeof(rec.seed));
	lab_master_key(key, rec.seed);
	rec.ncases = dsc_ncases;

	dsc_partition(dev);
	for (i = 0; i < dsc_ncases; i++)
		dsc_setup(&dsc_cases[i], key, sizeof(key));

	for (i = 0; i < dsc_ncases; i++) {
		printf("== workload on %s (%s)\n", dsc_cases[i].enc, dsc_cases[i].label);
		for (j = 0; j < DSC_NOBJ; j++)
			dsc_make(&dsc_cases[i], &dsc_objs[j], dsc_seed(rec.seed, j));
	}

	for (i = 0; i < dsc_ncases; i++) {
		const struct dsc_case *c = &dsc_cases[i];

		for (j = 0; j < DSC_NOBJ; j++) {
			if (dsc_objs[j].type == DSC_LNK)
				continue;	/* the ioctl would follow it */
			dsc_path(path, sizeof(path), c, dsc_objs[j].path);
			if (CHECK_OK(lab_get_nonce(path, rec.nonce[i][j]),
				     "FS_IOC_GET_ENCRYPTION_NONCE on %s", path))
				printf("  nonce of %s: %s\n", path,
				       lab_hex(hex, rec.nonce[i][j], 16));
		}
		if (!CHECK(dsc_super(c->dev, &gen, &lr) == 0,
			   "no btrfs superblock readable on %s", c->dev))
			continue;
		printf("%s: superblock now: generation %lld, log_root %lld\n",
		       c->dev, gen, lr);
		CHECK(gen == c->generation,
		      "%s: a transaction was committed during the workload (generation %lld -> %lld): the crash would not test log replay of new inodes",
		      c->dev, c->generation, gen);
		CHECK(lr > 0,
		      "%s: no tree log on the device after the fsyncs: they committed a transaction instead",
		      c->dev);
	}

	rec.crc = lab_crc32c(&rec, offsetof(struct dsc_record, crc));
	memset(block, 0, sizeof(block));
	memcpy(block, &rec, sizeof(rec));
	if (!CHECK_OK(raw_write_sync(dev2, 0, block, sizeof(block)),
		      "writing the phase record to %s", dev2))
		lab_die("cannot record what phase 2 must find");
	if (lab_failures)
		return lab_result("btrfs fscrypt dirsync crash, phase 1");
	lab_crash_now();
}

/* ---- phase 2 ------------------------------------------------------------------ */

static int dsc_read_record(const char *dev2, struct dsc_record *rec)
{
	uint8_t block[DSC_BLOCK];

	if (!CHECK_OK(raw_read(dev2, 0, block, sizeof(block)),
		      "reading the phase record from %s", dev2))
		return -1;
	memcpy(rec, block, sizeof(*rec));
	if (!CHECK(memcmp(rec->magic, DSC_MAGIC, 8) == 0 &&
		   rec->crc == lab_crc32c(rec, offsetof(struct dsc_record, crc)),
		   "no valid phase-1 record on %s: phase 1 did not get as far as its fsyncs",
		   dev2))
		return -1;
	return CHECK(rec->ncases == dsc_ncases,
		     "phase 1 tested %u filesystems, this kernel would test %u",
		     rec->ncases, dsc_ncases) ? 0 : -1;
}

/* Why an encrypted inode cannot be opened, as far as the errno tells. */
static const char *dsc_why(int e)
{
	if (e == ENODATA)
		return ": the inode has no fscrypt context item (logged without it, replayed without it)";
	if (e == EPERM)
		return ": btrfs_lookup() refused the entry, its context not being the directory's (a missing context item does that too)";
	if (e == ENOENT)
		return ": the name is gone after replay";
	if (e == ENOKEY)
		return ": the key is missing";
	return "";
}

/* Without the key: the five entries of enc, none in plaintext. */
static void dsc_check_nokey(const struct dsc_case *c)
{
	unsigned int want = 0, n = 0, j;
	struct dirent *de;
	DIR *d;

	for (j = 1; j < DSC_NOBJ; j++)
		want += strchr(dsc_objs[j].path, '/') == NULL;
	d = opendir(c->enc);
	if (!CHECK(d != NULL, "opendir %s without the key: " LAB_ERR_FMT,
		   c->enc, LAB_ERR_ARGS(errno)))
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		for (j = 1; j < DSC_NOBJ; j++)
			CHECK(strcmp(de->d_name, dsc_objs[j].path) != 0,
			      "%s without the key lists \"%s\" in plaintext",
			      c->enc, de->d_name);
	}
	closedir(d);
	printf("without the key %s lists %u entries (no-key names)\n", c->enc, n);
	CHECK(n == want, "%s without the key: %u entries after replay, expected %u",
	      c->enc, n, want);
}

/* The entries of directory @o: exactly the children in the table. */
static void dsc_check_dir(const struct dsc_obj *o, const char *path)
{
	size_t plen = strlen(o->path);
	unsigned int n = 0, want = 0, j;
	struct dirent *de;
	const char *name;
	int known;
	DIR *d;

	errno = 0;
	d = opendir(path);
	if (!CHECK(d != NULL, "opendir %s (%s): " LAB_ERR_FMT "%s", path, o->how,
		   LAB_ERR_ARGS(errno), dsc_why(errno)))
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		known = 0;
		for (j = 1; j < DSC_NOBJ; j++) {
			name = dsc_objs[j].path;
			if (plen && (strncmp(name, o->path, plen) || name[plen] != '/'))
				continue;
			name += plen ? plen + 1 : 0;
			if (!strchr(name, '/') && !strcmp(name, de->d_name))
				known = 1;
		}
		CHECK(known, "%s lists \"%s\", which phase 1 did not make", path,
		      de->d_name);
	}
	closedir(d);
	for (j = 1; j < DSC_NOBJ; j++) {
		name = dsc_objs[j].path;
		if (plen && (strncmp(name, o->path, plen) || name[plen] != '/'))
			continue;
		want += strchr(name + (plen ? plen + 1 : 0), '/') == NULL;
	}
	CHECK(n == want, "%s lists %u entries, phase 1 made %u", path, n, want);
}

/* Each 4 KiB block read is the pattern or zeroes; all of it if synced. */
static void dsc_check_reg(const struct dsc_obj *o, const char *path,
			  uint32_t seed)
{
	unsigned char *expect, *data;
	size_t len, off, n, k;
	int zero;

	errno = 0;
	data = read_file(path, &len);
	if (!CHECK(data != NULL, "reading %s (%s): " LAB_ERR_FMT "%s", path,
		   o->how, LAB_ERR_ARGS(errno), dsc_why(errno)))
		return;
	expect = lab_pattern(o->size, seed);
	printf("  %s: %zu bytes after replay (phase 1 wrote %zu%s)\n", path,
	       len, o->size, o->synced ? " and fsynced them" : ", no fsync of the file");
	if (o->synced) {
		if (CHECK(len == o->size, "%s: %zu bytes after replay, phase 1 fsynced %zu",
			  path, len, o->size)) {
			off = lab_first_diff(expect, data, len);
			CHECK(off == len, "%s: content differs from what phase 1 fsynced from byte %zu on",
			      path, off);
		}
	} else if (CHECK(len <= o->size, "%s: %zu bytes after replay, more than the %zu phase 1 wrote",
			 path, len, o->size)) {
		for (off = 0; off < len; off += DSC_BLOCK) {
			n = len - off < DSC_BLOCK ? len - off : DSC_BLOCK;
			for (zero = 1, k = 0; k < n && zero; k++)
				zero = data[off + k] == 0;
			if (!CHECK(zero || !memcmp(data + off, expect + off, n),
				   "%s: block %zu is neither what phase 1 wrote nor zeroes",
				   path, off / DSC_BLOCK))
				break;
		}
	}
	free(expect);
	free(data);
}

static void dsc_check_obj(const struct dsc_case *c, const struct dsc_record *rec,
			  unsigned int ci, unsigned int j)
{
	static const char *const type_name[] = { "directory", "file", "symlink" };
	static const mode_t type_mode[] = { S_IFDIR, S_IFREG, S_IFLNK };
	const struct dsc_obj *o = &dsc_objs[j];
	struct fscrypt_get_policy_ex_arg got;
	struct fscrypt_policy_v2 want;
	char path[PATH_MAX], target[PATH_MAX], a[33], b[33];
	uint8_t nonce[16];
	struct statx stx;
	struct stat st;
	ssize_t n;
	int fails = lab_failures;

	dsc_path(path, sizeof(path), c, o->path);
	errno = 0;
	if (!CHECK(statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) == 0,
		   "statx %s (%s): " LAB_ERR_FMT "%s", path, o->how,
		   LAB_ERR_ARGS(errno), dsc_why(errno))) {
		printf("FAIL %s: %s\n", path, o->how);
		return;
	}
	if (!CHECK((stx.stx_mode & S_IFMT) == type_mode[o->type],
		   "%s is not a %s after replay (mode 0%o)", path,
		   type_name[o->type], stx.stx_mode)) {
		printf("FAIL %s: %s\n", path, o->how);
		return;
	}
	if (stx.stx_attributes_mask & STATX_ATTR_ENCRYPTED)
		CHECK(stx.stx_attributes & STATX_ATTR_ENCRYPTED,
		      "%s is not encrypted after replay", path);

	switch (o->type) {
	case DSC_DIR:
		dsc_check_dir(o, path);
		break;
	case DSC_REG:
		dsc_check_reg(o, path, dsc_seed(rec->seed, j));
		break;
	case DSC_LNK:
		errno = 0;
		n = readlink(path, target, sizeof(target) - 1);
		if (CHECK(n >= 0, "readlink %s (%s): " LAB_ERR_FMT "%s", path,
			  o->how, LAB_ERR_ARGS(errno), dsc_why(errno))) {
			target[n] = '\0';
			CHECK(strcmp(target, o->target) == 0,
			      "%s points to \"%s\" after replay, phase 1 made it point to \"%s\"",
			      path, target, o->target);
		}
		CHECK_OK(stat(path, &st), "stat %s: the symlink does not resolve", path);
		break;
	}
	if (o->type != DSC_LNK) {
		lab_default_policy(&want, c->id);
		if (CHECK_OK(lab_get_policy_ex(path, &got),
			     "FS_IOC_GET_ENCRYPTION_POLICY_EX on %s", path))
			CHECK(got.policy.version == FSCRYPT_POLICY_V2 &&
			      memcmp(&got.policy.v2, &want, sizeof(want)) == 0,
			      "%s: the policy after replay differs from the one of phase 1", path);
		if (CHECK_OK(lab_get_nonce(path, nonce),
			     "FS_IOC_GET_ENCRYPTION_NONCE on %s", path))
			CHECK(memcmp(nonce, rec->nonce[ci][j], 16) == 0,
			      "%s: nonce after replay %s, phase 1 had %s: not its own context",
			      path, lab_hex(a, nonce, 16), lab_hex(b, rec->nonce[ci][j], 16));
	}
	printf("%s %s: %s\n", fails == lab_failures ? "ok  " : "FAIL", path, o->how);
}

static int dsc_phase2(const char *dev2)
{
	static struct dsc_record rec;
	uint8_t key[LAB_MASTER_KEY_SIZE];
	long long gen, lr;
	unsigned int i, j;

	if (dsc_read_record(dev2, &rec) != 0)
		return lab_result("btrfs fscrypt dirsync crash, phase 2");
	lab_master_key(key, rec.seed);
	for (i = 0; i < dsc_ncases; i++) {
		struct dsc_case *c = &dsc_cases[i];

		printf("== %s: %s on %s\n", c->label, c->dev, c->mnt);
		dsc_wait_for(c->dev);
		if (CHECK(dsc_super(c->dev, &gen, &lr) == 0,
			  "no btrfs superblock readable on %s", c->dev)) {
			printf("superblock before mount: generation %lld, log_root %lld\n",
			       gen, lr);
			CHECK(lr > 0, "%s: no tree log to replay", c->dev);
		}
		if (lab_fscrypt_fs_mount(&c->fs, c->dev, c->mnt, DSC_MOUNT_OPTS) != 0) {
			char *out = NULL;

			/* What the checker makes of it helps whoever debugs this. */
			lab_btrfs_check_output(c->dev, &out);
			free(out);
			lab_die("cannot mount %s after the crash (the checker's view is above)",
				c->dev);
		}
		dsc_check_nokey(c);
		if (!CHECK_OK(lab_add_raw_key(c->mnt, key, sizeof(key), c->id),
			      "FS_IOC_ADD_ENCRYPTION_KEY on %s after the crash", c->mnt))
			lab_die("cannot add the key");
		for (j = 0; j < DSC_NOBJ; j++)
			dsc_check_obj(c, &rec, i, j);
		if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
			lab_die("cannot unmount for the checker");
		lab_btrfs_check_clean(c->dev, c->label);
	}
	return lab_result("btrfs fscrypt dirsync crash, phase 2");
}

int main(int argc, char **argv)
{
	const char *dev = lab_env("SCRATCH_DEV");
	const char *dev2 = lab_env("SCRATCH_DEV2");

	if (argc != 2 || (strcmp(argv[1], "1") && strcmp(argv[1], "2")))
		lab_die("usage: %s 1|2 (the phase; tests/run-phased.sh runs both, in two boots)",
			argv[0]);
	dsc_init_cases(dev);
	printf("btrfs fscrypt dirsync crash test, phase %s (%s, record on %s)\n",
	       argv[1], dev, dev2);
	if (argv[1][0] == '1')
		return dsc_phase1(dev, dev2);
	return dsc_phase2(dev2);
}
