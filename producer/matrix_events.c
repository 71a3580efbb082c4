/*
 * matrix_events.c - the JSON lines of `outbox-producer matrix --events`
 * (see matrix_events.h): one writer, one lock, one sequence.
 *
 * Every line is built and printed under ev->mu, so "seq" grows in the
 * order of the output. An attempt's line carries the rows read right after
 * it through the matrix's own connection (under the same lock: libpq's
 * connection is not for two threads at once). It never changes what the
 * cell does, only what is told about it; a read that fails is said on
 * stderr and its rows are null.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matrix_events.h"
#include "outbox/err.h"
#include "outbox/pg.h"

/* The cell's reports (by id) and the keys its client sent (by key), as
 * JSON arrays; $2 is the keys as a JSON array. */
#define ROWS_SQL                                                                           \
	"SELECT (SELECT coalesce(json_agg(json_build_object('id', id, 'title', title,"     \
	"                'idempotency_key', idempotency_key) ORDER BY id), '[]')"              \
	"          FROM app.bug_reports WHERE module = $1),"                                 \
	"       (SELECT coalesce(json_agg(json_build_object('key', idempotency_key,"        \
	"                'state', state, 'fence', fence, 'response_status', response_status)" \
	"                ORDER BY idempotency_key COLLATE \"C\"), '[]')"                       \
	"          FROM app.idempotency_keys"                                                \
	"         WHERE idempotency_key IN (SELECT jsonb_array_elements_text($2::jsonb)))"

int
matrix_events_init(struct matrix_events *ev, PGconn *conn)
{
	memset(ev, 0, sizeof(*ev));
	ev->conn = conn;
	if ((ev->keys = json_array()) == NULL)
		return OB_ENOMEM;
	if (pthread_mutex_init(&ev->mu, NULL) != 0) {
		json_decref(ev->keys);
		ev->keys = NULL;
		return OB_ENOMEM;
	}
	return OB_OK;
}

void
matrix_events_fini(struct matrix_events *ev)
{
	pthread_mutex_destroy(&ev->mu);
	json_decref(ev->keys);
	ev->keys = NULL;
}

/* Print o (built with "seq" ev->seq + 1) as one line and flush; takes o.
 * Called with ev->mu held. */
static void
put_line(struct matrix_events *ev, json_t *o)
{
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s == NULL) {
		fprintf(stderr, "outbox-producer matrix: events: out of memory\n");
		return;
	}
	ev->seq++;
	fputs(s, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	free(s);
}

/* n, or null when n < 0. */
static json_t *
int_or_null(int64_t n)
{
	return n >= 0 ? json_integer(n) : json_null();
}

void
matrix_events_cell(struct matrix_events *ev, const char *fault, const char *server,
    const char *keys, const char *run, const char *module, int article)
{
	pthread_mutex_lock(&ev->mu);
	snprintf(ev->module, sizeof(ev->module), "%s", module);
	json_array_clear(ev->keys);
	put_line(ev, json_pack("{s:s,s:I,s:s,s:s,s:s,s:s,s:s,s:o}", "event", "cell", "seq",
	    (json_int_t)ev->seq + 1, "fault", fault, "server", server, "keys", keys, "run", run,
	    "module", module, "article", int_or_null(article)));
	pthread_mutex_unlock(&ev->mu);
}

void
matrix_events_server(struct matrix_events *ev, const char *what, int port)
{
	pthread_mutex_lock(&ev->mu);
	put_line(ev, json_pack("{s:s,s:I,s:s,s:i}", "event", "server", "seq",
	    (json_int_t)ev->seq + 1, "what", what, "port", port));
	pthread_mutex_unlock(&ev->mu);
}

void
matrix_events_call(struct matrix_events *ev, const char *call, const char *tool_use_id,
    const char *title, const char *why)
{
	pthread_mutex_lock(&ev->mu);
	put_line(ev, json_pack("{s:s,s:I,s:s,s:s,s:s,s:s}", "event", "call", "seq",
	    (json_int_t)ev->seq + 1, "call", call, "tool_use_id", tool_use_id, "title", title,
	    "why", why));
	pthread_mutex_unlock(&ev->mu);
}

/* Add key to the cell's keys unless it is there. Called with ev->mu held. */
static void
keys_add(struct matrix_events *ev, const char *key)
{
	size_t i;
	json_t *k;
	json_array_foreach(ev->keys, i, k)
		if (strcmp(json_string_value(k), key) == 0)
			return;
	json_array_append_new(ev->keys, json_string(key));
}

/* The cell's reports and keys into *reports and *keys (owned; both NULL
 * when the read failed, said on stderr). Called with ev->mu held. */
static void
read_rows(struct matrix_events *ev, json_t **reports, json_t **keys)
{
	char err[512];
	*reports = *keys = NULL;
	char *sent = json_dumps(ev->keys, JSON_COMPACT);
	if (sent == NULL) {
		fprintf(stderr, "outbox-producer matrix: events: out of memory\n");
		return;
	}
	const char *params[2] = { ev->module, sent };
	PGresult *r = ob_pg_rows(ev->conn, ROWS_SQL, 2, params, "rows", err, sizeof(err));
	free(sent);
	if (r == NULL) {
		fprintf(stderr, "outbox-producer matrix: events: %s\n", err);
		return;
	}
	*reports = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
	*keys = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
	PQclear(r);
	if (*reports == NULL || *keys == NULL) {
		fprintf(stderr, "outbox-producer matrix: events: the rows are not JSON\n");
		json_decref(*reports);
		json_decref(*keys);
		*reports = *keys = NULL;
	}
}

/* Why an attempt did not succeed: the client's reason when no answer came,
 * the server's message (its error body) for an answer that is not a 2xx,
 * else NULL. Into out. */
static const char *
attempt_why(const struct client_http_reply *reply, char *out, size_t outlen)
{
	if (reply->outcome != CLIENT_HTTP_ANSWERED)
		return reply->why[0] != '\0' ? reply->why : NULL;
	if (reply->status >= 200 && reply->status < 300)
		return NULL;
	json_t *b = reply->body != NULL ? json_loads(reply->body, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(b, "message"));
	if (m != NULL)
		snprintf(out, outlen, "%s", m);
	json_decref(b);
	return m != NULL ? out : NULL;
}

void
matrix_events_attempt(struct matrix_events *ev, const char *call, int attempt,
    const char *key, const struct client_http_reply *reply)
{
	static const char *const outcomes[] = {
		[CLIENT_HTTP_NOT_SENT] = "not_sent",
		[CLIENT_HTTP_LOST] = "lost",
		[CLIENT_HTTP_ANSWERED] = "answered",
	};
	char why[512];
	json_t *reports, *keys;
	bool answered = reply->outcome == CLIENT_HTTP_ANSWERED;
	pthread_mutex_lock(&ev->mu);
	if (key[0] != '\0')
		keys_add(ev, key);
	read_rows(ev, &reports, &keys);
	put_line(ev, json_pack("{s:s,s:I,s:s,s:i,s:s?,s:s,s:o,s:b,s:s?,s:o,s:o}", "event",
	    "attempt", "seq", (json_int_t)ev->seq + 1, "call", call, "attempt", attempt, "key",
	    key[0] != '\0' ? key : NULL, "outcome", outcomes[reply->outcome], "status",
	    answered ? json_integer(reply->status) : json_null(), "replayed", reply->replayed,
	    "why", attempt_why(reply, why, sizeof(why)), "reports",
	    reports != NULL ? reports : json_null(), "keys", keys != NULL ? keys : json_null()));
	pthread_mutex_unlock(&ev->mu);
}

void
matrix_events_result(struct matrix_events *ev, int64_t reports, int article)
{
	pthread_mutex_lock(&ev->mu);
	put_line(ev, json_pack("{s:s,s:I,s:I,s:o}", "event", "result", "seq",
	    (json_int_t)ev->seq + 1, "reports", (json_int_t)reports, "article",
	    int_or_null(article)));
	pthread_mutex_unlock(&ev->mu);
}

void
matrix_events_matrix(struct matrix_events *ev, int equal, int cells)
{
	pthread_mutex_lock(&ev->mu);
	put_line(ev, json_pack("{s:s,s:I,s:i,s:i}", "event", "matrix", "seq",
	    (json_int_t)ev->seq + 1, "equal", equal, "cells", cells));
	pthread_mutex_unlock(&ev->mu);
}
