/*
 * proc.h - child processes that are the real programs, each in its own
 * process group with its output in its own log file: the fault matrix's
 * cells (tools/fault-matrix) and the web view's guided demonstration
 * (ctl/web_demo_steps.c) start relays and consumers with it.
 *
 * A process group per child lets the runner kill a relay together with any
 * worker processes it forked, and nothing else. Not thread-safe; one
 * runner (thread) owns all its children.
 */
#ifndef OUTBOX_PROC_H
#define OUTBOX_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define OB_ARGV_MAX 48
#define OB_ARG_MAX 512

/* An argument vector built up one flag at a time (fixed storage). */
struct ob_argv {
	int n;
	char store[OB_ARGV_MAX][OB_ARG_MAX];
	char *argv[OB_ARGV_MAX + 1];
};

/* Start a vector with the program name. */
void ob_argv_init(struct ob_argv *a, const char *program);

/* Append one argument (truncated at OB_ARG_MAX - 1; dropped when full:
 * ob_argv_full tells). */
void ob_argv_add(struct ob_argv *a, const char *arg);
void ob_argv_add2(struct ob_argv *a, const char *flag, const char *value);
bool ob_argv_full(const struct ob_argv *a);

struct ob_proc {
	pid_t pid;          /* 0 when not running / reaped */
	int exit_code;      /* exit status, 128 + signal, valid after exit */
	char log[512];      /* the log file (stdout and stderr) */
};

/* Start bindir/argv[0] as a process group leader, output to log_path
 * (truncated), by posix_spawn (safe in a threaded process). Returns OB_OK
 * or OB_EINVAL (could not be started, e.g. no such program) with err. */
int ob_proc_start(struct ob_proc *p, const char *bindir, struct ob_argv *a,
    const char *log_path, char *err, size_t errlen);

/* True while p runs; reaps it (and fills exit_code) once it has exited. */
bool ob_proc_alive(struct ob_proc *p);

/* Send sig to p's whole process group. */
void ob_proc_signal(struct ob_proc *p, int sig);

/* Send sig to p's leader only (a supervisor forwards it to its workers). */
void ob_proc_signal_leader(struct ob_proc *p, int sig);

/* SIGTERM the group, wait up to grace_ms for the leader, then SIGKILL the
 * group and reap. Safe on a process that already exited. */
void ob_proc_stop(struct ob_proc *p, int grace_ms);

/* Read a whole file into a malloc'ed NUL-terminated string (NULL if
 * absent). Release with free. */
char *ob_read_file(const char *path);

/* Number of log lines in path with event=<event>. */
int ob_log_count(const char *path, const char *event);

/* Sum of the integer field key=N over the lines of path with
 * event=<event>. */
int64_t ob_log_sum(const char *path, const char *event, const char *key);

#endif
