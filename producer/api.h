/*
 * api.h - the producer's HTTP API, independent of the HTTP transport: one
 * call per request, on a database connection the caller owns (one per
 * serving thread; never shared between threads).
 *
 *   POST /v1/reports                     create (Idempotency-Key required
 *                                        in modes split and atomic)
 *   GET  /v1/reports?idempotency_key=K   recovery lookup by key
 *   GET  /v1/reports/{id}                one report
 *   POST /v1/messages                    a generic message (api_messages.h;
 *                                        Idempotency-Key required)
 *   GET  /v1/messages?idempotency_key=K  its recovery lookup
 *   GET  /healthz                        the database answers
 *
 * Modes: atomic (the real one: key claim with lease and fencing token, then
 * report + outbox record + key DONE in ONE transaction), split (check key,
 * insert, record the key in a second transaction: the known-broken way) and
 * none (no key handling). The key table is app.idempotency_keys, driven by
 * common/keyclaim.c.
 *
 * Every request is served in its bearer token's scope (auth.h): keys are
 * stored per scope (report_input.h, report_scoped_key), so a key, its
 * replay, the lookup by key and GET by id only ever see the caller's own
 * scope. Without tokens everything is in the default scope.
 */
#ifndef OUTBOX_PRODUCER_API_H
#define OUTBOX_PRODUCER_API_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_reply.h" /* struct api_response, api_response_fini, api_error */
#include "outbox/fault.h"

#define PRODUCER_KEY_TABLE "app.idempotency_keys"   /* POST /v1/reports */
#define PRODUCER_MESSAGE_KEY_TABLE "outbox.message_keys" /* POST /v1/messages */

enum producer_mode {
	PRODUCER_MODE_NONE = 0, /* BROKEN: no key handling at all */
	PRODUCER_MODE_SPLIT,    /* BROKEN: check, insert, record key in a 2nd tx */
	PRODUCER_MODE_ATOMIC,   /* claim; report + outbox + key DONE in one tx */
};

/* Parse "none|split|atomic". OB_OK or OB_EINVAL. */
int producer_mode_parse(const char *s, enum producer_mode *out);
const char *producer_mode_name(enum producer_mode m);

/* Fault points (counters, per process). Where "crash" kills depends on the
 * mode: none after the report committed; split after the report committed
 * and before the key is recorded; atomic after claiming the key, before the
 * report is written. "slow" sleeps slow_ms after the key claim (or check),
 * before the business write. "lose_response" closes the connection without
 * a byte after COMMIT. */
struct producer_faults {
	struct ob_fault lose_response;
	struct ob_fault crash;
	struct ob_fault slow;
	int64_t slow_ms;
};

struct producer_metrics; /* metrics.h */

struct api_config {
	enum producer_mode mode;
	_Atomic int *live_mode; /* non-NULL (--demo-admin): the mode, switched at run
	                         * time and read once per request; mode is ignored */
	int64_t lease_ms;  /* key lease (atomic) */
	bool fencing;      /* false: TEST-ONLY broken switch, completion unfenced */
	struct producer_faults *faults;
	struct producer_metrics *metrics; /* NULL: not counted (takeovers, fenced out) */
};

/* One request as the transport hands it over (all borrowed). */
struct api_request {
	const char *method;
	const char *path;      /* without the query string */
	const char *query;     /* after '?', or NULL */
	const char *key_header; /* Idempotency-Key header, or NULL */
	const char *body;
	size_t body_len;
	const char *scope;     /* the bearer token's scope (auth.h): keys and
	                        * reports are its own; NULL or "" = the default */
	const char *topics;    /* the token's topic list (auth.h) for
	                        * /v1/messages; NULL = any topic */
};

/* Handle req on conn (which must not be inside a transaction). Always fills
 * *res (a 5xx when the database failed; conn may then be broken, which the
 * caller checks with ob_pg_broken and reconnects). Blocks on the database
 * and on the slow fault; may kill the process (crash fault). */
void api_handle(PGconn *conn, const struct api_config *cfg,
    const struct api_request *req, struct api_response *res);

#endif
