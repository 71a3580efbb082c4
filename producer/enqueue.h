/*
 * enqueue.h - the transactional outbox write: a bug report (the business
 * row) and its outbox record commit in ONE transaction, or neither does.
 */
#ifndef OUTBOX_PRODUCER_ENQUEUE_H
#define OUTBOX_PRODUCER_ENQUEUE_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#define PRODUCER_TOPIC_REPORT_CREATED "report.created"

/* The outbox idempotency key of a report's message, as SQL over a row alias
 * r of app.bug_reports: the report's own id ("report-42"). One message per
 * report: the request's Idempotency-Key guards the request (it is stored
 * with the report) and may create a second report once it has expired, or
 * in a broken mode; under the request's key that report's message would be
 * refused by outbox.enqueue (SQLSTATE OB002: the key's payload differs). */
#define PRODUCER_REPORT_KEY_SQL "('report-' || r.id)"

/* The outbox payload of a report, as SQL over a row alias r of
 * app.bug_reports (shared by every statement that enqueues one). */
#define PRODUCER_REPORT_PAYLOAD_SQL                                              \
	"jsonb_build_object('report_id', r.id, 'title', r.title, 'module', r.module," \
	" 'steps', r.steps, 'severity', r.severity, 'created_at', r.created_at)"

/* A session that writes the outbox: connected as "outbox-producer", the
 * schema checked to serve this producer and its role's grants
 * (ob_protocol_check, OB_PROTOCOL_PRODUCER), commits durable whatever the
 * server's default, so that what is answered as written is on disk
 * (ob_pg_durable_commits). On OB_OK *out is owned (PQfinish); else *out
 * is NULL and err has the reason, the conninfo's password redacted. */
int producer_connect(const char *conninfo, PGconn **out, char *err, size_t errlen);

struct bug_report {
	const char *title;    /* 1..200 characters */
	const char *module;   /* 1..100 characters */
	const char *steps;    /* 0..10000 characters */
	const char *severity; /* low | medium | high | critical */
};

/* Insert the report (its idempotency_key = key) and enqueue it (topic
 * report.created, the report row as JSON payload, outbox key "report-<id>")
 * inside the caller's open transaction.
 * On success writes *report_id and *message_id. OB_EDB with the server's
 * message in err (the caller rolls back); OB_EINVAL when the server said
 * the input is invalid (SQLSTATE class 22 or 23). */
int producer_insert_report(PGconn *conn, const struct bug_report *r,
    const char *key, int64_t *report_id, int64_t *message_id, char *err,
    size_t errlen);

/* BEGIN; producer_insert_report; COMMIT. Any failure rolls both back. */
int producer_enqueue_report(PGconn *conn, const struct bug_report *r,
    const char *key, int64_t *report_id, int64_t *message_id, char *err,
    size_t errlen);

/* Write a fresh random idempotency key (a UUID, 36 chars + NUL) into out. */
void producer_new_key(char out[37]);

#endif
