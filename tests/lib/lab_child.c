// SPDX-License-Identifier: GPL-2.0
/* Test steps in a child process with a deadline; see lab_child.h. */
#include "lab_child.h"
#include "lab.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How often lab_child_wait() looks at the child. */
#define LAB_CHILD_POLL_MS 50

long long lab_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

pid_t lab_child_start(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int ret;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		lab_die("fork: " LAB_ERR_FMT, LAB_ERR_ARGS(errno));
	if (pid > 0)
		return pid;
	ret = fn(arg);
	if (ret < 0)
		ret = 0;
	if (ret > 125)
		ret = 125;
	fflush(NULL);
	_exit(ret);
}

enum lab_child_end lab_child_wait(pid_t pid, long long deadline_ms, int *code)
{
	int st;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			lab_die("waitpid %d: " LAB_ERR_FMT, (int)pid,
				LAB_ERR_ARGS(errno));
		if (lab_now_ms() >= deadline_ms)
			return LAB_CHILD_TIMEOUT;
		lab_sleep_ms(LAB_CHILD_POLL_MS);
	}
	if (WIFSIGNALED(st)) {
		*code = WTERMSIG(st);
		return LAB_CHILD_SIGNALED;
	}
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	return LAB_CHILD_EXITED;
}

int lab_child_kill(pid_t pid, int grace_ms)
{
	int code;

	kill(pid, SIGKILL);
	return lab_child_wait(pid, lab_now_ms() + grace_ms, &code) !=
	       LAB_CHILD_TIMEOUT;
}

enum lab_child_end lab_child_run(const char *what, int (*fn)(void *),
				 void *arg, unsigned int timeout_s, int *code)
{
	long long start = lab_now_ms();
	pid_t pid = lab_child_start(fn, arg);
	enum lab_child_end end;

	end = lab_child_wait(pid, start + 1000LL * timeout_s, code);
	switch (end) {
	case LAB_CHILD_EXITED:
		break;
	case LAB_CHILD_SIGNALED:
		printf("%s: child %d killed by signal %d (%s) after %lld ms\n",
		       what, (int)pid, *code, strsignal(*code),
		       lab_now_ms() - start);
		break;
	case LAB_CHILD_TIMEOUT:
		printf("%s: child %d still running after %u s; killing it\n",
		       what, (int)pid, timeout_s);
		if (!lab_child_kill(pid, 2000))
			printf("%s: child %d did not die (stuck in the kernel)\n",
			       what, (int)pid);
		break;
	}
	fflush(stdout);
	return end;
}
