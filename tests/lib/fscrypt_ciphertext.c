// SPDX-License-Identifier: GPL-2.0
/*
 * fscrypt_ciphertext.c - is what the filesystem wrote to the device exactly
 * the ciphertext fscrypt v2 defines?  (The design of xfstests generic/582,
 * written anew for this lab.)
 *
 *  1. a random 64-byte master key; its identifier from the kernel must equal
 *     HKDF-SHA512 computed here;
 *  2. a v2 policy (AES-256-XTS / AES-256-CTS, PAD_32) on an empty directory;
 *     files of several blocks (whole and partial last block) with names of
 *     4, 40, 200 and 250 bytes (ciphertext 32, 64, 224 and 255 bytes: the
 *     last is not a multiple of 16, so ciphertext stealing is exercised);
 *  3. nonces (FS_IOC_GET_ENCRYPTION_NONCE), inode numbers and FIEMAP while
 *     mounted; then unmount;
 *  4. every data block read from the device with O_DIRECT must equal
 *     AES-256-XTS(per-file key, IV = logical block) of the plaintext padded
 *     with zeros; every name's AES-256-CTS ciphertext must be on the device
 *     inside a real directory entry of that filesystem;
 *  5. negative controls: the same computations with one master-key bit
 *     flipped (and, for data, with the wrong IV) must match nothing, so the
 *     check cannot pass by accident;
 *  6. positive control of the locating: an unencrypted file and name on the
 *     same filesystem must be found, through the very same FIEMAP, mapping
 *     and directory-entry code, as their plaintext.  This part runs even
 *     where the filesystem has no fscrypt: the test then fails if it fails,
 *     and skips only if it passes.
 *
 * The contents model is per-inode keys.  btrfs is mounted with the option
 * selecting them; if the kernel refuses it (per-extent keys only, so far),
 * the names, the controls and "no block is plaintext" are still checked and
 * fail the test on a mismatch, but the contents are compared for the record
 * only: if they match anyway the test passes, else it skips and says so.
 *
 * Device offsets: ext4's FIEMAP gives them directly.  btrfs's FIEMAP gives
 * btrfs logical addresses; they are mapped to device offsets through the
 * chunk tree (the test prints the map: with mkfs.btrfs -d single -m single
 * on one device the data chunk's logical address equals its device offset,
 * but that is checked, not assumed).
 */
#include "btrfs_progs.h"
#include "fscrypt_blocks.h"
#include "fscrypt_ondisk.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/btrfs_tree.h>

#define CT_NENC 4			/* encrypted files */
#define CT_NFILES (CT_NENC + 1)		/* and the unencrypted control */
#define CT_CONTROL CT_NENC
#define EXT4_FT_REG_FILE 1
#define EXT4_DIRENT_HDR 8	/* inode, rec_len, name_len, file_type */
#define BTRFS_DIR_ITEM_HDR ((int)sizeof(struct btrfs_dir_item))	/* 30 */

struct ct_file {
	int plain;			/* the unencrypted control */
	char path[PATH_MAX];
	char name[FREF_NAME_MAX + 1];
	size_t namelen;
	size_t size;
	uint8_t *data;
	ino_t ino;
	uint8_t nonce[FREF_NONCE_SIZE];
	struct raw_extent *ext;
	size_t next;
	/* the name as stored (ciphertext, or the control's plaintext) and its
	 * ciphertext with the wrong key */
	uint8_t ct_name[FREF_NAME_MAX], bad_ct_name[FREF_NAME_MAX];
	size_t ct_len;
};

struct ct_ctx {
	const struct lab_fscrypt_fs *fs;
	const char *dev, *mnt;
	int btrfs;
	int encrypted;			/* the fs has fscrypt: files 0..CT_NENC-1 exist */
	int opts_refused;		/* fs->mount_opts refused: contents model unsure */
	size_t model_mismatch;		/* blocks differing while opts_refused */
	char dir[PATH_MAX], plain_dir[PATH_MAX];
	uint8_t mk[64], bad_mk[64];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct fscrypt_policy_v2 policy;
	uint8_t dir_nonce[FREF_NONCE_SIZE];
	unsigned bs;
	struct ct_file files[CT_NFILES];
	struct raw_btrfs_chunk *chunks;
	size_t nchunks;
	/* totals for the summary: encrypted files, control */
	size_t blocks_ok, copies_read, names_ok, ctl_blocks_ok, ctl_name_ok;
};

/* ---- setup ----------------------------------------------------------------- */

static void ct_plan(struct ct_ctx *c, unsigned bs)
{
	/* name length, file size in blocks + extra bytes */
	static const struct { size_t namelen, blocks, extra; } plan[CT_NFILES] = {
		{ 4, 4, 0 },		/* whole blocks */
		{ 40, 3, 1000 },	/* partial last block */
		{ 200, 1, 1 },		/* a 1-byte last block */
		{ 250, 3, 4095 },	/* name ciphertext 255 bytes */
		{ 40, 3, 1000 },	/* the unencrypted control */
	};
	char tag[9];
	size_t i, n;

	lab_random_hex(tag, 4);
	for (i = 0; i < CT_NFILES; i++) {
		struct ct_file *f = &c->files[i];

		/* distinctive, unique per run, exactly plan[i].namelen bytes */
		f->plain = i == CT_CONTROL;
		n = (size_t)snprintf(f->name, sizeof(f->name), "%zu%s-%s-check-", i,
				     tag, f->plain ? "locating" : "ciphertext");
		if (n > plan[i].namelen)
			n = plan[i].namelen;
		while (n < plan[i].namelen) {
			f->name[n] = (char)('a' + (n * 7 + i) % 26);
			n++;
		}
		f->name[n] = '\0';
		f->namelen = n;
		f->size = plan[i].blocks * bs + plan[i].extra;
		f->data = lab_xmalloc(f->size);
		lab_random(f->data, f->size);
		PATHF(f->path, "%s/%s", f->plain ? c->plain_dir : c->dir, f->name);
	}
}

static void ct_write(const struct ct_file *f)
{
	if (!CHECK_OK(write_file(f->path, f->data, f->size), "write %s", f->path) ||
	    !CHECK_OK(fsync_path(f->path), "fsync %s", f->path))
		lab_die("cannot write the test files");
}

/* The unencrypted control file, before we know whether fscrypt is there. */
static void ct_write_control(struct ct_ctx *c)
{
	if (!CHECK_OK(mkdir(c->plain_dir, 0755), "mkdir(%s)", c->plain_dir))
		lab_die("cannot create the control directory");
	ct_write(&c->files[CT_CONTROL]);
	CHECK_OK(fsync_path(c->plain_dir), "fsync %s", c->plain_dir);
}

/* The encrypted directory and files. */
static void ct_write_encrypted(struct ct_ctx *c)
{
	char hex[33];
	size_t i;

	if (!CHECK_OK(mkdir(c->dir, 0755), "mkdir(%s)", c->dir))
		lab_die("cannot create the encrypted directory");
	lab_default_policy(&c->policy, c->id);
	if (!CHECK_OK(lab_set_policy_v2(c->dir, &c->policy),
		      "FS_IOC_SET_ENCRYPTION_POLICY on %s", c->dir))
		lab_die("cannot set the policy");
	if (!CHECK_OK(lab_get_nonce(c->dir, c->dir_nonce),
		      "FS_IOC_GET_ENCRYPTION_NONCE on %s", c->dir))
		lab_die("no directory nonce");
	printf("policy v2 contents %u names %u flags 0x%x; directory nonce %s\n",
	       c->policy.contents_encryption_mode,
	       c->policy.filenames_encryption_mode, c->policy.flags,
	       lab_hex(hex, c->dir_nonce, sizeof(c->dir_nonce)));
	for (i = 0; i < CT_NENC; i++)
		ct_write(&c->files[i]);
	CHECK_OK(fsync_path(c->dir), "fsync %s", c->dir);
}

/* Learn the files' inode numbers, nonces and extents (while mounted). */
static void ct_learn(struct ct_ctx *c)
{
	char hex[33];
	struct stat st;
	size_t i, j;

	sync();
	for (i = 0; i < CT_NFILES; i++) {
		struct ct_file *f = &c->files[i];

		if (!f->plain && !c->encrypted)
			continue;
		CHECK_FILE_EQUALS(f->path, f->data, f->size);
		if (!CHECK_OK(stat(f->path, &st), "stat %s", f->path) ||
		    (!f->plain && !CHECK_OK(lab_get_nonce(f->path, f->nonce),
					    "FS_IOC_GET_ENCRYPTION_NONCE on %s", f->path)) ||
		    !CHECK_OK(raw_fiemap(f->path, &f->ext, &f->next), "FIEMAP of %s", f->path))
			lab_die("cannot learn where file %zu is", i);
		f->ino = st.st_ino;
		printf("file %zu%s: name %zu bytes, %zu bytes of data, ino %llu, nonce %s, %zu extent(s):",
		       i, f->plain ? " (unencrypted control)" : "", f->namelen, f->size,
		       (unsigned long long)f->ino,
		       f->plain ? "-" : lab_hex(hex, f->nonce, sizeof(f->nonce)), f->next);
		for (j = 0; j < f->next; j++)
			printf(" [%llu+%llu @%llu flags 0x%x]",
			       (unsigned long long)f->ext[j].logical,
			       (unsigned long long)f->ext[j].length,
			       (unsigned long long)f->ext[j].physical, f->ext[j].flags);
		printf("\n");
	}
}

/* ---- data ------------------------------------------------------------------ */

/* Device offsets of the block at FIEMAP address @addr; returns the count. */
static int ct_locate(const struct ct_ctx *c, uint64_t addr,
		     uint64_t offs[RAW_BTRFS_MAX_STRIPES])
{
	if (!c->btrfs) {
		offs[0] = addr;
		return 1;
	}
	return raw_btrfs_map(c->chunks, c->nchunks, addr, c->bs, offs);
}

/*
 * Compare one copy of a block of @f, read at device offset @off.  With the
 * mount options refused, a mismatch of an encrypted block is noted, not a
 * failure (see the top of the file).
 */
static void ct_check_copy(struct ct_ctx *c, const struct ct_file *f,
			  uint64_t lblk, uint64_t off, struct fblk_block *b)
{
	int lenient = !f->plain && c->opts_refused;
	int r;

	if (!f->plain)
		c->copies_read++;
	r = fblk_check_copy(c->dev, c->bs, off, b, !lenient);
	if (r == 0 && lenient) {
		if (c->model_mismatch++ == 0)
			printf("NOTE: file %s block %llu at device offset %llu is not the per-inode-key ciphertext (from byte %zu on); not a failure: %s refused \"%s\"\n",
			       f->name, (unsigned long long)lblk, (unsigned long long)off,
			       lab_first_diff(b->want, b->raw, c->bs), c->fs->name,
			       c->fs->mount_opts);
	} else if (r == 1 && f->plain) {
		c->ctl_blocks_ok++;
	} else if (r == 1) {
		c->blocks_ok++;
	}
}

static void ct_check_file_data(struct ct_ctx *c, const struct ct_file *f)
{
	uint8_t key[FREF_XTS_KEY_SIZE], bad[FREF_XTS_KEY_SIZE];
	uint64_t nblocks = (f->size + c->bs - 1) / c->bs, lblk, b;
	uint64_t offs[RAW_BTRFS_MAX_STRIPES];
	struct fblk_block r;
	unsigned *seen = calloc(nblocks, sizeof(*seen));
	size_t e;
	int ncopies, k;

	if (!seen)
		lab_die("out of memory");
	if (!f->plain &&
	    (fref_per_file_key(c->mk, sizeof(c->mk), f->nonce, key, sizeof(key)) ||
	     fref_per_file_key(c->bad_mk, sizeof(c->bad_mk), f->nonce, bad, sizeof(bad))))
		lab_die("cannot derive the per-file keys");
	fblk_alloc(&r, c->bs);
	r.encrypted = !f->plain;
	r.want_what = f->plain ? "plaintext written (unencrypted control: the locating is wrong)" :
		      "reference ciphertext";
	r.nctl = f->plain ? 0 : 2;
	snprintf(r.ctl_what[0], sizeof(r.ctl_what[0]),
		 "ciphertext made with a flipped master-key bit");
	for (e = 0; e < f->next; e++) {
		const struct raw_extent *x = &f->ext[e];

		if (!CHECK(!(x->flags & FBLK_BAD_EXTENT_FLAGS) &&
			   x->logical % c->bs == 0 && x->length % c->bs == 0,
			   "file %s: extent at file offset %llu (length %llu, flags 0x%x) is not plain whole blocks at a device address; cannot locate its ciphertext",
			   f->name, (unsigned long long)x->logical,
			   (unsigned long long)x->length, x->flags))
			continue;
		for (b = 0; b < x->length / c->bs; b++) {
			lblk = x->logical / c->bs + b;
			if (lblk >= nblocks)
				break;
			seen[lblk]++;
			snprintf(r.what, sizeof(r.what), "file %s: block %llu",
				 f->name, (unsigned long long)lblk);
			snprintf(r.ctl_what[1], sizeof(r.ctl_what[1]),
				 "ciphertext made with IV %llu",
				 (unsigned long long)lblk + 1);
			fblk_plaintext(&r, f->data, f->size, lblk, c->bs);
			if (f->plain)
				memcpy(r.want, r.pt, c->bs);
			else if (fref_encrypt_block(key, lblk, r.pt, r.want, c->bs) ||
				 fref_encrypt_block(bad, lblk, r.pt, r.ctl[0], c->bs) ||
				 fref_encrypt_block(key, lblk + 1, r.pt, r.ctl[1], c->bs))
				lab_die("reference encryption failed");
			ncopies = ct_locate(c, x->physical + b * c->bs, offs);
			if (!CHECK(ncopies > 0, "file %s block %llu: FIEMAP address %llu does not map to the device",
				   f->name, (unsigned long long)lblk,
				   (unsigned long long)(x->physical + b * c->bs)))
				continue;
			for (k = 0; k < ncopies; k++)
				ct_check_copy(c, f, lblk, offs[k], &r);
		}
	}
	for (lblk = 0; lblk < nblocks; lblk++)
		CHECK(seen[lblk] == 1, "file %s: block %llu is covered by %u FIEMAP extents (expected 1)",
		      f->name, (unsigned long long)lblk, seen[lblk]);
	fblk_free(&r);
	free(seen);
}

/* ---- names ------------------------------------------------------------------ */

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n-- > 0)
		v = (v << 8) | p[n];
	return v;
}

/*
 * Is the name ciphertext of @f at device offset @off the name of a real
 * directory entry?  Describes what precedes it in @why.
 */
static int ct_in_dirent(const struct ct_ctx *c, const struct ct_file *f,
			uint64_t off, char *why, size_t whylen)
{
	uint8_t h[BTRFS_DIR_ITEM_HDR];

	if (!c->btrfs) {
		/* struct ext4_dir_entry_2: le32 inode, le16 rec_len, u8 name_len, u8 file_type */
		uint64_t ino, rec_len, min_rec = (EXT4_DIRENT_HDR + f->ct_len + 3) / 4 * 4;

		if (off < EXT4_DIRENT_HDR || raw_read(c->dev, off - EXT4_DIRENT_HDR, h, EXT4_DIRENT_HDR)) {
			snprintf(why, whylen, "cannot read the 8 bytes before it");
			return 0;
		}
		ino = le(h, 4);
		rec_len = le(h + 4, 2);
		snprintf(why, whylen, "ext4_dir_entry_2? inode %llu rec_len %llu name_len %u file_type %u%s",
			 (unsigned long long)ino, (unsigned long long)rec_len, h[6], h[7],
			 (off - EXT4_DIRENT_HDR) % 4 ? " (not 4-byte aligned)" : "");
		return (off - EXT4_DIRENT_HDR) % 4 == 0 && ino == f->ino &&
		       rec_len >= min_rec && rec_len % 4 == 0 && rec_len <= c->bs &&
		       h[6] == f->ct_len && h[7] == EXT4_FT_REG_FILE;
	}
	/*
	 * struct btrfs_dir_item: disk_key location {le64 objectid, u8 type,
	 * le64 offset}, le64 transid, le16 data_len, le16 name_len, u8 type.
	 * The type's high bit may flag an encrypted name; the low bits are
	 * the file type.
	 */
	if (off < BTRFS_DIR_ITEM_HDR || raw_read(c->dev, off - BTRFS_DIR_ITEM_HDR, h, sizeof(h))) {
		snprintf(why, whylen, "cannot read the 30 bytes before it");
		return 0;
	}
	snprintf(why, whylen, "btrfs_dir_item? location (%llu %u %llu) transid %llu data_len %llu name_len %llu type 0x%x",
		 (unsigned long long)le(h, 8), h[8], (unsigned long long)le(h + 9, 8),
		 (unsigned long long)le(h + 17, 8), (unsigned long long)le(h + 25, 2),
		 (unsigned long long)le(h + 27, 2), h[29]);
	return le(h, 8) == f->ino && h[8] == BTRFS_INODE_ITEM_KEY &&
	       le(h + 9, 8) == 0 && le(h + 17, 8) > 0 && le(h + 25, 2) == 0 &&
	       le(h + 27, 2) == f->ct_len && (h[29] & 0x7f) == BTRFS_FT_REG_FILE;
}

static void ct_check_names(struct ct_ctx *c)
{
	uint8_t key[FREF_CTS_KEY_SIZE], bad[FREF_CTS_KEY_SIZE];
	struct raw_needle nd[2 * CT_NFILES];
	char why[256];
	size_t i, j, good, bad_len, nn = 0, idx[CT_NFILES];
	int valid;

	if (c->encrypted &&
	    (fref_per_file_key(c->mk, sizeof(c->mk), c->dir_nonce, key, sizeof(key)) ||
	     fref_per_file_key(c->bad_mk, sizeof(c->bad_mk), c->dir_nonce, bad, sizeof(bad))))
		lab_die("cannot derive the directory keys");
	memset(nd, 0, sizeof(nd));
	for (i = 0; i < CT_NFILES; i++) {
		struct ct_file *f = &c->files[i];

		idx[i] = nn;
		if (f->plain) {
			/* the control: its name as it is */
			memcpy(f->ct_name, f->name, f->namelen);
			f->ct_len = f->namelen;
			nd[nn++] = (struct raw_needle){ .label = "plaintext (control)", .data = f->ct_name, .len = f->ct_len };
			continue;
		}
		if (!c->encrypted)
			continue;
		if (fref_encrypt_name(key, f->name, f->namelen, c->policy.flags,
				      f->ct_name, &f->ct_len) ||
		    fref_encrypt_name(bad, f->name, f->namelen, c->policy.flags,
				      f->bad_ct_name, &bad_len))
			lab_die("reference name encryption failed");
		/* (plaintext names: the raw-scan test looks for those) */
		nd[nn++] = (struct raw_needle){ .label = "ciphertext", .data = f->ct_name, .len = f->ct_len };
		nd[nn++] = (struct raw_needle){ .label = "wrong-key ciphertext", .data = f->bad_ct_name, .len = bad_len };
	}
	if (!CHECK_OK(raw_scan(c->dev, nd, nn), "scanning %s", c->dev))
		return;
	for (i = 0; i < CT_NFILES; i++) {
		struct ct_file *f = &c->files[i];
		struct raw_needle *n = &nd[idx[i]];

		if (!f->plain && !c->encrypted)
			continue;
		if (f->plain)
			printf("name %zu (unencrypted control, %zu bytes): found %lld time(s)\n",
			       i, f->namelen, n[0].count);
		else
			printf("name %zu (%zu bytes -> %zu bytes of ciphertext): found %lld time(s); wrong-key ciphertext %lld time(s)\n",
			       i, f->namelen, f->ct_len, n[0].count, n[1].count);
		for (good = 0, j = 0; j < n[0].noffs; j++) {
			valid = ct_in_dirent(c, f, n[0].offs[j], why, sizeof(why));
			printf("  at device offset %llu: %s: %s\n",
			       (unsigned long long)n[0].offs[j], why,
			       valid ? "a directory entry of this file" : "not this file's directory entry");
			good += valid;
		}
		CHECK(n[0].count >= 1, "name %zu (\"%s\"): its %s (%zu bytes) is nowhere on %s",
		      i, f->name, f->plain ? "plaintext (unencrypted control)" : "reference ciphertext",
		      f->ct_len, c->dev);
		if (n[0].count >= 1)
			CHECK(good >= 1, "name %zu: it is on the device but never inside a %s directory entry of inode %llu%s",
			      i, c->fs->name, (unsigned long long)f->ino,
			      f->plain ? " (unencrypted control: the directory-entry check is wrong)" : "");
		if (f->plain) {
			c->ctl_name_ok = good >= 1;
			continue;
		}
		c->names_ok += good >= 1;
		CHECK(n[1].count == 0, "negative control: name %zu's ciphertext under a flipped master-key bit is on the device %lld time(s)",
		      i, n[1].count);
	}
}

/* ---- driver ----------------------------------------------------------------- */

int fscrypt_ciphertext_test(const struct lab_fscrypt_fs *fs)
{
	static struct ct_ctx ctx;
	struct ct_ctx *c = &ctx;
	char title[128];
	size_t i, nblocks = 0, ctl_blocks;
	int refused, key_err = 0;

	c->fs = fs;
	c->dev = lab_env("SCRATCH_DEV");
	c->mnt = lab_env("SCRATCH_MNT");
	c->btrfs = strcmp(fs->name, "btrfs") == 0;
	PATHF(c->dir, "%s/enc", c->mnt);
	PATHF(c->plain_dir, "%s/plain", c->mnt);
	printf("fscrypt ciphertext check on %s (%s on %s, mkfs \"%s\", mount options \"%s\")\n",
	       fs->name, c->dev, c->mnt, fs->mkfs_cmd,
	       fs->mount_opts ? fs->mount_opts : "");
	if (fref_selftest())
		lab_die("the reference model fails its own self-test");
	lab_random(c->mk, sizeof(c->mk));
	memcpy(c->bad_mk, c->mk, sizeof(c->mk));
	c->bad_mk[0] ^= 0x01;

	refused = lab_fscrypt_fs_make(fs, c->dev, c->mnt, NULL);
	c->opts_refused = refused;
	c->bs = fblk_block_size(c->mnt);
	ct_plan(c, c->bs);
	ct_write_control(c);
	if (lab_fscrypt_fs_try_key(fs, c->mnt, c->mk, sizeof(c->mk), c->id) == 0) {
		c->encrypted = 1;
		fblk_check_key_identifier(c->mk, sizeof(c->mk), c->id);
		ct_write_encrypted(c);
	} else {
		key_err = errno;
		printf("%s has no fscrypt here (FS_IOC_ADD_ENCRYPTION_KEY: " LAB_ERR_FMT "): checking only the unencrypted control\n",
		       fs->name, LAB_ERR_ARGS(key_err));
	}
	ct_learn(c);
	if (c->btrfs)
		fblk_btrfs_chunks(c->mnt, &c->chunks, &c->nchunks);
	if (!CHECK_OK(lab_umount(c->mnt), "umount %s", c->mnt))
		lab_die("cannot unmount before reading the device");

	printf("== data blocks\n");
	for (i = 0; i < CT_NFILES; i++) {
		if (!c->files[i].plain && !c->encrypted)
			continue;
		ct_check_file_data(c, &c->files[i]);
		if (!c->files[i].plain)
			nblocks += (c->files[i].size + c->bs - 1) / c->bs;
	}
	ctl_blocks = (c->files[CT_CONTROL].size + c->bs - 1) / c->bs;
	printf("control: %zu of %zu blocks of the unencrypted file found as written\n",
	       c->ctl_blocks_ok, ctl_blocks);
	CHECK(c->ctl_blocks_ok >= ctl_blocks, "control: only %zu of the %zu unencrypted blocks were found where FIEMAP says",
	      c->ctl_blocks_ok, ctl_blocks);
	if (c->encrypted) {
		printf("%zu of %zu block copies read from the device equal the per-inode-key reference ciphertext (%zu blocks in %d files)\n",
		       c->blocks_ok, c->copies_read, nblocks, CT_NENC);
		CHECK(c->copies_read >= nblocks, "only %zu block copies were read for %zu blocks",
		      c->copies_read, nblocks);
	}
	printf("== names\n");
	ct_check_names(c);
	printf("control: the unencrypted name %s in a directory entry\n",
	       c->ctl_name_ok ? "was found" : "was NOT found");
	if (c->encrypted)
		printf("%zu of %d names found as the reference ciphertext in a directory entry\n",
		       c->names_ok, CT_NENC);

	for (i = 0; i < CT_NFILES; i++) {
		free(c->files[i].data);
		free(c->files[i].ext);
	}
	free(c->chunks);
	if (c->btrfs && c->encrypted)
		lab_btrfs_check_clean(c->dev, "the ciphertext test's filesystem");
	PATHF(title, "fscrypt ciphertext on %s", fs->name);
	if (c->encrypted && c->opts_refused && lab_failures == 0) {
		if (c->model_mismatch)
			lab_skip("contents not verified: %s refuses the mount option \"%s\" (per-inode keys) and its default ciphertext is another derivation (%zu of %zu blocks differ from the per-inode model); names, key identifier, negative controls and the locating control passed",
				 fs->name, fs->mount_opts, c->model_mismatch, c->copies_read);
		printf("NOTE: %s refused \"%s\", but its default mode writes exactly the per-inode-key ciphertext\n",
		       fs->name, fs->mount_opts);
	}
	if (!c->encrypted && lab_failures == 0)
		lab_skip("%s has no fscrypt support in this kernel (FS_IOC_ADD_ENCRYPTION_KEY: " LAB_ERR_FMT "); the locating control passed (unencrypted blocks via FIEMAP%s, name in a directory entry)",
			 fs->name, LAB_ERR_ARGS(key_err), c->btrfs ? " + chunk tree" : "");
	return lab_result(title);
}
