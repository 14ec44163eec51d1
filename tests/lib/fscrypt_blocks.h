/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fscrypt_blocks.h - the part of the on-disk ciphertext checks that does not
 * depend on how keys and IVs are chosen: reading one copy of a data block
 * from the device and comparing it with the reference ciphertext and with
 * negative controls; the master key identifier; the btrfs chunk map.
 *
 * Used by lib/fscrypt_ciphertext.c (per-inode keys, ext4 and btrfs), by
 * btrfs_fscrypt_extent_ciphertext.c (per-extent keys), and for files under
 * two master keys by btrfs_fscrypt_multikey.c and btrfs_fscrypt_rekey.c.
 * Needs -lcrypto.
 */
#ifndef FSCRYPT_BLOCKS_H
#define FSCRYPT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <linux/fiemap.h>

#include "rawdev.h"

/* FIEMAP extents whose data is not stored as plain blocks at an address. */
#define FBLK_BAD_EXTENT_FLAGS (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | \
			       FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED | \
			       FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_UNWRITTEN)

#define FBLK_MAX_CONTROLS 4
#define FBLK_WHAT_MAX 160

/*
 * One data block and what it is compared with.  The caller fills @what,
 * @pt, @want, @want_what and the controls; the buffers are @bs bytes
 * (fblk_alloc()).
 */
struct fblk_block {
	char what[FBLK_WHAT_MAX];	/* "file X block N": for messages */
	int encrypted;			/* @pt must not be on the device */
	uint8_t *pt;			/* the plaintext, zero-padded to a block */
	uint8_t *want;			/* what the device must hold */
	const char *want_what;		/* e.g. "reference ciphertext" */
	/* negative controls: none of them may be on the device */
	size_t nctl;
	uint8_t *ctl[FBLK_MAX_CONTROLS];
	char ctl_what[FBLK_MAX_CONTROLS][FBLK_WHAT_MAX];
	uint8_t *raw;			/* scratch: the copy read */
};

/* Allocate the buffers of @b for blocks of @bs bytes (dies if out of memory). */
void fblk_alloc(struct fblk_block *b, unsigned bs);
void fblk_free(struct fblk_block *b);

/*
 * b->pt = block @lblk of the @size bytes at @data, zero-padded to @bs (the
 * part of the page beyond EOF is zeroed before it is encrypted).
 */
void fblk_plaintext(struct fblk_block *b, const uint8_t *data, size_t size,
		    uint64_t lblk, unsigned bs);

/*
 * Read the @bs bytes at device offset @off of @dev (O_DIRECT) and compare
 * them with b->want.  If b->encrypted: the copy must not be the plaintext,
 * nor any of the controls (else the comparison would be vacuous).  A
 * mismatch with b->want is a recorded failure if @strict, else only the
 * return value says it.  Returns 1 if equal, 0 if not, -1 if the read
 * failed (recorded).
 */
int fblk_check_copy(const char *dev, unsigned bs, uint64_t off,
		    struct fblk_block *b, int strict);

/*
 * The master key identifier @id the kernel reported for the master key @mk
 * must equal HKDF-SHA512 (context 1) computed here; prints both.  Dies if
 * the reference cannot be computed.
 */
void fblk_check_key_identifier(const uint8_t *mk, size_t mklen,
			       const uint8_t *id);

/*
 * The block size (fscrypt data unit) of the filesystem mounted on @mnt,
 * printed.  Dies if it cannot be read or is not a plausible block size.
 */
unsigned fblk_block_size(const char *mnt);

/*
 * The chunk map of the btrfs mounted on @mnt (raw_btrfs_chunks()), printed.
 * Returns 0, or -1 with the failure recorded.
 */
int fblk_btrfs_chunks(const char *mnt, struct raw_btrfs_chunk **chunks,
		      size_t *n);

struct lab_btrfs_file_extent;

/* What fblk_check_two_key_extents() found. */
struct fblk_two_keys {
	size_t blocks;		/* blocks of the file found on the device */
	size_t under[2];	/* of them, in extents under the first, second key */
	size_t ok;		/* copies equal to the reference ciphertext */
};

/*
 * A btrfs file with per-extent keys under two master keys, its extent items
 * @fe[@n] and its model @data (@size bytes), on @dev (chunk map
 * @chunks[@nchunks]): every copy of every block must be the reference
 * ciphertext of the model's block (@bs bytes, fref_encrypt_extent_unit())
 * under the key of its extent's context, derived from whichever of the
 * master keys @mk[0], @mk[1] (LAB_MASTER_KEY_SIZE bytes, identifiers
 * @id[0], @id[1]) it names, and not the same block under the other one.
 * Extents that are not so encrypted, or whose context names neither key,
 * are passed over: the caller checks the contexts.  @what names the file
 * in messages ("@what block N (K1, ...)"); the counts go to *@out.
 */
void fblk_check_two_key_extents(const char *dev, unsigned bs, const char *what,
				const uint8_t *data, size_t size,
				const struct lab_btrfs_file_extent *fe, size_t n,
				const struct raw_btrfs_chunk *chunks, size_t nchunks,
				const uint8_t *const mk[2], const uint8_t *const id[2],
				struct fblk_two_keys *out);

#endif /* FSCRYPT_BLOCKS_H */
