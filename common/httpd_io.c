/*
 * httpd_io.c - a connection's socket: its epoll interest, and every byte
 * sent or received, handed to OpenSSL (httpd_tls.c) when the connection
 * has a TLS session.
 *
 * Results are said in three ways only (bytes, "not now", "dead"); "not
 * now" leaves the epoll interest waiting for what is needed (over TLS a
 * write may need a read first, and a read a write). Never: block (every
 * socket is non-blocking), close a socket or change a connection's state
 * (httpd_conn.c decides what a dead connection means).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "httpd_int.h"

void
httpd_ep_set(struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };
	if (events == 0) {
		if (c->in_epoll)
			epoll_ctl(c->s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		c->in_epoll = false;
		c->ep_events = 0;
		return;
	}
	if (c->in_epoll && c->ep_events == events)
		return;
	if (epoll_ctl(c->s->epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) == 0) {
		c->in_epoll = true;
		c->ep_events = events;
	}
}

ssize_t
httpd_conn_send(struct conn *c, const char *buf, size_t len)
{
	if (c->tls == NULL) {
		for (;;) {
			ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
			if (n > 0)
				return n;
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				httpd_ep_set(c, EPOLLOUT);
				return 0;
			}
			return -1;
		}
	}
	size_t put = 0;
	switch (ob_httpd_tls_write(c->tls, buf, len, &put)) {
	case OB_HTTPD_TLS_OK:
		return (ssize_t)put;
	case OB_HTTPD_TLS_WANT_WRITE:
		httpd_ep_set(c, EPOLLOUT);
		return 0;
	case OB_HTTPD_TLS_WANT_READ: /* a TLS message of the peer's must be read first */
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		return 0;
	case OB_HTTPD_TLS_CLOSED:
	case OB_HTTPD_TLS_ERROR:
		break;
	}
	return -1;
}

ssize_t
httpd_conn_recv(struct conn *c, char *buf, size_t len)
{
	if (c->tls == NULL) {
		for (;;) {
			ssize_t n = recv(c->fd, buf, len, 0);
			if (n > 0)
				return n;
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			return -1;
		}
	}
	size_t got = 0;
	switch (ob_httpd_tls_read(c->tls, buf, len, &got)) {
	case OB_HTTPD_TLS_OK:
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		return (ssize_t)got;
	case OB_HTTPD_TLS_WANT_READ:
		httpd_ep_set(c, EPOLLIN | EPOLLRDHUP);
		return 0;
	case OB_HTTPD_TLS_WANT_WRITE: /* OpenSSL must answer the peer first */
		httpd_ep_set(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
		return 0;
	case OB_HTTPD_TLS_CLOSED:
	case OB_HTTPD_TLS_ERROR:
		break;
	}
	return -1;
}

/* Nothing else is queued on the socket yet: this fits. Over TLS a record
 * that did not go out whole would have to be retried before any other
 * write: then the answer is not written at all (tls_dead), rather than
 * written corrupt. */
void
httpd_send_continue(struct conn *c)
{
	static const char cont100[] = "HTTP/1.1 100 Continue\r\n\r\n";
	if (c->tls != NULL) {
		size_t put = 0;
		if (ob_httpd_tls_write(c->tls, cont100, sizeof(cont100) - 1, &put) !=
		        OB_HTTPD_TLS_OK || put != sizeof(cont100) - 1)
			c->tls_dead = true;
	} else {
		(void)send(c->fd, cont100, sizeof(cont100) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
}

void
httpd_peer_name(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[48], port[8];
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
	        NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(out, outlen, "unknown");
		return;
	}
	if (ss.ss_family == AF_INET6)
		snprintf(out, outlen, "[%s]:%s", host, port);
	else
		snprintf(out, outlen, "%s:%s", host, port);
}
