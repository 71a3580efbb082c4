/*
 * sig.c - the one signal layer (sig.h): counts per signal, a self-pipe,
 * the immediate exit on a second stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/sig.h"

#define WATCH_MAX 65 /* signal numbers 1..64 */

static atomic_uint counts[WATCH_MAX];
static bool watched[WATCH_MAX];
static atomic_bool exit_on_second;
static volatile sig_atomic_t stop_flag;
static int pipe_fd[2] = { -1, -1 };
static char exit_line[160];
static size_t exit_line_len;

static void
on_signal(int sig)
{
	int saved = errno;
	if (sig > 0 && sig < WATCH_MAX)
		atomic_fetch_add(&counts[sig], 1);
	if (sig == SIGTERM || sig == SIGINT) {
		if (stop_flag == 0)
			stop_flag = sig;
		if (atomic_load(&exit_on_second) &&
		    atomic_load(&counts[SIGTERM]) + atomic_load(&counts[SIGINT]) >= 2) {
			(void)!write(STDERR_FILENO, exit_line, exit_line_len);
			_exit(OB_SIG_EXIT_SECOND);
		}
	}
	if (pipe_fd[1] >= 0)
		(void)!write(pipe_fd[1], "s", 1);
	errno = saved;
}

static int
handle(int sig, void (*fn)(int), char *err, size_t errlen)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = fn == on_signal ? SA_RESTART : 0;
	/* one handler at a time: the stop count is read whole */
	sigfillset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0) {
		snprintf(err, errlen, "sigaction(%d): %s", sig, strerror(errno));
		return OB_EINVAL;
	}
	return OB_OK;
}

int
ob_sig_init(const char *program, char *err, size_t errlen)
{
	for (int s = 1; s < WATCH_MAX; s++) {
		if (watched[s] && s != SIGTERM && s != SIGINT && s != SIGHUP)
			(void)handle(s, SIG_DFL, err, errlen);
		watched[s] = false;
		atomic_store(&counts[s], 0);
	}
	atomic_store(&exit_on_second, false);
	stop_flag = 0;
	for (int i = 0; i < 2; i++) {
		if (pipe_fd[i] >= 0)
			close(pipe_fd[i]);
		pipe_fd[i] = -1;
	}
	int fds[2];
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
		snprintf(err, errlen, "signal pipe: %s", strerror(errno));
		return OB_EINVAL;
	}
	pipe_fd[0] = fds[0];
	pipe_fd[1] = fds[1];
	int n = snprintf(exit_line, sizeof(exit_line),
	    "%s: a second stop signal: exiting now, without the graceful stop\n", program);
	exit_line_len = n < 0 ? 0 : (size_t)n >= sizeof(exit_line) ? sizeof(exit_line) - 1
	                                                           : (size_t)n;
	int rc;
	if ((rc = handle(SIGPIPE, SIG_IGN, err, errlen)) != OB_OK)
		return rc;
	const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		if ((rc = handle(sigs[i], on_signal, err, errlen)) != OB_OK)
			return rc;
		watched[sigs[i]] = true;
	}
	return OB_OK;
}

int
ob_sig_watch(int sig, char *err, size_t errlen)
{
	if (sig <= 0 || sig >= WATCH_MAX) {
		snprintf(err, errlen, "signal %d cannot be watched", sig);
		return OB_EINVAL;
	}
	int rc = handle(sig, on_signal, err, errlen);
	if (rc == OB_OK)
		watched[sig] = true;
	return rc;
}

void
ob_sig_exit_on_second_stop(void)
{
	atomic_store(&exit_on_second, true);
}

unsigned
ob_sig_stops(void)
{
	return atomic_load(&counts[SIGTERM]) + atomic_load(&counts[SIGINT]);
}

unsigned
ob_sig_reloads(void)
{
	return atomic_load(&counts[SIGHUP]);
}

unsigned
ob_sig_count(int sig)
{
	return sig > 0 && sig < WATCH_MAX ? atomic_load(&counts[sig]) : 0;
}

volatile sig_atomic_t *
ob_sig_stop_flag(void)
{
	return &stop_flag;
}

int
ob_sig_fd(void)
{
	return pipe_fd[0];
}

void
ob_sig_drain(void)
{
	char buf[64];
	while (pipe_fd[0] >= 0 && read(pipe_fd[0], buf, sizeof(buf)) > 0)
		;
}

bool
ob_sig_wait(int64_t ms)
{
	struct pollfd p = { pipe_fd[0], POLLIN, 0 };
	int n = poll(&p, 1, ms < 0 ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms);
	if (n > 0)
		ob_sig_drain();
	return n > 0 || (n < 0 && errno == EINTR);
}
