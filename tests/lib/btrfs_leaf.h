/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrfs_leaf.h - keys of a btrfs leaf in a buffer (btrfs_raw.h reads and
 * writes the block): compare, find, check the order, and insert an item in
 * key order as the kernel's setup_items_for_insert() does, so that the
 * leaf stays what braw_leaf_sane() calls sane (item data packed from the
 * end in slot order) and sorted.
 *
 * Only the leaf itself is changed: an item inserted in front of slot 0
 * changes the leaf's first key, which the key pointer of a parent node
 * must then follow; braw_item_insert() refuses that (EXDEV) unless the
 * caller says the leaf is a tree's root (no parent).
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef BTRFS_LEAF_H
#define BTRFS_LEAF_H

#include <stdint.h>

#include "btrfs_raw.h"

/* -1, 0 or 1 as @a sorts before, equal to or after @b (objectid, type, offset). */
int braw_key_cmp(const struct braw_key *a, const struct braw_key *b);

/*
 * The slot of the item with key @key in the leaf @blk, or -1 (not there);
 * *@ins (may be NULL) gets the slot at which such an item would go: the
 * first slot whose key sorts after @key.
 */
int braw_leaf_find(const unsigned char *blk, const struct braw_key *key,
		   uint32_t *ins);

/*
 * Are the keys of the leaf @blk strictly increasing?  If not, the first
 * slot out of order (its key not after the previous one's) goes to *@bad
 * (may be NULL).
 */
int braw_leaf_sorted(const unsigned char *blk, uint32_t *bad);

/* Write @key into the header of item @slot (its data stays). */
void braw_item_set_key(unsigned char *blk, uint32_t slot,
		       const struct braw_key *key);

#define BRAW_INSERT_ROOT_LEAF	1	/* @blk has no parent: slot 0 is fine */

/*
 * Insert the item @key with the @size bytes at @data into the sane, sorted
 * leaf @blk (nodesize bytes) at the slot its key sorts to; the new slot goes
 * to *@slot (may be NULL).  The data of the items after it move down by
 * @size bytes, their headers one header up.  Fails with EINVAL if the leaf
 * is not sane or not sorted, EEXIST if an item has that key, ENOSPC if the
 * leaf has no room for the header and the data, EXDEV if the item would
 * become slot 0 of a leaf with a parent (@flags without
 * BRAW_INSERT_ROOT_LEAF).
 */
int braw_item_insert(unsigned char *blk, uint32_t nodesize,
		     const struct braw_key *key, const void *data,
		     uint32_t size, unsigned int flags, uint32_t *slot);

#endif /* BTRFS_LEAF_H */
