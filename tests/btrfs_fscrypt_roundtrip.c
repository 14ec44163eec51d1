// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_roundtrip - the ext4 reference round trip, unchanged, on
 * btrfs with per-inode keys: policies, add/remove/re-add key, no-key names,
 * ENOKEY, byte-exact read-back and the raw-device scan.
 */
#include "fscrypt_roundtrip.h"
#include "lab.h"

int main(void)
{
	static const struct fscrypt_rt_fs btrfs = {
		.fs_name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
		.mount_opts = NULL,
		/* The series adds fscrypt to btrfs: its absence is a failure. */
		.unsupported_is_skip = 0,
	};

	return fscrypt_roundtrip(&btrfs);
}
