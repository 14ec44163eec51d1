// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_rekey - BTRFS_IOC_FSCRYPT_REKEY: a subvolume moved from
 * master key K1 to K2, once per per-extent mode: key groups (the default)
 * and a key per extent (fscrypt_extents_per_key=1).
 *
 * Keys K1 and K2, v2, the default policy; K3 is never added.  Subvolume sv
 * has the policy K1 on sv/d, which holds directories a, b, b/c, 21 files in
 * a with names of 1 to 255 bytes, a hard link (a/hard = b/hard2), a symlink
 * with a 66-byte target and one with a 1-byte target, and F (8 blocks).
 * sv-before is a read-only snapshot of it; svr has the policy K1 on the
 * subvolume root itself.  Names and data are random per run.
 *
 *  moved:    the rekey K1 -> K2 reports exactly the dirs (the policy's
 *            directory included), names, symlinks and files of the model,
 *            and the kernel logs the same counts; the contexts of every
 *            inode (context items, and FS_IOC_GET_ENCRYPTION_POLICY_EX of
 *            the directories and files) name K2, with the policy otherwise
 *            unchanged; sv records K1 and K2, sv-before only K1; the same
 *            request again returns 0 and moves nothing;
 *  after:    F gets a block overwritten and two appended, G is new: with
 *            both keys every name lists (readdir), every symlink reads, and
 *            every file of sv, sv-before and svr reads byte-exact after
 *            dropping caches;
 *  device:   F's extent items name K1 for its old extents and K2 for the
 *            new ones, G's K2, sv-before's F only K1; every block of them
 *            equals the OpenSSL model's encryption under the key its
 *            context names (not the other key's); key groups mode only:
 *            no name of 17 bytes or more, no symlink target and no data
 *            marker is on the device in plaintext, while an unencrypted
 *            control file's name and data are found;
 *  K2 only:  names list and resolve, symlinks read, F's K2 blocks read and
 *            its K1 blocks fail with ENOKEY, G reads; a whole K1 block
 *            overwritten, an append, a truncate, a shortened K1 file, a new
 *            file and a new directory work (a partial overwrite of a K1
 *            block fails with ENOKEY), and all of it survives a remount
 *            with K2 only; sv-before shows no-key names;
 *  K1 only:  sv-before lists and reads everything as before the rekey
 *            (nothing written since is there); sv lists only no-key names
 *            (mapped to the model by inode number), its files refuse to
 *            open (ENOKEY), its symlinks give no plaintext;
 *  refusals: on svb (K1; 300 empty files), each with the counts 0, the
 *            contexts and key records unchanged: flags 1, a reserved word,
 *            from == to, to.version 1, to with PAD_16 or another contents
 *            mode, from a key the subvolume never used (EINVAL); to K3, or
 *            K1 removed (ENOKEY); a directory that is no subvolume root
 *            (EINVAL), no such name (ENOENT); an open file, an open
 *            directory, a process's cwd inside (EBUSY); an unprivileged
 *            caller (EPERM); the read-only snapshot (EROFS); an unencrypted
 *            subvolume (ENODATA); a subvolume with per-inode-key files
 *            (EOPNOTSUPP, mount option fscrypt_per_inode_keys); sv with F
 *            open (EBUSY); the kernel's log line names the reason;
 *  race:     two processes rekey svb at once: one moves everything, the
 *            other gets EBUSY or moves nothing;
 *  back:     sv moved back K2 -> K1 (counts of everything added since);
 *            every file byte-exact; the same request again moves nothing;
 *  progs:    the patched `btrfs subvolume rekey` on svc (K1 on svc/d):
 *            --help, a malformed identifier, an absent key, --list, the
 *            rekey and the same again; --status counts d's directories,
 *            symlinks and files under K1 before and under K2 after, says
 *            no rekey is left unfinished, and with a second tree svc/x
 *            under K1 says two keys, none in a directory under another
 *            key, and prints both commands, the first of which moves x;
 *  check:    the patched `btrfs check` is clean at the end.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "btrfs_rekey.h"
#include "fscrypt_blocks.h"
#include "fscrypt_fs.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"
#include "rawdev.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/btrfs.h>

/* BTRFS_IOC_FSCRYPT_REKEY's argument (tests/lib/btrfs_rekey.h) */
typedef struct btrfs_ioctl_fscrypt_rekey_args rk_args_t;

/* ---- constants ------------------------------------------------------------ */

#define BLK 4096u
#define NBLK 8u			/* F's blocks */
#define SEED1 0x524b31u
#define SEED2 0x524b32u
#define SEED3 0x524b33u		/* K3: never added */
#define EXTENT_KEYS_FEATURE LAB_BTRFS_EXTENT_KEYS_FEATURE
#define MKFS "mkfs.btrfs -q -f"
#define TAG_BYTES 8
#define TAG_LEN (2 * TAG_BYTES)	/* hex digits of the run's tag */
#define MARKER_STRIDE 1531
#define RK_MANY 300		/* svb's empty files */
#define RK_REL_MAX 320
#define RK_NONE ((size_t)-1)
/* the inode context, version 2 (fs/crypto: struct fscrypt_context_v2) */
#define CTX_V2 2
#define CTX_V2_SIZE 40
#define CTX_V2_ID_OFF 8

/* Which keys are added: a mask of HAVE(1), HAVE(2). */
#define HAVE(k) (1u << (k))
#define K1_ONLY HAVE(1)
#define K2_ONLY HAVE(2)
#define BOTH (HAVE(1) | HAVE(2))

enum { RK_DIR = 'd', RK_REG = 'f', RK_LNK = 'l' };

/* A regular file: what it holds, and under which key each block is. */
struct rk_file {
	unsigned char *data;
	uint8_t *bkey;		/* per block: the key of its extent (0: none) */
	size_t size, cap;	/* bytes; blocks data and bkey have room for */
};

/* A name below the tree's top. */
struct rk_node {
	char rel[RK_REL_MAX];	/* relative to the top */
	char target[RK_REL_MAX];	/* RK_LNK */
	char type;
	size_t file;		/* RK_REG: index in files (hard links share) */
	uint64_t ino;
};

/* An encrypted tree of a subvolume, and the model of it. */
struct rk_tree {
	const char *label;
	char parent[PATH_MAX];	/* the rekey's fd: the subvolume's parent */
	char name[NAME_MAX + 1];	/* ... and the subvolume's name in it */
	char sub[PATH_MAX];	/* the subvolume */
	char toprel[16];	/* the directory with the policy, in sub ("": sub) */
	char top[PATH_MAX];
	uint64_t top_ino;
	int key;		/* the master key every inode of it names */
	struct rk_node *nodes;
	size_t nnodes;
	struct rk_file *files;
	size_t nfiles;
};

struct rk_counts {
	unsigned long long dirs, names, symlinks, files;
};

static const char *dev, *mnt;
static uint8_t ids[4][FSCRYPT_KEY_IDENTIFIER_SIZE];	/* [1..3]: K1..K3 */
static uint8_t mks[4][LAB_MASTER_KEY_SIZE];
static const uint32_t seeds[4] = { 0, SEED1, SEED2, SEED3 };
static char tag[TAG_LEN + 1];
static char data_marker[64], ctl_marker[64], ctl_name[64];
static uint32_t next_seed = 1;
static unsigned mark_no;
static struct rk_tree sv, before, svr, svb, svi, svc, svs;
static size_t fF = RK_NONE, fG = RK_NONE;	/* F and G in sv.files */

/* ---- small helpers ---------------------------------------------------------- */

static void drop_caches(void)
{
	CHECK_OK(lab_drop_caches("3"), "drop caches");
}

static size_t nblocks(size_t size)
{
	return (size + BLK - 1) / BLK;
}

/* 1, 2 or 3 if @id is K1, K2 or K3; 0 if another key. */
static int key_of(const uint8_t *id)
{
	return lab_rekey_key_index(id, ids, 3);
}

static const char *have_str(unsigned have)
{
	switch (have & BOTH) {
	case BOTH: return "both keys";
	case K1_ONLY: return "K1 only";
	case K2_ONLY: return "K2 only";
	default: return "no key";
	}
}

static void mark(const char *what)
{
	lab_log_mark("rekey-%d-%04u", (int)getpid(), ++mark_no);
	printf("   [%s]\n", what);
}

/* Pattern data for the next write, with the run's data marker stamped in. */
static unsigned char *make_data(size_t len)
{
	unsigned char *buf = lab_pattern(len, next_seed++);

	stamp_marker(buf, len, data_marker, strlen(data_marker), MARKER_STRIDE);
	return buf;
}

/* A name of @len bytes starting with @first, holding the tag if it fits. */
static void make_name(char *out, size_t len, char first)
{
	char hex[2 * 128 + 1];
	size_t at = 1;

	lab_random_hex(hex, 128);
	out[0] = first;
	if (len >= 1 + TAG_LEN) {
		memcpy(out + 1, tag, TAG_LEN);
		at += TAG_LEN;
	}
	memcpy(out + at, hex, len - at);
	out[len] = '\0';
}

static const char *base_of(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? slash + 1 : rel;
}

/* Is @rel a name in the directory @dir ("" for the top)? */
static int in_dir(const char *rel, const char *dir)
{
	const char *slash = strrchr(rel, '/');
	size_t plen = slash ? (size_t)(slash - rel) : 0;

	return strlen(dir) == plen && !strncmp(rel, dir, plen);
}

/* ---- the model ------------------------------------------------------------- */

static void tree_init(struct rk_tree *t, const char *label, const char *name,
		      const char *toprel)
{
	memset(t, 0, sizeof(*t));
	t->label = label;
	t->key = 1;
	PATHF(t->parent, "%s", mnt);
	PATHF(t->name, "%s", name);
	PATHF(t->sub, "%s/%s", mnt, name);
	PATHF(t->toprel, "%s", toprel);
	if (*toprel)
		PATHF(t->top, "%s/%s", t->sub, toprel);
	else
		PATHF(t->top, "%s", t->sub);
}

static void tree_free(struct rk_tree *t)
{
	size_t i;

	for (i = 0; i < t->nfiles; i++) {
		free(t->files[i].data);
		free(t->files[i].bkey);
	}
	free(t->files);
	free(t->nodes);
	memset(t, 0, sizeof(*t));
}

static void *dup_mem(const void *p, size_t len)
{
	void *q;

	if (!p || !len)
		return NULL;
	q = lab_xmalloc(len);
	memcpy(q, p, len);
	return q;
}

/* @dst: the model of a snapshot of @src named @name. */
static void tree_copy(struct rk_tree *dst, const struct rk_tree *src,
		      const char *label, const char *name)
{
	size_t i;

	tree_init(dst, label, name, src->toprel);
	dst->top_ino = src->top_ino;
	dst->key = src->key;
	dst->nnodes = src->nnodes;
	dst->nodes = dup_mem(src->nodes, src->nnodes * sizeof(*src->nodes));
	dst->nfiles = src->nfiles;
	dst->files = dup_mem(src->files, src->nfiles * sizeof(*src->files));
	for (i = 0; i < dst->nfiles; i++) {
		dst->files[i].data = dup_mem(src->files[i].data, src->files[i].cap * BLK);
		dst->files[i].bkey = dup_mem(src->files[i].bkey, src->files[i].cap);
	}
}

static void node_path(const struct rk_tree *t, const char *rel, char *out)
{
	if (*rel)
		lab_pathf(out, PATH_MAX, "%s/%s", t->top, rel);
	else
		lab_pathf(out, PATH_MAX, "%s", t->top);
}

static size_t tree_find(const struct rk_tree *t, const char *rel)
{
	size_t i;

	for (i = 0; i < t->nnodes; i++)
		if (!strcmp(t->nodes[i].rel, rel))
			return i;
	return RK_NONE;
}

/* The first name of file @fidx, and how many it has. */
static size_t first_name(const struct rk_tree *t, size_t fidx, size_t *nlink)
{
	size_t i, first = RK_NONE, n = 0;

	for (i = 0; i < t->nnodes; i++) {
		if (t->nodes[i].type != RK_REG || t->nodes[i].file != fidx)
			continue;
		if (first == RK_NONE)
			first = i;
		n++;
	}
	if (nlink)
		*nlink = n;
	return first;
}

static uint64_t file_ino(const struct rk_tree *t, size_t fidx)
{
	size_t i = first_name(t, fidx, NULL);

	return i == RK_NONE ? 0 : t->nodes[i].ino;
}

static size_t tree_add(struct rk_tree *t, const char *rel, char type,
		       size_t file, const char *target)
{
	struct rk_node *nd;
	char p[PATH_MAX];
	struct stat st;

	t->nodes = realloc(t->nodes, (t->nnodes + 1) * sizeof(*t->nodes));
	if (!t->nodes)
		lab_die("out of memory");
	nd = &t->nodes[t->nnodes++];
	memset(nd, 0, sizeof(*nd));
	PATHF(nd->rel, "%s", rel);
	if (target)
		PATHF(nd->target, "%s", target);
	nd->type = type;
	nd->file = file;
	node_path(t, rel, p);
	if (CHECK_OK(lstat(p, &st), "lstat %s", p))
		nd->ino = st.st_ino;
	return t->nnodes - 1;
}

static void file_grow(struct rk_file *f, size_t end)
{
	size_t blocks = nblocks(end);

	if (blocks > f->cap) {
		f->data = realloc(f->data, blocks * BLK);
		f->bkey = realloc(f->bkey, blocks);
		if (!f->data || !f->bkey)
			lab_die("out of memory");
		memset(f->data + f->cap * BLK, 0, (blocks - f->cap) * BLK);
		memset(f->bkey + f->cap, 0, blocks - f->cap);
		f->cap = blocks;
	}
	if (end > f->size)
		f->size = end;
}

/* Write @len bytes at @off of file @fidx (open as @fd), and into the model. */
static int tree_put(struct rk_tree *t, size_t fidx, int fd, size_t off,
		    size_t len, const char *what)
{
	struct rk_file *f = &t->files[fidx];
	unsigned char *buf = make_data(len);
	size_t b;
	int ok;

	ok = CHECK_OK(pwrite_all(fd, buf, len, (off_t)off),
		      "write %zu bytes at %zu of %s", len, off, what);
	if (ok) {
		file_grow(f, off + len);
		memcpy(f->data + off, buf, len);
		/* every block written to goes to a new extent, under the key now */
		for (b = off / BLK; b <= (off + len - 1) / BLK; b++)
			f->bkey[b] = (uint8_t)t->key;
	}
	free(buf);
	return ok;
}

/* Shrink file @fidx to @size bytes. */
static int tree_truncate(struct rk_tree *t, size_t fidx, int fd, size_t size,
			 const char *what)
{
	struct rk_file *f = &t->files[fidx];
	size_t b;

	if (!CHECK_OK(ftruncate(fd, (off_t)size), "truncate %s to %zu", what, size))
		return 0;
	if (size >= f->size) {
		file_grow(f, size);
		return 1;
	}
	memset(f->data + size, 0, f->cap * BLK - size);
	for (b = nblocks(size); b < f->cap; b++)
		f->bkey[b] = 0;
	/* the block the new end is in is zeroed past it: written again */
	if (size % BLK)
		f->bkey[size / BLK] = (uint8_t)t->key;
	f->size = size;
	return 1;
}

static int tree_mkdir(struct rk_tree *t, const char *rel)
{
	char p[PATH_MAX];

	node_path(t, rel, p);
	if (!CHECK_OK(mkdir(p, 0755), "mkdir %s", p))
		return 0;
	tree_add(t, rel, RK_DIR, RK_NONE, NULL);
	return 1;
}

static int tree_symlink(struct rk_tree *t, const char *rel, const char *target)
{
	char p[PATH_MAX];

	node_path(t, rel, p);
	if (!CHECK_OK(symlink(target, p), "symlink %s -> %s", p, target))
		return 0;
	tree_add(t, rel, RK_LNK, RK_NONE, target);
	return 1;
}

/* A new file of @size bytes (fsynced if @sync); its index, or RK_NONE. */
static size_t tree_new_file(struct rk_tree *t, const char *rel, size_t size,
			    int sync)
{
	char p[PATH_MAX];
	size_t fidx;
	int fd, ok = 1;

	node_path(t, rel, p);
	fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (!CHECK(fd >= 0, "create %s: %s", p, strerror(errno)))
		return RK_NONE;
	t->files = realloc(t->files, (t->nfiles + 1) * sizeof(*t->files));
	if (!t->files)
		lab_die("out of memory");
	fidx = t->nfiles++;
	memset(&t->files[fidx], 0, sizeof(t->files[fidx]));
	if (size)
		ok = tree_put(t, fidx, fd, 0, size, p);
	if (sync)
		ok &= CHECK_OK(fsync(fd), "fsync %s", p);
	close(fd);
	tree_add(t, rel, RK_REG, fidx, NULL);
	return ok ? fidx : RK_NONE;
}

static int tree_link(struct rk_tree *t, const char *rel, const char *existing)
{
	char p[PATH_MAX], e[PATH_MAX];
	size_t i = tree_find(t, existing);

	if (i == RK_NONE || t->nodes[i].type != RK_REG)
		lab_die("the model has no file %s", existing);
	node_path(t, existing, e);
	node_path(t, rel, p);
	if (!CHECK_OK(link(e, p), "link %s %s", e, p))
		return 0;
	tree_add(t, rel, RK_REG, t->nodes[i].file, NULL);
	return 1;
}

/* What a rekey of the whole tree must report. */
static void tree_expect(const struct rk_tree *t, struct rk_counts *c)
{
	size_t i;

	memset(c, 0, sizeof(*c));
	c->dirs = 1;		/* the top, which has the policy */
	c->names = t->nnodes;	/* every name is in an encrypted directory */
	c->files = t->nfiles;	/* hard links: one file */
	for (i = 0; i < t->nnodes; i++) {
		c->dirs += t->nodes[i].type == RK_DIR;
		c->symlinks += t->nodes[i].type == RK_LNK;
	}
}

/* ---- reading the tree back ------------------------------------------------------ */

static size_t children(const struct rk_tree *t, const char *dir)
{
	size_t i, n = 0;

	for (i = 0; i < t->nnodes; i++)
		n += in_dir(t->nodes[i].rel, dir);
	return n;
}

/* readdir of directory @dir of the tree gives exactly the model's names. */
static void check_listing(const struct rk_tree *t, const char *dir)
{
	char p[PATH_MAX];
	struct lab_names l;
	size_t i, j, found;
	const char *b;

	node_path(t, dir, p);
	if (!CHECK_OK(lab_list_dir(p, &l), "readdir %s", p))
		return;
	CHECK(l.n == children(t, dir), "%s lists %zu names, expected %zu", p, l.n,
	      children(t, dir));
	for (i = 0; i < t->nnodes; i++) {
		if (!in_dir(t->nodes[i].rel, dir))
			continue;
		b = base_of(t->nodes[i].rel);
		for (found = 0, j = 0; j < l.n; j++)
			found += !strcmp(l.name[j], b);
		CHECK(found == 1, "%s: the name \"%.24s%s\" (%zu bytes) is listed %zu times, expected once",
		      p, b, strlen(b) > 24 ? "..." : "", strlen(b), found);
	}
	lab_names_free(&l);
}

static const struct rk_node *child_by_ino(const struct rk_tree *t,
					  const char *dir, uint64_t ino)
{
	size_t i;

	for (i = 0; i < t->nnodes; i++)
		if (in_dir(t->nodes[i].rel, dir) && t->nodes[i].ino == ino)
			return &t->nodes[i];
	return NULL;
}

/*
 * Directory @dir of the tree, at @path, without the key of its names: as
 * many no-key names as the model has names, none of them plaintext, each an
 * inode of the model there; files refuse to open, symlinks give no
 * plaintext, subdirectories likewise.
 */
static void check_nokey_dir(const struct rk_tree *t, const char *dir,
			    const char *path)
{
	char p[PATH_MAX], buf[PATH_MAX];
	const struct rk_node *nd;
	struct lab_names l;
	struct stat st;
	size_t i, j;
	ssize_t r;
	int fd, e;

	if (!CHECK_OK(lab_list_dir(path, &l), "readdir %s without the key", path))
		return;
	CHECK(l.n == children(t, dir), "%s lists %zu no-key names, expected %zu", path,
	      l.n, children(t, dir));
	for (i = 0; i < l.n; i++) {
		for (j = 0; j < t->nnodes; j++)
			if (in_dir(t->nodes[j].rel, dir))
				CHECK(strcmp(l.name[i], base_of(t->nodes[j].rel)),
				      "%s lists the plaintext name \"%.24s\" without the key",
				      path, l.name[i]);
		PATHF(p, "%s/%s", path, l.name[i]);
		if (!CHECK_OK(lstat(p, &st), "lstat %s (a no-key name)", p))
			continue;
		nd = child_by_ino(t, dir, st.st_ino);
		if (!CHECK(nd, "%s: the no-key name %.24s... is inode %llu, which the model does not have there",
			   path, l.name[i], (unsigned long long)st.st_ino))
			continue;
		switch (nd->type) {
		case RK_DIR:
			if (CHECK(S_ISDIR(st.st_mode), "%s (%s) is not a directory", p, nd->rel))
				check_nokey_dir(t, nd->rel, p);
			break;
		case RK_REG:
			if (!CHECK(S_ISREG(st.st_mode), "%s (%s) is not a file", p, nd->rel))
				break;
			errno = 0;
			fd = open(p, O_RDONLY | O_CLOEXEC);
			e = errno;
			if (fd >= 0) {
				close(fd);
				CHECK(0, "%s (%s) opens without its key", p, nd->rel);
			} else {
				EXPECT_ERRNO(fd, e, ENOKEY, "open %s (%s) without its key", p,
					     nd->rel);
			}
			break;
		case RK_LNK:
			if (!CHECK(S_ISLNK(st.st_mode), "%s (%s) is not a symlink", p, nd->rel))
				break;
			r = readlink(p, buf, sizeof(buf) - 1);
			if (CHECK(r > 0, "readlink %s without the key: %s", p, strerror(errno)))
				CHECK((size_t)r != strlen(nd->target) ||
				      memcmp(buf, nd->target, (size_t)r),
				      "readlink %s gives the plaintext target without the key", p);
			break;
		}
	}
	lab_names_free(&l);
}

/* Every block of file @fidx: its data if its key is in @have, else ENOKEY. */
static void check_file_blocks(const struct rk_tree *t, size_t fidx,
			      const char *path, unsigned have)
{
	const struct rk_file *f = &t->files[fidx];
	unsigned char buf[BLK];
	size_t b, want;
	struct stat st;
	ssize_t r;
	int fd, e, k;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!CHECK(fd >= 0, "open %s (%s): %s", path, have_str(have), strerror(errno)))
		return;
	if (CHECK_OK(fstat(fd, &st), "fstat %s", path))
		CHECK((size_t)st.st_size == f->size, "%s: %lld bytes, expected %zu", path,
		      (long long)st.st_size, f->size);
	for (b = 0; b < nblocks(f->size); b++) {
		want = f->size - b * BLK < BLK ? f->size - b * BLK : BLK;
		k = f->bkey[b];
		errno = 0;
		r = pread(fd, buf, want, (off_t)(b * BLK));
		e = errno;
		if (!k || (have & HAVE(k))) {
			if (!CHECK(r == (ssize_t)want, "%s: read of block %zu (under K%d): %zd, %s",
				   path, b, k, r, strerror(e)) ||
			    !CHECK(!memcmp(buf, f->data + b * BLK, want),
				   "%s: block %zu (under K%d) differs from the model at byte %zu",
				   path, b, k, lab_first_diff(buf, f->data + b * BLK, want)))
				break;
		} else if (!EXPECT_ERRNO(r, e, ENOKEY, "%s: read of block %zu (under K%d, not added)",
					 path, b, k)) {
			break;
		}
	}
	close(fd);
}

static void check_readlink(const char *path, const char *target)
{
	char buf[PATH_MAX];
	ssize_t r = readlink(path, buf, sizeof(buf) - 1);

	if (CHECK(r >= 0, "readlink %s: %s", path, strerror(errno)))
		CHECK((size_t)r == strlen(target) && !memcmp(buf, target, (size_t)r),
		      "readlink %s: \"%.*s\", expected \"%s\"", path, (int)r, buf, target);
}

/* The whole tree as the model says, with the keys @have. */
static void check_tree(const struct rk_tree *t, unsigned have, const char *when)
{
	const struct rk_node *nd;
	char p[PATH_MAX];
	struct stat st;
	size_t i, first, nlink;

	printf("-- %s: %s (names under K%d), %s\n", when, t->label, t->key,
	       have_str(have));
	if (!(have & HAVE(t->key))) {
		check_nokey_dir(t, "", t->top);
		return;
	}
	check_listing(t, "");
	for (i = 0; i < t->nnodes; i++) {
		nd = &t->nodes[i];
		node_path(t, nd->rel, p);
		switch (nd->type) {
		case RK_DIR:
			check_listing(t, nd->rel);
			break;
		case RK_LNK:
			check_readlink(p, nd->target);
			break;
		case RK_REG:
			first = first_name(t, nd->file, &nlink);
			if (!CHECK_OK(lstat(p, &st), "lstat %s", p))
				break;
			CHECK(st.st_ino == nd->ino && st.st_nlink == nlink,
			      "%s: inode %llu with %llu links, expected %llu with %zu",
			      p, (unsigned long long)st.st_ino,
			      (unsigned long long)st.st_nlink,
			      (unsigned long long)nd->ino, nlink);
			if (first == i)
				check_file_blocks(t, nd->file, p, have);
			break;
		}
	}
}

/* ---- contexts and key records ---------------------------------------------------- */

/* The context item of inode @ino of the tree's subvolume names K@key. */
static void check_ctx_item(const struct rk_tree *t, uint64_t ino, int key,
			   const char *what)
{
	struct lab_btrfs_item *it = NULL;
	size_t n = 0;

	if (!CHECK_OK(lab_btrfs_search(t->sub, ino, LAB_BTRFS_FSCRYPT_INODE_CTX_KEY,
				       &it, &n),
		      "search the context item of %s", what))
		return;
	if (CHECK(n == 1 && it[0].len == CTX_V2_SIZE && it[0].data[0] == CTX_V2,
		  "%s (ino %llu): %zu context items, the first of %u bytes, expected one v2 context of %d",
		  what, (unsigned long long)ino, n, n ? it[0].len : 0, CTX_V2_SIZE))
		CHECK(key_of(it[0].data + CTX_V2_ID_OFF) == key,
		      "%s (ino %llu): its context names K%d (0: another key), expected K%d",
		      what, (unsigned long long)ino, key_of(it[0].data + CTX_V2_ID_OFF), key);
	lab_btrfs_items_free(it, n);
}

/* FS_IOC_GET_ENCRYPTION_POLICY_EX of @path: the default policy of K@key. */
static void check_policy_ioctl(const char *path, int key)
{
	struct fscrypt_get_policy_ex_arg arg;
	struct fscrypt_policy_v2 want;

	lab_default_policy(&want, ids[key]);
	if (!CHECK_OK(lab_get_policy_ex(path, &arg),
		      "FS_IOC_GET_ENCRYPTION_POLICY_EX of %s", path))
		return;
	CHECK(arg.policy_size == sizeof(want) && !memcmp(&arg.policy.v2, &want, sizeof(want)),
	      "%s: policy of %llu bytes, version %u, modes %u/%u, flags 0x%x, key K%d (0: another), expected the default v2 policy of K%d",
	      path, (unsigned long long)arg.policy_size, arg.policy.version,
	      arg.policy.v2.contents_encryption_mode,
	      arg.policy.v2.filenames_encryption_mode, arg.policy.v2.flags,
	      key_of(arg.policy.v2.master_key_identifier), key);
}

/*
 * Every inode of the tree names K@key: the context items, and with @ioctls
 * the policies of every directory and file; else of the top only.
 */
static void check_policies(const struct rk_tree *t, int key, int ioctls)
{
	const struct rk_node *nd;
	char p[PATH_MAX];
	size_t i;

	printf("   %s: every context names K%d?\n", t->label, key);
	check_policy_ioctl(t->top, key);
	check_ctx_item(t, t->top_ino, key, t->top);
	for (i = 0; i < t->nnodes; i++) {
		nd = &t->nodes[i];
		node_path(t, nd->rel, p);
		check_ctx_item(t, nd->ino, key, p);
		if (ioctls && (nd->type == RK_DIR ||
			       (nd->type == RK_REG && first_name(t, nd->file, NULL) == i)))
			check_policy_ioctl(p, key);
	}
}

/* The key items of the subvolume holding @path name exactly @want. */
static void check_records(const char *path, const char *what,
			  const uint8_t *const want[], size_t nwant)
{
	long n = lab_btrfs_check_key_records(path, what, want, nwant);

	if (n >= 0)
		printf("   %s: %ld key item(s)\n", what, n);
}

static void check_records_k1(const char *path, const char *what)
{
	const uint8_t *k1[] = { ids[1] };

	check_records(path, what, k1, 1);
}

static void check_records_both(const char *path, const char *what)
{
	const uint8_t *both[] = { ids[1], ids[2] };

	check_records(path, what, both, 2);
}

/* A refused request changed nothing: still K1 everywhere, K1 recorded only. */
static void check_unchanged(const struct rk_tree *t, const char *after)
{
	char what[256];

	snprintf(what, sizeof(what), "%s after %s", t->label, after);
	check_policies(t, 1, 0);
	check_records_k1(t->sub, what);
}

/* ---- the rekey ioctl --------------------------------------------------------------- */

static int rekey_fd(int fd, rk_args_t *a)
{
	return ioctl(fd, BTRFS_IOC_FSCRYPT_REKEY, a);
}

/* The tree's policy (read from its top) with the identifier of K@key. */
static void to_policy(const struct rk_tree *t, int key, struct fscrypt_policy_v2 *p)
{
	struct fscrypt_get_policy_ex_arg arg;

	if (CHECK_OK(lab_get_policy_ex(t->top, &arg), "FS_IOC_GET_ENCRYPTION_POLICY_EX of %s",
		     t->top) &&
	    CHECK(arg.policy.version == FSCRYPT_POLICY_V2, "%s: policy version %u", t->top,
		  arg.policy.version))
		memcpy(p, &arg.policy.v2, sizeof(*p));
	else
		lab_default_policy(p, ids[1]);
	memcpy(p->master_key_identifier, ids[key], FSCRYPT_KEY_IDENTIFIER_SIZE);
}

static int counts_are(const rk_args_t *a, const struct rk_counts *c)
{
	return a->nr_dirs == c->dirs && a->nr_names == c->names &&
	       a->nr_symlinks == c->symlinks && a->nr_files == c->files;
}

#define WANT_ARGS(c) (c)->dirs, (c)->names, (c)->symlinks, (c)->files

/* Move the whole tree to K@to_key: the counts, the log line. */
static int rekey_tree(struct rk_tree *t, int to_key)
{
	struct fscrypt_policy_v2 to;
	struct rk_counts want;
	char ere[256];
	rk_args_t a;
	int from = t->key;

	tree_expect(t, &want);
	to_policy(t, to_key, &to);
	lab_rekey_args(&a, t->name, ids[from], &to);
	printf("-- rekey %s from K%d to K%d: expecting " LAB_REKEY_COUNTS_FMT "\n", t->sub, from,
	       to_key, WANT_ARGS(&want));
	mark("rekey");
	if (!CHECK_OK(lab_rekey_at(t->parent, &a), "rekey %s from K%d to K%d", t->sub, from,
		      to_key)) {
		lab_log_show(20);
		return 0;
	}
	t->key = to_key;
	printf("   moved " LAB_REKEY_COUNTS_FMT "\n", LAB_REKEY_COUNTS_ARGS(&a));
	CHECK(counts_are(&a, &want),
	      "rekey of %s moved " LAB_REKEY_COUNTS_FMT ", expected " LAB_REKEY_COUNTS_FMT,
	      t->sub, LAB_REKEY_COUNTS_ARGS(&a), WANT_ARGS(&want));
	snprintf(ere, sizeof(ere),
		 "rekey of subvolume [0-9]+ to fscrypt key [0-9a-f]+ moved %llu dirs \\(%llu names\\), %llu symlinks, %llu files of [0-9]+: 0",
		 WANT_ARGS(&want));
	CHECK(lab_log_has(ere), "no kernel log line \"%s\"", ere);
	return 1;
}

/* The request just completed, once more: 0, nothing moved. */
static void rekey_again(const struct rk_tree *t, int from, int to_key)
{
	struct fscrypt_policy_v2 to;
	rk_args_t a;

	to_policy(t, to_key, &to);
	lab_rekey_args(&a, t->name, ids[from], &to);
	printf("-- rekey %s from K%d to K%d again\n", t->sub, from, to_key);
	if (CHECK_OK(lab_rekey_at(t->parent, &a), "the same rekey of %s again", t->sub))
		CHECK(lab_rekey_moved_nothing(&a),
		      "the same rekey of %s again moved " LAB_REKEY_COUNTS_FMT ", expected nothing",
		      t->sub, LAB_REKEY_COUNTS_ARGS(&a));
}

/* A request that must fail with @err, moving nothing (and log @ere). */
static void refused(const char *what, const char *parent, rk_args_t *a, int err,
		    const char *ere)
{
	mark(what);
	if (CHECK_ERRNO(lab_rekey_at(parent, a), err, "rekey: %s", what))
		CHECK(lab_rekey_moved_nothing(a),
		      "rekey refused (%s), but it reports " LAB_REKEY_COUNTS_FMT " moved",
		      what, LAB_REKEY_COUNTS_ARGS(a));
	if (ere)
		CHECK(lab_log_has(ere), "%s: no kernel log line matching \"%s\"", what, ere);
}

/* ---- mounting ----------------------------------------------------------------------- */

/* Mount with @opts and add the keys in @have. */
static int mount_with(const char *opts, unsigned have)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	int k;

	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", opts), "mount %s (options \"%s\")", dev,
		      opts ? opts : ""))
		return 0;
	for (k = 1; k <= 2; k++) {
		if (!(have & HAVE(k)))
			continue;
		if (!CHECK_OK(lab_add_key(mnt, seeds[k], id), "add K%d", k) ||
		    !CHECK(!memcmp(id, ids[k], sizeof(id)),
			   "K%d's identifier is not the model's", k))
			return 0;
	}
	return 1;
}

static int remount_with(const char *opts, unsigned have)
{
	printf("-- mount again, %s\n", have_str(have));
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		return 0;
	return mount_with(opts, have);
}

static void probe_rekey(void)
{
	struct fscrypt_policy_v2 p;
	rk_args_t a;

	lab_default_policy(&p, ids[2]);
	lab_rekey_args(&a, "no-such-subvolume", ids[1], &p);
	a.flags = 1;
	if (lab_rekey_at(mnt, &a) == 0)
		CHECK(0, "a rekey with flags 1 succeeded");
	else if (errno == ENOTTY)
		/* Per-extent keys without rekey: the series is incomplete. */
		lab_die("the kernel's btrfs has per-extent keys but no BTRFS_IOC_FSCRYPT_REKEY (ENOTTY)");
}

static void subvol_create(const char *path)
{
	if (run("btrfs subvolume create %s >/dev/null", path) != 0)
		lab_die("cannot create the subvolume %s", path);
}

/* ---- building the trees --------------------------------------------------------------- */

static const size_t name_lens[] = {
	1, 2, 3, 4, 7, 8, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 100, 128, 200,
	254, 255,
};
#define NNAMES (sizeof(name_lens) / sizeof(name_lens[0]))

/* A subvolume @t->sub with the policy K1 on @t->top. */
static void make_top(struct rk_tree *t)
{
	struct stat st;

	subvol_create(t->sub);
	if (*t->toprel && mkdir(t->top, 0755))
		lab_die("mkdir %s: %s", t->top, strerror(errno));
	if (lab_set_policy(t->top, ids[1]))
		lab_die("policy K1 on %s: " LAB_ERR_FMT, t->top, LAB_ERR_ARGS(errno));
	if (stat(t->top, &st))
		lab_die("stat %s: %s", t->top, strerror(errno));
	t->top_ino = st.st_ino;
}

/* sv: the policy on sv/d and the tree below it; a plain control file in sv. */
static void build_sv(void)
{
	char rel[RK_REL_MAX], name[NAME_MAX + 1], target[RK_REL_MAX], p[PATH_MAX];
	int failures = lab_failures;
	unsigned char *ctl;
	size_t i;

	printf("-- build sv\n");
	tree_init(&sv, "sv", "sv", "d");
	make_top(&sv);
	tree_mkdir(&sv, "a");
	tree_mkdir(&sv, "b");
	tree_mkdir(&sv, "b/c");
	target[0] = '\0';
	for (i = 0; i < NNAMES; i++) {
		make_name(name, name_lens[i], (char)('A' + i));
		PATHF(rel, "a/%s", name);
		tree_new_file(&sv, rel, 1 + (i * 523) % 5000, 1);
		if (name_lens[i] == 64)
			PATHF(target, "%s", rel);
	}
	tree_new_file(&sv, "a/hard", BLK + 300, 1);
	tree_link(&sv, "b/hard2", "a/hard");
	tree_new_file(&sv, "b/c/deep", 700, 1);
	fF = tree_new_file(&sv, "F", NBLK * BLK, 1);
	tree_symlink(&sv, "sl-long", target);
	tree_symlink(&sv, "sl-short", "F");

	/* unencrypted, in sv's root: what the device scan must find */
	PATHF(p, "%s/%s", sv.sub, ctl_name);
	ctl = lab_pattern(2 * BLK, next_seed++);
	stamp_marker(ctl, 2 * BLK, ctl_marker, strlen(ctl_marker), MARKER_STRIDE);
	if (write_file(p, ctl, 2 * BLK) || fsync_path(p))
		lab_die("write %s: %s", p, strerror(errno));
	free(ctl);
	sync();
	if (lab_failures != failures || fF == RK_NONE || !*target)
		lab_die("could not build sv");
}

/* svr: the policy on the subvolume root itself. */
static void build_svr(void)
{
	char name[NAME_MAX + 1], rel[RK_REL_MAX];
	int failures = lab_failures;

	printf("-- build svr (the policy on the subvolume root)\n");
	tree_init(&svr, "svr", "svr", "");
	make_top(&svr);
	tree_mkdir(&svr, "x");
	make_name(name, 200, 'X');
	PATHF(rel, "x/%s", name);
	tree_new_file(&svr, rel, BLK + 1, 1);
	tree_new_file(&svr, "y", 2 * BLK, 1);
	tree_symlink(&svr, "l", rel);
	sync();
	if (lab_failures != failures)
		lab_die("could not build svr");
}

/* svb: what the refusals are tried on; many names for the race. */
static void build_svb(void)
{
	int failures = lab_failures;
	char rel[RK_REL_MAX];
	size_t i;

	printf("-- build svb (%d empty files)\n", RK_MANY);
	tree_init(&svb, "svb", "svb", "d");
	make_top(&svb);
	tree_new_file(&svb, "f", BLK + 10, 1);
	tree_symlink(&svb, "s", "f");
	tree_mkdir(&svb, "many");
	for (i = 0; i < RK_MANY; i++) {
		PATHF(rel, "many/m%03zu", i);
		tree_new_file(&svb, rel, 0, 0);
	}
	sync();
	if (lab_failures != failures)
		lab_die("could not build svb");
}

/* ---- the steps ------------------------------------------------------------------------ */

/* With both keys, after the rekey: new extents in F, and G. */
static void write_after_rekey(void)
{
	char p[PATH_MAX];
	int fd;

	printf("-- write after the rekey\n");
	node_path(&sv, "F", p);
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (CHECK(fd >= 0, "open %s: %s", p, strerror(errno))) {
		tree_put(&sv, fF, fd, 2 * BLK, BLK, p);		/* CoW of block 2 */
		tree_put(&sv, fF, fd, NBLK * BLK, 2 * BLK, p);	/* append */
		CHECK_OK(fsync(fd), "fsync %s", p);
		close(fd);
	}
	fG = tree_new_file(&sv, "G", 3 * BLK, 1);
}

/* Which key each block's extent names, against the model; the items kept. */
static void check_extent_keys(const struct rk_tree *t, size_t fidx, const char *what,
			      struct lab_btrfs_file_extent **fe, size_t *n)
{
	const struct rk_file *f = &t->files[fidx];
	size_t i, b, nblk = nblocks(f->size), covered = 0, under[4] = { 0 };
	const struct lab_btrfs_file_extent *x;
	struct lab_fscrypt_extent_ctx ctx;
	uint64_t end;
	int k;

	*fe = NULL;
	*n = 0;
	if (!CHECK_OK(lab_btrfs_file_extents(t->sub, file_ino(t, fidx), fe, n),
		      "file extent items of %s", what))
		return;
	for (i = 0; i < *n; i++) {
		x = &(*fe)[i];
		if (x->type != 0 && x->disk_bytenr == 0)
			continue;	/* a hole */
		if (!CHECK(x->encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT,
			   "%s: the extent at %llu has encryption 0x%x, expected 0x%x", what,
			   (unsigned long long)x->file_offset, x->encryption,
			   LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT) ||
		    !CHECK_OK(lab_fscrypt_extent_ctx_decode(x->ctx, x->tail_len, &ctx),
			      "%s: the context of the extent at %llu", what,
			      (unsigned long long)x->file_offset))
			continue;
		k = key_of(ctx.key_id);
		if (!CHECK(k == 1 || k == 2, "%s: the extent at %llu names K%d (0: another key)",
			   what, (unsigned long long)x->file_offset, k))
			continue;
		end = x->file_offset + x->num_bytes;
		for (b = x->file_offset / BLK; b < nblk && b * BLK < end; b++) {
			CHECK(f->bkey[b] == k, "%s: block %zu is in an extent under K%d, the model says K%d",
			      what, b, k, f->bkey[b]);
			covered++;
			under[k]++;
		}
	}
	printf("   %s: %zu blocks, %zu in extents under K1, %zu under K2\n", what, nblk,
	       under[1], under[2]);
	CHECK(covered == nblk, "%s: its extent items cover %zu of its %zu blocks", what,
	      covered, nblk);
}

/* Every block of @f on the device: the model's ciphertext under its context's key. */
static void check_ciphertext(const struct rk_file *f, const char *what,
			     const struct lab_btrfs_file_extent *fe, size_t n,
			     const struct raw_btrfs_chunk *chunks, size_t nchunks)
{
	const uint8_t *mk[2] = { mks[1], mks[2] }, *id[2] = { ids[1], ids[2] };
	size_t nblk = nblocks(f->size);
	struct fblk_two_keys got;

	fblk_check_two_key_extents(dev, BLK, what, f->data, f->size, fe, n, chunks, nchunks,
				   mk, id, &got);
	printf("   %s on the device: %zu blocks, %zu copies equal the model\n", what,
	       got.blocks, got.ok);
	CHECK(got.blocks == nblk, "%s: %zu of its %zu blocks found on the device", what,
	      got.blocks, nblk);
	CHECK(got.ok >= got.blocks, "%s: %zu of %zu blocks equal the model", what, got.ok,
	      got.blocks);
}

#define MAX_NEEDLES 48

static void add_needle(struct raw_needle *nd, size_t *n, const char *label,
		       const char *s)
{
	if (*n >= MAX_NEEDLES)
		lab_die("too many needles");
	nd[*n].label = label;
	nd[*n].data = s;
	nd[*n].len = strlen(s);
	(*n)++;
}

/* No plaintext name, target or data of the encrypted trees on the device. */
static void scan_plaintext(void)
{
	const struct rk_tree *trees[] = { &sv, &svr };
	struct raw_needle nd[MAX_NEEDLES];
	size_t n = 0, i, j, nenc;
	const char *b;

	memset(nd, 0, sizeof(nd));
	add_needle(nd, &n, "run tag", tag);
	for (i = 0; i < 2; i++) {
		for (j = 0; j < trees[i]->nnodes; j++) {
			b = base_of(trees[i]->nodes[j].rel);
			if (strstr(b, tag))
				add_needle(nd, &n, "encrypted name", b);
			if (trees[i]->nodes[j].type == RK_LNK && strstr(trees[i]->nodes[j].target, tag))
				add_needle(nd, &n, "symlink target", trees[i]->nodes[j].target);
		}
	}
	add_needle(nd, &n, "data marker", data_marker);
	nenc = n;
	add_needle(nd, &n, "control name", ctl_name);
	add_needle(nd, &n, "control data", ctl_marker);
	printf("-- raw scan of %s for %zu plaintext strings of the encrypted trees and 2 controls\n",
	       dev, nenc - 1);
	if (!CHECK_OK(raw_scan_anchored(dev, nd, n), "scan %s", dev))
		return;
	for (i = 1; i < n; i++) {
		printf("   %-15s %.32s%s (%zu bytes): %lld\n", nd[i].label,
		       (const char *)nd[i].data, nd[i].len > 32 ? "..." : "", nd[i].len,
		       nd[i].count);
		if (i < nenc)
			CHECK(nd[i].count == 0, "LEAK: the %s \"%.32s...\" is on %s in plaintext %lld times, first at %llu",
			      nd[i].label, (const char *)nd[i].data, dev, nd[i].count,
			      (unsigned long long)nd[i].offs[0]);
		else
			CHECK(nd[i].count > 0, "control: the unencrypted %s is not found on %s: the scan is blind",
			      nd[i].label, dev);
	}
}

/* F, G and sv-before's F on the device; ends unmounted. */
static void on_device(int scan)
{
	struct {
		const struct rk_tree *t;
		size_t f;
		const char *what;
	} files[] = {
		{ &sv, fF, "sv/d/F" }, { &sv, fG, "sv/d/G" }, { &before, fF, "sv-before/d/F" },
	};
	struct lab_btrfs_file_extent *fe[3] = { NULL, NULL, NULL };
	struct raw_btrfs_chunk *chunks = NULL;
	size_t nfe[3] = { 0, 0, 0 }, nchunks = 0, i;

	printf("-- the extents on the device\n");
	for (i = 0; i < 3; i++)
		if (files[i].f != RK_NONE)
			check_extent_keys(files[i].t, files[i].f, files[i].what, &fe[i], &nfe[i]);
	fblk_btrfs_chunks(mnt, &chunks, &nchunks);
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		goto out;
	for (i = 0; i < 3; i++)
		if (fe[i] && chunks)
			check_ciphertext(&files[i].t->files[files[i].f], files[i].what, fe[i],
					 nfe[i], chunks, nchunks);
	if (scan)
		scan_plaintext();
out:
	for (i = 0; i < 3; i++)
		free(fe[i]);
	free(chunks);
}

/* With only K2: writes over K1 data, new files and directories. */
static void write_k2_only(void)
{
	unsigned char blk[BLK];
	char p[PATH_MAX];
	size_t i, a_long = RK_NONE;
	int fd;

	printf("-- write with K2 only\n");
	node_path(&sv, "F", p);
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (CHECK(fd >= 0, "open %s with K2 only: %s", p, strerror(errno))) {
		tree_put(&sv, fF, fd, 0, BLK, p);	/* a K1 block, overwritten whole */
		memset(blk, 0x5a, sizeof(blk));
		CHECK_ERRNO(pwrite(fd, blk, 100, BLK + 10), ENOKEY,
			    "partial overwrite of K1 block 1 of %s without K1", p);
		tree_put(&sv, fF, fd, sv.files[fF].size, BLK, p);	/* append */
		tree_truncate(&sv, fF, fd, sv.files[fF].size - BLK / 2, p);
		CHECK_OK(fsync(fd), "fsync %s", p);
		close(fd);
	}
	/* a K1 file of a, cut at a block boundary: no K1 data needed */
	for (i = 0; i < sv.nnodes && a_long == RK_NONE; i++)
		if (sv.nodes[i].type == RK_REG && in_dir(sv.nodes[i].rel, "a") &&
		    sv.files[sv.nodes[i].file].size > BLK + 1)
			a_long = i;
	if (CHECK(a_long != RK_NONE, "no file of a has two blocks")) {
		node_path(&sv, sv.nodes[a_long].rel, p);
		fd = open(p, O_RDWR | O_CLOEXEC);
		if (CHECK(fd >= 0, "open %s with K2 only: %s", p, strerror(errno))) {
			tree_truncate(&sv, sv.nodes[a_long].file, fd, BLK, p);
			CHECK_OK(fsync(fd), "fsync %s", p);
			close(fd);
		}
	}
	tree_new_file(&sv, "N", 2 * BLK + 100, 1);
	if (tree_mkdir(&sv, "E"))
		tree_new_file(&sv, "E/e", BLK, 1);
	node_path(&sv, "", p);
	CHECK_OK(fsync_path(p), "fsync %s", p);
}

/* ---- refusals ---------------------------------------------------------------------------- */

struct rk_cwd {
	const char *dir;
	int ready[2], go[2];
};

/* A process whose cwd is @dir until the parent closes the go pipe. */
static int cwd_child(void *arg)
{
	struct rk_cwd *c = arg;
	char x = 1;

	close(c->ready[0]);
	close(c->go[1]);
	if (chdir(c->dir)) {
		printf("chdir %s: %s\n", c->dir, strerror(errno));
		return 1;
	}
	if (write(c->ready[1], &x, 1) != 1)
		return 1;
	while (read(c->go[0], &x, 1) > 0)
		;
	return 0;
}

static void refused_cwd(const char *dir, rk_args_t *a, const char *ere)
{
	struct rk_cwd c = { .dir = dir };
	char x, what[PATH_MAX + 64];
	int code = -1;
	pid_t pid;

	if (pipe(c.ready) || pipe(c.go))
		lab_die("pipe: %s", strerror(errno));
	pid = lab_child_start(cwd_child, &c);
	close(c.ready[1]);
	close(c.go[0]);
	snprintf(what, sizeof(what), "a process's cwd is %s", dir);
	if (CHECK(read(c.ready[0], &x, 1) == 1, "the child did not enter %s", dir))
		refused(what, svb.parent, a, EBUSY, ere);
	close(c.go[1]);
	close(c.ready[0]);
	CHECK(lab_child_wait(pid, lab_now_ms() + 30000, &code) == LAB_CHILD_EXITED &&
	      code == 0, "the child in %s: end %d", dir, code);
}

struct rk_perm {
	int fd;
	rk_args_t a;
};

static int eperm_child(void *arg)
{
	struct rk_perm *c = arg;
	int r;

	if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
	    setresuid(65534, 65534, 65534)) {
		printf("cannot become uid 65534: %s\n", strerror(errno));
		return 2;
	}
	errno = 0;
	r = rekey_fd(c->fd, &c->a);
	if (r == -1 && errno == EPERM && lab_rekey_moved_nothing(&c->a))
		return 0;
	printf("rekey as uid 65534: %d, " LAB_ERR_FMT "\n", r, LAB_ERR_ARGS(errno));
	return 1;
}

struct rk_race {
	int fd, go[2];
	int ret, err;
	rk_args_t a;
};

/* Wait for the go pipe to close, then rekey; the result into shared memory. */
static int race_child(void *arg)
{
	struct rk_race *r = arg;
	char x;

	close(r->go[1]);
	while (read(r->go[0], &x, 1) > 0)
		;
	errno = 0;
	r->ret = rekey_fd(r->fd, &r->a);
	r->err = errno;
	return 0;
}

/* Did a racing rekey move nothing: EBUSY, EINVAL, or 0 with zero counts? */
static int moved_nothing(const struct rk_race *r)
{
	return (r->ret == -1 && (r->err == EBUSY || r->err == EINVAL)) ||
	       (r->ret == 0 && lab_rekey_moved_nothing(&r->a));
}

/* Two processes rekey svb K1 -> K2 at the same time. */
static void race(void)
{
	struct fscrypt_policy_v2 to;
	struct rk_counts want;
	struct rk_race *r;
	int go[2], code, i, won;
	pid_t pid[2];

	printf("-- two rekeys of svb at once (%d names in one directory)\n", RK_MANY);
	tree_expect(&svb, &want);
	to_policy(&svb, 2, &to);
	r = mmap(NULL, 2 * sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	if (r == MAP_FAILED)
		lab_die("mmap: %s", strerror(errno));
	if (pipe(go))
		lab_die("pipe: %s", strerror(errno));
	drop_caches();
	for (i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].ret = -2;	/* the child did not get to say */
		r[i].go[0] = go[0];
		r[i].go[1] = go[1];
		lab_rekey_args(&r[i].a, svb.name, ids[1], &to);
		r[i].fd = open(svb.parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (r[i].fd < 0)
			lab_die("open %s: %s", svb.parent, strerror(errno));
		pid[i] = lab_child_start(race_child, &r[i]);
	}
	close(go[0]);
	lab_sleep_ms(200);
	close(go[1]);	/* both go */
	for (i = 0; i < 2; i++) {
		code = -1;
		if (!CHECK(lab_child_wait(pid[i], lab_now_ms() + 300000, &code) ==
			   LAB_CHILD_EXITED && code == 0,
			   "racing rekey %d did not end within 300 s (code %d)", i, code))
			lab_child_kill(pid[i], 2000);
		close(r[i].fd);
		printf("   rekey %d: %d %s, moved " LAB_REKEY_COUNTS_FMT "\n", i, r[i].ret,
		       r[i].ret ? lab_errname(r[i].err) : "", LAB_REKEY_COUNTS_ARGS(&r[i].a));
	}
	won = -1;
	for (i = 0; i < 2; i++)
		if (r[i].ret == 0 && counts_are(&r[i].a, &want) && moved_nothing(&r[1 - i]))
			won = i;
	CHECK(won >= 0, "two rekeys at once: exactly one must move " LAB_REKEY_COUNTS_FMT
	      " and the other fail with EBUSY or move nothing", WANT_ARGS(&want));
	if (r[0].ret == 0 || r[1].ret == 0)
		svb.key = 2;
	munmap(r, 2 * sizeof(*r));
	check_policies(&svb, 2, 0);
	check_records_both(svb.sub, "svb after the race");
	drop_caches();
	check_tree(&svb, BOTH, "after the race");
}

/* Bad requests: each refused with its errno, nothing moved or recorded. */
static void refusals(void)
{
	struct fscrypt_policy_v2 to2, p;
	char ere[256], hex[2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1], path[PATH_MAX];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct rk_perm perm;
	uint32_t status = 0;
	rk_args_t a;
	int fd, code = -1;
	const char *busy = "cannot rekey subvolume [0-9]+: ino [0-9]+ is in use";
	const char *differs = "cannot rekey ino [0-9]+ of subvolume [0-9]+: its policy differs from the new one in more than the key";
	const char *nokey = "cannot rekey subvolume [0-9]+: both fscrypt keys must be added";

	printf("-- refusals\n");
	build_svb();
	check_unchanged(&svb, "its making");
	to_policy(&svb, 2, &to2);

	lab_rekey_args(&a, svb.name, ids[1], &to2);
	a.flags = 1;
	refused("flags 1", svb.parent, &a, EINVAL, NULL);
	lab_rekey_args(&a, svb.name, ids[1], &to2);
	a.reserved[2] = 1;
	refused("a reserved word not 0", svb.parent, &a, EINVAL, NULL);
	check_unchanged(&svb, "flags and reserved");

	p = to2;
	memcpy(p.master_key_identifier, ids[1], sizeof(ids[1]));
	lab_rekey_args(&a, svb.name, ids[1], &p);
	refused("from == to", svb.parent, &a, EINVAL, NULL);
	p = to2;
	p.version = FSCRYPT_POLICY_V1;
	lab_rekey_args(&a, svb.name, ids[1], &p);
	refused("to.version 1", svb.parent, &a, EINVAL, NULL);
	p = to2;
	p.flags = (p.flags & ~FSCRYPT_POLICY_FLAGS_PAD_MASK) |
		  ((p.flags & FSCRYPT_POLICY_FLAGS_PAD_MASK) == FSCRYPT_POLICY_FLAGS_PAD_16 ?
		   FSCRYPT_POLICY_FLAGS_PAD_32 : FSCRYPT_POLICY_FLAGS_PAD_16);
	lab_rekey_args(&a, svb.name, ids[1], &p);
	refused("to with other padding flags", svb.parent, &a, EINVAL, differs);
	p = to2;
	p.contents_encryption_mode = FSCRYPT_MODE_AES_128_CBC;
	lab_rekey_args(&a, svb.name, ids[1], &p);
	refused("to with another contents mode", svb.parent, &a, EINVAL, differs);
	check_unchanged(&svb, "bad policies");

	lab_rekey_args(&a, svb.name, ids[3], &to2);
	snprintf(ere, sizeof(ere), "cannot rekey subvolume [0-9]+: it does not use fscrypt key %s",
		 lab_hex(hex, ids[3], FSCRYPT_KEY_IDENTIFIER_SIZE));
	refused("from K3, which svb never used", svb.parent, &a, EINVAL, ere);
	to_policy(&svb, 3, &p);
	lab_rekey_args(&a, svb.name, ids[1], &p);
	refused("to K3, which is not added", svb.parent, &a, ENOKEY, nokey);
	check_unchanged(&svb, "K3");

	printf("   remove K1\n");
	drop_caches();
	if (CHECK_OK(lab_remove_key(mnt, ids[1], &status), "remove K1"))
		printf("   K1 removed, status flags 0x%x\n", status);
	lab_rekey_args(&a, svb.name, ids[1], &to2);
	refused("K1 removed", svb.parent, &a, ENOKEY, nokey);
	if (CHECK_OK(lab_add_key(mnt, SEED1, id), "add K1 back"))
		CHECK(!memcmp(id, ids[1], sizeof(id)), "K1's identifier changed");
	check_unchanged(&svb, "K1 removed");

	lab_rekey_args(&a, "d", ids[1], &to2);
	refused("svb/d, a directory, not a subvolume", svb.sub, &a, EINVAL, NULL);
	PATHF(path, "%s/plain-dir", mnt);
	CHECK_OK(mkdir(path, 0755), "mkdir %s", path);
	lab_rekey_args(&a, "plain-dir", ids[1], &to2);
	refused("a plain directory, not a subvolume", mnt, &a, EINVAL, NULL);
	lab_rekey_args(&a, "no-such-name", ids[1], &to2);
	refused("no such name", mnt, &a, ENOENT, NULL);
	check_unchanged(&svb, "names that are no subvolume");

	lab_rekey_args(&a, svb.name, ids[1], &to2);
	node_path(&svb, "f", path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (CHECK(fd >= 0, "open %s: %s", path, strerror(errno))) {
		refused("a file of svb is open", svb.parent, &a, EBUSY, busy);
		close(fd);
	}
	node_path(&svb, "many", path);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (CHECK(fd >= 0, "open %s: %s", path, strerror(errno))) {
		refused("a directory of svb is open", svb.parent, &a, EBUSY, busy);
		close(fd);
	}
	refused_cwd(svb.top, &a, busy);
	check_unchanged(&svb, "in use");

	printf("   rekey as uid 65534\n");
	perm.fd = open(svb.parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	lab_rekey_args(&perm.a, svb.name, ids[1], &to2);
	if (CHECK(perm.fd >= 0, "open %s: %s", svb.parent, strerror(errno))) {
		CHECK(lab_child_run("rekey as uid 65534", eperm_child, &perm, 60, &code) ==
		      LAB_CHILD_EXITED && code == 0,
		      "rekey by an unprivileged process: not refused with EPERM (child exit %d)",
		      code);
		close(perm.fd);
	}
	check_unchanged(&svb, "an unprivileged caller");

	lab_rekey_args(&a, before.name, ids[1], &to2);
	refused("the read-only snapshot sv-before", before.parent, &a, EROFS,
		"cannot rekey read-only subvolume [0-9]+");
	check_unchanged(&before, "a rekey refused");

	PATHF(path, "%s/sv-plain", mnt);
	subvol_create(path);
	PATHF(path, "%s/sv-plain/p", mnt);
	CHECK_OK(write_file(path, ctl_marker, strlen(ctl_marker)), "write %s", path);
	lab_rekey_args(&a, "sv-plain", ids[1], &to2);
	refused("an unencrypted subvolume", mnt, &a, ENODATA,
		"cannot rekey subvolume [0-9]+: nothing in it is encrypted");
	check_records(path, "sv-plain after a rekey refused", NULL, 0);
	CHECK_FILE_EQUALS(path, ctl_marker, strlen(ctl_marker));

	race();
}

/* sv with F open: EBUSY, still under K2. */
static void refused_sv_busy(void)
{
	struct fscrypt_policy_v2 to;
	char p[PATH_MAX];
	rk_args_t a;
	int fd;

	node_path(&sv, "F", p);
	to_policy(&sv, 1, &to);
	lab_rekey_args(&a, sv.name, ids[2], &to);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (!CHECK(fd >= 0, "open %s: %s", p, strerror(errno)))
		return;
	refused("sv/d/F is open", sv.parent, &a, EBUSY,
		"cannot rekey subvolume [0-9]+: ino [0-9]+ is in use");
	close(fd);
	check_policies(&sv, 2, 0);
	check_records_both(sv.sub, "sv after a rekey refused");
}

/* A subvolume holding files with per-inode keys: EOPNOTSUPP. */
static void per_inode_keys(void)
{
	struct fscrypt_policy_v2 to;
	char p[PATH_MAX];
	uint64_t flags = 0;
	rk_args_t a;
	size_t f;

	printf("-- a subvolume with per-inode-key files (mount -o %s)\n",
	       LAB_BTRFS_PER_INODE_KEYS_OPT);
	if (!mount_with(LAB_BTRFS_PER_INODE_KEYS_OPT, BOTH)) {
		lab_umount(mnt);
		return;
	}
	tree_init(&svi, "svi", "svi", "d");
	make_top(&svi);
	f = tree_new_file(&svi, "f", BLK, 1);
	if (f != RK_NONE &&
	    CHECK_OK(lab_btrfs_inode_flags(svi.sub, file_ino(&svi, f), &flags),
		     "inode flags of svi/d/f"))
		CHECK(!(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT) &&
		      (flags & LAB_BTRFS_INODE_ENCRYPT),
		      "svi/d/f: inode flags 0x%llx, expected a file encrypted per inode",
		      (unsigned long long)flags);
	to_policy(&svi, 2, &to);
	lab_rekey_args(&a, svi.name, ids[1], &to);
	refused("a subvolume with per-inode-key files", svi.parent, &a, EOPNOTSUPP,
		"cannot rekey subvolume [0-9]+: it holds files encrypted with per-inode keys");
	check_unchanged(&svi, "a rekey refused");
	node_path(&svi, "f", p);
	CHECK_FILE_EQUALS(p, svi.files[f].data, svi.files[f].size);
	CHECK_OK(lab_umount(mnt), "umount");
}

/* ---- snapshots while a rekey runs ------------------------------------------------------ */

#define RK_SNAP_DIRS 8
#define RK_SNAP_NAMES 40
#define RK_SNAP_MAX 64

/* The rekey of svs, in a child. */
static int snap_rekey_child(void *arg)
{
	struct rk_race *r = arg;

	errno = 0;
	r->ret = rekey_fd(r->fd, &r->a);
	r->err = errno;
	return 0;
}

/* A read-only snapshot of the subvolume open at @src_fd, as @name in @dst. */
static int snapshot_into(int src_fd, const char *dst, const char *name)
{
	struct btrfs_ioctl_vol_args_v2 va;
	int dfd, ret, err;

	dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	memset(&va, 0, sizeof(va));
	va.fd = src_fd;
	va.flags = BTRFS_SUBVOL_RDONLY;
	snprintf(va.name, sizeof(va.name), "%s", name);
	ret = ioctl(dfd, BTRFS_IOC_SNAP_CREATE_V2, &va);
	err = errno;
	close(dfd);
	errno = err;
	return ret;
}

/*
 * A snapshot taken part way through a rekey would keep directories under
 * both keys, read-only, for good: while a child rekeys svs (8 directories of
 * 40 names), this process snapshots svs into snaps/ in a loop.  Each
 * snapshot must be refused with EBUSY (and the kernel say why) or be wholly
 * under one key.
 */
static void snapshot_during_rekey(void)
{
	static struct rk_tree snap;
	struct fscrypt_policy_v2 to;
	char rel[RK_REL_MAX], snaps[PATH_MAX], name[32];
	struct rk_race *r;
	int src, code, n = 0, busy = 0, taken = 0, key;
	struct fscrypt_get_policy_ex_arg arg;
	pid_t pid;
	size_t d, i;

	printf("-- snapshots of svs while it is rekeyed\n");
	tree_init(&svs, "svs", "svs", "d");
	make_top(&svs);
	for (d = 0; d < RK_SNAP_DIRS; d++) {
		PATHF(rel, "d%zu", d);
		tree_mkdir(&svs, rel);
		for (i = 0; i < RK_SNAP_NAMES; i++) {
			PATHF(rel, "d%zu/n%03zu", d, i);
			tree_new_file(&svs, rel, 0, 0);
		}
	}
	PATHF(snaps, "%s/snaps", mnt);
	if (mkdir(snaps, 0755) && errno != EEXIST)
		lab_die("mkdir %s: %s", snaps, strerror(errno));
	sync();
	drop_caches();

	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		lab_die("mmap: %s", strerror(errno));
	memset(r, 0, sizeof(*r));
	r->ret = -2;
	to_policy(&svs, 2, &to);
	lab_rekey_args(&r->a, svs.name, ids[1], &to);
	r->fd = open(svs.parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* svs's root directory is not encrypted: holding it open is allowed. */
	src = open(svs.sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->fd < 0 || src < 0)
		lab_die("open %s: %s", svs.sub, strerror(errno));
	mark("snapshot during rekey");
	pid = lab_child_start(snap_rekey_child, r);
	while (n < RK_SNAP_MAX && waitpid(pid, &code, WNOHANG) == 0) {
		snprintf(name, sizeof(name), "s%02d", n++);
		if (snapshot_into(src, snaps, name) == 0) {
			taken++;
			continue;
		}
		CHECK(errno == EBUSY, "snapshot %s of svs during its rekey: %s (expected EBUSY)",
		      name, strerror(errno));
		busy++;
	}
	if (n == RK_SNAP_MAX || waitpid(pid, &code, WNOHANG) == 0)
		CHECK(lab_child_wait(pid, lab_now_ms() + 300000, &code) == LAB_CHILD_EXITED,
		      "the rekey of svs did not end within 300 s");
	close(r->fd);
	close(src);
	printf("   %d snapshot(s) tried during the rekey: %d taken, %d refused (EBUSY)\n",
	       n, taken, busy);
	CHECK(r->ret == 0, "the rekey of svs: %s", lab_errname(r->err));
	if (r->ret == 0)
		svs.key = 2;
	if (busy)
		CHECK(lab_log_has("cannot snapshot subvolume [0-9]+ while it is being rekeyed"),
		      "no kernel log line says why a snapshot was refused");

	/* Every snapshot taken: wholly under the key of its top directory. */
	for (i = 0; i < (size_t)n; i++) {
		snprintf(name, sizeof(name), "snaps/s%02zu", i);
		PATHF(rel, "%s/%s/d", mnt, name);
		if (access(rel, F_OK))
			continue;
		if (!CHECK_OK(lab_get_policy_ex(rel, &arg), "the policy of %s", rel))
			continue;
		key = key_of(arg.policy.v2.master_key_identifier);
		tree_copy(&snap, &svs, name, name);
		snap.key = key;
		check_policies(&snap, key, 0);
		check_tree(&snap, BOTH, "a snapshot taken during the rekey");
		tree_free(&snap);
	}
	munmap(r, sizeof(*r));
	check_policies(&svs, 2, 0);
}

/* ---- the btrfs-progs command ------------------------------------------------------------ */

static void hex_id(const uint8_t *id, char *out)
{
	int i;

	for (i = 0; i < FSCRYPT_KEY_IDENTIFIER_SIZE; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
}

/* `btrfs @args @path`: exit status @want, and @needle in the output. */
static void progs_says(const char *args, const char *path, int want,
		       const char *needle)
{
	char cmd[PATH_MAX];
	char *out = NULL;
	int rc;

	snprintf(cmd, sizeof(cmd), "btrfs %s", args);
	rc = lab_run_capture(cmd, path, &out);
	CHECK(rc == want, "`%s %s` exited %d, expected %d", cmd, path, rc, want);
	CHECK(out && strstr(out, needle), "`%s %s` does not say \"%s\"", cmd, path,
	      needle);
	free(out);
}

/*
 * `btrfs subvolume rekey --status` on svc: one line per key with the
 * counts @counts of @key, and the verdict @verdict.
 */
static void status_says(const char *key, const char *counts, const char *verdict)
{
	char want[256];

	snprintf(want, sizeof(want), "%s: %s", key, counts);
	progs_says("subvolume rekey --status", svc.sub, 0, want);
	progs_says("subvolume rekey --status", svc.sub, 0, verdict);
}

/*
 * --status with a second directory tree, svc/x under K1, beside svc/d under
 * K2: two keys, no object in a directory under another key, and the two
 * commands; the first one moves x, after which one key is left.  x is
 * removed again, so svc is its model.
 */
static void progs_status_two_keys(const char *k1, const char *k2)
{
	char x[PATH_MAX], xf[PATH_MAX], cmd[PATH_MAX + 128], *out = NULL;
	unsigned char *data = lab_pattern(BLK, next_seed++);

	PATHF(x, "%s/x", svc.sub);
	PATHF(xf, "%s/x/f", svc.sub);
	if (!CHECK_OK(mkdir(x, 0755), "mkdir %s", x) ||
	    !CHECK_OK(lab_set_policy(x, ids[1]), "policy K1 on %s", x) ||
	    !CHECK_OK(write_file(xf, data, BLK), "write %s", xf))
		goto out;
	sync();
	status_says(k1, "1 directories, 0 symlinks, 1 files",
		    "but no object is in a directory under another key");
	status_says(k2, "2 directories, 1 symlinks, 1 files", "under 2 master key(s)");
	PATHF(cmd, "btrfs subvolume rekey --from %s --to %s %s", k1, k2, svc.sub);
	progs_says("subvolume rekey --status", svc.sub, 0, cmd);
	PATHF(cmd, "btrfs subvolume rekey --from %s --to %s %s", k2, k1, svc.sub);
	progs_says("subvolume rekey --status", svc.sub, 0, cmd);
	/* The first command, as printed, moves x. */
	PATHF(cmd, "subvolume rekey --from %s --to %s", k1, k2);
	progs_says(cmd, svc.sub, 0, "1 directories (1 names), 0 symlinks, 1 files");
	status_says(k2, "3 directories, 1 symlinks, 2 files",
		    "no rekey is left unfinished");
	if (lab_run_capture("btrfs subvolume rekey --status", svc.sub, &out) == 0)
		CHECK(out && !strstr(out, k1), "--status shows K1 after the rekey of x:\n%s",
		      out ? out : "");
	free(out);
	CHECK_FILE_EQUALS(xf, data, BLK);
out:
	CHECK_OK(unlink(xf), "unlink %s", xf);
	CHECK_OK(rmdir(x), "rmdir %s", x);
	sync();
	free(data);
}

/*
 * `btrfs subvolume rekey` of the image's patched btrfs-progs on svc (the
 * policy K1 on svc/d, the root unencrypted, so --from is needed): --help, a
 * malformed identifier, an absent key (nothing moves), --list and --status
 * before and after, the rekey itself, and the same command again; then
 * --status with two keys (progs_status_two_keys()).
 */
static void progs_cli(void)
{
	char k1[2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1];
	char k2[2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1];
	char k3[2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1];
	char args[256];
	char *out = NULL;

	printf("-- btrfs subvolume rekey (btrfs-progs)\n");
	hex_id(ids[1], k1);
	hex_id(ids[2], k2);
	hex_id(ids[3], k3);
	tree_init(&svc, "svc", "svc", "d");
	make_top(&svc);
	tree_new_file(&svc, "f", BLK, 1);
	tree_mkdir(&svc, "e");
	tree_symlink(&svc, "e/s", "../f");
	sync();

	progs_says("subvolume rekey --help", "", 0, "--to");
	progs_says("subvolume rekey --from nothex --to", svc.sub, 1,
		   "not a key identifier");
	snprintf(args, sizeof(args), "subvolume rekey --from %s --to %s", k1, k3);
	progs_says(args, svc.sub, 1, "add both keys");
	check_policies(&svc, 1, 1);
	progs_says("subvolume rekey --list", svc.sub, 0, k1);
	if (lab_run_capture("btrfs subvolume rekey --list", svc.sub, &out) == 0)
		CHECK(out && !strstr(out, k2), "--list shows K2 before the rekey");
	free(out);
	/* d, e, e/s, f: what the rekey below reports moving. */
	status_says(k1, "2 directories, 1 symlinks, 1 files",
		    "no rekey is left unfinished");

	snprintf(args, sizeof(args), "subvolume rekey --from %s --to %s", k1, k2);
	progs_says(args, svc.sub, 0, "2 directories (3 names), 1 symlinks, 1 files");
	svc.key = 2;
	check_policies(&svc, 2, 1);
	check_records_both(svc.sub, "svc after btrfs subvolume rekey");
	progs_says("subvolume rekey --list", svc.sub, 0, k2);
	progs_says(args, svc.sub, 0, "nothing was left under the old key");
	status_says(k2, "2 directories, 1 symlinks, 1 files",
		    "no rekey is left unfinished");
	progs_status_two_keys(k1, k2);
	drop_caches();
	check_tree(&svc, BOTH, "after btrfs subvolume rekey");
}

static void round_trip(const char *opts, const char *label, int scan)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char p[PATH_MAX];

	printf("== %s (mount options \"%s\")\n", label, opts);
	if (!*opts)
		opts = NULL;
	fF = fG = RK_NONE;
	if (!CHECK(lab_mkfs(MKFS, dev) == 0, "mkfs"))
		return;
	if (!mount_with(opts, BOTH))
		goto out;
	probe_rekey();

	/* 1. the trees, and a read-only snapshot of sv */
	build_sv();
	check_records_k1(sv.sub, "sv (policy K1)");
	PATHF(p, "%s/sv-before", mnt);
	if (run("btrfs subvolume snapshot -r %s %s >/dev/null", sv.sub, p) != 0)
		lab_die("cannot snapshot %s", sv.sub);
	tree_copy(&before, &sv, "sv-before", "sv-before");
	build_svr();

	/* 2. the rekey */
	if (!rekey_tree(&sv, 2))
		goto out;
	check_policies(&sv, 2, 1);
	check_records_both(sv.sub, "sv after the rekey");
	check_policies(&before, 1, 1);
	check_records_k1(before.sub, "sv-before after the rekey of sv");
	rekey_again(&sv, 1, 2);
	if (rekey_tree(&svr, 2)) {
		check_policies(&svr, 2, 1);
		check_records_both(svr.sub, "svr after the rekey");
	}

	/* 3. new extents, with both keys */
	write_after_rekey();
	drop_caches();
	check_tree(&sv, BOTH, "after the rekey and new writes");
	check_tree(&before, BOTH, "the snapshot");
	check_tree(&svr, BOTH, "after the rekey");

	/* 4. the device */
	on_device(scan);

	/* 5. K2 only */
	if (!mount_with(opts, K2_ONLY))
		goto out;
	check_tree(&sv, K2_ONLY, "mounted with K2 only");
	check_tree(&before, K2_ONLY, "mounted with K2 only");
	check_tree(&svr, K2_ONLY, "mounted with K2 only");
	write_k2_only();
	drop_caches();
	check_tree(&sv, K2_ONLY, "after writes with K2 only");
	if (!remount_with(opts, K2_ONLY))
		goto out;
	check_tree(&sv, K2_ONLY, "mounted again with K2 only");

	/* 6. K1 only */
	if (!remount_with(opts, K1_ONLY))
		goto out;
	check_tree(&before, K1_ONLY, "the snapshot, K1 only");
	check_tree(&sv, K1_ONLY, "K1 only");
	check_tree(&svr, K1_ONLY, "K1 only");

	/* 7. both keys */
	if (!CHECK_OK(lab_add_key(mnt, SEED2, id), "add K2") ||
	    !CHECK(!memcmp(id, ids[2], sizeof(id)), "K2's identifier is not the model's"))
		goto out;
	drop_caches();
	check_tree(&sv, BOTH, "both keys again");
	check_tree(&before, BOTH, "both keys again");
	check_tree(&svr, BOTH, "both keys again");

	/* 8. refusals and the race */
	refusals();

	/* 9. the btrfs-progs command, once; back to K1; per-inode keys */
	if (scan) {
		progs_cli();
		snapshot_during_rekey();
	}
	refused_sv_busy();
	if (rekey_tree(&sv, 1)) {
		check_policies(&sv, 1, 1);
		check_records_both(sv.sub, "sv after the rekey back");
		rekey_again(&sv, 2, 1);
		drop_caches();
		check_tree(&sv, BOTH, "after the rekey back to K1");
	}
	check_tree(&before, BOTH, "after the rekey back of sv");
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		goto out;

	per_inode_keys();

	/* 10. btrfs check, after all of it */
	lab_btrfs_check_clean(dev, "the filesystem of rekeyed subvolumes");
	goto done;
out:
	lab_umount(mnt);
done:
	tree_free(&sv);
	tree_free(&before);
	tree_free(&svr);
	tree_free(&svb);
	tree_free(&svi);
	tree_free(&svc);
	tree_free(&svs);
}

int main(void)
{
	int k;

	if (access(EXTENT_KEYS_FEATURE, F_OK) != 0)
		lab_skip("the kernel does not advertise per-extent keys on btrfs (no %s)",
			 EXTENT_KEYS_FEATURE);
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (fref_selftest())
		lab_die("the reference model fails its own self-test");
	for (k = 1; k <= 3; k++) {
		lab_master_key(mks[k], seeds[k]);
		if (fref_key_identifier(mks[k], LAB_MASTER_KEY_SIZE, ids[k]))
			lab_die("reference key identifier failed");
	}
	lab_random_hex(tag, TAG_BYTES);
	snprintf(data_marker, sizeof(data_marker), "%s-DATA-encrypted", tag);
	snprintf(ctl_marker, sizeof(ctl_marker), "%s-CTRL-plain-data", tag);
	snprintf(ctl_name, sizeof(ctl_name), "ctl-%s-plain", tag);
	printf("run tag %s\n", tag);
	round_trip("", "key groups", 1);
	round_trip("fscrypt_extents_per_key=1", "a key per extent", 0);
	return lab_result("btrfs_fscrypt_rekey");
}
