/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs_progs.h - the image's patched btrfs-progs (patches/btrfs-progs/,
 * installed by vm-images/build-rootfs.sh), which understand encrypted btrfs:
 * `btrfs check --readonly` and `btrfs inspect-internal dump-tree`.
 *
 * Debian's btrfs-progs 6.2 refuses a filesystem with the ENCRYPT incompat
 * bit ("unsupported option features (10000000000)").  The patched ones say
 * LAB_BTRFS_PROGS_TAG in `btrfs version`; without them a test that needs
 * them skips with that reason (never passes silently).
 */
#ifndef BTRFS_PROGS_H
#define BTRFS_PROGS_H

#include <stddef.h>

/* What the patched programs append to their version string. */
#define LAB_BTRFS_PROGS_TAG "+fscrypt-lab"
/*
 * ... and, since they know the 6.12 series' format (ENCRYPT bit 40, v2
 * extent contexts of 40 bytes: item size 93), also this.  Patched ones of
 * the 6.1 series' format refuse such a filesystem (an unknown incompat bit).
 */
#define LAB_BTRFS_PROGS_EXTENT_CTX_TAG "ENCRYPT bit 40, extent contexts v1 v2"

/*
 * Are the patched btrfs-progs in the image, and do they know this format?
 * 1 if so; 0 if not, with the reason (what `btrfs version` said) in
 * @why[@size].
 */
int lab_btrfs_progs_patched(char *why, size_t size);

/*
 * Run @cmd (the device is appended, stderr joins stdout), print its output
 * with a "  | " prefix, and return it malloc()ed in *@out (NUL-terminated;
 * NULL to discard).  Returns the exit status, or -1 if it could not run.
 */
int lab_run_capture(const char *cmd, const char *dev, char **out);

/*
 * The end of every btrfs encryption test: after the test has unmounted
 * @dev, `btrfs check --readonly @dev` with the patched btrfs-progs must
 * find it clean (exit 0, "no error found").  @what names the filesystem in
 * messages.  A failure is recorded with CHECK (the output is logged).
 *
 * Without the patched btrfs-progs: if the test has already failed, a note
 * is printed and the failure stands; otherwise the test exits LAB_SKIP with
 * the reason, because it could not check what it is meant to end with.
 *
 * Returns 1 if clean, 0 if not.
 */
int lab_btrfs_check_clean(const char *dev, const char *what);

/*
 * `btrfs check --readonly @dev`, for tests that expect it to find
 * something: the exit status, and the output in *@out (malloc()ed).
 * Skips as above without the patched btrfs-progs.
 */
int lab_btrfs_check_output(const char *dev, char **out);

/*
 * `btrfs check --readonly @dev` (as lab_btrfs_check_output()): 0 if it
 * finds the filesystem clean (exit 0, "no error found"), else the number of
 * its output lines that name an error, at least 1.
 */
int lab_btrfs_check_errors(const char *dev);

/*
 * `btrfs @args @dev` (e.g. "check --repair --force"), gated like
 * lab_btrfs_check_output(): its exit status and output.
 */
int lab_btrfs_progs_output(const char *args, const char *dev, char **out);

#endif /* BTRFS_PROGS_H */
