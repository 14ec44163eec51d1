// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_crash PHASE - an fsynced encrypted btrfs file survives a VM
 * crash (tree-log replay).  Two boots, run by tests/run-phased.sh; see
 * lib/fscrypt_crash.c.  SKIP (in phase 1) while the kernel's btrfs has no
 * fscrypt ioctls.
 *
 * Afterwards the image's patched `btrfs check --readonly`
 * (patches/btrfs-progs/, which knows the ENCRYPT format) must find the
 * replayed filesystem clean.  Without the patched btrfs-progs (Debian's
 * 6.2 refuses the ENCRYPT incompat flag) phase 2 skips, saying so.  The
 * fsck command and refusal below are used only to show what the checker
 * says when the filesystem does not mount.
 */
#include "fscrypt_ondisk.h"

int main(int argc, char **argv)
{
	static const struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
	};

	return fscrypt_crash_test(&btrfs, "btrfs check --readonly",
				  "unsupported option features", argc, argv);
}
