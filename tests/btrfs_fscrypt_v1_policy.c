// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_v1_policy - btrfs refuses v1 encryption policies, and loses
 * nothing by refusing them.
 *
 * btrfs encrypts with a key per extent, derived from the master key with
 * HKDF, which only v2 master keys have.  A v1 policy must therefore be
 * refused by FS_IOC_SET_ENCRYPTION_POLICY with EINVAL, with the default
 * mount options and with fscrypt_per_inode_keys alike (the review found
 * that a v1 policy was accepted and its files' writeback then crashed on a
 * NULL HMAC transform, or failed with ENOKEY and dropped the data).
 *
 * Each of the three ways to provide a v1 key is exercised:
 *
 *   keyring       a "logon" key "fscrypt:<descriptor>" in the session
 *                 keyring, payload struct fscrypt_key;
 *   ioctl         FS_IOC_ADD_ENCRYPTION_KEY with a descriptor key_spec and
 *                 the raw key;
 *   provisioning  FS_IOC_ADD_ENCRYPTION_KEY with a descriptor key_spec and
 *                 the key_id of an "fscrypt-provisioning" key.
 *
 * Control, ext4 (mkfs.ext4 -O encrypt) on the same kernel, once per route:
 * the v1 policy is accepted and reads back, a file written under it is
 * fsynced and reads back after dropping caches, is hidden after a remount
 * without the key, and reads back byte-exact once the key is added again.
 * This shows the test's v1 setup is valid, so btrfs's EINVAL is not an
 * artifact of it.
 *
 * btrfs, each mount mode x each route: on a fresh filesystem with a plain
 * file written first, add the v1 key, then the v1 policy on an empty
 * directory must fail with EINVAL, the kernel saying "v1 encryption
 * policies are not supported on btrfs; use a v2 policy" (a reason true in
 * both key modes); the directory must stay unencrypted
 * (ENODATA) and usable: a file written and fsynced in it, and the file
 * written before, read back after dropping caches and after a remount.
 *
 * Should btrfs accept the policy (the bug), the test says so and writes a
 * file under it in a child process with a deadline, so that a crash or a
 * hang in writeback is reported as a failure rather than hanging the test.
 * A splat on the console fails the run in any case.
 *
 * Keys, descriptors, names and contents are random per run.
 */
#include "btrfs_progs.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/fscrypt.h>
#include <linux/keyctl.h>

#define TEST_NAME "btrfs_fscrypt_v1_policy"
#define V1_KEY_SIZE 64		/* AES-256-XTS */
/*
 * What the kernel says when it refuses a v1 policy: that btrfs does not
 * support v1, in every key mode (not a reason specific to per-extent keys).
 */
#define V1_REFUSAL_ERE "inode [0-9]+[)]: v1 encryption policies are not supported on btrfs; use a v2 policy"
/* Deadline of one write + fsync (or of the whole probe of an accepted v1). */
#define WRITE_TIMEOUT_S 60

enum route { ROUTE_KEYRING, ROUTE_IOCTL, ROUTE_PROVISIONING, NR_ROUTES };

static const char *const route_names[NR_ROUTES] = {
	[ROUTE_KEYRING] = "keyring (logon key \"fscrypt:<descriptor>\" in the session keyring)",
	[ROUTE_IOCTL] = "ioctl (FS_IOC_ADD_ENCRYPTION_KEY by descriptor, raw key)",
	[ROUTE_PROVISIONING] = "provisioning (FS_IOC_ADD_ENCRYPTION_KEY by descriptor, key_id of an fscrypt-provisioning key)",
};

/* One v1 master key, and how the test provides it. */
struct v1_key {
	enum route route;
	uint8_t desc[FSCRYPT_KEY_DESCRIPTOR_SIZE];
	char desc_hex[2 * FSCRYPT_KEY_DESCRIPTOR_SIZE + 1];
	uint8_t raw[V1_KEY_SIZE];
	long logon;		/* serial of the logon key, or -1 */
	long provisioning;	/* serial of the provisioning key, or -1 */
};

/* A file the test writes and expects back. */
struct tfile {
	char path[PATH_MAX];
	unsigned char *data;
	size_t len;
};

static const char *btrfs_dev, *btrfs_mnt, *ext4_dev, *ext4_mnt;
/* Set when a filesystem was left stuck by the kernel: stop using it. */
static int stuck;

/* ---- keys ---------------------------------------------------------------- */

static long sys_add_key(const char *type, const char *desc,
			const void *payload, size_t plen, int ring)
{
	return syscall(SYS_add_key, type, desc, payload, plen, ring);
}

static long sys_keyctl(int cmd, unsigned long a2)
{
	return syscall(SYS_keyctl, cmd, a2, 0UL, 0UL, 0UL);
}

static void new_key(struct v1_key *k, enum route r)
{
	memset(k, 0, sizeof(*k));
	k->route = r;
	lab_random(k->desc, sizeof(k->desc));
	lab_hex(k->desc_hex, k->desc, sizeof(k->desc));
	lab_random(k->raw, sizeof(k->raw));
	k->logon = -1;
	k->provisioning = -1;
}

/* FS_IOC_ADD_ENCRYPTION_KEY of @k by descriptor: the raw key or a key_id. */
static int ioctl_add_v1_key(const char *mnt, const struct v1_key *k,
			    long key_id)
{
	struct {
		struct fscrypt_add_key_arg arg;
		uint8_t raw[V1_KEY_SIZE];
	} a;
	int ret, e;

	memset(&a, 0, sizeof(a));
	a.arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_DESCRIPTOR;
	memcpy(a.arg.key_spec.u.descriptor, k->desc, sizeof(k->desc));
	if (key_id > 0) {
		a.arg.key_id = (uint32_t)key_id;
	} else {
		a.arg.raw_size = sizeof(k->raw);
		memcpy(a.raw, k->raw, sizeof(k->raw));
	}
	ret = lab_ioctl_path(mnt, FS_IOC_ADD_ENCRYPTION_KEY, &a.arg);
	e = errno;
	memset(&a, 0, sizeof(a));
	errno = e;
	return ret;
}

/*
 * Make @k available for files on @mnt the route's way.  For the
 * provisioning route the keyring key is made once and reused when the key
 * is added again after a remount.  0, or -1 with errno (message printed).
 */
static int add_v1_key(const char *mnt, struct v1_key *k)
{
	char desc[64];
	int ret;

	switch (k->route) {
	case ROUTE_KEYRING: {
		struct fscrypt_key fk;

		memset(&fk, 0, sizeof(fk));
		fk.mode = FSCRYPT_MODE_AES_256_XTS;
		memcpy(fk.raw, k->raw, sizeof(k->raw));
		fk.size = sizeof(k->raw);
		PATHF(desc, FSCRYPT_KEY_DESC_PREFIX "%s", k->desc_hex);
		k->logon = sys_add_key("logon", desc, &fk, sizeof(fk),
				       KEY_SPEC_SESSION_KEYRING);
		memset(&fk, 0, sizeof(fk));
		if (k->logon < 0) {
			printf("add_key(logon, %s): " LAB_ERR_FMT "\n", desc,
			       LAB_ERR_ARGS(errno));
			return -1;
		}
		printf("added logon key %s (serial %ld) to the session keyring\n",
		       desc, k->logon);
		return 0;
	}
	case ROUTE_PROVISIONING:
		if (k->provisioning < 0) {
			struct {
				struct fscrypt_provisioning_key_payload p;
				uint8_t raw[V1_KEY_SIZE];
			} pl;

			memset(&pl, 0, sizeof(pl));
			pl.p.type = FSCRYPT_KEY_SPEC_TYPE_DESCRIPTOR;
			memcpy(pl.raw, k->raw, sizeof(k->raw));
			PATHF(desc, "lab-v1:%s", k->desc_hex);
			k->provisioning = sys_add_key("fscrypt-provisioning",
						      desc, &pl, sizeof(pl),
						      KEY_SPEC_SESSION_KEYRING);
			memset(&pl, 0, sizeof(pl));
			if (k->provisioning < 0) {
				printf("add_key(fscrypt-provisioning, %s): " LAB_ERR_FMT "\n",
				       desc, LAB_ERR_ARGS(errno));
				return -1;
			}
			printf("added fscrypt-provisioning key %s (serial %ld)\n",
			       desc, k->provisioning);
		}
		ret = ioctl_add_v1_key(mnt, k, k->provisioning);
		break;
	case ROUTE_IOCTL:
	default:
		ret = ioctl_add_v1_key(mnt, k, -1);
		break;
	}
	if (ret)
		printf("FS_IOC_ADD_ENCRYPTION_KEY (descriptor %s) on %s: " LAB_ERR_FMT "\n",
		       k->desc_hex, mnt, LAB_ERR_ARGS(errno));
	else
		printf("FS_IOC_ADD_ENCRYPTION_KEY (descriptor %s%s) on %s: ok\n",
		       k->desc_hex,
		       k->route == ROUTE_PROVISIONING ? ", by key_id" : "", mnt);
	return ret;
}

/* Take the session-keyring key of @k away (the fs keyring goes with umount). */
static void drop_logon_key(struct v1_key *k)
{
	if (k->logon < 0)
		return;
	CHECK_OK(sys_keyctl(KEYCTL_INVALIDATE, (unsigned long)k->logon),
		 "KEYCTL_INVALIDATE logon key %ld", k->logon);
	k->logon = -1;
}

static void forget_key(struct v1_key *k)
{
	drop_logon_key(k);
	if (k->provisioning >= 0)
		CHECK_OK(sys_keyctl(KEYCTL_INVALIDATE,
				    (unsigned long)k->provisioning),
			 "KEYCTL_INVALIDATE provisioning key %ld",
			 k->provisioning);
	k->provisioning = -1;
	memset(k->raw, 0, sizeof(k->raw));
}

/* ---- policies ------------------------------------------------------------ */

static int set_v1_policy(const char *dir, const struct v1_key *k)
{
	struct fscrypt_policy_v1 p;

	memset(&p, 0, sizeof(p));
	p.version = FSCRYPT_POLICY_V1;
	p.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
	p.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
	p.flags = FSCRYPT_POLICY_FLAGS_PAD_32;
	memcpy(p.master_key_descriptor, k->desc, sizeof(k->desc));
	return lab_ioctl_path(dir, FS_IOC_SET_ENCRYPTION_POLICY, &p);
}

/* @path's policy must be exactly the v1 policy of @k. */
static void check_v1_policy(const char *path, const struct v1_key *k)
{
	struct fscrypt_get_policy_ex_arg a;

	if (!CHECK_OK(lab_get_policy_ex(path, &a),
		      "FS_IOC_GET_ENCRYPTION_POLICY_EX %s", path))
		return;
	CHECK(a.policy_size == sizeof(a.policy.v1) &&
	      a.policy.version == FSCRYPT_POLICY_V1 &&
	      a.policy.v1.contents_encryption_mode == FSCRYPT_MODE_AES_256_XTS &&
	      a.policy.v1.filenames_encryption_mode == FSCRYPT_MODE_AES_256_CTS &&
	      a.policy.v1.flags == FSCRYPT_POLICY_FLAGS_PAD_32 &&
	      memcmp(a.policy.v1.master_key_descriptor, k->desc,
		     sizeof(k->desc)) == 0,
	      "%s: policy (size %llu, version %u) is not the v1 policy set with descriptor %s",
	      path, (unsigned long long)a.policy_size, a.policy.version,
	      k->desc_hex);
}

/* @path must have no policy at all. */
static void check_unencrypted(const char *path)
{
	struct fscrypt_get_policy_ex_arg a;

	CHECK_ERRNO(lab_get_policy_ex(path, &a), ENODATA,
		    "FS_IOC_GET_ENCRYPTION_POLICY_EX %s (must be unencrypted)",
		    path);
}

/* ---- files ----------------------------------------------------------------- */

/* A random name in @dir and random contents of about @base bytes. */
static void new_file(struct tfile *f, const char *dir, const char *what,
		     size_t base)
{
	char hex[17];
	uint32_t seed, extra;

	lab_random_hex(hex, 8);
	lab_random(&seed, sizeof(seed));
	lab_random(&extra, sizeof(extra));
	PATHF(f->path, "%s/%s-%s", dir, what, hex);
	f->len = base + extra % 4096;
	f->data = lab_xmalloc(f->len);
	fill_pattern(f->data, f->len, seed);
}

/* Child: create @f, write it, fsync it.  Returns the number of failures. */
static int write_fsync_child(void *arg)
{
	const struct tfile *f = arg;
	int fd, ret = 0;

	fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!CHECK_OK(fd, "create %s", f->path))
		return 1;
	if (!CHECK_OK(write_all(fd, f->data, f->len), "write %zu bytes to %s",
		      f->len, f->path))
		ret++;
	else if (!CHECK_OK(fsync(fd), "fsync %s", f->path))
		ret++;
	if (!CHECK_OK(close(fd), "close %s", f->path))
		ret++;
	return ret;
}

/*
 * Write and fsync @f in a child with a deadline.  Returns 1 if it finished
 * (its failures are counted), 0 if it crashed or hung (counted as one).
 */
static int write_fsync(const struct tfile *f)
{
	int code;

	switch (lab_child_run("write + fsync", write_fsync_child, (void *)f,
			      WRITE_TIMEOUT_S, &code)) {
	case LAB_CHILD_EXITED:
		lab_failures += code;
		return 1;
	case LAB_CHILD_SIGNALED:
		CHECK(0, "writing and fsyncing %s: the writer was killed by signal %d (a kernel oops in its context?)",
		      f->path, code);
		return 0;
	case LAB_CHILD_TIMEOUT:
	default:
		CHECK(0, "writing and fsyncing %s did not finish within %d s (writeback hung)",
		      f->path, WRITE_TIMEOUT_S);
		return 0;
	}
}

static void drop_caches(void)
{
	CHECK_OK(lab_drop_caches("3"), "drop caches");
}

/*
 * A line on the kernel console as well as in the log: the run's kernel
 * panics on an oops (oops=panic), and then the log never comes back.
 */
LAB_PRINTF(1, 2)
static void console_note(const char *fmt, ...)
{
	char msg[768], line[800];
	va_list ap;
	int fd;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("%s\n", msg);
	fflush(stdout);
	snprintf(line, sizeof(line), TEST_NAME ": %s\n", msg);
	fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, line, strlen(line)) < 0)
			printf("(could not copy that line to /dev/kmsg)\n");
		close(fd);
	}
}

/* One line per case on the console: what passed before a panic, too. */
static void case_verdict(const char *label, int failures_before)
{
	int n = lab_failures - failures_before;

	if (n)
		console_note("case %s: %d check(s) failed", label, n);
	else
		console_note("case %s: ok", label);
}

/* ---- ext4: v1 works, for every route ----------------------------------- */

static const struct lab_fscrypt_fs ext4 = {
	.name = "ext4",
	.mkfs_cmd = "mkfs.ext4 -q -F -O encrypt",
};

static void ext4_case(enum route r)
{
	int failures_before = lab_failures;
	char dir[PATH_MAX], hex[17], label[256];
	struct v1_key k;
	struct tfile f;
	struct stat st;

	PATHF(label, "ext4 control, v1 key via %s", route_names[r]);
	printf("\n## %s\n", label);
	new_key(&k, r);
	lab_fscrypt_fs_make(&ext4, ext4_dev, ext4_mnt, NULL);
	lab_random_hex(hex, 8);
	PATHF(dir, "%s/v1-%s", ext4_mnt, hex);
	if (!CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir))
		goto out;
	if (!CHECK_OK(add_v1_key(ext4_mnt, &k), "ext4: add the v1 key via %s",
		      route_names[r]))
		goto out;
	if (!CHECK_OK(set_v1_policy(dir, &k),
		      "ext4: FS_IOC_SET_ENCRYPTION_POLICY v1 (descriptor %s) on %s",
		      k.desc_hex, dir))
		goto out;
	check_v1_policy(dir, &k);

	new_file(&f, dir, "data", 192 * 1024);
	if (!write_fsync(&f)) {
		stuck = 1;
		goto out_free;
	}
	check_v1_policy(f.path, &k);
	drop_caches();
	CHECK_FILE_EQUALS(f.path, f.data, f.len);

	/* Without the key after a remount, the name is not there... */
	drop_logon_key(&k);
	if (!CHECK_OK(lab_umount(ext4_mnt), "umount %s", ext4_mnt) ||
	    !CHECK_OK(lab_fscrypt_fs_mount(&ext4, ext4_dev, ext4_mnt, NULL),
		      "mount %s again", ext4_dev))
		goto out_free;
	CHECK_ERRNO(stat(f.path, &st), ENOENT,
		    "stat %s without the key after a remount", f.path);
	/* ...and with the key added again, it reads back. */
	if (CHECK_OK(add_v1_key(ext4_mnt, &k), "ext4: add the v1 key again via %s",
		     route_names[r])) {
		drop_caches();
		CHECK_FILE_EQUALS(f.path, f.data, f.len);
	}
out_free:
	free(f.data);
out:
	if (!stuck)
		CHECK_OK(lab_umount(ext4_mnt), "umount %s", ext4_mnt);
	else if (umount2(ext4_mnt, MNT_DETACH) == 0)
		printf("lazily detached %s (stuck)\n", ext4_mnt);
	forget_key(&k);
	case_verdict(label, failures_before);
}

/* ---- btrfs: v1 is refused, and nothing is lost ----------------------------- */

struct probe {
	const struct tfile *before, *under_v1;
};

/*
 * Child, only when btrfs accepted the v1 policy: what becomes of a file
 * written under it?  Returns the number of failures.
 */
static int accepted_v1_probe_child(void *arg)
{
	const struct probe *p = arg;
	const struct tfile *f = p->under_v1;
	int before = lab_failures, fd, e;
	unsigned char *got;
	size_t len;

	fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!CHECK_OK(fd, "create %s under the accepted v1 policy", f->path))
		return 1;
	CHECK_OK(write_all(fd, f->data, f->len), "write %zu bytes to %s",
		 f->len, f->path);
	console_note("fsync of %zu bytes written under the accepted v1 policy...",
		     f->len);
	if (fsync(fd) == 0) {
		console_note("fsync: ok");
	} else {
		e = errno;
		console_note("fsync: " LAB_ERR_FMT, LAB_ERR_ARGS(e));
		CHECK(0, "fsync %s under the accepted v1 policy: " LAB_ERR_FMT,
		      f->path, LAB_ERR_ARGS(e));
	}
	close(fd);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	got = read_file(f->path, &len);
	if (!got) {
		e = errno;
		console_note("read back after dropping caches: " LAB_ERR_FMT,
			     LAB_ERR_ARGS(e));
		CHECK(0, "read %s back: " LAB_ERR_FMT, f->path, LAB_ERR_ARGS(e));
	} else if (len != f->len || memcmp(got, f->data, len) != 0) {
		console_note("read back after dropping caches: %zu bytes, first difference at %zu: data written under the accepted v1 policy was lost",
			     len, lab_first_diff(got, f->data,
						 len < f->len ? len : f->len));
		CHECK(0, "%s: data written under the accepted v1 policy was lost",
		      f->path);
	} else {
		console_note("read back after dropping caches: identical");
	}
	free(got);
	CHECK_FILE_EQUALS(p->before->path, p->before->data, p->before->len);
	return lab_failures - before;
}

static void btrfs_case(const char *opts, enum route r)
{
	static int probed;
	struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
		.mount_opts = opts,
	};
	int ret, e, code, failures_before = lab_failures;
	struct fscrypt_get_policy_ex_arg a;
	char dir[PATH_MAX], hex[17], label[256];
	struct tfile before, after;
	struct probe pr;
	struct v1_key k;

	PATHF(label, "btrfs, mount options \"%s\", v1 key via %s",
	      opts ? opts : "", route_names[r]);
	printf("\n## %s\n", label);
	if (stuck) {
		CHECK(0, "not run: an earlier case left a filesystem stuck in the kernel");
		case_verdict(label, failures_before);
		return;
	}
	new_key(&k, r);
	if (lab_fscrypt_fs_make(&btrfs, btrfs_dev, btrfs_mnt, NULL))
		lab_die("btrfs refused the mount options \"%s\"", opts);
	if (!probed) {
		probed = 1;
		if (lab_get_policy_ex(btrfs_mnt, &a) && (errno == ENOTTY ||
							 errno == EOPNOTSUPP)) {
			e = errno;
			lab_umount(btrfs_mnt);
			lab_skip("btrfs has no fscrypt support in this kernel (FS_IOC_GET_ENCRYPTION_POLICY_EX: " LAB_ERR_FMT ")",
				 LAB_ERR_ARGS(e));
		}
	}

	/* A plain file before anything else: it must survive all of it. */
	new_file(&before, btrfs_mnt, "before", 64 * 1024);
	CHECK_OK(write_file(before.path, before.data, before.len), "write %s",
		 before.path);
	CHECK_OK(fsync_path(before.path), "fsync %s", before.path);

	lab_random_hex(hex, 8);
	PATHF(dir, "%s/v1-%s", btrfs_mnt, hex);
	new_file(&after, dir, "after", 128 * 1024);
	if (!CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir))
		goto out;

	/*
	 * The key itself is filesystem-independent; the fix refuses the
	 * policy.  A btrfs that also refuses the v1 key with EINVAL is fine.
	 */
	ret = add_v1_key(btrfs_mnt, &k);
	e = errno;
	if (ret && !(r != ROUTE_KEYRING && e == EINVAL))
		CHECK(0, "btrfs: adding the v1 key via %s failed with " LAB_ERR_FMT,
		      route_names[r], LAB_ERR_ARGS(e));
	else if (ret)
		printf("btrfs refused the v1 key itself with EINVAL (allowed)\n");

	CHECK(lab_log_mark("lab-v1-policy-%d", getpid()) == 0,
	      "write to /dev/kmsg");
	ret = set_v1_policy(dir, &k);
	e = errno;
	if (EXPECT_ERRNO(ret, e, EINVAL,
			 "btrfs (mount options \"%s\", key via %s): FS_IOC_SET_ENCRYPTION_POLICY v1 on %s",
			 opts ? opts : "", route_names[r], dir)) {
		printf("btrfs refused the v1 policy with EINVAL\n");
		/* the reason, true in every key mode (documented in fscrypt.rst) */
		if (!CHECK(lab_log_has(V1_REFUSAL_ERE),
			   "mount options \"%s\": no kernel log line matching \"%s\"",
			   opts ? opts : "", V1_REFUSAL_ERE))
			lab_log_show(10);
	} else if (ret == 0) {
		/* The bug: see what writeback does with it, in a child. */
		console_note("FAIL: %s: btrfs accepted a v1 policy, which must fail with EINVAL; writing a file under it (child, %d s deadline)",
			     label, WRITE_TIMEOUT_S);
		pr.before = &before;
		pr.under_v1 = &after;
		switch (lab_child_run("file under an accepted v1 policy",
				      accepted_v1_probe_child, &pr,
				      WRITE_TIMEOUT_S, &code)) {
		case LAB_CHILD_EXITED:
			lab_failures += code;
			if (!code)
				printf("the file under the accepted v1 policy did read back\n");
			break;
		case LAB_CHILD_SIGNALED:
			console_note("the writer under the accepted v1 policy was killed by signal %d",
				     code);
			CHECK(0, "writing back a file under the accepted v1 policy killed the writer with signal %d (kernel oops?)",
			      code);
			stuck = 1;
			break;
		case LAB_CHILD_TIMEOUT:
			console_note("the writer under the accepted v1 policy hung for %d s",
				     WRITE_TIMEOUT_S);
			CHECK(0, "writing back a file under the accepted v1 policy hung for %d s",
			      WRITE_TIMEOUT_S);
			stuck = 1;
			break;
		}
		goto out;
	} else {
		goto out;
	}

	/* Refused: the directory is a plain, usable directory. */
	check_unencrypted(dir);
	if (!write_fsync(&after)) {
		stuck = 1;
		goto out;
	}
	check_unencrypted(after.path);
	drop_caches();
	CHECK_FILE_EQUALS(before.path, before.data, before.len);
	CHECK_FILE_EQUALS(after.path, after.data, after.len);
	if (CHECK_OK(lab_umount(btrfs_mnt), "umount %s", btrfs_mnt) &&
	    CHECK_OK(lab_fscrypt_fs_mount(&btrfs, btrfs_dev, btrfs_mnt, NULL),
		     "mount %s again", btrfs_dev)) {
		CHECK_FILE_EQUALS(before.path, before.data, before.len);
		CHECK_FILE_EQUALS(after.path, after.data, after.len);
		check_unencrypted(dir);
		check_unencrypted(after.path);
	}
out:
	if (stuck) {
		/* umount would sync, and wait for the stuck writeback. */
		if (umount2(btrfs_mnt, MNT_DETACH) == 0)
			printf("lazily detached %s (stuck)\n", btrfs_mnt);
	} else if (CHECK_OK(lab_umount(btrfs_mnt), "umount %s", btrfs_mnt)) {
		lab_btrfs_check_clean(btrfs_dev, label);
	}
	forget_key(&k);
	free(before.data);
	free(after.data);
	case_verdict(label, failures_before);
}

int main(void)
{
	static const enum route btrfs_order[NR_ROUTES] = {
		/* On a kernel with the bug, the NULL HMAC crash comes last. */
		ROUTE_KEYRING, ROUTE_PROVISIONING, ROUTE_IOCTL,
	};
	int extent_keys, i, rc;

	btrfs_dev = lab_env("SCRATCH_DEV");
	btrfs_mnt = lab_env("SCRATCH_MNT");
	ext4_dev = lab_env("SCRATCH_DEV2");
	ext4_mnt = lab_env("SCRATCH_MNT2");

	/* A session keyring of our own: no key outlives the test. */
	if (sys_keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0) < 0)
		lab_skip("cannot join a new session keyring: " LAB_ERR_FMT,
			 LAB_ERR_ARGS(errno));

	for (i = 0; i < NR_ROUTES && !stuck; i++)
		ext4_case((enum route)i);

	extent_keys = access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0;
	printf("\n# btrfs %s per-extent keys (%s)\n",
	       extent_keys ? "advertises" : "does not advertise",
	       LAB_BTRFS_EXTENT_KEYS_FEATURE);
	/*
	 * Per-inode keys first: on a kernel with the bug, the per-extent
	 * path is the one that crashes, and it would stop the rest.
	 */
	if (extent_keys) {
		for (i = 0; i < NR_ROUTES; i++)
			btrfs_case(LAB_BTRFS_PER_INODE_KEYS_OPT, btrfs_order[i]);
	} else {
		printf("# no per-extent keys: the default mount is the per-inode-key mode; not mounting with %s\n",
		       LAB_BTRFS_PER_INODE_KEYS_OPT);
	}
	for (i = 0; i < NR_ROUTES; i++)
		btrfs_case(NULL, btrfs_order[i]);

	rc = lab_result(TEST_NAME);
	if (stuck) {
		/* Exit handlers would unmount, i.e. sync, and hang. */
		fflush(NULL);
		_exit(rc);
	}
	return rc;
}
