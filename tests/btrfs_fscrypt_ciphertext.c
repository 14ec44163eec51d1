// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_ciphertext - btrfs's fscrypt ciphertext (contents and
 * names) equals an independent computation; see lib/fscrypt_ciphertext.c.
 *
 * The reference is per-inode keys, which derive keys as ext4 does (per-file
 * key from the nonce, IV = logical block).  A kernel whose btrfs has
 * per-extent keys advertises them (LAB_BTRFS_EXTENT_KEYS_FEATURE) and then
 * needs the mount option LAB_BTRFS_PER_INODE_KEYS_OPT for per-inode keys; a
 * kernel without that file has per-inode keys only, so every contents
 * mismatch is a failure.  Single data and metadata profiles: each block and
 * each name is stored once.  SKIP while the kernel's btrfs has no fscrypt
 * ioctls.
 */
#include "fscrypt_ondisk.h"

#include <unistd.h>

int main(void)
{
	struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f -d single -m single",
		.mount_opts = NULL,
	};

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0)
		btrfs.mount_opts = LAB_BTRFS_PER_INODE_KEYS_OPT;
	return fscrypt_ciphertext_test(&btrfs);
}
