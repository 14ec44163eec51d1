// SPDX-License-Identifier: GPL-2.0
/* btrfs items through BTRFS_IOC_TREE_SEARCH_V2; see btrfs_items.h. */
#include "btrfs_items.h"
#include "btrfs_raw.h"
#include "fscrypt_fs.h"
#include "lab.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#define LAB_SEARCH_BUF (64u << 10)

_Static_assert(sizeof(struct btrfs_file_extent_item) == LAB_BTRFS_FILE_EXTENT_SIZE,
	       "struct btrfs_file_extent_item is not 53 bytes");
_Static_assert(offsetof(struct btrfs_file_extent_item, encryption) ==
	       LAB_BTRFS_FILE_EXTENT_ENCRYPTION_OFF,
	       "btrfs_file_extent_item::encryption moved");

void lab_btrfs_items_free(struct lab_btrfs_item *items, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(items[i].data);
	free(items);
}

int lab_btrfs_search(const char *path, uint64_t objectid, uint8_t type,
		     struct lab_btrfs_item **items, size_t *n)
{
	return lab_btrfs_search_tree(path, 0, objectid, type, items, n);
}

int lab_btrfs_search_tree(const char *path, uint64_t tree_id,
			  uint64_t objectid, uint8_t type,
			  struct lab_btrfs_item **items, size_t *n)
{
	struct btrfs_ioctl_search_args_v2 *args;
	struct btrfs_ioctl_search_key *sk;
	struct btrfs_ioctl_search_header sh;
	struct lab_btrfs_item *out = NULL, *grown;
	size_t count = 0, pos;
	uint32_t i;
	int fd, e, done = 0;

	*items = NULL;
	*n = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	args = lab_xmalloc(sizeof(*args) + LAB_SEARCH_BUF);
	memset(args, 0, sizeof(*args));
	sk = &args->key;
	sk->tree_id = tree_id;		/* 0: the subvolume of @path */
	sk->min_objectid = sk->max_objectid = objectid;
	sk->min_type = sk->max_type = type;
	sk->min_offset = 0;
	sk->max_offset = (uint64_t)-1;
	sk->min_transid = 0;
	sk->max_transid = (uint64_t)-1;
	while (!done) {
		sk->nr_items = 4096;
		args->buf_size = LAB_SEARCH_BUF;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, args) < 0) {
			e = errno;
			lab_btrfs_items_free(out, count);
			free(args);
			close(fd);
			errno = e;
			return -1;
		}
		if (sk->nr_items == 0)
			break;
		for (pos = 0, i = 0; i < sk->nr_items; i++) {
			if (pos + sizeof(sh) > LAB_SEARCH_BUF)
				lab_die("TREE_SEARCH_V2: item %u header beyond the buffer", i);
			memcpy(&sh, args->buf + pos, sizeof(sh));
			pos += sizeof(sh);
			if (pos + sh.len > LAB_SEARCH_BUF)
				lab_die("TREE_SEARCH_V2: item %u (%u bytes) beyond the buffer",
					i, sh.len);
			if (sh.objectid == objectid && sh.type == type) {
				grown = realloc(out, (count + 1) * sizeof(*out));
				if (!grown)
					lab_die("out of memory for btrfs items");
				out = grown;
				out[count].objectid = sh.objectid;
				out[count].offset = sh.offset;
				out[count].transid = sh.transid;
				out[count].type = sh.type;
				out[count].len = sh.len;
				out[count].data = lab_xmalloc(sh.len);
				memcpy(out[count].data, args->buf + pos, sh.len);
				count++;
			}
			pos += sh.len;
			if (sh.offset == (uint64_t)-1)
				done = 1;
			else
				sk->min_offset = sh.offset + 1;
		}
	}
	free(args);
	close(fd);
	*items = out;
	*n = count;
	return 0;
}

static void lab_decode_file_extent(const struct lab_btrfs_item *it,
				   struct lab_btrfs_file_extent *fe)
{
	struct btrfs_file_extent_item fi;
	size_t len = it->len < sizeof(fi) ? it->len : sizeof(fi);

	memset(&fi, 0, sizeof(fi));
	memcpy(&fi, it->data, len);
	memset(fe, 0, sizeof(*fe));
	fe->file_offset = it->offset;
	fe->item_size = it->len;
	fe->generation = le64toh(fi.generation);
	fe->ram_bytes = le64toh(fi.ram_bytes);
	fe->compression = fi.compression;
	fe->encryption = fi.encryption;
	fe->type = fi.type;
	if (fi.type == BTRFS_FILE_EXTENT_INLINE || it->len < sizeof(fi))
		return;
	fe->disk_bytenr = le64toh(fi.disk_bytenr);
	fe->disk_num_bytes = le64toh(fi.disk_num_bytes);
	fe->offset = le64toh(fi.offset);
	fe->num_bytes = le64toh(fi.num_bytes);
	fe->tail_len = it->len - (uint32_t)sizeof(fi);
	memcpy(fe->ctx, it->data + sizeof(fi),
	       fe->tail_len < sizeof(fe->ctx) ? fe->tail_len : sizeof(fe->ctx));
}

int lab_btrfs_file_extents(const char *path, uint64_t ino,
			   struct lab_btrfs_file_extent **fe, size_t *n)
{
	struct lab_btrfs_item *items;
	size_t count, i;

	*fe = NULL;
	*n = 0;
	if (lab_btrfs_search(path, ino, BTRFS_EXTENT_DATA_KEY, &items, &count))
		return -1;
	*fe = lab_xmalloc(count * sizeof(**fe));
	for (i = 0; i < count; i++)
		lab_decode_file_extent(&items[i], &(*fe)[i]);
	*n = count;
	lab_btrfs_items_free(items, count);
	return 0;
}

int lab_fscrypt_extent_ctx_decode(const uint8_t *buf, size_t len,
				  struct lab_fscrypt_extent_ctx *ctx)
{
	uint32_t nr;

	memset(ctx, 0, sizeof(*ctx));
	if (len < 2) {
		errno = EINVAL;
		return -1;
	}
	ctx->version = buf[LAB_FSCRYPT_EXTENT_CTX_VERSION_OFF];
	ctx->mode = buf[LAB_FSCRYPT_EXTENT_CTX_MODE_OFF];
	if (ctx->version == LAB_FSCRYPT_EXTENT_CTX_V1 &&
	    len == LAB_FSCRYPT_EXTENT_CTX_V1_SIZE) {
		ctx->id_off = LAB_FSCRYPT_EXTENT_CTX_V1_ID_OFF;
		ctx->nonce_off = LAB_FSCRYPT_EXTENT_CTX_V1_NONCE_OFF;
	} else if (ctx->version == LAB_FSCRYPT_EXTENT_CTX_V2 &&
		   len == LAB_FSCRYPT_EXTENT_CTX_V2_SIZE) {
		ctx->flags = buf[LAB_FSCRYPT_EXTENT_CTX_V2_FLAGS_OFF];
		ctx->reserved = buf[LAB_FSCRYPT_EXTENT_CTX_V2_RESERVED_OFF];
		ctx->id_off = LAB_FSCRYPT_EXTENT_CTX_V2_ID_OFF;
		ctx->nonce_off = LAB_FSCRYPT_EXTENT_CTX_V2_NONCE_OFF;
		memcpy(&nr, buf + LAB_FSCRYPT_EXTENT_CTX_V2_NR_OFF, sizeof(nr));
		ctx->extent_nr = le32toh(nr);
	} else {
		errno = EINVAL;
		return -1;
	}
	ctx->key_id = buf + ctx->id_off;
	ctx->nonce = buf + ctx->nonce_off;
	return 0;
}

int lab_btrfs_inode_flags(const char *path, uint64_t ino, uint64_t *flags)
{
	struct lab_btrfs_item *items;
	struct btrfs_inode_item ii;
	size_t count;

	if (lab_btrfs_search(path, ino, BTRFS_INODE_ITEM_KEY, &items, &count))
		return -1;
	if (count != 1 || items[0].offset != 0 || items[0].len < sizeof(ii)) {
		lab_btrfs_items_free(items, count);
		errno = ENOENT;
		return -1;
	}
	memcpy(&ii, items[0].data, sizeof(ii));
	*flags = le64toh(ii.flags);
	lab_btrfs_items_free(items, count);
	return 0;
}

void lab_btrfs_subvol(const char *mnt, const char *name, int src_fd)
{
	unsigned long cmd = src_fd < 0 ? BTRFS_IOC_SUBVOL_CREATE :
					 BTRFS_IOC_SNAP_CREATE;
	struct btrfs_ioctl_vol_args va;
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	memset(&va, 0, sizeof(va));
	va.fd = src_fd < 0 ? 0 : src_fd;
	snprintf(va.name, sizeof(va.name), "%s", name);
	if (fd < 0 || ioctl(fd, cmd, &va))
		lab_die("%s %s in %s: %s", src_fd < 0 ? "subvolume create" :
			"snapshot", name, mnt, strerror(errno));
	close(fd);
}

int lab_btrfs_root_item(const char *path, uint64_t *id, void *buf,
			size_t size)
{
	struct btrfs_ioctl_ino_lookup_args il = {
		.objectid = BTRFS_FIRST_FREE_OBJECTID,
	};
	struct btrfs_ioctl_search_args sa;
	struct btrfs_ioctl_search_header sh;
	int fd = open(path, O_RDONLY | O_CLOEXEC), len = -1, e;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &il))
		goto out;
	sa.key.tree_id = BTRFS_ROOT_TREE_OBJECTID;
	sa.key.min_objectid = sa.key.max_objectid = il.treeid;
	sa.key.min_type = sa.key.max_type = BTRFS_ROOT_ITEM_KEY;
	sa.key.max_offset = (uint64_t)-1;
	sa.key.max_transid = (uint64_t)-1;
	sa.key.nr_items = 1;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &sa))
		goto out;
	memcpy(&sh, sa.buf, sizeof(sh));
	if (sa.key.nr_items != 1 || sh.objectid != il.treeid ||
	    sh.type != BTRFS_ROOT_ITEM_KEY) {
		errno = EUCLEAN;
		goto out;
	}
	len = (int)(sh.len < size ? sh.len : size);
	memcpy(buf, sa.buf + sizeof(sh), (size_t)len);
	if (id)
		*id = il.treeid;
out:
	e = errno;
	close(fd);
	errno = e;
	return len;
}

long lab_btrfs_check_key_records(const char *path, const char *what,
				 const uint8_t *const want[], size_t nwant)
{
	struct lab_btrfs_item *it = NULL;
	char hex[2 * FSCRYPT_KEY_IDENTIFIER_SIZE + 1];
	size_t n = 0, i, j, found;

	if (!CHECK_OK(lab_btrfs_search(path, BTRFS_FIRST_FREE_OBJECTID,
				       LAB_BTRFS_FSCRYPT_KEY_ITEM_KEY, &it, &n),
		      "search the key items of %s", path))
		return -1;
	CHECK(n == nwant, "%s: %zu key items, expected %zu", what, n, nwant);
	for (i = 0; i < n; i++) {
		if (!CHECK(it[i].len == LAB_BTRFS_FSCRYPT_KEY_ITEM_SIZE,
			   "%s: key item %zu has %u bytes, expected %d", what, i,
			   it[i].len, LAB_BTRFS_FSCRYPT_KEY_ITEM_SIZE))
			continue;
		CHECK(it[i].offset == braw_le64(it[i].data),
		      "%s: key item at offset %llu, its identifier starts %llu", what,
		      (unsigned long long)it[i].offset,
		      (unsigned long long)braw_le64(it[i].data));
		CHECK(braw_le64(it[i].data + 16) == 0, "%s: key item flags %llu", what,
		      (unsigned long long)braw_le64(it[i].data + 16));
		for (found = 0, j = 0; j < nwant; j++)
			found += !memcmp(it[i].data, want[j], FSCRYPT_KEY_IDENTIFIER_SIZE);
		CHECK(found == 1, "%s: key item %zu names a key that is not expected (%s)",
		      what, i, lab_hex(hex, it[i].data, FSCRYPT_KEY_IDENTIFIER_SIZE));
	}
	lab_btrfs_items_free(it, n);
	return (long)n;
}
