/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fscrypt_roundtrip.h - filesystem-independent fscrypt v2 round-trip test.
 *
 * The caller only says how to make and mount the filesystem; everything else
 * (key add/remove, policy, files, no-key behaviour, raw device scan) is the
 * same for every filesystem, so ext4 (the reference) and btrfs run the very
 * same checks.
 */
#ifndef FSCRYPT_ROUNDTRIP_H
#define FSCRYPT_ROUNDTRIP_H

struct fscrypt_rt_fs {
	/* Filesystem type for mount(2) and for messages, e.g. "ext4". */
	const char *fs_name;
	/* mkfs command line; the device is appended, e.g. "mkfs.ext4 -q -F". */
	const char *mkfs_cmd;
	/* mount(2) data string, or NULL. */
	const char *mount_opts;
	/*
	 * If nonzero, exit with LAB_SKIP (77) when the kernel/filesystem does
	 * not offer the fscrypt ioctls at all (ENOTTY/EOPNOTSUPP on adding a
	 * key).  If zero, that is a test failure.
	 */
	int unsupported_is_skip;
};

/*
 * Uses SCRATCH_DEV and SCRATCH_MNT from the environment: mkfs, mount, run
 * the round trip, unmount, scan the raw device.  Returns the exit code
 * (LAB_PASS / LAB_FAIL); may exit with LAB_SKIP or LAB_FAIL on setup errors.
 */
int fscrypt_roundtrip(const struct fscrypt_rt_fs *fs);

#endif /* FSCRYPT_ROUNDTRIP_H */
