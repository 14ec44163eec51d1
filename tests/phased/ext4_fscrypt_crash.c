// SPDX-License-Identifier: GPL-2.0
/*
 * ext4_fscrypt_crash PHASE - an fsynced encrypted ext4 file survives a VM
 * crash (journal replay); e2fsck -fn must be clean afterwards.  Two boots,
 * run by tests/run-phased.sh; see lib/fscrypt_crash.c.
 */
#include "fscrypt_ondisk.h"

int main(int argc, char **argv)
{
	static const struct lab_fscrypt_fs ext4 = {
		.name = "ext4",
		.mkfs_cmd = "mkfs.ext4 -q -F -O encrypt",
	};

	return fscrypt_crash_test(&ext4, "e2fsck -fn", NULL, argc, argv);
}
