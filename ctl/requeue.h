/*
 * requeue.h - moving dead letters back to pending, the one implementation
 * behind `outboxctl dead requeue` (dead_cmd.c) and the web view's
 * POST /api/dead/requeue (web_server.c). It checks and decides; callers
 * only report the outcome, each in its own form.
 */
#ifndef OUTBOX_CTL_REQUEUE_H
#define OUTBOX_CTL_REQUEUE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

/* A refusal's reason text, NUL included (cut to fit). */
#define CTL_REQUEUE_REASON_MAX 512

struct ctl_requeue_req {
	char **ids;           /* decimal ids (ctl_parse_id-checked), borrowed; NULL with all */
	int nids;
	bool all;             /* every dead message (of topic) */
	const char *topic;    /* with all: only this topic; NULL = every topic */
	int64_t retention_ms; /* the consumer's dedup retention: older ones are refused */
	bool force;           /* requeue even those */
};

struct ctl_requeue_refusal {
	int64_t id;
	char reason[CTL_REQUEUE_REASON_MAX]; /* "message 4 is pending, not dead: not requeued" */
};

/* The outcome: requeued ids, or (all or nothing) the refusals and nothing
 * requeued. Owned by the caller, release with ctl_requeue_result_free. */
struct ctl_requeue_result {
	int64_t *requeued;
	int nrequeued;
	struct ctl_requeue_refusal *refused;
	int nrefused;
	int checked; /* rows checked: ids asked for (deduplicated), or dead ones with all */
};

/* Lock the candidate dead rows, check every one (exists, is dead, young
 * enough unless force), then requeue them all with outbox.requeue_dead
 * and wake the relays, in one transaction on conn (which must be outside
 * one, and able to write: outbox_admin's rights). All or nothing: any
 * refusal and nothing changes. Returns OB_OK with *out filled (refusals
 * included; checked 0 = nothing to do), or OB_EDB / OB_ENOMEM with one
 * line in err, nothing changed and *out empty. Blocks on the database. */
int ctl_requeue(PGconn *conn, const struct ctl_requeue_req *req, struct ctl_requeue_result *out,
    char *err, size_t errlen);

/* Free what ctl_requeue filled in (r itself is the caller's); then empty. */
void ctl_requeue_result_free(struct ctl_requeue_result *r);

#endif
