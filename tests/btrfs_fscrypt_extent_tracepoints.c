// SPDX-License-Identifier: GPL-2.0
/*
 * The per-extent tracepoints on btrfs with per-extent keys: does
 * fscrypt_extent_lookup tell a lookup that derived the extent key from one
 * that found it cached, and do its offset and length describe the extent?
 *
 *   1. NBLOCKS single-block extents: the file's blocks are written last to
 *      first, each fsynced, so that no two are one extent;
 *   2. remount (no extent info survives), add the key, read the file: every
 *      block is looked up once, derived=1, offset 0 (each block starts its
 *      extent), nr_blocks 1, and fscrypt_extent_info_setup says cached=0
 *      the same number of times;
 *   3. drop the page cache only: btrfs keeps the extent maps of a small
 *      file, and their infos with them, so the second read's lookups all
 *      say derived=0, and no info is set up.
 *
 * SKIP when the kernel does not advertise per-extent keys.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btrfs_progs.h"
#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

#define TRACEFS "/sys/kernel/tracing"
#define NBLOCKS 8
#define BLOCK 4096

static void enable(const char *event, int on)
{
	char path[256];

	PATHF(path, TRACEFS "/events/fscrypt/%s/enable", event);
	if (write_file(path, on ? "1" : "0", 1))
		lab_die("cannot %s %s: %s", on ? "enable" : "disable", path,
			strerror(errno));
}

struct lookups {
	int derived, cached, setups_derived, setups_cached, bad;
	uint64_t seen_mask;	/* lblks looked up */
};

/* Count the lookups of @ino in the trace, and the extent info setups. */
static void parse(const char *text, unsigned long ino, struct lookups *l)
{
	const char *next = text;
	char line[512];

	while (lab_next_line(&next, line, sizeof(line))) {
		unsigned long long lblk, off, nr, id, dur;
		unsigned long e_ino;
		int maj, min, derived, cached, ret;
		const char *ev;

		if ((ev = strstr(line, "fscrypt_extent_lookup: ")) &&
		    sscanf(ev, "fscrypt_extent_lookup: dev=%d:%d ino=%lu lblk=%llu offset=%llu nr_blocks=%llu derived=%d ret=%d duration_ns=%llu",
			   &maj, &min, &e_ino, &lblk, &off, &nr, &derived, &ret,
			   &dur) == 9) {
			if (e_ino != ino)
				continue;
			if (ret || off != 0 || nr != 1 || lblk >= NBLOCKS) {
				printf("unexpected: %s\n", ev);
				l->bad++;
				continue;
			}
			l->seen_mask |= 1ULL << lblk;
			if (derived)
				l->derived++;
			else
				l->cached++;
		} else if ((ev = strstr(line, "fscrypt_extent_info_setup: ")) &&
			   sscanf(ev, "fscrypt_extent_info_setup: dev=%d:%d id=%llu cached=%d ret=%d",
				  &maj, &min, &id, &cached, &ret) == 5) {
			if (ret)
				l->bad++;
			else if (cached)
				l->setups_cached++;
			else
				l->setups_derived++;
		}
	}
}

/* Trace one buffered read of @file, and count what it looked up. */
static void traced_read(const char *file, const uint8_t *data,
			unsigned long ino, struct lookups *l)
{
	char *trace;
	size_t len;

	write_file(TRACEFS "/trace", "", 0);	/* clears the buffer */
	enable("fscrypt_extent_lookup", 1);
	enable("fscrypt_extent_info_setup", 1);
	CHECK_FILE_EQUALS(file, data, NBLOCKS * BLOCK);
	enable("fscrypt_extent_lookup", 0);
	enable("fscrypt_extent_info_setup", 0);
	trace = read_file(TRACEFS "/trace", &len);
	if (!trace)
		lab_die("read " TRACEFS "/trace: %s", strerror(errno));
	parse(trace, ino, l);
	printf("lookups derived=%d cached=%d, info setups derived=%d cached=%d, bad=%d, blocks %#llx\n",
	       l->derived, l->cached, l->setups_derived, l->setups_cached,
	       l->bad, (unsigned long long)l->seen_mask);
	free(trace);
}

int main(void)
{
	const char *dev = lab_env("SCRATCH_DEV"), *mnt = lab_env("SCRATCH_MNT");
	const uint64_t all = (1ULL << NBLOCKS) - 1;
	static uint8_t data[NBLOCKS * BLOCK];
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	struct lookups first = { 0 }, second = { 0 };
	char dir[512], file[512];
	struct stat st;
	int fd, i;

	if (access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK))
		lab_skip("the kernel has no per-extent keys for btrfs (no %s)",
			 LAB_BTRFS_EXTENT_KEYS_FEATURE);
	if (access(TRACEFS "/events/fscrypt/fscrypt_extent_lookup", F_OK))
		lab_die("no fscrypt_extent_lookup event in " TRACEFS);
	if (lab_mkfs("mkfs.btrfs -q -f", dev) || lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("cannot make and mount btrfs on %s", dev);
	PATHF(dir, "%s/enc", mnt);
	PATHF(file, "%s/enc/file", mnt);
	if (mkdir(dir, 0755))
		lab_die("mkdir %s: %s", dir, strerror(errno));
	if (lab_add_key(mnt, 7, id) || lab_set_policy(dir, id))
		lab_die("cannot add a key and set a policy on %s: %s", dir,
			strerror(errno));

	fill_pattern(data, sizeof(data), 77);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		lab_die("create %s: %s", file, strerror(errno));
	for (i = NBLOCKS - 1; i >= 0; i--) {
		CHECK(pwrite(fd, data + i * BLOCK, BLOCK, (off_t)i * BLOCK) ==
		      BLOCK, "write block %d", i);
		CHECK_OK(fsync(fd), "fsync after block %d", i);
	}
	CHECK_OK(fstat(fd, &st), "fstat %s", file);
	close(fd);

	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	if (lab_mount(dev, mnt, "btrfs", NULL))
		lab_die("cannot remount %s", dev);
	CHECK_OK(lab_add_key(mnt, 7, id), "re-add key");
	CHECK_OK(lab_drop_caches("3"), "drop caches");

	printf("first read, after a remount:\n");
	traced_read(file, data, (unsigned long)st.st_ino, &first);
	CHECK(first.seen_mask == all, "blocks looked up %#llx, want %#llx",
	      (unsigned long long)first.seen_mask, (unsigned long long)all);
	CHECK(first.derived == NBLOCKS && first.cached == 0,
	      "first read: %d lookups derived, %d cached; want %d and 0",
	      first.derived, first.cached, NBLOCKS);
	CHECK(first.setups_derived == NBLOCKS,
	      "first read: %d extent infos derived, want %d",
	      first.setups_derived, NBLOCKS);

	CHECK_OK(lab_drop_caches("1"), "drop the page cache");
	printf("second read, extent maps still cached:\n");
	traced_read(file, data, (unsigned long)st.st_ino, &second);
	CHECK(second.seen_mask == all, "blocks looked up %#llx, want %#llx",
	      (unsigned long long)second.seen_mask, (unsigned long long)all);
	CHECK(second.cached == NBLOCKS && second.derived == 0,
	      "second read: %d lookups cached, %d derived; want %d and 0",
	      second.cached, second.derived, NBLOCKS);
	CHECK(second.setups_derived == 0,
	      "second read derived %d extent infos, want 0",
	      second.setups_derived);
	CHECK(first.bad == 0 && second.bad == 0,
	      "%d events with unexpected fields", first.bad + second.bad);

	if (CHECK_OK(lab_umount(mnt), "umount %s", mnt))
		lab_btrfs_check_clean(dev, "the traced filesystem");
	return lab_result("btrfs_fscrypt_extent_tracepoints");
}
