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
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/reload.h"
#include "outbox/sig.h"
#include "metrics_serve.h"
#include "supervise.h"
#include "worker.h"

#define LOOP_TICK_MS 100

struct slot {
	pid_t pid;              /* 0 = not running */
	int64_t started_ms;
	int64_t restart_at_ms;  /* when pid == 0: next start */
	int64_t backoff_ms;
	unsigned restarts;
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

static void describe_status(int st, char *out, size_t len);

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

/* Fork the metrics process. With wait_ms > 0, wait that long for it to
 * report that it listens: false (logged) when it could not. */
static bool
start_metrics(const struct relay_config *cfg, struct slot *s,
    struct relay_shared *shared, int wait_ms)
{
	int rep[2];
	if (pipe(rep) != 0) {
		ob_error("relay.metrics.fork_failed", "err=%s", strerror(errno));
		return false;
	}
	sigset_t old;
	block_for_fork(&old);
	fflush(NULL);
	pid_t supervisor = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		close(rep[0]);
		metrics_main(cfg, shared, supervisor, &old, rep[1]);
	}
	int saved = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(rep[1]);
	if (pid < 0) {
		close(rep[0]);
		ob_error("relay.metrics.fork_failed", "err=%s", strerror(saved));
		return false;
	}
	s->pid = pid;
	s->started_ms = ob_mono_ms();
	ob_info("relay.metrics.forked", "pid=%d addr=%s restarts=%u", (int)pid, cfg->metrics,
	    s->restarts);
	if (wait_ms <= 0) {
		close(rep[0]);
		return true;
	}
	char line[600] = "";
	size_t got = 0;
	int64_t end = ob_mono_ms() + wait_ms;
	while (got < sizeof(line) - 1 && strchr(line, '\n') == NULL) {
		int64_t left = end - ob_mono_ms();
		struct pollfd pfd = { rep[0], POLLIN, 0 };
		if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
			break;
		ssize_t r = read(rep[0], line + got, sizeof(line) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		line[got] = '\0';
	}
	close(rep[0]);
	if (strncmp(line, "OK ", 3) == 0)
		return true;
	char q[700];
	line[strcspn(line, "\n")] = '\0';
	ob_error("relay.metrics.start_failed", "addr=%s err=%s", cfg->metrics,
	    ob_log_q(line[0] != '\0' ? line : "no report from the metrics process in time",
	        q, sizeof(q)));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	s->pid = 0;
	return false;
}

/* After the workers: stop the metrics process, SIGKILL after a while. */
static void
stop_metrics(struct slot *s)
{
	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	kill(s->pid, SIGCONT); /* a stopped one could not handle SIGTERM */
	int64_t end = ob_mono_ms() + RELAY_METRICS_STOP_MS;
	int st = 0;
	pid_t r;
	while ((r = waitpid(s->pid, &st, WNOHANG)) == 0 && ob_mono_ms() < end) {
		struct timespec ts = { 0, 20 * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (r == 0) {
		ob_warn("relay.metrics.kill", "pid=%d reason=%s", (int)s->pid, "stop_timeout");
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &st, 0);
	}
	char how[32];
	describe_status(st, how, sizeof(how));
	ob_info("relay.metrics.exited", "pid=%d status=%s shutdown=1", (int)s->pid, how);
	s->pid = 0;
}

static bool
start_worker(const struct relay_config *cfg, struct slot *s, int index,
    struct relay_shared *shared)
{
	sigset_t old;
	block_for_fork(&old);
	fflush(NULL);
	pid_t supervisor = getpid();
	pid_t pid = fork();
	if (pid == 0)
		worker_main(cfg, index, shared, supervisor, &old);
	int saved = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		ob_error("relay.worker.fork_failed", "worker=%d err=%s", index, strerror(saved));
		return false;
	}
	s->pid = pid;
	s->started_ms = ob_mono_ms();
	ob_info("relay.worker.forked", "worker=%d pid=%d restarts=%u", index, (int)pid,
	    s->restarts);
	return true;
}

static void
signal_all(struct slot *slots, int n, int sig)
{
	for (int i = 0; i < n; i++)
		if (slots[i].pid > 0)
			kill(slots[i].pid, sig);
}

static int
live_workers(const struct slot *slots, int n)
{
	int live = 0;
	for (int i = 0; i < n; i++)
		live += slots[i].pid > 0;
	return live;
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

int
relay_supervise(const struct relay_config *cfg, struct relay_shared *shared)
{
	int n = (int)cfg->workers;
	struct slot *slots = calloc((size_t)n, sizeof(*slots));
	char err[256];
	if (slots == NULL) {
		ob_error("relay.supervisor.failed", "err=%s", "out of memory");
		return 1;
	}
	if (ob_sig_init("outbox-relay", err, sizeof(err)) != OB_OK ||
	    ob_sig_watch(SIGCHLD, err, sizeof(err)) != OB_OK) {
		ob_error("relay.supervisor.failed", "err=%s", err);
		free(slots);
		return 1;
	}

	ob_info("relay.supervisor.started", "workers=%d shutdown_grace_ms=%" PRId64, n,
	    cfg->shutdown_grace_ms);
	bool metrics_on = cfg->metrics != NULL && cfg->metrics[0] != '\0';
	struct slot msl = { 0, 0, 0, RELAY_RESTART_MIN_MS, 0 };
	if (metrics_on && !start_metrics(cfg, &msl, shared, RELAY_METRICS_START_MS)) {
		free(slots);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		slots[i].backoff_ms = RELAY_RESTART_MIN_MS;
		if (!start_worker(cfg, &slots[i], i, shared))
			slots[i].restart_at_ms = ob_mono_ms() + slots[i].backoff_ms;
	}

	bool shutting_down = false, killed = false, unclean = false, protocol_stop = false;
	int64_t deadline = 0;
	unsigned reloads = 0;
	for (;;) {
		ob_sig_wait(LOOP_TICK_MS);
		int64_t now = ob_mono_ms();
		unsigned stop_signals = ob_sig_stops();

		/* 1. Shutdown requests. */
		if (stop_signals > 0 && !shutting_down) {
			shutting_down = true;
			deadline = now + cfg->shutdown_grace_ms;
			ob_info("relay.shutdown.start", "workers=%d grace_ms=%" PRId64,
			    live_workers(slots, n), cfg->shutdown_grace_ms);
			signal_all(slots, n, SIGTERM);
		}
		if (shutting_down && !killed && (stop_signals > 1 || now >= deadline) &&
		    live_workers(slots, n) > 0) {
			ob_warn("relay.shutdown.kill", "workers=%d reason=%s",
			    live_workers(slots, n), stop_signals > 1 ? "second_signal" : "grace_expired");
			signal_all(slots, n, SIGKILL);
			killed = unclean = true;
		}

		/* 2. Reloads: the supervisor's own, then each child's. */
		if (ob_sig_reloads() != reloads) {
			reloads = ob_sig_reloads();
			(void)ob_reload_run(cfg->reload);
			signal_all(slots, n, SIGHUP);
			if (msl.pid > 0)
				kill(msl.pid, SIGHUP);
		}

		/* 3. Child exits. */
		pid_t pid;
		int st;
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			char how[32];
			describe_status(st, how, sizeof(how));
			if (pid == msl.pid) {
				msl.pid = 0;
				if (now - msl.started_ms >= RELAY_RESTART_RESET_MS)
					msl.backoff_ms = RELAY_RESTART_MIN_MS;
				msl.restart_at_ms = now + msl.backoff_ms;
				ob_warn("relay.metrics.exited", "pid=%d status=%s restart_in_ms=%" PRId64,
				    (int)pid, how, shutting_down ? (int64_t)-1 : msl.backoff_ms);
				msl.backoff_ms = msl.backoff_ms * 2 > RELAY_RESTART_MAX_MS
				    ? RELAY_RESTART_MAX_MS : msl.backoff_ms * 2;
				continue;
			}
			int i;
			for (i = 0; i < n && slots[i].pid != pid; i++)
				;
			if (i == n)
				continue;
			struct slot *s = &slots[i];
			s->pid = 0;
			relay_metrics_worker_gone(&shared->live[i]);
			if (shutting_down) {
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
					unclean = true;
				ob_info("relay.worker.exited", "worker=%d pid=%d status=%s shutdown=1",
				    i, (int)pid, how);
				continue;
			}
			if (WIFEXITED(st) && WEXITSTATUS(st) == RELAY_EXIT_PROTOCOL) {
				/* The schema no longer serves this relay (or not yet):
				 * restarting cannot help. Stop every worker cleanly. */
				ob_error("relay.protocol.stop", "worker=%d pid=%d protocol=%d"
				    " hint=\"upgrade the relay, or run outboxctl migrate\"", i, (int)pid,
				    RELAY_PROTOCOL);
				protocol_stop = true;
				shutting_down = true;
				deadline = now + cfg->shutdown_grace_ms;
				signal_all(slots, n, SIGTERM);
				continue;
			}
			if (now - s->started_ms >= RELAY_RESTART_RESET_MS)
				s->backoff_ms = RELAY_RESTART_MIN_MS;
			s->restart_at_ms = now + s->backoff_ms;
			ob_warn("relay.worker.exited", "worker=%d pid=%d status=%s restart_in_ms=%" PRId64,
			    i, (int)pid, how, s->backoff_ms);
			s->backoff_ms = s->backoff_ms * 2 > RELAY_RESTART_MAX_MS ? RELAY_RESTART_MAX_MS
			                                                         : s->backoff_ms * 2;
		}
		relay_metrics_fold(&shared->metrics, shared->live, n);
		if (shutting_down) {
			if (live_workers(slots, n) == 0)
				break;
			continue;
		}
		if (metrics_on && msl.pid == 0 && now >= msl.restart_at_ms) {
			msl.restarts++;
			if (!start_metrics(cfg, &msl, shared, 0))
				msl.restart_at_ms = now + msl.backoff_ms;
		}

		/* 4. Restarts that are due. */
		for (int i = 0; i < n; i++) {
			struct slot *s = &slots[i];
			if (s->pid == 0 && now >= s->restart_at_ms) {
				s->restarts++;
				if (!start_worker(cfg, s, i, shared))
					s->restart_at_ms = now + s->backoff_ms;
			}
		}
	}
	relay_metrics_fold(&shared->metrics, shared->live, n);
	stop_metrics(&msl);
	relay_totals_log("relay.totals", "", &shared->totals);
	ob_info("relay.supervisor.stopped", "clean=%d", unclean ? 0 : 1);
	free(slots);
	return protocol_stop ? RELAY_EXIT_PROTOCOL : unclean ? 1 : 0;
}
