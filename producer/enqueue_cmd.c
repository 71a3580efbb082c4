/*
 * enqueue_cmd.c - `outbox-producer enqueue`: write reports with their outbox
 * records from the command line (one transaction per report).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "enqueue.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/wire.h"
#include "producer.h"
#include "producer_rows.h"

#define ENQUEUE_MAX_COUNT 10000000

struct enqueue_config {
	char *db;
	char *title;
	char *module;
	char *steps;
	char *severity;
	char *key;
	int64_t count;
	bool quiet;
};

#define OB_CFG_STRUCT struct enqueue_config

static const struct ob_cfg_opt enqueue_options[] = {
	PRODUCER_OPT_DB(db),
	OB_CFG_OPT("title", "OUTBOX_TITLE", OB_CFG_STRING, "Crash on save", 0, 0, NULL, false,
	    title, "report title (1..200 characters)"),
	OB_CFG_OPT("module", "OUTBOX_MODULE", OB_CFG_STRING, "editor", 0, 0, NULL, false, module,
	    "module the report is about (1..100 characters)"),
	OB_CFG_OPT("steps", "OUTBOX_STEPS", OB_CFG_STRING, "", 0, 0, NULL, false, steps,
	    "steps to reproduce"),
	OB_CFG_OPT("severity", "OUTBOX_SEVERITY", OB_CFG_ENUM, "medium", 0, 0,
	    "low|medium|high|critical", false, severity, "report severity"),
	PRODUCER_OPT_KEY(key, false, "the report's idempotency key, stored with it (1..255"
	    " bytes; default: a random UUID per report; with --count N the keys are"
	    " KEY-1..KEY-N); the outbox record's key is report-<report id>"),
	OB_CFG_OPT("count", "OUTBOX_COUNT", OB_CFG_INT, "1", 1, ENQUEUE_MAX_COUNT, NULL, false,
	    count, "how many reports to write, each in its own transaction"),
	PRODUCER_OPT_QUIET(quiet, "print only the summary line"),
	OB_CFG_END,
};

static const struct ob_cfg_program enqueue_program = PRODUCER_PROGRAM("enqueue",
    "--db CONNINFO [--title T] [--key K] [--count N]",
    "Insert a bug report and its outbox record (topic report.created) in ONE"
    " transaction; any failure rolls both back. Prints report_id, message_id"
    " and key per report.",
    enqueue_options);

int
producer_cmd_enqueue(int argc, char **argv)
{
	struct enqueue_config cfg;
	char err[1024];
	int code;
	PGconn *conn = NULL;

	if ((code = ob_cfg_load(&enqueue_program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;
	/* Room for "-N" after the key. */
	if (cfg.key != NULL && (cfg.key[0] == '\0' ||
	        strlen(cfg.key) > OB_WIRE_MAX_KEY - (cfg.count > 1 ? 9 : 0))) {
		fprintf(stderr, "outbox-producer enqueue: --key must be 1..%d bytes\n",
		    OB_WIRE_MAX_KEY - (cfg.count > 1 ? 9 : 0));
		goto out;
	}
	/* what it prints as enqueued is on disk */
	if (producer_connect(cfg.db, &conn, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outbox-producer enqueue: %s\n", err);
		goto out;
	}
	struct bug_report r = { cfg.title, cfg.module, cfg.steps, cfg.severity };
	int64_t done = 0;
	code = 0;
	for (int64_t i = 1; i <= cfg.count; i++) {
		char key[OB_WIRE_MAX_KEY + 1];
		if (cfg.key == NULL)
			producer_new_key(key);
		else if (cfg.count == 1)
			snprintf(key, sizeof(key), "%s", cfg.key);
		else
			snprintf(key, sizeof(key), "%s-%" PRId64, cfg.key, i);
		int64_t report_id, message_id;
		int rc = producer_enqueue_report(conn, &r, key, &report_id, &message_id, err,
		    sizeof(err));
		if (rc != OB_OK) {
			fprintf(stderr, "outbox-producer enqueue: %s\n", err);
			code = rc == OB_EINVAL ? 2 : 1;
			break;
		}
		done++;
		if (!cfg.quiet)
			printf("report_id=%" PRId64 " message_id=%" PRId64 " key=%s\n", report_id,
			    message_id, key);
	}
	printf("enqueued=%" PRId64 "\n", done);
out:
	if (conn != NULL)
		PQfinish(conn);
	ob_cfg_free(enqueue_options, &cfg);
	return code;
}
