/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lab_child.h - run a piece of a test in a child process and wait for it
 * with a deadline, for steps that may hang or crash in the kernel (an fsync
 * stuck in writeback, an oops in the caller's context): the test then reports
 * the hang as a failure instead of waiting until the harness kills it.
 *
 * The child shares the test's mounts, keyrings and open files.  It ends with
 * _exit(), so the parent's exit handlers (unmounting, restoring knobs) never
 * run in it; its CHECK() failures are not seen by the parent: let the child
 * function return its number of failures and add the exit code.
 */
#ifndef LAB_CHILD_H
#define LAB_CHILD_H

#include <sys/types.h>

/* How a child ended, for lab_child_wait(). */
enum lab_child_end {
	LAB_CHILD_EXITED,	/* *code is its exit status */
	LAB_CHILD_SIGNALED,	/* *code is the signal that killed it */
	LAB_CHILD_TIMEOUT,	/* still running at the deadline */
};

/*
 * fork(); the child runs @fn(@arg) and _exit()s with its return value
 * (clamped to 0..125).  stdout is flushed first so that nothing is printed
 * twice.  Returns the child's pid; dies if fork() fails.
 */
pid_t lab_child_start(int (*fn)(void *), void *arg);

/*
 * Wait for @pid until the monotonic time @deadline_ms (lab_now_ms() based).
 * On LAB_CHILD_TIMEOUT the child is left running (see lab_child_kill()).
 */
enum lab_child_end lab_child_wait(pid_t pid, long long deadline_ms, int *code);

/*
 * SIGKILL @pid and reap it if it dies within @grace_ms.  Returns 1 if it was
 * reaped, 0 if it is still there (e.g. in uninterruptible sleep in the
 * kernel: it is then left to init).
 */
int lab_child_kill(pid_t pid, int grace_ms);

/*
 * lab_child_start() + lab_child_wait() with a deadline @timeout_s from now;
 * a child still running then is killed (lab_child_kill(), 2 s grace).
 * Prints one line naming @what when the child did not exit normally.
 */
enum lab_child_end lab_child_run(const char *what, int (*fn)(void *),
				 void *arg, unsigned int timeout_s, int *code);

/* CLOCK_MONOTONIC in milliseconds. */
long long lab_now_ms(void);

#endif /* LAB_CHILD_H */
