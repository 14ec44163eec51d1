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
 * the IV).
 *
 * The lab's master keys are made from a seed (lab_master_key() of
 * tests/lib): seed 1 is the key above, K1; seed 2 the second key, K2, that
 * a subvolume is rekeyed to.
 *
 * fscrypt_setup key MOUNTPOINT SEED: add the master key of SEED to the
 * filesystem and print "key<TAB>SEED<TAB>IDENTIFIER" (hex).
 *
 * fscrypt_setup rekey [-a] SUBVOL DIR FROM TO: move the btrfs subvolume
 * SUBVOL from the master key of seed FROM to that of seed TO
 * (BTRFS_IOC_FSCRYPT_REKEY on SUBVOL's parent directory with its name).
 * Both keys are added first; the new policy is DIR's (an encrypted
 * directory of SUBVOL, FS_IOC_GET_ENCRYPTION_POLICY_EX) with TO's key
 * identifier. With -a, if DIR's policy already names TO, the move is TO to
 * FROM instead (a repeated measurement then moves everything back and
 * forth). Nothing of SUBVOL may be open, the cwd included. Prints, one
 * "name<TAB>value" line each: from_seed, to_seed, from_key, to_key (hex
 * identifiers), nr_dirs, nr_names, nr_symlinks, nr_files (what the kernel
 * moved) and elapsed_ns (CLOCK_MONOTONIC around the ioctl alone).
 *
 * Exit status: 0 done; 3 not supported (the filesystem has no fscrypt, the
 * kernel no rekey ioctl, or the subvolume per-inode keys: the errno is
 * printed); 1 any other failure; 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/btrfs.h>

#include "btrfs_rekey.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"

#define KEY_ID_HEX (2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1)

static int unsupported(int err)
{
	return err == EOPNOTSUPP || err == ENOTTY;
}

/* A key seed from the command line: a whole number from 1 on. */
static int parse_seed(const char *s, uint32_t *seed)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > UINT32_MAX) {
		fprintf(stderr, "fscrypt_setup: '%s' is not a key seed (1, 2, ...)\n", s);
		return -1;
	}
	*seed = (uint32_t)v;
	return 0;
}

/* The original command: the key of seed 1 and the policy on DIR. */
static int setup(int argc, char **argv)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct fscrypt_get_policy_ex_arg got;
	const char *keys;
	unsigned int flags;
	int key_only = argc == 4 && strcmp(argv[1], "-k") == 0;

	if (argc != 3 && !key_only) {
		fprintf(stderr, "usage: %s [-k] MOUNTPOINT DIR\n"
			"       %s key MOUNTPOINT SEED\n"
			"       %s rekey [-a] SUBVOL DIR FROM_SEED TO_SEED\n",
			argv[0], argv[0], argv[0]);
		return 2;
	}
	argv += key_only;
	if (lab_add_key(argv[1], 1, id) || (!key_only && lab_set_policy(argv[2], id))) {
		int err = errno;

		fprintf(stderr, "fscrypt_setup: %s: %s\n", argv[2], strerror(err));
		return unsupported(err) ? 3 : 1;
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

/* fscrypt_setup key MOUNTPOINT SEED */
static int add_key(int argc, char **argv)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char hex[KEY_ID_HEX];
	uint32_t seed;

	if (argc != 4) {
		fprintf(stderr, "usage: %s key MOUNTPOINT SEED\n", argv[0]);
		return 2;
	}
	if (parse_seed(argv[3], &seed))
		return 2;
	if (lab_add_key(argv[2], seed, id)) {
		int err = errno;

		fprintf(stderr, "fscrypt_setup: %s: adding the key of seed %u: %s\n",
			argv[2], seed, strerror(err));
		return unsupported(err) ? 3 : 1;
	}
	printf("key\t%u\t%s\n", seed, lab_hex(hex, id, sizeof(id)));
	return 0;
}

static long long elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (long long)(b->tv_sec - a->tv_sec) * 1000000000LL +
	       (b->tv_nsec - a->tv_nsec);
}

/* fscrypt_setup rekey [-a] SUBVOL DIR FROM TO */
static int rekey(int argc, char **argv)
{
	uint8_t ids[2][FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct btrfs_ioctl_fscrypt_rekey_args args;
	struct fscrypt_get_policy_ex_arg got;
	struct fscrypt_policy_v2 policy;
	char parent[PATH_MAX], subname[BTRFS_SUBVOL_NAME_MAX + 1], hex[2][KEY_ID_HEX];
	const char *name, *dir, *subvol;
	struct timespec t0, t1;
	uint32_t seeds[2];
	int alternate = argc == 7 && strcmp(argv[2], "-a") == 0;
	int from = 0, to = 1, fd, ret, err, i;
	size_t len;
	char *slash;

	if (argc != 6 && !alternate) {
		fprintf(stderr, "usage: %s rekey [-a] SUBVOL DIR FROM_SEED TO_SEED\n",
			argv[0]);
		return 2;
	}
	argv += alternate;
	subvol = argv[2];
	dir = argv[3];
	if (parse_seed(argv[4], &seeds[0]) || parse_seed(argv[5], &seeds[1]))
		return 2;
	if (seeds[0] == seeds[1]) {
		fprintf(stderr, "fscrypt_setup: rekey from seed %u to itself\n", seeds[0]);
		return 2;
	}

	/* SUBVOL's parent directory and its name there */
	len = strlen(subvol);
	while (len > 1 && subvol[len - 1] == '/')
		len--;
	if (len >= sizeof(parent)) {
		fprintf(stderr, "fscrypt_setup: %s: path too long\n", subvol);
		return 2;
	}
	memcpy(parent, subvol, len);
	parent[len] = '\0';
	slash = strrchr(parent, '/');
	if (!slash) {
		name = subvol;
		strcpy(parent, ".");
	} else {
		name = subvol + (slash + 1 - parent);
		if (slash == parent)
			slash[1] = '\0';	/* a subvolume of "/" */
		else
			*slash = '\0';
	}
	len = strcspn(name, "/");
	if (!len || len > BTRFS_SUBVOL_NAME_MAX) {
		fprintf(stderr, "fscrypt_setup: %s: no subvolume name\n", subvol);
		return 2;
	}

	for (i = 0; i < 2; i++) {
		if (lab_add_key(parent, seeds[i], ids[i])) {
			err = errno;
			fprintf(stderr, "fscrypt_setup: %s: adding the key of seed %u: %s\n",
				parent, seeds[i], strerror(err));
			return unsupported(err) ? 3 : 1;
		}
	}
	if (lab_get_policy_ex(dir, &got)) {
		fprintf(stderr, "fscrypt_setup: %s: reading the policy: %s\n", dir,
			strerror(errno));
		return 1;
	}
	if (got.policy.version != FSCRYPT_POLICY_V2) {
		fprintf(stderr, "fscrypt_setup: %s: policy version %u, not v2\n", dir,
			got.policy.version);
		return 1;
	}
	if (alternate && !memcmp(got.policy.v2.master_key_identifier, ids[1],
				 FSCRYPT_KEY_IDENTIFIER_SIZE)) {
		from = 1;
		to = 0;
	}

	policy = got.policy.v2;
	memcpy(policy.master_key_identifier, ids[to], FSCRYPT_KEY_IDENTIFIER_SIZE);
	memcpy(subname, name, len);
	subname[len] = '\0';
	lab_rekey_args(&args, subname, ids[from], &policy);

	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "fscrypt_setup: %s: %s\n", parent, strerror(errno));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = ioctl(fd, BTRFS_IOC_FSCRYPT_REKEY, &args);
	err = errno;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	if (ret) {
		fprintf(stderr, "fscrypt_setup: rekey of %s from seed %u to seed %u: %s\n",
			subvol, seeds[from], seeds[to], strerror(err));
		return unsupported(err) ? 3 : 1;
	}
	printf("from_seed\t%u\nto_seed\t%u\nfrom_key\t%s\nto_key\t%s\n"
	       "nr_dirs\t%llu\nnr_names\t%llu\nnr_symlinks\t%llu\nnr_files\t%llu\n"
	       "elapsed_ns\t%lld\n",
	       seeds[from], seeds[to], lab_hex(hex[0], ids[from], FSCRYPT_KEY_IDENTIFIER_SIZE),
	       lab_hex(hex[1], ids[to], FSCRYPT_KEY_IDENTIFIER_SIZE),
	       (unsigned long long)args.nr_dirs, (unsigned long long)args.nr_names,
	       (unsigned long long)args.nr_symlinks, (unsigned long long)args.nr_files,
	       elapsed_ns(&t0, &t1));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "key") == 0)
		return add_key(argc, argv);
	if (argc > 1 && strcmp(argv[1], "rekey") == 0)
		return rekey(argc, argv);
	return setup(argc, argv);
}
