/*
 * proc.h - the fault matrix's child processes: the real programs, each in
 * its own process group with its output in its own log file.
 *
 * A process group per child lets the runner kill a relay together with any
 * worker processes it forked, and nothing else. Not thread-safe; one
 * runner (thread) owns all its children. Also used by the web view's
 * demonstration (ctl/web_demo.c) for its short-lived relays.
 */
#ifndef OUTBOX_FM_PROC_H
#define OUTBOX_FM_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FM_ARGV_MAX 48
#define FM_ARG_MAX 512

/* An argument vector built up one flag at a time (fixed storage). */
struct fm_argv {
	int n;
	char store[FM_ARGV_MAX][FM_ARG_MAX];
	char *argv[FM_ARGV_MAX + 1];
};

/* Start a vector with the program name. */
void fm_argv_init(struct fm_argv *a, const char *program);

/* Append one argument (truncated at FM_ARG_MAX - 1; dropped when full:
 * fm_argv_full tells). */
void fm_argv_add(struct fm_argv *a, const char *arg);
void fm_argv_add2(struct fm_argv *a, const char *flag, const char *value);
bool fm_argv_full(const struct fm_argv *a);

struct fm_proc {
	pid_t pid;          /* 0 when not running / reaped */
	int exit_code;      /* exit status, 128 + signal, valid after exit */
	char log[512];      /* the log file (stdout and stderr) */
};

/* Start bindir/argv[0] as a process group leader, output to log_path
 * (truncated), by posix_spawn (safe in a threaded process). Returns OB_OK
 * or OB_EINVAL (could not be started, e.g. no such program) with err. */
int fm_proc_start(struct fm_proc *p, const char *bindir, struct fm_argv *a,
    const char *log_path, char *err, size_t errlen);

/* True while p runs; reaps it (and fills exit_code) once it has exited. */
bool fm_proc_alive(struct fm_proc *p);

/* Send sig to p's whole process group. */
void fm_proc_signal(struct fm_proc *p, int sig);

/* Send sig to p's leader only (a supervisor forwards it to its workers). */
void fm_proc_signal_leader(struct fm_proc *p, int sig);

/* SIGTERM the group, wait up to grace_ms for the leader, then SIGKILL the
 * group and reap. Safe on a process that already exited. */
void fm_proc_stop(struct fm_proc *p, int grace_ms);

/* Read a whole file into a malloc'ed NUL-terminated string (NULL if
 * absent). Release with free. */
char *fm_read_file(const char *path);

/* Number of log lines in path with event=<event>. */
int fm_log_count(const char *path, const char *event);

/* Sum of the integer field key=N over the lines of path with
 * event=<event>. */
int64_t fm_log_sum(const char *path, const char *event, const char *key);

#endif
