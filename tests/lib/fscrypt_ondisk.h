/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fscrypt_ondisk.h - the on-disk fscrypt tests, each written once for every
 * filesystem; a test program per filesystem only says how to make and mount
 * it (struct lab_fscrypt_fs), so each filesystem gets its own PASS/SKIP/FAIL.
 *
 * All use SCRATCH_DEV and SCRATCH_MNT (and the crash test SCRATCH_DEV2) and
 * return the exit code (LAB_PASS / LAB_FAIL), or exit with LAB_SKIP.
 */
#ifndef FSCRYPT_ONDISK_H
#define FSCRYPT_ONDISK_H

#include "fscrypt_fs.h"

/*
 * The ciphertext on the device equals an independent computation (see
 * fscrypt_ref.h) for file contents and names; a flipped master-key bit must
 * match nothing.  lib/fscrypt_ciphertext.c; needs -lcrypto.
 */
int fscrypt_ciphertext_test(const struct lab_fscrypt_fs *fs);

/*
 * No plaintext of an encrypted directory (contents, names, symlink target)
 * is anywhere on the device, while the same plaintext in an unencrypted
 * directory is found.  lib/fscrypt_raw_scan.c.
 */
int fscrypt_raw_scan_test(const struct lab_fscrypt_fs *fs);

/*
 * Two-boot crash test: argv[1] is the phase, "1" (write, fsync, crash the
 * VM) or "2" (mount, replay, verify).  lib/fscrypt_crash.c; needs -lcrypto.
 * @fsck_cmd is run on the device at the end of phase 2 (the device is
 * appended) and its output logged; it must succeed, unless it fails with
 * output containing @fsck_refusal (if not NULL): then the fsck refused to
 * look at the filesystem at all, which is recorded but not a failure.
 */
int fscrypt_crash_test(const struct lab_fscrypt_fs *fs, const char *fsck_cmd,
		       const char *fsck_refusal, int argc, char **argv);

#endif /* FSCRYPT_ONDISK_H */
