/*
 * api_claim.h - an idempotent create around its key claim, shared by
 * POST /v1/reports (atomic mode, api.c) and POST /v1/messages
 * (api_messages.c): the claim, its verdict, a takeover noted, the final
 * write, being fenced out of it, it failing. The claim itself and
 * every write of a key table are common/keyclaim.c's.
 */
#ifndef OUTBOX_PRODUCER_API_CLAIM_H
#define OUTBOX_PRODUCER_API_CLAIM_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "outbox/keyclaim.h"

/* A request's Idempotency-Key: as the client sent it (what it reads back
 * and what is logged), and as stored under its token's scope. */
struct api_key {
	const char *sent;
	const char *stored;
	const char *scope; /* "" = the default scope */
};

/* An endpoint's fused final write: one prepared statement that checks the
 * claim still holds, writes, and completes the key in one round trip. */
struct api_final_write {
	const char *table;    /* the endpoint's key table */
	const char *stmt;     /* the prepared statement's name and text: one */
	const char *sql;      /* row while the fence held, none when fenced out */
	int nparams;          /* at most API_FINAL_WRITE_PARAMS_MAX */
	int fence_param;      /* the index of the parameter that is the claim's fence */
	int body_col;         /* the row's column with the 201 body */
	const char *crash_at; /* the fault point right after the claim (--fault) */
	const char *context;  /* names the statement in err ("create message") */
	const char *what;     /* names it in a 503 ("create_message") */
};

#define API_FINAL_WRITE_PARAMS_MAX 16

/* An idempotent create under key (its canonical request body, len bytes):
 * claim the key in w's table, answer the claim's verdict (replay, 422,
 * 409) or, when it proceeds, run w with params (params[w->fence_param] is
 * filled in with the claim's fence) and answer: 201 with the stored body,
 * the winner's answer when fenced out, the failure's otherwise (413, 422,
 * 400 by SQLSTATE, else 503; the key then released). A takeover is counted
 * and logged (producer.key.takeover), a fencing out too
 * (producer.key.fenced_out). Blocks for the round trips on conn. */
void api_claimed_create(PGconn *conn, const struct api_config *cfg,
    const struct api_final_write *w, const struct api_key *key, const char *canonical,
    size_t len, const char *const *params, struct api_response *res);

#endif
