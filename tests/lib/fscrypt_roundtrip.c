// SPDX-License-Identifier: GPL-2.0
/*
 * fscrypt_roundtrip.c - fscrypt v2 round trip, independent of the filesystem.
 *
 *  1. mkfs + mount; a control file (plaintext, unencrypted dir) for the scan.
 *  2. add a 64-byte master key by identifier.
 *  3. set a v2 policy on an empty dir; check it reads back and the documented
 *     errors (ENOTEMPTY, ENOTDIR, EEXIST, EINVAL, EOVERFLOW, ENODATA).
 *  4. create files/dir/symlink with marked names and marked contents, check
 *     they inherit the policy and read back byte-exact.
 *  5. key status PRESENT; 6. remove the key: ABSENT, no-key names, ENOKEY;
 *  7. re-add the key: everything is back; 8. unmount and scan the raw
 *     device: the secret markers must be absent, the control ones present.
 */
#include "btrfs_progs.h"
#include "fscrypt_roundtrip.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fscrypt.h>

/* Every encrypted name (and the symlink target) contains NAME_MARK. */
#define NAME_MARK "lab-secret-name-7Qz3"
/* Every encrypted file of >= 36 bytes has DATA_MARK every MARK_STRIDE bytes. */
#define DATA_MARK "<<lab-secret-DATA-marker-5h2Kp9Wq>>"
/* The same, but stored unencrypted: proves the device scan sees plaintext. */
#define CTRL_NAME_MARK "lab-control-name-K9w2"
#define CTRL_DATA_MARK "<<lab-control-DATA-mark-8Rt4Lm1X>>"
#define MARK_STRIDE 512

#define RT_SUBDIR NAME_MARK "-6-dir"
#define RT_LINK_TARGET NAME_MARK "-3-multi"
#define RT_LONG_NAME_LEN 200
#define RT_MAX_ENTS 16
#define RT_MAX_LIST 32
/* The master key is lab_master_key(RT_KEY_SEED) (not a file data seed). */
#define RT_KEY_SEED 3

enum rt_kind { RT_FILE, RT_DIR, RT_SYMLINK };

struct rt_entry {
	char rel[NAME_MAX * 2 + 2];	/* path relative to the encrypted dir */
	enum rt_kind kind;
	size_t size;			/* RT_FILE */
	unsigned char *data;		/* RT_FILE: expected content */
	const char *target;		/* RT_SYMLINK */
};

struct rt_ctx {
	const struct fscrypt_rt_fs *fs;
	const char *dev;
	const char *mnt;
	char enc[PATH_MAX];		/* the encrypted directory */
	char plain[PATH_MAX];		/* an unencrypted directory */
	unsigned char id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct fscrypt_policy_v2 policy; /* lab_default_policy(id) */
	struct rt_entry ents[RT_MAX_ENTS];
	size_t nents;
};

struct rt_listing {
	size_t n;
	char names[RT_MAX_LIST][NAME_MAX + 1];
};

/* ---- the expected tree ------------------------------------------------- */

static struct rt_entry *rt_add(struct rt_ctx *c, enum rt_kind kind,
			       const char *rel)
{
	struct rt_entry *e;

	if (c->nents >= RT_MAX_ENTS)
		lab_die("too many entries");
	e = &c->ents[c->nents++];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	PATHF(e->rel, "%s", rel);
	return e;
}

static void rt_add_file(struct rt_ctx *c, const char *rel, size_t size,
			uint32_t seed)
{
	struct rt_entry *e = rt_add(c, RT_FILE, rel);

	e->size = size;
	e->data = lab_xmalloc(size);
	fill_pattern(e->data, size, seed);
	stamp_marker(e->data, size, DATA_MARK, strlen(DATA_MARK), MARK_STRIDE);
}

static void rt_build_tree(struct rt_ctx *c)
{
	char long_name[RT_LONG_NAME_LEN + 1];
	size_t prefix;

	rt_add_file(c, NAME_MARK "-0-empty", 0, 100);
	rt_add_file(c, NAME_MARK "-1-tiny", 17, 101);
	rt_add_file(c, NAME_MARK "-2-block", 4096, 102);
	rt_add_file(c, RT_LINK_TARGET, 3 * 4096 + 123, 103);
	rt_add_file(c, NAME_MARK "-4-big", 1 << 20, 104);
	/* Long enough that its no-key name is the hashed ("long") form. */
	prefix = strlen(NAME_MARK "-5-long-");
	memcpy(long_name, NAME_MARK "-5-long-", prefix);
	memset(long_name + prefix, 'L', RT_LONG_NAME_LEN - prefix);
	long_name[RT_LONG_NAME_LEN] = '\0';
	rt_add_file(c, long_name, 777, 105);
	rt_add(c, RT_DIR, RT_SUBDIR);
	rt_add_file(c, RT_SUBDIR "/" NAME_MARK "-7-inner", 5000, 107);
	rt_add(c, RT_SYMLINK, NAME_MARK "-8-link")->target = RT_LINK_TARGET;
}

static void rt_free_tree(struct rt_ctx *c)
{
	size_t i;

	for (i = 0; i < c->nents; i++)
		free(c->ents[i].data);
	c->nents = 0;
}

static const char *rt_basename(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? slash + 1 : rel;
}

/* Is @rel directly inside @parent ("" = the encrypted dir itself)? */
static int rt_in_dir(const char *rel, const char *parent)
{
	size_t plen = strlen(parent);

	if (plen == 0)
		return strchr(rel, '/') == NULL;
	return strncmp(rel, parent, plen) == 0 && rel[plen] == '/' &&
	       strchr(rel + plen + 1, '/') == NULL;
}

static size_t rt_count(const struct rt_ctx *c, const char *parent,
		       enum rt_kind kind)
{
	size_t i, n = 0;

	for (i = 0; i < c->nents; i++)
		if (c->ents[i].kind == kind && rt_in_dir(c->ents[i].rel, parent))
			n++;
	return n;
}

static const struct rt_entry *rt_find(const struct rt_ctx *c, const char *rel)
{
	size_t i;

	for (i = 0; i < c->nents; i++)
		if (strcmp(c->ents[i].rel, rel) == 0)
			return &c->ents[i];
	return NULL;
}

static void rt_path(const struct rt_ctx *c, const char *rel, char *out,
		    size_t size)
{
	if (*rel)
		lab_pathf(out, size, "%s/%s", c->enc, rel);
	else
		lab_pathf(out, size, "%s", c->enc);
}

/* ---- directory listing ------------------------------------------------- */

/* List @path without "." and "..".  Returns 0, or -1 (check recorded). */
static int rt_list_dir(const char *path, struct rt_listing *out)
{
	struct dirent *de;
	DIR *d;
	int err;

	out->n = 0;
	errno = 0;
	d = opendir(path);
	err = errno;
	if (!EXPECT_OK(d ? 0 : -1, err, "opendir(%s)", path))
		return -1;
	for (;;) {
		errno = 0;
		de = readdir(d);
		err = errno;
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (out->n < RT_MAX_LIST)
			PATHF(out->names[out->n], "%s", de->d_name);
		out->n++;
	}
	closedir(d);
	return EXPECT_OK(err ? -1 : 0, err, "readdir(%s)", path) ? 0 : -1;
}

static int rt_listing_has(const struct rt_listing *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->n && i < RT_MAX_LIST; i++)
		if (strcmp(l->names[i], name) == 0)
			return 1;
	return 0;
}

/* ---- keys (ioctls on the mount root) ----------------------------------- */

/* First add: learn the identifier.  Returns 0 or -1 (cannot continue). */
static int rt_add_key_first(struct rt_ctx *c)
{
	static const unsigned char zero[FSCRYPT_KEY_IDENTIFIER_SIZE];
	int ret, err;

	errno = 0;
	ret = lab_add_key(c->mnt, RT_KEY_SEED, c->id);
	err = errno;
	if (ret != 0 && c->fs->unsupported_is_skip &&
	    (err == ENOTTY || err == EOPNOTSUPP))
		lab_skip("%s: FS_IOC_ADD_ENCRYPTION_KEY not supported: " LAB_ERR_FMT,
			 c->fs->fs_name, LAB_ERR_ARGS(err));
	if (!EXPECT_OK(ret, err, "FS_IOC_ADD_ENCRYPTION_KEY on %s", c->mnt))
		return -1;
	CHECK(memcmp(c->id, zero, sizeof(zero)) != 0,
	      "key identifier returned by FS_IOC_ADD_ENCRYPTION_KEY is all zero");
	return 0;
}

/* Re-add: the identifier must be the same (it is derived from the key). */
static int rt_add_key_again(struct rt_ctx *c)
{
	unsigned char id[FSCRYPT_KEY_IDENTIFIER_SIZE];

	if (!CHECK_OK(lab_add_key(c->mnt, RT_KEY_SEED, id),
		      "re-adding the key (FS_IOC_ADD_ENCRYPTION_KEY)"))
		return -1;
	CHECK(memcmp(id, c->id, sizeof(id)) == 0,
	      "identifier of the re-added key differs from the first one");
	return 0;
}

static void rt_check_key_present(const struct rt_ctx *c)
{
	struct fscrypt_get_key_status_arg st;

	if (!CHECK_OK(lab_get_key_status(c->mnt, c->id, &st),
		      "FS_IOC_GET_ENCRYPTION_KEY_STATUS"))
		return;
	CHECK(st.status == FSCRYPT_KEY_STATUS_PRESENT,
	      "key status: expected PRESENT (%d), got %u",
	      FSCRYPT_KEY_STATUS_PRESENT, st.status);
	CHECK(st.status_flags == FSCRYPT_KEY_STATUS_FLAG_ADDED_BY_SELF,
	      "key status_flags: expected ADDED_BY_SELF (0x%x), got 0x%x",
	      FSCRYPT_KEY_STATUS_FLAG_ADDED_BY_SELF, st.status_flags);
	CHECK(st.user_count == 1, "key user_count: expected 1, got %u",
	      st.user_count);
}

static void rt_check_key_absent(const struct rt_ctx *c,
				const unsigned char *id, const char *what)
{
	int status;

	if (!CHECK_OK(status = lab_key_status(c->mnt, id),
		      "FS_IOC_GET_ENCRYPTION_KEY_STATUS (%s)", what))
		return;
	CHECK(status == FSCRYPT_KEY_STATUS_ABSENT,
	      "%s: key status: expected ABSENT (%d), got %d", what,
	      FSCRYPT_KEY_STATUS_ABSENT, status);
}

/* Returns 0 if the key is fully removed, -1 otherwise. */
static int rt_remove_key(struct rt_ctx *c)
{
	uint32_t flags;

	if (!CHECK_OK(lab_remove_key(c->mnt, c->id, &flags),
		      "FS_IOC_REMOVE_ENCRYPTION_KEY"))
		return -1;
	CHECK(!(flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY),
	      "key removal reports FILES_BUSY: some encrypted file is still in use (test setup bug or leaked reference)");
	CHECK(!(flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_OTHER_USERS),
	      "key removal reports OTHER_USERS");
	CHECK(flags == 0, "removal_status_flags: expected 0, got 0x%x", flags);
	rt_check_key_absent(c, c->id, "after FS_IOC_REMOVE_ENCRYPTION_KEY");
	return flags == 0 ? 0 : -1;
}

/* ---- policy ------------------------------------------------------------- */

/* Check that @path has exactly c->policy. */
static void rt_check_policy_path(const struct rt_ctx *c, const char *path)
{
	struct fscrypt_get_policy_ex_arg arg;

	if (!CHECK_OK(lab_get_policy_ex(path, &arg),
		      "FS_IOC_GET_ENCRYPTION_POLICY_EX on %s", path))
		return;
	CHECK(arg.policy_size == sizeof(struct fscrypt_policy_v2),
	      "%s: policy_size expected %zu, got %llu", path,
	      sizeof(struct fscrypt_policy_v2),
	      (unsigned long long)arg.policy_size);
	CHECK(arg.policy.version == FSCRYPT_POLICY_V2,
	      "%s: policy version expected %d, got %u", path,
	      FSCRYPT_POLICY_V2, arg.policy.version);
	CHECK(memcmp(&arg.policy.v2, &c->policy, sizeof(c->policy)) == 0,
	      "%s: policy differs: modes %u/%u flags 0x%x (expected %u/%u flags 0x%x) or key identifier differs",
	      path, arg.policy.v2.contents_encryption_mode,
	      arg.policy.v2.filenames_encryption_mode, arg.policy.v2.flags,
	      c->policy.contents_encryption_mode,
	      c->policy.filenames_encryption_mode, c->policy.flags);
}

/* Error cases of the policy ioctls on the already-encrypted directory. */
static void rt_check_policy_errors_enc(const struct rt_ctx *c)
{
	struct fscrypt_policy_v2 other = c->policy;
	struct fscrypt_policy_v1 v1;
	struct fscrypt_get_policy_ex_arg ex;
	int dfd;

	CHECK_OK(lab_set_policy_v2(c->enc, &c->policy),
		 "setting the identical policy again on %s", c->enc);
	other.flags = FSCRYPT_POLICY_FLAGS_PAD_16;
	CHECK_ERRNO(lab_set_policy_v2(c->enc, &other), EEXIST,
		    "setting a different policy on encrypted %s", c->enc);
	/* Deliberate misuse (v1 getter, short buffer): raw ioctls. */
	dfd = open(c->enc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!CHECK_OK(dfd, "open(%s)", c->enc))
		return;
	CHECK_ERRNO(ioctl(dfd, FS_IOC_GET_ENCRYPTION_POLICY, &v1), EINVAL,
		    "legacy FS_IOC_GET_ENCRYPTION_POLICY on a v2 dir");
	memset(&ex, 0, sizeof(ex));
	ex.policy_size = sizeof(struct fscrypt_policy_v1);
	CHECK_ERRNO(ioctl(dfd, FS_IOC_GET_ENCRYPTION_POLICY_EX, &ex), EOVERFLOW,
		    "FS_IOC_GET_ENCRYPTION_POLICY_EX with a too small buffer");
	close(dfd);
}

/* Error cases on unencrypted files: non-empty dir, regular file. */
static void rt_check_policy_errors_plain(const struct rt_ctx *c,
					 const char *plain_file)
{
	struct fscrypt_get_policy_ex_arg ex;

	CHECK_ERRNO(lab_set_policy_v2(c->plain, &c->policy), ENOTEMPTY,
		    "set policy on non-empty dir %s", c->plain);
	CHECK_ERRNO(lab_get_policy_ex(c->plain, &ex), ENODATA,
		    "FS_IOC_GET_ENCRYPTION_POLICY_EX on unencrypted %s",
		    c->plain);
	CHECK_ERRNO(lab_set_policy_v2(plain_file, &c->policy), ENOTDIR,
		    "set policy on regular file %s", plain_file);
}

/* mkdir the encrypted dir and set the policy.  Returns 0 or -1 (fatal). */
static int rt_setup_policy(struct rt_ctx *c)
{
	lab_default_policy(&c->policy, c->id);
	if (!CHECK_OK(mkdir(c->enc, 0755), "mkdir(%s)", c->enc))
		return -1;
	if (!CHECK_OK(lab_set_policy(c->enc, c->id),
		      "FS_IOC_SET_ENCRYPTION_POLICY (v2) on empty %s", c->enc))
		return -1;
	rt_check_policy_path(c, c->enc);
	rt_check_policy_errors_enc(c);
	return 0;
}

/* ---- control (unencrypted) data ----------------------------------------- */

/* Plaintext with distinct markers; the control file's path goes to @path. */
static void rt_write_control(struct rt_ctx *c, char *path, size_t size)
{
	size_t len = 64 * 1024;
	unsigned char *buf = lab_xmalloc(len);

	fill_pattern(buf, len, 1000);
	stamp_marker(buf, len, CTRL_DATA_MARK, strlen(CTRL_DATA_MARK),
		     MARK_STRIDE);
	if (!CHECK_OK(mkdir(c->plain, 0755), "mkdir(%s)", c->plain))
		lab_die("cannot create the control directory");
	lab_pathf(path, size, "%s/%s-file", c->plain, CTRL_NAME_MARK);
	CHECK_OK(write_file(path, buf, len), "write_file(%s)", path);
	CHECK_OK(fsync_path(path), "fsync(%s)", path);
	CHECK_OK(fsync_path(c->plain), "fsync(%s)", c->plain);
	CHECK_FILE_EQUALS(path, buf, len);
	free(buf);
}

/* ---- creating and verifying the encrypted tree (key present) ------------- */

static void rt_create_entry(const struct rt_ctx *c, const struct rt_entry *e)
{
	char path[PATH_MAX];

	rt_path(c, e->rel, path, sizeof(path));
	switch (e->kind) {
	case RT_DIR:
		CHECK_OK(mkdir(path, 0755), "mkdir(%s)", path);
		break;
	case RT_SYMLINK:
		CHECK_OK(symlink(e->target, path), "symlink(%s)", path);
		break;
	case RT_FILE:
		CHECK_OK(write_file(path, e->data, e->size),
			 "write_file(%s)", path);
		CHECK_OK(fsync_path(path), "fsync(%s)", path);
		break;
	}
}

static void rt_create_tree(const struct rt_ctx *c)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < c->nents; i++)
		rt_create_entry(c, &c->ents[i]);
	rt_path(c, RT_SUBDIR, path, sizeof(path));
	CHECK_OK(fsync_path(path), "fsync(%s)", path);
	CHECK_OK(fsync_path(c->enc), "fsync(%s)", c->enc);
	/* New inodes inherit the directory's policy. */
	for (i = 0; i < c->nents; i++) {
		if (c->ents[i].kind == RT_SYMLINK)
			continue;
		rt_path(c, c->ents[i].rel, path, sizeof(path));
		rt_check_policy_path(c, path);
	}
}

/* Plaintext names in @parent are exactly the expected ones. */
static void rt_check_names(const struct rt_ctx *c, const char *parent)
{
	size_t expect = rt_count(c, parent, RT_FILE) +
			rt_count(c, parent, RT_DIR) +
			rt_count(c, parent, RT_SYMLINK);
	struct rt_listing l;
	char path[PATH_MAX];
	size_t i;

	rt_path(c, parent, path, sizeof(path));
	if (rt_list_dir(path, &l) != 0)
		return;
	CHECK(l.n == expect, "%s: expected %zu entries, got %zu", path,
	      expect, l.n);
	for (i = 0; i < c->nents; i++) {
		const char *name = rt_basename(c->ents[i].rel);

		if (rt_in_dir(c->ents[i].rel, parent))
			CHECK(rt_listing_has(&l, name),
			      "%s: name %s missing from readdir", path, name);
	}
}

static void rt_check_symlink(const struct rt_ctx *c, const struct rt_entry *e)
{
	const struct rt_entry *t = rt_find(c, e->target);
	char path[PATH_MAX], buf[PATH_MAX];
	ssize_t n;

	rt_path(c, e->rel, path, sizeof(path));
	n = readlink(path, buf, sizeof(buf) - 1);
	if (!CHECK_OK(n, "readlink(%s)", path))
		return;
	buf[n] = '\0';
	CHECK(strcmp(buf, e->target) == 0,
	      "readlink(%s): expected \"%s\", got \"%s\"", path, e->target,
	      buf);
	if (t && t->kind == RT_FILE)
		CHECK_FILE_EQUALS(path, t->data, t->size);
}

/* Everything reads back exactly (requires the key). */
static void rt_verify_with_key(const struct rt_ctx *c)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < c->nents; i++) {
		const struct rt_entry *e = &c->ents[i];

		rt_path(c, e->rel, path, sizeof(path));
		if (e->kind == RT_FILE)
			CHECK_FILE_EQUALS(path, e->data, e->size);
		else if (e->kind == RT_SYMLINK)
			rt_check_symlink(c, e);
	}
	rt_check_names(c, "");
	rt_check_names(c, RT_SUBDIR);
}

/* ---- no-key behaviour ---------------------------------------------------- */

struct rt_kind_count {
	size_t reg, dir, lnk, other;
};

/* Check one no-key directory entry and count its file type in @kc. */
static void rt_check_nokey_entry(int dfd, const char *dir, const char *name,
				 struct rt_kind_count *kc, char *subdir_out)
{
	char buf[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd, err;

	CHECK(strstr(name, NAME_MARK) == NULL,
	      "%s: no-key listing shows a plaintext name: %s", dir, name);
	if (!CHECK_OK(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW),
		      "stat of no-key name %s/%s", dir, name))
		return;
	if (S_ISREG(st.st_mode)) {
		kc->reg++;
		errno = 0;
		fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
		err = errno;
		if (fd >= 0)
			close(fd);
		EXPECT_ERRNO(fd, err, ENOKEY, "open(O_RDONLY) of no-key file %s/%s",
			     dir, name);
	} else if (S_ISDIR(st.st_mode)) {
		kc->dir++;
		if (subdir_out)
			lab_pathf(subdir_out, PATH_MAX, "%s/%s", dir, name);
	} else if (S_ISLNK(st.st_mode)) {
		kc->lnk++;
		n = readlinkat(dfd, name, buf, sizeof(buf) - 1);
		if (CHECK_OK(n, "readlink of no-key symlink %s/%s", dir, name)) {
			buf[n] = '\0';
			CHECK(strstr(buf, NAME_MARK) == NULL,
			      "no-key readlink(%s/%s) shows the plaintext target %s",
			      dir, name, buf);
		}
	} else {
		kc->other++;
	}
}

/*
 * Without the key: @dir (a no-key path) lists as many entries as the plain
 * @parent has, none with a plaintext name, each stat-able, regular files fail
 * to open with ENOKEY.  The path of the (last) subdirectory is put in
 * @subdir_out if non-NULL.
 */
static void rt_check_nokey_dir(const struct rt_ctx *c, const char *dir,
			       const char *parent, char *subdir_out)
{
	struct rt_kind_count kc = { 0, 0, 0, 0 };
	struct rt_listing l;
	size_t i, n;
	int dfd;

	if (rt_list_dir(dir, &l) != 0)
		return;
	n = rt_count(c, parent, RT_FILE) + rt_count(c, parent, RT_DIR) +
	    rt_count(c, parent, RT_SYMLINK);
	CHECK(l.n == n, "no-key %s: expected %zu entries, got %zu", dir, n,
	      l.n);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!CHECK_OK(dfd, "open of no-key dir %s", dir))
		return;
	for (i = 0; i < l.n && i < RT_MAX_LIST; i++)
		rt_check_nokey_entry(dfd, dir, l.names[i], &kc, subdir_out);
	close(dfd);
	CHECK(kc.reg == rt_count(c, parent, RT_FILE),
	      "no-key %s: expected %zu regular files, got %zu", dir,
	      rt_count(c, parent, RT_FILE), kc.reg);
	CHECK(kc.dir == rt_count(c, parent, RT_DIR),
	      "no-key %s: expected %zu directories, got %zu", dir,
	      rt_count(c, parent, RT_DIR), kc.dir);
	CHECK(kc.lnk == rt_count(c, parent, RT_SYMLINK),
	      "no-key %s: expected %zu symlinks, got %zu", dir,
	      rt_count(c, parent, RT_SYMLINK), kc.lnk);
	CHECK(kc.other == 0, "no-key %s: %zu entries of unexpected type", dir,
	      kc.other);
}

/* Creating anything in a no-key directory fails with ENOKEY. */
static void rt_check_nokey_create(const char *dir)
{
	char path[PATH_MAX];
	int fd, err;

	PATHF(path, "%s/%s-new-file", dir, NAME_MARK);
	errno = 0;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	err = errno;
	if (fd >= 0)
		close(fd);
	EXPECT_ERRNO(fd, err, ENOKEY, "create %s without the key", path);
	PATHF(path, "%s/%s-new-dir", dir, NAME_MARK);
	CHECK_ERRNO(mkdir(path, 0755), ENOKEY, "mkdir %s without the key",
		    path);
	PATHF(path, "%s/%s-new-link", dir, NAME_MARK);
	CHECK_ERRNO(symlink("target", path), ENOKEY,
		    "symlink %s without the key", path);
}

static void rt_verify_without_key(const struct rt_ctx *c)
{
	char subdir[PATH_MAX] = "";

	CHECK_OK(lab_drop_caches("2"), "echo 2 > /proc/sys/vm/drop_caches");
	rt_check_nokey_dir(c, c->enc, "", subdir);
	rt_check_nokey_create(c->enc);
	if (CHECK(subdir[0] != '\0', "no directory found in no-key %s",
		  c->enc)) {
		rt_check_nokey_dir(c, subdir, RT_SUBDIR, NULL);
		rt_check_nokey_create(subdir);
	}
}

/* After re-adding the key, new files can be created and read again. */
static void rt_check_create_after_readd(const struct rt_ctx *c)
{
	size_t len = 10000;
	unsigned char *buf = lab_xmalloc(len);
	char path[PATH_MAX];

	fill_pattern(buf, len, 109);
	stamp_marker(buf, len, DATA_MARK, strlen(DATA_MARK), MARK_STRIDE);
	PATHF(path, "%s/%s-9-after-readd", c->enc, NAME_MARK);
	if (CHECK_OK(write_file(path, buf, len), "write_file(%s)", path)) {
		CHECK_OK(fsync_path(path), "fsync(%s)", path);
		CHECK_FILE_EQUALS(path, buf, len);
		rt_check_policy_path(c, path);
	}
	free(buf);
}

/* ---- raw device scan ------------------------------------------------------ */

static long long rt_scan(const struct rt_ctx *c, const char *marker)
{
	long long n = count_occurrences_on_device(c->dev, marker,
						  strlen(marker));

	if (n < 0)
		lab_fail(__FILE__, __LINE__, "count_occurrences_on_device",
			 "scanning %s: " LAB_ERR_FMT, c->dev, LAB_ERR_ARGS(errno));
	else
		printf("scan %s: \"%s\" found %lld time(s)\n", c->dev, marker, n);
	return n;
}

static void rt_scan_device(const struct rt_ctx *c)
{
	long long n;

	sync();
	n = rt_scan(c, CTRL_DATA_MARK);
	CHECK(n >= 1, "control: plaintext data marker expected on %s at least once, found %lld (scanner broken?)",
	      c->dev, n);
	n = rt_scan(c, CTRL_NAME_MARK);
	CHECK(n >= 1, "control: plaintext name marker expected on %s at least once, found %lld (scanner broken?)",
	      c->dev, n);
	n = rt_scan(c, DATA_MARK);
	CHECK(n == 0, "encrypted data marker: expected 0 occurrences on %s, found %lld",
	      c->dev, n);
	n = rt_scan(c, NAME_MARK);
	CHECK(n == 0, "encrypted name marker: expected 0 occurrences on %s, found %lld",
	      c->dev, n);
}

/* ---- driver --------------------------------------------------------------- */

static void rt_mkfs_and_mount(struct rt_ctx *c)
{
	int st = lab_mkfs(c->fs->mkfs_cmd, c->dev);

	if (st == 127)
		lab_skip("%s: mkfs command not found: %s", c->fs->fs_name,
			 c->fs->mkfs_cmd);
	if (st != 0)
		lab_die("%s: mkfs failed with status %d", c->fs->fs_name, st);
	if (lab_mount(c->dev, c->mnt, c->fs->fs_name, c->fs->mount_opts) != 0) {
		if (errno == ENODEV)
			lab_skip("kernel does not support %s", c->fs->fs_name);
		lab_die("cannot mount %s", c->dev);
	}
}

/* Steps 2-7 on the mounted filesystem.  Returns -1 if it had to stop early. */
static int rt_run_mounted(struct rt_ctx *c)
{
	unsigned char other_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char control[PATH_MAX];
	size_t i;

	printf("== control file in unencrypted %s\n", c->plain);
	rt_write_control(c, control, sizeof(control));
	printf("== add key\n");
	if (rt_add_key_first(c) != 0)
		return -1;
	for (i = 0; i < sizeof(other_id); i++)
		other_id[i] = (unsigned char)~c->id[i];
	rt_check_key_absent(c, other_id, "never-added identifier");
	printf("== set policy\n");
	if (rt_setup_policy(c) != 0)
		return -1;
	rt_check_policy_errors_plain(c, control);
	printf("== create and read back\n");
	rt_create_tree(c);
	rt_verify_with_key(c);
	rt_check_key_present(c);
	printf("== remove key\n");
	if (rt_remove_key(c) != 0)
		return -1;
	printf("== no-key checks\n");
	rt_verify_without_key(c);
	printf("== re-add key\n");
	if (rt_add_key_again(c) != 0)
		return -1;
	rt_check_key_present(c);
	rt_verify_with_key(c);
	rt_check_create_after_readd(c);
	return 0;
}

int fscrypt_roundtrip(const struct fscrypt_rt_fs *fs)
{
	static struct rt_ctx ctx;
	struct rt_ctx *c = &ctx;
	char name[128];
	int ok;

	c->fs = fs;
	c->dev = lab_env("SCRATCH_DEV");
	c->mnt = lab_env("SCRATCH_MNT");
	PATHF(c->enc, "%s/enc", c->mnt);
	PATHF(c->plain, "%s/plain", c->mnt);
	printf("fscrypt round trip on %s (%s, mounted on %s)\n", fs->fs_name,
	       c->dev, c->mnt);
	rt_build_tree(c);
	rt_mkfs_and_mount(c);

	ok = rt_run_mounted(c) == 0;
	if (CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt) && ok) {
		printf("== scan raw device\n");
		rt_scan_device(c);
	} else if (!ok) {
		printf("stopped early; skipping the device scan\n");
	}
	rt_free_tree(c);
	if (strcmp(fs->fs_name, "btrfs") == 0)
		lab_btrfs_check_clean(c->dev, "the round-trip filesystem");
	PATHF(name, "fscrypt round trip on %s", fs->fs_name);
	return lab_result(name);
}
