// SPDX-License-Identifier: GPL-2.0
/*
 * The lab's bpftrace profiles attach to all of their probes and count what
 * the workload did: each runs with -f json around encrypted I/O, and the
 * attached-probe count and the counts it reports are checked.
 *
 *   - profiles/fscrypt-tracepoints.bt on ext4 (per-inode keys);
 *   - profiles/bench.bt, the benchmark's profile (bench/guest/lib.sh), on
 *     btrfs with per-extent keys: NBLOCKS fsynced writes give NBLOCKS
 *     extents, all in one key group (one derived key), then a cold read
 *     of them. Without
 *     per-extent keys on btrfs (no LAB_BTRFS_EXTENT_KEYS_FEATURE) it runs
 *     on ext4 instead and only the counts every encrypted arm has are
 *     checked, saying so.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fscrypt_fs.h"
#include "fscrypt_util.h"
#include "lab.h"

#define SCRIPT "/job/profiles/fscrypt-tracepoints.bt"
#define BENCH_SCRIPT "/job/profiles/bench.bt"
#define OUT "/tmp/bpftrace.json"
#define NBLOCKS 8
#define ATTACH_TIMEOUT_S 600	/* bpftrace compiles with LLVM: slow under TCG */
#define EXIT_TIMEOUT_S 300	/* from SIGINT to bpftrace's exit */
#define RESEND_S 15		/* SIGINT again after this long (see stop_bpftrace()) */

static pid_t start_bpftrace(const char *script)
{
	pid_t pid = fork();

	if (pid == 0) {
		execlp("bpftrace", "bpftrace", "-f", "json", "-o", OUT, script,
		       (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Wait for the "attached_probes" record; return the probe count or -1. */
static int wait_attached(pid_t pid)
{
	time_t end = time(NULL) + ATTACH_TIMEOUT_S;
	int probes = -1, status;

	while (time(NULL) < end) {
		size_t len;
		char *json = read_file(OUT, &len);
		char *p = json ? strstr(json, "\"attached_probes\"") : NULL;

		if (p && (p = strstr(p, "\"probes\":")))
			probes = atoi(p + strlen("\"probes\":"));
		free(json);
		if (probes >= 0)
			return probes;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			printf("bpftrace exited early with status %#x\n", status);
			return -1;
		}
		sleep(1);
	}
	printf("bpftrace did not attach within %d s\n", ATTACH_TIMEOUT_S);
	return -1;
}

/* Value of "key": N inside the JSON map record named @map, or -1. */
static long long map_value(const char *json, const char *map, const char *key)
{
	char needle[128];
	const char *m, *k, *end;

	snprintf(needle, sizeof(needle), "\"%s\":", map);
	m = strstr(json, needle);
	if (!m)
		return -1;
	end = strchr(m, '\n');
	snprintf(needle, sizeof(needle), "\"%s\":", key);
	k = strstr(m, needle);
	if (!k || (end && k > end))
		return -1;
	return atoll(k + strlen(needle));
}

/* Check that @map[@key] in @json is at least @want; @who prefixes the message. */
static void check_map_at_least(const char *json, const char *who,
			       const char *map, const char *key, long long want)
{
	long long v = map_value(json, map, key);

	CHECK(v >= want, "%s%s[%s] = %lld, want >= %lld", who, map, key, v,
	      want);
}

/* Check that @map[@key] in @json is in [@lo, @hi]; @who prefixes the message. */
static void check_map_between(const char *json, const char *who,
			      const char *map, const char *key, long long lo,
			      long long hi)
{
	long long v = map_value(json, map, key);

	CHECK(v >= lo && v <= hi, "%s%s[%s] = %lld, want %lld to %lld", who,
	      map, key, v, lo, hi);
}

/*
 * The probes @text (a bpftrace script) declares: lines that start with a
 * probe type and a colon ("tracepoint:...", "kprobe:..."), one probe each
 * (the lab's scripts use no wildcards and no probe lists).
 */
static int count_probes(const char *text)
{
	const char *next = text;
	char line[512];
	int n = 0;

	while (lab_next_line(&next, line, sizeof(line))) {
		size_t type = strspn(line, "abcdefghijklmnopqrstuvwxyz");

		n += type > 0 && line[type] == ':';
	}
	return n;
}

/* What follows "@map": in the output (spaces skipped), or NULL. */
static const char *map_record(const char *json, const char *map)
{
	char needle[128];
	const char *m;

	snprintf(needle, sizeof(needle), "\"%s\":", map);
	m = strstr(json, needle);
	if (!m)
		return NULL;
	for (m += strlen(needle); *m == ' '; m++)
		;
	return m;
}

/* Value of a scalar map (count()) record "@map": N, or -1. */
static long long scalar_value(const char *json, const char *map)
{
	const char *m = map_record(json, map);

	return m && *m >= '0' && *m <= '9' ? atoll(m) : -1;
}

/* Whether the output has a histogram record of @map with buckets. */
static int has_hist(const char *json, const char *map)
{
	const char *m = map_record(json, map);
	const char *end = m ? strchr(m, '\n') : NULL;
	const char *count = m ? strstr(m, "\"count\"") : NULL;

	return m && *m == '[' && count && (!end || count < end);
}

static const struct lab_fscrypt_fs ext4 = {
	.name = "ext4", .mkfs_cmd = "mkfs.ext4 -q -F -O encrypt",
};
static const struct lab_fscrypt_fs btrfs = {
	.name = "btrfs", .mkfs_cmd = "mkfs.btrfs -q -f",
};

/*
 * mkfs and mount @fs on @dev (lab_fscrypt_fs_setup(): a kernel without
 * fscrypt there is a SKIP), add a random master key and make @mnt/enc an
 * encrypted directory; @file gets the path of @mnt/enc/file.
 */
static void encrypted_dir(const struct lab_fscrypt_fs *fs, const char *dev,
			  const char *mnt, char file[512])
{
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE], key[64];
	char dir[512];

	lab_random(key, sizeof(key));
	lab_fscrypt_fs_setup(fs, dev, mnt, NULL, key, sizeof(key), id);
	PATHF(dir, "%s/enc", mnt);
	lab_pathf(file, 512, "%s/enc/file", mnt);
	if (mkdir(dir, 0755) || lab_set_policy(dir, id))
		lab_die("cannot set up an encrypted directory %s: %s", dir, strerror(errno));
}

/* Print what @pid is doing: its state, wait channel and kernel stack. */
static void show_task(pid_t pid)
{
	static const char *const what[] = { "status", "wchan", "stack" };
	char path[64], *text;
	size_t i, len;

	for (i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what[i]);
		text = read_file(path, &len);
		printf("--- %s\n%s\n", path, text ? text : "(unreadable)");
		free(text);
	}
}

/*
 * Stop bpftrace (SIGINT: it prints its maps) and return its output.
 *
 * bpftrace can miss a SIGINT: in this test it once stayed asleep in
 * epoll_wait() 300 s after one (state S, wchan do_epoll_wait, no signal
 * pending), as a lost wakeup between its signal flag and its wait would
 * leave it.  So SIGINT is sent again every RESEND_S seconds, and the
 * output says how many times.  If bpftrace has
 * still not exited EXIT_TIMEOUT_S later, show where it is, kill it and fail,
 * rather than leave the runner to kill the whole test without a word.
 */
static char *stop_bpftrace(pid_t pid)
{
	time_t start = time(NULL), end = start + EXIT_TIMEOUT_S;
	time_t next = start + RESEND_S;
	unsigned int resent = 0;
	size_t len;
	int status = 0;
	char *json;
	pid_t r;

	kill(pid, SIGINT);
	while ((r = waitpid(pid, &status, WNOHANG)) == 0 && time(NULL) < end) {
		sleep(1);
		if (time(NULL) >= next) {
			kill(pid, SIGINT);
			resent++;
			next = time(NULL) + RESEND_S;
		}
	}
	if (resent)
		printf("bpftrace took %lld s to exit; SIGINT sent again %u time(s)\n",
		       (long long)(time(NULL) - start), resent);
	if (r == 0) {
		CHECK(0, "bpftrace did not exit within %d s of SIGINT (its state below)",
		      EXIT_TIMEOUT_S);
		show_task(pid);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	} else {
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "bpftrace exit status %#x", status);
	}
	json = read_file(OUT, &len);
	if (!json)
		lab_die("no bpftrace output in %s", OUT);
	printf("%s", json);
	return json;
}

/*
 * bench.bt around NBLOCKS fsynced 4 KiB writes of an encrypted file (one
 * extent each on btrfs) and a read of it from a cold cache.
 */
static void check_bench_bt(const char *dev, const char *mnt)
{
	int per_extent = access(LAB_BTRFS_EXTENT_KEYS_FEATURE, F_OK) == 0;
	const struct lab_fscrypt_fs *fs = per_extent ? &btrfs : &ext4;
	static uint8_t data[NBLOCKS * 4096];
	char file[512], *script;
	int probes, want_probes, group_probe, fd, i;
	size_t len;
	char *json;
	pid_t pid;

	script = read_file(BENCH_SCRIPT, &len);
	if (!script)
		lab_die("%s is missing from the job", BENCH_SCRIPT);
	/* bench.bt changes with the benchmark: attach whatever it declares */
	want_probes = count_probes(script);
	group_probe = strstr(script, "@group_starts[") != NULL;
	free(script);
	if (want_probes < 1)
		lab_die("%s declares no probes", BENCH_SCRIPT);
	if (!per_extent)
		printf("no %s: bench.bt checked on ext4, without the per-extent "
		       "counts\n", LAB_BTRFS_EXTENT_KEYS_FEATURE);
	encrypted_dir(fs, dev, mnt, file);

	unlink(OUT);
	pid = start_bpftrace(BENCH_SCRIPT);
	probes = wait_attached(pid);
	CHECK(probes == want_probes, "bench.bt: bpftrace attached %d probes, want the %d it declares",
	      probes, want_probes);
	sleep(10);	/* see check in main() */

	fill_pattern(data, sizeof(data), 5);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		lab_die("open %s: %s", file, strerror(errno));
	/* backwards, each block fsynced: one extent per block on btrfs */
	for (i = NBLOCKS - 1; i >= 0; i--)
		if (pwrite(fd, data + i * 4096, 4096, (off_t)i * 4096) != 4096 || fsync(fd))
			lab_die("write block %d of %s: %s", i, file, strerror(errno));
	close(fd);
	CHECK_OK(lab_drop_caches("3"), "drop caches");
	CHECK_FILE_EQUALS(file, data, sizeof(data));
	printf("read back from a cold cache; stopping bpftrace\n");

	json = stop_bpftrace(pid);
	check_map_at_least(json, "bench.bt: ", "@crypt_blocks", "encrypt",
			   NBLOCKS);
	check_map_at_least(json, "bench.bt: ", "@crypt_blocks", "decrypt",
			   NBLOCKS);
	CHECK(has_hist(json, "@bio_bytes"), "bench.bt: no @bio_bytes histogram");
	CHECK(has_hist(json, "@derive_ns"), "bench.bt: no @derive_ns histogram");
	if (per_extent) {
		/*
		 * The extents share one key group: its key is derived once
		 * when written, and once more by the cold read if
		 * drop_caches evicted the inode (it may not have); a key per
		 * extent would give NBLOCKS each time.  9: fscrypt's HKDF
		 * context of extent keys.  Every extent is looked up.
		 */
		check_map_between(json, "bench.bt: ", "@derive_by_context",
				  "9", 1, 2);
		check_map_between(json, "bench.bt: ", "@extent_key_setup",
				  "derived", 1, 2);
		/* the writes started one group; reads start none */
		if (group_probe)
			check_map_between(json, "bench.bt: ", "@group_starts",
					  "new", 1, 1);
		CHECK(scalar_value(json, "@lookups") >= NBLOCKS,
		      "bench.bt: @lookups = %lld, want >= %d",
		      scalar_value(json, "@lookups"), NBLOCKS);
		CHECK(has_hist(json, "@lookup_ns"), "bench.bt: no @lookup_ns histogram");
		CHECK(scalar_value(json, "@slot_programs") >= 1,
		      "bench.bt: @slot_programs = %lld, want >= 1",
		      scalar_value(json, "@slot_programs"));
		CHECK(has_hist(json, "@slot_program_ns"),
		      "bench.bt: no @slot_program_ns histogram");
	}
	free(json);
	lab_umount(mnt);
}

int main(void)
{
	const char *dev = lab_env("SCRATCH_DEV"), *mnt = lab_env("SCRATCH_MNT");
	static uint8_t data[NBLOCKS * 4096];
	char file[512];
	int probes;
	char *json;
	pid_t pid;

	if (access(SCRIPT, R_OK))
		lab_die("%s is missing from the job", SCRIPT);
	encrypted_dir(&ext4, dev, mnt, file);

	unlink(OUT);
	pid = start_bpftrace(SCRIPT);
	probes = wait_attached(pid);
	CHECK(probes == 4, "bpftrace attached %d probes, want 4", probes);
	/*
	 * bpftrace announces the probes before it has attached all of them;
	 * give it time (TCG is slow) so that the I/O below is seen whole.
	 */
	sleep(10);

	fill_pattern(data, sizeof(data), 3);
	CHECK_OK(write_file(file, data, sizeof(data)), "write %s", file);
	CHECK_OK(fsync_path(file), "fsync %s", file);
	CHECK_OK(lab_drop_caches("1"), "drop page cache");
	CHECK_FILE_EQUALS(file, data, sizeof(data));
	printf("read back from a cold cache; stopping bpftrace\n");

	json = stop_bpftrace(pid);
	check_map_at_least(json, "", "@blocks", "encrypt", NBLOCKS);
	check_map_at_least(json, "", "@blocks", "decrypt", NBLOCKS);
	/* HKDF context 2: the new file's per-file key. */
	check_map_at_least(json, "", "@derive_by_context", "2", 1);
	free(json);
	lab_umount(mnt);

	check_bench_bt(dev, mnt);
	return lab_result("profiles_bpftrace_attach");
}
