// SPDX-License-Identifier: GPL-2.0
/*
 * ext4_fscrypt_roundtrip - upstream fscrypt v2 on ext4: the reference
 * behaviour.  All the work is in lib/fscrypt_roundtrip.c; only how to make
 * and mount the filesystem is ext4-specific.
 */
#include "fscrypt_roundtrip.h"
#include "lab.h"

int main(void)
{
	static const struct fscrypt_rt_fs ext4 = {
		.fs_name = "ext4",
		.mkfs_cmd = "mkfs.ext4 -q -F -O encrypt",
		.mount_opts = NULL,
		/* A kernel without fscrypt cannot give a reference: skip. */
		.unsupported_is_skip = 1,
	};

	return fscrypt_roundtrip(&ext4);
}
