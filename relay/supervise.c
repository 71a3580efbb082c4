/*
 * supervise.c - fork, watch and stop the relay's worker processes.
 *
 * NOTES
 *
 * Signals (common/sig.c). The handlers only count signals and write one
 * byte to a self-pipe; the loop wakes on the pipe (or every LOOP_TICK_MS)
 * and handles, in this order: shutdown requests, reloads (SIGHUP: the
 * supervisor's own, then forwarded to every worker and the metrics
 * process, each of which reloads and logs relay.reload), child exits, then
 * restarts that are due. Nothing is logged from a handler.
 *
 * Fork. stdio is flushed before fork; signals are blocked across it so the
 * child makes its own signal pipe and counts (ob_sig_init) before any
 * signal can reach it. A
 * worker asks the kernel for SIGTERM when the supervisor dies
 * (PR_SET_PDEATHSIG), so a killed supervisor does not leave workers behind.
 *
 * Shutdown. The first SIGTERM/SIGINT forwards SIGTERM to every worker and
 * starts the grace deadline; a worker stops claiming, finishes or cuts its
 * in-flight frames, releases (fenced) what it never sent and exits 0. A
 * second signal, or the deadline, sends SIGKILL to what is left.
 *
 * Metrics. With --metrics the supervisor forks the metrics process first
 * and waits for it to report that it is listening (a port in use is a
 * start-up error); later deaths are restarted with the workers' backoff.
 * The supervisor itself never starts nng. Each tick it folds the workers'
 * live rows into the gauges (relay_metrics_fold) and clears the row of a
 * worker that exited. The metrics process is stopped after the workers, so
 * a shutdown can be watched to the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/backoff.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/reload.h"
#include "outbox/sig.h"
#include "metrics_serve.h"
#include "supervise.h"
#include "worker.h"

#define LOOP_TICK_MS 100

/* One child process: a worker or the metrics process. */
enum child_kind { CHILD_WORKER, CHILD_METRICS };

struct child {
	enum child_kind kind;
	int index;              /* the worker's number (-1: the metrics process) */
	pid_t pid;              /* 0 = not running */
	int64_t started_ms;
	int64_t restart_at_ms;  /* when pid == 0 (and running): next start */
	struct ob_backoff backoff; /* jittered: workers that died together restart apart */
	unsigned restarts;
};

/* The supervisor's state, one transition function (transition) moving it
 * on; PostgreSQL's postmaster and its pmState are the model:
 *   RUN   the children run; one that dies is started again after its backoff
 *   STOP  the workers were sent SIGTERM and the grace runs; nothing restarts
 *   KILL  a second stop signal, or the grace ran out: SIGKILL to the workers
 * The loop ends once no worker is left in STOP or KILL; the metrics process
 * is stopped last. */
enum sup_state { SUP_RUN, SUP_STOP, SUP_KILL };

struct sup {
	const struct relay_config *cfg;
	struct relay_shared *shared;
	struct child *children;  /* the workers 0..nworkers-1, then the metrics process */
	int nworkers, nchildren;
	enum sup_state state;
	int64_t deadline_ms;     /* in STOP: the end of the grace */
	bool unclean;            /* a worker was killed or did not exit 0 */
	bool protocol_stop;      /* a worker found the schema does not serve it */
};

/* In a child just forked: its own signal pipe and counts, then the
 * signals the supervisor blocked across the fork. */
static void
child_signals(const sigset_t *old)
{
	char err[256];
	if (ob_sig_init("outbox-relay", err, sizeof(err)) != OB_OK) {
		ob_error("relay.child.signals_failed", "err=%s", err);
		_exit(1);
	}
	sigprocmask(SIG_SETMASK, old, NULL);
}

/* Signals blocked across a fork. */
static void
block_for_fork(sigset_t *old)
{
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGCHLD);
	sigprocmask(SIG_BLOCK, &block, old);
}

/* In the child: become a worker and never return. */
static _Noreturn void
worker_main(const struct relay_config *cfg, int index, struct relay_shared *shared,
    pid_t supervisor, const sigset_t *old)
{
	ob_log_set_pid();
	child_signals(old);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != supervisor)
		kill(getpid(), SIGTERM); /* the supervisor died while we forked */
	int code = relay_worker_run(cfg, index, ob_sig_stop_flag(), shared);
	nng_fini();
	fflush(NULL);
	exit(code);
}

/* In the child: become the metrics process and never return. */
static _Noreturn void
metrics_main(const struct relay_config *cfg, struct relay_shared *shared,
    pid_t supervisor, const sigset_t *old, int report_fd)
{
	ob_log_set_pid();
	child_signals(old);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != supervisor)
		kill(getpid(), SIGTERM);
	int code = relay_metrics_serve(cfg->metrics, shared->metrics.reg, cfg->reload,
	    report_fd);
	nng_fini();
	fflush(NULL);
	exit(code);
}

static void
describe_status(int st, char *out, size_t len)
{
	if (WIFEXITED(st))
		snprintf(out, len, "exit:%d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(out, len, "signal:%d", WTERMSIG(st));
	else
		snprintf(out, len, "unknown:%d", st);
}

static const char *
kind_name(enum child_kind k)
{
	return k == CHILD_WORKER ? "worker" : "metrics";
}

/* Wait up to wait_ms for the metrics process's one line on fd: true for
 * "OK <port>", else logged. */
static bool
metrics_reported(const struct relay_config *cfg, int fd, int wait_ms)
{
	char line[600] = "";
	size_t got = 0;
	int64_t end = ob_mono_ms() + wait_ms;
	while (got < sizeof(line) - 1 && strchr(line, '\n') == NULL) {
		int64_t left = end - ob_mono_ms();
		struct pollfd pfd = { fd, POLLIN, 0 };
		if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
			break;
		ssize_t r = read(fd, line + got, sizeof(line) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		line[got] = '\0';
	}
	if (strncmp(line, "OK ", 3) == 0)
		return true;
	char q[700];
	line[strcspn(line, "\n")] = '\0';
	ob_error("relay.metrics.start_failed", "addr=%s err=%s", cfg->metrics,
	    ob_log_q(line[0] != '\0' ? line : "no report from the metrics process in time",
	        q, sizeof(q)));
	return false;
}

/* Fork c. The metrics process reports on a pipe once it listens; with
 * wait_ms > 0 (at start) wait that long for it, and a failure is fatal.
 * false (logged) when the child is not running. */
static bool
start_child(struct sup *s, struct child *c, int wait_ms)
{
	const struct relay_config *cfg = s->cfg;
	int rep[2] = { -1, -1 };
	if (c->kind == CHILD_METRICS && pipe(rep) != 0) {
		ob_error("relay.metrics.fork_failed", "err=%s", strerror(errno));
		return false;
	}
	sigset_t old;
	block_for_fork(&old);
	fflush(NULL);
	pid_t supervisor = getpid();
	pid_t pid = fork();
	if (pid == 0 && c->kind == CHILD_WORKER)
		worker_main(cfg, c->index, s->shared, supervisor, &old);
	if (pid == 0) {
		close(rep[0]);
		metrics_main(cfg, s->shared, supervisor, &old, rep[1]);
	}
	int saved = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (rep[1] >= 0)
		close(rep[1]);
	if (pid < 0) {
		if (rep[0] >= 0)
			close(rep[0]);
		if (c->kind == CHILD_WORKER)
			ob_error("relay.worker.fork_failed", "worker=%d err=%s", c->index,
			    strerror(saved));
		else
			ob_error("relay.metrics.fork_failed", "err=%s", strerror(saved));
		return false;
	}
	c->pid = pid;
	c->started_ms = ob_mono_ms();
	if (c->kind == CHILD_WORKER) {
		ob_info("relay.worker.forked", "worker=%d pid=%d restarts=%u", c->index, (int)pid,
		    c->restarts);
		return true;
	}
	ob_info("relay.metrics.forked", "pid=%d addr=%s restarts=%u", (int)pid, cfg->metrics,
	    c->restarts);
	bool ok = wait_ms <= 0 || metrics_reported(cfg, rep[0], wait_ms);
	close(rep[0]);
	if (!ok) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		c->pid = 0;
	}
	return ok;
}

/* After the workers: stop the metrics process, SIGKILL after a while:
 * RELAY_METRICS_STOP_MS, or --shutdown-grace when that is longer (the
 * user allowed that much; an exit that runs a leak check, as under ASan on
 * a busy machine, can take seconds). */
static void
stop_metrics(struct child *c, int64_t grace_ms)
{
	if (c == NULL || c->pid <= 0)
		return;
	kill(c->pid, SIGTERM);
	kill(c->pid, SIGCONT); /* a stopped one could not handle SIGTERM */
	int64_t end = ob_mono_ms() + (grace_ms > RELAY_METRICS_STOP_MS ? grace_ms : RELAY_METRICS_STOP_MS);
	int st = 0;
	pid_t r;
	while ((r = waitpid(c->pid, &st, WNOHANG)) == 0 && ob_mono_ms() < end)
		ob_sleep_ms(20);
	if (r == 0) {
		ob_warn("relay.metrics.kill", "pid=%d reason=%s", (int)c->pid, "stop_timeout");
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &st, 0);
	}
	char how[32];
	describe_status(st, how, sizeof(how));
	ob_info("relay.metrics.exited", "pid=%d status=%s shutdown=1", (int)c->pid, how);
	c->pid = 0;
}

static void
signal_workers(struct sup *s, int sig)
{
	for (int i = 0; i < s->nworkers; i++)
		if (s->children[i].pid > 0)
			kill(s->children[i].pid, sig);
}

static int
live_workers(const struct sup *s)
{
	int live = 0;
	for (int i = 0; i < s->nworkers; i++)
		live += s->children[i].pid > 0;
	return live;
}

/* The one place the state changes. why: what caused it, for the log. */
static void
transition(struct sup *s, enum sup_state to, const char *why)
{
	switch (to) {
	case SUP_RUN:
		break;
	case SUP_STOP:
		if (strcmp(why, "signal") == 0)
			ob_info("relay.shutdown.start", "workers=%d grace_ms=%" PRId64,
			    live_workers(s), s->cfg->shutdown_grace_ms);
		s->deadline_ms = ob_mono_ms() + s->cfg->shutdown_grace_ms;
		signal_workers(s, SIGTERM);
		break;
	case SUP_KILL:
		ob_warn("relay.shutdown.kill", "workers=%d reason=%s", live_workers(s), why);
		signal_workers(s, SIGKILL);
		s->unclean = true;
		break;
	}
	s->state = to;
}

/* A child exited with wait status st: in RUN it starts again after its
 * backoff (a worker refused by the schema stops them all instead); while
 * stopping it is only counted. */
static void
reap(struct sup *s, pid_t pid, int st, int64_t now)
{
	struct child *c = NULL;
	for (int i = 0; i < s->nchildren && c == NULL; i++)
		if (s->children[i].pid == pid)
			c = &s->children[i];
	if (c == NULL)
		return;
	c->pid = 0;
	if (c->kind == CHILD_WORKER)
		relay_metrics_worker_gone(&s->shared->live[c->index]);
	char how[32], who[32] = "";
	describe_status(st, how, sizeof(how));
	if (c->kind == CHILD_WORKER)
		snprintf(who, sizeof(who), "worker=%d ", c->index);
	char event[32];
	snprintf(event, sizeof(event), "relay.%s.exited", kind_name(c->kind));
	bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (s->state != SUP_RUN) {
		if (c->kind == CHILD_WORKER && !clean)
			s->unclean = true;
		ob_info(event, "%spid=%d status=%s shutdown=1", who, (int)pid, how);
		return;
	}
	if (c->kind == CHILD_WORKER && WIFEXITED(st) && WEXITSTATUS(st) == RELAY_EXIT_PROTOCOL) {
		/* The schema no longer serves this relay (or not yet): restarting
		 * cannot help. Stop every worker cleanly. */
		ob_error("relay.protocol.stop", "worker=%d pid=%d protocol=%d"
		    " hint=\"upgrade the relay, or run outboxctl migrate\"", c->index, (int)pid,
		    RELAY_PROTOCOL);
		s->protocol_stop = true;
		transition(s, SUP_STOP, "protocol");
		return;
	}
	if (now - c->started_ms >= RELAY_RESTART_RESET_MS)
		ob_backoff_reset(&c->backoff);
	int64_t wait = ob_backoff_next(&c->backoff);
	c->restart_at_ms = now + wait;
	ob_warn(event, "%spid=%d status=%s restart_in_ms=%" PRId64, who, (int)pid, how, wait);
}

int
relay_supervise(const struct relay_config *cfg, struct relay_shared *shared)
{
	struct sup s = { cfg, shared, NULL, (int)cfg->workers, (int)cfg->workers, SUP_RUN, 0,
		false, false };
	bool metrics_on = cfg->metrics != NULL && cfg->metrics[0] != '\0';
	if (metrics_on)
		s.nchildren++;
	char err[256];
	if ((s.children = calloc((size_t)s.nchildren, sizeof(*s.children))) == NULL) {
		ob_error("relay.supervisor.failed", "err=%s", "out of memory");
		return 1;
	}
	if (ob_sig_init("outbox-relay", err, sizeof(err)) != OB_OK ||
	    ob_sig_watch(SIGCHLD, err, sizeof(err)) != OB_OK) {
		ob_error("relay.supervisor.failed", "err=%s", err);
		free(s.children);
		return 1;
	}
	for (int i = 0; i < s.nchildren; i++) {
		struct child *c = &s.children[i];
		c->kind = i < s.nworkers ? CHILD_WORKER : CHILD_METRICS;
		c->index = i < s.nworkers ? i : -1;
		ob_backoff_init(&c->backoff, RELAY_RESTART_MIN_MS, RELAY_RESTART_MAX_MS);
	}
	struct child *metrics = metrics_on ? &s.children[s.nworkers] : NULL;

	ob_info("relay.supervisor.started", "workers=%d shutdown_grace_ms=%" PRId64, s.nworkers,
	    cfg->shutdown_grace_ms);
	/* the metrics process first: a port in use is a start-up error */
	if (metrics != NULL && !start_child(&s, metrics, RELAY_METRICS_START_MS)) {
		free(s.children);
		return 1;
	}
	for (int i = 0; i < s.nworkers; i++)
		if (!start_child(&s, &s.children[i], 0))
			s.children[i].restart_at_ms = ob_mono_ms() +
			    ob_backoff_next(&s.children[i].backoff);

	unsigned reloads = 0;
	for (;;) {
		ob_sig_wait(LOOP_TICK_MS);
		int64_t now = ob_mono_ms();
		unsigned stops = ob_sig_stops();

		/* 1. Shutdown requests. */
		if (stops > 0 && s.state == SUP_RUN)
			transition(&s, SUP_STOP, "signal");
		if (s.state == SUP_STOP && (stops > 1 || now >= s.deadline_ms) && live_workers(&s) > 0)
			transition(&s, SUP_KILL, stops > 1 ? "second_signal" : "grace_expired");

		/* 2. Reloads: the supervisor's own, then each child's. */
		if (ob_sig_reloads() != reloads) {
			reloads = ob_sig_reloads();
			(void)ob_reload_run(cfg->reload);
			for (int i = 0; i < s.nchildren; i++)
				if (s.children[i].pid > 0)
					kill(s.children[i].pid, SIGHUP);
		}

		/* 3. Child exits. */
		pid_t pid;
		int st;
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
			reap(&s, pid, st, now);
		relay_metrics_fold(&shared->metrics, shared->live, s.nworkers);
		if (s.state != SUP_RUN) {
			if (live_workers(&s) == 0)
				break;
			continue;
		}

		/* 4. Restarts that are due, the metrics process's too. */
		for (int i = 0; i < s.nchildren; i++) {
			struct child *c = &s.children[i];
			if (c->pid == 0 && now >= c->restart_at_ms) {
				c->restarts++;
				if (!start_child(&s, c, 0))
					c->restart_at_ms = now + ob_backoff_next(&c->backoff);
			}
		}
	}
	relay_metrics_fold(&shared->metrics, shared->live, s.nworkers);
	stop_metrics(metrics, s.cfg->shutdown_grace_ms);
	relay_totals_log("relay.totals", "", &shared->totals);
	ob_info("relay.supervisor.stopped", "clean=%d", s.unclean ? 0 : 1);
	free(s.children);
	return s.protocol_stop ? RELAY_EXIT_PROTOCOL : s.unclean ? 1 : 0;
}
