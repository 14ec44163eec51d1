// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_ciphertext - btrfs's fscrypt ciphertext (contents and
 * names) equals an independent computation; see lib/fscrypt_ciphertext.c.
 *
 * Per-inode keys (mount option LAB_BTRFS_PER_INODE_KEYS_OPT): they derive
 * keys as ext4 does (per-file key from the nonce, IV = logical block), so
 * the same reference applies; per-extent keys are not modelled here.
 * Single data and metadata profiles: each block and each name is stored
 * once.  SKIP while the kernel's btrfs has no fscrypt ioctls.
 */
#include "fscrypt_ondisk.h"

int main(void)
{
	static const struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f -d single -m single",
		.mount_opts = LAB_BTRFS_PER_INODE_KEYS_OPT,
	};

	return fscrypt_ciphertext_test(&btrfs);
}
