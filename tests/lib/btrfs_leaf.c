// SPDX-License-Identifier: GPL-2.0
/* Keys and item insertion in a btrfs leaf buffer; see btrfs_leaf.h. */
#include "btrfs_leaf.h"

#include <errno.h>
#include <string.h>

int braw_key_cmp(const struct braw_key *a, const struct braw_key *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return 0;
}

int braw_leaf_find(const unsigned char *blk, const struct braw_key *key,
		   uint32_t *ins)
{
	uint32_t n = braw_nritems(blk), slot;
	struct braw_key k;
	int c;

	/* linear: a leaf holds at most a few hundred items */
	for (slot = 0; slot < n; slot++) {
		braw_item_key(blk, slot, &k);
		c = braw_key_cmp(&k, key);
		if (c == 0) {
			if (ins)
				*ins = slot;
			return (int)slot;
		}
		if (c > 0)
			break;
	}
	if (ins)
		*ins = slot;
	return -1;
}

int braw_leaf_sorted(const unsigned char *blk, uint32_t *bad)
{
	uint32_t n = braw_nritems(blk), slot;
	struct braw_key prev, k;

	for (slot = 0; slot < n; slot++) {
		braw_item_key(blk, slot, &k);
		if (slot && braw_key_cmp(&prev, &k) >= 0) {
			if (bad)
				*bad = slot;
			return 0;
		}
		prev = k;
	}
	return 1;
}

void braw_item_set_key(unsigned char *blk, uint32_t slot,
		       const struct braw_key *key)
{
	unsigned char *it = braw_item_hdr(blk, slot);

	braw_put_le64(it, key->objectid);
	it[BRAW_ITEM_TYPE] = key->type;
	braw_put_le64(it + BRAW_ITEM_KEY_OFFSET, key->offset);
}

int braw_item_insert(unsigned char *blk, uint32_t nodesize,
		     const struct braw_key *key, const void *data,
		     uint32_t size, unsigned int flags, uint32_t *slot_out)
{
	/* item offsets count from the end of the header, as on disk */
	const uint32_t data_end = nodesize - BRAW_HDR_SIZE;
	uint32_t n, slot, i, end, low;
	unsigned char *it;

	if (!braw_leaf_sane(blk, nodesize) || !braw_leaf_sorted(blk, NULL)) {
		errno = EINVAL;
		return -1;
	}
	if (braw_leaf_find(blk, key, &slot) >= 0) {
		errno = EEXIST;
		return -1;
	}
	if (slot == 0 && !(flags & BRAW_INSERT_ROOT_LEAF)) {
		errno = EXDEV;
		return -1;
	}
	if ((uint64_t)braw_leaf_free(blk, nodesize) < (uint64_t)BRAW_ITEM_SIZE + size) {
		errno = ENOSPC;
		return -1;
	}
	n = braw_nritems(blk);
	/*
	 * The new item's data goes right below the data of slot - 1 (the data
	 * of a sane leaf is packed from the end in slot order): [end - size,
	 * end).  The data of slots slot..n-1, [low, end), moves down by size.
	 */
	end = slot ? braw_le32(braw_item_hdr(blk, slot - 1) + BRAW_ITEM_OFFSET) :
		     data_end;
	low = n ? braw_le32(braw_item_hdr(blk, n - 1) + BRAW_ITEM_OFFSET) :
		  data_end;
	memmove(blk + BRAW_HDR_SIZE + low - size, blk + BRAW_HDR_SIZE + low,
		end - low);
	for (i = slot; i < n; i++) {
		it = braw_item_hdr(blk, i);
		braw_put_le32(it + BRAW_ITEM_OFFSET,
			      braw_le32(it + BRAW_ITEM_OFFSET) - size);
	}
	/* the headers of slots slot..n-1 move up by one */
	memmove(braw_item_hdr(blk, slot + 1), braw_item_hdr(blk, slot),
		(size_t)(n - slot) * BRAW_ITEM_SIZE);
	it = braw_item_hdr(blk, slot);
	braw_item_set_key(blk, slot, key);
	braw_put_le32(it + BRAW_ITEM_OFFSET, end - size);
	braw_put_le32(it + BRAW_ITEM_DATA_SIZE, size);
	memcpy(blk + BRAW_HDR_SIZE + end - size, data, size);
	braw_put_le32(blk + BRAW_HDR_NRITEMS, n + 1);
	if (slot_out)
		*slot_out = slot;
	/* what the kernel's tree-checker will ask of it */
	if (!braw_leaf_sane(blk, nodesize) || !braw_leaf_sorted(blk, NULL)) {
		errno = EUCLEAN;	/* a bug here: the caller must not write it */
		return -1;
	}
	return 0;
}
