/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lab.h - tiny helper library shared by the in-guest test programs.
 *
 * Conventions: a test exits LAB_PASS (0), LAB_FAIL (1) or LAB_SKIP (77).
 * CHECK() and friends record a failure (and print file:line, what was
 * expected and what was got) but do not stop the test; call lab_result() at
 * the end to turn the recorded failures into the exit code.
 *
 * Helpers returning int use 0 = success, -1 = failure with errno set, unless
 * documented otherwise.
 */
#ifndef LAB_H
#define LAB_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define LAB_PASS 0
#define LAB_FAIL 1
#define LAB_SKIP 77

#define LAB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define LAB_NORETURN __attribute__((noreturn))

/* ---- result bookkeeping ------------------------------------------------ */

/* Number of failed checks so far. */
extern int lab_failures;

/* Record one failed check and print "FAIL file:line: expr: message". */
void lab_fail(const char *file, int line, const char *expr,
	      const char *fmt, ...) LAB_PRINTF(4, 5);

/*
 * CHECK(cond, fmt, ...): evaluates to 1 if cond holds, else records a failure
 * (with the printf-style message) and evaluates to 0.  cond is evaluated
 * exactly once, before any of the message arguments.
 */
#define CHECK(cond, ...)						\
	__extension__ ({						\
		int lab_ok_ = !!(cond);					\
		if (!lab_ok_)						\
			lab_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); \
		lab_ok_;						\
	})

/* Symbolic errno name, e.g. "ENOKEY" ("E?" if unknown). */
const char *lab_errname(int err);

/* Use as printf("... " LAB_ERR_FMT, LAB_ERR_ARGS(e)) -> "ENOKEY (126: ...)". */
#define LAB_ERR_FMT "%s (%d: %s)"
#define LAB_ERR_ARGS(e) lab_errname(e), (e), strerror(e)

/*
 * Check that a call that returned @ret with errno @err failed with exactly
 * -1 / @expected.  Returns 1 if so.  The message names the operation.
 */
int lab_expect_errno(const char *file, int line, long ret, int err,
		     int expected, const char *fmt, ...) LAB_PRINTF(6, 7);
/* Check that a call that returned @ret with errno @err succeeded (ret >= 0). */
int lab_expect_ok(const char *file, int line, long ret, int err,
		  const char *fmt, ...) LAB_PRINTF(5, 6);

#define EXPECT_ERRNO(ret, err, expected, ...)				\
	lab_expect_errno(__FILE__, __LINE__, (long)(ret), (err), (expected), \
			 __VA_ARGS__)
#define EXPECT_OK(ret, err, ...)					\
	lab_expect_ok(__FILE__, __LINE__, (long)(ret), (err), __VA_ARGS__)

/*
 * Evaluate a syscall expression once and check its outcome; errno is captured
 * right after the call.  Do not use these for calls that return a resource
 * (an fd) you would leak if the call unexpectedly succeeds.
 */
/* Evaluate @expr once; then run @check with its result and errno. */
#define LAB_CAPTURE_(expr, check)					\
	__extension__ ({						\
		long lab_r_;						\
		int lab_e_;						\
		errno = 0;						\
		lab_r_ = (long)(expr);					\
		lab_e_ = errno;						\
		check;							\
	})
#define CHECK_ERRNO(expr, expected, ...)				\
	LAB_CAPTURE_(expr, EXPECT_ERRNO(lab_r_, lab_e_, (expected), __VA_ARGS__))
#define CHECK_OK(expr, ...)						\
	LAB_CAPTURE_(expr, EXPECT_OK(lab_r_, lab_e_, __VA_ARGS__))

/* Print the verdict and return the exit code: LAB_PASS or LAB_FAIL. */
int lab_result(const char *test_name);

/* Print "SKIP: reason" and exit(LAB_SKIP) (exit handlers still run). */
void lab_skip(const char *fmt, ...) LAB_PRINTF(1, 2) LAB_NORETURN;

/* Print "FATAL: reason" and exit(LAB_FAIL) (exit handlers still run). */
void lab_die(const char *fmt, ...) LAB_PRINTF(1, 2) LAB_NORETURN;

/* ---- environment, memory, paths ---------------------------------------- */

/* getenv() that exits with LAB_FAIL and a clear message if unset/empty. */
const char *lab_env(const char *name);

/* malloc() that dies on failure. */
void *lab_xmalloc(size_t size);

/* snprintf() into out[size]; dies if the result would be truncated. */
void lab_pathf(char *out, size_t size, const char *fmt, ...) LAB_PRINTF(3, 4);
#define PATHF(arr, ...) lab_pathf((arr), sizeof(arr), __VA_ARGS__)

/* ---- commands, mkfs, mount --------------------------------------------- */

/*
 * Run a shell command (via system()), printing it first.  Returns its exit
 * status, 128+N if killed by signal N, or -1 if it could not be run.  The
 * shell returns 127 if the command was not found.
 */
int run(const char *fmt, ...) LAB_PRINTF(1, 2);

/*
 * run("<mkfs_cmd> <dev>"); returns the exit status like run().  When the
 * command is mkfs.btrfs, the options of $LAB_BTRFS_MKFS_OPTS (if set) go
 * between them.
 */
int lab_mkfs(const char *mkfs_cmd, const char *dev);

/*
 * Options that a test configuration (tests/configs/, e.g. "encrypt":
 * -O encrypt, which test_dummy_encryption needs) adds to every mkfs.btrfs
 * that lab_mkfs() runs.
 */
#define LAB_BTRFS_MKFS_OPTS_ENV "LAB_BTRFS_MKFS_OPTS"

/*
 * Options that a test configuration (tests/configs/, e.g. "encrypt":
 * test_dummy_encryption) adds to every btrfs mount lab_mount() makes.
 */
#define LAB_BTRFS_MOUNT_OPTS_ENV "LAB_BTRFS_MOUNT_OPTS"

/*
 * mount(2) @dev on @mnt; @opts may be NULL.  For btrfs, the options of
 * $LAB_BTRFS_MOUNT_OPTS (if set) are added.  On success the mount is
 * remembered and unmounted by an exit handler if the test ends without
 * calling lab_umount() (e.g. after a failure or a skip).
 */
int lab_mount(const char *dev, const char *mnt, const char *fstype,
	      const char *opts);

/*
 * Does this run's configuration mount btrfs with test_dummy_encryption
 * (a word of $LAB_BTRFS_MOUNT_OPTS, as tests/configs/encrypt.conf sets)?
 * Then every new directory, file and symlink whose parent is not encrypted
 * gets a v2 policy with fscrypt's test key (a key new at every boot), and
 * only the top directory of each subvolume stays unencrypted: a test that
 * sets its own policy either takes the test policy as its own or sets its
 * policy on a subvolume's top directory, and says so (lab_config_note()).
 */
int lab_dummy_encryption(void);

/*
 * Print "config: <what>" (the caller ends it with a newline): what a test
 * configuration changed in the test, for its log.
 */
void lab_config_note(const char *fmt, ...) LAB_PRINTF(1, 2);

/* sync, then umount(2) @mnt, retrying a few times on EBUSY. */
int lab_umount(const char *mnt);

/* ---- files -------------------------------------------------------------- */

/* Read a whole file into a malloc()ed buffer (NUL-terminated, not counted). */
void *read_file(const char *path, size_t *len);

/*
 * Copy the line at *@next (without its newline, cut to @size - 1 bytes) into
 * @line, NUL-terminated, and advance *@next past it.  Returns 0 at the end of
 * the text.  For parsing text such as a trace buffer line by line.
 */
int lab_next_line(const char **next, char *line, size_t size);

/* Create/truncate @path (mode 0644) and write @len bytes.  No fsync. */
int write_file(const char *path, const void *buf, size_t len);

/* write()/pwrite() all of @len bytes, retrying short writes. */
int write_all(int fd, const void *buf, size_t len);
int pwrite_all(int fd, const void *buf, size_t len, off_t off);

/* open(@path, O_RDONLY) + fsync; works for files and directories. */
int fsync_path(const char *path);

/* sync(), then write @what ("1", "2" or "3") to /proc/sys/vm/drop_caches. */
int lab_drop_caches(const char *what);

/* The names in a directory, without "." and "..", in readdir order. */
struct lab_names {
	char **name;
	size_t n;
};

/*
 * readdir of @path into *@l (lab_names_free() it); on failure, -1 with
 * errno and *@l empty.  Dies without memory.
 */
int lab_list_dir(const char *path, struct lab_names *l);
void lab_names_free(struct lab_names *l);

/*
 * Check that @path holds exactly @len bytes equal to @expect; on mismatch
 * report the size or the first differing offset.  Returns 1 if equal.
 */
int lab_check_file_equals(const char *file, int line, const char *path,
			  const void *expect, size_t len);
#define CHECK_FILE_EQUALS(path, expect, len)				\
	lab_check_file_equals(__FILE__, __LINE__, (path), (expect), (len))

/*
 * pread [off, off+len) of @fd fully into @buf, retrying short reads and
 * EINTR.  Returns the bytes read (fewer than @len only at end of file), or -1.
 */
ssize_t lab_pread_full(int fd, void *buf, size_t len, off_t off);

/* Offset of the first byte where a and b differ, or len if equal. */
size_t lab_first_diff(const void *a, const void *b, size_t len);

/* ---- patterns and scanning ---------------------------------------------- */

/* The next number of the splitmix64 sequence of *@state (advanced). */
uint64_t lab_splitmix64(uint64_t *state);

/*
 * Deterministic pseudo-random bytes (splitmix64 stream) depending on @seed
 * and on the position, so misplaced or stale blocks are detected.
 */
void fill_pattern(void *buf, size_t len, uint32_t seed);

/* A lab_xmalloc()ed buffer of @len bytes filled with fill_pattern(@seed). */
unsigned char *lab_pattern(size_t len, uint32_t seed);

/* Copy @marker at offsets 0, stride, 2*stride, ... while it fits in @buf. */
void stamp_marker(void *buf, size_t len, const void *marker, size_t mlen,
		  size_t stride);

/* Number of (possibly overlapping) occurrences of @needle in @hay. */
size_t count_occurrences(const void *hay, size_t hlen, const void *needle,
			 size_t nlen);

/*
 * Scan a whole block device (or file) with big pread()s (O_DIRECT when
 * possible, so the page cache cannot hide what is on the medium) and count
 * the occurrences of @needle, including ones straddling chunk boundaries.
 * Returns the count, or -1 with errno set on error.
 */
long long count_occurrences_on_device(const char *dev, const void *needle,
				      size_t len);

/*
 * Print a formatted line (the caller ends it with a newline) to stdout and
 * to /dev/console, where the host's runner sees it as it comes (progress,
 * markers that attribute kernel messages to a step).  stdout is flushed
 * first, so the two stay in order in a log that mixes them.
 */
void lab_console_line(const char *fmt, ...) LAB_PRINTF(1, 2);

/* Sleep @ms milliseconds, resuming after signals. */
void lab_sleep_ms(long ms);

/*
 * Reboot the VM at once, as a power cut would (sysrq 'b': no sync, no
 * unmount), after printing LAB-CRASH-NOW on stdout (the console) and
 * waiting until it has left the UART.  Dies if the VM is still running.
 */
void lab_crash_now(void) LAB_NORETURN;

/* ---- the kernel log ------------------------------------------------------ */

/*
 * Write a marker line (letters, digits, '-' and '_' only) to the kernel log;
 * lab_log_has() and lab_log_show() then look only at the lines after the
 * latest marker.  Never dmesg -C instead: it would erase the KUnit results.
 * Returns 0, or -1 (message printed).
 */
int lab_log_mark(const char *fmt, ...) LAB_PRINTF(1, 2);

/*
 * Is there a kernel log line after the latest marker matching the extended
 * regular expression @ere?  A quote in @ere matches any character.
 */
int lab_log_has(const char *ere);

/*
 * Print up to @max_lines kernel log lines after the latest marker, leaving
 * out indented continuation lines (such as btrfs_print_leaf()'s items).
 */
void lab_log_show(int max_lines);

/* The regular expression of lab_log_has() for a kernel splat. */
#define LAB_LOG_SPLAT_ERE \
	"WARNING:|BUG:|Oops|assertion failed|Kernel panic|is not committed"

#endif /* LAB_H */
