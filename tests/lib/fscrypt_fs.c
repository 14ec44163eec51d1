// SPDX-License-Identifier: GPL-2.0
/* Scratch filesystems ready for fscrypt; see fscrypt_fs.h. */
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

void lab_random(void *buf, size_t len)
{
	unsigned char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = getrandom(p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			lab_die("getrandom: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		p += n;
		len -= (size_t)n;
	}
}

char *lab_hex(char *out, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
	out[2 * len] = '\0';
	return out;
}

void lab_random_hex(char *out, size_t len)
{
	unsigned char *tmp = lab_xmalloc(len);

	lab_random(tmp, len);
	lab_hex(out, tmp, len);
	free(tmp);
}

int lab_add_raw_key(const char *path, const uint8_t *key, size_t keylen,
		    uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	struct {
		struct fscrypt_add_key_arg arg;
		uint8_t raw[FSCRYPT_MAX_KEY_SIZE];
	} k;
	int ret, e;

	if (keylen > sizeof(k.raw)) {
		errno = EINVAL;
		return -1;
	}
	memset(&k, 0, sizeof(k));
	k.arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	k.arg.raw_size = (uint32_t)keylen;
	memcpy(k.raw, key, keylen);
	ret = lab_ioctl_path(path, FS_IOC_ADD_ENCRYPTION_KEY, &k.arg);
	e = errno;
	if (ret == 0)
		memcpy(id, k.arg.key_spec.u.identifier, FSCRYPT_KEY_IDENTIFIER_SIZE);
	memset(k.raw, 0, sizeof(k.raw));
	errno = e;
	return ret;
}

int lab_get_nonce(const char *path, uint8_t nonce[16])
{
	return lab_ioctl_path(path, FS_IOC_GET_ENCRYPTION_NONCE, nonce);
}

/* "a,b" of the non-NULL ones into @out; NULL if both are NULL. */
static const char *join_opts(char *out, size_t size, const char *a,
			     const char *b)
{
	if (!a && !b)
		return NULL;
	lab_pathf(out, size, "%s%s%s", a ? a : "", a && b ? "," : "",
		  b ? b : "");
	return out;
}

int lab_fscrypt_fs_mount(const struct lab_fscrypt_fs *fs, const char *dev,
			 const char *mnt, const char *extra_opts)
{
	char buf[512];

	return lab_mount(dev, mnt, fs->name,
			 join_opts(buf, sizeof(buf), fs->mount_opts, extra_opts));
}

static int unsupported(int err)
{
	return err == ENOTTY || err == EOPNOTSUPP;
}

int lab_fscrypt_fs_make(const struct lab_fscrypt_fs *fs, const char *dev,
			const char *mnt, const char *extra_opts)
{
	int st, e;

	st = lab_mkfs(fs->mkfs_cmd, dev);
	if (st == 127)
		lab_skip("%s: mkfs command not found: %s", fs->name, fs->mkfs_cmd);
	if (st != 0)
		lab_die("%s: mkfs failed with status %d", fs->name, st);
	if (lab_fscrypt_fs_mount(fs, dev, mnt, extra_opts) == 0)
		return 0;
	e = errno;
	if (e == ENODEV)
		lab_skip("the kernel does not support %s", fs->name);
	if (e != EINVAL || !fs->mount_opts)
		lab_die("cannot mount %s as %s", dev, fs->name);
	printf("%s refused the mount options \"%s\"; mounting without them\n",
	       fs->name, fs->mount_opts);
	if (lab_mount(dev, mnt, fs->name, extra_opts) != 0)
		lab_die("cannot mount %s as %s even without \"%s\"", dev,
			fs->name, fs->mount_opts);
	return 1;
}

int lab_fscrypt_fs_try_key(const struct lab_fscrypt_fs *fs, const char *mnt,
			   const uint8_t *key, size_t keylen,
			   uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	int ret = lab_add_raw_key(mnt, key, keylen, id);
	int e = errno;

	if (ret != 0 && unsupported(e)) {
		errno = e;
		return -1;
	}
	if (ret != 0)
		lab_die("FS_IOC_ADD_ENCRYPTION_KEY on %s (%s): " LAB_ERR_FMT, mnt,
			fs->name, LAB_ERR_ARGS(e));
	return 0;
}

void lab_fscrypt_fs_setup(const struct lab_fscrypt_fs *fs, const char *dev,
			  const char *mnt, const char *extra_opts,
			  const uint8_t *key, size_t keylen,
			  uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	int refused = lab_fscrypt_fs_make(fs, dev, mnt, extra_opts);
	int e;

	if (lab_fscrypt_fs_try_key(fs, mnt, key, keylen, id) == 0) {
		if (refused)
			lab_die("%s supports fscrypt but refuses the mount option(s) \"%s\" this test needs",
				fs->name, fs->mount_opts);
		return;
	}
	e = errno;
	/* Unmount first, so that the reason is the test's last line. */
	lab_umount(mnt);
	lab_skip("%s has no fscrypt support in this kernel (FS_IOC_ADD_ENCRYPTION_KEY: " LAB_ERR_FMT ")",
		 fs->name, LAB_ERR_ARGS(e));
}
