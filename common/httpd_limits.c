/*
 * httpd_limits.c - the limits the HTTP server keeps, and what it says at
 * each: the limits' check, the 503 at the connection cap when no
 * connection is idle, the descriptor limit a program raises before it
 * serves (ob_httpd_reserve_fds), and the counters and log lines of the
 * connections cut off. The loop (httpd_loop.c) scans the deadlines and
 * evicts at the cap; the state machine (httpd_conn.c) says what a passed
 * deadline means in each state.
 *
 * Never: log per connection at the cap or per descriptor shortage (at
 * most one warning every OB_HTTPD_LOG_EVERY_MS), change a connection's
 * state but through httpd_conn.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpd_int.h"
#include "outbox/backoff.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"

const char *const httpd_close_names[CLOSE_N] = { "idle", "evicted", "header_timeout",
	"body_timeout", "write_timeout", "tls_handshake" };
const char *const httpd_refuse_names[REFUSE_N] = { "malformed", "smuggling", "chunked",
	"nul", "header_too_large", "body_too_large" };

bool
httpd_limits_valid(const struct ob_httpd_config *cfg)
{
	const struct ob_httpd_limits *l = &cfg->limits;
	return !(l->max_conns < 0 || l->idle_timeout_ms < 0 || l->header_timeout_ms <= 0 ||
	    l->request_timeout_ms < l->header_timeout_ms || l->write_timeout_ms <= 0 ||
	    l->max_header < 256 || cfg->handler == NULL);
}

void
httpd_count_close(struct conn *c, enum close_reason why)
{
	struct ob_httpd *s = c->s;
	ob_metric_inc(s->m_closed[why]);
	if (why == CLOSE_IDLE || why == CLOSE_EVICTED)
		ob_debug("http.conn.closed", "server=%s reason=%s peer=%s", s->name,
		    httpd_close_names[why], c->peer);
	else
		ob_info("http.conn.timeout", "server=%s reason=%s peer=%s bytes=%zu ms=%" PRId64,
		    s->name, httpd_close_names[why], c->peer, c->len - c->start,
		    (ob_mono_ns() - (why == CLOSE_WRITE_TIMEOUT ? c->since_ns : c->req.t0_ns)) /
		        NS_PER_MS);
}

void
httpd_reject(struct ob_httpd *s, int fd)
{
	static const char body[] =
	    "{\"error\":\"overloaded\",\"message\":\"too many open connections; retry later\"}";
	char msg[256], sink[4096];
	/* Counted and logged before the client can see the answer. */
	ob_metric_inc(s->m_rejected);
	s->rejected_since_log++;
	int64_t now = ob_mono_ns();
	if (s->last_cap_log_ns == 0 || now - s->last_cap_log_ns >= OB_HTTPD_LOG_EVERY_MS * NS_PER_MS) {
		ob_warn("http.conn.cap_reached", "server=%s max_connections=%d rejected=%" PRIu64,
		    s->name, s->cfg.limits.max_conns, s->rejected_since_log);
		s->last_cap_log_ns = now;
		s->rejected_since_log = 0;
	}
	int n = snprintf(msg, sizeof(msg), "HTTP/1.1 503 Service Unavailable\r\nContent-Type:"
	    " application/json\r\nContent-Length: %zu\r\nRetry-After: %" PRId64 "\r\n"
	    "Connection: close\r\n\r\n%s", sizeof(body) - 1, ob_retry_after_spread_s(1), body);
	/* A new socket's send buffer is empty: this fits. Over HTTPS nothing
	 * can be said before a handshake: just closed. */
	if (s->tls == NULL)
		(void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(fd, SHUT_WR);
	/* Read what already arrived, so that close() does not reset the
	 * connection before the client saw the answer. */
	for (size_t got = 0; got < OB_HTTPD_DRAIN_MAX;) {
		ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
}

int
ob_httpd_reserve_fds(int64_t n, char *err, size_t errlen)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		snprintf(err, errlen, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return OB_EINVAL;
	}
	if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur >= n)
		return OB_OK;
	if (rl.rlim_cur == RLIM_INFINITY)
		return OB_OK;
	if (rl.rlim_max != RLIM_INFINITY && (int64_t)rl.rlim_max < n) {
		snprintf(err, errlen, "needs %" PRId64 " open files but the hard RLIMIT_NOFILE is %llu"
		    " (raise it, e.g. LimitNOFILE= or ulimit -Hn, or lower --max-connections)", n,
		    (unsigned long long)rl.rlim_max);
		return OB_EINVAL;
	}
	rl.rlim_cur = (rlim_t)n;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		snprintf(err, errlen, "setrlimit(RLIMIT_NOFILE, %" PRId64 "): %s", n, strerror(errno));
		return OB_EINVAL;
	}
	return OB_OK;
}
