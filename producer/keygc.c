/*
 * keygc.c - the key retention thread (see keygc.h). Every interval it
 * deletes expired keys of both key tables (reports, messages), one batch
 * at a time until a batch comes back short.
 * Its database connection is its own.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "keygc.h"
#include "metrics.h"
#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/keyclaim.h"
#include "outbox/log.h"
#include "outbox/pg.h"

struct keygc {
	char *db;
	int64_t retention_ms, interval_ms;
	int batch;
	struct producer_metrics *pm;
	pthread_t thread;
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	bool stopping;
};

static void
gc_pass(struct keygc *g, PGconn **conn)
{
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
	/* Both endpoints' key tables, under one retention. */
	static const char *const tables[] = { PRODUCER_KEY_TABLE, PRODUCER_MESSAGE_KEY_TABLE };
	for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
		for (;;) {
			if (ob_keyclaim_gc(*conn, tables[t], g->retention_ms, g->batch, &deleted, err,
			        sizeof(err)) != OB_OK) {
				char q[600];
				ob_warn("producer.keygc.failed", "table=%s deleted=%" PRId64 " err=%s",
				    tables[t], total, ob_log_q(err, q, sizeof(q)));
				return;
			}
			total += deleted;
			producer_metrics_keys_collected(g->pm, deleted);
			pthread_mutex_lock(&g->mtx);
			bool stop = g->stopping;
			pthread_mutex_unlock(&g->mtx);
			if (stop)
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

static void *
gc_main(void *arg)
{
	struct keygc *g = arg;
	PGconn *conn = NULL;
	pthread_mutex_lock(&g->mtx);
	while (!g->stopping) {
		pthread_mutex_unlock(&g->mtx);
		gc_pass(g, &conn);
		pthread_mutex_lock(&g->mtx);
		struct timespec until = ob_wall_deadline(g->interval_ms);
		while (!g->stopping &&
		    pthread_cond_timedwait(&g->cv, &g->mtx, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&g->mtx);
	if (conn != NULL)
		PQfinish(conn);
	return NULL;
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
	pthread_mutex_init(&g->mtx, NULL);
	pthread_cond_init(&g->cv, NULL);
	if (pthread_create(&g->thread, NULL, gc_main, g) != 0) {
		pthread_cond_destroy(&g->cv);
		pthread_mutex_destroy(&g->mtx);
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
	pthread_mutex_lock(&g->mtx);
	g->stopping = true;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mtx);
	pthread_join(g->thread, NULL);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mtx);
	free(g->db);
	free(g);
}
