/*
 * webhook_target.h - a small real HTTP server for the webhook tests (nng's
 * HTTP server API, in the test process): POST /hook, deduplicating on the
 * Idempotency-Key header the way a well-behaved downstream does. It counts
 * requests and effects per key, remembers the Outbox-Fence of each request,
 * and can be told to fail (answer a status without acting), to time out
 * (act, then hold the answer for a time, or until released), to lose its
 * answer after acting (close the connection), or to lose the request
 * before acting. It also counts what a careless downstream that IGNORES
 * the key would have applied (wt_acts). Thread-safe.
 */
#ifndef OUTBOX_WEBHOOK_TARGET_H
#define OUTBOX_WEBHOOK_TARGET_H

#include <stddef.h>
#include <stdint.h>

struct wt_target;

/* Listen on 127.0.0.1, a free port; url gets "http://127.0.0.1:PORT/hook".
 * Returns NULL on failure. */
struct wt_target *wt_start(char *url, size_t urllen);
/* The same over HTTPS (nng's TLS) with the certificate and key files
 * given (PEM); url gets "https://127.0.0.1:PORT/hook". */
struct wt_target *wt_start_tls(char *url, size_t urllen, const char *cert, const char *key);
void wt_stop(struct wt_target *t);

/* The next n requests get status (e.g. 500 or 400) and act on nothing. */
void wt_fail_next(struct wt_target *t, int n, int status);
/* From now on answer 401 (and act on nothing) unless the request carries a
 * valid Outbox-Signature under secret, its t within tolerance_s of now
 * (secret NULL: stop requiring). wt_refused: how many were refused. */
void wt_require_signature(struct wt_target *t, const char *secret, int tolerance_s);
int wt_refused(struct wt_target *t);

/* The same with a Retry-After header on those answers (NULL: none), e.g.
 * 429 or 503 with "3" or an HTTP-date. */
void wt_fail_next_retry_after(struct wt_target *t, int n, int status, const char *retry_after);
/* The next n requests act, then wait hold_ms before answering. */
void wt_hold_next(struct wt_target *t, int n, int hold_ms);
/* The next n requests act, then hold their answer until wt_release (at
 * most 60 s): a call in flight for as long as a test needs, ended by a
 * condition rather than a timer. */
void wt_gate_next(struct wt_target *t, int n);
/* Let the requests wt_gate_next holds answer (and any later ones). */
void wt_release(struct wt_target *t);
/* The next n requests act, then the connection is closed unanswered. */
void wt_lose_next(struct wt_target *t, int n);
/* The next n requests are dropped: closed unanswered WITHOUT acting. */
void wt_drop_next(struct wt_target *t, int n);

int wt_requests(struct wt_target *t, const char *key); /* requests with this key */
int wt_effects(struct wt_target *t, const char *key);  /* times it acted on it */
/* Times a downstream that ignores the key would have applied key: every
 * request with it that reached the acting step (held and lost ones too). */
int wt_acts(struct wt_target *t, const char *key);
int wt_total(struct wt_target *t);                     /* all requests */
int wt_keys(struct wt_target *t);                      /* distinct keys seen */
/* When the requests with key arrived (nng_clock() ms, arrival order): up to
 * max of them into ms; returns how many there were (at most WT_TIMES). */
#define WT_TIMES 16
int wt_request_times(struct wt_target *t, const char *key, int64_t *ms, int max);
/* The Outbox-Fence values seen for key, comma-separated, in arrival order. */
void wt_fences(struct wt_target *t, const char *key, char *out, size_t outlen);
/* The last request's header (copied), "" when absent. */
void wt_last_header(struct wt_target *t, const char *name, char *out, size_t outlen);

#endif
