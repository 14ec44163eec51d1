// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_fuzz - damaged encrypted btrfs images must give a clean
 * result or a clean error, never a splat, a hang, garbage or a leak
 * (issue #14, "fuzzed images").
 *
 * 1. The kernel makes a small encrypted btrfs (mkfs.btrfs -m single -b
 *    128M on $SCRATCH_DEV): an unencrypted control file at the top level
 *    (tree 5, which holds no fscrypt item and is never damaged); a
 *    subvolume sv with a second control file and an encrypted directory
 *    holding per-extent files in key groups (version 2 extent contexts,
 *    several extents), a file written under
 *    `remount,fscrypt_extents_per_key=1` (version 1 contexts), a file
 *    appended to under both, a per-inode-key file
 *    (`remount,fscrypt_per_inode_keys`), short and 255-byte encrypted
 *    names, a subdirectory of long names, an empty file, two symlinks, a
 *    reflinked copy (FICLONE) and a partial one (FICLONERANGE);
 *    compressed files (zstd, lzo, zlib; on a kernel with encrypt_compress); a
 *    directory of a second master key whose file is partly reflinked into
 *    a file of the first (sv then records both keys, key type 47; the
 *    walks with the key add both); a snapshot
 *    of sv, after which sv is written again.  Then subvolumes of their
 *    own (issue #36): rkf, moved from key 1 to key 2 by
 *    BTRFS_IOC_FSCRYPT_REKEY and written after (a file with extents of
 *    both keys); rkp, whose rekey stopped after its first object (the
 *    filesystem frozen while the rekey waits to start, the rekey killed
 *    there, then thawed: it moves the policy's directory and stops at the
 *    fatal signal), so that its directory is under key 2 and what is below
 *    it under key 1 (EPERM across them); pik, files with per-inode keys
 *    (the lab series' mode); and up, a directory and a file rewritten
 *    offline into upstream's layout (inode flag 1 << 12, context items 41,
 *    extents with encryption 1 and items 42; craft_upstream()), whose leaf
 *    the tree-checker refuses.  The transaction boundaries are explicit
 *    (commit=300 and syncfs; the killed rekey stops at its first object),
 *    so the layout is the same from run to run; the nonces are the
 *    kernel's random ones.
 *    Without the kernel (FUZZ_PRISTINE=dev), a saved image is used instead.
 * 2. The bytes that matter (btrfs_raw.h: the first MiB, the superblock
 *    mirror, every chunk) are read into memory: the pristine image.  It is
 *    copied to $SCRATCH_DEV2, at the same offsets, so that the host can
 *    keep it (make reliability does) and replay from it.  The pristine
 *    image is mounted and walked twice, without and with the key: that is
 *    the reference (every (subvolume, inode): what stat, open, the policy
 *    ioctl, read and readlink gave, the name and the contents).  Then
 *    one image with no mutation must walk exactly like the reference.
 *    The census of the pristine image (seed.tsv) says what each subvolume
 *    holds: encrypted and compressed extents by algorithm, per-inode-key
 *    extents, key records, inode and extent contexts by master key,
 *    upstream's items.  The trace probe (trace.tsv) reads one file of each
 *    seed feature alone, with the fscrypt tracepoints counted
 *    (fscrypt_trace.h), and must see what the feature is for: decrypted
 *    compressed extents (zlib, lzo, zstd), extent keys of both master keys
 *    (the file under two keys, the rekeyed file), a per-inode key (no
 *    extent lookup), EPERM (the part-way rekeyed file).
 * 3. Image k of FUZZ_IMAGES (FUZZ_FIRST, FUZZ_FIRST + 1, ...; a PRNG
 *    seeded with FUZZ_SEED and k, so that one image can be replayed alone)
 *    gets 1 to 3 mutations in the live leaves that hold fscrypt items:
 *    bit flips, random bytes and runs, interesting values in the fields
 *    of inode context items (key type 46), of upstream's items (41, 42),
 *    of the 34/40-byte extent
 *    contexts after file extent items, of the encrypted dir items and
 *    names, of encrypted symlink targets (inline extents of encrypted
 *    inodes), of the subvolume's key records (identifier, flags, and the
 *    key offset that must repeat the identifier's first bytes), the file
 *    extent item's encryption byte (alone or with a new
 *    item size), resized items (as the kernel resizes them, so that the
 *    leaf stays well-formed), and flips anywhere in the used bytes of
 *    those leaves (header, item headers, item data).  Each changed leaf
 *    gets its crc32c recomputed, so that the kernel's item validation,
 *    not the checksum, meets the damage.
 *    A child process mounts it (read-only; with FUZZ_RW_EVERY=N,
 *    read-write for one image in N, as make reliability does with 4),
 *    walks everything without the key, adds the key, drops caches,
 *    walks again, reads the control files after dropping caches again,
 *    removes the key and unmounts.  Every outcome that differs from the
 *    reference is counted by operation and errno.  Bugs:
 *    - a kernel splat in /dev/kmsg during the image (the patterns of
 *      vm-images/console-check.sh): the run stops there;
 *    - a walk that does not end within FUZZ_WALK_TIMEOUT seconds (hang):
 *      the run stops there;
 *    - an errno outside the clean set (EUCLEAN, EIO, ENOKEY, EINVAL,
 *      ENOENT, ENOTDIR, EISDIR, ELOOP, ENAMETOOLONG, ESTALE, EROFS,
 *      EOVERFLOW, EFBIG, ENODATA, E2BIG, EOPNOTSUPP, ENOTTY);
 *    - a read that returns data other than the file's without an error,
 *      for a file none of whose items the mutations touched (a damaged
 *      nonce, key nonce or extent number of the file itself does make its
 *      reads wrong without an error: fscrypt does not authenticate, and the
 *      data checksums are over the ciphertext; such reads are counted as
 *      "explained wrong data");
 *    - plaintext read without the key;
 *    - the top-level control file not reading back byte-exact while the
 *      filesystem is mounted; the control file in sv, unless a leaf that
 *      holds one of its items was mutated;
 *    - a read-only mount that changed the device (checked every
 *      FUZZ_VERIFY_EVERY images and at the end: the whole pristine image
 *      is compared with the device).
 *    After each image the device is restored: the mutated leaves after a
 *    read-only mount, the whole pristine image after a read-write one.
 *    A bug's image is saved under $FUZZ_OUT/bug-<k>/ (the mutations, the
 *    mutated leaves, the kernel log of the image, how to replay it), and
 *    the pristine image as $FUZZ_OUT/pristine.img.
 *
 * Environment: SCRATCH_DEV, SCRATCH_MNT, SCRATCH_DEV2 (where the pristine
 * image is saved; optional; its superblocks are wiped at the end unless
 * FUZZ_KEEP_PRISTINE is set), FUZZ_IMAGES (32), FUZZ_SEED (0x14f0001),
 * FUZZ_FIRST (0), FUZZ_PRISTINE (a device holding a saved image: replay),
 * FUZZ_OUT ($RESULTS/fuzz, or /tmp/fuzz), FUZZ_PROGRESS (a LAB-PROGRESS
 * line on the console every N images; 10), FUZZ_WALK_TIMEOUT (300),
 * FUZZ_VERIFY_EVERY (50), FUZZ_RW_EVERY (0: every mount read-only;
 * read-write mounts of damaged images reach more of btrfs's own checks:
 * they found the two btrfs bugs that patches/fixes/ fixes, replayed by
 * tests/btrfs_corrupt_metadata.c; the make-test slice stays read-only
 * so that it stays short), FUZZ_MUT_MASK (a bit per mutation of an
 * image: which ones to apply, for narrowing a replay down; all).
 *
 * Writes $FUZZ_OUT/summary.tsv, errnos.tsv, images.tsv, bugs.tsv, seed.tsv
 * and trace.tsv, and prints the same as tables.  summary.tsv counts by
 * subvolume (part_<name>_*) the mutations, the images with one there, of
 * those the images whose results there differed from the reference, and
 * those whose kernel log has the tree-checker's "corrupt leaf" line naming
 * a leaf of that subvolume the image changed.  Exit 0 if no image found a
 * bug.
 */
#include "btrfs_items.h"
#include "btrfs_leaf.h"
#include "btrfs_raw.h"
#include "btrfs_rekey.h"
#include "fscrypt_fs.h"
#include "fscrypt_trace.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>
#include <linux/fscrypt.h>

#define KEY_SEED		0x14f022u
#define DEFAULT_SEED		0x14f0001ULL
#define DEFAULT_IMAGES		32
#define FS_SIZE			"128M"
#define FIRST_INO		256	/* BTRFS_FIRST_FREE_OBJECTID: subvolume roots */
#define CTX_KEY			LAB_BTRFS_FSCRYPT_INODE_CTX_KEY
#define FT_ENCRYPTED		0x80	/* BTRFS_FT_ENCRYPTED */
#define FE_SIZE			53	/* struct btrfs_file_extent_item */
#define FE_ENCRYPTION		17
#define FE_TYPE			20
#define DIR_ITEM_HDR		30	/* struct btrfs_dir_item */
#define INODE_ITEM_SIZE		160	/* struct btrfs_inode_item */
#define INODE_SIZE_OFF		16
#define INODE_NLINK_OFF		40
#define INODE_MODE_OFF		52
#define INODE_FLAGS_OFF		64
#define INODE_FLAG_ENCRYPT_BIT	20	/* BTRFS_INODE_ENCRYPT */
#define INODE_FLAG_PER_EXTENT_BIT 21	/* BTRFS_INODE_ENCRYPT_PER_EXTENT */
#define INODE_FLAG_UPSTREAM_BIT	12	/* upstream v7's ENCRYPT */
#define KEY_ITEM_KEY		LAB_BTRFS_FSCRYPT_KEY_ITEM_KEY
#define KEY_SEED2		0x14f023u
#define READ_CAP		(1u << 20)
#define MAX_DEPTH		12
#define MAX_ENTRIES		4096
#define MAX_MUT			3
#define MAX_WORK		(MAX_MUT + 1)
#define MAX_TOUCHED		512
#define NOTES_SIZE		8192
#define NERR			134
#define MAX_SAVED_BUGS		20

static const char *dev, *mnt, *save_dev, *out_dir;
/*
 * test_dummy_encryption (the "encrypt" configuration, lab_dummy_encryption()):
 * mkfs.btrfs -O encrypt (lab_mkfs()), and every mount of every image, not
 * only the pristine one's, has the option (img_opts), so that the test key
 * is there at each.  Below a subvolume's top directory every new directory
 * has the test policy, so that the fuzzer's own policies go on the top
 * directories of subvolumes: key 1 on sv's (enc inherits it, and sv's
 * control file is under key 1 too), key 2 on the top directory of a
 * subvolume sv2 at the top level, from whose file k2 the reflink into
 * sv/enc/xk comes.  The top-level control file is under the test key (no
 * new file is plain): tree 5 then holds fscrypt items, and is left out of
 * the mutations so that the control stays undamaged.  The log says so
 * ("config:").
 */
static int dummy;
static const char *img_opts;	/* the configuration's mount options, or NULL */
static uint64_t seed;
static uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
static uint8_t key2_id[FSCRYPT_KEY_IDENTIFIER_SIZE];

/* ---- small things ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
	return n ? (uint32_t)(rng_next(s) % n) : 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long env_ul(const char *name, unsigned long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : dflt;
}

/* strcpy() into @dst[@size], cut if need be. */
static void copy_str(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/*
 * A name as it may be printed: names decrypted with a wrong key hold any
 * byte; those outside printable ASCII become \xNN, and the whole is cut
 * to fit @size.
 */
static void printable(char *dst, size_t size, const char *src)
{
	size_t o = 0;

	for (; *src && o + 5 < size; src++) {
		unsigned char c = (unsigned char)*src;

		if (c >= 0x20 && c < 0x7f && c != '\\')
			dst[o++] = (char)c;
		else
			o += (size_t)snprintf(dst + o, size - o, "\\x%02x", c);
	}
	dst[o] = '\0';
}

/* Append to a bounded text buffer. */
struct text {
	char *buf;
	size_t len, cap;
};

static void text_add(struct text *t, const char *fmt, ...) LAB_PRINTF(2, 3);
static void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len + 1 >= t->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

static int write_text_file(const char *dir, const char *name, const void *buf,
			   size_t len)
{
	char path[PATH_MAX];

	PATHF(path, "%s/%s", dir, name);
	return write_file(path, buf, len);
}

/* ---- the errnos ----------------------------------------------------------------------- */

static int clean_errno(int e)
{
	switch (e) {
	case EUCLEAN: case EIO: case ENOKEY: case EINVAL: case ENOENT:
	case ENOTDIR: case EISDIR: case ELOOP: case ENAMETOOLONG: case ESTALE:
	case EROFS: case EOVERFLOW: case EFBIG: case ENODATA: case E2BIG:
	case EOPNOTSUPP: case ENOTTY:
	/* fscrypt: a file whose policy differs from its directory's */
	case EPERM:
		return 1;
	}
	return 0;
}

enum op {
	OP_MOUNT, OP_STAT, OP_READDIR, OP_OPEN, OP_POLICY, OP_READ, OP_READLINK,
	OP_ADDKEY, OP_RMKEY, OP_CONTROL, OP_UMOUNT, NOPS
};

static const char *const op_name[NOPS] = {
	"mount", "stat", "readdir", "open", "get-policy", "read", "readlink",
	"add-key", "remove-key", "control", "umount",
};

static int err_slot(int e)
{
	return e > 0 && e < NERR ? e : 0;
}

/* ---- the kernel log ----------------------------------------------------------------- */

/* The kinds and patterns of vm-images/console-check.sh, most specific first. */
static const struct {
	const char *kind, *re;
} splat_pat[] = {
	{ "KASAN report", "BUG: KASAN:" },
	{ "lockdep report", "WARNING: (possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage|held lock freed|bad unlock balance)|INFO: possible irq lock inversion|BUG: (lock held when returning|MAX_LOCKDEP)|DEBUG_LOCKS_WARN_ON" },
	{ "sleep in atomic", "BUG: (sleeping function called from invalid context|scheduling while atomic)" },
	{ "hung task", "INFO: task .* blocked for more than" },
	{ "oops", "Oops:|general protection fault|BUG: unable to handle|BUG: kernel NULL pointer|kernel BUG at" },
	{ "BUG", "BUG:" },
	{ "WARNING", "WARNING: CPU:|------------\\[ cut here \\]------------" },
	{ "UBSAN report", "UBSAN:" },
	{ "soft lockup / RCU stall", "soft lockup|detected stalls? on|self-detected stall" },
	{ "kernel panic", "Kernel panic - not syncing" },
};
#define NPAT (sizeof(splat_pat) / sizeof(splat_pat[0]))
static regex_t splat_re[NPAT];
static int kmsg_rd = -1, kmsg_wr = -1;

struct kmsg_img {
	unsigned warn_lines;	/* level <= warning, not ours */
	int splat;
	char kind[40], first[240];
	struct text log;
};

static void kmsg_init(void)
{
	size_t i;

	for (i = 0; i < NPAT; i++)
		if (regcomp(&splat_re[i], splat_pat[i].re, REG_EXTENDED | REG_NOSUB))
			lab_die("bad splat pattern %s", splat_pat[i].re);
	kmsg_rd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kmsg_rd < 0)
		lab_die("open /dev/kmsg: %s", strerror(errno));
	lseek(kmsg_rd, 0, SEEK_END);
	kmsg_wr = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
}

static void kmsg_note(const char *fmt, ...) LAB_PRINTF(1, 2);
static void kmsg_note(const char *fmt, ...)
{
	char line[900];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "<5>lab-fuzz: ");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (kmsg_wr >= 0 && write(kmsg_wr, line, strlen(line)) < 0)
		printf("write to /dev/kmsg: %s\n", strerror(errno));
}

/* Read every new record; note splats and warning-level lines. */
static void kmsg_drain(struct kmsg_img *k)
{
	char rec[8192];
	ssize_t n;
	size_t i;

	for (;;) {
		char *msg, *end;
		unsigned pri;
		double ts;
		unsigned long long us = 0;

		n = read(kmsg_rd, rec, sizeof(rec) - 1);
		if (n < 0 && (errno == EINTR || errno == EPIPE))
			continue;
		if (n <= 0)
			break;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		*msg++ = '\0';
		end = strchr(msg, '\n');
		if (end)
			*end = '\0';
		if (sscanf(rec, "%u,%*u,%llu", &pri, &us) < 1)
			continue;
		ts = us / 1e6;
		text_add(&k->log, "[%12.6f] %s\n", ts, msg);
		if (strstr(msg, "lab-fuzz: "))
			continue;
		if ((pri & 7) <= 4)
			k->warn_lines++;
		for (i = 0; i < NPAT && !k->splat; i++) {
			if (regexec(&splat_re[i], msg, 0, NULL, 0))
				continue;
			k->splat = 1;
			snprintf(k->kind, sizeof(k->kind), "%s", splat_pat[i].kind);
			snprintf(k->first, sizeof(k->first), "%s", msg);
		}
	}
}

/* ---- making the pristine filesystem ---------------------------------------------------- */

/* What was written, by path relative to the mount. */
struct mfile {
	char path[600];
	unsigned char *data;
	size_t len;
	char target[600];	/* symlinks */
};

static struct mfile model[96];
static size_t nmodel;

static struct mfile *model_get(const char *path)
{
	size_t i;

	for (i = 0; i < nmodel; i++)
		if (!strcmp(model[i].path, path))
			return &model[i];
	if (nmodel == sizeof(model) / sizeof(model[0]))
		lab_die("too many files in the model");
	memset(&model[nmodel], 0, sizeof(model[nmodel]));
	snprintf(model[nmodel].path, sizeof(model[nmodel].path), "%s", path);
	return &model[nmodel++];
}

/* Write @len bytes of pattern @pseed at @off of @rel (created if needed). */
static void put_buf(const char *rel, size_t off, size_t len,
		    unsigned char *buf, int do_fsync)
{
	struct mfile *m = model_get(rel);
	char path[PATH_MAX];
	int fd;

	PATHF(path, "%s/%s", mnt, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || pwrite_all(fd, buf, len, (off_t)off) ||
	    (do_fsync && fsync(fd)))
		lab_die("write %zu bytes at %zu of %s: %s", len, off, path,
			strerror(errno));
	close(fd);
	if (off + len > m->len) {
		m->data = realloc(m->data, off + len);
		if (!m->data)
			lab_die("out of memory for the model");
		memset(m->data + m->len, 0, off + len - m->len);
		m->len = off + len;
	}
	memcpy(m->data + off, buf, len);
	free(buf);
}

static void put(const char *rel, size_t off, size_t len, uint32_t pseed,
		int do_fsync)
{
	put_buf(rel, off, len, lab_pattern(len, pseed), do_fsync);
}

/* As put(), with data that compresses: 1 KiB of pattern per 4 KiB. */
static void put_compressible(const char *rel, size_t off, size_t len,
			     uint32_t pseed)
{
	unsigned char *buf = lab_pattern(len, pseed);
	size_t i;

	for (i = 0; i < len; i++)
		if (i % 4096 >= 1024)
			buf[i] = 0;
	put_buf(rel, off, len, buf, 1);
}

static void make_symlink(const char *target, const char *rel)
{
	struct mfile *m = model_get(rel);
	char path[PATH_MAX];

	PATHF(path, "%s/%s", mnt, rel);
	if (symlink(target, path))
		lab_die("symlink %s: %s", path, strerror(errno));
	snprintf(m->target, sizeof(m->target), "%s", target);
}

static void make_dir(const char *rel)
{
	char path[PATH_MAX];

	PATHF(path, "%s/%s", mnt, rel);
	if (mkdir(path, 0755))
		lab_die("mkdir %s: %s", path, strerror(errno));
}

/* FICLONERANGE of [@soff, +@len) of @src to @doff of @dst (@len 0: FICLONE). */
static void clone(const char *src, const char *dst, size_t soff, size_t len,
		  size_t doff)
{
	struct mfile *s = model_get(src), *d;
	char sp[PATH_MAX], dp[PATH_MAX];
	int sfd, dfd, r;

	PATHF(sp, "%s/%s", mnt, src);
	PATHF(dp, "%s/%s", mnt, dst);
	sfd = open(sp, O_RDONLY | O_CLOEXEC);
	dfd = open(dp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (sfd < 0 || dfd < 0)
		lab_die("open %s or %s: %s", sp, dp, strerror(errno));
	if (len == 0) {
		r = ioctl(dfd, FICLONE, sfd);
		soff = 0;
		doff = 0;
		len = s->len;
	} else {
		struct file_clone_range cr = {
			.src_fd = sfd, .src_offset = soff, .src_length = len,
			.dest_offset = doff,
		};

		r = ioctl(dfd, FICLONERANGE, &cr);
	}
	if (r)
		lab_die("clone %s -> %s: %s", sp, dp, strerror(errno));
	close(sfd);
	close(dfd);
	d = model_get(dst);
	if (doff + len > d->len) {
		d->data = realloc(d->data, doff + len);
		if (!d->data)
			lab_die("out of memory for the model");
		memset(d->data + d->len, 0, doff + len - d->len);
		d->len = doff + len;
	}
	memcpy(d->data + doff, s->data + soff, len);
}

static void remount(const char *opts)
{
	printf("mount -o remount,%s %s\n", opts, mnt);
	if (mount(dev, mnt, "btrfs", MS_REMOUNT, opts))
		lab_die("remount,%s: %s", opts, strerror(errno));
}

static void commit(void)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || syncfs(fd))
		lab_die("syncfs %s: %s", mnt, strerror(errno));
	close(fd);
}

/* A name of @len letters, different for each @i. */
static void long_name(char *out, size_t len, unsigned i)
{
	size_t k;

	for (k = 0; k < len; k++)
		out[k] = (char)('a' + (k * 7 + i * 3) % 26);
	out[len] = '\0';
}

/* Add the master key of @seed (identifier to @id); make @rel a directory under it. */
static void encrypted_dir(const char *rel, uint32_t seed, uint8_t *id)
{
	char path[PATH_MAX];

	if (dummy) {
		/* key 1 is on sv's top directory already: @rel inherits it */
		make_dir(rel);
		return;
	}
	if (lab_add_key(mnt, seed, id))
		lab_die("add the key of seed %#x: %s", seed, strerror(errno));
	make_dir(rel);
	PATHF(path, "%s/%s", mnt, rel);
	if (lab_set_policy(path, id))
		lab_die("set policy on %s: %s", path, strerror(errno));
}

/* Drop the model's files under @prefix (what the reference walk cannot read). */
static void model_forget(const char *prefix)
{
	size_t i, j = 0;

	for (i = 0; i < nmodel; i++) {
		if (!strncmp(model[i].path, prefix, strlen(prefix))) {
			free(model[i].data);
			continue;
		}
		model[j++] = model[i];
	}
	memset(&model[j], 0, (nmodel - j) * sizeof(model[0]));
	nmodel = j;
}

/*
 * A subvolume @name at the top level whose directory @name/e has the
 * policy of key @id (under test_dummy_encryption: the policy on the
 * subvolume's top directory, and e inherits it).
 */
static void sub_policy(const char *name, const uint8_t *id)
{
	char path[PATH_MAX], e[PATH_MAX];

	lab_btrfs_subvol(mnt, name, -1);
	PATHF(path, "%s/%s", mnt, name);
	PATHF(e, "%s/e", path);
	if (dummy ? lab_set_policy(path, id) || mkdir(e, 0755) :
		    mkdir(e, 0755) || lab_set_policy(e, id))
		lab_die("the policy on %s: %s", dummy ? path : e, strerror(errno));
}

/* Subvolume @name's tree id (BTRFS_IOC_INO_LOOKUP of its top directory). */
static uint64_t sub_tree(const char *name)
{
	struct btrfs_ioctl_ino_lookup_args a;
	char path[PATH_MAX];

	memset(&a, 0, sizeof(a));
	a.objectid = BTRFS_FIRST_FREE_OBJECTID;
	PATHF(path, "%s/%s", mnt, name);
	if (lab_ioctl_path(path, BTRFS_IOC_INO_LOOKUP, &a))
		lab_die("BTRFS_IOC_INO_LOOKUP of %s: %s", path, strerror(errno));
	return a.treeid;
}

/*
 * Inodes 256 .. 256 + 63 of subvolume @name whose context item names key 1,
 * key 2, or another key: into n[0..2].
 */
static void contexts_by_key(const char *name, unsigned n[3])
{
	struct lab_btrfs_item *it;
	char path[PATH_MAX];
	uint64_t ino;
	size_t k;

	n[0] = n[1] = n[2] = 0;
	PATHF(path, "%s/%s", mnt, name);
	for (ino = FIRST_INO; ino < FIRST_INO + 64; ino++) {
		if (lab_btrfs_search(path, ino, CTX_KEY, &it, &k))
			lab_die("TREE_SEARCH of %s: %s", path, strerror(errno));
		if (k == 1 && it[0].len == 40)
			n[!memcmp(it[0].data + 8, key_id, 16) ? 0 :
			  !memcmp(it[0].data + 8, key2_id, 16) ? 1 : 2]++;
		lab_btrfs_items_free(it, k);
	}
}

/* BTRFS_IOC_FSCRYPT_REKEY of subvolume @name from key 1 to key 2. */
static int rekey_1_to_2(const char *name, struct btrfs_ioctl_fscrypt_rekey_args *a)
{
	struct fscrypt_policy_v2 to;

	lab_default_policy(&to, key2_id);
	lab_rekey_args(a, name, key_id, &to);
	return lab_rekey_at(mnt, a);
}

/* Is task @pid asleep (state D) in syscall @nr?  (/proc/PID/stat, /proc/PID/syscall) */
static int task_in_syscall(pid_t pid, long nr)
{
	char path[64], *s, *p;
	size_t len;
	int ok = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	s = read_file(path, &len);
	p = s ? strrchr(s, ')') : NULL;
	if (p && p[1] == ' ' && p[2] == 'D') {
		free(s);
		snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
		s = read_file(path, &len);
		ok = s && strtol(s, NULL, 10) == nr;
	}
	free(s);
	return ok;
}

/*
 * A rekey of @name from key 1 to key 2 stopped after its first object,
 * the directory with the policy, leaving everything below it under key 1:
 * the filesystem is frozen (FIFREEZE) when a child issues the ioctl, which
 * then sleeps in mnt_want_write_file(); the child gets SIGKILL there, and
 * the filesystem is thawed.  The rekey runs with the signal pending: it
 * records key 2, moves its first object (btrfs_fscrypt_rekey_move()) and
 * stops at fatal_signal_pending() (-EINTR), committing what it moved.
 * Returns what is under key 1 and key 2 (contexts_by_key()).
 */
static void rekey_part_way(const char *name, unsigned n[3])
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC), st, i;
	pid_t pid;

	if (fd < 0 || syncfs(fd) || ioctl(fd, FIFREEZE, 0))
		lab_die("freeze %s: %s", mnt, strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		lab_die("fork: %s", strerror(errno));
	if (pid == 0) {
		struct btrfs_ioctl_fscrypt_rekey_args a;

		rekey_1_to_2(name, &a);
		_exit(0);
	}
	for (i = 0; i < 6000 && !task_in_syscall(pid, 16 /* ioctl */); i++)
		usleep(10 * 1000);
	if (i == 6000)
		printf("the rekey of %s did not reach its ioctl within 60 s\n", name);
	kill(pid, SIGKILL);
	if (ioctl(fd, FITHAW, 0))
		lab_die("thaw %s: %s", mnt, strerror(errno));
	waitpid(pid, &st, 0);
	close(fd);
	contexts_by_key(name, n);
	printf("rekey of %s from key 1 to key 2 killed while it waited for the frozen filesystem (%s): %u inodes under key 1, %u under key 2, %u under another\n",
	       name, WIFSIGNALED(st) ? "killed" : "it ended", n[0], n[1], n[2]);
}

/* Where the pristine image's parts are (tree ids), for the census. */
static uint64_t up_tree;

/*
 * The subvolumes of issue #36 (each with its own tree, so that the census
 * and the mutations can tell them apart):
 *  rkf  a subvolume moved from key 1 to key 2 (BTRFS_IOC_FSCRYPT_REKEY),
 *       then written: its inodes under key 2, file f with extents of both;
 *  rkp  one whose rekey stopped after its first object (rekey_part_way()):
 *       the directory with the policy under key 2, what is below it under
 *       key 1 (a lookup or open across them: EPERM), both keys recorded;
 *  pik  per-inode keys (the lab series' mode), a directory of its own;
 *  up   a directory and a file of two extents, which craft_upstream()
 *       turns into upstream's layout once the filesystem is unmounted.
 */
static void more_subvolumes(void)
{
	struct btrfs_ioctl_fscrypt_rekey_args ra;
	unsigned n[3];

	sub_policy("rkf", key_id);
	put("rkf/e/f", 0, 8192, 0x5101, 1);
	put("rkf/e/f", 8192, 8192, 0x5102, 1);
	make_dir("rkf/e/d");
	put("rkf/e/d/g", 0, 4096, 0x5103, 1);
	make_symlink("f", "rkf/e/s");
	commit();
	if (rekey_1_to_2("rkf", &ra))
		lab_die("rekey of rkf from key 1 to key 2: %s", strerror(errno));
	printf("rekey of rkf from key 1 to key 2 moved " LAB_REKEY_COUNTS_FMT "\n",
	       LAB_REKEY_COUNTS_ARGS(&ra));
	/* new extents (and a new file) under key 2 beside the old ones */
	put("rkf/e/f", 16384, 4096, 0x5104, 1);
	put("rkf/e/n", 0, 4096, 0x5105, 1);
	commit();
	contexts_by_key("rkf", n);
	if (n[0] || !n[1] || n[2])
		lab_die("rkf after its rekey: %u inodes under key 1, %u under key 2, %u under another",
			n[0], n[1], n[2]);

	sub_policy("rkp", key_id);
	put("rkp/e/f", 0, 8192, 0x5201, 1);
	make_dir("rkp/e/d");
	put("rkp/e/d/g", 0, 4096, 0x5202, 1);
	make_symlink("f", "rkp/e/s");
	commit();
	rekey_part_way("rkp", n);
	if (n[1] != 1 || !n[0] || n[2])
		lab_die("rkp: the interrupted rekey left %u inodes under key 1, %u under key 2, %u under another; want one (the policy's directory) under key 2",
			n[0], n[1], n[2]);
	model_forget("rkp/");	/* behind EPERM: the walk reads none of it */

	remount("fscrypt_per_inode_keys");
	sub_policy("pik", key2_id);
	put("pik/e/a", 0, 8192, 0x5301, 1);
	put("pik/e/a", 8192, 4096, 0x5302, 1);
	make_dir("pik/e/d");
	put("pik/e/d/b", 0, 4096, 0x5303, 1);
	make_symlink("a", "pik/e/s");
	commit();
	remount("fscrypt_per_extent_keys,fscrypt_extents_per_key=0");

	sub_policy("up", key_id);
	put("up/e/u", 0, 8192, 0x5401, 1);
	put("up/e/u", 8192, 8192, 0x5402, 1);
	commit();
	up_tree = sub_tree("up");
	model_forget("up/");	/* the tree-checker refuses its leaf */
}

/* upstream's btrfs fscrypt series (v7; btrfs_fscrypt_upstream_layout.c) */
#define UP_INODE_ENCRYPT	(1ULL << INODE_FLAG_UPSTREAM_BIT)
#define UP_CTX_KEY		41
#define UP_EXTENT_CTX_KEY	42
#define UP_EXTENT_CTX_SIZE	34	/* v1, mode, key identifier, nonce */
#define UP_ENCRYPTION		1

/*
 * Subvolume up's only leaf, rewritten offline into upstream's layout (as
 * btrfs_fscrypt_upstream_layout does, under our incompat bit, which the
 * mount needs): encrypted inodes' flags ENCRYPT (and PER_EXTENT) become
 * upstream's 1 << 12, the context items' key type 46 becomes 41, every
 * per-extent file extent item is cut to 53 bytes with encryption 1 and an
 * item (ino, 42, offset) with a 34-byte version 1 context (mode, key
 * identifier, nonce of ours) is inserted.  The tree-checker refuses such a
 * leaf (inode flag 0x1000, encryption 1); mutations of it must still meet
 * a clean refusal.
 */
static void craft_upstream(void)
{
	struct { struct braw_key key; uint8_t ctx[UP_EXTENT_CTX_SIZE]; } add[16];
	struct lab_fscrypt_extent_ctx c;
	struct braw_block *b = NULL;
	struct braw_fs f;
	unsigned char *blk;
	uint64_t logical = 0, fl;
	size_t n = 0, i, found = 0, nadd = 0;
	unsigned inodes = 0, ctxs = 0, slot;
	int level = -1;

	if (braw_open(&f, dev) || braw_live_blocks(&f, &b, &n))
		lab_die("read the trees of %s: %s", dev, strerror(errno));
	for (i = 0; i < n; i++) {
		if (b[i].tree != up_tree)
			continue;
		found++;
		logical = b[i].logical;
		level = b[i].level;
	}
	free(b);
	if (found != 1 || level != 0)
		lab_die("subvolume up (tree %llu) has %zu blocks, the last of level %d: want one leaf",
			(unsigned long long)up_tree, found, level);
	blk = lab_xmalloc(f.nodesize);
	if (braw_read_block(&f, logical, blk))
		lab_die("read leaf %llu: %s", (unsigned long long)logical, strerror(errno));
	for (slot = 0; slot < braw_nritems(blk); slot++) {
		unsigned char *d = blk + braw_item_start(blk, slot);
		uint32_t size = braw_item_size(blk, slot);
		struct braw_key k;

		braw_item_key(blk, slot, &k);
		if (k.type == BTRFS_INODE_ITEM_KEY && size == INODE_ITEM_SIZE &&
		    ((fl = braw_le64(d + INODE_FLAGS_OFF)) &
		     (LAB_BTRFS_INODE_ENCRYPT | LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT))) {
			braw_put_le64(d + INODE_FLAGS_OFF,
				      (fl & ~(LAB_BTRFS_INODE_ENCRYPT |
					      LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT)) |
				      UP_INODE_ENCRYPT);
			inodes++;
		} else if (k.type == CTX_KEY) {
			k.type = UP_CTX_KEY;	/* nothing of types 42-45: the order holds */
			braw_item_set_key(blk, slot, &k);
			ctxs++;
		} else if (k.type == BTRFS_EXTENT_DATA_KEY && size > FE_SIZE &&
			   d[FE_ENCRYPTION] == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT &&
			   d[FE_TYPE] == BTRFS_FILE_EXTENT_REG && nadd < 16 &&
			   !lab_fscrypt_extent_ctx_decode(d + FE_SIZE, size - FE_SIZE, &c)) {
			add[nadd].key.objectid = k.objectid;
			add[nadd].key.type = UP_EXTENT_CTX_KEY;
			add[nadd].key.offset = k.offset;
			add[nadd].ctx[0] = 1;
			add[nadd].ctx[1] = c.mode;
			memcpy(add[nadd].ctx + 2, c.key_id, 16);
			memcpy(add[nadd].ctx + 18, c.nonce, 16);
			nadd++;
			if (braw_item_resize(blk, f.nodesize, slot, FE_SIZE, 0))
				lab_die("cut the extent item (%llu, 108, %llu): %s",
					(unsigned long long)k.objectid,
					(unsigned long long)k.offset, strerror(errno));
			blk[braw_item_start(blk, slot) + FE_ENCRYPTION] = UP_ENCRYPTION;
		}
	}
	for (i = 0; i < nadd; i++) {
		uint32_t at;

		if (braw_item_insert(blk, f.nodesize, &add[i].key, add[i].ctx,
				     UP_EXTENT_CTX_SIZE, BRAW_INSERT_ROOT_LEAF, &at))
			lab_die("insert (%llu, 42, %llu): %s",
				(unsigned long long)add[i].key.objectid,
				(unsigned long long)add[i].key.offset, strerror(errno));
	}
	if (!inodes || !ctxs || !nadd || !braw_leaf_sane(blk, f.nodesize) ||
	    !braw_leaf_sorted(blk, NULL))
		lab_die("up's leaf in upstream's layout: %u inode flags, %u context items, %zu extents converted; sane %d, sorted %d",
			inodes, ctxs, nadd, braw_leaf_sane(blk, f.nodesize),
			braw_leaf_sorted(blk, NULL));
	if (braw_write_block(&f, logical, blk))
		lab_die("write leaf %llu: %s", (unsigned long long)logical, strerror(errno));
	printf("subvolume up (tree %llu, leaf %llu) in upstream's layout: %u inode flags 1 << 12, %u context items as key 41, %zu extents with encryption 1 and items 42\n",
	       (unsigned long long)up_tree, (unsigned long long)logical, inodes, ctxs, nadd);
	free(blk);
	braw_close(&f);
}

static void make_pristine(void)
{
	char name[256], rel[PATH_MAX], target[200];
	struct mfile *m;
	int fd;
	unsigned i;

	printf("== making the pristine filesystem on %s\n", dev);
	if (lab_mkfs("mkfs.btrfs -q -f -m single -b " FS_SIZE, dev))
		lab_die("mkfs.btrfs failed");
	if (lab_mount(dev, mnt, "btrfs", "commit=300"))
		lab_die("mount %s: %s", dev, strerror(errno));
	put("control", 0, 192 << 10, 0xc0de0001u, 1);
	lab_btrfs_subvol(mnt, "sv", -1);
	if (dummy) {
		lab_config_note("key 1's policy on the top directory of sv (sv/enc and sv/plainctl inherit it), key 2's on the top directory of a subvolume sv2; the top-level control file is under the test key\n");
		PATHF(rel, "%s/sv", mnt);
		if (lab_add_key(mnt, KEY_SEED, key_id) || lab_set_policy(rel, key_id))
			lab_die("key 1's policy on %s: %s", rel, strerror(errno));
		lab_btrfs_subvol(mnt, "sv2", -1);
		PATHF(rel, "%s/sv2", mnt);
		if (lab_add_key(mnt, KEY_SEED2, key2_id) || lab_set_policy(rel, key2_id))
			lab_die("key 2's policy on %s: %s", rel, strerror(errno));
	}
	put("sv/plainctl", 0, 64 << 10, 0xc0de0002u, 1);
	encrypted_dir("sv/enc", KEY_SEED, key_id);
	/* key groups (version 2 contexts): three fsynced pieces, three extents */
	put("sv/enc/a", 0, 8192, 0xa001, 1);
	put("sv/enc/a", 8192, 8192, 0xa002, 1);
	put("sv/enc/a", 16384, 8192, 0xa003, 1);
	long_name(name, 255, 0);
	PATHF(rel, "sv/enc/%s", name);
	put(rel, 0, 12288, 0xa004, 0);
	make_dir("sv/enc/d");
	for (i = 0; i < 8; i++) {
		long_name(name, 180 + 10 * i, i + 1);
		PATHF(rel, "sv/enc/d/%s", name);
		put(rel, 0, 4096 * (1 + i % 3), 0xd000 + i, 0);
	}
	put("sv/enc/d/s", 0, 1000, 0xd100, 0);
	PATHF(rel, "%s/sv/enc/empty", mnt);
	fd = open(rel, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		lab_die("create %s: %s", rel, strerror(errno));
	close(fd);
	model_get("sv/enc/empty");
	make_symlink("a", "sv/enc/sym");
	long_name(target, 150, 9);
	make_symlink(target, "sv/enc/symlong");
	clone("sv/enc/a", "sv/enc/clone", 0, 0, 0);
	put("sv/enc/part", 0, 16384, 0xa005, 1);
	clone("sv/enc/a", "sv/enc/part", 8192, 8192, 4096);
	/* a preallocated extent split by a write, and a file with a hole */
	PATHF(rel, "%s/sv/enc/prealloc", mnt);
	fd = open(rel, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || fallocate(fd, 0, 0, 16384))
		lab_die("fallocate %s: %s", rel, strerror(errno));
	close(fd);
	m = model_get("sv/enc/prealloc");	/* reads as zeros */
	m->data = calloc(1, 16384);
	m->len = 16384;
	if (!m->data)
		lab_die("out of memory for the model");
	put("sv/enc/prealloc", 4096, 4096, 0xa008, 1);
	put("sv/enc/sparse", 0, 4096, 0xa009, 1);
	put("sv/enc/sparse", 40960, 4096, 0xa00a, 1);
	/*
	 * a second master key, recorded by sv (key items), whose extents a
	 * file of the first holds (the walks add both keys)
	 */
	if (!dummy)
		encrypted_dir("sv/enc2", KEY_SEED2, key2_id);
	put(dummy ? "sv2/k2" : "sv/enc2/k2", 0, 8192, 0xe001, 1);
	put("sv/enc/xk", 0, 4096, 0xe002, 1);
	clone(dummy ? "sv2/k2" : "sv/enc2/k2", "sv/enc/xk", 0, 8192, 4096);
	commit();
	/* version 1 contexts */
	remount("fscrypt_extents_per_key=1");
	put("sv/enc/v1", 0, 8192, 0xb001, 1);
	put("sv/enc/v1", 8192, 8192, 0xb002, 1);
	put("sv/enc/a", 24576, 4096, 0xb003, 1);
	commit();
	remount("fscrypt_per_extent_keys,fscrypt_extents_per_key=0");
	/* compressed extents (zstd, lzo, zlib), if encrypted files compress */
	if (access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) == 0) {
		remount("compress-force=zstd");
		put_compressible("sv/enc/zstd", 0, 262144, 0xf001);
		remount("compress-force=lzo");
		put_compressible("sv/enc/lzo", 0, 131072, 0xf002);
		remount("compress-force=zlib");
		put_compressible("sv/enc/zlib", 0, 131072, 0xf003);
		commit();
		remount("compress=no");
	}
	PATHF(rel, "%s/sv", mnt);
	fd = open(rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		lab_die("open %s: %s", rel, strerror(errno));
	lab_btrfs_subvol(mnt, "snap", fd);
	close(fd);
	for (i = 0; i < nmodel; i++) {
		if (strncmp(model[i].path, "sv/", 3))
			continue;
		PATHF(rel, "snap/%s", model[i].path + 3);
		if (nmodel == sizeof(model) / sizeof(model[0]))
			lab_die("too many files in the model");
		model[nmodel] = model[i];
		copy_str(model[nmodel].path, sizeof(model[nmodel].path), rel);
		if (model[i].data) {
			model[nmodel].data = lab_xmalloc(model[i].len);
			memcpy(model[nmodel].data, model[i].data, model[i].len);
		}
		nmodel++;
	}
	/* sv moves on: its leaves are copied, the snapshot keeps the old ones */
	put("sv/enc/a", 28672, 8192, 0xa006, 1);
	put("sv/enc/after", 0, 4096, 0xa007, 1);
	commit();
	/*
	 * per-inode keys, after the snapshot: a subvolume that holds such a
	 * file is never snapshotted (the copies would share its key and IVs)
	 */
	remount("fscrypt_per_inode_keys");
	put("sv/enc/inokey", 0, 8192, 0xc001, 1);
	put("sv/enc/inokey", 8192, 4096, 0xc002, 1);
	commit();
	remount("fscrypt_per_extent_keys,fscrypt_extents_per_key=0");
	more_subvolumes();
	if (lab_umount(mnt))
		lab_die("umount %s: %s", mnt, strerror(errno));
	craft_upstream();
}

/* ---- the pristine image and its leaves ------------------------------------------------- */

static struct braw_fs fs;
static struct braw_image pristine;

enum cls {
	T_CTX, T_EXTCTX, T_EXTENC, T_DIR, T_SYMLINK, T_RESIZE, T_INODE, T_KEYREC,
	T_LEAF, T_UPSTREAM, NCLS
};

static const char *const cls_name[NCLS] = {
	"inode-context", "extent-context", "extent-encryption", "dir-item",
	"symlink", "resize", "inode-item", "key-record", "leaf", "upstream-item",
};
/* how often each class is picked, out of 104 */
static const unsigned cls_weight[NCLS] = { 14, 18, 8, 13, 6, 9, 7, 5, 20, 4 };

struct leafinfo {
	uint64_t logical, tree, phys;
	const unsigned char *blk;	/* in the pristine image */
	int has_ctl;			/* holds an item of sv's control file */
	int part;			/* parts[]: its subvolume */
};

/*
 * The pristine image's subvolumes ("parts": the top level, sv, snap, and
 * issue #36's rkf, rkp, pik, up; sv2 under test_dummy_encryption), by tree
 * id from the root tree's ROOT_REF items, and what each holds (the census,
 * of the live leaves of its tree): encrypted and compressed extents by
 * algorithm, per-inode-key extents, inode and extent contexts by master
 * key, key records, upstream's items.  The mutations and the images'
 * results are counted by part too, so that the summary shows that each
 * part of the seed was damaged and met.
 */
#define MAX_PARTS 16
#define MAX_IDS 16
static struct part {
	char name[16];
	uint64_t tree;
	unsigned leaves, fscrypt_leaves;
	unsigned enc_extents, comp[4], inode_key_extents, keyrecs, up_items;
	unsigned ctx[MAX_IDS + 1], ectx[MAX_IDS + 1];	/* by ids[]; [MAX_IDS]: others */
	/* the mutated images */
	unsigned mutations, images, images_differing, images_tree_checker;
} parts[MAX_PARTS];
static unsigned nparts;
static uint8_t ids[MAX_IDS][FSCRYPT_KEY_IDENTIFIER_SIZE];
static unsigned nids;

static int part_of_tree(uint64_t tree)
{
	unsigned i;

	for (i = 0; i < nparts; i++)
		if (parts[i].tree == tree)
			return (int)i;
	return -1;
}

static int part_by_name(const char *name)
{
	unsigned i;

	for (i = 0; i < nparts; i++)
		if (!strcmp(parts[i].name, name))
			return (int)i;
	return -1;
}

static void part_add(const char *name, uint64_t tree)
{
	if (nparts == MAX_PARTS || part_of_tree(tree) >= 0)
		return;
	copy_str(parts[nparts].name, sizeof(parts[nparts].name), name);
	parts[nparts++].tree = tree;
}

/* The index of master key identifier @id in ids[], added if new. */
static unsigned id_index(const uint8_t *id)
{
	unsigned i;

	for (i = 0; i < nids; i++)
		if (!memcmp(ids[i], id, FSCRYPT_KEY_IDENTIFIER_SIZE))
			return i;
	if (nids == MAX_IDS)
		return MAX_IDS;
	memcpy(ids[nids], id, FSCRYPT_KEY_IDENTIFIER_SIZE);
	return nids++;
}

/* The subvolumes' names, from the ROOT_REF items (5, 156, id) of root tree leaf @blk. */
static void root_refs(const unsigned char *blk)
{
	uint32_t slot;

	for (slot = 0; slot < braw_nritems(blk); slot++) {
		const unsigned char *d = blk + braw_item_start(blk, slot);
		uint32_t size = braw_item_size(blk, slot), len;
		struct braw_key k;
		char name[16];

		braw_item_key(blk, slot, &k);
		if (k.type != BTRFS_ROOT_REF_KEY || k.objectid != BTRFS_FS_TREE_OBJECTID ||
		    size < 18)
			continue;
		len = braw_le16(d + 16);
		if (len > size - 18 || len >= sizeof(name))
			continue;
		memcpy(name, d + 18, len);
		name[len] = '\0';
		part_add(name, k.offset);
	}
}

/* What pristine leaf @blk of part @p holds. */
static void census_leaf(struct part *pt, const unsigned char *blk)
{
	uint32_t slot;

	pt->leaves++;
	for (slot = 0; slot < braw_nritems(blk); slot++) {
		const unsigned char *d = blk + braw_item_start(blk, slot);
		uint32_t size = braw_item_size(blk, slot);
		struct lab_fscrypt_extent_ctx c;
		struct braw_key k;

		braw_item_key(blk, slot, &k);
		if (k.type == CTX_KEY && size == 40 && d[0] == 2) {
			pt->ctx[id_index(d + 8)]++;
		} else if (k.type == KEY_ITEM_KEY) {
			pt->keyrecs++;
		} else if (k.type == 41 || k.type == 42) {
			pt->up_items++;
		} else if (k.type == BTRFS_EXTENT_DATA_KEY && size >= FE_SIZE &&
			   d[FE_TYPE] != BTRFS_FILE_EXTENT_INLINE && d[FE_ENCRYPTION]) {
			pt->enc_extents++;
			if (d[16] >= 1 && d[16] <= 3)
				pt->comp[d[16]]++;
			if (d[FE_ENCRYPTION] == LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE)
				pt->inode_key_extents++;
			if (size > FE_SIZE &&
			    !lab_fscrypt_extent_ctx_decode(d + FE_SIZE, size - FE_SIZE, &c))
				pt->ectx[id_index(c.key_id)]++;
		}
	}
}

struct target {
	uint32_t leaf, slot;
};

static struct leafinfo *leaves;
static size_t nleaves;
static struct target *targets[NCLS];
static size_t ntargets[NCLS];
/*
 * Inodes with a context item, by tree: inode numbers repeat from subvolume
 * to subvolume (the top level's control file and rkf's directory are both
 * 257), and only an encrypted inode's own items are its targets.  (A leaf
 * that sv and snap share counts as the tree braw_live_blocks() reached it
 * from; an inode's item and its context item are in one leaf.)
 */
static struct { uint64_t tree, ino; } *enc_inos;
static size_t nenc_inos;

static void add_target(enum cls c, uint32_t leaf, uint32_t slot)
{
	targets[c] = realloc(targets[c], (ntargets[c] + 1) * sizeof(*targets[c]));
	if (!targets[c])
		lab_die("out of memory for the targets");
	targets[c][ntargets[c]].leaf = leaf;
	targets[c][ntargets[c]].slot = slot;
	ntargets[c]++;
}

static int is_enc_ino(uint64_t tree, uint64_t ino)
{
	size_t i;

	for (i = 0; i < nenc_inos; i++)
		if (enc_inos[i].ino == ino && enc_inos[i].tree == tree)
			return 1;
	return 0;
}

static int fs_tree(uint64_t tree)
{
	return tree == BTRFS_FS_TREE_OBJECTID ||
	       (tree >= BTRFS_FIRST_FREE_OBJECTID && tree <= BTRFS_LAST_FREE_OBJECTID);
}

/* Item @slot of @blk, as a fuzz target: which classes it belongs to. */
static void classify_item(const unsigned char *blk, uint64_t tree, uint32_t leaf,
			  uint32_t slot, int *fscrypt)
{
	const unsigned char *d = blk + braw_item_start(blk, slot);
	uint32_t size = braw_item_size(blk, slot);
	struct braw_key k;

	braw_item_key(blk, slot, &k);
	if (k.type == CTX_KEY) {
		add_target(T_CTX, leaf, slot);
		add_target(T_RESIZE, leaf, slot);
		*fscrypt = 1;
	} else if (k.type == BTRFS_EXTENT_DATA_KEY && size >= FE_SIZE &&
		   d[FE_TYPE] != BTRFS_FILE_EXTENT_INLINE && d[FE_ENCRYPTION]) {
		if (size > FE_SIZE)
			add_target(T_EXTCTX, leaf, slot);
		add_target(T_EXTENC, leaf, slot);
		add_target(T_RESIZE, leaf, slot);
		*fscrypt = 1;
	} else if (k.type == BTRFS_EXTENT_DATA_KEY && size > 21 &&
		   d[FE_TYPE] == BTRFS_FILE_EXTENT_INLINE && is_enc_ino(tree, k.objectid)) {
		add_target(T_SYMLINK, leaf, slot);
		add_target(T_RESIZE, leaf, slot);
		*fscrypt = 1;
	} else if ((k.type == BTRFS_DIR_ITEM_KEY || k.type == BTRFS_DIR_INDEX_KEY) &&
		   size >= DIR_ITEM_HDR && (d[29] & FT_ENCRYPTED)) {
		add_target(T_DIR, leaf, slot);
		add_target(T_RESIZE, leaf, slot);
		*fscrypt = 1;
	} else if (k.type == KEY_ITEM_KEY) {
		add_target(T_KEYREC, leaf, slot);
		add_target(T_RESIZE, leaf, slot);
		*fscrypt = 1;
	} else if ((k.type == 41 && size == 40) || (k.type == 42 && size == 34)) {
		/* upstream's context items (subvolume up) */
		add_target(T_UPSTREAM, leaf, slot);
		add_target(T_RESIZE, leaf, slot);
		*fscrypt = 1;
	} else if (k.type == BTRFS_INODE_ITEM_KEY && size == INODE_ITEM_SIZE &&
		   is_enc_ino(tree, k.objectid)) {
		/* its flags say ENCRYPT (and ENCRYPT_PER_EXTENT) */
		add_target(T_INODE, leaf, slot);
		*fscrypt = 1;
	}
}

/* A leaf of a subvolume tree, in the pristine image. */
struct cand {
	uint64_t logical, tree, phys;
	const unsigned char *blk;
	struct braw_key first;
};

/*
 * By tree, then first key: the order does not depend on where the
 * allocator put the leaves, so that a seed picks the same items.
 */
static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->tree != y->tree)
		return x->tree < y->tree ? -1 : 1;
	if (x->first.objectid != y->first.objectid)
		return x->first.objectid < y->first.objectid ? -1 : 1;
	if (x->first.type != y->first.type)
		return x->first.type < y->first.type ? -1 : 1;
	return x->first.offset < y->first.offset ? -1 : x->first.offset > y->first.offset;
}

static void find_targets(void)
{
	struct braw_block *b;
	struct cand *cands;
	size_t n, i, c, ncands = 0;
	uint32_t s;
	int pass;

	if (braw_live_blocks(&fs, &b, &n))
		lab_die("walk the trees of %s: %s", dev, strerror(errno));
	cands = lab_xmalloc((n ? n : 1) * sizeof(*cands));
	part_add("top", BTRFS_FS_TREE_OBJECTID);
	for (i = 0; i < n; i++) {
		uint64_t phys[RAW_BTRFS_MAX_STRIPES];
		const unsigned char *rb;

		if (b[i].level != 0 || b[i].tree != BTRFS_ROOT_TREE_OBJECTID ||
		    braw_map(&fs, b[i].logical, fs.nodesize, phys) < 1)
			continue;
		rb = braw_image_at(&pristine, phys[0], fs.nodesize);
		if (rb)
			root_refs(rb);
	}
	for (i = 0; i < n; i++) {
		uint64_t phys[RAW_BTRFS_MAX_STRIPES];
		struct cand *cd = &cands[ncands];

		if (b[i].level != 0 || !fs_tree(b[i].tree))
			continue;
		if (part_of_tree(b[i].tree) < 0)
			part_add("?", b[i].tree);
		/* under test_dummy_encryption, the control file's tree */
		if (dummy && b[i].tree == BTRFS_FS_TREE_OBJECTID)
			continue;
		if (braw_map(&fs, b[i].logical, fs.nodesize, phys) != 1)
			lab_die("leaf %llu: not exactly one copy (the image is made with -m single)",
				(unsigned long long)b[i].logical);
		cd->blk = braw_image_at(&pristine, phys[0], fs.nodesize);
		if (!cd->blk)
			lab_die("leaf %llu is outside the saved image",
				(unsigned long long)b[i].logical);
		cd->logical = b[i].logical;
		cd->tree = b[i].tree;
		cd->phys = phys[0];
		memset(&cd->first, 0, sizeof(cd->first));
		if (braw_nritems(cd->blk))
			braw_item_key(cd->blk, 0, &cd->first);
		ncands++;
	}
	qsort(cands, ncands, sizeof(*cands), cmp_cand);
	/* pass 0: the encrypted inodes; pass 1: the targets */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < ncands; i++) {
			const unsigned char *blk = cands[i].blk;
			int fscrypt = 0;

			for (s = 0; s < braw_nritems(blk); s++) {
				struct braw_key k;

				braw_item_key(blk, s, &k);
				if (pass == 0) {
					if ((k.type != CTX_KEY && k.type != 41) ||
					    is_enc_ino(cands[i].tree, k.objectid))
						continue;
					enc_inos = realloc(enc_inos, (nenc_inos + 1) * sizeof(*enc_inos));
					if (!enc_inos)
						lab_die("out of memory");
					enc_inos[nenc_inos].tree = cands[i].tree;
					enc_inos[nenc_inos++].ino = k.objectid;
					continue;
				}
				classify_item(blk, cands[i].tree, (uint32_t)nleaves, s, &fscrypt);
			}
			if (pass == 0) {
				census_leaf(&parts[part_of_tree(cands[i].tree)], blk);
				continue;
			}
			if (!fscrypt)
				continue;
			parts[part_of_tree(cands[i].tree)].fscrypt_leaves++;
			leaves = realloc(leaves, (nleaves + 1) * sizeof(*leaves));
			if (!leaves)
				lab_die("out of memory");
			leaves[nleaves].logical = cands[i].logical;
			leaves[nleaves].tree = cands[i].tree;
			leaves[nleaves].phys = cands[i].phys;
			leaves[nleaves].blk = blk;
			leaves[nleaves].has_ctl = 0;
			leaves[nleaves].part = part_of_tree(cands[i].tree);
			add_target(T_LEAF, (uint32_t)nleaves, 0);
			nleaves++;
		}
	}
	free(cands);
	free(b);
	printf("%zu live leaves hold fscrypt items (%zu encrypted inodes):", nleaves,
	       nenc_inos);
	for (c = 0; c < NCLS; c++)
		printf(" %s %zu", cls_name[c], ntargets[c]);
	printf("\n");
	for (i = 0; i < nleaves; i++)
		printf("  leaf %llu (tree %llu, device offset %llu): %u items\n",
		       (unsigned long long)leaves[i].logical,
		       (unsigned long long)leaves[i].tree,
		       (unsigned long long)leaves[i].phys,
		       braw_nritems(leaves[i].blk));
	if (!ntargets[T_CTX] || !ntargets[T_EXTCTX] || !ntargets[T_DIR] ||
	    !ntargets[T_SYMLINK])
		lab_die("the pristine image lacks a kind of fscrypt item to damage");
}

/* ---- the walk --------------------------------------------------------------------------- */

/* What the pristine image showed for one inode of one subvolume. */
struct ref {
	char sv[8];
	uint64_t ino;
	mode_t mode;
	char path[700];		/* as the walk with the key named it */
	char name[256];		/* its own name, with the key ... */
	uint64_t parent;	/* ... in this directory */
	unsigned char *data;	/* contents, with the key */
	size_t len;
	char target[600];	/* symlink, with the key */
	int err[2][NOPS];	/* per phase: errno of each operation, -1 not done */
};

static struct ref *refs;
static size_t nrefs;

/* The result of one image, filled in by its child (shared memory). */
struct img_res {
	int stage, mounted, mount_err, addkey_err, rmkey_err, umount_err;
	int control_err;	/* 0 ok, errno, or -1: wrong contents */
	int post_checked;	/* after a read-write session: mounted again */
	int post_mount_err, post_control_err;
	int ctl2_checked;	/* sv's control (not if a leaf of it was mutated) */
	int ctl2_err;		/* 0 ok, errno, or -1 */
	unsigned ops, deviations, visited;
	unsigned err_by[NOPS][NERR];
	unsigned wrong_data, wrong_data_unexpl, wrong_name, wrong_name_unexpl;
	unsigned unknown, unknown_unexpl, leak, nokey_data, nokey_data_unexpl;
	unsigned odd_errno, now_ok;
	unsigned explained;	/* mutations that explain a wrong result */
	unsigned dev_parts;	/* parts (a bit each) where a result differed */
	double t[9];		/* when each stage began */
	char notes[NOTES_SIZE];
	size_t notes_len;
};

/* The inodes whose items a mutation touched. */
struct touched {
	uint64_t ino[MAX_TOUCHED];
	uint8_t mask[MAX_TOUCHED];	/* which mutations touched it */
	size_t n;
	unsigned cur;			/* the mutation being made */
};

/* The mutations (a bit each) that touched @ino, or 0. */
static unsigned is_touched(const struct touched *t, uint64_t ino)
{
	size_t i;

	for (i = 0; t && i < t->n; i++)
		if (t->ino[i] == ino)
			return t->mask[i];
	return 0;
}

static void touch(struct touched *t, uint64_t ino)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (t->ino[i] == ino)
			break;
	if (i == MAX_TOUCHED)
		return;
	if (i == t->n) {
		t->ino[t->n] = ino;
		t->mask[t->n++] = 0;
	}
	t->mask[i] |= (uint8_t)(1u << t->cur);
}

struct walk {
	int phase;		/* 0 without the key, 1 with */
	int reference;		/* building refs[] */
	struct img_res *res;
	const struct touched *t;
	unsigned entries;
	struct { dev_t dev; ino_t ino; } dirs[MAX_ENTRIES];
	unsigned ndirs;
	unsigned char *buf;	/* READ_CAP + 1 */
};

static void note(struct img_res *r, const char *fmt, ...) LAB_PRINTF(2, 3);
static void note(struct img_res *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!r || r->notes_len + 2 >= sizeof(r->notes))
		return;
	va_start(ap, fmt);
	n = vsnprintf(r->notes + r->notes_len, sizeof(r->notes) - r->notes_len, fmt, ap);
	va_end(ap);
	if (n > 0) {
		size_t i, end = r->notes_len + (size_t)n;

		/* names decrypted with a wrong key may hold any byte */
		for (i = r->notes_len; i < end && i < sizeof(r->notes); i++)
			if ((unsigned char)r->notes[i] < 0x20 || (unsigned char)r->notes[i] >= 0x7f)
				r->notes[i] = '?';
		r->notes_len += (size_t)n;
		if (r->notes_len >= sizeof(r->notes) - 1)
			r->notes_len = sizeof(r->notes) - 2;
		r->notes[r->notes_len++] = '\n';
		r->notes[r->notes_len] = '\0';
	}
}

/* A result in subvolume @sv differed from the reference. */
static void dev_mark(struct img_res *r, const char *sv)
{
	int p = part_by_name(sv);

	if (r && p >= 0 && p < 32)
		r->dev_parts |= 1u << p;
}

static struct ref *ref_find(const char *sv, uint64_t ino)
{
	size_t i;

	for (i = 0; i < nrefs; i++)
		if (refs[i].ino == ino && !strcmp(refs[i].sv, sv))
			return &refs[i];
	return NULL;
}

static struct ref *ref_get(const char *sv, uint64_t ino)
{
	struct ref *r = ref_find(sv, ino);
	int p, o;

	if (r)
		return r;
	refs = realloc(refs, (nrefs + 1) * sizeof(*refs));
	if (!refs)
		lab_die("out of memory for the reference");
	r = &refs[nrefs++];
	memset(r, 0, sizeof(*r));
	snprintf(r->sv, sizeof(r->sv), "%s", sv);
	r->ino = ino;
	for (p = 0; p < 2; p++)
		for (o = 0; o < NOPS; o++)
			r->err[p][o] = -1;
	return r;
}

/*
 * Operation @op on (@sv, @ino) at @path ended with @err (0: success).  The
 * reference records it; a checked image counts what differs.
 */
static void outcome(struct walk *w, const char *sv, uint64_t ino,
		    const char *path, enum op op, int err)
{
	struct img_res *r = w->res;
	struct ref *ref;

	if (w->reference) {
		ref_get(sv, ino)->err[w->phase][op] = err;
		return;
	}
	r->ops++;
	ref = ref_find(sv, ino);
	if (ref && ref->err[w->phase][op] == err)
		return;
	dev_mark(r, sv);
	if (err) {
		r->deviations++;
		r->err_by[op][err_slot(err)]++;
		if (!clean_errno(err)) {
			r->odd_errno++;
			note(r, "BUG? %s of %s (%s ino %llu, %s) failed with %s, not a clean error",
			     op_name[op], path, sv, (unsigned long long)ino,
			     w->phase ? "key" : "no key", lab_errname(err));
		}
	} else if (ref && ref->err[w->phase][op] > 0) {
		r->now_ok++;
		note(r, "%s of %s (%s ino %llu, %s) succeeded; the pristine image gave %s",
		     op_name[op], path, sv, (unsigned long long)ino,
		     w->phase ? "key" : "no key",
		     lab_errname(ref->err[w->phase][op]));
	}
}

/* Read the file at @fd: its bytes into w->buf; the count, or -1. */
static ssize_t read_all(struct walk *w, int fd, int *err)
{
	size_t got = 0;
	ssize_t n;

	*err = 0;
	while (got < READ_CAP) {
		n = read(fd, w->buf + got, READ_CAP - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = errno;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Does @got hold a 4 KiB block (or, short, all) of @ref's plaintext? */
static int has_plaintext(const unsigned char *got, size_t n, const struct ref *ref)
{
	size_t off, len;

	for (off = 0; off < n && off < ref->len; off += 4096) {
		len = n - off < 4096 ? n - off : 4096;
		if (len > ref->len - off)
			len = ref->len - off;
		if (len >= 16 && !memcmp(got + off, ref->data + off, len))
			return 1;
	}
	return 0;
}

static void check_contents(struct walk *w, const char *sv, uint64_t ino,
			   const char *path, const unsigned char *got, size_t n)
{
	struct img_res *r = w->res;
	struct ref *ref = ref_find(sv, ino);
	unsigned expl = is_touched(w->t, ino);

	if (!ref || (ref->len == n && !memcmp(ref->data, got, n)))
		return;
	dev_mark(r, sv);
	if (w->phase == 0) {
		/* the pristine image gave ENOKEY here, or this would not run */
		if (has_plaintext(got, n, ref)) {
			r->leak++;
			note(r, "BUG: plaintext of %s (%s ino %llu) read without the key (%zu bytes)",
			     path, sv, (unsigned long long)ino, n);
			return;
		}
		r->nokey_data++;
		r->explained |= expl;
		if (!expl) {
			r->nokey_data_unexpl++;
			note(r, "BUG? %s (%s ino %llu) read %zu bytes (not plaintext) without the key, and no mutation touched it",
			     path, sv, (unsigned long long)ino, n);
		}
		return;
	}
	r->wrong_data++;
	r->explained |= expl;
	if (!expl) {
		r->wrong_data_unexpl++;
		note(r, "BUG? %s (%s ino %llu) read %zu bytes that are not its contents (%zu bytes), without an error, and no mutation touched it",
		     path, sv, (unsigned long long)ino, n, ref->len);
	} else {
		note(r, "%s (%s ino %llu): wrong contents without an error (%zu bytes, %zu expected; the mutations touched it)",
		     path, sv, (unsigned long long)ino, n, ref->len);
	}
}

static void walk_dir(struct walk *w, int dfd, const char *rel, const char *sv,
		     uint64_t dir_ino, int depth);

static void visit(struct walk *w, int dfd, const char *rel, const char *name,
		  uint64_t d_ino, const char *sv, uint64_t dir_ino, int depth)
{
	char path[PATH_MAX], child_sv[8], target[PATH_MAX];
	struct img_res *r = w->res;
	struct ref *ref;
	struct stat st;
	ssize_t n;
	unsigned i;
	int fd, err;

	{
		size_t rl = strlen(rel), nl = strlen(name);

		if (rl + nl + 2 > sizeof(path))
			return;
		memcpy(path, rel, rl);
		if (rl)
			path[rl++] = '/';
		memcpy(path + rl, name, nl + 1);
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		outcome(w, sv, d_ino, path, OP_STAT, errno);
		return;
	}
	snprintf(child_sv, sizeof(child_sv), "%s", sv);
	if (S_ISDIR(st.st_mode) && st.st_ino == FIRST_INO && strlen(path) < sizeof(child_sv))
		snprintf(child_sv, sizeof(child_sv), "%s", path);
	outcome(w, child_sv, st.st_ino, path, OP_STAT, 0);
	if (r)
		r->visited++;
	ref = w->reference ? ref_get(child_sv, st.st_ino) : ref_find(child_sv, st.st_ino);
	if (w->reference) {
		ref->mode = st.st_mode;
		if (w->phase == 1) {
			snprintf(ref->path, sizeof(ref->path), "%s", path);
			copy_str(ref->name, sizeof(ref->name), name);
			ref->parent = dir_ino;
		}
	} else if (!ref) {
		dev_mark(r, child_sv);
		r->unknown++;
		if (!is_touched(w->t, st.st_ino) && !is_touched(w->t, dir_ino)) {
			r->unknown_unexpl++;
			note(r, "BUG? %s (%s) is inode %llu, which the pristine image does not have, and no mutation touched it or its directory %llu",
			     path, sv, (unsigned long long)st.st_ino,
			     (unsigned long long)dir_ino);
		}
	} else if (w->phase == 1 && (strcmp(ref->name, name) || ref->parent != dir_ino)) {
		/*
		 * Its own name, in its own directory: below a directory whose
		 * name is wrong, the path is wrong but the names are right.
		 */
		char shown[160], want[160];

		dev_mark(r, child_sv);
		r->wrong_name++;
		printable(shown, sizeof(shown), path);
		printable(want, sizeof(want), ref->path);
		if (!is_touched(w->t, st.st_ino) && !is_touched(w->t, dir_ino)) {
			r->wrong_name_unexpl++;
			note(r, "BUG? inode %llu of %s is %s (in directory %llu), not %s (in %llu), and no mutation touched it or its directory",
			     (unsigned long long)st.st_ino, child_sv, shown,
			     (unsigned long long)dir_ino, want,
			     (unsigned long long)ref->parent);
		}
	}

	if (S_ISDIR(st.st_mode)) {
		for (i = 0; i < w->ndirs; i++)
			if (w->dirs[i].dev == st.st_dev && w->dirs[i].ino == st.st_ino)
				return;
		if (w->ndirs < MAX_ENTRIES) {
			w->dirs[w->ndirs].dev = st.st_dev;
			w->dirs[w->ndirs].ino = st.st_ino;
			w->ndirs++;
		}
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		outcome(w, child_sv, st.st_ino, path, OP_OPEN, fd < 0 ? errno : 0);
		if (fd < 0)
			return;
		{
			struct fscrypt_get_policy_ex_arg pa = { .policy_size = sizeof(pa.policy) };

			err = ioctl(fd, FS_IOC_GET_ENCRYPTION_POLICY_EX, &pa) ? errno : 0;
			outcome(w, child_sv, st.st_ino, path, OP_POLICY, err);
		}
		if (depth < MAX_DEPTH)
			walk_dir(w, fd, path, child_sv, st.st_ino, depth + 1);
		close(fd);
		return;
	}
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dfd, name, target, sizeof(target) - 1);
		outcome(w, child_sv, st.st_ino, path, OP_READLINK, n < 0 ? errno : 0);
		if (n < 0 || w->phase != 1)
			return;
		target[n] = '\0';
		if (w->reference) {
			copy_str(ref->target, sizeof(ref->target), target);
		} else if (ref && strcmp(ref->target, target)) {
			dev_mark(r, child_sv);
			r->wrong_data++;
			r->explained |= is_touched(w->t, st.st_ino);
			if (!is_touched(w->t, st.st_ino)) {
				r->wrong_data_unexpl++;
				note(r, "BUG? symlink %s (%s ino %llu) reads \"%.60s\", not \"%.60s\", and no mutation touched it",
				     path, child_sv, (unsigned long long)st.st_ino,
				     target, ref->target);
			}
		}
		return;
	}
	if (!S_ISREG(st.st_mode))
		return;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	outcome(w, child_sv, st.st_ino, path, OP_OPEN, fd < 0 ? errno : 0);
	if (fd < 0)
		return;
	{
		struct fscrypt_get_policy_ex_arg pa = { .policy_size = sizeof(pa.policy) };

		err = ioctl(fd, FS_IOC_GET_ENCRYPTION_POLICY_EX, &pa) ? errno : 0;
		outcome(w, child_sv, st.st_ino, path, OP_POLICY, err);
	}
	n = read_all(w, fd, &err);
	close(fd);
	outcome(w, child_sv, st.st_ino, path, OP_READ, err);
	if (n < 0)
		return;
	if (w->reference) {
		if (w->phase == 1) {
			free(ref->data);
			ref->data = lab_xmalloc((size_t)n + 1);
			memcpy(ref->data, w->buf, (size_t)n);
			ref->len = (size_t)n;
		}
		return;
	}
	check_contents(w, child_sv, st.st_ino, path, w->buf, (size_t)n);
}

static void walk_dir(struct walk *w, int dfd, const char *rel, const char *sv,
		     uint64_t dir_ino, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd = dup(dfd);

	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		outcome(w, sv, dir_ino, rel, OP_READDIR, errno);
		if (fd >= 0)
			close(fd);
		return;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			outcome(w, sv, dir_ino, rel, OP_READDIR, errno);
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++w->entries > MAX_ENTRIES) {
			note(w->res, "more than %d entries: the walk stops", MAX_ENTRIES);
			break;
		}
		visit(w, dfd, rel, de->d_name, de->d_ino, sv, dir_ino, depth);
	}
	closedir(d);
}

static void walk(struct walk *w, int phase)
{
	int fd;

	w->phase = phase;
	w->entries = 0;
	w->ndirs = 0;
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	outcome(w, "top", FIRST_INO, ".", OP_OPEN, fd < 0 ? errno : 0);
	if (fd < 0)
		return;
	walk_dir(w, fd, "", "top", FIRST_INO, 0);
	close(fd);
}

/* Read @rel and compare it with the reference's contents at that path. */
static int control_read(struct walk *w, const char *rel)
{
	char path[PATH_MAX];
	struct ref *ref = NULL;
	ssize_t n;
	size_t i;
	int fd, err;

	for (i = 0; i < nrefs; i++)
		if (!strcmp(refs[i].path, rel))
			ref = &refs[i];
	if (!ref)
		return -2;
	PATHF(path, "%s/%s", mnt, rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	n = read_all(w, fd, &err);
	close(fd);
	if (n < 0)
		return err;
	return (size_t)n == ref->len && !memcmp(w->buf, ref->data, ref->len) ? 0 : -1;
}

static int drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, "3", 1) == 1;
	close(fd);
	return ok ? 0 : -1;
}

/*
 * Mount, walk without and with the key, read the controls, remove the key,
 * unmount.  Runs in a child for the mutated images; @ctl2 says whether the
 * control file in sv is to be checked.
 */
static void run_image(struct walk *w, int rw, int ctl2)
{
	struct img_res *r = w->res;
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE], id2[FSCRYPT_KEY_IDENTIFIER_SIZE];
	int i, e;

	r->stage = 1;
	r->t[1] = now();
	if (mount(dev, mnt, "btrfs", rw ? 0 : MS_RDONLY, img_opts)) {
		r->mount_err = errno;
		if (!w->reference) {
			r->err_by[OP_MOUNT][err_slot(errno)]++;
			r->deviations++;
			if (!clean_errno(errno)) {
				r->odd_errno++;
				note(r, "BUG? mount failed with %s, not a clean error",
				     lab_errname(errno));
			}
		}
		return;
	}
	r->mounted = 1;
	r->stage = 2;
	r->t[2] = now();
	walk(w, 0);
	r->stage = 3;
	r->t[3] = now();
	/* both keys: the file under two keys reads whole */
	r->addkey_err = lab_add_key(mnt, KEY_SEED, id) ? errno : 0;
	if (!r->addkey_err)
		r->addkey_err = lab_add_key(mnt, KEY_SEED2, id2) ? errno : 0;
	if (w->reference && !r->addkey_err) {
		/* a replay (FUZZ_PRISTINE) learns them here */
		memcpy(key_id, id, sizeof(key_id));
		memcpy(key2_id, id2, sizeof(key2_id));
	}
	if (r->addkey_err)
		outcome(w, "top", FIRST_INO, ".", OP_ADDKEY, r->addkey_err);
	drop_caches();
	r->stage = 4;
	r->t[4] = now();
	walk(w, 1);
	r->stage = 5;
	r->t[5] = now();
	drop_caches();
	r->control_err = control_read(w, "control");
	r->ctl2_checked = ctl2;
	r->ctl2_err = ctl2 ? control_read(w, "sv/plainctl") : 0;
	if (r->control_err)
		outcome(w, "top", FIRST_INO, "control", OP_CONTROL,
			r->control_err > 0 ? r->control_err : EBADMSG);
	r->stage = 6;
	r->t[6] = now();
	r->rmkey_err = lab_remove_key(mnt, id, NULL) ? errno : 0;
	if (!r->rmkey_err)
		r->rmkey_err = lab_remove_key(mnt, id2, NULL) ? errno : 0;
	if (r->rmkey_err && r->rmkey_err != r->addkey_err)
		outcome(w, "top", FIRST_INO, ".", OP_RMKEY, r->rmkey_err);
	r->stage = 7;
	r->t[7] = now();
	for (i = 0; i < 20; i++) {
		if (!umount(mnt)) {
			r->umount_err = 0;
			break;
		}
		e = errno;
		r->umount_err = e;
		if (e != EBUSY)
			break;
		usleep(100 * 1000);
	}
	if (r->umount_err)
		outcome(w, "top", FIRST_INO, ".", OP_UMOUNT, r->umount_err);
	r->stage = 8;
	r->t[8] = now();
	if (!rw || r->umount_err)
		return;
	/* what the read-write session committed: mount again, read the control */
	r->post_checked = 1;
	if (mount(dev, mnt, "btrfs", MS_RDONLY, img_opts)) {
		r->post_mount_err = errno;
		return;
	}
	r->post_control_err = control_read(w, "control");
	if (umount(mnt))
		r->post_control_err = r->post_control_err ? r->post_control_err : errno;
	r->stage = 9;
}

/* ---- mutations ------------------------------------------------------------------------- */

struct image {
	unsigned index;
	uint64_t rng;
	int rw;
	struct { uint32_t leaf; unsigned char *blk; } work[MAX_WORK];
	unsigned nwork;
	struct touched t;
	struct text desc;
	unsigned nmut;
	char label[MAX_MUT][96];	/* kind and field of each mutation */
	unsigned cls[MAX_MUT];
	unsigned by_cls[NCLS];
	unsigned part_mask;		/* parts (a bit each) of the leaves mutated */
	unsigned by_part[MAX_PARTS];
};

static const char *cls_name_of(const struct image *im)
{
	return cls_name[im->cls[im->t.cur]];
}

static unsigned char *work_blk(struct image *im, uint32_t leaf)
{
	unsigned i;

	for (i = 0; i < im->nwork; i++)
		if (im->work[i].leaf == leaf)
			return im->work[i].blk;
	if (im->nwork == MAX_WORK)
		return NULL;
	im->work[im->nwork].leaf = leaf;
	im->work[im->nwork].blk = lab_xmalloc(fs.nodesize);
	memcpy(im->work[im->nwork].blk, leaves[leaf].blk, fs.nodesize);
	return im->work[im->nwork++].blk;
}

static void hexbytes(char *out, size_t size, const unsigned char *p, size_t n)
{
	size_t i, o = 0;

	out[0] = '\0';
	for (i = 0; i < n && o + 3 < size; i++)
		o += (size_t)snprintf(out + o, size - o, "%02x", p[i]);
	if (i < n && o + 3 < size)
		snprintf(out + o, size - o, "..");
}

static const uint8_t interesting8[] = { 0x00, 0x01, 0x02, 0x03, 0x7f, 0x80, 0xfe, 0xff };

/* Put @v into @len (1, 2, 4 or 8) bytes at @p, little-endian. */
static void put_le(unsigned char *p, size_t len, uint64_t v)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t interesting_value(uint64_t *rng, size_t len, uint64_t old)
{
	static const uint64_t v[] = {
		0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff,
		0xffffffffULL, 0x100000000ULL, 0x8000000000000000ULL, ~0ULL,
	};

	switch (rng_below(rng, 4)) {
	case 0:
		return old + 1;
	case 1:
		return old - 1;
	case 2:
		return rng_next(rng) >> (64 - 8 * len);
	default:
		return v[rng_below(rng, sizeof(v) / sizeof(v[0]))];
	}
}

/*
 * Damage the field [@at, +@len) of @blk: a bit flip, a random byte, a
 * random run, or (for fields of up to 8 bytes, taken as little-endian
 * numbers) an interesting value.  Describes what it did in @how.
 */
static void damage(struct image *im, unsigned char *blk, uint32_t at,
		   uint32_t len, const char *what)
{
	unsigned char *before;
	char ob[40], nb[40], how[32];
	uint32_t pos, run, i, lo = 0, hi = 0;
	uint64_t old;
	unsigned kind, tries;

	if (at + len > fs.nodesize || len == 0)
		return;
	before = lab_xmalloc(len);
	memcpy(before, blk + at, len);
	/* an interesting value may be the one already there: try again */
	for (tries = 0; tries < 4 && lo == hi; tries++) {
	kind = rng_below(&im->rng, len <= 8 ? 4 : 3);
	switch (kind) {
	case 0:
		pos = at + rng_below(&im->rng, len);
		i = rng_below(&im->rng, 8);
		blk[pos] ^= (unsigned char)(1u << i);
		snprintf(how, sizeof(how), "bit %u of byte %u", i, pos - at);
		break;
	case 1:
		pos = at + rng_below(&im->rng, len);
		blk[pos] = len == 1 && rng_below(&im->rng, 2) ?
			interesting8[rng_below(&im->rng, sizeof(interesting8))] :
			(unsigned char)(blk[pos] ^ (1 + rng_below(&im->rng, 255)));
		snprintf(how, sizeof(how), "byte %u", pos - at);
		break;
	case 2:
		run = 2 + rng_below(&im->rng, 7);
		if (run > len)
			run = len;
		pos = at + rng_below(&im->rng, len - run + 1);
		for (i = 0; i < run; i++)
			blk[pos + i] = (unsigned char)rng_next(&im->rng);
		snprintf(how, sizeof(how), "%u random bytes at %u", run, pos - at);
		break;
	default:
		old = 0;
		for (i = 0; i < len; i++)
			old |= (uint64_t)blk[at + i] << (8 * i);
		put_le(blk + at, len, interesting_value(&im->rng, len, old));
		snprintf(how, sizeof(how), "le%u value", 8 * len);
		break;
	}
	for (lo = 0; lo < len && before[lo] == blk[at + lo]; lo++)
		;
	for (hi = len; hi > lo && before[hi - 1] == blk[at + hi - 1]; hi--)
		;
	}
	if (lo == hi) {
		text_add(&im->desc, "%s: %s: no change; ", what, how);
	} else {
		hexbytes(ob, sizeof(ob), before + lo, hi - lo);
		hexbytes(nb, sizeof(nb), blk + at + lo, hi - lo);
		text_add(&im->desc, "%s: %s: +%u %s -> %s; ", what, how, lo, ob, nb);
	}
	free(before);
}

struct field {
	const char *name;
	uint32_t off, len;
};

/* Pick a field of @f[@n] (or, one time in four, the whole item). */
static void damage_fields(struct image *im, unsigned char *blk, uint32_t start,
			  uint32_t size, const struct field *f, size_t n,
			  const char *what)
{
	char label[200];
	size_t i;

	if (n && rng_below(&im->rng, 4)) {
		for (i = 0; i < 8; i++) {
			const struct field *x = &f[rng_below(&im->rng, (uint32_t)n)];

			if (x->off + x->len > size)
				continue;
			snprintf(label, sizeof(label), "%s %s", what, x->name);
			snprintf(im->label[im->t.cur], sizeof(im->label[0]), "%s %s",
				 cls_name_of(im), x->name);
			damage(im, blk, start + x->off, x->len, label);
			return;
		}
	}
	snprintf(label, sizeof(label), "%s (any byte)", what);
	snprintf(im->label[im->t.cur], sizeof(im->label[0]), "%s (any byte)",
		 cls_name_of(im));
	damage(im, blk, start, size, label);
}

static const struct field ctx_v2_fields[] = {
	{ "version", 0, 1 }, { "contents_mode", 1, 1 }, { "filenames_mode", 2, 1 },
	{ "flags", 3, 1 }, { "reserved", 4, 4 }, { "key_identifier", 8, 16 },
	{ "nonce", 24, 16 },
};
static const struct field ctx_v1_fields[] = {
	{ "version", 0, 1 }, { "contents_mode", 1, 1 }, { "filenames_mode", 2, 1 },
	{ "flags", 3, 1 }, { "key_descriptor", 4, 8 }, { "nonce", 12, 16 },
};
static const struct field ectx_v2_fields[] = {
	{ "version", 0, 1 }, { "mode", 1, 1 }, { "flags", 2, 1 },
	{ "reserved", 3, 1 }, { "key_identifier", 4, 16 },
	{ "key_nonce", 20, 16 }, { "extent_nr", 36, 8 },
};
static const struct field ectx_v1_fields[] = {
	{ "version", 0, 1 }, { "mode", 1, 1 }, { "key_identifier", 2, 16 },
	{ "nonce", 18, 16 },
};
static const struct field keyrec_fields[] = {
	{ "identifier", 0, 16 }, { "identifier prefix", 0, 8 }, { "flags", 16, 8 },
};
static const struct field dir_fields[] = {
	{ "location objectid", 0, 8 }, { "location type", 8, 1 },
	{ "location offset", 9, 8 }, { "transid", 17, 8 },
	{ "data_len", 25, 2 }, { "name_len", 27, 2 }, { "type", 29, 1 },
	{ "name", 30, 0 },	/* length filled in */
};
static const struct field inline_fields[] = {
	{ "generation", 0, 8 }, { "ram_bytes", 8, 8 }, { "compression", 16, 1 },
	{ "encryption", 17, 1 }, { "other_encoding", 18, 2 }, { "type", 20, 1 },
	{ "target length", 21, 2 }, { "target", 23, 0 },	/* filled in */
};

/* Where item @slot of leaf @leaf is in @blk (from the pristine leaf if @blk is broken). */
static int item_place(uint32_t leaf, const unsigned char *blk, uint32_t slot,
		      uint32_t *start, uint32_t *size, struct braw_key *key)
{
	const unsigned char *src = braw_leaf_sane(blk, fs.nodesize) &&
				   slot < braw_nritems(blk) ? blk : leaves[leaf].blk;

	*start = braw_item_start(src, slot);
	*size = braw_item_size(src, slot);
	braw_item_key(src, slot, key);
	return *start + *size <= fs.nodesize ? 0 : -1;
}

static const char *key_type_name(uint8_t t)
{
	switch (t) {
	case BTRFS_INODE_ITEM_KEY: return "INODE_ITEM";
	case BTRFS_INODE_REF_KEY: return "INODE_REF";
	case BTRFS_INODE_EXTREF_KEY: return "INODE_EXTREF";
	case BTRFS_XATTR_ITEM_KEY: return "XATTR_ITEM";
	case CTX_KEY: return "FSCRYPT_INODE_CTX";
	case KEY_ITEM_KEY: return "FSCRYPT_KEY";
	case 41: return "UPSTREAM_FSCRYPT_CTX";
	case 42: return "UPSTREAM_EXTENT_CTX";
	case BTRFS_DIR_ITEM_KEY: return "DIR_ITEM";
	case BTRFS_DIR_INDEX_KEY: return "DIR_INDEX";
	case BTRFS_EXTENT_DATA_KEY: return "EXTENT_DATA";
	case BTRFS_ROOT_REF_KEY: return "ROOT_REF";
	case BTRFS_ROOT_BACKREF_KEY: return "ROOT_BACKREF";
	}
	return "type";
}

/* The inodes a change of item @slot's data touches (its own, a dir item's child). */
static void touch_item(struct image *im, const unsigned char *blk, uint32_t slot)
{
	struct braw_key k;
	uint32_t start, size;

	if (slot >= braw_nritems(blk))
		return;
	braw_item_key(blk, slot, &k);
	touch(&im->t, k.objectid);
	start = braw_item_start(blk, slot);
	size = braw_item_size(blk, slot);
	if ((k.type == BTRFS_DIR_ITEM_KEY || k.type == BTRFS_DIR_INDEX_KEY) &&
	    size >= 8 && start + 8 <= fs.nodesize)
		touch(&im->t, braw_le64(blk + start));
}

static void touch_leaf(struct image *im, const unsigned char *blk)
{
	uint32_t s, n = braw_nritems(blk);

	for (s = 0; s < n && BRAW_HDR_SIZE + (s + 1) * BRAW_ITEM_SIZE <= fs.nodesize; s++)
		touch_item(im, blk, s);
}

static const char *const hdr_field_names[] = {
	"fsid", "bytenr", "flags", "chunk_tree_uuid", "generation", "owner",
	"nritems", "level",
};
static const uint32_t hdr_field_off[] = { 32, 48, 56, 64, 80, 88, 96, 100, 101 };

/* A flip or random byte anywhere in the used bytes of a leaf. */
static void mutate_leaf(struct image *im, uint32_t leaf)
{
	const unsigned char *p = leaves[leaf].blk;
	unsigned char *blk = work_blk(im, leaf);
	uint32_t n = braw_nritems(p), low, used_hdr, used_items, used_data, pick, at;
	char what[200];
	struct braw_key k;
	unsigned f;

	if (!blk)
		return;
	low = n ? braw_item_start(p, n - 1) : fs.nodesize;
	used_hdr = BRAW_HDR_SIZE - BRAW_CSUM_SIZE;
	used_items = n * BRAW_ITEM_SIZE;
	used_data = fs.nodesize - low;
	pick = rng_below(&im->rng, used_hdr + used_items + used_data);
	if (pick < used_hdr) {
		at = BRAW_CSUM_SIZE + pick;
		for (f = 0; hdr_field_off[f + 1] <= at; f++)
			;
		snprintf(what, sizeof(what), "leaf %llu header %s",
			 (unsigned long long)leaves[leaf].logical, hdr_field_names[f]);
		snprintf(im->label[im->t.cur], sizeof(im->label[0]), "leaf header %s",
			 hdr_field_names[f]);
		touch_leaf(im, p);
	} else if (pick < used_hdr + used_items) {
		uint32_t slot = (pick - used_hdr) / BRAW_ITEM_SIZE, o = (pick - used_hdr) % BRAW_ITEM_SIZE;

		at = BRAW_HDR_SIZE + pick - used_hdr;
		braw_item_key(p, slot, &k);
		snprintf(what, sizeof(what), "leaf %llu item %u (%llu %s %llu) header %s",
			 (unsigned long long)leaves[leaf].logical, slot,
			 (unsigned long long)k.objectid, key_type_name(k.type),
			 (unsigned long long)k.offset,
			 o < 8 ? "key objectid" : o == 8 ? "key type" :
			 o < 17 ? "key offset" : o < 21 ? "data offset" : "data size");
		snprintf(im->label[im->t.cur], sizeof(im->label[0]), "leaf item header %s",
			 o < 8 ? "key objectid" : o == 8 ? "key type" :
			 o < 17 ? "key offset" : o < 21 ? "data offset" : "data size");
		touch_item(im, p, slot);
		if (slot)
			touch_item(im, p, slot - 1);
		touch_item(im, p, slot + 1);
	} else {
		uint32_t slot;

		at = low + (pick - used_hdr - used_items);
		for (slot = 0; slot < n && braw_item_start(p, slot) > at; slot++)
			;
		braw_item_key(p, slot, &k);
		snprintf(what, sizeof(what), "leaf %llu item %u (%llu %s %llu) data byte %u",
			 (unsigned long long)leaves[leaf].logical, slot,
			 (unsigned long long)k.objectid, key_type_name(k.type),
			 (unsigned long long)k.offset, at - braw_item_start(p, slot));
		snprintf(im->label[im->t.cur], sizeof(im->label[0]), "leaf item data (%s)",
			 key_type_name(k.type));
		touch_item(im, p, slot);
	}
	damage(im, blk, at, 1, what);
	/* a changed key or dir item may now name another inode */
	if (braw_leaf_sane(blk, fs.nodesize))
		touch_leaf(im, blk);
}

/* A new size for an item of key type @type now @size bytes long. */
static uint32_t new_item_size(struct image *im, uint8_t type, uint32_t size,
			      int is_inline)
{
	static const uint32_t ext[] = { 53, 54, 86, 87, 88, 93, 96, 97, 98, 100, 21, 0 };
	static const uint32_t ctx[] = { 0, 1, 27, 28, 29, 39, 40, 41, 44 };
	uint32_t r = rng_below(&im->rng, 4);

	if (r == 0)
		return size + 1;
	if (r == 1)
		return size ? size - 1 : 1;
	if (type == CTX_KEY)
		return ctx[rng_below(&im->rng, sizeof(ctx) / sizeof(ctx[0]))];
	if (type == BTRFS_EXTENT_DATA_KEY && !is_inline)
		return ext[rng_below(&im->rng, sizeof(ext) / sizeof(ext[0]))];
	if (type == BTRFS_EXTENT_DATA_KEY)
		return 21 + rng_below(&im->rng, size + 16);
	/* dir items */
	return rng_below(&im->rng, 2) ? DIR_ITEM_HDR + rng_below(&im->rng, 3) :
	       size + 4 + rng_below(&im->rng, 12);
}

static void resize(struct image *im, unsigned char *blk, uint32_t leaf,
		   uint32_t slot, uint32_t new_size, const char *what)
{
	uint32_t old = braw_item_size(blk, slot);

	if (braw_item_resize(blk, fs.nodesize, slot, new_size,
			     (unsigned char)rng_next(&im->rng))) {
		text_add(&im->desc, "%s: resize %u -> %u impossible (%s); ", what,
			 old, new_size, strerror(errno));
		return;
	}
	(void)leaf;
	text_add(&im->desc, "%s: item size %u -> %u; ", what, old, new_size);
}

static void mutate_one(struct image *im)
{
	unsigned total = 0, pick, c;
	const struct target *t;
	struct field f[8];
	uint32_t start, size;
	struct braw_key k;
	unsigned char *blk, *d;
	char what[200];

	for (c = 0; c < NCLS; c++)
		total += ntargets[c] ? cls_weight[c] : 0;
	pick = rng_below(&im->rng, total);
	for (c = 0; c < NCLS; c++) {
		if (!ntargets[c])
			continue;
		if (pick < cls_weight[c])
			break;
		pick -= cls_weight[c];
	}
	im->by_cls[c]++;
	im->cls[im->t.cur] = c;
	snprintf(im->label[im->t.cur], sizeof(im->label[0]), "%s", cls_name[c]);
	t = &targets[c][rng_below(&im->rng, (uint32_t)ntargets[c])];
	if (leaves[t->leaf].part >= 0 && leaves[t->leaf].part < 32) {
		im->part_mask |= 1u << leaves[t->leaf].part;
		im->by_part[leaves[t->leaf].part]++;
	}
	if (c == T_LEAF) {
		text_add(&im->desc, "[%s] ", cls_name[c]);
		mutate_leaf(im, t->leaf);
		return;
	}
	blk = work_blk(im, t->leaf);
	if (!blk || item_place(t->leaf, blk, t->slot, &start, &size, &k))
		return;
	d = blk + start;
	snprintf(what, sizeof(what), "leaf %llu item %u (%llu %s %llu)",
		 (unsigned long long)leaves[t->leaf].logical, t->slot,
		 (unsigned long long)k.objectid, key_type_name(k.type),
		 (unsigned long long)k.offset);
	text_add(&im->desc, "[%s] ", cls_name[c]);
	touch_item(im, blk, t->slot);
	switch (c) {
	case T_CTX:
		if (size && d[0] == 1)
			damage_fields(im, blk, start, size, ctx_v1_fields,
				      sizeof(ctx_v1_fields) / sizeof(f[0]), what);
		else
			damage_fields(im, blk, start, size, ctx_v2_fields,
				      sizeof(ctx_v2_fields) / sizeof(f[0]), what);
		break;
	case T_EXTCTX:
		if (size <= FE_SIZE) {
			damage(im, blk, start, size, what);
			break;
		}
		if (d[FE_SIZE] == 1)
			damage_fields(im, blk, start + FE_SIZE, size - FE_SIZE,
				      ectx_v1_fields,
				      sizeof(ectx_v1_fields) / sizeof(f[0]), what);
		else
			damage_fields(im, blk, start + FE_SIZE, size - FE_SIZE,
				      ectx_v2_fields,
				      sizeof(ectx_v2_fields) / sizeof(f[0]), what);
		break;
	case T_EXTENC: {
		static const uint8_t enc[] = { 0, 1, 2, 3, 0x80, 0xff };
		static const uint32_t sizes[] = { 53, 87, 97, 93, 63 };
		uint8_t old = d[FE_ENCRYPTION];

		if (size <= FE_ENCRYPTION)
			break;
		d[FE_ENCRYPTION] = rng_below(&im->rng, 5) ?
			enc[rng_below(&im->rng, sizeof(enc))] :
			(uint8_t)rng_next(&im->rng);
		text_add(&im->desc, "%s encryption %u -> %u; ", what, old, d[FE_ENCRYPTION]);
		snprintf(im->label[im->t.cur], sizeof(im->label[0]), "extent-encryption %u -> %u",
			 old, d[FE_ENCRYPTION]);
		if (rng_below(&im->rng, 3) == 0 && braw_leaf_sane(blk, fs.nodesize))
			resize(im, blk, t->leaf, t->slot,
			       sizes[rng_below(&im->rng, sizeof(sizes) / sizeof(sizes[0]))],
			       what);
		break;
	}
	case T_DIR:
		memcpy(f, dir_fields, sizeof(dir_fields));
		f[7].len = size > DIR_ITEM_HDR ? size - DIR_ITEM_HDR : 0;
		damage_fields(im, blk, start, size, f, f[7].len ? 8 : 7, what);
		break;
	case T_KEYREC:
		/* the key offset must be the identifier's first 8 bytes */
		if (rng_below(&im->rng, 4) == 0) {
			struct braw_key nk = k;

			nk.offset = rng_below(&im->rng, 2) ? k.offset ^ 1 :
				    interesting_value(&im->rng, 8, k.offset);
			braw_item_set_key(blk, t->slot, &nk);
			text_add(&im->desc, "%s key offset -> %llu; ", what,
				 (unsigned long long)nk.offset);
			snprintf(im->label[im->t.cur], sizeof(im->label[0]),
				 "key-record offset");
			break;
		}
		damage_fields(im, blk, start, size, keyrec_fields,
			      sizeof(keyrec_fields) / sizeof(f[0]), what);
		break;
	case T_SYMLINK:
		memcpy(f, inline_fields, sizeof(inline_fields));
		f[7].len = size > 23 ? size - 23 : 0;
		damage_fields(im, blk, start, size, f, f[7].len ? 8 : 7, what);
		break;
	case T_INODE: {
		static const unsigned bits[] = {
			INODE_FLAG_ENCRYPT_BIT, INODE_FLAG_PER_EXTENT_BIT,
			INODE_FLAG_ENCRYPT_BIT, INODE_FLAG_PER_EXTENT_BIT,
			INODE_FLAG_UPSTREAM_BIT, 0, 3, 31,
		};
		static const struct field inode_fields[] = {
			{ "size", INODE_SIZE_OFF, 8 }, { "nlink", INODE_NLINK_OFF, 4 },
			{ "mode", INODE_MODE_OFF, 4 }, { "flags", INODE_FLAGS_OFF, 8 },
		};

		if (size != INODE_ITEM_SIZE)
			break;
		if (rng_below(&im->rng, 2)) {
			unsigned bit = bits[rng_below(&im->rng, sizeof(bits) / sizeof(bits[0]))];

			d[INODE_FLAGS_OFF + bit / 8] ^= (unsigned char)(1u << (bit % 8));
			text_add(&im->desc, "%s flags: bit %u flipped (now 0x%llx); ", what, bit,
				 (unsigned long long)braw_le64(d + INODE_FLAGS_OFF));
			snprintf(im->label[im->t.cur], sizeof(im->label[0]),
				 "inode-item flags bit %u", bit);
			break;
		}
		damage_fields(im, blk, start, size, inode_fields,
			      sizeof(inode_fields) / sizeof(f[0]), what);
		break;
	}
	case T_UPSTREAM:
		/* upstream's 40-byte context item, or its 34-byte extent context */
		if (k.type == 41)
			damage_fields(im, blk, start, size, ctx_v2_fields,
				      sizeof(ctx_v2_fields) / sizeof(f[0]), what);
		else
			damage_fields(im, blk, start, size, ectx_v1_fields,
				      sizeof(ectx_v1_fields) / sizeof(f[0]), what);
		break;
	case T_RESIZE:
		if (!braw_leaf_sane(blk, fs.nodesize))
			break;
		snprintf(im->label[im->t.cur], sizeof(im->label[0]), "resize %s",
			 key_type_name(k.type));
		resize(im, blk, t->leaf, t->slot,
		       new_item_size(im, k.type, size,
				     k.type == BTRFS_EXTENT_DATA_KEY && size > FE_TYPE &&
				     d[FE_TYPE] == BTRFS_FILE_EXTENT_INLINE),
		       what);
		break;
	default:
		break;
	}
	/* a damaged dir item may now name another inode */
	touch_item(im, blk, t->slot);
}

static unsigned mut_mask = ~0u;	/* FUZZ_MUT_MASK: the mutations applied */
static unsigned rw_every;		/* FUZZ_RW_EVERY: 1 image in N read-write */

static void image_init(struct image *im, unsigned index)
{
	unsigned char *saved[MAX_WORK];
	unsigned i, j, nsaved;
	uint64_t r;

	memset(im, 0, sizeof(*im));
	im->index = index;
	im->rng = seed ^ (0x5851f42d4c957f2dULL * (index + 1));
	rng_next(&im->rng);
	im->desc.cap = 4096;
	im->desc.buf = lab_xmalloc(im->desc.cap);
	im->desc.buf[0] = '\0';
	/* one draw either way, so that the plan does not depend on it */
	r = rng_next(&im->rng);
	im->rw = rw_every && r % rw_every == 0;
	im->nmut = 1 + rng_below(&im->rng, MAX_MUT);
	for (i = 0; i < im->nmut; i++) {
		im->t.cur = i;
		if (mut_mask & (1u << i)) {
			mutate_one(im);
			continue;
		}
		/*
		 * Left out (FUZZ_MUT_MASK): made as usual, so that the PRNG
		 * stream and the other mutations stay the same, then undone.
		 */
		nsaved = im->nwork;
		for (j = 0; j < nsaved; j++) {
			saved[j] = lab_xmalloc(fs.nodesize);
			memcpy(saved[j], im->work[j].blk, fs.nodesize);
		}
		text_add(&im->desc, "(left out: ");
		mutate_one(im);
		text_add(&im->desc, ") ");
		for (j = 0; j < im->nwork; j++) {
			memcpy(im->work[j].blk, j < nsaved ? saved[j] : leaves[im->work[j].leaf].blk,
			       fs.nodesize);
			if (j < nsaved)
				free(saved[j]);
		}
	}
}

static void image_free(struct image *im)
{
	unsigned i;

	for (i = 0; i < im->nwork; i++)
		free(im->work[i].blk);
	free(im->desc.buf);
}

/* Write the mutated leaves (checksums recomputed); the number changed. */
static int image_write(struct image *im)
{
	unsigned i, changed = 0;

	for (i = 0; i < im->nwork; i++) {
		if (!memcmp(im->work[i].blk, leaves[im->work[i].leaf].blk, fs.nodesize))
			continue;
		if (braw_write_block(&fs, leaves[im->work[i].leaf].logical, im->work[i].blk))
			lab_die("write leaf %llu: %s",
				(unsigned long long)leaves[im->work[i].leaf].logical,
				strerror(errno));
		changed++;
	}
	return (int)changed;
}

static int image_touches_ctl(const struct image *im)
{
	unsigned i;

	for (i = 0; i < im->nwork; i++)
		if (leaves[im->work[i].leaf].has_ctl &&
		    memcmp(im->work[i].blk, leaves[im->work[i].leaf].blk, fs.nodesize))
			return 1;
	return 0;
}

/* ---- bookkeeping ------------------------------------------------------------------------ */

static struct {
	unsigned tried, mounted, rw, clean, with_errors, errors_no_log;
	unsigned mount_err[NERR], img_err[NERR];
	unsigned long op_err[NOPS][NERR];
	unsigned wrong_data, wrong_name, unknown, nokey_data, now_ok;
	unsigned control_checked, control_fail, ctl2_checked, ctl2_skipped, ctl2_fail;
	unsigned ctl2_clean_err, post_checked, post_fail;
	unsigned bugs, splats, hangs, ro_writes, odd_errno, leaks, unexplained;
	unsigned verify_runs, full_restores, by_cls[NCLS], mutations, unchanged;
	unsigned saved_bugs;
	int stopped_at;		/* the image a splat or hang stopped the run at */
	struct { char label[96]; unsigned n; } expl[96];
	unsigned nexpl;
	double t_start, t_stage[8], t_restore;
	struct text bug_list, no_log;
	struct text images_tsv;
} st;

static void save_bug(const struct image *im, const struct img_res *r,
		     const struct kmsg_img *k, const char *why)
{
	char dir[PATH_MAX], name[64], buf[2048];
	unsigned i;
	int n;

	text_add(&st.bug_list, "%u\t%s\n", im->index, why);
	if (!out_dir || st.saved_bugs >= MAX_SAVED_BUGS)
		return;
	st.saved_bugs++;
	PATHF(dir, "%s/bug-%u", out_dir, im->index);
	mkdir(dir, 0755);
	write_text_file(dir, "mutations.txt", im->desc.buf, im->desc.len);
	if (k)
		write_text_file(dir, "kmsg.txt", k->log.buf, k->log.len);
	if (r)
		write_text_file(dir, "notes.txt", r->notes, r->notes_len);
	for (i = 0; i < im->nwork; i++) {
		snprintf(name, sizeof(name), "leaf-%llu.bin",
			 (unsigned long long)leaves[im->work[i].leaf].logical);
		write_text_file(dir, name, im->work[i].blk, fs.nodesize);
		snprintf(name, sizeof(name), "leaf-%llu.pristine.bin",
			 (unsigned long long)leaves[im->work[i].leaf].logical);
		write_text_file(dir, name, leaves[im->work[i].leaf].blk, fs.nodesize);
	}
	n = snprintf(buf, sizeof(buf),
		     "bug: %s\nseed 0x%llx image %u (%s mount)\n"
		     "replay: with the pristine image on a device D (make reliability keeps it as pristine.img):\n"
		     "  FUZZ_PRISTINE=D FUZZ_SEED=0x%llx FUZZ_FIRST=%u FUZZ_IMAGES=1 FUZZ_RW_EVERY=%u btrfs_fscrypt_fuzz\n"
		     "or on the host: make reliability FUZZ_REPLAY=<this directory's run>/bug-%u\n",
		     why, (unsigned long long)seed, im->index, im->rw ? "read-write" : "read-only",
		     (unsigned long long)seed, im->index, rw_every, im->index);
	write_text_file(dir, "replay.txt", buf, (size_t)n);
	snprintf(buf, sizeof(buf), "0x%llx\n", (unsigned long long)seed);
	write_text_file(dir, "seed", buf, strlen(buf));
	snprintf(buf, sizeof(buf), "%u\n", im->index);
	write_text_file(dir, "index", buf, strlen(buf));
	snprintf(buf, sizeof(buf), "%u\n", rw_every);
	write_text_file(dir, "rw_every", buf, strlen(buf));
	/* the pristine image as a raw file, once */
	PATHF(dir, "%s/pristine.img", out_dir);
	if (access(dir, F_OK)) {
		int fd = open(dir, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		for (i = 0; fd >= 0 && i < pristine.n; i++)
			if (pristine.r[i].off < (64u << 20) &&
			    pwrite_all(fd, pristine.r[i].data, pristine.r[i].len,
				       (off_t)pristine.r[i].off))
				break;
		if (fd >= 0)
			close(fd);
	}
}

static void restore(int full)
{
	if (full) {
		st.full_restores++;
		if (braw_image_write(&pristine, dev))
			lab_die("restore the pristine image on %s: %s", dev, strerror(errno));
	}
}

static void restore_leaves(const struct image *im)
{
	unsigned i;
	unsigned char *blk = lab_xmalloc(fs.nodesize);

	for (i = 0; i < im->nwork; i++) {
		memcpy(blk, leaves[im->work[i].leaf].blk, fs.nodesize);
		if (braw_write_block(&fs, leaves[im->work[i].leaf].logical, blk))
			lab_die("restore leaf %llu: %s",
				(unsigned long long)leaves[im->work[i].leaf].logical,
				strerror(errno));
	}
	free(blk);
}

/*
 * Compare the device with the pristine image; restore it if it differs.
 * Every read-write mount was followed by a full restore, so a difference
 * means that a read-only mount wrote (or that a restore went wrong).
 */
static int verify(const char *when)
{
	uint64_t first;
	long d;

	st.verify_runs++;
	d = braw_image_compare(&pristine, dev, &first);
	if (d < 0)
		lab_die("compare %s with the pristine image: %s", dev, strerror(errno));
	if (d == 0)
		return 0;
	printf("BUG? %s: %ld blocks of %s differ from the pristine image (first at device offset %llu), with only read-only mounts since the last restore\n",
	       when, d, dev, (unsigned long long)first);
	text_add(&st.bug_list, "-\t%s: a read-only mount changed %ld blocks of the device (first at %llu)\n",
		 when, d, (unsigned long long)first);
	st.ro_writes++;
	st.bugs++;
	restore(1);
	return 1;
}

/* ---- one image ------------------------------------------------------------------------- */

static struct img_res *shared_res;
static struct walk *child_walk;

/*
 * Does a "corrupt leaf" line of the tree-checker in @log name (block=) a
 * leaf of part @p that image @im changed?
 */
static int tree_checker_named(const struct image *im, int p, const char *log)
{
	char want[48];
	const char *l, *hit;
	unsigned i;

	for (i = 0; i < im->nwork; i++) {
		if (leaves[im->work[i].leaf].part != p ||
		    !memcmp(im->work[i].blk, leaves[im->work[i].leaf].blk, fs.nodesize))
			continue;
		snprintf(want, sizeof(want), "block=%llu ",
			 (unsigned long long)leaves[im->work[i].leaf].logical);
		for (l = log; (hit = strstr(l, want)); l = hit + 1) {
			const char *bol = hit;

			while (bol > log && bol[-1] != '\n')
				bol--;
			if (strstr(bol, "corrupt leaf") && strstr(bol, "corrupt leaf") < hit)
				return 1;
		}
	}
	return 0;
}

/* Image @im's mutations and result @r, by part. */
static void count_parts(const struct image *im, const struct img_res *r, const char *log)
{
	unsigned p;

	for (p = 0; p < nparts; p++) {
		if (!im->by_part[p])
			continue;
		parts[p].mutations += im->by_part[p];
		parts[p].images++;
		if (r->dev_parts & (1u << p))
			parts[p].images_differing++;
		if (log && tree_checker_named(im, (int)p, log))
			parts[p].images_tree_checker++;
	}
}

/* 1 if the image found a bug that stops the run. */
static int fuzz_one(unsigned index, unsigned walk_timeout)
{
	struct kmsg_img k = { 0 };
	struct image im;
	struct img_res *r = shared_res;
	char line[1024], errs[512];
	int changed, status = 0, ctl2, stop = 0, bug = 0, e, o, abnormal;
	double t_restore;
	size_t el = 0;
	double t0 = now();
	pid_t pid;

	image_init(&im, index);
	changed = image_write(&im);
	st.tried++;
	st.mutations += im.nmut;
	for (e = 0; e < NCLS; e++)
		st.by_cls[e] += im.by_cls[e];
	if (!changed)
		st.unchanged++;
	ctl2 = !image_touches_ctl(&im);
	kmsg_note("seed 0x%llx image %u (%s): %.600s", (unsigned long long)seed,
		  index, im.rw ? "rw" : "ro", im.desc.buf);
	memset(r, 0, sizeof(*r));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		lab_die("fork: %s", strerror(errno));
	if (pid == 0) {
		child_walk->res = r;
		child_walk->t = &im.t;
		child_walk->reference = 0;
		run_image(child_walk, im.rw, ctl2);
		_exit(0);
	}
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now() - t0 > walk_timeout) {
			kmsg_drain(&k);
			printf("image %u: HANG: the walk did not end within %u s (stage %d)\n",
			       index, walk_timeout, r->stage);
			run("echo w > /proc/sysrq-trigger");
			sleep(2);
			kmsg_drain(&k);
			st.hangs++;
			st.bugs++;
			snprintf(line, sizeof(line), "hang at stage %d", r->stage);
			save_bug(&im, r, &k, line);
			image_free(&im);
			free(k.log.buf);
			return 1;
		}
		usleep(20 * 1000);
	}
	k.log.cap = 65536;
	k.log.buf = lab_xmalloc(k.log.cap);
	k.log.buf[0] = '\0';
	kmsg_drain(&k);
	count_parts(&im, r, k.log.buf);

	/* the bookkeeping */
	if (r->post_checked) {
		st.post_checked++;
		if (r->post_mount_err || r->post_control_err)
			st.post_fail++;
	}
	if (r->mounted) {
		st.mounted++;
		st.control_checked++;
		if (r->control_err)
			st.control_fail++;
		if (!r->ctl2_checked) {
			st.ctl2_skipped++;
		} else {
			st.ctl2_checked++;
			if (r->ctl2_err > 0 && clean_errno(r->ctl2_err))
				st.ctl2_clean_err++;
			else if (r->ctl2_err)
				st.ctl2_fail++;
		}
	} else {
		st.mount_err[err_slot(r->mount_err)]++;
	}
	if (im.rw)
		st.rw++;
	errs[0] = '\0';
	for (e = 0; e < NERR; e++) {
		unsigned n = 0;

		for (o = 0; o < NOPS; o++) {
			n += r->err_by[o][e];
			st.op_err[o][e] += r->err_by[o][e];
			if (r->err_by[o][e] && el + 40 < sizeof(errs))
				el += (size_t)snprintf(errs + el, sizeof(errs) - el, "%s%s %s x%u",
						       el ? ", " : "", op_name[o],
						       lab_errname(e ? e : 0), r->err_by[o][e]);
		}
		if (n)
			st.img_err[e]++;
	}
	if (r->deviations)
		st.with_errors++;
	else if (!r->wrong_data && !r->wrong_name && !r->unknown && !r->nokey_data &&
		 !r->now_ok)
		st.clean++;
	if (r->deviations && !k.warn_lines) {
		st.errors_no_log++;
		text_add(&st.no_log, "%s%u", st.no_log.len ? " " : "", index);
	}
	for (e = 0; e < (int)im.nmut; e++) {
		unsigned j;

		if (!(r->explained & (1u << e)))
			continue;
		for (j = 0; j < st.nexpl && strcmp(st.expl[j].label, im.label[e]); j++)
			;
		if (j == st.nexpl && st.nexpl < sizeof(st.expl) / sizeof(st.expl[0]))
			copy_str(st.expl[st.nexpl++].label, sizeof(st.expl[0].label), im.label[e]);
		if (j < st.nexpl)
			st.expl[j].n++;
	}
	st.wrong_data += r->wrong_data;
	st.wrong_name += r->wrong_name;
	st.unknown += r->unknown;
	st.nokey_data += r->nokey_data;
	st.now_ok += r->now_ok;
	st.leaks += r->leak;
	st.odd_errno += r->odd_errno;

	line[0] = '\0';
	if (k.splat) {
		st.splats++;
		snprintf(line, sizeof(line), "kernel splat (%s): %s", k.kind, k.first);
		stop = 1;
	} else if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status))) {
		snprintf(line, sizeof(line), "the walk died (status 0x%x) at stage %d",
			 status, r->stage);
	} else if (r->leak) {
		snprintf(line, sizeof(line), "plaintext read without the key");
	} else if (r->mounted && r->control_err) {
		snprintf(line, sizeof(line), "the top-level control file: %s",
			 r->control_err > 0 ? lab_errname(r->control_err) : "wrong contents");
	} else if (r->post_checked && (r->post_mount_err || r->post_control_err)) {
		snprintf(line, sizeof(line),
			 "after the read-write session: %s %s",
			 r->post_mount_err ? "mount failed:" : "the top-level control file:",
			 r->post_mount_err ? lab_errname(r->post_mount_err) :
			 r->post_control_err > 0 ? lab_errname(r->post_control_err) :
			 "wrong contents");
	} else if (r->mounted && r->ctl2_checked &&
		   (r->ctl2_err < 0 || (r->ctl2_err > 0 && !clean_errno(r->ctl2_err)))) {
		snprintf(line, sizeof(line), "the control file in sv (its leaves intact): %s",
			 r->ctl2_err > 0 ? lab_errname(r->ctl2_err) : "wrong contents");
	} else if (r->odd_errno) {
		snprintf(line, sizeof(line), "an errno outside the clean set");
	} else if (r->wrong_data_unexpl || r->nokey_data_unexpl || r->unknown_unexpl ||
		   r->wrong_name_unexpl) {
		snprintf(line, sizeof(line), "a result that no mutation explains");
		st.unexplained++;
	} else if (r->mounted && r->umount_err) {
		snprintf(line, sizeof(line), "umount failed: %s", lab_errname(r->umount_err));
	}
	if (line[0]) {
		bug = 1;
		st.bugs++;
		save_bug(&im, r, &k, line);
	}
	printf("image %u [%s, %d leaf/leaves changed] %s\n  -> %s%s%s; %u entries, %u ops, %u differ%s%s; control %s%s; %.1f s%s%s\n",
	       index, im.rw ? "rw" : "ro", changed, im.desc.buf,
	       r->mounted ? "mounted" : "mount failed: ",
	       r->mounted ? "" : lab_errname(r->mount_err),
	       "", r->visited, r->ops, r->deviations, el ? ": " : "", errs,
	       !r->mounted ? "-" : r->control_err ? "FAILED" : "ok",
	       !r->post_checked ? "" : r->post_mount_err || r->post_control_err ?
	       ", after the read-write session FAILED" : ", after the read-write session ok",
	       now() - t0, bug ? "\n  BUG: " : "", bug ? line : "");
	if (r->notes_len)
		printf("%s", r->notes);
	text_add(&st.images_tsv, "%u\t%s\t%u\t%s\t%u\t%u\t%s\t%s\t%.1f\n", index,
		 im.rw ? "rw" : "ro", im.nmut,
		 r->mounted ? "mounted" : lab_errname(r->mount_err), r->ops,
		 r->deviations, el ? errs : "-", bug ? line : "-", now() - t0);

	/* the device back to the pristine image */
	abnormal = WIFSIGNALED(status) || (r->mounted && r->stage < 8) ||
		   (r->post_checked && !r->post_mount_err && r->stage < 9);
	if (abnormal && umount2(mnt, MNT_DETACH) == 0)
		printf("image %u: detached a mount the walk left behind\n", index);
	t_restore = now();
	if (im.rw || abnormal)
		restore(1);
	else
		restore_leaves(&im);
	t_restore = now() - t_restore;
	if (r->stage >= 8) {
		for (e = 1; e < 8; e++)
			st.t_stage[e] += r->t[e + 1] - r->t[e];
		printf("  times: mount %.2f, walk %.2f, key %.2f, walk %.2f, controls %.2f, remove key %.2f, umount %.2f, restore %.2f s\n",
		       r->t[2] - r->t[1], r->t[3] - r->t[2], r->t[4] - r->t[3],
		       r->t[5] - r->t[4], r->t[6] - r->t[5], r->t[7] - r->t[6],
		       r->t[8] - r->t[7], t_restore);
	}
	st.t_restore += t_restore;
	image_free(&im);
	free(k.log.buf);
	return stop;
}

/* ---- main ----------------------------------------------------------------------------- */

static void summary_text(struct text *tp, double secs)
{
	struct text t = *tp;
	int e;

	text_add(&t, "seed\t0x%llx\n", (unsigned long long)seed);
	text_add(&t, "images_tried\t%u\n", st.tried);
	text_add(&t, "images_unchanged\t%u\n", st.unchanged);
	text_add(&t, "mutations\t%u\n", st.mutations);
	for (e = 0; e < NCLS; e++)
		text_add(&t, "mutations_%s\t%u\n", cls_name[e], st.by_cls[e]);
	for (e = 0; e < (int)nparts; e++) {
		text_add(&t, "part_%s_mutations\t%u\n", parts[e].name, parts[e].mutations);
		text_add(&t, "part_%s_images\t%u\n", parts[e].name, parts[e].images);
		text_add(&t, "part_%s_images_differing\t%u\n", parts[e].name,
			 parts[e].images_differing);
		text_add(&t, "part_%s_images_tree_checker\t%u\n", parts[e].name,
			 parts[e].images_tree_checker);
	}
	text_add(&t, "rw_mounts\t%u\n", st.rw);
	text_add(&t, "mounted\t%u\n", st.mounted);
	text_add(&t, "mount_failed\t%u\n", st.tried - st.mounted);
	text_add(&t, "clean_result\t%u\n", st.clean);
	text_add(&t, "clean_errors\t%u\n", st.with_errors);
	text_add(&t, "errors_without_warning_log_line\t%u\n", st.errors_no_log);
	text_add(&t, "errors_without_warning_log_line_images\t%s\n",
		 st.no_log.len ? st.no_log.buf : "-");
	text_add(&t, "explained_wrong_data\t%u\n", st.wrong_data);
	for (e = 0; e < (int)st.nexpl; e++)
		text_add(&t, "explained_by\t%s\t%u\n", st.expl[e].label, st.expl[e].n);
	text_add(&t, "wrong_names\t%u\n", st.wrong_name);
	text_add(&t, "unknown_inodes\t%u\n", st.unknown);
	text_add(&t, "nokey_nonplaintext_reads\t%u\n", st.nokey_data);
	text_add(&t, "ops_now_succeeding\t%u\n", st.now_ok);
	text_add(&t, "control_checked\t%u\n", st.control_checked);
	text_add(&t, "control_failures\t%u\n", st.control_fail);
	text_add(&t, "control_after_rw_checked\t%u\n", st.post_checked);
	text_add(&t, "control_after_rw_failures\t%u\n", st.post_fail);
	text_add(&t, "sv_control_checked\t%u\n", st.ctl2_checked);
	text_add(&t, "sv_control_skipped\t%u\n", st.ctl2_skipped);
	text_add(&t, "sv_control_clean_errors\t%u\n", st.ctl2_clean_err);
	text_add(&t, "sv_control_failures\t%u\n", st.ctl2_fail);
	text_add(&t, "plaintext_leaks\t%u\n", st.leaks);
	text_add(&t, "odd_errnos\t%u\n", st.odd_errno);
	text_add(&t, "unexplained\t%u\n", st.unexplained);
	text_add(&t, "ro_mount_writes\t%u\n", st.ro_writes);
	text_add(&t, "hangs\t%u\n", st.hangs);
	text_add(&t, "splats\t%u\n", st.splats);
	text_add(&t, "bugs\t%u\n", st.bugs);
	if (st.stopped_at >= 0)
		text_add(&t, "stopped_at\t%d\n", st.stopped_at);
	text_add(&t, "device_checks\t%u\n", st.verify_runs);
	text_add(&t, "full_restores\t%u\n", st.full_restores);
	text_add(&t, "seconds\t%.0f\n", secs);
	text_add(&t, "seconds_mount\t%.0f\n", st.t_stage[1]);
	text_add(&t, "seconds_walk_without_key\t%.0f\n", st.t_stage[2]);
	text_add(&t, "seconds_add_key_drop_caches\t%.0f\n", st.t_stage[3]);
	text_add(&t, "seconds_walk_with_key\t%.0f\n", st.t_stage[4]);
	text_add(&t, "seconds_controls\t%.0f\n", st.t_stage[5]);
	text_add(&t, "seconds_remove_key\t%.0f\n", st.t_stage[6]);
	text_add(&t, "seconds_umount\t%.0f\n", st.t_stage[7]);
	text_add(&t, "seconds_restore\t%.0f\n", st.t_restore);
	*tp = t;
}

/* Which key ids[@i] is: 1 or 2 (the fuzzer's), 0 another (the test key). */
static int key_no(unsigned i)
{
	if (i >= nids)
		return 0;
	return !memcmp(ids[i], key_id, sizeof(key_id)) ? 1 :
	       !memcmp(ids[i], key2_id, sizeof(key2_id)) ? 2 : 0;
}

/* The census of the pristine image, a line per part (seed.tsv). */
static void seed_text(struct text *tp)
{
	struct text t = *tp;
	unsigned p, i, c[3], e[3];

	text_add(&t, "part\ttree\tleaves\tfscrypt_leaves\tencrypted_extents\tzlib\tlzo\tzstd\tper_inode_key_extents\tkey_records\tinode_ctx_key1\tinode_ctx_key2\tinode_ctx_other\textent_ctx_key1\textent_ctx_key2\textent_ctx_other\tupstream_items\n");
	for (p = 0; p < nparts; p++) {
		const struct part *pt = &parts[p];

		if (!pt->leaves)
			continue;
		memset(c, 0, sizeof(c));
		memset(e, 0, sizeof(e));
		for (i = 0; i <= MAX_IDS; i++) {
			c[key_no(i)] += pt->ctx[i];
			e[key_no(i)] += pt->ectx[i];
		}
		text_add(&t, "%s\t%llu\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%u\n",
			 pt->name, (unsigned long long)pt->tree, pt->leaves,
			 pt->fscrypt_leaves, pt->enc_extents, pt->comp[1], pt->comp[2],
			 pt->comp[3], pt->inode_key_extents, pt->keyrecs, c[1], c[2], c[0],
			 e[1], e[2], e[0], pt->up_items);
	}
	*tp = t;
}

/*
 * The trace probe: the pristine image mounted read-only with both keys,
 * each file of a seed feature read alone after dropping caches, with the
 * fscrypt tracepoints counted (fscrypt_trace.h): proof that reading it
 * reaches the code the feature is for.
 */
static struct probe {
	const char *what, *path, *want;
	int done, err, ok;
	struct lab_trace_count c;
} probes[] = {
	{ .what = "zlib", .path = "sv/enc/zlib", .want = "compressed extents decrypted (decrypt events)" },
	{ .what = "lzo", .path = "sv/enc/lzo", .want = "compressed extents decrypted (decrypt events)" },
	{ .what = "zstd", .path = "sv/enc/zstd", .want = "compressed extents decrypted (decrypt events)" },
	{ .what = "two-keys", .path = "sv/enc/xk", .want = "extents of both master keys (2 extent keys)" },
	{ .what = "rekeyed", .path = "rkf/e/f", .want = "extents of the old and the new key (2 extent keys)" },
	{ .what = "per-inode", .path = "pik/e/a", .want = "a per-inode key (decrypt events, no extent lookup)" },
	{ .what = "part-way", .path = "rkp/e/f", .want = "EPERM: a file of key 1 in a directory of key 2" },
};
#define NPROBES (sizeof(probes) / sizeof(probes[0]))

static void trace_probe(void)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE], id2[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char path[PATH_MAX], str[300];
	unsigned char *buf;
	size_t i;
	ssize_t n;
	int fd;

	if (lab_trace_start()) {
		printf("trace probe: no fscrypt tracepoints (%s): not run\n", strerror(errno));
		return;
	}
	lab_trace_stop(&probes[0].c);
	if (mount(dev, mnt, "btrfs", MS_RDONLY, img_opts))
		lab_die("mount the pristine image for the trace probe: %s", strerror(errno));
	if (lab_add_key(mnt, KEY_SEED, id) || lab_add_key(mnt, KEY_SEED2, id2))
		lab_die("add the keys for the trace probe: %s", strerror(errno));
	buf = lab_xmalloc(READ_CAP);
	for (i = 0; i < NPROBES; i++) {
		struct probe *pr = &probes[i];

		PATHF(path, "%s/%s", mnt, pr->path);
		if (access(path, F_OK) && errno == ENOENT)
			continue;	/* e.g. no compression of encrypted files */
		drop_caches();
		if (lab_trace_start())
			break;
		errno = 0;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		pr->err = fd < 0 ? errno : 0;
		while (fd >= 0 && (n = read(fd, buf, READ_CAP)) > 0)
			;
		if (fd >= 0 && n < 0)
			pr->err = errno;
		if (fd >= 0)
			close(fd);
		lab_trace_stop(&pr->c);
		pr->done = 1;
		if (!strcmp(pr->what, "part-way"))
			pr->ok = pr->err == EPERM;
		else if (pr->err)
			pr->ok = 0;
		else if (!strcmp(pr->what, "two-keys") || !strcmp(pr->what, "rekeyed"))
			pr->ok = pr->c.extent_keys >= 2 && pr->c.decrypt > 0;
		else if (!strcmp(pr->what, "per-inode"))
			pr->ok = pr->c.decrypt > 0 && !pr->c.extent_lookup;
		else
			pr->ok = pr->c.decrypt > 0;
		printf("trace probe: %s (%s): %s; %s; want %s: %s\n", pr->what, pr->path,
		       pr->err ? lab_errname(pr->err) : "read", lab_trace_str(str, sizeof(str), &pr->c),
		       pr->want, pr->ok ? "yes" : "NO");
		CHECK(pr->ok || pr->c.lost, "trace probe: reading %s (%s) did not show %s",
		      pr->path, pr->what, pr->want);
	}
	free(buf);
	lab_remove_key(mnt, id, NULL);
	lab_remove_key(mnt, id2, NULL);
	if (lab_umount(mnt))
		lab_die("umount after the trace probe: %s", strerror(errno));
}

static void trace_text(struct text *tp)
{
	struct text t = *tp;
	size_t i;

	text_add(&t, "feature\tfile\tresult\tdecrypt_events\tblocks_decrypted\textent_lookups\textent_keys\tkey_derivations\tkey_setups\tevents_lost\treached\n");
	for (i = 0; i < NPROBES; i++) {
		const struct probe *pr = &probes[i];

		if (!pr->done)
			continue;
		text_add(&t, "%s\t%s\t%s\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%s\n", pr->what,
			 pr->path, pr->err ? lab_errname(pr->err) : "read", pr->c.decrypt,
			 pr->c.blocks_decrypted, pr->c.extent_lookup, pr->c.extent_keys,
			 pr->c.derive_key, pr->c.setup_info, pr->c.lost,
			 pr->ok ? "yes" : "no");
	}
	*tp = t;
}

static void errnos_text(struct text *tp)
{
	struct text t = *tp;
	int e, o;

	text_add(&t, "errno\timages");
	for (o = 0; o < NOPS; o++)
		text_add(&t, "\t%s", op_name[o]);
	text_add(&t, "\n");
	for (e = 0; e < NERR; e++) {
		if (!st.img_err[e])
			continue;
		text_add(&t, "%s\t%u", e ? lab_errname(e) : "other", st.img_err[e]);
		for (o = 0; o < NOPS; o++)
			text_add(&t, "\t%lu", st.op_err[o][e]);
		text_add(&t, "\n");
	}
	*tp = t;
}

/* Print one section of the summary from @t and keep it in @out_dir as @file. */
static void emit_section(struct text *t, const char *title, const char *file)
{
	char path[PATH_MAX];

	printf("\n== %s\n%s", title, t->buf);
	if (out_dir) {
		PATHF(path, "%s/%s", out_dir, file);
		write_file(path, t->buf, t->len);
	}
	t->len = 0;
	t->buf[0] = '\0';
}

static void write_summary(double secs)
{
	struct text t = { .cap = 65536 };
	char path[PATH_MAX], title[64];

	t.buf = lab_xmalloc(t.cap);
	t.buf[0] = '\0';
	summary_text(&t, secs);
	snprintf(title, sizeof(title), "summary (seed 0x%llx)",
		 (unsigned long long)seed);
	emit_section(&t, title, "summary.tsv");
	errnos_text(&t);
	emit_section(&t, "clean errors: images with each errno, and operations by errno",
		     "errnos.tsv");
	if (out_dir) {
		PATHF(path, "%s/images.tsv", out_dir);
		write_file(path, st.images_tsv.buf, st.images_tsv.len);
		PATHF(path, "%s/bugs.tsv", out_dir);
		write_file(path, st.bug_list.buf, st.bug_list.len);
	}
	seed_text(&t);
	emit_section(&t, "the seed image by subvolume (seed.tsv; inode and extent contexts by master key)",
		     "seed.tsv");
	trace_text(&t);
	emit_section(&t, "the trace probe of the seed's features (trace.tsv)",
		     "trace.tsv");
	if (st.bug_list.len)
		printf("\n== bugs (image, what)\n%s", st.bug_list.buf);
	free(t.buf);
}

/*
 * After every image, when the host keeps the save device (make
 * reliability), the totals so far go there too, past the image: if the
 * guest dies (an oops panics the lab kernel), no results come back, but
 * the host still finds what the boot did before the image that killed it.
 */
#define STATE_OFF	(192ULL << 20)
#define STATE_MAGIC	"LAB-FUZZ-STATE 1"

static const char *state_dev;
static unsigned state_first;

static void write_state(void)
{
	struct text t = { .cap = 65536 + st.images_tsv.len + st.bug_list.len };
	size_t len;

	if (!state_dev)
		return;
	t.buf = lab_xmalloc(t.cap + 4096);
	t.buf[0] = '\0';
	text_add(&t, "%s first=%u\n== summary.tsv\n", STATE_MAGIC, state_first);
	summary_text(&t, now() - st.t_start);
	text_add(&t, "== errnos.tsv\n");
	errnos_text(&t);
	text_add(&t, "== images.tsv\n%s== bugs.tsv\n%s== end\n",
		 st.images_tsv.buf, st.bug_list.buf);
	len = (t.len + 4095) / 4096 * 4096;
	memset(t.buf + t.len, 0, len - t.len);
	if (raw_write_sync(state_dev, STATE_OFF, t.buf, len))
		printf("write the totals to %s: %s\n", state_dev, strerror(errno));
	free(t.buf);
}

int main(void)
{
	const char *replay = getenv("FUZZ_PRISTINE");
	unsigned images, first, progress, walk_timeout, verify_every, k;
	struct walk *w;
	struct img_res ref_res;
	static char outbuf[PATH_MAX];
	size_t i;
	int stop = 0;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	save_dev = getenv("SCRATCH_DEV2");
	seed = env_ul("FUZZ_SEED", DEFAULT_SEED);
	images = (unsigned)env_ul("FUZZ_IMAGES", DEFAULT_IMAGES);
	first = (unsigned)env_ul("FUZZ_FIRST", 0);
	progress = (unsigned)env_ul("FUZZ_PROGRESS", 10);
	walk_timeout = (unsigned)env_ul("FUZZ_WALK_TIMEOUT", 300);
	verify_every = (unsigned)env_ul("FUZZ_VERIFY_EVERY", 50);
	mut_mask = (unsigned)env_ul("FUZZ_MUT_MASK", ~0ul);
	rw_every = (unsigned)env_ul("FUZZ_RW_EVERY", 0);
	out_dir = getenv("FUZZ_OUT");
	dummy = lab_dummy_encryption();
	img_opts = getenv(LAB_BTRFS_MOUNT_OPTS_ENV);
	if (img_opts && !*img_opts)
		img_opts = NULL;
	if (img_opts)
		lab_config_note("every image is mounted with -o %s%s\n", img_opts,
				dummy ? ": see the layout below; tree 5 (the top level, whose control file is under the test key) is not mutated" : "");
	if (!out_dir && getenv("RESULTS")) {
		PATHF(outbuf, "%s/fuzz", getenv("RESULTS"));
		out_dir = outbuf;
	}
	if (!out_dir)
		out_dir = "/tmp/fuzz";
	mkdir(out_dir, 0755);
	st.t_start = now();
	st.bug_list.cap = 16384;
	st.bug_list.buf = lab_xmalloc(st.bug_list.cap);
	st.bug_list.buf[0] = '\0';
	st.no_log.cap = 4096;
	st.no_log.buf = lab_xmalloc(st.no_log.cap);
	st.no_log.buf[0] = '\0';
	st.images_tsv.cap = 768u * (images + 2) + 4096;
	st.images_tsv.buf = lab_xmalloc(st.images_tsv.cap);
	st.images_tsv.buf[0] = '\0';
	text_add(&st.images_tsv, "image\tmount\tmutations\tmounted\tops\tdiffer\terrors\tbug\tseconds\n");

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("no %s: this kernel's btrfs has no per-extent keys (or no encryption)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	printf("btrfs_fscrypt_fuzz: seed 0x%llx, images %u-%u, pristine %s, %s\n",
	       (unsigned long long)seed, first, first + images - 1,
	       replay ? replay : "made by this kernel",
	       rw_every ? "one mount in FUZZ_RW_EVERY read-write" : "read-only mounts");
	kmsg_init();

	/* 1. the pristine image */
	if (replay) {
		struct braw_fs src;

		if (braw_open(&src, replay))
			lab_die("no saved btrfs image on %s: %s", replay, strerror(errno));
		if (braw_image_ranges(&src, &pristine) || braw_image_read(&pristine, replay))
			lab_die("read the saved image from %s: %s", replay, strerror(errno));
		braw_close(&src);
		if (braw_image_write(&pristine, dev))
			lab_die("write the saved image to %s: %s", dev, strerror(errno));
	} else {
		make_pristine();
	}
	if (braw_open(&fs, dev))
		lab_die("open the btrfs on %s: %s", dev, strerror(errno));
	if (!replay) {
		if (braw_image_ranges(&fs, &pristine) || braw_image_read(&pristine, dev))
			lab_die("read the pristine image from %s: %s", dev, strerror(errno));
	}
	printf("pristine image: %zu ranges, %llu bytes, nodesize %u, generation %llu\n",
	       pristine.n, (unsigned long long)pristine.bytes, fs.nodesize,
	       (unsigned long long)fs.generation);
	if (save_dev && !replay) {
		double t0 = now();

		if (braw_image_write(&pristine, save_dev))
			lab_die("save the pristine image to %s: %s", save_dev, strerror(errno));
		printf("saved the pristine image to %s (same offsets) in %.1f s\n", save_dev,
		       now() - t0);
	}
	find_targets();

	/* 2. the reference: the pristine image walked without and with the key */
	w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	shared_res = mmap(NULL, sizeof(*shared_res), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (w == MAP_FAILED || shared_res == MAP_FAILED)
		lab_die("mmap: %s", strerror(errno));
	w->buf = lab_xmalloc(READ_CAP + 1);
	child_walk = w;
	memset(&ref_res, 0, sizeof(ref_res));
	w->res = &ref_res;
	w->reference = 1;
	{
		double t0 = now();

		run_image(w, 0, 1);
		printf("reference walk: %zu inodes, %.1f s\n", nrefs, now() - t0);
	}
	if (!ref_res.mounted || ref_res.stage != 8 || ref_res.addkey_err || ref_res.rmkey_err)
		lab_die("the pristine image did not mount, walk and unmount cleanly (mount %s, stage %d, add key %s, remove key %s)",
			lab_errname(ref_res.mount_err), ref_res.stage,
			lab_errname(ref_res.addkey_err), lab_errname(ref_res.rmkey_err));
	for (i = 0; !replay && i < nmodel; i++) {
		const struct ref *ref = NULL;
		size_t j;

		for (j = 0; j < nrefs; j++)
			if (!strcmp(refs[j].path, model[i].path))
				ref = &refs[j];
		if (!ref)
			lab_die("the reference walk did not find %s", model[i].path);
		if (model[i].target[0] ? strcmp(ref->target, model[i].target) :
		    ref->len != model[i].len ||
		    (ref->len && memcmp(ref->data, model[i].data, ref->len)))
			lab_die("%s does not read back as written on the pristine image",
				model[i].path);
	}
	if (!replay)
		printf("the reference walk read back all %zu files as written\n", nmodel);
	for (i = 0; i < nrefs; i++) {
		if (strcmp(refs[i].path, "sv/plainctl"))
			continue;
		for (k = 0; k < nleaves; k++) {
			const unsigned char *b = leaves[k].blk;
			uint32_t s;

			for (s = 0; s < braw_nritems(b); s++) {
				struct braw_key key;

				braw_item_key(b, s, &key);
				if (key.objectid == refs[i].ino ||
				    ((key.type == BTRFS_DIR_ITEM_KEY ||
				      key.type == BTRFS_DIR_INDEX_KEY) &&
				     braw_le64(b + braw_item_start(b, s)) == refs[i].ino))
					leaves[k].has_ctl = 1;
			}
		}
	}

	/* 3. an image with no mutation must walk exactly like the reference */
	{
		struct image none;
		pid_t pid;
		int status;

		memset(&none, 0, sizeof(none));
		memset(shared_res, 0, sizeof(*shared_res));
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			w->res = shared_res;
			w->t = &none.t;
			w->reference = 0;
			run_image(w, 0, 1);
			_exit(0);
		}
		waitpid(pid, &status, 0);
		if (shared_res->stage != 8 || shared_res->deviations ||
		    shared_res->wrong_data || shared_res->wrong_name ||
		    shared_res->unknown || shared_res->now_ok ||
		    shared_res->control_err || shared_res->ctl2_err)
			lab_die("the unmutated image walks differently from the reference (stage %d, %u differences):\n%s",
				shared_res->stage, shared_res->deviations, shared_res->notes);
		printf("an unmutated image walks like the reference (%u operations)\n",
		       shared_res->ops);
		if (verify("after the unmutated walk"))
			lab_die("a read-only mount of the pristine image changed %s", dev);
	}
	trace_probe();
	if (verify("after the trace probe"))
		lab_die("a read-only mount of the pristine image changed %s", dev);

	/* 4. the mutated images */
	st.stopped_at = -1;
	if (save_dev && getenv("FUZZ_KEEP_PRISTINE")) {
		state_dev = save_dev;
		state_first = first;
		write_state();
	}
	for (k = first; k < first + images && !stop; k++) {
		stop = fuzz_one(k, walk_timeout);
		write_state();
		if (stop) {
			st.stopped_at = (int)k;
			lab_console_line("LAB-PROGRESS fuzz: stopped at image %u (a splat or a hang)\n", k);
			break;
		}
		if (verify_every && (k - first + 1) % verify_every == 0) {
			char when[64];

			snprintf(when, sizeof(when), "check after image %u", k);
			verify(when);
		}
		if (progress && (k - first + 1) % progress == 0)
			lab_console_line("LAB-PROGRESS fuzz [%.0fs] %u/%u images: %u mounted, %u with clean errors, %u bugs, %u splats\n",
				     now() - st.t_start, k - first + 1, images, st.mounted,
				     st.with_errors, st.bugs, st.splats);
	}
	if (!stop)
		verify("final check");
	write_summary(now() - st.t_start);
	/*
	 * The copy on the save device has this filesystem's fsid: unless the
	 * host keeps it (make reliability), wipe its superblocks, so that
	 * nothing later in the boot takes it for a device of this filesystem.
	 */
	if (save_dev && !replay && !getenv("FUZZ_KEEP_PRISTINE")) {
		static unsigned char zero[BRAW_SB_SIZE];

		for (k = 0; k < BRAW_SB_MIRRORS; k++)
			if (braw_sb_offset((int)k) + BRAW_SB_SIZE <= fs.total_bytes &&
			    raw_write_sync(save_dev, braw_sb_offset((int)k), zero, sizeof(zero)))
				printf("wipe the superblock copy %u on %s: %s\n", k, save_dev,
				       strerror(errno));
	}
	if (st.bugs)
		lab_fail(__FILE__, __LINE__, "bugs == 0", "%u image(s) found a bug (see above and %s/bugs.tsv)",
			 st.bugs, out_dir);
	return lab_result("btrfs_fscrypt_fuzz");
}
