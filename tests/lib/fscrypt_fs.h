/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fscrypt_fs.h - making a scratch filesystem ready for fscrypt, the same way
 * for ext4 and btrfs, with an honest SKIP where the kernel cannot do it; and
 * the fscrypt ioctls with a raw (random) master key.
 */
#ifndef FSCRYPT_FS_H
#define FSCRYPT_FS_H

#include <stddef.h>
#include <stdint.h>
#include <linux/fscrypt.h>

struct lab_fscrypt_fs {
	const char *name;	/* mount(2) type and messages: "ext4", "btrfs" */
	const char *mkfs_cmd;	/* the device is appended */
	const char *mount_opts;	/* mount(2) data, or NULL */
};

/* The btrfs mount option selecting per-inode keys (bench/arms.sh, issue #4). */
#define LAB_BTRFS_PER_INODE_KEYS_OPT "fscrypt_per_inode_keys"

/*
 * Present when the kernel's btrfs encrypts new regular files with a key per
 * extent by default (LAB_BTRFS_PER_INODE_KEYS_OPT then selects per-inode keys).
 */
#define LAB_BTRFS_EXTENT_KEYS_FEATURE "/sys/fs/btrfs/features/encrypt_extent_keys"

/*
 * Present when the kernel's btrfs compresses encrypted files as it does plain
 * ones (compress mount options, the compression property, chattr +c); before
 * that, they were stored uncompressed and chattr +c failed with EOPNOTSUPP.
 */
#define LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE "/sys/fs/btrfs/features/encrypt_compress"

/* getrandom() @len bytes; dies on failure. */
void lab_random(void *buf, size_t len);

/* @len random bytes as 2*@len lowercase hex digits + NUL into @out. */
void lab_random_hex(char *out, size_t len);

/*
 * mkfs @dev, mount it on @mnt with fs->mount_opts (plus ",@extra_opts" if not
 * NULL) and add the master key @key (@keylen bytes); its identifier goes to
 * @id.  Exits with LAB_SKIP when the kernel cannot do this: no such
 * filesystem, no mkfs, or no fscrypt ioctls on it (ENOTTY/EOPNOTSUPP).  If
 * fs->mount_opts are refused but the filesystem does support fscrypt without
 * them, that is a failure (exit LAB_FAIL), not a skip: the options are part
 * of what the test is about.  Other setup errors exit LAB_FAIL too.
 */
void lab_fscrypt_fs_setup(const struct lab_fscrypt_fs *fs, const char *dev,
			  const char *mnt, const char *extra_opts,
			  const uint8_t *key, size_t keylen,
			  uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE]);

/*
 * The two halves of lab_fscrypt_fs_setup(), for a test that does something
 * before it knows whether fscrypt is there.
 *
 * lab_fscrypt_fs_make(): mkfs and mount (skips or dies as setup does).  If
 * the kernel refuses fs->mount_opts (EINVAL), mounts without them and
 * returns 1, else 0.
 *
 * lab_fscrypt_fs_try_key(): add the key.  0 on success; -1 with errno
 * ENOTTY/EOPNOTSUPP if the filesystem has no fscrypt.  Dies on other errors.
 */
int lab_fscrypt_fs_make(const struct lab_fscrypt_fs *fs, const char *dev,
			const char *mnt, const char *extra_opts);
int lab_fscrypt_fs_try_key(const struct lab_fscrypt_fs *fs, const char *mnt,
			   const uint8_t *key, size_t keylen,
			   uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE]);

/* Mount again (no mkfs, no key); 0 or -1 (message printed). */
int lab_fscrypt_fs_mount(const struct lab_fscrypt_fs *fs, const char *dev,
			 const char *mnt, const char *extra_opts);

/* FS_IOC_ADD_ENCRYPTION_KEY of the raw key @key on the fs of @path. */
int lab_add_raw_key(const char *path, const uint8_t *key, size_t keylen,
		    uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE]);

/* FS_IOC_GET_ENCRYPTION_NONCE of @path (file or directory). */
int lab_get_nonce(const char *path, uint8_t nonce[16]);

/* "%02x" of @len bytes into @out (2*@len+1 bytes); returns @out. */
char *lab_hex(char *out, const void *buf, size_t len);

#endif /* FSCRYPT_FS_H */
