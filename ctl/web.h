/*
 * web.h - the pieces of `outboxctl web` (docs/web.md) and how they meet:
 *
 *   web_cmd.c     flags, start and stop, signals (the one signal layer)
 *   web_poll.c    the ONE poller of a server: its own read-only libpq
 *                 connection(s), a snapshot every poll interval, kept as
 *                 JSON text that requests copy
 *   web_server.c  the routes on common/httpd.c; never queries for a GET;
 *                 a requeue runs on a thread of its own
 *   web_scrape.c  the consumer's counts from its /metrics (--consumer-metrics)
 *   web_token.c   the bearer token of --token-file, compared in constant
 *                 time
 *   web_assets.c  the page (generated from ctl/web/ at build time)
 */
#ifndef OUTBOX_CTL_WEB_H
#define OUTBOX_CTL_WEB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the poller ------------------------------------------------------ */

struct web_poll_config {
	const char *db;               /* producer database (borrowed) */
	const char *inbox_db;         /* consumer database, or NULL */
	const char *consumer_metrics; /* the consumer's /metrics URL, or NULL */
	int64_t interval_ms;          /* between two snapshots */
	int64_t statement_timeout_ms; /* of every query of the poller */
	int64_t messages_max;         /* newest messages in a snapshot */
	int64_t dead_max;             /* dead letters in a snapshot (oldest first) */
	int64_t dedup_max;            /* newest dedup records */
	int64_t series_max;           /* points of the chart kept */
	int64_t retention_ms;         /* the consumer's dedup retention (requeueable) */
};

struct web_poll;

/* Start the poller's thread (it connects by itself and reconnects after a
 * failure, logging it once per outage). Returns OB_OK with *out owned
 * (web_poll_stop), or OB_ENOMEM / OB_EINVAL with one line in err. The
 * config's strings must outlive the poller. */
int web_poll_start(const struct web_poll_config *cfg, struct web_poll **out, char *err,
    size_t errlen);

/* A copy of the latest snapshot (/api/overview's JSON text), with or
 * without the payloads; malloc'd, release with free(); *len its length.
 * NULL before the first snapshot (or out of memory). Never blocks on the
 * database: a mutex held only to copy. */
char *web_poll_snapshot(struct web_poll *p, bool payloads, size_t *len);

/* Snapshots made so far (tests and the log). */
uint64_t web_poll_count(struct web_poll *p);

/* Stop the thread, close the connections, free p. NULL is a no-op. */
void web_poll_stop(struct web_poll *p);

/* ---- the consumer's counters ---------------------------------------- */

struct web_consumer_counts {
	int64_t duplicates;        /* answered duplicate, all topics */
	int64_t key_reuse_rejects; /* a key redelivered with another topic or payload */
};

/* GET url (a consumer's Prometheus /metrics), waiting up to timeout_ms,
 * and sum its counters into *out. OB_OK, or OB_ENET with one line in err
 * (unreachable, not 200, not a consumer's metrics). Blocks: the poller's
 * thread only. */
int web_scrape_consumer(const char *url, int64_t timeout_ms, struct web_consumer_counts *out,
    char *err, size_t errlen);

/* ---- the token ------------------------------------------------------- */

/* The token's SHA-256, so that comparing never depends on its length. */
#define WEB_TOKEN_HASH 32
/* The longest token line read. */
#define WEB_TOKEN_MAX 4096
/* The shortest token accepted. */
#define WEB_TOKEN_MIN 16

struct web_token {
	unsigned char hash[WEB_TOKEN_HASH];
};

/* Read the token from the first line of path (trailing blanks and the
 * newline removed; WEB_TOKEN_MIN..WEB_TOKEN_MAX bytes). OB_OK, or
 * OB_EINVAL with one line in err (the token itself is never in it). */
int web_token_load(const char *path, struct web_token *out, char *err, size_t errlen);

/* True when header (an Authorization value, may be NULL) is
 * "Bearer <the token>". Constant time in the token. */
bool web_token_check(const struct web_token *t, const char *header);

/* ---- the server ------------------------------------------------------ */

struct web_demo;

struct web_server_config {
	const char *url;               /* --http */
	const struct web_token *token; /* NULL: requeue (and the demo's steps) disabled */
	bool loopback;                 /* bound to loopback: payloads shown without the token */
	const char *requeue_db;        /* the connection a requeue uses (borrowed) */
	int64_t retention_ms;          /* the requeue's dedup-retention rule */
	int64_t statement_timeout_ms;  /* of the requeue's statements */
	int64_t max_body;              /* bytes of a request body; more get 413 */
	int64_t max_conns;             /* open connections */
	int64_t requeue_ids_max;       /* ids in one requeue */
	struct web_poll *poll;         /* borrowed */
	struct web_demo *demo;         /* borrowed, NULL without --demo */
};

struct web_server;

/* Bind --http and serve. OB_OK with *out owned (web_server_stop), or
 * OB_EINVAL / OB_ENET / OB_ENOMEM with one line in err. */
int web_server_start(const struct web_server_config *cfg, struct web_server **out, char *err,
    size_t errlen);

/* The TCP port bound. */
int web_server_port(const struct web_server *s);

/* Wait for a requeue in progress, stop serving, free s. NULL is a no-op. */
void web_server_stop(struct web_server *s);

#endif
