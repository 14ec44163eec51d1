// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_raw_scan - no plaintext of an encrypted btrfs directory is
 * on the device (default mkfs: metadata DUP, small files inline; default
 * mount: the key mode btrfs uses by default); the same plaintext unencrypted
 * is.  SKIP while the kernel's btrfs has no fscrypt ioctls.  See
 * lib/fscrypt_raw_scan.c.
 */
#include "fscrypt_ondisk.h"

int main(void)
{
	static const struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
	};

	return fscrypt_raw_scan_test(&btrfs);
}
