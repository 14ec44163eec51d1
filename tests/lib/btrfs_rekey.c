// SPDX-License-Identifier: GPL-2.0
/* BTRFS_IOC_FSCRYPT_REKEY requests; see btrfs_rekey.h. */
#include "btrfs_rekey.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <string.h>

void lab_rekey_args(struct btrfs_ioctl_fscrypt_rekey_args *a, const char *name,
		    const uint8_t from[FSCRYPT_KEY_IDENTIFIER_SIZE],
		    const struct fscrypt_policy_v2 *to)
{
	memset(a, 0, sizeof(*a));
	memcpy(a->from, from, FSCRYPT_KEY_IDENTIFIER_SIZE);
	memcpy(&a->to, to, sizeof(a->to));
	lab_pathf(a->name, sizeof(a->name), "%s", name);
}

int lab_rekey_moved_nothing(const struct btrfs_ioctl_fscrypt_rekey_args *a)
{
	return !a->nr_dirs && !a->nr_names && !a->nr_symlinks && !a->nr_files;
}

int lab_rekey_at(const char *parent, struct btrfs_ioctl_fscrypt_rekey_args *a)
{
	return lab_ioctl_path(parent, BTRFS_IOC_FSCRYPT_REKEY, a);
}

int lab_rekey_key_index(const uint8_t *id, const void *ids, int nr)
{
	const uint8_t *each = ids;
	int k;

	for (k = 1; k <= nr; k++)
		if (!memcmp(id, each + k * FSCRYPT_KEY_IDENTIFIER_SIZE,
			    FSCRYPT_KEY_IDENTIFIER_SIZE))
			return k;
	return 0;
}
