// SPDX-License-Identifier: GPL-2.0
/*
 * fscrypt_crash.c - an encrypted file that was fsynced survives a crash.
 *
 * Two boots on the same scratch disks (tests/run-phased.sh runs them):
 *
 * phase 1: mkfs SCRATCH_DEV, mount with commit=300 (no periodic commit: the
 *   fsync is what makes the file durable: ext4's journal, btrfs's tree log),
 *   add a random master key, set a v2 policy on a new directory, create a
 *   file in it (random seed, 300 KiB + 123 bytes), write it, fsync it (only
 *   it: no sync(), no syncfs, the directory is not fsynced either), then
 *   write a record (key, seed, size, SHA-256, nonce, name) to block 0 of
 *   SCRATCH_DEV2 with O_DIRECT|O_DSYNC, print LAB-CRASH-NOW, and reboot the
 *   VM at once with sysrq-b: no unmount, no writeback of anything still
 *   dirty.  The runner (run-vm.sh --expect-crash) treats that reboot as the
 *   expected end of this boot.
 *
 *   What this crash is: the guest dies; what it had submitted to the
 *   virtual disk (cache=none) is on the host's image file.  It is not a
 *   power cut of the disk itself.
 *
 * phase 2: read the record; before mounting, the superblock must show that
 *   recovery is pending (ext4: the needs_recovery flag, which only a
 *   filesystem left mounted has; btrfs: log_root is printed, non-zero means a
 *   tree log will be replayed); mount (replay), check the file is still
 *   encrypted without the key (one no-key name, open fails with ENOKEY), add
 *   the key (same identifier), same policy and nonce, and the content equals
 *   the pattern byte for byte and has phase 1's SHA-256; unmount and run
 *   the filesystem checker: e2fsck -fn must be clean; on btrfs, the image's
 *   patched `btrfs check --readonly` (lib/btrfs_progs.c) must be clean, and
 *   without it the test skips, saying so.
 */
#include "btrfs_progs.h"
#include "fscrypt_ondisk.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/evp.h>

#define CR_MAGIC "LABCRSH1"
#define CR_SIZE (300 * 1024 + 123)
#define CR_MOUNT_OPTS "commit=300"
#define CR_REC_BLOCK 4096

/* ext4 superblock at 1024: s_magic at 0x38, s_feature_incompat at 0x60 */
#define EXT4_SB_OFF 1024
#define EXT4_INCOMPAT_RECOVER 0x0004

struct cr_record {
	char magic[8];
	char fs[16];
	uint8_t key[64];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint8_t nonce[16];
	uint8_t sha256[32];
	uint64_t size;
	uint32_t seed;
	uint32_t unused;
	char name[NAME_MAX + 1];
	uint8_t rec_sum[32];	/* SHA-256 of everything above */
};

struct cr_ctx {
	const struct lab_fscrypt_fs *fs;
	const char *dev, *dev2, *mnt;
	int btrfs;
	char dir[PATH_MAX], file[PATH_MAX];
};

static void cr_sha256(const void *buf, size_t len, uint8_t out[32])
{
	if (EVP_Digest(buf, len, out, NULL, EVP_sha256(), NULL) != 1)
		lab_die("EVP_Digest(SHA-256) failed");
}

/* ---- what the superblock says ------------------------------------------------ */

/* ext4 s_feature_incompat, or -1 if not an ext4 superblock. */
static long long cr_ext4_incompat(const char *dev)
{
	uint8_t sb[0x64];

	if (raw_read(dev, EXT4_SB_OFF, sb, sizeof(sb)) ||
	    sb[0x38] != 0x53 || sb[0x39] != 0xef)
		return -1;
	return (long long)((uint32_t)sb[0x60] | (uint32_t)sb[0x61] << 8 |
			   (uint32_t)sb[0x62] << 16 | (uint32_t)sb[0x63] << 24);
}

/* ---- phase 1 ------------------------------------------------------------------- */

static int cr_phase1(struct cr_ctx *c)
{
	static struct cr_record rec;
	unsigned char block[CR_REC_BLOCK];
	unsigned char *data;
	char tag[9], hex[65], hex2[33];
	long long lr;
	int fd;

	memset(&rec, 0, sizeof(rec));
	memcpy(rec.magic, CR_MAGIC, 8);
	PATHF(rec.fs, "%s", c->fs->name);
	lab_random(rec.key, sizeof(rec.key));
	lab_random(&rec.seed, sizeof(rec.seed));
	rec.size = CR_SIZE;
	lab_random_hex(tag, 4);
	PATHF(rec.name, "crash-%s-fsynced-then-crashed", tag);
	data = lab_pattern(rec.size, rec.seed);
	cr_sha256(data, rec.size, rec.sha256);

	lab_fscrypt_fs_setup(c->fs, c->dev, c->mnt, CR_MOUNT_OPTS, rec.key,
			     sizeof(rec.key), rec.id);
	if (!CHECK_OK(mkdir(c->dir, 0755), "mkdir %s", c->dir) ||
	    !CHECK_OK(lab_set_policy(c->dir, rec.id), "FS_IOC_SET_ENCRYPTION_POLICY on %s", c->dir))
		lab_die("cannot make the encrypted directory");
	PATHF(c->file, "%s/%s", c->dir, rec.name);
	fd = open(c->file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (!CHECK_OK(fd, "create %s", c->file))
		lab_die("cannot create the file");
	printf("writing %llu bytes (seed %u, SHA-256 %s) to %s, then fsync of this file only\n",
	       (unsigned long long)rec.size, rec.seed,
	       lab_hex(hex, rec.sha256, 32), c->file);
	if (!CHECK_OK(write_all(fd, data, rec.size), "write %s", c->file) ||
	    !CHECK_OK(fsync(fd), "fsync %s", c->file))
		lab_die("cannot write and fsync the file");
	CHECK_OK(lab_get_nonce(c->file, rec.nonce), "FS_IOC_GET_ENCRYPTION_NONCE on %s", c->file);
	close(fd);
	free(data);

	cr_sha256(&rec, offsetof(struct cr_record, rec_sum), rec.rec_sum);
	memset(block, 0, sizeof(block));
	memcpy(block, &rec, sizeof(rec));
	if (!CHECK_OK(raw_write_sync(c->dev2, 0, block, sizeof(block)),
		      "writing the phase record to %s", c->dev2))
		lab_die("cannot record what phase 2 must find");
	printf("record written to %s: key identifier %s, nonce %s\n", c->dev2,
	       lab_hex(hex, rec.id, sizeof(rec.id)),
	       lab_hex(hex2, rec.nonce, sizeof(rec.nonce)));
	if (c->btrfs) {
		lr = raw_btrfs_log_root(c->dev);
		printf("btrfs superblock on the device: log_root %lld (%s)\n", lr,
		       lr > 0 ? "the fsync went to the tree log" :
		       lr == 0 ? "no tree log: the fsync committed a transaction" :
		       "unreadable");
	}
	if (lab_failures)
		return lab_result("fscrypt crash, phase 1");
	lab_crash_now();
}

/* ---- phase 2 --------------------------------------------------------------------- */

static int cr_read_record(const struct cr_ctx *c, struct cr_record *rec)
{
	unsigned char block[CR_REC_BLOCK];
	uint8_t sum[32];

	if (!CHECK_OK(raw_read(c->dev2, 0, block, sizeof(block)),
		      "reading the phase record from %s", c->dev2))
		return -1;
	memcpy(rec, block, sizeof(*rec));
	cr_sha256(rec, offsetof(struct cr_record, rec_sum), sum);
	if (!CHECK(memcmp(rec->magic, CR_MAGIC, 8) == 0 &&
		   memcmp(sum, rec->rec_sum, sizeof(sum)) == 0,
		   "no valid phase-1 record on %s: phase 1 did not get as far as the fsync",
		   c->dev2))
		return -1;
	rec->fs[sizeof(rec->fs) - 1] = '\0';
	rec->name[sizeof(rec->name) - 1] = '\0';
	if (!CHECK(strcmp(rec->fs, c->fs->name) == 0,
		   "the phase-1 record is for %s, not %s", rec->fs, c->fs->name))
		return -1;
	return 0;
}

/* Before mounting: did phase 1 leave the filesystem needing recovery? */
static void cr_check_unclean(const struct cr_ctx *c)
{
	long long v;

	if (c->btrfs) {
		v = raw_btrfs_log_root(c->dev);
		CHECK(v >= 0, "no btrfs superblock on %s", c->dev);
		printf("btrfs superblock before mount: log_root %lld: %s\n", v,
		       v > 0 ? "the mount replays the tree log" :
		       "NOTE: no tree log to replay (the fsync committed a full transaction); the content check still applies");
		return;
	}
	v = cr_ext4_incompat(c->dev);
	if (!CHECK(v >= 0, "no ext4 superblock on %s", c->dev))
		return;
	printf("ext4 superblock before mount: feature_incompat 0x%llx, needs_recovery %s\n",
	       v, v & EXT4_INCOMPAT_RECOVER ? "set: the mount replays the journal" : "CLEAR");
	CHECK(v & EXT4_INCOMPAT_RECOVER,
	      "ext4 needs_recovery is clear: the filesystem was unmounted cleanly, so phase 1 did not crash with it mounted");
}

/* Without the key: one entry, not the plaintext name, open fails ENOKEY. */
static void cr_check_nokey(const struct cr_ctx *c, const struct cr_record *rec)
{
	struct dirent *de;
	char path[PATH_MAX], seen[NAME_MAX + 1] = "";
	int n = 0, fd, e;
	DIR *d = opendir(c->dir);

	if (!CHECK(d != NULL, "opendir %s without the key: " LAB_ERR_FMT, c->dir,
		   LAB_ERR_ARGS(errno)))
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		PATHF(seen, "%s", de->d_name);
	}
	closedir(d);
	if (!CHECK(n == 1, "%s without the key: expected 1 entry after replay, found %d (the fsynced file %s)",
		   c->dir, n, n ? "has a sibling" : "is gone"))
		return;
	printf("without the key the directory lists one entry: %s\n", seen);
	CHECK(strcmp(seen, rec->name) != 0,
	      "without the key the name is shown in plaintext: the directory lost its encryption in the replay");
	PATHF(path, "%s/%s", c->dir, seen);
	errno = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd >= 0)
		close(fd);
	EXPECT_ERRNO(fd, e, ENOKEY, "open of the no-key name %s", path);
}

static void cr_check_content(const struct cr_ctx *c, const struct cr_record *rec)
{
	struct fscrypt_policy_v2 want;
	struct fscrypt_get_policy_ex_arg got;
	unsigned char *expect, *data;
	uint8_t nonce[16], sum[32];
	char a[65], b[65];
	size_t len, off;

	lab_default_policy(&want, rec->id);
	if (CHECK_OK(lab_get_policy_ex(c->file, &got), "FS_IOC_GET_ENCRYPTION_POLICY_EX on %s", c->file))
		CHECK(got.policy.version == FSCRYPT_POLICY_V2 &&
		      memcmp(&got.policy.v2, &want, sizeof(want)) == 0,
		      "%s: the policy after replay differs from the one set in phase 1", c->file);
	if (CHECK_OK(lab_get_nonce(c->file, nonce), "FS_IOC_GET_ENCRYPTION_NONCE on %s", c->file))
		CHECK(memcmp(nonce, rec->nonce, 16) == 0,
		      "nonce after replay %s, phase 1 had %s", lab_hex(a, nonce, 16),
		      lab_hex(b, rec->nonce, 16));
	data = read_file(c->file, &len);
	if (!CHECK(data != NULL, "reading %s: " LAB_ERR_FMT, c->file, LAB_ERR_ARGS(errno)))
		return;
	expect = lab_pattern(rec->size, rec->seed);
	cr_sha256(data, len, sum);
	printf("read back %zu bytes, SHA-256 %s (phase 1: %s)\n", len,
	       lab_hex(a, sum, 32), lab_hex(b, rec->sha256, 32));
	if (CHECK(len == rec->size, "%s: size after replay %zu, phase 1 wrote and fsynced %llu",
		  c->file, len, (unsigned long long)rec->size)) {
		off = lab_first_diff(expect, data, len);
		CHECK(off == len, "%s: content differs from what phase 1 fsynced from byte %zu on (block %zu): expected 0x%02x, got 0x%02x",
		      c->file, off, off / 4096, expect[off], data[off]);
	}
	CHECK(memcmp(sum, rec->sha256, 32) == 0,
	      "%s: SHA-256 of the content differs from the one phase 1 recorded", c->file);
	free(expect);
	free(data);
}

/* Run the checker, log its output; 0 ok, 1 refused (tolerated), -1 failed. */
static int cr_fsck(const char *cmd, const char *dev, const char *refusal)
{
	char *out = NULL;
	int refused, st;

	st = lab_run_capture(cmd, dev, &out);
	refused = refusal && out && strstr(out, refusal);
	free(out);
	printf("  fsck exit status %d\n", st);
	if (st == 0)
		return 0;
	return refused ? 1 : -1;
}

static int cr_phase2(struct cr_ctx *c, const char *fsck_cmd,
		     const char *fsck_refusal)
{
	static struct cr_record rec;
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	int r;

	if (cr_read_record(c, &rec) != 0)
		return lab_result("fscrypt crash, phase 2");
	printf("phase-1 record: file %s, %llu bytes, seed %u\n", rec.name,
	       (unsigned long long)rec.size, rec.seed);
	PATHF(c->file, "%s/%s", c->dir, rec.name);
	cr_check_unclean(c);
	if (lab_fscrypt_fs_mount(c->fs, c->dev, c->mnt, CR_MOUNT_OPTS) != 0) {
		/* What the checker makes of it helps whoever debugs this. */
		cr_fsck(fsck_cmd, c->dev, fsck_refusal);
		lab_die("cannot mount %s after the crash (the checker's view is above)",
			c->dev);
	}
	cr_check_nokey(c, &rec);
	if (!CHECK_OK(lab_add_raw_key(c->mnt, rec.key, sizeof(rec.key), id),
		      "FS_IOC_ADD_ENCRYPTION_KEY after the crash"))
		lab_die("cannot add the key");
	CHECK(memcmp(id, rec.id, sizeof(id)) == 0, "key identifier differs from phase 1's");
	cr_check_content(c, &rec);
	if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
		lab_die("cannot unmount for the checker");
	if (c->btrfs) {
		/* The image's patched btrfs-progs know the ENCRYPT format. */
		lab_btrfs_check_clean(c->dev, "the replayed filesystem");
		return lab_result("fscrypt crash, phase 2");
	}
	r = cr_fsck(fsck_cmd, c->dev, fsck_refusal);
	if (r == 1)
		printf("NOTE: the checker refused the filesystem (\"%s\"): recorded, not a failure (stock tools do not know the encryption feature)\n",
		       fsck_refusal);
	CHECK(r >= 0, "%s %s found problems after the replay (output above)", fsck_cmd, c->dev);
	return lab_result("fscrypt crash, phase 2");
}

int fscrypt_crash_test(const struct lab_fscrypt_fs *fs, const char *fsck_cmd,
		       const char *fsck_refusal, int argc, char **argv)
{
	static struct cr_ctx ctx;
	struct cr_ctx *c = &ctx;

	c->fs = fs;
	c->dev = lab_env("SCRATCH_DEV");
	c->dev2 = lab_env("SCRATCH_DEV2");
	c->mnt = lab_env("SCRATCH_MNT");
	c->btrfs = strcmp(fs->name, "btrfs") == 0;
	PATHF(c->dir, "%s/enc", c->mnt);
	if (argc != 2 || (strcmp(argv[1], "1") && strcmp(argv[1], "2")))
		lab_die("usage: %s 1|2 (the phase; tests/run-phased.sh runs both, in two boots)",
			argv[0]);
	printf("fscrypt crash test on %s, phase %s (%s, record on %s)\n",
	       fs->name, argv[1], c->dev, c->dev2);
	if (argv[1][0] == '1')
		return cr_phase1(c);
	return cr_phase2(c, fsck_cmd, fsck_refusal);
}
