/*
 * httpd_loop.c - the HTTP server's one thread: an epoll loop over the
 * listening socket, an eventfd (answers from other threads) and every
 * connection, and the listener it accepts on.
 *
 * Each pass: connection events first, new connections last (bytes that
 * arrived before a new connection are read before the cap picks one to
 * evict); answers queued by ob_httpd_respond (httpd.c) are taken off
 * their mutex-protected list when the eventfd fires; deadlines are
 * scanned every OB_HTTPD_TICK_MS; at the connection cap the connection
 * idle the longest is evicted (with none idle, httpd_limits.c answers
 * 503 at once); the connections closed
 * during the pass are freed at its end. On stop, nothing more is
 * accepted and the answers already given are written for at most
 * OB_HTTPD_STOP_FLUSH_MS.
 *
 * Never: block but in epoll_wait, touch a connection's state but through
 * httpd_conn.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/nng.h>

#include "httpd_int.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/url.h"

/* At the connection cap: close the connection idle the longest. One whose
 * bytes have arrived but were not read yet is not idle: it is read first
 * (and is in HEAD after). false when none is idle. */
bool
httpd_evict_idle(struct ob_httpd *s)
{
	for (;;) {
		struct conn *oldest = NULL;
		char b;
		for (struct conn *c = s->conns; c != NULL; c = c->next)
			if (c->st == CONN_IDLE && c->len == 0 &&
			    (oldest == NULL || c->since_ns < oldest->since_ns))
				oldest = c;
		if (oldest == NULL)
			return false;
		if (recv(oldest->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
			httpd_conn_read(oldest);
			continue;
		}
		httpd_count_close(oldest, CLOSE_EVICTED);
		httpd_conn_close(oldest);
		return true;
	}
}

/* Every connection whose deadline passed, to the state machine; the
 * listener back on once its pause is over. */
void
httpd_scan_deadlines(struct ob_httpd *s)
{
	int64_t now = ob_mono_ns();
	struct conn *next;
	for (struct conn *c = s->conns; c != NULL; c = next) {
		next = c->next;
		if (c->deadline_ns == 0 || now < c->deadline_ns)
			continue;
		httpd_conn_expired(c);
	}
	if (s->accept_resume_ns != 0 && now >= s->accept_resume_ns) {
		s->accept_resume_ns = 0;
		httpd_listen_pause(s, false);
	}
}

int
httpd_bind_listen(struct ob_httpd *s, char *err, size_t errlen)
{
	nng_url *u = NULL;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *ai = NULL;
	int rv, rc = OB_ENET;
	const char *scheme = s->tls != NULL ? "https" : "http";
	if ((rv = ob_url_parse(&u, s->cfg.url)) != 0 || strcmp(u->u_scheme, scheme) != 0 ||
	    u->u_port[0] == '\0') {
		snprintf(err, errlen, "%s: not an %s://HOST:PORT URL%s", s->cfg.url, scheme,
		    s->tls != NULL ? " (a TLS configuration was given)" : "");
		nng_url_free(u);
		return OB_EINVAL;
	}
	const char *host = u->u_hostname[0] != '\0' ? u->u_hostname : NULL;
	if ((rv = getaddrinfo(host, u->u_port, &hints, &ai)) != 0) {
		snprintf(err, errlen, "%s: %s", s->cfg.url, gai_strerror(rv));
		nng_url_free(u);
		return OB_EINVAL;
	}
	int saved = 0;
	for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    a->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, OB_HTTPD_BACKLOG) != 0) {
			saved = errno;
			close(fd);
			continue;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			s->port = ntohs(ss.ss_family == AF_INET6
			        ? ((struct sockaddr_in6 *)&ss)->sin6_port
			        : ((struct sockaddr_in *)&ss)->sin_port);
		s->lfd = fd;
		rc = OB_OK;
		break;
	}
	if (rc != OB_OK)
		snprintf(err, errlen, "%s: cannot listen: %s", s->cfg.url, strerror(saved));
	freeaddrinfo(ai);
	nng_url_free(u);
	return rc;
}

void
httpd_listen_pause(struct ob_httpd *s, bool pause)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	if (pause && s->listen_in_epoll) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
		s->listen_in_epoll = false;
	} else if (!pause && !s->listen_in_epoll) {
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) == 0)
			s->listen_in_epoll = true;
	}
}

static void
do_accept(struct ob_httpd *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: stop accepting a moment rather
				 * than spin on a listener that stays readable. */
				int64_t now = ob_mono_ns();
				httpd_listen_pause(s, true);
				s->accept_resume_ns = now + OB_HTTPD_ACCEPT_PAUSE_MS * NS_PER_MS;
				if (s->last_fd_log_ns == 0 ||
				    now - s->last_fd_log_ns >= OB_HTTPD_LOG_EVERY_MS * NS_PER_MS) {
					ob_warn("http.accept.failed", "server=%s err=%s open=%d", s->name,
					    strerror(errno), s->nconns);
					s->last_fd_log_ns = now;
				}
			}
			return;
		}
		if (s->cfg.limits.max_conns > 0 && s->nconns >= s->cfg.limits.max_conns &&
		    !httpd_evict_idle(s)) {
			httpd_reject(s, fd);
			continue;
		}
		httpd_conn_open(s, fd);
	}
}

/* Answers queued by ob_httpd_respond. */
static void
drain_done(struct ob_httpd *s)
{
	uint64_t v;
	while (read(s->evfd, &v, sizeof(v)) > 0)
		;
	pthread_mutex_lock(&s->mtx);
	struct conn *list = s->done;
	s->done = NULL;
	pthread_mutex_unlock(&s->mtx);
	/* Oldest first is not needed: each connection has one answer. */
	while (list != NULL) {
		struct conn *c = list;
		list = c->done_next;
		c->done_next = NULL;
		httpd_conn_answered(c);
	}
}

void *
httpd_loop_main(void *arg)
{
	struct ob_httpd *s = arg;
	struct epoll_event evs[OB_HTTPD_EVENTS];
	int64_t last_scan = ob_mono_ns();
	int64_t flush_until = 0;
	for (;;) {
		if (atomic_load(&s->stop)) {
			/* Stopping: accept nothing more, finish writing the answers
			 * already given (the handler's threads were stopped first),
			 * for at most OB_HTTPD_STOP_FLUSH_MS. */
			int64_t now = ob_mono_ns();
			if (flush_until == 0) {
				flush_until = now + OB_HTTPD_STOP_FLUSH_MS * NS_PER_MS;
				httpd_listen_pause(s, true);
				s->accept_resume_ns = 0;
			}
			bool writing = false;
			for (struct conn *c = s->conns; c != NULL && !writing; c = c->next)
				writing = c->st == CONN_WRITE;
			pthread_mutex_lock(&s->mtx);
			writing = writing || s->done != NULL;
			pthread_mutex_unlock(&s->mtx);
			if (!writing || now >= flush_until)
				break;
		}
		int n = epoll_wait(s->epfd, evs, OB_HTTPD_EVENTS, OB_HTTPD_TICK_MS);
		bool accept_ready = false;
		/* Connections first, new ones last: bytes that arrived before a
		 * new connection are read before the cap picks one to evict. */
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == NULL)
				accept_ready = true;
			else if (p == (void *)s)
				drain_done(s);
			else
				httpd_conn_ready(p);
		}
		if (accept_ready)
			do_accept(s);
		int64_t now = ob_mono_ns();
		if (now - last_scan >= OB_HTTPD_TICK_MS * NS_PER_MS) {
			httpd_scan_deadlines(s);
			last_scan = now;
		}
		httpd_free_dead(s);
	}
	return NULL;
}
