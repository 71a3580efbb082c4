/*
 * migrate_cmd.c - `outboxctl migrate`: apply pending migrations and say so.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ctl.h"
#include "ctl_util.h"
#include "outbox/config_rows.h"
#include "outbox/err.h"
#include "outbox/migrate.h"
#include "outbox/pg.h"

struct migrate_config {
	char *db;
	char *schema;
	bool demo;
	bool harden_public;
};

#define OB_CFG_STRUCT struct migrate_config

static const struct ob_cfg_opt ctl_migrate_options[] = {
	OB_CFG_OPT_DB_HELP(db, "PostgreSQL connection string (keywords or URI)"),
	OB_CFG_OPT("schema", "OUTBOX_SCHEMA", OB_CFG_ENUM, "all", 0, 0, "all|outbox|inbox", false,
	    schema, "which migrations: producer side (outbox), consumer side (inbox), or both"),
	OB_CFG_OPT("demo", "OUTBOX_DEMO", OB_CFG_BOOL, "false", 0, 0, NULL, false, demo,
	    "also install the demo business (schema app: app.bug_reports and the keys of"
	    " POST /v1/reports), which the demo, outbox-producer enqueue/submit and the MCP"
	    " tool write; needs the outbox side. Without it nothing is created outside schemas"
	    " outbox and inbox but the group roles (docs/security.md)"),
	OB_CFG_OPT("harden-public", "OUTBOX_HARDEN_PUBLIC", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    harden_public, "also REVOKE CREATE ON SCHEMA public FROM PUBLIC (PostgreSQL before 15"
	    " lets every role create objects there, where one could shadow a function of a"
	    " careless search_path); a change to the whole database, so only when asked"),
	OB_CFG_END,
};

static const struct ob_cfg_program program = {
	.name = "outboxctl migrate",
	.synopsis = "outboxctl migrate --db CONNINFO [--schema all|outbox|inbox] [--demo]"
	    " [--harden-public]",
	.description = "Apply the pending numbered migrations from sql/ (embedded in this binary)"
	    " and record them in outbox.schema_migrations (inbox.schema_migrations); then, if a"
	    " migration ran or"
	    " one of the schema files (sql/<set>/functions/: one per function, view and"
	    " trigger) changed, re-apply those files and drop each function, view and trigger"
	    " of the schema that no file defines. All in one transaction: on error nothing"
	    " changes. Running it again applies nothing; concurrent runs apply each"
	    " migration once, and a run that deadlocks with another database's on the"
	    " shared roles is run again (5 attempts).",
	.options = ctl_migrate_options,
	.markdown = OB_CFG_MARKDOWN_ANY,
};

int
ctl_migrate(int argc, char **argv)
{
	struct migrate_config cfg;
	char err[1024];
	int code;

	if ((code = ob_cfg_load(&program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	code = 2;

	PGconn *conn = NULL;
	if (ob_pg_connect(cfg.db, "outboxctl", &conn, err, sizeof(err)) != OB_OK ||
	    ctl_need_session(conn, err, sizeof(err)) != OB_OK ||
	    ob_pg_durable_commits(conn, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outboxctl migrate: %s\n", err);
		PQfinish(conn);
		goto out;
	}
	struct ob_migrate_report r;
	const struct ob_migrate_opts opts = { .set = cfg.schema, .demo = cfg.demo,
		.harden_public = cfg.harden_public };
	if (ob_migrate(conn, &opts, &r, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "outboxctl migrate: %s\n", err);
		code = 1;
	} else {
		printf("migrate: %d migration%s applied, %d schema file%s re-applied (%s)\n",
		    r.migrations, r.migrations == 1 ? "" : "s", r.files, r.files == 1 ? "" : "s",
		    r.migrations || r.files ? "schema updated" : "already up to date");
		if (r.dropped > 0)
			printf("migrate: dropped %d object%s no file defines: %s\n", r.dropped,
			    r.dropped == 1 ? "" : "s", r.dropped_names);
		code = 0;
	}
	PQfinish(conn);
out:
	ob_cfg_free(ctl_migrate_options, &cfg);
	return code;
}
