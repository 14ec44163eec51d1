// SPDX-License-Identifier: GPL-2.0
/* Data blocks on the device against reference ciphertext; see fscrypt_blocks.h. */
#include "fscrypt_blocks.h"
#include "btrfs_items.h"
#include "fscrypt_fs.h"
#include "fscrypt_ref.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>

void fblk_alloc(struct fblk_block *b, unsigned bs)
{
	size_t i;

	memset(b, 0, sizeof(*b));
	b->pt = lab_xmalloc(bs);
	b->want = lab_xmalloc(bs);
	b->raw = lab_xmalloc(bs);
	for (i = 0; i < FBLK_MAX_CONTROLS; i++)
		b->ctl[i] = lab_xmalloc(bs);
}

void fblk_free(struct fblk_block *b)
{
	size_t i;

	free(b->pt);
	free(b->want);
	free(b->raw);
	for (i = 0; i < FBLK_MAX_CONTROLS; i++)
		free(b->ctl[i]);
	memset(b, 0, sizeof(*b));
}

void fblk_plaintext(struct fblk_block *b, const uint8_t *data, size_t size,
		    uint64_t lblk, unsigned bs)
{
	uint64_t start = lblk * bs;
	size_t len = 0;

	if (start < size)
		len = size - start < bs ? (size_t)(size - start) : bs;
	memset(b->pt, 0, bs);
	if (len)
		memcpy(b->pt, data + start, len);
}

int fblk_check_copy(const char *dev, unsigned bs, uint64_t off,
		    struct fblk_block *b, int strict)
{
	size_t d, ndiff = 0, i;
	int is_pt;

	if (!CHECK_OK(raw_read(dev, off, b->raw, bs),
		      "O_DIRECT read of %u bytes at device offset %llu", bs,
		      (unsigned long long)off))
		return -1;
	d = lab_first_diff(b->want, b->raw, bs);
	is_pt = b->encrypted && memcmp(b->pt, b->raw, bs) == 0;
	if (b->encrypted)
		CHECK(!is_pt, "%s at device offset %llu holds the PLAINTEXT",
		      b->what, (unsigned long long)off);
	if (d != bs && strict) {
		for (i = d; i < bs; i++)
			ndiff += b->want[i] != b->raw[i];
		CHECK(0, "%s at device offset %llu differs from the %s from byte %zu on (device offset %llu: expected 0x%02x, got 0x%02x; %zu of %u bytes differ)%s",
		      b->what, (unsigned long long)off, b->want_what, d,
		      (unsigned long long)(off + d), b->want[d], b->raw[d],
		      ndiff, bs, is_pt ? "; the device holds the PLAINTEXT" : "");
	}
	if (b->encrypted)
		for (i = 0; i < b->nctl; i++)
			CHECK(memcmp(b->ctl[i], b->raw, bs) != 0,
			      "negative control: %s also matches the %s: the comparison is vacuous",
			      b->what, b->ctl_what[i]);
	return d == bs;
}

void fblk_check_key_identifier(const uint8_t *mk, size_t mklen,
			       const uint8_t *id)
{
	uint8_t want[FREF_ID_SIZE];
	char a[2 * FREF_ID_SIZE + 1], b[2 * FREF_ID_SIZE + 1];

	if (fref_key_identifier(mk, mklen, want))
		lab_die("cannot compute the key identifier");
	printf("key identifier: kernel %s, reference %s\n",
	       lab_hex(a, id, FREF_ID_SIZE), lab_hex(b, want, sizeof(want)));
	CHECK(memcmp(want, id, sizeof(want)) == 0,
	      "master key identifier: kernel says %s, HKDF-SHA512 (context 1) gives %s",
	      a, b);
}

int fblk_btrfs_chunks(const char *mnt, struct raw_btrfs_chunk **chunks,
		      size_t *n)
{
	static const char *const kinds[] = { "data", "system", "metadata" };
	size_t i, k;

	if (!CHECK_OK(raw_btrfs_chunks(mnt, chunks, n),
		      "BTRFS_IOC_TREE_SEARCH of the chunk tree on %s", mnt))
		return -1;
	printf("btrfs chunk map (logical -> device offset):\n");
	for (i = 0; i < *n; i++) {
		const struct raw_btrfs_chunk *ck = &(*chunks)[i];

		printf("  logical %llu length %llu type 0x%llx (",
		       (unsigned long long)ck->logical,
		       (unsigned long long)ck->length,
		       (unsigned long long)ck->type);
		for (k = 0; k < 3; k++)
			if (ck->type & (1ULL << k))
				printf("%s", kinds[k]);
		printf("):");
		for (k = 0; k < ck->nstripes; k++)
			printf(" devid %llu offset %llu%s",
			       (unsigned long long)ck->devid[k],
			       (unsigned long long)ck->physical[k],
			       ck->physical[k] == ck->logical ? " (= logical)" : "");
		printf("\n");
	}
	return 0;
}

unsigned fblk_block_size(const char *mnt)
{
	struct statvfs sv;
	unsigned bs;

	if (statvfs(mnt, &sv) != 0)
		lab_die("statvfs(%s): " LAB_ERR_FMT, mnt, LAB_ERR_ARGS(errno));
	bs = (unsigned)sv.f_bsize;
	printf("block size (fscrypt data unit) %u\n", bs);
	if (bs < 512 || bs > 65536 || bs % 512)
		lab_die("unexpected block size %u", bs);
	return bs;
}

void fblk_check_two_key_extents(const char *dev, unsigned bs, const char *what,
				const uint8_t *data, size_t size,
				const struct lab_btrfs_file_extent *fe, size_t n,
				const struct raw_btrfs_chunk *chunks, size_t nchunks,
				const uint8_t *const mk[2], const uint8_t *const id[2],
				struct fblk_two_keys *out)
{
	uint8_t key[FREF_XTS_KEY_SIZE], other[FREF_XTS_KEY_SIZE];
	uint64_t offs[RAW_BTRFS_MAX_STRIPES], pos, unit, addr, end;
	struct lab_fscrypt_extent_ctx ctx;
	struct fblk_block b;
	size_t i;
	int k, q, nc;

	memset(out, 0, sizeof(*out));
	fblk_alloc(&b, bs);
	for (i = 0; i < n; i++) {
		if (fe[i].encryption != LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT ||
		    lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &ctx))
			continue;
		for (k = 0; k < 2; k++)
			if (!memcmp(ctx.key_id, id[k], FSCRYPT_KEY_IDENTIFIER_SIZE))
				break;
		if (k == 2)
			continue;
		if (fref_per_extent_key(mk[k], LAB_MASTER_KEY_SIZE, ctx.nonce, key,
					sizeof(key)) ||
		    fref_per_extent_key(mk[1 - k], LAB_MASTER_KEY_SIZE, ctx.nonce, other,
					sizeof(other)))
			lab_die("reference key derivation failed");
		end = fe[i].file_offset + fe[i].num_bytes;
		for (pos = fe[i].file_offset; pos < end && pos < size; pos += bs) {
			unit = (fe[i].offset + pos - fe[i].file_offset) / bs;
			addr = fe[i].disk_bytenr + fe[i].offset + pos - fe[i].file_offset;
			fblk_plaintext(&b, data, size, pos / bs, bs);
			snprintf(b.what, sizeof(b.what), "%s block %llu (K%d, unit %llu of extent %llu)",
				 what, (unsigned long long)(pos / bs), k + 1,
				 (unsigned long long)unit, (unsigned long long)ctx.extent_nr);
			b.encrypted = 1;
			b.want_what = "reference ciphertext under the context's key";
			if (fref_encrypt_extent_unit(key, ctx.extent_nr, unit, b.pt, b.want, bs) ||
			    fref_encrypt_extent_unit(other, ctx.extent_nr, unit, b.pt, b.ctl[0],
						     bs))
				lab_die("reference encryption failed");
			snprintf(b.ctl_what[0], sizeof(b.ctl_what[0]),
				 "the same block under the other master key");
			b.nctl = 1;
			nc = raw_btrfs_map(chunks, nchunks, addr, bs, offs);
			if (!CHECK(nc > 0, "%s: address %llu not mapped", b.what,
				   (unsigned long long)addr))
				continue;
			out->blocks++;
			out->under[k]++;
			for (q = 0; q < nc; q++)
				out->ok += fblk_check_copy(dev, bs, offs[q], &b, 1) == 1;
		}
	}
	fblk_free(&b);
}
