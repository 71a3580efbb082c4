/*
 * handler_webhook.h - the built-in `webhook` handler: POST each message's
 * payload to a downstream URL, passing the idempotency key on.
 *
 * The call is outside our transaction, so it is guarded by the key-claim
 * state machine (common/include/outbox/keyclaim.h) on inbox.webhook_calls:
 * before the call the key is claimed "started" with a lease and a fencing
 * token, and that claim COMMITS on its own; then the request goes out with
 * headers Idempotency-Key, Outbox-Topic, Outbox-Fence, Outbox-Message-Id and
 * Outbox-Created-At (the message's enqueue time, RFC 3339 UTC).
 *
 *   2xx                      -> the claim is completed (status and body
 *                               stored) in the batch transaction, next to
 *                               the dedup record, only if the token still
 *                               holds: APPLIED, or RETRY when fenced out
 *   408, 409, 425, 429, or   -> RETRY (lease expired at once): "later"
 *   any 4xx with Retry-After
 *   other 4xx                -> REJECT (claim's lease expired at once)
 *   5xx, other, timeout,     -> RETRY (lease expired at once, token kept);
 *   connection lost             every later attempt sends the SAME key, so
 *                               downstream can deduplicate
 *
 * Retry-After on any answer that is RETRY (a "later" 4xx, a 503, any
 * 5xx, 1xx/3xx): delta-seconds or an IMF-fixdate HTTP-date
 * (retry_after.h), cut to --webhook-max-retry-after, a date in the past
 * 0, is passed on to the relay with the RETRY (retry_after_ms, wire
 * version 2), which then sends the message again no earlier than that. A
 * value that is neither form is ignored (one warn line,
 * consumer.webhook.bad_retry_after): the relay's own backoff applies.
 *   claimed elsewhere, live  -> RETRY (busy)
 *   claimed, lease expired   -> taken over with the token bumped
 *   done before              -> DUPLICATE, nothing sent
 *   key reused, other payload-> REJECT (fingerprint mismatch)
 *   parked (at-most-once)    -> REJECT, WEBHOOK_PARKED_DETAIL, nothing sent
 *                               (in either mode), until outboxctl webhook
 *                               resolve: --as sent -> DUPLICATE,
 *                               --as not-sent -> called once more
 *
 * At most once (topics matching --webhook-at-most-once; webhook_mode.h),
 * for downstreams that ignore the key; only these rows differ:
 *   timeout or connection    -> the claim is PARKED (state 'unknown'):
 *   lost once the request       REJECT, WEBHOOK_PARKED_DETAIL, never re-sent
 *   went out                    by the consumer (consumer.webhook.parked)
 *   claimed, lease expired   -> PARKED without a call (the holder may have
 *                               called: a crash, or a 2xx not recorded)
 *   not connected (refused,  -> RETRY as above; the claim is released, so
 *   DNS, proxy, TLS hand-       the next attempt calls (token bumped)
 *   shake), or
 *   any HTTP answer but 2xx
 *
 * The call (webhook_http.h, libcurl): one request, its deadline
 * timeout_ms (connect included), no redirect followed, connections kept
 * and reused between calls (an at-most-once call opens its own), proxies
 * from the environment (https_proxy, http_proxy, all_proxy, no_proxy). A
 * call "not connected" (refused, DNS, the proxy could not reach the target,
 * a TLS handshake refused) sent nothing; one that fails after its request
 * went out is an unknown outcome (webhook_mode.h), never re-sent within
 * the call.
 *
 * https:// targets: the target's certificate must chain to a trusted CA
 * and carry the server name (the URL's host, or --webhook-server-name, to
 * which the request is then addressed while the connection goes to the
 * URL's host), checked by OpenSSL through libcurl. Trusted: the system CA
 * store ($SSL_CERT_FILE / $SSL_CERT_DIR when set, else libcurl's built-in
 * bundle), or with --webhook-ca that file alone. There is no way to skip
 * the check. A handshake that fails (another CA, another name, expired) is
 * RETRY like any connection failure (reason "tls", the key's lease expired
 * at once, or released at most once: nothing was sent), logged at warn
 * (consumer.webhook.tls_failed, at most one line per
 * WEBHOOK_TLS_LOG_EVERY_MS with the count), never dead-lettered for it.
 *
 * Signed calls: with a secret file every POST carries Outbox-Signature
 * (webhook_sign.h), an HMAC-SHA256 of its timestamp and body, so the
 * downstream can refuse forgeries and replays.
 */
#ifndef OUTBOX_CONSUMER_HANDLER_WEBHOOK_H
#define OUTBOX_CONSUMER_HANDLER_WEBHOOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handler.h"
#include "outbox/fault.h"
#include "outbox/metrics.h"

#define WEBHOOK_TABLE "inbox.webhook_calls"
#define WEBHOOK_BODY_MAX (64 * 1024) /* bytes of a downstream body stored */
#define WEBHOOK_TLS_LOG_EVERY_MS 30000 /* consumer.webhook.tls_failed at most this often */

struct webhook_counters {
	_Atomic uint64_t calls;       /* HTTP requests sent */
	_Atomic uint64_t ok;          /* 2xx */
	_Atomic uint64_t rejected;    /* 4xx */
	_Atomic uint64_t failed;      /* 5xx or another status */
	_Atomic uint64_t timeouts;
	_Atomic uint64_t conn_errors; /* refused, reset, lost */
	_Atomic uint64_t busy;        /* claimed by a live holder */
	_Atomic uint64_t takeovers;   /* expired claim taken over, token bumped */
	_Atomic uint64_t fenced_out;  /* our completion refused: taken over */
	_Atomic uint64_t replayed;    /* done before: answered without a call */
	_Atomic uint64_t mismatch;    /* key reused with another payload */
	_Atomic uint64_t bad_keys;    /* key/topic not sendable as a header */
	_Atomic uint64_t parked;      /* at-most-once: calls parked, outcome unknown */
};

/* Registry handles for the same events (consumer/metrics.h registers
 * them; NULL handles are no-ops). calls_* add up to the calls sent. */
struct webhook_metrics {
	struct ob_metric *calls_2xx;
	struct ob_metric *calls_4xx;
	struct ob_metric *calls_5xx;
	struct ob_metric *calls_other;      /* 1xx/3xx: retried like a 5xx */
	struct ob_metric *calls_timeout;
	struct ob_metric *calls_conn_error;
	struct ob_metric *busy;
	struct ob_metric *takeovers;
	struct ob_metric *fenced_out;
	struct ob_metric *replayed;
	struct ob_metric *mismatch;
	struct ob_metric *bad_keys;
	struct ob_metric *parked;           /* at-most-once: calls parked */
};

struct webhook_config {
	const char *url;               /* http://host:port/path, borrowed */
	int64_t timeout_ms;            /* per call */
	int64_t lease_ms;              /* claim lease; > timeout_ms */
	struct webhook_counters *counters; /* borrowed; may be NULL */
	struct ob_fault *die_after_call;   /* SIGKILL self once the call returned */
	struct ob_fault *stall_after_call; /* sleep stall_ms once the call returned */
	struct ob_fault *stall_before_call; /* sleep stall_ms after the claim, before the call */
	int64_t stall_ms;
	bool no_claim;                 /* BROKEN MODE (--no-dedup): call without a claim */
	bool no_fencing;               /* BROKEN MODE (--no-fencing): complete a key whoever holds it */
	const struct webhook_metrics *metrics; /* borrowed; may be NULL */
	const char *ca;                /* https:// only: NULL = the system CA store,
	                                * else the CA file (PEM) alone the target's
	                                * certificate must chain to */
	const char *server_name;       /* https:// only: name the target's certificate
	                                * must carry and the request is addressed to;
	                                * NULL = the URL's host */
	const char *secret_file;       /* NULL, or sign every call (webhook_sign.h) */
	int64_t max_retry_after_ms;    /* a Retry-After longer than this is cut to it
	                                * (0 .. WEBHOOK_RETRY_AFTER_CEILING_MS;
	                                * 0 = pass none on) */
	char *const *at_most_once;     /* topic patterns called at most once
	                                * (webhook_mode.h), borrowed; n_at_most_once */
	size_t n_at_most_once;
};

/* Build the handler (parses the URL, sets up the HTTP transport: for an
 * https:// URL checks the CA file, or the system store's variables, the
 * way libcurl will read them; logs consumer.webhook.target). On success
 * *out is filled; release with webhook_handler_free, after every serving
 * thread stopped (it closes the pooled connections). OB_EINVAL (bad URL,
 * user info in it, a CA or server name with http://, a CA file or
 * $SSL_CERT_FILE that cannot be read or parsed, a bad server name, lease
 * not above the timeout, a bad --webhook-at-most-once pattern, or one with
 * no_claim, a bad secret file; one line in err) or OB_ENOMEM. The caller
 * may call webhook_http_global_init first (outbox-consumer does, before
 * its threads); it is done here too otherwise. */
int webhook_handler_new(const struct webhook_config *cfg,
    struct inbox_handler *out, char *err, size_t errlen);
void webhook_handler_free(struct inbox_handler *h);

#endif
