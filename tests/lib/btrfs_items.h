/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs_items.h - btrfs items as the kernel hands them out
 * (BTRFS_IOC_TREE_SEARCH_V2 on a mounted filesystem), and the parts of the
 * on-disk format that the encryption series adds, which the system's
 * <linux/btrfs_tree.h> does not know:
 *
 *  - incompat feature BTRFS_FEATURE_INCOMPAT_ENCRYPT (bit 40);
 *  - inode flags BTRFS_INODE_ENCRYPT (bit 20) and
 *    BTRFS_INODE_ENCRYPT_PER_EXTENT (bit 21, regular files only);
 *  - the inode's fscrypt context item, key type BTRFS_FSCRYPT_INODE_CTX_KEY
 *    (46);
 *  - the record of a master key a subvolume's files may use, an item of
 *    the root directory: [256, BTRFS_FSCRYPT_KEY_ITEM_KEY (47), the first 8
 *    bytes of the identifier as a little-endian number], holding
 *    u8 identifier[16] and __le64 flags (0);
 *  - btrfs_file_extent_item::encryption: 0 none (holes, inline extents),
 *    0x81 fscrypt with per-inode keys, 0x82 fscrypt with per-extent keys;
 *  - with encryption 0x82, the 53-byte file extent item of a regular or
 *    preallocated extent is followed by the extent's fscrypt context, whose
 *    first byte is its version:
 *    - version 1 (a key per extent), 34 bytes: u8 version,
 *      u8 contents_encryption_mode, u8 master_key_identifier[16],
 *      u8 nonce[16];
 *    - version 2 (a key per key group), 40 bytes: u8 version,
 *      u8 contents_encryption_mode, u8 flags (0), u8 reserved (0),
 *      u8 master_key_identifier[16], u8 key_nonce[16],
 *      __le32 extent_nr (the extent's number in its group).
 *    The key is HKDF(master, context 9, nonce); the IV of data unit b of
 *    the extent is the 64-bit DUN extent_nr << 32 | b, little endian,
 *    zero-padded to the IV size (extent_nr 0 for version 1).
 *
 * None of these numbers is one that upstream's btrfs fscrypt series (v7:
 * incompat bit 15, inode flag bit 12, key types 41 and 42, encryption 1)
 * gives another meaning; see patches/UPSTREAM-V7.md.
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef BTRFS_ITEMS_H
#define BTRFS_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#define LAB_BTRFS_INCOMPAT_ENCRYPT		(1ULL << 40)
#define LAB_BTRFS_SB_INCOMPAT_OFF		188	/* in the superblock */

#define LAB_BTRFS_INODE_ENCRYPT			(1ULL << 20)
#define LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT	(1ULL << 21)

#define LAB_BTRFS_FSCRYPT_INODE_CTX_KEY		46
/* A master key a subvolume records: [256, 47, identifier prefix (le64)]. */
#define LAB_BTRFS_FSCRYPT_KEY_ITEM_KEY		47
#define LAB_BTRFS_FSCRYPT_KEY_ITEM_SIZE		24	/* identifier[16], __le64 flags */

#define LAB_BTRFS_ENCRYPTION_NONE		0
#define LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE	0x81
#define LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT	0x82

/* struct btrfs_file_extent_item: its size and where ::encryption is. */
#define LAB_BTRFS_FILE_EXTENT_SIZE		53
#define LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF	17

/*
 * The fscrypt extent contexts (fs/crypto: struct fscrypt_extent_context and
 * fscrypt_extent_context_v2).  Offsets of the fields that both have, or of
 * one version's (V1_/V2_).
 */
#define LAB_FSCRYPT_EXTENT_CTX_V1		1
#define LAB_FSCRYPT_EXTENT_CTX_V2		2
#define LAB_FSCRYPT_EXTENT_CTX_V1_SIZE		34
#define LAB_FSCRYPT_EXTENT_CTX_V2_SIZE		40
#define LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE		40
#define LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF	0
#define LAB_FSCRYPT_EXTENT_CTX_MODE_OFF		1
#define LAB_FSCRYPT_EXTENT_CTX_V1_ID_OFF	2
#define LAB_FSCRYPT_EXTENT_CTX_V1_NONCE_OFF	18
#define LAB_FSCRYPT_EXTENT_CTX_V2_FLAGS_OFF	2
#define LAB_FSCRYPT_EXTENT_CTX_V2_RESERVED_OFF	3
#define LAB_FSCRYPT_EXTENT_CTX_V2_ID_OFF	4
#define LAB_FSCRYPT_EXTENT_CTX_V2_NONCE_OFF	20
#define LAB_FSCRYPT_EXTENT_CTX_V2_NR_OFF	36

/* An extent context, decoded (lab_fscrypt_extent_ctx_decode()). */
struct lab_fscrypt_extent_ctx {
	uint8_t version, mode, flags, reserved;
	const uint8_t *key_id;		/* 16 bytes, into the decoded buffer */
	const uint8_t *nonce;		/* the key nonce, 16 bytes, likewise */
	uint64_t extent_nr;		/* 0 for version 1 */
	uint32_t id_off, nonce_off;	/* offsets of key_id and nonce */
};

/*
 * Decode the @len-byte context at @buf by its version byte.  Fails with
 * EINVAL if @len is not the size of that version, or the version is unknown.
 */
int lab_fscrypt_extent_ctx_decode(const uint8_t *buf, size_t len,
				  struct lab_fscrypt_extent_ctx *ctx);

/* One item: its key, the transid of its leaf, and a malloc()ed copy. */
struct lab_btrfs_item {
	uint64_t objectid, offset, transid;
	uint32_t type, len;
	unsigned char *data;
};

/*
 * All items (@objectid, @type, *) of the subvolume holding @path (tree_id 0),
 * in key order.  *@items is malloc()ed (lab_btrfs_items_free()); *@n may be 0.
 * Needs CAP_SYS_ADMIN.
 */
int lab_btrfs_search(const char *path, uint64_t objectid, uint8_t type,
		     struct lab_btrfs_item **items, size_t *n);
void lab_btrfs_items_free(struct lab_btrfs_item *items, size_t n);

/*
 * The same in the tree @tree_id of the filesystem holding @path (0: the
 * subvolume of @path; e.g. 7 for the checksum tree).
 */
int lab_btrfs_search_tree(const char *path, uint64_t tree_id,
			  uint64_t objectid, uint8_t type,
			  struct lab_btrfs_item **items, size_t *n);

/* A file extent item (BTRFS_EXTENT_DATA_KEY), decoded. */
struct lab_btrfs_file_extent {
	uint64_t file_offset;		/* key offset */
	uint32_t item_size;
	uint64_t generation, ram_bytes;
	uint8_t compression, encryption, type;
	/* regular and preallocated extents only (else 0): */
	uint64_t disk_bytenr, disk_num_bytes, offset, num_bytes;
	/*
	 * What follows the 53-byte item of a regular or preallocated extent
	 * (the fscrypt extent context, if the item is sized for one): the
	 * first up to LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE bytes of it, and how
	 * many bytes there are in all.
	 */
	uint32_t tail_len;
	uint8_t ctx[LAB_FSCRYPT_EXTENT_CTX_MAX_SIZE];
};

/*
 * The file extent items of inode @ino in the subvolume holding @path, in
 * file offset order.  *@fe is malloc()ed; *@n may be 0.
 */
int lab_btrfs_file_extents(const char *path, uint64_t ino,
			   struct lab_btrfs_file_extent **fe, size_t *n);

/* btrfs_inode_item::flags of inode @ino in the subvolume holding @path. */
int lab_btrfs_inode_flags(const char *path, uint64_t ino, uint64_t *flags);

/*
 * BTRFS_IOC_SUBVOL_CREATE (@src_fd < 0) of the subvolume @name in the top
 * directory of the btrfs mounted on @mnt, or BTRFS_IOC_SNAP_CREATE of the
 * subvolume open as @src_fd under that name.  Dies on failure.
 */
void lab_btrfs_subvol(const char *mnt, const char *name, int src_fd);

/*
 * The ROOT_ITEM of the subvolume holding @path (BTRFS_IOC_INO_LOOKUP, then
 * BTRFS_IOC_TREE_SEARCH of the root tree): its bytes, as the root tree has
 * them now (a flag set in memory reaches it with the transaction), into
 * @buf (up to @size), the subvolume's id into *@id (may be NULL).  The
 * item's length, or -1 with errno (EUCLEAN: no such item).
 */
int lab_btrfs_root_item(const char *path, uint64_t *id, void *buf,
			size_t size);

/*
 * Do the key records of the subvolume holding @path name exactly the @nwant
 * identifiers @want[] (FSCRYPT_KEY_IDENTIFIER_SIZE bytes each)?  As many
 * records as identifiers, each of LAB_BTRFS_FSCRYPT_KEY_ITEM_SIZE bytes, at
 * the offset its identifier's first 8 bytes give, with flags 0, naming one
 * of @want.  What is not so is CHECK()ed as a failure, @what naming the
 * subvolume.  Returns the number of records, or -1 (a failure recorded)
 * if they could not be searched.
 */
long lab_btrfs_check_key_records(const char *path, const char *what,
				 const uint8_t *const want[], size_t nwant);

#endif /* BTRFS_ITEMS_H */
