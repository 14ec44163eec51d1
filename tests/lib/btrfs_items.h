/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs_items.h - btrfs items as the kernel hands them out
 * (BTRFS_IOC_TREE_SEARCH_V2 on a mounted filesystem), and the parts of the
 * on-disk format that the encryption series adds, which the system's
 * <linux/btrfs_tree.h> does not know:
 *
 *  - inode flags BTRFS_INODE_ENCRYPT (bit 12) and
 *    BTRFS_INODE_ENCRYPT_PER_EXTENT (bit 13, regular files only);
 *  - btrfs_file_extent_item::encryption: 0 none (holes, inline extents),
 *    1 fscrypt with per-inode keys, 2 fscrypt with per-extent keys;
 *  - with encryption 2, the 53-byte file extent item of a regular or
 *    preallocated extent is followed by the extent's 34-byte fscrypt
 *    context: u8 version (1), u8 contents_encryption_mode,
 *    u8 master_key_identifier[16], u8 nonce[16].
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef BTRFS_ITEMS_H
#define BTRFS_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#define LAB_BTRFS_INODE_ENCRYPT			(1ULL << 12)
#define LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT	(1ULL << 13)

#define LAB_BTRFS_ENCRYPTION_NONE		0
#define LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE	1
#define LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT	2

/* struct btrfs_file_extent_item: its size and where ::encryption is. */
#define LAB_BTRFS_FILE_EXTENT_SIZE		53
#define LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF	17

/* The fscrypt extent context (fs/crypto: struct fscrypt_extent_context). */
#define LAB_FSCRYPT_EXTENT_CTX_SIZE		34
#define LAB_FSCRYPT_EXTENT_CTX_V1		1
#define LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF	0
#define LAB_FSCRYPT_EXTENT_CTX_MODE_OFF		1
#define LAB_FSCRYPT_EXTENT_CTX_ID_OFF		2
#define LAB_FSCRYPT_EXTENT_CTX_NONCE_OFF	18

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
	 * first up to LAB_FSCRYPT_EXTENT_CTX_SIZE bytes of it, and how many
	 * bytes there are in all.
	 */
	uint32_t tail_len;
	uint8_t ctx[LAB_FSCRYPT_EXTENT_CTX_SIZE];
};

/*
 * The file extent items of inode @ino in the subvolume holding @path, in
 * file offset order.  *@fe is malloc()ed; *@n may be 0.
 */
int lab_btrfs_file_extents(const char *path, uint64_t ino,
			   struct lab_btrfs_file_extent **fe, size_t *n);

/* btrfs_inode_item::flags of inode @ino in the subvolume holding @path. */
int lab_btrfs_inode_flags(const char *path, uint64_t ino, uint64_t *flags);

#endif /* BTRFS_ITEMS_H */
