/*
 * httpd_int.h - what the pieces of the HTTP server share, and nothing a
 * program may use (outbox/httpd.h is the contract). The server is split
 * by job:
 *
 *   httpd.c           the API: start, stop, respond from any thread
 *   httpd_loop.c      the loop thread: listener, accept, epoll, answers
 *                     queued by other threads
 *   httpd_conn.c      the connection state machine (conn_set_state, the
 *                     only writer of a connection's state and deadline)
 *   httpd_parse.c     libhttp-parser's callbacks: a request's offsets and
 *                     the server's own refusals; no I/O, no state change
 *   httpd_response.c  the bytes of an answer
 *   httpd_io.c        a connection's socket: epoll interest, send and
 *                     receive (through TLS when it has a session)
 *   httpd_limits.c    the limits kept: deadlines scanned, the connection
 *                     cap, descriptors, and the close-reason counters
 *   httpd_tls.c       OpenSSL (outbox/httpd_tls.h)
 *
 * Every function here runs on the loop thread unless it says otherwise.
 */
#ifndef OUTBOX_HTTPD_INT_H
#define OUTBOX_HTTPD_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <http_parser.h>

#include "outbox/httpd.h"
#include "outbox/httpd_tls.h"
#include "outbox/metrics.h"

#define OB_HTTPD_TICK_MS 50          /* deadline scan period */
#define OB_HTTPD_LINGER_MS 1000      /* drain input after a closing answer */
#define OB_HTTPD_BACKLOG 511
#define OB_HTTPD_READ_CHUNK 16384
#define OB_HTTPD_EVENTS 64
#define OB_HTTPD_LOG_EVERY_MS 10000  /* cap / descriptor warnings */
#define OB_HTTPD_ACCEPT_PAUSE_MS 100 /* out of descriptors: retry accept after */
#define OB_HTTPD_DRAIN_MAX 65536     /* bytes drained before closing a refused socket */
#define OB_HTTPD_STOP_FLUSH_MS 1000  /* on stop: answers still being written get this long */

#define NS_PER_MS ((int64_t)1000000)

enum conn_state {
	CONN_IDLE = 0, /* no request in progress */
	CONN_HANDSHAKE, /* TLS handshake in progress (header deadline) */
	CONN_HEAD,     /* reading a request's line and headers */
	CONN_BODY,     /* reading its body */
	CONN_HANDLER,  /* handed to the handler; socket out of epoll */
	CONN_WRITE,    /* writing the answer */
	CONN_LINGER,   /* answered with close: draining input, then close */
	CONN_CLOSED,   /* socket closed; freed at the end of the loop pass */
};

/* Why a connection was closed by the server (metric label, log field). */
enum close_reason {
	CLOSE_IDLE = 0,
	CLOSE_EVICTED,
	CLOSE_HEADER_TIMEOUT,
	CLOSE_BODY_TIMEOUT,
	CLOSE_WRITE_TIMEOUT,
	CLOSE_TLS_HANDSHAKE, /* registered only for an HTTPS server */
	CLOSE_N,
};
extern const char *const httpd_close_names[CLOSE_N];

/* Why a request was refused by the server itself. */
enum refuse_reason {
	REFUSE_MALFORMED = 0,
	REFUSE_SMUGGLING,
	REFUSE_CHUNKED,
	REFUSE_NUL,
	REFUSE_HEADER_TOO_LARGE,
	REFUSE_BODY_TOO_LARGE,
	REFUSE_N,
};
extern const char *const httpd_refuse_names[REFUSE_N];

struct hdr_span {
	size_t noff, nlen, voff, vlen;
	bool has_value;
};

/* One connection. st and deadline_ns are written by conn_set_state
 * (httpd_conn.c) only. */
struct conn {
	struct ob_httpd *s;
	int fd;
	enum conn_state st;
	int64_t deadline_ns;   /* 0 = none */
	int64_t since_ns;      /* entered the current state */
	bool in_epoll;
	uint32_t ep_events;    /* the interest now registered */
	char peer[64];
	struct ob_httpd_tls_conn *tls; /* NULL: plain HTTP */
	bool tls_ready;        /* handshake done */
	struct conn *prev, *next; /* s->conns */
	struct conn *done_next;   /* s->done */

	/* input: buf[0..len) received, buf[start..parsed) fed to the parser
	 * for the current request */
	char *buf;
	size_t len, cap, start, parsed;
	http_parser p;
	int last_cb;           /* 0 none, 1 field, 2 value (split detection) */
	size_t url_off, url_len;
	bool has_url;
	struct hdr_span hdr[OB_HTTPD_HEADERS_MAX];
	int nhdr;
	size_t body_off, body_len;
	bool complete;
	bool keepalive;
	bool body_follows;     /* headers done, a body follows: conn_feed moves to BODY */
	bool expect_continue;  /* ... and answers 100 Continue first */
	int refuse_status;     /* set by a callback that stops the parser */
	enum refuse_reason refuse_reason;
	const char *refuse_why;
	char saved;            /* the byte after the body, overwritten by its NUL */
	struct ob_httpd_req req;

	/* output */
	char *wbuf;
	size_t wlen, woff;
	bool close_after, drop;
	bool tls_dead;         /* a TLS write is stuck half-done: close, write nothing */
};

struct ob_httpd {
	struct ob_httpd_config cfg;
	char name[32];
	int lfd, epfd, evfd;
	pthread_t thread;
	bool started;
	_Atomic bool stop;
	struct conn *conns;
	int nconns;
	bool listen_in_epoll;
	int64_t accept_resume_ns; /* 0 = accepting */
	int64_t last_cap_log_ns, last_fd_log_ns;
	uint64_t rejected_since_log;
	int port;
	pthread_mutex_t mtx; /* guards done */
	struct conn *done;
	struct conn *dead;   /* closed this loop pass (events may still name them) */
	http_parser_settings settings;
	/* metrics (NULL when none) */
	struct ob_httpd_tls *tls; /* borrowed (cfg.tls); NULL: plain HTTP */
	struct ob_metric *m_open, *m_accepted, *m_rejected;
	struct ob_metric *m_closed[CLOSE_N];
	struct ob_metric *m_refused[REFUSE_N];
};

/* ---- httpd_conn.c: the state machine's events ------------------------ */

/* A new socket fd (non-blocking, taken over) becomes a connection in
 * IDLE; out of memory or without a TLS session, fd is closed instead. */
void httpd_conn_open(struct ob_httpd *s, int fd);
/* An epoll event for c: read, write, handshake or drain, by its state. */
void httpd_conn_ready(struct conn *c);
/* Bytes may be waiting: read and parse them (IDLE, HEAD, BODY, and a TLS
 * handshake not done yet). */
void httpd_conn_read(struct conn *c);
/* c's deadline passed: cut it off (HEAD and BODY with a 408). */
void httpd_conn_expired(struct conn *c);
/* c's answer was queued by ob_httpd_respond: write it, or close. */
void httpd_conn_answered(struct conn *c);
/* Close the socket now; c is freed by httpd_free_dead. Idempotent. */
void httpd_conn_close(struct conn *c);
/* Free the connections closed during this loop pass. */
void httpd_free_dead(struct ob_httpd *s);

/* ---- httpd_parse.c --------------------------------------------------- */

/* Point settings at the callbacks (p.data is the struct conn). */
void httpd_parse_settings_init(http_parser_settings *settings);
/* Note a refusal (status, reason, why) on c; returns -1, which stops the
 * parser when returned from a callback. */
int httpd_parse_refuse(struct conn *c, int status, enum refuse_reason r, const char *why);

/* ---- httpd_response.c ------------------------------------------------ */

/* Build the response bytes into c->wbuf (replacing what was there);
 * head: without the body. false: out of memory. Any thread that owns c. */
bool httpd_response_build(struct conn *c, const struct ob_httpd_res *res, bool head);

/* ---- httpd_io.c ------------------------------------------------------ */

/* Register c in epoll for events (0: take it out). */
void httpd_ep_set(struct conn *c, uint32_t events);
/* Send on c's socket, through its TLS session when it has one. Returns
 * the bytes taken (> 0), 0 when the socket is not ready (the epoll
 * interest now waits for what is needed), -1 when the connection is dead. */
ssize_t httpd_conn_send(struct conn *c, const char *buf, size_t len);
/* Receive into buf, through the TLS session when there is one. Returns
 * the bytes (> 0), 0 when nothing is there now (the interest waits for
 * it), -1 when the peer closed or the connection failed. */
ssize_t httpd_conn_recv(struct conn *c, char *buf, size_t len);
/* Write "100 Continue" before the body is read (sets tls_dead when a TLS
 * record could not go out whole). */
void httpd_send_continue(struct conn *c);
/* "host:port" of fd's peer ("unknown" when it cannot be said). */
void httpd_peer_name(int fd, char *out, size_t outlen);

/* ---- httpd_limits.c -------------------------------------------------- */

/* The limits are usable: timeouts positive and in order, a handler. */
bool httpd_limits_valid(const struct ob_httpd_config *cfg);
/* Count (and log) a connection the server cuts off for why. */
void httpd_count_close(struct conn *c, enum close_reason why);
/* At the cap: close the connection idle the longest. false: none idle. */
bool httpd_evict_idle(struct ob_httpd *s);
/* Over the cap with nothing to evict: 503 at once, best effort; closes fd. */
void httpd_reject(struct ob_httpd *s, int fd);
/* Cut off the connections past their deadline; resume accepting after a
 * descriptor shortage. */
void httpd_scan_deadlines(struct ob_httpd *s);

/* ---- httpd_loop.c ---------------------------------------------------- */

/* Bind and listen on s->cfg.url (s->lfd, s->port). OB_OK, OB_EINVAL (a
 * bad URL) or OB_ENET, with the reason in err. */
int httpd_bind_listen(struct ob_httpd *s, char *err, size_t errlen);
/* Take the listener out of epoll (pause) or put it back. */
void httpd_listen_pause(struct ob_httpd *s, bool pause);
/* The loop thread's body (pthread_create's start routine; arg is s). */
void *httpd_loop_main(void *arg);

#endif
