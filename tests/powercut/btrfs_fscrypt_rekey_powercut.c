// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_rekey_powercut - power cuts during BTRFS_IOC_FSCRYPT_REKEY
 * and during writes under the new key.
 *
 * What it proves: after the VM is killed at a random moment of a loop of
 * fsynced writes and rekeys of a subvolume between two master keys, the
 * next mount (tree-log replay) gives back every fsynced byte, bit for bit,
 * also of files whose extents are under both keys; every inode (directory,
 * symlink, regular file) is wholly under one key: the one of the last
 * rekey the log shows as done, or, when a rekey was in flight, that one or
 * the rekey's new one; every directory's names (DIR_INDEX, DIR_ITEM and
 * INODE_REF items) are the model's names encrypted under the key its own
 * context names, and readdir lists exactly the model's plaintext names;
 * lookups across a directory boundary of different keys fail with EPERM,
 * and only there; the image's patched `btrfs check --readonly` is clean;
 * and the same rekey run again finishes: it moves exactly what the cut
 * left under the old key, after which everything is under the new key, and
 * once more it moves nothing.
 *
 * How: tests/run-powercut.sh, with POWERCUT_BIN naming this program, boots
 * the VM once per cut with two scratch disks kept from boot to boot: A
 * (SCRATCH_DEV) holds the filesystem, B (SCRATCH_DEV2) a log of what is
 * durable.  Each boot runs
 *
 *   btrfs_fscrypt_rekey_powercut verify [--self-check]
 *	for the previous cut (not in the first boot), then, if that passed,
 *   btrfs_fscrypt_rekey_powercut work SEED CUT [--mkfs]
 *	which runs until the host SIGKILLs QEMU (--mkfs: the first boot
 *	makes the filesystem).  The host starts its random timer when the
 *	line "powercut: working" reaches the console.
 *
 * The filesystem (mounted with the default per-extent keys: the kernel
 * refuses to rekey a subvolume holding per-inode-key files): subvolume sv
 * at the top level, sv/enc with the default v2 policy of K1.  Keys K1 and
 * K2 come from fixed seeds (lab_master_key()); both are added at every
 * mount.  The first boot builds a static tree in sv/enc: 31 directories
 * (enc, 5 below it, 5 below each of those), each holding 14 small files
 * (0 to 6000 bytes; one in five empty) and 4 symlinks (targets of 1 to 200
 * bytes), names of 3 to 255 bytes, all a function of the run's tree seed;
 * created directory by directory, so that the rekey, which goes in inode
 * order, meets directories and symlinks interleaved.  Then syncfs.
 *
 * The loop ("work"), one process: (a) the writers' turn, 1 to 3 of: a
 * create of a writer file (8 to 64 KiB, in any of the 31 directories, up to
 * 6 live files; fsync of the file and of its directory), a write batch of 1
 * to 3 appends or overwrites (1 byte to 16 KiB, some block-aligned) then
 * fsync, or fdatasync one time in four, or an unlink (fsync of the
 * directory); then a FICLONERANGE of 1 to 4 whole blocks from a writer
 * file into one (or another part of the same), then fsync (after rekeys,
 * files hold extents of both keys: a clone gives a file of the current
 * key extents of the other, a reflink across keys; counted as
 * clones_other_key when the source range has such an extent), if one
 * fits; writer files hold data that
 * compresses (rp_fill()) and the workload mounts with compress=zstd where
 * the kernel compresses encrypted files; every file is opened for the
 * operation and closed after it, so no fd is left open; (b) the rekey of
 * sv to the other key
 * (BTRFS_IOC_FSCRYPT_REKEY on the top directory, named "sv", "to" being
 * sv/enc's policy with the other key), whose counts must be exactly what
 * the tree holds (31 dirs, every name, 124 symlinks, every file); EBUSY
 * (an inode still held by the kernel) is retried after a syncfs; repeat.
 * After a rekey, writes to old files put new extents under the new key
 * next to old ones under the old key.  Any other error is printed as
 * "powercut: ERROR" and fails the cut.
 *
 * The log on B (tests/lib/powercut.c): 512-byte records, one per sector,
 * written with O_DIRECT|O_DSYNC; each carries a crc32c, the run's id and
 * its own slot number, so that a torn, unwritten or stale sector is
 * recognised and skipped.  Sector 0 is the header (run id, tree seed, the
 * two keys' identifiers).  Every operation writes an INTENT record
 * (everything needed to redo it: file, directory, offsets, lengths, content
 * seeds; for a rekey, from and to) before it starts and a COMMIT record
 * after its fsync (a rekey: after the ioctl returned 0, with the counts).
 * The loop is sequential: at a cut at most one operation is in flight.
 *
 * The rule the verifier applies.  It replays the log into a model: a
 * committed operation is applied at its commit; a file's model is its
 * content and size after its last committed operation; the key state is
 * Kx, the "to" of the last committed rekey (K1 before any).  An operation
 * with an intent and no commit is in flight:
 *   - a write (or a clone): a byte it covers may be the model's or the
 *     write's (the source's); the size may be anything from the model's
 *     to the largest the write gives;
 *   - a create: the file may be absent or have any content; an unlink: the
 *     file may be gone (if present, its content is checked);
 *   - a rekey from Kx to Ky: each inode may be under Kx or Ky, but each one
 *     wholly.
 * The checks, with both keys added after a look at sv/enc without them (no
 * plaintext name may show):
 *   1. on disk (BTRFS_IOC_TREE_SEARCH, no path walk, so also below a
 *	boundary): walking from sv/enc by the DIR_INDEX items, every inode's
 *	context item names an allowed key; every DIR_INDEX name of a
 *	directory is the reference encryption (tests/lib/fscrypt_ref.c,
 *	OpenSSL) of one of the model's names with the key of the directory's
 *	own context and its nonce (a name under the other key is a
 *	half-moved directory), every name the model requires is there, its
 *	DIR_ITEM names are the same and every child's INODE_REF carries the
 *	same name; every symlink's inline target is the reference encryption
 *	of its model target under its own context's key; the subvolume's key
 *	records name only K1 and K2, and every key an inode is under;
 *   2. walking by path from sv/enc: each directory reached lists exactly
 *	the model's plaintext names (readdir; garbage or a missing name is an
 *	error) and FS_IOC_GET_ENCRYPTION_POLICY_EX gives the default policy of
 *	the key its context names; a child whose key differs from its
 *	directory's (known from step 1: possible only with a rekey in flight)
 *	must fail with EPERM (a directory or symlink at lookup, a regular file
 *	at open) and is left for step 4; a child of the same key must not;
 *	every symlink reached reads its target; every file reached (policy
 *	checked too) is compared with its model (per byte, as above; the
 *	static files exactly);
 *	Then, still mounted, the patched `btrfs subvolume rekey --status` of
 *	the subvolume must give, for each key with objects, the directories,
 *	symlinks and files step 1 counted under it (and name no other key);
 *	with one key, say that no rekey is left unfinished; with two, print
 *	both commands (from Kx to Ky and back), and say that a rekey was
 *	interrupted if step 2 met an EPERM boundary;
 *   3. unmounted: `btrfs check --readonly` must be clean;
 *   4. only with a rekey in flight: mounted again, the same rekey (Kx to
 *	Ky) must return 0 having moved exactly the directories (with their
 *	names), symlinks and files step 1 found under Kx; then steps 1 and 2
 *	again with only Ky allowed (no EPERM anywhere now; files left in
 *	step 2 are compared now); the same rekey once more must return 0 and
 *	move nothing; `btrfs check` again.  Without a rekey in flight (and
 *	after at least one committed), the last committed rekey run again
 *	must return 0 and move nothing (step 2, before the unmount).
 * Every file the model requires must have been compared by the end; one
 * that was not counts as lost.
 *
 * Redo: "work" first redoes the operation the previous cut left in flight,
 * from its intent (a write or create again, an unlink finished, the rekey
 * run again: after the verifier's rerun it moves nothing), and commits it,
 * so that the model is exact again before the loop starts.
 *
 * Counted: bytes checked (writer files' and static files' model sizes) and
 * lost, bytes found wrong beyond a file's fsynced size, writer files with
 * compressed extents (FIEMAP) and with extents of both keys (their extent
 * contexts, TREE_SEARCH), durable clones, other errors, the
 * errors of `btrfs check`; rekeys durable and in flight; inodes under the
 * old and the new key at the cut, the EPERM boundaries met, what the rerun
 * moved.  The verifier's last line, "powercut-verify: key=value ...", is
 * what the host reads (the keys of tests/run-powercut.sh, and more).
 *
 * Controls: every verify flips one byte of a file's model where the disk
 * agreed with it and must then count exactly one more lost byte (else the
 * comparison is blind and the verify fails).  With --self-check, one byte
 * (a content seed) of the last committed write (or create) record is
 * changed after the log is read: the verifier must report lost bytes and
 * fail.
 *
 * What a kill is here: QEMU dies; what the guest had submitted and QEMU
 * had completed is in the image files (cache=none), flushed or not.  A disk
 * that loses its volatile write cache at a power cut would lose more; this
 * test does not model that.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (no btrfs encryption, no per-extent
 * keys, no rekey ioctl, or no patched btrfs-progs in the image).  "work"
 * does not end unless something failed.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "btrfs_raw.h"
#include "btrfs_rekey.h"
#include "fscrypt_fs.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"
#include "powercut.h"
#include "rawdev.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

/* BTRFS_IOC_FSCRYPT_REKEY's argument (tests/lib/btrfs_rekey.h) */
typedef struct btrfs_ioctl_fscrypt_rekey_args rp_rekey_args;

/* ---- constants ---------------------------------------------------------------- */

#define RP_DIRS			31		/* enc, its 5 children, 5 below each */
#define RP_TOPS			5
#define RP_SUBS			5
#define RP_NFILE		14		/* static files per directory */
#define RP_NLINK		4		/* symlinks per directory */
#define RP_NENT			(RP_NFILE + RP_NLINK)
#define RP_STATIC		(RP_DIRS * RP_NENT)
#define RP_STATIC_FMAX		6000u
#define RP_TARGET_MAX		200
#define RP_WFILES		6		/* writer files live at a time */
#define RP_MAX_IDS		65536u
#define RP_FMAX			(256u * 1024)	/* no writer file grows beyond this */
#define RP_CREATE_MIN		(8u * 1024)
#define RP_CREATE_MAX		(64u * 1024)
#define RP_PIECE_MAX		(16u * 1024)
#define RP_MAX_PIECES		3
#define RP_PROGRESS_MS		2000
#define RP_BUSY_TRIES		50
#define RP_REC_MAGIC		0x31524b52u	/* "RKR1" */
#define RP_HDR_MAGIC		0x31484b52u	/* "RKH1" */
#define RP_HDR_VERSION		2		/* 2: clones, compressible writer data */
#define RP_KEY_SEED1		0x52504b31u
#define RP_KEY_SEED2		0x52504b32u
/* the inode context, version 2 (fs/crypto: struct fscrypt_context_v2) */
#define RP_CTX_SIZE		40
#define RP_CTX_V2		2
#define RP_CTX_FLAGS_OFF	3
#define RP_CTX_ID_OFF		8
#define RP_CTX_NONCE_OFF	24
#define RP_ROOT_DIR_INO		256
/* struct btrfs_dir_item: its size, and where its fields are */
#define RP_DI_SIZE		30
#define RP_DI_NAME_LEN_OFF	27
#define RP_DI_DATA_LEN_OFF	25
#define RP_DI_TYPE_OFF		29
/* struct btrfs_inode_ref */
#define RP_IREF_SIZE		10
/* the inline data of a file extent item starts after its 21-byte head */
#define RP_FE_INLINE_OFF	21
#define RP_FE_TYPE_OFF		20

_Static_assert(sizeof(struct btrfs_dir_item) == RP_DI_SIZE, "btrfs_dir_item is not 30 bytes");
_Static_assert(sizeof(struct btrfs_inode_ref) == RP_IREF_SIZE, "btrfs_inode_ref is not 10 bytes");
_Static_assert(offsetof(struct btrfs_file_extent_item, disk_bytenr) == RP_FE_INLINE_OFF,
	       "the inline data of btrfs_file_extent_item moved");

enum rp_op {
	RP_OP_CREATE = 1,	/* file, dir, size, seed */
	RP_OP_WRITE,		/* file, pieces (off, len, content seed) */
	RP_OP_UNLINK,		/* file, dir */
	RP_OP_REKEY,		/* from, to (1 or 2); commit: the counts */
	RP_OP_CLONE,		/* file, dir (destination) <- file2, dir2; one piece:
				 * destination offset, length, seed = source offset */
	RP_OP_MAX
};

static const char *const rp_op_name[RP_OP_MAX] = {
	"?", "create", "write", "unlink", "rekey", "clone",
};

#define RP_F_DATASYNC		1u	/* write batch: fdatasync, not fsync */

struct rp_piece {
	uint32_t off, len, seed;
};

/* A log record as it is in its sector (the rest of the sector is 0). */
struct rp_rec {
	PCUT_REC_HEAD;		/* magic RP_REC_MAGIC */
	uint16_t op;		/* intent: enum rp_op */
	int32_t result;		/* commit: 0 done */
	uint32_t file, dir, size, seed;
	uint32_t flags, npieces;
	uint32_t from, to;	/* rekey: key numbers */
	uint32_t file2, dir2;	/* clone: the source */
	uint64_t nr[4];		/* commit of a rekey: dirs, names, symlinks, files */
	struct rp_piece p[RP_MAX_PIECES];
};

struct rp_hdr {
	PCUT_HDR_HEAD;		/* magic RP_HDR_MAGIC */
	uint64_t tree_seed;
	uint8_t id[3][FSCRYPT_KEY_IDENTIFIER_SIZE];	/* [1], [2]: K1, K2 */
};

_Static_assert(sizeof(struct rp_rec) <= PCUT_SECTOR, "a record must fit a sector");
_Static_assert(sizeof(struct rp_hdr) <= PCUT_SECTOR, "the header must fit a sector");

static struct pcut_log plog = PCUT_LOG_INIT(RP_HDR_MAGIC, RP_HDR_VERSION, RP_REC_MAGIC,
					    struct rp_hdr, struct rp_rec);

static const char *dev, *dev2, *mnt;
static char sv_path[PATH_MAX], enc_path[PATH_MAX];
static uint8_t mk[3][LAB_MASTER_KEY_SIZE];
static uint8_t ids[3][FSCRYPT_KEY_IDENTIFIER_SIZE];
static const uint32_t key_seed[3] = { 0, RP_KEY_SEED1, RP_KEY_SEED2 };

/* ---- small helpers -------------------------------------------------------------- */

/* 1 or 2 if @id is K1 or K2; 0 if another key. */
static int key_of(const uint8_t *id)
{
	return lab_rekey_key_index(id, ids, 2);
}

/* The raw keys and their identifiers (the header's must be these). */
static void rp_keys_init(void)
{
	int k;

	for (k = 1; k <= 2; k++) {
		lab_master_key(mk[k], key_seed[k]);
		if (fref_key_identifier(mk[k], sizeof(mk[k]), ids[k]))
			lab_die("the reference key identifier of K%d", k);
	}
}

/* Add K1 and K2 to the filesystem on @mnt; 0, or -1 (message printed). */
static int rp_add_keys(void)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	int k;

	for (k = 1; k <= 2; k++) {
		if (lab_add_key(mnt, key_seed[k], id)) {
			printf("powercut: adding K%d: " LAB_ERR_FMT "\n", k, LAB_ERR_ARGS(errno));
			return -1;
		}
		if (memcmp(id, ids[k], sizeof(id))) {
			printf("powercut: K%d's identifier from the kernel is not the reference one\n", k);
			return -1;
		}
	}
	return 0;
}

/* ---- the static tree -------------------------------------------------------------- */

enum { RP_DIR = 'd', RP_REG = 'f', RP_LNK = 'l' };

struct rp_node {
	char name[NAME_MAX + 1];
	char target[RP_TARGET_MAX + 1];	/* RP_LNK */
	int dir;			/* the directory holding it; -1: enc itself */
	char type;
	uint32_t size, seed;		/* RP_REG */
};

static struct rp_node rdir[RP_DIRS], rent[RP_STATIC];

static const uint8_t rp_name_lens[] = {
	3, 4, 7, 12, 15, 16, 17, 23, 31, 32, 33, 47, 48, 63, 64, 65, 100, 128,
	200, 254, 255,
};
static const uint8_t rp_wname_lens[] = { 8, 16, 17, 40, 64, 100, 180, 255 };
static const uint8_t rp_target_lens[] = { 1, 2, 15, 16, 17, 33, 64, 100, 150, 200 };
static const char rp_name_chars[] =
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.";
static const char rp_target_chars[] =
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./";

#define RP_NLENS(a) (sizeof(a) / sizeof((a)[0]))

/* @prefix, then characters of @chars to @len bytes, a function of the seeds. */
static void rp_make_str(char *out, size_t len, const char *prefix, const char *chars,
			uint64_t tseed, uint64_t salt)
{
	uint64_t s = tseed ^ (salt * 0x9e3779b97f4a7c15ULL);
	size_t i = strlen(prefix), nchars = strlen(chars);

	memcpy(out, prefix, i);
	for (; i < len; i++)
		out[i] = chars[lab_splitmix64(&s) % nchars];
	out[len > i ? len : i] = '\0';
}

static int rp_dir_parent(int k)
{
	if (k == 0)
		return -1;
	if (k <= RP_TOPS)
		return 0;
	return 1 + (k - 1 - RP_TOPS) / RP_SUBS;
}

static void rp_tree_make(uint64_t tseed)
{
	char prefix[16];
	uint64_t s;
	int k, j, e;

	memset(rdir, 0, sizeof(rdir));
	memset(rent, 0, sizeof(rent));
	for (k = 0; k < RP_DIRS; k++) {
		rdir[k].type = RP_DIR;
		rdir[k].dir = rp_dir_parent(k);
		if (k) {
			snprintf(prefix, sizeof(prefix), "d%02d", k);
			rp_make_str(rdir[k].name, rp_name_lens[(k * 5) % RP_NLENS(rp_name_lens)],
				    prefix, rp_name_chars, tseed, (uint64_t)RP_DIR << 40 | (uint64_t)k);
		} else {
			snprintf(rdir[k].name, sizeof(rdir[k].name), "enc");
		}
		for (j = 0; j < RP_NENT; j++) {
			struct rp_node *n = &rent[k * RP_NENT + j];

			e = k * RP_NENT + j;
			n->dir = k;
			if (j < RP_NFILE) {
				n->type = RP_REG;
				snprintf(prefix, sizeof(prefix), "f%02d", j);
				s = tseed ^ ((uint64_t)e << 20) ^ 0xf11e;
				n->size = j % 5 == 0 ? 0 :
					  1 + (uint32_t)(lab_splitmix64(&s) % RP_STATIC_FMAX);
				n->seed = (uint32_t)lab_splitmix64(&s);
			} else {
				n->type = RP_LNK;
				snprintf(prefix, sizeof(prefix), "l%02d", j);
				rp_make_str(n->target,
					    rp_target_lens[(k + j) % RP_NLENS(rp_target_lens)], "",
					    rp_target_chars, tseed, (uint64_t)RP_LNK << 48 | (uint64_t)e);
			}
			rp_make_str(n->name, rp_name_lens[(k * 7 + j * 3) % RP_NLENS(rp_name_lens)],
				    prefix, rp_name_chars, tseed,
				    (uint64_t)n->type << 40 | (uint64_t)k << 20 | (uint64_t)j);
		}
	}
}

static void rp_dir_path(int k, char *out, size_t size)
{
	char p[PATH_MAX];

	if (k == 0) {
		lab_pathf(out, size, "%s", enc_path);
		return;
	}
	rp_dir_path(rdir[k].dir, p, sizeof(p));
	lab_pathf(out, size, "%s/%s", p, rdir[k].name);
}

static void rp_ent_path(int e, char *out, size_t size)
{
	char p[PATH_MAX];

	rp_dir_path(rent[e].dir, p, sizeof(p));
	lab_pathf(out, size, "%s/%s", p, rent[e].name);
}

static uint64_t tree_seed;

/* The name of writer file @id. */
static void rp_wname(char *out, size_t size, uint32_t id)
{
	char prefix[16];
	size_t len = rp_wname_lens[id % RP_NLENS(rp_wname_lens)];

	snprintf(prefix, sizeof(prefix), "w%u-", id);
	if (len < strlen(prefix))
		len = strlen(prefix);
	if (len >= size)
		lab_die("writer name of %zu bytes", len);
	rp_make_str(out, len, prefix, rp_name_chars, tree_seed, (uint64_t)'w' << 40 | id);
}

static void rp_wpath(uint32_t dir, uint32_t id, char *out, size_t size)
{
	char p[PATH_MAX], name[NAME_MAX + 1];

	rp_dir_path((int)dir, p, sizeof(p));
	rp_wname(name, sizeof(name), id);
	lab_pathf(out, size, "%s/%s", p, name);
}

/* What the log on the second disk holds. */
struct rp_log {
	struct rp_hdr hdr;
	struct rp_rec *r;	/* the valid records of this run, in slot order */
	struct pcut_log_scan scan;
};

/* ---- the model: what the log says is durable ------------------------------------------- */

enum { RP_NONE, RP_LIVE, RP_GONE };

struct rp_file {
	int state;
	uint32_t dir, size;
	unsigned char *m;		/* RP_FMAX bytes, 0 beyond size */
	const struct rp_rec *pending;	/* the operation in flight on it */
	/* verify */
	uint64_t ino;
	int key, found, checked;
};

struct rp_model {
	struct rp_file *f[RP_MAX_IDS];
	struct pcut_replay replay;	/* intents (struct rp_rec) and commits */
	uint32_t next_id;
	uint64_t bad;
	uint64_t ops[RP_OP_MAX];
	int key;			/* K1 or K2: the "to" of the last durable rekey */
	const struct rp_rec *rekey;	/* the rekey in flight, if any */
	const struct rp_rec *last_rekey;	/* the last durable one */
	const struct rp_rec *inflight;	/* the operation in flight, if any */
};

/* A log error (pcut_log_error()) about record @rec; also the replay's. */
/*
 * The contents of writer files (creates and writes): the seed's pattern
 * made to compress (the second half of each 256 bytes zero, the first half
 * letters of a 16-letter alphabet, so that btrfs's heuristic, which samples
 * the start of every 256 bytes, takes it for compressible).  The workload
 * mounts with compress=zstd where the kernel compresses encrypted files,
 * so that cuts meet compressed encrypted extents written under either key;
 * the verifier fills the same bytes.  The static tree keeps fill_pattern().
 */
static void rp_fill(void *buf, size_t len, uint32_t seed)
{
	unsigned char *b = buf;
	size_t i;

	fill_pattern(buf, len, seed);
	for (i = 0; i < len; i++)
		b[i] = i % 256 < 128 ? (unsigned char)('a' + (b[i] & 15)) : 0;
}

static void rp_bad(void *model, const void *rec, const char *why)
{
	struct rp_model *md = model;
	const struct rp_rec *r = rec;

	pcut_log_error(&md->bad, r, r->op, r->file, why);
}

static int rp_intent_ok(const struct rp_rec *r)
{
	uint32_t i;

	if (r->op == 0 || r->op >= RP_OP_MAX)
		return 0;
	if (r->op == RP_OP_REKEY)
		return (r->from == 1 || r->from == 2) && r->to == 3 - r->from;
	if (r->file >= RP_MAX_IDS || r->dir >= RP_DIRS)
		return 0;
	switch (r->op) {
	case RP_OP_CREATE:
		return r->size <= RP_FMAX;
	case RP_OP_WRITE:
		if (r->npieces < 1 || r->npieces > RP_MAX_PIECES)
			return 0;
		for (i = 0; i < r->npieces; i++)
			if (!r->p[i].len || r->p[i].len > RP_FMAX ||
			    r->p[i].off > RP_FMAX - r->p[i].len)
				return 0;
		return 1;
	case RP_OP_CLONE:
		return r->file2 < RP_MAX_IDS && r->dir2 < RP_DIRS && r->npieces == 1 &&
		       r->p[0].len && r->p[0].len <= RP_FMAX &&
		       r->p[0].off <= RP_FMAX - r->p[0].len &&
		       r->p[0].seed <= RP_FMAX - r->p[0].len;
	default:
		return 1;
	}
}

static struct rp_file *rp_file_get(struct rp_model *md, uint32_t id)
{
	if (!md->f[id]) {
		md->f[id] = calloc(1, sizeof(*md->f[id]));
		if (!md->f[id])
			lab_die("out of memory");
	}
	return md->f[id];
}

static struct rp_file *rp_live(const struct rp_model *md, uint32_t id)
{
	return md->f[id] && md->f[id]->state == RP_LIVE ? md->f[id] : NULL;
}

/* Apply the committed operation @r. */
static void rp_apply(struct rp_model *md, const struct rp_rec *r)
{
	struct rp_file *f;
	uint32_t i, end;

	switch (r->op) {
	case RP_OP_CREATE:
		f = rp_file_get(md, r->file);
		if (f->state != RP_NONE)
			return rp_bad(md, r, "file id created twice");
		f->state = RP_LIVE;
		f->dir = r->dir;
		f->size = r->size;
		f->m = calloc(1, RP_FMAX);
		if (!f->m)
			lab_die("out of memory");
		rp_fill(f->m, r->size, r->seed);
		break;
	case RP_OP_CLONE: {
		const struct rp_file *src = rp_live(md, r->file2);

		f = rp_live(md, r->file);
		if (!f || !src)
			return rp_bad(md, r, "clone between files that do not exist");
		memmove(f->m + r->p[0].off, src->m + r->p[0].seed, r->p[0].len);
		end = r->p[0].off + r->p[0].len;
		if (end > f->size)
			f->size = end;
		break;
	}
	case RP_OP_WRITE:
		f = rp_live(md, r->file);
		if (!f)
			return rp_bad(md, r, "write to a file that does not exist");
		for (i = 0; i < r->npieces; i++) {
			rp_fill(f->m + r->p[i].off, r->p[i].len, r->p[i].seed);
			end = r->p[i].off + r->p[i].len;
			if (end > f->size)
				f->size = end;
		}
		break;
	case RP_OP_UNLINK:
		f = rp_live(md, r->file);
		if (!f || f->dir != r->dir)
			return rp_bad(md, r, "unlink of a file that does not exist");
		f->state = RP_GONE;
		free(f->m);
		f->m = NULL;
		break;
	case RP_OP_REKEY:
		if ((int)r->from != md->key)
			return rp_bad(md, r, "rekey from a key the subvolume was not under");
		md->key = (int)r->to;
		md->last_rekey = r;
		break;
	}
	md->ops[r->op]++;
}

/* The replay of the log into the model (pcut_replay()), step by step. */
static int rp_replay_intent(void *ctx, const void *rec)
{
	struct rp_model *md = ctx;
	const struct rp_rec *r = rec;

	if (!rp_intent_ok(r))
		return 0;
	if (r->op == RP_OP_CREATE) {
		if (r->file + 1 > md->next_id)
			md->next_id = r->file + 1;
		rp_file_get(md, r->file);
	}
	return 1;
}

static int rp_replay_commit(void *ctx, const void *intent, const void *commit)
{
	const struct rp_rec *c = commit;

	if (c->result)
		return 0;
	rp_apply(ctx, intent);
	return 1;
}

/* In flight: one operation at most (one process). */
static void rp_replay_inflight(void *ctx, const void *intent)
{
	struct rp_model *md = ctx;
	const struct rp_rec *in = intent;

	if (md->replay.pending > 1)
		rp_bad(md, in, "a second operation in flight: the loop is sequential");
	md->inflight = in;
	if (in->op == RP_OP_REKEY) {
		if ((int)in->from != md->key)
			rp_bad(md, in, "rekey in flight from a key the subvolume was not under");
		md->rekey = in;
		return;
	}
	rp_file_get(md, in->file)->pending = in;
}

static void rp_model_build(struct rp_model *md, const struct rp_log *log)
{
	static const struct pcut_replay_ops ops = {
		.intent = rp_replay_intent,
		.commit = rp_replay_commit,
		.inflight = rp_replay_inflight,
		.bad = rp_bad,
	};

	memset(md, 0, sizeof(*md));
	md->key = 1;
	pcut_replay(&plog, log->r, log->scan.n, log->scan.end, &md->replay, &ops, md);
}

static void rp_model_free(struct rp_model *md)
{
	uint32_t i;

	for (i = 0; i < RP_MAX_IDS; i++) {
		if (md->f[i])
			free(md->f[i]->m);
		free(md->f[i]);
	}
	pcut_replay_free(&md->replay);
	memset(md, 0, sizeof(*md));
}

/* ---- the rekey ---------------------------------------------------------------------- */

/*
 * BTRFS_IOC_FSCRYPT_REKEY of sv from K@from to K@to, "to" being sv/enc's
 * policy with the other key.  EBUSY (an inode still held) is retried after
 * a syncfs, counted in *@busy.  0, or -errno (*@why says what failed).
 */
static int rp_rekey(int from, int to, rp_rekey_args *a, long *busy, const char **why)
{
	struct fscrypt_get_policy_ex_arg pol;
	struct fscrypt_policy_v2 def;
	int fd, r, e, tries;

	*why = "FS_IOC_GET_ENCRYPTION_POLICY_EX of sv/enc";
	if (lab_get_policy_ex(enc_path, &pol))
		return -errno;
	*why = "sv/enc's policy is not the default v2 policy of K1 or K2";
	if (pol.policy.version != FSCRYPT_POLICY_V2 || pol.policy_size != sizeof(def))
		return -EPROTO;
	lab_default_policy(&def, pol.policy.v2.master_key_identifier);
	if (memcmp(&def, &pol.policy.v2, sizeof(def)) ||
	    !key_of(pol.policy.v2.master_key_identifier))
		return -EPROTO;
	/* that policy with the key K@to: the default one of K@to */
	lab_default_policy(&def, ids[to]);
	lab_rekey_args(a, "sv", ids[from], &def);
	*why = "open the top directory";
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*why = "BTRFS_IOC_FSCRYPT_REKEY";
	for (tries = 0;; tries++) {
		r = ioctl(fd, BTRFS_IOC_FSCRYPT_REKEY, a);
		if (r == 0 || errno != EBUSY || tries >= RP_BUSY_TRIES)
			break;
		(*busy)++;
		if (syncfs(fd))
			break;
		lab_sleep_ms(100);
	}
	e = errno;
	close(fd);
	return r ? -e : 0;
}

/* ---- verify: the names a directory may hold ------------------------------------------------ */

enum { RP_W_DIR, RP_W_ENT, RP_W_FILE };

struct rp_want {
	char name[NAME_MAX + 1];
	size_t len;
	int kind;		/* RP_W_* */
	uint32_t idx;		/* directory, static entry, or writer file id */
	char type;		/* RP_DIR, RP_REG, RP_LNK */
	int optional;
	uint8_t ct[3][FREF_NAME_MAX];	/* [1], [2]: under K1, K2 */
	size_t ctlen[3];
	int on_disk, listed;
};

/* The names directory @k holds or may hold. */
static struct rp_want *rp_wants(const struct rp_model *md, int k, size_t *n)
{
	struct rp_want *w = NULL;
	const struct rp_file *f;
	size_t cnt = 0, cap = 0;
	uint32_t i;
	int j;

#define RP_WANT_ADD() do {							\
		if (cnt == cap) {						\
			cap = cap ? 2 * cap : 64;				\
			w = realloc(w, cap * sizeof(*w));			\
			if (!w)							\
				lab_die("out of memory");			\
		}								\
		memset(&w[cnt], 0, sizeof(w[cnt]));				\
	} while (0)

	for (j = 1; j < RP_DIRS; j++) {
		if (rdir[j].dir != k)
			continue;
		RP_WANT_ADD();
		snprintf(w[cnt].name, sizeof(w[cnt].name), "%s", rdir[j].name);
		w[cnt].kind = RP_W_DIR;
		w[cnt].idx = (uint32_t)j;
		w[cnt].type = RP_DIR;
		cnt++;
	}
	for (j = 0; j < RP_NENT; j++) {
		RP_WANT_ADD();
		snprintf(w[cnt].name, sizeof(w[cnt].name), "%s", rent[k * RP_NENT + j].name);
		w[cnt].kind = RP_W_ENT;
		w[cnt].idx = (uint32_t)(k * RP_NENT + j);
		w[cnt].type = rent[k * RP_NENT + j].type;
		cnt++;
	}
	for (i = 0; i < md->next_id; i++) {
		f = md->f[i];
		if (!f)
			continue;
		if (f->state == RP_LIVE && f->dir == (uint32_t)k) {
			RP_WANT_ADD();
			w[cnt].optional = f->pending && f->pending->op == RP_OP_UNLINK;
		} else if (f->state != RP_LIVE && f->pending &&
			   f->pending->op == RP_OP_CREATE && f->pending->dir == (uint32_t)k) {
			RP_WANT_ADD();
			w[cnt].optional = 1;
		} else {
			continue;
		}
		rp_wname(w[cnt].name, sizeof(w[cnt].name), i);
		w[cnt].kind = RP_W_FILE;
		w[cnt].idx = i;
		w[cnt].type = RP_REG;
		cnt++;
	}
#undef RP_WANT_ADD
	for (i = 0; i < cnt; i++)
		w[i].len = strlen(w[i].name);
	*n = cnt;
	return w;
}

/* ---- verify: statistics and errors ----------------------------------------------------------- */

struct rp_stats {
	uint64_t checked, checked_static, lost, wrong, errors;
	uint64_t files, sfiles, eperm;
	uint64_t two_keys;	/* writer files with extents of K1 and K2 */
	uint64_t compressed;	/* writer files with compressed extents */
	int control_done;
};

static LAB_PRINTF(2, 3) void rp_err(struct rp_stats *st, const char *fmt, ...)
{
	va_list ap;

	st->errors++;
	if (st->errors > 60)
		return;
	printf("powercut: FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* ---- verify: the subvolume on disk ------------------------------------------------------------ */

/* What the on-disk walk found: where each node is, under which key. */
static uint64_t sdir_ino[RP_DIRS], sent_ino[RP_STATIC];
static int sdir_key[RP_DIRS], sent_key[RP_STATIC];
static uint32_t sdir_names[RP_DIRS];
static int sent_checked[RP_STATIC];

struct rp_walk {
	int allowed;		/* mask of the keys an inode may be under */
	int phase;		/* 1: at the cut; 2: after the rerun */
	uint64_t dirs[3], names[3], syms[3], files[3];	/* per key */
};

static const char *rp_allowed_str(int allowed)
{
	switch (allowed) {
	case 1 << 1: return "K1";
	case 1 << 2: return "K2";
	default: return "K1 or K2";
	}
}

/*
 * The context item of inode @ino: the key it names (1, 2; 0 another), its
 * nonce and policy flags.  -1 if there is no valid one (reported).
 */
static int rp_ctx(struct rp_stats *st, uint64_t ino, const char *what,
		  uint8_t nonce[FREF_NONCE_SIZE], uint8_t *flags)
{
	struct lab_btrfs_item *it = NULL;
	size_t n = 0;
	int k = -1;

	if (lab_btrfs_search(sv_path, ino, LAB_BTRFS_FSCRYPT_INODE_CTX_KEY, &it, &n)) {
		rp_err(st, "%s (ino %llu): searching its context item: " LAB_ERR_FMT, what,
		       (unsigned long long)ino, LAB_ERR_ARGS(errno));
		return -1;
	}
	if (n != 1 || it[0].len != RP_CTX_SIZE || it[0].data[0] != RP_CTX_V2) {
		rp_err(st, "%s (ino %llu): %zu context items, the first of %u bytes, version %u; expected one v2 context of %d bytes",
		       what, (unsigned long long)ino, n, n ? it[0].len : 0,
		       n && it[0].len ? it[0].data[0] : 0, RP_CTX_SIZE);
	} else {
		k = key_of(it[0].data + RP_CTX_ID_OFF);
		memcpy(nonce, it[0].data + RP_CTX_NONCE_OFF, FREF_NONCE_SIZE);
		*flags = it[0].data[RP_CTX_FLAGS_OFF];
	}
	lab_btrfs_items_free(it, n);
	return k;
}

/*
 * Is inode @ino under an allowed key?  Its key (1 or 2, also when not
 * allowed: reported, and the walk goes on under it), or -1 if it has no
 * valid context or names another key.
 */
static int rp_disk_key(struct rp_stats *st, struct rp_walk *w, uint64_t ino,
		       const char *what, uint8_t nonce[FREF_NONCE_SIZE], uint8_t *flags)
{
	int k = rp_ctx(st, ino, what, nonce, flags);

	if (k < 0)
		return -1;
	if (k == 0 || !(w->allowed & (1 << k)))
		rp_err(st, "%s (ino %llu): its context names %s; the log allows %s%s", what,
		       (unsigned long long)ino, k ? (k == 1 ? "K1" : "K2") : "another key",
		       rp_allowed_str(w->allowed),
		       w->phase == 2 ? " after the rerun of the rekey" : "");
	return k ? k : -1;
}

/* The symlink entry @e (ino @ino): its inline target under its context's key. */
static void rp_disk_symlink(struct rp_stats *st, struct rp_walk *w, int e, uint64_t ino)
{
	uint8_t nonce[FREF_NONCE_SIZE], skey[FREF_CTS_KEY_SIZE], ct[FREF_NAME_MAX], flags = 0;
	struct lab_btrfs_item *it = NULL;
	const char *target = rent[e].target;
	size_t n = 0, ctlen = 0, tlen = strlen(target);
	const unsigned char *d;
	char what[96];
	int k, other;

	snprintf(what, sizeof(what), "symlink %.24s of directory %d", rent[e].name, rent[e].dir);
	k = rp_disk_key(st, w, ino, what, nonce, &flags);
	sent_key[e] = k;
	if (k < 1)
		return;
	w->syms[k]++;
	if (lab_btrfs_search(sv_path, ino, BTRFS_EXTENT_DATA_KEY, &it, &n)) {
		rp_err(st, "%s: searching its extent items: " LAB_ERR_FMT, what,
		       LAB_ERR_ARGS(errno));
		return;
	}
	if (n != 1 || it[0].offset != 0 || it[0].len < RP_FE_INLINE_OFF + 2 ||
	    it[0].data[RP_FE_TYPE_OFF] != BTRFS_FILE_EXTENT_INLINE) {
		rp_err(st, "%s: %zu extent items, expected one inline extent at 0", what, n);
		goto out;
	}
	d = it[0].data + RP_FE_INLINE_OFF;
	for (other = 0; other < 2; other++) {
		int kk = other ? 3 - k : k;

		if (fref_per_file_key(mk[kk], sizeof(mk[kk]), nonce, skey, sizeof(skey)) ||
		    fref_encrypt_name(skey, target, tlen, flags, ct, &ctlen))
			lab_die("reference encryption of a symlink target failed");
		if (braw_le16(d) == ctlen && it[0].len >= RP_FE_INLINE_OFF + 2 + ctlen &&
		    !memcmp(d + 2, ct, ctlen))
			break;
	}
	if (other == 1)
		rp_err(st, "%s: its target is encrypted under K%d, its context names K%d (half moved)",
		       what, 3 - k, k);
	else if (other == 2)
		rp_err(st, "%s: its inline target (%u bytes of ciphertext) is not the model's target (%zu bytes) under either key",
		       what, braw_le16(d), tlen);
out:
	lab_btrfs_items_free(it, n);
}

/* Does inode @child's INODE_REF in directory @dir carry the name @name? */
static int rp_iref_has(uint64_t child, uint64_t dir, const uint8_t *name, size_t len)
{
	struct lab_btrfs_item *it = NULL;
	size_t n = 0, i, pos, nl;
	int found = 0;

	if (lab_btrfs_search(sv_path, child, BTRFS_INODE_REF_KEY, &it, &n))
		return -1;
	for (i = 0; i < n && !found; i++) {
		if (it[i].offset != dir)
			continue;
		for (pos = 0; pos + RP_IREF_SIZE <= it[i].len; pos += RP_IREF_SIZE + nl) {
			nl = braw_le16(it[i].data + pos + 8);
			if (pos + RP_IREF_SIZE + nl > it[i].len)
				break;
			if (nl == len && !memcmp(it[i].data + pos + RP_IREF_SIZE, name, len))
				found = 1;
		}
	}
	lab_btrfs_items_free(it, n);
	return found;
}

static void rp_disk_dir(struct rp_stats *st, struct rp_walk *w, struct rp_model *md,
			int k, uint64_t ino);

/* A child @wt of directory @k found on disk as inode @ino. */
static void rp_disk_child(struct rp_stats *st, struct rp_walk *w, struct rp_model *md,
			  int k, const struct rp_want *wt, uint64_t ino)
{
	uint8_t nonce[FREF_NONCE_SIZE], flags;
	struct rp_file *f;
	char what[96];
	int key;

	switch (wt->kind) {
	case RP_W_DIR:
		rp_disk_dir(st, w, md, (int)wt->idx, ino);
		break;
	case RP_W_ENT:
		sent_ino[wt->idx] = ino;
		if (wt->type == RP_LNK) {
			rp_disk_symlink(st, w, (int)wt->idx, ino);
			break;
		}
		snprintf(what, sizeof(what), "static file %.24s of directory %d", wt->name, k);
		key = rp_disk_key(st, w, ino, what, nonce, &flags);
		sent_key[wt->idx] = key;
		if (key > 0)
			w->files[key]++;
		break;
	case RP_W_FILE:
		f = md->f[wt->idx];
		snprintf(what, sizeof(what), "writer file %u in directory %d", wt->idx, k);
		key = rp_disk_key(st, w, ino, what, nonce, &flags);
		f->ino = ino;
		f->key = key;
		f->found = 1;
		if (key > 0)
			w->files[key]++;
		break;
	}
}

/*
 * Directory @k, inode @ino, on disk: its context key; its DIR_INDEX names
 * are the model's names under that key (and under it only), its DIR_ITEM
 * names the same, each child's INODE_REF the same; then its children.
 */
static void rp_disk_dir(struct rp_stats *st, struct rp_walk *w, struct rp_model *md,
			int k, uint64_t ino)
{
	uint8_t nonce[FREF_NONCE_SIZE], dkey[3][FREF_CTS_KEY_SIZE], flags = 0;
	struct lab_btrfs_item *idx = NULL, *items = NULL;
	size_t nw = 0, ni = 0, nitems = 0, i, j, pos, nl, ndi = 0;
	struct rp_want *wt;
	uint64_t *child;
	const unsigned char *d;
	char what[64];
	int key, kk, other;

	sdir_ino[k] = ino;
	snprintf(what, sizeof(what), "directory %d (%.24s%s)", k, rdir[k].name,
		 strlen(rdir[k].name) > 24 ? "..." : "");
	key = rp_disk_key(st, w, ino, what, nonce, &flags);
	sdir_key[k] = key;
	if (key < 1)
		return;
	w->dirs[key]++;
	wt = rp_wants(md, k, &nw);
	child = calloc(nw ? nw : 1, sizeof(*child));
	if (!child)
		lab_die("out of memory");
	for (kk = 1; kk <= 2; kk++)
		if (fref_per_file_key(mk[kk], sizeof(mk[kk]), nonce, dkey[kk], sizeof(dkey[kk])))
			lab_die("reference key derivation failed");
	for (i = 0; i < nw; i++)
		for (kk = 1; kk <= 2; kk++)
			if (fref_encrypt_name(dkey[kk], wt[i].name, wt[i].len, flags,
					      wt[i].ct[kk], &wt[i].ctlen[kk]))
				lab_die("reference name encryption failed");

	if (lab_btrfs_search(sv_path, ino, BTRFS_DIR_INDEX_KEY, &idx, &ni)) {
		rp_err(st, "%s: searching its DIR_INDEX items: " LAB_ERR_FMT, what,
		       LAB_ERR_ARGS(errno));
		goto out;
	}
	sdir_names[k] = (uint32_t)ni;
	w->names[key] += ni;
	for (i = 0; i < ni; i++) {
		if (idx[i].len < RP_DI_SIZE) {
			rp_err(st, "%s: a DIR_INDEX item of %u bytes", what, idx[i].len);
			continue;
		}
		d = idx[i].data;
		nl = braw_le16(d + RP_DI_NAME_LEN_OFF);
		if (RP_DI_SIZE + nl + braw_le16(d + RP_DI_DATA_LEN_OFF) > idx[i].len) {
			rp_err(st, "%s: a DIR_INDEX item of %u bytes with a %zu-byte name", what,
			       idx[i].len, nl);
			continue;
		}
		for (other = 0; other < 2; other++) {
			kk = other ? 3 - key : key;
			for (j = 0; j < nw; j++)
				if (wt[j].ctlen[kk] == nl &&
				    !memcmp(wt[j].ct[kk], d + RP_DI_SIZE, nl))
					break;
			if (j < nw)
				break;
		}
		if (other == 2) {
			rp_err(st, "%s: DIR_INDEX %llu holds a %zu-byte name that is no name of the model under either key",
			       what, (unsigned long long)idx[i].offset, nl);
			continue;
		}
		if (other == 1) {
			rp_err(st, "%s: its context names K%d, but the name %.40s%s is encrypted under K%d (half moved)",
			       what, key, wt[j].name, wt[j].len > 40 ? "..." : "", 3 - key);
			wt[j].on_disk = -1;	/* there, but wrong: not "missing" too */
			continue;
		}
		if (wt[j].on_disk > 0) {
			rp_err(st, "%s: the name %.40s is there twice", what, wt[j].name);
			continue;
		}
		wt[j].on_disk = 1;
		child[j] = braw_le64(d);
		if ((d[RP_DI_TYPE_OFF] & 0x7f) !=
		    (wt[j].type == RP_DIR ? BTRFS_FT_DIR :
		     wt[j].type == RP_LNK ? BTRFS_FT_SYMLINK : BTRFS_FT_REG_FILE))
			rp_err(st, "%s: the entry %.40s has type %u", what, wt[j].name,
			       d[RP_DI_TYPE_OFF]);
	}
	for (j = 0; j < nw; j++)
		if (!wt[j].on_disk && !wt[j].optional)
			rp_err(st, "%s: no DIR_INDEX item for the name %.40s%s (%zu bytes)", what,
			       wt[j].name, wt[j].len > 40 ? "..." : "", wt[j].len);

	/* DIR_ITEMs: the same names (several may share an item). */
	if (lab_btrfs_search(sv_path, ino, BTRFS_DIR_ITEM_KEY, &items, &nitems)) {
		rp_err(st, "%s: searching its DIR_ITEM items: " LAB_ERR_FMT, what,
		       LAB_ERR_ARGS(errno));
	} else {
		for (i = 0; i < nitems; i++) {
			for (pos = 0; pos + RP_DI_SIZE <= items[i].len;
			     pos += RP_DI_SIZE + nl + braw_le16(d + RP_DI_DATA_LEN_OFF)) {
				d = items[i].data + pos;
				nl = braw_le16(d + RP_DI_NAME_LEN_OFF);
				if (pos + RP_DI_SIZE + nl > items[i].len) {
					rp_err(st, "%s: a DIR_ITEM item of %u bytes with a %zu-byte name at %zu",
					       what, items[i].len, nl, pos);
					break;
				}
				ndi++;
				for (j = 0; j < nw; j++)
					if (wt[j].on_disk > 0 && wt[j].ctlen[key] == nl &&
					    !memcmp(wt[j].ct[key], d + RP_DI_SIZE, nl))
						break;
				if (j == nw)
					rp_err(st, "%s: a DIR_ITEM name (%zu bytes) that no DIR_INDEX item has under K%d",
					       what, nl, key);
			}
		}
		if (ndi != ni)
			rp_err(st, "%s: %zu DIR_ITEM names, %zu DIR_INDEX items", what, ndi, ni);
	}
	/* INODE_REFs, then the children themselves */
	for (j = 0; j < nw; j++) {
		if (wt[j].on_disk <= 0)
			continue;
		if (rp_iref_has(child[j], ino, wt[j].ct[key], wt[j].ctlen[key]) != 1)
			rp_err(st, "%s: the INODE_REF of %.40s (ino %llu) does not carry its name under K%d",
			       what, wt[j].name, (unsigned long long)child[j], key);
		rp_disk_child(st, w, md, k, &wt[j], child[j]);
	}
out:
	lab_btrfs_items_free(idx, ni);
	lab_btrfs_items_free(items, nitems);
	free(child);
	free(wt);
}

/* The key records of sv: K1 and K2 only, and every key in @need. */
static void rp_check_key_records(struct rp_stats *st, int need)
{
	struct lab_btrfs_item *it = NULL;
	size_t n = 0, i;
	int have = 0, k;

	if (lab_btrfs_search(sv_path, RP_ROOT_DIR_INO, LAB_BTRFS_FSCRYPT_KEY_ITEM_KEY, &it, &n)) {
		rp_err(st, "searching the key records of sv: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		return;
	}
	for (i = 0; i < n; i++) {
		if (it[i].len != LAB_BTRFS_FSCRYPT_KEY_ITEM_SIZE) {
			rp_err(st, "sv: a key record of %u bytes", it[i].len);
			continue;
		}
		k = key_of(it[i].data);
		if (!k)
			rp_err(st, "sv: a key record of a key that is neither K1 nor K2");
		else if (it[i].offset != braw_le64(it[i].data))
			rp_err(st, "sv: the key record of K%d is at offset %llu", k,
			       (unsigned long long)it[i].offset);
		have |= k ? 1 << k : 0;
	}
	lab_btrfs_items_free(it, n);
	for (k = 1; k <= 2; k++)
		if ((need & (1 << k)) && !(have & (1 << k)))
			rp_err(st, "sv: inodes are under K%d, but sv has no record of K%d", k, k);
	printf("powercut: sv records %s%s%s\n", have & 2 ? "K1" : "", have == 6 ? " and " : "",
	       have & 4 ? "K2" : "");
}

/* The on-disk walk from sv/enc. */
static int rp_disk_walk(struct rp_stats *st, struct rp_walk *w, struct rp_model *md)
{
	struct stat sb;
	uint64_t e0 = st->errors;
	uint32_t i;

	memset(sdir_ino, 0, sizeof(sdir_ino));
	memset(sent_ino, 0, sizeof(sent_ino));
	memset(sdir_names, 0, sizeof(sdir_names));
	for (i = 0; i < RP_DIRS; i++)
		sdir_key[i] = -1;
	for (i = 0; i < RP_STATIC; i++)
		sent_key[i] = -1;
	for (i = 0; i < md->next_id; i++)
		if (md->f[i]) {
			md->f[i]->found = 0;
			md->f[i]->key = -1;
		}
	if (stat(enc_path, &sb)) {
		rp_err(st, "stat %s: " LAB_ERR_FMT, enc_path, LAB_ERR_ARGS(errno));
		return -1;
	}
	rp_disk_dir(st, w, md, 0, sb.st_ino);
	rp_check_key_records(st, (w->dirs[1] + w->syms[1] + w->files[1] ? 2 : 0) |
				 (w->dirs[2] + w->syms[2] + w->files[2] ? 4 : 0));
	printf("powercut: on disk (%s): K1: %llu dirs (%llu names), %llu symlinks, %llu files; K2: %llu dirs (%llu names), %llu symlinks, %llu files; %llu errors\n",
	       w->phase == 1 ? "at the cut" : "after the rerun",
	       (unsigned long long)w->dirs[1], (unsigned long long)w->names[1],
	       (unsigned long long)w->syms[1], (unsigned long long)w->files[1],
	       (unsigned long long)w->dirs[2], (unsigned long long)w->names[2],
	       (unsigned long long)w->syms[2], (unsigned long long)w->files[2],
	       (unsigned long long)(st->errors - e0));
	return 0;
}

/* ---- verify: by path ---------------------------------------------------------------------------- */

/* What a file must look like. */
struct rp_view {
	char what[96];
	const unsigned char *m;		/* the model, at least size bytes */
	uint32_t size, max_size;
	struct pcut_cand cand[RP_MAX_PIECES];	/* of the write in flight */
	int ncand;
};

/* Compare the file at @path (opened already once: same key as its directory). */
static void rp_compare(struct rp_stats *st, struct rp_view *v, const char *path)
{
	uint64_t lost, wrong, first, b, lost2;
	unsigned char *got;
	size_t got_len;

	st->checked += v->size;
	got = read_file(path, &got_len);
	if (!got) {
		st->lost += v->size;
		rp_err(st, "%s: reading %s: " LAB_ERR_FMT ": %u fsynced bytes lost", v->what, path,
		       LAB_ERR_ARGS(errno), v->size);
		return;
	}
	if (got_len < v->size || got_len > v->max_size) {
		if (v->max_size > v->size)
			rp_err(st, "%s: size %zu, the log allows %u to %u", v->what, got_len,
			       v->size, v->max_size);
		else
			rp_err(st, "%s: size %zu, the log says %u", v->what, got_len, v->size);
	}
	lost = pcut_count_lost(v->m, v->size, got, got_len, v->cand, v->ncand, &wrong, &first);
	st->lost += lost;
	st->wrong += wrong;
	if (lost)
		rp_err(st, "%s (%s): %llu of %u fsynced bytes lost, the first at %llu (expected 0x%02x, got %s%02x)",
		       v->what, path, (unsigned long long)lost, v->size,
		       (unsigned long long)first, v->m[first], first < got_len ? "0x" : "EOF, ",
		       first < got_len ? got[first] : 0);
	if (wrong)
		rp_err(st, "%s: %llu bytes beyond the fsynced size %u are neither 0 nor in-flight data",
		       v->what, (unsigned long long)wrong, v->size);
	if (pcut_control(v->what, v->m, v->size, got, got_len, v->cand, v->ncand, lost,
			 &st->control_done, &b, &lost2) < 0)
		rp_err(st, PCUT_CONTROL_BLIND_FMT, v->what, (unsigned long long)b,
		       (unsigned long long)lost2, (unsigned long long)lost + 1);
	free(got);
}

/*
 * The master keys of @path's extents (TREE_SEARCH of its file extent items)
 * and whether it has compressed ones (FIEMAP): writer files with extents of
 * both keys (written before and after a rekey, or given by a clone) and
 * with compressed extents are counted.
 */
static void rp_count_keys(struct rp_stats *st, const char *path)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_fscrypt_extent_ctx c;
	struct raw_extent *ext = NULL;
	struct stat sb;
	size_t n = 0, i;
	int k[3] = { 0, 0, 0 }, comp = 0;

	if (!stat(path, &sb) && !lab_btrfs_file_extents(path, sb.st_ino, &fe, &n)) {
		for (i = 0; i < n; i++)
			if (fe[i].tail_len &&
			    !lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &c))
				k[key_of(c.key_id)] = 1;
		free(fe);
	}
	if (!raw_fiemap(path, &ext, &n)) {
		for (i = 0; i < n; i++)
			comp |= !!(ext[i].flags & FIEMAP_EXTENT_ENCODED);
		free(ext);
	}
	st->two_keys += k[1] && k[2];
	st->compressed += comp;
}

/* Writer file @id at @path against its model and its write in flight. */
static void rp_check_wfile(struct rp_stats *st, struct rp_model *md, uint32_t id,
			   const char *path)
{
	struct rp_file *f = md->f[id];
	const struct rp_rec *p = f->pending;
	struct rp_view v;
	uint32_t i, end;

	memset(&v, 0, sizeof(v));
	snprintf(v.what, sizeof(v.what), "writer file %u", id);
	v.m = f->m;
	v.size = v.max_size = f->size;
	if (p && p->op == RP_OP_WRITE) {
		for (i = 0; i < p->npieces; i++) {
			v.cand[v.ncand].off = p->p[i].off;
			v.cand[v.ncand].len = p->p[i].len;
			v.cand[v.ncand].data = lab_xmalloc(p->p[i].len);
			rp_fill(v.cand[v.ncand].data, p->p[i].len, p->p[i].seed);
			v.ncand++;
			end = p->p[i].off + p->p[i].len;
			if (end > v.max_size)
				v.max_size = end;
		}
	} else if (p && p->op == RP_OP_CLONE && rp_live(md, p->file2)) {
		v.cand[0].off = p->p[0].off;
		v.cand[0].len = p->p[0].len;
		v.cand[0].data = lab_xmalloc(p->p[0].len);
		memcpy(v.cand[0].data, md->f[p->file2]->m + p->p[0].seed, p->p[0].len);
		v.ncand = 1;
		end = p->p[0].off + p->p[0].len;
		if (end > v.max_size)
			v.max_size = end;
	}
	st->files++;
	rp_compare(st, &v, path);
	if (!f->checked)
		rp_count_keys(st, path);
	for (i = 0; i < (uint32_t)v.ncand; i++)
		free(v.cand[i].data);
	f->checked = 1;
}

static void rp_check_sfile(struct rp_stats *st, int e, const char *path)
{
	struct rp_view v;
	unsigned char *m = lab_pattern(rent[e].size ? rent[e].size : 1, rent[e].seed);

	memset(&v, 0, sizeof(v));
	snprintf(v.what, sizeof(v.what), "static file %.24s of directory %d", rent[e].name,
		 rent[e].dir);
	v.m = m;
	v.size = v.max_size = rent[e].size;
	st->sfiles++;
	st->checked_static += rent[e].size;
	rp_compare(st, &v, path);
	free(m);
	sent_checked[e] = 1;
}

/* FS_IOC_GET_ENCRYPTION_POLICY_EX of @path: the default policy of K@key. */
static void rp_check_policy(struct rp_stats *st, const char *path, int key, const char *what)
{
	struct fscrypt_get_policy_ex_arg arg;
	struct fscrypt_policy_v2 want;

	if (lab_get_policy_ex(path, &arg)) {
		rp_err(st, "%s: FS_IOC_GET_ENCRYPTION_POLICY_EX: " LAB_ERR_FMT, what,
		       LAB_ERR_ARGS(errno));
		return;
	}
	lab_default_policy(&want, ids[key]);
	if (arg.policy_size != sizeof(want) || memcmp(&arg.policy.v2, &want, sizeof(want)))
		rp_err(st, "%s: its policy (version %u, key K%d; 0: another) is not the default v2 policy of K%d its context names",
		       what, arg.policy.version, key_of(arg.policy.v2.master_key_identifier), key);
}

/* The key step 1 found for the child @wt (-1: unknown). */
static int rp_want_key(const struct rp_model *md, const struct rp_want *wt)
{
	switch (wt->kind) {
	case RP_W_DIR: return sdir_key[wt->idx];
	case RP_W_ENT: return sent_key[wt->idx];
	default: return md->f[wt->idx]->key;
	}
}

/*
 * A lookup or open of a child whose key is @ckey from a directory under
 * @dkey returned @r (errno @e): EPERM exactly when the keys differ.  1 if
 * the child is to be checked now, 0 if not (left for the rerun, or an
 * error reported).
 */
static int rp_boundary(struct rp_stats *st, int r, int e, int dkey, int ckey,
		       const char *what, const char *path)
{
	if (ckey < 1) {
		if (r == 0)
			rp_err(st, "%s (%s): reachable, but step 1 found no valid context", what, path);
		return 0;
	}
	if (ckey != dkey) {
		if (r == 0) {
			rp_err(st, "%s (%s): under K%d in a directory under K%d, yet reachable (no EPERM)",
			       what, path, ckey, dkey);
			return 0;
		}
		if (e != EPERM) {
			rp_err(st, "%s (%s): under K%d in a directory under K%d: " LAB_ERR_FMT ", expected EPERM",
			       what, path, ckey, dkey, LAB_ERR_ARGS(e));
			return 0;
		}
		st->eperm++;
		return 0;
	}
	if (r) {
		rp_err(st, "%s (%s): under K%d like its directory, but " LAB_ERR_FMT, what, path,
		       ckey, LAB_ERR_ARGS(e));
		return 0;
	}
	return 1;
}

/*
 * Directory @k at @path (reached: under the same key as its parent):
 * readdir gives exactly the model's names; its policy; then its children.
 */
static void rp_live_dir(struct rp_stats *st, struct rp_model *md, int k, const char *path)
{
	char cpath[PATH_MAX], what[96], buf[PATH_MAX];
	struct rp_want *wt;
	struct stat sb;
	struct lab_names names;
	size_t nw, i, j;
	ssize_t len;
	int dkey = sdir_key[k], ckey, r, e, fd;

	snprintf(what, sizeof(what), "directory %d (%.24s%s)", k, rdir[k].name,
		 strlen(rdir[k].name) > 24 ? "..." : "");
	if (dkey < 1)
		return;		/* reported by step 1 */
	rp_check_policy(st, path, dkey, what);
	if (lab_list_dir(path, &names)) {
		rp_err(st, "%s: readdir %s: " LAB_ERR_FMT, what, path, LAB_ERR_ARGS(errno));
		return;
	}
	wt = rp_wants(md, k, &nw);
	for (i = 0; i < names.n; i++) {
		for (j = 0; j < nw; j++)
			if (!strcmp(names.name[i], wt[j].name))
				break;
		if (j == nw)
			rp_err(st, "%s: readdir lists \"%.40s%s\" (%zu bytes), which is no name of the model (garbage: a name under another key?)",
			       what, names.name[i], strlen(names.name[i]) > 40 ? "..." : "",
			       strlen(names.name[i]));
		else if (wt[j].listed++)
			rp_err(st, "%s: readdir lists %.40s twice", what, wt[j].name);
	}
	for (j = 0; j < nw; j++) {
		if (!wt[j].listed) {
			if (!wt[j].optional)
				rp_err(st, "%s: readdir does not list %.40s%s (%zu bytes)", what,
				       wt[j].name, wt[j].len > 40 ? "..." : "", wt[j].len);
			continue;
		}
		lab_pathf(cpath, sizeof(cpath), "%s/%s", path, wt[j].name);
		ckey = rp_want_key(md, &wt[j]);
		switch (wt[j].type) {
		case RP_DIR:
			snprintf(what, sizeof(what), "directory %u", wt[j].idx);
			errno = 0;
			r = lstat(cpath, &sb);
			e = errno;
			if (rp_boundary(st, r, e, dkey, ckey, what, cpath))
				rp_live_dir(st, md, (int)wt[j].idx, cpath);
			break;
		case RP_LNK:
			snprintf(what, sizeof(what), "symlink %.24s of directory %d", wt[j].name, k);
			errno = 0;
			len = readlink(cpath, buf, sizeof(buf) - 1);
			e = errno;
			if (!rp_boundary(st, len < 0 ? -1 : 0, e, dkey, ckey, what, cpath))
				break;
			if ((size_t)len != strlen(rent[wt[j].idx].target) ||
			    memcmp(buf, rent[wt[j].idx].target, (size_t)len))
				rp_err(st, "%s: readlink gives %zd bytes, not its target of %zu", what,
				       len, strlen(rent[wt[j].idx].target));
			break;
		case RP_REG:
			if (wt[j].kind == RP_W_FILE)
				snprintf(what, sizeof(what), "writer file %u", wt[j].idx);
			else
				snprintf(what, sizeof(what), "static file %.24s of directory %d",
					 wt[j].name, k);
			if (lstat(cpath, &sb) || !S_ISREG(sb.st_mode)) {
				rp_err(st, "%s: lstat %s: not a regular file (" LAB_ERR_FMT ")", what,
				       cpath, LAB_ERR_ARGS(errno));
				break;
			}
			errno = 0;
			fd = open(cpath, O_RDONLY | O_CLOEXEC);
			e = errno;
			if (fd >= 0)
				close(fd);
			if (!rp_boundary(st, fd < 0 ? -1 : 0, e, dkey, ckey, what, cpath))
				break;
			rp_check_policy(st, cpath, ckey, what);
			if (wt[j].kind == RP_W_ENT) {
				if (!sent_checked[wt[j].idx])
					rp_check_sfile(st, (int)wt[j].idx, cpath);
			} else if (md->f[wt[j].idx]->state == RP_LIVE) {
				if (!md->f[wt[j].idx]->checked)
					rp_check_wfile(st, md, wt[j].idx, cpath);
			} else {
				md->f[wt[j].idx]->checked = 1;	/* created in flight: any content */
			}
			break;
		}
	}
	free(wt);
	lab_names_free(&names);
}

/*
 * Without the keys: sv/enc lists as many names as the model may have, no
 * plaintext one among them.
 */
static void rp_check_nokey(struct rp_stats *st, const struct rp_model *md)
{
	struct rp_want *wt;
	size_t nw, i, j, need = 0;
	struct lab_names names;

	if (lab_list_dir(enc_path, &names)) {
		rp_err(st, "readdir %s without the keys: " LAB_ERR_FMT, enc_path, LAB_ERR_ARGS(errno));
		return;
	}
	wt = rp_wants(md, 0, &nw);
	for (j = 0; j < nw; j++)
		need += !wt[j].optional;
	for (i = 0; i < names.n; i++)
		for (j = 0; j < nw; j++)
			if (!strcmp(names.name[i], wt[j].name))
				rp_err(st, "%s without the keys lists the plaintext name %.40s",
				       enc_path, names.name[i]);
	if (names.n < need || names.n > nw)
		rp_err(st, "%s without the keys lists %zu names, the model has %zu to %zu", enc_path,
		       names.n, need, nw);
	printf("powercut: without the keys: %zu no-key names in sv/enc, no plaintext one\n",
	       names.n);
	free(wt);
	lab_names_free(&names);
}

/* Every file the model requires has been compared; one that was not is lost. */
static void rp_check_all_compared(struct rp_stats *st, struct rp_model *md)
{
	uint32_t i;
	int e;

	for (e = 0; e < RP_STATIC; e++) {
		if (rent[e].type != RP_REG || sent_checked[e])
			continue;
		st->checked += rent[e].size;
		st->checked_static += rent[e].size;
		st->lost += rent[e].size;
		sent_checked[e] = 1;
		rp_err(st, "static file %.24s of directory %d was never compared: its %u bytes count as lost",
		       rent[e].name, rent[e].dir, rent[e].size);
	}
	for (i = 0; i < md->next_id; i++) {
		struct rp_file *f = md->f[i];

		if (!f || f->state != RP_LIVE || f->checked)
			continue;
		if (f->pending && f->pending->op == RP_OP_UNLINK && !f->found)
			continue;	/* unlinked in flight: may be gone */
		st->checked += f->size;
		st->lost += f->size;
		f->checked = 1;
		rp_err(st, "writer file %u was never compared: its %u fsynced bytes count as lost",
		       i, f->size);
	}
}

/* --self-check: make the last committed write (or create) record say other data. */
static void rp_selfcheck_corrupt(struct rp_log *log, struct rp_model *md)
{
	struct rp_rec *r;
	size_t k;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		for (k = log->scan.n; k-- > 0;) {
			r = &log->r[k];
			if (r->type != PCUT_T_INTENT || !md->replay.done[r->seq] ||
			    r->op != (pass ? RP_OP_CREATE : RP_OP_WRITE) ||
			    !rp_live(md, r->file) || md->f[r->file]->pending ||
			    (pass && !r->size))
				continue;
			printf("powercut: SELF-CHECK: changing one byte (a content seed) of log record %llu, a committed %s of file %u: the verifier must now find lost bytes\n",
			       (unsigned long long)r->seq, rp_op_name[r->op], r->file);
			if (pass)
				r->seed ^= 0x01000000u;
			else	/* the last piece: no later one covers it */
				r->p[r->npieces - 1].seed ^= 0x01000000u;
			return;
		}
	}
	lab_die("--self-check: no committed write or create in the log to corrupt");
}

static int rp_mount_keys(struct rp_stats *st)
{
	if (lab_mount(dev, mnt, "btrfs", NULL)) {
		rp_err(st, "cannot mount %s", dev);
		return -1;
	}
	if (rp_add_keys()) {
		rp_err(st, "adding K1 and K2 failed");
		return -1;
	}
	return 0;
}

/*
 * `btrfs subvolume rekey --status` of sv at the cut (btrfs-progs patch
 * 0009): per key the counts of @w, the walk of step 1, and the verdict.
 */
static void rp_check_status(struct rp_stats *st, const struct rp_walk *w)
{
	char id[3][2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1], want[PATH_MAX + 256];
	uint64_t e0 = st->errors;
	char *out = NULL;
	int k, j, nkeys = 0;

	for (k = 1; k <= 2; k++)
		for (j = 0; j < FSCRYPT_KEY_IDENTIFIER_SIZE; j++)
			sprintf(id[k] + 2 * j, "%02x", ids[k][j]);
	if (lab_run_capture("btrfs subvolume rekey --status", sv_path, &out)) {
		rp_err(st, "btrfs subvolume rekey --status %s failed:\n%s", sv_path,
		       out ? out : "");
		free(out);
		return;
	}
	for (k = 1; k <= 2; k++) {
		if (!(w->dirs[k] + w->syms[k] + w->files[k])) {
			if (strstr(out, id[k]))
				rp_err(st, "--status names K%d, which no object is under", k);
			continue;
		}
		nkeys++;
		PATHF(want, "%s: %llu directories, %llu symlinks, %llu files", id[k],
		      (unsigned long long)w->dirs[k], (unsigned long long)w->syms[k],
		      (unsigned long long)w->files[k]);
		if (!strstr(out, want))
			rp_err(st, "--status does not say \"%s\" (K%d)", want, k);
	}
	if (nkeys == 1 && !strstr(out, "no rekey is left unfinished"))
		rp_err(st, "--status with one key does not say that no rekey is left unfinished");
	if (nkeys == 2) {
		if (st->eperm && !strstr(out, "A rekey was interrupted"))
			rp_err(st, "--status does not say that a rekey was interrupted (%llu EPERM boundaries)",
			       (unsigned long long)st->eperm);
		for (k = 1; k <= 2; k++) {
			PATHF(want, "btrfs subvolume rekey --from %s --to %s %s", id[k],
			      id[3 - k], sv_path);
			if (!strstr(out, want))
				rp_err(st, "--status does not print \"%s\"", want);
		}
	}
	printf("powercut: btrfs subvolume rekey --status: %d key(s), %s\n", nkeys,
	       st->errors != e0 ? "errors (above)" : "as the walk found");
	free(out);
}

/*
 * The rekey in flight (Kx to Ky), run again: what step 1 found under Kx
 * moves (the counts in *@a); then everything is under Ky; once more, it
 * moves nothing.  1 if that last run moved nothing, 0 if not, -1 if it
 * did not come to it.
 */
static int rp_rerun(struct rp_stats *st, struct rp_model *md, const struct rp_walk *w1,
		    int kx, int ky, rp_rekey_args *a)
{
	static rp_rekey_args again;
	struct rp_walk w2;
	const char *why;
	long busy = 0;
	int r;

	r = rp_rekey(kx, ky, a, &busy, &why);
	if (r) {
		rp_err(st, "the rekey in flight (K%d to K%d) run again: %s: " LAB_ERR_FMT, kx, ky,
		       why, LAB_ERR_ARGS(-r));
		return -1;
	}
	printf("powercut: the rekey in flight run again: moved " LAB_REKEY_COUNTS_FMT " (%ld EBUSY retries)\n",
	       LAB_REKEY_COUNTS_ARGS(a), busy);
	if (a->nr_dirs != w1->dirs[kx] || a->nr_names != w1->names[kx] ||
	    a->nr_symlinks != w1->syms[kx] || a->nr_files != w1->files[kx])
		rp_err(st, "the rerun moved " LAB_REKEY_COUNTS_FMT "; the cut left %llu dirs (%llu names), %llu symlinks, %llu files under K%d",
		       LAB_REKEY_COUNTS_ARGS(a), (unsigned long long)w1->dirs[kx],
		       (unsigned long long)w1->names[kx], (unsigned long long)w1->syms[kx],
		       (unsigned long long)w1->files[kx], kx);
	/* everything under Ky now, readable by path */
	memset(&w2, 0, sizeof(w2));
	w2.allowed = 1 << ky;
	w2.phase = 2;
	rp_disk_walk(st, &w2, md);
	rp_live_dir(st, md, 0, enc_path);
	r = rp_rekey(kx, ky, &again, &busy, &why);
	if (r) {
		rp_err(st, "the same rekey once more: %s: " LAB_ERR_FMT, why, LAB_ERR_ARGS(-r));
		return 0;
	}
	if (!lab_rekey_moved_nothing(&again)) {
		rp_err(st, "the same rekey once more moved " LAB_REKEY_COUNTS_FMT ", expected nothing",
		       LAB_REKEY_COUNTS_ARGS(&again));
		return 0;
	}
	printf("powercut: the same rekey once more moves nothing\n");
	return 1;
}

static int rp_verify(int selfcheck)
{
	static struct rp_model md;
	static rp_rekey_args rerun, again;
	struct rp_stats st;
	struct rp_walk w1;
	struct rp_log log;
	const char *why;
	char what[256];
	long long lr;
	long busy = 0;
	int mounted, kx, ky = 0, r, check_errors = 0, check_runs = 0, idem = -1;
	uint32_t i;

	memset(&st, 0, sizeof(st));
	memset(&w1, 0, sizeof(w1));
	memset(&rerun, 0, sizeof(rerun));
	if (!lab_btrfs_progs_patched(what, sizeof(what)))
		lab_skip("%s", what);
	log.r = pcut_log_verify_open(&plog, dev2, &log.hdr, &log.scan);
	if (!log.scan.have_hdr)
		return LAB_FAIL;
	tree_seed = log.hdr.tree_seed;
	rp_tree_make(tree_seed);
	rp_model_build(&md, &log);
	if (selfcheck) {
		rp_selfcheck_corrupt(&log, &md);
		rp_model_free(&md);
		rp_model_build(&md, &log);
	}
	kx = md.key;
	if (md.rekey)
		ky = (int)md.rekey->to;
	printf("powercut: log: %zu records in %llu slots (%llu without a valid record), %u boots, %llu operations durable, %llu not done, %llu in flight at the cut (%s); %llu records of another run ignored\n",
	       log.scan.n, (unsigned long long)log.scan.end, (unsigned long long)log.scan.holes,
	       md.replay.epochs, (unsigned long long)md.replay.committed,
	       (unsigned long long)md.replay.aborted, (unsigned long long)md.replay.pending,
	       md.inflight ? rp_op_name[md.inflight->op] : "none",
	       (unsigned long long)log.scan.foreign);
	for (i = 1; i < RP_OP_MAX; i++)
		printf("powercut:   %s: %llu durable\n", rp_op_name[i], (unsigned long long)md.ops[i]);
	printf("powercut: the subvolume is under K%d%s\n", kx,
	       ky ? (ky == 1 ? "; a rekey to K1 was in flight" : "; a rekey to K2 was in flight") : "");
	st.errors += md.bad;
	for (i = 1; i <= 2; i++)
		if (memcmp(log.hdr.id[i], ids[i], FSCRYPT_KEY_IDENTIFIER_SIZE))
			rp_err(&st, "the log header's identifier of K%u is not this program's", i);
	lr = raw_btrfs_log_root(dev);
	printf("powercut: superblock log_root %lld: %s\n", lr,
	       lr > 0 ? "the mount replays the tree log" :
	       lr == 0 ? "no tree log" : "unreadable");

	mounted = lab_mount(dev, mnt, "btrfs", NULL) == 0;
	if (!mounted) {
		rp_err(&st, "cannot mount %s after the cut: everything is lost", dev);
		for (i = 0; i < md.next_id; i++)
			if (rp_live(&md, i)) {
				st.lost += md.f[i]->size;
				st.checked += md.f[i]->size;
			}
	} else {
		rp_check_nokey(&st, &md);
		if (rp_add_keys())
			rp_err(&st, "adding K1 and K2 failed");
		w1.allowed = 1 << kx | (ky ? 1 << ky : 0);
		w1.phase = 1;
		rp_disk_walk(&st, &w1, &md);
		rp_live_dir(&st, &md, 0, enc_path);
		printf("powercut: by path: %llu lookups or opens across a key boundary refused with EPERM%s\n",
		       (unsigned long long)st.eperm, ky ? " (left for the rerun)" : "");
		rp_check_status(&st, &w1);
		if (!ky && md.last_rekey) {
			/* a durable rekey run again moves nothing */
			r = rp_rekey((int)md.last_rekey->from, (int)md.last_rekey->to, &again,
				     &busy, &why);
			idem = !r && lab_rekey_moved_nothing(&again);
			if (r)
				rp_err(&st, "the last durable rekey run again: %s: " LAB_ERR_FMT, why,
				       LAB_ERR_ARGS(-r));
			else if (!idem)
				rp_err(&st, "the last durable rekey run again moved " LAB_REKEY_COUNTS_FMT ", expected nothing",
				       LAB_REKEY_COUNTS_ARGS(&again));
			else
				printf("powercut: the last durable rekey (K%u to K%u) run again moves nothing\n",
				       md.last_rekey->from, md.last_rekey->to);
		}
		if (lab_umount(mnt))
			rp_err(&st, "umount %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
	}
	check_errors += lab_btrfs_check_errors(dev);
	check_runs++;
	printf("powercut: btrfs check --readonly: %s\n", check_errors ? "ERRORS (output above)" : "clean");

	if (mounted && ky) {
		printf("powercut: the rekey from K%d to K%d was in flight: running it again\n", kx, ky);
		if (rp_mount_keys(&st) == 0) {
			idem = rp_rerun(&st, &md, &w1, kx, ky, &rerun);
			if (lab_umount(mnt))
				rp_err(&st, "umount %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
		}
		r = lab_btrfs_check_errors(dev);
		check_errors += r;
		check_runs++;
		printf("powercut: btrfs check --readonly after the rerun: %s\n",
		       r ? "ERRORS (output above)" : "clean");
	}
	if (mounted) {
		rp_check_all_compared(&st, &md);
		if (!st.control_done)
			rp_err(&st, "control: no file had a byte to flip: nothing was compared");
	}

	pcut_host_line("powercut-verify: result=%s epochs=%u records=%zu committed=%llu aborted=%llu inflight=%llu holes=%llu files=%llu static_files=%llu bytes_checked=%llu bytes_extent=%llu bytes_inode=0 bytes_static=%llu bytes_lost=%llu bytes_wrong=%llu errors=%llu renames_both=0 log_replay=%d check_runs=%d check_errors=%d rekeys_committed=%llu rekeys_in_flight=%d under=K%d rekey_to=%s inodes_old=%llu inodes_new=%llu eperm=%llu rerun=%llu/%llu/%llu/%llu again_moves_nothing=%d clones=%llu compressed_files=%llu two_key_files=%llu",
		       st.lost || st.wrong || st.errors || check_errors ? "FAIL" : "PASS",
		       md.replay.epochs, log.scan.n, (unsigned long long)md.replay.committed,
		       (unsigned long long)md.replay.aborted, (unsigned long long)md.replay.pending,
		       (unsigned long long)log.scan.holes, (unsigned long long)st.files,
		       (unsigned long long)st.sfiles, (unsigned long long)st.checked,
		       (unsigned long long)st.checked, (unsigned long long)st.checked_static,
		       (unsigned long long)st.lost, (unsigned long long)st.wrong,
		       (unsigned long long)st.errors, lr > 0, check_runs, check_errors,
		       (unsigned long long)md.ops[RP_OP_REKEY], ky ? 1 : 0, kx,
		       ky ? (ky == 1 ? "K1" : "K2") : "-",
		       (unsigned long long)(w1.dirs[kx] + w1.syms[kx] + w1.files[kx]),
		       (unsigned long long)(ky ? w1.dirs[ky] + w1.syms[ky] + w1.files[ky] : 0),
		       (unsigned long long)st.eperm, LAB_REKEY_COUNTS_ARGS(&rerun), idem,
		       (unsigned long long)md.ops[RP_OP_CLONE],
		       (unsigned long long)st.compressed, (unsigned long long)st.two_keys);
	return st.lost || st.wrong || st.errors || check_errors ? LAB_FAIL : LAB_PASS;
}

/* ---- work ------------------------------------------------------------------------------------ */

enum rp_counter {
	C_CREATES, C_WRITES, C_FSYNCS, C_DATASYNCS, C_UNLINKS, C_REKEYS, C_BUSY,
	C_REKEY_MS, C_CLONES, C_XCLONES, C_MAX
};

static const char *const rp_counter_name[C_MAX] = {
	"creates", "writes", "fsyncs", "fdatasyncs", "unlinks", "rekeys",
	"rekey_ebusy_retries", "rekey_ms", "clones", "clones_other_key",
};

struct rp_wfile {
	uint32_t id, dir, size;
};

static long cnt[C_MAX];
static struct rp_wfile wf[RP_WFILES + 1];
static int nwf;
static uint32_t next_id, epoch;
static int cur_key = 1;
static struct rp_hdr hdr;
static uint64_t next_slot;
static int mnt_fd = -1;

static LAB_PRINTF(1, 2) LAB_NORETURN void rp_fatal(const char *fmt, ...)
{
	va_list ap;

	printf("powercut: ERROR: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(LAB_FAIL);
}

static uint64_t rp_emit(struct rp_rec *r)
{
	uint64_t slot = next_slot++;

	if (slot >= plog.slots)
		rp_fatal("the log on %s is full (%llu slots): give it a bigger disk", dev2,
			 (unsigned long long)plog.slots);
	if (pcut_log_emit(&plog, slot, hdr.run_id, epoch, r))
		rp_fatal("writing log record %llu to %s: " LAB_ERR_FMT, (unsigned long long)slot,
			 dev2, LAB_ERR_ARGS(errno));
	return slot;
}

static void rp_intent(struct rp_rec *r)
{
	r->type = PCUT_T_INTENT;
	rp_emit(r);
}

static void rp_commit(const struct rp_rec *in, const rp_rekey_args *a)
{
	struct rp_rec c;

	memset(&c, 0, sizeof(c));
	c.type = PCUT_T_COMMIT;
	c.ref = in->seq;
	c.op = in->op;
	c.file = in->file;
	if (a) {
		c.nr[0] = a->nr_dirs;
		c.nr[1] = a->nr_names;
		c.nr[2] = a->nr_symlinks;
		c.nr[3] = a->nr_files;
	}
	rp_emit(&c);
}

static void rp_fsync_dir(uint32_t dir)
{
	char p[PATH_MAX];

	rp_dir_path((int)dir, p, sizeof(p));
	if (fsync_path(p))
		rp_fatal("fsync of directory %s: " LAB_ERR_FMT, p, LAB_ERR_ARGS(errno));
}

/* --- the operations, from their intent records (the redo uses them too) --- */

static void rp_do_create(const struct rp_rec *r, int redo)
{
	static unsigned char buf[RP_FMAX];
	char path[PATH_MAX];
	int fd;

	rp_wpath(r->dir, r->file, path, sizeof(path));
	if (redo && unlink(path) && errno != ENOENT)
		rp_fatal("redo of a create: unlink %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		rp_fatal("create %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	rp_fill(buf, r->size, r->seed);
	if (write_all(fd, buf, r->size) || fsync(fd))
		rp_fatal("write and fsync %u bytes to the new file %s: " LAB_ERR_FMT, r->size, path,
			 LAB_ERR_ARGS(errno));
	close(fd);
	rp_fsync_dir(r->dir);
	cnt[C_CREATES]++;
	cnt[C_FSYNCS]++;
}

static void rp_do_write(const struct rp_rec *r, uint32_t dir)
{
	static unsigned char buf[RP_FMAX];
	char path[PATH_MAX];
	uint32_t i;
	int fd;

	rp_wpath(dir, r->file, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		rp_fatal("open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	for (i = 0; i < r->npieces; i++) {
		rp_fill(buf, r->p[i].len, r->p[i].seed);
		if (pwrite_all(fd, buf, r->p[i].len, r->p[i].off))
			rp_fatal("pwrite %u bytes at %u of %s: " LAB_ERR_FMT, r->p[i].len,
				 r->p[i].off, path, LAB_ERR_ARGS(errno));
		cnt[C_WRITES]++;
	}
	if ((r->flags & RP_F_DATASYNC) ? fdatasync(fd) : fsync(fd))
		rp_fatal("%s of %s: " LAB_ERR_FMT, (r->flags & RP_F_DATASYNC) ? "fdatasync" : "fsync",
			 path, LAB_ERR_ARGS(errno));
	cnt[(r->flags & RP_F_DATASYNC) ? C_DATASYNCS : C_FSYNCS]++;
	close(fd);
}

/*
 * Does [@off, +@len) of @path hold an extent whose context names another
 * key than K@key?  (TREE_SEARCH of its file extent items.)
 */
static int rp_range_other_key(const char *path, uint32_t off, uint32_t len, int key)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_fscrypt_extent_ctx c;
	struct stat sb;
	size_t n = 0, i;
	int other = 0;

	if (stat(path, &sb) || lab_btrfs_file_extents(path, sb.st_ino, &fe, &n))
		return 0;
	for (i = 0; i < n; i++)
		if (fe[i].file_offset < (uint64_t)off + len &&
		    fe[i].file_offset + fe[i].num_bytes > off && fe[i].tail_len &&
		    !lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &c) &&
		    key_of(c.key_id) != key)
			other = 1;
	free(fe);
	return other;
}

/*
 * FICLONERANGE of the clone @r, then fsync of the destination.  After a
 * rekey the source's older extents are under the other key: the
 * destination, whose context names the subvolume's key now, then holds
 * them too (counted as clones_other_key).
 */
static void rp_do_clone(const struct rp_rec *r)
{
	char spath[PATH_MAX], dpath[PATH_MAX];
	struct file_clone_range fcr;
	int sfd, dfd;

	rp_wpath(r->dir2, r->file2, spath, sizeof(spath));
	rp_wpath(r->dir, r->file, dpath, sizeof(dpath));
	sfd = open(spath, O_RDONLY | O_CLOEXEC);
	dfd = open(dpath, O_RDWR | O_CLOEXEC);
	if (sfd < 0 || dfd < 0)
		rp_fatal("open %s and %s for a clone: " LAB_ERR_FMT, spath, dpath,
			 LAB_ERR_ARGS(errno));
	cnt[C_XCLONES] += rp_range_other_key(spath, r->p[0].seed, r->p[0].len, cur_key);
	memset(&fcr, 0, sizeof(fcr));
	fcr.src_fd = sfd;
	fcr.src_offset = r->p[0].seed;
	fcr.src_length = r->p[0].len;
	fcr.dest_offset = r->p[0].off;
	if (ioctl(dfd, FICLONERANGE, &fcr) || fsync(dfd))
		rp_fatal("FICLONERANGE of %u bytes at %u of %s to %u of %s, and fsync: " LAB_ERR_FMT,
			 r->p[0].len, r->p[0].seed, spath, r->p[0].off, dpath, LAB_ERR_ARGS(errno));
	close(sfd);
	close(dfd);
	cnt[C_CLONES]++;
	cnt[C_FSYNCS]++;
}

static void rp_do_unlink(const struct rp_rec *r, int redo)
{
	char path[PATH_MAX];

	rp_wpath(r->dir, r->file, path, sizeof(path));
	if (unlink(path) && !(redo && errno == ENOENT))
		rp_fatal("unlink %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	rp_fsync_dir(r->dir);
	cnt[C_UNLINKS]++;
}

/* The rekey of the intent @r; its counts must be @want (NULL: any). */
static void rp_do_rekey(const struct rp_rec *r, const rp_rekey_args *want, rp_rekey_args *a)
{
	long long t0 = lab_now_ms(), ms;
	const char *why;
	int res;

	res = rp_rekey((int)r->from, (int)r->to, a, &cnt[C_BUSY], &why);
	if (res)
		rp_fatal("rekey of sv from K%u to K%u: %s: " LAB_ERR_FMT, r->from, r->to, why,
			 LAB_ERR_ARGS(-res));
	ms = lab_now_ms() - t0;
	cnt[C_REKEY_MS] += ms;
	cnt[C_REKEYS]++;
	if (want && (a->nr_dirs != want->nr_dirs || a->nr_names != want->nr_names ||
		     a->nr_symlinks != want->nr_symlinks || a->nr_files != want->nr_files))
		rp_fatal("rekey of sv from K%u to K%u moved " LAB_REKEY_COUNTS_FMT ", the tree holds " LAB_REKEY_COUNTS_FMT,
			 r->from, r->to, LAB_REKEY_COUNTS_ARGS(a), LAB_REKEY_COUNTS_ARGS(want));
	cur_key = (int)r->to;
}

/* --- the loop --- */

static void rp_op_create(void)
{
	struct rp_rec r;

	if (next_id >= RP_MAX_IDS)
		rp_fatal("out of file ids");
	memset(&r, 0, sizeof(r));
	r.op = RP_OP_CREATE;
	r.file = next_id++;
	r.dir = pcut_rnd(RP_DIRS);
	r.size = RP_CREATE_MIN + pcut_rnd(RP_CREATE_MAX - RP_CREATE_MIN + 1);
	r.seed = pcut_rnd32();
	rp_intent(&r);
	rp_do_create(&r, 0);
	rp_commit(&r, NULL);
	wf[nwf].id = r.file;
	wf[nwf].dir = r.dir;
	wf[nwf].size = r.size;
	nwf++;
}

static void rp_op_write(struct rp_wfile *f)
{
	struct rp_rec r;
	struct rp_piece *p;
	uint32_t i, size = f->size, k;

	memset(&r, 0, sizeof(r));
	r.op = RP_OP_WRITE;
	r.file = f->id;
	r.npieces = 1 + pcut_rnd(RP_MAX_PIECES);
	r.flags = pcut_rnd(4) == 0 ? RP_F_DATASYNC : 0;
	for (i = 0; i < r.npieces; i++) {
		p = &r.p[i];
		k = pcut_rnd(3);
		p->len = 1 + pcut_rnd(RP_PIECE_MAX);
		if (k == 0) {			/* append */
			p->off = size;
		} else if (k == 1) {		/* overwrite, anywhere */
			p->off = pcut_rnd(size ? size : 1);
		} else {			/* whole blocks */
			p->off = pcut_rnd(size / 4096 + 1) * 4096;
			p->len = 4096 * (1 + pcut_rnd(4));
		}
		if (p->off >= RP_FMAX)
			p->off = RP_FMAX - 4096;
		if (p->len > RP_FMAX - p->off)
			p->len = RP_FMAX - p->off;
		p->seed = pcut_rnd32();
		if (p->off + p->len > size)
			size = p->off + p->len;
	}
	rp_intent(&r);
	rp_do_write(&r, f->dir);
	rp_commit(&r, NULL);
	f->size = size;
}

/* 1 to 4 whole blocks of writer file @s into writer file @d (not overlapping); 0 if none fit. */
static int rp_op_clone(struct rp_wfile *d, struct rp_wfile *s)
{
	uint32_t nblk = 1 + pcut_rnd(4), sb = s->size / 4096, db = d->size / 4096, so, dof;
	struct rp_rec r;

	if (sb < nblk || db < nblk)
		return 0;
	so = pcut_rnd(sb - nblk + 1);
	dof = pcut_rnd(db - nblk + 1);
	if (s == d && so < dof + nblk && dof < so + nblk)
		return 0;
	memset(&r, 0, sizeof(r));
	r.op = RP_OP_CLONE;
	r.file = d->id;
	r.dir = d->dir;
	r.file2 = s->id;
	r.dir2 = s->dir;
	r.npieces = 1;
	r.p[0].off = dof * 4096;
	r.p[0].len = nblk * 4096;
	r.p[0].seed = so * 4096;
	rp_intent(&r);
	rp_do_clone(&r);
	rp_commit(&r, NULL);
	return 1;
}

static void rp_op_unlink(struct rp_wfile *f)
{
	struct rp_rec r;

	memset(&r, 0, sizeof(r));
	r.op = RP_OP_UNLINK;
	r.file = f->id;
	r.dir = f->dir;
	rp_intent(&r);
	rp_do_unlink(&r, 0);
	rp_commit(&r, NULL);
	*f = wf[--nwf];
}

/* What a rekey of the whole tree moves. */
static void rp_expect(rp_rekey_args *want)
{
	memset(want, 0, sizeof(*want));
	want->nr_dirs = RP_DIRS;
	want->nr_names = (RP_DIRS - 1) + RP_STATIC + (uint64_t)nwf;
	want->nr_symlinks = RP_DIRS * RP_NLINK;
	want->nr_files = RP_DIRS * RP_NFILE + (uint64_t)nwf;
}

static void rp_op_rekey(void)
{
	static rp_rekey_args a, want;
	struct rp_rec r;

	memset(&r, 0, sizeof(r));
	r.op = RP_OP_REKEY;
	r.from = (uint32_t)cur_key;
	r.to = (uint32_t)(3 - cur_key);
	rp_expect(&want);
	rp_intent(&r);
	rp_do_rekey(&r, &want, &a);
	rp_commit(&r, &a);
}

static void rp_progress(long long start)
{
	char line[512];
	size_t len;
	int c;

	len = (size_t)snprintf(line, sizeof(line), "powercut: progress %.1fs, under K%d:",
			       (double)(lab_now_ms() - start) / 1000, cur_key);
	for (c = 0; c < C_MAX && len < sizeof(line); c++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=%ld",
					rp_counter_name[c], cnt[c]);
	printf("%s\n", line);
	fflush(stdout);
}

static LAB_NORETURN void rp_loop(void)
{
	long long start = lab_now_ms(), next = start + RP_PROGRESS_MS;
	struct rp_wfile *f;
	uint32_t n, i;

	for (;;) {
		/* (a) the writers' turn: each file opened, written, synced, closed */
		n = 1 + pcut_rnd(3);
		for (i = 0; i < n; i++) {
			if (nwf < RP_WFILES) {
				rp_op_create();
				continue;
			}
			f = &wf[pcut_rnd((uint32_t)nwf)];
			if (f->size > RP_FMAX - RP_MAX_PIECES * RP_PIECE_MAX || pcut_rnd(100) < 12)
				rp_op_unlink(f);
			else
				rp_op_write(f);
		}
		/*
		 * a clone between writer files (if one fits): after a rekey,
		 * older extents of the other key go into a file of this one
		 */
		if (nwf)
			rp_op_clone(&wf[pcut_rnd((uint32_t)nwf)], &wf[pcut_rnd((uint32_t)nwf)]);
		/* (b) no fd open in sv: the rekey to the other key */
		rp_op_rekey();
		if (lab_now_ms() >= next) {
			rp_progress(start);
			next = lab_now_ms() + RP_PROGRESS_MS;
		}
	}
}

/* --- setup, redo, start --- */

/* Does the kernel know the rekey ioctl?  (flags 1 must be EINVAL.) */
static void rp_probe_rekey(void)
{
	struct fscrypt_policy_v2 p;
	rp_rekey_args a;
	int r, e;

	lab_default_policy(&p, ids[2]);
	lab_rekey_args(&a, "sv", ids[1], &p);
	a.flags = 1;
	r = lab_rekey_at(mnt, &a);
	e = errno;
	if (r == 0)
		lab_die("a rekey with flags 1 succeeded");
	if (e == ENOTTY)
		lab_skip("the kernel's btrfs has no BTRFS_IOC_FSCRYPT_REKEY (ENOTTY)");
	if (e != EINVAL)
		lab_die("a rekey with flags 1: " LAB_ERR_FMT ", expected EINVAL", LAB_ERR_ARGS(e));
}

/*
 * The workload's mounts commit every second: a rekey commits only at its
 * end, so without periodic commits a cut would nearly always find the whole
 * rekey lost, and the verifier would rarely see a tree half moved.
 */
/* compress=zstd where the kernel compresses encrypted files (rp_fill()) */
#define RP_WORK_OPTS (access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) ? \
		      "commit=1" : "commit=1,compress=zstd")

/* First boot: mkfs, sv, sv/enc with the policy of K1, the static tree, the header. */
static void rp_mkfs(uint32_t seed)
{
	static const struct lab_fscrypt_fs fs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
	};
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char why[256], path[PATH_MAX];
	unsigned char *buf;
	int k, e, fd;

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("the kernel's btrfs has no per-extent keys (%s is missing)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	if (!lab_btrfs_progs_patched(why, sizeof(why)))
		lab_skip("%s", why);
	pcut_log_hdr_init(&plog, &hdr, seed);
	lab_random(&hdr.tree_seed, sizeof(hdr.tree_seed));
	tree_seed = hdr.tree_seed;
	lab_fscrypt_fs_setup(&fs, dev, mnt, RP_WORK_OPTS, mk[1], sizeof(mk[1]), id);
	if (memcmp(id, ids[1], sizeof(id)))
		lab_die("K1's identifier from the kernel is not the reference one");
	if (lab_add_key(mnt, key_seed[2], id) || memcmp(id, ids[2], sizeof(id)))
		lab_die("adding K2: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	memcpy(hdr.id[1], ids[1], sizeof(ids[1]));
	memcpy(hdr.id[2], ids[2], sizeof(ids[2]));
	mnt_fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mnt_fd < 0)
		lab_die("open %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
	lab_btrfs_subvol(mnt, "sv", -1);
	rp_probe_rekey();
	if (mkdir(enc_path, 0755) || lab_set_policy(enc_path, ids[1]))
		lab_die("making the encrypted %s: " LAB_ERR_FMT, enc_path, LAB_ERR_ARGS(errno));

	/* directory by directory: each one, then what it holds */
	rp_tree_make(tree_seed);
	buf = lab_xmalloc(RP_STATIC_FMAX);
	for (k = 0; k < RP_DIRS; k++) {
		if (k) {
			rp_dir_path(k, path, sizeof(path));
			if (mkdir(path, 0755))
				lab_die("mkdir %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
		}
		for (e = k * RP_NENT; e < (k + 1) * RP_NENT; e++) {
			rp_ent_path(e, path, sizeof(path));
			if (rent[e].type == RP_LNK) {
				if (symlink(rent[e].target, path))
					lab_die("symlink %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
				continue;
			}
			fill_pattern(buf, rent[e].size, rent[e].seed);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0 || write_all(fd, buf, rent[e].size) || close(fd))
				lab_die("create %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
		}
	}
	free(buf);
	if (syncfs(mnt_fd))
		lab_die("syncfs: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (pcut_log_put(&plog, 0, &hdr, sizeof(hdr)))
		lab_die("writing the log header to %s: " LAB_ERR_FMT, dev2, LAB_ERR_ARGS(errno));
	printf("powercut: new filesystem on %s, run %016llx, log on %s (%llu slots); sv/enc under K1 with %d directories, %d files and %d symlinks\n",
	       dev, (unsigned long long)hdr.run_id, dev2, (unsigned long long)plog.slots,
	       RP_DIRS, RP_DIRS * RP_NFILE, RP_DIRS * RP_NLINK);
}

/* Finish what the cut interrupted, from its intent, and commit it. */
static void rp_redo(const struct rp_model *md)
{
	static rp_rekey_args a;
	const struct rp_rec *r = md->inflight;
	const struct rp_file *f;
	int i;

	if (!r)
		return;
	printf("powercut: redo of the %s of log record %llu (boot %u)\n", rp_op_name[r->op],
	       (unsigned long long)r->seq, r->epoch);
	switch (r->op) {
	case RP_OP_CREATE:
		rp_do_create(r, 1);
		wf[nwf].id = r->file;
		wf[nwf].dir = r->dir;
		wf[nwf].size = r->size;
		nwf++;
		break;
	case RP_OP_WRITE:
		f = md->f[r->file];
		for (i = 0; i < nwf && wf[i].id != r->file; i++)
			;
		if (i == nwf || !f)
			lab_die("redo: file %u is not there", r->file);
		rp_do_write(r, f->dir);
		for (uint32_t p = 0; p < r->npieces; p++)
			if (r->p[p].off + r->p[p].len > wf[i].size)
				wf[i].size = r->p[p].off + r->p[p].len;
		break;
	case RP_OP_UNLINK:
		rp_do_unlink(r, 1);
		for (i = 0; i < nwf; i++)
			if (wf[i].id == r->file)
				wf[i] = wf[--nwf];
		break;
	case RP_OP_CLONE:
		for (i = 0; i < nwf && wf[i].id != r->file; i++)
			;
		if (i == nwf || !rp_live(md, r->file2))
			lab_die("redo: clone between files %u and %u that are not there",
				r->file2, r->file);
		rp_do_clone(r);
		if (r->p[0].off + r->p[0].len > wf[i].size)
			wf[i].size = r->p[0].off + r->p[0].len;
		break;
	case RP_OP_REKEY:
		rp_do_rekey(r, NULL, &a);
		printf("powercut: the rekey run again moved " LAB_REKEY_COUNTS_FMT "\n",
		       LAB_REKEY_COUNTS_ARGS(&a));
		break;
	}
	rp_commit(r, r->op == RP_OP_REKEY ? &a : NULL);
}

static int rp_work(uint32_t seed, uint32_t cut, int first)
{
	static struct rp_model md;
	struct rp_log log;
	struct rp_rec er;
	uint32_t i;

	pcut_log_open(&plog, dev2);
	if (first) {
		rp_mkfs(seed);
		next_slot = 1;
		epoch = 1;
	} else {
		log.r = pcut_log_read(&plog, &log.hdr, &log.scan);
		if (!log.scan.have_hdr)
			lab_die("no log header on %s: the first boot (work --mkfs) must come first", dev2);
		hdr = log.hdr;
		tree_seed = hdr.tree_seed;
		rp_tree_make(tree_seed);
		rp_model_build(&md, &log);
		if (md.bad)
			lab_die("the log is inconsistent (%llu errors above)", (unsigned long long)md.bad);
		epoch = md.replay.last_epoch + 1;
		next_slot = log.scan.end;
		cur_key = md.key;
		if (lab_mount(dev, mnt, "btrfs", RP_WORK_OPTS))
			lab_die("cannot mount %s", dev);
		if (rp_add_keys())
			lab_die("adding K1 and K2");
		next_id = md.next_id;
		for (i = 0; i < md.next_id; i++) {
			if (!rp_live(&md, i) || (md.f[i]->pending &&
						 md.f[i]->pending->op == RP_OP_UNLINK))
				continue;
			if (nwf > RP_WFILES)
				lab_die("more than %d writer files live", RP_WFILES + 1);
			wf[nwf].id = i;
			wf[nwf].dir = md.f[i]->dir;
			wf[nwf].size = md.f[i]->size;
			nwf++;
		}
	}
	memset(&er, 0, sizeof(er));
	er.type = PCUT_T_EPOCH;
	er.seed = seed;
	er.file = cut;
	rp_emit(&er);
	printf("powercut: boot %u (cut %u, seed 0x%x): sv under K%d, %d writer files; log from slot %llu\n",
	       epoch, cut, seed, cur_key, nwf, (unsigned long long)next_slot);
	if (!first) {
		rp_redo(&md);
		rp_model_free(&md);
	}
	pcut_rng_init(seed, epoch, 0x5a);
	fflush(NULL);
	pcut_host_line("powercut: working (boot %u, cut %u)", epoch, cut);
	rp_loop();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	dev = lab_env("SCRATCH_DEV");
	dev2 = lab_env("SCRATCH_DEV2");
	mnt = lab_env("SCRATCH_MNT");
	PATHF(sv_path, "%s/sv", mnt);
	PATHF(enc_path, "%s/enc", sv_path);
	rp_keys_init();
	return pcut_main(argc, argv, rp_verify, rp_work);
}
