/*
 * httpd.c - the deadline-keeping HTTP/1.1 server (see httpd.h for what it
 * guarantees and why nng's server could not be used): its API, start and
 * stop, and the hand-over of answers from other threads.
 *
 * Design, the smallest that keeps the guarantees provable:
 *   - ONE thread runs an epoll loop over the listening socket, an eventfd
 *     (answers from other threads) and every connection (httpd_loop.c).
 *     Nothing on it blocks: sockets are non-blocking and the handler must
 *     not block.
 *   - Each connection has one state and one deadline, both set only by
 *     conn_set_state (httpd_conn.c, the state machine); the loop scans the
 *     deadlines every OB_HTTPD_TICK_MS (httpd_limits.c, with the
 *     connection cap).
 *   - Parsing is libhttp-parser's (httpd_parse.c): the callbacks record
 *     offsets into one buffer per connection, never moved while a request
 *     is parsed.
 *   - Answers from other threads go through a mutex-protected list and the
 *     eventfd (ob_httpd_respond, here); only the loop thread touches a
 *     connection's socket (httpd_io.c).
 *   - HTTPS (cfg.tls, httpd_tls.c: OpenSSL): every socket read and write
 *     goes through httpd_conn_recv / httpd_conn_send, which hand it to
 *     OpenSSL when the connection has a TLS session. Over HTTPS the 503 at
 *     the cap cannot be written before a handshake: that connection is
 *     closed at once instead.
 *
 * What the pieces share is in httpd_int.h, with a map of the files.
 *
 * Never: block the loop, log per byte or per scrape (one line per
 * connection cut off, cap and descriptor warnings at most every
 * OB_HTTPD_LOG_EVERY_MS), read a body before its Content-Length passed
 * max_body.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "httpd_int.h"
#include "outbox/err.h"
#include "outbox/httpd.h"

const char *
ob_httpd_req_header(const struct ob_httpd_req *req, const char *name)
{
	for (int i = 0; i < req->nheaders; i++)
		if (strcasecmp(req->hname[i], name) == 0)
			return req->hvalue[i];
	return NULL;
}

void
ob_httpd_respond(struct ob_httpd_req *req, const struct ob_httpd_res *res)
{
	struct conn *c = (struct conn *)((char *)req - offsetof(struct conn, req));
	struct ob_httpd *s = c->s;
	/* The connection is in CONN_HANDLER: only this caller touches it
	 * until it is on the done list (the mutex orders the writes). */
	c->drop = res->drop;
	c->close_after = c->close_after || res->close;
	if (!c->drop && !httpd_response_build(c, res, strcmp(req->method, "HEAD") == 0))
		c->drop = true; /* out of memory: close rather than hang */
	pthread_mutex_lock(&s->mtx);
	c->done_next = s->done;
	s->done = c;
	pthread_mutex_unlock(&s->mtx);
	uint64_t one = 1;
	ssize_t w = write(s->evfd, &one, sizeof(one));
	(void)w; /* a full counter (EAGAIN) still wakes the loop */
}

static void
register_metrics(struct ob_httpd *s)
{
	struct ob_metrics *m = s->cfg.metrics;
	const char *lab[] = { "server", s->name, NULL };
	if (m == NULL)
		return;
	s->m_open = ob_metrics_gauge(m, "outbox_http_connections_open",
	    "HTTP connections open now", lab);
	s->m_accepted = ob_metrics_counter(m, "outbox_http_connections_accepted_total",
	    "HTTP connections accepted", lab);
	s->m_rejected = ob_metrics_counter(m, "outbox_http_connections_rejected_total",
	    "HTTP connections answered 503 and closed at once: the connection cap was reached"
	    " and none was idle", lab);
	for (int i = 0; i < CLOSE_N; i++) {
		const char *l[] = { "server", s->name, "reason", httpd_close_names[i], NULL };
		if (i == CLOSE_TLS_HANDSHAKE && s->tls == NULL)
			continue; /* plain HTTP: no such series */
		s->m_closed[i] = ob_metrics_counter(m, "outbox_http_connections_closed_total",
		    "HTTP connections closed by the server: idle timeout, evicted at the cap,"
		    " header/body deadline (408; a TLS handshake not done by the header deadline"
		    " counts as header_timeout), write deadline, or a failed TLS handshake", l);
	}
	for (int i = 0; i < REFUSE_N; i++) {
		const char *l[] = { "server", s->name, "reason", httpd_refuse_names[i], NULL };
		s->m_refused[i] = ob_metrics_counter(m, "outbox_http_requests_refused_total",
		    "HTTP requests refused by the server before any handler (4xx, connection"
		    " closed)", l);
	}
}

int
ob_httpd_start(const struct ob_httpd_config *cfg, struct ob_httpd **out, char *err,
    size_t errlen)
{
	if (!httpd_limits_valid(cfg)) {
		snprintf(err, errlen, "http server %s: invalid limits", cfg->url);
		return OB_EINVAL;
	}
	struct ob_httpd *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	s->cfg = *cfg;
	s->tls = cfg->tls;
	snprintf(s->name, sizeof(s->name), "%s", cfg->name ? cfg->name : "http");
	s->lfd = s->epfd = s->evfd = -1;
	pthread_mutex_init(&s->mtx, NULL);
	httpd_parse_settings_init(&s->settings);
	int rc = httpd_bind_listen(s, err, errlen);
	if (rc != OB_OK)
		goto fail;
	rc = OB_ENET;
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
	struct epoll_event wev = { .events = EPOLLIN, .data.ptr = s };
	if ((s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &lev) != 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &wev) != 0) {
		snprintf(err, errlen, "http server %s: %s", cfg->url, strerror(errno));
		goto fail;
	}
	s->listen_in_epoll = true;
	register_metrics(s);
	if (pthread_create(&s->thread, NULL, httpd_loop_main, s) != 0) {
		snprintf(err, errlen, "http server %s: cannot start its thread", cfg->url);
		goto fail;
	}
	s->started = true;
	*out = s;
	return OB_OK;
fail:
	ob_httpd_stop(s);
	return rc;
}

int
ob_httpd_port(const struct ob_httpd *s)
{
	return s != NULL ? s->port : -1;
}

void
ob_httpd_stop(struct ob_httpd *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		atomic_store(&s->stop, true);
		uint64_t one = 1;
		ssize_t w = write(s->evfd, &one, sizeof(one));
		(void)w;
		pthread_join(s->thread, NULL);
	}
	/* every connection, answered-but-unwritten ones included, is on conns */
	while (s->conns != NULL)
		httpd_conn_close(s->conns);
	httpd_free_dead(s);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	pthread_mutex_destroy(&s->mtx);
	free(s);
}
