// SPDX-License-Identifier: GPL-2.0
/*
 * fscrypt_setup MOUNTPOINT DIR: add the lab's test master key to the
 * filesystem and set a v2 policy (AES-256-XTS, AES-256-CTS) on the empty
 * directory DIR. Exit status: 0 done; 3 the filesystem does not support
 * fscrypt (the errno is printed); 1 any other failure.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fscrypt_util.h"

int main(int argc, char **argv)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];

	if (argc != 3) {
		fprintf(stderr, "usage: %s MOUNTPOINT DIR\n", argv[0]);
		return 1;
	}
	if (lab_add_key(argv[1], 1, id) || lab_set_policy(argv[2], id)) {
		int err = errno;

		fprintf(stderr, "fscrypt_setup: %s: %s\n", argv[2], strerror(err));
		return err == EOPNOTSUPP || err == ENOTTY ? 3 : 1;
	}
	return 0;
}
