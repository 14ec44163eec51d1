// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_rekey_adversary - BTRFS_IOC_FSCRYPT_REKEY beside everything
 * else that other tasks, some of them unprivileged, may do to the
 * subvolume meanwhile (issue #33, item 5; review 2026-12-07 N1-N3).
 *
 * Subvolume sv has an unencrypted root holding the plain directories
 * plain.0 and plain.1 and the directories enc.0 .. enc.5 under the default
 * v2 policy of K1, each with three subdirectories, 12 files and 2 symlinks
 * per directory (names of 6 to 255 bytes).  A second mount
 * (`-o subvol=sv`) shows the same subvolume.  Keys K1, K2 (root's) and K3
 * (uid 1002's own) are random per run (from the seed).  For a duration
 * (REKEY_ADVERSARY_SECONDS or the first argument, default 75 s), these
 * tasks run at once:
 *
 *  rekey        (root) BTRFS_IOC_FSCRYPT_REKEY of sv to the other key of K1
 *               and K2, in a loop; after a success the direction flips,
 *               and the next rekey starts after a random pause of up to
 *               the last one's time (at most 8 s).
 *               Three rekeys in four first raise a gate: the tasks below
 *               that hold inodes let go and wait a random 0-400 ms (at
 *               most half the last rekey's time), so that the rekey can
 *               start (a held encrypted inode makes it EBUSY) and the
 *               tasks come back while it runs.  EBUSY and
 *               ENOKEY (a key removed meanwhile) are expected; any other
 *               error is a failure;
 *  holder-uid1001, holder-mnt2
 *               stat and hold (O_PATH, for up to 1.5 s) encrypted
 *               directories and files reached through unencrypted parents
 *               (sv's root, plain.*), from a descriptor of sv (uid 1001,
 *               which also keeps its cwd in encrypted directories) or of
 *               the second mount's root (root, which also opens file
 *               handles with open_by_handle_at()); list directories;
 *  data-mnt2, data-uid1001, data-uid1002
 *               create, write (rewrite, overwrite, append, fdatasync),
 *               read and compare, rename, move encrypted files out into
 *               unencrypted directories, hard-link, unlink (moved-out
 *               files first), symlink and readlink, reflink (FICLONE)
 *               between their own encrypted files of any key, mkdir and
 *               rmdir (in encrypted and unencrypted directories), set a
 *               policy of K1, K2 or K3 on a new empty directory, list
 *               directories; the unprivileged ones add their own claims of
 *               the keys again from time to time, and uid 1002 tries a
 *               rekey (EPERM).  Each keeps a model of its own files;
 *  keys         (root) every 5-15 s removes K1, K2 or K3 (its own claim,
 *               or all users'), and adds it back 0.2-1.2 s later;
 *  snapshots    (root) snapshots sv (read-only or not) into another
 *               directory, keeping the last three (EBUSY during a rekey).
 *
 * Every operation's result is counted by errno; EBUSY, ENOKEY, EPERM,
 * EXDEV and the like across a key boundary are expected and only counted.
 * Failures during the run: a listed name that is neither a name of the
 * test nor a no-key name (a name decrypted with a wrong key), a file or
 * symlink target that reads back different from its model (a symlink
 * target in its no-key form only while the keys task has a key out:
 * fscrypt's answer when it cannot set up the symlink's key), EIO or EUCLEAN
 * from any operation, a rekey error other than EBUSY and ENOKEY, a snapshot
 * error other than EBUSY, a task that dies or hangs.  The parent reads
 * /dev/kmsg all along ("Transaction aborted", "forced readonly", "BTRFS
 * error", a splat fail the test) and checks every 2 s that /proc/mounts
 * says rw and that a write and fdatasync work; the run stops early when
 * the filesystem went read-only.
 *
 * Afterwards (all tasks stopped, all keys added by root): the rekey of sv
 * back to the key the loop last moved it to, run to completion, and then
 * again, which must move nothing; unmount; the patched `btrfs check
 * --readonly` is clean; mount again, add the keys, then, by tree search,
 * every directory of sv and of the snapshots left: each name decrypts
 * (OpenSSL model) under its directory's own context key to a name of the
 * test, DIR_ITEMs and DIR_INDEXes hold the same names and every child's
 * INODE_REF the same, a child of an encrypted directory has its key, every
 * symlink target decrypts under its own key, the encryption flag agrees
 * with the context, and no context of sv names the key the final rekey
 * moved away from; by path, every name listed is a name of the test, and
 * every static file and every file of a model whose contents are known
 * reads back right, every symlink target too.  The verifier is checked
 * first on the fresh tree: it passes, and fails every encrypted name with
 * K1 and K2 swapped (control); the name decryption is checked against
 * fref_encrypt_name().  A second control checks that a symlink whose key
 * is half removed reads back in its no-key form, the one exemption of the
 * comparisons.
 *
 * REKEY_ADVERSARY_SEED sets the seed (default random; printed),
 * REKEY_ADVERSARY_SKIP=op,op leaves operations out (names as in the final
 * table, e.g. setpolicy), REKEY_ADVERSARY_FIGURES names the figures file
 * (default $RESULTS/rekey-adversary-figures.tsv), for tests/run-rekey-adversary.sh.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "btrfs_rekey.h"
#include "fscrypt_fs.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "lab_child.h"

#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

typedef struct btrfs_ioctl_fscrypt_rekey_args rk_args_t;

/* ---- constants -------------------------------------------------------------------------- */

#define DEFAULT_SECONDS		75
#define MKFS			"mkfs.btrfs -q -f"
#define NTOP			6		/* enc.0 .. enc.5 */
#define NSUB			3		/* sub.0 .. sub.2 in each */
#define NSDIRS			(NTOP * (1 + NSUB))
#define NSFILES			12		/* static files per directory */
#define NSLINKS			2		/* static symlinks per directory */
#define NSENTS			(NSDIRS * (NSFILES + NSLINKS))
#define SFILE_MAX		(12u * 1024)
#define REL_MAX			600
#define TGT_MAX			128
#define MF			40		/* files (and symlinks) per data task */
#define MD			10		/* own directories per data task */
#define FMAX			(32u * 1024)
#define NHOLD			16
#define NHANDLES		12
#define NFOUND			64
#define ERRMAX			160		/* counters per errno; the last: other */
#define ERR_SHORT		(ERRMAX - 1)	/* a short write or read */
#define NFAILMSG		40
#define UID_A			1001
#define UID_B			1002
#define GATE_ACK_MS		3000
#define GATE_MAX_MS		400
#define HOLD_MAX_MS		1500
#define STOP_WAIT_S		300
#define CTX_SIZE		40
#define CTX_FLAGS_OFF		3
#define CTX_ID_OFF		8
#define CTX_NONCE_OFF		24
#define DI_SIZE			30		/* struct btrfs_dir_item */
#define DI_DATA_LEN_OFF		25
#define DI_NAME_LEN_OFF		27
#define DI_TYPE_OFF		29
#define IREF_SIZE		10		/* struct btrfs_inode_ref */
#define EXTREF_SIZE		18		/* struct btrfs_inode_extref */
#define FE_INLINE_OFF		21		/* inline data in a file extent item */
#define FE_TYPE_OFF		20
#define SEARCH_BUF		(64u << 10)

/* ---- the tasks and their operations ------------------------------------------------------- */

enum { W_REKEY, W_HOLD_A, W_HOLD_B, W_DATA_A, W_DATA_B, W_DATA_C, W_KEYS, W_SNAP, W_NR };
#define NDATA 3

static const struct {
	const char *name;
	uid_t uid;
	int mnt2;		/* works through the second mount */
} wdesc[W_NR] = {
	[W_REKEY] = { "rekey", 0, 0 },
	[W_HOLD_A] = { "holder-uid1001", UID_A, 0 },
	[W_HOLD_B] = { "holder-mnt2", 0, 1 },
	[W_DATA_A] = { "data-mnt2", 0, 1 },
	[W_DATA_B] = { "data-uid1001", UID_A, 0 },
	[W_DATA_C] = { "data-uid1002", UID_B, 0 },
	[W_KEYS] = { "keys", 0, 0 },
	[W_SNAP] = { "snapshots", 0, 0 },
};

/* The tasks a rekey's gate waits for. */
static const int gated[] = { W_HOLD_A, W_HOLD_B, W_DATA_A, W_DATA_B, W_DATA_C };

enum {
	OP_REKEY, OP_REKEY_UNPRIV, OP_STAT, OP_HOLD, OP_HANDLE, OP_CHDIR, OP_READDIR,
	OP_SETPOLICY, OP_MKDIR, OP_RMDIR, OP_CREATE, OP_WRITE, OP_FSYNC, OP_READ,
	OP_RENAME, OP_MOVEOUT, OP_LINK, OP_UNLINK, OP_SYMLINK, OP_READLINK, OP_REFLINK,
	OP_ADDKEY, OP_RMKEY, OP_SNAPSHOT, OP_SNAPDEL, OP_NR
};

static const char *const op_name[OP_NR] = {
	[OP_REKEY] = "rekey", [OP_REKEY_UNPRIV] = "rekey-unpriv", [OP_STAT] = "stat",
	[OP_HOLD] = "hold", [OP_HANDLE] = "handle", [OP_CHDIR] = "chdir",
	[OP_READDIR] = "readdir", [OP_SETPOLICY] = "setpolicy", [OP_MKDIR] = "mkdir",
	[OP_RMDIR] = "rmdir", [OP_CREATE] = "create", [OP_WRITE] = "write",
	[OP_FSYNC] = "fdatasync", [OP_READ] = "read", [OP_RENAME] = "rename",
	[OP_MOVEOUT] = "moveout", [OP_LINK] = "link", [OP_UNLINK] = "unlink",
	[OP_SYMLINK] = "symlink", [OP_READLINK] = "readlink", [OP_REFLINK] = "reflink",
	[OP_ADDKEY] = "addkey", [OP_RMKEY] = "rmkey", [OP_SNAPSHOT] = "snapshot",
	[OP_SNAPDEL] = "snapdel",
};

/* ---- what the tasks share (MAP_SHARED) ---------------------------------------------------- */

/* A file or symlink of a data task: up to two names (a hard link). */
struct mfile {
	int used, link, enc, known, nnames;
	int inenc[2];			/* is name k in an encrypted directory? */
	char name[2][REL_MAX];		/* relative to sv's root */
	uint32_t len;
	unsigned char data[FMAX];	/* contents, or the symlink's target */
};

/* A directory of a data task. */
struct mdir {
	int used, enc, key;		/* key: 0 none, 1-3 its policy's, 9 inherited */
	char path[REL_MAX];
};

struct wmodel {
	uint32_t next;			/* names made */
	struct mfile f[MF];
	struct mdir d[MD];
};

struct shared {
	int stop;
	long long gate_until;		/* lab_now_ms(); 0: no gate */
	int gate_seq;
	int ack[W_NR];
	int cur_key;			/* where the last successful rekey moved sv */
	long cnt[OP_NR][ERRMAX];
	long rekeys_done, rekeys_gated_done;
	unsigned long long moved[4];	/* dirs, names, symlinks, files */
	long long rekey_ms_total, rekey_ms_max;
	long rmkey_busy, rmkey_others;
	/*
	 * Odd from just before the keys task removes a key until it has added
	 * it back: while a key is out, or its removal is incomplete (files
	 * busy), a symlink set up then has no key and reads back in its no-key
	 * form.
	 */
	unsigned int keys_out_seq;
	long names_good, names_nokey, names_garbage, readlinks_nokey;
	long reads_compared, mismatches;
	long failures;
	char msg[NFAILMSG][288];
	struct wmodel m[NDATA];
};

static struct shared *S;

/* ---- the run ------------------------------------------------------------------------------- */

static const char *dev, *mnt, *mnt2;
static char sv_path[PATH_MAX], snaps_path[PATH_MAX];
static uint8_t mks[4][LAB_MASTER_KEY_SIZE];
static uint8_t ids[4][FSCRYPT_KEY_IDENTIFIER_SIZE];	/* [1..3]: K1..K3 */
static unsigned long long seed;
static int disabled[OP_NR];

/* The static tree: directories, then their files and symlinks. */
struct sent {
	char rel[REL_MAX];
	uint32_t len, pseed;
	int link;
	char target[TGT_MAX];
};

static char sdirs[NSDIRS][16];
static struct sent sents[NSENTS];
static const char *const pdirs[] = { ".", "plain.0", "plain.1" };
#define NPDIRS 3

/* ---- small helpers -------------------------------------------------------------------------- */

static int stopping(void)
{
	return __atomic_load_n(&S->stop, __ATOMIC_ACQUIRE);
}

static LAB_PRINTF(2, 3) void adv_fail(const char *who, const char *fmt, ...)
{
	char buf[1024];	/* a 255-byte name and what went wrong with it */
	va_list ap;
	long i;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	i = __atomic_fetch_add(&S->failures, 1, __ATOMIC_RELAXED);
	if (i < 200)
		printf("FAIL [%s] %s\n", who, buf);
	if (i < NFAILMSG)
		snprintf(S->msg[i], sizeof(S->msg[i]), "[%.24s] %.255s", who, buf);
}

static void bump(long *p)
{
	__atomic_fetch_add(p, 1, __ATOMIC_RELAXED);
}

/* Count the result of an operation on @what; EIO and EUCLEAN are failures. */
static int count_at(const char *who, int op, const char *what, long ret, int err)
{
	int i = ret < 0 ? err : 0;

	if (i < 0 || i >= ERRMAX)
		i = ERRMAX - 1;
	bump(&S->cnt[op][i]);
	if (ret < 0 && (err == EIO || err == EUCLEAN))
		adv_fail(who, "%s%s%.200s: " LAB_ERR_FMT, op_name[op], what ? " " : "",
			 what ? what : "", LAB_ERR_ARGS(err));
	return ret < 0 ? -1 : 0;
}

#define count_as(who, op, ret, err) count_at((who), (op), NULL, (ret), (err))

/* ---- names ------------------------------------------------------------------------------------ */

static const char name_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789.";

/*
 * A name of the test: a lowercase letter first, then [a-z0-9.], at least
 * one '.' (so that no no-key name, which is base64url, is one).  In an
 * encrypted directory the decrypted name is zero-padded: @padded allows
 * zeroes after the name and nothing else.
 */
static int name_ok(const uint8_t *p, size_t len, int padded)
{
	size_t i, n;
	int dot = 0;

	for (n = 0; n < len && p[n]; n++)
		;
	if (n == 0 || (n < len && !padded) || p[0] < 'a' || p[0] > 'z')
		return 0;
	for (i = 0; i < n; i++) {
		if (p[i] == '.')
			dot = 1;
		else if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9')))
			return 0;
	}
	for (; i < len; i++)
		if (p[i])
			return 0;
	return dot;
}

/* fscrypt's no-key names: base64url. */
static int nokey_name(const char *s)
{
	size_t n = strlen(s);

	return n >= 4 && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == n;
}

static void make_name(uint64_t *rng, char *out, size_t len, const char *prefix)
{
	size_t i = strlen(prefix);

	memcpy(out, prefix, i);
	for (; i < len; i++)
		out[i] = name_chars[lab_splitmix64(rng) % (sizeof(name_chars) - 1)];
	out[len] = '\0';
}

static size_t pick_len(uint64_t *rng, size_t min)
{
	static const size_t lens[] = { 15, 16, 17, 31, 32, 33, 48, 64, 100, 150, 200, 254, 255 };
	uint64_t r = lab_splitmix64(rng);
	size_t l;

	if (r % 10 < 6)
		l = 6 + (r >> 8) % 10;
	else
		l = lens[(r >> 8) % (sizeof(lens) / sizeof(lens[0]))];
	return l < min ? min : l;
}

static void join(char *out, const char *dir, const char *name)
{
	if (!strcmp(dir, "."))
		lab_pathf(out, REL_MAX, "%s", name);
	else
		lab_pathf(out, REL_MAX, "%s/%s", dir, name);
}

/* ---- keys -------------------------------------------------------------------------------------- */

static int key_of(const uint8_t *id)
{
	return lab_rekey_key_index(id, ids, 3);
}

static int add_key_fd(int fd, int k)
{
	unsigned char buf[sizeof(struct fscrypt_add_key_arg) + LAB_MASTER_KEY_SIZE];
	struct fscrypt_add_key_arg *a = (struct fscrypt_add_key_arg *)buf;

	memset(buf, 0, sizeof(buf));
	a->key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	a->raw_size = LAB_MASTER_KEY_SIZE;
	memcpy(a->raw, mks[k], LAB_MASTER_KEY_SIZE);
	return ioctl(fd, FS_IOC_ADD_ENCRYPTION_KEY, a) < 0 ? -1 : 0;
}

static int set_policy_fd(int fd, int k)
{
	struct fscrypt_policy_v2 p;

	lab_default_policy(&p, ids[k]);
	return ioctl(fd, FS_IOC_SET_ENCRYPTION_POLICY, &p) < 0 ? -1 : 0;
}

static int rekey_fd(int fd, int from, int to, rk_args_t *a)
{
	struct fscrypt_policy_v2 p;

	lab_default_policy(&p, ids[to]);
	lab_rekey_args(a, "sv", ids[from], &p);
	return ioctl(fd, BTRFS_IOC_FSCRYPT_REKEY, a) < 0 ? -1 : 0;
}

/* ---- the name model (OpenSSL): decrypt a name or symlink target ------------------------------- */

static int name_decrypt(const uint8_t key[FREF_CTS_KEY_SIZE], const uint8_t *in, size_t len,
			uint8_t *out)
{
	static EVP_CIPHER *cts;
	static const uint8_t iv[16];
	OSSL_PARAM params[2];
	EVP_CIPHER_CTX *ctx;
	int ol = 0, fl = 0, ok;

	if (len < 16 || len > FREF_NAME_MAX)
		return -1;
	if (!cts)
		cts = EVP_CIPHER_fetch(NULL, "AES-256-CBC-CTS", NULL);
	ctx = EVP_CIPHER_CTX_new();
	if (!cts || !ctx)
		lab_die("libcrypto: no AES-256-CBC-CTS");
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_CIPHER_PARAM_CTS_MODE, (char *)"CS3", 0);
	params[1] = OSSL_PARAM_construct_end();
	ok = EVP_DecryptInit_ex2(ctx, cts, key, iv, params) == 1 &&
	     EVP_DecryptUpdate(ctx, out, &ol, in, (int)len) == 1 &&
	     EVP_DecryptFinal_ex(ctx, out + ol, &fl) == 1 && ol + fl == (int)len;
	EVP_CIPHER_CTX_free(ctx);
	return ok ? 0 : -1;
}

/* The directory (or symlink) key of @nonce under key @k, 32 bytes. */
static void dir_key(const uint8_t mk[LAB_MASTER_KEY_SIZE], const uint8_t *nonce,
		    uint8_t key[FREF_CTS_KEY_SIZE])
{
	if (fref_per_file_key(mk, LAB_MASTER_KEY_SIZE, nonce, key, FREF_CTS_KEY_SIZE))
		lab_die("reference key derivation failed");
}

/* The decryption against fref_encrypt_name(), and a wrong key's result. */
static void name_model_selftest(void)
{
	static const size_t lens[] = { 1, 15, 16, 17, 32, 33, 40, 100, 255 };
	uint8_t nonce[16], key[FREF_CTS_KEY_SIZE], wrong[FREF_CTS_KEY_SIZE];
	uint8_t ct[FREF_NAME_MAX], pt[FREF_NAME_MAX];
	char name[FREF_NAME_MAX + 1];
	uint64_t rng = seed ^ 0x5e1f;
	size_t i, ctlen;

	lab_random(nonce, sizeof(nonce));
	dir_key(mks[1], nonce, key);
	dir_key(mks[2], nonce, wrong);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		make_name(&rng, name, lens[i], lens[i] > 2 ? "n." : "n");
		if (fref_encrypt_name(key, name, lens[i], FSCRYPT_POLICY_FLAGS_PAD_32, ct, &ctlen))
			lab_die("fref_encrypt_name failed");
		CHECK(!name_decrypt(key, ct, ctlen, pt) && !memcmp(pt, name, lens[i]) &&
		      (lens[i] == 1 || name_ok(pt, ctlen, 1)),
		      "name model: a %zu-byte name does not decrypt back", lens[i]);
		CHECK(name_decrypt(wrong, ct, ctlen, pt) || !name_ok(pt, ctlen, 1),
		      "name model: a %zu-byte name decrypts to a name of the test under another key",
		      lens[i]);
	}
}

/* ---- the gate ------------------------------------------------------------------------------------ */

struct wctx {
	int id, base, top;
	const char *name;
	uint64_t rng;
	struct wmodel *m;
	int hold[NHOLD];
	long long hold_until[NHOLD];
	struct file_handle *fh[NHANDLES];
	int nfh;
	char found[NFOUND][REL_MAX];
	int nfound;
	unsigned char buf[FMAX + 1];
};

static uint64_t rnd(struct wctx *w)
{
	return lab_splitmix64(&w->rng);
}

static unsigned rn(struct wctx *w, unsigned n)
{
	return n ? (unsigned)(rnd(w) % n) : 0;
}

static void release_holds(struct wctx *w)
{
	int i;

	for (i = 0; i < NHOLD; i++)
		if (w->hold[i] >= 0) {
			close(w->hold[i]);
			w->hold[i] = -1;
		}
	if (w->id == W_HOLD_A && fchdir(w->base))
		adv_fail(w->name, "fchdir to sv: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
}

static void gate(struct wctx *w)
{
	long long until = __atomic_load_n(&S->gate_until, __ATOMIC_ACQUIRE);

	if (!until || lab_now_ms() >= until)
		return;
	release_holds(w);
	__atomic_store_n(&S->ack[w->id], __atomic_load_n(&S->gate_seq, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	while (!stopping()) {
		until = __atomic_load_n(&S->gate_until, __ATOMIC_ACQUIRE);
		if (!until || lab_now_ms() >= until)
			break;
		lab_sleep_ms(3);
	}
}

/*
 * The rekey's side: everyone lets go, then comes back after a random delay
 * of up to half the last rekey's duration (at most GATE_MAX_MS), so that
 * they are back while the rekey still runs.
 */
static long long gate_raise(struct wctx *w, long long last_ms)
{
	long long deadline = lab_now_ms() + GATE_ACK_MS, delay;
	int seq = __atomic_add_fetch(&S->gate_seq, 1, __ATOMIC_ACQ_REL);
	size_t i;
	int all;

	__atomic_store_n(&S->gate_until, LLONG_MAX, __ATOMIC_RELEASE);
	do {
		all = 1;
		for (i = 0; i < sizeof(gated) / sizeof(gated[0]); i++)
			if (__atomic_load_n(&S->ack[gated[i]], __ATOMIC_ACQUIRE) != seq)
				all = 0;
		if (all)
			break;
		lab_sleep_ms(2);
	} while (lab_now_ms() < deadline && !stopping());
	delay = rn(w, (unsigned)(last_ms / 2 < GATE_MAX_MS ? last_ms / 2 : GATE_MAX_MS) + 1);
	__atomic_store_n(&S->gate_until, lab_now_ms() + 1 + delay, __ATOMIC_RELEASE);
	return delay;
}

static void sleep_unless_stopped(long ms)
{
	long long end = lab_now_ms() + ms;

	while (!stopping() && lab_now_ms() < end)
		lab_sleep_ms(20);
}

/* ---- the rekeying task ----------------------------------------------------------------------------- */

static void rekey_loop(struct wctx *w)
{
	rk_args_t a;
	long long t0, ms, delay = -1, last_ms = 2 * GATE_MAX_MS;
	int from, to, r, e, gate_on;

	while (!stopping()) {
		from = __atomic_load_n(&S->cur_key, __ATOMIC_ACQUIRE);
		to = 3 - from;
		gate_on = disabled[OP_HOLD] || rn(w, 4) != 0;
		if (gate_on)
			delay = gate_raise(w, last_ms);
		t0 = lab_now_ms();
		r = rekey_fd(w->top, from, to, &a);
		e = errno;
		ms = lab_now_ms() - t0;
		if (gate_on)
			__atomic_store_n(&S->gate_until, 0, __ATOMIC_RELEASE);
		count_as(w->name, OP_REKEY, r, e);
		if (r == 0) {
			__atomic_store_n(&S->cur_key, to, __ATOMIC_RELEASE);
			bump(&S->rekeys_done);
			if (gate_on)
				bump(&S->rekeys_gated_done);
			S->moved[0] += a.nr_dirs;
			S->moved[1] += a.nr_names;
			S->moved[2] += a.nr_symlinks;
			S->moved[3] += a.nr_files;
			S->rekey_ms_total += ms;
			last_ms = ms;
			if (ms > S->rekey_ms_max)
				S->rekey_ms_max = ms;
			printf("[rekey] #%ld K%d -> K%d: " LAB_REKEY_COUNTS_FMT " in %lld ms (gate %s%lld ms)\n",
			       S->rekeys_done, from, to, LAB_REKEY_COUNTS_ARGS(&a), ms,
			       gate_on ? "" : "off, ", gate_on ? delay : 0);
			/* a pause, so that what needs a key also gets to run */
			sleep_unless_stopped(rn(w, (unsigned)(ms < 8000 ? ms : 8000) + 1));
		} else if (e == EBUSY) {
			sleep_unless_stopped(20 + rn(w, 200));
		} else if (e == ENOKEY) {
			sleep_unless_stopped(200 + rn(w, 500));
		} else {
			adv_fail(w->name, "rekey K%d -> K%d after %lld ms: " LAB_ERR_FMT
				 " (moved " LAB_REKEY_COUNTS_FMT ")", from, to, ms, LAB_ERR_ARGS(e),
				 LAB_REKEY_COUNTS_ARGS(&a));
			sleep_unless_stopped(500);
		}
	}
}

/* ---- listing a directory ------------------------------------------------------------------------------ */

static void classify(struct wctx *w, const char *dir, const char *name)
{
	char hex[2 * 24 + 1];

	if (name_ok((const uint8_t *)name, strlen(name), 0)) {
		bump(&S->names_good);
	} else if (nokey_name(name)) {
		bump(&S->names_nokey);
	} else {
		bump(&S->names_garbage);
		adv_fail(w->name, "readdir %s: a name (%zu bytes, %s...) that is neither a name of the test nor a no-key name",
			 dir, strlen(name), lab_hex(hex, name, strlen(name) < 24 ? strlen(name) : 24));
	}
}

/* List @dir; with @keep, remember what it holds in w->found. */
static void list_dir(struct wctx *w, const char *dir, int keep)
{
	struct dirent *de;
	DIR *d;
	int fd, e;

	fd = openat(w->base, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		count_at(w->name, OP_READDIR, dir, -1, errno);
		return;
	}
	d = fdopendir(fd);
	if (!d) {
		e = errno;
		close(fd);
		count_at(w->name, OP_READDIR, dir, -1, e);
		return;
	}
	if (keep)
		w->nfound = 0;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		classify(w, dir, de->d_name);
		if (keep && w->nfound < NFOUND && strlen(de->d_name) < REL_MAX - 16)
			join(w->found[w->nfound++], dir, de->d_name);
		errno = 0;
	}
	e = errno;
	closedir(d);
	count_at(w->name, OP_READDIR, dir, e ? -1 : 0, e);
}

/* ---- the holders ------------------------------------------------------------------------------------------ */

static void hold_fd(struct wctx *w, int op, int fd, int err)
{
	long long now = lab_now_ms();
	int i, slot = -1;

	if (count_as(w->name, op, fd, err))
		return;
	for (i = 0; i < NHOLD; i++)
		if (w->hold[i] < 0) {
			slot = i;
			break;
		}
	if (slot < 0) {
		slot = rn(w, NHOLD);
		close(w->hold[slot]);
	}
	w->hold[slot] = fd;
	w->hold_until[slot] = now + rn(w, HOLD_MAX_MS);
}

static void expire_holds(struct wctx *w)
{
	long long now = lab_now_ms();
	int i;

	for (i = 0; i < NHOLD; i++)
		if (w->hold[i] >= 0 && now >= w->hold_until[i]) {
			close(w->hold[i]);
			w->hold[i] = -1;
		}
}

static const char *holder_target(struct wctx *w)
{
	unsigned r = rn(w, 100);

	if (r < 35)
		return sdirs[rn(w, NTOP) * (1 + NSUB)];
	if (r < 50)
		return sdirs[rn(w, NSDIRS)];
	if (r < 70 || !w->nfound)
		return sents[rn(w, NSENTS)].rel;
	return w->found[rn(w, w->nfound)];
}

static void holder_loop(struct wctx *w)
{
	struct stat st;
	const char *rel;
	unsigned r;
	int fd, e;

	while (!stopping()) {
		gate(w);
		expire_holds(w);
		r = rn(w, 100);
		rel = holder_target(w);
		if (r < 40 && !disabled[OP_STAT]) {
			e = fstatat(w->base, rel, &st, AT_SYMLINK_NOFOLLOW);
			count_as(w->name, OP_STAT, e, errno);
		} else if (r < 65 && !disabled[OP_HOLD]) {
			fd = openat(w->base, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			hold_fd(w, OP_HOLD, fd, errno);
		} else if (r < 75 && w->nfh && !disabled[OP_HANDLE]) {
			fd = open_by_handle_at(w->base, w->fh[rn(w, w->nfh)], O_PATH | O_CLOEXEC);
			hold_fd(w, OP_HANDLE, fd, errno);
		} else if (r < 80 && w->id == W_HOLD_A && !disabled[OP_CHDIR]) {
			/* a cwd in an encrypted directory, reached from sv's root */
			e = fchdir(w->base);
			if (!e)
				e = chdir(sdirs[rn(w, NTOP) * (1 + NSUB)]);
			count_as(w->name, OP_CHDIR, e, errno);
		} else if (r < 92 && !disabled[OP_READDIR]) {
			list_dir(w, pdirs[rn(w, NPDIRS)], 1);
		} else if (!disabled[OP_READDIR]) {
			list_dir(w, sdirs[rn(w, NSDIRS)], 0);
		}
		lab_sleep_ms(rn(w, 8));
	}
	release_holds(w);
}

/* ---- the data tasks ------------------------------------------------------------------------------------------ */

static struct mfile *free_file(struct wctx *w)
{
	int i;

	for (i = 0; i < MF; i++)
		if (!w->m->f[i].used)
			return &w->m->f[i];
	return NULL;
}

/* A file: @link -1 any, 0 regular, 1 symlink; @enc -1 any, 1 encrypted. */
static struct mfile *pick_file(struct wctx *w, int link, int enc, const struct mfile *not)
{
	int i, s = rn(w, MF);
	struct mfile *f;

	for (i = 0; i < MF; i++) {
		f = &w->m->f[(s + i) % MF];
		if (f->used && f != not && (link < 0 || f->link == link) && (enc < 0 || f->enc == enc))
			return f;
	}
	return NULL;
}

/* A file with a name in an unencrypted directory although it is encrypted. */
static struct mfile *pick_moved_out(struct wctx *w, int *k)
{
	int i, j, s = rn(w, MF);
	struct mfile *f;

	for (i = 0; i < MF; i++) {
		f = &w->m->f[(s + i) % MF];
		if (!f->used || !f->enc)
			continue;
		for (j = 0; j < f->nnames; j++)
			if (!f->inenc[j]) {
				*k = j;
				return f;
			}
	}
	return NULL;
}

static struct mdir *pick_own_dir(struct wctx *w)
{
	int i, s = rn(w, MD);

	for (i = 0; i < MD; i++)
		if (w->m->d[(s + i) % MD].used)
			return &w->m->d[(s + i) % MD];
	return NULL;
}

static struct mdir *free_dir(struct wctx *w)
{
	int i;

	for (i = 0; i < MD; i++)
		if (!w->m->d[i].used)
			return &w->m->d[i];
	return NULL;
}

/*
 * Where a new name goes: a static encrypted directory, an own one (unless
 * @no_own: directories are not nested), or a plain one (only, with @plain).
 */
static const char *pick_dir(struct wctx *w, int *enc, int plain, int no_own)
{
	unsigned r = plain ? 99 : rn(w, 100);
	struct mdir *d;

	if (r < 45) {
		*enc = 1;
		return sdirs[rn(w, NSDIRS)];
	}
	if (r < 65 && !no_own && (d = pick_own_dir(w))) {
		*enc = d->enc;
		return d->path;
	}
	*enc = 0;
	return pdirs[rn(w, NPDIRS)];
}

/* A new name in @dir: of 6 to 255 bytes, a directory's of at most 40. */
static void new_name(struct wctx *w, char *out, const char *dir, char kind)
{
	char prefix[32], name[NAME_MAX + 1];
	size_t len;

	snprintf(prefix, sizeof(prefix), "%c%d.%u.", kind, w->id, w->m->next++);
	len = pick_len(&w->rng, strlen(prefix));
	if (kind == 'd' && len > 40)
		len = 40;
	make_name(&w->rng, name, len, prefix);
	join(out, dir, name);
}

static uint32_t pick_size(struct wctx *w)
{
	unsigned r = rn(w, 100);

	if (r < 15)
		return rn(w, 101);
	if (r < 70)
		return 1 + rn(w, 8192);
	return 1 + rn(w, FMAX);
}

/* pwrite @n random bytes at @off and fdatasync, into the model when they all made it. */
static void write_into(struct wctx *w, struct mfile *f, int fd, uint32_t off, uint32_t n)
{
	uint32_t i;
	ssize_t r;
	int e;

	if (off > FMAX)
		off = FMAX;
	if (off + n > FMAX)
		n = FMAX - off;
	for (i = 0; i < n; i++)
		w->buf[i] = (unsigned char)rnd(w);
	r = pwrite(fd, w->buf, n, off);
	e = errno;
	if (r != (ssize_t)n) {
		count_at(w->name, OP_WRITE, f->name[0], -1, r < 0 ? e : ERR_SHORT);
		f->known = 0;
		return;
	}
	count_as(w->name, OP_WRITE, 0, 0);
	if (off > f->len)
		memset(f->data + f->len, 0, off - f->len);
	memcpy(f->data + off, w->buf, n);
	if (off + n > f->len)
		f->len = off + n;
	r = fdatasync(fd);
	if (count_at(w->name, OP_FSYNC, f->name[0], r, errno))
		f->known = 0;
}

static void op_create(struct wctx *w)
{
	struct mfile *f = free_file(w);
	char path[REL_MAX];
	const char *dir;
	int fd, enc;

	if (!f)
		return;
	dir = pick_dir(w, &enc, 0, 0);
	new_name(w, path, dir, 'f');
	fd = openat(w->base, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (count_as(w->name, OP_CREATE, fd, errno))
		return;
	memset(f, 0, offsetof(struct mfile, data));
	f->used = 1;
	f->enc = enc;
	f->known = 1;
	f->nnames = 1;
	f->inenc[0] = enc;
	lab_pathf(f->name[0], REL_MAX, "%s", path);
	write_into(w, f, fd, 0, pick_size(w));
	close(fd);
}

static void op_write(struct wctx *w)
{
	struct mfile *f = pick_file(w, 0, -1, NULL);
	int fd, trunc;

	if (!f)
		return;
	trunc = rn(w, 3) == 0;
	fd = openat(w->base, f->name[0], O_WRONLY | O_CLOEXEC | (trunc ? O_TRUNC : 0));
	if (fd < 0) {
		count_as(w->name, OP_WRITE, -1, errno);
		return;
	}
	if (trunc)
		f->len = 0;
	write_into(w, f, fd, trunc ? 0 : rn(w, f->len + 1), 1 + rn(w, 8192));
	close(fd);
}

static void compare(struct wctx *w, const char *what, const unsigned char *want, size_t wlen,
		    const unsigned char *got, ssize_t glen)
{
	bump(&S->reads_compared);
	if ((size_t)glen == wlen && !memcmp(want, got, wlen))
		return;
	bump(&S->mismatches);
	adv_fail(w->name, "%s: read %zd bytes, the model has %zu; first difference at byte %zu",
		 what, glen, wlen, lab_first_diff(want, got, (size_t)glen < wlen ? (size_t)glen : wlen));
}

static void op_read(struct wctx *w)
{
	static unsigned char want[SFILE_MAX];
	const struct sent *s = NULL;
	struct mfile *f = NULL;
	const char *path;
	ssize_t n;
	int fd, e;

	if (rn(w, 10) < 3) {
		s = &sents[rn(w, NSENTS)];
		if (s->link)
			return;
		path = s->rel;
	} else {
		f = pick_file(w, 0, -1, NULL);
		if (!f)
			return;
		path = f->name[0];
	}
	fd = openat(w->base, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		count_at(w->name, OP_READ, path, -1, errno);
		return;
	}
	n = lab_pread_full(fd, w->buf, FMAX + 1, 0);
	e = errno;
	close(fd);
	if (count_at(w->name, OP_READ, path, n, e))
		return;
	if (s) {
		fill_pattern(want, s->len, s->pseed);
		compare(w, s->rel, want, s->len, w->buf, n);
	} else if (f->known) {
		compare(w, f->name[0], f->data, f->len, w->buf, n);
	}
}

static void op_rename(struct wctx *w, int out)
{
	struct mfile *f = NULL;
	char path[REL_MAX];
	const char *dir;
	int k = 0, enc, r;

	if (out) {
		/* an encrypted file out of its encrypted directory */
		int i, s = rn(w, MF);

		for (i = 0; i < MF && !f; i++) {
			struct mfile *c = &w->m->f[(s + i) % MF];

			if (c->used && c->enc && c->inenc[0])
				f = c;
		}
	} else {
		f = pick_file(w, -1, -1, NULL);
		if (f)
			k = rn(w, f->nnames);
	}
	if (!f)
		return;
	dir = pick_dir(w, &enc, out, 0);
	new_name(w, path, dir, f->link ? 'l' : 'f');
	r = renameat(w->base, f->name[k], w->base, path);
	if (count_as(w->name, out ? OP_MOVEOUT : OP_RENAME, r, errno))
		return;
	lab_pathf(f->name[k], REL_MAX, "%s", path);
	f->inenc[k] = enc;
}

static void op_link(struct wctx *w)
{
	struct mfile *f = pick_file(w, 0, -1, NULL);
	char path[REL_MAX];
	const char *dir;
	int enc, r;

	if (!f || f->nnames != 1)
		return;
	dir = pick_dir(w, &enc, 0, 0);
	new_name(w, path, dir, 'f');
	r = linkat(w->base, f->name[0], w->base, path, 0);
	if (count_as(w->name, OP_LINK, r, errno))
		return;
	lab_pathf(f->name[1], REL_MAX, "%s", path);
	f->inenc[1] = enc;
	f->nnames = 2;
}

static void op_unlink(struct wctx *w)
{
	struct mfile *f = NULL;
	int k = 0, r;

	/* moved-out encrypted files first: no key is needed to unlink them */
	if (rn(w, 10) < 6)
		f = pick_moved_out(w, &k);
	if (!f) {
		f = pick_file(w, -1, -1, NULL);
		if (!f)
			return;
		k = rn(w, f->nnames);
	}
	r = unlinkat(w->base, f->name[k], 0);
	if (count_as(w->name, OP_UNLINK, r, errno))
		return;
	if (k == 0 && f->nnames == 2) {
		memcpy(f->name[0], f->name[1], REL_MAX);
		f->inenc[0] = f->inenc[1];
	}
	if (--f->nnames == 0)
		f->used = 0;
}

static void op_symlink(struct wctx *w)
{
	struct mfile *f = free_file(w);
	char path[REL_MAX], target[TGT_MAX];
	const char *dir;
	int enc, r;

	if (!f)
		return;
	dir = pick_dir(w, &enc, 0, 0);
	new_name(w, path, dir, 'l');
	make_name(&w->rng, target, 2 + rn(w, TGT_MAX - 8), "t.");
	r = symlinkat(target, w->base, path);
	if (count_as(w->name, OP_SYMLINK, r, errno))
		return;
	memset(f, 0, offsetof(struct mfile, data));
	f->used = 1;
	f->link = 1;
	f->enc = enc;
	f->known = 1;
	f->nnames = 1;
	f->inenc[0] = enc;
	lab_pathf(f->name[0], REL_MAX, "%s", path);
	f->len = (uint32_t)strlen(target);
	memcpy(f->data, target, f->len);
}

/*
 * A readlink of @n bytes into w->buf that is a no-key form, while a key was
 * out at some time between the keys task's @seq0 (read before the lookup)
 * and now: fscrypt's answer for a symlink whose key it cannot set up, even
 * when the name was looked up in plaintext (its directory, held busy, keeps
 * its key through an incomplete removal).  Outside such a window a no-key
 * form is a failure.
 */
static int nokey_form_while_key_out(struct wctx *w, unsigned int seq0, ssize_t n)
{
	unsigned int seq1 = __atomic_load_n(&S->keys_out_seq, __ATOMIC_SEQ_CST);

	w->buf[n] = '\0';
	return nokey_name((const char *)w->buf) && ((seq0 & 1) || seq1 != seq0);
}

static void op_readlink(struct wctx *w)
{
	const struct sent *s = NULL;
	struct mfile *f = NULL;
	const char *path;
	unsigned int seq;
	ssize_t n;

	if (rn(w, 10) < 3) {
		s = &sents[rn(w, NSENTS)];
		if (!s->link)
			return;
		path = s->rel;
	} else {
		f = pick_file(w, 1, -1, NULL);
		if (!f)
			return;
		path = f->name[0];
	}
	seq = __atomic_load_n(&S->keys_out_seq, __ATOMIC_SEQ_CST);
	n = readlinkat(w->base, path, (char *)w->buf, FMAX);
	if (count_as(w->name, OP_READLINK, n, errno))
		return;
	if (n > 0 && n < FMAX && nokey_form_while_key_out(w, seq, n)) {
		bump(&S->readlinks_nokey);
		return;
	}
	if (s)
		compare(w, s->rel, (const unsigned char *)s->target, strlen(s->target), w->buf, n);
	else
		compare(w, f->name[0], f->data, f->len, w->buf, n);
}

static void op_reflink(struct wctx *w)
{
	struct mfile *src = pick_file(w, 0, 1, NULL), *dst;
	int sfd, dfd, r, e;

	if (!src)
		return;
	dst = pick_file(w, 0, 1, src);
	if (!dst)
		return;
	sfd = openat(w->base, src->name[0], O_RDONLY | O_CLOEXEC);
	if (sfd < 0) {
		count_as(w->name, OP_REFLINK, -1, errno);
		return;
	}
	dfd = openat(w->base, dst->name[0], O_WRONLY | O_CLOEXEC);
	if (dfd < 0) {
		count_as(w->name, OP_REFLINK, -1, errno);
		close(sfd);
		return;
	}
	r = ioctl(dfd, FICLONE, sfd);
	e = errno;
	close(sfd);
	close(dfd);
	if (count_as(w->name, OP_REFLINK, r, e)) {
		dst->known = 0;		/* a refusal changes nothing, but be sure */
		return;
	}
	/* the whole of src over the start of dst; dst keeps what is beyond */
	if (dst->known && src->known) {
		memcpy(dst->data, src->data, src->len);
		if (src->len > dst->len)
			dst->len = src->len;
	} else {
		dst->known = 0;
	}
}

static void op_mkdir(struct wctx *w, int policy)
{
	struct mdir *d = free_dir(w);
	char path[REL_MAX];
	const char *dir;
	int enc, fd, r, e, k;

	if (!d)
		return;
	dir = pick_dir(w, &enc, policy, 1);
	new_name(w, path, dir, 'd');
	r = mkdirat(w->base, path, 0777);
	if (count_as(w->name, OP_MKDIR, r, errno))
		return;
	d->used = 1;
	d->enc = enc;
	d->key = enc ? 9 : 0;
	lab_pathf(d->path, REL_MAX, "%s", path);
	if (!policy)
		return;
	fd = openat(w->base, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		count_as(w->name, OP_SETPOLICY, -1, errno);
		return;
	}
	k = 1 + rn(w, 3);
	r = set_policy_fd(fd, k);
	e = errno;
	close(fd);
	if (count_as(w->name, OP_SETPOLICY, r, e))
		return;
	d->enc = 1;
	d->key = k;
}

static void op_rmdir(struct wctx *w)
{
	struct mdir *d = pick_own_dir(w);
	size_t l;
	int i, j, r;

	if (!d)
		return;
	l = strlen(d->path);
	for (i = 0; i < MF; i++)
		for (j = 0; w->m->f[i].used && j < w->m->f[i].nnames; j++)
			if (!strncmp(w->m->f[i].name[j], d->path, l) && w->m->f[i].name[j][l] == '/')
				return;
	r = unlinkat(w->base, d->path, AT_REMOVEDIR);
	if (count_as(w->name, OP_RMDIR, r, errno))
		return;
	d->used = 0;
}

static void op_addkeys(struct wctx *w)
{
	int k;

	for (k = 1; k <= 3; k++) {
		if (k == 3 && w->id == W_DATA_B)
			continue;	/* uid 1001 never claims K3: its K3 policies get ENOKEY */
		count_as(w->name, OP_ADDKEY, add_key_fd(w->base, k), errno);
	}
}

static void op_rekey_unpriv(struct wctx *w)
{
	rk_args_t a;
	int r, e, from = __atomic_load_n(&S->cur_key, __ATOMIC_ACQUIRE);

	r = rekey_fd(w->top, from, 3 - from, &a);
	e = errno;
	count_as(w->name, OP_REKEY_UNPRIV, r, e);
	if (r == 0 || e != EPERM)
		adv_fail(w->name, "a rekey by uid %u: %s, expected EPERM", (unsigned)wdesc[w->id].uid,
			 r ? lab_errname(e) : "success");
}

static void data_loop(struct wctx *w)
{
	static const struct { int op, weight; } mix[] = {
		{ OP_CREATE, 14 }, { OP_WRITE, 12 }, { OP_READ, 14 }, { OP_RENAME, 6 },
		{ OP_MOVEOUT, 8 }, { OP_LINK, 4 }, { OP_UNLINK, 13 }, { OP_SYMLINK, 4 },
		{ OP_READLINK, 4 }, { OP_REFLINK, 6 }, { OP_MKDIR, 4 }, { OP_SETPOLICY, 5 },
		{ OP_RMDIR, 4 }, { OP_READDIR, 6 }, { OP_ADDKEY, 1 }, { OP_REKEY_UNPRIV, 1 },
	};
	unsigned total = 0, r, i;

	for (i = 0; i < sizeof(mix) / sizeof(mix[0]); i++)
		if (!disabled[mix[i].op])
			total += mix[i].weight;
	while (!stopping() && total) {
		gate(w);
		r = rn(w, total);
		for (i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
			if (disabled[mix[i].op])
				continue;
			if (r < (unsigned)mix[i].weight)
				break;
			r -= mix[i].weight;
		}
		switch (mix[i].op) {
		case OP_CREATE: op_create(w); break;
		case OP_WRITE: op_write(w); break;
		case OP_READ: op_read(w); break;
		case OP_RENAME: op_rename(w, 0); break;
		case OP_MOVEOUT: op_rename(w, 1); break;
		case OP_LINK: op_link(w); break;
		case OP_UNLINK: op_unlink(w); break;
		case OP_SYMLINK: op_symlink(w); break;
		case OP_READLINK: op_readlink(w); break;
		case OP_REFLINK: op_reflink(w); break;
		case OP_MKDIR: op_mkdir(w, 0); break;
		case OP_SETPOLICY: op_mkdir(w, 1); break;
		case OP_RMDIR: op_rmdir(w); break;
		case OP_READDIR: {
			struct mdir *d = rn(w, 3) ? NULL : pick_own_dir(w);

			list_dir(w, d ? d->path : rn(w, 2) ? sdirs[rn(w, NSDIRS)] : pdirs[rn(w, NPDIRS)], 0);
			break;
		}
		case OP_ADDKEY:
			if (wdesc[w->id].uid)
				op_addkeys(w);
			break;
		case OP_REKEY_UNPRIV:
			if (w->id == W_DATA_C)
				op_rekey_unpriv(w);
			break;
		}
		lab_sleep_ms(rn(w, 6));
	}
}

/* ---- keys and snapshots -------------------------------------------------------------------------------- */

static void keys_loop(struct wctx *w)
{
	struct fscrypt_remove_key_arg arg;
	int k, all, r, e;

	while (!stopping() && !disabled[OP_RMKEY]) {
		sleep_unless_stopped(5000 + rn(w, 10000));
		if (stopping())
			break;
		k = rn(w, 10) < 6 ? 1 + rn(w, 2) : 3;
		all = rn(w, 2);
		memset(&arg, 0, sizeof(arg));
		arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
		memcpy(arg.key_spec.u.identifier, ids[k], FSCRYPT_KEY_IDENTIFIER_SIZE);
		__atomic_fetch_add(&S->keys_out_seq, 1, __ATOMIC_SEQ_CST);
		r = ioctl(w->base, all ? FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS :
			  FS_IOC_REMOVE_ENCRYPTION_KEY, &arg);
		e = errno;
		count_as(w->name, OP_RMKEY, r, e);
		if (!r && (arg.removal_status_flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY))
			bump(&S->rmkey_busy);
		if (!r && (arg.removal_status_flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_OTHER_USERS))
			bump(&S->rmkey_others);
		/* absent for a while, then back (also at the end: the key is always re-added) */
		lab_sleep_ms(200 + rn(w, 1000));
		r = add_key_fd(w->base, k);
		count_as(w->name, OP_ADDKEY, r, errno);
		__atomic_fetch_add(&S->keys_out_seq, 1, __ATOMIC_SEQ_CST);
	}
}

static void snap_loop(struct wctx *w)
{
	struct btrfs_ioctl_vol_args_v2 a;
	struct btrfs_ioctl_vol_args d;
	unsigned n = 0, oldest = 0;
	int snapfd, r, e;

	snapfd = open(snaps_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (snapfd < 0) {
		adv_fail(w->name, "open %s: " LAB_ERR_FMT, snaps_path, LAB_ERR_ARGS(errno));
		return;
	}
	while (!stopping() && !disabled[OP_SNAPSHOT]) {
		sleep_unless_stopped(700 + rn(w, 2500));
		if (stopping())
			break;
		memset(&a, 0, sizeof(a));
		a.fd = w->base;
		a.flags = rn(w, 2) ? BTRFS_SUBVOL_RDONLY : 0;
		snprintf(a.name, sizeof(a.name), "snap.%u", n);
		r = ioctl(snapfd, BTRFS_IOC_SNAP_CREATE_V2, &a);
		e = errno;
		count_as(w->name, OP_SNAPSHOT, r, e);
		if (r && e != EBUSY)
			adv_fail(w->name, "snapshot of sv: " LAB_ERR_FMT ", expected success or EBUSY",
				 LAB_ERR_ARGS(e));
		if (r)
			continue;
		n++;
		while (n - oldest > 3) {
			memset(&d, 0, sizeof(d));
			snprintf(d.name, sizeof(d.name), "snap.%u", oldest++);
			r = ioctl(snapfd, BTRFS_IOC_SNAP_DESTROY, &d);
			count_as(w->name, OP_SNAPDEL, r, errno);
		}
	}
	close(snapfd);
}

/* ---- a task --------------------------------------------------------------------------------------------- */

static int become(uid_t uid)
{
	if (!uid)
		return 0;
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		return -1;
	return 0;
}

static int worker_main(void *arg)
{
	struct wctx *w;
	int id = (int)(intptr_t)arg, i, mount_id;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(0);
	w = lab_xmalloc(sizeof(*w));
	memset(w, 0, sizeof(*w));
	w->id = id;
	w->name = wdesc[id].name;
	w->rng = seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1));
	for (i = 0; i < NHOLD; i++)
		w->hold[i] = -1;
	if (id >= W_DATA_A && id < W_DATA_A + NDATA)
		w->m = &S->m[id - W_DATA_A];
	w->base = open(wdesc[id].mnt2 ? mnt2 : sv_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	w->top = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->base < 0 || w->top < 0) {
		adv_fail(w->name, "opening sv and the top: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		return 1;
	}
	if (id == W_HOLD_B) {
		/* handles of the top encrypted directories and some files */
		for (i = 0; i < NHANDLES; i++) {
			struct file_handle *fh = lab_xmalloc(sizeof(*fh) + MAX_HANDLE_SZ);
			const char *rel = i < NTOP ? sdirs[i * (1 + NSUB)] : sents[i * 37 % NSENTS].rel;

			fh->handle_bytes = MAX_HANDLE_SZ;
			if (name_to_handle_at(w->base, rel, fh, &mount_id, 0)) {
				printf("[%s] name_to_handle_at %s: " LAB_ERR_FMT "\n", w->name, rel,
				       LAB_ERR_ARGS(errno));
				free(fh);
				continue;
			}
			w->fh[w->nfh++] = fh;
		}
	}
	if (become(wdesc[id].uid)) {
		adv_fail(w->name, "becoming uid %u: " LAB_ERR_FMT, (unsigned)wdesc[id].uid,
			 LAB_ERR_ARGS(errno));
		return 1;
	}
	if (wdesc[id].uid && id != W_HOLD_A)
		op_addkeys(w);
	if (id == W_HOLD_A && fchdir(w->base))
		adv_fail(w->name, "fchdir: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	switch (id) {
	case W_REKEY: rekey_loop(w); break;
	case W_KEYS: keys_loop(w); break;
	case W_SNAP: snap_loop(w); break;
	case W_HOLD_A:
	case W_HOLD_B: holder_loop(w); break;
	default: data_loop(w); break;
	}
	while (!stopping())	/* a task whose operations are all left out */
		lab_sleep_ms(50);
	return 0;
}

/* ---- the kernel log and the read-only watch --------------------------------------------------------------- */

static int kmsg_fd = -1;
static regex_t kmsg_re;
static long kmsg_bad, kmsg_aborts, kmsg_lost;
static char kmsg_lines[12][240];

#define KMSG_BAD_ERE "Transaction aborted|forced readonly|BTRFS( [a-z]+)?: error|BTRFS (error|critical)|" \
	LAB_LOG_SPLAT_ERE "|INFO: task .* blocked"

static void kmsg_open(void)
{
	if (regcomp(&kmsg_re, KMSG_BAD_ERE, REG_EXTENDED | REG_NOSUB))
		lab_die("regcomp");
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kmsg_fd < 0)
		lab_die("open /dev/kmsg: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	lseek(kmsg_fd, 0, SEEK_END);
}

static void kmsg_poll(void)
{
	char rec[8192], *msg, *nl;
	ssize_t n;

	for (;;) {
		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE) {
			kmsg_lost++;
			continue;
		}
		if (n <= 0)
			break;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		nl = strchr(msg, '\n');
		if (nl)
			*nl = '\0';
		if (regexec(&kmsg_re, msg, 0, NULL, 0))
			continue;
		if (strstr(msg, "Transaction aborted"))
			kmsg_aborts++;
		if (kmsg_bad < (long)(sizeof(kmsg_lines) / sizeof(kmsg_lines[0])))
			snprintf(kmsg_lines[kmsg_bad], sizeof(kmsg_lines[0]), "%s", msg);
		kmsg_bad++;
		if (kmsg_bad <= 20)
			printf("FAIL kernel log: %s\n", msg);
	}
}

static int went_ro;
static long long ro_at = -1;
static int probe_fd = -1;

/* Is @m mounted read-only according to /proc/mounts? */
static int mounted_ro(const char *m)
{
	char line[1024], dv[256], mp[512], ty[64], opts[512];
	FILE *f = fopen("/proc/mounts", "r");
	int ro = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%255s %511s %63s %511s", dv, mp, ty, opts) == 4 &&
		    !strcmp(mp, m) && !strncmp(opts, "ro", 2) && (opts[2] == ',' || !opts[2]))
			ro = 1;
	fclose(f);
	return ro;
}

static void ro_check(long long t)
{
	static unsigned n;
	char buf[64];
	int len, bad = 0;

	if (went_ro)
		return;
	if (mounted_ro(mnt) || mounted_ro(mnt2)) {
		printf("read-only watch: /proc/mounts says the scratch filesystem is mounted read-only\n");
		bad = 1;
	}
	len = snprintf(buf, sizeof(buf), "probe %u\n", n++);
	if (pwrite(probe_fd, buf, len, 0) != len || fdatasync(probe_fd)) {
		printf("read-only watch: a write and fdatasync of %s/probe: " LAB_ERR_FMT "\n", mnt,
		       LAB_ERR_ARGS(errno));
		bad = 1;
	}
	if (bad) {
		went_ro = 1;
		ro_at = t;
	}
}

/* ---- the verifier: names on the device ------------------------------------------------------------------ */

struct item {
	uint64_t obj, off;
	uint32_t type, len;
	unsigned char *data;
};

/* Every item of objectid >= 256 of the subvolume holding @path, in key order. */
static int search_all(const char *path, struct item **out, size_t *n)
{
	struct btrfs_ioctl_search_args_v2 *args;
	struct btrfs_ioctl_search_key *sk;
	struct btrfs_ioctl_search_header sh;
	struct item *v = NULL;
	size_t cnt = 0, cap = 0, pos;
	uint32_t i;
	int fd, done = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	args = lab_xmalloc(sizeof(*args) + SEARCH_BUF);
	memset(args, 0, sizeof(*args));
	sk = &args->key;
	sk->min_objectid = BTRFS_FIRST_FREE_OBJECTID;
	sk->max_objectid = (uint64_t)-1;
	sk->max_type = 255;
	sk->max_offset = (uint64_t)-1;
	sk->max_transid = (uint64_t)-1;
	while (!done) {
		sk->nr_items = 4096;
		args->buf_size = SEARCH_BUF;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args) < 0) {
			int e = errno;

			close(fd);
			free(args);
			errno = e;
			return -1;
		}
		if (!sk->nr_items)
			break;
		for (pos = 0, i = 0; i < sk->nr_items; i++) {
			memcpy(&sh, args->buf + pos, sizeof(sh));
			pos += sizeof(sh);
			if (cnt == cap) {
				cap = cap ? 2 * cap : 1024;
				v = realloc(v, cap * sizeof(*v));
				if (!v)
					lab_die("out of memory");
			}
			v[cnt].obj = sh.objectid;
			v[cnt].off = sh.offset;
			v[cnt].type = sh.type;
			v[cnt].len = sh.len;
			v[cnt].data = lab_xmalloc(sh.len ? sh.len : 1);
			memcpy(v[cnt].data, args->buf + pos, sh.len);
			cnt++;
			pos += sh.len;
			/* the next key after this one */
			sk->min_objectid = sh.objectid;
			sk->min_type = sh.type;
			sk->min_offset = sh.offset + 1;
			if (sh.offset == (uint64_t)-1) {
				sk->min_offset = 0;
				if (sh.type == 255) {
					sk->min_type = 0;
					if (sh.objectid == (uint64_t)-1)
						done = 1;
					sk->min_objectid = sh.objectid + 1;
				} else {
					sk->min_type = sh.type + 1;
				}
			}
		}
	}
	close(fd);
	free(args);
	*out = v;
	*n = cnt;
	return 0;
}

struct vstats {
	long dirs[4], files[4], links[4];	/* per key; [0] unencrypted */
	long names, names_bad, errors, boundaries;
};

static int verr_quiet;		/* the control: count, do not print */

static LAB_PRINTF(3, 4) void verr(struct vstats *vs, const char *label, const char *fmt, ...)
{
	va_list ap;

	vs->errors++;
	if (vs->errors > 40 || verr_quiet)
		return;
	printf("  %s: ", label);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* The first item of (@obj, @type) in @v[@n], or @n. */
static size_t find_item(const struct item *v, size_t n, uint64_t obj, uint32_t type)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (v[mid].obj < obj || (v[mid].obj == obj && v[mid].type < type))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The context of @ino: its key (1-3, 0 another), or -1 without one. */
static int ctx_of(const struct item *v, size_t n, uint64_t ino, const uint8_t **ctx)
{
	size_t i = find_item(v, n, ino, LAB_BTRFS_FSCRYPT_INODE_CTX_KEY);

	if (i == n || v[i].obj != ino || v[i].type != LAB_BTRFS_FSCRYPT_INODE_CTX_KEY ||
	    v[i].len != CTX_SIZE)
		return -1;
	*ctx = v[i].data;
	return key_of(v[i].data + CTX_ID_OFF);
}

/* Does @name decrypt to a name of the test under key @k of the context @ctx? */
static int decrypts_under(const uint8_t (*mk)[LAB_MASTER_KEY_SIZE], int k, const uint8_t *ctx,
			  const uint8_t *name, size_t len)
{
	uint8_t key[FREF_CTS_KEY_SIZE], pt[FREF_NAME_MAX];

	dir_key(mk[k], ctx + CTX_NONCE_OFF, key);
	return !name_decrypt(key, name, len, pt) && name_ok(pt, len, 1);
}

/* Does a ref of @child into @dir carry @name? */
static int ref_has(const struct item *v, size_t n, uint64_t child, uint64_t dir,
		   const uint8_t *name, size_t len)
{
	size_t i, pos, nl;

	for (i = find_item(v, n, child, BTRFS_INODE_REF_KEY);
	     i < n && v[i].obj == child && v[i].type <= BTRFS_INODE_EXTREF_KEY; i++) {
		if (v[i].type == BTRFS_INODE_REF_KEY && v[i].off == dir) {
			for (pos = 0; pos + IREF_SIZE <= v[i].len; pos += IREF_SIZE + nl) {
				nl = le16toh(*(const uint16_t *)(v[i].data + pos + 8));
				if (pos + IREF_SIZE + nl <= v[i].len && nl == len &&
				    !memcmp(v[i].data + pos + IREF_SIZE, name, len))
					return 1;
			}
		} else if (v[i].type == BTRFS_INODE_EXTREF_KEY) {
			for (pos = 0; pos + EXTREF_SIZE <= v[i].len; pos += EXTREF_SIZE + nl) {
				nl = le16toh(*(const uint16_t *)(v[i].data + pos + 16));
				if (le64toh(*(const uint64_t *)(v[i].data + pos)) == dir &&
				    pos + EXTREF_SIZE + nl <= v[i].len && nl == len &&
				    !memcmp(v[i].data + pos + EXTREF_SIZE, name, len))
					return 1;
			}
		}
	}
	return 0;
}

/*
 * The names in the DIR_ITEMs of directory @dir: with @name, 1 if one of
 * them is @name pointing to @child, else 0; without, how many there are.
 */
static size_t dir_items(const struct item *v, size_t n, uint64_t dir, const uint8_t *name,
			size_t len, uint64_t child)
{
	size_t i, pos, l, cnt = 0;
	const uint8_t *p;

	for (i = find_item(v, n, dir, BTRFS_DIR_ITEM_KEY);
	     i < n && v[i].obj == dir && v[i].type == BTRFS_DIR_ITEM_KEY; i++) {
		for (pos = 0; pos + DI_SIZE <= v[i].len;) {
			p = v[i].data + pos;
			l = le16toh(*(const uint16_t *)(p + DI_NAME_LEN_OFF));
			if (pos + DI_SIZE + l > v[i].len)
				break;
			if (!name)
				cnt++;
			else if (l == len && !memcmp(p + DI_SIZE, name, len) &&
				 le64toh(*(const uint64_t *)p) == child)
				return 1;
			pos += DI_SIZE + l + le16toh(*(const uint16_t *)(p + DI_DATA_LEN_OFF));
		}
	}
	return cnt;
}

static const char *kname(int k)
{
	static const char *const n[] = { "another key", "K1", "K2", "K3" };

	return k >= 0 && k <= 3 ? n[k] : "no context";
}

/*
 * The subvolume holding @path, on disk: see the top of the file.  @moved_from
 * (1, 2; 0: no such check) is a key no context may name.  @mk: the master
 * keys to decrypt with (the control swaps K1 and K2).  With @strict, a child
 * of an encrypted directory under another key is an error; without (a
 * snapshot may keep a rekey that stopped part way, e.g. with ENOKEY), it is
 * counted as a key boundary.
 */
static void verify_disk(const char *path, const char *label, int moved_from, int strict,
			const uint8_t (*mk)[LAB_MASTER_KEY_SIZE], struct vstats *vs)
{
	struct btrfs_inode_item ii;
	struct item *v = NULL;
	size_t n = 0, i, j, c, nl, ndi;
	const uint8_t *ctx, *cctx, *d;
	uint64_t ino, child, flags;
	uint32_t mode;
	int k, ck, kk, enc;

	memset(vs, 0, sizeof(*vs));
	if (search_all(path, &v, &n)) {
		verr(vs, label, "tree search: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		return;
	}
	for (i = 0; i < n; i++) {
		if (v[i].type != BTRFS_INODE_ITEM_KEY)
			continue;
		ino = v[i].obj;
		if (v[i].len < sizeof(ii)) {
			verr(vs, label, "ino %llu: an inode item of %u bytes", (unsigned long long)ino,
			     v[i].len);
			continue;
		}
		memcpy(&ii, v[i].data, sizeof(ii));
		mode = le32toh(ii.mode);
		flags = le64toh(ii.flags);
		ctx = NULL;
		k = ctx_of(v, n, ino, &ctx);
		enc = !!(flags & LAB_BTRFS_INODE_ENCRYPT);
		if (enc != (k >= 0))
			verr(vs, label, "ino %llu: encryption flag %d, %s", (unsigned long long)ino,
			     enc, k >= 0 ? "a context" : "no context");
		if (k == 0)
			verr(vs, label, "ino %llu: its context names a key that is none of K1-K3",
			     (unsigned long long)ino);
		if (k > 0 && k == moved_from)
			verr(vs, label, "ino %llu (mode 0%o): its context names %s after the final rekey moved everything off it",
			     (unsigned long long)ino, mode, kname(k));
		if (S_ISDIR(mode))
			vs->dirs[k > 0 ? k : 0]++;
		else if (S_ISLNK(mode))
			vs->links[k > 0 ? k : 0]++;
		else
			vs->files[k > 0 ? k : 0]++;

		if (S_ISLNK(mode)) {
			size_t e = find_item(v, n, ino, BTRFS_EXTENT_DATA_KEY);
			size_t tl;

			if (e == n || v[e].obj != ino || v[e].type != BTRFS_EXTENT_DATA_KEY ||
			    v[e].len < FE_INLINE_OFF + 2 ||
			    v[e].data[FE_TYPE_OFF] != BTRFS_FILE_EXTENT_INLINE) {
				verr(vs, label, "symlink ino %llu: no inline extent",
				     (unsigned long long)ino);
				continue;
			}
			d = v[e].data + FE_INLINE_OFF;
			if (k < 0) {
				if (!name_ok(d, v[e].len - FE_INLINE_OFF, 0))
					verr(vs, label, "symlink ino %llu: its plain target is not one of the test",
					     (unsigned long long)ino);
				continue;
			}
			tl = le16toh(*(const uint16_t *)d);
			if (k == 0 || tl + 2 > v[e].len - FE_INLINE_OFF ||
			    !decrypts_under(mk, k, ctx, d + 2, tl)) {
				for (kk = 1; kk <= 3; kk++)
					if (kk != k && tl + 2 <= v[e].len - FE_INLINE_OFF &&
					    decrypts_under(mk, kk, ctx, d + 2, tl))
						break;
				verr(vs, label, "symlink ino %llu: its target does not decrypt under its context's key %s%s%s",
				     (unsigned long long)ino, kname(k), kk <= 3 ? "; it does under " : "",
				     kk <= 3 ? kname(kk) : "");
			}
			continue;
		}
		if (!S_ISDIR(mode))
			continue;

		/* a directory: its names, under its own key */
		ndi = 0;
		for (j = find_item(v, n, ino, BTRFS_DIR_INDEX_KEY);
		     j < n && v[j].obj == ino && v[j].type == BTRFS_DIR_INDEX_KEY; j++) {
			d = v[j].data;
			if (v[j].len < DI_SIZE) {
				verr(vs, label, "dir %llu: a DIR_INDEX item of %u bytes",
				     (unsigned long long)ino, v[j].len);
				continue;
			}
			nl = le16toh(*(const uint16_t *)(d + DI_NAME_LEN_OFF));
			if (DI_SIZE + nl > v[j].len) {
				verr(vs, label, "dir %llu: a DIR_INDEX name beyond its item",
				     (unsigned long long)ino);
				continue;
			}
			ndi++;
			vs->names++;
			child = le64toh(*(const uint64_t *)d);
			if (k < 0 ? !name_ok(d + DI_SIZE, nl, 0) :
			    (k == 0 || !decrypts_under(mk, k, ctx, d + DI_SIZE, nl))) {
				vs->names_bad++;
				for (kk = 1; kk <= 3 && k >= 0; kk++)
					if (kk != k && decrypts_under(mk, kk, ctx, d + DI_SIZE, nl))
						break;
				verr(vs, label, "dir %llu (%s): the %zu-byte name of ino %llu (index %llu) is %s%s%s",
				     (unsigned long long)ino, k < 0 ? "unencrypted" : kname(k), nl,
				     (unsigned long long)child, (unsigned long long)v[j].off,
				     k < 0 ? "not a plain name of the test" :
				     "no name of the test under its directory's key",
				     k >= 0 && kk <= 3 ? "; it is one under " : "",
				     k >= 0 && kk <= 3 ? kname(kk) : "");
			}
			/* the child's ref carries the same bytes, the child has the dir's key */
			if (!ref_has(v, n, child, ino, d + DI_SIZE, nl))
				verr(vs, label, "dir %llu: ino %llu has no INODE_REF with the name of its DIR_INDEX %llu",
				     (unsigned long long)ino, (unsigned long long)child,
				     (unsigned long long)v[j].off);
			if (k >= 0) {
				cctx = NULL;
				ck = ctx_of(v, n, child, &cctx);
				if (ck != k && !strict && ck > 0 && k > 0)
					vs->boundaries++;
				else if (ck != k)
					verr(vs, label, "dir %llu (%s): its child ino %llu has %s",
					     (unsigned long long)ino, kname(k),
					     (unsigned long long)child, kname(ck));
			}
			/* ... and a DIR_ITEM with the same name */
			if (!dir_items(v, n, ino, d + DI_SIZE, nl, child))
				verr(vs, label, "dir %llu: no DIR_ITEM for the name of its DIR_INDEX %llu",
				     (unsigned long long)ino, (unsigned long long)v[j].off);
		}
		/* as many DIR_ITEM names as DIR_INDEX items */
		c = dir_items(v, n, ino, NULL, 0, 0);
		if (c != ndi)
			verr(vs, label, "dir %llu: %zu DIR_ITEM names, %zu DIR_INDEX items",
			     (unsigned long long)ino, c, ndi);
	}
	for (i = 0; i < n; i++)
		free(v[i].data);
	free(v);
	printf("  %s: %ld names; dirs/files/symlinks unencrypted %ld/%ld/%ld, K1 %ld/%ld/%ld, K2 %ld/%ld/%ld, K3 %ld/%ld/%ld; %ld key boundaries, %ld bad names, %ld errors\n",
	       label, vs->names, vs->dirs[0], vs->files[0], vs->links[0], vs->dirs[1], vs->files[1],
	       vs->links[1], vs->dirs[2], vs->files[2], vs->links[2], vs->dirs[3], vs->files[3],
	       vs->links[3], vs->boundaries, vs->names_bad, vs->errors);
}

/* ---- the verifier: by path ----------------------------------------------------------------------------------- */

static long files_checked, files_bad, paths_named;

static void walk(int dfd, const char *rel, int depth)
{
	struct dirent *de;
	char sub[REL_MAX];
	DIR *d;
	int fd;

	d = fdopendir(dfd);
	if (!d) {
		CHECK(0, "listing %s: " LAB_ERR_FMT, rel, LAB_ERR_ARGS(errno));
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		paths_named++;
		if (!CHECK(name_ok((const uint8_t *)de->d_name, strlen(de->d_name), 0),
			   "%s lists a name (%zu bytes) that is not one of the test, with every key added",
			   rel, strlen(de->d_name)))
			continue;
		if (de->d_type != DT_DIR || depth > 8)
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		join(sub, rel, de->d_name);
		if (CHECK(fd >= 0, "open %s: " LAB_ERR_FMT, sub, LAB_ERR_ARGS(errno)))
			walk(fd, sub, depth + 1);
	}
	closedir(d);
}

static void check_path(int base, const char *rel, int link, const unsigned char *want, size_t len)
{
	static unsigned char got[FMAX + 1];
	ssize_t n;
	int fd;

	files_checked++;
	if (link) {
		n = readlinkat(base, rel, (char *)got, sizeof(got));
	} else {
		fd = openat(base, rel, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			n = -1;
		} else {
			n = lab_pread_full(fd, got, sizeof(got), 0);
			close(fd);
		}
	}
	if (!CHECK(n >= 0, "%s %s: " LAB_ERR_FMT, link ? "readlink" : "read", rel,
		   LAB_ERR_ARGS(errno))) {
		files_bad++;
		return;
	}
	if (!CHECK((size_t)n == len && !memcmp(got, want, len),
		   "%s: %zd bytes, the model %zu, first difference at %zu", rel, n, len,
		   lab_first_diff(got, want, (size_t)n < len ? (size_t)n : len)))
		files_bad++;
}

static void verify_paths(void)
{
	static unsigned char want[SFILE_MAX];
	struct stat a, b;
	long unknown = 0;
	int base, i, w, j;

	base = open(sv_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!CHECK(base >= 0, "open %s: " LAB_ERR_FMT, sv_path, LAB_ERR_ARGS(errno)))
		return;
	walk(dup(base), "sv", 0);
	for (i = 0; i < NSENTS; i++) {
		if (sents[i].link) {
			check_path(base, sents[i].rel, 1, (const unsigned char *)sents[i].target,
				   strlen(sents[i].target));
		} else {
			fill_pattern(want, sents[i].len, sents[i].pseed);
			check_path(base, sents[i].rel, 0, want, sents[i].len);
		}
	}
	for (w = 0; w < NDATA; w++) {
		for (i = 0; i < MF; i++) {
			const struct mfile *f = &S->m[w].f[i];

			if (!f->used)
				continue;
			if (f->known)
				check_path(base, f->name[0], f->link, f->data, f->len);
			else
				unknown++;
			if (f->nnames == 2 &&
			    CHECK(!fstatat(base, f->name[0], &a, AT_SYMLINK_NOFOLLOW) &&
				  !fstatat(base, f->name[1], &b, AT_SYMLINK_NOFOLLOW),
				  "stat %s and %s: " LAB_ERR_FMT, f->name[0], f->name[1],
				  LAB_ERR_ARGS(errno)))
				CHECK(a.st_ino == b.st_ino, "%s and %s are not one inode", f->name[0],
				      f->name[1]);
		}
		for (j = 0; j < MD; j++) {
			const struct mdir *d = &S->m[w].d[j];

			if (d->used)
				CHECK(!fstatat(base, d->path, &a, 0) && S_ISDIR(a.st_mode),
				      "directory %s: " LAB_ERR_FMT, d->path, LAB_ERR_ARGS(errno));
		}
	}
	close(base);
	printf("  by path: %ld names listed, %ld files and symlinks compared (%ld wrong), %ld left out (contents not known: a write or reflink failed)\n",
	       paths_named, files_checked, files_bad, unknown);
}

/* ---- setup -------------------------------------------------------------------------------------------- */

static void build_tree(void)
{
	uint64_t rng = seed ^ 0x7472656555ULL;
	unsigned char *buf = lab_xmalloc(SFILE_MAX);
	char path[PATH_MAX], prefix[32], name[NAME_MAX + 1];
	int t, s, i, e = 0, di = 0, fd;

	for (t = 0; t < NTOP; t++) {
		snprintf(sdirs[di++], sizeof(sdirs[0]), "enc.%d", t);
		for (s = 0; s < NSUB; s++)
			snprintf(sdirs[di++], sizeof(sdirs[0]), "enc.%d/sub.%d", t, s);
	}
	for (i = 0; i < NPDIRS; i++) {
		PATHF(path, "%s/%s", sv_path, pdirs[i]);
		if (i && mkdir(path, 0777))
			lab_die("mkdir %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
		if (chmod(path, 0777))
			lab_die("chmod %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	}
	for (di = 0; di < NSDIRS; di++) {
		PATHF(path, "%s/%s", sv_path, sdirs[di]);
		if (mkdir(path, 0777) || chmod(path, 0777))
			lab_die("mkdir %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
		if (di % (1 + NSUB) == 0 && lab_set_policy(path, ids[1]))
			lab_die("the policy of K1 on %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
		for (i = 0; i < NSFILES + NSLINKS; i++, e++) {
			struct sent *se = &sents[e];

			snprintf(prefix, sizeof(prefix), "%s%d.%d.", i < NSFILES ? "st" : "sl", di, i);
			make_name(&rng, name, i == 0 ? 255 : pick_len(&rng, strlen(prefix)), prefix);
			join(se->rel, sdirs[di], name);
			PATHF(path, "%s/%s", sv_path, se->rel);
			if (i >= NSFILES) {
				se->link = 1;
				make_name(&rng, se->target, 2 + lab_splitmix64(&rng) % (TGT_MAX - 8), "t.");
				if (symlink(se->target, path))
					lab_die("symlink %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
				continue;
			}
			se->len = lab_splitmix64(&rng) % (SFILE_MAX + 1);
			se->pseed = (uint32_t)lab_splitmix64(&rng);
			fill_pattern(buf, se->len, se->pseed);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
			if (fd < 0 || write_all(fd, buf, se->len) || close(fd))
				lab_die("create %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
		}
	}
	free(buf);
}

static void probe_rekey(void)
{
	rk_args_t a;
	int r, fd, e;

	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		lab_die("open %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
	rekey_fd(fd, 1, 2, &a);
	a.flags = 1;
	r = ioctl(fd, BTRFS_IOC_FSCRYPT_REKEY, &a);
	e = errno;
	close(fd);
	if (r == 0)
		lab_die("a rekey with flags 1 succeeded");
	if (e == ENOTTY)
		lab_skip("the kernel's btrfs has no BTRFS_IOC_FSCRYPT_REKEY (ENOTTY)");
	if (e != EINVAL)
		lab_die("a rekey with flags 1: " LAB_ERR_FMT ", expected EINVAL", LAB_ERR_ARGS(e));
}

static void add_all_keys(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), k;

	if (!CHECK(fd >= 0, "open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno)))
		return;
	for (k = 1; k <= 3; k++)
		CHECK(!add_key_fd(fd, k), "adding K%d: " LAB_ERR_FMT, k, LAB_ERR_ARGS(errno));
	close(fd);
}

/* The final rekey of sv to @to, retried while busy, and again: nothing moves. */
static int final_rekey(int to)
{
	rk_args_t a;
	int fd, tries, r = -1, e = 0;

	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!CHECK(fd >= 0, "open %s: " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno)))
		return -1;
	for (tries = 0; tries < 30; tries++) {
		r = rekey_fd(fd, 3 - to, to, &a);
		e = errno;
		printf("final rekey K%d -> K%d: %s; " LAB_REKEY_COUNTS_FMT "\n", 3 - to, to,
		       r ? lab_errname(e) : "done", LAB_REKEY_COUNTS_ARGS(&a));
		if (!r || (e != EBUSY && e != ENOKEY))
			break;
		lab_drop_caches("2");
		lab_sleep_ms(500);
	}
	if (CHECK(!r, "the final rekey K%d -> K%d: " LAB_ERR_FMT, 3 - to, to, LAB_ERR_ARGS(e))) {
		r = rekey_fd(fd, 3 - to, to, &a);
		e = errno;
		CHECK(!r && lab_rekey_moved_nothing(&a),
		      "the final rekey again: %s, moved " LAB_REKEY_COUNTS_FMT "; expected nothing",
		      r ? lab_errname(e) : "0", LAB_REKEY_COUNTS_ARGS(&a));
	}
	close(fd);
	return r;
}

static unsigned long long env_ull(const char *name, unsigned long long def, int *set)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (set)
		*set = 0;
	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		lab_die("%s=%s is not a number", name, s);
	if (set)
		*set = 1;
	return v;
}

static void parse_skip(void)
{
	const char *s = getenv("REKEY_ADVERSARY_SKIP");
	char buf[256], *tok, *save = NULL;
	int op;

	if (!s || !*s)
		return;
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (op = 0; op < OP_NR; op++)
			if (!strcmp(tok, op_name[op]))
				break;
		if (op == OP_NR || op == OP_REKEY)
			lab_die("REKEY_ADVERSARY_SKIP: unknown or required operation '%s'", tok);
		disabled[op] = 1;
		printf("left out: %s\n", tok);
	}
}

/* ---- the report ---------------------------------------------------------------------------------------------- */

static long print_counts(void)
{
	long total = 0, n, e;
	int op, i;

	printf("operations (result: count):\n");
	for (op = 0; op < OP_NR; op++) {
		char line[1024];
		size_t len = 0;

		n = 0;
		for (i = 0; i < ERRMAX; i++)
			n += S->cnt[op][i];
		if (!n)
			continue;
		if (op != OP_REKEY)
			total += n;
		len += snprintf(line + len, sizeof(line) - len, "  %-13s %7ld: ok %ld", op_name[op], n,
				S->cnt[op][0]);
		for (i = 1; i < ERRMAX; i++) {
			e = S->cnt[op][i];
			if (e && len < sizeof(line) - 40)
				len += snprintf(line + len, sizeof(line) - len, ", %s %ld",
						i == ERR_SHORT ? "short" : lab_errname(i), e);
		}
		printf("%s\n", line);
	}
	return total;
}

static void write_figures(double secs, long ops, long tried, const struct vstats *vs,
			  int check_clean)
{
	const char *path = getenv("REKEY_ADVERSARY_FIGURES");
	char def[PATH_MAX];
	FILE *f;

	if (!path || !*path) {
		if (!getenv("RESULTS"))
			return;
		PATHF(def, "%s/rekey-adversary-figures.tsv", getenv("RESULTS"));
		path = def;
	}
	f = fopen(path, "w");
	if (!f) {
		printf("cannot write %s: " LAB_ERR_FMT "\n", path, LAB_ERR_ARGS(errno));
		return;
	}
	fprintf(f, "seed\t0x%llx\n", seed);
	fprintf(f, "seconds\t%.0f\n", secs);
	fprintf(f, "rekeys_completed\t%ld\n", S->rekeys_done);
	fprintf(f, "rekeys_tried\t%ld\n", tried);
	fprintf(f, "rekeys_busy\t%ld\n", S->cnt[OP_REKEY][EBUSY]);
	fprintf(f, "rekeys_enokey\t%ld\n", S->cnt[OP_REKEY][ENOKEY]);
	fprintf(f, "ops\t%ld\n", ops);
	fprintf(f, "live_failures\t%ld\n", S->failures);
	fprintf(f, "garbage_names\t%ld\n", S->names_garbage);
	fprintf(f, "mismatches\t%ld\n", S->mismatches);
	fprintf(f, "readlinks_nokey\t%ld\n", S->readlinks_nokey);
	fprintf(f, "kmsg_bad\t%ld\n", kmsg_bad);
	fprintf(f, "aborts\t%ld\n", kmsg_aborts);
	fprintf(f, "went_ro\t%d\n", went_ro);
	fprintf(f, "names_checked\t%ld\n", vs->names);
	fprintf(f, "disk_errors\t%ld\n", vs->errors);
	fprintf(f, "files_checked\t%ld\n", files_checked);
	fprintf(f, "files_bad\t%ld\n", files_bad);
	fprintf(f, "check_clean\t%d\n", check_clean);
	fprintf(f, "failures\t%d\n", lab_failures);
	fclose(f);
	printf("figures: %s\n", path);
}

/* ---- main ------------------------------------------------------------------------------------------------------ */

/*
 * The premise of nokey_form_while_key_out(), checked: with enc.0 held
 * (O_PATH), removing K1 for all users is incomplete; the symlink, not
 * held, is evicted, and its name, looked up again in plaintext through
 * the held directory, gives a symlink without a key, whose readlink is
 * the no-key form.  With K1 back, the target again.
 */
static void nokey_readlink_control(void)
{
	struct fscrypt_remove_key_arg arg;
	const struct sent *s = NULL;
	char path[PATH_MAX], got[TGT_MAX * 2];
	ssize_t n, nk;
	int i, dfd;

	for (i = 0; i < NSENTS && !s; i++)
		if (sents[i].link && !strncmp(sents[i].rel, sdirs[0], strlen(sdirs[0])) &&
		    sents[i].rel[strlen(sdirs[0])] == '/')
			s = &sents[i];
	if (!s)
		lab_die("no static symlink in %s", sdirs[0]);
	PATHF(path, "%s/%s", sv_path, sdirs[0]);
	dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		lab_die("open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	memset(&arg, 0, sizeof(arg));
	arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	memcpy(arg.key_spec.u.identifier, ids[1], FSCRYPT_KEY_IDENTIFIER_SIZE);
	if (ioctl(probe_fd, FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS, &arg))
		lab_die("removing K1 for all users: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	PATHF(path, "%s/%s", sv_path, s->rel);
	n = readlink(path, got, sizeof(got) - 1);
	got[n < 0 ? 0 : n] = '\0';
	CHECK(arg.removal_status_flags & FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY,
	      "control: K1 removed with %s held, but not incompletely (flags 0x%x)", sdirs[0],
	      arg.removal_status_flags);
	CHECK(n > 0 && nokey_name(got),
	      "control: with K1 half removed, readlink of %s gave %zd (%s), not a no-key form",
	      s->rel, n, n < 0 ? strerror(errno) : got);
	close(dfd);
	nk = n;
	if (add_key_fd(probe_fd, 1))
		lab_die("adding K1 back: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	n = readlink(path, got, sizeof(got) - 1);
	CHECK(n == (ssize_t)strlen(s->target) && !memcmp(got, s->target, n),
	      "control: with K1 back, readlink of %s gave %zd bytes, not its target", s->rel, n);
	printf("control: a symlink in %s, held, with K1 half removed reads back in its no-key form (%zd bytes), and its target with K1 back\n",
	       sdirs[0], nk);
}

int main(int argc, char **argv)
{
	static const struct lab_fscrypt_fs fs = { .name = "btrfs", .mkfs_cmd = MKFS };
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE], swapped[4][LAB_MASTER_KEY_SIZE];
	pid_t pid[W_NR];
	struct vstats vs, vs_snap, vs_ctl;
	char why[256], path[PATH_MAX];
	long long start, t, last_progress = 0, last_ro = 0;
	unsigned long long secs;
	struct dirent *de;
	int i, k, code, seed_set, check_clean = 0, final_ok = 0, to;
	long tried, ops;
	double ran;
	DIR *d;

	setvbuf(stdout, NULL, _IOLBF, 0);
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	mnt2 = lab_env("SCRATCH_MNT2");
	secs = env_ull("REKEY_ADVERSARY_SECONDS", DEFAULT_SECONDS, NULL);
	if (argc > 1)
		secs = strtoull(argv[1], NULL, 0);
	seed = env_ull("REKEY_ADVERSARY_SEED", 0, &seed_set);
	if (!seed_set)
		lab_random(&seed, sizeof(seed));
	printf("btrfs rekey adversary: seed 0x%llx (REKEY_ADVERSARY_SEED), %llu s\n", seed, secs);
	parse_skip();

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("the kernel's btrfs has no per-extent keys (%s is missing)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	if (!lab_btrfs_progs_patched(why, sizeof(why)))
		lab_skip("%s", why);
	for (k = 1; k <= 3; k++) {
		lab_master_key(mks[k], (uint32_t)(seed >> (k * 8)) ^ (0x41445600u + k));
		if (fref_key_identifier(mks[k], LAB_MASTER_KEY_SIZE, ids[k]))
			lab_die("reference key identifier failed");
	}
	name_model_selftest();

	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (S == MAP_FAILED)
		lab_die("mmap: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	memset(S, 0, sizeof(*S));
	S->cur_key = 1;

	/* the filesystem, sv, the static tree, the second mount */
	lab_fscrypt_fs_setup(&fs, dev, mnt, NULL, mks[1], LAB_MASTER_KEY_SIZE, id);
	CHECK(!memcmp(id, ids[1], sizeof(id)), "K1's identifier is not the reference one");
	PATHF(sv_path, "%s/sv", mnt);
	PATHF(snaps_path, "%s/snaps", mnt);
	add_all_keys(mnt);
	lab_btrfs_subvol(mnt, "sv", -1);
	if (mkdir(snaps_path, 0755))
		lab_die("mkdir %s: " LAB_ERR_FMT, snaps_path, LAB_ERR_ARGS(errno));
	probe_rekey();
	build_tree();
	PATHF(path, "%s/probe", mnt);
	probe_fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (probe_fd < 0)
		lab_die("open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	if (syncfs(probe_fd))
		lab_die("syncfs: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (lab_mount(dev, mnt2, "btrfs", "subvol=sv"))
		lab_die("the second mount (subvol=sv) failed");
	printf("sv: %d directories (enc.* under K1), %d files, %d symlinks; second mount %s\n",
	       NSDIRS + 2, NSDIRS * NSFILES, NSDIRS * NSLINKS, mnt2);

	/* the verifier on the fresh tree, and its control with K1 and K2 swapped */
	printf("the verifier on the fresh tree:\n");
	verify_disk(sv_path, "fresh sv", 2, 1, (const uint8_t (*)[LAB_MASTER_KEY_SIZE])mks, &vs);
	CHECK(vs.errors == 0 && vs.names >= NSENTS, "the verifier fails the fresh tree (%ld errors, %ld names)",
	      vs.errors, vs.names);
	memcpy(swapped, mks, sizeof(swapped));
	memcpy(swapped[1], mks[2], LAB_MASTER_KEY_SIZE);
	memcpy(swapped[2], mks[1], LAB_MASTER_KEY_SIZE);
	verr_quiet = 1;
	verify_disk(sv_path, "control: K1 and K2 swapped", 0, 1, (const uint8_t (*)[LAB_MASTER_KEY_SIZE])swapped,
		    &vs_ctl);
	verr_quiet = 0;
	CHECK(vs_ctl.names_bad == NSDIRS - NTOP + NSENTS,
	      "control: with K1 and K2 swapped, %ld of the %d encrypted names are bad", vs_ctl.names_bad,
	      NSDIRS - NTOP + NSENTS);

	nokey_readlink_control();

	/* the adversary */
	kmsg_open();
	lab_log_mark("rekey-adversary-%d-start", (int)getpid());
	lab_console_line("LAB-PROGRESS rekey adversary: seed 0x%llx, %llu s, %d tasks\n", seed, secs,
			 W_NR);
	start = lab_now_ms();
	for (i = 0; i < W_NR; i++)
		pid[i] = lab_child_start(worker_main, (void *)(intptr_t)i);
	for (;;) {
		lab_sleep_ms(200);
		t = lab_now_ms() - start;
		kmsg_poll();
		if (t - last_ro >= 2000) {
			last_ro = t;
			ro_check(t);
		}
		if (t - last_progress >= 15000) {
			last_progress = t;
			lab_console_line("LAB-PROGRESS rekey adversary [%llds] %ld rekeys done (%ld busy), %ld failures, kernel log %ld bad lines%s\n",
					 t / 1000, S->rekeys_done, S->cnt[OP_REKEY][EBUSY], S->failures,
					 kmsg_bad, went_ro ? ", READ-ONLY" : "");
		}
		for (i = 0; i < W_NR; i++) {
			int st;

			if (pid[i] > 0 && waitpid(pid[i], &st, WNOHANG) == pid[i]) {
				CHECK(0, "task %s ended during the run (status 0x%x)", wdesc[i].name, st);
				pid[i] = 0;
			}
		}
		if (went_ro) {
			printf("the filesystem went read-only after %.1f s: stopping\n", ro_at / 1000.0);
			break;
		}
		if (t >= (long long)secs * 1000)
			break;
	}
	__atomic_store_n(&S->stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&S->gate_until, 0, __ATOMIC_RELEASE);
	ran = (lab_now_ms() - start) / 1000.0;
	for (i = 0; i < W_NR; i++) {
		if (pid[i] <= 0)
			continue;
		switch (lab_child_wait(pid[i], lab_now_ms() + 1000LL * STOP_WAIT_S, &code)) {
		case LAB_CHILD_EXITED:
			CHECK(code == 0, "task %s exited %d", wdesc[i].name, code);
			break;
		case LAB_CHILD_SIGNALED:
			CHECK(0, "task %s was killed by signal %d", wdesc[i].name, code);
			break;
		case LAB_CHILD_TIMEOUT:
			CHECK(0, "task %s still runs %d s after the stop (hung in the kernel?)",
			      wdesc[i].name, STOP_WAIT_S);
			lab_child_kill(pid[i], 2000);
			break;
		}
	}
	kmsg_poll();
	ro_check(lab_now_ms() - start);
	tried = 0;
	for (i = 0; i < ERRMAX; i++)
		tried += S->cnt[OP_REKEY][i];
	printf("\nadversary: %.1f s; rekeys: %ld completed (%ld with the gate) of %ld tried; moved %llu dirs (%llu names), %llu symlinks, %llu files in all; %.0f ms per rekey on average, %lld at most\n",
	       ran, S->rekeys_done, S->rekeys_gated_done, tried, S->moved[0], S->moved[1], S->moved[2],
	       S->moved[3], S->rekeys_done ? (double)S->rekey_ms_total / S->rekeys_done : 0.0,
	       S->rekey_ms_max);
	ops = print_counts();
	printf("key removals: %ld left files busy, %ld left other users' claims\n", S->rmkey_busy,
	       S->rmkey_others);
	printf("names listed: %ld of the test, %ld no-key, %ld neither; %ld reads compared, %ld mismatches; %ld readlinks in the no-key form while a key was out\n",
	       S->names_good, S->names_nokey, S->names_garbage, S->reads_compared, S->mismatches,
	       S->readlinks_nokey);
	CHECK(S->rekeys_done > 0 || went_ro, "no rekey completed in %.0f s", ran);
	CHECK(S->failures == 0, "%ld failures during the run (the first ones above and below)",
	      S->failures);
	for (i = 0; i < S->failures && i < NFAILMSG; i++)
		printf("  %s\n", S->msg[i]);

	/* the end: every key, the final rekey, unmount, check, mount, verify */
	printf("\nafter the run:\n");
	close(probe_fd);
	CHECK(!went_ro, "the filesystem went read-only after %.1f s", ro_at / 1000.0);
	to = S->cur_key;
	if (!went_ro) {
		add_all_keys(mnt);
		final_ok = final_rekey(to) == 0;
	} else {
		printf("the final rekey is left out: the filesystem is read-only\n");
	}
	kmsg_poll();
	CHECK(!lab_umount(mnt2), "umount %s", mnt2);
	CHECK(!lab_umount(mnt), "umount %s", mnt);
	check_clean = lab_btrfs_check_clean(dev, "the filesystem after the adversary");
	memset(&vs, 0, sizeof(vs));
	if (CHECK(!lab_mount(dev, mnt, "btrfs", NULL), "mounting again")) {
		add_all_keys(mnt);
		printf("on the device:\n");
		verify_disk(sv_path, "sv", final_ok ? 3 - to : 0, final_ok,
			    (const uint8_t (*)[LAB_MASTER_KEY_SIZE])mks, &vs);
		CHECK(vs.errors == 0, "sv on the device: %ld errors (%ld names not under their directory's key)",
		      vs.errors, vs.names_bad);
		d = opendir(snaps_path);
		while (d && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			PATHF(path, "%s/%s", snaps_path, de->d_name);
			verify_disk(path, de->d_name, 0, 0, (const uint8_t (*)[LAB_MASTER_KEY_SIZE])mks,
				    &vs_snap);
			CHECK(vs_snap.errors == 0, "snapshot %s on the device: %ld errors", de->d_name,
			      vs_snap.errors);
		}
		if (d)
			closedir(d);
		if (!went_ro)
			verify_paths();
		else
			printf("  by path: left out: the filesystem went read-only, and what the tasks did after its last commit is gone\n");
		kmsg_poll();
		CHECK(!lab_umount(mnt), "umount %s", mnt);
	}
	kmsg_poll();
	CHECK(kmsg_bad == 0, "%ld kernel log lines of aborts, errors or splats (%ld transaction aborts)",
	      kmsg_bad, kmsg_aborts);
	for (i = 0; i < kmsg_bad && i < (int)(sizeof(kmsg_lines) / sizeof(kmsg_lines[0])); i++)
		printf("  kernel log: %s\n", kmsg_lines[i]);
	if (kmsg_lost)
		printf("(%ld kernel log records were overwritten before they were read)\n", kmsg_lost);
	write_figures(ran, ops, tried, &vs, check_clean);
	lab_console_line("LAB-PROGRESS rekey adversary: %.0f s, %ld rekeys completed of %ld, %ld operations, %ld failures during the run, %d in all\n",
			 ran, S->rekeys_done, tried, ops, S->failures, lab_failures);
	return lab_result("btrfs fscrypt rekey adversary");
}
