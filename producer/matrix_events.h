/*
 * matrix_events.h - `outbox-producer matrix --events`: what a cell does, as
 * JSON lines on stdout for a program that steps through it (the web
 * view's): the cell, its server's life, each logical call, each attempt
 * with the database rows right after it, the count; at the end of the
 * 25-cell run the verdict. One compact JSON object a line, flushed after
 * each, numbered by "seq" (1, 2, 3 ... over the whole output) in the order
 * the events happened. docs/producer.md lists the members.
 *
 * One writer for every line: it holds a lock, so the two client threads of
 * a concurrent-duplicate cell can report attempts at once, and the
 * matrix's connection, which only it uses while the cell's calls run.
 */
#ifndef OUTBOX_PRODUCER_MATRIX_EVENTS_H
#define OUTBOX_PRODUCER_MATRIX_EVENTS_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "client.h"

struct matrix_events {
	pthread_mutex_t mu;
	PGconn *conn;       /* borrowed: read under mu */
	int64_t seq;        /* the last line's */
	char module[160];   /* the cell's: its app.bug_reports rows */
	json_t *keys;       /* the keys the cell's client sent so far (a sorted set) */
};

/* Set up ev to write to stdout, reading rows through conn (borrowed: the
 * caller keeps it open until matrix_events_fini and does not use it while
 * a cell's calls run). OB_OK or OB_ENOMEM. */
int matrix_events_init(struct matrix_events *ev, PGconn *conn);
void matrix_events_fini(struct matrix_events *ev);

/* A cell starts: its fault, server mode and key source (the --cell
 * words), its run id and module, the article's count (-1: not one of the
 * article's rows). Forgets the previous cell's keys. */
void matrix_events_cell(struct matrix_events *ev, const char *fault, const char *server,
    const char *keys, const char *run, const char *module, int article);

/* The cell's server: what ("started", "crashed", "restarted", "stopped")
 * on port. */
void matrix_events_server(struct matrix_events *ev, const char *what, int port);

/* A logical call starts: call "A" or "B", its tool_use id, the report's
 * title, and why it is made (a short sentence). */
void matrix_events_call(struct matrix_events *ev, const char *call, const char *tool_use_id,
    const char *title, const char *why);

/* An attempt of call ended (as client_opts.on_attempt reports it): the
 * line, with the cell's reports and keys read right after it. Any thread. */
void matrix_events_attempt(struct matrix_events *ev, const char *call, int attempt,
    const char *key, const struct client_http_reply *reply);

/* The cell's count in app.bug_reports, and the article's (-1: none). */
void matrix_events_result(struct matrix_events *ev, int64_t reports, int article);

/* The 25-cell run ended: equal of cells as in the article. */
void matrix_events_matrix(struct matrix_events *ev, int equal, int cells);

#endif
