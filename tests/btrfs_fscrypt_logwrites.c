// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_logwrites - every crash point of an encrypted workload, not
 * only random ones (issue #36, item 4): the block writes of the workload are
 * recorded with dm-log-writes, then replayed in order onto an empty device,
 * and at every flush, FUA and mark of the log the replayed filesystem is
 * mounted read-write (the tree-log replay a real recovery does), checked
 * and unmounted, and `btrfs check` must find it clean.
 *
 * Devices (two scratch disks, carved with dm-linear):
 *   $SCRATCH_DEV  [0, FS)     lab-lw-data   the workload's device
 *                 [FS, 2 FS)  lab-lw-replay the replay target, zeroed first
 *   $SCRATCH_DEV2 [0, end-C)  lab-lw-log    the log
 *                 [end-C,end) lab-lw-cow    the exception store of the
 *                                           snapshots (C = FS / 2)
 * lab-lw (log-writes lab-lw-data lab-lw-log) is what mkfs.btrfs and the
 * workload see.  At each point a non-persistent dm-snapshot lab-lw-snap of
 * lab-lw-replay is what gets mounted and checked, so the recovery's own
 * writes never reach the replay target; the snapshot is removed afterwards.
 *
 * The workload (deterministic from LOGWRITES_SEED; names carry a tag from
 * it): mkfs.btrfs -O encrypt, mounted with compress=zstd and per-extent
 * keys (the default), master keys K1 and K2; subvolume sv with directory
 * sv/d under K1, top-level directory e under K2.  Then steps, each ending
 * with the fsyncs that make it durable (the file; for a new, renamed or
 * removed name also its directory) and a mark "fsync-N" sent to the
 * log-writes target: new files of compressible text and of random data,
 * overwrites and appends with fsync and fdatasync, a rename, a new file
 * then its unlink, a reflink of a K1 file into the K2 directory (extents of
 * two keys in one file), a partial overwrite, six small files, a syncfs,
 * then BTRFS_IOC_FSCRYPT_REKEY of sv from K1 to K2 (a syncfs, mark
 * "rekey"), then more writes, a rename, a truncate, a removal and a reflink
 * under K2.  After each mark the test knows what is guaranteed: the name,
 * length and bytes of every file, which names are gone.
 *
 * The replay reads the log itself (the kernel's format: a super block, then
 * per entry one sector of header - sector, nr_sectors, flags FLUSH, FUA,
 * DISCARD, MARK, data_len - followed by the data written; a mark's name is
 * in its header sector, a discard has no data and is replayed as zeroes).
 * Checked are the states after every FLUSH or FUA entry and at every mark
 * from the mark "mkfs" on (a point and the mark right after it with no
 * write between are one state, checked once against the mark).  Which
 * states: LOGWRITES_POINTS=all, every one of them (tests/run-logwrites.sh,
 * the reliability part); marks, every mark; sample (the default, the slice
 * `make test` runs), every third mark from mkfs on, the marks commit and
 * rekey, and the last.  At a point after mark N:
 *   - the snapshot mounts read-write (tree-log replay), K1 and K2 add;
 *   - every file the mark guarantees and the next step does not touch has
 *     exactly its name, length and bytes (read after the mount, decrypted
 *     with the extent's key); a name removed by then is gone;
 *   - a file the next step touches is found under its old or new name (not
 *     both, not neither, if it existed before and after), and each 4 KiB
 *     block of it equals the old, the new or zeroes;
 *   - every name listed in sv/d and e is one of those (a name decrypted
 *     with a wrong key, or a no-key name, is none of them);
 *   - the kernel log of the mount and checks has no splat, no BTRFS error
 *     or critical line, no transaction abort, no csum failure;
 *   - unmounted, `btrfs check --readonly` of the snapshot is clean.
 * Controls, so that a check which cannot fail does not pass: at the mark
 * mkfs every file of the end must be missing (were the live device mounted
 * instead of the replayed state, all would be there), and at the last mark
 * a model with one byte flipped must count its file as lost.
 *
 * Figures (key TAB value) go to $LOGWRITES_FIGURES (default
 * $RESULTS/logwrites-figures.tsv): entries, flush_points (FLUSH or FUA
 * entries), points_checked, flush_points_checked, marks, marks_checked,
 * files_checked, lost (files wrong or missing at a point), name_errors,
 * check_runs, check_errors, check_clean, kmsg_bad, mount_failures,
 * control_missing, control_flip_found, controls_ok, record_s, replay_s,
 * points_mode, and how the flush/FUA entries divide.
 *
 * Environment: LOGWRITES_POINTS (all | marks | sample; default sample),
 * LOGWRITES_SEED (default 0x36f0004), LOGWRITES_FS_MB (default 256),
 * LOGWRITES_KEEP_GOING=0 to stop at the first point that fails.
 */
#include "btrfs_progs.h"
#include "btrfs_rekey.h"
#include "dm.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/fs.h>

#define BLK 4096u
#define MAXF 24
#define MAXSTEPS 40
#define OPTS "compress=zstd"

/* dm-log-writes's on-disk format (drivers/md/dm-log-writes.c) */
#define LW_FLUSH	(1u << 0)
#define LW_FUA		(1u << 1)
#define LW_DISCARD	(1u << 2)
#define LW_MARK		(1u << 3)
#define LW_METADATA	(1u << 4)
#define LW_MAGIC	0x6a736677736872ULL
#define LW_VERSION	1ULL

struct lw_super {
	uint64_t magic, version, nr_entries;
	uint32_t sectorsize;
} __attribute__((packed));

struct lw_entry {
	uint64_t sector, nr_sectors, flags, data_len;
} __attribute__((packed));

/* ---- the model ------------------------------------------------------------ */

enum { D_SV = 0, D_E = 1, NDIRS };
static const char *const dir_rel[NDIRS] = { "sv/d", "e" };

struct fstate {
	int present;
	int gone;		/* removed by the workload (unlink) */
	char name[256];
	const unsigned char *data;	/* owned by the data pool, never freed */
	size_t size;
};

struct file {
	int dir;
	struct fstate cur;
	char names[4][256];	/* every name it ever had */
	int nnames;
};

struct step {
	char mark[32];
	int dirs_ready;
	int touched[MAXF];
	struct fstate st[MAXF];
};

static struct file files[MAXF];
static int nfiles;
static struct step steps[MAXSTEPS];
static int nsteps;		/* marks sent */
static int touched[MAXF];	/* by the step in progress */
static int dirs_ready;

static const char *mnt;
static char lwdev[128], snapdev[128];
static uint32_t seed;
static uint8_t id1[FSCRYPT_KEY_IDENTIFIER_SIZE], id2[FSCRYPT_KEY_IDENTIFIER_SIZE];
static char tag[16];

/* figures */
static unsigned long long n_entries, n_flush_points, n_points, n_flush_checked,
	n_marks, n_marks_checked, n_files_checked, n_lost, n_name_errors,
	n_check_runs, n_check_errors, n_kmsg_bad, n_mount_failures, n_end_marks,
	n_end_checked, n_flush_before_mkfs, n_flush_merged;
static double record_s, replay_s;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double t0;
#define PHASE(...) do { printf("== [%.1fs] ", now_s() - t0); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

/* ---- data ------------------------------------------------------------------ */

static uint32_t next_seed(void)
{
	static uint64_t state;

	if (!state)
		state = seed;
	return (uint32_t)lab_splitmix64(&state);
}

/* Compressible text: numbered lines of a few words drawn from @s. */
static void fill_text(unsigned char *buf, size_t len, uint32_t s)
{
	static const char *const words[] = {
		"extent", "key", "nonce", "btrfs", "fscrypt", "fsync", "mark",
		"replay", "flush", "commit", "tree", "log", "subvolume", "rekey",
	};
	uint64_t st = s;
	size_t off = 0;
	unsigned line = 0;
	char l[128];

	while (off < len) {
		int n = snprintf(l, sizeof(l), "%06u %s %s %s %s\n", line++,
				 words[lab_splitmix64(&st) % 14], words[lab_splitmix64(&st) % 14],
				 words[lab_splitmix64(&st) % 14], words[lab_splitmix64(&st) % 14]);
		size_t c = (size_t)n < len - off ? (size_t)n : len - off;

		memcpy(buf + off, l, c);
		off += c;
	}
}

static unsigned char *gen(size_t len, int text)
{
	unsigned char *b = lab_xmalloc(len ? len : 1);

	if (text)
		fill_text(b, len, next_seed());
	else
		fill_pattern(b, len, next_seed());
	return b;
}

/* ---- workload operations (each updates the model) ------------------------- */

static void fpath(char *out, size_t size, int dir, const char *name)
{
	lab_pathf(out, size, "%s/%s/%s", mnt, dir_rel[dir], name);
}

static int new_file(int dir, const char *base)
{
	struct file *f;

	if (nfiles == MAXF)
		lab_die("too many files");
	f = &files[nfiles];
	f->dir = dir;
	snprintf(f->cur.name, sizeof(f->cur.name), "%s-%s", base, tag);
	memcpy(f->names[f->nnames++], f->cur.name, sizeof(f->cur.name));
	return nfiles++;
}

/* Write @len bytes of @buf at @off of file @i (created if need be). */
static void op_write(int i, size_t off, const unsigned char *buf, size_t len)
{
	struct file *f = &files[i];
	char p[PATH_MAX];
	size_t nsize = off + len > f->cur.size ? off + len : f->cur.size;
	unsigned char *nd = lab_xmalloc(nsize ? nsize : 1);
	int fd;

	fpath(p, sizeof(p), f->dir, f->cur.name);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		lab_die("open %s: %s", p, strerror(errno));
	if (pwrite_all(fd, buf, len, off))
		lab_die("write %zu at %zu of %s: %s", len, off, p, strerror(errno));
	close(fd);
	memset(nd, 0, nsize);
	if (f->cur.size)
		memcpy(nd, f->cur.data, f->cur.size);
	memcpy(nd + off, buf, len);
	f->cur.data = nd;
	f->cur.size = nsize;
	f->cur.present = 1;
	f->cur.gone = 0;
	touched[i] = 1;
}

static void op_sync_file(int i, int data_only)
{
	char p[PATH_MAX];
	int fd;

	fpath(p, sizeof(p), files[i].dir, files[i].cur.name);
	fd = open(p, O_RDONLY);
	if (fd < 0 || (data_only ? fdatasync(fd) : fsync(fd)))
		lab_die("%s %s: %s", data_only ? "fdatasync" : "fsync", p, strerror(errno));
	close(fd);
}

static void op_sync_dir(int dir)
{
	char p[PATH_MAX];

	lab_pathf(p, sizeof(p), "%s/%s", mnt, dir_rel[dir]);
	if (fsync_path(p))
		lab_die("fsync %s: %s", p, strerror(errno));
}

static void op_rename(int i, const char *base)
{
	struct file *f = &files[i];
	char a[PATH_MAX], b[PATH_MAX];

	snprintf(f->names[f->nnames], sizeof(f->names[0]), "%s-%s", base, tag);
	fpath(a, sizeof(a), f->dir, f->cur.name);
	fpath(b, sizeof(b), f->dir, f->names[f->nnames]);
	if (rename(a, b))
		lab_die("rename %s %s: %s", a, b, strerror(errno));
	memcpy(f->cur.name, f->names[f->nnames], sizeof(f->cur.name));
	f->nnames++;
	touched[i] = 1;
}

static void op_unlink(int i)
{
	struct file *f = &files[i];
	char p[PATH_MAX];

	fpath(p, sizeof(p), f->dir, f->cur.name);
	if (unlink(p))
		lab_die("unlink %s: %s", p, strerror(errno));
	f->cur.present = 0;
	f->cur.gone = 1;
	f->cur.size = 0;
	f->cur.data = NULL;
	touched[i] = 1;
}

static void op_truncate(int i, size_t size)
{
	struct file *f = &files[i];
	char p[PATH_MAX];

	fpath(p, sizeof(p), f->dir, f->cur.name);
	if (truncate(p, size))
		lab_die("truncate %s: %s", p, strerror(errno));
	if (size > f->cur.size)
		lab_die("op_truncate only shrinks");
	f->cur.size = size;
	touched[i] = 1;
}

/* FICLONE of the whole of @src into the new file @dst. */
static void op_reflink(int dst, int src)
{
	char a[PATH_MAX], b[PATH_MAX];
	int fa, fb;

	fpath(a, sizeof(a), files[src].dir, files[src].cur.name);
	fpath(b, sizeof(b), files[dst].dir, files[dst].cur.name);
	fa = open(a, O_RDONLY);
	fb = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fa < 0 || fb < 0)
		lab_die("open for reflink %s -> %s: %s", a, b, strerror(errno));
	if (ioctl(fb, FICLONE, fa))
		lab_die("FICLONE %s -> %s: %s", a, b, strerror(errno));
	close(fa);
	close(fb);
	files[dst].cur = files[src].cur;
	memcpy(files[dst].cur.name, files[dst].names[0], sizeof(files[dst].cur.name));
	touched[dst] = 1;
}

static void op_syncfs(void)
{
	int fd = open(mnt, O_RDONLY);

	if (fd < 0 || syncfs(fd))
		lab_die("syncfs %s: %s", mnt, strerror(errno));
	close(fd);
}

/* The step is durable: remember what is guaranteed, mark the log. */
static void mark(const char *name)
{
	struct step *s;
	char msg[64];
	int i;

	if (nsteps == MAXSTEPS)
		lab_die("too many steps");
	s = &steps[nsteps];
	snprintf(s->mark, sizeof(s->mark), "%s", name);
	s->dirs_ready = dirs_ready;
	for (i = 0; i < MAXF; i++) {
		s->touched[i] = touched[i];
		s->st[i] = files[i].cur;
		touched[i] = 0;
	}
	snprintf(msg, sizeof(msg), "mark %s", name);
	if (lab_dm_message("lab-lw", msg))
		lab_die("could not mark the log: %s", name);
	nsteps++;
}

static void mark_fsync(void)
{
	char n[32];

	snprintf(n, sizeof(n), "fsync-%d", nsteps);
	mark(n);
}

/* ---- setup and teardown ------------------------------------------------------ */

static const char *const dm_names[] = {
	"lab-lw-snap", "lab-lw", "lab-lw-replay", "lab-lw-cow", "lab-lw-log", "lab-lw-data",
};

static void cleanup(void)
{
	size_t i;
	char p[128];

	umount(mnt);
	for (i = 0; i < sizeof(dm_names) / sizeof(dm_names[0]); i++) {
		lab_dm_path(dm_names[i], p, sizeof(p));
		if (access(p, F_OK) == 0)
			lab_dm_remove(dm_names[i]);
	}
}

static void on_signal(int sig)
{
	(void)sig;
	exit(LAB_FAIL);	/* runs cleanup(): the disks go back to later tests */
}

static void linear(const char *name, const char *dev, uint64_t start, uint64_t len)
{
	struct lab_dm_target t = { 0, len, "linear", NULL };
	char devno[32], params[64];

	if (lab_dm_devno(dev, devno, sizeof(devno)))
		lab_die("%s: %s", dev, strerror(errno));
	snprintf(params, sizeof(params), "%s %llu", devno, (unsigned long long)start);
	t.params = params;
	if (lab_dm_create(name, &t, 1, NULL))
		lab_die("could not make %s", name);
}

static void devno_of(const char *name, char *out, size_t size)
{
	char p[128];

	lab_dm_path(name, p, sizeof(p));
	if (lab_dm_devno(p, out, size))
		lab_die("%s: %s", p, strerror(errno));
}

/* Forget every unmounted btrfs device, so a stale path never stands in. */
static void btrfs_forget(void)
{
	struct btrfs_ioctl_vol_args va;
	int fd = open("/dev/btrfs-control", O_RDWR);

	if (fd < 0)
		return;
	memset(&va, 0, sizeof(va));
	ioctl(fd, BTRFS_IOC_FORGET_DEV, &va);
	close(fd);
}

static void add_keys(void)
{
	if (lab_add_key(mnt, seed ^ 0x4b31, id1) || lab_add_key(mnt, seed ^ 0x4b32, id2))
		lab_die("add keys: %s", strerror(errno));
}

/* ---- the kernel log, read straight from /dev/kmsg ---------------------------- */

static int kmsg_fd = -1;
static regex_t kmsg_bad_re;

static void kmsg_start(void)
{
	if (kmsg_fd < 0) {
		kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (kmsg_fd < 0)
			lab_die("/dev/kmsg: %s", strerror(errno));
		if (regcomp(&kmsg_bad_re, LAB_LOG_SPLAT_ERE
			    "|BTRFS (error|critical)|Transaction aborted|csum failed|forced readonly|snapshot.*invalid|log-writes.*(Error|ran out)",
			    REG_EXTENDED | REG_NOSUB))
			lab_die("regcomp");
	}
	lseek(kmsg_fd, 0, SEEK_END);
}

/* The bad lines since kmsg_start(), printed; their number. */
static int kmsg_bad_lines(void)
{
	char rec[8192];
	int bad = 0;
	ssize_t n;

	for (;;) {
		char *msg;

		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on */
		if (n <= 0)
			break;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		if (!regexec(&kmsg_bad_re, msg, 0, NULL, 0)) {
			bad++;
			printf("  kernel: %s", msg);
		}
	}
	return bad;
}

/* ---- the workload ---------------------------------------------------------------- */

static int F0, F1, G0, H0, R0, S[6], K0, R1;

static void workload(void)
{
	struct btrfs_ioctl_fscrypt_rekey_args ra;
	struct btrfs_ioctl_vol_args va;
	struct fscrypt_policy_v2 to;
	char p[PATH_MAX];
	unsigned char *b;
	int i, fd;

	/* setup: the subvolume, the two encrypted directories */
	fd = open(mnt, O_RDONLY | O_DIRECTORY);
	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "sv");
	if (fd < 0 || ioctl(fd, BTRFS_IOC_SUBVOL_CREATE, &va))
		lab_die("create subvolume sv: %s", strerror(errno));
	close(fd);
	add_keys();
	PATHF(p, "%s/sv/d", mnt);
	if (mkdir(p, 0755) || lab_set_policy(p, id1))
		lab_die("sv/d under K1: %s", strerror(errno));
	PATHF(p, "%s/e", mnt);
	if (mkdir(p, 0755) || lab_set_policy(p, id2))
		lab_die("e under K2: %s", strerror(errno));
	op_syncfs();
	dirs_ready = 1;
	mark("setup");

	F0 = new_file(D_SV, "alpha");
	F1 = new_file(D_SV, "bravo-a-long-name-that-takes-more-than-one-cts-block-of-the-names-cipher");
	G0 = new_file(D_E, "golf");
	H0 = new_file(D_SV, "hotel");
	R0 = new_file(D_E, "romeo-reflink-of-alpha");
	for (i = 0; i < 6; i++) {
		char n[16];

		snprintf(n, sizeof(n), "small%d", i);
		S[i] = new_file(D_SV, n);
	}
	K0 = new_file(D_SV, "kilo-after-rekey");
	R1 = new_file(D_E, "romeo2-reflink-of-kilo");

	/* K1: new files, text and random */
	b = gen(256 << 10, 1);
	op_write(F0, 0, b, 256 << 10);
	op_sync_file(F0, 0);
	op_sync_dir(D_SV);
	mark_fsync();

	b = gen(128 << 10, 0);
	op_write(F1, 0, b, 128 << 10);
	op_sync_file(F1, 0);
	op_sync_dir(D_SV);
	mark_fsync();

	b = gen(192 << 10, 1);
	op_write(G0, 0, b, 192 << 10);
	op_sync_file(G0, 0);
	op_sync_dir(D_E);
	mark_fsync();

	/* overwrite with fdatasync, append with fsync */
	b = gen(64 << 10, 0);
	op_write(F0, 64 << 10, b, 64 << 10);
	op_sync_file(F0, 1);
	mark_fsync();

	b = gen(100 << 10, 1);
	op_write(F1, 128 << 10, b, 100 << 10);
	op_sync_file(F1, 0);
	mark_fsync();

	/* a rename: the file and its directory */
	op_rename(F1, "bravo-renamed");
	op_sync_file(F1, 0);
	op_sync_dir(D_SV);
	mark_fsync();

	/* a new name, then its removal */
	b = gen(64 << 10, 0);
	op_write(H0, 0, b, 64 << 10);
	op_sync_file(H0, 0);
	op_sync_dir(D_SV);
	mark_fsync();

	op_unlink(H0);
	op_sync_dir(D_SV);
	mark_fsync();

	/* a reflink of a K1 file into the K2 directory */
	op_reflink(R0, F0);
	op_sync_file(R0, 0);
	op_sync_dir(D_E);
	mark_fsync();

	/* a partial, unaligned overwrite */
	b = gen(1000, 0);
	op_write(G0, 8192 + 100, b, 1000);
	op_sync_file(G0, 1);
	mark_fsync();

	/* six small files, one mark */
	for (i = 0; i < 6; i++) {
		size_t len = 1000 + 2000 * i;

		b = gen(len, i & 1);
		op_write(S[i], 0, b, len);
		op_sync_file(S[i], 0);
	}
	op_sync_dir(D_SV);
	mark_fsync();

	/* a full transaction commit */
	op_syncfs();
	mark("commit");

	/* sv moves from K1 to K2 */
	lab_default_policy(&to, id2);
	lab_rekey_args(&ra, "sv", id1, &to);
	if (lab_rekey_at(mnt, &ra))
		lab_die("rekey sv from K1 to K2: %s", strerror(errno));
	printf("rekey of sv moved " LAB_REKEY_COUNTS_FMT "\n", LAB_REKEY_COUNTS_ARGS(&ra));
	for (i = 0, fd = 0; i < nfiles; i++)
		fd += files[i].dir == D_SV && files[i].cur.present;
	CHECK(ra.nr_files == (unsigned long long)fd, "the rekey moved %llu files, expected %d",
	      (unsigned long long)ra.nr_files, fd);
	op_syncfs();
	mark("rekey");

	/* under K2 */
	b = gen(32 << 10, 1);
	op_write(F0, 0, b, 32 << 10);
	op_sync_file(F0, 0);
	mark_fsync();

	b = gen(300 << 10, 1);
	op_write(K0, 0, b, 300 << 10);
	op_sync_file(K0, 0);
	op_sync_dir(D_SV);
	mark_fsync();

	b = gen(64 << 10, 0);
	op_write(F1, files[F1].cur.size, b, 64 << 10);
	op_sync_file(F1, 1);
	mark_fsync();

	op_rename(K0, "kilo-renamed");
	op_sync_file(K0, 0);
	op_sync_dir(D_SV);
	mark_fsync();

	op_truncate(F0, 100000);
	op_sync_file(F0, 0);
	mark_fsync();

	b = gen(128 << 10, 1);
	op_write(G0, files[G0].cur.size, b, 128 << 10);
	op_sync_file(G0, 0);
	mark_fsync();

	b = gen(8192, 0);
	op_write(S[2], 0, b, 8192);
	op_sync_file(S[2], 0);
	op_unlink(S[3]);
	op_sync_dir(D_SV);
	mark_fsync();

	op_reflink(R1, K0);
	op_sync_file(R1, 0);
	op_sync_dir(D_E);
	mark_fsync();
}

/* ---- checking one state ------------------------------------------------------------ */

static unsigned char zero_blk[BLK];

/* The controls expect failures: their messages are not printed as FAIL lines. */
static int quiet;
#define fail_msg(...) do { if (!quiet) printf(__VA_ARGS__); } while (0)

/* Does block [off, off+len) of @got equal @data (zero past @size)? */
static int block_is(const unsigned char *got, size_t off, size_t len,
		    const unsigned char *data, size_t size)
{
	size_t n = off < size ? (size - off < len ? size - off : len) : 0;

	if (n && memcmp(got, data + off, n))
		return 0;
	return memcmp(got + n, zero_blk, len - n) == 0;
}

/* Read @path whole: malloc()ed buffer, size in *@len; NULL and errno on error. */
static unsigned char *slurp(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *b;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	b = lab_xmalloc(st.st_size + 1);
	n = lab_pread_full(fd, b, st.st_size, 0);
	if (n != st.st_size) {
		int e = n < 0 ? errno : EIO;

		close(fd);
		free(b);
		errno = e;
		return NULL;
	}
	close(fd);
	*len = st.st_size;
	return b;
}

static int exists(int dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;

	fpath(p, sizeof(p), dir, name);
	return lstat(p, &st) == 0;
}

/* One file at a point; 1 if right.  @a: the state at the mark, @b: after the next step (or NULL). */
static int check_file(const char *where, int i, const struct fstate *a, const struct fstate *b)
{
	struct file *f = &files[i];
	const struct fstate *hit = NULL;
	char p[PATH_MAX];
	unsigned char *got;
	size_t len, off;
	int ea, eb;

	if (!b) {
		/* exact */
		if (!a->present) {
			if (a->gone && exists(f->dir, a->name)) {
				fail_msg("FAIL %s: %s/%s was removed before the mark, and is there\n",
				       where, dir_rel[f->dir], a->name);
				return 0;
			}
			return 1;
		}
		fpath(p, sizeof(p), f->dir, a->name);
		got = slurp(p, &len);
		if (!got) {
			fail_msg("FAIL %s: %s/%s (%zu bytes, fsynced): " LAB_ERR_FMT "\n", where,
			       dir_rel[f->dir], a->name, a->size, LAB_ERR_ARGS(errno));
			return 0;
		}
		if (len != a->size || memcmp(got, a->data, len)) {
			fail_msg("FAIL %s: %s/%s: %zu bytes, expected %zu; first difference at %zu\n",
			       where, dir_rel[f->dir], a->name, len, a->size,
			       lab_first_diff(got, a->data, len < a->size ? len : a->size));
			free(got);
			return 0;
		}
		free(got);
		return 1;
	}

	/* in flight: old or new name, each block old, new or zeroes */
	ea = a->present && exists(f->dir, a->name);
	eb = b->present && strcmp(a->name, b->name) && exists(f->dir, b->name);
	if (a->present && strcmp(a->name, b->name) && ea && eb) {
		fail_msg("FAIL %s: %s renamed to %s: both names are there\n", where, a->name, b->name);
		return 0;
	}
	if (ea)
		hit = a;
	else if (eb || (b->present && exists(f->dir, b->name)))
		hit = b;
	if (!hit) {
		if (a->present && b->present) {
			fail_msg("FAIL %s: %s/%s (or its new name %s) is missing\n", where,
			       dir_rel[f->dir], a->name, b->name);
			return 0;
		}
		return 1;	/* created or removed by the step in flight */
	}
	fpath(p, sizeof(p), f->dir, hit->name);
	got = slurp(p, &len);
	if (!got) {
		fail_msg("FAIL %s: %s/%s (being changed): " LAB_ERR_FMT "\n", where,
		       dir_rel[f->dir], hit->name, LAB_ERR_ARGS(errno));
		return 0;
	}
	if (len > (a->size > b->size ? a->size : b->size)) {
		fail_msg("FAIL %s: %s/%s: %zu bytes, more than before (%zu) or after (%zu) the step\n",
		       where, dir_rel[f->dir], hit->name, len, a->size, b->size);
		free(got);
		return 0;
	}
	for (off = 0; off < len; off += BLK) {
		size_t n = len - off < BLK ? len - off : BLK;

		if (block_is(got + off, off, n, a->data, a->size) ||
		    block_is(got + off, off, n, b->data, b->size) ||
		    !memcmp(got + off, zero_blk, n))
			continue;
		fail_msg("FAIL %s: %s/%s: the block at %zu is neither the old, the new data nor zeroes\n",
		       where, dir_rel[f->dir], hit->name, off);
		free(got);
		return 0;
	}
	free(got);
	return 1;
}

/* Every listed name of @dir is a name the state allows. */
static int check_names(const char *where, int dir, const struct step *m, const struct step *next)
{
	struct lab_names l;
	char p[PATH_MAX];
	size_t k;
	int i, bad = 0;

	lab_pathf(p, sizeof(p), "%s/%s", mnt, dir_rel[dir]);
	if (lab_list_dir(p, &l)) {
		if (!m->dirs_ready && errno == ENOENT)
			return 1;
		printf("FAIL %s: readdir %s: " LAB_ERR_FMT "\n", where, dir_rel[dir], LAB_ERR_ARGS(errno));
		return 0;
	}
	for (k = 0; k < l.n; k++) {
		int ok = 0;

		for (i = 0; i < nfiles && !ok; i++) {
			if (files[i].dir != dir)
				continue;
			if (m->st[i].present && !strcmp(m->st[i].name, l.name[k]))
				ok = 1;
			if (next && next->touched[i] && next->st[i].present &&
			    !strcmp(next->st[i].name, l.name[k]))
				ok = 1;
		}
		if (!ok) {
			printf("FAIL %s: %s lists \"%s\", no name of the workload at this point\n",
			       where, dir_rel[dir], l.name[k]);
			bad++;
		}
	}
	lab_names_free(&l);
	return bad == 0;
}

static int keep_going = 1;

/* LOGWRITES_POINTS: which states are checked */
enum { POINTS_ALL, POINTS_MARKS, POINTS_SAMPLE };
static int points = POINTS_SAMPLE;
static const char *const points_name[] = { "all", "marks", "sample" };

/*
 * Is the mark @k checked?  Every one but in the sample `make test` runs:
 * every third mark (mkfs the first), the commit, the rekey and the last.
 */
static int mark_wanted(int k)
{
	if (points != POINTS_SAMPLE)
		return 1;
	return k % 3 == 0 || k == nsteps - 1 || !strcmp(steps[k].mark, "commit") ||
	       !strcmp(steps[k].mark, "rekey");
}

static unsigned long long n_control_missing, n_control_present, n_control_flip;

/*
 * The controls, that a check which cannot fail does not pass for one: at
 * the mark mkfs, none of the files of the end may be there (were the live
 * device mounted instead of the replayed state, all would be); at the
 * last mark, a model with one byte flipped must count that file as lost.
 */
static void controls(int k)
{
	const struct step *last = &steps[nsteps - 1];
	struct fstate flip;
	unsigned char *d;
	int i;

	quiet = 1;
	if (k == 0) {
		for (i = 0; i < nfiles; i++) {
			if (!last->st[i].present)
				continue;
			n_control_present++;
			n_control_missing += !check_file("control", i, &last->st[i], NULL);
		}
		printf("control at mark mkfs: %llu of the %llu files of the end are missing, as they must be\n",
		       n_control_missing, n_control_present);
	}
	if (k == nsteps - 1) {
		for (i = 0; i < nfiles && !last->st[i].present; i++)
			;
		if (i < nfiles) {
			flip = last->st[i];
			d = lab_xmalloc(flip.size);
			memcpy(d, flip.data, flip.size);
			d[flip.size / 2] ^= 0x20;
			flip.data = d;
			n_control_flip = !check_file("control", i, &flip, NULL);
			printf("control at the last mark: a byte flipped in the model of %s %s\n",
			       flip.name, n_control_flip ? "is found" : "is NOT found");
			free(d);
		}
	}
	quiet = 0;
}

/* Mount the state replayed so far (a snapshot of it) and check it against mark @k. */
enum { PT_FLUSH, PT_MARK, PT_END };

static int check_point(const char *where, int k, int kind)
{
	struct lab_dm_target t;
	const struct step *m = &steps[k], *next = k + 1 < nsteps ? &steps[k + 1] : NULL;
	char origin[32], cow[32], params[96];
	long long sectors;
	int i, ok = 1, mounted = 0, bad;

	n_points++;
	if (kind == PT_MARK)
		n_marks_checked++;
	else if (kind == PT_FLUSH)
		n_flush_checked++;
	else
		n_end_checked++;
	printf("-- %s: against mark %s%s\n", where, m->mark, next ? " (next step in flight)" : "");
	devno_of("lab-lw-replay", origin, sizeof(origin));
	devno_of("lab-lw-cow", cow, sizeof(cow));
	sectors = lab_dm_sectors("/dev/mapper/lab-lw-replay");
	snprintf(params, sizeof(params), "%s %s N 8", origin, cow);
	t = (struct lab_dm_target){ 0, (uint64_t)sectors, "snapshot", params };
	if (lab_dm_create("lab-lw-snap", &t, 1, NULL))
		lab_die("could not make the snapshot");
	kmsg_start();
	if (mount(snapdev, mnt, "btrfs", 0, OPTS)) {
		printf("FAIL %s: mount -o " OPTS " %s: " LAB_ERR_FMT "\n", where, snapdev,
		       LAB_ERR_ARGS(errno));
		n_mount_failures++;
		ok = 0;
	} else {
		mounted = 1;
		add_keys();
		for (i = 0; i < nfiles; i++) {
			int t1 = next && next->touched[i];

			if (!m->st[i].present && !m->st[i].gone && !t1)
				continue;
			n_files_checked++;
			if (!check_file(where, i, &m->st[i], t1 ? &next->st[i] : NULL)) {
				n_lost++;
				ok = 0;
			}
		}
		for (i = 0; i < NDIRS; i++)
			if (!check_names(where, i, m, next)) {
				n_name_errors++;
				ok = 0;
			}
		if (kind == PT_MARK)
			controls(k);
	}
	if (mounted && umount(mnt)) {
		printf("FAIL %s: umount: " LAB_ERR_FMT "\n", where, LAB_ERR_ARGS(errno));
		ok = 0;
		umount2(mnt, MNT_DETACH);
	}
	btrfs_forget();
	n_check_runs++;
	if (!lab_btrfs_check_clean(snapdev, where)) {
		n_check_errors++;
		ok = 0;
	}
	bad = kmsg_bad_lines();
	if (bad) {
		printf("FAIL %s: %d bad kernel log lines (above)\n", where, bad);
		n_kmsg_bad += bad;
		ok = 0;
	}
	if (lab_dm_remove("lab-lw-snap"))
		lab_die("could not remove the snapshot");
	if (!ok) {
		lab_fail(__FILE__, __LINE__, "check_point", "%s: not intact (above)", where);
		lab_console_line("LOGWRITES-FAIL %s\n", where);
		if (!keep_going)
			lab_die("stopping at the first failing point (LOGWRITES_KEEP_GOING=0)");
	}
	return ok;
}

/* ---- the replay ------------------------------------------------------------------ */

static int mark_index(const char *name)
{
	int i;

	for (i = 0; i < nsteps; i++)
		if (!strcmp(steps[i].mark, name))
			return i;
	return -1;
}

static void replay(const char *logpath, const char *targetpath)
{
	struct lw_super sup;
	unsigned char *hdr, *buf = NULL;
	size_t bufsize = 0;
	uint64_t pos, e, ss;
	int lfd, tfd, cur = -1, pending = 0, applied_since = 0, mkfs_seen = 0;
	char where[160], pend_where[160] = "";
	double last_progress = now_s();

	lfd = open(logpath, O_RDONLY);
	tfd = open(targetpath, O_RDWR);
	if (lfd < 0 || tfd < 0)
		lab_die("open %s / %s: %s", logpath, targetpath, strerror(errno));
	if (posix_memalign((void **)&hdr, 4096, 4096))
		lab_die("out of memory");
	if (pread(lfd, hdr, 4096, 0) != 4096)
		lab_die("read the log's super block: %s", strerror(errno));
	memcpy(&sup, hdr, sizeof(sup));
	if (sup.magic != LW_MAGIC || sup.version != LW_VERSION ||
	    sup.sectorsize < 512 || sup.sectorsize > 4096)
		lab_die("not a dm-log-writes log: magic %llx version %llu sectorsize %u",
			(unsigned long long)sup.magic, (unsigned long long)sup.version, sup.sectorsize);
	ss = sup.sectorsize;
	n_entries = sup.nr_entries;
	printf("log: %llu entries, sector size %llu\n", (unsigned long long)n_entries,
	       (unsigned long long)ss);

	pos = ss;
	for (e = 0; e < n_entries; e++) {
		struct lw_entry en;
		uint64_t bytes;

		if (pread(lfd, hdr, ss, pos) != (ssize_t)ss)
			lab_die("read entry %llu at %llu: %s", (unsigned long long)e,
				(unsigned long long)pos, strerror(errno));
		memcpy(&en, hdr, sizeof(en));
		pos += ss;

		if (en.flags & LW_MARK) {
			char name[128];
			size_t n = en.data_len < sizeof(name) - 1 ? en.data_len : sizeof(name) - 1;
			int k;

			if (n > ss - sizeof(en))
				n = ss - sizeof(en);
			memcpy(name, hdr + sizeof(en), n);
			name[n] = '\0';
			k = mark_index(name);
			if (!strcmp(name, "mkfs"))
				mkfs_seen = 1;
			if (k >= 0) {
				n_marks++;
				cur = k;
			} else {
				n_end_marks++;
			}
			printf("entry %llu: mark %s%s\n", (unsigned long long)e, name,
			       k < 0 ? " (not the workload's)" : "");
			if (mkfs_seen && cur >= 0) {
				if (fdatasync(tfd))
					lab_die("fdatasync the replay target: %s", strerror(errno));
				snprintf(where, sizeof(where), "entry %llu mark %s", (unsigned long long)e, name);
				if (k >= 0 && pending)
					n_flush_merged++;	/* the same state, checked as the mark */
				if (k >= 0 ? mark_wanted(k) : pending || applied_since)
					check_point(where, cur, k >= 0 ? PT_MARK : pending ? PT_FLUSH : PT_END);
				pending = 0;
				applied_since = 0;
			}
			continue;
		}
		bytes = en.nr_sectors * ss;
		if (en.flags & LW_DISCARD) {
			uint64_t range[2] = { en.sector * ss, bytes };

			if (pending) {
				fdatasync(tfd);
				check_point(pend_where, cur, PT_FLUSH);
				pending = 0;
			}
			if (fdatasync(tfd) || ioctl(tfd, BLKZEROOUT, range))
				lab_die("zero the discarded [%llu, +%llu): %s", (unsigned long long)range[0],
					(unsigned long long)range[1], strerror(errno));
			applied_since = 1;
		} else if (bytes) {
			if (pending) {
				fdatasync(tfd);
				check_point(pend_where, cur, PT_FLUSH);
				pending = 0;
			}
			if (bytes > bufsize) {
				free(buf);
				bufsize = (bytes + 4095) & ~4095ULL;
				if (posix_memalign((void **)&buf, 4096, bufsize))
					lab_die("out of memory");
			}
			if (lab_pread_full(lfd, buf, bytes, pos) != (ssize_t)bytes)
				lab_die("read the data of entry %llu: %s", (unsigned long long)e, strerror(errno));
			if (pwrite_all(tfd, buf, bytes, en.sector * ss))
				lab_die("write entry %llu to the replay target: %s", (unsigned long long)e,
					strerror(errno));
			pos += bytes;
			applied_since = 1;
		}
		if (en.flags & (LW_FLUSH | LW_FUA)) {
			n_flush_points++;
			if (!mkfs_seen || cur < 0)
				n_flush_before_mkfs++;	/* no filesystem yet */
			else if (points != POINTS_ALL)
				;	/* LOGWRITES_POINTS=marks or sample */
			else {
				if (pending)
					n_flush_merged++;	/* no write since the last one */
				snprintf(pend_where, sizeof(pend_where), "entry %llu %s%s after mark %s",
					 (unsigned long long)e, en.flags & LW_FLUSH ? "flush" : "",
					 (en.flags & (LW_FLUSH | LW_FUA)) == (LW_FLUSH | LW_FUA) ? "+fua" :
					 en.flags & LW_FUA ? "fua" : "", steps[cur].mark);
				pending = 1;
				applied_since = 0;
			}
		}
		if (now_s() - last_progress > 60) {
			last_progress = now_s();
			lab_console_line("logwrites: entry %llu of %llu, %llu points checked, %llu failing\n",
					 (unsigned long long)e, (unsigned long long)n_entries,
					 n_points, (unsigned long long)lab_failures);
		}
	}
	if (pending) {
		fdatasync(tfd);
		check_point(pend_where, cur, PT_FLUSH);
	}
	CHECK(mkfs_seen, "the log has no mark mkfs");
	free(buf);
	free(hdr);
	close(lfd);
	close(tfd);
}

/* ---- main --------------------------------------------------------------------------- */

static void write_figures(void)
{
	const char *fig = getenv("LOGWRITES_FIGURES"), *res = getenv("RESULTS");
	char path[PATH_MAX];
	FILE *f;

	if (fig && *fig)
		PATHF(path, "%s", fig);
	else if (res && *res)
		PATHF(path, "%s/logwrites-figures.tsv", res);
	else {
		printf("# no RESULTS and no LOGWRITES_FIGURES: figures not written\n");
		return;
	}
	f = fopen(path, "w");
	if (!f) {
		printf("# cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f, "points_mode\t%s\n", points_name[points]);
	fprintf(f, "seed\t0x%x\n", seed);
	fprintf(f, "entries\t%llu\n", n_entries);
	fprintf(f, "flush_points\t%llu\n", n_flush_points);
	fprintf(f, "points_checked\t%llu\n", n_points);
	fprintf(f, "flush_points_checked\t%llu\n", n_flush_checked);
	fprintf(f, "marks\t%llu\n", n_marks);
	fprintf(f, "marks_checked\t%llu\n", n_marks_checked);
	fprintf(f, "end_marks\t%llu\n", n_end_marks);
	fprintf(f, "end_checked\t%llu\n", n_end_checked);
	fprintf(f, "flush_points_before_mkfs\t%llu\n", n_flush_before_mkfs);
	fprintf(f, "flush_points_merged\t%llu\n", n_flush_merged);
	fprintf(f, "files_checked\t%llu\n", n_files_checked);
	fprintf(f, "lost\t%llu\n", n_lost);
	fprintf(f, "name_errors\t%llu\n", n_name_errors);
	fprintf(f, "mount_failures\t%llu\n", n_mount_failures);
	fprintf(f, "check_runs\t%llu\n", n_check_runs);
	fprintf(f, "check_errors\t%llu\n", n_check_errors);
	fprintf(f, "check_clean\t%d\n", n_check_runs > 0 && n_check_errors == 0);
	fprintf(f, "kmsg_bad\t%llu\n", n_kmsg_bad);
	fprintf(f, "control_missing\t%llu of %llu\n", n_control_missing, n_control_present);
	fprintf(f, "control_flip_found\t%llu\n", n_control_flip);
	fprintf(f, "controls_ok\t%d\n", n_control_present > 0 &&
		n_control_missing == n_control_present && n_control_flip == 1);
	fprintf(f, "record_s\t%.0f\n", record_s);
	fprintf(f, "replay_s\t%.0f\n", replay_s);
	fclose(f);
	printf("# figures written to %s\n", path);
}

int main(void)
{
	const char *dev1 = lab_env("SCRATCH_DEV"), *dev2 = lab_env("SCRATCH_DEV2");
	const char *pts = getenv("LOGWRITES_POINTS"), *sd = getenv("LOGWRITES_SEED");
	const char *mb = getenv("LOGWRITES_FS_MB"), *kg = getenv("LOGWRITES_KEEP_GOING");
	char why[256], data_no[32], log_no[32], params[96], logpath[128], replaypath[128];
	long long s1, s2, fs, cowlen, loglen;
	struct lab_dm_target t;
	int i, fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t0 = now_s();
	mnt = lab_env("SCRATCH_MNT");
	seed = sd && *sd ? (uint32_t)strtoul(sd, NULL, 0) : 0x36f0004;
	for (i = 0; pts && *pts && i < 3 && strcmp(pts, points_name[i]); i++)
		;
	if (i == 3)
		lab_die("LOGWRITES_POINTS must be all, marks or sample (got %s)", pts);
	if (pts && *pts)
		points = i;
	keep_going = !(kg && !strcmp(kg, "0"));
	fs = (mb && *mb ? atoll(mb) : 256) << 11;
	snprintf(tag, sizeof(tag), "%08x", (uint32_t)lab_splitmix64(&(uint64_t){ seed }));
	printf("btrfs_fscrypt_logwrites: an encrypted workload recorded with dm-log-writes and replayed to %s (LOGWRITES_POINTS=%s, seed 0x%x, filesystem %lld MiB)\n",
	       points == POINTS_ALL ? "every flush, FUA and mark" : points == POINTS_MARKS ?
	       "every mark" : "a sample of the marks", points_name[points], seed, fs >> 11);

	if (!lab_dm_available(why, sizeof(why)))
		lab_skip("%s", why);
	printf("%s\n", why);
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("no per-extent keys (%s)", LAB_BTRFS_EXTENT_KEYS_FEATURE);
	if (!lab_btrfs_progs_patched(why, sizeof(why)))
		lab_skip("%s", why);
	s1 = lab_dm_sectors(dev1);
	s2 = lab_dm_sectors(dev2);
	cowlen = fs / 2;
	loglen = s2 - cowlen;
	if (s1 < 2 * fs || loglen < fs)
		lab_skip("scratch disks too small: %s %lld MiB, %s %lld MiB for a %lld MiB filesystem",
			 dev1, s1 >> 11, dev2, s2 >> 11, fs >> 11);

	atexit(cleanup);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	cleanup();	/* what an earlier, killed run left */

	/* ---- record ---- */
	PHASE("record: log-writes over %s [0, %lld MiB), log on %s", dev1, fs >> 11, dev2);
	linear("lab-lw-data", dev1, 0, fs);
	linear("lab-lw-log", dev2, 0, loglen);
	lab_dm_path("lab-lw-log", logpath, sizeof(logpath));
	/* the log's super block must not be an older run's */
	{
		int fd = open(logpath, O_WRONLY);
		uint64_t range[2] = { 0, 1 << 20 };

		if (fd < 0 || ioctl(fd, BLKZEROOUT, range))
			lab_die("zero the log's start: %s", strerror(errno));
		close(fd);
	}
	devno_of("lab-lw-data", data_no, sizeof(data_no));
	devno_of("lab-lw-log", log_no, sizeof(log_no));
	snprintf(params, sizeof(params), "%s %s", data_no, log_no);
	t = (struct lab_dm_target){ 0, (uint64_t)fs, "log-writes", params };
	if (lab_dm_create("lab-lw", &t, 1, NULL)) {
		if (errno == EINVAL)
			lab_skip("no dm-log-writes target in this kernel (CONFIG_DM_LOG_WRITES)");
		lab_die("could not make the log-writes device");
	}
	lab_dm_path("lab-lw", lwdev, sizeof(lwdev));
	lab_dm_path("lab-lw-snap", snapdev, sizeof(snapdev));

	kmsg_start();
	if (run("mkfs.btrfs -q -f -K -O encrypt %s", lwdev))
		lab_die("mkfs.btrfs -O encrypt %s failed", lwdev);
	mark("mkfs");
	if (lab_mount(lwdev, mnt, "btrfs", OPTS))
		lab_die("mount %s", lwdev);
	workload();
	PHASE("record: %d marks; the live filesystem against the model", nsteps);
	for (i = 0; i < nfiles; i++) {
		const struct fstate *st = &files[i].cur;

		if (st->present)
			CHECK(check_file("live", i, st, NULL), "live %s", st->name);
	}
	{
		char status[256];

		if (!lab_dm_status("lab-lw", status, sizeof(status))) {
			printf("log-writes status: %s\n", status);
			CHECK(!strstr(status, "disabled"), "dm-log-writes stopped logging: %s", status);
		}
	}
	if (lab_umount(mnt))
		lab_die("umount %s", mnt);
	btrfs_forget();
	i = kmsg_bad_lines();
	CHECK(i == 0, "%d bad kernel log lines while recording (above)", i);
	if (lab_dm_remove("lab-lw") || lab_dm_remove("lab-lw-data"))
		lab_die("remove the log-writes device");
	record_s = now_s() - t0;
	if (lab_failures)
		lab_die("the recording went wrong (above): nothing to replay");

	/* ---- replay ---- */
	PHASE("replay: onto %s [%lld MiB, +%lld MiB), snapshots on %s's last %lld MiB", dev1,
	      fs >> 11, fs >> 11, dev2, cowlen >> 11);
	linear("lab-lw-replay", dev1, fs, fs);
	linear("lab-lw-cow", dev2, loglen, cowlen);
	lab_dm_path("lab-lw-replay", replaypath, sizeof(replaypath));
	{
		int fd = open(replaypath, O_WRONLY);
		uint64_t range[2] = { 0, (uint64_t)fs << 9 };

		if (fd < 0 || ioctl(fd, BLKZEROOUT, range))
			lab_die("zero the replay target: %s", strerror(errno));
		close(fd);
	}
	replay(logpath, replaypath);
	replay_s = now_s() - t0 - record_s;
	PHASE("replay: %llu entries, %llu flush/FUA entries; %llu states checked (%llu at marks, %llu at flush/FUA points), %llu file checks, %llu lost, %llu name errors, btrfs check %llu runs %llu unclean, %llu bad kernel lines",
	      n_entries, n_flush_points, n_points, n_marks_checked, n_flush_checked,
	      n_files_checked, n_lost, n_name_errors, n_check_runs, n_check_errors, n_kmsg_bad);
	for (i = 0, fd = 0; i < nsteps; i++)
		fd += mark_wanted(i);
	CHECK(n_marks_checked == (unsigned long long)fd,
	      "%llu marks checked, %d wanted of the %d the workload sent", n_marks_checked, fd, nsteps);
	CHECK(n_control_present > 0 && n_control_missing == n_control_present,
	      "control: at the mark mkfs %llu of the %llu files of the end were missing (all must be)",
	      n_control_missing, n_control_present);
	CHECK(n_control_flip == 1, "control: a byte flipped in the model at the last mark was not found");
	CHECK(n_marks == (unsigned long long)nsteps, "%llu workload marks in the log, %d sent",
	      n_marks, nsteps);
	write_figures();
	return lab_result("btrfs_fscrypt_logwrites");
}
