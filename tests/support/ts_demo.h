/*
 * ts_demo.h - the stack of `scripts/demo.sh --web` for tests (issue 17):
 * the producer's and the consumer's databases on the throwaway PostgreSQL,
 * outbox-producer serve and outbox-consumer with --demo-admin (their admin
 * endpoints on loopback metrics listeners), the demo's relay
 * (report.created only: other topics wait), and the demonstration's
 * config file that `outboxctl web --demo FILE` (web_demo_open) reads.
 */
#ifndef OUTBOX_TS_DEMO_H
#define OUTBOX_TS_DEMO_H

#include <libpq-fe.h>
#include <sys/types.h>

#include "testsupport.h"
#include "ts_producer.h"

struct ts_demo_stack {
	char db[TS_CONNINFO_MAX], idb[TS_CONNINFO_MAX]; /* producer's, consumer's */
	struct ts_producer_server p;
	char padmin[64], cadmin[64];   /* http://127.0.0.1:PORT of the admin endpoints */
	char clog[256], rlog[256], curl[256];
	char conf[300];                /* the demonstration's config file */
	pid_t consumer, relay;
	PGconn *pconn, *iconn;
};

/* Start it all (ck_assert on failure); tag names the databases;
 * matrix_faults: the config's matrix_faults (step 6's columns, e.g.
 * "none,relay-die-after-send"), NULL for the demo's default (all). */
void ts_demo_start(struct ts_demo_stack *s, const char *tag, const char *matrix_faults);

/* Stop every process ts_demo_start started, close the connections. */
void ts_demo_stop(struct ts_demo_stack *s);

#endif
