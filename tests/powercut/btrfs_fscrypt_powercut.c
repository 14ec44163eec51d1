// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_powercut - power cuts during encrypted btrfs writes (issue
 * #14, part 2).
 *
 * What it proves: after the VM is killed at a random moment of a workload
 * of fsyncs, renames, creates, unlinks, reflinks, snapshots, remounts and
 * key removals in encrypted btrfs directories, with files of both key modes
 * (per-extent keys in key groups, the default, and per-inode keys, mount
 * option fscrypt_per_inode_keys), data that compresses and a mount with
 * compress=zstd where the kernel compresses encrypted files (so that
 * compressed encrypted extents are written and logged when the power goes),
 * the next mount (tree-log replay) gives
 * back every byte that an fsync or fdatasync had made durable, bit for bit;
 * no file, name or snapshot is in a state that its last durable operation
 * excludes; every file is still encrypted, in the mode it was created in;
 * and the image's patched `btrfs check --readonly` finds the filesystem
 * clean.
 *
 * How: tests/run-powercut.sh boots the VM once per cut, with two scratch
 * disks kept from boot to boot: A (SCRATCH_DEV) holds the filesystem, B
 * (SCRATCH_DEV2) a log of what is durable.  Each boot runs
 *
 *   btrfs_fscrypt_powercut verify [--self-check]
 *	for the previous cut (not in the first boot), then, if that passed,
 *   btrfs_fscrypt_powercut work SEED CUT [--mkfs]
 *	which runs until the host SIGKILLs QEMU (--mkfs: the first boot
 *	makes the filesystem).  The host starts its random timer when the
 *	line "powercut: working" reaches the console.
 *
 * The filesystem: the top level holds a subvolume sv and a directory snaps;
 * sv/enc is encrypted (v2 policy, one master key) with two subdirectories a
 * and b.  A subvolume kx has the policy of a second master key (key 2) on
 * its top directory and holds kx/src, 256 KiB of data that compresses,
 * written at mkfs and never changed: the source of the clones across keys.  Three writer processes own three files each, named
 * pc-<run>-<id>-<generation> in a or b, and a coordinator does what is not
 * one writer's.  A writer does, at random:
 *   - a batch of 1 to 4 writes (1 byte to 4 blocks + 512 bytes, at random
 *     offsets, aligned or not, some extending the file) to one of its files,
 *     then fsync, or fdatasync one time in four;
 *   - a FICLONERANGE of 1 to 8 blocks between two of its per-extent files
 *     (or within one), or, one time in three, from kx/src, a file of
 *     another master key, into one of them (so that files of sv/enc's key
 *     hold extents of key 2 too: a reflink across keys, from compressed
 *     extents), then fsync of the destination;
 *   - a rename into a or b (fsync of both directories);
 *   - an unlink (fsync of the directory) and later a create (initial
 *     content, fsync of the file and the directory).
 * The coordinator, every 0.8 to 2.5 s: removes the master key (the files
 * are open: FILES_BUSY) and adds it again 0.2 to 0.7 s later; or pauses the
 * writers between their operations and takes a read-only snapshot of sv
 * (deleting the oldest of more than two first, then syncfs); or remounts
 * with the other key mode (new files get that mode); or syncfs; or drops
 * caches.  The first boot creates every file with per-extent keys; later
 * boots start in per-extent mode in odd and per-inode mode in even boots,
 * and files created then get per-inode keys.  Once sv holds such a file,
 * the kernel refuses to snapshot it (EOPNOTSUPP: the copies would share
 * the file's key and IVs); a refused snapshot is logged as not done if
 * sv's ROOT_ITEM carries the mark of per-inode keys, and counted.  A
 * create or rename refused for want of the key (ENOKEY, while it is
 * removed) is logged as not done; any other error is printed as
 * "powercut: ERROR", which fails the cut.
 *
 * The log on B (tests/lib/powercut.c): 512-byte records, one per sector,
 * written with O_DIRECT|O_DSYNC at the slot a shared counter hands out;
 * each carries a crc32c, the run's id and its own slot number, so that a
 * torn, unwritten or stale sector is recognised and skipped.  Sector 0 is
 * the header (run id, master key).  Every operation writes an INTENT
 * record (everything needed to redo it: offsets, lengths, content seeds,
 * names) before it starts and a COMMIT record (done, or not done with the
 * errno) after its fsync returned.  A writer's operations touch only its
 * own files and are sequential, so at most one operation per process is in
 * flight at a cut.
 *
 * The rule the verifier applies.  It replays the log in slot order into a
 * model: each committed operation is applied at its commit; the model of a
 * file is its content and size after its last committed operation (bytes
 * beyond the size, and holes, are 0).  A later committed write supersedes an
 * earlier one because it is applied later.  An operation with an intent and
 * no commit is "in flight": its fsync may or may not have happened, and
 * writeback may have put any of its blocks on the disk before the cut, so
 *   - a byte that an in-flight write or clone covers may show the model's
 *     value or the value that write (any of the batch's writes covering it)
 *     or clone would have put there; every other byte must show the
 *     model's value exactly; bytes of the model's size that are missing
 *     (a short file) are lost;
 *   - the size may be anything from the model's size to the largest size
 *     an in-flight write or clone would give;
 *   - a file renamed in flight may have either name, but not both, except
 *     after a rename between the two directories: the writer fsyncs the
 *     new parent, then the old one, and btrfs logs each directory at its
 *     own fsync, so a cut between the two leaves both names, hard links
 *     of the same inode (seen at cut 31 of the run of 2026-12-04 22:19,
 *     and reproduced on unencrypted btrfs on this kernel: mv b/f a/g,
 *     fsync of a, crash; unless the inode was already logged in that
 *     transaction).  That case is allowed, counted (renames_both) and
 *     reported; any other pair of names is an error; one
 *     unlinked in flight may be gone (if present, its content is checked);
 *     one created in flight may be absent or have any content;
 *   - a snapshot created in flight may be absent (if present, it is
 *     checked); one deleted in flight is not checked.
 * Committed operations are checked without such allowance: a snapshot must
 * hold exactly the model of every file at the time it was taken (the
 * writers were paused); a committed unlink or rename leaves no old name;
 * a deleted snapshot is gone; no directory holds a name the model does not
 * know.  The fsync may have returned and the cut come before the commit
 * record: the operation then counts as in flight (allowed either way),
 * which is never wrong, only weaker.
 *
 * Redo: so that the allowance does not carry over to later cuts (a byte
 * that may be old or new must not stay undecided), "work" first redoes
 * every operation left in flight by the previous cut, from its intent
 * (writes, clones and creates again; renames, unlinks and snapshot
 * deletions finished; a snapshot committed if it exists), and commits it,
 * before the new workload starts.  After that the model is exact again.
 *
 * Counted: bytes checked (the model's size of every file and snapshot
 * file, per key mode, and kx/src) and lost, bytes found wrong beyond the
 * model's size, live files with compressed extents (FIEMAP), durable clones
 * from kx/src and live files holding extents of key 2 (their extent
 * contexts, TREE_SEARCH),
 * other errors (missing or extra names, wrong size, not encrypted, wrong
 * mode, a plaintext name visible without the key), and the errors of
 * `btrfs check`.  The verifier's last line, "powercut-verify: key=value
 * ...", is what the host reads.
 *
 * Controls: every verify flips one byte of a file's model where the disk
 * agreed with it and must then count exactly one more lost byte (else the
 * comparison is blind and the verify fails).  With --self-check, one byte
 * (a content seed) of the last committed write record is changed after
 * the log is read, as if the record described other data: the verifier
 * must report lost bytes and fail; tests/run-powercut.sh uses that to show
 * that a run with loss fails.
 *
 * What a kill is here: QEMU dies; what the guest had submitted and QEMU
 * had completed is in the image files (cache=none), whether or not the
 * guest had flushed it.  A disk that loses its volatile write cache at a
 * power cut would lose more; this test does not model that.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (no btrfs encryption, no per-extent
 * keys, or no patched btrfs-progs in the image).  "work" does not end
 * unless something failed.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"
#include "powercut.h"
#include "rawdev.h"

#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <limits.h>
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
#include <linux/fiemap.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>

#define PC_BLK			4096u
#define PC_WRITERS		3
#define PC_PER_WRITER		3		/* files a writer owns */
#define PC_COORD		PC_WRITERS	/* process number of the coordinator */
#define PC_PROCS		(PC_WRITERS + 1)
#define PC_DIRS			2		/* sv/enc/a and sv/enc/b */
#define PC_FMAX			(512u * 1024)	/* no file grows beyond this */
#define PC_CREATE_MIN		(16u * 1024)
#define PC_CREATE_MAX		(192u * 1024)
#define PC_GROW			(64u * 1024)	/* writes reach this far past EOF */
#define PC_MAX_LEN		(4 * PC_BLK + 512)
#define PC_MAX_PIECES		8
#define PC_MAX_FILES		65536u
#define PC_MAX_SNAPS		4096u
#define PC_LIVE_SNAPS		2
#define PC_PROGRESS_MS		2000
#define PC_REC_MAGIC		0x31524350u	/* "PCR1" */
#define PC_HDR_MAGIC		0x31484350u	/* "PCH1" */
#define PC_HDR_VERSION		2		/* 2: the second key and kx/src */
/*
 * The clone source of another master key: subvolume kx (policy of key 2 on
 * its top directory), file kx/src of PC_XSRC_LEN compressible bytes made
 * at mkfs and never changed; a clone record names it as file2 PC_XSRC.
 */
#define PC_XSRC			(PC_MAX_FILES - 1)
#define PC_XSRC_LEN		(256u * 1024)

enum pc_op {
	PC_OP_WRITE = 1,	/* file, pieces (off, len, content seed) */
	PC_OP_CLONE,		/* file (dst) <- file2 (src), one piece (dst off, len, src off) */
	PC_OP_CREATE,		/* file, dir, gen, size, seed */
	PC_OP_UNLINK,		/* file, dir, gen */
	PC_OP_RENAME,		/* file, dir, gen -> dir2, gen2 */
	PC_OP_SNAP,		/* file = snapshot number */
	PC_OP_SNAP_DEL,		/* file = snapshot number */
	PC_OP_MAX
};

static const char *const pc_op_name[PC_OP_MAX] = {
	"?", "write", "clone", "create", "unlink", "rename", "snapshot",
	"snapshot-delete",
};

enum pc_mode { PC_MODE_NONE, PC_MODE_INODE, PC_MODE_EXTENT };

/*
 * The contents of every write: the seed's pattern with the second half of
 * each 256 bytes zeroed, so that it compresses (about 2:1).  The workload
 * mounts with compress=zstd where the kernel compresses encrypted files
 * (LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE), so that cuts also land in
 * compressed encrypted writes; the verifier fills the same bytes.
 */
static void pc_fill(void *buf, size_t len, uint32_t seed)
{
	unsigned char *b = buf;
	size_t i;

	fill_pattern(buf, len, seed);
	for (i = 0; i < len; i++)
		if (i % 256 >= 128)
			b[i] = 0;
}

static const char *const pc_mode_name[] = { "unknown", "per-inode", "per-extent" };
static const char *const pc_mode_opt[] = {
	NULL, LAB_BTRFS_PER_INODE_KEYS_OPT, "fscrypt_per_extent_keys",
};

#define PC_F_DATASYNC		1u	/* write batch: fdatasync, not fsync */

struct pc_piece {
	uint32_t off;		/* write: file offset; clone: destination offset */
	uint32_t len;
	uint32_t arg;		/* write: content seed; clone: source offset */
};

/* A log record as it is in its sector (the rest of the sector is 0). */
struct pc_rec {
	PCUT_REC_HEAD;		/* magic PC_REC_MAGIC */
	uint16_t proc;		/* writer 0..PC_WRITERS-1 or PC_COORD */
	uint32_t op;		/* intent: enum pc_op */
	int32_t result;		/* commit: 0 done, -errno not done */
	uint32_t file, file2;
	uint32_t dir, gen, dir2, gen2;
	uint32_t size, seed;	/* create; epoch record: mount mode, seed */
	uint32_t mode;		/* commit of a create: enum pc_mode measured */
	uint32_t flags;		/* PC_F_* */
	uint32_t npieces;
	struct pc_piece p[PC_MAX_PIECES];
};

struct pc_hdr {
	PCUT_HDR_HEAD;		/* magic PC_HDR_MAGIC */
	uint8_t key[LAB_MASTER_KEY_SIZE];
	uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint8_t key2[LAB_MASTER_KEY_SIZE];	/* kx's key */
	uint8_t key2_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint32_t xsrc_seed;			/* kx/src's contents: pc_fill() */
};

_Static_assert(sizeof(struct pc_rec) <= PCUT_SECTOR, "a record must fit a sector");
_Static_assert(sizeof(struct pc_hdr) <= PCUT_SECTOR, "the header must fit a sector");

static struct pcut_log plog = PCUT_LOG_INIT(PC_HDR_MAGIC, PC_HDR_VERSION, PC_REC_MAGIC,
					    struct pc_hdr, struct pc_rec);

static const char *dev, *dev2, *mnt;
static char sv_path[PATH_MAX], enc_path[PATH_MAX], snaps_path[PATH_MAX];
static char kx_path[PATH_MAX], xsrc_path[PATH_MAX];
static char dir_path[PC_DIRS][PATH_MAX];
/*
 * test_dummy_encryption (the "encrypt" configuration, lab_dummy_encryption()):
 * everything new below a subvolume's top directory gets fscrypt's test key,
 * which is new at every boot, so that what it encrypted is unreadable after
 * a cut.  The workload keeps its own key: its policy goes on sv's top
 * directory (never encrypted by the option), and enc inherits it; snaps is
 * a subvolume, not a directory (a directory there would have the test
 * policy, and no subvolume is created in an encrypted directory).  No inode
 * of the workload is under the test key; without the key, sv itself lists
 * one no-key name (of enc).
 */
static int pc_dummy;

/* ---- small helpers ----------------------------------------------------------- */

static void pc_name(char *out, size_t size, uint64_t run_id, uint32_t id,
		    uint32_t gen)
{
	lab_pathf(out, size, "pc-%08x-%u-%u", (uint32_t)run_id, id, gen);
}

/* Path of file @id (generation @gen) in directory @dir under @root (sv or a snapshot). */
static void pc_file_path(char *out, size_t size, const char *root,
			 uint64_t run_id, uint32_t dir, uint32_t id, uint32_t gen)
{
	char name[64];

	pc_name(name, sizeof(name), run_id, id, gen);
	lab_pathf(out, size, "%s/enc/%c/%s", root, 'a' + (int)dir, name);
}

static void pc_snap_path(char *out, size_t size, uint32_t n)
{
	lab_pathf(out, size, "%s/s%u", snaps_path, n);
}

static void pc_paths(void)
{
	int d;

	PATHF(sv_path, "%s/sv", mnt);
	PATHF(enc_path, "%s/enc", sv_path);
	PATHF(snaps_path, "%s/snaps", mnt);
	PATHF(kx_path, "%s/kx", mnt);
	PATHF(xsrc_path, "%s/src", kx_path);
	for (d = 0; d < PC_DIRS; d++)
		PATHF(dir_path[d], "%s/%c", enc_path, 'a' + d);
}

/* The key mode of inode @path: PC_MODE_*, or PC_MODE_NONE if not encrypted; -1 on error. */
static int pc_inode_mode(const char *path)
{
	struct stat st;
	uint64_t flags;

	if (stat(path, &st) || lab_btrfs_inode_flags(path, st.st_ino, &flags))
		return -1;
	if (!(flags & LAB_BTRFS_INODE_ENCRYPT))
		return PC_MODE_NONE;
	return flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT ? PC_MODE_EXTENT :
							    PC_MODE_INODE;
}

/* What the log on the second disk holds. */
struct pc_log {
	struct pc_hdr hdr;
	struct pc_rec *r;	/* the valid records of this run, in slot order */
	struct pcut_log_scan scan;
};

/* ---- the model: what the log says is durable ----------------------------------- */

enum { PC_NONE, PC_LIVE, PC_GONE };

struct pc_file {
	int state;
	uint32_t dir, gen, mode, size;
	unsigned char *m;		/* PC_FMAX bytes, 0 beyond size */
	const struct pc_rec *pending;	/* the owner's operation in flight on it */
};

struct pc_sfile {
	uint32_t id, dir, gen, mode, size;
	unsigned char *m;
};

struct pc_snap {
	int state;			/* PC_NONE (created in flight), PC_LIVE, PC_GONE */
	uint32_t nfiles;
	struct pc_sfile *f;
	const struct pc_rec *pending;	/* its creation or deletion in flight */
};

struct pc_model {
	struct pc_file xsrc;		/* kx/src, of key 2: never changes */
	struct pc_file *f[PC_MAX_FILES];
	struct pc_snap *s[PC_MAX_SNAPS];
	struct pcut_replay replay;	/* intents (struct pc_rec) and commits */
	uint64_t bad;
	uint64_t ops[PC_OP_MAX];
	uint64_t xclones;		/* durable clones from kx/src (key 2) */
	uint32_t next_id[PC_WRITERS], next_snap;
};

/* A log error (pcut_log_error()) about record @rec; also the replay's. */
static void pc_bad(void *model, const void *rec, const char *why)
{
	struct pc_model *md = model;
	const struct pc_rec *r = rec;

	pcut_log_error(&md->bad, r, r->op, r->file, why);
}

static int pc_intent_ok(const struct pc_rec *r)
{
	uint32_t i;

	if (r->op == 0 || r->op >= PC_OP_MAX || r->proc >= PC_PROCS)
		return 0;
	if (r->op == PC_OP_SNAP || r->op == PC_OP_SNAP_DEL)
		return r->file < PC_MAX_SNAPS;
	if (r->file >= PC_MAX_FILES || r->dir >= PC_DIRS || r->dir2 >= PC_DIRS)
		return 0;
	switch (r->op) {
	case PC_OP_WRITE:
		if (r->npieces < 1 || r->npieces > PC_MAX_PIECES)
			return 0;
		for (i = 0; i < r->npieces; i++)
			if (!r->p[i].len || r->p[i].len > PC_FMAX ||
			    r->p[i].off > PC_FMAX - r->p[i].len)
				return 0;
		return 1;
	case PC_OP_CLONE:
		return r->file2 < PC_MAX_FILES && r->npieces == 1 && r->p[0].len &&
		       r->p[0].len <= PC_FMAX && r->p[0].off <= PC_FMAX - r->p[0].len &&
		       r->p[0].arg <= PC_FMAX - r->p[0].len &&
		       (r->file2 != PC_XSRC || r->p[0].arg <= PC_XSRC_LEN - r->p[0].len);
	case PC_OP_CREATE:
		return r->size <= PC_FMAX;
	default:
		return 1;
	}
}

static struct pc_file *pc_file_get(struct pc_model *md, uint32_t id)
{
	if (!md->f[id]) {
		md->f[id] = calloc(1, sizeof(*md->f[id]));
		if (!md->f[id])
			lab_die("out of memory");
	}
	return md->f[id];
}

static struct pc_file *pc_live(struct pc_model *md, uint32_t id)
{
	return md->f[id] && md->f[id]->state == PC_LIVE ? md->f[id] : NULL;
}

/* At a snapshot's intent: the writers are paused, the model is the disk. */
static void pc_snap_capture(struct pc_model *md, const struct pc_rec *r)
{
	struct pc_snap *s = calloc(1, sizeof(*s));
	uint32_t id, n = 0;

	if (!s)
		lab_die("out of memory");
	for (id = 0; id < PC_MAX_FILES; id++)
		n += pc_live(md, id) != NULL;
	s->f = calloc(n ? n : 1, sizeof(*s->f));
	if (!s->f)
		lab_die("out of memory");
	for (id = 0; id < PC_MAX_FILES; id++) {
		struct pc_file *f = pc_live(md, id);
		struct pc_sfile *sf;

		if (!f)
			continue;
		sf = &s->f[s->nfiles++];
		sf->id = id;
		sf->dir = f->dir;
		sf->gen = f->gen;
		sf->mode = f->mode;
		sf->size = f->size;
		sf->m = lab_xmalloc(PC_FMAX);
		memcpy(sf->m, f->m, PC_FMAX);
	}
	s->state = PC_NONE;
	if (md->s[r->file])
		pc_bad(md, r, "snapshot number used twice");
	md->s[r->file] = s;
}

static void pc_snap_free(struct pc_snap *s)
{
	uint32_t i;

	if (!s)
		return;
	for (i = 0; i < s->nfiles; i++)
		free(s->f[i].m);
	free(s->f);
	s->f = NULL;
	s->nfiles = 0;
}

static void pc_grow(struct pc_file *f, uint32_t end)
{
	if (end > f->size)
		f->size = end;
}

/* Apply the committed operation @r (its commit @c). */
static void pc_apply(struct pc_model *md, const struct pc_rec *r,
		     const struct pc_rec *c)
{
	struct pc_file *f, *src;
	struct pc_snap *s;
	uint32_t i;

	switch (r->op) {
	case PC_OP_WRITE:
		f = pc_live(md, r->file);
		if (!f)
			return pc_bad(md, r, "write to a file that does not exist");
		for (i = 0; i < r->npieces; i++) {
			pc_fill(f->m + r->p[i].off, r->p[i].len, r->p[i].arg);
			pc_grow(f, r->p[i].off + r->p[i].len);
		}
		break;
	case PC_OP_CLONE:
		f = pc_live(md, r->file);
		src = r->file2 == PC_XSRC ? &md->xsrc : pc_live(md, r->file2);
		if (!f || !src)
			return pc_bad(md, r, "clone between files that do not exist");
		memmove(f->m + r->p[0].off, src->m + r->p[0].arg, r->p[0].len);
		pc_grow(f, r->p[0].off + r->p[0].len);
		md->xclones += r->file2 == PC_XSRC;
		break;
	case PC_OP_CREATE:
		f = pc_file_get(md, r->file);
		if (f->state != PC_NONE)
			return pc_bad(md, r, "file id created twice");
		f->state = PC_LIVE;
		f->dir = r->dir;
		f->gen = r->gen;
		f->mode = c->mode;
		f->size = r->size;
		f->m = calloc(1, PC_FMAX);
		if (!f->m)
			lab_die("out of memory");
		pc_fill(f->m, r->size, r->seed);
		break;
	case PC_OP_UNLINK:
		f = pc_live(md, r->file);
		if (!f)
			return pc_bad(md, r, "unlink of a file that does not exist");
		f->state = PC_GONE;
		free(f->m);
		f->m = NULL;
		break;
	case PC_OP_RENAME:
		f = pc_live(md, r->file);
		if (!f || f->dir != r->dir || f->gen != r->gen)
			return pc_bad(md, r, "rename of a name that does not exist");
		f->dir = r->dir2;
		f->gen = r->gen2;
		break;
	case PC_OP_SNAP:
		s = md->s[r->file];
		if (!s)
			return pc_bad(md, r, "commit of a snapshot never captured");
		s->state = PC_LIVE;
		break;
	case PC_OP_SNAP_DEL:
		s = md->s[r->file];
		if (!s || s->state != PC_LIVE)
			return pc_bad(md, r, "deletion of a snapshot that does not exist");
		s->state = PC_GONE;
		pc_snap_free(s);
		break;
	}
	md->ops[r->op]++;
}

/* The replay of the log into the model (pcut_replay()), step by step. */
static int pc_replay_intent(void *ctx, const void *rec)
{
	struct pc_model *md = ctx;
	const struct pc_rec *r = rec;
	int w;

	if (!pc_intent_ok(r))
		return 0;
	if (r->op == PC_OP_CREATE) {
		w = (int)(r->file % PC_WRITERS);
		if (r->file + PC_WRITERS > md->next_id[w])
			md->next_id[w] = r->file + PC_WRITERS;
		pc_file_get(md, r->file);
	}
	if (r->op == PC_OP_SNAP) {
		if (r->file + 1 > md->next_snap)
			md->next_snap = r->file + 1;
		pc_snap_capture(md, r);
	}
	return 1;
}

static int pc_replay_commit(void *ctx, const void *intent, const void *commit)
{
	struct pc_model *md = ctx;
	const struct pc_rec *in = intent, *c = commit;

	if (c->result == 0) {
		pc_apply(md, in, c);
		return 1;
	}
	if (in->op == PC_OP_SNAP) {
		pc_snap_free(md->s[in->file]);
		free(md->s[in->file]);
		md->s[in->file] = NULL;
	}
	return 0;
}

/* In flight: at most one operation per process. */
static void pc_replay_inflight(void *ctx, const void *intent)
{
	struct pc_model *md = ctx;
	const struct pc_rec *in = intent;
	struct pc_file *f;

	if (in->op == PC_OP_SNAP || in->op == PC_OP_SNAP_DEL) {
		if (md->s[in->file])
			md->s[in->file]->pending = in;
		return;
	}
	f = pc_file_get(md, in->file);
	if (f->pending)
		pc_bad(md, in, "two operations in flight on one file");
	f->pending = in;
}

static void pc_model_build(struct pc_model *md, const struct pc_log *log)
{
	static const struct pcut_replay_ops ops = {
		.intent = pc_replay_intent,
		.commit = pc_replay_commit,
		.inflight = pc_replay_inflight,
		.bad = pc_bad,
	};
	int w;

	memset(md, 0, sizeof(*md));
	md->xsrc.state = PC_LIVE;
	md->xsrc.size = PC_XSRC_LEN;
	md->xsrc.m = calloc(1, PC_FMAX);
	if (!md->xsrc.m)
		lab_die("out of memory");
	pc_fill(md->xsrc.m, PC_XSRC_LEN, log->hdr.xsrc_seed);
	for (w = 0; w < PC_WRITERS; w++)
		md->next_id[w] = (uint32_t)w;
	pcut_replay(&plog, log->r, log->scan.n, log->scan.end, &md->replay, &ops, md);
}

static void pc_model_free(struct pc_model *md)
{
	uint32_t i;

	for (i = 0; i < PC_MAX_FILES; i++) {
		if (md->f[i])
			free(md->f[i]->m);
		free(md->f[i]);
	}
	for (i = 0; i < PC_MAX_SNAPS; i++) {
		pc_snap_free(md->s[i]);
		free(md->s[i]);
	}
	free(md->xsrc.m);
	pcut_replay_free(&md->replay);
	memset(md, 0, sizeof(*md));
}

/* ---- verify ------------------------------------------------------------------------ */

struct pc_stats {
	uint64_t checked, checked_mode[3], lost, wrong, errors;
	uint64_t files, sfiles, inflight_seen, renames_both;
	uint64_t compressed;	/* live files with a compressed extent */
	uint64_t xkey_files, xkey_extents;	/* live files' extents of key 2 */
	int control_done;
};

/* Count @path's file extent items whose context names key 2 (kx's). */
static void pc_count_xkey(struct pc_stats *st, const char *path, const uint8_t *key2_id)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_fscrypt_extent_ctx c;
	struct stat sb;
	size_t n = 0, i, k = 0;

	if (stat(path, &sb) || lab_btrfs_file_extents(path, sb.st_ino, &fe, &n))
		return;
	for (i = 0; i < n; i++)
		k += fe[i].tail_len &&
		     !lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &c) &&
		     !memcmp(c.key_id, key2_id, FSCRYPT_KEY_IDENTIFIER_SIZE);
	free(fe);
	st->xkey_extents += k;
	st->xkey_files += k > 0;
}

/* Has @path a compressed (FIEMAP: encoded) extent? */
static int pc_has_compressed(const char *path)
{
	struct raw_extent *ext = NULL;
	size_t n = 0, i;
	int found = 0;

	if (raw_fiemap(path, &ext, &n))
		return 0;
	for (i = 0; i < n; i++)
		found |= !!(ext[i].flags & FIEMAP_EXTENT_ENCODED);
	free(ext);
	return found;
}

static LAB_PRINTF(2, 3) void pc_err(struct pc_stats *st, const char *fmt, ...)
{
	va_list ap;

	st->errors++;
	if (st->errors > 50)
		return;
	printf("powercut: FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* What a file may look like: names, content, candidates. */
struct pc_view {
	char what[96];
	char path[2][PATH_MAX];
	int npaths;
	int both_ok;		/* a cross-directory rename in flight */
	int may_be_absent;
	int check_content;
	uint32_t mode, size, max_size;
	const unsigned char *m;		/* the model: PC_FMAX bytes, 0 beyond size */
	struct pcut_cand cand[PC_MAX_PIECES];	/* of the operation in flight */
	int ncand;
};

/* Candidates of the operation in flight on file @f (writes, or a clone into it). */
static void pc_view_pending(struct pc_view *v, const struct pc_model *md,
			    const struct pc_file *f)
{
	const struct pc_rec *r = f->pending;
	const struct pc_file *src;
	uint32_t i, end;

	v->max_size = v->size;
	if (!r)
		return;
	if (r->op == PC_OP_WRITE) {
		for (i = 0; i < r->npieces; i++) {
			v->cand[v->ncand].off = r->p[i].off;
			v->cand[v->ncand].len = r->p[i].len;
			v->cand[v->ncand].data = lab_xmalloc(r->p[i].len ? r->p[i].len : 1);
			pc_fill(v->cand[v->ncand].data, r->p[i].len, r->p[i].arg);
			v->ncand++;
			end = r->p[i].off + r->p[i].len;
			if (end > v->max_size)
				v->max_size = end;
		}
	} else if (r->op == PC_OP_CLONE) {
		src = r->file2 == PC_XSRC ? &md->xsrc : md->f[r->file2];
		if (!src || src->state != PC_LIVE)
			return;
		v->cand[0].off = r->p[0].off;
		v->cand[0].len = r->p[0].len;
		v->cand[0].data = lab_xmalloc(r->p[0].len);
		memcpy(v->cand[0].data, src->m + r->p[0].arg, r->p[0].len);
		v->ncand = 1;
		end = r->p[0].off + r->p[0].len;
		if (end > v->max_size)
			v->max_size = end;
	}
}

static void pc_view_free(struct pc_view *v)
{
	int i;

	for (i = 0; i < v->ncand; i++)
		free(v->cand[i].data);
	v->ncand = 0;
}

static void pc_check_view(struct pc_stats *st, struct pc_view *v)
{
	struct stat sb, first_sb;
	unsigned char *got;
	uint64_t lost, wrong, first, b, lost2;
	size_t got_len;
	int i, found = -1, mode;

	if (v->mode > PC_MODE_EXTENT)
		v->mode = PC_MODE_NONE;
	for (i = 0; i < v->npaths; i++) {
		if (lstat(v->path[i], &sb) != 0)
			continue;
		if (found < 0) {
			found = i;
			first_sb = sb;
		} else if (v->both_ok && sb.st_ino == first_sb.st_ino) {
			st->renames_both++;
			printf("powercut: NOTE: %s is under both names, %s and %s (%lu links): a rename between the directories was in flight (see the header comment)\n",
			       v->what, v->path[found], v->path[i], (unsigned long)sb.st_nlink);
		} else {
			pc_err(st, "%s: present under two names, %s and %s", v->what,
			       v->path[found], v->path[i]);
		}
	}
	if (found < 0) {
		if (v->may_be_absent)
			return;
		st->checked += v->size;
		st->checked_mode[v->mode] += v->size;
		st->lost += v->size;
		pc_err(st, "%s: missing (%s: " LAB_ERR_FMT "): %u fsynced bytes lost",
		       v->what, v->path[0], LAB_ERR_ARGS(ENOENT), v->size);
		return;
	}
	if (!v->check_content) {
		st->inflight_seen++;
		return;
	}
	mode = pc_inode_mode(v->path[found]);
	if (mode < 0)
		pc_err(st, "%s: cannot read its inode flags: " LAB_ERR_FMT, v->what,
		       LAB_ERR_ARGS(errno));
	else if (mode == PC_MODE_NONE)
		pc_err(st, "%s: %s is not encrypted", v->what, v->path[found]);
	else if (v->mode != PC_MODE_NONE && (uint32_t)mode != v->mode)
		pc_err(st, "%s: created with %s keys, now has %s keys", v->what,
		       pc_mode_name[v->mode], pc_mode_name[mode]);
	st->checked += v->size;
	st->checked_mode[v->mode] += v->size;
	got = read_file(v->path[found], &got_len);
	if (!got) {
		st->lost += v->size;
		pc_err(st, "%s: reading %s: " LAB_ERR_FMT ": %u fsynced bytes lost",
		       v->what, v->path[found], LAB_ERR_ARGS(errno), v->size);
		return;
	}
	if (got_len < v->size || got_len > v->max_size)
		pc_err(st, "%s: size %zu, the log allows %u%s%u", v->what, got_len,
		       v->size, v->max_size > v->size ? " to " : "",
		       v->max_size > v->size ? v->max_size : v->size);
	lost = pcut_count_lost(v->m, v->size, got, got_len, v->cand, v->ncand, &wrong,
			       &first);
	st->lost += lost;
	st->wrong += wrong;
	if (lost)
		pc_err(st, "%s (%s, %s keys): %llu of %u fsynced bytes lost, the first at %llu (expected 0x%02x, got %s%02x)",
		       v->what, v->path[found], pc_mode_name[v->mode],
		       (unsigned long long)lost, v->size, (unsigned long long)first,
		       v->m[first], first < got_len ? "0x" : "EOF, ",
		       first < got_len ? got[first] : 0);
	if (wrong)
		pc_err(st, "%s: %llu bytes beyond the fsynced size %u are neither 0 nor in-flight data",
		       v->what, (unsigned long long)wrong, v->size);
	if (pcut_control(v->what, v->m, v->size, got, got_len, v->cand, v->ncand, lost,
			 &st->control_done, &b, &lost2) < 0)
		pc_err(st, PCUT_CONTROL_BLIND_FMT, v->what, (unsigned long long)b,
		       (unsigned long long)lost2, (unsigned long long)lost + 1);
	free(got);
}

/* The names a directory may hold; anything else is an error. */
struct pc_names {
	char (*name)[64];
	size_t n, cap;
};

static void pc_names_add(struct pc_names *nm, uint64_t run_id, uint32_t dir,
			 uint32_t want_dir, uint32_t id, uint32_t gen)
{
	if (dir != want_dir)
		return;
	if (nm->n == nm->cap) {
		nm->cap = nm->cap ? 2 * nm->cap : 64;
		nm->name = realloc(nm->name, nm->cap * sizeof(*nm->name));
		if (!nm->name)
			lab_die("out of memory");
	}
	pc_name(nm->name[nm->n++], sizeof(nm->name[0]), run_id, id, gen);
}

static int pc_names_has(const struct pc_names *nm, const char *name)
{
	size_t i;

	for (i = 0; i < nm->n; i++)
		if (!strcmp(nm->name[i], name))
			return 1;
	return 0;
}

/*
 * Every entry of @path must be in @nm.  Without the key (@nokey), no entry
 * may be one of those plaintext names instead.  Returns the entries seen.
 */
static long pc_check_dir(struct pc_stats *st, const char *path,
			 const struct pc_names *nm, int nokey)
{
	struct dirent *de;
	DIR *d = opendir(path);
	long n = 0;

	if (!d) {
		pc_err(st, "opendir %s%s: " LAB_ERR_FMT, path,
		       nokey ? " without the key" : "", LAB_ERR_ARGS(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		if (nokey && pc_names_has(nm, de->d_name))
			pc_err(st, "%s: without the key, the plaintext name %s is listed",
			       path, de->d_name);
		else if (!nokey && !pc_names_has(nm, de->d_name))
			pc_err(st, "%s: an entry %s that no durable or in-flight operation made",
			       path, de->d_name);
	}
	closedir(d);
	return n;
}

/* The names sv/enc/<dir> may hold: live files, in-flight creates and renames. */
static void pc_live_names(const struct pc_model *md, uint64_t run_id,
			  uint32_t dir, struct pc_names *nm)
{
	const struct pc_file *f;
	uint32_t id;

	for (id = 0; id < PC_MAX_FILES; id++) {
		f = md->f[id];
		if (!f)
			continue;
		if (f->state == PC_LIVE)
			pc_names_add(nm, run_id, f->dir, dir, id, f->gen);
		if (!f->pending)
			continue;
		if (f->pending->op == PC_OP_CREATE)
			pc_names_add(nm, run_id, f->pending->dir, dir, id, f->pending->gen);
		if (f->pending->op == PC_OP_RENAME)
			pc_names_add(nm, run_id, f->pending->dir2, dir, id, f->pending->gen2);
	}
}

static void pc_check_live(struct pc_stats *st, struct pc_model *md, uint64_t run_id,
			  const uint8_t *key2_id)
{
	struct pc_names nm;
	struct pc_file *f;
	struct pc_view v;
	const struct pc_rec *p;
	uint32_t id, d;

	for (id = 0; id < PC_MAX_FILES; id++) {
		f = md->f[id];
		if (!f || (f->state != PC_LIVE && !f->pending))
			continue;
		p = f->pending;
		memset(&v, 0, sizeof(v));
		snprintf(v.what, sizeof(v.what), "file %u", id);
		if (f->state != PC_LIVE) {
			/* created in flight: may be there, with any content */
			if (p->op != PC_OP_CREATE)
				continue;
			pc_file_path(v.path[0], PATH_MAX, sv_path, run_id, p->dir, id, p->gen);
			v.npaths = 1;
			v.may_be_absent = 1;
			pc_check_view(st, &v);
			continue;
		}
		st->files++;
		pc_file_path(v.path[0], PATH_MAX, sv_path, run_id, f->dir, id, f->gen);
		v.npaths = 1;
		if (p && p->op == PC_OP_RENAME) {
			pc_file_path(v.path[v.npaths++], PATH_MAX, sv_path, run_id,
				     p->dir2, id, p->gen2);
			v.both_ok = p->dir != p->dir2;
		}
		v.may_be_absent = p && p->op == PC_OP_UNLINK;
		v.check_content = 1;
		v.mode = f->mode;
		v.size = f->size;
		v.m = f->m;
		pc_view_pending(&v, md, f);
		pc_check_view(st, &v);
		st->compressed += pc_has_compressed(v.path[0]);
		pc_count_xkey(st, v.path[0], key2_id);
		pc_view_free(&v);
	}
	for (d = 0; d < PC_DIRS; d++) {
		memset(&nm, 0, sizeof(nm));
		pc_live_names(md, run_id, d, &nm);
		pc_check_dir(st, dir_path[d], &nm, 0);
		free(nm.name);
	}
}

static void pc_check_snaps(struct pc_stats *st, struct pc_model *md, uint64_t run_id)
{
	char root[PATH_MAX], path[PATH_MAX], name[32];
	struct pc_names nm;
	struct pc_view v;
	struct pc_snap *s;
	struct dirent *de;
	struct stat sb;
	uint32_t n, i, d, k;
	DIR *dd;

	for (n = 0; n < PC_MAX_SNAPS; n++) {
		s = md->s[n];
		if (!s)
			continue;
		pc_snap_path(root, sizeof(root), n);
		if (s->state == PC_GONE) {
			if (s->pending)
				continue;
			if (lstat(root, &sb) == 0)
				pc_err(st, "snapshot %u: still there after its deletion was made durable", n);
			continue;
		}
		if (s->pending && s->pending->op == PC_OP_SNAP_DEL)
			continue;	/* being deleted: may be half gone */
		if (lstat(root, &sb) != 0) {
			if (s->state != PC_LIVE)
				continue;	/* created in flight: may be absent */
			for (i = 0; i < s->nfiles; i++) {
				st->checked += s->f[i].size;
				st->checked_mode[s->f[i].mode <= PC_MODE_EXTENT ? s->f[i].mode : 0] +=
					s->f[i].size;
				st->lost += s->f[i].size;
			}
			pc_err(st, "snapshot %u: missing (%s): the bytes of its %u files are lost",
			       n, root, s->nfiles);
			continue;
		}
		for (i = 0; i < s->nfiles; i++) {
			struct pc_sfile *sf = &s->f[i];

			memset(&v, 0, sizeof(v));
			snprintf(v.what, sizeof(v.what), "snapshot %u file %u", n, sf->id);
			pc_file_path(v.path[0], PATH_MAX, root, run_id, sf->dir, sf->id, sf->gen);
			v.npaths = 1;
			v.check_content = 1;
			v.mode = sf->mode;
			v.size = v.max_size = sf->size;
			v.m = sf->m;
			st->sfiles++;
			pc_check_view(st, &v);
		}
		for (d = 0; d < PC_DIRS; d++) {
			memset(&nm, 0, sizeof(nm));
			for (k = 0; k < s->nfiles; k++)
				pc_names_add(&nm, run_id, s->f[k].dir, d, s->f[k].id, s->f[k].gen);
			lab_pathf(path, sizeof(path), "%s/enc/%c", root, 'a' + (int)d);
			pc_check_dir(st, path, &nm, 0);
			free(nm.name);
		}
	}
	/* snaps/ holds only snapshots the log knows of */
	dd = opendir(snaps_path);
	if (!dd) {
		pc_err(st, "opendir %s: " LAB_ERR_FMT, snaps_path, LAB_ERR_ARGS(errno));
		return;
	}
	while ((de = readdir(dd))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		for (n = 0; n < PC_MAX_SNAPS; n++) {
			snprintf(name, sizeof(name), "s%u", n);
			if (md->s[n] && !strcmp(name, de->d_name) &&
			    (md->s[n]->state != PC_GONE || md->s[n]->pending))
				break;
		}
		if (n == PC_MAX_SNAPS)
			pc_err(st, "%s: an entry %s that no durable or in-flight snapshot made",
			       snaps_path, de->d_name);
	}
	closedir(dd);
}

/*
 * Without the key: sv/enc lists two no-key names (of a and b, not those),
 * and what they list is no plaintext name either.
 */
static void pc_check_nokey(struct pc_stats *st, const struct pc_model *md, uint64_t run_id)
{
	struct pc_names nm, sub;
	char path[PATH_MAX], nokey_enc[PATH_MAX];
	struct dirent *de;
	uint32_t e;
	long n = 0, k;
	DIR *d;

	memset(&nm, 0, sizeof(nm));
	memset(&sub, 0, sizeof(sub));
	for (e = 0; e < PC_DIRS; e++)
		pc_live_names(md, run_id, e, &nm);
	for (e = 0; e < PC_DIRS; e++) {
		if (sub.n == sub.cap) {
			sub.cap = 8;
			sub.name = realloc(sub.name, sub.cap * sizeof(*sub.name));
			if (!sub.name)
				lab_die("out of memory");
		}
		snprintf(sub.name[sub.n++], sizeof(sub.name[0]), "%c", 'a' + (int)e);
	}
	PATHF(nokey_enc, "%s", enc_path);
	if (pc_dummy) {
		/* the policy is on sv: enc's own name is a no-key name */
		struct pc_names encname = { 0 };

		encname.cap = 1;
		encname.name = calloc(1, sizeof(*encname.name));
		if (!encname.name)
			lab_die("out of memory");
		snprintf(encname.name[encname.n++], sizeof(encname.name[0]), "enc");
		k = pc_check_dir(st, sv_path, &encname, 1);
		if (k != 1)
			pc_err(st, "%s without the key: %ld entries, expected 1", sv_path, k);
		free(encname.name);
		d = opendir(sv_path);
		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				lab_pathf(nokey_enc, sizeof(nokey_enc), "%s/%s", sv_path, de->d_name);
		if (d)
			closedir(d);
	}
	k = pc_check_dir(st, nokey_enc, &sub, 1);
	if (k != PC_DIRS)
		pc_err(st, "%s without the key: %ld entries, expected %d", nokey_enc, k, PC_DIRS);
	d = opendir(nokey_enc);
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		lab_pathf(path, sizeof(path), "%s/%s", nokey_enc, de->d_name);
		k = pc_check_dir(st, path, &nm, 1);
		n += k > 0 ? k : 0;
	}
	if (d)
		closedir(d);
	free(nm.name);
	free(sub.name);
	printf("powercut: without the key: %ld entries in the two directories, none of them a plaintext name\n", n);
}

/* --self-check: make the last committed write on a live file say other data. */
static void pc_selfcheck_corrupt(struct pc_log *log, struct pc_model *md)
{
	struct pc_rec *r;
	size_t k;

	for (k = log->scan.n; k-- > 0;) {
		r = &log->r[k];
		if (r->type != PCUT_T_INTENT || r->op != PC_OP_WRITE || !md->replay.done[r->seq] ||
		    !pc_live(md, r->file) || md->f[r->file]->pending)
			continue;
		printf("powercut: SELF-CHECK: changing one byte (the content seed) of log record %llu, a committed write of %u bytes at %u to file %u: the verifier must now find lost bytes\n",
		       (unsigned long long)r->seq, r->p[0].len, r->p[0].off, r->file);
		r->p[0].arg ^= 0x01000000u;
		return;
	}
	lab_die("--self-check: no committed write in the log to corrupt");
}

static int pc_verify(int selfcheck)
{
	static struct pc_model md;
	struct pc_stats st;
	struct pc_log log;
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char why[256];
	long long lr;
	int mounted, check_errors, check_runs = 0;
	uint32_t i, n, nsnaps = 0;

	memset(&st, 0, sizeof(st));
	if (!lab_btrfs_progs_patched(why, sizeof(why)))
		lab_skip("%s", why);
	log.r = pcut_log_verify_open(&plog, dev2, &log.hdr, &log.scan);
	if (!log.scan.have_hdr)
		return LAB_FAIL;
	pc_model_build(&md, &log);
	if (selfcheck) {
		pc_selfcheck_corrupt(&log, &md);
		pc_model_free(&md);
		pc_model_build(&md, &log);
	}
	printf("powercut: log: %zu records in %llu slots (%llu without a valid record), %u boots, %llu operations durable, %llu not done, %llu in flight at the cut; %llu records of another run ignored\n",
	       log.scan.n, (unsigned long long)log.scan.end, (unsigned long long)log.scan.holes,
	       md.replay.epochs, (unsigned long long)md.replay.committed,
	       (unsigned long long)md.replay.aborted, (unsigned long long)md.replay.pending,
	       (unsigned long long)log.scan.foreign);
	for (i = 1; i < PC_OP_MAX; i++)
		printf("powercut:   %s: %llu durable\n", pc_op_name[i],
		       (unsigned long long)md.ops[i]);
	st.errors += md.bad;
	lr = raw_btrfs_log_root(dev);
	printf("powercut: superblock log_root %lld: %s\n", lr,
	       lr > 0 ? "the mount replays the tree log" :
	       lr == 0 ? "no tree log (the last fsyncs were committed)" : "unreadable");
	mounted = lab_mount(dev, mnt, "btrfs", NULL) == 0;
	if (!mounted) {
		pc_err(&st, "cannot mount %s after the cut: everything is lost", dev);
		for (i = 0; i < PC_MAX_FILES; i++)
			if (md.f[i] && md.f[i]->state == PC_LIVE)
				st.lost += md.f[i]->size;
		st.checked = st.lost;
	} else {
		pc_check_nokey(&st, &md, log.hdr.run_id);
		if (lab_add_raw_key(mnt, log.hdr.key, sizeof(log.hdr.key), id) ||
		    memcmp(id, log.hdr.key_id, sizeof(id)))
			pc_err(&st, "adding the master key: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		if (lab_add_raw_key(mnt, log.hdr.key2, sizeof(log.hdr.key2), id) ||
		    memcmp(id, log.hdr.key2_id, sizeof(id)))
			pc_err(&st, "adding kx's master key: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		pc_check_live(&st, &md, log.hdr.run_id, log.hdr.key2_id);
		{
			/* the clone source of key 2 never changes */
			struct pc_view v;

			memset(&v, 0, sizeof(v));
			snprintf(v.what, sizeof(v.what), "kx/src (key 2)");
			PATHF(v.path[0], "%s", xsrc_path);
			v.npaths = 1;
			v.check_content = 1;
			v.mode = PC_MODE_EXTENT;
			v.size = v.max_size = PC_XSRC_LEN;
			v.m = md.xsrc.m;
			pc_check_view(&st, &v);
		}
		pc_check_snaps(&st, &md, log.hdr.run_id);
		for (n = 0; n < PC_MAX_SNAPS; n++)
			nsnaps += md.s[n] && md.s[n]->state == PC_LIVE;
		if (!st.control_done)
			pc_err(&st, "control: no file had a byte to flip: nothing was compared");
		if (md.replay.committed && !st.checked)
			pc_err(&st, "the log has %llu durable operations but no byte was checked",
			       (unsigned long long)md.replay.committed);
		if (lab_umount(mnt))
			pc_err(&st, "umount %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
	}
	printf("powercut: %llu of %llu live files have compressed extents; %llu hold %llu extents of kx's key (key 2) from %llu durable clones of kx/src\n",
	       (unsigned long long)st.compressed, (unsigned long long)st.files,
	       (unsigned long long)st.xkey_files, (unsigned long long)st.xkey_extents,
	       (unsigned long long)md.xclones);
	check_errors = lab_btrfs_check_errors(dev);
	check_runs = 1;
	printf("powercut: btrfs check --readonly: %s\n",
	       check_errors ? "ERRORS (output above)" : "clean");
	pcut_host_line("powercut-verify: epochs=%u records=%zu committed=%llu aborted=%llu inflight=%llu holes=%llu files=%llu snapshots=%u snapshot_files=%llu bytes_checked=%llu bytes_extent=%llu bytes_inode=%llu bytes_lost=%llu bytes_wrong=%llu errors=%llu renames_both=%llu compressed_files=%llu xclones=%llu xkey_files=%llu log_replay=%d check_runs=%d check_errors=%d result=%s",
		       md.replay.epochs, log.scan.n, (unsigned long long)md.replay.committed,
		       (unsigned long long)md.replay.aborted, (unsigned long long)md.replay.pending,
		       (unsigned long long)log.scan.holes, (unsigned long long)st.files, nsnaps,
		       (unsigned long long)st.sfiles, (unsigned long long)st.checked,
		       (unsigned long long)st.checked_mode[PC_MODE_EXTENT],
		       (unsigned long long)st.checked_mode[PC_MODE_INODE],
		       (unsigned long long)st.lost, (unsigned long long)st.wrong,
		       (unsigned long long)st.errors, (unsigned long long)st.renames_both,
		       (unsigned long long)st.compressed, (unsigned long long)md.xclones,
		       (unsigned long long)st.xkey_files,
		       lr > 0, check_runs, check_errors,
		       st.lost || st.wrong || st.errors || check_errors ? "FAIL" : "PASS");
	return st.lost || st.wrong || st.errors || check_errors ? LAB_FAIL : LAB_PASS;
}

/* ---- work ------------------------------------------------------------------------- */

enum pc_counter {
	C_WRITES, C_FSYNCS, C_DATASYNCS, C_CLONES, C_RENAMES, C_CREATES,
	C_UNLINKS, C_ENOKEY, C_SNAPS, C_SNAPDELS, C_KEYCYCLES, C_BUSY,
	C_REMOUNTS, C_SYNCS, C_DROPS, C_SNAP_REFUSED, C_XCLONES, C_MAX
};

static const char *const pc_counter_name[C_MAX] = {
	"writes", "fsyncs", "fdatasyncs", "clones", "renames", "creates",
	"unlinks", "enokey", "snapshots", "snapshot_deletes", "key_cycles",
	"files_busy", "remounts", "syncfs", "drop_caches",
	"snapshots_refused", "xkey_clones",
};

struct pc_shared {
	uint64_t next_slot;
	int pause;
	int paused[PC_WRITERS];
	int dead[PC_WRITERS];
	long cnt[PC_PROCS][C_MAX];
};

struct pc_wfile {
	uint32_t id, dir, gen, mode, size;
	int fd;
};

struct pc_writer {
	int nf;
	struct pc_wfile f[PC_PER_WRITER + 1];
	uint32_t next_id;
};

static struct pc_shared *sh;
static struct pc_writer wr[PC_WRITERS];
/* kx/src, open read-only for the writers' clones from key 2 */
static struct pc_wfile xsrc_wf = { .id = PC_XSRC, .size = PC_XSRC_LEN, .fd = -1 };
static struct pc_hdr hdr;
static uint32_t epoch;
static int dfd[PC_DIRS] = { -1, -1 }, snaps_fd = -1, sv_fd = -1, mnt_fd = -1;
static int proc_no = -1;	/* this process: writer, PC_COORD, or -1 (parent) */

static LAB_PRINTF(1, 2) LAB_NORETURN void pc_fatal(const char *fmt, ...)
{
	char who[32];
	va_list ap;

	if (proc_no == PC_COORD)
		snprintf(who, sizeof(who), "coordinator");
	else if (proc_no >= 0)
		snprintf(who, sizeof(who), "writer %d", proc_no);
	else
		snprintf(who, sizeof(who), "setup");
	printf("powercut: ERROR: %s: ", who);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (proc_no >= 0 && proc_no < PC_WRITERS)
		__atomic_store_n(&sh->dead[proc_no], 1, __ATOMIC_SEQ_CST);
	if (proc_no >= 0)
		_exit(1);
	exit(LAB_FAIL);
}

static uint64_t pc_emit(struct pc_rec *r)
{
	uint64_t slot = __atomic_fetch_add(&sh->next_slot, 1, __ATOMIC_SEQ_CST);

	if (slot >= plog.slots)
		pc_fatal("the log on %s is full (%llu slots): give it a bigger disk",
			 dev2, (unsigned long long)plog.slots);
	if (pcut_log_emit(&plog, slot, hdr.run_id, epoch, r))
		pc_fatal("writing log record %llu to %s: " LAB_ERR_FMT,
			 (unsigned long long)slot, dev2, LAB_ERR_ARGS(errno));
	return slot;
}

static uint64_t pc_intent(struct pc_rec *r, int proc)
{
	r->type = PCUT_T_INTENT;
	r->proc = (uint16_t)proc;
	return pc_emit(r);
}

static void pc_commit(const struct pc_rec *in, int result, uint32_t mode)
{
	struct pc_rec c;

	memset(&c, 0, sizeof(c));
	c.type = PCUT_T_COMMIT;
	c.proc = in->proc;
	c.ref = in->seq;
	c.result = result;
	c.mode = mode;
	c.file = in->file;
	c.op = in->op;
	pc_emit(&c);
}

static void pc_count(int c)
{
	__atomic_fetch_add(&sh->cnt[proc_no < 0 ? PC_COORD : proc_no][c], 1, __ATOMIC_RELAXED);
}

static int pc_open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		pc_fatal("open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	return fd;
}

static void pc_fsync_dir(uint32_t d)
{
	if (fsync(dfd[d]))
		pc_fatal("fsync of directory %s: " LAB_ERR_FMT, dir_path[d], LAB_ERR_ARGS(errno));
}

/* --- the operations, from their intent records (the redo uses them too) --- */

static void pc_do_write(struct pc_wfile *f, const struct pc_rec *r)
{
	static unsigned char buf[PC_FMAX];
	uint32_t i, end;

	for (i = 0; i < r->npieces; i++) {
		pc_fill(buf, r->p[i].len, r->p[i].arg);
		if (pwrite_all(f->fd, buf, r->p[i].len, r->p[i].off))
			pc_fatal("pwrite %u bytes at %u of file %u: " LAB_ERR_FMT,
				 r->p[i].len, r->p[i].off, f->id, LAB_ERR_ARGS(errno));
		end = r->p[i].off + r->p[i].len;
		if (end > f->size)
			f->size = end;
		pc_count(C_WRITES);
	}
	if ((r->flags & PC_F_DATASYNC) ? fdatasync(f->fd) : fsync(f->fd))
		pc_fatal("%s of file %u: " LAB_ERR_FMT,
			 (r->flags & PC_F_DATASYNC) ? "fdatasync" : "fsync", f->id,
			 LAB_ERR_ARGS(errno));
	pc_count((r->flags & PC_F_DATASYNC) ? C_DATASYNCS : C_FSYNCS);
}

/* 0, or -errno for an error that a missing key explains. */
static int pc_do_clone(struct pc_wfile *dst, const struct pc_wfile *src,
		       const struct pc_rec *r)
{
	struct file_clone_range fcr = {
		.src_fd = src->fd,
		.src_offset = r->p[0].arg,
		.src_length = r->p[0].len,
		.dest_offset = r->p[0].off,
	};
	uint32_t end = r->p[0].off + r->p[0].len;

	if (ioctl(dst->fd, FICLONERANGE, &fcr)) {
		if (errno == ENOKEY)
			return -ENOKEY;
		pc_fatal("FICLONERANGE of %u bytes from file %u at %u to file %u at %u: " LAB_ERR_FMT,
			 r->p[0].len, src->id, r->p[0].arg, dst->id, r->p[0].off,
			 LAB_ERR_ARGS(errno));
	}
	if (fsync(dst->fd))
		pc_fatal("fsync of file %u after a clone: " LAB_ERR_FMT, dst->id,
			 LAB_ERR_ARGS(errno));
	if (end > dst->size)
		dst->size = end;
	pc_count(src->id == PC_XSRC ? C_XCLONES : C_CLONES);
	return 0;
}

static int pc_do_rename(struct pc_wfile *f, const struct pc_rec *r, int redo)
{
	char from[64], to[64];
	struct stat sb, osb;

	pc_name(from, sizeof(from), hdr.run_id, r->file, r->gen);
	pc_name(to, sizeof(to), hdr.run_id, r->file, r->gen2);
	if (redo && fstatat(dfd[r->dir2], to, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		/* it was done; the old name may be left (a cut between the fsyncs) */
		if (fstatat(dfd[r->dir], from, &osb, AT_SYMLINK_NOFOLLOW) == 0) {
			if (osb.st_ino != sb.st_ino)
				pc_fatal("redo of a rename: %s and %s are different files",
					 from, to);
			if (unlinkat(dfd[r->dir], from, 0))
				pc_fatal("redo of a rename: unlink the old name %s: " LAB_ERR_FMT,
					 from, LAB_ERR_ARGS(errno));
		}
		goto sync;
	}
	if (renameat(dfd[r->dir], from, dfd[r->dir2], to)) {
		if (errno == ENOKEY) {
			pc_count(C_ENOKEY);
			return -ENOKEY;
		}
		pc_fatal("rename %s/%s to %s/%s: " LAB_ERR_FMT, dir_path[r->dir], from,
			 dir_path[r->dir2], to, LAB_ERR_ARGS(errno));
	}
sync:
	pc_fsync_dir(r->dir2);
	if (r->dir != r->dir2)
		pc_fsync_dir(r->dir);
	f->dir = r->dir2;
	f->gen = r->gen2;
	pc_count(C_RENAMES);
	return 0;
}

static void pc_do_unlink(struct pc_wfile *f, const struct pc_rec *r)
{
	char name[64];

	pc_name(name, sizeof(name), hdr.run_id, r->file, r->gen);
	if (f && f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
	}
	if (unlinkat(dfd[r->dir], name, 0) && errno != ENOENT)
		pc_fatal("unlink %s/%s: " LAB_ERR_FMT, dir_path[r->dir], name,
			 LAB_ERR_ARGS(errno));
	pc_fsync_dir(r->dir);
	pc_count(C_UNLINKS);
}

/* Create the file of intent @r into @f; its key mode to *@mode. 0 or -ENOKEY. */
static int pc_do_create(struct pc_wfile *f, const struct pc_rec *r, uint32_t *mode)
{
	static unsigned char buf[PC_FMAX];
	char name[64], path[PATH_MAX];
	int fd, m;

	pc_name(name, sizeof(name), hdr.run_id, r->file, r->gen);
	PATHF(path, "%s/%s", dir_path[r->dir], name);
	fd = openat(dfd[r->dir], name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (errno == ENOKEY) {
			pc_count(C_ENOKEY);
			return -ENOKEY;
		}
		pc_fatal("create %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	}
	pc_fill(buf, r->size, r->seed);
	if (write_all(fd, buf, r->size) || fsync(fd))
		pc_fatal("write and fsync %u bytes to new file %s: " LAB_ERR_FMT, r->size,
			 path, LAB_ERR_ARGS(errno));
	pc_fsync_dir(r->dir);
	m = pc_inode_mode(path);
	if (m <= PC_MODE_NONE)
		pc_fatal("new file %s: %s", path, m < 0 ? "cannot read its inode flags" :
			 "not encrypted");
	f->id = r->file;
	f->dir = r->dir;
	f->gen = r->gen;
	f->mode = (uint32_t)m;
	f->size = r->size;
	f->fd = fd;
	*mode = (uint32_t)m;
	pc_count(C_CREATES);
	return 0;
}

static int pc_snap_exists(uint32_t n)
{
	char name[32];
	struct stat sb;

	snprintf(name, sizeof(name), "s%u", n);
	return fstatat(snaps_fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

/* btrfs_root_item::flags, and the flag of a subvolume that holds (or held) a
 * file with per-inode keys (the series' on-disk format). */
#define PC_ROOT_ITEM_FLAGS 208
#define PC_ROOT_FSCRYPT_INODE_KEYS (1ULL << 40)

/*
 * Does sv's ROOT_ITEM, as committed (syncfs first), carry the mark of a
 * subvolume holding files with per-inode keys?  Asked after a refused
 * snapshot: the refusal is right only then.
 */
static int pc_sv_marked(void)
{
	unsigned char ri[PC_ROOT_ITEM_FLAGS + sizeof(uint64_t)];
	uint64_t flags;

	if (syncfs(mnt_fd))
		pc_fatal("syncfs: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (lab_btrfs_root_item(sv_path, NULL, ri, sizeof(ri)) != (int)sizeof(ri))
		pc_fatal("the ROOT_ITEM of %s: " LAB_ERR_FMT, sv_path,
			 LAB_ERR_ARGS(errno));
	memcpy(&flags, ri + PC_ROOT_ITEM_FLAGS, sizeof(flags));
	return !!(le64toh(flags) & PC_ROOT_FSCRYPT_INODE_KEYS);
}

/*
 * 0, or -EOPNOTSUPP once sv holds a file with per-inode keys: the kernel
 * never snapshots such a subvolume (the copies would share that file's
 * key and IVs), and nothing is made.
 */
static int pc_do_snap(uint32_t n)
{
	struct btrfs_ioctl_vol_args_v2 va;

	memset(&va, 0, sizeof(va));
	va.fd = sv_fd;
	va.flags = BTRFS_SUBVOL_RDONLY;
	snprintf(va.name, sizeof(va.name), "s%u", n);
	if (ioctl(snaps_fd, BTRFS_IOC_SNAP_CREATE_V2, &va)) {
		if (errno == EOPNOTSUPP && pc_sv_marked()) {
			pc_count(C_SNAP_REFUSED);
			return -EOPNOTSUPP;
		}
		pc_fatal("snapshot of %s as %s/s%u: " LAB_ERR_FMT, sv_path, snaps_path, n,
			 LAB_ERR_ARGS(errno));
	}
	pc_count(C_SNAPS);
	return 0;
}

static void pc_do_snap_del(uint32_t n)
{
	struct btrfs_ioctl_vol_args va;

	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "s%u", n);
	if (ioctl(snaps_fd, BTRFS_IOC_SNAP_DESTROY, &va) && errno != ENOENT)
		pc_fatal("delete snapshot %s/s%u: " LAB_ERR_FMT, snaps_path, n,
			 LAB_ERR_ARGS(errno));
	if (syncfs(mnt_fd))
		pc_fatal("syncfs after deleting a snapshot: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	pc_count(C_SNAPDELS);
}

/* --- a writer --- */

static struct pc_wfile *pc_wfile_of(struct pc_writer *w, uint32_t id)
{
	int i;

	for (i = 0; i < w->nf; i++)
		if (w->f[i].id == id)
			return &w->f[i];
	return NULL;
}

static void pc_wfile_drop(struct pc_writer *w, struct pc_wfile *f)
{
	*f = w->f[--w->nf];
}

static void pc_pick_piece(struct pc_piece *p, uint32_t size)
{
	uint32_t limit = size + PC_GROW, k = pcut_rnd(10), len;

	if (limit > PC_FMAX)
		limit = PC_FMAX;
	if (k < 4)
		len = 1 + pcut_rnd(PC_BLK);			/* a few bytes to a block */
	else if (k < 7)
		len = PC_BLK * (1 + pcut_rnd(4));		/* whole blocks */
	else
		len = 1 + pcut_rnd(PC_MAX_LEN);		/* anything up to several blocks */
	if (len > limit)
		len = limit;
	p->off = pcut_rnd(limit - len + 1);
	if (pcut_rnd(2))
		p->off -= p->off % PC_BLK;
	p->len = len;
	p->arg = pcut_rnd32();
}

static void pc_op_write(int w, struct pc_wfile *f)
{
	struct pc_rec r;
	uint32_t i, size = f->size;

	memset(&r, 0, sizeof(r));
	r.op = PC_OP_WRITE;
	r.file = f->id;
	r.npieces = 1 + pcut_rnd(4);
	r.flags = pcut_rnd(4) == 0 ? PC_F_DATASYNC : 0;
	for (i = 0; i < r.npieces; i++) {
		pc_pick_piece(&r.p[i], size);
		if (r.p[i].off + r.p[i].len > size)
			size = r.p[i].off + r.p[i].len;
	}
	pc_intent(&r, w);
	pc_do_write(f, &r);
	pc_commit(&r, 0, 0);
}

/*
 * A clone between (or within) per-extent files, or, one time in three, from
 * kx/src, a file of another master key (key 2: the destination then holds
 * extents of both keys); 0 if none fits now.
 */
static int pc_op_clone(int w, struct pc_writer *wc)
{
	struct pc_wfile *ext[PC_PER_WRITER + 1], *s, *d;
	uint32_t nblk, so, dof, sb, db;
	struct pc_rec r;
	int n = 0, i, res;

	for (i = 0; i < wc->nf; i++)
		if (wc->f[i].mode == PC_MODE_EXTENT)
			ext[n++] = &wc->f[i];
	if (!n)
		return 0;
	s = ext[pcut_rnd((uint32_t)n)];
	d = ext[pcut_rnd((uint32_t)n)];
	if (xsrc_wf.fd >= 0 && pcut_rnd(3) == 0)
		s = &xsrc_wf;
	nblk = 1 + pcut_rnd(8);
	sb = s->size / PC_BLK;
	db = d->size / PC_BLK;
	if (sb < nblk || db < nblk)
		return 0;
	so = pcut_rnd(sb - nblk + 1);
	dof = pcut_rnd(db - nblk + 1);
	if (s == d && so < dof + nblk && dof < so + nblk)
		return 0;
	memset(&r, 0, sizeof(r));
	r.op = PC_OP_CLONE;
	r.file = d->id;
	r.file2 = s->id;
	r.npieces = 1;
	r.p[0].off = dof * PC_BLK;
	r.p[0].len = nblk * PC_BLK;
	r.p[0].arg = so * PC_BLK;
	pc_intent(&r, w);
	res = pc_do_clone(d, s, &r);
	if (res)
		pc_count(C_ENOKEY);
	pc_commit(&r, res, 0);
	return 1;
}

static void pc_op_rename(int w, struct pc_wfile *f)
{
	struct pc_rec r;

	memset(&r, 0, sizeof(r));
	r.op = PC_OP_RENAME;
	r.file = f->id;
	r.dir = f->dir;
	r.gen = f->gen;
	r.dir2 = pcut_rnd(PC_DIRS);
	r.gen2 = f->gen + 1;
	pc_intent(&r, w);
	pc_commit(&r, pc_do_rename(f, &r, 0), 0);
}

static void pc_op_unlink(int w, struct pc_writer *wc, struct pc_wfile *f)
{
	struct pc_rec r;

	memset(&r, 0, sizeof(r));
	r.op = PC_OP_UNLINK;
	r.file = f->id;
	r.dir = f->dir;
	r.gen = f->gen;
	pc_intent(&r, w);
	pc_do_unlink(f, &r);
	pc_commit(&r, 0, 0);
	pc_wfile_drop(wc, f);
}

static void pc_op_create(int w, struct pc_writer *wc)
{
	struct pc_rec r;
	uint32_t mode = 0;
	int res;

	memset(&r, 0, sizeof(r));
	r.op = PC_OP_CREATE;
	r.file = wc->next_id;
	if (r.file >= PC_MAX_FILES)
		pc_fatal("out of file ids");
	wc->next_id += PC_WRITERS;
	r.dir = pcut_rnd(PC_DIRS);
	r.size = PC_CREATE_MIN + pcut_rnd(PC_CREATE_MAX - PC_CREATE_MIN + 1);
	r.seed = pcut_rnd32();
	pc_intent(&r, w);
	res = pc_do_create(&wc->f[wc->nf], &r, &mode);
	if (!res)
		wc->nf++;
	pc_commit(&r, res, mode);
	if (res)
		lab_sleep_ms(50);	/* the key is away for a while */
}

static void pc_writer_loop(int w)
{
	struct pc_writer *wc = &wr[w];
	struct pc_wfile *f;
	uint32_t k;

	for (;;) {
		while (__atomic_load_n(&sh->pause, __ATOMIC_SEQ_CST)) {
			__atomic_store_n(&sh->paused[w], 1, __ATOMIC_SEQ_CST);
			lab_sleep_ms(5);
		}
		__atomic_store_n(&sh->paused[w], 0, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&sh->pause, __ATOMIC_SEQ_CST))
			continue;
		if (wc->nf < PC_PER_WRITER) {
			pc_op_create(w, wc);
			continue;
		}
		f = &wc->f[pcut_rnd((uint32_t)wc->nf)];
		k = pcut_rnd(100);
		if (k < 72)
			pc_op_write(w, f);
		else if (k < 84) {
			if (!pc_op_clone(w, wc))
				pc_op_write(w, f);
		} else if (k < 94)
			pc_op_rename(w, f);
		else
			pc_op_unlink(w, wc, f);
	}
}

/* --- the coordinator --- */

static uint32_t live_snaps[PC_MAX_SNAPS], nlive_snaps, next_snap;
static uint32_t cur_mode;

static void pc_pause_writers(void)
{
	int w, all;

	__atomic_store_n(&sh->pause, 1, __ATOMIC_SEQ_CST);
	do {
		all = 1;
		for (w = 0; w < PC_WRITERS; w++)
			if (!__atomic_load_n(&sh->paused[w], __ATOMIC_SEQ_CST) &&
			    !__atomic_load_n(&sh->dead[w], __ATOMIC_SEQ_CST))
				all = 0;
		if (!all)
			lab_sleep_ms(2);
	} while (!all);
}

static void pc_key_cycle(void)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint32_t flags = 0;

	if (lab_remove_key(mnt, hdr.key_id, &flags))
		pc_fatal("FS_IOC_REMOVE_ENCRYPTION_KEY: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (flags & ~FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY)
		pc_fatal("key removal status flags 0x%x", flags);
	if (flags)
		pc_count(C_BUSY);
	lab_sleep_ms(200 + pcut_rnd(500));
	if (lab_add_raw_key(mnt, hdr.key, sizeof(hdr.key), id) ||
	    memcmp(id, hdr.key_id, sizeof(id)))
		pc_fatal("FS_IOC_ADD_ENCRYPTION_KEY: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	pc_count(C_KEYCYCLES);
}

static void pc_snap_cycle(void)
{
	struct pc_rec r;
	uint32_t i;
	int res;

	if (nlive_snaps >= PC_LIVE_SNAPS) {
		memset(&r, 0, sizeof(r));
		r.op = PC_OP_SNAP_DEL;
		r.file = live_snaps[0];
		pc_intent(&r, PC_COORD);
		pc_do_snap_del(r.file);
		pc_commit(&r, 0, 0);
		for (i = 1; i < nlive_snaps; i++)
			live_snaps[i - 1] = live_snaps[i];
		nlive_snaps--;
	}
	if (next_snap >= PC_MAX_SNAPS)
		pc_fatal("out of snapshot numbers");
	memset(&r, 0, sizeof(r));
	r.op = PC_OP_SNAP;
	r.file = next_snap++;
	/* between the writers' operations: the model is then the disk */
	pc_pause_writers();
	pc_intent(&r, PC_COORD);
	res = pc_do_snap(r.file);
	pc_commit(&r, res, 0);
	__atomic_store_n(&sh->pause, 0, __ATOMIC_SEQ_CST);
	if (!res)
		live_snaps[nlive_snaps++] = r.file;
}

static void pc_remount(uint32_t mode)
{
	if (mount(NULL, mnt, NULL, MS_REMOUNT, pc_mode_opt[mode]))
		pc_fatal("remount %s with %s: " LAB_ERR_FMT, mnt, pc_mode_opt[mode],
			 LAB_ERR_ARGS(errno));
	cur_mode = mode;
}

static void pc_progress(long long start)
{
	char line[1024];
	size_t len;
	long v;
	int c, p;

	len = (size_t)snprintf(line, sizeof(line), "powercut: progress %.1fs",
			       (double)(lab_now_ms() - start) / 1000);
	for (c = 0; c < C_MAX; c++) {
		for (v = 0, p = 0; p < PC_PROCS; p++)
			v += __atomic_load_n(&sh->cnt[p][c], __ATOMIC_RELAXED);
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=%ld",
					pc_counter_name[c], v);
		if (len >= sizeof(line))
			break;
	}
	printf("%s\n", line);
}

static void pc_coordinator_loop(void)
{
	long long start = lab_now_ms(), next = start + PC_PROGRESS_MS;
	uint32_t k;
	int fd;

	for (;;) {
		lab_sleep_ms(800 + pcut_rnd(1700));
		if (lab_now_ms() >= next) {
			pc_progress(start);
			next = lab_now_ms() + PC_PROGRESS_MS;
		}
		/*
		 * Most of these commit a transaction (the key removal and
		 * the remount sync the filesystem): not too often, or the
		 * tree log would seldom be what the next mount replays.
		 */
		k = pcut_rnd(100);
		if (k < 30) {
			pc_key_cycle();
		} else if (k < 50) {
			pc_snap_cycle();
		} else if (k < 75) {
			pc_remount(cur_mode == PC_MODE_EXTENT ? PC_MODE_INODE : PC_MODE_EXTENT);
			pc_count(C_REMOUNTS);
		} else if (k < 85) {
			if (syncfs(mnt_fd))
				pc_fatal("syncfs: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
			pc_count(C_SYNCS);
		} else {
			fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, "3", 1) != 1)
				pc_fatal("drop_caches: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
			close(fd);
			pc_count(C_DROPS);
		}
	}
}

/* --- setup, redo, start --- */

static void pc_subvol_create(const char *name)
{
	struct btrfs_ioctl_vol_args va;

	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (ioctl(mnt_fd, BTRFS_IOC_SUBVOL_CREATE, &va))
		lab_die("create subvolume %s/%s: " LAB_ERR_FMT, mnt, name, LAB_ERR_ARGS(errno));
}

/* First boot: mkfs, the directories, the key, the log header. */
static void pc_mkfs(uint32_t seed)
{
	static const struct lab_fscrypt_fs fs = {
		.name = "btrfs",
		.mkfs_cmd = "mkfs.btrfs -q -f",
	};
	char why[256];
	int d;

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("the kernel's btrfs has no per-extent keys (%s is missing)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	if (!lab_btrfs_progs_patched(why, sizeof(why)))
		lab_skip("%s", why);
	pcut_log_hdr_init(&plog, &hdr, seed);
	lab_random(hdr.key, sizeof(hdr.key));
	lab_random(hdr.key2, sizeof(hdr.key2));
	hdr.xsrc_seed = seed ^ 0x78737263u;
	lab_fscrypt_fs_setup(&fs, dev, mnt,
			     access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) == 0 ?
			     "compress=zstd" : NULL,
			     hdr.key, sizeof(hdr.key), hdr.key_id);
	mnt_fd = pc_open_dir(mnt);
	pc_subvol_create("sv");
	if (pc_dummy) {
		pc_subvol_create("snaps");
		lab_config_note("the policy is set on %s (a subvolume's top directory, which test_dummy_encryption leaves unencrypted) and %s inherits it; %s is a subvolume\n",
				sv_path, enc_path, snaps_path);
		if (lab_set_policy(sv_path, hdr.key_id) || mkdir(enc_path, 0755))
			lab_die("the policy on %s, then %s: " LAB_ERR_FMT, sv_path, enc_path,
				LAB_ERR_ARGS(errno));
	} else if (mkdir(snaps_path, 0755) || mkdir(enc_path, 0755) ||
	    lab_set_policy(enc_path, hdr.key_id))
		lab_die("making %s and the encrypted %s: " LAB_ERR_FMT, snaps_path, enc_path,
			LAB_ERR_ARGS(errno));
	for (d = 0; d < PC_DIRS; d++)
		if (mkdir(dir_path[d], 0755))
			lab_die("mkdir %s: " LAB_ERR_FMT, dir_path[d], LAB_ERR_ARGS(errno));
	/* kx: key 2's policy on its top directory, and the clone source */
	pc_subvol_create("kx");
	{
		static unsigned char buf[PC_XSRC_LEN];

		pc_fill(buf, PC_XSRC_LEN, hdr.xsrc_seed);
		if (lab_add_raw_key(mnt, hdr.key2, sizeof(hdr.key2), hdr.key2_id) ||
		    lab_set_policy(kx_path, hdr.key2_id) ||
		    write_file(xsrc_path, buf, PC_XSRC_LEN) || fsync_path(xsrc_path))
			lab_die("key 2's policy on %s and %s: " LAB_ERR_FMT, kx_path, xsrc_path,
				LAB_ERR_ARGS(errno));
	}
	if (syncfs(mnt_fd))
		lab_die("syncfs: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (pcut_log_put(&plog, 0, &hdr, sizeof(hdr)))
		lab_die("writing the log header to %s: " LAB_ERR_FMT, dev2, LAB_ERR_ARGS(errno));
	printf("powercut: new filesystem on %s, run %016llx, log on %s (%llu slots)\n",
	       dev, (unsigned long long)hdr.run_id, dev2, (unsigned long long)plog.slots);
}

/* Later boots: mount in this boot's mode, add the key of the log header. */
static void pc_mount_again(const struct pc_log *log)
{
	const char *mode_opt = pc_mode_opt[cur_mode];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char opts[128];

	hdr = log->hdr;
	snprintf(opts, sizeof(opts), "%s%s%s", mode_opt ? mode_opt : "",
		 mode_opt ? "," : "",
		 access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) == 0 ?
		 "compress=zstd" : "");
	if (lab_mount(dev, mnt, "btrfs", *opts ? opts : NULL))
		lab_die("cannot mount %s", dev);
	if (lab_add_raw_key(mnt, hdr.key, sizeof(hdr.key), id) ||
	    memcmp(id, hdr.key_id, sizeof(id)))
		lab_die("adding the master key: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (lab_add_raw_key(mnt, hdr.key2, sizeof(hdr.key2), id) ||
	    memcmp(id, hdr.key2_id, sizeof(id)))
		lab_die("adding kx's master key: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	mnt_fd = pc_open_dir(mnt);
}

/* The writers' files from the model: writer id % PC_WRITERS owns file id. */
static void pc_writers_from_model(const struct pc_model *md)
{
	struct pc_wfile *f;
	const struct pc_file *mf;
	char path[PATH_MAX];
	uint32_t id;
	int w;

	for (w = 0; w < PC_WRITERS; w++)
		wr[w].next_id = md->next_id[w];
	for (id = 0; id < PC_MAX_FILES; id++) {
		mf = md->f[id];
		if (!mf || mf->state != PC_LIVE)
			continue;
		w = (int)(id % PC_WRITERS);
		if (wr[w].nf > PC_PER_WRITER)
			lab_die("writer %d owns more than %d files", w, PC_PER_WRITER + 1);
		f = &wr[w].f[wr[w].nf++];
		f->id = id;
		f->dir = mf->dir;
		f->gen = mf->gen;
		f->mode = mf->mode;
		f->size = mf->size;
		pc_file_path(path, sizeof(path), sv_path, hdr.run_id, f->dir, id, f->gen);
		f->fd = open(path, O_RDWR | O_CLOEXEC);
		if (f->fd < 0 && errno == ENOENT && mf->pending &&
		    mf->pending->op == PC_OP_RENAME) {
			/* renamed before the cut: the redo finishes it */
			pc_file_path(path, sizeof(path), sv_path, hdr.run_id,
				     mf->pending->dir2, id, mf->pending->gen2);
			f->fd = open(path, O_RDWR | O_CLOEXEC);
		}
		if (f->fd < 0 && errno == ENOENT && mf->pending &&
		    mf->pending->op == PC_OP_UNLINK)
			continue;	/* unlinked before the cut: the redo commits it */
		if (f->fd < 0)
			lab_die("open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	}
}

/* Finish what the cut interrupted, from the intents, and commit it. */
static void pc_redo(const struct pc_model *md)
{
	const struct pc_rec *r;
	struct pc_wfile *f, *src, tmp;
	struct pc_writer *wc;
	uint64_t seq;
	uint32_t mode;
	char name[64];
	int res, n = 0;

	for (seq = 0; seq < md->replay.nslots; seq++) {
		r = md->replay.intent[seq];
		if (!r || md->replay.done[seq])
			continue;
		n++;
		printf("powercut: redo of %s (log record %llu, boot %u) on %s %u\n",
		       pc_op_name[r->op], (unsigned long long)r->seq, r->epoch,
		       r->op == PC_OP_SNAP || r->op == PC_OP_SNAP_DEL ? "snapshot" : "file",
		       r->file);
		wc = &wr[r->file % PC_WRITERS];
		f = pc_wfile_of(wc, r->file);
		res = 0;
		mode = 0;
		switch (r->op) {
		case PC_OP_WRITE:
			if (!f)
				lab_die("redo: file %u is not there", r->file);
			pc_do_write(f, r);
			break;
		case PC_OP_CLONE:
			src = r->file2 == PC_XSRC ? &xsrc_wf : pc_wfile_of(wc, r->file2);
			if (!f || !src)
				lab_die("redo: clone between files %u and %u that are not there",
					r->file2, r->file);
			res = pc_do_clone(f, src, r);
			break;
		case PC_OP_CREATE:
			pc_name(name, sizeof(name), hdr.run_id, r->file, r->gen);
			if (unlinkat(dfd[r->dir], name, 0) && errno != ENOENT)
				lab_die("redo: unlink %s: " LAB_ERR_FMT, name, LAB_ERR_ARGS(errno));
			res = pc_do_create(&tmp, r, &mode);
			if (res)
				lab_die("redo: create of file %u: " LAB_ERR_FMT, r->file,
					LAB_ERR_ARGS(-res));
			if (wc->nf > PC_PER_WRITER)
				lab_die("redo: writer owns too many files");
			wc->f[wc->nf++] = tmp;
			break;
		case PC_OP_UNLINK:
			pc_do_unlink(f, r);
			if (f)
				pc_wfile_drop(wc, f);
			break;
		case PC_OP_RENAME:
			if (!f)
				lab_die("redo: rename of file %u that is not there", r->file);
			res = pc_do_rename(f, r, 1);
			break;
		case PC_OP_SNAP:
			res = pc_snap_exists(r->file) ? 0 : -ENOENT;
			break;
		case PC_OP_SNAP_DEL:
			pc_do_snap_del(r->file);
			break;
		}
		pc_commit(r, res, mode);
	}
	if (n)
		printf("powercut: %d operation(s) the cut interrupted redone and committed\n", n);
}

static int pc_work(uint32_t seed, uint32_t cut, int first)
{
	static struct pc_model md;
	struct pc_log log;
	struct pc_rec er;
	pid_t pids[PC_PROCS], pid;
	uint32_t n;
	int w, d, i, st, alive = PC_PROCS;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		lab_die("mmap: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	memset(sh, 0, sizeof(*sh));
	pcut_log_open(&plog, dev2);
	if (first) {
		cur_mode = PC_MODE_EXTENT;
		pc_mkfs(seed);
		memset(&md, 0, sizeof(md));
		for (w = 0; w < PC_WRITERS; w++)
			wr[w].next_id = (uint32_t)w;
		sh->next_slot = 1;
		epoch = 1;
	} else {
		log.r = pcut_log_read(&plog, &log.hdr, &log.scan);
		if (!log.scan.have_hdr)
			lab_die("no log header on %s: the first boot (work --mkfs) must come first", dev2);
		pc_model_build(&md, &log);
		if (md.bad)
			lab_die("the log is inconsistent (%llu errors above)", (unsigned long long)md.bad);
		epoch = md.replay.last_epoch + 1;
		cur_mode = epoch % 2 ? PC_MODE_EXTENT : PC_MODE_INODE;
		sh->next_slot = log.scan.end;
		pc_mount_again(&log);
	}
	for (d = 0; d < PC_DIRS; d++)
		dfd[d] = pc_open_dir(dir_path[d]);
	snaps_fd = pc_open_dir(snaps_path);
	sv_fd = pc_open_dir(sv_path);
	xsrc_wf.fd = open(xsrc_path, O_RDONLY | O_CLOEXEC);
	if (xsrc_wf.fd < 0)
		lab_die("open %s: " LAB_ERR_FMT, xsrc_path, LAB_ERR_ARGS(errno));
	memset(&er, 0, sizeof(er));
	er.type = PCUT_T_EPOCH;
	er.size = cur_mode;
	er.seed = seed;
	er.file = cut;
	pc_emit(&er);
	printf("powercut: boot %u (cut %u, seed 0x%x): %s keys for new files; log from slot %llu\n",
	       epoch, cut, seed, pc_mode_name[cur_mode], (unsigned long long)sh->next_slot);
	pcut_rng_init(seed, epoch, PC_PROCS);
	if (first) {
		/*
		 * Every first file with per-extent keys: files with per-inode
		 * keys come with the per-inode periods (remounts, even boots),
		 * and from then on sv is never snapshotted, so the first boot
		 * snapshots until then.
		 */
		for (w = 0; w < PC_WRITERS; w++)
			while (wr[w].nf < PC_PER_WRITER)
				pc_op_create(w, &wr[w]);
	} else {
		pc_writers_from_model(&md);
		pc_redo(&md);
		for (n = 0; n < PC_MAX_SNAPS; n++)
			if (md.s[n] && md.s[n]->state == PC_LIVE &&
			    !(md.s[n]->pending && md.s[n]->pending->op == PC_OP_SNAP_DEL))
				live_snaps[nlive_snaps++] = n;
			else if (md.s[n] && md.s[n]->pending &&
				 md.s[n]->pending->op == PC_OP_SNAP && pc_snap_exists(n))
				live_snaps[nlive_snaps++] = n;
		next_snap = md.next_snap;
		pc_model_free(&md);
	}
	for (w = 0; w < PC_WRITERS; w++) {
		printf("powercut: writer %d:", w);
		for (i = 0; i < wr[w].nf; i++)
			printf(" file %u (%s, %u bytes)", wr[w].f[i].id,
			       pc_mode_name[wr[w].f[i].mode], wr[w].f[i].size);
		printf("\n");
	}
	fflush(NULL);
	for (i = 0; i < PC_PROCS; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			lab_die("fork: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		if (pids[i] == 0) {
			proc_no = i;
			pcut_rng_init(seed, epoch, (uint32_t)i);
			if (i == PC_COORD)
				pc_coordinator_loop();
			else
				pc_writer_loop(i);
			_exit(1);
		}
	}
	pcut_host_line("powercut: working (boot %u, cut %u)", epoch, cut);
	/* Until the host kills the VM; a child that ends has failed. */
	while (alive > 0) {
		pid = waitpid(-1, &st, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		alive--;
		for (i = 0; i < PC_PROCS; i++)
			if (pids[i] == pid)
				printf("powercut: ERROR: %s %d ended (%s %d) before the cut\n",
				       i == PC_COORD ? "the coordinator" : "writer",
				       i, WIFSIGNALED(st) ? "signal" : "exit status",
				       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	return LAB_FAIL;
}

int main(int argc, char **argv)
{
	dev = lab_env("SCRATCH_DEV");
	dev2 = lab_env("SCRATCH_DEV2");
	mnt = lab_env("SCRATCH_MNT");
	pc_paths();
	pc_dummy = lab_dummy_encryption();
	if (pc_dummy)
		lab_config_note("test_dummy_encryption (its test key is new at every boot): the workload keeps its own key, with its policy on %s; no inode is under the test key\n",
				sv_path);
	return pcut_main(argc, argv, pc_verify, pc_work);
}
