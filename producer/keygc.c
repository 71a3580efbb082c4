/*
 * keygc.c - the key retention thread (see keygc.h). Every interval it
 * deletes expired keys of both key tables (reports, messages), one batch
 * at a time until a batch comes back short.
 * Its database connection is its own.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "keygc.h"
#include "metrics.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/ticker.h"

struct keygc {
	char *db;
	int64_t retention_ms, interval_ms;
	int batch;
	struct producer_metrics *pm;
	struct ob_ticker ticker; /* gc_pass, every interval_ms */
	PGconn *conn;            /* the ticker thread's own */
};

/* Whether table (schema-qualified) exists in conn's database. */
static int
table_present(PGconn *conn, const char *table, bool *present, char *err, size_t errlen)
{
	const char *params[1] = { table };
	PGresult *res = ob_pg_rows(conn, "SELECT to_regclass($1) IS NOT NULL", 1, params,
	    "key table lookup", err, errlen);
	if (res == NULL)
		return OB_EDB;
	*present = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	return OB_OK;
}

static void
warn_failed(const char *table, int64_t deleted, const char *err)
{
	char q[600];
	ob_warn("producer.keygc.failed", "table=%s deleted=%" PRId64 " err=%s", table, deleted,
	    ob_log_q(err, q, sizeof(q)));
}

/* One pass over both key tables (the ticker's work). */
static void
gc_pass(void *arg)
{
	struct keygc *g = arg;
	PGconn **conn = &g->conn;
	char err[512];
	int64_t total = 0, deleted;
	if (*conn != NULL && ob_pg_broken(*conn)) {
		PQfinish(*conn);
		*conn = NULL;
	}
	if (*conn == NULL &&
	    ob_pg_connect(g->db, "outbox-producer-keygc", conn, err, sizeof(err)) != OB_OK) {
		char q[600];
		ob_warn("producer.keygc.connect_failed", "retry_in_ms=%" PRId64 " err=%s",
		    g->interval_ms, ob_log_q(err, q, sizeof(q)));
		return;
	}
	/* Both endpoints' key tables, under one retention; the reports' only
	 * where the demo is installed (outboxctl migrate --demo). A table that
	 * fails is reported and the next one still swept. */
	static const char *const tables[] = { PRODUCER_KEY_TABLE, PRODUCER_MESSAGE_KEY_TABLE };
	for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
		bool present = false;
		if (table_present(*conn, tables[t], &present, err, sizeof(err)) != OB_OK) {
			warn_failed(tables[t], total, err);
			continue;
		}
		while (present) {
			if (ob_keyclaim_gc(*conn, tables[t], g->retention_ms, g->batch, &deleted, err,
			        sizeof(err)) != OB_OK) {
				warn_failed(tables[t], total, err);
				break;
			}
			total += deleted;
			producer_metrics_keys_collected(g->pm, deleted);
			if (ob_ticker_stopping(&g->ticker))
				goto done;
			if (deleted < g->batch)
				break;
		}
	}
done:
	if (total > 0)
		ob_info("producer.keygc.deleted", "keys=%" PRId64 " retention_ms=%" PRId64, total,
		    g->retention_ms);
}

int
keygc_start(const char *db, int64_t retention_ms, int64_t interval_ms, int batch,
    struct producer_metrics *pm, struct keygc **out, char *err, size_t errlen)
{
	struct keygc *g = calloc(1, sizeof(*g));
	if (g == NULL || (g->db = strdup(db)) == NULL) {
		free(g);
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	g->retention_ms = retention_ms;
	g->interval_ms = interval_ms;
	g->batch = batch;
	g->pm = pm;
	if (ob_ticker_start(&g->ticker, interval_ms, gc_pass, g) != OB_OK) {
		free(g->db);
		free(g);
		snprintf(err, errlen, "cannot start the key GC thread");
		return OB_ENOMEM;
	}
	*out = g;
	return OB_OK;
}

void
keygc_stop(struct keygc *g)
{
	ob_ticker_stop(&g->ticker);
	if (g->conn != NULL)
		PQfinish(g->conn);
	free(g->db);
	free(g);
}
