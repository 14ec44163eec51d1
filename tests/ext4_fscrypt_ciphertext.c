// SPDX-License-Identifier: GPL-2.0
/*
 * ext4_fscrypt_ciphertext - ext4's fscrypt ciphertext (contents and names)
 * equals an independent computation; see lib/fscrypt_ciphertext.c.
 */
#include "fscrypt_ondisk.h"

int main(void)
{
	static const struct lab_fscrypt_fs ext4 = {
		.name = "ext4",
		.mkfs_cmd = "mkfs.ext4 -q -F -b 4096 -O encrypt",
	};

	return fscrypt_ciphertext_test(&ext4);
}
