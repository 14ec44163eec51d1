// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_compress - compression with encryption on btrfs (issue #25):
 * an encrypted file is compressed as a plain one would be, and the
 * compressed extent is encrypted as one extent.
 *
 * The format under test: btrfs compresses up to 128 KiB of file data into an
 * extent and keeps it compressed only if that saves a block; the file extent
 * item says compression 1 (zlib), 2 (lzo) or 3 (zstd), disk_num_bytes is the
 * compressed size rounded up to the block, ram_bytes the uncompressed size.
 * The compressed bytes, zero-padded to the block, are then encrypted with
 * AES-256-XTS, block i of them (i = 0, 1, ... from the start of the extent
 * on disk) with DUN:
 *  - per-extent keys (encryption 0x82, the context after the item): the
 *    extent's key (HKDF context 9 of the context's nonce), DUN
 *    extent_nr << 32 | i, whatever the item's file offset or extent offset;
 *  - per-inode keys (encryption 0x81): the file's key (HKDF context 2 of the
 *    inode nonce), DUN (item file offset - extent offset) / 4096 + i.
 * The checksums cover the ciphertext.
 *
 * One filesystem per key mode (mkfs.btrfs -b CM_FS_SIZE, single data), a
 * random master key, a v2 policy on enc/ and an unencrypted plain/ beside it:
 *  1. mounted with compress-force=zlib, =lzo, =zstd and with compress=zstd
 *     (the heuristic), each with the key mode's option: a text-like file
 *     (512 KiB, words of a small dictionary, a distinct marker in every
 *     block) and a random one (256 KiB); fsync; after dropping the caches
 *     every file reads back byte-exact; the text file's items are regular
 *     extents compressed with that algorithm (disk_num_bytes < num_bytes,
 *     both at most 128 KiB, whole blocks), with the key mode's encryption
 *     and context, and FIEMAP says ENCODED; the random file's are not
 *     compressed (nor ENCODED);
 *  2. the model, on the device (every copy): each compressed extent,
 *     decrypted with the model's key and DUNs, decompresses (zlib stream,
 *     zstd frame, btrfs's lzo framing) to at most ram_bytes, its referenced
 *     part [offset, +num_bytes) is what the file holds there, and what
 *     follows the compressed stream in the extent is zero; every checksum
 *     of the extent is crc32c of its ciphertext; controls: decrypted with
 *     the DUNs off by one, under the key of a flipped master-key bit, or
 *     not decrypted at all, it must not give the file's data; the
 *     uncompressed extents' blocks equal the model's ciphertext (per-extent
 *     or per-inode rule), with the same controls;
 *  3. unmounted, a scan of the filesystem's bytes: no marker of an
 *     encrypted file, no 32-byte piece of any compressed stream (before
 *     encryption) is on the device, and no extent begins with its own
 *     plaintext header (zstd magic, lzo length, the first AES block);
 *     controls: the markers of an uncompressed plain file (chattr +m under
 *     compress=zstd) are found, and so is a piece of one extent's
 *     ciphertext, at least once per copy (a balance leaves old copies);
 *  4. chattr +m (FS_NOCOMP_FL) keeps an encrypted file and a plain one
 *     uncompressed under compress=zstd; under compress-force both come out
 *     alike; on a mount without compress options (key groups only): the
 *     btrfs.compression property zstd set on a file, lzo set on a directory
 *     (inherited), and chattr +c (FS_COMPR_FL: zlib) compress an encrypted
 *     file exactly as a plain control, and a file with none of them stays
 *     uncompressed;
 *  5. under compress-force=zstd a 3000-byte encrypted file gets a regular
 *     encrypted extent, never an inline one, while a plain one of the same
 *     text is inline (control);
 *  6. key groups: FICLONERANGE of [192 KiB, +96 KiB) of the zstd text file
 *     into a new file of the same policy: an item of the clone points into
 *     a compressed extent of the source (same disk_bytenr) at offset > 0,
 *     and the model of step 2 holds for it; a snapshot of the subvolume:
 *     its files read back byte-exact and share the source's extents;
 *     then scrub (without the key) finds no error, and a data balance
 *     relocates the compressed encrypted extents (the first one of the
 *     zstd file moves), after which steps 1 and 2 hold again;
 *  7. read repair and corruption: on a DUP filesystem (-d dup) one copy of
 *     a compressed extent's ciphertext corrupted while unmounted: the file
 *     reads back byte-exact, the log reports the checksum failure and the
 *     correction, and both copies hold the good ciphertext again; on the
 *     per-inode-key filesystem (single data) the only copy corrupted: the
 *     read of that extent fails with EIO, the log names the checksum
 *     failure, another extent of the file still reads;
 *  8. log replay (key groups): mounted with commit=600, a compressed
 *     encrypted file written and fsynced; the bytes of the device that
 *     matter (btrfs_raw.h) are saved while the tree log is not yet
 *     committed, the filesystem is unmounted, and the saved bytes are
 *     written back, as if the machine had died after the fsync; the mount
 *     replays the log ("start tree-log replay"), and the file reads back
 *     byte-exact with compressed encrypted items that pass step 2;
 *  9. each filesystem ends with the patched `btrfs check --readonly` clean.
 *
 * SKIP when the kernel does not advertise compression of encrypted files
 * (LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE) or per-extent keys, or its btrfs has
 * no fscrypt ioctls.
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "btrfs_raw.h"
#include "crc32c.h"
#include "fscrypt_blocks.h"
#include "fscrypt_fs.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#include <lzo/lzo1x.h>
#include <zlib.h>
#include <zstd.h>

#define CM_BS 4096u
#define CM_FS_SIZE "256M"
#define CM_FS_BYTES (256ULL << 20)
#define CM_TEXT_SIZE (512u << 10)
#define CM_RAND_SIZE (256u << 10)
#define CM_SIDE_SIZE (256u << 10)	/* property, chattr, replay files */
#define CM_FLAG_SIZE (128u << 10)	/* chattr +m files */
#define CM_SMALL_SIZE 3000u
#define CM_MAX_EXTENT (128u << 10)	/* btrfs's largest compressed extent */
#define CM_MAX_FILES 32
#define CM_MAX_PIECES 24
#define CM_PIECE_LEN 32
#define CM_PIECE_AT 64			/* where in a stream the piece is taken */
#define CM_CTL_LEN 64
#define CM_FLIP 64
#define CM_LZO_SEG_MAX (CM_BS + CM_BS / 16 + 64 + 3)	/* lzo1x_worst_compress() */
#define CM_CLONE_SRC (192u << 10)
#define CM_CLONE_LEN (96u << 10)
#define CM_ANY (-1)
#define CM_COMPR_PROP "btrfs.compression"
#define CM_CSUM_TREE 7ULL
#define CM_CSUM_OBJECTID ((uint64_t)-10)	/* BTRFS_EXTENT_CSUM_OBJECTID */
#define CM_CSUM_KEY 128				/* BTRFS_EXTENT_CSUM_KEY */

enum { CM_NONE, CM_ZLIB, CM_LZO, CM_ZSTD, CM_NALGS };
static const char *const cm_alg[CM_NALGS] = { "none", "zlib", "lzo", "zstd" };

enum cm_kind { CM_TEXT, CM_RANDOM };

struct cm_file {
	char label[48];
	char path[PATH_MAX];
	unsigned char *data;
	size_t size;
	int encrypted;
	int want_comp;			/* CM_ANY, CM_NONE or the algorithm */
	const struct cm_file *twin;	/* must come out compressed alike */
	int small;			/* part 5: inline (plain) or not (encrypted) */
	uint64_t ino;
	int scan_plain;			/* uncompressed plain: its markers are the control */
};

struct cm_mode {
	const char *label;
	const char *keyopts;		/* the key mode's mount option, or NULL */
	int per_inode, v1;
	int extras;			/* parts 4 (mount without options), 5, 6, 8 */
	int corrupt_single;		/* part 7, single copy */
};

static const struct cm_mode cm_modes[] = {
	{ "key groups (default)", NULL, 0, 0, 1, 0 },
	{ "a key per extent (fscrypt_extents_per_key=1)", "fscrypt_extents_per_key=1",
	  0, 1, 0, 0 },
	{ "per-inode keys (" LAB_BTRFS_PER_INODE_KEYS_OPT ")",
	  LAB_BTRFS_PER_INODE_KEYS_OPT, 1, 0, 0, 1 },
};
#define CM_NMODES (sizeof(cm_modes) / sizeof(cm_modes[0]))

/* A compressed extent picked for the corruption of part 7. */
struct cm_victim {
	int found;
	char path[PATH_MAX];
	uint64_t ino, file_offset, disk_bytenr, disk_num_bytes;
	uint64_t other_offset;		/* the file offset of another extent */
};

struct cm_fs {
	const struct cm_mode *m;
	char label[96];
	char mkfs[128];
	struct lab_fscrypt_fs lfs;
	char top[PATH_MAX], enc[PATH_MAX], plain[PATH_MAX];
	int dup;			/* -d dup (part 7, two copies) */
	uint8_t mk[LAB_MASTER_KEY_SIZE], bad_mk[LAB_MASTER_KEY_SIZE];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char enc_prefix[40], plain_prefix[40];
	unsigned marker_nr;
	struct cm_file files[CM_MAX_FILES];
	size_t nfiles;
	struct raw_btrfs_chunk *chunks;
	size_t nchunks;
	struct lab_btrfs_item *csums;
	size_t ncsums;
	/* for the scan */
	uint8_t pieces[CM_MAX_PIECES][CM_PIECE_LEN];
	char piece_label[CM_MAX_PIECES][80];
	size_t npieces;
	uint8_t ctl_ct[CM_CTL_LEN];
	int ctl_copies;
	long long plain_markers;	/* in uncompressed plain files */
	/* totals */
	size_t cext, cext_ok, cblocks, csum_ok, csum_bad, blocks, copies, copies_ok;
	size_t ctl_compared, ctl_matched;
	size_t alg_seen[CM_NALGS];
	struct cm_victim victim;
};

static const char *dev, *mnt;

/* ---- data ------------------------------------------------------------------------ */

static const char *const cm_words[] = {
	"the", "encrypted", "extent", "btrfs", "compressed", "key", "block",
	"of", "a", "file", "data", "zstd", "lzo", "zlib", "group", "nonce",
	"tweak", "sector", "and", "checksum", "page", "write", "read", "tree",
	"item", "disk", "fscrypt", "policy", "master", "inode", "offset", "to",
};
#define CM_NWORDS (sizeof(cm_words) / sizeof(cm_words[0]))

/*
 * Text-like data: words of cm_words[] chosen by a random seed, and at the
 * start of every block a marker "<prefix><number>:" distinct in the
 * filesystem.  It compresses well with every algorithm (and passes btrfs's
 * heuristic: few distinct bytes), and no two blocks are the same.
 */
static void cm_text(struct cm_fs *fs, unsigned char *buf, size_t len,
		    const char *prefix)
{
	uint64_t st;
	size_t off = 0, words = 0;
	char marker[64];
	int n;

	lab_random(&st, sizeof(st));
	while (off < len) {
		if (off % CM_BS == 0) {
			n = snprintf(marker, sizeof(marker), "%s%06u:", prefix,
				     fs->marker_nr++);
			memcpy(buf + off, marker, (size_t)n <= len - off ? (size_t)n : len - off);
			off += (size_t)n <= len - off ? (size_t)n : len - off;
			continue;
		}
		{
			const char *w = cm_words[lab_splitmix64(&st) % CM_NWORDS];
			size_t wl = strlen(w), room = CM_BS - off % CM_BS;

			if (wl + 1 > room || wl + 1 > len - off) {
				buf[off++] = '\n';
				continue;
			}
			memcpy(buf + off, w, wl);
			off += wl;
			buf[off++] = ++words % 12 ? ' ' : '\n';
		}
	}
}

/* ---- decompression (btrfs's formats, as stored before encryption) ------------------- */

struct cm_out {
	size_t produced;	/* bytes decompressed */
	size_t used;		/* bytes of the input the stream took */
	char why[160];		/* why it failed */
};

static int cm_inflate(const uint8_t *in, size_t inlen, uint8_t *out, size_t cap,
		      struct cm_out *o)
{
	z_stream s;
	int r;

	memset(&s, 0, sizeof(s));
	if (inflateInit(&s) != Z_OK) {
		snprintf(o->why, sizeof(o->why), "inflateInit failed");
		return -1;
	}
	s.next_in = (Bytef *)in;
	s.avail_in = (uInt)inlen;
	s.next_out = out;
	s.avail_out = (uInt)cap;
	r = inflate(&s, Z_FINISH);
	o->produced = s.total_out;
	o->used = s.total_in;
	if (r != Z_STREAM_END)
		snprintf(o->why, sizeof(o->why), "inflate: %d (%s) after %zu bytes in, %zu out",
			 r, s.msg ? s.msg : r == Z_BUF_ERROR ? "more than ram_bytes, or truncated" :
			 "no message", o->used, o->produced);
	inflateEnd(&s);
	return r == Z_STREAM_END ? 0 : -1;
}

static int cm_unzstd(const uint8_t *in, size_t inlen, uint8_t *out, size_t cap,
		     struct cm_out *o)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_inBuffer ib = { in, inlen, 0 };
	ZSTD_outBuffer ob = { out, cap, 0 };
	size_t r, ip, op;
	int ret = -1;

	if (!d) {
		snprintf(o->why, sizeof(o->why), "ZSTD_createDCtx failed");
		return -1;
	}
	for (;;) {
		ip = ib.pos;
		op = ob.pos;
		r = ZSTD_decompressStream(d, &ob, &ib);
		if (ZSTD_isError(r)) {
			snprintf(o->why, sizeof(o->why), "ZSTD_decompressStream: %s",
				 ZSTD_getErrorName(r));
			break;
		}
		if (r == 0) {	/* the end of the frame */
			ret = 0;
			break;
		}
		if (ib.pos == ip && ob.pos == op) {
			snprintf(o->why, sizeof(o->why), "zstd frame %s",
				 ob.pos == ob.size ? "larger than ram_bytes" :
				 "truncated (no end within the extent)");
			break;
		}
	}
	o->produced = ob.pos;
	o->used = ib.pos;
	ZSTD_freeDCtx(d);
	return ret;
}

/*
 * btrfs's lzo framing (fs/btrfs/lzo.c): le32 total length (header
 * included), then segments of le32 length and lzo1x data of at most one
 * block; a segment header never crosses a block boundary (up to 3 zero
 * bytes pad the block instead).
 */
static int cm_unlzo(const uint8_t *in, size_t inlen, uint8_t *out, size_t cap,
		    struct cm_out *o)
{
	size_t tot, pos = 4, seg, left, k;
	lzo_uint dlen;
	int r;

	o->produced = 0;
	o->used = 0;
	if (inlen < 8) {
		snprintf(o->why, sizeof(o->why), "lzo: %zu bytes", inlen);
		return -1;
	}
	tot = braw_le32(in);
	if (tot <= 8 || tot > inlen) {
		snprintf(o->why, sizeof(o->why), "lzo: total length %zu in an extent of %zu bytes",
			 tot, inlen);
		return -1;
	}
	while (pos < tot) {
		if (pos / CM_BS != (pos + 3) / CM_BS) {
			snprintf(o->why, sizeof(o->why), "lzo: segment header at %zu crosses a block",
				 pos);
			return -1;
		}
		seg = braw_le32(in + pos);
		pos += 4;
		if (seg == 0 || seg > CM_LZO_SEG_MAX || seg > tot - pos) {
			snprintf(o->why, sizeof(o->why), "lzo: segment of %zu bytes at %zu (total %zu)",
				 seg, pos - 4, tot);
			return -1;
		}
		dlen = cap - o->produced < CM_BS ? cap - o->produced : CM_BS;
		if (dlen == 0) {
			snprintf(o->why, sizeof(o->why), "lzo: more data than ram_bytes");
			return -1;
		}
		r = lzo1x_decompress_safe(in + pos, seg, out + o->produced, &dlen, NULL);
		if (r != LZO_E_OK) {
			snprintf(o->why, sizeof(o->why), "lzo1x_decompress_safe: %d at %zu", r,
				 pos);
			return -1;
		}
		o->produced += dlen;
		pos += seg;
		left = CM_BS - pos % CM_BS;
		if (left >= 4)
			continue;
		for (k = 0; k < left; k++)
			if (pos + k >= inlen || in[pos + k]) {
				snprintf(o->why, sizeof(o->why),
					 "lzo: block padding at %zu is not zero", pos + k);
				return -1;
			}
		pos += left;
	}
	o->used = tot;
	return 0;
}

static int cm_decompress(int alg, const uint8_t *in, size_t inlen, uint8_t *out,
			 size_t cap, struct cm_out *o)
{
	memset(o, 0, sizeof(*o));
	switch (alg) {
	case CM_ZLIB:
		return cm_inflate(in, inlen, out, cap, o);
	case CM_LZO:
		return cm_unlzo(in, inlen, out, cap, o);
	case CM_ZSTD:
		return cm_unzstd(in, inlen, out, cap, o);
	}
	snprintf(o->why, sizeof(o->why), "unknown compression %d", alg);
	return -1;
}

/* ---- mounts and files --------------------------------------------------------------- */

/* "a,b" of the non-NULL, non-empty ones, or NULL. */
static const char *cm_opts(char *out, size_t size, const char *a, const char *b)
{
	int ha = a && *a, hb = b && *b;

	if (!ha && !hb)
		return NULL;
	lab_pathf(out, size, "%s%s%s", ha ? a : "", ha && hb ? "," : "", hb ? b : "");
	return out;
}

/* Mount (unmounted) with the key mode's option and @extra; add the key. */
static int cm_mount(struct cm_fs *fs, const char *extra)
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char buf[256];
	const char *o = cm_opts(buf, sizeof(buf), fs->m->keyopts, extra);

	printf("-- %s: mount %s%s\n", fs->label, o ? "-o " : "", o ? o : "");
	if (!CHECK_OK(lab_mount(dev, mnt, "btrfs", o), "%s: mount %s", fs->label,
		      o ? o : ""))
		return -1;
	if (!CHECK_OK(lab_add_raw_key(mnt, fs->mk, sizeof(fs->mk), id),
		      "%s: add the master key", fs->label)) {
		lab_umount(mnt);
		return -1;
	}
	CHECK(memcmp(id, fs->id, sizeof(id)) == 0, "%s: the key identifier changed",
	      fs->label);
	return 0;
}

static int cm_remount(struct cm_fs *fs, const char *extra)
{
	if (!CHECK_OK(lab_umount(mnt), "%s: umount", fs->label))
		return -1;
	return cm_mount(fs, extra);
}

static struct cm_file *cm_new(struct cm_fs *fs, int encrypted, const char *dir_rel,
			      const char *name, size_t size, enum cm_kind kind,
			      int want_comp)
{
	struct cm_file *f;

	if (fs->nfiles == CM_MAX_FILES)
		lab_die("test bug: more than %d files", CM_MAX_FILES);
	f = &fs->files[fs->nfiles++];
	memset(f, 0, sizeof(*f));
	snprintf(f->label, sizeof(f->label), "%s%s%s", encrypted ? "enc/" : "plain/",
		 dir_rel ? dir_rel : "", name);
	PATHF(f->path, "%s/%s%s", encrypted ? fs->enc : fs->plain, dir_rel ? dir_rel : "",
	      name);
	f->encrypted = encrypted;
	f->size = size;
	f->data = lab_xmalloc(size);
	f->want_comp = want_comp;
	if (kind == CM_TEXT)
		cm_text(fs, f->data, size, encrypted ? fs->enc_prefix : fs->plain_prefix);
	else
		lab_random(f->data, size);
	return f;
}

/*
 * Create @f: the property @prop (if not NULL) and the inode flags @fl (if
 * not 0) on the empty file, then its data, fsync.
 */
static void cm_write(struct cm_fs *fs, struct cm_file *f, const char *prop,
		     unsigned int fl)
{
	unsigned int got;
	int fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (!CHECK_OK(fd, "%s: create %s", fs->label, f->label))
		lab_die("cannot make the test files");
	if (prop)
		CHECK_OK(fsetxattr(fd, CM_COMPR_PROP, prop, strlen(prop), 0),
			 "%s: setxattr %s=%s on %s", fs->label, CM_COMPR_PROP, prop,
			 f->label);
	if (fl) {
		got = 0;
		if (CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &got), "FS_IOC_GETFLAGS %s", f->label)) {
			got |= fl;
			CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &got),
				 "%s: FS_IOC_SETFLAGS 0x%x (chattr +%s) on %s", fs->label,
				 fl, fl == FS_COMPR_FL ? "c" : "m", f->label);
			got = 0;
			if (CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &got), "FS_IOC_GETFLAGS %s",
				     f->label))
				CHECK((got & fl) == fl, "%s: %s has flags 0x%x after chattr, without 0x%x",
				      fs->label, f->label, got, fl);
		}
	}
	if (!CHECK_OK(write_all(fd, f->data, f->size), "%s: write %s", fs->label, f->label) ||
	    !CHECK_OK(fsync(fd), "%s: fsync %s", fs->label, f->label))
		lab_die("cannot make the test files");
	close(fd);
}

static struct cm_file *cm_find(struct cm_fs *fs, const char *label)
{
	size_t i;

	for (i = 0; i < fs->nfiles; i++)
		if (!strcmp(fs->files[i].label, label))
			return &fs->files[i];
	return NULL;
}

/* ---- what the kernel says about a file ------------------------------------------------ */

static const char *cm_type(uint8_t t)
{
	return t == BTRFS_FILE_EXTENT_INLINE ? "inline" : t == BTRFS_FILE_EXTENT_REG ?
	       "regular" : t == BTRFS_FILE_EXTENT_PREALLOC ? "prealloc" : "?";
}

static void cm_print_items(const struct cm_file *f, const struct lab_btrfs_file_extent *fe,
			   size_t n)
{
	size_t i;

	printf("%s: ino %llu, %zu bytes, %zu item(s):\n", f->label,
	       (unsigned long long)f->ino, f->size, n);
	for (i = 0; i < n; i++)
		printf("  [%llu, +%llu) %s disk_bytenr %llu disk_num_bytes %llu offset %llu ram_bytes %llu compression %u (%s) encryption 0x%x size %u\n",
		       (unsigned long long)fe[i].file_offset,
		       (unsigned long long)fe[i].num_bytes, cm_type(fe[i].type),
		       (unsigned long long)fe[i].disk_bytenr,
		       (unsigned long long)fe[i].disk_num_bytes,
		       (unsigned long long)fe[i].offset,
		       (unsigned long long)fe[i].ram_bytes, fe[i].compression,
		       fe[i].compression < CM_NALGS ? cm_alg[fe[i].compression] : "?",
		       fe[i].encryption, fe[i].item_size);
}

/* The file extent items of @f (its ino learnt); 0, or -1 (failure recorded). */
static int cm_items(struct cm_file *f, struct lab_btrfs_file_extent **fe, size_t *n)
{
	struct stat st;

	*fe = NULL;
	*n = 0;
	if (!CHECK_OK(stat(f->path, &st), "stat %s", f->label))
		return -1;
	f->ino = st.st_ino;
	if (!CHECK_OK(lab_btrfs_file_extents(f->path, f->ino, fe, n),
		      "file extent items of %s", f->label))
		return -1;
	cm_print_items(f, *fe, *n);
	return 0;
}

/* Part 1 (and 4, 5): the items and FIEMAP of @f against what it must be. */
static void cm_check_items(struct cm_fs *fs, const struct cm_file *f,
			   const struct lab_btrfs_file_extent *fe, size_t n)
{
	const uint8_t want_enc = !f->encrypted ? LAB_BTRFS_ENCRYPTION_NONE :
				 fs->m->per_inode ? LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE :
				 LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT;
	struct lab_fscrypt_extent_ctx ctx;
	struct raw_extent *ext = NULL;
	size_t next = 0, i, ncomp = 0;
	uint64_t end = 0;

	if (!CHECK(n > 0, "%s: %s has no file extent item", fs->label, f->label))
		return;
	if (f->small && !f->encrypted) {
		CHECK(n == 1 && fe[0].type == BTRFS_FILE_EXTENT_INLINE,
		      "%s: control: the plain %u-byte file %s is not one inline extent (%zu items, the first %s): the encrypted one's regular extent proves nothing",
		      fs->label, CM_SMALL_SIZE, f->label, n, cm_type(fe[0].type));
		return;
	}
	for (i = 0; i < n; i++) {
		const struct lab_btrfs_file_extent *x = &fe[i];
		const unsigned long long at = x->file_offset;

		CHECK(x->file_offset == end, "%s: %s: item at %llu, the previous ends at %llu",
		      fs->label, f->label, at, (unsigned long long)end);
		end = x->file_offset + x->num_bytes;
		if (!CHECK(x->type == BTRFS_FILE_EXTENT_REG && x->disk_bytenr != 0,
			   "%s: %s: item at %llu is %s (disk_bytenr %llu); expected a regular extent%s",
			   fs->label, f->label, at, cm_type(x->type),
			   (unsigned long long)x->disk_bytenr,
			   f->encrypted ? " (an encrypted file never gets an inline one)" : ""))
			continue;
		CHECK(x->encryption == want_enc, "%s: %s: item at %llu has encryption 0x%x, expected 0x%x",
		      fs->label, f->label, at, x->encryption, want_enc);
		if (want_enc == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT &&
		    CHECK_OK(lab_fscrypt_extent_ctx_decode(x->ctx, x->tail_len, &ctx),
			     "%s: %s: the context of the item at %llu (%u bytes)", fs->label,
			     f->label, at, x->tail_len)) {
			CHECK(ctx.version == (fs->m->v1 ? LAB_FSCRYPT_EXTENT_CTX_V1 :
					      LAB_FSCRYPT_EXTENT_CTX_V2),
			      "%s: %s: item at %llu has a version %u context", fs->label,
			      f->label, at, ctx.version);
			CHECK(ctx.mode == FSCRYPT_MODE_AES_256_XTS &&
			      !memcmp(ctx.key_id, fs->id, FSCRYPT_KEY_IDENTIFIER_SIZE),
			      "%s: %s: item at %llu: context mode %u or key identifier not the master key's",
			      fs->label, f->label, at, ctx.mode);
		} else if (want_enc != LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT) {
			CHECK(x->item_size == LAB_BTRFS_FILE_EXTENT_SIZE,
			      "%s: %s: item at %llu is %u bytes, expected %d (no context)",
			      fs->label, f->label, at, x->item_size, LAB_BTRFS_FILE_EXTENT_SIZE);
		}
		if (x->compression) {
			ncomp++;
			CHECK(x->compression < CM_NALGS, "%s: %s: item at %llu: compression %u",
			      fs->label, f->label, at, x->compression);
			CHECK(x->disk_num_bytes % CM_BS == 0 && x->disk_num_bytes <= CM_MAX_EXTENT &&
			      x->ram_bytes <= CM_MAX_EXTENT &&
			      x->disk_num_bytes < x->ram_bytes &&
			      x->offset + x->num_bytes <= x->ram_bytes,
			      "%s: %s: compressed item at %llu: disk_num_bytes %llu, ram_bytes %llu, offset %llu, num_bytes %llu (expected whole blocks, at most %u, smaller on disk)",
			      fs->label, f->label, at, (unsigned long long)x->disk_num_bytes,
			      (unsigned long long)x->ram_bytes, (unsigned long long)x->offset,
			      (unsigned long long)x->num_bytes, CM_MAX_EXTENT);
		}
		if (f->want_comp == CM_NONE)
			CHECK(x->compression == 0, "%s: %s: item at %llu compressed (%s), expected none",
			      fs->label, f->label, at,
			      x->compression < CM_NALGS ? cm_alg[x->compression] : "?");
		else if (f->want_comp > 0)
			CHECK(x->compression == f->want_comp &&
			      x->disk_num_bytes < x->num_bytes,
			      "%s: %s: item at %llu: compression %u, disk_num_bytes %llu, num_bytes %llu; expected %s and fewer bytes on disk",
			      fs->label, f->label, at, x->compression,
			      (unsigned long long)x->disk_num_bytes,
			      (unsigned long long)x->num_bytes, cm_alg[f->want_comp]);
	}
	CHECK(end >= f->size, "%s: %s: the items end at %llu, the file at %zu", fs->label,
	      f->label, (unsigned long long)end, f->size);
	if (f->twin) {
		struct lab_btrfs_file_extent *tfe = NULL;
		struct stat st;
		size_t tn = 0;

		if (CHECK_OK(stat(f->twin->path, &st), "stat %s", f->twin->label) &&
		    CHECK_OK(lab_btrfs_file_extents(f->twin->path, st.st_ino, &tfe, &tn),
			     "items of %s", f->twin->label) &&
		    CHECK(tn > 0, "%s has no items", f->twin->label)) {
			printf("%s: %s: first item compression %u, its plain twin %s: %u\n",
			       fs->label, f->label, fe[0].compression, f->twin->label,
			       tfe[0].compression);
			CHECK(fe[0].compression == tfe[0].compression,
			      "%s: %s is compressed with %u, the plain file %s in the same situation with %u",
			      fs->label, f->label, fe[0].compression, f->twin->label,
			      tfe[0].compression);
		}
		free(tfe);
	}
	if (!f->encrypted || f->small)
		return;
	if (!CHECK_OK(raw_fiemap(f->path, &ext, &next), "FIEMAP of %s", f->label))
		return;
	for (i = 0; i < next; i++)
		if (f->want_comp > 0)
			CHECK(ext[i].flags & FIEMAP_EXTENT_ENCODED,
			      "%s: %s: FIEMAP extent [%llu, +%llu) flags 0x%x lack ENCODED",
			      fs->label, f->label, (unsigned long long)ext[i].logical,
			      (unsigned long long)ext[i].length, ext[i].flags);
		else if (f->want_comp == CM_NONE)
			CHECK(!(ext[i].flags & FIEMAP_EXTENT_ENCODED),
			      "%s: %s: FIEMAP extent [%llu, +%llu) flags 0x%x: ENCODED, but not compressed",
			      fs->label, f->label, (unsigned long long)ext[i].logical,
			      (unsigned long long)ext[i].length, ext[i].flags);
	free(ext);
	if (f->want_comp > 0)
		CHECK(ncomp == n, "%s: %s: %zu of %zu items compressed", fs->label, f->label,
		      ncomp, n);
}

/* Part 5: the encrypted small file. */
static void cm_check_small(struct cm_fs *fs, const struct cm_file *f,
			   const struct lab_btrfs_file_extent *fe, size_t n)
{
	struct raw_extent *ext = NULL;
	size_t next = 0, i;

	printf("%s: %s (%zu bytes, compress-force=zstd): %zu item(s), the first %s, compression %u\n",
	       fs->label, f->label, f->size, n, n ? cm_type(fe[0].type) : "-",
	       n ? fe[0].compression : 0);
	CHECK(n == 1 && fe[0].type == BTRFS_FILE_EXTENT_REG && fe[0].disk_bytenr &&
	      fe[0].encryption != LAB_BTRFS_ENCRYPTION_NONE,
	      "%s: the small encrypted file %s must be one regular encrypted extent, never inline (%zu items, the first %s, encryption 0x%x)",
	      fs->label, f->label, n, n ? cm_type(fe[0].type) : "-", n ? fe[0].encryption : 0);
	if (CHECK_OK(raw_fiemap(f->path, &ext, &next), "FIEMAP of %s", f->label))
		for (i = 0; i < next; i++)
			CHECK(!(ext[i].flags & FIEMAP_EXTENT_DATA_INLINE),
			      "%s: %s: FIEMAP says inline (flags 0x%x)", fs->label, f->label,
			      ext[i].flags);
	free(ext);
}

/* ---- the model on the device ---------------------------------------------------------- */

/* The key and the DUNs of one extent as the model says. */
struct cm_model {
	uint8_t key[FREF_XTS_KEY_SIZE], bad[FREF_XTS_KEY_SIZE];
	int per_extent;
	uint64_t nr;		/* per-extent: the extent number */
	uint64_t base;		/* per-inode: the DUN of the extent's block 0 */
};

/* DUN of block @i of the extent, counted from its start on disk. */
static uint64_t cm_dun(const struct cm_model *m, uint64_t i)
{
	return m->per_extent ? fref_extent_dun(m->nr, i) : m->base + i;
}

static int cm_model(const struct cm_fs *fs, const struct cm_file *f, const uint8_t *nonce,
		    const struct lab_btrfs_file_extent *x, struct cm_model *m)
{
	struct lab_fscrypt_extent_ctx ctx;

	memset(m, 0, sizeof(*m));
	if (x->encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT) {
		if (lab_fscrypt_extent_ctx_decode(x->ctx, x->tail_len, &ctx))
			return -1;	/* recorded by the item check */
		m->per_extent = 1;
		m->nr = ctx.extent_nr;
		if (fref_per_extent_key(fs->mk, sizeof(fs->mk), ctx.nonce, m->key, sizeof(m->key)) ||
		    fref_per_extent_key(fs->bad_mk, sizeof(fs->bad_mk), ctx.nonce, m->bad,
					sizeof(m->bad)))
			lab_die("cannot derive the extent keys");
		return 0;
	}
	if (x->encryption != LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE || !nonce)
		return -1;
	if (!CHECK(x->file_offset >= x->offset && (x->file_offset - x->offset) % CM_BS == 0,
		   "%s: %s: per-inode item at %llu with extent offset %llu: where was it written?",
		   fs->label, f->label, (unsigned long long)x->file_offset,
		   (unsigned long long)x->offset))
		return -1;
	m->base = (x->file_offset - x->offset) / CM_BS;
	if (fref_per_file_key(fs->mk, sizeof(fs->mk), nonce, m->key, sizeof(m->key)) ||
	    fref_per_file_key(fs->bad_mk, sizeof(fs->bad_mk), nonce, m->bad, sizeof(m->bad)))
		lab_die("cannot derive the per-file keys");
	return 0;
}

/* Decrypt @len bytes of extent blocks with @key, block i with DUN dun(i) + @shift. */
static void cm_decrypt(const struct cm_model *m, const uint8_t *key, uint64_t shift,
		       const uint8_t *in, uint8_t *out, size_t len)
{
	size_t i;

	for (i = 0; i < len / CM_BS; i++)
		if (fref_decrypt_block_tweak(key, cm_dun(m, i) + shift, 0, in + i * CM_BS,
					     out + i * CM_BS, CM_BS))
			lab_die("reference decryption failed");
}

/* The crc32c the checksum tree holds for the data block at @bytenr, or -1. */
static long long cm_csum_of(const struct cm_fs *fs, uint64_t bytenr)
{
	size_t i;
	uint64_t nblk;

	for (i = 0; i < fs->ncsums; i++) {
		nblk = fs->csums[i].len / 4;
		if (fs->csums[i].offset <= bytenr &&
		    (bytenr - fs->csums[i].offset) / CM_BS < nblk)
			return braw_le32(fs->csums[i].data +
					 (bytenr - fs->csums[i].offset) / CM_BS * 4);
	}
	return -1;
}

/*
 * Does the control decryption @p (@len bytes) give the file's data?  It must
 * not: counted as matched (a failure) if it decompresses to the referenced
 * plaintext.
 */
static void cm_control(struct cm_fs *fs, const struct cm_file *f,
		       const struct lab_btrfs_file_extent *x, const uint8_t *p,
		       uint8_t *out, size_t n, const char *what)
{
	struct cm_out o;
	int ok = cm_decompress(x->compression, p, x->disk_num_bytes, out, x->ram_bytes, &o) == 0;
	int match = ok && x->offset + n <= o.produced &&
		    !memcmp(out + x->offset, f->data + x->file_offset, n);

	fs->ctl_compared++;
	fs->ctl_matched += match;
	CHECK(!match, "%s: %s: the compressed extent at %llu also decompresses to the file's data %s: the check is vacuous",
	      fs->label, f->label, (unsigned long long)x->file_offset, what);
}

/* Part 2: one compressed extent on the device. */
static void cm_check_cext(struct cm_fs *fs, const struct cm_file *f, const uint8_t *nonce,
			  const struct lab_btrfs_file_extent *x)
{
	const size_t len = x->disk_num_bytes;
	const unsigned long long at = x->file_offset;
	uint64_t phys[RAW_BTRFS_MAX_STRIPES];
	uint8_t *raw, *raw2, *p, *q, *out;
	struct cm_model m;
	struct cm_out o;
	size_t n, i, k;
	int nc, c, ok;
	long long cs;

	if (!CHECK(len > 0 && len % CM_BS == 0 && len <= CM_MAX_EXTENT &&
		   x->ram_bytes <= CM_MAX_EXTENT && x->compression < CM_NALGS,
		   "%s: %s: compressed item at %llu cannot be checked", fs->label, f->label, at) ||
	    cm_model(fs, f, nonce, x, &m))
		return;
	n = x->file_offset < f->size ? f->size - x->file_offset : 0;
	if (n > x->num_bytes)
		n = x->num_bytes;
	raw = lab_xmalloc(len);
	raw2 = lab_xmalloc(len);
	p = lab_xmalloc(len);
	q = lab_xmalloc(len);
	out = lab_xmalloc(CM_MAX_EXTENT);
	fs->cext++;
	nc = raw_btrfs_map(fs->chunks, fs->nchunks, x->disk_bytenr, len, phys);
	if (!CHECK(nc > 0, "%s: %s: extent at logical %llu not mapped", fs->label, f->label,
		   (unsigned long long)x->disk_bytenr))
		goto out;
	for (c = 0; c < nc; c++) {
		if (!CHECK_OK(raw_read(dev, phys[c], c ? raw2 : raw, len),
			      "%s: read copy %d of the extent at %llu", fs->label, c + 1, at))
			goto out;
		if (c)
			CHECK(!memcmp(raw, raw2, len),
			      "%s: %s: the copies of the compressed extent at %llu differ (copy %d from byte %zu)",
			      fs->label, f->label, at, c + 1, lab_first_diff(raw, raw2, len));
	}
	/* the checksums cover the ciphertext */
	for (i = 0; i < len / CM_BS; i++) {
		cs = cm_csum_of(fs, x->disk_bytenr + i * CM_BS);
		if (cs >= 0 && (uint32_t)cs == lab_crc32c(raw + i * CM_BS, CM_BS))
			fs->csum_ok++;
		else
			fs->csum_bad += CHECK(0, "%s: %s: block %zu of the compressed extent at %llu: checksum %s%llx is not crc32c of its ciphertext (%x)",
					      fs->label, f->label, i, at, cs < 0 ? "(none) " : "",
					      cs < 0 ? 0ULL : (unsigned long long)cs,
					      lab_crc32c(raw + i * CM_BS, CM_BS)) == 0;
	}
	cm_decrypt(&m, m.key, 0, raw, p, len);
	ok = cm_decompress(x->compression, p, len, out, x->ram_bytes, &o) == 0;
	if (!CHECK(ok, "%s: %s: the compressed extent at %llu (%s, %zu bytes on disk, %s) decrypted with the model's key and DUNs does not decompress: %s",
		   fs->label, f->label, at, cm_alg[x->compression], len,
		   m.per_extent ? "extent key" : "per-inode key", o.why))
		goto controls;
	printf("%s: %s: extent at %llu: %s stream of %zu bytes in %zu on disk -> %zu bytes (ram_bytes %llu), %s, DUN of block 0 %llu\n",
	       fs->label, f->label, at, cm_alg[x->compression], o.used, len, o.produced,
	       (unsigned long long)x->ram_bytes,
	       m.per_extent ? "extent key" : "per-inode key",
	       (unsigned long long)cm_dun(&m, 0));
	ok = CHECK(o.produced <= x->ram_bytes && x->offset + n <= o.produced,
		   "%s: %s: extent at %llu decompresses to %zu bytes; ram_bytes %llu, referenced [%llu, +%zu)",
		   fs->label, f->label, at, o.produced, (unsigned long long)x->ram_bytes,
		   (unsigned long long)x->offset, n) &&
	     CHECK(!memcmp(out + x->offset, f->data + x->file_offset, n),
		   "%s: %s: extent at %llu decompresses to other data than the file holds (from byte %zu of the referenced part)",
		   fs->label, f->label, at,
		   lab_first_diff(out + x->offset, f->data + x->file_offset, n));
	for (k = o.used; k < len && !p[k]; k++)
		;
	ok &= CHECK(k == len, "%s: %s: extent at %llu: byte %zu after the %zu-byte %s stream is 0x%02x, not zero padding",
		    fs->label, f->label, at, k, o.used, cm_alg[x->compression], p[k]);
	fs->cext_ok += ok;
	fs->cblocks += len / CM_BS;
	fs->alg_seen[x->compression]++;
	/* part 3: the stream's own header is not what is on the device */
	CHECK(memcmp(raw, p, 16) != 0, "%s: %s: extent at %llu: the first AES block on the device is the compressed plaintext",
	      fs->label, f->label, at);
	if (x->compression == CM_ZSTD)
		CHECK(braw_le32(raw) != 0xfd2fb528u, "%s: %s: extent at %llu begins with the zstd magic on the device",
		      fs->label, f->label, at);
	if (x->compression == CM_LZO)
		CHECK(braw_le32(raw) != braw_le32(p), "%s: %s: extent at %llu begins with its lzo length on the device",
		      fs->label, f->label, at);
	if (o.used >= CM_PIECE_AT + CM_PIECE_LEN && fs->npieces < CM_MAX_PIECES) {
		memcpy(fs->pieces[fs->npieces], p + CM_PIECE_AT, CM_PIECE_LEN);
		snprintf(fs->piece_label[fs->npieces], sizeof(fs->piece_label[0]),
			 "compressed stream of %s at %llu", f->label, at);
		fs->npieces++;
	}
	if (!fs->ctl_copies) {
		memcpy(fs->ctl_ct, raw, CM_CTL_LEN);
		fs->ctl_copies = nc;
	}
controls:
	cm_decrypt(&m, m.key, 1, raw, q, len);
	cm_control(fs, f, x, q, out, n, "with every DUN off by one");
	cm_decrypt(&m, m.bad, 0, raw, q, len);
	cm_control(fs, f, x, q, out, n, "under the key of a flipped master-key bit");
	cm_control(fs, f, x, raw, out, n, "without decryption");
out:
	free(raw);
	free(raw2);
	free(p);
	free(q);
	free(out);
}

/* Part 2: the blocks of an uncompressed encrypted extent. */
static void cm_check_blocks(struct cm_fs *fs, const struct cm_file *f, const uint8_t *nonce,
			    const struct lab_btrfs_file_extent *x)
{
	uint64_t phys[RAW_BTRFS_MAX_STRIPES], pos, j, addr;
	struct fblk_block b;
	struct cm_model m;
	int nc, c, r;

	if (cm_model(fs, f, nonce, x, &m))
		return;
	fblk_alloc(&b, CM_BS);
	for (pos = x->file_offset; pos < x->file_offset + x->num_bytes && pos < f->size;
	     pos += CM_BS) {
		j = (x->offset + pos - x->file_offset) / CM_BS;
		addr = x->disk_bytenr + x->offset + (pos - x->file_offset);
		fblk_plaintext(&b, f->data, f->size, pos / CM_BS, CM_BS);
		snprintf(b.what, sizeof(b.what), "%.50s: %.40s block %llu (block %llu of its extent)",
			 fs->label, f->label, (unsigned long long)(pos / CM_BS),
			 (unsigned long long)j);
		b.encrypted = 1;
		b.want_what = m.per_extent ? "model ciphertext (extent key)" :
					     "model ciphertext (per-inode key)";
		if (fref_encrypt_block_tweak(m.key, cm_dun(&m, j), 0, b.pt, b.want, CM_BS) ||
		    fref_encrypt_block_tweak(m.bad, cm_dun(&m, j), 0, b.pt, b.ctl[0], CM_BS) ||
		    fref_encrypt_block_tweak(m.key, cm_dun(&m, j) + 1, 0, b.pt, b.ctl[1], CM_BS))
			lab_die("reference encryption failed");
		snprintf(b.ctl_what[0], sizeof(b.ctl_what[0]), "ciphertext under a flipped master-key bit");
		snprintf(b.ctl_what[1], sizeof(b.ctl_what[1]), "ciphertext with the DUN off by one");
		b.nctl = 2;
		nc = raw_btrfs_map(fs->chunks, fs->nchunks, addr, CM_BS, phys);
		if (!CHECK(nc > 0, "%s: address %llu not mapped", b.what, (unsigned long long)addr))
			continue;
		fs->blocks++;
		for (c = 0; c < nc; c++) {
			fs->copies++;
			r = fblk_check_copy(dev, CM_BS, phys[c], &b, 1);
			fs->copies_ok += r == 1;
		}
	}
	fblk_free(&b);
}

/* Part 2 for every item of the encrypted file @f. */
static void cm_check_device(struct cm_fs *fs, struct cm_file *f,
			    const struct lab_btrfs_file_extent *fe, size_t n)
{
	uint8_t nonce[FREF_NONCE_SIZE];
	int have_nonce = CHECK_OK(lab_get_nonce(f->path, nonce),
				  "FS_IOC_GET_ENCRYPTION_NONCE on %s", f->label);
	size_t i, ncomp = 0;

	for (i = 0; i < n; i++) {
		if (fe[i].type != BTRFS_FILE_EXTENT_REG || !fe[i].disk_bytenr ||
		    fe[i].encryption == LAB_BTRFS_ENCRYPTION_NONE)
			continue;
		if (fe[i].compression) {
			cm_check_cext(fs, f, have_nonce ? nonce : NULL, &fe[i]);
			if (++ncomp == 2 && !fs->victim.found && !strcmp(f->label, "enc/c-zstd")) {
				struct cm_victim *v = &fs->victim;

				v->found = 1;
				PATHF(v->path, "%s", f->path);
				v->ino = f->ino;
				v->file_offset = fe[i].file_offset;
				v->disk_bytenr = fe[i].disk_bytenr;
				v->disk_num_bytes = fe[i].disk_num_bytes;
				v->other_offset = fe[0].file_offset;
			}
		} else {
			cm_check_blocks(fs, f, have_nonce ? nonce : NULL, &fe[i]);
		}
	}
}

/*
 * Every file (mounted) read back; then the items and the device of every
 * file, or of the one labelled @only (if not NULL).
 */
static void cm_check_all(struct cm_fs *fs, const char *when, const char *only)
{
	struct lab_btrfs_file_extent *fe;
	size_t i, n, ok = 0;

	printf("== %s: every file, %s\n", fs->label, when);
	sync();
	if (!CHECK_OK(lab_drop_caches("3"), "drop caches"))
		return;
	for (i = 0; i < fs->nfiles; i++)
		ok += CHECK_FILE_EQUALS(fs->files[i].path, fs->files[i].data, fs->files[i].size);
	printf("%s: %zu of %zu files read back byte-exact (caches dropped)\n", fs->label, ok,
	       fs->nfiles);
	free(fs->chunks);
	fs->chunks = NULL;
	lab_btrfs_items_free(fs->csums, fs->ncsums);
	fs->csums = NULL;
	if (fblk_btrfs_chunks(mnt, &fs->chunks, &fs->nchunks) ||
	    !CHECK_OK(lab_btrfs_search_tree(mnt, CM_CSUM_TREE, CM_CSUM_OBJECTID, CM_CSUM_KEY,
					    &fs->csums, &fs->ncsums),
		      "%s: the checksum tree", fs->label))
		return;
	printf("%s: %zu checksum item(s)\n", fs->label, fs->ncsums);
	for (i = 0; i < fs->nfiles; i++) {
		struct cm_file *f = &fs->files[i];

		if ((only && strcmp(f->label, only)) || cm_items(f, &fe, &n))
			continue;
		cm_check_items(fs, f, fe, n);
		if (f->small && f->encrypted)
			cm_check_small(fs, f, fe, n);
		if (f->encrypted)
			cm_check_device(fs, f, fe, n);
		free(fe);
	}
}

/* ---- the parts ------------------------------------------------------------------------- */

/* Part 1 with compress-force=@alg (0: compress=zstd, the heuristic). */
static void cm_round(struct cm_fs *fs, int alg)
{
	char opt[64], name[64];
	struct cm_file *a, *b;
	const int force = alg != 0;

	if (force)
		snprintf(opt, sizeof(opt), "compress-force=%s", cm_alg[alg]);
	else
		snprintf(opt, sizeof(opt), "compress=zstd");
	printf("== %s: %s\n", fs->label, opt);
	if (cm_remount(fs, opt))
		lab_die("cannot mount with %s", opt);
	snprintf(name, sizeof(name), "%s-%s", force ? "c" : "h", cm_alg[force ? alg : CM_ZSTD]);
	cm_write(fs, cm_new(fs, 1, NULL, name, CM_TEXT_SIZE, CM_TEXT, force ? alg : CM_ZSTD),
		 NULL, 0);
	snprintf(name, sizeof(name), "%s-%s", force ? "r" : "hr", cm_alg[force ? alg : CM_ZSTD]);
	cm_write(fs, cm_new(fs, 1, NULL, name, CM_RAND_SIZE, CM_RANDOM, CM_NONE), NULL, 0);
	if (alg == CM_LZO)	/* lzo keeps literals: a plain control for the scan */
		cm_write(fs, cm_new(fs, 0, NULL, "p-lzo", CM_SIDE_SIZE, CM_TEXT, CM_LZO), NULL, 0);
	if (alg == CM_ZSTD) {
		/* chattr +m under compress-force: whatever btrfs does, alike */
		b = cm_new(fs, 0, NULL, "m-force", CM_FLAG_SIZE, CM_TEXT, CM_ANY);
		cm_write(fs, b, NULL, FS_NOCOMP_FL);
		a = cm_new(fs, 1, NULL, "m-force", CM_FLAG_SIZE, CM_TEXT, CM_ANY);
		a->twin = b;
		cm_write(fs, a, NULL, FS_NOCOMP_FL);
		if (fs->m->extras) {	/* part 5 */
			a = cm_new(fs, 1, NULL, "small", CM_SMALL_SIZE, CM_TEXT, CM_ANY);
			a->small = 1;
			cm_write(fs, a, NULL, 0);
			b = cm_new(fs, 0, NULL, "small", CM_SMALL_SIZE, CM_TEXT, CM_ANY);
			b->small = 1;
			cm_write(fs, b, NULL, 0);
		}
	}
	if (!force) {
		/* chattr +m under compress=: no compression, encrypted or not */
		a = cm_new(fs, 1, NULL, "m-nocomp", CM_FLAG_SIZE, CM_TEXT, CM_NONE);
		cm_write(fs, a, NULL, FS_NOCOMP_FL);
		b = cm_new(fs, 0, NULL, "m-nocomp", CM_FLAG_SIZE, CM_TEXT, CM_NONE);
		b->scan_plain = 1;
		cm_write(fs, b, NULL, FS_NOCOMP_FL);
		fs->plain_markers += (long long)count_occurrences(b->data, b->size, fs->plain_prefix,
								 strlen(fs->plain_prefix));
	}
}

/* Part 4: no compress mount option; the property and chattr +c. */
static void cm_props(struct cm_fs *fs)
{
	char d[PATH_MAX];
	struct cm_file *a, *b;
	int k;

	printf("== %s: no compress option: the property and chattr +c\n", fs->label);
	if (cm_remount(fs, NULL))
		lab_die("cannot mount without compress options");
	b = cm_new(fs, 0, NULL, "prop-zstd", CM_SIDE_SIZE, CM_TEXT, CM_ZSTD);
	cm_write(fs, b, "zstd", 0);
	a = cm_new(fs, 1, NULL, "prop-zstd", CM_SIDE_SIZE, CM_TEXT, CM_ZSTD);
	a->twin = b;
	cm_write(fs, a, "zstd", 0);
	for (k = 0; k < 2; k++) {
		PATHF(d, "%s/lzo-dir", k ? fs->enc : fs->plain);
		if (CHECK_OK(mkdir(d, 0755), "mkdir %s", d))
			CHECK_OK(setxattr(d, CM_COMPR_PROP, "lzo", 3, 0),
				 "%s: setxattr %s=lzo on the directory %s", fs->label,
				 CM_COMPR_PROP, d);
	}
	b = cm_new(fs, 0, "lzo-dir/", "inherited", CM_SIDE_SIZE, CM_TEXT, CM_LZO);
	cm_write(fs, b, NULL, 0);
	a = cm_new(fs, 1, "lzo-dir/", "inherited", CM_SIDE_SIZE, CM_TEXT, CM_LZO);
	a->twin = b;
	cm_write(fs, a, NULL, 0);
	b = cm_new(fs, 0, NULL, "chattr-c", CM_SIDE_SIZE, CM_TEXT, CM_ZLIB);
	cm_write(fs, b, NULL, FS_COMPR_FL);
	a = cm_new(fs, 1, NULL, "chattr-c", CM_SIDE_SIZE, CM_TEXT, CM_ZLIB);
	a->twin = b;
	cm_write(fs, a, NULL, FS_COMPR_FL);
	/* control: neither, so no compression */
	cm_write(fs, cm_new(fs, 1, NULL, "no-option", CM_FLAG_SIZE, CM_TEXT, CM_NONE), NULL, 0);
}

/* Part 6: a reflink into a compressed extent, and a snapshot. */
static void cm_clone_snapshot(struct cm_fs *fs)
{
	struct lab_btrfs_file_extent *sfe = NULL, *cfe = NULL, *xfe = NULL;
	struct cm_file *src = cm_find(fs, "enc/c-zstd"), *cl;
	struct file_clone_range r;
	size_t sn = 0, cn = 0, xn = 0, i, j, inside = 0, shared;
	char sp[PATH_MAX];
	int sfd, dfd, svfd;
	static const char *const snap_files[] = { "c-zlib", "c-lzo", "c-zstd", "clone" };

	printf("== %s: reflink into a compressed extent, and a snapshot\n", fs->label);
	if (!CHECK(src != NULL, "test bug: no enc/c-zstd"))
		return;
	cl = cm_new(fs, 1, NULL, "clone", CM_CLONE_LEN, CM_RANDOM, CM_ANY);
	memcpy(cl->data, src->data + CM_CLONE_SRC, CM_CLONE_LEN);
	sfd = open(src->path, O_RDONLY | O_CLOEXEC);
	dfd = open(cl->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!CHECK(sfd >= 0 && dfd >= 0, "open %s and %s: %s", src->label, cl->label,
		   strerror(errno)))
		lab_die("cannot open the reflink's files");
	memset(&r, 0, sizeof(r));
	r.src_fd = sfd;
	r.src_offset = CM_CLONE_SRC;
	r.src_length = CM_CLONE_LEN;
	r.dest_offset = 0;
	CHECK_OK(ioctl(dfd, FICLONERANGE, &r),
		 "%s: FICLONERANGE %s [%u, +%u) -> %s (same policy, per-extent keys)",
		 fs->label, src->label, CM_CLONE_SRC, CM_CLONE_LEN, cl->label);
	CHECK_OK(fsync(dfd), "fsync %s", cl->label);
	close(sfd);
	close(dfd);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(cl->path, cl->data, cl->size);
	if (cm_items(src, &sfe, &sn) == 0 && cm_items(cl, &cfe, &cn) == 0) {
		for (i = 0; i < cn; i++)
			for (j = 0; j < sn; j++)
				if (cfe[i].disk_bytenr == sfe[j].disk_bytenr && sfe[j].compression &&
				    cfe[i].compression == sfe[j].compression && cfe[i].offset > 0 &&
				    cfe[i].tail_len == sfe[j].tail_len &&
				    !memcmp(cfe[i].ctx, sfe[j].ctx, sizeof(cfe[i].ctx))) {
					inside++;
					break;
				}
		printf("%s: %zu item(s) of the clone point into a compressed extent of the source at an offset > 0\n",
		       fs->label, inside);
		CHECK(inside > 0, "%s: no item of %s points into a compressed extent of %s at an extent offset > 0 with its context",
		      fs->label, cl->label, src->label);
	}
	free(cfe);

	/* the snapshot of the subvolume holding enc/ */
	svfd = open(fs->top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!CHECK_OK(svfd, "open %s", fs->top))
		goto out;
	lab_btrfs_subvol(mnt, "snap", svfd);
	close(svfd);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	for (i = 0; i < sizeof(snap_files) / sizeof(snap_files[0]); i++) {
		const struct cm_file *f;
		char label[64];
		struct stat st;

		snprintf(label, sizeof(label), "enc/%s", snap_files[i]);
		f = cm_find(fs, label);
		if (!CHECK(f != NULL, "test bug: no %s", label))
			continue;
		PATHF(sp, "%s/snap/%s/%s", mnt, strrchr(fs->enc, '/') + 1, snap_files[i]);
		CHECK_FILE_EQUALS(sp, f->data, f->size);
		if (!CHECK_OK(stat(sp, &st), "stat %s", sp) ||
		    !CHECK_OK(lab_btrfs_file_extents(sp, st.st_ino, &xfe, &xn), "items of %s", sp))
			continue;
		free(sfe);
		sfe = NULL;
		sn = 0;
		if (!CHECK_OK(lab_btrfs_file_extents(f->path, st.st_ino, &sfe, &sn),
			      "items of %s", f->label)) {
			free(xfe);
			continue;
		}
		for (shared = 0, j = 0; j < xn && j < sn; j++)
			shared += xfe[j].disk_bytenr == sfe[j].disk_bytenr &&
				  xfe[j].compression == sfe[j].compression &&
				  xfe[j].file_offset == sfe[j].file_offset;
		printf("%s: snapshot of %s: %zu item(s), %zu shared with the source (%zu)\n",
		       fs->label, label, xn, shared, sn);
		CHECK(xn == sn && shared == sn, "%s: the snapshot's %s does not share the source's extents",
		      fs->label, label);
		free(xfe);
		xfe = NULL;
	}
out:
	free(sfe);
}

/* Part 8: a compressed encrypted file from the tree log. */
static void cm_log_replay(struct cm_fs *fs)
{
	struct raw_btrfs_chunk *kchunks = NULL;
	struct braw_image img = { 0 };
	struct braw_fs bfs;
	struct cm_file *f;
	long long lr, lr2;
	size_t nk = 0;
	int fd, saved = 0;

	printf("== %s: log replay of a compressed encrypted file\n", fs->label);
	if (cm_remount(fs, "commit=600,compress-force=zstd"))
		lab_die("cannot mount for the log replay");
	sync();		/* everything so far committed: only the fsync is in the log */
	f = cm_new(fs, 1, NULL, "replayed", CM_SIDE_SIZE, CM_TEXT, CM_ZSTD);
	fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!CHECK_OK(fd, "create %s", f->label) ||
	    !CHECK_OK(write_all(fd, f->data, f->size), "write %s", f->label) ||
	    !CHECK_OK(fsync(fd), "fsync %s", f->label))
		lab_die("cannot write the file to replay");
	close(fd);
	lr = raw_btrfs_log_root(dev);
	printf("%s: after the fsync, the superblock on the device has log_root %lld\n",
	       fs->label, lr);
	if (lr <= 0) {
		printf("%s: part 8 not done: the fsync committed the transaction instead of logging (log_root %lld), so there is nothing to replay\n",
		       fs->label, lr);
		return;
	}
	/* the committed chunk map must be all there is (no chunk made since) */
	if (CHECK_OK(raw_btrfs_chunks(mnt, &kchunks, &nk), "chunk tree of %s", mnt) &&
	    CHECK_OK(braw_open(&bfs, dev), "read the superblock and chunks of %s", dev)) {
		if (bfs.nchunks != nk) {
			printf("%s: part 8 not done: the kernel has %zu chunks, the device's committed chunk tree %zu (a chunk allocated since the last commit)\n",
			       fs->label, nk, bfs.nchunks);
		} else if (CHECK_OK(braw_image_ranges(&bfs, &img), "the image's ranges") &&
			   CHECK_OK(braw_image_read(&img, dev), "save the image")) {
			saved = 1;
			printf("%s: saved %llu bytes of the device as the state at the fsync\n",
			       fs->label, (unsigned long long)img.bytes);
		}
		braw_close(&bfs);
	}
	free(kchunks);
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		lab_die("cannot unmount");
	if (!saved) {
		braw_image_free(&img);
		if (cm_mount(fs, NULL))
			lab_die("cannot mount again");
		return;
	}
	CHECK(raw_btrfs_log_root(dev) == 0, "%s: the unmount left a log root", fs->label);
	if (!CHECK_OK(braw_image_write(&img, dev), "write the saved image back to %s", dev))
		lab_die("cannot restore the device");
	braw_image_free(&img);
	lr2 = raw_btrfs_log_root(dev);
	CHECK(lr2 == lr, "%s: the restored superblock has log_root %lld, expected %lld",
	      fs->label, lr2, lr);
	lab_log_mark("btrfs-fscrypt-compress-replay");
	if (cm_mount(fs, NULL))
		lab_die("cannot mount the filesystem with a log to replay");
	CHECK(lab_log_has("start tree-log replay"),
	      "%s: the kernel log does not show the tree-log replay", fs->label);
	CHECK(lab_log_has(LAB_LOG_SPLAT_ERE) == 0, "%s: a kernel splat during the replay",
	      fs->label);
	CHECK(raw_btrfs_log_root(dev) == 0, "%s: the log root is still there after the replay",
	      fs->label);
}

/* Part 3: the filesystem's bytes (unmounted). */
static void cm_scan(struct cm_fs *fs)
{
	struct raw_needle nd[CM_MAX_PIECES + 3];
	size_t n = 0, i;

	memset(nd, 0, sizeof(nd));
	nd[n].label = "marker of an encrypted file";
	nd[n].data = fs->enc_prefix;
	nd[n++].len = strlen(fs->enc_prefix);
	nd[n].label = "marker of a plain file (control)";
	nd[n].data = fs->plain_prefix;
	nd[n++].len = strlen(fs->plain_prefix);
	nd[n].label = "ciphertext of a compressed extent (control)";
	nd[n].data = fs->ctl_ct;
	nd[n++].len = CM_CTL_LEN;
	for (i = 0; i < fs->npieces; i++) {
		nd[n].label = fs->piece_label[i];
		nd[n].data = fs->pieces[i];
		nd[n++].len = CM_PIECE_LEN;
	}
	printf("== %s: scan of [0, %s) of %s: %zu needles\n", fs->label, CM_FS_SIZE, dev, n);
	if (!CHECK_OK(raw_scan_range(dev, 0, CM_FS_BYTES, nd, n), "scan %s", dev))
		return;
	for (i = 0; i < n; i++)
		printf("  %s: %lld time(s)%s%llu\n", nd[i].label, nd[i].count,
		       nd[i].noffs ? ", the first at device offset " : "",
		       nd[i].noffs ? (unsigned long long)nd[i].offs[0] : 0ULL);
	CHECK(nd[0].count == 0, "%s: a marker of an encrypted file is on the device %lld time(s) (first at %llu)",
	      fs->label, nd[0].count, nd[0].noffs ? (unsigned long long)nd[0].offs[0] : 0ULL);
	CHECK(fs->plain_markers > 0 && nd[1].count >= fs->plain_markers,
	      "%s: control: %lld marker(s) of the uncompressed plain file written, %lld found: the scan is blind",
	      fs->label, fs->plain_markers, nd[1].count);
	/* A balance leaves the relocated extents' old copies behind: at least. */
	CHECK(fs->ctl_copies > 0 && nd[2].count >= fs->ctl_copies,
	      "%s: control: the ciphertext of a compressed extent found %lld time(s), expected at least %d (one per copy)",
	      fs->label, nd[2].count, fs->ctl_copies);
	CHECK(fs->npieces >= 3, "%s: only %zu compressed streams to search for", fs->label,
	      fs->npieces);
	for (i = 3; i < n; i++)
		CHECK(nd[i].count == 0, "%s: a piece of the %s (before encryption) is on the device %lld time(s)",
		      fs->label, nd[i].label, nd[i].count);
}

static void cm_totals(const struct cm_fs *fs)
{
	printf("%s: %zu compressed extents checked (%zu blocks on disk; %zu as the model says: zlib %zu, lzo %zu, zstd %zu), checksums %zu right %zu wrong; %zu uncompressed blocks, %zu of %zu copies as the model says; controls matched %zu of %zu\n",
	       fs->label, fs->cext, fs->cblocks, fs->cext_ok, fs->alg_seen[CM_ZLIB],
	       fs->alg_seen[CM_LZO], fs->alg_seen[CM_ZSTD], fs->csum_ok, fs->csum_bad,
	       fs->blocks, fs->copies_ok, fs->copies, fs->ctl_matched, fs->ctl_compared);
	CHECK(fs->cext > 0 && fs->cext_ok == fs->cext, "%s: %zu of %zu compressed extents as the model says",
	      fs->label, fs->cext_ok, fs->cext);
	CHECK(fs->alg_seen[CM_ZLIB] && fs->alg_seen[CM_LZO] && fs->alg_seen[CM_ZSTD],
	      "%s: not every algorithm was checked on the device", fs->label);
	CHECK(fs->blocks > 0 && fs->copies_ok == fs->copies, "%s: uncompressed blocks: %zu of %zu copies",
	      fs->label, fs->copies_ok, fs->copies);
	CHECK(fs->ctl_compared > 0, "%s: no control compared", fs->label);
}

static void cm_setup(struct cm_fs *fs, const struct cm_mode *m, int dup)
{
	struct fscrypt_policy_v2 pol;
	char hex[17], buf[256];

	memset(fs, 0, sizeof(*fs));
	fs->m = m;
	fs->dup = dup;
	snprintf(fs->label, sizeof(fs->label), "[%s%s]", m->label, dup ? ", DUP data" : "");
	snprintf(fs->mkfs, sizeof(fs->mkfs), "mkfs.btrfs -q -f -b %s%s", CM_FS_SIZE,
		 dup ? " -d dup -m dup" : "");
	fs->lfs.name = "btrfs";
	fs->lfs.mkfs_cmd = fs->mkfs;
	fs->lfs.mount_opts = NULL;
	lab_random_hex(hex, 8);
	snprintf(fs->enc_prefix, sizeof(fs->enc_prefix), "cmk-%s-", hex);
	lab_random_hex(hex, 8);
	snprintf(fs->plain_prefix, sizeof(fs->plain_prefix), "cmp-%s-", hex);
	lab_random(fs->mk, sizeof(fs->mk));
	memcpy(fs->bad_mk, fs->mk, sizeof(fs->mk));
	fs->bad_mk[0] ^= 0x01;
	printf("== %s: mkfs \"%s\"\n", fs->label, fs->mkfs);
	lab_fscrypt_fs_setup(&fs->lfs, dev, mnt, cm_opts(buf, sizeof(buf), m->keyopts, NULL),
			     fs->mk, sizeof(fs->mk), fs->id);
	fblk_check_key_identifier(fs->mk, sizeof(fs->mk), fs->id);
	if (m->extras && !dup) {	/* a subvolume, for the snapshot */
		lab_btrfs_subvol(mnt, "sv", -1);
		PATHF(fs->top, "%s/sv", mnt);
	} else {
		PATHF(fs->top, "%s", mnt);
	}
	PATHF(fs->enc, "%s/enc", fs->top);
	PATHF(fs->plain, "%s/plain", fs->top);
	lab_default_policy(&pol, fs->id);
	if (!CHECK_OK(mkdir(fs->enc, 0755), "mkdir %s", fs->enc) ||
	    !CHECK_OK(lab_set_policy_v2(fs->enc, &pol), "policy on %s", fs->enc) ||
	    !CHECK_OK(mkdir(fs->plain, 0755), "mkdir %s", fs->plain))
		lab_die("cannot make the directories");
}

static void cm_free(struct cm_fs *fs)
{
	size_t i;

	for (i = 0; i < fs->nfiles; i++)
		free(fs->files[i].data);
	free(fs->chunks);
	lab_btrfs_items_free(fs->csums, fs->ncsums);
	fs->nfiles = 0;
	fs->chunks = NULL;
	fs->csums = NULL;
}

/* Part 7, single copy: the only copy of a compressed extent corrupted. */
static void cm_corrupt_single(struct cm_fs *fs)
{
	const struct cm_victim *v = &fs->victim;
	const struct cm_file *f = cm_find(fs, "enc/c-zstd");
	uint64_t phys[RAW_BTRFS_MAX_STRIPES];
	uint8_t blk[CM_BS], *buf = lab_xmalloc(CM_BS);
	char ere[128];
	ssize_t r;
	int nc, fd, k;

	printf("== %s: the only copy of a compressed extent corrupted\n", fs->label);
	if (!CHECK(v->found && f, "%s: no second compressed extent of enc/c-zstd to corrupt",
		   fs->label))
		goto out;
	nc = raw_btrfs_map(fs->chunks, fs->nchunks, v->disk_bytenr, CM_BS, phys);
	if (!CHECK(nc == 1, "%s: the extent at logical %llu has %d copies, expected 1",
		   fs->label, (unsigned long long)v->disk_bytenr, nc))
		goto out;
	if (!CHECK_OK(raw_read(dev, phys[0], blk, CM_BS), "read the extent's first block"))
		goto out;
	for (k = 0; k < CM_FLIP; k++)
		blk[100 + k] ^= 0x5a;
	if (!CHECK_OK(raw_write_sync(dev, phys[0], blk, CM_BS), "corrupt the extent"))
		goto out;
	printf("%s: corrupted %d bytes of block 0 of the extent at logical %llu (file offset %llu of %s)\n",
	       fs->label, CM_FLIP, (unsigned long long)v->disk_bytenr,
	       (unsigned long long)v->file_offset, f->label);
	lab_log_mark("btrfs-fscrypt-compress-corrupt-single");
	if (cm_mount(fs, NULL))
		goto out;
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	fd = open(v->path, O_RDONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open %s", f->label)) {
		errno = 0;
		r = pread(fd, buf, CM_BS, (off_t)v->file_offset);
		EXPECT_ERRNO(r, errno, EIO, "%s: read of the corrupted compressed extent at %llu",
			     fs->label, (unsigned long long)v->file_offset);
		r = pread(fd, buf, CM_BS, (off_t)v->other_offset);
		CHECK(r == CM_BS && !memcmp(buf, f->data + v->other_offset, CM_BS),
		      "%s: another extent (at %llu) of the file does not read: %zd, %s",
		      fs->label, (unsigned long long)v->other_offset, r, strerror(errno));
		close(fd);
	}
	snprintf(ere, sizeof(ere), "csum failed root [0-9]+ ino %llu ",
		 (unsigned long long)v->ino);
	CHECK(lab_log_has(ere), "%s: the kernel log has no \"csum failed\" line for ino %llu",
	      fs->label, (unsigned long long)v->ino);
	lab_log_show(20);
	CHECK_OK(lab_umount(mnt), "umount");
out:
	free(buf);
}

/* One filesystem per key mode: parts 1-3, and 4-6, 8 or 7 as the mode says. */
/* The disk address of the first compressed extent of @f (0: none). */
static uint64_t cm_first_compressed(struct cm_file *f)
{
	struct lab_btrfs_file_extent *fe;
	uint64_t at = 0;
	size_t i, n;

	if (cm_items(f, &fe, &n))
		return 0;
	for (i = 0; i < n && !at; i++)
		if (fe[i].compression && fe[i].disk_bytenr)
			at = fe[i].disk_bytenr;
	free(fe);
	return at;
}

/*
 * Scrub verifies the checksums of the compressed ciphertext without the key
 * (no error), and a data balance relocates the compressed encrypted extents
 * as they are: afterwards they are elsewhere and everything passes the
 * checks of parts 1 and 2 again.
 */
static void cm_scrub_balance(struct cm_fs *fs)
{
	struct cm_file *f = cm_find(fs, "enc/c-zstd");
	uint64_t before, after;
	char *out = NULL;
	size_t len;

	printf("== %s: scrub, then a data balance\n", fs->label);
	if (!CHECK(f != NULL, "test bug: no enc/c-zstd"))
		return;
	sync();
	if (CHECK(run("btrfs scrub start -B -R %s >/tmp/cm-scrub.txt 2>&1", mnt) == 0,
		  "%s: btrfs scrub", fs->label) &&
	    (out = read_file("/tmp/cm-scrub.txt", &len)) != NULL) {
		printf("%s", out);
		CHECK(strstr(out, "csum_errors: 0") && strstr(out, "uncorrectable_errors: 0") &&
		      strstr(out, "read_errors: 0"),
		      "%s: scrub reports errors on compressed encrypted extents", fs->label);
		free(out);
	}
	before = cm_first_compressed(f);
	CHECK(run("btrfs balance start -d %s", mnt) == 0, "%s: btrfs balance start -d",
	      fs->label);
	after = cm_first_compressed(f);
	CHECK(before && after && before != after,
	      "%s: the first compressed extent of %s is at %llu before the balance, %llu after: not relocated",
	      fs->label, f->path, (unsigned long long)before, (unsigned long long)after);
	cm_check_all(fs, "after scrub and a data balance", NULL);
}

static void cm_run_mode(const struct cm_mode *m)
{
	static struct cm_fs fsbuf;
	struct cm_fs *fs = &fsbuf;
	int alg;

	cm_setup(fs, m, 0);
	for (alg = CM_ZLIB; alg <= CM_ZSTD; alg++)
		cm_round(fs, alg);
	cm_round(fs, 0);
	if (m->extras) {
		cm_props(fs);
		cm_clone_snapshot(fs);
	}
	cm_check_all(fs, "as written", NULL);
	if (m->extras) {
		cm_scrub_balance(fs);
		cm_log_replay(fs);
		cm_check_all(fs, "after the log replay", "enc/replayed");
	}
	cm_totals(fs);
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		lab_die("cannot unmount");
	cm_scan(fs);
	lab_btrfs_check_clean(dev, fs->label);
	if (m->corrupt_single)
		cm_corrupt_single(fs);
	cm_free(fs);
}

/* Part 7 with two copies: read repair of a compressed extent. */
static void cm_run_dup(void)
{
	static struct cm_fs fsbuf;
	struct cm_fs *fs = &fsbuf;
	uint64_t phys[RAW_BTRFS_MAX_STRIPES], st0[RAW_BTRFS_DEV_STATS], st1[RAW_BTRFS_DEV_STATS];
	uint64_t st2[RAW_BTRFS_DEV_STATS];
	struct lab_btrfs_file_extent *fe = NULL, *x = NULL;
	uint8_t *good = NULL, *got = NULL;
	struct cm_file *f;
	size_t n = 0, i, at;
	char ere[128];
	int nc, c, k;

	cm_setup(fs, &cm_modes[0], 1);
	if (cm_remount(fs, "compress-force=zstd"))
		lab_die("cannot mount");
	f = cm_new(fs, 1, NULL, "c-zstd", CM_TEXT_SIZE, CM_TEXT, CM_ZSTD);
	cm_write(fs, f, NULL, 0);
	cm_check_all(fs, "as written (DUP)", NULL);
	if (!CHECK(fs->cext > 0 && fs->cext_ok == fs->cext, "%s: the compressed extents are not as the model says",
		   fs->label) ||
	    cm_items(f, &fe, &n))
		goto out;
	for (i = 0; i < n && !x; i++)
		if (fe[i].compression && (i > 0 || n == 1))
			x = &fe[i];
	if (!CHECK(x != NULL, "%s: no compressed extent", fs->label))
		goto out;
	nc = raw_btrfs_map(fs->chunks, fs->nchunks, x->disk_bytenr, x->disk_num_bytes, phys);
	if (!CHECK(nc == 2, "%s: the extent at %llu has %d copies, expected 2 (DUP)", fs->label,
		   (unsigned long long)x->disk_bytenr, nc))
		goto out;
	CHECK_OK(raw_btrfs_dev_stats(mnt, 1, st0), "device stats");
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		goto out;
	good = lab_xmalloc(x->disk_num_bytes);
	got = lab_xmalloc(x->disk_num_bytes);
	if (!CHECK_OK(raw_read(dev, phys[1], good, x->disk_num_bytes), "read copy 2"))
		goto out;
	memcpy(got, good, x->disk_num_bytes);
	lab_random(&at, sizeof(at));
	at %= x->disk_num_bytes - CM_FLIP;
	for (k = 0; k < CM_FLIP; k++)
		got[at + k] ^= 0xa5;
	if (!CHECK_OK(raw_write_sync(dev, phys[0] + at / CM_BS * CM_BS, got + at / CM_BS * CM_BS,
				     CM_BS * (1 + ((at + CM_FLIP - 1) / CM_BS - at / CM_BS))),
		      "corrupt copy 1"))
		goto out;
	printf("%s: copy 1 of the compressed extent at file offset %llu (logical %llu, device %llu) corrupted at byte %zu\n",
	       fs->label, (unsigned long long)x->file_offset, (unsigned long long)x->disk_bytenr,
	       (unsigned long long)phys[0], at);
	lab_log_mark("btrfs-fscrypt-compress-repair");
	if (cm_mount(fs, NULL))
		goto out;
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(f->path, f->data, f->size);
	CHECK_OK(raw_btrfs_dev_stats(mnt, 1, st1), "device stats");
	printf("%s: corruption errors %llu before, %llu after the read\n", fs->label,
	       (unsigned long long)st0[BTRFS_DEV_STAT_CORRUPTION_ERRS],
	       (unsigned long long)st1[BTRFS_DEV_STAT_CORRUPTION_ERRS]);
	CHECK(st1[BTRFS_DEV_STAT_CORRUPTION_ERRS] > st0[BTRFS_DEV_STAT_CORRUPTION_ERRS],
	      "%s: the read counted no checksum error: the corrupted copy was not read",
	      fs->label);
	snprintf(ere, sizeof(ere), "csum failed root [0-9]+ ino %llu ", (unsigned long long)f->ino);
	CHECK(lab_log_has(ere), "%s: no \"csum failed\" line for ino %llu", fs->label,
	      (unsigned long long)f->ino);
	snprintf(ere, sizeof(ere), "read error corrected: ino %llu ", (unsigned long long)f->ino);
	CHECK(lab_log_has(ere), "%s: no \"read error corrected\" line for ino %llu", fs->label,
	      (unsigned long long)f->ino);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(f->path, f->data, f->size);
	CHECK_OK(raw_btrfs_dev_stats(mnt, 1, st2), "device stats");
	CHECK(st2[BTRFS_DEV_STAT_CORRUPTION_ERRS] == st1[BTRFS_DEV_STAT_CORRUPTION_ERRS],
	      "%s: the second read found %llu new checksum error(s): the repair did not write the ciphertext back",
	      fs->label, (unsigned long long)(st2[BTRFS_DEV_STAT_CORRUPTION_ERRS] -
					      st1[BTRFS_DEV_STAT_CORRUPTION_ERRS]));
	if (!CHECK_OK(lab_umount(mnt), "umount"))
		goto out;
	for (c = 0; c < nc; c++)
		if (CHECK_OK(raw_read(dev, phys[c], got, x->disk_num_bytes), "read copy %d", c + 1))
			CHECK(!memcmp(got, good, x->disk_num_bytes),
			      "%s: copy %d of the extent differs from the good ciphertext from byte %zu on%s",
			      fs->label, c + 1, lab_first_diff(got, good, x->disk_num_bytes),
			      c == 0 ? " (not repaired)" : "");
	lab_btrfs_check_clean(dev, fs->label);
out:
	free(fe);
	free(good);
	free(got);
	cm_free(fs);
}

int main(void)
{
	size_t i;

	if (access(LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE, F_OK) != 0)
		lab_skip("the kernel's btrfs does not compress encrypted files (no %s)",
			 LAB_BTRFS_ENCRYPT_COMPRESS_FEATURE);
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) != 0)
		lab_skip("the kernel does not advertise per-extent keys on btrfs (no %s)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (fref_selftest())
		lab_die("the reference model fails its own self-test");
	if (lzo_init() != LZO_E_OK)
		lab_die("lzo_init failed");
	printf("btrfs compression of encrypted files: compress-force=zlib/lzo/zstd and compress=zstd in three key modes, the property and chattr, inline, reflink, snapshot, read repair, corruption, log replay (%s on %s)\n",
	       dev, mnt);
	for (i = 0; i < CM_NMODES; i++)
		cm_run_mode(&cm_modes[i]);
	cm_run_dup();
	return lab_result("btrfs_fscrypt_compress");
}
