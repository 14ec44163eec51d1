// SPDX-License-Identifier: GPL-2.0
/*
 * The lab's bpftrace profile of the fscrypt tracepoints
 * (profiles/fscrypt-tracepoints.bt) attaches to all of its probes and counts
 * what the workload did: run it with -f json around encrypted I/O on ext4
 * and check the attached-probe count and the block counts it reports.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fscrypt_util.h"
#include "lab.h"

#define SCRIPT "/job/profiles/fscrypt-tracepoints.bt"
#define OUT "/tmp/bpftrace.json"
#define NBLOCKS 8
#define ATTACH_TIMEOUT_S 600	/* bpftrace compiles with LLVM: slow under TCG */

static pid_t start_bpftrace(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		execlp("bpftrace", "bpftrace", "-f", "json", "-o", OUT, SCRIPT,
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

int main(void)
{
	const char *dev = lab_env("SCRATCH_DEV"), *mnt = lab_env("SCRATCH_MNT");
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	static uint8_t data[NBLOCKS * 4096];
	char dir[512], file[512];
	int probes, status;
	char *json;
	size_t len;
	pid_t pid;

	if (access(SCRIPT, R_OK))
		lab_die("%s is missing from the job", SCRIPT);
	if (lab_mkfs("mkfs.ext4 -q -F -O encrypt", dev) || lab_mount(dev, mnt, "ext4", NULL))
		lab_die("cannot make and mount ext4 on %s", dev);
	PATHF(dir, "%s/enc", mnt);
	PATHF(file, "%s/enc/file", mnt);
	if (mkdir(dir, 0755) || lab_add_key(mnt, 2, id) || lab_set_policy(dir, id))
		lab_die("cannot set up an encrypted directory %s: %s", dir, strerror(errno));

	unlink(OUT);
	pid = start_bpftrace();
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

	kill(pid, SIGINT);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "bpftrace exit status %#x", status);
	json = read_file(OUT, &len);
	if (!json)
		lab_die("no bpftrace output in %s", OUT);
	printf("%s", json);
	CHECK(map_value(json, "@blocks", "encrypt") >= NBLOCKS,
	      "@blocks[encrypt] = %lld, want >= %d",
	      map_value(json, "@blocks", "encrypt"), NBLOCKS);
	CHECK(map_value(json, "@blocks", "decrypt") >= NBLOCKS,
	      "@blocks[decrypt] = %lld, want >= %d",
	      map_value(json, "@blocks", "decrypt"), NBLOCKS);
	/* HKDF context 2: the new file's per-file key. */
	CHECK(map_value(json, "@derive_by_context", "2") >= 1,
	      "@derive_by_context[2] = %lld, want >= 1",
	      map_value(json, "@derive_by_context", "2"));
	free(json);
	lab_umount(mnt);
	return lab_result("profiles_bpftrace_attach");
}
