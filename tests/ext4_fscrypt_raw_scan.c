// SPDX-License-Identifier: GPL-2.0
/*
 * ext4_fscrypt_raw_scan - no plaintext of an encrypted ext4 directory is on
 * the device; the same plaintext unencrypted is.  See lib/fscrypt_raw_scan.c.
 */
#include "fscrypt_ondisk.h"

int main(void)
{
	static const struct lab_fscrypt_fs ext4 = {
		.name = "ext4",
		.mkfs_cmd = "mkfs.ext4 -q -F -O encrypt",
	};

	return fscrypt_raw_scan_test(&ext4);
}
