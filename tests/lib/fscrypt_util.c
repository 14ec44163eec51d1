// SPDX-License-Identifier: GPL-2.0
/* The fscrypt ioctls as the tests use them; see fscrypt_util.h. */
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

void lab_master_key(uint8_t key[LAB_MASTER_KEY_SIZE], uint32_t seed)
{
	fill_pattern(key, LAB_MASTER_KEY_SIZE, seed);
}

int lab_ioctl_path(const char *path, unsigned long cmd, void *arg)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret, err;

	if (fd < 0)
		return -1;
	ret = ioctl(fd, cmd, arg);
	err = errno;
	close(fd);
	errno = err;
	return ret < 0 ? -1 : 0;
}

int lab_add_key(const char *path, uint32_t seed,
		uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	uint8_t raw[LAB_MASTER_KEY_SIZE];
	int ret, e;

	lab_master_key(raw, seed);
	ret = lab_add_raw_key(path, raw, sizeof(raw), id);
	e = errno;
	memset(raw, 0, sizeof(raw));
	errno = e;
	return ret;
}

int lab_remove_key(const char *path, const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
		   uint32_t *status_flags)
{
	struct fscrypt_remove_key_arg arg;
	int ret;

	memset(&arg, 0, sizeof(arg));
	arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	memcpy(arg.key_spec.u.identifier, id, FSCRYPT_KEY_IDENTIFIER_SIZE);
	ret = lab_ioctl_path(path, FS_IOC_REMOVE_ENCRYPTION_KEY, &arg);
	if (!ret && status_flags)
		*status_flags = arg.removal_status_flags;
	return ret;
}

int lab_get_key_status(const char *path,
		       const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
		       struct fscrypt_get_key_status_arg *arg)
{
	memset(arg, 0, sizeof(*arg));
	arg->key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	memcpy(arg->key_spec.u.identifier, id, FSCRYPT_KEY_IDENTIFIER_SIZE);
	return lab_ioctl_path(path, FS_IOC_GET_ENCRYPTION_KEY_STATUS, arg);
}

int lab_key_status(const char *path, const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	struct fscrypt_get_key_status_arg arg;

	if (lab_get_key_status(path, id, &arg))
		return -1;
	return arg.status;
}

void lab_default_policy(struct fscrypt_policy_v2 *p,
			const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	memset(p, 0, sizeof(*p));
	p->version = FSCRYPT_POLICY_V2;
	p->contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
	p->filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
	p->flags = FSCRYPT_POLICY_FLAGS_PAD_32;
	memcpy(p->master_key_identifier, id, FSCRYPT_KEY_IDENTIFIER_SIZE);
}

int lab_set_policy(const char *dir, const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE])
{
	struct fscrypt_policy_v2 p;

	lab_default_policy(&p, id);
	return lab_set_policy_v2(dir, &p);
}

int lab_set_policy_v2(const char *path, const struct fscrypt_policy_v2 *p)
{
	struct fscrypt_policy_v2 copy = *p;

	return lab_ioctl_path(path, FS_IOC_SET_ENCRYPTION_POLICY, &copy);
}

int lab_get_policy_ex(const char *path, struct fscrypt_get_policy_ex_arg *arg)
{
	memset(arg, 0, sizeof(*arg));
	arg->policy_size = sizeof(arg->policy);
	return lab_ioctl_path(path, FS_IOC_GET_ENCRYPTION_POLICY_EX, arg);
}
