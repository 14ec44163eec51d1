// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_crash PHASE - an fsynced encrypted btrfs file survives a VM
 * crash (tree-log replay).  Two boots, run by tests/run-phased.sh; see
 * lib/fscrypt_crash.c.  SKIP (in phase 1) while the kernel's btrfs has no
 * fscrypt ioctls.
 *
 * Afterwards `btrfs check --readonly` (the image's stock btrfs-progs 6.2)
 * runs and its output is logged.  Once btrfs encryption sets an incompat
 * flag that this btrfs-progs does not know, it refuses the filesystem
 * ("couldn't open because of unsupported option features"): that is
 * recorded, not a failure.  Any other complaint fails the test.
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
