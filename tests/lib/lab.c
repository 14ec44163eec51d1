// SPDX-License-Identifier: GPL-2.0
/* lab.c - helper library for the in-guest test programs; see lab.h. */
#include "lab.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

int lab_failures;

/*
 * mkfs.*, btrfs, ... live in sbin: make sure run() finds them even if the
 * harness started us with a user-style PATH (else they would look missing).
 */
static void lab_ensure_path(void)
{
	static const char sbin[] = "/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin";
	const char *path = getenv("PATH");
	char buf[8192];

	if (!path || !*path) {
		setenv("PATH", sbin, 1);
		return;
	}
	if (strstr(path, "/usr/sbin") && strstr(path, "/usr/bin"))
		return;
	if ((size_t)snprintf(buf, sizeof(buf), "%s:%s", path, sbin) < sizeof(buf))
		setenv("PATH", buf, 1);
}

/* Line-buffer stdout so our output interleaves sanely with child commands. */
__attribute__((constructor)) static void lab_init(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	lab_ensure_path();
}

/* ---- result bookkeeping ------------------------------------------------ */

void lab_fail(const char *file, int line, const char *expr,
	      const char *fmt, ...)
{
	va_list ap;

	lab_failures++;
	printf("FAIL %s:%d: [%s] ", file, line, expr);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

const char *lab_errname(int err)
{
	const char *name = err ? strerrorname_np(err) : "0";

	return name ? name : "E?";
}

LAB_PRINTF(4, 0)
static void lab_vfail_op(const char *file, int line, const char *what,
			 const char *fmt, va_list ap)
{
	char op[512];

	vsnprintf(op, sizeof(op), fmt, ap);
	lab_fail(file, line, op, "%s", what);
}

int lab_expect_errno(const char *file, int line, long ret, int err,
		     int expected, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (ret == -1 && err == expected)
		return 1;
	if (ret == -1)
		snprintf(what, sizeof(what),
			 "expected failure with " LAB_ERR_FMT
			 ", got failure with " LAB_ERR_FMT,
			 LAB_ERR_ARGS(expected), LAB_ERR_ARGS(err));
	else
		snprintf(what, sizeof(what),
			 "expected failure with " LAB_ERR_FMT
			 ", got success (return value %ld)",
			 LAB_ERR_ARGS(expected), ret);
	va_start(ap, fmt);
	lab_vfail_op(file, line, what, fmt, ap);
	va_end(ap);
	return 0;
}

int lab_expect_ok(const char *file, int line, long ret, int err,
		  const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (ret >= 0)
		return 1;
	snprintf(what, sizeof(what),
		 "expected success, got return value %ld with errno " LAB_ERR_FMT,
		 ret, LAB_ERR_ARGS(err));
	va_start(ap, fmt);
	lab_vfail_op(file, line, what, fmt, ap);
	va_end(ap);
	return 0;
}

int lab_result(const char *test_name)
{
	if (lab_failures == 0) {
		printf("PASS: %s\n", test_name);
		return LAB_PASS;
	}
	printf("FAIL: %s: %d check(s) failed\n", test_name, lab_failures);
	return LAB_FAIL;
}

void lab_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(LAB_SKIP);
}

void lab_die(const char *fmt, ...)
{
	va_list ap;

	printf("FATAL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(LAB_FAIL);
}

/* ---- environment, memory, paths ---------------------------------------- */

const char *lab_env(const char *name)
{
	const char *val = getenv(name);

	if (!val || !*val)
		lab_die("environment variable %s is not set (the test harness must set SCRATCH_DEV, SCRATCH_DEV2 and SCRATCH_MNT)",
			name);
	return val;
}

void *lab_xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p)
		lab_die("out of memory allocating %zu bytes", size);
	return p;
}

void lab_pathf(char *out, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size)
		lab_die("path too long (format \"%s\")", fmt);
}

/* ---- commands, mkfs, mount --------------------------------------------- */

int run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int n, st;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(cmd)) {
		printf("run: command too long (format \"%s\")\n", fmt);
		return -1;
	}
	printf("+ %s\n", cmd);
	fflush(stdout);
	fflush(stderr);
	st = system(cmd);
	if (st == -1) {
		int e = errno;

		printf("run: system() failed: " LAB_ERR_FMT "\n", LAB_ERR_ARGS(e));
		return -1;
	}
	if (WIFEXITED(st))
		st = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		st = 128 + WTERMSIG(st);
	else
		st = -1;
	if (st != 0)
		printf("run: exit status %d\n", st);
	return st;
}

/* Is the program of @cmd (its first word) mkfs.btrfs, by any path? */
static int lab_is_mkfs_btrfs(const char *cmd)
{
	static const char prog[] = "mkfs.btrfs";
	size_t n = strcspn(cmd, " \t"), len = sizeof(prog) - 1;

	return n >= len && !strncmp(cmd + n - len, prog, len) &&
	       (n == len || cmd[n - len - 1] == '/');
}

int lab_mkfs(const char *mkfs_cmd, const char *dev)
{
	const char *extra = getenv(LAB_BTRFS_MKFS_OPTS_ENV);

	/* A test configuration's mkfs options (tests/configs/): btrfs only. */
	if (extra && *extra && lab_is_mkfs_btrfs(mkfs_cmd))
		return run("%s %s %s", mkfs_cmd, extra, dev);
	return run("%s %s", mkfs_cmd, dev);
}

#define LAB_MAX_MOUNTS 4
static char lab_mounts[LAB_MAX_MOUNTS][PATH_MAX];

static void lab_forget_mount(const char *mnt)
{
	int i;

	for (i = 0; i < LAB_MAX_MOUNTS; i++)
		if (strcmp(lab_mounts[i], mnt) == 0)
			lab_mounts[i][0] = '\0';
}

/* Exit handler: unmount whatever the test left mounted (newest first). */
static void lab_cleanup_mounts(void)
{
	char mnt[PATH_MAX];
	int i;

	for (i = LAB_MAX_MOUNTS - 1; i >= 0; i--) {
		if (!lab_mounts[i][0])
			continue;
		memcpy(mnt, lab_mounts[i], sizeof(mnt));
		printf("cleanup: unmounting %s\n", mnt);
		if (lab_umount(mnt) == 0)
			continue;
		if (umount2(mnt, MNT_DETACH) == 0)
			printf("cleanup: lazily detached busy mount %s\n", mnt);
		lab_forget_mount(mnt);
	}
	fflush(stdout);
}

static void lab_remember_mount(const char *mnt)
{
	static int registered;
	int i;

	if (!registered) {
		atexit(lab_cleanup_mounts);
		registered = 1;
	}
	if (strlen(mnt) >= PATH_MAX)
		return;
	for (i = 0; i < LAB_MAX_MOUNTS; i++) {
		if (!lab_mounts[i][0]) {
			strcpy(lab_mounts[i], mnt);
			return;
		}
	}
	printf("lab_mount: warning: too many mounts to track %s\n", mnt);
}

int lab_mount(const char *dev, const char *mnt, const char *fstype,
	      const char *opts)
{
	const char *extra = getenv(LAB_BTRFS_MOUNT_OPTS_ENV);
	char all[1024];

	/* A test configuration's options (tests/configs/): btrfs only. */
	if (extra && *extra && !strcmp(fstype, "btrfs")) {
		snprintf(all, sizeof(all), "%s%s%s", opts ? opts : "",
			 opts ? "," : "", extra);
		opts = all;
	}
	printf("mount -t %s %s%s %s %s\n", fstype, opts ? "-o " : "",
	       opts ? opts : "", dev, mnt);
	if (mount(dev, mnt, fstype, 0, opts) != 0) {
		int e = errno;

		printf("mount of %s on %s failed: " LAB_ERR_FMT "\n", dev, mnt,
		       LAB_ERR_ARGS(e));
		errno = e;
		return -1;
	}
	lab_remember_mount(mnt);
	return 0;
}

int lab_dummy_encryption(void)
{
	const char *o = getenv(LAB_BTRFS_MOUNT_OPTS_ENV);
	static const char opt[] = "test_dummy_encryption";
	size_t n, len = sizeof(opt) - 1;

	/* one word of a comma-separated list, with or without "=v2" */
	while (o && *o) {
		n = strcspn(o, ",");
		if (n >= len && !strncmp(o, opt, len) && (n == len || o[len] == '='))
			return 1;
		o += n;
		o += *o == ',';
	}
	return 0;
}

void lab_config_note(const char *fmt, ...)
{
	va_list ap;

	printf("config: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

int lab_umount(const char *mnt)
{
	int i, e = 0;

	printf("umount %s\n", mnt);
	sync();
	for (i = 0; i < 10; i++) {
		if (umount(mnt) == 0) {
			lab_forget_mount(mnt);
			return 0;
		}
		e = errno;
		if (e != EBUSY)
			break;
		usleep(200 * 1000);
	}
	printf("umount %s failed: " LAB_ERR_FMT "\n", mnt, LAB_ERR_ARGS(e));
	errno = e;
	return -1;
}

/* ---- files -------------------------------------------------------------- */

static size_t lab_initial_cap(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		return (size_t)st.st_size + 1;
	return 4096;
}

int lab_next_line(const char **next, char *line, size_t size)
{
	const char *nl;
	size_t n;

	if (!*next || !**next)
		return 0;
	nl = strchr(*next, '\n');
	n = nl ? (size_t)(nl - *next) : strlen(*next);
	n = n < size - 1 ? n : size - 1;
	memcpy(line, *next, n);
	line[n] = '\0';
	*next = nl ? nl + 1 : NULL;
	return 1;
}

void *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char *buf, *nbuf;
	size_t cap, used = 0;
	ssize_t n;
	int e;

	if (fd < 0)
		return NULL;
	cap = lab_initial_cap(fd);
	buf = malloc(cap + 1);
	if (!buf)
		goto fail;
	for (;;) {
		if (used == cap) {
			nbuf = realloc(buf, cap * 2 + 1);
			if (!nbuf)
				goto fail;
			buf = nbuf;
			cap *= 2;
		}
		n = read(fd, buf + used, cap - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	buf[used] = '\0';
	*len = used;
	return buf;
fail:
	e = errno;
	free(buf);
	close(fd);
	errno = e;
	return NULL;
}

/* Write all of @len bytes, at @off, or at the file offset if @off < 0. */
static int write_fully(int fd, const void *buf, size_t len, off_t off)
{
	const unsigned char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		p += n;
		if (off >= 0)
			off += n;
		len -= (size_t)n;
	}
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	return write_fully(fd, buf, len, -1);
}

int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	return write_fully(fd, buf, len, off);
}

/*
 * Close @fd after an operation that returned @ret: -1 with the operation's
 * errno if it failed, else the result of close().
 */
static int close_after(int fd, int ret)
{
	int e = errno;
	int cret = close(fd);

	if (ret != 0) {
		errno = e;
		return -1;
	}
	return cret;
}

int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	return close_after(fd, write_all(fd, buf, len));
}

int fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	return close_after(fd, fsync(fd));
}

int lab_drop_caches(const char *what)
{
	sync();
	return write_file("/proc/sys/vm/drop_caches", what, strlen(what));
}

void lab_names_free(struct lab_names *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->name[i]);
	free(l->name);
	l->name = NULL;
	l->n = 0;
}

int lab_list_dir(const char *path, struct lab_names *l)
{
	struct dirent *e;
	DIR *d;
	int err;

	l->name = NULL;
	l->n = 0;
	d = opendir(path);
	if (!d)
		return -1;
	for (;;) {
		errno = 0;
		e = readdir(d);
		if (!e)
			break;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		l->name = realloc(l->name, (l->n + 1) * sizeof(*l->name));
		if (!l->name)
			lab_die("out of memory");
		l->name[l->n] = strdup(e->d_name);
		if (!l->name[l->n++])
			lab_die("out of memory");
	}
	err = errno;
	closedir(d);
	if (err) {
		lab_names_free(l);
		errno = err;
		return -1;
	}
	return 0;
}

size_t lab_first_diff(const void *a, const void *b, size_t len)
{
	const unsigned char *pa = a, *pb = b;
	size_t i;

	for (i = 0; i < len; i++)
		if (pa[i] != pb[i])
			return i;
	return len;
}

int lab_check_file_equals(const char *file, int line, const char *path,
			  const void *expect, size_t len)
{
	const unsigned char *exp = expect;
	unsigned char *got;
	size_t got_len, off;
	int ok = 1;

	got = read_file(path, &got_len);
	if (!got) {
		int e = errno;

		lab_fail(file, line, "read_file", "reading %s: " LAB_ERR_FMT,
			 path, LAB_ERR_ARGS(e));
		return 0;
	}
	if (got_len != len) {
		lab_fail(file, line, "size", "%s: expected %zu bytes, got %zu",
			 path, len, got_len);
		ok = 0;
	} else if ((off = lab_first_diff(exp, got, len)) != len) {
		lab_fail(file, line, "content",
			 "%s: first difference at offset %zu: expected 0x%02x, got 0x%02x",
			 path, off, exp[off], got[off]);
		ok = 0;
	}
	free(got);
	return ok;
}

/* ---- patterns and scanning ---------------------------------------------- */

uint64_t lab_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void fill_pattern(void *buf, size_t len, uint32_t seed)
{
	uint64_t state = 0x6c61622d70617474ULL ^ (((uint64_t)seed << 32) | seed);
	unsigned char *p = buf;
	uint64_t word = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (i % 8 == 0)
			word = lab_splitmix64(&state);
		p[i] = (unsigned char)(word >> (8 * (i % 8)));
	}
}

unsigned char *lab_pattern(size_t len, uint32_t seed)
{
	unsigned char *buf = lab_xmalloc(len);

	fill_pattern(buf, len, seed);
	return buf;
}

void stamp_marker(void *buf, size_t len, const void *marker, size_t mlen,
		  size_t stride)
{
	unsigned char *p = buf;
	size_t off;

	if (mlen == 0 || stride == 0)
		return;
	for (off = 0; off + mlen <= len; off += stride)
		memcpy(p + off, marker, mlen);
}

size_t count_occurrences(const void *hay, size_t hlen, const void *needle,
			 size_t nlen)
{
	const unsigned char *p = hay, *end = p + hlen, *hit;
	size_t count = 0;

	if (nlen == 0)
		return 0;
	while ((size_t)(end - p) >= nlen) {
		hit = memmem(p, (size_t)(end - p), needle, nlen);
		if (!hit)
			break;
		count++;
		p = hit + 1;
	}
	return count;
}

#define LAB_SCAN_CHUNK (8u << 20)
#define LAB_SCAN_ALIGN 4096u

/* Open for scanning: O_DIRECT if supported, else buffered + flushed cache. */
static int lab_open_for_scan(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC);

	if (fd >= 0 || errno != EINVAL)
		return fd;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		(void)ioctl(fd, BLKFLSBUF, 0); /* only works on block devices */
	return fd;
}

ssize_t lab_pread_full(int fd, void *buf_, size_t len, off_t off)
{
	unsigned char *buf = buf_;
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = pread(fd, buf + got, len - got, off + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * Buffer layout: [pad bytes for the carried-over tail][chunk].  The last
 * nlen-1 bytes of each chunk are moved in front of the next one, so a match
 * straddling a boundary is seen exactly once: a match starting in the carried
 * tail must end in the new chunk, so it was not counted before.
 */
long long count_occurrences_on_device(const char *dev, const void *needle,
				      size_t len)
{
	size_t pad, carry = 0, keep;
	unsigned char *mem = NULL, *data;
	void *aligned;
	long long count = 0;
	off_t size, off = 0;
	ssize_t n;
	int fd, e;

	if (len == 0) {
		errno = EINVAL;
		return -1;
	}
	fd = lab_open_for_scan(dev);
	if (fd < 0)
		return -1;
	size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		goto fail;
	pad = (len - 1 + LAB_SCAN_ALIGN - 1) / LAB_SCAN_ALIGN * LAB_SCAN_ALIGN;
	e = posix_memalign(&aligned, LAB_SCAN_ALIGN, pad + LAB_SCAN_CHUNK);
	if (e != 0) {
		errno = e;
		goto fail;
	}
	mem = aligned;
	data = mem + pad;
	while (off < size) {
		n = lab_pread_full(fd, data, LAB_SCAN_CHUNK, off);
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		count += (long long)count_occurrences(data - carry,
						      carry + (size_t)n,
						      needle, len);
		off += n;
		keep = carry + (size_t)n < len - 1 ? carry + (size_t)n : len - 1;
		memmove(data - keep, data + n - keep, keep);
		carry = keep;
	}
	free(mem);
	close(fd);
	return count;
fail:
	e = errno ? errno : ENOMEM;
	free(mem);
	close(fd);
	errno = e;
	return -1;
}

void lab_console_line(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int fd;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("%s", line);
	fflush(stdout);
	fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, line, strlen(line)) < 0)
			printf("write to /dev/console: %s\n", strerror(errno));
		close(fd);
	}
}

void lab_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void lab_crash_now(void)
{
	int fd;

	printf("LAB-CRASH-NOW\n");
	fflush(stdout);
	fflush(stderr);
	/* stdout is the console: wait until the line has left the UART. */
	(void)tcdrain(STDOUT_FILENO);
	fd = open("/proc/sysrq-trigger", O_WRONLY);
	if (fd >= 0 && write(fd, "b", 1) == 1)
		sleep(60);
	lab_die("the VM is still running after echo b > /proc/sysrq-trigger: " LAB_ERR_FMT,
		LAB_ERR_ARGS(errno));
}

/* ---- the kernel log ------------------------------------------------------ */

static char lab_log_marker[128];

int lab_log_mark(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(lab_log_marker, sizeof(lab_log_marker), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(lab_log_marker) ||
	    strspn(lab_log_marker, "abcdefghijklmnopqrstuvwxyz"
		   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != (size_t)n) {
		printf("lab_log_mark: bad marker \"%s\"\n", lab_log_marker);
		lab_log_marker[0] = '\0';
		return -1;
	}
	return run("echo %s > /dev/kmsg", lab_log_marker) == 0 ? 0 : -1;
}

int lab_log_has(const char *ere)
{
	char quoted[512];
	size_t i;

	if (!lab_log_marker[0])
		lab_die("lab_log_has() without a marker");
	snprintf(quoted, sizeof(quoted), "%s", ere);
	for (i = 0; quoted[i]; i++)
		if (quoted[i] == '\'')
			quoted[i] = '.';
	return run("dmesg | sed -n '/%s/,$p' | grep -qE '%s'", lab_log_marker,
		   quoted) == 0;
}

void lab_log_show(int max_lines)
{
	if (!lab_log_marker[0])
		lab_die("lab_log_show() without a marker");
	run("dmesg | sed -n '/%s/,$p' | grep -v '^\\[ *[0-9.]*\\] \\s' | head -n %d",
	    lab_log_marker, max_lines);
}
