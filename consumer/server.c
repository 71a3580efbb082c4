/*
 * server.c - the consumer's request loop on nng REP contexts.
 *
 * Each serving thread owns one context and one database connection and runs
 * RECV -> decode -> apply (one transaction) -> SEND. Blocking database work
 * stays on our threads, never on nng's callback threads. A lost database
 * connection is re-opened with a jittered backoff (CONSUMER_RECONNECT_*);
 * meanwhile requests get RETRY. An
 * idle thread wakes every CONSUMER_IDLE_CHECK_MS to check its connection
 * (non-blocking) and re-open it, which is what /readyz reports. One
 * more thread, with its own connection, runs the retention purge every
 * purge_interval_ms.
 *
 * Stopping: the threads see the stop flag between requests (an idle one
 * within CONSUMER_IDLE_CHECK_MS), so a request in progress is applied and
 * answered first. The REP socket is then left open for the process's exit
 * to release: nng 1.5 can panic ("pthread_mutex_lock: Invalid argument",
 * nng issue #2110) when a listening socket is closed while its pipes are
 * torn down; it aborted the consumer at stop about once in forty suite
 * runs here. A request that comes in meanwhile is never read and never
 * answered: its relay times out and sends it again (to a live consumer).
 *
 * Re-listening (SIGHUP with TLS, consumer_server_relisten): the listener
 * alone is closed and a new one opened on the same socket; the serving
 * contexts stay. nng issue #2110 reports the same panic for
 * nng_listener_close on 1.10 (a rare teardown race); it has not shown in
 * the reloads test_bus_tls_reload makes under load (3 per run). It is the
 * price of a certificate change without a restart, paid only on SIGHUP.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "outbox/backoff.h"
#include "outbox/buf.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/ticker.h"
#include "outbox/url.h"
#include "listen_watch.h"
#include "metrics.h"
#include "server.h"

#define CONSUMER_PURGE_MAX_ROUNDS 100 /* statements per purge pass, at most */

struct serve_thread {
	struct consumer_server *srv;
	pthread_t tid;
	nng_ctx ctx;
	nng_aio *aio;
	PGconn *conn;
	struct inbox_batch batch;
	struct ob_buf reply;
	int index;
	_Atomic bool connected;    /* conn usable as last seen (readiness) */
	unsigned reconnect_failures;
	struct ob_backoff reconnect;  /* the wait after a failed reconnect */
	struct consumer_topic_cache topics;
};

struct consumer_server {
	struct consumer_server_config cfg; /* cfg.tls: not used after start (s->tls) */
	nng_socket sock;
	nng_listener listener;
	nng_tls_config *tls;                /* the listener's configuration: our hold;
	                                     * changed by relisten (main thread) */
	bool tls_on;                        /* tls+tcp://: fixed at start */
	char *url;                          /* cfg.listen with the bound port */
	struct consumer_listen_watch *watch; /* refused connections, logged */
	struct serve_thread *threads;
	int nthreads;
	struct consumer_counters own_counters;
	struct consumer_counters *counters; /* cfg.counters or &own_counters */
	struct ob_ticker purger;            /* retention, every purge_interval_ms */
	PGconn *purge_conn;                 /* the purger's own */
	_Atomic bool stopping;              /* the serving threads stop between requests */
};

/* Readiness and the connections gauge follow what the thread last saw. */
static void
set_connected(struct serve_thread *t, bool up)
{
	if (atomic_exchange(&t->connected, up) == up)
		return;
	if (t->srv->cfg.metrics != NULL)
		ob_metric_gauge_add(t->srv->cfg.metrics->db_connections, up ? 1 : -1);
}

/* A failed reconnect: the first of a run, then one in
 * CONSUMER_RECONNECT_LOG_EVERY, is a warning (an idle thread retries every
 * CONSUMER_IDLE_CHECK_MS); the others are debug lines. */
static void
reconnect_failed(struct serve_thread *t, const char *event, const char *err)
{
	char q[600];
	if (t->reconnect_failures++ % CONSUMER_RECONNECT_LOG_EVERY == 0)
		ob_warn(event, "thread=%d failures=%u err=%s", t->index, t->reconnect_failures,
		    ob_log_q(err, q, sizeof(q)));
	else
		ob_debug(event, "thread=%d failures=%u err=%s", t->index,
		    t->reconnect_failures, ob_log_q(err, q, sizeof(q)));
}

/* Re-open a broken connection; one attempt per call (the caller replies
 * RETRY in between, so a down database costs no busy loop). */
static bool
ensure_conn(struct serve_thread *t)
{
	if (!ob_pg_broken(t->conn)) {
		set_connected(t, true);
		return true;
	}
	set_connected(t, false);
	if (t->conn != NULL) {
		PQfinish(t->conn);
		t->conn = NULL;
		ob_warn("consumer.db.lost", "thread=%d", t->index);
	}
	char err[512];
	if (ob_pg_connect(t->srv->cfg.db, "outbox-consumer", &t->conn, err,
	        sizeof(err)) != OB_OK) {
		reconnect_failed(t, "consumer.db.reconnect_failed", err);
		ob_sleep_ms(ob_backoff_next(&t->reconnect));
		return false;
	}
	if (ob_pg_need_session(t->conn, t->srv->cfg.session_pooler, "outbox-consumer",
	        "--pooler session", err, sizeof(err)) != OB_OK ||
	    inbox_conn_setup(t->conn, &t->srv->cfg.inbox, &t->batch.clock, err,
	        sizeof(err)) != OB_OK) {
		reconnect_failed(t, "consumer.db.setup_failed", err);
		PQfinish(t->conn);
		t->conn = NULL;
		ob_sleep_ms(ob_backoff_next(&t->reconnect));
		return false;
	}
	ob_info("consumer.db.reconnected", "thread=%d after_failures=%u", t->index,
	    t->reconnect_failures);
	t->reconnect_failures = 0;
	ob_backoff_reset(&t->reconnect);
	set_connected(t, true);
	return true;
}

/* Idle: read whatever the server sent (never blocks: libpq's socket is
 * non-blocking), which turns a terminated backend into a broken
 * connection, and re-open it. */
static void
idle_check(struct serve_thread *t)
{
	if (t->conn != NULL && !ob_pg_broken(t->conn))
		(void)PQconsumeInput(t->conn);
	ensure_conn(t);
}

/* Build the reply for one received frame into t->reply. Returns false when
 * the request must be dropped without a reply. */
static bool
handle(struct serve_thread *t, const void *body, size_t len)
{
	struct consumer_server *s = t->srv;
	struct ob_wire_request req;
	char q[600];
	ob_buf_reset(&t->reply);

	int rc = consumer_request_decode(body, len, &s->cfg.limits, s->counters, &req,
	    &t->reply);
	if (rc != OB_OK) {
		consumer_metrics_bad_frame(s->cfg.metrics, rc);
		return t->reply.len > 0;
	}

	char err[512];
	bool reached_db = false;
	double took = 0;
	if (!ensure_conn(t)) {
		for (uint32_t i = 0; i < req.count; i++) {
			t->batch.results[i] = (struct ob_wire_result){ req.msgs[i].id,
				OB_WIRE_RETRY, "database unavailable", 20, 0 };
			t->batch.why[i] = INBOX_WHY_DB;
		}
		rc = OB_EDB;
	} else {
		double t0 = ob_mono_s();
		rc = inbox_apply_batch(t->conn, &s->cfg.inbox, &req, &t->batch, err,
		    sizeof(err));
		took = ob_mono_s() - t0;
		reached_db = true;
		if (rc != OB_OK) {
			atomic_fetch_add(&s->counters->db_failures, 1);
			if (s->cfg.metrics != NULL)
				ob_metric_inc(s->cfg.metrics->db_failures);
			if (ob_pg_broken(t->conn))
				set_connected(t, false);
			ob_warn("consumer.batch.failed", "messages=%u err=%s", req.count,
			    ob_log_q(err, q, sizeof(q)));
		}
	}
	consumer_count_batch(s->counters, &t->batch, req.count);
	consumer_metrics_batch(s->cfg.metrics, &t->topics, &req, &t->batch, reached_db, took);
	ob_debug("consumer.batch.done", "messages=%u first_id=%llu", req.count,
	    (unsigned long long)req.msgs[0].id);
	/* the reply version the relay asked for (its request's version) */
	rc = ob_wire_encode_reply_v(&t->reply, req.version, t->batch.results, req.count);
	ob_wire_request_fini(&req);
	if (rc != OB_OK)
		return false;
	if (s->cfg.drop_reply != NULL && ob_fault_fire(s->cfg.drop_reply))
		return false;
	return true;
}

static bool
stop_asked(struct consumer_server *s)
{
	return atomic_load(&s->stopping);
}

/* Whether the request came over a TLS connection whose peer certificate
 * nng verified. */
static bool
peer_verified(nng_msg *msg)
{
	bool verified = false;
	nng_pipe p = nng_msg_get_pipe(msg);
	return nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &verified) == 0 && verified;
}

static void *
serve(void *arg)
{
	struct serve_thread *t = arg;
	while (!stop_asked(t->srv)) {
		nng_aio_set_timeout(t->aio, CONSUMER_IDLE_CHECK_MS);
		nng_ctx_recv(t->ctx, t->aio);
		nng_aio_wait(t->aio);
		int rv = nng_aio_result(t->aio);
		if (rv == NNG_ECLOSED)
			break;
		if (rv == NNG_ETIMEDOUT) {
			idle_check(t);
			continue;
		}
		if (rv != 0) {
			ob_warn("consumer.recv.failed", "err=%s", ob_log_q(nng_strerror(rv),
			    (char[128]){ 0 }, 128));
			continue;
		}
		nng_msg *msg = nng_aio_get_msg(t->aio);
		if (t->srv->tls_on && !peer_verified(msg)) {
			/* cannot happen with auth mode required: nng makes no
			 * pipe of a failed handshake; never apply it anyway */
			consumer_refusal_count(t->srv->counters, t->srv->cfg.metrics,
			    OB_BUS_REFUSED_AUTH, 1);
			ob_warn("consumer.handshake.refused", "reason=%s refused=1 hint=\"a request"
			    " from a TLS peer nng does not call verified: dropped unread\"",
			    ob_bus_refusal_name(OB_BUS_REFUSED_AUTH));
			nng_msg_free(msg);
			continue;
		}
		atomic_fetch_add(&t->srv->counters->requests, 1);
		if (t->srv->cfg.metrics != NULL)
			ob_metric_inc(t->srv->cfg.metrics->requests);
		bool reply = handle(t, nng_msg_body(msg), nng_msg_len(msg));
		if (!reply) {
			/* Dropping: the REP context discards the request; the relay
			 * times out and redelivers. */
			nng_msg_free(msg);
			continue;
		}
		nng_msg_clear(msg);
		if (nng_msg_append(msg, t->reply.data, t->reply.len) != 0) {
			nng_msg_free(msg);
			continue;
		}
		nng_aio_set_msg(t->aio, msg);
		nng_aio_set_timeout(t->aio, NNG_DURATION_INFINITE);
		nng_ctx_send(t->ctx, t->aio);
		nng_aio_wait(t->aio);
		if ((rv = nng_aio_result(t->aio)) != 0) {
			nng_msg_free(nng_aio_get_msg(t->aio));
			if (rv == NNG_ECLOSED)
				break;
		}
	}
	return NULL;
}

/* One retention pass: the purger's work, now and then every
 * purge_interval_ms until stop. A purge that fails is logged and tried
 * again next time. */
static void
purge_pass(void *arg)
{
	struct consumer_server *s = arg;
	char err[512], q[600];
	if (s->purge_conn != NULL && ob_pg_broken(s->purge_conn)) {
		PQfinish(s->purge_conn);
		s->purge_conn = NULL;
	}
	int64_t n = 0;
	int rc = OB_OK;
	if (s->purge_conn == NULL) {
		/* a schema that refuses this consumer is not purged either */
		rc = ob_pg_connect(s->cfg.db, "outbox-consumer-purge", &s->purge_conn, err,
		    sizeof(err));
		if (rc == OB_OK)
			rc = ob_protocol_check(s->purge_conn, "inbox", "consumer", OB_PROTOCOL_CONSUMER,
			    err, sizeof(err));
		if (rc != OB_OK && s->purge_conn != NULL) {
			PQfinish(s->purge_conn);
			s->purge_conn = NULL;
		}
	}
	if (rc == OB_OK)
		rc = inbox_purge(s->purge_conn, s->cfg.inbox.retention_ms, s->cfg.purge_batch,
		    CONSUMER_PURGE_MAX_ROUNDS, &n, err, sizeof(err));
	if (rc != OB_OK) {
		atomic_fetch_add(&s->counters->purge_failures, 1);
		if (s->cfg.metrics != NULL)
			ob_metric_inc(s->cfg.metrics->purge_failures);
		ob_warn("consumer.purge.failed", "err=%s", ob_log_q(err, q, sizeof(q)));
	} else if (n > 0) {
		atomic_fetch_add(&s->counters->purged, (uint64_t)n);
		if (s->cfg.metrics != NULL)
			ob_metric_add(s->cfg.metrics->purged, (uint64_t)n);
		ob_info("consumer.purge.done", "deleted=%lld", (long long)n);
	}
}

/* The URL l listens on, malloc'ed: listen with the bound TCP port when it
 * asked for port 0, else listen as given (ipc://PATH, or a port of its own).
 * NULL when out of memory. */
static char *
bound_url(const char *listen, nng_listener l)
{
	nng_url *u = NULL;
	int port = 0;
	char *out = NULL;
	if (ob_url_parse(&u, listen) == 0 && u->u_port != NULL &&
	    strcmp(u->u_port, "0") == 0 &&
	    nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port) == 0 && port > 0) {
		bool v6 = strchr(u->u_hostname, ':') != NULL;
		size_t n = strlen(u->u_scheme) + strlen(u->u_hostname) + strlen(u->u_path) + 16;
		if ((out = malloc(n)) != NULL)
			snprintf(out, n, "%s://%s%s%s:%d%s", u->u_scheme, v6 ? "[" : "",
			    u->u_hostname, v6 ? "]" : "", port, u->u_path);
	} else {
		out = strdup(listen);
	}
	if (u != NULL)
		nng_url_free(u);
	return out;
}

/* A listener on url, started, with the receive limit and tls (NULL: none)
 * set before it starts, so that its first connection already has them.
 * 0 or the nng error; on error nothing is left open. */
static int
open_listener(struct consumer_server *s, const char *url, nng_tls_config *tls,
    nng_listener *out)
{
	nng_listener l;
	int rv;
	if ((rv = nng_listener_create(&l, s->sock, url)) != 0)
		return rv;
	if ((rv = nng_listener_set_size(l, NNG_OPT_RECVMAXSZ,
	         CONSUMER_RECV_MAX(&s->cfg.limits))) != 0 ||
	    (tls != NULL && (rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, tls)) != 0) ||
	    (rv = nng_listener_start(l, 0)) != 0) {
		nng_listener_close(l);
		return rv;
	}
	*out = l;
	return 0;
}

/* open_listener on the bound URL, retried while the port is still taken by
 * the listener just closed (its socket is released by nng's reaper), up to
 * CONSUMER_RELISTEN_WAIT_MS. */
static int
reopen_listener(struct consumer_server *s, nng_tls_config *tls, nng_listener *out)
{
	int64_t end = ob_mono_ms() + CONSUMER_RELISTEN_WAIT_MS;
	int rv;
	while ((rv = open_listener(s, s->url, tls, out)) == NNG_EADDRINUSE &&
	    ob_mono_ms() < end)
		ob_sleep_ms(CONSUMER_RELISTEN_RETRY_MS);
	return rv;
}

int
consumer_server_relisten(struct consumer_server *s, nng_tls_config *tls, bool *listening,
    char *err, size_t errlen)
{
	nng_listener l;
	*listening = false;
	if (tls == NULL)
		tls = s->tls; /* the one in use, again */
	/* The watch's last look is at the old listener's counters. */
	consumer_listen_watch_stop(s->watch);
	s->watch = NULL;
	if (nng_listener_id(s->listener) > 0)
		nng_listener_close(s->listener);
	memset(&s->listener, 0, sizeof(s->listener));
	int rv = reopen_listener(s, tls, &l);
	int rc = OB_OK;
	if (rv == 0) {
		nng_tls_config_hold(tls);
		if (s->tls != NULL)
			nng_tls_config_free(s->tls);
		s->tls = tls;
	} else {
		snprintf(err, errlen, "listen on %s with the new TLS configuration: %s", s->url,
		    nng_strerror(rv));
		rc = OB_ENET;
		/* the old configuration back, on the same port */
		if ((rv = reopen_listener(s, s->tls, &l)) != 0) {
			size_t n = strlen(err);
			snprintf(err + n, errlen - n, "; with the old one: %s", nng_strerror(rv));
			return rc;
		}
	}
	s->listener = l;
	*listening = true;
	if (consumer_listen_watch_new(true, s->url, s->counters, s->cfg.metrics,
	        &s->watch) != OB_OK ||
	    consumer_listen_watch_start(s->watch, s->listener) != OB_OK) {
		/* listening, unwatched: refusals go uncounted until the next reload */
		consumer_listen_watch_stop(s->watch);
		s->watch = NULL;
		if (rc == OB_OK) {
			snprintf(err, errlen, "listening on %s, but the refusal watch did not"
			    " start (out of memory)", s->url);
			rc = OB_ENOMEM;
		}
	}
	return rc;
}

static void
thread_fini(struct serve_thread *t)
{
	if (t->aio != NULL)
		nng_aio_free(t->aio);
	if (nng_ctx_id(t->ctx) > 0)
		nng_ctx_close(t->ctx);
	if (t->conn != NULL)
		PQfinish(t->conn);
	inbox_batch_fini(&t->batch);
	ob_buf_fini(&t->reply);
}

int
consumer_server_start(const struct consumer_server_config *cfg,
    struct consumer_server **out, char *err, size_t errlen)
{
	struct consumer_server *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return OB_ENOMEM;
	s->cfg = *cfg;
	s->counters = cfg->counters != NULL ? cfg->counters : &s->own_counters;
	int rc = OB_ENOMEM, rv;
	s->threads = calloc((size_t)cfg->threads, sizeof(*s->threads));
	if (s->threads == NULL)
		goto fail_free;
	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		snprintf(err, errlen, "open REP socket: %s", nng_strerror(rv));
		rc = OB_ENET;
		goto fail_free;
	}

	for (int i = 0; i < cfg->threads; i++) {
		struct serve_thread *t = &s->threads[i];
		t->srv = s;
		t->index = i;
		ob_backoff_init(&t->reconnect, CONSUMER_RECONNECT_BASE_MS, CONSUMER_RECONNECT_CAP_MS);
		ob_buf_init(&t->reply);
		if (inbox_batch_init(&t->batch, cfg->limits.max_batch) != OB_OK ||
		    nng_aio_alloc(&t->aio, NULL, NULL) != 0 ||
		    nng_ctx_open(&t->ctx, s->sock) != 0) {
			snprintf(err, errlen, "out of memory setting up serving threads");
			goto fail;
		}
		if ((rc = ob_pg_connect(cfg->db, "outbox-consumer", &t->conn, err,
		         errlen)) != OB_OK ||
		    (rc = ob_pg_need_session(t->conn, cfg->session_pooler, "outbox-consumer",
		         "--pooler session", err, errlen)) != OB_OK ||
		    (rc = inbox_conn_setup(t->conn, &cfg->inbox, &t->batch.clock, err,
		         errlen)) != OB_OK)
			goto fail;
		s->nthreads = i + 1;
		set_connected(t, true);
	}
	if ((rv = open_listener(s, cfg->listen, cfg->tls, &s->listener)) != 0) {
		snprintf(err, errlen, "listen on %s: %s", cfg->listen, nng_strerror(rv));
		rc = OB_ENET;
		goto fail;
	}
	if (cfg->tls != NULL) {
		nng_tls_config_hold(cfg->tls);
		s->tls = cfg->tls;
		s->tls_on = true;
	}
	if ((s->url = bound_url(cfg->listen, s->listener)) == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = OB_ENOMEM;
		goto fail;
	}
	if (consumer_listen_watch_new(cfg->tls != NULL, s->url, s->counters, cfg->metrics,
	        &s->watch) != OB_OK ||
	    consumer_listen_watch_start(s->watch, s->listener) != OB_OK) {
		snprintf(err, errlen, "cannot start the listener's watch");
		consumer_listen_watch_stop(s->watch);
		s->watch = NULL;
		rc = OB_ENOMEM;
		goto fail;
	}
	for (int i = 0; i < s->nthreads; i++) {
		if (pthread_create(&s->threads[i].tid, NULL, serve, &s->threads[i]) != 0) {
			snprintf(err, errlen, "cannot start serving thread");
			consumer_listen_watch_stop(s->watch);
			nng_close(s->sock);
			for (int j = 0; j < i; j++)
				pthread_join(s->threads[j].tid, NULL);
			rc = OB_ENOMEM;
			goto fail_threads;
		}
	}
	/* no thread for the purge: the consumer serves all the same, unpurged */
	if (cfg->purge_interval_ms > 0 && cfg->inbox.retention_ms > 0)
		(void)ob_ticker_start(&s->purger, cfg->purge_interval_ms, purge_pass, s);
	*out = s;
	return OB_OK;

fail:
	nng_close(s->sock);
fail_threads:
	for (int i = 0; i < cfg->threads; i++)
		thread_fini(&s->threads[i]);
fail_free:
	if (s->tls != NULL)
		nng_tls_config_free(s->tls);
	free(s->url);
	free(s->threads);
	free(s);
	return rc;
}

bool
consumer_server_ready(const struct consumer_server *s)
{
	for (int i = 0; i < s->nthreads; i++)
		if (!atomic_load(&s->threads[i].connected))
			return false;
	return s->nthreads > 0;
}

const char *
consumer_server_url(const struct consumer_server *s)
{
	return s->url;
}

const struct consumer_counters *
consumer_server_counters(const struct consumer_server *s)
{
	return s->counters;
}

void
consumer_server_stop(struct consumer_server *s)
{
	atomic_store(&s->stopping, true);
	ob_ticker_stop(&s->purger);
	if (s->purge_conn != NULL)
		PQfinish(s->purge_conn);
	consumer_listen_watch_stop(s->watch);
	/* no nng_close(s->sock): see the top of the file */
	for (int i = 0; i < s->nthreads; i++)
		pthread_join(s->threads[i].tid, NULL);
	for (int i = 0; i < s->cfg.threads; i++)
		thread_fini(&s->threads[i]);
	/* the listener (left open, as the socket) keeps its own hold */
	if (s->tls != NULL)
		nng_tls_config_free(s->tls);
	free(s->url);
	free(s->threads);
	free(s);
}
