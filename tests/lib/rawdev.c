// SPDX-License-Identifier: GPL-2.0
/* Raw block device helpers: O_DIRECT I/O, scanning, FIEMAP, btrfs chunks. */
#include "rawdev.h"
#include "lab.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#define RAW_ALIGN 4096u
#define RAW_SCAN_CHUNK (8u << 20)

static void *raw_alloc(size_t len)
{
	void *p;
	int e = posix_memalign(&p, RAW_ALIGN, len ? len : RAW_ALIGN);

	if (e)
		lab_die("out of memory allocating %zu aligned bytes", len);
	return p;
}

/* Close @fd keeping errno; return @ret. */
static int raw_close(int fd, int ret)
{
	int e = errno;

	close(fd);
	errno = e;
	return ret;
}

/* pread exactly @len bytes (EIO on a short read). */
static int raw_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = lab_pread_full(fd, buf, len, (off_t)off);

	if (n < 0)
		return -1;
	if ((size_t)n < len) {
		errno = EIO;
		return -1;
	}
	return 0;
}

int raw_read(const char *dev, uint64_t off, void *buf, size_t len)
{
	uint64_t start = off / RAW_ALIGN * RAW_ALIGN;
	size_t span = (size_t)((off + len + RAW_ALIGN - 1) / RAW_ALIGN * RAW_ALIGN - start);
	unsigned char *tmp;
	int fd, ret;

	fd = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -1;
	tmp = raw_alloc(span);
	ret = raw_pread_full(fd, tmp, span, start);
	if (ret == 0)
		memcpy(buf, tmp + (off - start), len);
	free(tmp);
	return raw_close(fd, ret);
}

int raw_write_sync(const char *dev, uint64_t off, const void *buf, size_t len)
{
	const unsigned char *p;
	unsigned char *tmp;
	ssize_t n;
	int fd, ret = 0;

	if (off % RAW_ALIGN || len % RAW_ALIGN) {
		errno = EINVAL;
		return -1;
	}
	fd = open(dev, O_WRONLY | O_DIRECT | O_DSYNC | O_CLOEXEC);
	if (fd < 0)
		return -1;
	tmp = raw_alloc(len);
	memcpy(tmp, buf, len);
	for (p = tmp; len > 0;) {
		n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			ret = -1;
			break;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	if (ret == 0)
		ret = fsync(fd);
	free(tmp);
	return raw_close(fd, ret);
}

/* btrfs superblock at 64 KiB: magic at 64, log_root at 96 */
long long raw_btrfs_log_root(const char *dev)
{
	unsigned char sb[104];
	uint64_t v;

	if (raw_read(dev, 65536, sb, sizeof(sb)) || memcmp(sb + 64, "_BHRfS_M", 8))
		return -1;
	memcpy(&v, sb + 96, 8);
	return (long long)le64toh(v);
}

/* ---- scanning ------------------------------------------------------------------ */

/*
 * Horspool's search, by hand: glibc's memmem() is slow on long runs of zero
 * bytes (most of a scratch device), ~40 s per GiB for a dozen needles even
 * natively, and far worse under TCG.  Here every step skips by the table
 * entry of the window's last byte: the needle's length wherever that byte
 * is not in the needle (zeros, for text needles).
 */
struct raw_horspool {
	size_t skip[256];
};

static void raw_horspool_init(struct raw_horspool *h, const unsigned char *nd,
			      size_t m)
{
	size_t i;

	for (i = 0; i < 256; i++)
		h->skip[i] = m;
	for (i = 0; i + 1 < m; i++)
		h->skip[nd[i]] = m - 1 - i;
}

static void raw_record(struct raw_needle *nd, uint64_t off)
{
	if (nd->noffs < RAW_NEEDLE_MAX_OFFS)
		nd->offs[nd->noffs++] = off;
	nd->count++;
}

/*
 * One read's worth of searching.  The buffer [@base, @stop) is the carried
 * tail of the previous read followed by the new data, which starts at
 * @data; @base is at device offset @base_off.  An occurrence is counted in
 * the read in which it ends, i.e. if it ends after @data.
 */
struct raw_window {
	const unsigned char *base, *data, *stop;
	uint64_t base_off;
};

/* Every occurrence of @nd in the window. */
static void raw_horspool_run(const struct raw_horspool *h, struct raw_needle *nd,
			     const struct raw_window *w)
{
	const unsigned char *needle = nd->data, *p;
	size_t m = nd->len;
	unsigned char last = needle[m - 1], c;

	p = w->data - w->base >= (ptrdiff_t)(m - 1) ? w->data - (m - 1) : w->base;
	while ((size_t)(w->stop - p) >= m) {
		c = p[m - 1];
		if (c == last && memcmp(p, needle, m - 1) == 0)
			raw_record(nd, w->base_off + (uint64_t)(p - w->base));
		p += h->skip[c];
	}
}

/*
 * Anchored: search only needles[0], which every other needle contains (at
 * @koff[j]); at each of its occurrences test the others around it.  Each
 * occurrence of needle j contains one of needles[0] at koff[j] from its
 * start, and lies wholly in the window of the read in which it ends.
 */
static void raw_anchor_run(const struct raw_horspool *h, struct raw_needle *nd,
			   size_t n, const size_t *koff, const struct raw_window *w)
{
	const unsigned char *a = nd[0].data, *p = w->base, *s;
	size_t m = nd[0].len, j;
	unsigned char last = a[m - 1], c;

	while ((size_t)(w->stop - p) >= m) {
		c = p[m - 1];
		if (c == last && memcmp(p, a, m - 1) == 0) {
			if (p + m > w->data)
				raw_record(&nd[0], w->base_off + (uint64_t)(p - w->base));
			for (j = 1; j < n; j++) {
				if ((size_t)(p - w->base) < koff[j])
					continue;
				s = p - koff[j];
				if ((size_t)(w->stop - s) >= nd[j].len &&
				    s + nd[j].len > w->data &&
				    memcmp(s, nd[j].data, nd[j].len) == 0)
					raw_record(&nd[j], w->base_off + (uint64_t)(s - w->base));
			}
		}
		p += h->skip[c];
	}
}

/*
 * Buffer: [carry area][chunk].  The last maxlen-1 bytes of each chunk are
 * moved in front of the next one.  A needle of length L is searched from
 * L-1 bytes before the new data, so each match is seen once: in the read in
 * which it ends.
 */
static int raw_scan_impl(const char *dev, uint64_t start, uint64_t limit,
			 struct raw_needle *needles, size_t n, int anchored)
{
	size_t maxlen = 1, pad, carry = 0, keep, i, *koff;
	struct raw_horspool *hs;
	struct raw_window w;
	unsigned char *mem, *data;
	const unsigned char *k;
	uint64_t off = start, size;
	off_t end;
	int fd, ret = 0;

	if (n == 0) {
		errno = EINVAL;
		return -1;
	}
	koff = lab_xmalloc(n * sizeof(*koff));
	for (i = 0; i < n; i++) {
		if (needles[i].len == 0) {
			free(koff);
			errno = EINVAL;
			return -1;
		}
		koff[i] = 0;
		if (anchored && i > 0) {
			k = memmem(needles[i].data, needles[i].len, needles[0].data,
				   needles[0].len);
			if (!k)
				lab_die("raw_scan_anchored: needle \"%s\" does not contain the anchor",
					needles[i].label);
			koff[i] = (size_t)(k - (const unsigned char *)needles[i].data);
		}
		if (needles[i].len > maxlen)
			maxlen = needles[i].len;
		needles[i].count = 0;
		needles[i].noffs = 0;
	}
	fd = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		free(koff);
		return -1;
	}
	end = lseek(fd, 0, SEEK_END);
	if (end < 0) {
		free(koff);
		return raw_close(fd, -1);
	}
	hs = lab_xmalloc(n * sizeof(*hs));
	for (i = 0; i < n; i++)
		raw_horspool_init(&hs[i], needles[i].data, needles[i].len);
	size = (uint64_t)end;
	if (limit < size)
		size = limit;
	pad = (maxlen - 1 + RAW_ALIGN - 1) / RAW_ALIGN * RAW_ALIGN;
	mem = raw_alloc(pad + RAW_SCAN_CHUNK);
	data = mem + pad;
	while (off < size) {
		size_t want = size - off < RAW_SCAN_CHUNK ? (size_t)(size - off) : RAW_SCAN_CHUNK;

		if (raw_pread_full(fd, data, want, off) != 0) {
			ret = -1;
			break;
		}
		w.base = data - carry;
		w.data = data;
		w.stop = data + want;
		w.base_off = off - carry;
		if (anchored)
			raw_anchor_run(&hs[0], needles, n, koff, &w);
		else
			for (i = 0; i < n; i++)
				raw_horspool_run(&hs[i], &needles[i], &w);
		off += want;
		keep = carry + want < maxlen - 1 ? carry + want : maxlen - 1;
		memmove(data - keep, data + want - keep, keep);
		carry = keep;
	}
	free(mem);
	free(hs);
	free(koff);
	return raw_close(fd, ret);
}

int raw_scan(const char *dev, struct raw_needle *needles, size_t n)
{
	return raw_scan_impl(dev, 0, UINT64_MAX, needles, n, 0);
}

int raw_scan_anchored(const char *dev, struct raw_needle *needles, size_t n)
{
	return raw_scan_impl(dev, 0, UINT64_MAX, needles, n, 1);
}

int raw_scan_range(const char *dev, uint64_t start, uint64_t len,
		   struct raw_needle *needles, size_t n)
{
	if (start % RAW_ALIGN || len % RAW_ALIGN) {
		errno = EINVAL;
		return -1;
	}
	return raw_scan_impl(dev, start,
			     len > UINT64_MAX - start ? UINT64_MAX : start + len,
			     needles, n, 0);
}

/* ---- FIEMAP -------------------------------------------------------------------- */

#define RAW_FIEMAP_BATCH 256

int raw_fiemap(const char *path, struct raw_extent **ext, size_t *n)
{
	size_t sz = sizeof(struct fiemap) + RAW_FIEMAP_BATCH * sizeof(struct fiemap_extent);
	struct fiemap *fm = lab_xmalloc(sz);
	struct raw_extent *out = NULL, *grown;
	size_t count = 0, i;
	uint64_t start = 0;
	int fd, last = 0;

	*ext = NULL;
	*n = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(fm);
		return -1;
	}
	while (!last) {
		memset(fm, 0, sz);
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = RAW_FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			free(fm);
			free(out);
			return raw_close(fd, -1);
		}
		if (fm->fm_mapped_extents == 0)
			break;
		grown = realloc(out, (count + fm->fm_mapped_extents) * sizeof(*out));
		if (!grown)
			lab_die("out of memory for FIEMAP of %s", path);
		out = grown;
		for (i = 0; i < fm->fm_mapped_extents; i++) {
			const struct fiemap_extent *fe = &fm->fm_extents[i];

			out[count].logical = fe->fe_logical;
			out[count].physical = fe->fe_physical;
			out[count].length = fe->fe_length;
			out[count].flags = fe->fe_flags;
			count++;
			if (fe->fe_flags & FIEMAP_EXTENT_LAST)
				last = 1;
			start = fe->fe_logical + fe->fe_length;
		}
	}
	free(fm);
	close(fd);
	*ext = out;
	*n = count;
	return 0;
}

/* ---- btrfs chunks -------------------------------------------------------------- */

int raw_btrfs_chunks(const char *mnt, struct raw_btrfs_chunk **chunks,
		     size_t *n)
{
	struct btrfs_ioctl_search_args *args = lab_xmalloc(sizeof(*args));
	struct btrfs_ioctl_search_key *sk = &args->key;
	struct raw_btrfs_chunk *out = NULL, *grown;
	size_t count = 0, pos, s;
	uint32_t i;
	int fd;

	*chunks = NULL;
	*n = 0;
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		free(args);
		return -1;
	}
	memset(args, 0, sizeof(*args));
	sk->tree_id = BTRFS_CHUNK_TREE_OBJECTID;
	sk->min_objectid = sk->max_objectid = BTRFS_FIRST_CHUNK_TREE_OBJECTID;
	sk->min_type = sk->max_type = BTRFS_CHUNK_ITEM_KEY;
	sk->max_offset = (uint64_t)-1;
	sk->max_transid = (uint64_t)-1;
	for (;;) {
		sk->nr_items = 4096;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, args) < 0) {
			free(args);
			free(out);
			return raw_close(fd, -1);
		}
		if (sk->nr_items == 0)
			break;
		for (pos = 0, i = 0; i < sk->nr_items; i++) {
			struct btrfs_ioctl_search_header sh;
			struct btrfs_chunk ck;
			struct btrfs_stripe st;
			const char *item;

			memcpy(&sh, args->buf + pos, sizeof(sh));
			item = args->buf + pos + sizeof(sh);
			pos += sizeof(sh) + sh.len;
			sk->min_offset = sh.offset + 1;
			if (sh.type != BTRFS_CHUNK_ITEM_KEY ||
			    sh.len < sizeof(struct btrfs_chunk))
				continue;
			memcpy(&ck, item, sizeof(ck));
			grown = realloc(out, (count + 1) * sizeof(*out));
			if (!grown)
				lab_die("out of memory for the btrfs chunk map");
			out = grown;
			memset(&out[count], 0, sizeof(out[count]));
			out[count].logical = sh.offset;
			out[count].length = le64toh(ck.length);
			out[count].type = le64toh(ck.type);
			out[count].nstripes = le16toh(ck.num_stripes);
			if (out[count].nstripes > RAW_BTRFS_MAX_STRIPES)
				out[count].nstripes = RAW_BTRFS_MAX_STRIPES;
			for (s = 0; s < out[count].nstripes; s++) {
				size_t so = offsetof(struct btrfs_chunk, stripe) +
					    s * sizeof(struct btrfs_stripe);

				if (so + sizeof(st) > sh.len)
					break;
				memcpy(&st, item + so, sizeof(st));
				out[count].devid[s] = le64toh(st.devid);
				out[count].physical[s] = le64toh(st.offset);
			}
			out[count].nstripes = (unsigned)s;
			count++;
		}
		if (sk->min_offset == 0)	/* wrapped past (u64)-1 */
			break;
	}
	free(args);
	close(fd);
	*chunks = out;
	*n = count;
	return 0;
}

int raw_btrfs_map(const struct raw_btrfs_chunk *chunks, size_t n,
		  uint64_t logical, uint64_t len,
		  uint64_t phys[RAW_BTRFS_MAX_STRIPES])
{
	struct raw_btrfs_copy copies[RAW_BTRFS_MAX_STRIPES];
	int nc, k;

	nc = raw_btrfs_map_copies(chunks, n, logical, len, copies);
	if (nc < 0)
		return -1;
	for (k = 0; k < nc; k++) {
		if (copies[k].devid != 1) {
			printf("btrfs map: copy %d of logical address %llu is on devid %llu, not 1 (a one-device mapping was asked for)\n",
			       k, (unsigned long long)logical,
			       (unsigned long long)copies[k].devid);
			return -1;
		}
		phys[k] = copies[k].physical;
	}
	return nc;
}

int raw_btrfs_map_copies(const struct raw_btrfs_chunk *chunks, size_t n,
			 uint64_t logical, uint64_t len,
			 struct raw_btrfs_copy copies[RAW_BTRFS_MAX_STRIPES])
{
	const uint64_t mirrored = BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 |
				  BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4;
	const struct raw_btrfs_chunk *c;
	uint64_t profile;
	size_t i;
	unsigned s;

	for (i = 0; i < n; i++) {
		c = &chunks[i];
		if (logical < c->logical || logical - c->logical >= c->length)
			continue;
		if (logical + len > c->logical + c->length) {
			printf("btrfs map: [%llu, +%llu) crosses the end of chunk %llu\n",
			       (unsigned long long)logical, (unsigned long long)len,
			       (unsigned long long)c->logical);
			return -1;
		}
		profile = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
		if (profile != 0 && (profile & ~mirrored)) {
			printf("btrfs map: chunk %llu has profile bits 0x%llx (striped): not mapped here\n",
			       (unsigned long long)c->logical,
			       (unsigned long long)profile);
			return -1;
		}
		if (c->nstripes == 0) {
			printf("btrfs map: chunk %llu has no stripes\n",
			       (unsigned long long)c->logical);
			return -1;
		}
		for (s = 0; s < c->nstripes; s++) {
			copies[s].devid = c->devid[s];
			copies[s].physical = c->physical[s] + (logical - c->logical);
		}
		return (int)c->nstripes;
	}
	printf("btrfs map: logical address %llu is in no chunk\n",
	       (unsigned long long)logical);
	return -1;
}

int raw_btrfs_dev_path(const char *mnt, uint64_t devid, char *path,
		       size_t size)
{
	struct btrfs_ioctl_dev_info_args di;
	size_t len;
	int fd;

	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	memset(&di, 0, sizeof(di));
	di.devid = devid;
	if (ioctl(fd, BTRFS_IOC_DEV_INFO, &di) < 0)
		return raw_close(fd, -1);
	close(fd);
	len = strnlen((const char *)di.path, sizeof(di.path));
	if (len == 0 || len >= size || len == sizeof(di.path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, di.path, len);
	path[len] = '\0';
	return 0;
}

_Static_assert(RAW_BTRFS_DEV_STATS <= BTRFS_DEV_STAT_VALUES_MAX,
	       "RAW_BTRFS_DEV_STATS counts more counters than the kernel has");

int raw_btrfs_dev_stats(const char *mnt, uint64_t devid,
			uint64_t stats[RAW_BTRFS_DEV_STATS])
{
	struct btrfs_ioctl_get_dev_stats ds;
	int fd, i;

	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	memset(&ds, 0, sizeof(ds));
	ds.devid = devid;
	ds.nr_items = RAW_BTRFS_DEV_STATS;
	if (ioctl(fd, BTRFS_IOC_GET_DEV_STATS, &ds) < 0)
		return raw_close(fd, -1);
	close(fd);
	for (i = 0; i < RAW_BTRFS_DEV_STATS; i++)
		stats[i] = (uint64_t)i < ds.nr_items ? ds.values[i] : 0;
	return 0;
}
