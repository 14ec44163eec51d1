/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs_rekey.h - BTRFS_IOC_FSCRYPT_REKEY, the series' ioctl that moves an
 * encrypted subvolume to another fscrypt master key: its argument (from
 * include/uapi/linux/btrfs.h of the series, when the headers the lab is
 * built with do not have it) and the request as the tests, the power-cut
 * test and bench/tools/fscrypt_setup make it.
 *
 * The ioctl is issued on the subvolume's parent directory and names the
 * subvolume; "to" is the whole new policy (its master_key_identifier is the
 * new key).  On success the kernel reports what it moved: directories (the
 * policy's own included), their names, symlinks and regular files.
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef BTRFS_REKEY_H
#define BTRFS_REKEY_H

#include <stddef.h>
#include <stdint.h>
#include <linux/btrfs.h>
#include <linux/fscrypt.h>

#ifndef BTRFS_IOC_FSCRYPT_REKEY
struct btrfs_ioctl_fscrypt_rekey_args {
	__u8 from[FSCRYPT_KEY_IDENTIFIER_SIZE];	/* in: the old master key */
	struct fscrypt_policy_v2 to;		/* in: the new policy */
	__u64 flags;				/* in: 0 */
	__u64 nr_dirs;				/* out: what was moved */
	__u64 nr_names;
	__u64 nr_symlinks;
	__u64 nr_files;
	__u64 reserved[4];			/* in: 0 */
	char name[BTRFS_SUBVOL_NAME_MAX + 1];	/* in: the subvolume's name */
};
#define BTRFS_IOC_FSCRYPT_REKEY \
	_IOWR(BTRFS_IOCTL_MAGIC, 0xe0, struct btrfs_ioctl_fscrypt_rekey_args)
#endif

_Static_assert(sizeof(struct btrfs_ioctl_fscrypt_rekey_args) == 4152,
	       "struct btrfs_ioctl_fscrypt_rekey_args is not 4152 bytes");
_Static_assert(offsetof(struct btrfs_ioctl_fscrypt_rekey_args, flags) == 40,
	       "btrfs_ioctl_fscrypt_rekey_args::flags moved");
_Static_assert(offsetof(struct btrfs_ioctl_fscrypt_rekey_args, nr_dirs) == 48,
	       "btrfs_ioctl_fscrypt_rekey_args::nr_dirs moved");
_Static_assert(offsetof(struct btrfs_ioctl_fscrypt_rekey_args, name) == 112,
	       "btrfs_ioctl_fscrypt_rekey_args::name moved");

/* What a rekey moved, for printf: "%llu dirs (%llu names), ..." */
#define LAB_REKEY_COUNTS_FMT "%llu dirs (%llu names), %llu symlinks, %llu files"
#define LAB_REKEY_COUNTS_ARGS(a) (unsigned long long)(a)->nr_dirs, \
	(unsigned long long)(a)->nr_names, (unsigned long long)(a)->nr_symlinks, \
	(unsigned long long)(a)->nr_files

/*
 * The request to move the subvolume @name from master key @from to the
 * policy @to; every other field 0.  Dies if @name does not fit.
 */
void lab_rekey_args(struct btrfs_ioctl_fscrypt_rekey_args *a, const char *name,
		    const uint8_t from[FSCRYPT_KEY_IDENTIFIER_SIZE],
		    const struct fscrypt_policy_v2 *to);

/*
 * Which of the keys @ids[1] .. @ids[@nr] is @id, where @ids is an array of
 * identifiers (uint8_t [][FSCRYPT_KEY_IDENTIFIER_SIZE]; the tests number their
 * keys K1, K2, ... from 1, @ids[0] is not looked at): its number, or 0.
 */
int lab_rekey_key_index(const uint8_t *id, const void *ids, int nr);

/* Did the rekey @a report that it moved nothing at all? */
int lab_rekey_moved_nothing(const struct btrfs_ioctl_fscrypt_rekey_args *a);

/*
 * BTRFS_IOC_FSCRYPT_REKEY of @a on @parent, the subvolume's parent
 * directory (lab_ioctl_path(): the ioctl's errno is kept).
 */
int lab_rekey_at(const char *parent, struct btrfs_ioctl_fscrypt_rekey_args *a);

#endif /* BTRFS_REKEY_H */
