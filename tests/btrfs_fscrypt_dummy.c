// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_dummy - the test_dummy_encryption mount option on btrfs, the
 * way fstests' "encrypt" configurations use it on ext4 and f2fs: every new
 * directory, regular file and symlink whose parent is not encrypted gets a v2
 * policy with fscrypt's built-in test key, without any ioctl.  As on ext4 and
 * f2fs, it is for tests only, and the filesystem must have the encrypt
 * feature (incompat bit ENCRYPT, 40) already: mkfs.btrfs -O encrypt (the
 * patched btrfs-progs, patch 0008) sets it.
 *
 *  0. feature:   on a filesystem made without -O encrypt (the superblock's
 *                incompat flags lack bit 40), mounting with the option fails
 *                with EINVAL, the kernel log says "test_dummy_encryption
 *                requires the encrypt feature", and nothing on disk changes:
 *                the bit is still clear after the refused mount, and after a
 *                plain mount in which files are written;
 *  1. options:   mkfs.btrfs -O encrypt sets bit 40 before any mount;
 *                test_dummy_encryption=v1 and =v3 are refused with EINVAL
 *                (btrfs takes v2 policies only) and say so in the log;
 *                adding the option on a remount of a plain mount is refused
 *                (EINVAL); /proc/mounts shows test_dummy_encryption=v2 and
 *                fscrypt_per_extent_keys; a remount repeating the option
 *                works;
 *  2. contents:  a directory tree (files, a symlink, a subdirectory) and a
 *                file at the top: each is encrypted (FS_ENCRYPT_FL, a v2
 *                policy whose key is present), the top directory is not
 *                (ENODATA), regular files get per-extent keys (every file
 *                extent item has encryption FSCRYPT_EXTENT); a file written
 *                before the option was used stays plain;
 *  3. device:    no name inside the new directory, symlink target or data
 *                marker of the new tree is on the device, while the plain
 *                file's marker and name, and the names of the new entries
 *                of the (unencrypted) top directory, are (controls);
 *  4. remount:   everything reads back byte-exact after an unmount and a
 *                mount with the option; mounted without it, the test key is
 *                absent: the files fail to open with ENOKEY and the names
 *                are no-key names;
 *  5. snapshot:  a subvolume's encrypted file is in its snapshot, and new
 *                writes to both read back;
 *  6. key modes: with fscrypt_per_inode_keys too, a new file's extents are
 *                FSCRYPT_INODE; with compress-force=zstd (on a kernel that
 *                advertises encrypt_compress), a new file is compressed;
 *  7. second mounts of the same filesystem (another subvol=, or the same
 *                device again on another mount point): with the first
 *                mounted without the option, a second one that adds it
 *                fails with EINVAL and a log line naming the option, as does
 *                one naming another version (=v1); with the first mounted
 *                with it, a second one without it works (btrfs ignores
 *                options absent from a second mount), shows the option in
 *                /proc/mounts (one superblock) and encrypts what it creates,
 *                and so does one repeating it;
 *  8. btrfs check of the result is clean (the test key is recorded for each
 *     subvolume that holds files under it);
 *  9. zoned:     on a host-managed zoned null_blk device, mkfs.btrfs -O
 *                encrypt is refused (or, by older programs, made and then
 *                refused at mount with EINVAL: the kernel refuses ENCRYPT
 *                with ZONED); on a zoned filesystem made without it, the
 *                option is refused at mount with EINVAL.  Never a
 *                transaction abort, a read-only filesystem or a WARN (the
 *                old behaviour: the mount succeeded and the first mkdir
 *                aborted); a plain mount then works and stays writable.
 *
 * fscrypt's test key is random per boot, so there is no model of the
 * ciphertext to compare with: the device is scanned for plaintext instead
 * (btrfs_fscrypt_extent_ciphertext has the model for real keys).
 *
 * On a kernel that still takes the option on any filesystem (sets bit 40
 * itself), takes it on zoned filesystems, and ignores it on second mounts,
 * steps 0, 7 and 9 fail, and step 9 WARNs on the console.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "nullb.h"
#include "rawdev.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/fscrypt.h>

#define TEST_NAME "btrfs_fscrypt_dummy"
#define DUMMY "test_dummy_encryption"
#define FILE_SIZE (1024 * 1024)
#define BIG_SEED 0xd0770001u
#define NEEDS_FEATURE_LOG DUMMY " requires the encrypt feature"
#define MKFS_PLAIN "mkfs.btrfs -q -f"
#define MKFS_ENCRYPT "mkfs.btrfs -q -f -O encrypt"
/* Zoned mode takes single profiles (as in btrfs_fscrypt_zoned). */
#define MKFS_ZONED "mkfs.btrfs -q -f -m single -d single"
#define SB_OFFSET 65536
#define ABORT_ERE "Transaction aborted|forced readonly|" LAB_LOG_SPLAT_ERE

static const char *dev, *mnt, *mnt2;
/* Random per run: what an earlier test left on the disk cannot match. */
static char tag[17];
static char dir_name[64], file_name[64], sub_name[64], link_name[64];
static char target[96], top_name[64], plain_name[64];
static char data_marker[48], plain_marker[48];
static unsigned char *big, *plain;

static void make_names(void)
{
	lab_random_hex(tag, 8);
	snprintf(dir_name, sizeof(dir_name), "dir-%s", tag);
	snprintf(file_name, sizeof(file_name), "file-%s", tag);
	snprintf(sub_name, sizeof(sub_name), "sub-%s", tag);
	snprintf(link_name, sizeof(link_name), "link-%s", tag);
	snprintf(target, sizeof(target), "target-%s-of-the-symlink", tag);
	snprintf(top_name, sizeof(top_name), "top-%s", tag);
	snprintf(plain_name, sizeof(plain_name), "plain-%s", tag);
	snprintf(data_marker, sizeof(data_marker), "DUMMY-DATA-%s", tag);
	snprintf(plain_marker, sizeof(plain_marker), "PLAIN-DATA-%s", tag);
	big = lab_pattern(FILE_SIZE, BIG_SEED);
	stamp_marker(big, FILE_SIZE, data_marker, strlen(data_marker), 4096);
	plain = lab_pattern(64 * 1024, BIG_SEED + 1);
	stamp_marker(plain, 64 * 1024, plain_marker, strlen(plain_marker), 4096);
}

static int mount_opts(const char *opts)
{
	return lab_mount(dev, mnt, "btrfs", opts);
}

/* Is the /proc/mounts line of @where holding option @opt? */
static int mounts_on_has(const char *where, const char *opt)
{
	size_t len;
	char *text = read_file("/proc/mounts", &len);
	const char *next = text;
	char line[1024], want[PATH_MAX + 8];
	int found = -1;

	if (!text)
		return -1;
	snprintf(want, sizeof(want), " %s btrfs ", where);
	while (lab_next_line(&next, line, sizeof(line))) {
		char *o;

		if (!strstr(line, want))
			continue;
		found = 0;
		for (o = strtok(strstr(line, " btrfs ") + 7, ", "); o;
		     o = strtok(NULL, ", "))
			if (!strcmp(o, opt))
				found = 1;
	}
	free(text);
	return found;
}

static int mounts_has(const char *opt)
{
	return mounts_on_has(mnt, opt);
}

/* mkfs.btrfs @cmd on @disk; skips without it, dies if it fails. */
static void mkfs_or_die(const char *cmd, const char *disk)
{
	int st = lab_mkfs(cmd, disk);

	if (st == 127)
		lab_skip("mkfs.btrfs not found (install btrfs-progs)");
	if (st)
		lab_die("%s %s failed with status %d", cmd, disk, st);
}

/*
 * The incompat flags in the primary superblock of the unmounted @disk, read
 * with O_DIRECT (what is on the device, not in a cache), into *@flags.
 */
static int sb_incompat(const char *disk, uint64_t *flags)
{
	unsigned char *sb = NULL;
	int fd, i, ret = -1;

	if (posix_memalign((void **)&sb, 4096, 4096))
		lab_die("out of memory");
	fd = open(disk, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 || pread(fd, sb, 4096, SB_OFFSET) != 4096)
		printf("   cannot read the superblock of %s: " LAB_ERR_FMT "\n",
		       disk, LAB_ERR_ARGS(errno));
	else if (memcmp(sb + 64, "_BHRfS_M", 8))
		printf("   no btrfs magic at %d on %s\n", SB_OFFSET, disk);
	else
		ret = 0;
	if (!ret) {
		*flags = 0;
		for (i = 7; i >= 0; i--)
			*flags = *flags << 8 | sb[LAB_BTRFS_SB_INCOMPAT_OFF + i];
	}
	if (fd >= 0)
		close(fd);
	free(sb);
	return ret;
}

/* Does the superblock of @disk have the ENCRYPT bit?  1, 0, or -1. */
static int sb_has_encrypt(const char *disk)
{
	uint64_t flags;

	if (sb_incompat(disk, &flags))
		return -1;
	printf("   %s: incompat flags 0x%llx\n", disk, (unsigned long long)flags);
	return !!(flags & LAB_BTRFS_INCOMPAT_ENCRYPT);
}

/*
 * Mount @disk on @where with @opts, expecting EINVAL.  Returns 1 if it was
 * refused so; if it was mounted instead, the failure is recorded and it
 * stays mounted (returns 0), for the caller to look at and unmount.
 */
static int mount_refused(const char *disk, const char *where, const char *opts,
			 const char *what)
{
	int ret = lab_mount(disk, where, "btrfs", opts);
	int e = errno;

	if (ret == 0) {
		CHECK(0, "%s: mounted with %s, expected EINVAL", what, opts);
		return 0;
	}
	return CHECK(e == EINVAL, "%s: mount with %s failed with " LAB_ERR_FMT
		     ", expected EINVAL", what, opts, LAB_ERR_ARGS(e));
}

/* Is the filesystem mounted on @where read-only (statvfs)? */
static int mounted_ro(const char *where)
{
	struct statvfs sv;

	return statvfs(where, &sv) == 0 && (sv.f_flag & ST_RDONLY);
}

static void path_in(char *out, size_t size, const char *a, const char *b)
{
	if (b)
		lab_pathf(out, size, "%s/%s/%s", mnt, a, b);
	else
		lab_pathf(out, size, "%s/%s", mnt, a);
}

/*
 * FS_ENCRYPT_FL, and a v2 policy whose key is present.  (The policy ioctls
 * need an open file, which a symlink is not: the device scan covers its
 * target.)
 */
static void check_encrypted(const char *path)
{
	struct fscrypt_get_policy_ex_arg pol;
	struct fscrypt_get_key_status_arg st;
	unsigned int fl = 0;
	struct stat sb;
	int fd;

	if (!CHECK_OK(lstat(path, &sb), "lstat %s", path) || S_ISLNK(sb.st_mode))
		return;
	if (!CHECK_OK(lab_get_policy_ex(path, &pol), "policy of %s", path))
		return;
	CHECK(pol.policy.version == FSCRYPT_POLICY_V2,
	      "%s: policy version %u, expected v2", path, pol.policy.version);
	if (CHECK_OK(lab_get_key_status(mnt, pol.policy.v2.master_key_identifier, &st),
		     "key status of %s's key", path))
		CHECK(st.status == FSCRYPT_KEY_STATUS_PRESENT,
		      "%s: the test key's status is %u, expected present", path,
		      st.status);
	fd = open(path, O_RDONLY | O_NOFOLLOW);
	if (!CHECK_OK(fd, "open %s", path))
		return;
	if (CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &fl), "FS_IOC_GETFLAGS %s", path))
		CHECK(fl & FS_ENCRYPT_FL, "%s lacks FS_ENCRYPT_FL (flags 0x%x)",
		      path, fl);
	close(fd);
}

/* Every data extent item of @path has encryption @want. */
static void check_extents(const char *path, uint8_t want, int want_encoded)
{
	struct lab_btrfs_file_extent *fe = NULL;
	size_t n = 0, i, data = 0, encoded = 0;
	struct stat st;

	if (!CHECK_OK(stat(path, &st), "stat %s", path) ||
	    !CHECK_OK(lab_btrfs_file_extents(path, st.st_ino, &fe, &n),
		      "file extent items of %s", path))
		return;
	for (i = 0; i < n; i++) {
		if (fe[i].type == 0 /* inline */) {
			CHECK(0, "%s: an inline extent at %llu", path,
			      (unsigned long long)fe[i].file_offset);
			continue;
		}
		if (fe[i].disk_bytenr == 0)
			continue;
		data++;
		encoded += fe[i].compression != 0;
		CHECK(fe[i].encryption == want,
		      "%s: extent at %llu has encryption 0x%x, expected 0x%x",
		      path, (unsigned long long)fe[i].file_offset,
		      fe[i].encryption, want);
	}
	CHECK(data > 0, "%s has no data extent", path);
	if (want_encoded)
		CHECK(encoded == data, "%s: %zu of %zu extents compressed, expected all",
		      path, encoded, data);
	printf("   %s: %zu data extents, encryption 0x%x, %zu compressed\n",
	       path, data, want, encoded);
	free(fe);
}

/* ---- 1. options -------------------------------------------------------- */

static void test_options(void)
{
	char f[PATH_MAX];

	printf("\n== 1. mkfs.btrfs -O encrypt, mount options\n");
	mkfs_or_die(MKFS_ENCRYPT, dev);
	CHECK(sb_has_encrypt(dev) == 1,
	      "%s lacks the ENCRYPT incompat bit after " MKFS_ENCRYPT, dev);
	lab_log_mark("dummy-v1");
	CHECK_ERRNO(mount_opts(DUMMY "=v1"), EINVAL, "mount with " DUMMY "=v1");
	CHECK(lab_log_has(DUMMY " takes v2 policies only"),
	      "no log line says why " DUMMY "=v1 was refused");
	CHECK_ERRNO(mount_opts(DUMMY "=v3"), EINVAL, "mount with " DUMMY "=v3");

	/* A file from before the option: it must stay plain (control). */
	if (mount_opts(NULL))
		lab_die("cannot mount %s", dev);
	path_in(f, sizeof(f), plain_name, NULL);
	CHECK_OK(write_file(f, plain, 64 * 1024), "write %s", f);
	CHECK_ERRNO(mount(NULL, mnt, NULL, MS_REMOUNT, DUMMY), EINVAL,
		    "remount of a plain mount with " DUMMY);
	CHECK(mounts_has("test_dummy_encryption=v2") == 0,
	      "/proc/mounts shows the option on a plain mount");
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);

	if (mount_opts(DUMMY))
		lab_die("cannot mount %s with " DUMMY, dev);
	CHECK(mounts_has("test_dummy_encryption=v2") == 1,
	      "/proc/mounts lacks test_dummy_encryption=v2");
	CHECK(mounts_has("fscrypt_per_extent_keys") == 1,
	      "/proc/mounts lacks fscrypt_per_extent_keys");
	CHECK_OK(mount(NULL, mnt, NULL, MS_REMOUNT, DUMMY "=v2"),
		 "remount repeating " DUMMY "=v2");
	CHECK(mounts_has("test_dummy_encryption=v2") == 1,
	      "/proc/mounts lacks the option after the remount");
}

/* ---- 2. contents ------------------------------------------------------- */

static void test_contents(void)
{
	struct fscrypt_get_policy_ex_arg pol;
	char d[PATH_MAX], f[PATH_MAX];
	size_t i;

	printf("\n== 2. new files under " DUMMY "\n");
	path_in(d, sizeof(d), dir_name, NULL);
	CHECK_OK(mkdir(d, 0755), "mkdir %s", d);
	path_in(f, sizeof(f), dir_name, file_name);
	CHECK_OK(write_file(f, big, FILE_SIZE), "write %s", f);
	path_in(f, sizeof(f), dir_name, sub_name);
	CHECK_OK(mkdir(f, 0755), "mkdir %s", f);
	path_in(f, sizeof(f), dir_name, link_name);
	CHECK_OK(symlink(target, f), "symlink %s", f);
	path_in(f, sizeof(f), top_name, NULL);
	CHECK_OK(write_file(f, big, 64 * 1024), "write %s", f);
	sync();

	CHECK_ERRNO(lab_get_policy_ex(mnt, &pol), ENODATA,
		    "policy of the top directory");
	path_in(f, sizeof(f), plain_name, NULL);
	CHECK_ERRNO(lab_get_policy_ex(f, &pol), ENODATA,
		    "policy of the file written before the option");
	{
		const char *rel[][2] = {
			{ dir_name, NULL }, { dir_name, file_name },
			{ dir_name, sub_name }, { dir_name, link_name },
			{ top_name, NULL },
		};

		for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			path_in(f, sizeof(f), rel[i][0], rel[i][1]);
			check_encrypted(f);
		}
	}
	path_in(f, sizeof(f), dir_name, file_name);
	check_extents(f, LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT, 0);
	path_in(f, sizeof(f), top_name, NULL);
	check_extents(f, LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT, 0);
}

/* ---- 3. device ---------------------------------------------------------- */

static void test_device(void)
{
	struct raw_needle nd[8];
	/* Names inside the new directory; its own name is in the top one. */
	const char *enc[] = { file_name, sub_name, link_name, target,
			      data_marker };
	/* The top directory is not encrypted: its entries' names are not. */
	const char *plain_what[] = { "control name", "control data",
				     "name of the new directory in the top one",
				     "name of the new file in the top one" };
	const char *plain_data[] = { plain_name, plain_marker, dir_name,
				     top_name };
	size_t n = 0, i, nenc = sizeof(enc) / sizeof(enc[0]);

	printf("\n== 3. the device holds no plaintext of the new tree\n");
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	memset(nd, 0, sizeof(nd));
	/* Anchored on the run's tag, which every needle contains. */
	nd[n].label = "tag";
	nd[n].data = tag;
	nd[n++].len = strlen(tag);
	for (i = 0; i < nenc; i++) {
		nd[n].label = "encrypted";
		nd[n].data = enc[i];
		nd[n++].len = strlen(enc[i]);
	}
	if (!CHECK_OK(raw_scan_anchored(dev, nd, n), "scan %s", dev))
		return;
	for (i = 1; i < n; i++) {
		printf("   %s: %lld\n", (const char *)nd[i].data, nd[i].count);
		CHECK(nd[i].count == 0, "LEAK: \"%s\" is on %s in plaintext %lld times",
		      (const char *)nd[i].data, dev, nd[i].count);
	}
	memset(nd, 0, sizeof(nd));
	for (i = 0; i < 4; i++) {
		nd[i].label = plain_what[i];
		nd[i].data = plain_data[i];
		nd[i].len = strlen(plain_data[i]);
	}
	if (CHECK_OK(raw_scan(dev, nd, 4), "scan %s", dev))
		for (i = 0; i < 4; i++)
			CHECK(nd[i].count > 0,
			      "control: the %s is not on %s: the scan is blind",
			      nd[i].label, dev);
}

/* ---- 4. remount --------------------------------------------------------- */

static void check_tree_reads(void)
{
	char f[PATH_MAX], buf[128];
	ssize_t len;

	path_in(f, sizeof(f), dir_name, file_name);
	CHECK_FILE_EQUALS(f, big, FILE_SIZE);
	path_in(f, sizeof(f), top_name, NULL);
	CHECK_FILE_EQUALS(f, big, 64 * 1024);
	path_in(f, sizeof(f), plain_name, NULL);
	CHECK_FILE_EQUALS(f, plain, 64 * 1024);
	path_in(f, sizeof(f), dir_name, link_name);
	len = readlink(f, buf, sizeof(buf) - 1);
	if (CHECK_OK(len, "readlink %s", f)) {
		buf[len] = 0;
		CHECK(!strcmp(buf, target), "%s -> \"%s\", expected \"%s\"", f,
		      buf, target);
	}
	path_in(f, sizeof(f), dir_name, sub_name);
	CHECK(access(f, F_OK) == 0, "%s is gone", f);
}

static void test_remount(void)
{
	struct lab_names names;
	char f[PATH_MAX];
	size_t i;
	int fd;

	printf("\n== 4. after a remount with and without " DUMMY "\n");
	if (mount_opts(DUMMY))
		lab_die("cannot mount %s with " DUMMY, dev);
	check_tree_reads();
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);

	if (mount_opts(NULL))
		lab_die("cannot mount %s", dev);
	path_in(f, sizeof(f), top_name, NULL);
	fd = open(f, O_RDONLY);
	CHECK(fd < 0 && errno == ENOKEY,
	      "open %s without the test key: %s, expected ENOKEY", f,
	      fd < 0 ? lab_errname(errno) : "success");
	if (fd >= 0)
		close(fd);
	path_in(f, sizeof(f), dir_name, NULL);
	if (CHECK_OK(lab_list_dir(f, &names), "list %s", f)) {
		CHECK(names.n == 3, "%s lists %zu names, expected 3", f, names.n);
		for (i = 0; i < names.n; i++)
			CHECK(!strstr(names.name[i], tag),
			      "%s shows the plaintext name %s without the key", f,
			      names.name[i]);
		lab_names_free(&names);
	}
	path_in(f, sizeof(f), plain_name, NULL);
	CHECK_FILE_EQUALS(f, plain, 64 * 1024);
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
}

/* ---- 5. snapshot, 6. key modes ------------------------------------------ */

static void test_snapshot(void)
{
	char sv[PATH_MAX], snap[PATH_MAX], f[PATH_MAX], g[PATH_MAX];
	int fd;

	printf("\n== 5. a snapshot of a subvolume with files under the test key\n");
	if (mount_opts(DUMMY))
		lab_die("cannot mount %s with " DUMMY, dev);
	lab_btrfs_subvol(mnt, "sv", -1);
	lab_pathf(sv, sizeof(sv), "%s/sv", mnt);
	lab_pathf(f, sizeof(f), "%s/sv/%s", mnt, file_name);
	CHECK_OK(write_file(f, big, 256 * 1024), "write %s", f);
	check_encrypted(f);
	sync();
	fd = open(sv, O_RDONLY | O_DIRECTORY);
	if (!CHECK_OK(fd, "open %s", sv))
		return;
	lab_btrfs_subvol(mnt, "snap", fd);
	close(fd);
	lab_pathf(snap, sizeof(snap), "%s/snap/%s", mnt, file_name);
	lab_drop_caches("3");
	CHECK_FILE_EQUALS(snap, big, 256 * 1024);
	/* New extents on both sides, with keys of their own. */
	CHECK_OK(write_file(snap, big + 4096, 128 * 1024), "rewrite %s", snap);
	lab_pathf(g, sizeof(g), "%s/sv/new-%s", mnt, tag);
	CHECK_OK(write_file(g, big + 8192, 128 * 1024), "write %s", g);
	sync();
	lab_drop_caches("3");
	CHECK_FILE_EQUALS(snap, big + 4096, 128 * 1024);
	CHECK_FILE_EQUALS(f, big, 256 * 1024);
	CHECK_FILE_EQUALS(g, big + 8192, 128 * 1024);
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
}

static void test_key_modes(void)
{
	const int compress = access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) == 0;
	unsigned char *text = lab_xmalloc(256 * 1024);
	char f[PATH_MAX];
	size_t i;

	printf("\n== 6. per-inode keys and compression under " DUMMY "\n");
	if (mount_opts(DUMMY "," LAB_BTRFS_PER_INODE_KEYS_OPT))
		lab_die("cannot mount %s with " DUMMY " and per-inode keys", dev);
	CHECK(mounts_has(LAB_BTRFS_PER_INODE_KEYS_OPT) == 1,
	      "/proc/mounts lacks " LAB_BTRFS_PER_INODE_KEYS_OPT);
	path_in(f, sizeof(f), dir_name, "per-inode");
	CHECK_OK(write_file(f, big, 128 * 1024), "write %s", f);
	sync();
	check_extents(f, LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE, 0);
	lab_drop_caches("3");
	CHECK_FILE_EQUALS(f, big, 128 * 1024);
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);

	if (!compress) {
		printf("   compression: skipped, the kernel lacks %s\n",
		       LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE);
		free(text);
		return;
	}
	for (i = 0; i < 256 * 1024; i++)
		text[i] = "the quick brown fox "[i % 20];
	stamp_marker(text, 256 * 1024, data_marker, strlen(data_marker), 4096);
	if (mount_opts(DUMMY ",compress-force=zstd"))
		lab_die("cannot mount %s with " DUMMY " and compress-force", dev);
	path_in(f, sizeof(f), dir_name, "compressed");
	CHECK_OK(write_file(f, text, 256 * 1024), "write %s", f);
	sync();
	check_extents(f, LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT, 1);
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	if (mount_opts(DUMMY))
		lab_die("cannot mount %s with " DUMMY, dev);
	CHECK_FILE_EQUALS(f, text, 256 * 1024);
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	free(text);
}

/* ---- 0. the encrypt feature -------------------------------------------- */

static void test_feature(void)
{
	/* Not the names and markers that step 3 looks for on the device. */
	unsigned char *data = lab_pattern(64 * 1024, BIG_SEED + 2);
	char d[PATH_MAX], f[PATH_MAX];

	printf("\n== 0. " DUMMY " needs the encrypt feature\n");
	mkfs_or_die(MKFS_PLAIN, dev);
	if (!CHECK(sb_has_encrypt(dev) == 0,
		   "%s has the ENCRYPT incompat bit after " MKFS_PLAIN, dev))
		return;
	lab_log_mark("dummy-no-feature");
	if (!mount_refused(dev, mnt, DUMMY, "a filesystem without ENCRYPT")) {
		/* What the option did before: the bit at the first mkdir. */
		path_in(d, sizeof(d), "feature-dir", NULL);
		CHECK_OK(mkdir(d, 0755), "mkdir %s", d);
		CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	}
	lab_log_show(10);
	CHECK(lab_log_has(NEEDS_FEATURE_LOG),
	      "no kernel log line says \"" NEEDS_FEATURE_LOG "\"");
	CHECK(sb_has_encrypt(dev) == 0,
	      "the ENCRYPT bit is set on %s after mounting with " DUMMY, dev);

	/* A plain mount is unaffected and leaves the bit alone. */
	if (mount_opts(NULL))
		lab_die("cannot mount %s", dev);
	path_in(f, sizeof(f), "feature-file", NULL);
	CHECK_OK(write_file(f, data, 64 * 1024), "write %s", f);
	CHECK(mounts_has("test_dummy_encryption=v2") == 0,
	      "/proc/mounts shows the option on a plain mount");
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	CHECK(sb_has_encrypt(dev) == 0,
	      "the ENCRYPT bit is set on %s after a plain mount", dev);
	free(data);
}

/* ---- 7. second mounts ---------------------------------------------------- */

/* A second mount of @dev on mnt2 with @opts must fail with EINVAL and log. */
static void second_mount_refused(const char *opts, const char *what)
{
	lab_log_mark("dummy-second-mount");
	if (!mount_refused(dev, mnt2, opts, what))
		CHECK_OK(lab_umount(mnt2), "umount %s", mnt2);
	CHECK(lab_log_has(DUMMY),
	      "%s: no kernel log line names " DUMMY " after the refusal", what);
}

static void test_second_mount(void)
{
	char f[PATH_MAX];

	printf("\n== 7. second mounts of the filesystem\n");
	if (mount_opts(NULL))
		lab_die("cannot mount %s", dev);
	lab_btrfs_subvol(mnt, "sv2", -1);
	second_mount_refused("subvol=sv2," DUMMY,
			     "another subvolume, adding the option");
	second_mount_refused(DUMMY, "the same device again, adding the option");
	second_mount_refused("subvol=sv2," DUMMY "=v1",
			     "another subvolume, naming v1");
	/* The first mount is as it was. */
	CHECK(mounts_has("test_dummy_encryption=v2") == 0,
	      "/proc/mounts shows the option on the first (plain) mount");
	path_in(f, sizeof(f), "sv2", "plain-second");
	CHECK_OK(write_file(f, plain, 4096), "write %s", f);
	{
		struct fscrypt_get_policy_ex_arg pol;

		CHECK_ERRNO(lab_get_policy_ex(f, &pol), ENODATA,
			    "policy of %s, made on the plain mount", f);
	}
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);

	/* First with the option: a second mount without it or with it works. */
	if (mount_opts(DUMMY))
		lab_die("cannot mount %s with " DUMMY, dev);
	if (CHECK_OK(lab_mount(dev, mnt2, "btrfs", "subvol=sv2"),
		     "second mount (subvol=sv2) without the option")) {
		CHECK(mounts_on_has(mnt2, "test_dummy_encryption=v2") == 1,
		      "/proc/mounts lacks the option on %s (one superblock)", mnt2);
		lab_pathf(f, sizeof(f), "%s/second-%s", mnt2, tag);
		CHECK_OK(write_file(f, big, 64 * 1024), "write %s", f);
		check_encrypted(f);
		lab_drop_caches("3");
		CHECK_FILE_EQUALS(f, big, 64 * 1024);
		CHECK_OK(lab_umount(mnt2), "umount %s", mnt2);
	}
	if (CHECK_OK(lab_mount(dev, mnt2, "btrfs", "subvol=sv2," DUMMY),
		     "second mount (subvol=sv2) repeating the option"))
		CHECK_OK(lab_umount(mnt2), "umount %s", mnt2);
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
}

/* ---- 9. zoned ------------------------------------------------------------ */

static void test_zoned(void)
{
	char d[PATH_MAX], f[PATH_MAX], why[256];
	const char *zdev;
	int st;

	printf("\n== 9. zoned filesystems\n");
	zdev = lab_nullb_zoned("labdummy", 1024, 16, why, sizeof(why));
	if (!zdev) {
		/* Not a skip of the whole test: steps 0-8 ran. */
		printf("   zoned: not tested, %s\n", why);
		return;
	}
	lab_log_mark("dummy-zoned-mkfs");
	st = lab_mkfs(MKFS_ZONED " -O encrypt", zdev);
	if (st == 0) {
		printf("   mkfs.btrfs made a zoned filesystem with ENCRYPT: the mount must refuse it\n");
		if (!mount_refused(zdev, mnt, NULL, "zoned with ENCRYPT"))
			CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	} else {
		CHECK(st == 1, "mkfs.btrfs -O encrypt on zoned %s: status %d, expected 1",
		      zdev, st);
	}

	mkfs_or_die(MKFS_ZONED, zdev);
	lab_log_mark("dummy-zoned-mount");
	if (!mount_refused(zdev, mnt, DUMMY, "zoned without ENCRYPT")) {
		/* Before the fix, the first mkdir aborted the transaction. */
		path_in(d, sizeof(d), dir_name, NULL);
		CHECK_OK(mkdir(d, 0755), "mkdir %s on zoned with " DUMMY, d);
		CHECK(!mounted_ro(mnt), "zoned with " DUMMY ": forced read-only");
		CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	}
	lab_log_show(10);
	CHECK(!lab_log_has(ABORT_ERE),
	      "the kernel log has an abort, a read-only switch or a splat");

	/* The filesystem is intact and writable. */
	if (!CHECK_OK(lab_mount(zdev, mnt, "btrfs", NULL), "plain mount of zoned %s",
		      zdev))
		goto out;
	CHECK(!mounted_ro(mnt), "zoned %s mounted read-only", zdev);
	path_in(f, sizeof(f), plain_name, NULL);
	CHECK_OK(write_file(f, plain, 64 * 1024), "write %s", f);
	CHECK_OK(fsync_path(f), "fsync %s", f);
	lab_drop_caches("3");
	CHECK_FILE_EQUALS(f, plain, 64 * 1024);
	if (CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		lab_btrfs_check_clean(zdev, "the zoned filesystem");
out:
	lab_nullb_remove();
}

int main(void)
{
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	mnt2 = lab_env("SCRATCH_MNT2");
	make_names();

	test_feature();
	test_options();
	test_contents();
	test_device();
	test_remount();
	test_snapshot();
	test_key_modes();
	test_second_mount();
	printf("\n== 8. btrfs check\n");
	lab_btrfs_check_clean(dev, "the filesystem written under " DUMMY);
	/* Last: before the fix, it aborts a transaction with a WARN. */
	test_zoned();
	return lab_result(TEST_NAME);
}
