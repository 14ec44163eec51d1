// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_rekey_race - BTRFS_IOC_FSCRYPT_REKEY against what other
 * tasks do while it runs, and against inputs it must refuse: one
 * deterministic case per finding of the review of 2026-12-07
 * (notes/reviews/2026-12-07-kernel-fscrypt-rekey.md, N1-N10, S1, S2).
 *
 * Keys K1 and K2 are random 64-byte v2 keys, added at every mount.  The main
 * filesystem (SCRATCH_DEV) holds a template subvolume tpl whose directory d
 * has the policy K1 and 600 empty files (RACE_NBIG=); each case rekeys its
 * own writable snapshot of it, so the rekey spends seconds in d under TCG.
 * What a case does "during the rekey" starts once the rekey reserves d's
 * transaction (bytes_may_use of the filesystem's metadata in sysfs jumps by
 * tens of MiB), which it does after it has evicted the subvolume's inodes and
 * recorded K2, just before it moves d; BTRFS_IOC_TREE_SEARCH cannot watch
 * it, since it waits until the rekey ends.  The object the race is about is
 * made after d, so the rekey reaches it after d.  Other tasks reach the
 * subvolume through a cwd in its unencrypted root or another mount of it,
 * since the rekey holds the lock of its parent.  RACE_CASES=a,b runs only
 * the cases named.
 *
 * After every case: no "Transaction aborted" or "forced readonly" in the
 * kernel log since the case began, the filesystem still takes a write, and
 * the state the case says.  A case whose filesystem went bad is followed by
 * a new one.
 *
 *  n1_cwd_stat_opath  (N1) e (K1, a few names) is stat()ed in a loop and
 *          held by an O_PATH fd, from a process whose cwd is the
 *          subvolume's root, while the rekey K1 -> K2 runs: the rekey
 *          returns 0; e lists exactly its names through the top mount, the
 *          holder's cwd and its fd; x created in e after it; after the
 *          holder is gone and drop_caches, e lists its names and x, x
 *          reads, x's and e's contexts name K2, nothing is left under K1,
 *          and every DIR_INDEX name of e is its name encrypted under K2
 *          (OpenSSL model), in TREE_SEARCH and on the device (unmounted,
 *          the leaves read with tests/lib/btrfs_raw);
 *  n1_subvol_mount    (N1) the same, the holder stat()ing e through a
 *          second mount (-o subvol=) of the subvolume;
 *  n2_user_set_policy (N2) a user (uid 65534) with a v2 key of its own
 *          sets policies on new empty directories of the subvolume in a
 *          loop during the rekey: each attempt gives 0 or EBUSY, a policy
 *          set on 0 only, none on EBUSY; the rekey returns 0;
 *  n3_unlink_file     (N3) a K1 file moved out of d into the unencrypted
 *          root and unlinked during the rekey; n3_rmdir_dir: an empty K1
 *          directory (policy on it) rmdir()ed; n3_unlink_symlink: a K1
 *          symlink moved out of d, unlinked: the rekey returns 0 and
 *          nothing is left under K1;
 *  n4_remove_k1_open  (N4) after the rekey, an old file (K1 extents, K2
 *          policy) read and kept open; removing K1 may say FILES_BUSY;
 *          closed, removing it again completes (no FILES_BUSY, status
 *          ABSENT) and the file's K1 data reads ENOKEY; n4_remove_k1_closed:
 *          the file read and closed first, the first removal completes;
 *  s1_unsynced_writes (S1) 100 files written into d, not synced, and the
 *          rekey at once: it returns 0, they read back, nothing under K1;
 *  n10_short_key      (N10) K1 objects only regular files in the
 *          unencrypted root, the new key 16 bytes (AES-256-XTS needs 32):
 *          refused (ENOKEY or EINVAL), contexts and key records unchanged,
 *          the files read;
 *  n6_rerun, n6_back  (N6) a rekey of a subvolume with 24 directories of
 *          30 names killed (SIGKILL) while it moves them (at its third
 *          directory transaction, or 600 ms after the first): some are
 *          under K1, some under K2; the same rekey again, or a rekey back to K1,
 *          returns 0 and leaves everything under one key, every directory
 *          listing its names and its files opening;
 *  n9_inode_keys_flag (N9, SCRATCH_DEV2) a per-inode-key file in a
 *          subvolume whose root item lost BTRFS_ROOT_SUBVOL_FSCRYPT_INODE_KEYS
 *          (cleared offline): the rekey fails with EUCLEAN and a log line
 *          naming the inode or the subvolume, contexts, key records and the
 *          file's data unchanged;
 *  n5_record_collision (N5, SCRATCH_DEV2) a key record crafted offline
 *          whose offset is Kb's 8-byte prefix and whose identifier differs
 *          from Kb's in its last 8 bytes; a policy of Kb set on an empty
 *          directory succeeds (both identifiers recorded, `btrfs check`
 *          clean) or fails with EEXIST with nothing changed;
 *  s2_xattr_children  (S2, SCRATCH_DEV2, 256 MiB, -m single) a directory
 *          of 300 children carrying 12000-byte xattrs (a leaf each): the
 *          rekey K1 -> K2 returns 0 and moves everything; then, the data
 *          space filled, the rekey back returns 0 (everything moved) or
 *          ENOSPC (nothing moved), and once the space is back (the filler
 *          deleted, `btrfs balance start -dusage=0`, if that can run) the
 *          same rekey completes;
 *  a1_readlink_straddles (found by btrfs_fscrypt_rekey_adversary: a
 *          readlink through the second mount gave a wrong target once) a
 *          K1 symlink moved out of d into the unencrypted root is read
 *          (readlink, from a cwd in that root) while the rekey moves d,
 *          with btrfs.symlink_read_delay_ms (a knob of the lab series)
 *          holding the readlink 20 s between reading the stored target and
 *          decrypting it: the rekey returns 0, the readlink gives the
 *          target or EBUSY (no key can be set up during a rekey), and a
 *          readlink after it and one after drop_caches give the target;
 *          nothing is left under K1.  Skipped on a kernel without the knob.
 */
#include "btrfs_items.h"
#include "btrfs_leaf.h"
#include "btrfs_progs.h"
#include "btrfs_raw.h"
#include "btrfs_rekey.h"
#include "fscrypt_fs.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>

typedef struct btrfs_ioctl_fscrypt_rekey_args rk_args_t;

/* ---- constants ------------------------------------------------------------------ */

#define NBIG_DEFAULT 600	/* names of tpl/d: seconds of rekey under TCG */
#define NBIG_MAX 20000
#define NE 5			/* names of e (N1) */
#define N6_DIRS 24
#define N6_NAMES 30
#define NS1 100
#define NS2 300
#define S2_XATTR 12000
#define MAX_U 400
#define NOBODY 65534
#define MK_SIZE 64
#define SHORT_KEY 16
#define ROOT_INO 256
/* the inode context, version 2 (fs/crypto: struct fscrypt_context_v2) */
#define CTX_V2 2
#define CTX_V2_SIZE 40
#define CTX_FLAGS_OFF 3
#define CTX_ID_OFF 8
#define CTX_NONCE_OFF 24
/* struct btrfs_dir_item */
#define DI_SIZE 30
#define DI_NAME_LEN_OFF 27
#define ROOT_SUBVOL_FSCRYPT_INODE_KEYS (1ULL << 40)
#define ABORT_ERE "Transaction aborted|forced readonly"

_Static_assert(sizeof(struct btrfs_dir_item) == DI_SIZE, "btrfs_dir_item is not 30 bytes");
_Static_assert(offsetof(struct btrfs_dir_item, name_len) == DI_NAME_LEN_OFF,
	       "btrfs_dir_item::name_len moved");

/* The keys the test knows. */
enum { KI_NONE, KI_1, KI_2, KI_S, KI_U, KI_B, KI_MAX };
static const char *const kname[KI_MAX] = {
	"another key", "K1", "K2", "Ks (16 bytes)", "Ku (uid 65534's)", "Kb",
};
static uint8_t kid[KI_MAX][FSCRYPT_KEY_IDENTIFIER_SIZE];
static int kid_set[KI_MAX];
static uint8_t mks[3][MK_SIZE];		/* K1, K2 */

static const char *dev, *mnt, *dev2, *mnt2;
static const char *mnt3 = "/tmp/rekey-race-subvol";
static char tag[17];
static int have_progs;
static char progs_why[256];

/* the main filesystem: built (template made), and still healthy */
static int main_ok, tpl6_ok;
static char *tpl_names[NBIG_MAX];
static size_t nbig = NBIG_DEFAULT;
static const char *only_cases;

/* ---- what the children share with the parent ------------------------------------- */

enum { PH_WAIT, PH_GO, PH_STOP, PH_EXIT };

struct shared {
	volatile int phase;
	/* the rekey child */
	volatile int rk_done;
	int rk_ret, rk_err;
	long long rk_start_ms, rk_end_ms;
	rk_args_t a;
	/* a holder or a user process */
	volatile int h_ready;
	int h_attempts, h_ok, h_busy, h_other, h_other_err;
	long long h_first_ms;
	int h_fd;
	int h_ret, h_err;
	int h_setup_err;
	/* a1: the readlink */
	char rl_target[256];
	int rl_ret, rl_err;
	long long rl_start_ms, rl_end_ms;
	/* N2: per attempt */
	int u_n;
	int u_mk_err[MAX_U], u_sp_err[MAX_U];
	long long u_ms[MAX_U];
};
static struct shared *sh;

static void shared_reset(void)
{
	memset(sh, 0, sizeof(*sh));
	sh->rk_ret = -2;
	sh->h_fd = -1;
	sh->h_ret = -2;
}

/* ---- small helpers ---------------------------------------------------------------- */

static int key_of(const uint8_t *id)
{
	int k;

	for (k = 1; k < KI_MAX; k++)
		if (kid_set[k] && !memcmp(id, kid[k], FSCRYPT_KEY_IDENTIFIER_SIZE))
			return k;
	return KI_NONE;
}

/* A name of @len bytes (at most 255): @first, the run's tag, digits. */
static char *gen_name(size_t len, char first, unsigned n)
{
	char *s = lab_xmalloc(len + 1), num[32];
	size_t i, nl;

	snprintf(num, sizeof(num), "%c%u-%s-", first, n, tag);
	nl = strlen(num);
	for (i = 0; i < len; i++)
		s[i] = i < nl ? num[i] : (char)('a' + (i * 7 + n) % 26);
	s[len] = '\0';
	return s;
}

/* Print @s as text, non-printable bytes as \xNN, at most 40 bytes. */
static void print_name(const char *s)
{
	size_t i, n = strlen(s);

	for (i = 0; i < n && i < 40; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f)
			putchar(c);
		else
			printf("\\x%02x", c);
	}
	if (n > 40)
		printf("...(%zu bytes)", n);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * readdir of @path gives exactly the @n names @want (any order).  Prints
 * what it saw; returns 1 if so.
 */
static int check_names(const char *path, char *const *want, size_t n, const char *what)
{
	struct lab_names l;
	char **w;
	size_t i, j, missing = 0, extra = 0, shown = 0;
	int c;

	if (!CHECK_OK(lab_list_dir(path, &l), "readdir %s (%s)", path, what))
		return 0;
	w = lab_xmalloc((n ? n : 1) * sizeof(*w));
	memcpy(w, want, n * sizeof(*w));
	qsort(w, n, sizeof(*w), cmp_str);
	qsort(l.name, l.n, sizeof(*l.name), cmp_str);
	for (i = 0, j = 0; i < n || j < l.n;) {
		c = i == n ? 1 : j == l.n ? -1 : strcmp(w[i], l.name[j]);
		if (!c) {
			i++;
			j++;
			continue;
		}
		if (c < 0) {
			missing++;
			if (shown++ < 4) {
				printf("     %s: missing \"", path);
				print_name(w[i]);
				printf("\"\n");
			}
			i++;
		} else {
			extra++;
			if (shown++ < 4) {
				printf("     %s: unexpected name \"", path);
				print_name(l.name[j]);
				printf("\"\n");
			}
			j++;
		}
	}
	printf("   readdir %s (%s): %zu names, %zu missing, %zu unexpected\n", path, what,
	       l.n, missing, extra);
	c = CHECK(!missing && !extra,
		  "%s (%s): %zu names listed, %zu of the %zu real ones missing, %zu unexpected",
		  path, what, l.n, missing, n, extra);
	lab_names_free(&l);
	free(w);
	return c;
}

/* ---- trees through BTRFS_IOC_TREE_SEARCH_V2 ----------------------------------------- */

#define SEARCH_BUF (256 * 1024)

typedef void (*item_cb)(void *ctx, uint64_t oid, uint32_t type, uint64_t off,
			const unsigned char *d, uint32_t len);

/* Every item of tree @tree with objectid in [@min_oid, @max_oid], in key order. */
static int tree_walk(const char *path, uint64_t tree, uint64_t min_oid, uint64_t max_oid,
		     item_cb cb, void *ctx)
{
	struct btrfs_ioctl_search_args_v2 *a;
	struct btrfs_ioctl_search_header h;
	uint64_t oid = min_oid, off = 0;
	uint32_t type = 0, i;
	size_t pos;
	int fd, ret = 0, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	a = lab_xmalloc(sizeof(*a) + SEARCH_BUF);
	for (;;) {
		memset(a, 0, sizeof(*a));
		a->key.tree_id = tree;
		a->key.min_objectid = oid;
		a->key.min_type = type;
		a->key.min_offset = off;
		a->key.max_objectid = max_oid;
		a->key.max_type = 255;
		a->key.max_offset = UINT64_MAX;
		a->key.max_transid = UINT64_MAX;
		a->key.nr_items = 4096;
		a->buf_size = SEARCH_BUF;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, a)) {
			ret = -1;
			break;
		}
		if (!a->key.nr_items)
			break;
		for (pos = 0, i = 0; i < a->key.nr_items; i++) {
			memcpy(&h, (const char *)a->buf + pos, sizeof(h));
			pos += sizeof(h);
			cb(ctx, h.objectid, h.type, h.offset, (const unsigned char *)a->buf + pos,
			   h.len);
			pos += h.len;
			oid = h.objectid;
			type = h.type;
			off = h.offset;
		}
		if (off < UINT64_MAX) {
			off++;
		} else if (type < 255) {
			type++;
			off = 0;
		} else if (oid < max_oid) {
			oid++;
			type = 0;
			off = 0;
		} else {
			break;
		}
	}
	e = errno;
	free(a);
	close(fd);
	errno = e;
	return ret;
}

/* How many inode contexts of a subvolume name each key. */
struct census {
	size_t n[KI_MAX];
	size_t total;
	int watch;			/* a key whose inodes to note */
	uint64_t ino[6];
	size_t nino;
};

static void census_cb(void *ctx, uint64_t oid, uint32_t type, uint64_t off,
		      const unsigned char *d, uint32_t len)
{
	struct census *c = ctx;
	int k;

	(void)off;
	if (type != LAB_BTRFS_FSCRYPT_INODE_CTX_KEY)
		return;
	c->total++;
	k = len == CTX_V2_SIZE && d[0] == CTX_V2 ? key_of(d + CTX_ID_OFF) : KI_NONE;
	c->n[k]++;
	if (k == c->watch && c->nino < 6)
		c->ino[c->nino++] = oid;
}

/* The contexts of subvolume @svid of the filesystem on @m; printed. */
static int census(const char *m, uint64_t svid, int watch, struct census *c, const char *what)
{
	int k;

	memset(c, 0, sizeof(*c));
	c->watch = watch;
	if (!CHECK_OK(tree_walk(m, svid, BTRFS_FIRST_FREE_OBJECTID, BTRFS_LAST_FREE_OBJECTID,
				census_cb, c), "tree search of subvolume %llu", (unsigned long long)svid))
		return 0;
	printf("   contexts of subvolume %llu (%s): %zu:", (unsigned long long)svid, what,
	       c->total);
	for (k = 0; k < KI_MAX; k++)
		if (c->n[k])
			printf(" %zu %s", c->n[k], kname[k]);
	printf("\n");
	return 1;
}

/* Everything of subvolume @svid under key @key: no context under another. */
static void check_all_under(const char *m, uint64_t svid, int key, const char *what)
{
	struct census c;
	size_t i;

	if (!census(m, svid, 0, &c, what))
		return;
	if (!CHECK(c.n[key] == c.total && c.total,
		   "%s: %zu of %zu contexts name %s", what, c.n[key], c.total, kname[key])) {
		census(m, svid, key == KI_1 ? KI_2 : KI_1, &c, "the others");
		for (i = 0; i < c.nino; i++)
			printf("     ino %llu is under %s\n", (unsigned long long)c.ino[i],
			       kname[c.watch]);
	}
}

/* The key the context item of inode @ino names: KI_*, or -1 (none). */
static int ctx_key(const char *m, uint64_t svid, uint64_t ino, uint8_t nonce[16],
		   uint8_t *flags)
{
	struct lab_btrfs_item *it = NULL;
	size_t n = 0;
	int k = -1;

	if (lab_btrfs_search_tree(m, svid, ino, LAB_BTRFS_FSCRYPT_INODE_CTX_KEY, &it, &n))
		return -1;
	if (n == 1 && it[0].len == CTX_V2_SIZE && it[0].data[0] == CTX_V2) {
		k = key_of(it[0].data + CTX_ID_OFF);
		if (nonce)
			memcpy(nonce, it[0].data + CTX_NONCE_OFF, 16);
		if (flags)
			*flags = it[0].data[CTX_FLAGS_OFF];
	}
	lab_btrfs_items_free(it, n);
	return k;
}


/*
 * Every DIR_INDEX name of directory @dir_ino of subvolume @svid is one of
 * the @n names @want encrypted (OpenSSL model) with the key of @key and the
 * directory's nonce, each name once; its context names @key.
 */
/*
 * Every item of inode @ino in the live leaves of @devpath (unmounted) that
 * the tree @owner wrote (header owner), read from the device.
 */
static int raw_inode_items(const char *devpath, uint64_t owner, uint64_t ino,
			   struct lab_btrfs_item **out, size_t *nout)
{
	struct braw_block *b = NULL;
	struct lab_btrfs_item *it = NULL;
	unsigned char *blk;
	struct braw_key k;
	struct braw_fs fs;
	size_t n = 0, i, cnt = 0;
	uint32_t slot;

	*out = NULL;
	*nout = 0;
	if (braw_open(&fs, devpath))
		return -1;
	if (braw_live_blocks(&fs, &b, &n)) {
		braw_close(&fs);
		return -1;
	}
	blk = lab_xmalloc(fs.nodesize);
	for (i = 0; i < n; i++) {
		if (b[i].level != 0 || braw_read_block(&fs, b[i].logical, blk) ||
		    braw_le64(blk + BRAW_HDR_OWNER) != owner)
			continue;
		for (slot = 0; slot < braw_nritems(blk); slot++) {
			braw_item_key(blk, slot, &k);
			if (k.objectid != ino)
				continue;
			it = realloc(it, (cnt + 1) * sizeof(*it));
			if (!it)
				lab_die("out of memory");
			it[cnt].objectid = k.objectid;
			it[cnt].type = k.type;
			it[cnt].offset = k.offset;
			it[cnt].transid = 0;
			it[cnt].len = braw_item_size(blk, slot);
			it[cnt].data = lab_xmalloc(it[cnt].len ? it[cnt].len : 1);
			memcpy(it[cnt].data, blk + braw_item_start(blk, slot), it[cnt].len);
			cnt++;
		}
	}
	free(blk);
	free(b);
	braw_close(&fs);
	*out = it;
	*nout = cnt;
	return 0;
}

/*
 * The names of directory @dir_ino of subvolume @svid against the model: its
 * context names @key, and every DIR_INDEX name is one of the @n names @want
 * encrypted (OpenSSL model) with @key's name key and the directory's nonce,
 * each name once.  From TREE_SEARCH on @m, or, with @raw, from the @nraw
 * items of the inode read from the device (raw_inode_items()).
 */
static void check_disk_names(const char *m, uint64_t svid, uint64_t dir_ino,
			     char *const *want, size_t n, int key, const char *what,
			     const struct lab_btrfs_item *raw, size_t nraw)
{
	uint8_t nonce[16], flags = 0, dkey[3][FREF_CTS_KEY_SIZE];
	uint8_t (*ct)[3][FREF_NAME_MAX];
	size_t (*ctlen)[3], *seen, ni = 0, i, j, nl, bad = 0, other_key = 0;
	struct lab_btrfs_item *it = NULL, *found = NULL;
	const unsigned char *d;
	int k = -1, kk;

	if (raw) {
		for (i = 0; i < nraw; i++)
			if (raw[i].type == LAB_BTRFS_FSCRYPT_INODE_CTX_KEY &&
			    raw[i].len == CTX_V2_SIZE && raw[i].data[0] == CTX_V2) {
				k = key_of(raw[i].data + CTX_ID_OFF);
				memcpy(nonce, raw[i].data + CTX_NONCE_OFF, 16);
				flags = raw[i].data[CTX_FLAGS_OFF];
			}
	} else {
		k = ctx_key(m, svid, dir_ino, nonce, &flags);
	}
	if (!CHECK(k == key, "%s: the directory's context names %s, expected %s", what,
		   k < 0 ? "nothing" : kname[k], kname[key]))
		return;
	ct = lab_xmalloc(n * sizeof(*ct));
	ctlen = lab_xmalloc(n * sizeof(*ctlen));
	seen = calloc(n, sizeof(*seen));
	if (!seen)
		lab_die("out of memory");
	for (kk = 1; kk <= 2; kk++)
		if (fref_per_file_key(mks[kk], MK_SIZE, nonce, dkey[kk], FREF_CTS_KEY_SIZE))
			lab_die("reference key derivation failed");
	for (i = 0; i < n; i++)
		for (kk = 1; kk <= 2; kk++)
			if (fref_encrypt_name(dkey[kk], want[i], strlen(want[i]), flags, ct[i][kk],
					      &ctlen[i][kk]))
				lab_die("reference name encryption failed");
	if (raw) {
		for (i = 0; i < nraw; i++) {
			if (raw[i].type != BTRFS_DIR_INDEX_KEY)
				continue;
			found = realloc(found, (ni + 1) * sizeof(*found));
			if (!found)
				lab_die("out of memory");
			found[ni++] = raw[i];
		}
		it = found;
	} else if (!CHECK_OK(lab_btrfs_search_tree(m, svid, dir_ino, BTRFS_DIR_INDEX_KEY, &it,
						 &ni), "DIR_INDEX items of %s", what)) {
		goto out;
	}
	for (i = 0; i < ni; i++) {
		d = it[i].data;
		if (!CHECK(it[i].len >= DI_SIZE, "%s: a DIR_INDEX item of %u bytes", what,
			   it[i].len))
			continue;
		nl = braw_le16(d + DI_NAME_LEN_OFF);
		for (kk = key, j = 0; j < n; j++)
			if (ctlen[j][kk] == nl && DI_SIZE + nl <= it[i].len &&
			    !memcmp(ct[j][kk], d + DI_SIZE, nl))
				break;
		if (j < n) {
			seen[j]++;
			continue;
		}
		for (kk = 3 - key, j = 0; j < n; j++)
			if (ctlen[j][kk] == nl && DI_SIZE + nl <= it[i].len &&
			    !memcmp(ct[j][kk], d + DI_SIZE, nl))
				break;
		if (j < n) {
			other_key++;
			printf("     %s: DIR_INDEX %llu holds \"", what,
			       (unsigned long long)it[i].offset);
			print_name(want[j]);
			printf("\" encrypted under %s\n", kname[kk]);
		} else {
			bad++;
			printf("     %s: DIR_INDEX %llu holds a %zu-byte name that is no name of it under K1 or K2\n",
			       what, (unsigned long long)it[i].offset, nl);
		}
	}
	for (j = 0, i = 0; i < n; i++)
		j += seen[i] == 1;
	printf("   %s: %zu DIR_INDEX names, %zu of its %zu names under %s, %zu under %s, %zu neither\n",
	       what, ni, j, n, kname[key], other_key, kname[3 - key], bad);
	CHECK(ni == n && j == n && !bad && !other_key,
	      "%s: %zu DIR_INDEX names, %zu of the %zu names found encrypted under %s, %zu under %s, %zu neither",
	      what, ni, j, n, kname[key], other_key, kname[3 - key], bad);
out:
	if (raw)
		free(found);
	else
		lab_btrfs_items_free(it, ni);
	free(ct);
	free(ctlen);
	free(seen);
}

/* FS_IOC_GET_ENCRYPTION_POLICY_EX of @path: the key it names (KI_*), or -1. */
static int policy_key(const char *path, int *err)
{
	struct fscrypt_get_policy_ex_arg arg;

	*err = 0;
	if (lab_get_policy_ex(path, &arg)) {
		*err = errno;
		return -1;
	}
	if (arg.policy.version != FSCRYPT_POLICY_V2)
		return KI_NONE;
	return key_of(arg.policy.v2.master_key_identifier);
}

/* ---- cases: bookkeeping ------------------------------------------------------------ */

#define MAX_CASES 24

static struct {
	const char *name;
	const char *status;
	int failures;
	double secs;
} results[MAX_CASES];
static size_t nresults;

struct rcase {
	const char *name;
	int failures;
	long long t0;
	int skipped;
};

static void case_begin(struct rcase *c, const char *name, const char *what)
{
	c->name = name;
	c->failures = lab_failures;
	c->t0 = lab_now_ms();
	c->skipped = 0;
	printf("\n");
	lab_console_line("== %s: %s\n", name, what);
	lab_log_mark("rekey-race-%s-%d", name, (int)getpid());
}

/*
 * The filesystem on @m: nothing aborted since the case began, not read-only,
 * and a file can be written and synced (or, with @allow_enospc, refused with
 * ENOSPC only).  Returns 1 if healthy.
 */
static int fs_healthy(const char *m, int allow_enospc)
{
	char p[PATH_MAX];
	struct statvfs vf;
	int ok = 1, fd, e = 0;

	if (lab_log_has(ABORT_ERE)) {
		printf("   the kernel log since the case began:\n");
		fflush(stdout);
		lab_log_show(40);
		ok &= CHECK(0, "the kernel log says \"Transaction aborted\" or \"forced readonly\" since the case began");
	}
	if (CHECK_OK(statvfs(m, &vf), "statvfs %s", m))
		ok &= CHECK(!(vf.f_flag & ST_RDONLY), "%s is read-only now", m);
	PATHF(p, "%s/rw-probe-%s", m, tag);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, tag, sizeof(tag)) || fsync(fd))
		e = errno;
	if (fd >= 0)
		close(fd);
	unlink(p);
	if (e && !(allow_enospc && e == ENOSPC))
		ok &= CHECK(0, "a write to %s fails: " LAB_ERR_FMT, m, LAB_ERR_ARGS(e));
	else
		printf("   %s: %s\n", m, e ? "write refused with ENOSPC (allowed here), not read-only"
				      : "a file was written and synced");
	return ok;
}

static void case_result(struct rcase *c, const char *status)
{
	int n = lab_failures - c->failures;

	if (nresults < MAX_CASES) {
		results[nresults].name = c->name;
		results[nresults].status = status ? status : n ? "FAIL" : "PASS";
		results[nresults].failures = n;
		results[nresults].secs = (lab_now_ms() - c->t0) / 1000.0;
		nresults++;
	}
	lab_console_line("CASE %s: %s (%d failed checks, %.1f s)\n", c->name,
			 status ? status : n ? "FAIL" : "PASS", n, (lab_now_ms() - c->t0) / 1000.0);
}

/* End of a case on the main filesystem. */
static void case_end_main(struct rcase *c)
{
	if (!fs_healthy(mnt, 0)) {
		printf("   the main filesystem is made anew for the next case\n");
		main_ok = 0;
	}
	case_result(c, NULL);
}

static void case_skip(struct rcase *c, const char *why)
{
	printf("SKIP case %s: %s\n", c->name, why);
	case_result(c, "SKIP");
}

/* ---- the rekey, in a child ---------------------------------------------------------- */

struct rk_req {
	const char *parent;
	const char *name;
	const uint8_t *from, *to;
};

static int rekey_child(void *arg)
{
	struct rk_req *r = arg;
	struct fscrypt_policy_v2 to;
	int fd;

	lab_default_policy(&to, r->to);
	lab_rekey_args(&sh->a, r->name, r->from, &to);
	fd = open(r->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	sh->rk_start_ms = lab_now_ms();
	errno = 0;
	sh->rk_ret = fd < 0 ? -1 : ioctl(fd, BTRFS_IOC_FSCRYPT_REKEY, &sh->a);
	sh->rk_err = errno;
	sh->rk_end_ms = lab_now_ms();
	__sync_synchronize();
	sh->rk_done = 1;
	if (fd >= 0)
		close(fd);
	return 0;
}

static struct rk_req rk_req;

static pid_t rekey_start(const char *parent, const char *name, int from, int to)
{
	rk_req.parent = parent;
	rk_req.name = name;
	rk_req.from = kid[from];
	rk_req.to = kid[to];
	sh->rk_done = 0;
	sh->rk_ret = -2;
	sh->rk_err = 0;
	printf("   rekey %s/%s from %s to %s\n", parent, name, kname[from], kname[to]);
	return lab_child_start(rekey_child, &rk_req);
}

/* Wait for the rekey child; prints its result; returns its errno (0: success). */
static int rekey_finish(pid_t pid)
{
	int code = -1;

	if (!CHECK(lab_child_wait(pid, lab_now_ms() + 400000, &code) == LAB_CHILD_EXITED,
		   "the rekey did not end within 400 s")) {
		lab_child_kill(pid, 2000);
		return -1;
	}
	if (!sh->rk_done) {
		printf("   the rekey process ended without a result (code %d)\n", code);
		return -1;
	}
	printf("   rekey: %d %s after %.2f s, moved " LAB_REKEY_COUNTS_FMT "\n", sh->rk_ret,
	       sh->rk_ret ? lab_errname(sh->rk_err) : "(success)",
	       (sh->rk_end_ms - sh->rk_start_ms) / 1000.0, LAB_REKEY_COUNTS_ARGS(&sh->a));
	if (sh->rk_ret) {
		printf("   kernel log:\n");
		fflush(stdout);
		lab_log_show(15);
	}
	return sh->rk_ret ? sh->rk_err : 0;
}

static int rekey_now(const char *parent, const char *name, int from, int to)
{
	return rekey_finish(rekey_start(parent, name, from, to));
}


/*
 * The metadata space the filesystem has reserved (sysfs, no btrfs lock):
 * a rekey reserves its directory's transaction just before it moves the
 * directory.
 */
static char may_use_path[PATH_MAX];

static void may_use_init(const char *m)
{
	struct btrfs_ioctl_fs_info_args fi;
	char uuid[37];
	const uint8_t *u = fi.fsid;

	memset(&fi, 0, sizeof(fi));
	if (lab_ioctl_path(m, BTRFS_IOC_FS_INFO, &fi))
		lab_die("BTRFS_IOC_FS_INFO %s: %s", m, strerror(errno));
	snprintf(uuid, sizeof(uuid),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
		 u[12], u[13], u[14], u[15]);
	PATHF(may_use_path, "/sys/fs/btrfs/%s/allocation/metadata/bytes_may_use", uuid);
}

static long long may_use(void)
{
	char buf[64];
	ssize_t r;
	int fd = open(may_use_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	return atoll(buf);
}

/*
 * Wait until the rekey reserves the transaction of a directory of at least
 * a few hundred names (bytes_may_use @base + 4 MiB or more): it has evicted
 * the subvolume's inodes, recorded the new key and begins to move d, which
 * takes seconds, and the directories and files after it come later.  The
 * tree itself cannot be watched: BTRFS_IOC_TREE_SEARCH waits until the rekey
 * ends.  Returns 1 if so while the rekey still runs.
 */
static int wait_move(long long base)
{
	long long t0 = lab_now_ms(), v = -1, peak = -1;

	while (!sh->rk_done && lab_now_ms() - t0 < 300000) {
		v = may_use();
		if (v > peak)
			peak = v;
		if (v >= base + (4LL << 20))
			break;
		usleep(500);
	}
	if (v >= base + (4LL << 20) && !sh->rk_done) {
		printf("   %.2f s after it began, the rekey reserved its first large directory's transaction (bytes_may_use %lld KiB, %lld KiB before)\n",
		       (lab_now_ms() - t0) / 1000.0, v >> 10, base >> 10);
		return 1;
	}
	printf("   the rekey ended before it reserved a large directory's transaction (bytes_may_use %lld KiB at most, %lld KiB before)\n",
	       peak >> 10, base >> 10);
	return 0;
}

/* Wait for a holder or user child to exit (after PH_EXIT). */
static void child_end(pid_t pid, const char *what)
{
	int code = -1;

	if (!CHECK(lab_child_wait(pid, lab_now_ms() + 60000, &code) == LAB_CHILD_EXITED &&
		   code == 0, "%s: ended with %d", what, code))
		lab_child_kill(pid, 2000);
}

/* Wait until the child says it is ready; 0 if it died or took 60 s. */
static int child_ready(pid_t pid)
{
	long long t0 = lab_now_ms();
	int st;

	while (!sh->h_ready) {
		if (waitpid(pid, &st, WNOHANG) == pid || lab_now_ms() - t0 > 60000) {
			printf("   the child did not get ready (setup errno %d)\n", sh->h_setup_err);
			return 0;
		}
		usleep(1000);
	}
	return 1;
}

/* ---- the main filesystem ------------------------------------------------------------- */

static void add_keys(const char *m)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	int k;

	for (k = KI_1; k <= KI_2; k++) {
		if (lab_add_raw_key(m, mks[k], MK_SIZE, id)) {
			if (errno == ENOTTY || errno == EOPNOTSUPP)
				lab_skip("btrfs has no fscrypt ioctls: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
			lab_die("add %s on %s: " LAB_ERR_FMT, kname[k], m, LAB_ERR_ARGS(errno));
		}
		if (memcmp(id, kid[k], sizeof(id)))
			lab_die("%s's identifier is not the model's", kname[k]);
	}
}

static uint64_t subvol_id(const char *path)
{
	unsigned char ri[512];
	uint64_t id = 0;

	if (lab_btrfs_root_item(path, &id, ri, sizeof(ri)) < 0)
		lab_die("the root item of %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	return id;
}

/* Create the empty file @path. */
static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	if (fd < 0)
		lab_die("create %s: %s", path, strerror(errno));
	close(fd);
}

/* mkfs, mount, keys, and tpl: the policy K1 on tpl/d, nbig empty files. */
static void main_build(void)
{
	char p[PATH_MAX];
	long long t0 = lab_now_ms();
	size_t i;

	lab_umount(mnt);
	printf("-- the main filesystem: mkfs, tpl/d with %zu names\n", nbig);
	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s", dev);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("mount %s: " LAB_ERR_FMT, dev, LAB_ERR_ARGS(errno));
	add_keys(mnt);
	may_use_init(mnt);
	lab_btrfs_subvol(mnt, "tpl", -1);
	PATHF(p, "%s/tpl/d", mnt);
	if (mkdir(p, 0755) || lab_set_policy(p, kid[KI_1]))
		lab_die("the policy K1 on %s: " LAB_ERR_FMT, p, LAB_ERR_ARGS(errno));
	for (i = 0; i < nbig; i++) {
		if (!tpl_names[i]) {
			tpl_names[i] = lab_xmalloc(40);
			snprintf(tpl_names[i], 40, "t%04zu-%s", i, tag);
		}
		PATHF(p, "%s/tpl/d/%s", mnt, tpl_names[i]);
		touch(p);
	}
	sync();
	printf("   built in %.1f s\n", (lab_now_ms() - t0) / 1000.0);
	main_ok = 1;
	tpl6_ok = 0;
}

static void main_need(void)
{
	if (!main_ok)
		main_build();
}

/* A writable snapshot of @src named @name in the top directory; its id. */
static uint64_t snap_of(const char *src, const char *name, char *path, size_t size)
{
	char s[PATH_MAX];
	int fd;

	PATHF(s, "%s/%s", mnt, src);
	fd = open(s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		lab_die("open %s: %s", s, strerror(errno));
	lab_btrfs_subvol(mnt, name, fd);
	close(fd);
	lab_pathf(path, size, "%s/%s", mnt, name);
	return subvol_id(path);
}

static uint64_t ino_of(const char *path)
{
	struct stat st;

	if (lstat(path, &st))
		lab_die("lstat %s: %s", path, strerror(errno));
	return st.st_ino;
}

/* ---- N1 ------------------------------------------------------------------------------ */

struct holder {
	const char *cwd;	/* chdir here first (NULL: stay) */
	const char *path;	/* what to stat */
	int op;			/* HOLD_STAT, or a one-shot removal */
};

enum { HOLD_STAT, HOLD_UNLINK, HOLD_RMDIR };

/*
 * From PH_GO until PH_STOP: stat @path in a loop, holding an O_PATH fd of
 * it from the first success on; until PH_EXIT keep the fd.  Or, for a
 * removal, do it once at PH_GO.
 */
static int holder_child(void *arg)
{
	struct holder *h = arg;
	struct stat st;
	long long t;
	int fd = -1, r, e;

	if (h->cwd && chdir(h->cwd)) {
		sh->h_setup_err = errno;
		return 2;
	}
	sh->h_ready = 1;
	while (sh->phase == PH_WAIT)
		usleep(200);
	if (h->op != HOLD_STAT) {
		t = lab_now_ms();
		errno = 0;
		r = h->op == HOLD_UNLINK ? unlink(h->path) : rmdir(h->path);
		sh->h_err = errno;
		sh->h_ret = r;
		sh->h_first_ms = t;
		sh->h_attempts = 1;
	}
	while (h->op == HOLD_STAT && sh->phase == PH_GO) {
		t = lab_now_ms();
		errno = 0;
		r = stat(h->path, &st);
		e = errno;
		if (!sh->h_attempts)
			sh->h_first_ms = t;
		sh->h_attempts++;
		if (!r)
			sh->h_ok++;
		else if (e == EBUSY)
			sh->h_busy++;
		else
			sh->h_other++, sh->h_other_err = e;
		if (fd < 0 && !r) {
			fd = open(h->path, O_PATH | O_CLOEXEC);
			sh->h_fd = fd;
		}
		usleep(1000);
	}
	while (sh->phase != PH_EXIT)
		usleep(2000);
	if (fd >= 0)
		close(fd);
	return 0;
}

static void case_n1(int via_mount)
{
	const char *name = via_mount ? "n1_subvol_mount" : "n1_cwd_stat_opath";
	const char *svn = via_mount ? "n1b" : "n1a";
	char sv[PATH_MAX], e[PATH_MAX], p[PATH_MAX], hpath[PATH_MAX], opts[64];
	char *names[NE + 1], xdata[64];
	static const size_t lens[NE] = { 5, 16, 17, 40, 255 };
	struct holder h = { 0 };
	uint64_t svid, e_ino, x_ino = 0;
	struct rcase c;
	struct lab_btrfs_item *raw = NULL;
	size_t nraw = 0;
	pid_t hp, rp;
	int seen, err, k, perr, mounted = 0;
	long long base;
	size_t i;

	main_need();
	case_begin(&c, name,
		   via_mount ? "e stat()ed through a second mount (subvol=) during the rekey"
			     : "e stat()ed from a cwd in the subvolume, and held by an O_PATH fd, during the rekey");
	svid = snap_of("tpl", svn, sv, sizeof(sv));
	PATHF(e, "%s/e", sv);
	if (mkdir(e, 0755) || lab_set_policy(e, kid[KI_1]))
		lab_die("the policy K1 on %s: " LAB_ERR_FMT, e, LAB_ERR_ARGS(errno));
	for (i = 0; i < NE; i++) {
		names[i] = gen_name(lens[i], (char)('A' + i), (unsigned)i);
		PATHF(p, "%s/%s", e, names[i]);
		touch(p);
	}
	names[NE] = "x";
	e_ino = ino_of(e);
	sync();
	printf("   %s: e is ino %llu with %d names, d has %zu\n", sv, (unsigned long long)e_ino,
	       NE, nbig);

	shared_reset();
	if (via_mount) {
		snprintf(opts, sizeof(opts), "subvol=%s", svn);
		if (mkdir(mnt3, 0755) && errno != EEXIST)
			lab_die("mkdir %s: %s", mnt3, strerror(errno));
		if (!CHECK_OK(lab_mount(dev, mnt3, "btrfs", opts), "mount -o %s on %s", opts, mnt3))
			goto out;
		mounted = 1;
		PATHF(hpath, "%s/e", mnt3);
		h.cwd = NULL;
		h.path = hpath;
	} else {
		h.cwd = sv;
		h.path = "e";
	}
	h.op = HOLD_STAT;
	hp = lab_child_start(holder_child, &h);
	if (!CHECK(child_ready(hp), "the holder did not start"))
		goto out_kill;

	base = may_use();
	rp = rekey_start(mnt, svn, KI_1, KI_2);
	seen = wait_move(base);
	sh->phase = PH_GO;
	err = rekey_finish(rp);
	sh->phase = PH_STOP;
	printf("   the holder: %d stat()s of %s (%d ok, %d EBUSY, %d other, last %s), the first %lld ms %s the rekey ended; O_PATH fd %d\n",
	       sh->h_attempts, h.path, sh->h_ok, sh->h_busy, sh->h_other,
	       sh->h_other ? lab_errname(sh->h_other_err) : "-",
	       llabs(sh->rk_end_ms - sh->h_first_ms),
	       sh->h_first_ms <= sh->rk_end_ms ? "before" : "after", sh->h_fd);
	CHECK(seen, "the rekey was not seen moving d: the race was not set up");
	CHECK(sh->h_attempts > 0 && sh->h_first_ms < sh->rk_end_ms,
	      "the holder did not reach e while the rekey ran");
	CHECK(!sh->h_other, "stat of e during the rekey failed with %s (expected success or EBUSY)",
	      lab_errname(sh->h_other_err));
	CHECK(!err, "the rekey of %s failed: %s", sv, lab_errname(err));

	/* after the rekey: e through every path, before anything is dropped */
	check_names(e, names, NE, "through the top mount");
	if (via_mount) {
		check_names(hpath, names, NE, "through the subvol= mount");
	} else {
		PATHF(p, "/proc/%d/cwd/e", (int)hp);
		check_names(p, names, NE, "through the holder's cwd");
		if (CHECK(sh->h_fd >= 0, "the holder has no O_PATH fd of e")) {
			PATHF(p, "/proc/%d/fd/%d", (int)hp, sh->h_fd);
			check_names(p, names, NE, "through the holder's O_PATH fd");
		}
	}
	snprintf(xdata, sizeof(xdata), "x-%s-written-after-the-rekey", tag);
	PATHF(p, "%s/x", e);
	if (CHECK_OK(write_file(p, xdata, strlen(xdata)), "create %s", p) &&
	    CHECK_OK(fsync_path(p), "fsync %s", p))
		x_ino = ino_of(p);
	sh->phase = PH_EXIT;
	child_end(hp, "the holder");

	/* the holder gone, caches dropped: as the disk says */
	CHECK_OK(lab_drop_caches("2"), "drop caches");
	check_names(e, names, NE + 1, "after drop_caches");
	if (via_mount)
		check_names(hpath, names, NE + 1, "through the subvol= mount, after drop_caches");
	CHECK_FILE_EQUALS(p, xdata, strlen(xdata));
	if (x_ino) {
		k = ctx_key(mnt, svid, x_ino, NULL, NULL);
		CHECK(k == KI_2, "x (ino %llu): its context names %s, expected K2",
		      (unsigned long long)x_ino, k < 0 ? "nothing" : kname[k]);
		k = policy_key(p, &perr);
		CHECK(k == KI_2, "x: FS_IOC_GET_ENCRYPTION_POLICY_EX gives %s (%s), expected K2",
		      k < 0 ? "no policy" : kname[k], perr ? lab_errname(perr) : "-");
	}
	k = policy_key(e, &perr);
	CHECK(k == KI_2, "e: its policy names %s (%s), expected K2",
	      k < 0 ? "nothing" : kname[k], perr ? lab_errname(perr) : "-");
	check_all_under(mnt, svid, KI_2, sv);
	sync();
	check_disk_names(mnt, svid, e_ino, names, NE + 1, KI_2, "e (TREE_SEARCH)", NULL, 0);
	if (mounted && CHECK_OK(lab_umount(mnt3), "umount %s", mnt3))
		mounted = 0;
	if (!mounted && CHECK_OK(lab_umount(mnt), "umount %s", mnt)) {
		if (CHECK_OK(raw_inode_items(dev, svid, e_ino, &raw, &nraw),
			     "read the leaves of subvolume %llu from %s", (unsigned long long)svid, dev))
			check_disk_names(mnt, svid, e_ino, names, NE + 1, KI_2, "e (on the device)",
					 raw, nraw);
		lab_btrfs_items_free(raw, nraw);
		if (CHECK_OK(lab_mount(dev, mnt, "btrfs", NULL), "mount %s again", dev))
			add_keys(mnt);
		else
			main_ok = 0;
	}
	goto out;
out_kill:
	sh->phase = PH_EXIT;
	lab_child_kill(hp, 2000);
out:
	if (mounted)
		CHECK_OK(lab_umount(mnt3), "umount %s", mnt3);
	for (i = 0; i < NE; i++)
		free(names[i]);
	case_end_main(&c);
}

/* ---- N2 ------------------------------------------------------------------------------ */

struct user {
	const char *sv;
	uint8_t key[MK_SIZE];
};

/* As uid 65534, with its own key Ku: mkdir u<i>, set the policy Ku, again. */
static int user_child(void *arg)
{
	struct user *u = arg;
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char n[32];
	int i, r;

	if (chdir(u->sv) || setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY)) {
		sh->h_setup_err = errno;
		return 2;
	}
	if (lab_add_raw_key(".", u->key, MK_SIZE, id)) {
		sh->h_setup_err = errno;
		return 3;
	}
	if (memcmp(id, kid[KI_U], sizeof(id)))
		return 4;
	sh->h_ready = 1;
	while (sh->phase == PH_WAIT)
		usleep(200);
	for (i = 0; i < MAX_U && sh->phase == PH_GO; i++) {
		snprintf(n, sizeof(n), "u%03d", i);
		sh->u_ms[i] = lab_now_ms();
		errno = 0;
		r = mkdir(n, 0700);
		sh->u_mk_err[i] = r ? errno : 0;
		if (!r) {
			errno = 0;
			r = lab_set_policy(n, kid[KI_U]);
			sh->u_sp_err[i] = r ? errno : 0;
		}
		sh->u_n = i + 1;
		if (sh->u_mk_err[i] || (sh->u_sp_err[i] && sh->u_sp_err[i] != EBUSY))
			break;
		usleep(2000);
	}
	return 0;
}

static void case_n2(void)
{
	char sv[PATH_MAX], p[PATH_MAX];
	static struct user u;
	struct census cs;
	uint64_t svid;
	struct rcase c;
	int i, err, during = 0, ok = 0, busy = 0, other = 0, mkfail = 0, k, perr;
	long long base;
	pid_t up, rp;

	main_need();
	case_begin(&c, "n2_user_set_policy",
		   "uid 65534 sets policies of its own key on new empty directories during the rekey");
	svid = snap_of("tpl", "n2", sv, sizeof(sv));
	if (chmod(sv, 0777))
		lab_die("chmod %s: %s", sv, strerror(errno));
	u.sv = sv;
	lab_random(u.key, sizeof(u.key));
	if (fref_key_identifier(u.key, MK_SIZE, kid[KI_U]))
		lab_die("reference key identifier failed");
	kid_set[KI_U] = 1;
	sync();

	shared_reset();
	up = lab_child_start(user_child, &u);
	if (!CHECK(child_ready(up), "uid 65534 could not add its key (%s)",
		   lab_errname(sh->h_setup_err))) {
		sh->phase = PH_EXIT;
		lab_child_kill(up, 2000);
		case_end_main(&c);
		return;
	}
	base = may_use();
	rp = rekey_start(mnt, "n2", KI_1, KI_2);
	CHECK(wait_move(base), "the rekey was not seen moving d: the race was not set up");
	sh->phase = PH_GO;
	err = rekey_finish(rp);
	sh->phase = PH_STOP;
	child_end(up, "the user process");

	for (i = 0; i < sh->u_n; i++) {
		during += sh->u_ms[i] < sh->rk_end_ms;
		if (sh->u_mk_err[i]) {
			mkfail++;
			printf("     attempt %d: mkdir failed: %s\n", i, lab_errname(sh->u_mk_err[i]));
			continue;
		}
		if (!sh->u_sp_err[i])
			ok++;
		else if (sh->u_sp_err[i] == EBUSY)
			busy++;
		else
			other++, printf("     attempt %d: set policy: %s\n", i,
					lab_errname(sh->u_sp_err[i]));
	}
	printf("   uid 65534: %d attempts (%d while the rekey ran): %d set, %d EBUSY, %d other errors, %d mkdir failures\n",
	       sh->u_n, during, ok, busy, other, mkfail);
	CHECK(during > 0, "no attempt was made while the rekey ran");
	CHECK(!other && !mkfail,
	      "set policy during the rekey: %d attempts failed with other than EBUSY, %d mkdirs failed",
	      other, mkfail);
	CHECK(!err, "the rekey of %s failed: %s", sv, lab_errname(err));

	/* a policy exactly where the ioctl said so */
	for (i = 0; i < sh->u_n; i++) {
		if (sh->u_mk_err[i])
			continue;
		PATHF(p, "%s/u%03d", sv, i);
		k = policy_key(p, &perr);
		if (!sh->u_sp_err[i])
			CHECK(k == KI_U, "%s: set policy returned 0, its policy is %s (%s)", p,
			      k < 0 ? "none" : kname[k], perr ? lab_errname(perr) : "-");
		else
			CHECK(k < 0 && perr == ENODATA,
			      "%s: set policy failed (%s), but it has a policy (%s) or %s", p,
			      lab_errname(sh->u_sp_err[i]), k < 0 ? "none" : kname[k],
			      perr ? lab_errname(perr) : "-");
	}
	if (!err) {
		census(mnt, svid, 0, &cs, sv);
		CHECK(!cs.n[KI_1], "%zu contexts still name K1 after the rekey", cs.n[KI_1]);
		PATHF(p, "%s/d", sv);
		check_names(p, tpl_names, nbig, "d after the rekey");
		k = policy_key(p, &perr);
		CHECK(k == KI_2, "d: its policy names %s, expected K2", k < 0 ? "nothing" : kname[k]);
	}
	case_end_main(&c);
}

/* ---- N3 ------------------------------------------------------------------------------ */

static void case_n3(int op)
{
	static const char *const cname[] = { "n3_unlink_file", "n3_rmdir_dir", "n3_unlink_symlink" };
	static const char *const svn[] = { "n3a", "n3b", "n3c" };
	static const char *const what[] = {
		"a K1 file moved out of d into the unencrypted root, unlinked during the rekey",
		"an empty K1 directory in the unencrypted root, rmdir()ed during the rekey",
		"a K1 symlink moved out of d into the unencrypted root, unlinked during the rekey",
	};
	char sv[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	struct holder h = { 0 };
	uint64_t svid, obj_ino;
	struct rcase c;
	struct stat st;
	long long base;
	pid_t hp, rp;
	int err;

	main_need();
	case_begin(&c, cname[op], what[op]);
	svid = snap_of("tpl", svn[op], sv, sizeof(sv));
	PATHF(q, "%s/o", sv);
	switch (op) {
	case 0:
		PATHF(p, "%s/d/%s", sv, tpl_names[nbig - 1]);
		if (rename(p, q))
			lab_die("mv %s %s: %s", p, q, strerror(errno));
		break;
	case 1:
		if (mkdir(q, 0755) || lab_set_policy(q, kid[KI_1]))
			lab_die("the policy K1 on %s: " LAB_ERR_FMT, q, LAB_ERR_ARGS(errno));
		break;
	default:
		PATHF(p, "%s/d/s-%s", sv, tag);
		if (symlink(tpl_names[0], p) || rename(p, q))
			lab_die("symlink %s, mv to %s: %s", p, q, strerror(errno));
		break;
	}
	obj_ino = ino_of(q);
	if (!CHECK(ctx_key(mnt, svid, obj_ino, NULL, NULL) == KI_1,
		   "%s (ino %llu) is not under K1 before the rekey", q, (unsigned long long)obj_ino))
		goto out;
	printf("   %s: ino %llu under K1\n", q, (unsigned long long)obj_ino);
	sync();

	shared_reset();
	h.cwd = sv;
	h.path = "o";
	h.op = op == 1 ? HOLD_RMDIR : HOLD_UNLINK;
	hp = lab_child_start(holder_child, &h);
	if (!CHECK(child_ready(hp), "the remover did not start")) {
		sh->phase = PH_EXIT;
		lab_child_kill(hp, 2000);
		goto out;
	}
	base = may_use();
	rp = rekey_start(mnt, svn[op], KI_1, KI_2);
	CHECK(wait_move(base), "the rekey was not seen moving d: the race was not set up");
	sh->phase = PH_GO;
	err = rekey_finish(rp);
	sh->phase = PH_EXIT;
	child_end(hp, "the remover");
	printf("   %s o during the rekey: %d %s, %lld ms %s the rekey ended\n",
	       op == 1 ? "rmdir" : "unlink", sh->h_ret, sh->h_ret ? lab_errname(sh->h_err) : "",
	       llabs(sh->rk_end_ms - sh->h_first_ms),
	       sh->h_first_ms <= sh->rk_end_ms ? "before" : "after");
	CHECK(sh->h_ret == 0, "%s of o during the rekey: %s", op == 1 ? "rmdir" : "unlink",
	      lab_errname(sh->h_err));
	CHECK(sh->h_first_ms < sh->rk_end_ms, "the removal came after the rekey: nothing raced");
	CHECK(!err, "the rekey of %s failed: %s (the object that vanished should count as done)",
	      sv, lab_errname(err));
	CHECK(lstat(q, &st) && errno == ENOENT, "%s is still there", q);
	check_all_under(mnt, svid, KI_2, sv);
	PATHF(p, "%s/d", sv);
	check_names(p, tpl_names, op == 0 ? nbig - 1 : nbig, "d after the rekey");
out:
	case_end_main(&c);
}

/* ---- a1: a readlink that straddles the rekey ------------------------------------------ */

#define SYMLINK_DELAY_KNOB "/sys/module/btrfs/parameters/symlink_read_delay_ms"
#define A1_DELAY_MS 20000

static int set_symlink_delay(unsigned int ms)
{
	char v[16];

	snprintf(v, sizeof(v), "%u\n", ms);
	return write_file(SYMLINK_DELAY_KNOB, v, strlen(v));
}

/*
 * From a cwd in @arg (the subvolume's root), at PH_GO: readlink("o") into
 * the shared memory.
 */
static int readlink_child(void *arg)
{
	ssize_t n;

	if (chdir((const char *)arg)) {
		sh->h_setup_err = errno;
		return 2;
	}
	sh->h_ready = 1;
	while (sh->phase == PH_WAIT)
		usleep(200);
	sh->rl_start_ms = lab_now_ms();
	errno = 0;
	n = readlink("o", sh->rl_target, sizeof(sh->rl_target) - 1);
	sh->rl_err = errno;
	sh->rl_end_ms = lab_now_ms();
	sh->rl_ret = n < 0 ? -1 : 0;
	if (n >= 0)
		sh->rl_target[n] = '\0';
	return 0;
}

/* readlink @path equals @want. */
static void check_target(const char *path, const char *want, const char *when)
{
	char buf[256];
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);

	if (!CHECK(n >= 0, "readlink %s %s: %s", path, when, strerror(errno)))
		return;
	buf[n] = '\0';
	if (!CHECK(!strcmp(buf, want), "readlink %s %s gave %zd bytes, not the target", path, when,
		   n)) {
		printf("   got: ");
		print_name(buf);
		printf("\n");
	}
}

static void case_a1(void)
{
	char sv[PATH_MAX], p[PATH_MAX], q[PATH_MAX], want[64];
	uint64_t svid;
	struct rcase c;
	long long base;
	pid_t hp, rp;
	int err, code = -1;

	main_need();
	case_begin(&c, "a1_readlink_straddles",
		   "a readlink of a K1 symlink, held between reading and decrypting its target, while the rekey moves it");
	if (access(SYMLINK_DELAY_KNOB, W_OK)) {
		case_skip(&c, "no " SYMLINK_DELAY_KNOB " (a knob of the lab series, patches/lab/)");
		return;
	}
	svid = snap_of("tpl", "a1", sv, sizeof(sv));
	snprintf(want, sizeof(want), "target-%s-of-the-a1-symlink", tag);
	PATHF(p, "%s/d/s-%s", sv, tag);
	PATHF(q, "%s/o", sv);
	if (symlink(want, p) || rename(p, q))
		lab_die("symlink %s, mv to %s: %s", p, q, strerror(errno));
	if (!CHECK(ctx_key(mnt, svid, ino_of(q), NULL, NULL) == KI_1, "%s is not under K1", q))
		goto out;
	sync();

	shared_reset();
	if (!CHECK(set_symlink_delay(A1_DELAY_MS) == 0, "set %s: %s", SYMLINK_DELAY_KNOB,
		   strerror(errno)))
		goto out;
	hp = lab_child_start(readlink_child, sv);
	if (!child_ready(hp)) {
		sh->phase = PH_EXIT;
		lab_child_kill(hp, 2000);
		set_symlink_delay(0);
		CHECK(0, "the reader did not start");
		goto out;
	}
	base = may_use();
	rp = rekey_start(mnt, "a1", KI_1, KI_2);
	CHECK(wait_move(base), "the rekey was not seen moving d: the race was not set up");
	sh->phase = PH_GO;
	err = rekey_finish(rp);
	if (!CHECK(lab_child_wait(hp, lab_now_ms() + 120000, &code) == LAB_CHILD_EXITED && !code,
		   "the reader ended with %d", code))
		lab_child_kill(hp, 2000);
	CHECK(set_symlink_delay(0) == 0, "reset %s", SYMLINK_DELAY_KNOB);
	CHECK(!err, "the rekey of %s failed: %s", sv, lab_errname(err));
	printf("   readlink during the rekey: %d %s, from %.2f s to %.2f s after the rekey began (it ended at %.2f s)\n",
	       sh->rl_ret, sh->rl_ret ? lab_errname(sh->rl_err) : "(success)",
	       (sh->rl_start_ms - sh->rk_start_ms) / 1000.0,
	       (sh->rl_end_ms - sh->rk_start_ms) / 1000.0,
	       (sh->rk_end_ms - sh->rk_start_ms) / 1000.0);
	CHECK(sh->rl_start_ms < sh->rk_end_ms, "the readlink began after the rekey: nothing raced");
	if (sh->rl_ret) {
		CHECK(sh->rl_err == EBUSY, "readlink during the rekey: %s (the target, or EBUSY)",
		      lab_errname(sh->rl_err));
	} else if (!CHECK(!strcmp(sh->rl_target, want),
			  "readlink during the rekey gave %zu bytes, not the target",
			  strlen(sh->rl_target))) {
		printf("   got: ");
		print_name(sh->rl_target);
		printf("\n");
	}
	check_target(q, want, "right after");
	lab_drop_caches("3");
	check_target(q, want, "after drop_caches");
	check_all_under(mnt, svid, KI_2, sv);
out:
	case_end_main(&c);
}

/* ---- N4 ------------------------------------------------------------------------------ */

static void case_n4(int keep_open)
{
	const char *svn = keep_open ? "n4a" : "n4b";
	char sv[PATH_MAX], p[PATH_MAX];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	const size_t len = 64 * 1024;
	unsigned char *data, *buf;
	uint32_t fl1 = 0, fl2 = 0;
	struct rcase c;
	ssize_t r;
	int fd, err, st, e;

	main_need();
	case_begin(&c, keep_open ? "n4_remove_k1_open" : "n4_remove_k1_closed",
		   keep_open ? "K1 removed while an old file that read K1 data is open, then again once closed"
			     : "K1 removed after an old file read K1 data and was closed");
	snap_of("tpl", svn, sv, sizeof(sv));
	PATHF(p, "%s/d/old-%s", sv, tag);
	data = lab_pattern(len, 0x4e34u + (unsigned)keep_open);
	buf = lab_xmalloc(len);
	if (write_file(p, data, len) || fsync_path(p))
		lab_die("write %s: %s", p, strerror(errno));
	sync();
	err = rekey_now(mnt, svn, KI_1, KI_2);
	if (!CHECK(!err, "the rekey of %s failed: %s", sv, lab_errname(err)))
		goto out;

	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (!CHECK(fd >= 0, "open %s: %s", p, strerror(errno)))
		goto out;
	r = lab_pread_full(fd, buf, len, 0);
	CHECK(r == (ssize_t)len && !memcmp(buf, data, len),
	      "%s (K1 data, K2 policy) does not read back before the removal", p);
	if (!keep_open) {
		close(fd);
		fd = -1;
	}
	if (!CHECK_OK(lab_remove_key(mnt, kid[KI_1], &fl1), "remove K1"))
		goto readd;
	printf("   remove K1 with the file %s: status flags 0x%x%s, key status %d\n",
	       keep_open ? "open" : "closed", fl1,
	       fl1 & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY ? " (FILES_BUSY)" : "",
	       lab_key_status(mnt, kid[KI_1]));
	if (keep_open) {
		close(fd);
		fd = -1;
		if (!CHECK_OK(lab_remove_key(mnt, kid[KI_1], &fl2), "remove K1 again"))
			goto readd;
		printf("   remove K1 again, the file closed: status flags 0x%x%s\n", fl2,
		       fl2 & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY ? " (FILES_BUSY)" : "");
		fl1 = fl2;
	}
	st = lab_key_status(mnt, kid[KI_1]);
	printf("   K1's status now: %d (%s)\n", st,
	       st == FSCRYPT_KEY_STATUS_ABSENT ? "absent" :
	       st == FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED ? "incompletely removed" :
	       st == FSCRYPT_KEY_STATUS_PRESENT ? "present" : "?");
	CHECK(!(fl1 & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY),
	      "removing K1 with every file closed still says FILES_BUSY");
	CHECK(st == FSCRYPT_KEY_STATUS_ABSENT, "K1's status after the removal is %d, expected ABSENT",
	      st);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (CHECK(fd >= 0, "open %s (its policy K2 is present): %s", p, strerror(errno))) {
		errno = 0;
		r = pread(fd, buf, len, 0);
		e = errno;
		if (r > 0)
			printf("   reading %s without K1 gave %zd bytes%s\n", p, r,
			       !memcmp(buf, data, (size_t)r) ? ", its K1 plaintext" : "");
		EXPECT_ERRNO(r, e, ENOKEY, "read %s (K1 extents) with K1 removed", p);
		close(fd);
	}
readd:
	if (lab_add_raw_key(mnt, mks[KI_1], MK_SIZE, id) || memcmp(id, kid[KI_1], sizeof(id)))
		lab_die("add K1 back: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	CHECK_FILE_EQUALS(p, data, len);
out:
	free(data);
	free(buf);
	case_end_main(&c);
}

/* ---- S1 ------------------------------------------------------------------------------- */

static void case_s1(void)
{
	char sv[PATH_MAX], p[PATH_MAX];
	unsigned char *data[NS1];
	uint64_t svid;
	struct rcase c;
	int err, i, bad = 0;

	main_need();
	case_begin(&c, "s1_unsynced_writes", "100 files written into d, not synced, then the rekey at once");
	svid = snap_of("tpl", "s1", sv, sizeof(sv));
	sync();
	for (i = 0; i < NS1; i++) {
		data[i] = lab_pattern(4096 + (size_t)i * 13, 0x5310u + (unsigned)i);
		PATHF(p, "%s/d/w%03d-%s", sv, i, tag);
		if (write_file(p, data[i], 4096 + (size_t)i * 13))
			lab_die("write %s: %s", p, strerror(errno));
	}
	err = rekey_now(mnt, "s1", KI_1, KI_2);
	CHECK(!err, "the rekey right after unsynced writes failed: %s", lab_errname(err));
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	for (i = 0; i < NS1; i++) {
		PATHF(p, "%s/d/w%03d-%s", sv, i, tag);
		bad += !CHECK_FILE_EQUALS(p, data[i], 4096 + (size_t)i * 13);
		free(data[i]);
	}
	printf("   %d of %d files read back\n", NS1 - bad, NS1);
	if (!err)
		check_all_under(mnt, svid, KI_2, sv);
	case_end_main(&c);
}

/* ---- N10 ------------------------------------------------------------------------------- */

static void case_n10(void)
{
	char sv[PATH_MAX], d[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	uint8_t ks[SHORT_KEY], id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	const uint8_t *k1[] = { kid[KI_1] };
	unsigned char *data[3];
	struct census cs;
	uint64_t svid;
	struct rcase c;
	int err, i;

	main_need();
	case_begin(&c, "n10_short_key",
		   "only regular files under K1 (in the unencrypted root), the new key 16 bytes");
	lab_btrfs_subvol(mnt, "n10", -1);
	PATHF(sv, "%s/n10", mnt);
	PATHF(d, "%s/d", sv);
	if (mkdir(d, 0755) || lab_set_policy(d, kid[KI_1]))
		lab_die("the policy K1 on %s: " LAB_ERR_FMT, d, LAB_ERR_ARGS(errno));
	for (i = 0; i < 3; i++) {
		data[i] = lab_pattern(8192 + (size_t)i, 0x4e10u + (unsigned)i);
		PATHF(p, "%s/f%d", d, i);
		PATHF(q, "%s/f%d", sv, i);
		if (write_file(p, data[i], 8192 + (size_t)i) || fsync_path(p) || rename(p, q))
			lab_die("write %s, mv to %s: %s", p, q, strerror(errno));
	}
	if (rmdir(d))
		lab_die("rmdir %s: %s", d, strerror(errno));
	sync();
	svid = subvol_id(sv);

	lab_random(ks, sizeof(ks));
	if (fref_key_identifier(ks, sizeof(ks), kid[KI_S]))
		lab_die("reference key identifier failed");
	kid_set[KI_S] = 1;
	if (!CHECK_OK(lab_add_raw_key(mnt, ks, sizeof(ks), id), "add a 16-byte key") ||
	    !CHECK(!memcmp(id, kid[KI_S], sizeof(id)), "the 16-byte key's identifier is not the model's"))
		goto out;
	census(mnt, svid, 0, &cs, "before");
	err = rekey_now(mnt, "n10", KI_1, KI_S);
	CHECK(err == ENOKEY || err == EINVAL,
	      "a rekey to a 16-byte key (AES-256-XTS needs 32): %s, expected ENOKEY or EINVAL",
	      err ? lab_errname(err) : "success");
	if (census(mnt, svid, 0, &cs, "after"))
		CHECK(cs.n[KI_1] == 3 && cs.total == 3,
		      "after the refused rekey: %zu of %zu contexts under K1, expected 3 of 3",
		      cs.n[KI_1], cs.total);
	lab_btrfs_check_key_records(sv, "n10 after the rekey to a 16-byte key", k1, 1);
	CHECK_OK(lab_drop_caches("2"), "drop caches");
	for (i = 0; i < 3; i++) {
		PATHF(q, "%s/f%d", sv, i);
		if (!CHECK_FILE_EQUALS(q, data[i], 8192 + (size_t)i) && access(q, R_OK) == 0) {
			int fd = open(q, O_RDONLY | O_CLOEXEC);

			printf("   open %s: %s\n", q, fd < 0 ? lab_errname(errno) : "ok");
			if (fd >= 0)
				close(fd);
		}
	}
out:
	for (i = 0; i < 3; i++)
		free(data[i]);
	case_end_main(&c);
}

/* ---- N6 ------------------------------------------------------------------------------- */

static char *n6_names[N6_NAMES];

static void tpl6_build(void)
{
	char p[PATH_MAX];
	long long t0 = lab_now_ms();
	int i, j;

	printf("-- tpl6: %d directories of %d names under the policy K1 on tpl6/m\n", N6_DIRS,
	       N6_NAMES);
	lab_btrfs_subvol(mnt, "tpl6", -1);
	PATHF(p, "%s/tpl6/m", mnt);
	if (mkdir(p, 0755) || lab_set_policy(p, kid[KI_1]))
		lab_die("the policy K1 on %s: " LAB_ERR_FMT, p, LAB_ERR_ARGS(errno));
	for (j = 0; j < N6_NAMES; j++)
		if (!n6_names[j])
			n6_names[j] = gen_name(24, 'f', (unsigned)j);
	for (i = 0; i < N6_DIRS; i++) {
		PATHF(p, "%s/tpl6/m/d%02d", mnt, i);
		if (mkdir(p, 0755))
			lab_die("mkdir %s: %s", p, strerror(errno));
		for (j = 0; j < N6_NAMES; j++) {
			PATHF(p, "%s/tpl6/m/d%02d/%s", mnt, i, n6_names[j]);
			touch(p);
		}
	}
	sync();
	printf("   built in %.1f s\n", (lab_now_ms() - t0) / 1000.0);
	tpl6_ok = 1;
}

static void case_n6(int back)
{
	const char *svn = back ? "n6b" : "n6a";
	char sv[PATH_MAX], p[PATH_MAX];
	uint64_t svid, ino[N6_DIRS + 1];
	int i, k, n[KI_MAX] = { 0 }, err, code = -1, to = back ? KI_1 : KI_2, fd;
	int edges = 0, high = 0;
	long long t0, t_first = 0, base, v;
	struct rcase c;
	pid_t rp;

	main_need();
	if (!tpl6_ok)
		tpl6_build();
	case_begin(&c, back ? "n6_back" : "n6_rerun",
		   back ? "a rekey K1 -> K2 killed part way, then a rekey back K2 -> K1"
			: "a rekey K1 -> K2 killed part way, then the same rekey again");
	svid = snap_of("tpl6", svn, sv, sizeof(sv));
	PATHF(p, "%s/m", sv);
	ino[0] = ino_of(p);
	for (i = 0; i < N6_DIRS; i++) {
		PATHF(p, "%s/m/d%02d", sv, i);
		ino[i + 1] = ino_of(p);
	}
	sync();
	shared_reset();
	base = may_use();
	rp = rekey_start(mnt, svn, KI_1, KI_2);
	t0 = lab_now_ms();
	/*
	 * Each directory's transaction raises bytes_may_use by a few MiB while
	 * it runs (the key record's by less); kill once the third directory's
	 * began (m and d00 moved), or 600 ms after the first's.
	 */
	while (!sh->rk_done && lab_now_ms() - t0 < 300000) {
		v = may_use();
		if (!high && v > base + (3LL << 19)) {
			high = 1;
			if (!edges++)
				t_first = lab_now_ms();
		} else if (high && v < base + (1LL << 20)) {
			high = 0;
		}
		if (edges >= 3 || (edges && lab_now_ms() - t_first >= 600))
			break;
		usleep(300);
	}
	kill(rp, SIGKILL);
	printf("   SIGKILL %.2f s after the rekey began, %d directory transactions seen (bytes_may_use %lld KiB before)\n",
	       (lab_now_ms() - t0) / 1000.0, edges, base >> 10);
	if (!CHECK(lab_child_wait(rp, lab_now_ms() + 300000, &code) != LAB_CHILD_TIMEOUT,
		   "the killed rekey did not end within 300 s"))
		lab_child_kill(rp, 2000);
	CHECK(!sh->rk_done, "the rekey ended (%d %s) before it was killed: nothing was interrupted",
	      sh->rk_ret, lab_errname(sh->rk_err));
	for (i = 0; i <= N6_DIRS; i++) {
		k = ctx_key(mnt, svid, ino[i], NULL, NULL);
		n[k < 0 ? 0 : k]++;
	}
	printf("   after the kill: of m and its %d directories, %d under K1, %d under K2, %d neither\n",
	       N6_DIRS, n[KI_1], n[KI_2], n[KI_NONE]);
	CHECK(n[KI_1] > 0 && n[KI_2] > 0 && n[KI_1] + n[KI_2] == N6_DIRS + 1,
	      "the kill did not leave some directories under K1 and some under K2 (%d, %d, %d neither)",
	      n[KI_1], n[KI_2], n[KI_NONE]);

	err = back ? rekey_now(mnt, svn, KI_2, KI_1) : rekey_now(mnt, svn, KI_1, KI_2);
	CHECK(!err, "the rekey %s after the interrupted one failed: %s",
	      back ? "back K2 -> K1" : "K1 -> K2 again", lab_errname(err));
	CHECK_OK(lab_drop_caches("2"), "drop caches");
	check_all_under(mnt, svid, to, sv);
	for (i = 0; i < N6_DIRS; i++) {
		PATHF(p, "%s/m/d%02d", sv, i);
		if (!check_names(p, n6_names, N6_NAMES, "after the second rekey"))
			break;
		PATHF(p, "%s/m/d%02d/%s", sv, i, n6_names[i % N6_NAMES]);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (!CHECK(fd >= 0, "open %s: %s", p, strerror(errno)))
			break;
		close(fd);
	}
	case_end_main(&c);
}

/* ---- the second filesystem -------------------------------------------------------------- */

static int mount2(const char *opts)
{
	if (!CHECK_OK(lab_mount(dev2, mnt2, "btrfs", opts), "mount %s on %s (options \"%s\")", dev2,
		      mnt2, opts ? opts : ""))
		return 0;
	add_keys(mnt2);
	return 1;
}

static int mkfs2(const char *cmd)
{
	lab_umount(mnt2);
	return CHECK(lab_mkfs(cmd, dev2) == 0, "%s %s", cmd, dev2);
}

static void flush_dev(const char *d)
{
	int fd = open(d, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ioctl(fd, BLKFLSBUF, 0);
		close(fd);
	}
}

/* The leaf blocks of tree @tree, for crafting; returns how many (up to @max). */
static size_t tree_leaves(const struct braw_fs *fs, uint64_t tree, uint64_t *out, size_t max,
			  size_t *all)
{
	struct braw_block *b = NULL;
	size_t n = 0, i, k = 0;

	*all = 0;
	if (!CHECK_OK(braw_live_blocks(fs, &b, &n), "walk the trees of %s", fs->dev))
		return 0;
	for (i = 0; i < n; i++) {
		if (b[i].tree != tree)
			continue;
		(*all)++;
		if (b[i].level == 0 && k < max)
			out[k++] = b[i].logical;
	}
	free(b);
	return k;
}

/* ---- N9 ------------------------------------------------------------------------------- */

static void case_n9(void)
{
	const size_t off = offsetof(struct btrfs_root_item, flags);
	char sv[PATH_MAX], d[PATH_MAX], f[PATH_MAX], ere[256];
	unsigned char ri[512], *blk = NULL, *data = NULL, *fl;
	const uint8_t *k1[] = { kid[KI_1] };
	uint64_t svid = 0, d_ino, f_ino, flags = 0, leaves[64];
	size_t nl, all, i, changed = 0;
	struct braw_fs fs;
	struct braw_key key;
	struct census cs;
	struct rcase c;
	uint32_t slot;
	int err, len;

	case_begin(&c, "n9_inode_keys_flag",
		   "a per-inode-key file in a subvolume whose root flag was cleared offline");
	if (!mkfs2("mkfs.btrfs -q -f") || !mount2(LAB_BTRFS_PER_INODE_KEYS_OPT))
		goto out;
	lab_btrfs_subvol(mnt2, "svi", -1);
	PATHF(sv, "%s/svi", mnt2);
	PATHF(d, "%s/d", sv);
	PATHF(f, "%s/f", d);
	data = lab_pattern(3 * 4096, 0x4e39u);
	if (mkdir(d, 0755) || lab_set_policy(d, kid[KI_1]) || write_file(f, data, 3 * 4096) ||
	    fsync_path(f))
		lab_die("svi/d/f: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	d_ino = ino_of(d);
	f_ino = ino_of(f);
	if (CHECK_OK(lab_btrfs_inode_flags(sv, f_ino, &flags), "inode flags of %s", f) &&
	    !((flags & LAB_BTRFS_INODE_ENCRYPT) && !(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT))) {
		case_skip(&c, "the file made with fscrypt_per_inode_keys is not per-inode");
		lab_umount(mnt2);
		goto free;
	}
	sync();
	len = lab_btrfs_root_item(sv, &svid, ri, sizeof(ri));
	if (!CHECK(len >= (int)(off + 8), "the root item of %s: %d bytes", sv, len) ||
	    !CHECK(braw_le64(ri + off) & ROOT_SUBVOL_FSCRYPT_INODE_KEYS,
		   "the root item of %s lacks BTRFS_ROOT_SUBVOL_FSCRYPT_INODE_KEYS (flags 0x%llx)",
		   sv, (unsigned long long)braw_le64(ri + off)))
		goto out;
	printf("   subvolume %llu: root flags 0x%llx, f is ino %llu (per-inode key)\n",
	       (unsigned long long)svid, (unsigned long long)braw_le64(ri + off),
	       (unsigned long long)f_ino);
	if (!CHECK_OK(lab_umount(mnt2), "umount %s", mnt2))
		goto out;

	/* clear the flag in the root tree's leaf, offline */
	if (!CHECK_OK(braw_open(&fs, dev2), "open the unmounted btrfs on %s", dev2))
		goto out;
	blk = lab_xmalloc(fs.nodesize);
	nl = tree_leaves(&fs, BTRFS_ROOT_TREE_OBJECTID, leaves, 64, &all);
	for (i = 0; i < nl; i++) {
		if (braw_read_block(&fs, leaves[i], blk))
			continue;
		key.objectid = svid;
		key.type = BTRFS_ROOT_ITEM_KEY;
		key.offset = 0;
		if (braw_leaf_find(blk, &key, NULL) < 0)
			continue;
		slot = (uint32_t)braw_leaf_find(blk, &key, NULL);
		if (braw_item_size(blk, slot) < off + 8)
			continue;
		fl = blk + braw_item_start(blk, slot) + off;
		braw_put_le64(fl, braw_le64(fl) & ~ROOT_SUBVOL_FSCRYPT_INODE_KEYS);
		if (CHECK_OK(braw_write_block(&fs, leaves[i], blk), "write the root tree leaf"))
			changed++;
	}
	braw_close(&fs);
	flush_dev(dev2);
	if (!CHECK(changed == 1, "cleared the flag in %zu root items, expected 1", changed))
		goto out;
	if (!mount2(NULL))
		goto out;
	len = lab_btrfs_root_item(sv, &svid, ri, sizeof(ri));
	if (!CHECK(len >= (int)(off + 8) && !(braw_le64(ri + off) & ROOT_SUBVOL_FSCRYPT_INODE_KEYS),
		   "the root flag is still set after the crafting"))
		goto out;
	printf("   mounted again: root flags 0x%llx\n", (unsigned long long)braw_le64(ri + off));

	err = rekey_now(mnt2, "svi", KI_1, KI_2);
	CHECK(err == EUCLEAN, "the rekey of a subvolume with a per-inode-key file and no root flag: %s, expected EUCLEAN",
	      err ? lab_errname(err) : "success");
	snprintf(ere, sizeof(ere), "ino %llu|inode %llu|subvolume %llu|root %llu",
		 (unsigned long long)f_ino, (unsigned long long)f_ino,
		 (unsigned long long)svid, (unsigned long long)svid);
	if (err == EUCLEAN)
		CHECK(lab_log_has(ere), "no kernel log line names ino %llu or subvolume %llu",
		      (unsigned long long)f_ino, (unsigned long long)svid);
	if (census(mnt2, svid, 0, &cs, "after"))
		CHECK(cs.n[KI_1] == 2 && cs.total == 2,
		      "after the rekey: %zu of %zu contexts under K1 (d is ino %llu, f %llu), expected 2 of 2",
		      cs.n[KI_1], cs.total, (unsigned long long)d_ino, (unsigned long long)f_ino);
	lab_btrfs_check_key_records(sv, "svi after the rekey", k1, 1);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(f, data, 3 * 4096);
	fs_healthy(mnt2, 0);
	lab_umount(mnt2);
	case_result(&c, NULL);
	goto free;
out:
	lab_umount(mnt2);
	case_result(&c, NULL);
free:
	free(blk);
	free(data);
}

/* ---- N5 ------------------------------------------------------------------------------- */

static void case_n5(void)
{
	char sv[PATH_MAX], pd[PATH_MAX], qd[PATH_MAX], f[PATH_MAX];
	unsigned char rec[LAB_BTRFS_FSCRYPT_KEY_ITEM_SIZE], *blk = NULL;
	uint8_t kb[MK_SIZE], id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint64_t svid, leaves[4], prefix;
	struct lab_btrfs_item *it = NULL;
	size_t nl, all, n = 0, i, j, found_b, found_x;
	struct braw_fs fs;
	struct braw_key key;
	struct rcase c;
	int r, e, k, perr, ok = 0;
	const char *fdata = "written under Kb after the collision";

	case_begin(&c, "n5_record_collision",
		   "a crafted key record with Kb's 8-byte prefix and another identifier, then a policy of Kb");
	lab_random(kb, sizeof(kb));
	if (fref_key_identifier(kb, sizeof(kb), kid[KI_B]))
		lab_die("reference key identifier failed");
	kid_set[KI_B] = 1;
	prefix = braw_le64(kid[KI_B]);
	if (!mkfs2("mkfs.btrfs -q -f") || !mount2(NULL))
		goto out;
	lab_btrfs_subvol(mnt2, "svk", -1);
	PATHF(sv, "%s/svk", mnt2);
	PATHF(pd, "%s/p", sv);
	PATHF(qd, "%s/q", sv);
	PATHF(f, "%s/q/f", sv);
	if (mkdir(pd, 0755) || mkdir(qd, 0755) || lab_set_policy(qd, kid[KI_1]) ||
	    write_file(f, tag, sizeof(tag)) || fsync_path(f))
		lab_die("svk: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	sync();
	svid = subvol_id(sv);
	if (!CHECK_OK(lab_umount(mnt2), "umount %s", mnt2))
		goto out;

	/* the record [256, 47, prefix of Kb]: Kb's first 8 bytes, then others */
	memcpy(rec, kid[KI_B], 8);
	for (i = 8; i < FSCRYPT_KEY_IDENTIFIER_SIZE; i++)
		rec[i] = kid[KI_B][i] ^ 0xa5;
	braw_put_le64(rec + FSCRYPT_KEY_IDENTIFIER_SIZE, 0);
	if (!CHECK_OK(braw_open(&fs, dev2), "open the unmounted btrfs on %s", dev2))
		goto out;
	blk = lab_xmalloc(fs.nodesize);
	nl = tree_leaves(&fs, svid, leaves, 4, &all);
	if (nl != 1 || all != 1) {
		braw_close(&fs);
		case_skip(&c, "the subvolume's tree is not a single leaf, which the crafting needs");
		free(blk);
		return;
	}
	key.objectid = ROOT_INO;
	key.type = LAB_BTRFS_FSCRYPT_KEY_ITEM_KEY;
	key.offset = prefix;
	if (CHECK_OK(braw_read_block(&fs, leaves[0], blk), "read the subvolume's leaf") &&
	    CHECK_OK(braw_item_insert(blk, fs.nodesize, &key, rec, sizeof(rec),
				      BRAW_INSERT_ROOT_LEAF, NULL), "insert the crafted record") &&
	    CHECK_OK(braw_write_block(&fs, leaves[0], blk), "write the subvolume's leaf"))
		ok = 1;
	braw_close(&fs);
	flush_dev(dev2);
	if (!ok || !mount2(NULL))
		goto out;
	if (!CHECK_OK(lab_add_raw_key(mnt2, kb, sizeof(kb), id), "add Kb") ||
	    !CHECK(!memcmp(id, kid[KI_B], sizeof(id)), "Kb's identifier is not the model's"))
		goto out;
	printf("   crafted record at offset 0x%016llx in subvolume %llu; Kb's identifier differs from it in the last 8 bytes\n",
	       (unsigned long long)prefix, (unsigned long long)svid);

	errno = 0;
	r = lab_set_policy(pd, kid[KI_B]);
	e = errno;
	printf("   the policy Kb on svk/p: %d %s\n", r, r ? lab_errname(e) : "(success)");
	CHECK(!r || e == EEXIST, "the policy Kb beside a colliding record: %s, expected success or EEXIST",
	      lab_errname(e));
	k = policy_key(pd, &perr);
	found_b = found_x = 0;
	if (CHECK_OK(lab_btrfs_search_tree(mnt2, svid, ROOT_INO, LAB_BTRFS_FSCRYPT_KEY_ITEM_KEY,
					   &it, &n), "search the key records")) {
		for (i = 0; i < n; i++) {
			printf("   record [256 47 0x%016llx], %u bytes\n",
			       (unsigned long long)it[i].offset, it[i].len);
			for (j = 0; j + FSCRYPT_KEY_IDENTIFIER_SIZE <= it[i].len; j++) {
				found_b += !memcmp(it[i].data + j, kid[KI_B], FSCRYPT_KEY_IDENTIFIER_SIZE);
				found_x += !memcmp(it[i].data + j, rec, FSCRYPT_KEY_IDENTIFIER_SIZE);
			}
		}
		lab_btrfs_items_free(it, n);
	}
	CHECK(found_x == 1, "the crafted identifier is recorded %zu times, expected once", found_x);
	if (!r) {
		CHECK(k == KI_B, "p: its policy is %s after success", k < 0 ? "none" : kname[k]);
		CHECK(found_b == 1, "Kb is recorded %zu times after the policy was set, expected once",
		      found_b);
		PATHF(f, "%s/p/g", sv);
		if (CHECK_OK(write_file(f, fdata, strlen(fdata)), "write %s", f)) {
			CHECK_OK(lab_drop_caches("3"), "drop caches");
			CHECK_FILE_EQUALS(f, fdata, strlen(fdata));
		}
	} else if (e == EEXIST) {
		CHECK(k < 0 && perr == ENODATA, "p has a policy (%s) though setting it failed",
		      k < 0 ? lab_errname(perr) : kname[k]);
		CHECK(found_b == 0, "Kb is recorded though setting its policy failed");
		CHECK(n == 2, "%zu key records, expected K1's and the crafted one", n);
	}
	PATHF(f, "%s/q/f", sv);
	CHECK_FILE_EQUALS(f, tag, sizeof(tag));
	if (fs_healthy(mnt2, 0) && CHECK_OK(lab_umount(mnt2), "umount %s", mnt2) && !r) {
		if (have_progs)
			lab_btrfs_check_clean(dev2, "the filesystem with two identifiers of one prefix");
		else
			printf("   no btrfs check: %s\n", progs_why);
	}
	case_result(&c, NULL);
	free(blk);
	return;
out:
	lab_umount(mnt2);
	case_result(&c, NULL);
	free(blk);
}

/* ---- S2 ------------------------------------------------------------------------------- */

static void case_s2(void)
{
	char sv[PATH_MAX], x[PATH_MAX], p[PATH_MAX], filler[PATH_MAX];
	unsigned char *val;
	char **names;
	struct census cs;
	uint64_t svid;
	off_t chunk, total = 0;
	struct rcase c;
	int i, fd, err, from;
	long long t0;

	case_begin(&c, "s2_xattr_children",
		   "a directory of children with 12000-byte xattrs, data space filled, on a 256 MiB filesystem");
	if (!mkfs2("mkfs.btrfs -q -f -b 256M -m single -d single") || !mount2(NULL))
		goto out_nofree;
	lab_btrfs_subvol(mnt2, "svx", -1);
	PATHF(sv, "%s/svx", mnt2);
	PATHF(x, "%s/x", sv);
	if (mkdir(x, 0755) || lab_set_policy(x, kid[KI_1]))
		lab_die("the policy K1 on %s: " LAB_ERR_FMT, x, LAB_ERR_ARGS(errno));
	val = lab_pattern(S2_XATTR, 0x5332u);
	names = lab_xmalloc(NS2 * sizeof(*names));
	t0 = lab_now_ms();
	for (i = 0; i < NS2; i++) {
		names[i] = lab_xmalloc(16);
		snprintf(names[i], 16, "c%04d", i);
		PATHF(p, "%s/%s", x, names[i]);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || fsetxattr(fd, "user.big", val, S2_XATTR, 0))
			lab_die("%s with a %d-byte xattr: %s", p, S2_XATTR, strerror(errno));
		close(fd);
	}
	sync();
	printf("   %d children with a %d-byte xattr each in %.1f s\n", NS2, S2_XATTR,
	       (lab_now_ms() - t0) / 1000.0);
	svid = subvol_id(sv);

	/* with room: the whole move, each name's inode ref in a leaf of its own */
	err = rekey_now(mnt2, "svx", KI_1, KI_2);
	CHECK(!err, "the rekey K1 -> K2 with free space: %s", lab_errname(err));
	if (!err) {
		check_all_under(mnt2, svid, KI_2, sv);
		check_names(x, names, NS2, "after the rekey");
	}
	run("btrfs filesystem df %s", mnt2);

	/* the data space filled: the metadata has what it has */
	PATHF(filler, "%s/filler", mnt2);
	fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		lab_die("create %s: %s", filler, strerror(errno));
	for (chunk = 128 << 20; chunk >= 1 << 20;) {
		if (fallocate(fd, 0, total, chunk) == 0)
			total += chunk;
		else
			chunk /= 2;
	}
	close(fd);
	sync();
	printf("   the data space filled: %lld MiB preallocated\n", (long long)(total >> 20));
	run("btrfs filesystem df %s", mnt2);
	census(mnt2, svid, 0, &cs, "before");
	from = err ? KI_1 : KI_2;
	err = rekey_now(mnt2, "svx", from, 3 - from);
	CHECK(!err || err == ENOSPC, "the rekey %s -> %s with the space filled: %s, expected success or ENOSPC",
	      kname[from], kname[3 - from], lab_errname(err));
	if (!err) {
		check_all_under(mnt2, svid, 3 - from, sv);
		check_names(x, names, NS2, "after the rekey with the space filled");
	} else if (err == ENOSPC && census(mnt2, svid, 0, &cs, "after ENOSPC")) {
		CHECK(cs.n[from] == cs.total && cs.total == NS2 + 1,
		      "after ENOSPC: %zu of %zu contexts under %s, expected all %d", cs.n[from],
		      cs.total, kname[from], NS2 + 1);
	}
	unlink(filler);
	sync();
	if (err == ENOSPC) {
		/*
		 * The space back: the filler deleted and its now empty data
		 * chunks given back, the same rekey completes.
		 */
		if (run("btrfs balance start -dusage=0 %s", mnt2) != 0) {
			printf("   the empty data chunks could not be given back (the balance failed): the rekey is not run again\n");
		} else {
			run("btrfs filesystem df %s", mnt2);
			err = rekey_now(mnt2, "svx", from, 3 - from);
			CHECK(!err, "the same rekey once the space is back: %s", lab_errname(err));
			check_all_under(mnt2, svid, 3 - from, sv);
			check_names(x, names, NS2, "after the rekey with the space back");
		}
	}
	fs_healthy(mnt2, 1);
	if (CHECK_OK(lab_umount(mnt2), "umount %s", mnt2)) {
		if (have_progs)
			lab_btrfs_check_clean(dev2, "the small filesystem after the rekey");
		else
			printf("   no btrfs check: %s\n", progs_why);
	}
	for (i = 0; i < NS2; i++)
		free(names[i]);
	free(names);
	free(val);
	case_result(&c, NULL);
	return;
out_nofree:
	lab_umount(mnt2);
	case_result(&c, NULL);
}

#ifndef RACE_CASES_DEFAULT
#define RACE_CASES_DEFAULT ""
#endif

/* Is case @name selected (RACE_CASES=a,b; default: every case)? */
static int want(const char *name)
{
	char pat[64];

	if (!only_cases || !*only_cases)
		return 1;
	snprintf(pat, sizeof(pat), ",%s,", name);
	return strstr(only_cases, pat) != NULL;
}

/* ---- main ------------------------------------------------------------------------------ */

static void probe_rekey(void)
{
	struct fscrypt_policy_v2 p;
	rk_args_t a;

	lab_default_policy(&p, kid[KI_2]);
	lab_rekey_args(&a, "no-such-subvolume", kid[KI_1], &p);
	a.flags = 1;
	if (lab_rekey_at(mnt, &a) == 0)
		CHECK(0, "a rekey with flags 1 succeeded");
	else if (errno == ENOTTY)
		lab_skip("the kernel's btrfs has no BTRFS_IOC_FSCRYPT_REKEY (ENOTTY)");
}

int main(void)
{
	static char cases_buf[512];
	const char *cases;
	size_t i;
	int k;

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) != 0)
		lab_skip("the kernel does not advertise per-extent keys on btrfs (no %s)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	dev2 = lab_env("SCRATCH_DEV2");
	mnt2 = lab_env("SCRATCH_MNT2");
	if (fref_selftest())
		lab_die("the reference model fails its own self-test");
	lab_random_hex(tag, 8);
	for (k = KI_1; k <= KI_2; k++) {
		lab_random(mks[k], MK_SIZE);
		if (fref_key_identifier(mks[k], MK_SIZE, kid[k]))
			lab_die("reference key identifier failed");
		kid_set[k] = 1;
	}
	have_progs = lab_btrfs_progs_patched(progs_why, sizeof(progs_why));
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		lab_die("mmap: %s", strerror(errno));
	cases = getenv("RACE_CASES");
	if (!cases)
		cases = RACE_CASES_DEFAULT;
	if (*cases) {
		snprintf(cases_buf, sizeof(cases_buf), ",%s,", cases);
		only_cases = cases_buf;
	}
	if (getenv("RACE_NBIG"))
		nbig = strtoul(getenv("RACE_NBIG"), NULL, 0);
	if (nbig < 2 || nbig > NBIG_MAX)
		lab_die("RACE_NBIG=%zu: 2 to %d", nbig, NBIG_MAX);
	printf("run tag %s; %zu names in tpl/d; cases: %s\n", tag, nbig, *cases ? cases : "all");

	main_build();
	probe_rekey();

	if (want("n1_cwd_stat_opath"))
		case_n1(0);
	if (want("n1_subvol_mount"))
		case_n1(1);
	if (want("n3_rmdir_dir"))
		case_n3(1);
	if (want("n3_unlink_symlink"))
		case_n3(2);
	if (want("a1_readlink_straddles"))
		case_a1();
	if (want("n4_remove_k1_open"))
		case_n4(1);
	if (want("n4_remove_k1_closed"))
		case_n4(0);
	if (want("s1_unsynced_writes"))
		case_s1();
	if (want("n10_short_key"))
		case_n10();
	if (want("n6_rerun"))
		case_n6(0);
	if (want("n6_back"))
		case_n6(1);
	if (want("n2_user_set_policy"))
		case_n2();
	if (want("n3_unlink_file"))
		case_n3(0);
	if (main_ok && fs_healthy(mnt, 0) && CHECK_OK(lab_umount(mnt), "umount %s", mnt)) {
		if (have_progs)
			lab_btrfs_check_clean(dev, "the main filesystem after the cases");
		else
			printf("no btrfs check of the main filesystem: %s\n", progs_why);
	}

	if (want("n9_inode_keys_flag"))
		case_n9();
	if (want("n5_record_collision"))
		case_n5();
	if (want("s2_xattr_children"))
		case_s2();

	printf("\n== summary\n");
	for (i = 0; i < nresults; i++)
		printf("%-22s %s (%d failed checks, %.1f s)\n", results[i].name, results[i].status,
		       results[i].failures, results[i].secs);
	return lab_result("btrfs_fscrypt_rekey_race");
}
