// SPDX-License-Identifier: GPL-2.0
/*
 * btrfs_fscrypt_read_repair - btrfs read repair of an encrypted file writes
 * the ciphertext back to the bad copy, never the plaintext.
 *
 * When a data block fails its checksum, btrfs reads another copy and, once
 * that one passes, rewrites the bad copy from the page (repair_io_failure()).
 * The checksums cover the ciphertext and the page is decrypted in place at
 * read completion, so the page must be written back before it is decrypted,
 * or the plaintext lands on the device (and then fails its checksum again).
 *
 * For each of DUP on $SCRATCH_DEV and RAID1 on $SCRATCH_DEV + $SCRATCH_DEV2
 * (data and metadata), with the default mount options (a key per extent) and
 * with LAB_BTRFS_PER_INODE_KEYS_OPT (per-inode keys):
 *
 *  1. mkfs.btrfs -b RR_FS_BYTES (the filesystem cannot write beyond that, so
 *     the scans below can stop there), a random master key, a v2 policy on
 *     an empty directory, and one file of RR_EXTENTS fsynced writes of
 *     RR_EXT_BLOCKS blocks each (RR_EXTENTS extents: checked in the file
 *     extent items, with the encryption type of the key mode), random
 *     plaintext with a random marker every RR_MARKER_STRIDE bytes;
 *  2. every block's two copies (FIEMAP address mapped through the chunk
 *     tree: stripe 0 and 1 of a DUP or RAID1 chunk, on the devices
 *     BTRFS_IOC_DEV_INFO names); after unmounting, both must be equal and
 *     neither the plaintext; copy 2 (stripe 1) is the good ciphertext;
 *  3. copy 1 (stripe 0, the one btrfs reads first: always for DUP, for
 *     RAID1 when the reading task's pid is even, so the reads are done by a
 *     child with an even pid) of the blocks in rr_bad[] is corrupted on the
 *     raw device (64 bytes flipped); control: it now differs from copy 2;
 *  4. mount, drop caches, read the file: byte-exact.  Controls that the
 *     corruption was seen and repaired: the device's corruption counter
 *     (BTRFS_IOC_GET_DEV_STATS) rose by exactly the number of corrupted
 *     blocks, and the kernel log (after a marker this test writes to
 *     /dev/kmsg) reports csum failures and corrected read errors for the
 *     file's inode (at least one of each: the messages are ratelimited, so
 *     the test first waits out the window of the previous mode's);
 *  5. drop caches and read again: byte-exact, and no new checksum error (a
 *     repair that wrote anything but the ciphertext fails again here);
 *  6. after unmounting: every copy of every block equals the good
 *     ciphertext of step 2 (the repaired copies included; a failure says
 *     whether the copy holds the plaintext or still the corruption); the
 *     marker is nowhere in the first RR_FS_BYTES of either device; control
 *     for that scan: the good ciphertext of an uncorrupted block is found
 *     there exactly once per copy.
 *
 * SKIP when the kernel's btrfs has no fscrypt ioctls.  Without per-extent
 * keys (no LAB_BTRFS_EXTENT_KEYS_FEATURE) only the default mode runs, and
 * without a second scratch device only DUP; the log says so.
 */
#include "btrfs_progs.h"
#include "btrfs_items.h"
#include "fscrypt_blocks.h"	/* FBLK_BAD_EXTENT_FLAGS only */
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"
#include "rawdev.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#define RR_FS_BYTES (256ULL << 20)
#define RR_FS_SIZE_ARG "256M"
#define RR_EXTENTS 6
#define RR_EXT_BLOCKS 4
#define RR_BLOCKS (RR_EXTENTS * RR_EXT_BLOCKS)
#define RR_MARKER_STRIDE 512
#define RR_FLIP_BYTES 64
#define RR_SCAN_CTL_BYTES 64
#define RR_MAX_DEVS 2
#define RR_CHILD_WRONG_PID 99	/* a reader child whose pid is of no use */
#define RR_RATELIMIT_WAIT_S 6	/* > DEFAULT_RATELIMIT_INTERVAL (5 s) */

/* The blocks whose copy 1 is corrupted: several extents, two neighbours. */
static const unsigned rr_bad[] = { 0, 5, 10, 11, 16, RR_BLOCKS - 1 };
#define RR_NBAD (sizeof(rr_bad) / sizeof(rr_bad[0]))
/* An uncorrupted block, for the scan's control. */
#define RR_CTL_BLOCK 1

struct rr_mode {
	int raid1;		/* else DUP on one device */
	int per_inode;		/* mount with LAB_BTRFS_PER_INODE_KEYS_OPT */
};

struct rr_block {
	uint64_t logical;
	int ncopies;
	struct raw_btrfs_copy copy[RAW_BTRFS_MAX_STRIPES];
	int dev[RAW_BTRFS_MAX_STRIPES];	/* index into rr_run::devpath */
	uint8_t *good;			/* copy 2 before the corruption */
	uint8_t *bad;			/* what copy 1 was made (if corrupted) */
	int corrupted;
};

struct rr_run {
	char label[96];
	const struct rr_mode *m;
	struct lab_fscrypt_fs fs;
	char mkfs[PATH_MAX + 128];
	const char *dev1, *dev2, *mnt;
	char opts[PATH_MAX + 64];	/* extra mount options, or "" */
	char dir[PATH_MAX], file[PATH_MAX];
	int extent_keys;		/* files must get a key per extent */
	unsigned bs;
	uint8_t mk[LAB_MASTER_KEY_SIZE];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	char marker[64];
	char kmsg_tag[96];
	uint8_t *data;
	size_t size;
	uint64_t ino;
	struct rr_block blk[RR_BLOCKS];
	size_t ndevs;
	uint64_t devid[RR_MAX_DEVS];
	char devpath[RR_MAX_DEVS][PATH_MAX];
	uint64_t corrupt_before[RR_MAX_DEVS];
};

/* ---- helpers --------------------------------------------------------------- */

static const char *rr_opts(const struct rr_run *r)
{
	return r->opts[0] ? r->opts : NULL;
}

static int rr_is_bad(unsigned blk)
{
	size_t i;

	for (i = 0; i < RR_NBAD; i++)
		if (rr_bad[i] == blk)
			return 1;
	return 0;
}

/* The index of @devid in r->devid[], added (path from the kernel) if new. */
static int rr_dev_index(struct rr_run *r, uint64_t devid)
{
	size_t i;

	for (i = 0; i < r->ndevs; i++)
		if (r->devid[i] == devid)
			return (int)i;
	if (r->ndevs == RR_MAX_DEVS)
		lab_die("%s: more than %d devices", r->label, RR_MAX_DEVS);
	if (!CHECK_OK(raw_btrfs_dev_path(r->mnt, devid, r->devpath[r->ndevs],
					 sizeof(r->devpath[0])),
		      "%s: BTRFS_IOC_DEV_INFO of devid %llu", r->label,
		      (unsigned long long)devid))
		lab_die("cannot tell which device devid %llu is",
			(unsigned long long)devid);
	r->devid[r->ndevs] = devid;
	printf("%s: devid %llu is %s\n", r->label, (unsigned long long)devid,
	       r->devpath[r->ndevs]);
	return (int)r->ndevs++;
}

static uint64_t rr_corruption_errs(struct rr_run *r, size_t d)
{
	uint64_t st[RAW_BTRFS_DEV_STATS];

	if (!CHECK_OK(raw_btrfs_dev_stats(r->mnt, r->devid[d], st),
		      "%s: BTRFS_IOC_GET_DEV_STATS of devid %llu", r->label,
		      (unsigned long long)r->devid[d]))
		return 0;
	return st[BTRFS_DEV_STAT_CORRUPTION_ERRS];
}

/*
 * Read the file in a child process and compare it with the plaintext.  With
 * RAID1 btrfs starts a read at mirror (pid % 2) + 1, so only a child with an
 * even pid is used: its reads go to copy 1 first.  Returns 1 if byte-exact.
 */
static int rr_read_file(struct rr_run *r, const char *what)
{
	const unsigned modulus = r->m->raid1 ? 2 : 1;
	int tries, st;
	pid_t pid;

	if (!CHECK_OK(lab_drop_caches("3"), "%s: drop caches", r->label))
		return 0;
	for (tries = 0; tries < 64; tries++) {
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			lab_die("fork: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		if (pid == 0) {
			int ok;

			if ((unsigned)getpid() % modulus != 0)
				_exit(RR_CHILD_WRONG_PID);
			ok = CHECK_FILE_EQUALS(r->file, r->data, r->size);
			printf("%s: %s (reader pid %d): %s\n", r->label, what,
			       (int)getpid(), ok ? "byte-exact" : "WRONG");
			fflush(stdout);
			_exit(ok ? 0 : 1);
		}
		if (waitpid(pid, &st, 0) != pid)
			lab_die("waitpid: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
		if (WIFEXITED(st) && WEXITSTATUS(st) == RR_CHILD_WRONG_PID)
			continue;
		return CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			     "%s: %s: the file does not read back as written (reader status 0x%x)",
			     r->label, what, st);
	}
	lab_die("no reader child with a pid divisible by %u in 64 forks", modulus);
}

/* ---- the kernel log ---------------------------------------------------------- */

static void rr_kmsg_mark(struct rr_run *r)
{
	char tag[16];
	int fd;

	lab_random_hex(tag, sizeof(tag) / 2 - 1);
	PATHF(r->kmsg_tag, "lab btrfs_fscrypt_read_repair %s", tag);
	fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (!CHECK_OK(fd, "open /dev/kmsg for writing"))
		return;
	CHECK_OK(write(fd, r->kmsg_tag, strlen(r->kmsg_tag)),
		 "write the marker to /dev/kmsg");
	close(fd);
}

/*
 * Count the kernel log records after our marker that contain both @a and
 * @b.  The lines are printed.  -1 if the marker was not found.
 */
static long rr_kmsg_count(const struct rr_run *r, const char *a, const char *b)
{
	char rec[8192];
	const char *msg;
	long count = 0;
	int fd, seen = 0;
	ssize_t n;

	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (!CHECK_OK(fd, "open /dev/kmsg"))
		return -1;
	for (;;) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)	/* overwritten: go on */
			continue;
		if (n <= 0)
			break;
		rec[n] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		*strchrnul(msg, '\n') = '\0';
		if (!seen) {
			seen = strstr(msg, r->kmsg_tag) != NULL;
			continue;
		}
		if (strstr(msg, a) && strstr(msg, b)) {
			printf("  kernel: %s\n", msg);
			count++;
		}
	}
	close(fd);
	return seen ? count : -1;
}

/* ---- the steps ------------------------------------------------------------------ */

static void rr_make_file(struct rr_run *r)
{
	struct fscrypt_policy_v2 pol;
	char hex[33];
	size_t e, len = RR_EXT_BLOCKS * (size_t)r->bs;
	int fd;

	if (!CHECK_OK(mkdir(r->dir, 0755), "mkdir %s", r->dir))
		lab_die("cannot create the encrypted directory");
	lab_default_policy(&pol, r->id);
	if (!CHECK_OK(lab_set_policy_v2(r->dir, &pol),
		      "FS_IOC_SET_ENCRYPTION_POLICY on %s", r->dir))
		lab_die("cannot set the policy");
	lab_random_hex(hex, 16);
	PATHF(r->marker, "read-repair-marker-%s", hex);
	r->size = RR_BLOCKS * (size_t)r->bs;
	r->data = lab_xmalloc(r->size);
	lab_random(r->data, r->size);
	stamp_marker(r->data, r->size, r->marker, strlen(r->marker),
		     RR_MARKER_STRIDE);
	fd = open(r->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!CHECK_OK(fd, "create %s", r->file))
		lab_die("cannot make the test file");
	for (e = 0; e < RR_EXTENTS; e++)
		if (!CHECK_OK(pwrite_all(fd, r->data + e * len, len, (off_t)(e * len)),
			      "write extent %zu of %s", e, r->file) ||
		    !CHECK_OK(fsync(fd), "fsync %s", r->file))
			lab_die("cannot make the test file");
	close(fd);
	CHECK_OK(fsync_path(r->dir), "fsync %s", r->dir);
	sync();
}

/* Inode flags and file extent items: the key mode and the extent count. */
static void rr_check_items(struct rr_run *r)
{
	const uint8_t want_enc = r->extent_keys ? LAB_BTRFS_ENCRYPTION_FSCRYPT_EXTENT :
						  LAB_BTRFS_ENCRYPTION_FSCRYPT_INODE;
	struct lab_btrfs_file_extent *fe;
	uint64_t flags;
	size_t n, i, j, distinct = 0;
	struct stat st;
	int dup;

	if (!CHECK_OK(stat(r->file, &st), "stat %s", r->file))
		lab_die("cannot stat the test file");
	r->ino = st.st_ino;
	if (CHECK_OK(lab_btrfs_inode_flags(r->file, r->ino, &flags),
		     "inode item of %s", r->file)) {
		printf("%s: ino %llu, inode flags 0x%llx\n", r->label,
		       (unsigned long long)r->ino, (unsigned long long)flags);
		CHECK(flags & LAB_BTRFS_INODE_ENCRYPT,
		      "%s: inode flags 0x%llx lack BTRFS_INODE_ENCRYPT", r->label,
		      (unsigned long long)flags);
		CHECK(!!(flags & LAB_BTRFS_INODE_ENCRYPT_PER_EXTENT) == r->extent_keys,
		      "%s: inode flags 0x%llx: BTRFS_INODE_ENCRYPT_PER_EXTENT should be %s",
		      r->label, (unsigned long long)flags,
		      r->extent_keys ? "set" : "clear");
	}
	if (!CHECK_OK(lab_btrfs_file_extents(r->file, r->ino, &fe, &n),
		      "file extent items of %s", r->file))
		return;
	for (i = 0; i < n; i++) {
		printf("  item [%llu, +%llu) disk_bytenr %llu offset %llu encryption %u\n",
		       (unsigned long long)fe[i].file_offset,
		       (unsigned long long)fe[i].num_bytes,
		       (unsigned long long)fe[i].disk_bytenr,
		       (unsigned long long)fe[i].offset, fe[i].encryption);
		CHECK(fe[i].type == BTRFS_FILE_EXTENT_REG && fe[i].disk_bytenr != 0,
		      "%s: item at %llu is not a regular extent (type %u)", r->label,
		      (unsigned long long)fe[i].file_offset, fe[i].type);
		CHECK(fe[i].encryption == want_enc && fe[i].compression == 0,
		      "%s: item at %llu: encryption %u compression %u, expected encryption %u, no compression",
		      r->label, (unsigned long long)fe[i].file_offset,
		      fe[i].encryption, fe[i].compression, want_enc);
		for (dup = 0, j = 0; j < i; j++)
			dup |= fe[j].disk_bytenr == fe[i].disk_bytenr;
		distinct += !dup;
	}
	CHECK(distinct >= RR_EXTENTS,
	      "%s: %zu extents, expected %d (one per fsynced write)", r->label,
	      distinct, RR_EXTENTS);
	free(fe);
}

/* Where both copies of every block are (mounted). */
static void rr_locate(struct rr_run *r)
{
	const uint64_t want = r->m->raid1 ? BTRFS_BLOCK_GROUP_RAID1 : BTRFS_BLOCK_GROUP_DUP;
	struct raw_btrfs_chunk *chunks;
	struct raw_extent *ext;
	size_t next, nchunks, i, k;
	unsigned b;
	int s;

	if (!CHECK_OK(raw_fiemap(r->file, &ext, &next), "FIEMAP of %s", r->file) ||
	    !CHECK_OK(raw_btrfs_chunks(r->mnt, &chunks, &nchunks),
		      "BTRFS_IOC_TREE_SEARCH of the chunk tree on %s", r->mnt))
		lab_die("cannot learn where the file is");
	for (i = 0; i < nchunks; i++) {
		printf("  chunk logical %llu length %llu type 0x%llx:",
		       (unsigned long long)chunks[i].logical,
		       (unsigned long long)chunks[i].length,
		       (unsigned long long)chunks[i].type);
		for (k = 0; k < chunks[i].nstripes; k++)
			printf(" devid %llu @%llu", (unsigned long long)chunks[i].devid[k],
			       (unsigned long long)chunks[i].physical[k]);
		printf("\n");
	}
	for (b = 0; b < RR_BLOCKS; b++) {
		struct rr_block *x = &r->blk[b];
		const uint64_t pos = (uint64_t)b * r->bs;
		const struct raw_extent *m = NULL;

		for (i = 0; i < next; i++)
			if (ext[i].logical <= pos && pos - ext[i].logical < ext[i].length)
				m = &ext[i];
		if (!CHECK(m && !(m->flags & FBLK_BAD_EXTENT_FLAGS),
			   "%s: block %u: no FIEMAP extent of plain blocks (flags 0x%x)",
			   r->label, b, m ? m->flags : 0))
			lab_die("cannot locate block %u", b);
		x->logical = m->physical + (pos - m->logical);
		for (i = 0; i < nchunks; i++)
			if (x->logical >= chunks[i].logical &&
			    x->logical - chunks[i].logical < chunks[i].length)
				break;
		if (!CHECK(i < nchunks && (chunks[i].type & BTRFS_BLOCK_GROUP_DATA) &&
			   (chunks[i].type & BTRFS_BLOCK_GROUP_PROFILE_MASK) == want,
			   "%s: block %u (logical %llu) is not in a %s data chunk (type 0x%llx)",
			   r->label, b, (unsigned long long)x->logical,
			   r->m->raid1 ? "RAID1" : "DUP",
			   i < nchunks ? (unsigned long long)chunks[i].type : 0ULL))
			lab_die("the data profile is not the one asked for");
		x->ncopies = raw_btrfs_map_copies(chunks, nchunks, x->logical, r->bs,
						  x->copy);
		if (!CHECK(x->ncopies == 2, "%s: block %u has %d copies, expected 2",
			   r->label, b, x->ncopies))
			lab_die("cannot map block %u", b);
		for (s = 0; s < x->ncopies; s++)
			x->dev[s] = rr_dev_index(r, x->copy[s].devid);
		CHECK(r->m->raid1 ? x->copy[0].devid != x->copy[1].devid :
				    x->copy[0].devid == x->copy[1].devid &&
				    x->copy[0].physical != x->copy[1].physical,
		      "%s: block %u: copies at devid %llu offset %llu and devid %llu offset %llu, not %s",
		      r->label, b, (unsigned long long)x->copy[0].devid,
		      (unsigned long long)x->copy[0].physical,
		      (unsigned long long)x->copy[1].devid,
		      (unsigned long long)x->copy[1].physical,
		      r->m->raid1 ? "on two devices" : "two places on one device");
		if (b == 0 || rr_is_bad(b))
			printf("%s: block %u logical %llu: copy 1 %s @%llu, copy 2 %s @%llu%s\n",
			       r->label, b, (unsigned long long)x->logical,
			       r->devpath[x->dev[0]], (unsigned long long)x->copy[0].physical,
			       r->devpath[x->dev[1]], (unsigned long long)x->copy[1].physical,
			       rr_is_bad(b) ? " (to corrupt)" : "");
	}
	for (k = 0; k < r->ndevs; k++) {
		r->corrupt_before[k] = rr_corruption_errs(r, k);
		printf("%s: %s: %llu corruption error(s) so far\n", r->label,
		       r->devpath[k], (unsigned long long)r->corrupt_before[k]);
	}
	free(ext);
	free(chunks);
}

/* Unmounted: record the good ciphertext, corrupt copy 1 of rr_bad[]. */
static void rr_corrupt(struct rr_run *r)
{
	uint8_t *c1 = lab_xmalloc(r->bs), *c2 = lab_xmalloc(r->bs);
	const size_t mlen = strlen(r->marker);
	size_t i, at;
	unsigned b;

	for (b = 0; b < RR_BLOCKS; b++) {
		struct rr_block *x = &r->blk[b];
		const uint8_t *pt = r->data + (size_t)b * r->bs;

		x->good = lab_xmalloc(r->bs);
		if (!CHECK_OK(raw_read(r->devpath[x->dev[0]], x->copy[0].physical, c1, r->bs),
			      "%s: read copy 1 of block %u", r->label, b) ||
		    !CHECK_OK(raw_read(r->devpath[x->dev[1]], x->copy[1].physical, c2, r->bs),
			      "%s: read copy 2 of block %u", r->label, b))
			lab_die("cannot read the device");
		CHECK(memcmp(c1, c2, r->bs) == 0,
		      "%s: block %u: the two copies differ before any corruption (first at byte %zu): the mirror mapping is wrong",
		      r->label, b, lab_first_diff(c1, c2, r->bs));
		CHECK(memcmp(c2, pt, r->bs) != 0 && !memmem(c2, r->bs, r->marker, mlen),
		      "%s: block %u: copy 2 holds the plaintext (or its marker): not encrypted",
		      r->label, b);
		memcpy(x->good, c2, r->bs);
	}
	for (i = 0; i < RR_NBAD; i++) {
		struct rr_block *x = &r->blk[rr_bad[i]];
		uint8_t flip[RR_FLIP_BYTES];
		size_t k;

		b = rr_bad[i];
		x->bad = lab_xmalloc(r->bs);
		memcpy(x->bad, x->good, r->bs);
		lab_random(flip, sizeof(flip));
		lab_random(&at, sizeof(at));
		at %= r->bs - RR_FLIP_BYTES + 1;
		for (k = 0; k < RR_FLIP_BYTES; k++)
			x->bad[at + k] ^= flip[k] ? flip[k] : 0xff;
		if (!CHECK_OK(raw_write_sync(r->devpath[x->dev[0]], x->copy[0].physical,
					     x->bad, r->bs),
			      "%s: corrupt copy 1 of block %u", r->label, b))
			lab_die("cannot corrupt the device");
		x->corrupted = 1;
		/* control: the corruption is on the device, copy 2 is intact */
		if (CHECK_OK(raw_read(r->devpath[x->dev[0]], x->copy[0].physical, c1, r->bs),
			     "%s: read back copy 1 of block %u", r->label, b))
			CHECK(memcmp(c1, x->bad, r->bs) == 0 && memcmp(c1, x->good, r->bs) != 0,
			      "%s: block %u: copy 1 does not hold the corruption just written",
			      r->label, b);
		if (CHECK_OK(raw_read(r->devpath[x->dev[1]], x->copy[1].physical, c2, r->bs),
			     "%s: read back copy 2 of block %u", r->label, b))
			CHECK(memcmp(c2, x->good, r->bs) == 0,
			      "%s: block %u: copy 2 changed when copy 1 was corrupted",
			      r->label, b);
		printf("%s: block %u: copy 1 corrupted (%d bytes from byte %zu); it differs from copy 2\n",
		       r->label, b, RR_FLIP_BYTES, at);
	}
	free(c1);
	free(c2);
}

/* Mounted again: read (repair), check the counters and the log, read again. */
static void rr_read_and_repair(struct rr_run *r)
{
	uint64_t after1[RR_MAX_DEVS], after2[RR_MAX_DEVS];
	size_t want[RR_MAX_DEVS] = { 0 };
	char ino[48];
	long failed, corrected;
	size_t k;

	if (!CHECK_OK(lab_fscrypt_fs_mount(&r->fs, r->dev1, r->mnt, rr_opts(r)),
		      "%s: mount again", r->label) ||
	    !CHECK_OK(lab_add_raw_key(r->mnt, r->mk, sizeof(r->mk), r->id),
		      "%s: add the key again", r->label))
		lab_die("cannot mount the corrupted filesystem");
	for (k = 0; k < RR_NBAD; k++)
		want[r->blk[rr_bad[k]].dev[0]]++;
	/*
	 * The csum and repair messages are ratelimited per call site (10 in
	 * 5 s): let the window of the previous mode's messages pass, so that
	 * this read's RR_NBAD of each are all logged.
	 */
	printf("%s: waiting %d s for the kernel's message ratelimit window to pass\n",
	       r->label, RR_RATELIMIT_WAIT_S);
	sleep(RR_RATELIMIT_WAIT_S);
	rr_kmsg_mark(r);
	rr_read_file(r, "first read after the corruption");
	for (k = 0; k < r->ndevs; k++)
		after1[k] = rr_corruption_errs(r, k);
	for (k = 0; k < r->ndevs; k++) {
		printf("%s: %s: %llu corruption error(s) after the first read\n",
		       r->label, r->devpath[k], (unsigned long long)after1[k]);
		CHECK(after1[k] - r->corrupt_before[k] == want[k],
		      "%s: %s: the first read counted %llu checksum error(s), expected %zu (one per corrupted copy on it)",
		      r->label, r->devpath[k],
		      (unsigned long long)(after1[k] - r->corrupt_before[k]), want[k]);
	}
	snprintf(ino, sizeof(ino), "ino %llu ", (unsigned long long)r->ino);
	failed = rr_kmsg_count(r, "csum failed", ino);
	snprintf(ino, sizeof(ino), "read error corrected: ino %llu ",
		 (unsigned long long)r->ino);
	corrected = rr_kmsg_count(r, ino, "");
	printf("%s: kernel log after the marker: %ld csum failure(s), %ld corrected read error(s) of ino %llu\n",
	       r->label, failed, corrected, (unsigned long long)r->ino);
	CHECK(failed >= 1, "%s: the kernel log shows no csum failure of ino %llu after the corruption",
	      r->label, (unsigned long long)r->ino);
	CHECK(corrected >= 1, "%s: the kernel log shows no corrected read error of ino %llu",
	      r->label, (unsigned long long)r->ino);

	rr_read_file(r, "second read (after drop caches)");
	for (k = 0; k < r->ndevs; k++) {
		after2[k] = rr_corruption_errs(r, k);
		CHECK(after2[k] == after1[k],
		      "%s: %s: the second read found %llu new checksum error(s): the repair wrote something that is not the ciphertext",
		      r->label, r->devpath[k],
		      (unsigned long long)(after2[k] - after1[k]));
	}
	if (!CHECK_OK(lab_umount(r->mnt), "%s: umount", r->label))
		lab_die("cannot unmount before reading the device");
}

/* Unmounted: every copy is the good ciphertext, no plaintext anywhere. */
static void rr_check_device(struct rr_run *r)
{
	uint8_t *raw = lab_xmalloc(r->bs);
	const size_t mlen = strlen(r->marker);
	struct raw_needle nd[2];
	long long ctl_total = 0;
	size_t repaired = 0, k, j;
	unsigned b;
	int s;

	for (b = 0; b < RR_BLOCKS; b++) {
		struct rr_block *x = &r->blk[b];
		const uint8_t *pt = r->data + (size_t)b * r->bs;

		for (s = 0; s < x->ncopies; s++) {
			int ok, is_pt, still_bad;

			if (!CHECK_OK(raw_read(r->devpath[x->dev[s]], x->copy[s].physical,
					       raw, r->bs),
				      "%s: read copy %d of block %u", r->label, s + 1, b))
				continue;
			ok = memcmp(raw, x->good, r->bs) == 0;
			is_pt = memcmp(raw, pt, r->bs) == 0;
			still_bad = x->corrupted && s == 0 && memcmp(raw, x->bad, r->bs) == 0;
			CHECK(ok, "%s: block %u copy %d (%s @%llu)%s differs from the good ciphertext from byte %zu on%s",
			      r->label, b, s + 1, r->devpath[x->dev[s]],
			      (unsigned long long)x->copy[s].physical,
			      x->corrupted && s == 0 ? " (corrupted, then read)" : "",
			      lab_first_diff(raw, x->good, r->bs),
			      is_pt ? ": it holds the PLAINTEXT (the repair wrote the decrypted page)" :
			      still_bad ? ": it still holds the corruption (not repaired)" : "");
			repaired += ok && x->corrupted && s == 0;
		}
	}
	printf("%s: %zu of %zu corrupted copies repaired to the good ciphertext\n",
	       r->label, repaired, RR_NBAD);

	memset(nd, 0, sizeof(nd));
	nd[0].label = "plaintext marker";
	nd[0].data = r->marker;
	nd[0].len = mlen;
	nd[1].label = "good ciphertext of an uncorrupted block (control)";
	nd[1].data = r->blk[RR_CTL_BLOCK].good;
	nd[1].len = RR_SCAN_CTL_BYTES;
	for (k = 0; k < r->ndevs; k++) {
		if (!CHECK_OK(raw_scan_range(r->devpath[k], 0, RR_FS_BYTES, nd, 2),
			      "%s: scan %s", r->label, r->devpath[k]))
			continue;
		printf("%s: %s [0, %llu): plaintext marker %lld time(s), control %lld time(s)\n",
		       r->label, r->devpath[k], (unsigned long long)RR_FS_BYTES,
		       nd[0].count, nd[1].count);
		for (j = 0; j < nd[0].noffs && j < 4; j++)
			printf("  marker at device offset %llu\n",
			       (unsigned long long)nd[0].offs[j]);
		CHECK(nd[0].count == 0,
		      "%s: the plaintext marker is on %s %lld time(s) (first at %llu)",
		      r->label, r->devpath[k], nd[0].count,
		      nd[0].noffs ? (unsigned long long)nd[0].offs[0] : 0ULL);
		ctl_total += nd[1].count;
	}
	CHECK(ctl_total == r->blk[RR_CTL_BLOCK].ncopies,
	      "%s: control: the ciphertext of block %d was found %lld time(s) on the device(s), expected %d (one per copy): the scan is blind",
	      r->label, RR_CTL_BLOCK, ctl_total, r->blk[RR_CTL_BLOCK].ncopies);
	free(raw);
}

static void rr_run_mode(const struct rr_mode *m, int extent_feature)
{
	static struct rr_run run;
	struct rr_run *r = &run;
	struct statvfs sv;
	unsigned b;

	memset(r, 0, sizeof(*r));
	r->m = m;
	r->dev1 = lab_env("SCRATCH_DEV");
	r->mnt = lab_env("SCRATCH_MNT");
	r->extent_keys = extent_feature && !m->per_inode;
	snprintf(r->label, sizeof(r->label), "[%s, %s]", m->raid1 ? "RAID1" : "DUP",
		 m->per_inode ? "per-inode keys (" LAB_BTRFS_PER_INODE_KEYS_OPT ")" :
		 r->extent_keys ? "default: per-extent keys" : "default keys");
	if (m->raid1) {
		r->dev2 = lab_env("SCRATCH_DEV2");
		PATHF(r->mkfs, "mkfs.btrfs -q -f -b " RR_FS_SIZE_ARG " -d raid1 -m raid1 %s",
		      r->dev2);
		PATHF(r->opts, "device=%s%s", r->dev2,
		      m->per_inode ? "," LAB_BTRFS_PER_INODE_KEYS_OPT : "");
	} else {
		PATHF(r->mkfs, "mkfs.btrfs -q -f -b " RR_FS_SIZE_ARG " -d dup -m dup");
		PATHF(r->opts, "%s", m->per_inode ? LAB_BTRFS_PER_INODE_KEYS_OPT : "");
	}
	r->fs.name = "btrfs";
	r->fs.mkfs_cmd = r->mkfs;
	r->fs.mount_opts = NULL;
	PATHF(r->dir, "%s/enc", r->mnt);
	PATHF(r->file, "%s/file", r->dir);
	printf("== %s\n", r->label);

	lab_random(r->mk, sizeof(r->mk));
	lab_fscrypt_fs_setup(&r->fs, r->dev1, r->mnt, rr_opts(r), r->mk,
			     sizeof(r->mk), r->id);
	if (statvfs(r->mnt, &sv) != 0)
		lab_die("statvfs(%s): " LAB_ERR_FMT, r->mnt, LAB_ERR_ARGS(errno));
	r->bs = (unsigned)sv.f_bsize;
	if (r->bs != 4096)
		lab_die("block size %u: this test corrupts 4096-byte blocks with O_DIRECT",
			r->bs);
	rr_make_file(r);
	CHECK_FILE_EQUALS(r->file, r->data, r->size);
	rr_check_items(r);
	rr_locate(r);
	if (!CHECK_OK(lab_umount(r->mnt), "%s: umount", r->label))
		lab_die("cannot unmount before corrupting the device");
	rr_corrupt(r);
	rr_read_and_repair(r);
	rr_check_device(r);
	lab_btrfs_check_clean(r->devpath[0], r->label);

	for (b = 0; b < RR_BLOCKS; b++) {
		free(r->blk[b].good);
		free(r->blk[b].bad);
	}
	free(r->data);
}

int main(void)
{
	static const struct rr_mode modes[] = {
		{ .raid1 = 0, .per_inode = 0 },
		{ .raid1 = 0, .per_inode = 1 },
		{ .raid1 = 1, .per_inode = 0 },
		{ .raid1 = 1, .per_inode = 1 },
	};
	const char *dev2 = getenv("SCRATCH_DEV2");
	int extent_feature = access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0;
	int have_dev2 = 0;
	struct stat st;
	size_t i;

	if (dev2 && *dev2 && stat(dev2, &st) == 0 && S_ISBLK(st.st_mode))
		have_dev2 = 1;
	printf("btrfs read repair of encrypted data: %s; %s\n",
	       extent_feature ? "per-extent keys (default) and per-inode keys" :
	       "the kernel advertises no per-extent keys (no " LAB_BTRFS_EXTENT_KEYS_FEATURE "): default keys only",
	       have_dev2 ? "DUP and RAID1" : "DUP only (no second scratch device SCRATCH_DEV2)");
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (modes[i].raid1 && !have_dev2)
			continue;
		if (modes[i].per_inode && !extent_feature)
			continue;
		rr_run_mode(&modes[i], extent_feature);
	}
	return lab_result("btrfs_fscrypt_read_repair");
}
