/*
 * proc.c - start, watch and stop child programs (a fault-matrix cell's, the
 * web demo's), and read their logs (see proc.h).
 *
 * Every child becomes the leader of its own process group, so stopping a
 * relay also stops the workers it forked; the runner never signals a
 * process it did not start.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/proc.h"

void
ob_argv_init(struct ob_argv *a, const char *program)
{
	a->n = 0;
	a->argv[0] = NULL;
	ob_argv_add(a, program);
}

void
ob_argv_add(struct ob_argv *a, const char *arg)
{
	if (a->n >= OB_ARGV_MAX) {
		a->n = OB_ARGV_MAX + 1; /* remembered as full */
		return;
	}
	snprintf(a->store[a->n], OB_ARG_MAX, "%s", arg);
	a->argv[a->n] = a->store[a->n];
	a->argv[++a->n] = NULL;
}

void
ob_argv_add2(struct ob_argv *a, const char *flag, const char *value)
{
	ob_argv_add(a, flag);
	ob_argv_add(a, value);
}

bool
ob_argv_full(const struct ob_argv *a)
{
	return a->n > OB_ARGV_MAX;
}

int
ob_proc_start(struct ob_proc *p, const char *bindir, struct ob_argv *a,
    const char *log_path, char *err, size_t errlen)
{
	char path[1024];
	if (ob_argv_full(a)) {
		snprintf(err, errlen, "too many arguments for %s", a->argv[0]);
		return OB_EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s", bindir, a->argv[0]);
	snprintf(p->log, sizeof(p->log), "%s", log_path);
	p->exit_code = -1;
	fflush(NULL);
	/* posix_spawn, not fork: safe in a threaded caller (the web view's
	 * demonstration, ctl/web_demo.c), nothing runs between fork and exec. */
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	pid_t pid;
	int rc;
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0) {
		snprintf(err, errlen, "posix_spawn %s: %s", path, strerror(rc));
		return OB_EINVAL;
	}
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rc = posix_spawn(&pid, path, &fa, &at, a->argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc != 0) {
		snprintf(err, errlen, "posix_spawn %s: %s", path, strerror(rc));
		return OB_EINVAL;
	}
	p->pid = pid;
	return OB_OK;
}

bool
ob_proc_alive(struct ob_proc *p)
{
	if (p->pid <= 0)
		return false;
	int st;
	pid_t r = waitpid(p->pid, &st, WNOHANG);
	if (r == 0)
		return true;
	if (r == p->pid)
		p->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	/* The leader is gone; its forked workers (same group) may not be. */
	kill(-p->pid, SIGKILL);
	p->pid = 0;
	return false;
}

void
ob_proc_signal(struct ob_proc *p, int sig)
{
	if (p->pid > 0)
		kill(-p->pid, sig);
}

void
ob_proc_signal_leader(struct ob_proc *p, int sig)
{
	if (p->pid > 0)
		kill(p->pid, sig);
}

void
ob_proc_stop(struct ob_proc *p, int grace_ms)
{
	if (p->pid <= 0)
		return;
	ob_proc_signal(p, SIGTERM);
	int64_t end = ob_mono_ms() + grace_ms;
	while (ob_proc_alive(p) && ob_mono_ms() < end)
		ob_sleep_ms(10);
	if (p->pid > 0) {
		ob_proc_signal(p, SIGKILL);
		int st;
		if (waitpid(p->pid, &st, 0) == p->pid)
			p->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		p->pid = 0;
	}
}

char *
ob_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	size_t cap = 8192, len = 0, n;
	char *buf = malloc(cap);
	while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				free(buf);
				buf = NULL;
			} else {
				buf = nb;
				cap *= 2;
			}
		}
	}
	fclose(f);
	if (buf != NULL)
		buf[len] = '\0';
	return buf;
}

/* Over the lines of path that carry " event=<event>": their number (key
 * NULL) or the sum of their integer field key=N. */
static int64_t
scan_lines(const char *path, const char *event, const char *key)
{
	char *text = ob_read_file(path);
	if (text == NULL)
		return 0;
	char needle[160], field[96];
	snprintf(needle, sizeof(needle), " event=%s ", event);
	snprintf(field, sizeof(field), " %s=", key ? key : "");
	int64_t total = 0;
	for (char *line = text; line != NULL && *line;) {
		char *nl = strchr(line, '\n');
		if (nl != NULL)
			*nl = '\0';
		/* The event may also end the line. */
		size_t ll = strlen(line), el = strlen(needle) - 1;
		bool hit = strstr(line, needle) != NULL ||
		    (ll >= el && strncmp(line + ll - el, needle, el) == 0);
		if (hit) {
			if (key == NULL)
				total++;
			else {
				char *f = strstr(line, field);
				if (f != NULL)
					total += strtoll(f + strlen(field), NULL, 10);
			}
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
	free(text);
	return total;
}

int
ob_log_count(const char *path, const char *event)
{
	return (int)scan_lines(path, event, NULL);
}

int64_t
ob_log_sum(const char *path, const char *event, const char *key)
{
	return scan_lines(path, event, key);
}
