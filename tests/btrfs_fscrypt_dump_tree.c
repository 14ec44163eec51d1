// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_dump_tree - what the image's patched `btrfs inspect-internal
 * dump-tree` prints of an encrypted btrfs is what the kernel wrote.
 *
 * With per-extent keys (skips unless the kernel advertises them), a file
 * made of several extents (four fsynced writes and an overwrite that splits
 * one) and a second file that shares two of them through FICLONERANGE at
 * another offset.  While mounted, the kernel's view: every file extent item
 * of both files (BTRFS_IOC_TREE_SEARCH_V2, lib/btrfs_items.c) with its
 * encryption and the key identifier and nonce of its extent context, and
 * each inode's context item (type 41) with its key identifier and nonce.
 * After unmounting, dump-tree of the filesystem tree must print exactly
 * those: the same items with the same encryption type, contexts of
 * version 1, the same key identifiers and nonces, decoded; the inode
 * contexts with FS_IOC_GET_ENCRYPTION_NONCE's nonce and the added key's
 * identifier.  Controls, so that the comparison cannot pass vacuously: at
 * least 4 distinct nonces among the first file's extents, the clone's
 * items carrying nonces of the first file's, and every item the kernel
 * showed found in the dump.  Then btrfs check must find the filesystem
 * clean.  Skips, saying so, without the patched btrfs-progs.
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
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>

#define KEY_SEED 0xd0d0u
#define BLK 4096
#define INODE_CTX_KEY 41	/* BTRFS_FSCRYPT_INODE_CTX_KEY */
#define MAX_ITEMS 64

static const char *dev, *mnt;

/* One item as the kernel showed it, and whether the dump agreed. */
struct want {
	uint64_t ino, offset;
	int is_ctx;		/* inode context item, else file extent item */
	unsigned encryption;
	char key[33], nonce[33];
	int found, matched;
};

static struct want wants[MAX_ITEMS];
static size_t nwants;

static void write_piece(const char *path, off_t off, size_t len, uint32_t seed)
{
	unsigned char *buf = lab_xmalloc(len);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	fill_pattern(buf, len, seed);
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

/* The kernel's view of @path: its context item and file extent items. */
static size_t learn(const char *path, const uint8_t id[16],
		    char nonces[][33], size_t max_nonces)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct lab_btrfs_item *items = NULL;
	uint8_t nonce[16];
	size_t n = 0, nfe = 0, i, k, distinct = 0;
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
		return 0;
	for (i = 0; i < nfe; i++) {
		w = add_want(st.st_ino, fe[i].file_offset, 0);
		w->encryption = fe[i].encryption;
		if (!CHECK(fe[i].encryption == LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT &&
			   fe[i].item_size == LAB_BTRFS_FILE_EXTENT_SIZE + LAB_FSCRYPT_EXTENT_CTX_SIZE,
			   "%s: item at %llu: encryption %u, %u bytes; expected a per-extent item",
			   path, (unsigned long long)fe[i].file_offset, fe[i].encryption,
			   fe[i].item_size))
			continue;
		lab_hex(w->key, fe[i].ctx + LAB_FSCRYPT_EXTENT_CTX_ID_OFF, 16);
		lab_hex(w->nonce, fe[i].ctx + LAB_FSCRYPT_EXTENT_CTX_NONCE_OFF, 16);
		printf("kernel: ino %llu extent at %llu (disk %llu +%llu) key %s nonce %s\n",
		       (unsigned long long)st.st_ino, (unsigned long long)fe[i].file_offset,
		       (unsigned long long)fe[i].disk_bytenr,
		       (unsigned long long)fe[i].offset, w->key, w->nonce);
		for (k = 0; k < distinct; k++)
			if (!strcmp(nonces[k], w->nonce))
				break;
		if (k == distinct && distinct < max_nonces)
			strcpy(nonces[distinct++], w->nonce);
	}
	free(fe);
	return distinct;
}

/*
 * Parse dump-tree's output: items "key (INO TYPE OFF)", then for extent
 * items "extent encryption N (...)" and "extent context master_key_identifier
 * HEX nonce HEX", for context items "master_key_identifier HEX nonce HEX".
 */
static void compare_dump(const char *out)
{
	const char *next = out;
	char line[1024], type[64], key[64], nonce[64];
	unsigned long long ino = 0, off = 0;
	unsigned enc = 0;
	struct want *cur = NULL;
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
		if ((!cur->is_ctx &&
		     sscanf(line, " extent context master_key_identifier %63s nonce %63s",
			    key, nonce) == 2) ||
		    (cur->is_ctx &&
		     sscanf(line, " master_key_identifier %63s nonce %63s", key, nonce) == 2)) {
			if (CHECK(!strcmp(key, cur->key) && !strcmp(nonce, cur->nonce),
				  "dump-tree: ino %llu %s at %llu: key %s nonce %s; the kernel's: key %s nonce %s",
				  (unsigned long long)cur->ino,
				  cur->is_ctx ? "context" : "extent",
				  (unsigned long long)cur->offset, key, nonce,
				  cur->key, cur->nonce))
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
	char dir[PATH_MAX], a[PATH_MAX], b[PATH_MAX], why[256];
	char an[16][33], bn[16][33];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	size_t na, nb, i, k, shared = 0, matched = 0;
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
	if (!CHECK_OK(lab_add_key(mnt, KEY_SEED, id), "add key") ||
	    !CHECK_OK(mkdir(dir, 0755), "mkdir %s", dir) ||
	    !CHECK_OK(lab_set_policy(dir, id), "set policy on %s", dir))
		lab_die("cannot make the encrypted directory");

	/* four fsynced writes: four extents; then one overwrite splits one */
	for (i = 0; i < 4; i++)
		write_piece(a, (off_t)(i * 4 * BLK), 4 * BLK, 0xd1u + (uint32_t)i);
	write_piece(a, 9 * BLK, BLK, 0xd9u);
	/* the clone: blocks [2, 6) of a, at block 3 of b, after one block */
	write_piece(b, 0, BLK, 0xdbu);
	clone_range(a, 2 * BLK, b, 3 * BLK, 4 * BLK);
	sync();

	na = learn(a, id, an, 16);
	nb = learn(b, id, bn, 16);
	for (i = 0; i < nb; i++)
		for (k = 0; k < na; k++)
			if (!strcmp(bn[i], an[k]))
				shared++;
	printf("%zu distinct nonces in %s, %zu in %s, %zu of those shared with %s\n",
	       na, a, nb, b, shared, a);
	CHECK(na >= 4, "%s: %zu distinct extent nonces, expected at least 4 (four fsynced writes and an overwrite)",
	      a, na);
	CHECK(shared >= 2, "%s: %zu of its nonces are %s's, expected the 2 cloned extents' (FICLONERANGE shares extents)",
	      b, shared, a);
	if (!CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		lab_die("cannot unmount for dump-tree");

	/* the files are in the top-level subvolume: tree 5 */
	st = lab_run_capture("btrfs inspect-internal dump-tree -t 5", dev, &out);
	CHECK(st == 0, "dump-tree exit status %d", st);
	compare_dump(out);
	for (i = 0; i < nwants; i++)
		matched += wants[i].matched;
	printf("%zu of %zu items (context and file extent items of both files) printed by dump-tree with the kernel's key identifier and nonce\n",
	       matched, nwants);
	CHECK(nwants >= 2 + 6, "only %zu items learnt from the kernel", nwants);
	free(out);

	lab_btrfs_check_clean(dev, "the filesystem with the reflinked files");
	return lab_result("btrfs_fscrypt_dump_tree");
}
