// SPDX-License-Identifier: GPL-2.0
/*
 * fscrypt_setup [-k] MOUNTPOINT DIR: add the lab's test master key to the
 * filesystem and set a v2 policy (AES-256-XTS, AES-256-CTS) on the empty
 * directory DIR (with -k: only add the key, DIR is already encrypted with
 * it, as on a restored filesystem), then print the policy the kernel
 * reports back for DIR
 * (FS_IOC_GET_ENCRYPTION_POLICY_EX), as the bench records it:
 *   policy v2 contents=1 filenames=4 flags=0x2 keys=per-file
 * keys= is what the policy flags select: per-file (a key derived per file,
 * fscrypt's default), direct (DIRECT_KEY: the master key's per-mode key),
 * iv-ino-lblk-64 or iv-ino-lblk-32 (per-mode keys with inode numbers in
 * the IV). Exit status: 0 done; 3 the filesystem does not support fscrypt
 * (the errno is printed); 1 any other failure.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fscrypt_util.h"

int main(int argc, char **argv)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct fscrypt_get_policy_ex_arg got;
	const char *keys;
	unsigned int flags;
	int key_only = argc == 4 && strcmp(argv[1], "-k") == 0;

	if (argc != 3 && !key_only) {
		fprintf(stderr, "usage: %s [-k] MOUNTPOINT DIR\n", argv[0]);
		return 1;
	}
	argv += key_only;
	if (lab_add_key(argv[1], 1, id) || (!key_only && lab_set_policy(argv[2], id))) {
		int err = errno;

		fprintf(stderr, "fscrypt_setup: %s: %s\n", argv[2], strerror(err));
		return err == EOPNOTSUPP || err == ENOTTY ? 3 : 1;
	}
	if (lab_get_policy_ex(argv[2], &got)) {
		fprintf(stderr, "fscrypt_setup: %s: reading the policy back: %s\n",
			argv[2], strerror(errno));
		return 1;
	}
	if (got.policy.version != FSCRYPT_POLICY_V2) {
		fprintf(stderr, "fscrypt_setup: %s: policy version %u, set v2\n",
			argv[2], got.policy.version);
		return 1;
	}
	flags = got.policy.v2.flags;
	keys = flags & FSCRYPT_POLICY_FLAG_DIRECT_KEY ? "direct" :
	       flags & FSCRYPT_POLICY_FLAG_IV_INO_LBLK_64 ? "iv-ino-lblk-64" :
	       flags & FSCRYPT_POLICY_FLAG_IV_INO_LBLK_32 ? "iv-ino-lblk-32" :
	       "per-file";
	printf("policy v2 contents=%u filenames=%u flags=0x%x keys=%s\n",
	       got.policy.v2.contents_encryption_mode,
	       got.policy.v2.filenames_encryption_mode, flags, keys);
	return 0;
}
