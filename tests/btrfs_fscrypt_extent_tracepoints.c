// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_extent_tracepoints - key groups of per-extent encryption,
 * as the fscrypt tracepoints and the file extent items show them.
 *
 * A file's extents share one derived key while the inode that wrote them
 * stays in memory (a key group); each extent gets its number in the group
 * (the high 64 bits of its IVs).  Every file here is written sparse: one
 * 4 KiB block at every other block (holes between), one fsync at the end,
 * so that every block is an extent of its own; FIEMAP and the file extent
 * items (BTRFS_IOC_TREE_SEARCH_V2) confirm it.
 *
 *   A  BIG_EXTENTS (10,000) extents in one write: one key group.
 *   B  written in three phases of 4 extents, with a remount between them:
 *      each phase starts a group (reason=new), three groups.
 *   C  10 extents under the mount option fscrypt_extents_per_key=4:
 *      groups of 4, 4 and 2 (reason=new, then extents, extents).
 *   D  10 extents with fscrypto.extent_group_max_units=4: groups of 4, 4
 *      and 2 (reason=new, then units, units); the parameter is restored.
 *   E  4 extents under fscrypt_extents_per_key=1: a key per extent,
 *      version 1 contexts (what a key per extent costs, for contrast).
 *   F  (on a filesystem of its own, after the rest) 256 contiguous blocks
 *      in one write into free space made of 4 KiB holes, with
 *      fscrypto.extent_group_max_units=2048: about 256 extents, one key
 *      group (reason=new only): a group is charged the data units its
 *      extents hold, not the rest of the range each allocation asked for.
 *
 * While writing: fscrypt_extent_group_start of each file gives exactly the
 * expected reasons and previous group sizes, and the write derives one key
 * per group (fscrypt_extent_key_setup cached=0, fscrypt_derive_key
 * context=9).  On disk: version 2 contexts of 93-byte items (version 1 and
 * 87 bytes for E), the master key's identifier, no flags, one key nonce
 * per group, and the extent numbers of each group exactly 0..n-1.
 *
 * Then a cold read of each file (remount, drop_caches 3) derives exactly
 * one key per group: as many fscrypt_extent_key_setup cached=0 and
 * fscrypt_derive_key context=9 events as groups, the file's
 * fscrypt_extent_lookup events name exactly that many key_ids (A: one for
 * all 10,000 extents), each with derived=1 on exactly one lookup and the
 * extent numbers of its group exactly 0..n-1.  After dropping only the
 * page cache (drop_caches 1, fadvise DONTNEED), a re-read of B must do
 * the same: since 6.12's try_release_extent_mapping() no longer keeps the
 * extent maps of files under 16 MiB, a released folio takes its extent
 * map, and with the last extent of a group its key (keys live as long as
 * an extent of their group is in memory).  On 6.1 the same re-read found
 * the keys live; this test documents the 6.12 behaviour.
 *
 * SKIP when the kernel does not advertise per-extent keys.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "btrfs_items.h"
#include "btrfs_progs.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#define TRACEFS "/sys/kernel/tracing"
#define MAX_UNITS_PARAM "/sys/module/fscrypto/parameters/extent_group_max_units"
#define BLK 4096
#define BIG_EXTENTS 10000
/* per write phase of B; fscrypt_extents_per_key of C; max units of D */
#define GROUP 4
#define SMALL_EXTENTS 10	/* C and D: groups of 4, 4, 2 */
#define B_PHASES 3
#define E_EXTENTS 4
/* per-CPU trace buffer while tracing: a lookup and a setup per extent of A */
#define TRACE_BUF_KB "16384"
#define MAX_KEYS 16
#define MAX_GROUP_EVENTS 16
#define KEY_SEED 7

static const char *dev, *mnt;
static uint8_t key_id[FSCRYPT_KEY_IDENTIFIER_SIZE];
static char saved_buf_kb[32], saved_max_units[32];

/* ---- the files ------------------------------------------------------------- */

struct tfile {
	const char *name;
	char path[512];
	unsigned long ino;
	size_t extents;		/* one block each, at block stride * i */
	size_t stride;		/* 2 (holes between) but for F (1) */
	uint8_t *img;		/* what the file holds: blocks and holes */
	size_t size;
	int version;		/* of its extent contexts */
	size_t ngroups;
	size_t group_sizes[MAX_KEYS];	/* in writing order */
};

static void tfile_init(struct tfile *tf, const char *name, size_t extents,
		       int version, const size_t *sizes, size_t ngroups,
		       uint32_t seed)
{
	size_t i;

	tf->name = name;
	PATHF(tf->path, "%s/enc/%s", mnt, name);
	tf->extents = extents;
	tf->stride = 2;
	tf->size = (2 * extents - 1) * (size_t)BLK;
	tf->img = lab_xmalloc(tf->size);
	memset(tf->img, 0, tf->size);
	for (i = 0; i < extents; i++)
		fill_pattern(tf->img + 2 * i * BLK, BLK, seed + (uint32_t)i);
	tf->version = version;
	tf->ngroups = ngroups;
	for (i = 0; i < ngroups; i++)
		tf->group_sizes[i] = sizes[i];
}

/*
 * Write extents [@first, @first + @count) of @tf, then one fsync.  The file
 * is first extended to the end of the last one (a hole), so that no write
 * leaves a hole beyond EOF, which btrfs fills in a transaction of its own
 * (btrfs_cont_expand()): A's write took 114 s without that, 91 s with it
 * (TCG, debug kernel).  What remains is btrfs writing back 10,000 extents.
 */
static void write_extents(struct tfile *tf, size_t first, size_t count)
{
	off_t end = (off_t)(2 * (first + count) - 1) * BLK;
	struct stat st;
	size_t i;
	int fd;

	fd = open(tf->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		lab_die("open %s: " LAB_ERR_FMT, tf->path, LAB_ERR_ARGS(errno));
	if (fstat(fd, &st) || (st.st_size < end && ftruncate(fd, end)))
		lab_die("extend %s to %lld bytes: " LAB_ERR_FMT, tf->path,
			(long long)end, LAB_ERR_ARGS(errno));
	for (i = first; i < first + count; i++)
		if (pwrite_all(fd, tf->img + 2 * i * BLK, BLK, (off_t)(2 * i * BLK)))
			lab_die("write extent %zu of %s: " LAB_ERR_FMT, i,
				tf->path, LAB_ERR_ARGS(errno));
	CHECK_OK(fsync(fd), "fsync %s", tf->path);
	if (CHECK_OK(fstat(fd, &st), "fstat %s", tf->path))
		tf->ino = (unsigned long)st.st_ino;
	close(fd);
}

/* ---- tracefs ----------------------------------------------------------------- */

static const char *const events[] = {
	"fscrypt_extent_lookup", "fscrypt_extent_key_setup",
	"fscrypt_derive_key", "fscrypt_extent_group_start",
};

/* Enable or disable our events; the first failure's path goes to @failed. */
static int switch_events(int on, char *failed, size_t size)
{
	char path[256];
	size_t i;
	int ret = 0;

	for (i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		PATHF(path, TRACEFS "/events/fscrypt/%s/enable", events[i]);
		if (write_file(path, on ? "1" : "0", 1) && !ret) {
			snprintf(failed, size, "%s", path);
			ret = -1;
		}
	}
	/* tracing_on is global, and an earlier test may have left it off */
	if (on && write_file(TRACEFS "/tracing_on", "1", 1) && !ret) {
		snprintf(failed, size, "%s", TRACEFS "/tracing_on");
		ret = -1;
	}
	return ret;
}

static void set_events(int on)
{
	char failed[256];

	if (switch_events(on, failed, sizeof(failed)))
		lab_die("cannot %s %s: %s", on ? "enable" : "disable", failed,
			strerror(errno));
}

/* Read a small sysfs/tracefs value into @out (newline dropped). */
static int read_value(const char *path, char *out, size_t size)
{
	size_t len;
	char *s = read_file(path, &len);

	if (!s)
		return -1;
	snprintf(out, size, "%s", s);
	out[strcspn(out, "\n")] = 0;
	free(s);
	return 0;
}

/* At exit, also after lab_die(): never exits itself. */
static void restore_settings(void)
{
	char failed[256];

	switch_events(0, failed, sizeof(failed));
	if (saved_buf_kb[0])
		write_file(TRACEFS "/buffer_size_kb", saved_buf_kb,
			   strlen(saved_buf_kb));
	if (saved_max_units[0])
		write_file(MAX_UNITS_PARAM, saved_max_units,
			   strlen(saved_max_units));
}

/* Events lost to a full ring buffer since it was last cleared. */
static long long trace_overruns(void)
{
	long long sum = 0, v;
	char path[128], *s, *p;
	size_t len;
	int cpu;

	for (cpu = 0; cpu < 64; cpu++) {
		PATHF(path, TRACEFS "/per_cpu/cpu%d/stats", cpu);
		s = read_file(path, &len);
		if (!s)
			break;
		p = strstr(s, "overrun:");
		if (p && sscanf(p, "overrun: %lld", &v) == 1)
			sum += v;
		free(s);
	}
	return sum;
}

/* ---- what a trace says ---------------------------------------------------------- */

struct key_seen {
	uint64_t id;
	long lookups, derived;
	long nrs;		/* distinct extent numbers */
	uint64_t nr_max;
	uint8_t *nr_seen;	/* [limit] */
};

struct group_event {
	uint64_t key_id, prev_extents, prev_units;
	char reason[16];
};

struct trace_stats {
	/* of the file's ino */
	long lookups, lookups_derived, lookup_bad;
	struct key_seen keys[MAX_KEYS];
	size_t nkeys;
	int too_many_keys;
	struct group_event groups[MAX_GROUP_EVENTS];
	size_t ngroups;
	/* of the filesystem (no inode in these events) */
	long setups_derived, setups_cached, setup_bad;
	uint64_t setup_ids[MAX_KEYS];
	size_t nsetup_ids;
	long derive9, derive_bad;
	long long overruns;
};

static void stats_free(struct trace_stats *s)
{
	size_t i;

	for (i = 0; i < s->nkeys; i++)
		free(s->keys[i].nr_seen);
}

static struct key_seen *key_of(struct trace_stats *s, uint64_t id,
			       size_t limit)
{
	size_t i;

	for (i = 0; i < s->nkeys; i++)
		if (s->keys[i].id == id)
			return &s->keys[i];
	if (s->nkeys == MAX_KEYS) {
		s->too_many_keys = 1;
		return NULL;
	}
	memset(&s->keys[s->nkeys], 0, sizeof(s->keys[0]));
	s->keys[s->nkeys].id = id;
	s->keys[s->nkeys].nr_seen = lab_xmalloc(limit);
	memset(s->keys[s->nkeys].nr_seen, 0, limit);
	return &s->keys[s->nkeys++];
}

/*
 * Parse the trace: lookups and group starts of inode @ino (whose @limit
 * extents are one block each, every @stride blocks), setups and
 * derivations of the whole system.
 */
static void parse(const char *text, unsigned long ino, size_t limit,
		  size_t stride, struct trace_stats *s)
{
	const char *next = text;
	char line[512];

	while (lab_next_line(&next, line, sizeof(line))) {
		unsigned long long lblk, off, nr, kid, enr, dur, pe, pu;
		unsigned int ctx, ilen, klen;
		unsigned long e_ino;
		int maj, min, derived, cached, ret;
		struct group_event *g;
		struct key_seen *k;
		char reason[16];
		const char *ev;

		if ((ev = strstr(line, "fscrypt_extent_lookup: "))) {
			if (sscanf(ev, "fscrypt_extent_lookup: dev=%d:%d ino=%lu lblk=%llu offset=%llu nr_blocks=%llu derived=%d key_id=%llu extent_nr=%llu ret=%d duration_ns=%llu",
				   &maj, &min, &e_ino, &lblk, &off, &nr, &derived,
				   &kid, &enr, &ret, &dur) != 11) {
				printf("unparsed: %s\n", ev);
				s->lookup_bad++;
				continue;
			}
			if (e_ino != ino)
				continue;
			s->lookups++;
			if (ret || off != 0 || nr != 1 || lblk % stride ||
			    lblk / stride >= limit || enr >= limit) {
				if (s->lookup_bad++ < 5)
					printf("unexpected: %s\n", ev);
				continue;
			}
			k = key_of(s, kid, limit);
			if (!k)
				continue;
			k->lookups++;
			if (derived) {
				k->derived++;
				s->lookups_derived++;
			}
			if (!k->nr_seen[enr]) {
				k->nr_seen[enr] = 1;
				k->nrs++;
			}
			if (enr > k->nr_max)
				k->nr_max = enr;
		} else if ((ev = strstr(line, "fscrypt_extent_group_start: "))) {
			if (sscanf(ev, "fscrypt_extent_group_start: dev=%d:%d ino=%lu key_id=%llu reason=%15s prev_extents=%llu prev_units=%llu",
				   &maj, &min, &e_ino, &kid, reason, &pe, &pu) != 7) {
				printf("unparsed: %s\n", ev);
				s->lookup_bad++;
				continue;
			}
			if (e_ino != ino)
				continue;
			if (s->ngroups == MAX_GROUP_EVENTS) {
				s->lookup_bad++;
				continue;
			}
			g = &s->groups[s->ngroups++];
			g->key_id = kid;
			g->prev_extents = pe;
			g->prev_units = pu;
			snprintf(g->reason, sizeof(g->reason), "%s", reason);
		} else if ((ev = strstr(line, "fscrypt_extent_key_setup: "))) {
			if (sscanf(ev, "fscrypt_extent_key_setup: dev=%d:%d id=%llu cached=%d ret=%d",
				   &maj, &min, &kid, &cached, &ret) != 5 || ret) {
				printf("unexpected: %s\n", ev);
				s->setup_bad++;
			} else if (cached) {
				s->setups_cached++;
			} else {
				s->setups_derived++;
				if (s->nsetup_ids < MAX_KEYS)
					s->setup_ids[s->nsetup_ids++] = kid;
			}
		} else if ((ev = strstr(line, "fscrypt_derive_key: "))) {
			if (sscanf(ev, "fscrypt_derive_key: context=%u info_len=%u key_len=%u ret=%d",
				   &ctx, &ilen, &klen, &ret) != 4 || ret) {
				printf("unexpected: %s\n", ev);
				s->derive_bad++;
			} else if (ctx == 9) {
				s->derive9++;
			}
		}
	}
}

static void trace_begin(void)
{
	write_file(TRACEFS "/trace", "", 0);	/* clears the buffer */
	set_events(1);
}

static void trace_end(const struct tfile *tf, struct trace_stats *s)
{
	char *trace;
	size_t len;

	set_events(0);
	memset(s, 0, sizeof(*s));
	s->overruns = trace_overruns();
	trace = read_file(TRACEFS "/trace", &len);
	if (!trace)
		lab_die("read " TRACEFS "/trace: %s", strerror(errno));
	parse(trace, tf->ino, tf->extents, tf->stride, s);
	free(trace);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* "4,4,2": @n sizes, sorted if @sort */
static const char *sizes_str(char *out, size_t size, const size_t *v, size_t n,
			     int sort)
{
	size_t s[MAX_KEYS], i, used = 0;

	memcpy(s, v, n * sizeof(*v));
	if (sort)
		qsort(s, n, sizeof(*s), cmp_size);
	out[0] = 0;
	for (i = 0; i < n && used < size; i++)
		used += snprintf(out + used, size - used, "%s%zu", i ? "," : "",
				 s[i]);
	return out;
}

/* ---- the checks --------------------------------------------------------------- */

/*
 * The group starts of a write: @n events with these reasons and previous
 * group sizes, in order, each naming a key derived during the write; and
 * one derivation per group.
 */
struct want_group {
	const char *reason;
	uint64_t prev_extents, prev_units;
};

static void check_write_trace(const struct tfile *tf, const char *what,
			      const struct want_group *want, size_t n,
			      long derivations)
{
	struct trace_stats s;
	size_t i, j;
	int found;

	trace_end(tf, &s);
	printf("%s: %zu group start(s):", what, s.ngroups);
	for (i = 0; i < s.ngroups; i++)
		printf(" [key_id=%" PRIu64 " reason=%s prev_extents=%" PRIu64 " prev_units=%" PRIu64 "]",
		       s.groups[i].key_id, s.groups[i].reason,
		       s.groups[i].prev_extents, s.groups[i].prev_units);
	printf("; info setups derived=%ld cached=%ld; derive_key context=9: %ld\n",
	       s.setups_derived, s.setups_cached, s.derive9);
	CHECK(s.ngroups == n, "%s: %zu fscrypt_extent_group_start events, want %zu",
	      what, s.ngroups, n);
	for (i = 0; i < s.ngroups && i < n; i++) {
		CHECK(!strcmp(s.groups[i].reason, want[i].reason) &&
		      s.groups[i].prev_extents == want[i].prev_extents &&
		      s.groups[i].prev_units == want[i].prev_units,
		      "%s: group start %zu: reason=%s prev_extents=%" PRIu64 " prev_units=%" PRIu64 ", want reason=%s prev_extents=%" PRIu64 " prev_units=%" PRIu64,
		      what, i, s.groups[i].reason, s.groups[i].prev_extents,
		      s.groups[i].prev_units, want[i].reason,
		      want[i].prev_extents, want[i].prev_units);
		for (found = 0, j = 0; j < s.nsetup_ids; j++)
			found |= s.setup_ids[j] == s.groups[i].key_id;
		CHECK(found, "%s: group start %zu names key %" PRIu64 ", which was not derived during the write",
		      what, i, s.groups[i].key_id);
	}
	CHECK(s.setups_derived == derivations && s.derive9 == derivations,
	      "%s: %ld keys set up by derivation, %ld fscrypt_derive_key context=9; want %ld and %ld",
	      what, s.setups_derived, s.derive9, derivations, derivations);
	CHECK(s.setup_bad == 0 && s.derive_bad == 0 && s.lookup_bad == 0 &&
	      s.overruns == 0,
	      "%s: %ld bad setups, %ld bad derivations, %ld bad events, %lld events lost",
	      what, s.setup_bad, s.derive_bad, s.lookup_bad, s.overruns);
	stats_free(&s);
}

/*
 * On disk: one item per extent, with a context of @tf->version naming our
 * key, and the extents grouped by key nonce into groups of the expected
 * sizes, each numbered 0..n-1 (version 2).  FIEMAP: one 4 KiB extent at
 * every even block.
 */
static void check_on_disk(const struct tfile *tf)
{
	struct lab_btrfs_file_extent *fe = NULL;
	struct raw_extent *ext = NULL;
	struct lab_fscrypt_extent_ctx c;
	uint8_t nonces[MAX_KEYS][16];
	size_t sizes[MAX_KEYS], nnonce = 0, nfe = 0, next = 0, i, j, bad = 0;
	size_t badnr = 0, ctx_size;
	uint8_t **seen = NULL;
	char got[128], want[128];

	if (CHECK_OK(raw_fiemap(tf->path, &ext, &next), "FIEMAP of %s", tf->path)) {
		for (i = 0; i < next && i < tf->extents; i++)
			bad += ext[i].logical != 2 * i * BLK ||
			       ext[i].length != BLK;
		CHECK(next == tf->extents && bad == 0,
		      "%s: FIEMAP shows %zu extents (%zu not a 4 KiB extent at an even block), want %zu",
		      tf->name, next, bad, tf->extents);
	}
	free(ext);
	if (!CHECK_OK(lab_btrfs_file_extents(tf->path, tf->ino, &fe, &nfe),
		      "file extent items of %s", tf->path))
		return;
	ctx_size = tf->version == LAB_FSCRYPT_EXTENT_CTX_V1 ?
		   LAB_FSCRYPT_EXTENT_CTX_V1_SIZE : LAB_FSCRYPT_EXTENT_CTX_V2_SIZE;
	seen = lab_xmalloc(MAX_KEYS * sizeof(*seen));
	bad = 0;
	for (i = 0; i < nfe; i++) {
		if (fe[i].encryption != LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT ||
		    fe[i].item_size != LAB_BTRFS_FILE_EXTENT_SIZE + ctx_size ||
		    fe[i].tail_len != ctx_size ||
		    lab_fscrypt_extent_ctx_decode(fe[i].ctx, fe[i].tail_len, &c) ||
		    c.version != tf->version || c.flags || c.reserved ||
		    memcmp(c.key_id, key_id, sizeof(key_id))) {
			if (bad++ < 3)
				printf("%s: item at offset %" PRIu64 ": %u bytes, encryption %u, context version %u flags %u reserved %u\n",
				       tf->name, fe[i].file_offset, fe[i].item_size,
				       fe[i].encryption, fe[i].ctx[0],
				       fe[i].ctx[LAB_FSCRYPT_EXTENT_CTX_V2_FLAGS_OFF],
				       fe[i].ctx[LAB_FSCRYPT_EXTENT_CTX_V2_RESERVED_OFF]);
			continue;
		}
		for (j = 0; j < nnonce; j++)
			if (!memcmp(nonces[j], c.nonce, 16))
				break;
		if (j == nnonce) {
			if (nnonce == MAX_KEYS) {
				bad++;
				continue;
			}
			memcpy(nonces[nnonce], c.nonce, 16);
			sizes[nnonce] = 0;
			seen[nnonce] = lab_xmalloc(tf->extents);
			memset(seen[nnonce], 0, tf->extents);
			nnonce++;
		}
		sizes[j]++;
		if (c.extent_nr >= tf->extents || seen[j][c.extent_nr])
			badnr++;
		else
			seen[j][c.extent_nr] = 1;
	}
	/* numbers 0..n-1 in each group: n distinct numbers below n */
	for (j = 0; j < nnonce; j++)
		for (i = 0; i < sizes[j] && tf->version == LAB_FSCRYPT_EXTENT_CTX_V2; i++)
			badnr += !seen[j][i];
	printf("%s: %zu file extent items, context version %d, %zu key nonce(s), group sizes %s\n",
	       tf->name, nfe, tf->version, nnonce,
	       sizes_str(got, sizeof(got), sizes, nnonce, 1));
	CHECK(nfe == tf->extents && bad == 0,
	      "%s: %zu file extent items, %zu of them not encryption 2 with a %zu-byte version %d context of the key (no flags), want %zu",
	      tf->name, nfe, bad, ctx_size, tf->version, tf->extents);
	sizes_str(want, sizeof(want), tf->group_sizes, tf->ngroups, 1);
	CHECK(nnonce == tf->ngroups && !strcmp(got, want),
	      "%s: key nonces on disk group the extents as %s, want %s",
	      tf->name, got, want);
	CHECK(badnr == 0, "%s: %zu extent numbers repeated or missing (each group must number its extents 0..n-1)",
	      tf->name, badnr);
	for (j = 0; j < nnonce; j++)
		free(seen[j]);
	free(seen);
	free(fe);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * A traced read of @tf.  A cold read (@cold: after drop_caches 3, on a fresh
 * mount) must derive one key per group and look up each group's extents
 * under its key; so must one after dropping only the page cache (@cold 0:
 * drop_caches 1), whose folios take their extent maps and so the keys with
 * them.
 */
static void traced_read(const struct tfile *tf, int cold,
			struct trace_stats *s)
{
	const char *what = cold ? "cold read" : "re-read, page cache dropped";
	size_t sizes[MAX_KEYS], i, j, total = 0, once = 0, numbered = 0;
	char got[128], want[128];
	double t0;
	int found, fd;

	CHECK_OK(lab_drop_caches(cold ? "3" : "1"), "drop caches");
	/*
	 * drop_caches skips pages still in a per-CPU LRU batch; fadvise
	 * drains those first (lru_add_drain_all()), so that every block is
	 * read, and looked up, again.
	 */
	fd = open(tf->path, O_RDONLY | O_CLOEXEC);
	if (CHECK_OK(fd, "open %s", tf->path)) {
		CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0,
		      "posix_fadvise(DONTNEED) %s", tf->path);
		close(fd);
	}
	trace_begin();
	t0 = now_s();
	CHECK_FILE_EQUALS(tf->path, tf->img, tf->size);
	t0 = now_s() - t0;
	trace_end(tf, s);
	for (i = 0; i < s->nkeys; i++) {
		sizes[i] = (size_t)s->keys[i].nrs;
		total += sizes[i];
		once += s->keys[i].derived == 1;
		/* v2: numbers 0..n-1; v1: every extent number 0 */
		numbered += (uint64_t)s->keys[i].nrs == s->keys[i].nr_max + 1;
	}
	printf("%s %s (%.1f s): %ld lookups, %zu key_id(s), extents per key %s, lookups derived=%ld; info setups derived=%ld cached=%ld; derive_key context=9: %ld; %lld events lost\n",
	       tf->name, what, t0, s->lookups, s->nkeys,
	       sizes_str(got, sizeof(got), sizes, s->nkeys, 1),
	       s->lookups_derived, s->setups_derived, s->setups_cached,
	       s->derive9, s->overruns);
	CHECK(s->overruns == 0 && !s->too_many_keys,
	      "%s %s: %lld trace events lost, %s keys: the counts below are not the whole story",
	      tf->name, what, s->overruns, s->too_many_keys ? "too many" : "not too many");
	CHECK(s->lookup_bad == 0 && s->setup_bad == 0 && s->derive_bad == 0,
	      "%s %s: %ld lookups, %ld setups, %ld derivations with unexpected fields",
	      tf->name, what, s->lookup_bad, s->setup_bad, s->derive_bad);
	sizes_str(want, sizeof(want), tf->group_sizes, tf->ngroups, 1);
	CHECK(s->nkeys == tf->ngroups && !strcmp(got, want) &&
	      total == tf->extents,
	      "%s %s: lookups of %zu extents under %zu key_id(s), extents per key %s; want %zu extents under %zu, %s",
	      tf->name, what, total, s->nkeys, got, tf->extents, tf->ngroups,
	      want);
	CHECK(numbered == s->nkeys,
	      "%s %s: under %zu of %zu key_ids the extent numbers looked up are not exactly 0..n-1",
	      tf->name, what, s->nkeys - numbered, s->nkeys);
	CHECK(s->ngroups == 0, "%s %s: %zu fscrypt_extent_group_start events in a read",
	      tf->name, what, s->ngroups);
	CHECK(once == s->nkeys && s->lookups_derived == (long)s->nkeys,
	      "%s %s: %ld lookups said derived=1, %zu of %zu keys on exactly one lookup; want one per key",
	      tf->name, what, s->lookups_derived, once, s->nkeys);
	CHECK(s->setups_derived == (long)tf->ngroups,
	      "%s %s: %ld fscrypt_extent_key_setup cached=0 (keys derived), want %zu",
	      tf->name, what, s->setups_derived, tf->ngroups);
	CHECK(s->derive9 == (long)tf->ngroups,
	      "%s %s: %ld fscrypt_derive_key context=9, want %zu",
	      tf->name, what, s->derive9, tf->ngroups);
	for (i = 0; i < s->nkeys; i++) {
		for (found = 0, j = 0; j < s->nsetup_ids; j++)
			found |= s->setup_ids[j] == s->keys[i].id;
		CHECK(found, "%s %s: key_id %" PRIu64 " of the lookups was not derived in this read",
		      tf->name, what, s->keys[i].id);
	}
}

static void remount_opt(const char *opt)
{
	char opts[512];
	size_t len;
	char *m;

	if (run("mount -o remount,%s %s", opt, mnt))
		lab_die("mount -o remount,%s %s failed", opt, mnt);
	m = read_file("/proc/mounts", &len);
	if (!m)
		lab_die("read /proc/mounts: %s", strerror(errno));
	snprintf(opts, sizeof(opts), "%s", opt);
	if (!strcmp(opt, "fscrypt_extents_per_key=0"))
		CHECK(!strstr(m, "fscrypt_extents_per_key="),
		      "/proc/mounts still shows fscrypt_extents_per_key after setting it to 0");
	else
		CHECK(strstr(m, opts) != NULL, "/proc/mounts does not show %s", opts);
	free(m);
}

static void mount_fs(void)
{
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("cannot mount %s: %s", dev, strerror(errno));
	if (lab_add_key(mnt, KEY_SEED, key_id))
		lab_die("cannot add the key: %s", strerror(errno));
}

/* ---- F: a long write into fragmented free space ------------------------------ */

/*
 * Review round 2, finding 5.  One write of FRAG_BLOCKS contiguous blocks
 * into free space made of 4 KiB holes: btrfs allocates a block per extent,
 * asking each time for the rest of the range.  The key group must be
 * charged what each extent holds (FRAG_BLOCKS units in all, well under
 * FRAG_MAX_UNITS: one group), not what was asked for, which adds up to
 * FRAG_BLOCKS * (FRAG_BLOCKS + 1) / 2 units and ends groups for "units"
 * long before FRAG_MAX_UNITS data units are encrypted.
 */
#define FRAG_FS_BYTES "256M"
#define FRAG_BLOCKS 256
#define FRAG_COMB_BLOCKS (4 * FRAG_BLOCKS)
#define FRAG_MAX_UNITS 2048

/* Fill every byte of free data space with preallocated extents of @path. */
static void fill_free_space(const char *path)
{
	static const off_t sizes[] = { 64 << 20, 8 << 20, 1 << 20, 128 << 10, BLK };
	off_t off = 0;
	size_t i;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		lab_die("create %s: %s", path, strerror(errno));
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		while (fallocate(fd, 0, off, sizes[i]) == 0)
			off += sizes[i];
	printf("F: %lld MiB preallocated in %s, then ENOSPC\n",
	       (long long)(off >> 20), path);
	close(fd);
}

static void test_fragmented_free_space(void)
{
	static const struct want_group one_group[] = { { "new", 0, 0 } };
	char comb[512], fill[512], units[32];
	struct raw_extent *ext = NULL;
	struct tfile f = { .name = "F", .extents = FRAG_BLOCKS, .stride = 1 };
	unsigned char *data = lab_pattern(FRAG_BLOCKS * BLK, 0xf0000);
	struct stat st;
	size_t i, n = 0;
	int fd;

	printf("== F: %d contiguous blocks into free space of 4 KiB holes, fscrypto.extent_group_max_units=%d\n",
	       FRAG_BLOCKS, FRAG_MAX_UNITS);
	if (lab_mkfs("mkfs.btrfs -q -f -b " FRAG_FS_BYTES, dev))
		lab_die("mkfs.btrfs -b %s %s failed", FRAG_FS_BYTES, dev);
	mount_fs();
	/* a comb of 4 KiB extents (O_DIRECT: one extent per write) */
	PATHF(comb, "%s/comb", mnt);
	PATHF(fill, "%s/fill", mnt);
	fd = open(comb, O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0)
		lab_die("create %s: %s", comb, strerror(errno));
	for (i = 0; i < FRAG_COMB_BLOCKS; i++)
		if (pwrite_all(fd, data, BLK, (off_t)(i * BLK)))
			lab_die("O_DIRECT write of %s: %s", comb, strerror(errno));
	close(fd);
	fill_free_space(fill);
	/* every other tooth out: the only free data space is 4 KiB holes */
	fd = open(comb, O_WRONLY | O_CLOEXEC);
	for (i = 0; fd >= 0 && i < FRAG_COMB_BLOCKS; i += 2)
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)(i * BLK), BLK))
			lab_die("punch %s: %s", comb, strerror(errno));
	if (fd >= 0)
		close(fd);
	sync();

	PATHF(f.path, "%s/enc/F", mnt);
	PATHF(comb, "%s/enc", mnt);
	if (mkdir(comb, 0755) || lab_set_policy(comb, key_id))
		lab_die("cannot make the encrypted directory %s: %s", comb,
			strerror(errno));
	snprintf(units, sizeof(units), "%d", FRAG_MAX_UNITS);
	if (!CHECK_OK(write_file(MAX_UNITS_PARAM, units, strlen(units)),
		      "set %s to %s", MAX_UNITS_PARAM, units))
		lab_die("cannot test the data-unit bound");
	trace_begin();
	if (write_file(f.path, data, FRAG_BLOCKS * BLK) || fsync_path(f.path))
		lab_die("write %s: %s", f.path, strerror(errno));
	if (!stat(f.path, &st))
		f.ino = (unsigned long)st.st_ino;
	CHECK_OK(write_file(MAX_UNITS_PARAM, saved_max_units,
			    strlen(saved_max_units)),
		 "restore %s to %s", MAX_UNITS_PARAM, saved_max_units);
	/* the setup must have worked: many extents, else this proves nothing */
	if (CHECK_OK(raw_fiemap(f.path, &ext, &n), "FIEMAP %s", f.path))
		printf("F: %zu extents for %d blocks\n", n, FRAG_BLOCKS);
	CHECK(n >= FRAG_BLOCKS / 2,
	      "F: only %zu extents for %d blocks: free space was not fragmented, the case proves nothing",
	      n, FRAG_BLOCKS);
	free(ext);
	check_write_trace(&f, "F write", one_group, 1, 1);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(f.path, data, FRAG_BLOCKS * BLK);
	free(data);
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
}

int main(void)
{
	static const size_t one_big[] = { BIG_EXTENTS };
	static const size_t by_phase[] = { GROUP, GROUP, GROUP };
	static const size_t by_limit[] = { GROUP, GROUP, SMALL_EXTENTS - 2 * GROUP };
	static const size_t singles[] = { 1, 1, 1, 1 };
	static const struct want_group w_new[] = { { "new", 0, 0 } };
	static const struct want_group w_extents[] = {
		{ "new", 0, 0 }, { "extents", GROUP, GROUP }, { "extents", GROUP, GROUP },
	};
	static const struct want_group w_units[] = {
		{ "new", 0, 0 }, { "units", GROUP, GROUP }, { "units", GROUP, GROUP },
	};
	struct tfile a, b, c, d, e;
	struct trace_stats cold, dropped;
	char dir[512], units[32], *p;
	double t0;
	int i;

	dev = lab_env("SCRATCH_DEV");
	mnt = lab_env("SCRATCH_MNT");
	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("the kernel has no per-extent keys for btrfs (no %s)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	for (i = 0; i < (int)(sizeof(events) / sizeof(events[0])); i++) {
		PATHF(dir, TRACEFS "/events/fscrypt/%s", events[i]);
		if (access(dir, F_OK))
			lab_die("no %s event in " TRACEFS, events[i]);
	}
	if (read_value(MAX_UNITS_PARAM, saved_max_units, sizeof(saved_max_units)))
		lab_die("no %s: %s", MAX_UNITS_PARAM, strerror(errno));
	if (read_value(TRACEFS "/buffer_size_kb", saved_buf_kb, sizeof(saved_buf_kb)))
		lab_die("read " TRACEFS "/buffer_size_kb: %s", strerror(errno));
	/* "7 (expanded: 1408)" before the buffer was first used: keep 1408 */
	if ((p = strstr(saved_buf_kb, "(expanded: ")))
		memmove(saved_buf_kb, p + strlen("(expanded: "),
			strlen(p + strlen("(expanded: ")) + 1);
	saved_buf_kb[strspn(saved_buf_kb, "0123456789")] = 0;
	atexit(restore_settings);
	if (write_file(TRACEFS "/buffer_size_kb", TRACE_BUF_KB, strlen(TRACE_BUF_KB)))
		lab_die("cannot set " TRACEFS "/buffer_size_kb: %s", strerror(errno));
	printf("extent_group_max_units was %s; trace buffer %s KiB per CPU (was %s)\n",
	       saved_max_units, TRACE_BUF_KB, saved_buf_kb);

	if (lab_mkfs("mkfs.btrfs -q -f", dev))
		lab_die("mkfs.btrfs %s failed", dev);
	mount_fs();
	PATHF(dir, "%s/enc", mnt);
	if (mkdir(dir, 0755) || lab_set_policy(dir, key_id))
		lab_die("cannot make the encrypted directory %s: %s", dir,
			strerror(errno));
	tfile_init(&a, "A", BIG_EXTENTS, LAB_FSCRYPT_EXTENT_CTX_V2, one_big, 1, 0xa0000);
	tfile_init(&b, "B", B_PHASES * GROUP, LAB_FSCRYPT_EXTENT_CTX_V2, by_phase, 3, 0xb0000);
	tfile_init(&c, "C", SMALL_EXTENTS, LAB_FSCRYPT_EXTENT_CTX_V2, by_limit, 3, 0xc0000);
	tfile_init(&d, "D", SMALL_EXTENTS, LAB_FSCRYPT_EXTENT_CTX_V2, by_limit, 3, 0xd0000);
	tfile_init(&e, "E", E_EXTENTS, LAB_FSCRYPT_EXTENT_CTX_V1, singles, 4, 0xe0000);

	printf("== A: %d extents in one write\n", BIG_EXTENTS);
	trace_begin();
	t0 = now_s();
	write_extents(&a, 0, a.extents);
	printf("A: written in %.1f s\n", now_s() - t0);
	check_write_trace(&a, "A write", w_new, 1, 1);
	check_on_disk(&a);

	printf("== C: %d extents, mount option fscrypt_extents_per_key=%d\n",
	       SMALL_EXTENTS, GROUP);
	snprintf(units, sizeof(units), "fscrypt_extents_per_key=%d", GROUP);
	remount_opt(units);
	trace_begin();
	write_extents(&c, 0, c.extents);
	check_write_trace(&c, "C write", w_extents, 3, 3);
	printf("== E: %d extents, fscrypt_extents_per_key=1 (a key per extent)\n",
	       E_EXTENTS);
	remount_opt("fscrypt_extents_per_key=1");
	trace_begin();
	write_extents(&e, 0, e.extents);
	check_write_trace(&e, "E write", NULL, 0, E_EXTENTS);
	remount_opt("fscrypt_extents_per_key=0");
	check_on_disk(&c);
	check_on_disk(&e);

	printf("== D: %d extents, fscrypto.extent_group_max_units=%d\n",
	       SMALL_EXTENTS, GROUP);
	snprintf(units, sizeof(units), "%d", GROUP);
	if (!CHECK_OK(write_file(MAX_UNITS_PARAM, units, strlen(units)),
		      "set %s to %s", MAX_UNITS_PARAM, units))
		lab_die("cannot test the data-unit bound");
	trace_begin();
	write_extents(&d, 0, d.extents);
	CHECK_OK(write_file(MAX_UNITS_PARAM, saved_max_units,
			    strlen(saved_max_units)),
		 "restore %s to %s", MAX_UNITS_PARAM, saved_max_units);
	check_write_trace(&d, "D write", w_units, 3, 3);
	check_on_disk(&d);

	printf("== B: %d phases of %d extents, a remount after each\n",
	       B_PHASES, GROUP);
	for (i = 0; i < B_PHASES; i++) {
		char what[32];

		if (i > 0)
			mount_fs();
		snprintf(what, sizeof(what), "B write %d", i + 1);
		trace_begin();
		write_extents(&b, (size_t)i * GROUP, GROUP);
		check_write_trace(&b, what, w_new, 1, 1);
		if (i == B_PHASES - 1)
			check_on_disk(&b);
		if (!CHECK_OK(lab_umount(mnt), "umount %s", mnt))
			lab_die("cannot unmount %s", mnt);
	}

	printf("== cold reads, after a remount\n");
	mount_fs();
	traced_read(&a, 1, &cold);
	stats_free(&cold);
	traced_read(&b, 1, &cold);
	traced_read(&b, 0, &dropped);
	stats_free(&cold);
	stats_free(&dropped);
	traced_read(&c, 1, &cold);
	stats_free(&cold);
	traced_read(&d, 1, &cold);
	stats_free(&cold);
	traced_read(&e, 1, &cold);
	stats_free(&cold);

	if (CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		lab_btrfs_check_clean(dev, "the traced filesystem");
	test_fragmented_free_space();
	restore_settings();
	/* the ring buffer rounds the size up to whole pages (1408 -> 1410) */
	CHECK(read_value(TRACEFS "/buffer_size_kb", dir, sizeof(dir)) == 0 &&
	      strtoul(dir, NULL, 10) >= strtoul(saved_buf_kb, NULL, 10) &&
	      strtoul(dir, NULL, 10) <= strtoul(saved_buf_kb, NULL, 10) + 64,
	      "buffer_size_kb is %s after restoring it to %s", dir, saved_buf_kb);
	CHECK(read_value(MAX_UNITS_PARAM, units, sizeof(units)) == 0 &&
	      !strcmp(units, saved_max_units),
	      "extent_group_max_units is %s after restoring it to %s", units,
	      saved_max_units);
	free(a.img);
	free(b.img);
	free(c.img);
	free(d.img);
	free(e.img);
	return lab_result("btrfs_fscrypt_extent_tracepoints");
}
