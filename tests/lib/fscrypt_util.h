/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fscrypt_util.h - the fscrypt ioctls as the tests use them.
 *
 * All return 0 on success and -1 with errno set on failure, so callers can
 * check exact errnos with CHECK_ERRNO()/CHECK_OK().
 */
#ifndef FSCRYPT_UTIL_H
#define FSCRYPT_UTIL_H

#include <stdint.h>
#include <linux/fscrypt.h>

#define LAB_MASTER_KEY_SIZE 64

/* The test master key for @seed: LAB_MASTER_KEY_SIZE deterministic bytes. */
void lab_master_key(uint8_t key[LAB_MASTER_KEY_SIZE], uint32_t seed);

/*
 * ioctl(@cmd, @arg) on an O_RDONLY fd of @path.  Returns 0, or -1 with the
 * ioctl's errno (not close()'s).
 */
int lab_ioctl_path(const char *path, unsigned long cmd, void *arg);

/*
 * FS_IOC_ADD_ENCRYPTION_KEY of lab_master_key(@seed) as a v2 key on the
 * filesystem containing @path; the key identifier goes to @id.
 */
int lab_add_key(const char *path, uint32_t seed,
		uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE]);

/*
 * FS_IOC_REMOVE_ENCRYPTION_KEY of the v2 key @id; the kernel's
 * removal_status_flags go to *@status_flags if it is not NULL.
 */
int lab_remove_key(const char *path, const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
		   uint32_t *status_flags);

/* FS_IOC_GET_ENCRYPTION_KEY_STATUS of @id: FSCRYPT_KEY_STATUS_*, or -1. */
int lab_key_status(const char *path, const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE]);

/*
 * FS_IOC_GET_ENCRYPTION_KEY_STATUS of @id; the whole answer (status,
 * status_flags, user_count) goes to *@arg.
 */
int lab_get_key_status(const char *path,
		       const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE],
		       struct fscrypt_get_key_status_arg *arg);

/* The policy lab_set_policy() sets for @id: v2, AES-256-XTS/AES-256-CTS, PAD_32. */
void lab_default_policy(struct fscrypt_policy_v2 *p,
			const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE]);

/* FS_IOC_SET_ENCRYPTION_POLICY of lab_default_policy(@id) on @dir. */
int lab_set_policy(const char *dir, const uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE]);

/* FS_IOC_SET_ENCRYPTION_POLICY of the v2 policy *@p on @path. */
int lab_set_policy_v2(const char *path, const struct fscrypt_policy_v2 *p);

/*
 * FS_IOC_GET_ENCRYPTION_POLICY_EX of @path with room for any policy version;
 * the kernel's policy_size and policy go to *@arg.
 */
int lab_get_policy_ex(const char *path, struct fscrypt_get_policy_ex_arg *arg);

#endif /* FSCRYPT_UTIL_H */
