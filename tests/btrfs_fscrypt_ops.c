// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_ops - what btrfs encryption must do beyond the common round
 * trip (btrfs_fscrypt_roundtrip):
 *
 *  names:    rename, RENAME_EXCHANGE, RENAME_WHITEOUT, link, unlink, rmdir,
 *            long names, and fscrypt's policy rules on link and rename;
 *  data:     mmap writes, partial-block writes, truncate, hole punching,
 *            fallocate, O_DIRECT (falls back to buffered), no inline extents,
 *            compression with compress-force exactly when the kernel
 *            advertises encrypt_compress (btrfs_fscrypt_compress tests it
 *            in depth), none before;
 *  refusals: reflink/dedupe (EINVAL across encrypted and plain;
 *            EOPNOTSUPP whenever a file with per-inode keys is involved),
 *            chattr +c (only without encrypt_compress), fs-verity, encoded
 *            read, send, subvolumes and snapshots inside encrypted
 *            directories;
 *  sharing:  with per-extent keys (the default when the kernel advertises
 *            them), reflink and dedupe between encrypted files and within
 *            one, checked by content on both sides and by FIEMAP's SHARED
 *            flag, and into a file of another master key; files with
 *            per-inode keys are made on the same
 *            filesystem by remounting with fscrypt_per_inode_keys, in a
 *            subvolume of their own, whose snapshot is refused
 *            (EOPNOTSUPP, logged: the copies would share their keys); data
 *            balance and defrag keep every side readable;
 *  snapshot: a snapshot of a subvolume with encrypted files reads back with
 *            the key; key removal hides both sides; re-adding restores both;
 *  flags:    FS_IOC_GETFLAGS has FS_ENCRYPT_FL (lsattr's E) exactly on the
 *            encrypted inodes, and chattr still works on them;
 *  no key:   lookup by no-key name (short and long), unlink and rmdir by
 *            no-key name; create, link and rename into the dir fail ENOKEY;
 *  removal:  data written before the key is removed, and through a file
 *            that stays open after, is all there when the key comes back
 *            (per-extent keys: the file's first extents are written back
 *            after the removal, so its key group's key is derived then);
 *  options:  /proc/mounts names the key mode of new files both ways:
 *            fscrypt_per_extent_keys on a default mount,
 *            fscrypt_per_inode_keys (and not the other) with that option,
 *            on a fresh mount and after each remount that switches it.
 */
#include "btrfs_progs.h"
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
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/fsverity.h>

#define BLK 4096u
#define KEY_SEED 0x0b7f5u
#define KEY_SEED2 0x0c0ffu
#define LONG_NAME_LEN 240
#define EXTENT_KEYS_FEATURE "/sys/fs/btrfs/features/encrypt_extent_keys"

static const char *dev, *mnt;
static uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
/* The kernel encrypts new files per extent unless told otherwise. */
static int extent_keys;

/* sv/enc: the encrypted directory; sv/plain: an unencrypted one. */
static char sv[PATH_MAX], enc[PATH_MAX], plain[PATH_MAX];

static void drop_caches(void)
{
	CHECK_OK(lab_drop_caches("3"), "drop caches");
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void long_name(char *out, size_t size, char c)
{
	size_t i;

	for (i = 0; i < LONG_NAME_LEN && i + 1 < size; i++)
		out[i] = c;
	out[i] = '\0';
}

/* ---- names, with the key ------------------------------------------------ */

static void test_names(void)
{
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], d[PATH_MAX], sub[PATH_MAX];
	char lname[LONG_NAME_LEN + 1], lpath[PATH_MAX], p[PATH_MAX];
	unsigned char *da = lab_pattern(3 * BLK + 10, 1), *db = lab_pattern(BLK, 2);
	struct stat st;

	PATHF(a, "%s/file-a", enc);
	PATHF(b, "%s/file-b", enc);
	PATHF(c, "%s/file-c", enc);
	PATHF(d, "%s/file-d", enc);
	PATHF(sub, "%s/subdir", enc);
	CHECK_OK(write_file(a, da, 3 * BLK + 10), "create %s", a);
	CHECK_OK(write_file(b, db, BLK), "create %s", b);

	CHECK_OK(rename(a, c), "rename %s -> %s", a, c);
	CHECK(!exists(a), "%s still exists after rename", a);
	CHECK_OK(renameat2(AT_FDCWD, b, AT_FDCWD, c, RENAME_EXCHANGE),
		 "RENAME_EXCHANGE %s <-> %s", b, c);
	drop_caches();
	CHECK_FILE_EQUALS(b, da, 3 * BLK + 10);
	CHECK_FILE_EQUALS(c, db, BLK);

	CHECK_OK(renameat2(AT_FDCWD, c, AT_FDCWD, d, RENAME_WHITEOUT),
		 "RENAME_WHITEOUT %s -> %s", c, d);
	if (CHECK_OK(lstat(c, &st), "whiteout %s", c))
		CHECK(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0),
		      "whiteout %s is not a 0:0 character device", c);
	CHECK_OK(unlink(c), "unlink whiteout %s", c);

	CHECK_OK(link(d, a), "link %s -> %s", d, a);
	CHECK_OK(unlink(d), "unlink %s", d);
	drop_caches();
	CHECK_FILE_EQUALS(a, db, BLK);

	CHECK_OK(mkdir(sub, 0755), "mkdir %s", sub);
	long_name(lname, sizeof(lname), 'L');
	PATHF(lpath, "%s/%s", sub, lname);
	CHECK_OK(write_file(lpath, db, 100), "create long name in %s", sub);
	drop_caches();
	CHECK_FILE_EQUALS(lpath, db, 100);
	CHECK_ERRNO(rmdir(sub), ENOTEMPTY, "rmdir non-empty %s", sub);
	CHECK_OK(unlink(lpath), "unlink long name");
	CHECK_OK(rmdir(sub), "rmdir %s", sub);

	/* fscrypt's rules: no plaintext file enters an encrypted dir. */
	PATHF(p, "%s/plain-file", plain);
	CHECK_OK(write_file(p, db, 10), "create %s", p);
	CHECK_ERRNO(link(p, c), EXDEV, "link plain %s into encrypted dir", p);
	CHECK_ERRNO(rename(p, c), EXDEV, "rename plain %s into encrypted dir",
		    p);
	/* ...but an encrypted file may be linked into a plain dir. */
	PATHF(c, "%s/enc-link", plain);
	CHECK_OK(link(b, c), "link encrypted %s into plain dir", b);
	CHECK_FILE_EQUALS(c, da, 3 * BLK + 10);
	CHECK_OK(unlink(c), "unlink %s", c);
	free(da);
	free(db);
}

/* ---- data ----------------------------------------------------------------- */

/* Number of extents of @path (or -1), and the OR of their FIEMAP flags. */
static int fiemap_flags_all(const char *path, unsigned int *flags_or)
{
	struct raw_extent *ext;
	size_t i, n;

	if (raw_fiemap(path, &ext, &n))
		return -1;
	*flags_or = 0;
	for (i = 0; i < n; i++)
		*flags_or |= ext[i].flags;
	free(ext);
	return (int)n;
}

static void test_data(void)
{
	const size_t size = 8 * BLK;
	unsigned char *model = lab_pattern(size, 10), *part = lab_pattern(BLK, 11);
	unsigned char *dbuf;
	char f[PATH_MAX], small[PATH_MAX];
	unsigned int flags;
	int fd, n;
	void *map;

	PATHF(f, "%s/data", enc);
	CHECK_OK(write_file(f, model, size), "create %s", f);
	fd = open(f, O_RDWR);
	if (!CHECK_OK(fd, "open %s", f))
		goto out;

	/* mmap write of bytes 100..299 of block 1 */
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (CHECK(map != MAP_FAILED, "mmap %s: %s", f, strerror(errno))) {
		memcpy((char *)map + BLK + 100, part, 200);
		memcpy(model + BLK + 100, part, 200);
		CHECK_OK(msync(map, size, MS_SYNC), "msync %s", f);
		munmap(map, size);
	}
	/* partial-block write in the middle of block 3 */
	CHECK_OK(pwrite_all(fd, part + 300, 77, 3 * BLK + 1000),
		 "partial pwrite");
	memcpy(model + 3 * BLK + 1000, part + 300, 77);
	/* punch block 5 on block boundaries */
	CHECK_OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			   5 * BLK, BLK), "punch hole");
	memset(model + 5 * BLK, 0, BLK);
	/* truncate into block 6, then extend back: the tail reads as zeros */
	CHECK_OK(ftruncate(fd, 6 * BLK + 123), "truncate down");
	CHECK_OK(ftruncate(fd, size), "truncate up");
	memset(model + 6 * BLK + 123, 0, size - (6 * BLK + 123));
	/* preallocate past EOF, then write into the preallocated range */
	CHECK_OK(fallocate(fd, 0, size, 2 * BLK), "fallocate");
	CHECK_OK(pwrite_all(fd, part, BLK, size), "write into prealloc");
	CHECK_OK(fsync(fd), "fsync %s", f);
	close(fd);
	drop_caches();
	{
		size_t l;
		unsigned char *all = read_file(f, &l);

		if (CHECK(all && l == size + 2 * BLK, "size after fallocate"))
			CHECK(lab_first_diff(all, model, size) == size,
			      "%s differs from the model at byte %zu", f,
			      lab_first_diff(all, model, size));
		if (all && l == size + 2 * BLK)
			CHECK(!memcmp(all + size, part, BLK) &&
			      lab_first_diff(all + size + BLK,
					     (unsigned char[BLK]){ 0 },
					     BLK) == BLK,
			      "preallocated range reads back wrong");
		free(all);
	}

	/* O_DIRECT: accepted, falls back to buffered I/O, data correct */
	if (!posix_memalign((void **)&dbuf, BLK, BLK)) {
		memcpy(dbuf, part, BLK);
		fd = open(f, O_RDWR | O_DIRECT);
		if (CHECK_OK(fd, "open O_DIRECT %s", f)) {
			CHECK(pwrite(fd, dbuf, BLK, 0) == BLK,
			      "O_DIRECT write: %s", strerror(errno));
			memset(dbuf, 0, BLK);
			CHECK(pread(fd, dbuf, BLK, 0) == BLK &&
			      !memcmp(dbuf, part, BLK),
			      "O_DIRECT read back differs");
			close(fd);
		}
		free(dbuf);
	}

	/* a small file gets a regular (encrypted) extent, not inline data */
	PATHF(small, "%s/small", enc);
	CHECK_OK(write_file(small, part, 100), "create %s", small);
	n = fiemap_flags_all(small, &flags);
	if (CHECK(n >= 1, "FIEMAP %s: %d extents", small, n))
		CHECK(!(flags & FIEMAP_EXTENT_DATA_INLINE),
		      "%s has an inline extent (flags 0x%x)", small, flags);
out:
	free(model);
	free(part);
}

/*
 * compress-force compresses encrypted data exactly when the kernel says it
 * does (encrypt_compress); before, it was silently stored uncompressed.
 */
static void test_compression(void)
{
	const int compress = access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) == 0;
	unsigned char *buf = lab_xmalloc(64 * BLK);
	char f[PATH_MAX];
	unsigned int flags;
	int n;

	memset(buf, 'z', 64 * BLK);
	if (!CHECK(run("mount -o remount,compress-force=zlib %s", mnt) == 0,
		   "remount %s with compress-force=zlib", mnt))
		goto out;
	PATHF(f, "%s/compressible", enc);
	CHECK_OK(write_file(f, buf, 64 * BLK), "create %s", f);
	n = fiemap_flags_all(f, &flags);
	if (CHECK(n >= 1, "FIEMAP %s: %d extents", f, n))
		CHECK(!!(flags & FIEMAP_EXTENT_ENCODED) == compress,
		      "%s was %scompressed (flags 0x%x), the kernel %s encrypt_compress",
		      f, compress ? "not " : "", flags,
		      compress ? "advertises" : "lacks");
	drop_caches();
	CHECK_FILE_EQUALS(f, buf, 64 * BLK);
	CHECK(run("mount -o remount,compress=no %s", mnt) == 0,
	      "remount %s with compress=no", mnt);
out:
	free(buf);
}

/* ---- refusals --------------------------------------------------------------- */

static int open_rw(const char *path)
{
	int fd = open(path, O_RDWR);

	CHECK_OK(fd, "open %s", path);
	return fd;
}

static void test_refusals(void)
{
	char e1[PATH_MAX], e2[PATH_MAX], p1[PATH_MAX], stream[PATH_MAX];
	unsigned char *buf = lab_pattern(4 * BLK, 20);
	struct fsverity_enable_arg va = {
		.version = 1,
		.hash_algorithm = FS_VERITY_HASH_ALG_SHA256,
		.block_size = BLK,
	};
	struct btrfs_ioctl_vol_args_v2 vol = { 0 };
	struct btrfs_ioctl_encoded_io_args enc_args = { 0 };
	struct iovec iov = { .iov_base = buf, .iov_len = 4 * BLK };
	struct {
		struct file_dedupe_range r;
		struct file_dedupe_range_info info;
	} dd = { 0 };
	struct file_clone_range fcr = { 0 };
	int fe1, fe2, fp1, fd;
	unsigned int fl;

	PATHF(e1, "%s/refuse-1", enc);
	PATHF(e2, "%s/refuse-2", enc);
	PATHF(p1, "%s/refuse-plain", plain);
	CHECK_OK(write_file(e1, buf, 4 * BLK), "create %s", e1);
	CHECK_OK(write_file(e2, buf, 4 * BLK), "create %s", e2);
	CHECK_OK(write_file(p1, buf, 4 * BLK), "create %s", p1);
	sync();
	fe1 = open_rw(e1);
	fe2 = open_rw(e2);
	fp1 = open_rw(p1);
	if (fe1 < 0 || fe2 < 0 || fp1 < 0)
		goto out;

	CHECK_ERRNO(ioctl(fp1, FICLONE, fe1), EINVAL,
		    "reflink encrypted -> plain");
	CHECK_ERRNO(ioctl(fe1, FICLONE, fp1), EINVAL,
		    "reflink plain -> encrypted");
	if (!extent_keys) {
		CHECK_ERRNO(ioctl(fe2, FICLONE, fe1), EOPNOTSUPP,
			    "reflink between encrypted files (per-inode keys)");
		fcr.src_fd = fe1;
		fcr.src_offset = 0;
		fcr.src_length = BLK;
		fcr.dest_offset = 2 * BLK;
		CHECK_ERRNO(ioctl(fe1, FICLONERANGE, &fcr), EOPNOTSUPP,
			    "reflink within one encrypted file");
	}
	dd.r.src_offset = 0;
	dd.r.src_length = BLK;
	dd.r.dest_count = 1;
	dd.info.dest_fd = fp1;
	dd.info.dest_offset = 0;
	/* FIDEDUPERANGE reports per destination, in info.status */
	if (CHECK_OK(ioctl(fe1, FIDEDUPERANGE, &dd), "FIDEDUPERANGE"))
		CHECK(dd.info.status == -EINVAL,
		      "dedupe encrypted -> plain: status %d, expected %d",
		      dd.info.status, -EINVAL);

	CHECK_OK(ioctl(fe1, FS_IOC_GETFLAGS, &fl), "FS_IOC_GETFLAGS");
	fl |= FS_COMPR_FL;
	if (access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) == 0)
		CHECK_OK(ioctl(fe1, FS_IOC_SETFLAGS, &fl),
			 "chattr +c on an encrypted file (encrypt_compress)");
	else
		CHECK_ERRNO(ioctl(fe1, FS_IOC_SETFLAGS, &fl), EOPNOTSUPP,
			    "chattr +c on an encrypted file");

	close(fe1);
	fd = open(e1, O_RDONLY);
	if (CHECK_OK(fd, "open %s read-only", e1)) {
		CHECK_ERRNO(ioctl(fd, FS_IOC_ENABLE_VERITY, &va), EOPNOTSUPP,
			    "fs-verity on an encrypted file");
		enc_args.iov = &iov;
		enc_args.iovcnt = 1;
		CHECK_ERRNO(ioctl(fd, BTRFS_IOC_ENCODED_READ, &enc_args),
			    EOPNOTSUPP, "BTRFS_IOC_ENCODED_READ of an encrypted file");
		close(fd);
	}
	fe1 = -1;

	/* subvolumes and snapshots cannot be created in an encrypted dir */
	fd = open(enc, O_RDONLY | O_DIRECTORY);
	if (CHECK_OK(fd, "open %s", enc)) {
		strcpy(vol.name, "subvol-in-enc");
		CHECK_ERRNO(ioctl(fd, BTRFS_IOC_SUBVOL_CREATE_V2, &vol),
			    EOPNOTSUPP, "subvolume inside an encrypted dir");
		vol.fd = open(sv, O_RDONLY | O_DIRECTORY);
		strcpy(vol.name, "snap-in-enc");
		CHECK_ERRNO(ioctl(fd, BTRFS_IOC_SNAP_CREATE_V2, &vol),
			    EOPNOTSUPP, "snapshot inside an encrypted dir");
		close(vol.fd);
		close(fd);
	}

	/* send: refused for a subvolume with encrypted inodes... */
	PATHF(stream, "/tmp/btrfs-fscrypt-send-%d", getpid());
	CHECK(run("btrfs subvolume snapshot -r %s %s/ro-enc >/dev/null", sv,
		  mnt) == 0, "read-only snapshot of %s", sv);
	CHECK(run("btrfs send -q -f %s %s/ro-enc 2>/dev/null", stream, mnt) != 0,
	      "btrfs send of a subvolume with encrypted files succeeded");
	/* ...while it works for one without: the refusal is not a fluke */
	CHECK(run("btrfs subvolume create %s/sv-plain >/dev/null && "
		  "echo hello > %s/sv-plain/f && "
		  "btrfs subvolume snapshot -r %s/sv-plain %s/ro-plain >/dev/null",
		  mnt, mnt, mnt, mnt) == 0, "plain subvolume and snapshot");
	CHECK(run("btrfs send -q -f %s %s/ro-plain", stream, mnt) == 0,
	      "btrfs send of a plain subvolume failed");
	unlink(stream);
out:
	if (fe1 >= 0)
		close(fe1);
	if (fe2 >= 0)
		close(fe2);
	if (fp1 >= 0)
		close(fp1);
	free(buf);
}

/* ---- sharing encrypted extents (per-extent keys) --------------------------- */

/* Does FIEMAP mark every extent of @path shared? */
static int all_shared(const char *path)
{
	unsigned int flags_or = 0;
	struct raw_extent *ext;
	size_t i, n;
	int shared = 1;

	if (raw_fiemap(path, &ext, &n))
		return 0;
	for (i = 0; i < n; i++) {
		flags_or |= ext[i].flags;
		shared &= !!(ext[i].flags & FIEMAP_EXTENT_SHARED);
	}
	free(ext);
	return n > 0 && shared;
}

/* Create @path as a file with per-inode keys, by remounting for it. */
static int create_per_inode_file(const char *path, const void *buf,
				 size_t len)
{
	int ret;

	if (run("mount -o remount,fscrypt_per_inode_keys %s", mnt))
		return -1;
	ret = write_file(path, buf, len);
	if (run("mount -o remount,fscrypt_per_extent_keys %s", mnt))
		return -1;
	return ret;
}

/*
 * @sv holds a file with per-inode keys: BTRFS_IOC_SNAP_CREATE_V2 of it must
 * fail with EOPNOTSUPP, saying why in the kernel log, and make nothing.
 */
static void expect_snapshot_refused(const char *sv_path)
{
	struct btrfs_ioctl_vol_args_v2 va = { 0 };
	char snap[PATH_MAX];
	int top;

	PATHF(snap, "%s/snap-of-inode-keys", mnt);
	CHECK(lab_log_mark("lab-ops-inode-keys-snapshot-%d", getpid()) == 0,
	      "write to /dev/kmsg");
	top = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	va.fd = open(sv_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (CHECK_OK(top, "open %s", mnt) &&
	    CHECK_OK(va.fd, "open %s", sv_path)) {
		PATHF(va.name, "%s", "snap-of-inode-keys");
		CHECK_ERRNO(ioctl(top, BTRFS_IOC_SNAP_CREATE_V2, &va),
			    EOPNOTSUPP,
			    "snapshot of %s, which holds a file with per-inode keys",
			    sv_path);
		CHECK(!exists(snap), "%s exists after the refused snapshot",
		      snap);
		CHECK(lab_log_has("cannot snapshot subvolume [0-9]+: it holds files encrypted with per-inode keys"),
		      "no kernel log line saying why the snapshot of %s was refused",
		      sv_path);
	}
	if (va.fd >= 0)
		close(va.fd);
	if (top >= 0)
		close(top);
}

/* FS_IOC_GETFLAGS of @path into *@flags; 0 or -1 (failure recorded). */
static int get_fsflags(const char *path, int *flags)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (!CHECK_OK(fd, "open %s", path))
		return -1;
	ret = CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, flags), "FS_IOC_GETFLAGS %s",
		       path) ? 0 : -1;
	close(fd);
	return ret;
}

/*
 * lsattr's 'E': FS_IOC_GETFLAGS reports FS_ENCRYPT_FL for encrypted inodes
 * and only for them, as on ext4 and f2fs; and chattr, which hands back the
 * flags it read, still works on an encrypted file (the flag is ignored on
 * set, never an error, and it stays).
 */
static void test_encrypt_flag(void)
{
	const char *enc_paths[] = { enc, NULL }, *plain_paths[] = { plain, NULL };
	char ef[PATH_MAX], pf[PATH_MAX];
	int flags, fd, i;

	PATHF(ef, "%s/flags-file", enc);
	PATHF(pf, "%s/flags-file", plain);
	CHECK_OK(write_file(ef, "e", 1), "create %s", ef);
	CHECK_OK(write_file(pf, "p", 1), "create %s", pf);
	enc_paths[1] = ef;
	plain_paths[1] = pf;
	for (i = 0; i < 2; i++) {
		if (!get_fsflags(enc_paths[i], &flags))
			CHECK(flags & FS_ENCRYPT_FL,
			      "FS_IOC_GETFLAGS %s: 0x%x, no FS_ENCRYPT_FL (lsattr shows no E)",
			      enc_paths[i], flags);
		if (!get_fsflags(plain_paths[i], &flags))
			CHECK(!(flags & FS_ENCRYPT_FL),
			      "FS_IOC_GETFLAGS %s (unencrypted): 0x%x has FS_ENCRYPT_FL",
			      plain_paths[i], flags);
	}
	run("lsattr -d %s %s %s %s", enc, ef, plain, pf);

	/* chattr +A: what was read, plus NOATIME */
	fd = open(ef, O_RDONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open %s", ef) &&
	    CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &flags), "FS_IOC_GETFLAGS %s", ef)) {
		flags |= FS_NOATIME_FL;
		CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &flags),
			 "FS_IOC_SETFLAGS 0x%x (with the FS_ENCRYPT_FL read) on %s",
			 flags, ef);
		if (CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &flags),
			     "FS_IOC_GETFLAGS %s", ef))
			CHECK((flags & (FS_NOATIME_FL | FS_ENCRYPT_FL)) ==
			      (FS_NOATIME_FL | FS_ENCRYPT_FL),
			      "%s after chattr +A: 0x%x, want NOATIME and ENCRYPT",
			      ef, flags);
		/* chattr -A, and asking to clear E changes nothing */
		flags = 0;
		CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &flags),
			 "FS_IOC_SETFLAGS 0 on %s", ef);
		if (CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &flags),
			     "FS_IOC_GETFLAGS %s", ef))
			CHECK(flags == FS_ENCRYPT_FL,
			      "%s after clearing every flag: 0x%x, want FS_ENCRYPT_FL only",
			      ef, flags);
	}
	if (fd >= 0)
		close(fd);
	/* setting E on a plain file encrypts nothing (ignored, as on ext4) */
	flags = FS_ENCRYPT_FL;
	fd = open(pf, O_RDONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open %s", pf)) {
		CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &flags),
			 "FS_IOC_SETFLAGS FS_ENCRYPT_FL on %s", pf);
		close(fd);
		if (!get_fsflags(pf, &flags))
			CHECK(!(flags & FS_ENCRYPT_FL),
			      "%s: FS_ENCRYPT_FL set by FS_IOC_SETFLAGS", pf);
		CHECK_FILE_EQUALS(pf, "p", 1);
	}
}

static void test_sharing(void)
{
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], pi[PATH_MAX];
	char enc2[PATH_MAX], other[PATH_MAX], isv[PATH_MAX], ienc[PATH_MAX];
	const size_t size = 6 * BLK;
	unsigned char *da = lab_pattern(size, 40), *expect = malloc(size);
	uint8_t key2[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct file_clone_range fcr = { 0 };
	struct {
		struct file_dedupe_range r;
		struct file_dedupe_range_info info;
	} dd = { 0 };
	int fa = -1, fb = -1, fc = -1, fpi = -1, fo = -1;

	if (!extent_keys) {
		printf("# sharing: skipped, the kernel has no per-extent keys (no %s)\n",
		       EXTENT_KEYS_FEATURE);
		goto out;
	}
	PATHF(a, "%s/share-a", enc);
	PATHF(b, "%s/share-b", enc);
	PATHF(c, "%s/share-c", enc);
	/*
	 * The file with per-inode keys gets a subvolume of its own: a
	 * subvolume that holds one is never snapshotted (the copies would
	 * share its key and IVs), and sv is, below.
	 */
	PATHF(isv, "%s/sv-inode-keys", mnt);
	PATHF(ienc, "%s/enc", isv);
	PATHF(pi, "%s/share-per-inode", ienc);
	CHECK_OK(write_file(a, da, size), "create %s", a);
	CHECK_OK(write_file(c, da, size), "create %s", c);
	CHECK(run("btrfs subvolume create %s >/dev/null", isv) == 0,
	      "btrfs subvolume create %s", isv);
	CHECK_OK(mkdir(ienc, 0755), "mkdir %s", ienc);
	CHECK_OK(lab_set_policy(ienc, key_id), "policy on %s", ienc);
	CHECK_OK(create_per_inode_file(pi, da, size), "create %s", pi);
	sync();
	expect_snapshot_refused(isv);
	fa = open_rw(a);
	fc = open_rw(c);
	fpi = open_rw(pi);
	fb = open(b, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!CHECK_OK(fb, "create %s", b) || fa < 0 || fc < 0 || fpi < 0)
		goto out;

	/* whole file, then part of it into itself at another offset */
	CHECK_OK(ioctl(fb, FICLONE, fa), "reflink between encrypted files");
	fcr.src_fd = fa;
	fcr.src_offset = 0;
	fcr.src_length = 2 * BLK;
	fcr.dest_offset = 4 * BLK;
	CHECK_OK(ioctl(fa, FICLONERANGE, &fcr),
		 "reflink within one encrypted file");
	memcpy(expect, da, size);
	memcpy(expect + 4 * BLK, da, 2 * BLK);
	drop_caches();
	CHECK_FILE_EQUALS(b, da, size);
	CHECK_FILE_EQUALS(a, expect, size);
	CHECK(all_shared(b), "%s: FIEMAP does not report shared extents", b);

	/* dedupe: same plaintext, so btrfs finds it equal and shares it */
	dd.r.src_offset = 0;
	dd.r.src_length = size;
	dd.r.dest_count = 1;
	dd.info.dest_fd = fc;
	dd.info.dest_offset = 0;
	if (CHECK_OK(ioctl(fb, FIDEDUPERANGE, &dd), "FIDEDUPERANGE"))
		CHECK(dd.info.status == FILE_DEDUPE_RANGE_SAME &&
		      dd.info.bytes_deduped == size,
		      "dedupe of equal encrypted files: status %d, %llu bytes",
		      dd.info.status,
		      (unsigned long long)dd.info.bytes_deduped);
	drop_caches();
	CHECK_FILE_EQUALS(c, da, size);
	CHECK(all_shared(c), "%s: not shared after dedupe", c);

	/* a file with per-inode keys shares nothing, either way */
	CHECK_ERRNO(ioctl(fpi, FICLONE, fa), EOPNOTSUPP,
		    "reflink per-extent -> per-inode");
	CHECK_ERRNO(ioctl(fb, FICLONE, fpi), EOPNOTSUPP,
		    "reflink per-inode -> per-extent");
	CHECK_FILE_EQUALS(pi, da, size);

	/*
	 * A policy equal but for its master key: the extents keep their
	 * contexts and read with their own key (btrfs_fscrypt_multikey tests
	 * that at length; policies that differ in more are refused there).
	 */
	PATHF(enc2, "%s/enc-other", sv);
	PATHF(other, "%s/f", enc2);
	if (CHECK_OK(lab_add_key(mnt, KEY_SEED2, key2), "add second key") &&
	    CHECK_OK(mkdir(enc2, 0755), "mkdir %s", enc2) &&
	    CHECK_OK(lab_set_policy(enc2, key2), "policy on %s", enc2) &&
	    CHECK_OK(write_file(other, da, BLK), "create %s", other)) {
		fo = open_rw(other);
		if (CHECK_OK(ioctl(fo, FICLONE, fa),
			     "reflink across master keys")) {
			drop_caches();
			CHECK_FILE_EQUALS(other, expect, size);
		}
	}

	/* the shared extents outlive the file that wrote them */
	close(fa);
	fa = -1;
	CHECK_OK(unlink(a), "unlink %s", a);
	sync();
	drop_caches();
	CHECK_FILE_EQUALS(b, da, size);
	CHECK_FILE_EQUALS(c, da, size);

	/*
	 * Relocation moves the ciphertext and keeps the contexts, so nothing
	 * needs the key; defrag rewrites through the page cache, so the data
	 * gets new extents, with new keys.
	 */
	CHECK(run("btrfs balance start --full-balance -d %s >/dev/null", mnt) == 0,
	      "balance of the data of %s", mnt);
	drop_caches();
	CHECK_FILE_EQUALS(b, da, size);
	CHECK_FILE_EQUALS(pi, da, size);
	CHECK(run("btrfs filesystem defragment -f %s", b) == 0,
	      "defragment %s", b);
	sync();
	drop_caches();
	CHECK_FILE_EQUALS(b, da, size);
	CHECK_FILE_EQUALS(c, da, size);
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	if (fc >= 0)
		close(fc);
	if (fpi >= 0)
		close(fpi);
	if (fo >= 0)
		close(fo);
	free(da);
	free(expect);
}

/* ---- key removal with dirty data and open files ------------------------- */

static void test_removal_keeps_data(void)
{
	char f[PATH_MAX];
	const size_t half = 3 * BLK + 100;
	unsigned char *d = lab_pattern(2 * half, 50);
	uint32_t flags = 0;
	int fd;

	CHECK_OK(lab_add_key(mnt, KEY_SEED, key_id), "add key again");
	PATHF(f, "%s/removal", enc);
	fd = open(f, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!CHECK_OK(fd, "create %s", f))
		goto out;
	/* dirty, not written back: its extents do not exist yet */
	CHECK(write(fd, d, half) == (ssize_t)half, "write before removal");
	if (!CHECK_OK(lab_remove_key(mnt, key_id, &flags), "remove key"))
		goto out_close;
	CHECK(flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY,
	      "removal with an open file: flags 0x%x, expected FILES_BUSY",
	      flags);
	CHECK(lab_key_status(mnt, key_id) ==
	      FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED,
	      "key status with an open file is not INCOMPLETELY_REMOVED");
	/* the open file keeps working, new extents included */
	CHECK(pwrite(fd, d + half, half, half) == (ssize_t)half,
	      "write after removal through the open file: %s",
	      strerror(errno));
	CHECK_OK(fsync(fd), "fsync after removal");
out_close:
	close(fd);
	sync();
	flags = 0;
	/* Closing the last file may have completed the removal already. */
	if (lab_key_status(mnt, key_id) != FSCRYPT_KEY_STATUS_ABSENT)
		CHECK_OK(lab_remove_key(mnt, key_id, &flags),
			 "remove key again, files closed");
	CHECK(lab_key_status(mnt, key_id) == FSCRYPT_KEY_STATUS_ABSENT,
	      "key status after the file was closed is not ABSENT");
	CHECK_ERRNO(open(f, O_RDONLY), ENOENT, "lookup without the key");
	CHECK_OK(lab_add_key(mnt, KEY_SEED, key_id), "re-add key");
	drop_caches();
	CHECK_FILE_EQUALS(f, d, 2 * half);
out:
	free(d);
}

/* ---- snapshot, key removal, no-key operations ------------------------------ */

/* Name of the first entry of @dir other than . and .., or "" */
static void first_entry(const char *dir, const char *prefix_not,
			char *out, size_t size, int want_long)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	out[0] = '\0';
	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (prefix_not && !strncmp(de->d_name, prefix_not,
					    strlen(prefix_not)))
			continue;
		if (want_long != (l > 100))
			continue;
		snprintf(out, size, "%s", de->d_name);
		break;
	}
	closedir(d);
}

static void test_snapshot_and_nokey(void)
{
	char snap[PATH_MAX], f[PATH_MAX], sf[PATH_MAX], name[NAME_MAX + 1];
	char lname[LONG_NAME_LEN + 1], p[PATH_MAX], x[PATH_MAX];
	unsigned char *data = lab_pattern(5 * BLK + 7, 30);
	uint32_t flags = 0;
	int fd;

	PATHF(f, "%s/snapfile", enc);
	CHECK_OK(write_file(f, data, 5 * BLK + 7), "create %s", f);
	long_name(lname, sizeof(lname), 'N');
	PATHF(p, "%s/%s", enc, lname);
	CHECK_OK(write_file(p, data, 10), "create long-named file");
	PATHF(p, "%s/nokey-dir", enc);
	CHECK_OK(mkdir(p, 0755), "mkdir %s", p);
	sync();

	PATHF(snap, "%s/snap", mnt);
	CHECK(run("btrfs subvolume snapshot %s %s >/dev/null", sv, snap) == 0,
	      "snapshot %s", sv);
	PATHF(sf, "%s/enc/snapfile", snap);
	drop_caches();
	CHECK_FILE_EQUALS(sf, data, 5 * BLK + 7);

	if (!CHECK_OK(lab_remove_key(mnt, key_id, &flags), "remove key"))
		goto out;
	CHECK(flags == 0, "key removal flags 0x%x (files busy?)", flags);
	drop_caches();
	CHECK(!exists(f) && !exists(sf),
	      "plaintext names still visible after key removal");
	CHECK_ERRNO(open(f, O_RDONLY), ENOENT, "lookup of plaintext name");

	/* no-key names: readable listing; open fails ENOKEY; both sides */
	first_entry(enc, NULL, name, sizeof(name), 0);
	PATHF(x, "%s/enc", snap);
	if (CHECK(name[0], "no short no-key name listed in %s", enc)) {
		PATHF(p, "%s/%s", x, name);
		CHECK(exists(p), "no-key name %s not found in the snapshot",
		      name);
	}
	first_entry(enc, NULL, name, sizeof(name), 1);
	if (CHECK(name[0], "no long no-key name listed in %s", enc)) {
		PATHF(p, "%s/%s", enc, name);
		/* lookup of a long (hashed) no-key name, then unlink by it */
		CHECK_ERRNO(fd = open(p, O_RDONLY), ENOKEY,
			    "open long no-key name %s", name);
		if (fd >= 0)
			close(fd);
		CHECK_OK(unlink(p), "unlink by long no-key name %s", name);
		CHECK(!exists(p), "%s exists after unlink", p);
	}

	/* rmdir of the empty subdirectory by its no-key name */
	{
		DIR *d = opendir(enc);
		struct dirent *de;
		int done = 0;

		while (d && (de = readdir(d))) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			PATHF(p, "%s/%s", enc, de->d_name);
			CHECK_OK(rmdir(p), "rmdir by no-key name %s", p);
			done = 1;
			break;
		}
		if (d)
			closedir(d);
		CHECK(done, "no no-key directory found in %s", enc);
	}

	/* nothing new enters the directory without the key */
	PATHF(p, "%s/new", enc);
	CHECK_ERRNO(open(p, O_CREAT | O_WRONLY, 0644), ENOKEY, "create");
	CHECK_ERRNO(mkdir(p, 0755), ENOKEY, "mkdir");
	PATHF(x, "%s/plain-for-link", plain);
	CHECK_OK(write_file(x, data, 10), "create %s", x);
	CHECK_ERRNO(link(x, p), ENOKEY, "link into no-key dir");
	CHECK_ERRNO(rename(x, p), ENOKEY, "rename into no-key dir");

	/* re-add: both sides are back, byte-exact */
	CHECK_OK(lab_add_key(mnt, KEY_SEED, key_id), "re-add key");
	drop_caches();
	CHECK_FILE_EQUALS(f, data, 5 * BLK + 7);
	CHECK_FILE_EQUALS(sf, data, 5 * BLK + 7);
	PATHF(p, "%s/%s", enc, lname);
	CHECK(!exists(p), "the long name unlinked without the key came back");
	PATHF(p, "%s/enc/%s", snap, lname);
	CHECK_FILE_EQUALS(p, data, 10);

	/* the _ALL_USERS variant removes it too, and the names go again */
	fd = open(mnt, O_RDONLY | O_DIRECTORY);
	if (CHECK_OK(fd, "open %s", mnt)) {
		struct fscrypt_remove_key_arg rm = { 0 };

		rm.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
		memcpy(rm.key_spec.u.identifier, key_id, sizeof(key_id));
		CHECK_OK(ioctl(fd, FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS, &rm),
			 "FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS");
		CHECK(rm.removal_status_flags == 0,
		      "_ALL_USERS removal flags 0x%x", rm.removal_status_flags);
		close(fd);
		CHECK(lab_key_status(mnt, key_id) == FSCRYPT_KEY_STATUS_ABSENT,
		      "key status after _ALL_USERS removal is not ABSENT");
		drop_caches();
		CHECK(!exists(f), "%s visible after _ALL_USERS removal", f);
	}
out:
	free(data);
}

/* ---- the key mode in /proc/mounts ----------------------------------------- */

#define PER_INODE_OPT "fscrypt_per_inode_keys"
#define PER_EXTENT_OPT "fscrypt_per_extent_keys"

/*
 * The options field of the last /proc/mounts line for @mnt (a later mount
 * on the same directory hides the earlier ones), into @out; 0 or -1.
 */
static int mount_options(const char *mnt, char *out, size_t size)
{
	char line[4096], dir[PATH_MAX], type[64], opts[4096];
	size_t len;
	char *text = read_file("/proc/mounts", &len);
	const char *next = text;
	int found = -1;

	if (!text)
		return -1;
	while (lab_next_line(&next, line, sizeof(line))) {
		if (sscanf(line, "%*s %4095s %63s %4095s", dir, type, opts) == 3 &&
		    !strcmp(dir, mnt)) {
			snprintf(out, size, "%s", opts);
			found = 0;
		}
	}
	free(text);
	return found;
}

/* Is @opt one of the comma-separated options in @opts? */
static int has_option(const char *opts, const char *opt)
{
	size_t len = strlen(opt);
	const char *p = opts;

	while (p && *p) {
		if (!strncmp(p, opt, len) && (p[len] == ',' || p[len] == '\0'))
			return 1;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return 0;
}

/* /proc/mounts shows @want for @mnt, and not @other; @how is for messages. */
static void expect_key_mode(const char *how, const char *want,
			    const char *other)
{
	char opts[4096];

	if (!CHECK_OK(mount_options(mnt, opts, sizeof(opts)),
		      "%s: no /proc/mounts line for %s", how, mnt))
		return;
	printf("# %s: %s\n", how, opts);
	CHECK(has_option(opts, want),
	      "%s: /proc/mounts options of %s lack %s: %s", how, mnt, want, opts);
	CHECK(!has_option(opts, other),
	      "%s: /proc/mounts options of %s show %s: %s", how, mnt, other, opts);
}

/* mount(2) MS_REMOUNT with only @opt: btrfs keeps the other options. */
static int remount_with(const char *opt)
{
	return mount(dev, mnt, "btrfs", MS_REMOUNT, opt);
}

/*
 * Before anything else on the fresh filesystem: a mount with the option,
 * remounts both ways, then the default mount that the rest of the test uses.
 */
static void test_key_mode_option(void)
{
	if (!extent_keys) {
		printf("# key mode option: skipped, the kernel has no per-extent keys (no %s)\n",
		       EXTENT_KEYS_FEATURE);
		return;
	}
	if (!CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		return;
	if (CHECK_OK(lab_mount(dev, mnt, "btrfs", PER_INODE_OPT),
		     "mount -o %s", PER_INODE_OPT)) {
		expect_key_mode("mount -o " PER_INODE_OPT, PER_INODE_OPT,
				PER_EXTENT_OPT);
		if (CHECK_OK(remount_with(PER_EXTENT_OPT), "remount,%s",
			     PER_EXTENT_OPT))
			expect_key_mode("remount," PER_EXTENT_OPT, PER_EXTENT_OPT,
					PER_INODE_OPT);
		CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	}
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s again: %s", dev, strerror(errno));
	expect_key_mode("default mount", PER_EXTENT_OPT, PER_INODE_OPT);
	if (CHECK_OK(remount_with(PER_INODE_OPT), "remount,%s", PER_INODE_OPT))
		expect_key_mode("remount," PER_INODE_OPT, PER_INODE_OPT,
				PER_EXTENT_OPT);
	if (CHECK_OK(remount_with(PER_EXTENT_OPT), "remount,%s", PER_EXTENT_OPT))
		expect_key_mode("remount," PER_EXTENT_OPT " again",
				PER_EXTENT_OPT, PER_INODE_OPT);
}

int main(void)
{
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");

	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s: %s", dev, strerror(errno));
	extent_keys = access(EXTENT_KEYS_FEATURE, F_OK) == 0;
	test_key_mode_option();
	if (lab_add_key(mnt, KEY_SEED, key_id)) {
		if (errno == ENOTTY || errno == EOPNOTSUPP)
			lab_die("btrfs has no fscrypt ioctls: %s",
				strerror(errno));
		lab_die("FS_IOC_ADD_ENCRYPTION_KEY: %s", strerror(errno));
	}
	printf("# new encrypted files use per-%s keys\n",
	       extent_keys ? "extent" : "inode");
	PATHF(sv, "%s/sv", mnt);
	PATHF(enc, "%s/enc", sv);
	PATHF(plain, "%s/plain", sv);
	if (run("btrfs subvolume create %s >/dev/null", sv))
		lab_die("btrfs subvolume create %s failed", sv);
	if (mkdir(enc, 0755) || mkdir(plain, 0755))
		lab_die("mkdir: %s", strerror(errno));
	if (lab_set_policy(enc, key_id))
		lab_die("FS_IOC_SET_ENCRYPTION_POLICY %s: %s", enc,
			strerror(errno));

	test_names();
	test_data();
	test_compression();
	test_refusals();
	test_encrypt_flag();
	test_sharing();
	test_snapshot_and_nokey();
	test_removal_keeps_data();

	/* Subvolume, snapshots, reflinks, both key modes side by side. */
	if (CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		lab_btrfs_check_clean(dev, "the filesystem after the operations");
	return lab_result("btrfs_fscrypt_ops");
}
