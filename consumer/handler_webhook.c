/*
 * handler_webhook.c - the built-in `webhook` handler (see handler_webhook.h):
 * claim the key, commit the claim, POST, and record the downstream answer
 * fenced on the claim's token.
 *
 * prepare (autocommit, before the batch transaction): claim (committed
 * durably: it must outlive a crash of the inbox's server during the call)
 * + HTTP call.
 * apply (in the batch transaction): complete the claim with the token.
 * finish (after the batch): expire the lease of a claim whose message did
 * not commit, so that the next attempt takes it over at once (token bumped)
 * instead of waiting; a claim left by a crash is taken over only after its
 * lease.
 *
 * HTTP goes through webhook_http.c (libcurl): connections kept and reused
 * between calls, TLS verified against --webhook-ca or the system store,
 * proxies from the environment; nothing here parses HTTP. An at-most-once
 * call goes out on a fresh connection (webhook_http.h: a call sends at
 * most one request).
 */
#include <errno.h>
#include <iconv.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handler_webhook.h"
#include "retry_after.h"
#include "outbox/webhook_key.h"
#include "webhook_http.h"
#include "webhook_mode.h"
#include "webhook_sign.h"
#include "inbox.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/log.h"
#include "outbox/pg.h"

struct webhook {
	struct webhook_config cfg;
	struct webhook_http *http;   /* the target: URL, trust, pooled connections */
	_Atomic int64_t tls_next_log_ms; /* consumer.webhook.tls_failed not before */
	_Atomic uint64_t tls_unlogged;   /* failures since its last line */
	struct webhook_counters own;
	struct webhook_secrets *secrets; /* --webhook-secret-file; NULL = unsigned */
	struct webhook_mode mode;        /* --webhook-at-most-once */
};

/* What prepare leaves for apply and finish. */
struct webhook_call {
	int64_t fence;     /* our claim's token; 0 = no claim held */
	char key[OB_WEBHOOK_KEY_MAX]; /* the claim's key and Idempotency-Key (legacy_key) */
	int status;        /* downstream HTTP status */
	char *body;        /* downstream body (valid UTF-8) or NULL */
	char retry_after[64]; /* its Retry-After header ("" when none) */
	bool at_most_once; /* the topic's mode (webhook_mode.h) */
	bool sent;         /* the request went out on an established connection */
	bool unknown;      /* it failed after that: it may have reached downstream */
};

#define COUNT(w, field) atomic_fetch_add(&(w)->cfg.counters->field, 1)
/* The registry's handle of the same event (metrics off: nothing). */
#define MCOUNT(w, h)                                    \
	do {                                            \
		if ((w)->cfg.metrics != NULL)           \
			ob_metric_inc((w)->cfg.metrics->h); \
	} while (0)

/* Valid UTF-8 without NUL (what a text column takes): iconv validates. */
static bool
valid_text(const char *s, size_t n)
{
	if (memchr(s, '\0', n) != NULL)
		return false;
	iconv_t cd = iconv_open("UTF-8", "UTF-8");
	if (cd == (iconv_t)-1)
		return false;
	char out[1024];
	char *in = (char *)s;
	size_t left = n;
	bool ok = true;
	while (left > 0 && ok) {
		char *o = out;
		size_t olen = sizeof(out);
		if (iconv(cd, &in, &left, &o, &olen) == (size_t)-1 && errno != E2BIG)
			ok = false;
	}
	iconv_close(cd);
	return ok;
}

/* The message's enqueue time as the receiver stores it (its retention
 * counts from it): RFC 3339 in UTC with microseconds,
 * "2026-12-05T00:45:12.123456Z". False when there is none (0: a frame
 * that carried none) or it cannot be written. */
static bool
created_at_rfc3339(int64_t us, char *out, size_t outlen)
{
	if (us <= 0)
		return false;
	time_t s = (time_t)(us / 1000000);
	struct tm tm;
	if (gmtime_r(&s, &tm) == NULL)
		return false;
	char day[24];
	if (strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		return false;
	int w = snprintf(out, outlen, "%s.%06dZ", day, (int)(us % 1000000));
	return w > 0 && (size_t)w < outlen;
}

/* One POST of m with the key and the fence, signed when secrets are set;
 * an at-most-once call on a fresh connection. OB_OK and *r (the outcome),
 * or a failure before anything was sent (err). */
static int
post(struct webhook *w, const struct ob_wire_msg *m, const char *key, int64_t fence,
    bool fresh, struct webhook_http_result *r, char *err, size_t errlen)
{
	char topic[OB_WIRE_MAX_TOPIC + 1], f[24], id[24];
	memcpy(topic, m->topic, m->topic_len);
	topic[m->topic_len] = '\0';
	char src[OB_WIRE_MAX_SOURCE + 1] = "";
	if (m->source_len > 0)
		memcpy(src, m->source, m->source_len), src[m->source_len] = '\0';
	snprintf(f, sizeof(f), "%" PRId64, fence);
	snprintf(id, sizeof(id), "%" PRIu64, m->id);
	struct webhook_http_header h[10];
	size_t n = 0;
	h[n++] = (struct webhook_http_header){ "Content-Type", "application/json" };
	h[n++] = (struct webhook_http_header){ "Idempotency-Key", key };
	h[n++] = (struct webhook_http_header){ "Outbox-Topic", topic };
	if (src[0] != '\0')
		h[n++] = (struct webhook_http_header){ "Outbox-Source", src };
	h[n++] = (struct webhook_http_header){ "Outbox-Fence", f };
	h[n++] = (struct webhook_http_header){ "Outbox-Message-Id", id };
	char created[40];
	if (created_at_rfc3339(m->created_at_us, created, sizeof(created)))
		h[n++] = (struct webhook_http_header){ "Outbox-Created-At", created };
	char sig[WEBHOOK_SIGNATURE_MAX];
	if (w->secrets != NULL) {
		/* signed over the exact bytes sent, at this attempt's time */
		if (webhook_sign(w->secrets, (int64_t)time(NULL), m->payload, m->payload_len, sig,
		        sizeof(sig)) != OB_OK) {
			snprintf(err, errlen, "out of memory (signature)");
			return OB_ENOMEM;
		}
		h[n++] = (struct webhook_http_header){ WEBHOOK_SIGNATURE_HEADER, sig };
	}
	COUNT(w, calls);
	return webhook_http_post(w->http, h, n, m->payload, m->payload_len, fresh, r, err,
	    errlen);
}

/* A failed TLS handshake with the target: one warn line at once, then at
 * most one per WEBHOOK_TLS_LOG_EVERY_MS carrying the count (a relay
 * retrying a batch is not a line per message). Any thread. */
static void
log_tls_failure(struct webhook *w, const char *why)
{
	int64_t now = ob_mono_ms();
	atomic_fetch_add(&w->tls_unlogged, 1);
	int64_t next = atomic_load(&w->tls_next_log_ms);
	if (now < next ||
	    !atomic_compare_exchange_strong(&w->tls_next_log_ms, &next,
	        now + WEBHOOK_TLS_LOG_EVERY_MS))
		return;
	uint64_t n = atomic_exchange(&w->tls_unlogged, 0);
	char q[600], qn[300], qe[700], qt[900];
	ob_warn("consumer.webhook.tls_failed", "url=%s server_name=%s err=%s refused=%" PRIu64
	    " trust=%s hint=\"the target's certificate does not chain to a CA of the trust"
	    " (--webhook-ca, else the system store), is expired, or does not name"
	    " server_name\"", ob_log_q(w->cfg.url, q, sizeof(q)),
	    ob_log_q(webhook_http_tls_name(w->http), qn, sizeof(qn)),
	    ob_log_q(why, qe, sizeof(qe)), n,
	    ob_log_q(webhook_http_trust(w->http), qt, sizeof(qt)));
}

static int call_downstream(struct webhook *w, const struct ob_wire_msg *m,
    const char *key, struct webhook_call *c, struct inbox_handler_call *call,
    char *detail, size_t detaillen);

/* The answer about a parked key: reject, WEBHOOK_PARKED_DETAIL with the
 * resolve command's arguments, and why. */
static int
parked_answer(const char *topic, const char *key, const char *why,
    struct inbox_handler_call *call, char *detail, size_t detaillen)
{
	call->reason = "parked";
	snprintf(detail, detaillen, WEBHOOK_PARKED_DETAIL " --topic %.255s --key %.255s --as"
	    " sent|not-sent (%.300s)", topic, key, why);
	return OB_WIRE_REJECT;
}

/* At most once: park the claim this attempt holds (fence), its outcome
 * unknown for why. Parked: reject; not (the database failed): retry, and
 * the lease left to expire, so that the next attempt parks it. */
static int
park(struct webhook *w, PGconn *conn, const char *topic, const char *key, int64_t fence,
    const char *why, struct inbox_handler_call *call, char *detail, size_t detaillen)
{
	char err[512], q[600], qt[600], qw[700];
	int rc = ob_keyclaim_park(conn, WEBHOOK_TABLE, key, fence, topic, why, err, sizeof(err));
	if (rc != OB_OK) {
		ob_warn("consumer.webhook.park_failed", "topic=%s key=%s fence=%" PRId64 " err=%s",
		    ob_log_q(topic, qt, sizeof(qt)), ob_log_q(key, q, sizeof(q)), fence,
		    ob_log_q(err, qw, sizeof(qw)));
		call->reason = "database";
		snprintf(detail, detaillen, "at-most-once: could not park the call (%.300s): %.400s",
		    why, err);
		return OB_WIRE_RETRY;
	}
	COUNT(w, parked);
	MCOUNT(w, parked);
	ob_warn("consumer.webhook.parked", "topic=%s key=%s fence=%" PRId64 " err=%s",
	    ob_log_q(topic, qt, sizeof(qt)), ob_log_q(key, q, sizeof(q)), fence,
	    ob_log_q(why, qw, sizeof(qw)));
	return parked_answer(topic, key, why, call, detail, detaillen);
}

/* The key of m's claim and Idempotency-Key: ob_webhook_key_of's, except that a
 * named source inherits a claim of its message under the key alone (the
 * key of source '', from before wire version 3 or --no-source): when
 * inbox.webhook_calls holds one with m's fingerprint (the same topic and
 * payload), every attempt keeps that key, so an upgrade never sends one
 * message under two keys (docs/consumer.md, "Idempotency-Key"). OB_OK or
 * OB_EDB (err). */
static int
legacy_key(PGconn *conn, const struct ob_wire_msg *m, const void *fp, size_t fplen,
    char *key, char *err, size_t errlen)
{
	ob_webhook_key_of(m, key);
	if (m->source_len == 0)
		return OB_OK;
	char bare[OB_WIRE_MAX_KEY + 1], q[600], qs[200];
	memcpy(bare, m->key, m->key_len);
	bare[m->key_len] = '\0';
	bool has = false;
	int rc = ob_keyclaim_has(conn, WEBHOOK_TABLE, bare, fp, fplen, &has, err, errlen);
	if (rc != OB_OK || !has)
		return rc;
	char src[OB_WIRE_MAX_SOURCE + 1];
	memcpy(src, m->source, m->source_len);
	src[m->source_len] = '\0';
	ob_info("consumer.webhook.legacy_key", "source=%s key=%s hint=\"a claim from before"
	    " the source: the message keeps its key\"", ob_log_q(src, qs, sizeof(qs)),
	    ob_log_q(bare, q, sizeof(q)));
	memcpy(key, bare, m->key_len + 1);
	return OB_OK;
}

static int
webhook_prepare(PGconn *conn, const struct ob_wire_msg *m, void *arg,
    struct inbox_handler_call *call, char *detail, size_t detaillen)
{
	struct webhook *w = arg;
	char key[OB_WEBHOOK_KEY_MAX], q[600];
	if (!webhook_http_header_safe(m->key, m->key_len) || !valid_text(m->key, m->key_len) ||
	    !webhook_http_header_safe(m->topic, m->topic_len)) {
		COUNT(w, bad_keys);
		MCOUNT(w, bad_keys);
		call->reason = "bad_data";
		snprintf(detail, detaillen, "key or topic cannot be sent as an HTTP header"
		    " (control characters or not UTF-8)");
		return OB_WIRE_REJECT;
	}
	ob_webhook_key_of(m, key); /* the claim and the Idempotency-Key */
	char topic[OB_WIRE_MAX_TOPIC + 1];
	memcpy(topic, m->topic, m->topic_len);
	topic[m->topic_len] = '\0';
	bool amo = webhook_mode_at_most_once(&w->mode, topic);

	if (w->cfg.no_claim) {
		struct webhook_call *c = calloc(1, sizeof(*c));
		if (c == NULL) {
			snprintf(detail, detaillen, "out of memory");
			return OB_WIRE_RETRY;
		}
		call->state = c;
		snprintf(c->key, sizeof(c->key), "%s", key);
		return call_downstream(w, m, key, c, call, detail, detaillen);
	}

	/* The fingerprint input, as inbox.processed digests it. */
	size_t fplen = (size_t)m->topic_len + 1 + m->payload_len;
	char *fp = malloc(fplen);
	if (fp == NULL) {
		snprintf(detail, detaillen, "out of memory");
		return OB_WIRE_RETRY;
	}
	memcpy(fp, m->topic, m->topic_len);
	fp[m->topic_len] = '\0';
	if (m->payload_len)
		memcpy(fp + m->topic_len + 1, m->payload, m->payload_len);
	struct ob_key_claim claim;
	char err[512];
	/* Durable: the call follows at once, and a claim a crash loses would
	 * let the next attempt call again (at most once: a second call).
	 * created_at from the message: the GC forgets the claim only once the
	 * message is older than the retention by the inbox database's clock,
	 * the clock inbox_plan rejects it by (docs/consumer.md, "Retention"). */
	const struct ob_keyclaim_opts how = { true, m->created_at_us };
	int rc = legacy_key(conn, m, fp, fplen, key, err, sizeof(err));
	if (rc == OB_OK)
		rc = ob_keyclaim_claim_with(conn, WEBHOOK_TABLE, key, fp, fplen, w->cfg.lease_ms,
		    &how, &claim, err, sizeof(err));
	free(fp);
	if (rc != OB_OK) {
		call->reason = "database";
		snprintf(detail, detaillen, "%s", err);
		return OB_WIRE_RETRY;
	}
	int st = 0;
	switch (claim.verdict) {
	case OB_KEY_REPLAY:
		COUNT(w, replayed);
		MCOUNT(w, replayed);
		if (claim.response_status == 0) /* no answer stored: an operator's */
			snprintf(detail, detaillen, "webhook call resolved as sent by an operator"
			    " (outboxctl webhook resolve)");
		else
			snprintf(detail, detaillen, "webhook already called: downstream answered %d",
			    claim.response_status);
		st = OB_WIRE_DUPLICATE;
		break;
	case OB_KEY_PARKED:
		/* in either mode: parked stays parked until resolved */
		st = parked_answer(topic, key, "parked before; not sent again until resolved",
		    call, detail, detaillen);
		break;
	case OB_KEY_BUSY:
		COUNT(w, busy);
		MCOUNT(w, busy);
		call->reason = "busy";
		snprintf(detail, detaillen, "webhook call in flight elsewhere (lease %" PRId64
		    " ms left)", claim.retry_after_ms);
		/* nothing can change before the holder's lease ends: ask the relay
		 * to come back then, not to burn attempts on the way */
		if (w->cfg.max_retry_after_ms > 0 && claim.retry_after_ms > 0)
			call->retry_after_ms = (uint32_t)(claim.retry_after_ms <
			    w->cfg.max_retry_after_ms ? claim.retry_after_ms :
			    w->cfg.max_retry_after_ms);
		st = OB_WIRE_RETRY;
		break;
	case OB_KEY_MISMATCH:
		COUNT(w, mismatch);
		MCOUNT(w, mismatch);
		call->reason = "fingerprint_mismatch";
		snprintf(detail, detaillen, "%s", INBOX_REASON_MISMATCH);
		st = OB_WIRE_REJECT;
		break;
	case OB_KEY_PROCEED:
		break;
	}
	if (st != 0) {
		ob_keyclaim_result_fini(&claim);
		return st;
	}
	if (claim.takeover) {
		COUNT(w, takeovers);
		MCOUNT(w, takeovers);
		ob_info("consumer.webhook.takeover", "key=%s fence=%" PRId64,
		    ob_log_q(key, q, sizeof(q)), claim.fence);
	}
	ob_keyclaim_result_fini(&claim);
	if (amo && claim.expired_holder)
		return park(w, conn, topic, key, claim.fence, "an earlier attempt's claim expired"
		    " unfinished: it may have called", call, detail, detaillen);

	struct webhook_call *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		ob_keyclaim_expire(conn, WEBHOOK_TABLE, key, claim.fence, err, sizeof(err));
		snprintf(detail, detaillen, "out of memory");
		return OB_WIRE_RETRY;
	}
	c->fence = claim.fence;
	snprintf(c->key, sizeof(c->key), "%s", key);
	c->at_most_once = amo;
	call->state = c;

	int status = call_downstream(w, m, key, c, call, detail, detaillen);
	if (amo && c->unknown) {
		char why[OB_WIRE_MAX_DETAIL + 1];
		snprintf(why, sizeof(why), "%s", detail);
		return park(w, conn, topic, key, c->fence, why, call, detail, detaillen);
	}
	return status;
}

/* A 4xx that means "later", not "never": 408 (request timeout), 409 (a
 * Stripe-style "this key is still in flight here", which a lost response's
 * retry provokes), 425 (too early), 429 (too many requests), and any 4xx
 * with a Retry-After. Every other 4xx is permanent (dead-lettered). */
static bool
later_4xx(const struct webhook_call *c)
{
	return c->status == 408 || c->status == 409 || c->status == 425 || c->status == 429 ||
	    c->retry_after[0] != '\0';
}

/* A RETRY by the downstream's status: its Retry-After, when it has a
 * readable one, becomes the delay passed on to the relay. */
static void
retry_after_wish(struct webhook *w, const char *key, const struct webhook_call *c,
    struct inbox_handler_call *call)
{
	int64_t ms;
	char q[200], qk[600];

	if (c->retry_after[0] == '\0')
		return;
	if (webhook_retry_after_parse(c->retry_after, (int64_t)time(NULL),
	        w->cfg.max_retry_after_ms, &ms) != OB_OK) {
		ob_warn("consumer.webhook.bad_retry_after", "key=%s status=%d retry_after=%s"
		    " hint=\"neither delta-seconds nor an HTTP-date: ignored, the relay's"
		    " backoff applies\"", ob_log_q(key, qk, sizeof(qk)), c->status,
		    ob_log_q(c->retry_after, q, sizeof(q)));
		return;
	}
	call->retry_after_ms = (uint32_t)ms;
}

/* A status the downstream asks to be called again for (a 4xx that says
 * later, a 5xx): RETRY for reason, its Retry-After passed on, the answer
 * and then tail in detail. */
static int
retry_later(struct webhook *w, const char *key, const struct webhook_call *c,
    struct inbox_handler_call *call, const char *reason, const char *tail, char *detail,
    size_t detaillen)
{
	call->reason = reason;
	retry_after_wish(w, key, c, call);
	snprintf(detail, detaillen, "downstream answered %d%s%s%s", c->status,
	    c->retry_after[0] ? ", Retry-After: " : "", c->retry_after, tail);
	return OB_WIRE_RETRY;
}

/* The POST and what its outcome means. */
static int
call_downstream(struct webhook *w, const struct ob_wire_msg *m, const char *key,
    struct webhook_call *c, struct inbox_handler_call *call, char *detail,
    size_t detaillen)
{
	if (w->cfg.stall_before_call != NULL && ob_fault_fire(w->cfg.stall_before_call))
		ob_sleep_ms(w->cfg.stall_ms);
	struct webhook_http_result r;
	char err[256];
	int rc = post(w, m, key, c->fence, c->at_most_once, &r, err, sizeof(err));
	if (rc == OB_OK) {
		c->sent = r.sent;
		c->unknown = webhook_outcome_unknown(r.outcome, r.sent);
		c->status = r.status;
		snprintf(c->retry_after, sizeof(c->retry_after), "%s", r.retry_after);
		if (r.body != NULL && valid_text(r.body, r.body_len))
			c->body = r.body; /* NUL-terminated, no NUL in it */
		else
			free(r.body);
	}
	if (w->cfg.die_after_call != NULL && ob_fault_fire(w->cfg.die_after_call))
		ob_fault_die("consumer.webhook.after_call");
	if (w->cfg.stall_after_call != NULL && ob_fault_fire(w->cfg.stall_after_call))
		ob_sleep_ms(w->cfg.stall_ms);
	if (rc != OB_OK) { /* nothing sent */
		COUNT(w, conn_errors);
		MCOUNT(w, calls_conn_error);
		call->reason = "connection";
		snprintf(detail, detaillen, "webhook call not made: %s", err);
		return OB_WIRE_RETRY;
	}
	switch (r.outcome) {
	case WEBHOOK_HTTP_TIMEOUT:
		COUNT(w, timeouts);
		MCOUNT(w, calls_timeout);
		call->reason = "timeout";
		snprintf(detail, detaillen, "webhook timed out after %" PRId64 " ms%s",
		    w->cfg.timeout_ms, r.sent ? "" : " (not connected)");
		return OB_WIRE_RETRY;
	case WEBHOOK_HTTP_TLS:
		COUNT(w, conn_errors);
		MCOUNT(w, calls_conn_error);
		call->reason = "tls";
		snprintf(detail, detaillen, "webhook TLS handshake failed: %.300s (the target's"
		    " certificate must chain to %.300s and name %s)", r.err,
		    webhook_http_trust(w->http), webhook_http_tls_name(w->http));
		log_tls_failure(w, r.err);
		return OB_WIRE_RETRY;
	case WEBHOOK_HTTP_FAILED:
		COUNT(w, conn_errors);
		MCOUNT(w, calls_conn_error);
		call->reason = "connection";
		snprintf(detail, detaillen, "webhook call failed: %s", r.err);
		return OB_WIRE_RETRY;
	case WEBHOOK_HTTP_ANSWERED:
		break;
	}
	if (c->status >= 200 && c->status < 300) {
		COUNT(w, ok);
		MCOUNT(w, calls_2xx);
		return 0; /* apply records it */
	}
	if (c->status >= 400 && c->status < 500 && later_4xx(c)) {
		/* Not a verdict on the message: the downstream asks to be
		 * called again (a burst limit, the same key still in flight
		 * there). The relay retries with its backoff; the key's claim
		 * is released (finish), so the retry calls again with it. */
		COUNT(w, failed);
		MCOUNT(w, calls_4xx);
		return retry_later(w, key, c, call, "http_4xx_retry", ": retry later", detail,
		    detaillen);
	}
	if (c->status >= 400 && c->status < 500) {
		COUNT(w, rejected);
		MCOUNT(w, calls_4xx);
		call->reason = "http_4xx";
		snprintf(detail, detaillen, "downstream answered %d%s%.160s", c->status,
		    c->body ? ": " : "", c->body ? c->body : "");
		return OB_WIRE_REJECT;
	}
	COUNT(w, failed);
	if (c->status >= 500 && c->status < 600)
		MCOUNT(w, calls_5xx);
	else
		MCOUNT(w, calls_other);
	return retry_later(w, key, c, call, "http_5xx", "", detail, detaillen);
}

static int
webhook_apply(PGconn *tx, const struct ob_wire_msg *m, void *arg,
    struct inbox_handler_call *call, char *detail, size_t detaillen)
{
	struct webhook *w = arg;
	struct webhook_call *c = call->state;
	char err[512], q[600];
	const char *key = c->key; /* prepare's */
	if (c->fence == 0) { /* broken mode: nothing to record */
		snprintf(detail, detaillen, "downstream answered %d (no claim)", c->status);
		return OB_WIRE_APPLIED;
	}
	int rc = ob_keyclaim_complete(tx, WEBHOOK_TABLE, key,
	    w->cfg.no_fencing ? OB_KEYCLAIM_ANY_FENCE : c->fence, c->status, c->body, err,
	    sizeof(err));
	if (rc == OB_EFENCED) {
		COUNT(w, fenced_out);
		MCOUNT(w, fenced_out);
		call->reason = "fenced_out";
		ob_warn("consumer.webhook.fenced_out", "key=%s fence=%" PRId64,
		    ob_log_q(key, q, sizeof(q)), c->fence);
		snprintf(detail, detaillen, "%s", err);
		return OB_WIRE_RETRY;
	}
	if (rc != OB_OK) {
		call->reason = "database";
		snprintf(detail, detaillen, "%s", err);
		return OB_WIRE_RETRY;
	}
	snprintf(detail, detaillen, "downstream answered %d", c->status);
	return OB_WIRE_APPLIED;
}

static void
webhook_finish(PGconn *conn, const struct ob_wire_msg *m, void *arg,
    struct inbox_handler_call *call, int status)
{
	struct webhook_call *c = call->state;
	if (c == NULL)
		return;
	if (status != OB_WIRE_APPLIED && status != OB_WIRE_DUPLICATE && c->fence > 0 &&
	    !ob_pg_broken(conn)) {
		char err[512], q[600];
		const char *key = c->key; /* prepare's */
		/* the next attempt (same message) takes it over at once; at most
		 * once, a call that surely did not act is released instead, so
		 * that the next attempt calls (an expired claim is parked) */
		bool acted = c->unknown || (c->status >= 200 && c->status < 300);
		int rc = c->at_most_once && !acted
		    ? ob_keyclaim_release(conn, WEBHOOK_TABLE, key, c->fence, err, sizeof(err))
		    : ob_keyclaim_expire(conn, WEBHOOK_TABLE, key, c->fence, err, sizeof(err));
		if (rc != OB_OK)
			ob_warn("consumer.webhook.release_failed", "err=%s",
			    ob_log_q(err, q, sizeof(q)));
	}
	free(c->body);
	free(c);
	call->state = NULL;
}

int
webhook_handler_new(const struct webhook_config *cfg, struct inbox_handler *out,
    char *err, size_t errlen)
{
	if (cfg->lease_ms <= cfg->timeout_ms) {
		snprintf(err, errlen, "--webhook-lease (%" PRId64 " ms) must be longer than"
		    " --webhook-timeout (%" PRId64 " ms)", cfg->lease_ms, cfg->timeout_ms);
		return OB_EINVAL;
	}
	if (cfg->max_retry_after_ms < 0 ||
	    cfg->max_retry_after_ms > WEBHOOK_RETRY_AFTER_CEILING_MS) {
		snprintf(err, errlen, "--webhook-max-retry-after (%" PRId64 " ms) must be 0 .. %lld"
		    " ms", cfg->max_retry_after_ms, (long long)WEBHOOK_RETRY_AFTER_CEILING_MS);
		return OB_EINVAL;
	}
	if (cfg->n_at_most_once > 0 && cfg->no_claim) {
		snprintf(err, errlen, "--webhook-at-most-once needs the key claims; not with"
		    " --no-dedup");
		return OB_EINVAL;
	}
	struct webhook *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return OB_ENOMEM;
	w->cfg = *cfg;
	if (w->cfg.counters == NULL)
		w->cfg.counters = &w->own;
	int rc;
	const struct webhook_http_config hcfg = { cfg->url, cfg->ca, cfg->server_name,
		cfg->timeout_ms, WEBHOOK_BODY_MAX };
	if ((rc = webhook_mode_parse(cfg->at_most_once, cfg->n_at_most_once, &w->mode, err,
	         errlen)) != OB_OK ||
	    (cfg->secret_file != NULL &&
	        (rc = webhook_secrets_load(cfg->secret_file, &w->secrets, err, errlen)) != OB_OK) ||
	    (rc = webhook_http_new(&hcfg, &w->http, err, errlen)) != OB_OK) {
		webhook_handler_free(&(struct inbox_handler){ .arg = w });
		return rc == OB_ENOMEM ? OB_ENOMEM : OB_EINVAL;
	}
	*out = (struct inbox_handler){ "webhook", webhook_apply, webhook_prepare,
		webhook_finish, w };
	return OB_OK;
}

void
webhook_handler_free(struct inbox_handler *h)
{
	struct webhook *w = h->arg;
	if (w == NULL)
		return;
	webhook_http_free(w->http);
	webhook_secrets_free(w->secrets);
	free(w);
	h->arg = NULL;
}
