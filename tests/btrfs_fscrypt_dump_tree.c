// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_dump_tree - what the image's patched `btrfs inspect-internal
 * dump-tree` prints of an encrypted btrfs is what the kernel wrote.
 *
 * With per-extent keys (skips unless the kernel advertises them), under the
 * default mount options (key groups, v2 extent contexts): a file made of
 * several extents (four fsynced writes and an overwrite that splits one), so
 * that they share its key group's nonce under distinct extent numbers, and a
 * second file that shares two of them through FICLONERANGE at another
 * offset.  Then, remounted with fscrypt_extents_per_key=1, a third file of
 * three fsynced writes: a key per extent, v1 contexts.
 *
 * While mounted, the kernel's view: every file extent item of the three
 * files (BTRFS_IOC_TREE_SEARCH_V2, lib/btrfs_items.c), its encryption and
 * its extent context decoded (lab_fscrypt_extent_ctx_decode(): version,
 * size, mode, flags, key identifier, nonce, extent number), and each
 * inode's context item (type 46) with its key identifier and nonce.  After
 * unmounting, dump-tree of the filesystem tree must print exactly those:
 * the same items with the same encryption, context version, size, mode and
 * flags, key identifier, nonce (v2: key_nonce) and extent number (v2:
 * extent_nr); the inode contexts with FS_IOC_GET_ENCRYPTION_NONCE's nonce
 * and the added key's identifier.
 *
 * Controls, so that the comparison cannot pass vacuously: the first file's
 * contexts are v2, and one nonce of it carries at least 4 distinct extent
 * numbers (a key group); no (nonce, extent number) names two different disk
 * extents (no IV space is reused); at least 2 of the clone's items carry
 * the first file's (nonce, extent number) pairs and disk extents; the third
 * file's contexts are v1 with at least 3 distinct nonces; and every item
 * the kernel showed is found in the dump, decoded.  Then btrfs check must
 * find the filesystem clean.  Skips, saying so, without the patched
 * btrfs-progs (or ones that predate v2 extent contexts).
 */
#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>

#define KEY_SEED 0xd0d0u
#define BLK 4096
#define INODE_CTX_KEY LAB_BTRFS_FSCRYPT_INODE_CTX_KEY
#define MAX_ITEMS 64

static const char *dev, *mnt;

/* One item as the kernel showed it, and whether the dump agreed. */
struct want {
	uint64_t ino, offset;
	int is_ctx;		/* inode context item, else file extent item */
	unsigned encryption;
	/* file extent items: the extent context decoded */
	unsigned version, size, mode, flags;
	uint64_t extent_nr, disk_bytenr;
	char key[33], nonce[33];
	int found, matched;
};

static struct want wants[MAX_ITEMS];
static size_t nwants;

static void write_piece(const char *path, off_t off, size_t len, uint32_t seed)
{
	unsigned char *buf = lab_pattern(len, seed);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (!CHECK(fd >= 0, "open %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno)) ||
	    !CHECK_OK(pwrite_all(fd, buf, len, off), "pwrite %s", path) ||
	    !CHECK_OK(fsync(fd), "fsync %s", path))
		lab_die("cannot write %s", path);
	close(fd);
	free(buf);
}

static void clone_range(const char *src, off_t soff, const char *dst,
			off_t doff, size_t len)
{
	struct file_clone_range r = { .src_offset = soff, .src_length = len,
				      .dest_offset = doff };
	int sfd = open(src, O_RDONLY | O_CLOEXEC);
	int dfd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (sfd < 0 || dfd < 0)
		lab_die("open for FICLONERANGE: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	r.src_fd = sfd;
	if (!CHECK_OK(ioctl(dfd, FICLONERANGE, &r), "FICLONERANGE %s -> %s", src, dst) ||
	    !CHECK_OK(fsync(dfd), "fsync %s", dst))
		lab_die("cannot clone");
	close(sfd);
	close(dfd);
}

static struct want *add_want(uint64_t ino, uint64_t offset, int is_ctx)
{
	struct want *w;

	if (nwants == MAX_ITEMS)
		lab_die("more than %d items", MAX_ITEMS);
	w = &wants[nwants++];
	memset(w, 0, sizeof(*w));
	w->ino = ino;
	w->offset = offset;
	w->is_ctx = is_ctx;
	return w;
}

/* Is @w a decoded file extent item of @ino (of any file: 0)? */
static int is_extent_of(const struct want *w, uint64_t ino)
{
	return !w->is_ctx && w->version && (!ino || w->ino == ino);
}

/*
 * The kernel's view of @path: its context item and file extent items, each
 * with a context of @want_version.  Returns the inode number (0 if unknown).
 */
static uint64_t learn(const char *path, const uint8_t id[16],
		      unsigned want_version)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_btrfs_item *items = NULL;
	struct lab_fscrypt_extent_ctx ctx;
	uint8_t nonce[16];
	size_t n = 0, nfe = 0, i;
	char idhex[33], nhex[33];
	struct want *w;
	struct stat st;

	if (!CHECK_OK(stat(path, &st), "stat %s", path))
		return 0;
	lab_hex(idhex, id, 16);
	if (CHECK_OK(lab_btrfs_search(path, st.st_ino, INODE_CTX_KEY, &items, &n),
		     "TREE_SEARCH of the context item of %s", path) &&
	    CHECK(n == 1 && items[0].len == 40 && items[0].data[0] == 2,
		  "%s: %zu context item(s) (first %u bytes, version %u), expected one v2 context",
		  path, n, n ? items[0].len : 0, n ? items[0].data[0] : 0)) {
		w = add_want(st.st_ino, 0, 1);
		lab_hex(w->key, items[0].data + 8, 16);
		lab_hex(w->nonce, items[0].data + 24, 16);
		CHECK(strcmp(w->key, idhex) == 0, "%s: the context item's key %s is not the added key %s",
		      path, w->key, idhex);
		if (CHECK_OK(lab_get_nonce(path, nonce), "FS_IOC_GET_ENCRYPTION_NONCE %s", path))
			CHECK(strcmp(lab_hex(nhex, nonce, 16), w->nonce) == 0,
			      "%s: the context item's nonce %s is not the ioctl's %s",
			      path, w->nonce, nhex);
		printf("kernel: ino %llu context key %s nonce %s\n",
		       (unsigned long long)st.st_ino, w->key, w->nonce);
	}
	lab_btrfs_items_free(items, n);

	if (!CHECK_OK(lab_btrfs_file_extents(path, st.st_ino, &fe, &nfe),
		      "TREE_SEARCH of the file extent items of %s", path))
		return st.st_ino;
	for (i = 0; i < nfe; i++) {
		w = add_want(st.st_ino, fe[i].file_offset, 0);
		w->encryption = fe[i].encryption;
		if (!CHECK(fe[i].encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT &&
			   fe[i].item_size == LAB_BTRFS_FILE_EXTENT_SIZE + fe[i].tail_len &&
			   lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &ctx) == 0,
			   "%s: item at %llu: encryption %u, %u bytes, context version %u; expected a per-extent item with a v1 or v2 context",
			   path, (unsigned long long)fe[i].file_offset, fe[i].encryption,
			   fe[i].item_size, fe[i].tail_len ? fe[i].ctx[0] : 0))
			continue;
		w->version = ctx.version;
		w->size = fe[i].tail_len;
		w->mode = ctx.mode;
		w->flags = ctx.flags;
		w->extent_nr = ctx.extent_nr;
		w->disk_bytenr = fe[i].disk_bytenr;
		lab_hex(w->key, ctx.key_id, 16);
		lab_hex(w->nonce, ctx.nonce, 16);
		printf("kernel: ino %llu extent at %llu (disk %llu +%llu) v%u key %s nonce %s extent_nr %llu\n",
		       (unsigned long long)st.st_ino, (unsigned long long)fe[i].file_offset,
		       (unsigned long long)fe[i].disk_bytenr,
		       (unsigned long long)fe[i].offset, w->version, w->key, w->nonce,
		       (unsigned long long)w->extent_nr);
		CHECK(w->version == want_version,
		      "%s: item at %llu has a v%u extent context, expected v%u",
		      path, (unsigned long long)w->offset, w->version, want_version);
		CHECK(strcmp(w->key, idhex) == 0,
		      "%s: item at %llu: extent context key %s is not the added key %s",
		      path, (unsigned long long)w->offset, w->key, idhex);
		CHECK(w->version == LAB_FSCRYPT_EXTENT_CTX_V2 || w->extent_nr == 0,
		      "%s: item at %llu: v1 context with extent number %llu",
		      path, (unsigned long long)w->offset,
		      (unsigned long long)w->extent_nr);
	}
	free(fe);
	return st.st_ino;
}

/* Distinct extent numbers of @ino's extents under the nonce of @w. */
static size_t group_size(uint64_t ino, const struct want *w)
{
	uint64_t seen[MAX_ITEMS];
	size_t n = 0, k;
	struct want *v;

	for (v = wants; v < wants + nwants; v++) {
		if (!is_extent_of(v, ino) || strcmp(v->nonce, w->nonce))
			continue;
		for (k = 0; k < n && seen[k] != v->extent_nr; k++)
			;
		if (k == n)
			seen[n++] = v->extent_nr;
	}
	return n;
}

/* Distinct nonces among @ino's extents. */
static size_t distinct_nonces(uint64_t ino)
{
	struct want *v, *u;
	size_t n = 0;

	for (v = wants; v < wants + nwants; v++) {
		if (!is_extent_of(v, ino))
			continue;
		/* the first of @ino's extents with this nonce */
		for (u = wants; u < v; u++)
			if (is_extent_of(u, ino) && !strcmp(u->nonce, v->nonce))
				break;
		n += u == v;
	}
	return n;
}

/*
 * Controls on the kernel's view: key groups in @a, no (nonce, extent
 * number) on two disk extents anywhere, the clone @b sharing @a's
 * extents, v1 keys of their own in @c.
 */
static void check_groups(uint64_t a, uint64_t b, uint64_t c)
{
	size_t biggest = 0, shared = 0, n;
	struct want *v, *u;

	for (v = wants; v < wants + nwants; v++) {
		n = is_extent_of(v, a) ? group_size(a, v) : 0;
		if (n > biggest)
			biggest = n;
	}
	for (v = wants; v < wants + nwants; v++)
		for (u = v + 1; u < wants + nwants; u++)
			if (is_extent_of(v, 0) && is_extent_of(u, 0) &&
			    !strcmp(u->nonce, v->nonce) &&
			    u->extent_nr == v->extent_nr)
				CHECK(u->disk_bytenr == v->disk_bytenr,
				      "nonce %s extent_nr %llu names disk extents %llu (ino %llu at %llu) and %llu (ino %llu at %llu): an IV space used twice",
				      v->nonce, (unsigned long long)v->extent_nr,
				      (unsigned long long)v->disk_bytenr,
				      (unsigned long long)v->ino,
				      (unsigned long long)v->offset,
				      (unsigned long long)u->disk_bytenr,
				      (unsigned long long)u->ino,
				      (unsigned long long)u->offset);
	for (v = wants; v < wants + nwants; v++) {
		if (!is_extent_of(v, b))
			continue;
		for (u = wants; u < wants + nwants; u++)
			if (is_extent_of(u, a) && !strcmp(u->nonce, v->nonce) &&
			    u->extent_nr == v->extent_nr &&
			    u->disk_bytenr == v->disk_bytenr)
				break;
		shared += u < wants + nwants;
	}
	printf("ino %llu: %zu distinct extent numbers under one nonce; ino %llu: %zu items sharing ino %llu's extents; ino %llu: %zu distinct nonces\n",
	       (unsigned long long)a, biggest, (unsigned long long)b, shared,
	       (unsigned long long)a, (unsigned long long)c, distinct_nonces(c));
	CHECK(biggest >= 4,
	      "ino %llu: at most %zu extents under one key nonce, expected a key group of at least 4 (four fsynced writes and an overwrite)",
	      (unsigned long long)a, biggest);
	CHECK(shared >= 2,
	      "ino %llu: %zu items with ino %llu's nonce, extent number and disk extent, expected the 2 cloned extents' (FICLONERANGE shares extents)",
	      (unsigned long long)b, shared, (unsigned long long)a);
	CHECK(distinct_nonces(c) >= 3,
	      "ino %llu: %zu distinct extent nonces, expected at least 3 (three fsynced writes with fscrypt_extents_per_key=1)",
	      (unsigned long long)c, distinct_nonces(c));
}

/*
 * Parse dump-tree's output: items "key (INO TYPE OFF)"; for extent items
 * "extent encryption N (...)", "extent context version V size S
 * contents_mode M (...)[ flags 0xF]" and "extent context
 * master_key_identifier HEX nonce HEX" (v1) or "... key_nonce HEX
 * extent_nr N" (v2); for context items "master_key_identifier HEX nonce
 * HEX".
 */
static void compare_dump(const char *out)
{
	const char *next = out;
	char line[1024], type[64], key[64], nonce[64];
	unsigned long long ino = 0, off = 0, nr;
	unsigned enc = 0, ver, size, mode, flags;
	struct want *cur = NULL;
	const char *f;
	size_t i;

	while (lab_next_line(&next, line, sizeof(line))) {
		const char *t = line + strspn(line, "\t");
		const char *k = strstr(line, " key (");

		if (!strncmp(t, "item ", 5) && k &&
		    sscanf(k, " key (%llu %63s %llu)", &ino, type, &off) == 3) {
			cur = NULL;
			for (i = 0; i < nwants; i++)
				if (wants[i].ino == ino && wants[i].offset == off &&
				    ((wants[i].is_ctx && !strcmp(type, "FSCRYPT_INODE_CTX")) ||
				     (!wants[i].is_ctx && !strcmp(type, "EXTENT_DATA"))))
					cur = &wants[i];
			if (cur)
				cur->found = 1;
			continue;
		}
		if (!cur)
			continue;
		if (!cur->is_ctx && sscanf(line, " extent encryption %u", &enc) == 1) {
			CHECK(enc == cur->encryption,
			      "dump-tree: ino %llu extent at %llu: encryption %u, the kernel's item has %u",
			      (unsigned long long)cur->ino, (unsigned long long)cur->offset,
			      enc, cur->encryption);
			continue;
		}
		if (!cur->is_ctx &&
		    sscanf(line, " extent context version %u size %u contents_mode %u",
			   &ver, &size, &mode) == 3) {
			f = strstr(line, " flags 0x");
			flags = f ? (unsigned)strtoul(f + 9, NULL, 16) : 0;
			CHECK(ver == cur->version && size == cur->size &&
			      mode == cur->mode && flags == cur->flags &&
			      (f != NULL) == (ver == LAB_FSCRYPT_EXTENT_CTX_V2),
			      "dump-tree: ino %llu extent at %llu: context version %u size %u mode %u flags %s0x%x; the kernel's: version %u size %u mode %u flags 0x%x",
			      (unsigned long long)cur->ino, (unsigned long long)cur->offset,
			      ver, size, mode, f ? "" : "(none) ", flags, cur->version,
			      cur->size, cur->mode, cur->flags);
			continue;
		}
		if (!cur->is_ctx &&
		    sscanf(line, " extent context master_key_identifier %63s key_nonce %63s extent_nr %llu",
			   key, nonce, &nr) == 3) {
			if (CHECK(cur->version == LAB_FSCRYPT_EXTENT_CTX_V2 &&
				  !strcmp(key, cur->key) && !strcmp(nonce, cur->nonce) &&
				  nr == cur->extent_nr,
				  "dump-tree: ino %llu extent at %llu: key %s key_nonce %s extent_nr %llu; the kernel's: v%u key %s nonce %s extent_nr %llu",
				  (unsigned long long)cur->ino, (unsigned long long)cur->offset,
				  key, nonce, nr, cur->version, cur->key, cur->nonce,
				  (unsigned long long)cur->extent_nr))
				cur->matched = 1;
			continue;
		}
		if ((!cur->is_ctx &&
		     sscanf(line, " extent context master_key_identifier %63s nonce %63s",
			    key, nonce) == 2) ||
		    (cur->is_ctx &&
		     sscanf(line, " master_key_identifier %63s nonce %63s", key, nonce) == 2)) {
			if (CHECK((cur->is_ctx || cur->version == LAB_FSCRYPT_EXTENT_CTX_V1) &&
				  !strcmp(key, cur->key) && !strcmp(nonce, cur->nonce),
				  "dump-tree: ino %llu %s at %llu: key %s nonce %s (v1); the kernel's: v%u key %s nonce %s",
				  (unsigned long long)cur->ino,
				  cur->is_ctx ? "context" : "extent",
				  (unsigned long long)cur->offset, key, nonce,
				  cur->version, cur->key, cur->nonce))
				cur->matched = 1;
			continue;
		}
		if (strstr(line, "INVALID"))
			CHECK(0, "dump-tree: ino %llu: %s", (unsigned long long)cur->ino, line);
	}
	for (i = 0; i < nwants; i++)
		CHECK(wants[i].found && wants[i].matched,
		      "dump-tree: ino %llu %s at %llu: %s",
		      (unsigned long long)wants[i].ino,
		      wants[i].is_ctx ? "context item" : "file extent item",
		      (unsigned long long)wants[i].offset,
		      !wants[i].found ? "not in the dump" :
		      "no decoded key identifier and nonce in the dump");
}

int main(void)
{
	char dir[PATH_MAX], a[PATH_MAX], b[PATH_MAX], c[PATH_MAX], why[256];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	uint64_t ia, ib, ic;
	size_t i, matched = 0, v1 = 0, v2 = 0;
	char *out = NULL;
	int st;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) != 0)
		lab_skip("the kernel does not advertise per-extent keys on btrfs (no %s)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	if (!lab_btrfs_progs_patched(why, sizeof(why)))
		lab_skip("%s", why);

	if (lab_mkfs("mkfs.btrfs -q -f", dev) || lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("cannot make and mount btrfs on %s", dev);
	PATHF(dir, "%s/enc", mnt);
	PATHF(a, "%s/pieces", dir);
	PATHF(b, "%s/clone", dir);
	PATHF(c, "%s/perkey", dir);
	if (!CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key") ||
	    !CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir) ||
	    !CHECK_OK(lab_set_policy(dir, id), "set policy on %s", dir))
		lab_die("cannot make the encrypted directory");

	/*
	 * Default options, key groups: four fsynced writes, four extents of
	 * a's group; then one overwrite splits one (a fifth extent).
	 */
	for (i = 0; i < 4; i++)
		write_piece(a, (off_t)(i * 4 * BLK), 4 * BLK, 0xd1u + (uint32_t)i);
	write_piece(a, 9 * BLK, BLK, 0xd9u);
	/* the clone: blocks [2, 6) of a, at block 3 of b, after one block */
	write_piece(b, 0, BLK, 0xdbu);
	clone_range(a, 2 * BLK, b, 3 * BLK, 4 * BLK);
	sync();
	/* A key per extent (v1 contexts) for what is written from now on. */
	if (!CHECK_OK(mount(dev, mnt, "btrfs", MS_REMOUNT, "fscrypt_extents_per_key=1"),
		      "remount %s with fscrypt_extents_per_key=1", mnt))
		lab_die("cannot remount");
	for (i = 0; i < 3; i++)
		write_piece(c, (off_t)(i * 2 * BLK), 2 * BLK, 0xe1u + (uint32_t)i);
	sync();

	ia = learn(a, id, LAB_FSCRYPT_EXTENT_CTX_V2);
	ib = learn(b, id, LAB_FSCRYPT_EXTENT_CTX_V2);
	ic = learn(c, id, LAB_FSCRYPT_EXTENT_CTX_V1);
	check_groups(ia, ib, ic);
	if (!CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		lab_die("cannot unmount for dump-tree");

	/* the files are in the top-level subvolume: tree 5 */
	st = lab_run_capture("btrfs inspect-internal dump-tree -t 5", dev, &out);
	CHECK(st == 0, "dump-tree exit status %d", st);
	compare_dump(out);
	for (i = 0; i < nwants; i++) {
		matched += wants[i].matched;
		v1 += wants[i].matched && wants[i].version == LAB_FSCRYPT_EXTENT_CTX_V1;
		v2 += wants[i].matched && wants[i].version == LAB_FSCRYPT_EXTENT_CTX_V2;
	}
	printf("%zu of %zu items (context and file extent items of the three files) printed by dump-tree as the kernel has them: %zu v2 extent contexts, %zu v1\n",
	       matched, nwants, v2, v1);
	CHECK(nwants >= 3 + 6 + 3, "only %zu items learnt from the kernel", nwants);
	CHECK(v2 >= 6 && v1 >= 3, "%zu v2 and %zu v1 extent contexts compared, expected at least 6 and 3",
	      v2, v1);
	free(out);

	lab_btrfs_check_clean(dev, "the filesystem with the key groups, the clone and the v1 file");
	return lab_result("btrfs_fscrypt_dump_tree");
}
