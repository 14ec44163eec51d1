// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_stress - random operations on encrypted btrfs files of both
 * key modes, run against balance, scrub and drop_caches, lose nothing,
 * leave a filesystem that scrub and btrfs check find clean, and put no
 * plaintext on the device (issue #14, parts 4 "concurrent stress" and 5
 * "leaks").
 *
 * The filesystem (mkfs.btrfs on $SCRATCH_DEV): a subvolume sv holding four
 * directories, a-ext and a-ino (policy of master key A), b-ext (key B) and
 * plain (no policy, the control).  What the series allows, and what the
 * generator relies on:
 *
 *  - a regular file's key mode is chosen when it is created, from the mount
 *    option of that moment (default: a key per extent, in key groups;
 *    fscrypt_per_inode_keys: per-inode keys; fscrypt_extents_per_key=1: a
 *    key per extent in version 1 contexts), and never changes
 *    (BTRFS_INODE_ENCRYPT_PER_EXTENT).  Directories have no key mode, so
 *    files of both modes may share one directory, and a remount switches
 *    the mode of new files at any time.  a-ext and b-ext get their files
 *    while the mount gives per-extent keys, a-ino while it gives per-inode
 *    keys; renames then mix them;
 *  - reflink (FICLONERANGE) works between per-extent files, also across
 *    the two master keys (the policies are equal but for the key: the
 *    extents keep their own key, both keys stay added), and between
 *    unencrypted files.  It is refused with EINVAL between an encrypted
 *    and an unencrypted file, and with EOPNOTSUPP as soon as a
 *    per-inode-key file is involved (even within one file), in that order;
 *  - a rename into an encrypted directory of another policy, or of an
 *    unencrypted file into an encrypted directory, fails with EXDEV; an
 *    encrypted file may move to the unencrypted directory (fscrypt only
 *    checks the destination), and stays encrypted;
 *  - snapshots go to the top level (not into encrypted directories); a
 *    snapshot's files keep their policy and key mode, and are reflink
 *    partners of the files they came from.  A subvolume that holds (or
 *    held) a file with per-inode keys is never snapshotted (EOPNOTSUPP:
 *    the copies would share that file's key and IVs), so per-inode files
 *    are created in sv only, after a first snapshot of it, and its later
 *    snapshots must be refused;
 *  - BTRFS_IOC_FSCRYPT_REKEY moves a subvolume's directories and files
 *    from one master key to the other (A to B, or B to A; their old
 *    extents stay under the key they were written with): the snapshots
 *    move, sv is refused (EOPNOTSUPP) once it holds per-inode keys.  The
 *    model keeps each subvolume's directory keys, so that a rename's EXDEV
 *    follows the keys a rekey changed;
 *  - encrypted files are compressed as plain ones (on a kernel with
 *    encrypt_compress): the btrfs.compression property (zlib, lzo, zstd,
 *    none, or removed) on files and on directories (inherited by new
 *    files), chattr +c and +m, are all taken.
 *
 * A generator seeded with STRESS_SEED (default 0x14f0004) draws operations
 * for STRESS_SECONDS (default 20) in this filesystem: create, write (random
 * offset and length, unaligned half the time, some O_DIRECT), truncate,
 * fallocate (punch hole, preallocate with and without KEEP_SIZE), reflink,
 * rename (also over an existing file), unlink, fsync/fdatasync/syncfs,
 * snapshot of a live subvolume (and deletion of the oldest of three), a
 * remount to another key mode, a read-back of a file, a rekey of a live
 * subvolume (its counts must be the model's), and a change of a file's or
 * directory's compression setting; writes are of data that compresses
 * (make_data()) three times in four to a file
 * with such a setting, one time in six to any other; one reflink in three
 * goes into a per-extent file of the other master key when there is one
 * (rekeys leave each snapshot under one key).  A fixed prologue
 * first makes files in every directory, of both key modes, and meets each
 * reflink and rename outcome above once, a rekey done (of the first
 * snapshot) and one refused (of sv), the property zstd on a directory with
 * a file of compressible data made in it, whose extents must then be
 * compressed (FIEMAP), and lzo on a file, so that a short or slow run
 * covers them too (the run must meet each at least once).  Every write of an
 * encrypted file carries a 64-byte plaintext marker (unique to the run) at
 * a random stride, every write of an unencrypted file another one; every
 * name carries the run's tag.  A model holds every file's expected bytes
 * and every expected refusal, which is counted; anything else (an errno
 * not expected, a read that differs) is a failure.
 *
 * Meanwhile three child processes loop until the end: BTRFS_IOC_BALANCE_V2
 * (usage-filtered and full data, metadata and system balances), the scrub
 * ioctl over the device, and writing 3 to /proc/sys/vm/drop_caches.  They
 * must get work done: at least one balance that relocated chunks, one
 * scrub, one drop; every scrub error counter must stay 0.
 *
 * Then: every file and every directory listing equals the model, live,
 * after drop_caches, and after a remount (keys added again; there the inode
 * flags must also say each file's key mode); a sentinel file per key mode
 * and an unencrypted control file with known numbers of markers are written
 * and read back; `btrfs scrub start -B -R` finds 0 errors; unmounted,
 * `btrfs check --readonly` is clean; and a scan of the whole raw device
 * finds no encrypted file's marker and no encrypted name, while it must
 * find the control file's marker (at least as many times as that file holds
 * it) and an unencrypted name, or the scan is blind and the test fails.
 *
 * Under test_dummy_encryption (the "encrypt" test configuration,
 * lab_dummy_encryption()), every directory made below sv's top directory
 * already has the test policy (fscrypt's test key, new at every boot), so
 * policies A and B cannot be set there (EEXIST, checked once): the test
 * policy is taken as the only one, for all four directories, "plain"
 * included.  Reflinks and renames then never cross policies and no file is
 * unencrypted, so the generator's cases "across master keys", "EINVAL
 * encrypted/plain" and "EXDEV" are not required; the control file of the
 * leak scan (which must be found) is written on a mount without the
 * option, as no new file is plain under it.  The log says so ("config:").
 *
 * Figures go to $STRESS_FIGURES (default $RESULTS/stress-figures.tsv, not
 * written if neither is set): seconds, ops, balances, scrubs, scrub_errors,
 * check_errors, leak_hits, control_found, files_checked, mismatches; then
 * what shows that each kind of operation ran and reached its target:
 * rekeys (done), rekeys_refused (EOPNOTSUPP), rekeys_busy, rekey_files_moved
 * (the kernel's counts), reflinks, reflinks_cross_key (between files of
 * key A and key B), compress_changes (properties and flags taken),
 * compressible_writes, compressed_extents_prologue (FIEMAP: encoded
 * extents of the prologue's file), compressed_extents_end and
 * compressed_files_end (of the encrypted files, after the remount),
 * chunks_relocated (by the balances), scrub_bytes.  Under
 * test_dummy_encryption no rekey is made (one policy).  A
 * LAB-PROGRESS line reaches the console every STRESS_PROGRESS seconds
 * (default 30).  Exit 0 pass, 77 if the kernel's btrfs cannot encrypt,
 * anything else fail.  Without per-extent keys in the kernel every file
 * gets per-inode keys and no remount switches modes.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "btrfs_rekey.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"
#include "rawdev.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#define BLK 4096u
#define KiB 1024u
#define MAX_FILE (768 * KiB)		/* largest file the generator makes */
#define MAX_WRITE (128 * KiB)
#define MAX_CREATE (192 * KiB)
#define FILES_PER_SV 40			/* per subvolume */
#define MAX_SV 4			/* sv and up to three snapshots */
#define MAX_FILES (FILES_PER_SV * MAX_SV)
#define MIN_FILES 6			/* no unlink below this */
#define MARKER_LEN 64
#define TAG_HEX 16
#define SENTINEL_COPIES 256
#define CONTROL_COPIES 256
#define STOP_GRACE_S 300		/* children must stop within this */
#define DEFAULT_SEED 0x14f0004u
#define DEFAULT_SECONDS 20

enum { D_A_EXT, D_A_INO, D_B_EXT, D_PLAIN, NDIRS };
static const char *const dir_names[NDIRS] = { "a-ext", "a-ino", "b-ext", "plain" };
/* 0: none, 1: A, 2: B; under test_dummy_encryption all 1, the test key */
static int dir_policy[NDIRS] = { 1, 1, 2, 0 };
static int dummy;		/* test_dummy_encryption: see the top */

/* What the mount gives new encrypted files. */
enum { MM_EXTENT, MM_EXTENT_V1, MM_INODE, NMM };
static const char *const mm_names[NMM] = { "per-extent (key groups)",
	"per-extent (fscrypt_extents_per_key=1)", "per-inode" };
static const char *const mm_opts[NMM] = {
	"fscrypt_per_extent_keys,fscrypt_extents_per_key=0",
	"fscrypt_per_extent_keys,fscrypt_extents_per_key=1",
	"fscrypt_per_inode_keys,fscrypt_extents_per_key=0",
};

/* A file's key mode. */
enum { KM_NONE, KM_EXTENT, KM_INODE };
static const char *const km_names[] = { "plain", "per-extent", "per-inode" };

enum op {
	OP_CREATE, OP_WRITE, OP_TRUNCATE, OP_FALLOC, OP_REFLINK, OP_RENAME,
	OP_UNLINK, OP_FSYNC, OP_SNAPSHOT, OP_REMOUNT, OP_VERIFY, OP_REKEY,
	OP_COMPRESS, NOPS
};
static const char *const op_names[NOPS] = { "create", "write", "truncate",
	"fallocate", "reflink", "rename", "unlink", "fsync", "snapshot",
	"remount", "verify", "rekey", "compress" };
/* Relative weights of the operations (their sum is the range drawn). */
static const unsigned int op_weight[NOPS] = { 10, 28, 6, 8, 12, 8, 4, 10, 2,
	3, 9, 2, 4 };

struct sfile {
	int used;
	int bad;		/* an operation failed unexpectedly: not compared */
	int sv, dir, pol, km;
	int comp;		/* a compression property or flag is set on it */
	char name[64];
	unsigned char *data;
	size_t size;
};

struct subvol {
	int used;
	/*
	 * Holds (or held) a file encrypted with per-inode keys: the kernel
	 * refuses to snapshot it (EOPNOTSUPP), since the copies would share
	 * that file's key and IVs.
	 */
	int inode_keys;
	unsigned int gen;	/* snapshots: the order they were made in */
	char name[32];
	/*
	 * Each directory's master key (0: none, 1: A, 2: B): dir_policy[] when
	 * made, what a snapshot's source had, and the "to" of each rekey.
	 */
	int pol[NDIRS];
	int dcomp[NDIRS];	/* a compression property on the directory */
};

/* The background children's counters: each has one writer. */
struct shared {
	volatile int stop;
	long balances, balance_cancelled, balance_errors, chunks_relocated;
	long scrubs, scrub_cancelled, scrub_fails;
	unsigned long long scrub_errors, scrub_bytes;
	long drops, drop_errors;
};

static const char *dev, *mnt;
static struct shared *sh;
static struct sfile files[MAX_FILES];
static struct subvol svs[MAX_SV];
static int extent_keys;		/* the kernel has per-extent keys */
static int cur_mm;		/* the mount's mode for new files */
static unsigned int next_name, next_snap;
static uint8_t key_a[64], key_b[64];
static uint8_t id_a[FSCRYPT_KEY_IDENTIFIER_SIZE], id_b[FSCRYPT_KEY_IDENTIFIER_SIZE];
static char tag[TAG_HEX + 1];
static char enc_marker[MARKER_LEN + 1], ctl_marker[MARKER_LEN + 1];
static char enc_name_pfx[32], ctl_name_pfx[32];
static unsigned long op_count[NOPS], op_seq;
static unsigned long reflink_ok, reflink_einval, reflink_eopnotsupp;
static unsigned long reflink_cross_key;	/* done, between the two keys */
static unsigned long rename_ok, rename_exdev, rename_replace, snap_deleted;
static unsigned long snap_refused;
static unsigned long direct_writes, mismatches, listing_mismatches;
/* rekeys (BTRFS_IOC_FSCRYPT_REKEY of a subvolume from key A to B or back) */
static int rekey_ok;		/* the kernel has the ioctl, and not dummy */
static unsigned long rekeys_done, rekeys_eopnotsupp, rekeys_busy;
static unsigned long rekey_dirs_moved, rekey_files_moved;
/* compression: the btrfs.compression property and chattr +c/+m */
static int compress_ok;		/* the kernel compresses encrypted files */
static unsigned long compress_props, compress_dir_props, compress_flags;
static unsigned long compressible_writes;
static long prologue_compressed = -1;	/* encoded extents of the prologue's file */
/* at the end (after the remount): compressed extents of encrypted files, and files with some */
static long end_comp_extents, end_comp_files, end_comp_plain;
static unsigned char *wbuf, *rbuf;	/* aligned, MAX_FILE + BLK */

/* ---- pseudo-random numbers (splitmix64), seeded ------------------------- */

static uint64_t rng;

static uint64_t rnd64(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, n); 0 if n is 0. */
static size_t rnd(size_t n)
{
	return n ? (size_t)(rnd64() % n) : 0;
}

static unsigned long env_ul(const char *name, unsigned long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : dflt;
}

static long long t0_ms;

/* "== [seconds since the start] what": where the time goes, in the log. */
static void phase(const char *what)
{
	printf("== [%.1fs] %s\n", (double)(lab_now_ms() - t0_ms) / 1000.0, what);
}

/* ---- the model ------------------------------------------------------------ */

static void file_path(char *out, size_t size, const struct sfile *f)
{
	lab_pathf(out, size, "%s/%s/%s/%s", mnt, svs[f->sv].name,
		  dir_names[f->dir], f->name);
}

static void dir_path(char *out, size_t size, int sv, int dir)
{
	lab_pathf(out, size, "%s/%s/%s", mnt, svs[sv].name, dir_names[dir]);
}

/* A new name for a file in @dir: encrypted directories hide it, plain ones do not. */
static void new_name(char *out, size_t size, int dir)
{
	lab_pathf(out, size, "%s%u", dir_policy[dir] ? enc_name_pfx : ctl_name_pfx,
		  next_name++);
}

static void model_resize(struct sfile *f, size_t size)
{
	if (size > f->size) {
		f->data = realloc(f->data, size);
		if (!f->data)
			lab_die("out of memory for the model");
		memset(f->data + f->size, 0, size - f->size);
	}
	f->size = size;
}

static void model_free(struct sfile *f)
{
	free(f->data);
	memset(f, 0, sizeof(*f));
}

static struct sfile *model_new(int sv, int dir, int km)
{
	int i;

	for (i = 0; i < MAX_FILES; i++) {
		if (!files[i].used) {
			memset(&files[i], 0, sizeof(files[i]));
			files[i].used = 1;
			files[i].sv = sv;
			files[i].dir = dir;
			files[i].pol = svs[sv].pol[dir];
			files[i].km = svs[sv].pol[dir] ? km : KM_NONE;
			files[i].comp = svs[sv].dcomp[dir];
			return &files[i];
		}
	}
	return NULL;
}

static int files_in_sv(int sv)
{
	int i, n = 0;

	for (i = 0; i < MAX_FILES; i++)
		n += files[i].used && files[i].sv == sv;
	return n;
}

static int nfiles(void)
{
	int i, n = 0;

	for (i = 0; i < MAX_FILES; i++)
		n += files[i].used;
	return n;
}

/* A random live file that is not bad, or NULL. */
static struct sfile *pick_file(void)
{
	int idx[MAX_FILES], n = 0, i;

	for (i = 0; i < MAX_FILES; i++)
		if (files[i].used && !files[i].bad)
			idx[n++] = i;
	return n ? &files[idx[rnd((size_t)n)]] : NULL;
}

static int pick_sv(void)
{
	int idx[MAX_SV], n = 0, i;

	for (i = 0; i < MAX_SV; i++)
		if (svs[i].used)
			idx[n++] = i;
	return idx[rnd((size_t)n)];
}

/*
 * Random bytes from the generator, and the marker of the file's kind at a
 * random stride and phase, so that copies straddle blocks and pages.
 */
static void make_data(unsigned char *buf, size_t len, int encrypted,
		      int compressible)
{
	const char *marker = encrypted ? enc_marker : ctl_marker;
	size_t i, stride, off;
	uint64_t r;

	for (i = 0; i < len; i += 8) {
		r = rnd64();
		memcpy(buf + i, &r, len - i < 8 ? len - i : 8);
	}
	/*
	 * Three quarters of each 256 bytes zero, the first quarter letters of a
	 * 16-letter alphabet: compresses about 4:1, and btrfs's heuristic
	 * (for the property and chattr +c), which samples 16 bytes at the
	 * start of every 256, sees 16 distinct bytes and calls it compressible.
	 */
	for (i = 0; compressible && i < len; i++)
		buf[i] = i % 256 < 64 ? (unsigned char)('a' + (buf[i] & 15)) : 0;
	stride = MARKER_LEN + 64 + rnd(3000);
	for (off = rnd(stride); off + MARKER_LEN <= len; off += stride)
		memcpy(buf + off, marker, MARKER_LEN);
}

/* ---- checking a file against the model ------------------------------------- */

/*
 * Read @f through the filesystem and compare it with the model.  Returns 1
 * if equal, else 0 with what differs in @why.
 */
static int file_equals(const struct sfile *f, char *why, size_t size)
{
	char path[PATH_MAX];
	ssize_t n;
	size_t d;
	int fd, e;

	file_path(path, sizeof(path), f);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		snprintf(why, size, "open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(e));
		return 0;
	}
	n = lab_pread_full(fd, rbuf, MAX_FILE + BLK, 0);
	e = errno;
	close(fd);
	if (n < 0) {
		snprintf(why, size, "read %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(e));
		return 0;
	}
	if ((size_t)n != f->size) {
		snprintf(why, size, "%s has %zd bytes, the model %zu", path, n,
			 f->size);
		return 0;
	}
	d = lab_first_diff(rbuf, f->data, f->size);
	if (d != f->size) {
		snprintf(why, size,
			 "%s (%zu bytes) differs from the model at byte %zu (block %zu): read %02x, expected %02x",
			 path, f->size, d, d / BLK, rbuf[d], f->data[d]);
		return 0;
	}
	return 1;
}

/* file_equals(), a difference being a failure, counted in mismatches. */
static int compare_file(const struct sfile *f, const char *when)
{
	char why[PATH_MAX + 200];

	if (file_equals(f, why, sizeof(why)))
		return 1;
	mismatches++;
	CHECK(0, "%s: %s (%s, %s)", when, why, km_names[f->km],
	      dummy ? "test key" : f->pol == 2 ? "key B" : f->pol ? "key A" : "unencrypted");
	return 0;
}

/* Every directory of every live subvolume lists exactly the model's names. */
static void compare_listings(const char *when)
{
	char path[PATH_MAX];
	struct dirent *de;
	int sv, dir, i, found, listed;
	DIR *d;

	for (sv = 0; sv < MAX_SV; sv++) {
		if (!svs[sv].used)
			continue;
		for (dir = 0; dir < NDIRS; dir++) {
			dir_path(path, sizeof(path), sv, dir);
			d = opendir(path);
			if (!CHECK(d != NULL, "%s: opendir %s: " LAB_ERR_FMT, when,
				   path, LAB_ERR_ARGS(errno))) {
				listing_mismatches++;
				continue;
			}
			listed = 0;
			while ((de = readdir(d))) {
				if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
					continue;
				listed++;
				found = 0;
				for (i = 0; i < MAX_FILES && !found; i++)
					found = files[i].used && files[i].sv == sv &&
						files[i].dir == dir &&
						!strcmp(files[i].name, de->d_name);
				if (!found) {
					listing_mismatches++;
					CHECK(0, "%s: %s/%s is not in the model", when,
					      path, de->d_name);
				}
			}
			closedir(d);
			found = 0;
			for (i = 0; i < MAX_FILES; i++)
				found += files[i].used && files[i].sv == sv &&
					 files[i].dir == dir;
			if (found != listed) {
				listing_mismatches++;
				CHECK(0, "%s: %s lists %d entries, the model has %d",
				      when, path, listed, found);
			}
		}
	}
}

/*
 * Every file against the model.  With @flags, also each file's inode flags
 * (after a remount everything is in the trees that TREE_SEARCH reads).
 * Returns the number of files compared.
 */
static int compare_all(const char *when, int flags)
{
	char path[PATH_MAX];
	uint64_t fl;
	struct stat st;
	int i, n = 0, ok = 0, nsv = 0, want_enc, want_ext;

	for (i = 0; i < MAX_FILES; i++) {
		const struct sfile *f = &files[i];

		if (!f->used || f->bad)
			continue;
		n++;
		ok += compare_file(f, when);
		if (!flags)
			continue;
		file_path(path, sizeof(path), f);
		if (!CHECK_OK(stat(path, &st), "stat %s", path) ||
		    !CHECK_OK(lab_btrfs_inode_flags(path, st.st_ino, &fl),
			      "inode flags of %s", path))
			continue;
		want_enc = f->pol != 0;
		want_ext = f->km == KM_EXTENT;
		if (!CHECK(!!(fl & LAB_BTRFS_INODE_ENCRYPT) == want_enc &&
			   !!(fl & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT) == want_ext,
			   "%s: %s: inode flags 0x%llx, the model says %s",
			   when, path, (unsigned long long)fl, km_names[f->km]))
			mismatches++;
	}
	compare_listings(when);
	for (i = 0; i < MAX_SV; i++)
		nsv += svs[i].used;
	printf("# %s: %d of %d files equal the model%s; %d subvolumes listed\n",
	       when, ok, n, flags ? ", inode flags checked" : "", nsv);
	return n;
}

/* ---- the operations ------------------------------------------------------------ */

/* Note an unexpected failure of an operation on @f: its contents are unknown now. */
static void op_failed(struct sfile *f, const char *what, const char *path, int e)
{
	CHECK(0, "op %lu: %s %s: " LAB_ERR_FMT, op_seq, what, path, LAB_ERR_ARGS(e));
	if (f)
		f->bad = 1;
}

static int open_file(struct sfile *f, int flags, char *path, size_t size)
{
	int fd;

	file_path(path, size, f);
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		op_failed(f, "open", path, errno);
	return fd;
}

/*
 * Data that compresses for a file with a compression property or flag
 * three times in four, else one time in six; counted.
 */
static int force_compressible;	/* the prologue's file: always */

static int draw_compressible(const struct sfile *f)
{
	int c = f->comp ? rnd(4) != 0 : rnd(6) == 0;

	if (force_compressible)
		c = 1;

	compressible_writes += c;
	return c;
}

static void do_write_file(struct sfile *f)
{
	char path[PATH_MAX];
	size_t off, len;
	int fd, direct = 0, comp;

	off = rnd(f->size + 64 * KiB);
	if (off >= MAX_FILE - 1)
		off = rnd(MAX_FILE / 2);
	len = 1 + rnd(MAX_WRITE);
	if (rnd(2)) {
		off -= off % BLK;
		len = (len + BLK - 1) / BLK * BLK;
		direct = rnd(8) == 0;
	}
	if (off + len > MAX_FILE)
		len = MAX_FILE - off;
	if (direct && len % BLK)
		direct = 0;
	comp = draw_compressible(f);
	make_data(wbuf, len, f->pol != 0, comp);
	printf("op %lu: write %zu at %zu%s%s to %s/%s/%s (%s)\n", op_seq, len, off,
	       direct ? " O_DIRECT" : "", comp ? ", compressible" : "",
	       svs[f->sv].name, dir_names[f->dir], f->name, km_names[f->km]);
	fd = open_file(f, O_WRONLY | (direct ? O_DIRECT : 0), path, sizeof(path));
	if (fd < 0)
		return;
	if (pwrite_all(fd, wbuf, len, (off_t)off) != 0) {
		op_failed(f, "pwrite", path, errno);
	} else {
		if (off + len > f->size)
			model_resize(f, off + len);
		memcpy(f->data + off, wbuf, len);
		direct_writes += direct;
	}
	close(fd);
}

/* The directories a new file may go to under the mount's current key mode. */
static int create_dirs(int *cand)
{
	int n = 0, d;

	for (d = 0; d < NDIRS; d++)
		if (!dir_policy[d] || !extent_keys ||
		    (d == D_A_INO) == (cur_mm == MM_INODE))
			cand[n++] = d;
	return n;
}

/* Create a file of @len bytes in @dir of subvolume @sv; NULL on failure. */
static struct sfile *create_file(int sv, int dir, size_t len)
{
	int km = cur_mm == MM_INODE || !extent_keys ? KM_INODE : KM_EXTENT;
	char path[PATH_MAX], name[64];
	struct sfile *f;
	int fd, comp;

	new_name(name, sizeof(name), dir);
	f = model_new(sv, dir, km);
	if (!f)
		lab_die("no free file slot");
	PATHF(f->name, "%s", name);
	comp = draw_compressible(f);
	make_data(wbuf, len, f->pol != 0, comp);
	printf("op %lu: create %s/%s/%s (%s), %zu bytes%s\n", op_seq,
	       svs[sv].name, dir_names[dir], name, km_names[f->km], len,
	       comp ? ", compressible" : "");
	fd = open_file(f, O_WRONLY | O_CREAT | O_EXCL, path, sizeof(path));
	if (fd < 0) {
		model_free(f);
		return NULL;
	}
	if (f->km == KM_INODE)
		svs[sv].inode_keys = 1;
	if (pwrite_all(fd, wbuf, len, 0) != 0) {
		op_failed(f, "write", path, errno);
	} else {
		model_resize(f, len);
		memcpy(f->data, wbuf, len);
	}
	close(fd);
	return f;
}

static void op_create(void)
{
	int cand[NDIRS], n = create_dirs(cand), dir, sv;
	struct sfile *f;

	dir = cand[rnd((size_t)n)];
	/*
	 * Files with per-inode keys go to sv only, which can then never be
	 * snapshotted: the snapshots stay free of them, so they can be.
	 */
	sv = (cur_mm == MM_INODE || !extent_keys) && dir_policy[dir] ?
	     0 : pick_sv();
	if (files_in_sv(sv) >= FILES_PER_SV) {
		printf("op %lu: create: %s is full, a write instead\n", op_seq,
		       svs[sv].name);
		f = pick_file();
		if (f)
			do_write_file(f);
		return;
	}
	create_file(sv, dir, rnd(4) ? rnd(MAX_CREATE) : rnd(200));
}

static void op_write(void)
{
	struct sfile *f = pick_file();

	if (f)
		do_write_file(f);
}

static void op_truncate(void)
{
	struct sfile *f = pick_file();
	char path[PATH_MAX];
	size_t size;

	if (!f)
		return;
	switch (rnd(4)) {
	case 0:
		size = rnd(MAX_FILE);
		break;
	case 1:
		size = rnd(f->size + 1) / BLK * BLK;
		break;
	default:
		size = rnd(f->size + 1);
		break;
	}
	file_path(path, sizeof(path), f);
	printf("op %lu: truncate %s (%s) from %zu to %zu\n", op_seq, path,
	       km_names[f->km], f->size, size);
	if (truncate(path, (off_t)size) != 0) {
		op_failed(f, "truncate", path, errno);
		return;
	}
	model_resize(f, size);
}

static void op_falloc(void)
{
	struct sfile *f = pick_file();
	char path[PATH_MAX];
	size_t off, len, end;
	int fd, mode, kind;

	if (!f)
		return;
	kind = (int)rnd(10);
	if (kind < 7) {
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		off = rnd(f->size + 1);
		len = 1 + rnd(f->size - off + 16 * KiB);
	} else {
		mode = kind == 7 ? 0 : FALLOC_FL_KEEP_SIZE;
		off = rnd(f->size + 32 * KiB);
		len = 1 + rnd(64 * KiB);
	}
	if (rnd(2)) {
		off -= off % BLK;
		len = (len + BLK - 1) / BLK * BLK;
	}
	if (off >= MAX_FILE)
		off = 0;
	if (off + len > MAX_FILE)
		len = MAX_FILE - off;
	printf("op %lu: fallocate %s %zu at %zu of %s/%s/%s (%s, %zu bytes)\n",
	       op_seq, mode & FALLOC_FL_PUNCH_HOLE ? "punch" :
	       mode ? "keep-size" : "extend", len, off, svs[f->sv].name,
	       dir_names[f->dir], f->name, km_names[f->km], f->size);
	fd = open_file(f, O_WRONLY, path, sizeof(path));
	if (fd < 0)
		return;
	if (fallocate(fd, mode, (off_t)off, (off_t)len) != 0) {
		op_failed(f, "fallocate", path, errno);
	} else if (mode & FALLOC_FL_PUNCH_HOLE) {
		end = off + len < f->size ? off + len : f->size;
		if (off < end)
			memset(f->data + off, 0, end - off);
	} else if (mode == 0 && off + len > f->size) {
		model_resize(f, off + len);
	}
	close(fd);
}

/* What FICLONERANGE from @s to @d must give: 0 or an errno. */
static int reflink_expect(const struct sfile *s, const struct sfile *d)
{
	if (!s->pol && !d->pol)
		return 0;
	if (!s->pol != !d->pol)
		return EINVAL;
	if (s->km == KM_INODE || d->km == KM_INODE)
		return EOPNOTSUPP;
	/* per extent: the policies differ at most in their master key */
	return 0;
}

/* FICLONERANGE of a random range of @s into @d. */
static void reflink_files(struct sfile *s, struct sfile *d)
{
	struct file_clone_range fcr = { 0 };
	char spath[PATH_MAX], dpath[PATH_MAX];
	size_t sblocks, pin, pout, len, oblocks;
	int sfd, dfd, expect, tries, ret, e;

	expect = reflink_expect(s, d);
	sblocks = s->size / BLK;
	if (!expect && !sblocks) {
		printf("op %lu: reflink: %s has no whole block, a write instead\n",
		       op_seq, s->name);
		do_write_file(d);
		return;
	}
	/* Whole blocks inside the source, to a block-aligned destination. */
	for (tries = 0; tries < 8; tries++) {
		pin = rnd(sblocks ? sblocks : 1);
		len = 1 + rnd(sblocks - pin < 32 ? sblocks - pin : 32);
		if (!sblocks)
			len = 1;
		oblocks = (d->size + BLK - 1) / BLK + 16;
		pout = rnd(oblocks);
		if ((pout + len) * BLK > MAX_FILE)
			pout = MAX_FILE / BLK - len;
		if (s != d || pout + len <= pin || pin + len <= pout)
			break;
	}
	if (s == d && !(pout + len <= pin || pin + len <= pout)) {
		printf("op %lu: reflink within %s: no disjoint range, a write instead\n",
		       op_seq, s->name);
		do_write_file(d);
		return;
	}
	printf("op %lu: reflink %zu blocks from block %zu of %s/%s/%s (%s) to block %zu of %s/%s/%s (%s): expect %s\n",
	       op_seq, len, pin, svs[s->sv].name, dir_names[s->dir], s->name,
	       km_names[s->km], pout, svs[d->sv].name, dir_names[d->dir],
	       d->name, km_names[d->km], expect ? lab_errname(expect) : "success");
	sfd = open_file(s, O_RDONLY, spath, sizeof(spath));
	if (sfd < 0)
		return;
	dfd = open_file(d, O_RDWR, dpath, sizeof(dpath));
	if (dfd < 0) {
		close(sfd);
		return;
	}
	fcr.src_fd = sfd;
	fcr.src_offset = pin * BLK;
	fcr.src_length = len * BLK;
	fcr.dest_offset = pout * BLK;
	errno = 0;
	ret = ioctl(dfd, FICLONERANGE, &fcr);
	e = errno;
	if (expect) {
		if (EXPECT_ERRNO(ret, e, expect,
				 "op %lu: FICLONERANGE %s -> %s (%s, key %d -> %s, key %d)",
				 op_seq, spath, dpath, km_names[s->km], s->pol,
				 km_names[d->km], d->pol)) {
			if (expect == EINVAL)
				reflink_einval++;
			else
				reflink_eopnotsupp++;
		} else if (ret == 0) {
			/* it happened: the model cannot tell what @d holds */
			d->bad = 1;
		}
	} else if (ret != 0) {
		op_failed(d, "FICLONERANGE into", dpath, e);
	} else {
		reflink_ok++;
		reflink_cross_key += s->pol != d->pol;
		if ((pout + len) * BLK > d->size)
			model_resize(d, (pout + len) * BLK);
		memmove(d->data + pout * BLK, s->data + pin * BLK, len * BLK);
	}
	close(dfd);
	close(sfd);
}

/*
 * A random live per-extent file of another master key than @s, or NULL:
 * rekeys leave each snapshot under one key, so that random pairs seldom
 * cross keys.
 */
static struct sfile *pick_other_key(const struct sfile *s)
{
	int idx[MAX_FILES], n = 0, i;

	for (i = 0; i < MAX_FILES; i++)
		if (files[i].used && !files[i].bad && files[i].pol &&
		    files[i].pol != s->pol && files[i].km == KM_EXTENT)
			idx[n++] = i;
	return n ? &files[idx[rnd((size_t)n)]] : NULL;
}

static void op_reflink(void)
{
	struct sfile *s = pick_file(), *d = rnd(5) ? pick_file() : s, *x;

	/* one time in three, into a file of the other key if there is one */
	if (s && s->pol && s->km == KM_EXTENT && rnd(3) == 0 &&
	    (x = pick_other_key(s)))
		d = x;
	if (s && d)
		reflink_files(s, d);
}

/*
 * Rename @f into @dir of its subvolume: over @t if not NULL (a file in
 * @dir), else to a new name.
 */
static void rename_file(struct sfile *f, int dir, struct sfile *t)
{
	char from[PATH_MAX], to[PATH_MAX], name[64];
	int expect;

	if (t)
		PATHF(name, "%s", t->name);
	else
		new_name(name, sizeof(name), dir);
	expect = svs[f->sv].pol[dir] && svs[f->sv].pol[dir] != f->pol ? EXDEV : 0;
	file_path(from, sizeof(from), f);
	lab_pathf(to, sizeof(to), "%s/%s/%s/%s", mnt, svs[f->sv].name,
		  dir_names[dir], name);
	printf("op %lu: rename %s (%s) to %s%s: expect %s\n", op_seq, from,
	       km_names[f->km], to, t ? " (replacing it)" : "",
	       expect ? lab_errname(expect) : "success");
	if (expect) {
		if (CHECK_ERRNO(rename(from, to), expect, "op %lu: rename %s -> %s",
				op_seq, from, to)) {
			rename_exdev++;
		} else if (access(from, F_OK) != 0) {
			/* it moved after all: the model cannot follow */
			f->bad = 1;
			if (t)
				t->bad = 1;
		}
		return;
	}
	if (rename(from, to) != 0) {
		op_failed(f, "rename", from, errno);
		return;
	}
	rename_ok++;
	if (t) {
		rename_replace++;
		model_free(t);
	}
	f->dir = dir;
	PATHF(f->name, "%s", name);
}

static void op_rename(void)
{
	struct sfile *f = pick_file(), *t = NULL;
	int cand[MAX_FILES], n = 0, i, dir;

	if (!f)
		return;
	dir = (int)rnd(NDIRS);
	if (rnd(4) == 0) {
		for (i = 0; i < MAX_FILES; i++)
			if (files[i].used && !files[i].bad && &files[i] != f &&
			    files[i].sv == f->sv && files[i].dir == dir)
				cand[n++] = i;
		if (n)
			t = &files[cand[rnd((size_t)n)]];
	}
	rename_file(f, dir, t);
}

static void op_unlink(void)
{
	struct sfile *f = pick_file();
	char path[PATH_MAX];

	if (!f || nfiles() <= MIN_FILES)
		return;
	file_path(path, sizeof(path), f);
	printf("op %lu: unlink %s (%s)\n", op_seq, path, km_names[f->km]);
	if (unlink(path) != 0) {
		op_failed(f, "unlink", path, errno);
		return;
	}
	model_free(f);
}

static void op_fsync(void)
{
	struct sfile *f = pick_file();
	char path[PATH_MAX];
	int fd, kind = (int)rnd(10);

	if (!f)
		return;
	printf("op %lu: %s %s/%s/%s (%s)\n", op_seq,
	       kind < 6 ? "fsync" : kind < 9 ? "fdatasync" : "syncfs",
	       svs[f->sv].name, dir_names[f->dir], f->name, km_names[f->km]);
	fd = open_file(f, O_RDWR, path, sizeof(path));
	if (fd < 0)
		return;
	if ((kind < 6 ? fsync(fd) : kind < 9 ? fdatasync(fd) : syncfs(fd)) != 0)
		op_failed(f, "fsync", path, errno);
	close(fd);
}

static int top_fd(void)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		CHECK(0, "open %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
	return fd;
}

static void op_snapshot(void)
{
	struct btrfs_ioctl_vol_args_v2 va;
	struct btrfs_ioctl_vol_args vd;
	int live = 0, oldest = -1, slot = -1, src, i, top, sfd;
	char path[PATH_MAX];

	for (i = 1; i < MAX_SV; i++) {
		if (svs[i].used) {
			live++;
			if (oldest < 0 || svs[i].gen < svs[oldest].gen)
				oldest = i;
		} else if (slot < 0) {
			slot = i;
		}
	}
	top = top_fd();
	if (top < 0)
		return;
	if (slot < 0) {
		/* three snapshots live: the oldest goes */
		printf("op %lu: delete snapshot %s\n", op_seq, svs[oldest].name);
		memset(&vd, 0, sizeof(vd));
		PATHF(vd.name, "%s", svs[oldest].name);
		if (!CHECK_OK(ioctl(top, BTRFS_IOC_SNAP_DESTROY, &vd),
			      "op %lu: BTRFS_IOC_SNAP_DESTROY %s", op_seq,
			      svs[oldest].name)) {
			close(top);
			return;
		}
		for (i = 0; i < MAX_FILES; i++)
			if (files[i].used && files[i].sv == oldest)
				model_free(&files[i]);
		svs[oldest].used = 0;
		snap_deleted++;
		slot = oldest;
	}
	src = pick_sv();
	if (svs[src].inode_keys) {
		memset(&va, 0, sizeof(va));
		lab_pathf(path, sizeof(path), "%s/%s", mnt, svs[src].name);
		va.fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		PATHF(va.name, "refused-%u", next_snap);
		printf("op %lu: snapshot %s (holds files with per-inode keys): must be refused\n",
		       op_seq, svs[src].name);
		if (CHECK_OK(va.fd, "op %lu: open %s", op_seq, path))
			CHECK_ERRNO(ioctl(top, BTRFS_IOC_SNAP_CREATE_V2, &va),
				    EOPNOTSUPP,
				    "op %lu: BTRFS_IOC_SNAP_CREATE_V2 of %s, which holds files with per-inode keys",
				    op_seq, svs[src].name);
		if (va.fd >= 0)
			close(va.fd);
		snap_refused++;
		close(top);
		return;
	}
	svs[slot].gen = next_snap;
	PATHF(svs[slot].name, "snap-%u", next_snap++);
	lab_pathf(path, sizeof(path), "%s/%s", mnt, svs[src].name);
	printf("op %lu: snapshot %s as %s (%d files; %d snapshots were live)\n",
	       op_seq, svs[src].name, svs[slot].name, files_in_sv(src), live);
	sfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!CHECK_OK(sfd, "op %lu: open %s", op_seq, path)) {
		close(top);
		return;
	}
	memset(&va, 0, sizeof(va));
	va.fd = sfd;
	PATHF(va.name, "%s", svs[slot].name);
	if (CHECK_OK(ioctl(top, BTRFS_IOC_SNAP_CREATE_V2, &va),
		     "op %lu: BTRFS_IOC_SNAP_CREATE_V2 of %s as %s", op_seq,
		     svs[src].name, svs[slot].name)) {
		svs[slot].used = 1;
		svs[slot].inode_keys = 0;
		memcpy(svs[slot].pol, svs[src].pol, sizeof(svs[slot].pol));
		memcpy(svs[slot].dcomp, svs[src].dcomp, sizeof(svs[slot].dcomp));
		for (i = 0; i < MAX_FILES; i++) {
			struct sfile *f = &files[i], *c;

			if (!f->used || f->sv != src)
				continue;
			c = model_new(slot, f->dir, f->km);
			if (!c)
				lab_die("no free file slot for the snapshot");
			*c = *f;
			c->sv = slot;
			c->data = lab_xmalloc(f->size ? f->size : 1);
			memcpy(c->data, f->data, f->size);
		}
	}
	close(sfd);
	close(top);
}

/* Does /proc/self/mounts show the mode @mm for the scratch mount? */
static int mounts_show(int mm)
{
	char *line, *save = NULL, *text;
	size_t len;
	int ok = 0;

	text = read_file("/proc/self/mounts", &len);
	if (!text)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *p = strchr(line, ' ');

		if (!p || strncmp(p + 1, mnt, strlen(mnt)) || p[1 + strlen(mnt)] != ' ')
			continue;
		if (mm == MM_INODE)
			ok = strstr(line, ",fscrypt_per_inode_keys") &&
			     !strstr(line, "fscrypt_extents_per_key=");
		else if (mm == MM_EXTENT_V1)
			ok = strstr(line, ",fscrypt_per_extent_keys") &&
			     strstr(line, ",fscrypt_extents_per_key=1");
		else
			ok = strstr(line, ",fscrypt_per_extent_keys") &&
			     !strstr(line, "fscrypt_extents_per_key=");
		if (!ok)
			printf("/proc/self/mounts: %s\n", line);
	}
	free(text);
	return ok;
}

static int remount_mode(int mm)
{
	printf("op %lu: remount: new files %s (%s)\n", op_seq, mm_names[mm],
	       mm_opts[mm]);
	if (!CHECK_OK(mount(dev, mnt, "btrfs", MS_REMOUNT, mm_opts[mm]),
		      "op %lu: remount %s with %s", op_seq, mnt, mm_opts[mm]))
		return -1;
	cur_mm = mm;
	CHECK(mounts_show(mm), "op %lu: /proc/self/mounts does not show %s",
	      op_seq, mm_opts[mm]);
	return 0;
}

static void op_remount(void)
{
	if (!extent_keys)
		return;
	remount_mode((cur_mm + 1 + (int)rnd(NMM - 1)) % NMM);
}

static void op_verify(void)
{
	struct sfile *f = pick_file();

	if (!f)
		return;
	printf("op %lu: verify %s/%s/%s (%s, %zu bytes)\n", op_seq,
	       svs[f->sv].name, dir_names[f->dir], f->name, km_names[f->km],
	       f->size);
	compare_file(f, "during the stress");
}

/*
 * BTRFS_IOC_FSCRYPT_REKEY of subvolume @sv from master key @from (1: A,
 * 2: B) to the other: every directory, symlink and file of the subvolume
 * whose context names @from goes to the other key (its extents stay under
 * the key they were written with).  The kernel refuses a subvolume that
 * holds (or held) a file with per-inode keys (EOPNOTSUPP), and one with an
 * encrypted inode still in use (EBUSY: retried after a syncfs); otherwise
 * the counts must be the model's: the directories under @from, their
 * names, and the files under @from wherever they are (an encrypted file may
 * sit in the plain directory).  Then the model follows.
 */
static void rekey_sv(int sv, int from)
{
	struct btrfs_ioctl_fscrypt_rekey_args a;
	struct fscrypt_policy_v2 to;
	int to_key = 3 - from, expect = svs[sv].inode_keys ? EOPNOTSUPP : 0;
	unsigned long want_dirs = 0, want_names = 0, want_files = 0, nbad = 0;
	int d, i, ret, e, tries, fd;

	for (d = 0; d < NDIRS; d++)
		want_dirs += svs[sv].pol[d] == from;
	for (i = 0; i < MAX_FILES; i++) {
		if (!files[i].used || files[i].sv != sv)
			continue;
		nbad += files[i].bad;
		want_files += files[i].pol == from;
		want_names += svs[sv].pol[files[i].dir] == from;
	}
	printf("op %lu: rekey %s from key %c to key %c (%lu directories, %lu names, %lu files under key %c): expect %s\n",
	       op_seq, svs[sv].name, 'A' + from - 1, 'A' + to_key - 1, want_dirs,
	       want_names, want_files, 'A' + from - 1,
	       expect ? lab_errname(expect) : "success");
	lab_default_policy(&to, to_key == 1 ? id_a : id_b);
	for (tries = 0;; tries++) {
		lab_rekey_args(&a, svs[sv].name, from == 1 ? id_a : id_b, &to);
		errno = 0;
		ret = lab_rekey_at(mnt, &a);
		e = errno;
		if (ret == 0 || e != EBUSY || expect || tries == 3)
			break;
		printf("op %lu: rekey of %s: EBUSY (an inode in use), again after a syncfs\n",
		       op_seq, svs[sv].name);
		fd = top_fd();
		if (fd >= 0) {
			CHECK_OK(syncfs(fd), "syncfs %s", mnt);
			close(fd);
		}
		lab_sleep_ms(200);
	}
	if (ret && e == ENOTTY && !rekeys_done && !rekeys_eopnotsupp) {
		printf("# the kernel has no BTRFS_IOC_FSCRYPT_REKEY (ENOTTY): no rekeys in this run\n");
		rekey_ok = 0;
		return;
	}
	if (expect) {
		if (EXPECT_ERRNO(ret, e, expect,
				 "op %lu: rekey of %s, which holds files with per-inode keys",
				 op_seq, svs[sv].name))
			rekeys_eopnotsupp++;
		CHECK(lab_rekey_moved_nothing(&a),
		      "op %lu: the refused rekey of %s reports " LAB_REKEY_COUNTS_FMT,
		      op_seq, svs[sv].name, LAB_REKEY_COUNTS_ARGS(&a));
		return;
	}
	if (ret && e == EBUSY) {
		rekeys_busy++;
		CHECK(lab_rekey_moved_nothing(&a),
		      "op %lu: the rekey of %s refused with EBUSY reports " LAB_REKEY_COUNTS_FMT,
		      op_seq, svs[sv].name, LAB_REKEY_COUNTS_ARGS(&a));
		return;
	}
	if (!CHECK_OK(ret, "op %lu: rekey of %s from key %c to key %c (moved " LAB_REKEY_COUNTS_FMT ")",
		      op_seq, svs[sv].name, 'A' + from - 1, 'A' + to_key - 1,
		      LAB_REKEY_COUNTS_ARGS(&a))) {
		/* moved part way: the model cannot tell which key is where */
		for (i = 0; i < MAX_FILES; i++)
			if (files[i].used && files[i].sv == sv)
				files[i].bad = 1;
		return;
	}
	printf("op %lu: rekey of %s moved " LAB_REKEY_COUNTS_FMT "\n", op_seq,
	       svs[sv].name, LAB_REKEY_COUNTS_ARGS(&a));
	CHECK(a.nr_dirs == want_dirs && a.nr_symlinks == 0 &&
	      (nbad || (a.nr_names == want_names && a.nr_files == want_files)),
	      "op %lu: the rekey of %s moved " LAB_REKEY_COUNTS_FMT "; the model has %lu directories (%lu names), 0 symlinks, %lu files under key %c%s",
	      op_seq, svs[sv].name, LAB_REKEY_COUNTS_ARGS(&a), want_dirs,
	      want_names, want_files, 'A' + from - 1,
	      nbad ? " (some files unknown: names and files not compared)" : "");
	rekeys_done++;
	rekey_dirs_moved += a.nr_dirs;
	rekey_files_moved += a.nr_files;
	for (d = 0; d < NDIRS; d++)
		if (svs[sv].pol[d] == from)
			svs[sv].pol[d] = to_key;
	for (i = 0; i < MAX_FILES; i++)
		if (files[i].used && files[i].sv == sv && files[i].pol == from)
			files[i].pol = to_key;
}

static void op_rekey(void)
{
	int sv, cand[2], n = 0, k, d;

	if (!rekey_ok) {
		op_write();
		return;
	}
	sv = pick_sv();
	for (k = 1; k <= 2; k++)
		for (d = 0; d < NDIRS; d++)
			if (svs[sv].pol[d] == k) {
				cand[n++] = k;
				break;
			}
	if (!n)
		return;
	rekey_sv(sv, cand[rnd((size_t)n)]);
}

#define COMPR_PROP "btrfs.compression"
static const char *const compr_vals[] = { "zlib", "lzo", "zstd", "none", "" };
#define NCOMPR_VALS (sizeof(compr_vals) / sizeof(compr_vals[0]))

/*
 * The btrfs.compression property of @path set to @val ("" removes it;
 * "none" keeps the file from being compressed).  0 or -1.
 */
static int set_compr_prop(const char *path, const char *val)
{
	int ret;

	printf("op %lu: property %s=%s on %s\n", op_seq, COMPR_PROP,
	       *val ? val : "(removed)", path);
	errno = 0;
	ret = *val ? setxattr(path, COMPR_PROP, val, strlen(val), 0) :
		     removexattr(path, COMPR_PROP);
	if (ret && !*val && errno == ENODATA)
		ret = 0;	/* it was not set */
	return CHECK_OK(ret, "op %lu: %s %s=%s on %s", op_seq,
			*val ? "setxattr" : "removexattr", COMPR_PROP, val, path) ? 0 : -1;
}

/*
 * Compression settings change: the property on a file or a directory (new
 * files inherit it), or chattr +c / +m on a file.  Encrypted files are
 * compressed exactly as plain ones (LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE);
 * every change must be taken.  Later writes to such files are compressible
 * three times in four (draw_compressible()).
 */
static void op_compress(void)
{
	struct sfile *f = pick_file();
	char path[PATH_MAX];
	const char *val = compr_vals[rnd(NCOMPR_VALS)];
	int kind = (int)rnd(10), sv, dir, fd;
	unsigned int fl;

	if (!compress_ok || !f) {
		op_write();
		return;
	}
	if (kind < 3) {
		sv = pick_sv();
		dir = (int)rnd(NDIRS);
		dir_path(path, sizeof(path), sv, dir);
		if (set_compr_prop(path, val) == 0) {
			svs[sv].dcomp[dir] = *val && strcmp(val, "none");
			compress_dir_props++;
		}
		return;
	}
	file_path(path, sizeof(path), f);
	if (kind < 8) {
		if (set_compr_prop(path, val) == 0) {
			f->comp = *val && strcmp(val, "none");
			compress_props++;
		}
		return;
	}
	printf("op %lu: chattr %s %s (%s)\n", op_seq, kind == 8 ? "+c" : "+m", path,
	       km_names[f->km]);
	fd = open_file(f, O_RDONLY, path, sizeof(path));
	if (fd < 0)
		return;
	if (CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &fl), "op %lu: FS_IOC_GETFLAGS %s",
		     op_seq, path)) {
		if (kind == 8)
			fl = (fl & ~FS_NOCOMP_FL) | FS_COMPR_FL;
		else
			fl = (fl & ~FS_COMPR_FL) | FS_NOCOMP_FL;
		if (CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &fl),
			     "op %lu: FS_IOC_SETFLAGS 0x%x (chattr %s) on %s", op_seq,
			     fl, kind == 8 ? "+c" : "+m", path)) {
			f->comp = kind == 8;
			compress_flags++;
		}
	}
	close(fd);
}

/* Compressed (FIEMAP: encoded) extents of @f, or -1. */
static long compressed_extents(const struct sfile *f)
{
	struct raw_extent *ext = NULL;
	char path[PATH_MAX];
	size_t n = 0, i;
	long c = 0;

	file_path(path, sizeof(path), f);
	if (raw_fiemap(path, &ext, &n))
		return -1;
	for (i = 0; i < n; i++)
		c += !!(ext[i].flags & FIEMAP_EXTENT_ENCODED);
	free(ext);
	return c;
}

static enum op draw_op(void)
{
	unsigned int total = 0, r, i;

	for (i = 0; i < NOPS; i++)
		total += op_weight[i];
	r = (unsigned int)rnd(total);
	for (i = 0; i < NOPS; i++) {
		if (r < op_weight[i])
			return (enum op)i;
		r -= op_weight[i];
	}
	return OP_WRITE;
}

static void (*const op_fns[NOPS])(void) = {
	[OP_CREATE] = op_create,
	[OP_WRITE] = op_write,
	[OP_TRUNCATE] = op_truncate,
	[OP_FALLOC] = op_falloc,
	[OP_REFLINK] = op_reflink,
	[OP_RENAME] = op_rename,
	[OP_UNLINK] = op_unlink,
	[OP_FSYNC] = op_fsync,
	[OP_SNAPSHOT] = op_snapshot,
	[OP_REMOUNT] = op_remount,
	[OP_VERIFY] = op_verify,
	[OP_REKEY] = op_rekey,
	[OP_COMPRESS] = op_compress,
};

/* Number and count the next operation. */
static void begin_op(enum op op)
{
	op_seq++;
	op_count[op]++;
}

/*
 * Before the random operations: files in every directory, of both key
 * modes, and each outcome of reflink and rename that the series defines,
 * once, so that a short or slow run meets them all too.
 */
static void prologue(void)
{
	struct sfile *ae0, *ae1, *be, *p0, *p1, *ai;

	phase("prologue");
	begin_op(OP_CREATE);
	ae0 = create_file(0, D_A_EXT, 64 * KiB + 100);
	begin_op(OP_CREATE);
	ae1 = create_file(0, D_A_EXT, 20 * KiB);
	begin_op(OP_CREATE);
	be = create_file(0, D_B_EXT, 40 * KiB);
	begin_op(OP_CREATE);
	p0 = create_file(0, D_PLAIN, 30 * KiB);
	begin_op(OP_CREATE);
	p1 = create_file(0, D_PLAIN, 150);
	/* a snapshot before sv has per-inode keys: it can have snapshots */
	if (extent_keys) {
		begin_op(OP_SNAPSHOT);
		op_snapshot();
		begin_op(OP_REMOUNT);
		remount_mode(MM_INODE);
	}
	begin_op(OP_CREATE);
	ai = create_file(0, D_A_INO, 50 * KiB);
	begin_op(OP_CREATE);
	create_file(0, D_A_INO, 8 * KiB);
	if (extent_keys) {
		begin_op(OP_REMOUNT);
		remount_mode(MM_EXTENT);
	}
	/* sv holds per-inode keys now: its snapshot is refused */
	begin_op(OP_SNAPSHOT);
	op_snapshot();
	if (!ae0 || !ae1 || !be || !p0 || !p1 || !ai) {
		CHECK(0, "the prologue could not create its files");
		return;
	}
	begin_op(OP_REFLINK);
	reflink_files(ae0, ae1);	/* one policy, per extent: done */
	begin_op(OP_REFLINK);
	reflink_files(ae0, be);		/* across master keys: done */
	begin_op(OP_REFLINK);
	reflink_files(ai, ae1);		/* per-inode keys: EOPNOTSUPP */
	begin_op(OP_REFLINK);
	reflink_files(p0, ae0);		/* unencrypted into encrypted: EINVAL */
	begin_op(OP_REFLINK);
	reflink_files(p0, p1);		/* unencrypted: done */
	begin_op(OP_RENAME);
	rename_file(p1, D_A_EXT, NULL);	/* unencrypted into encrypted: EXDEV */
	begin_op(OP_RENAME);
	rename_file(be, D_A_EXT, NULL);	/* across policies: EXDEV */
	begin_op(OP_RENAME);
	rename_file(ae1, D_A_INO, NULL);	/* one policy: done */
	if (rekey_ok) {
		int s;

		/* a snapshot free of per-inode keys moves; sv is refused */
		for (s = 1; s < MAX_SV && !svs[s].used; s++)
			;
		if (s < MAX_SV) {
			begin_op(OP_REKEY);
			rekey_sv(s, 1);
		}
		begin_op(OP_REKEY);
		rekey_sv(0, 1);
	}
	if (compress_ok) {
		char path[PATH_MAX];
		struct sfile *cf;
		int fd;

		/* zstd on sv/a-ext, inherited by a file of compressible data */
		begin_op(OP_COMPRESS);
		dir_path(path, sizeof(path), 0, D_A_EXT);
		if (set_compr_prop(path, "zstd") == 0) {
			svs[0].dcomp[D_A_EXT] = 1;
			compress_dir_props++;
		}
		begin_op(OP_CREATE);
		force_compressible = 1;
		cf = create_file(0, D_A_EXT, 128 * KiB);
		force_compressible = 0;
		if (cf) {
			fd = open_file(cf, O_RDONLY, path, sizeof(path));
			if (fd >= 0) {
				CHECK_OK(fsync(fd), "fsync %s", path);
				close(fd);
			}
			prologue_compressed = compressed_extents(cf);
			printf("# prologue: %s (%s, property zstd inherited): %ld compressed extents\n",
			       path, km_names[cf->km], prologue_compressed);
			CHECK(prologue_compressed > 0,
			      "%s: 128 KiB of compressible data under the inherited property zstd, fsynced, has no compressed extent (FIEMAP)",
			      path);
		}
		/* lzo on a file of key B, chattr +c on one of key A */
		begin_op(OP_COMPRESS);
		file_path(path, sizeof(path), be);
		if (!be->bad && set_compr_prop(path, "lzo") == 0) {
			be->comp = 1;
			compress_props++;
		}
	}
}

/* ---- the background children ------------------------------------------------------ */

static int balancer(void)
{
	struct btrfs_ioctl_balance_args ba;
	unsigned int kind = 0;
	int fd = top_fd(), ret, e;

	if (fd < 0)
		return 1;
	while (!sh->stop) {
		memset(&ba, 0, sizeof(ba));
		switch (kind++ % 4) {
		case 0:		/* everything at most half full */
			ba.flags = BTRFS_BALANCE_DATA | BTRFS_BALANCE_METADATA |
				   BTRFS_BALANCE_SYSTEM;
			ba.data.flags = BTRFS_BALANCE_ARGS_USAGE;
			ba.data.usage = 50;
			ba.meta = ba.data;
			ba.sys = ba.data;
			break;
		case 1:		/* all data */
			ba.flags = BTRFS_BALANCE_DATA;
			break;
		case 2:		/* all metadata (and system, as btrfs-progs does) */
			ba.flags = BTRFS_BALANCE_METADATA | BTRFS_BALANCE_SYSTEM;
			break;
		default:	/* data at most 90% full */
			ba.flags = BTRFS_BALANCE_DATA;
			ba.data.flags = BTRFS_BALANCE_ARGS_USAGE;
			ba.data.usage = 90;
			break;
		}
		errno = 0;
		ret = ioctl(fd, BTRFS_IOC_BALANCE_V2, &ba);
		e = errno;
		if (ret == 0) {
			sh->balances++;
			sh->chunks_relocated += (long)ba.stat.completed;
		} else if (ret < 0 && e == ECANCELED) {
			sh->balance_cancelled++;
			sh->chunks_relocated += (long)ba.stat.completed;
		} else {
			sh->balance_errors++;
			printf("balancer: BTRFS_IOC_BALANCE_V2 (kind %u) returned %d, " LAB_ERR_FMT "\n",
			       (kind - 1) % 4, ret, LAB_ERR_ARGS(e));
		}
		if (!sh->stop)
			lab_sleep_ms(500);
	}
	close(fd);
	return 0;
}

static int scrubber(void)
{
	struct btrfs_ioctl_scrub_args sa;
	const struct btrfs_scrub_progress *p = &sa.progress;
	unsigned long long errs;
	int fd = top_fd(), ret, e;

	if (fd < 0)
		return 1;
	while (!sh->stop) {
		memset(&sa, 0, sizeof(sa));
		sa.devid = 1;
		sa.start = 0;
		sa.end = (uint64_t)-1;
		errno = 0;
		ret = ioctl(fd, BTRFS_IOC_SCRUB, &sa);
		e = errno;
		errs = p->read_errors + p->csum_errors + p->verify_errors +
		       p->super_errors + p->malloc_errors +
		       p->uncorrectable_errors + p->unverified_errors;
		sh->scrub_errors += errs;
		sh->scrub_bytes += p->data_bytes_scrubbed + p->tree_bytes_scrubbed;
		if (errs)
			printf("scrubber: errors: read %llu csum %llu verify %llu super %llu malloc %llu uncorrectable %llu unverified %llu corrected %llu\n",
			       (unsigned long long)p->read_errors,
			       (unsigned long long)p->csum_errors,
			       (unsigned long long)p->verify_errors,
			       (unsigned long long)p->super_errors,
			       (unsigned long long)p->malloc_errors,
			       (unsigned long long)p->uncorrectable_errors,
			       (unsigned long long)p->unverified_errors,
			       (unsigned long long)p->corrected_errors);
		if (ret == 0) {
			sh->scrubs++;
		} else if (e == ECANCELED) {
			sh->scrub_cancelled++;
		} else {
			sh->scrub_fails++;
			printf("scrubber: BTRFS_IOC_SCRUB: " LAB_ERR_FMT "\n",
			       LAB_ERR_ARGS(e));
		}
		if (!sh->stop)
			lab_sleep_ms(500);
	}
	close(fd);
	return 0;
}

static int dropper(void)
{
	int fd;

	while (!sh->stop) {
		lab_sleep_ms(1000 + (long)(rnd64() % 1000));
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "3", 1) != 1) {
			sh->drop_errors++;
			printf("dropper: drop_caches: " LAB_ERR_FMT "\n",
			       LAB_ERR_ARGS(errno));
		} else {
			sh->drops++;
		}
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

#define CHILDREN 3
static const char *const child_names[CHILDREN] = { "balancer", "scrubber", "dropper" };

/* A background child (lab_child_start(): never the parent's exit handlers). */
static int child_main(void *arg)
{
	int i = (int)(intptr_t)arg;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	rng ^= (uint64_t)(i + 1) << 40;
	return i == 0 ? balancer() : i == 1 ? scrubber() : dropper();
}

/*
 * Stop the children: tell them, cancel a running balance or scrub (again
 * and again: one may just be starting), and wait.  Returns -1 if one is
 * still there after STOP_GRACE_S (stuck in the kernel: nothing after is
 * safe).
 */
static int stop_children(pid_t *pids)
{
	long long deadline = lab_now_ms() + STOP_GRACE_S * 1000LL;
	int left = CHILDREN, st, i, fd;
	pid_t r;

	sh->stop = 1;
	fd = top_fd();
	while (left > 0 && lab_now_ms() < deadline) {
		if (fd >= 0) {
			int cancel = BTRFS_BALANCE_CTL_CANCEL;

			ioctl(fd, BTRFS_IOC_BALANCE_CTL, cancel);
			ioctl(fd, BTRFS_IOC_SCRUB_CANCEL, 0);
		}
		while ((r = waitpid(-1, &st, WNOHANG)) > 0) {
			for (i = 0; i < CHILDREN; i++) {
				if (pids[i] != r)
					continue;
				pids[i] = 0;
				left--;
				if (WIFSIGNALED(st))
					CHECK(0, "%s killed by signal %d", child_names[i],
					      WTERMSIG(st));
				else
					CHECK(WEXITSTATUS(st) == 0, "%s exited with %d",
					      child_names[i], WEXITSTATUS(st));
			}
		}
		if (left > 0)
			lab_sleep_ms(200);
	}
	if (fd >= 0)
		close(fd);
	for (i = 0; i < CHILDREN; i++) {
		if (!pids[i])
			continue;
		CHECK(0, "%s still running %d s after the stop: deadlock?",
		      child_names[i], STOP_GRACE_S);
		run("cat /proc/%d/stack", (int)pids[i]);
		kill(pids[i], SIGKILL);
	}
	return left ? -1 : 0;
}

/* ---- setup, sentinels, the final checks --------------------------------------------- */

static void make_markers(void)
{
	size_t n;

	lab_random_hex(tag, TAG_HEX / 2);
	n = (size_t)snprintf(enc_marker, sizeof(enc_marker),
			     "<stress-ENCRYPTED-PLAINTEXT:%s:", tag);
	while (n < MARKER_LEN) {
		enc_marker[n] = (char)('A' + n % 26);
		n++;
	}
	n = (size_t)snprintf(ctl_marker, sizeof(ctl_marker),
			     "<stress-CONTROL-PLAINTEXT:%s:", tag);
	while (n < MARKER_LEN) {
		ctl_marker[n] = (char)('a' + n % 26);
		n++;
	}
	PATHF(enc_name_pfx, "e-%s-", tag);
	PATHF(ctl_name_pfx, "p-%s-", tag);
	printf("run tag %s\nencrypted files' marker \"%s\"\ncontrol marker \"%s\"\nnames \"%s<n>\" (encrypted directories), \"%s<n>\" (unencrypted)\n",
	       tag, enc_marker, ctl_marker, enc_name_pfx, ctl_name_pfx);
}

/*
 * Under test_dummy_encryption: @path has the test policy (@want 1: a v2
 * policy, the same for every directory, on which setting policy A fails
 * with EEXIST) or none (@want 0: a subvolume's top directory).
 */
static void dummy_policy(const char *path, int want)
{
	static uint8_t test_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	static int have_id;
	struct fscrypt_get_policy_ex_arg pa;
	char hex[2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1];
	int ret, e;

	memset(&pa, 0, sizeof(pa));
	errno = 0;
	ret = lab_get_policy_ex(path, &pa);
	e = errno;
	if (!want) {
		EXPECT_ERRNO(ret, e, ENODATA, "the top directory %s is not encrypted", path);
		return;
	}
	if (!EXPECT_OK(ret, e, "the policy of %s", path) ||
	    !CHECK(pa.policy.version == FSCRYPT_POLICY_V2,
		   "%s: policy version %u, not 2", path, pa.policy.version))
		return;
	if (!have_id) {
		memcpy(test_id, pa.policy.v2.master_key_identifier, sizeof(test_id));
		have_id = 1;
		lab_config_note("%s and the other directories have the test policy (v2, test key %s): it is the test's policy\n",
				path, lab_hex(hex, test_id, sizeof(test_id)));
	}
	CHECK(!memcmp(test_id, pa.policy.v2.master_key_identifier, sizeof(test_id)),
	      "%s has another key than the test key", path);
	CHECK_ERRNO(lab_set_policy(path, id_a), EEXIST,
		    "setting policy A on %s, which has the test policy", path);
}

static void setup_tree(void)
{
	struct btrfs_ioctl_vol_args va;
	char path[PATH_MAX];
	int top, d;

	if (!CHECK_OK(lab_add_raw_key(mnt, key_b, sizeof(key_b), id_b),
		      "add master key B"))
		lab_die("cannot add the second key");
	top = top_fd();
	if (top < 0)
		lab_die("cannot open %s", mnt);
	memset(&va, 0, sizeof(va));
	PATHF(va.name, "sv");
	if (!CHECK_OK(ioctl(top, BTRFS_IOC_SUBVOL_CREATE, &va), "create subvolume sv"))
		lab_die("cannot create the subvolume");
	close(top);
	svs[0].used = 1;
	PATHF(svs[0].name, "sv");
	memcpy(svs[0].pol, dir_policy, sizeof(svs[0].pol));
	if (dummy) {
		PATHF(path, "%s/sv", mnt);
		dummy_policy(path, 0);
	}
	for (d = 0; d < NDIRS; d++) {
		dir_path(path, sizeof(path), 0, d);
		if (dummy) {
			if (!CHECK_OK(mkdir(path, 0755), "mkdir %s", path))
				lab_die("cannot make the directories");
			dummy_policy(path, 1);
			continue;
		}
		if (!CHECK_OK(mkdir(path, 0755), "mkdir %s", path) ||
		    (dir_policy[d] &&
		     !CHECK_OK(lab_set_policy(path, dir_policy[d] == 1 ? id_a : id_b),
			       "policy on %s", path)))
			lab_die("cannot make the directories");
	}
}

/*
 * A file of @copies markers back to back at an odd offset, written,
 * fsynced, read back; returns the marker copies it holds.
 */
static size_t write_marker_file(const char *path, const char *marker,
				size_t copies)
{
	size_t len = 100 + copies * MARKER_LEN + 37, i, got;
	unsigned char *buf = lab_xmalloc(len), *back;
	size_t blen;

	memset(buf, '.', len);
	for (i = 0; i < copies; i++)
		memcpy(buf + 100 + i * MARKER_LEN, marker, MARKER_LEN);
	got = count_occurrences(buf, len, marker, MARKER_LEN);
	if (!CHECK_OK(write_file(path, buf, len), "write %s", path) ||
	    !CHECK_OK(fsync_path(path), "fsync %s", path)) {
		free(buf);
		return 0;
	}
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	back = read_file(path, &blen);
	CHECK(back && blen == len && !memcmp(back, buf, len),
	      "%s does not read back as written", path);
	free(back);
	free(buf);
	return got;
}

/*
 * `btrfs scrub start -B -R`: every error counter of its raw report must be
 * 0, and it must have scrubbed data.  Returns the errors (at least 1 if the
 * report could not be read).
 */
static unsigned long long final_scrub(void)
{
	static const char *const counters[] = { "read_errors", "csum_errors",
		"verify_errors", "super_errors", "malloc_errors",
		"uncorrectable_errors", "unverified_errors" };
	unsigned long long errs = 0, v, data = 0;
	char cmd[PATH_MAX + 64], *out = NULL, *p, key[64];
	size_t i, seen = 0;
	int st;

	PATHF(cmd, "btrfs scrub start -B -R %s", mnt);
	st = lab_run_capture(cmd, NULL, &out);
	for (i = 0; out && i < sizeof(counters) / sizeof(counters[0]); i++) {
		PATHF(key, "%s: ", counters[i]);
		p = strstr(out, key);
		if (!p)
			continue;
		seen++;
		v = strtoull(p + strlen(key), NULL, 10);
		errs += v;
	}
	p = out ? strstr(out, "data_bytes_scrubbed: ") : NULL;
	if (p)
		data = strtoull(p + strlen("data_bytes_scrubbed: "), NULL, 10);
	CHECK(st == 0, "btrfs scrub start -B: exit status %d", st);
	CHECK(errs == 0, "the final scrub found %llu errors", errs);
	if (!CHECK(seen == sizeof(counters) / sizeof(counters[0]) && data > 0,
		   "the final scrub's report has %zu of the %zu error counters and %llu data bytes scrubbed: cannot tell",
		   seen, sizeof(counters) / sizeof(counters[0]), data) && !errs)
		errs = 1;
	if (st != 0 && !errs)
		errs = 1;
	free(out);
	return errs;
}

/* `btrfs check --readonly`: 0 if clean, else the error lines (at least 1). */
static long final_check(void)
{
	char why[256], *out = NULL, *line, *save = NULL;
	long errs = 0;
	int st;

	if (!CHECK(lab_btrfs_progs_patched(why, sizeof(why)),
		   "cannot run btrfs check: %s", why))
		return 1;
	printf("btrfs check --readonly of %s, unmounted:\n", dev);
	st = lab_run_capture("btrfs check --readonly", dev, &out);
	if (st == 0 && out && strstr(out, "no error found")) {
		free(out);
		return 0;
	}
	for (line = out ? strtok_r(out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		errs += strstr(line, "ERROR") || strstr(line, "error") ||
			strstr(line, "mismatch");
	free(out);
	if (!errs)
		errs = 1;
	CHECK(0, "btrfs check --readonly %s: exit status %d, not clean (output above)",
	      dev, st);
	return errs;
}

struct scan_result {
	long long leak_hits;
	int control_found;
};

static struct scan_result leak_scan(size_t enc_live_copies, size_t sentinels,
				    size_t control_copies)
{
	struct raw_needle nd[5];
	struct scan_result r = { 0, 0 };
	size_t i;

	memset(nd, 0, sizeof(nd));
	nd[0] = (struct raw_needle){ .label = "run tag", .data = tag, .len = TAG_HEX };
	nd[1] = (struct raw_needle){ .label = "encrypted marker", .data = enc_marker, .len = MARKER_LEN };
	nd[2] = (struct raw_needle){ .label = "encrypted name", .data = enc_name_pfx, .len = strlen(enc_name_pfx) };
	nd[3] = (struct raw_needle){ .label = "control marker", .data = ctl_marker, .len = MARKER_LEN };
	nd[4] = (struct raw_needle){ .label = "unencrypted name", .data = ctl_name_pfx, .len = strlen(ctl_name_pfx) };
	printf("== raw scan of %s: the encrypted files hold the marker %zu times (%zu of them in the sentinels), the control file %zu times\n",
	       dev, enc_live_copies, sentinels, control_copies);
	if (!CHECK_OK(raw_scan_anchored(dev, nd, 5), "scanning %s", dev)) {
		r.leak_hits = -1;
		return r;
	}
	for (i = 0; i < 5; i++) {
		printf("  %-17s %.40s%s: %lld", nd[i].label, (const char *)nd[i].data,
		       nd[i].len > 40 ? "..." : "", nd[i].count);
		if (nd[i].count)
			printf(", first at device offset %llu",
			       (unsigned long long)nd[i].offs[0]);
		printf("\n");
	}
	r.leak_hits = nd[1].count + nd[2].count;
	CHECK(nd[1].count == 0, "LEAK: the plaintext marker of encrypted files is on %s %lld times, first at device offset %llu",
	      dev, nd[1].count, (unsigned long long)nd[1].offs[0]);
	CHECK(nd[2].count == 0, "LEAK: encrypted file names are on %s in plaintext %lld times, first at device offset %llu",
	      dev, nd[2].count, (unsigned long long)nd[2].offs[0]);
	r.control_found = nd[3].count >= (long long)control_copies &&
			  control_copies > 0 && nd[4].count > 0;
	CHECK(r.control_found, "control: the unencrypted control file holds the control marker %zu times, the scan finds it %lld times, and unencrypted names %lld times: the scan is blind, its 0 proves nothing",
	      control_copies, nd[3].count, nd[4].count);
	return r;
}

static void write_figures(double secs, unsigned long ops, long long leak_hits,
			  int control_found, int files_checked,
			  unsigned long long scrub_errors, long check_errors)
{
	char path[PATH_MAX];
	const char *p = getenv("STRESS_FIGURES");
	FILE *fp;

	if (!p || !*p) {
		if (!getenv("RESULTS") || !*getenv("RESULTS")) {
			printf("# no RESULTS and no STRESS_FIGURES: figures not written\n");
			return;
		}
		PATHF(path, "%s/stress-figures.tsv", getenv("RESULTS"));
		p = path;
	}
	fp = fopen(p, "w");
	if (!CHECK(fp != NULL, "cannot write %s: " LAB_ERR_FMT, p, LAB_ERR_ARGS(errno)))
		return;
	fprintf(fp, "seconds\t%.0f\n", secs);
	fprintf(fp, "ops\t%lu\n", ops);
	fprintf(fp, "balances\t%ld\n", sh->balances);
	fprintf(fp, "scrubs\t%ld\n", sh->scrubs);
	fprintf(fp, "scrub_errors\t%llu\n", scrub_errors);
	fprintf(fp, "check_errors\t%ld\n", check_errors);
	fprintf(fp, "leak_hits\t%lld\n", leak_hits);
	fprintf(fp, "control_found\t%d\n", control_found);
	fprintf(fp, "files_checked\t%d\n", files_checked);
	fprintf(fp, "mismatches\t%lu\n", mismatches + listing_mismatches);
	/* what issue #36 added, and the background's work, counted */
	fprintf(fp, "rekeys\t%lu\n", rekeys_done);
	fprintf(fp, "rekeys_refused\t%lu\n", rekeys_eopnotsupp);
	fprintf(fp, "rekeys_busy\t%lu\n", rekeys_busy);
	fprintf(fp, "rekey_files_moved\t%lu\n", rekey_files_moved);
	fprintf(fp, "reflinks\t%lu\n", reflink_ok);
	fprintf(fp, "reflinks_cross_key\t%lu\n", reflink_cross_key);
	fprintf(fp, "compress_changes\t%lu\n", compress_props + compress_dir_props +
		compress_flags);
	fprintf(fp, "compressible_writes\t%lu\n", compressible_writes);
	fprintf(fp, "compressed_extents_prologue\t%ld\n", prologue_compressed);
	fprintf(fp, "compressed_extents_end\t%ld\n", end_comp_extents);
	fprintf(fp, "compressed_files_end\t%ld\n", end_comp_files);
	fprintf(fp, "chunks_relocated\t%ld\n", sh->chunks_relocated);
	fprintf(fp, "scrub_bytes\t%llu\n", sh->scrub_bytes);
	fclose(fp);
	printf("# figures written to %s\n", p);
}

/* The comparison must see a difference: one file against a changed model. */
static void comparator_control(void)
{
	char why[PATH_MAX + 200];
	struct sfile *f = NULL;
	int i, same;

	for (i = 0; i < MAX_FILES && !f; i++)
		if (files[i].used && !files[i].bad && files[i].size)
			f = &files[i];
	if (!CHECK(f != NULL, "no file left to run the comparator's control on"))
		return;
	f->data[f->size / 2] ^= 0x01;
	same = file_equals(f, why, sizeof(why));
	f->data[f->size / 2] ^= 0x01;
	printf("# control: %s/%s/%s against its model with one byte flipped: %s\n",
	       svs[f->sv].name, dir_names[f->dir], f->name,
	       same ? "equal (!)" : why);
	CHECK(!same, "control: a file compared equal to a model with a flipped byte: the comparison is blind");
}

int main(void)
{
	static const struct lab_fscrypt_fs btrfs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
	};
	unsigned long seed = env_ul("STRESS_SEED", DEFAULT_SEED);
	unsigned long seconds = env_ul("STRESS_SECONDS", DEFAULT_SECONDS);
	unsigned long progress = env_ul("STRESS_PROGRESS", 30);
	unsigned long ops, bad;
	long long start, stop_at, next_progress;
	unsigned long long scrub_errors;
	size_t enc_copies = 0, sentinels = 0, control = 0;
	struct scan_result scan = { -1, 0 };
	int files_checked, i, stuck;
	long check_errors;
	char path[PATH_MAX], marker[96];
	pid_t pids[CHILDREN];
	double secs;

	t0_ms = lab_now_ms();
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	rng = seed;
	printf("btrfs fscrypt stress on %s: seed 0x%lx, %lu s of operations\n",
	       dev, seed, seconds);
	make_markers();
	wbuf = aligned_alloc(BLK, MAX_FILE + BLK);
	rbuf = aligned_alloc(BLK, MAX_FILE + BLK);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!wbuf || !rbuf || sh == MAP_FAILED)
		lab_die("out of memory");
	memset(sh, 0, sizeof(*sh));

	lab_random(key_a, sizeof(key_a));
	lab_random(key_b, sizeof(key_b));
	dummy = lab_dummy_encryption();
	if (dummy) {
		for (i = 0; i < NDIRS; i++)
			dir_policy[i] = 1;
		lab_config_note("test_dummy_encryption: the directories a-ext, a-ino, b-ext and plain take the test policy (fscrypt's test key) as their own; keys A and B are added but unused\n");
	}
	lab_fscrypt_fs_setup(&btrfs, dev, mnt, NULL, key_a, sizeof(key_a), id_a);
	extent_keys = access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0;
	cur_mm = extent_keys ? MM_EXTENT : MM_INODE;
	if (extent_keys)
		CHECK(mounts_show(MM_EXTENT), "a default mount does not give per-extent keys");
	else
		printf("# the kernel has no per-extent keys (no %s): every file gets per-inode keys\n",
		       LAB_BTRFS_EXTENT_KEYS_FEATURE);
	setup_tree();
	rekey_ok = extent_keys && !dummy;
	if (extent_keys && dummy)
		lab_config_note("one policy (the test key): no rekeys from key A to key B and back\n");
	compress_ok = access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) == 0;
	if (!compress_ok)
		printf("# no %s: the kernel does not compress encrypted files; no compression settings changed\n",
		       LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE);

	snprintf(marker, sizeof(marker), "lab-stress-%d-%s", getpid(), tag);
	run("echo %s > /dev/kmsg", marker);
	for (i = 0; i < CHILDREN; i++)
		pids[i] = lab_child_start(child_main, (void *)(intptr_t)i);
	start = lab_now_ms();
	stop_at = start + (long long)seconds * 1000;
	next_progress = start + (long long)progress * 1000;
	lab_console_line("LAB-PROGRESS stress: seed 0x%lx, %lu s, background balance, scrub, drop_caches\n",
		     seed, seconds);
	prologue();
	phase("random operations");
	while (lab_now_ms() < stop_at) {
		enum op op = draw_op();

		begin_op(op);
		op_fns[op]();
		if (progress && lab_now_ms() >= next_progress) {
			next_progress += (long long)progress * 1000;
			lab_console_line("LAB-PROGRESS stress [%llds] %lu ops, %d files, %ld balances, %ld scrubs (%llu errors), %ld drops, %d failures\n",
				     (lab_now_ms() - start) / 1000, op_seq, nfiles(),
				     sh->balances, sh->scrubs, sh->scrub_errors,
				     sh->drops, lab_failures);
		}
	}
	secs = (double)(lab_now_ms() - start) / 1000.0;
	ops = op_seq;
	phase("stopping the background");
	stuck = stop_children(pids);
	phase("background stopped");
	lab_console_line("LAB-PROGRESS stress: %lu ops in %.0f s; %ld balances (%ld cancelled, %ld chunks relocated), %ld scrubs, %ld drops\n",
		     ops, secs, sh->balances, sh->balance_cancelled,
		     sh->chunks_relocated, sh->scrubs, sh->drops);
	printf("# operations:");
	for (i = 0; i < NOPS; i++)
		printf(" %s %lu%s", op_names[i], op_count[i], i + 1 < NOPS ? "," : "\n");
	printf("# reflinks: %lu done (%lu across master keys), %lu refused EINVAL (encrypted/plain), %lu refused EOPNOTSUPP (per-inode keys)\n",
	       reflink_ok, reflink_cross_key, reflink_einval, reflink_eopnotsupp);
	printf("# renames: %lu done (%lu over a file), %lu refused EXDEV; %lu snapshots deleted; %lu O_DIRECT writes\n",
	       rename_ok, rename_replace, rename_exdev, snap_deleted, direct_writes);
	printf("# snapshots refused because their source holds files with per-inode keys: %lu\n",
	       snap_refused);
	printf("# rekeys: %lu done (%lu directories, %lu files moved), %lu refused EOPNOTSUPP (per-inode keys), %lu refused EBUSY%s\n",
	       rekeys_done, rekey_dirs_moved, rekey_files_moved, rekeys_eopnotsupp,
	       rekeys_busy, rekey_ok ? "" : " (not run: see above)");
	printf("# compression: %lu property changes on files, %lu on directories, %lu chattr +c/+m; %lu writes of compressible data%s\n",
	       compress_props, compress_dir_props, compress_flags, compressible_writes,
	       compress_ok ? "" : " (no compression of encrypted files in this kernel)");
	printf("# balancer: %ld balances, %ld cancelled, %ld errors, %ld chunks relocated\n",
	       sh->balances, sh->balance_cancelled, sh->balance_errors,
	       sh->chunks_relocated);
	printf("# scrubber: %ld scrubs, %ld cancelled, %ld failed, %llu errors, %llu bytes scrubbed\n",
	       sh->scrubs, sh->scrub_cancelled, sh->scrub_fails, sh->scrub_errors,
	       sh->scrub_bytes);
	printf("# dropper: %ld drops, %ld errors\n", sh->drops, sh->drop_errors);
	for (i = 0, bad = 0; i < MAX_FILES; i++)
		bad += files[i].used && files[i].bad;
	CHECK(bad == 0, "%lu files were left out after unexpected errors", bad);
	CHECK(sh->balance_errors == 0 && sh->scrub_fails == 0 && sh->drop_errors == 0,
	      "background errors: %ld balances, %ld scrubs, %ld drops failed",
	      sh->balance_errors, sh->scrub_fails, sh->drop_errors);
	CHECK(sh->scrub_errors == 0, "background scrubs found %llu errors", sh->scrub_errors);
	CHECK(sh->balances > 0 && sh->chunks_relocated > 0,
	      "the balancer got nothing done (%ld balances, %ld chunks relocated)",
	      sh->balances, sh->chunks_relocated);
	CHECK(sh->scrubs > 0 && sh->scrub_bytes > 0,
	      "the scrubber got nothing done (%ld scrubs)", sh->scrubs);
	CHECK(sh->drops > 0, "caches were never dropped");
	if (dummy)
		lab_config_note("one policy (the test key) and no plain file: reflinks across master keys, EINVAL (encrypted/plain) and EXDEV renames are not required (%lu, %lu, %lu)\n",
				reflink_cross_key, reflink_einval, rename_exdev);
	CHECK(!rekey_ok || (rekeys_done > 0 && rekeys_eopnotsupp > 0),
	      "the generator missed a case: rekeys done %lu, refused EOPNOTSUPP %lu",
	      rekeys_done, rekeys_eopnotsupp);
	CHECK(!compress_ok || (compress_dir_props > 0 && compress_props > 0),
	      "the generator missed a case: compression property changes on directories %lu, on files %lu",
	      compress_dir_props, compress_props);
	CHECK(reflink_ok > 0 && (!extent_keys || reflink_eopnotsupp > 0) &&
	      (dummy || !extent_keys || reflink_cross_key > 0) &&
	      (dummy || (reflink_einval > 0 && rename_exdev > 0)),
	      "the generator missed a case: reflinks done %lu (%lu across keys), EINVAL %lu, EOPNOTSUPP %lu; renames refused %lu",
	      reflink_ok, reflink_cross_key, reflink_einval, reflink_eopnotsupp,
	      rename_exdev);
	if (stuck) {
		printf("# a background child is stuck: not touching the filesystem any more\n");
		return lab_result("btrfs fscrypt stress");
	}

	/* ---- everything against the model ---- */
	phase("checking every file against the model");
	compare_all("end of the stress", 0);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	compare_all("after drop_caches", 0);
	if (!CHECK_OK(lab_umount(mnt), "umount") ||
	    !CHECK_OK(lab_fscrypt_fs_mount(&btrfs, dev, mnt, NULL), "mount again") ||
	    !CHECK_OK(lab_add_raw_key(mnt, key_a, sizeof(key_a), id_a), "add key A again") ||
	    !CHECK_OK(lab_add_raw_key(mnt, key_b, sizeof(key_b), id_b), "add key B again"))
		lab_die("cannot mount the filesystem again");
	cur_mm = extent_keys ? MM_EXTENT : MM_INODE;
	phase("remounted");
	files_checked = compare_all("after a remount", 1);
	for (i = 0; i < MAX_FILES; i++) {
		long c;

		if (!files[i].used || files[i].bad)
			continue;
		c = compressed_extents(&files[i]);
		if (c < 0) {
			CHECK(0, "FIEMAP of %s/%s/%s: " LAB_ERR_FMT, svs[files[i].sv].name,
			      dir_names[files[i].dir], files[i].name, LAB_ERR_ARGS(errno));
			continue;
		}
		if (files[i].pol) {
			end_comp_extents += c;
			end_comp_files += c > 0;
		} else {
			end_comp_plain += c;
		}
	}
	printf("# compressed extents at the end (FIEMAP): %ld in %ld encrypted files, %ld in plain files\n",
	       end_comp_extents, end_comp_files, end_comp_plain);
	comparator_control();
	/* (if the ring buffer lost the start marker, all of what is left) */
	CHECK(run("dmesg >/tmp/stress-dmesg.txt; "
		  "{ grep -q %s /tmp/stress-dmesg.txt && sed -n '/%s/,$p' /tmp/stress-dmesg.txt || cat /tmp/stress-dmesg.txt; } | "
		  "grep -E 'BTRFS (error|critical)|fscrypt.*(rror|Unable)'",
		  marker, marker) != 0,
	      "the kernel logged btrfs or fscrypt errors during the run (above)");

	/* ---- sentinels of both key modes and the control, then the end ---- */
	phase("sentinels and the control file");
	for (i = 0; i < MAX_FILES; i++)
		if (files[i].used && files[i].pol)
			enc_copies += count_occurrences(files[i].data, files[i].size,
							enc_marker, MARKER_LEN);
	PATHF(path, "%s/sv/a-ext/%ssentinel-extent", mnt, enc_name_pfx);
	sentinels += write_marker_file(path, enc_marker, SENTINEL_COPIES);
	if (extent_keys && remount_mode(MM_INODE) == 0) {
		PATHF(path, "%s/sv/a-ino/%ssentinel-inode", mnt, enc_name_pfx);
		sentinels += write_marker_file(path, enc_marker, SENTINEL_COPIES);
		remount_mode(MM_EXTENT);
	}
	if (dummy) {
		/* under the option no new file is plain: a mount without it */
		lab_config_note("the control file is written on a mount without test_dummy_encryption: under it, no new file is plain\n");
		if (!CHECK_OK(lab_umount(mnt), "umount") ||
		    !CHECK_OK(mount(dev, mnt, "btrfs", 0, NULL),
			      "mount -t btrfs %s %s (without the option)", dev, mnt))
			lab_die("cannot mount the filesystem without test_dummy_encryption");
	}
	PATHF(path, "%s/%scontrol", mnt, ctl_name_pfx);
	control = write_marker_file(path, ctl_marker, CONTROL_COPIES);
	CHECK(enc_copies + sentinels > 0, "no encrypted file holds the marker: the scan would prove nothing");
	phase("final scrub");
	scrub_errors = sh->scrub_errors + final_scrub();
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		lab_die("cannot unmount for the check and the scan");
	phase("btrfs check");
	check_errors = final_check();
	phase("raw device scan");
	scan = leak_scan(enc_copies + sentinels, sentinels, control);

	phase("done");
	lab_console_line("LAB-PROGRESS stress: %d files checked, %lu mismatches, scrub errors %llu, check errors %ld, leak hits %lld, control %s\n",
		     files_checked, mismatches + listing_mismatches, scrub_errors,
		     check_errors, scan.leak_hits, scan.control_found ? "found" : "NOT found");
	write_figures(secs, ops, scan.leak_hits, scan.control_found, files_checked,
		      scrub_errors, check_errors);
	return lab_result("btrfs fscrypt stress");
}
