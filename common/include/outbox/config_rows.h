/*
 * config_rows.h - the option rows several programs share, each defined
 * once: its flag, variable, type, default and bounds are the same in every
 * table, and so is its help, but for the words a program gives where the
 * option really does something else there (the database it names, the
 * listener its TLS files are for). Each macro is one OB_CFG_OPT row
 * (outbox/config.h), so the including file's OB_CFG_STRUCT must be defined
 * and have the field the row names.
 */
#ifndef OUTBOX_CONFIG_ROWS_H
#define OUTBOX_CONFIG_ROWS_H

#include "outbox/config.h"
#include "outbox/fault.h"

/* --db: required; help: the whole text, for a command whose --db is not
 * one program's own database (outboxctl migrate takes either). */
#define OB_CFG_OPT_DB_HELP(field, help)                                               \
	OB_CFG_OPT("db", "OUTBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true, field, help)

/* --db: required; whose: which database, "the consumer's database (inbox schema)". */
#define OB_CFG_OPT_DB(field, whose)                                                   \
	OB_CFG_OPT_DB_HELP(field, "PostgreSQL connection string of " whose)

/* --pooler, for a program that keeps one server session per connection
 * (ob_pg_need_session): direct refuses a connection pooler at start. */
#define OB_CFG_OPT_POOLER(field)                                                      \
	OB_CFG_OPT("pooler", "OUTBOX_POOLER", OB_CFG_ENUM, "direct", 0, 0,            \
	    "direct|session", false, field, "how --db reaches PostgreSQL: direct, or"   \
	    " session = through a connection pooler in session mode (PgBouncer"       \
	    " pool_mode = session). A pooler found at start (its backend pid is not"   \
	    " the server's) is refused with direct: this program needs one server"     \
	    " session (LISTEN, session settings), which transaction pooling does not"  \
	    " give (docs/operations.md)")

#define OB_CFG_OPT_LOG_LEVEL(field)                                                   \
	OB_CFG_OPT("log-level", "OUTBOX_LOG_LEVEL", OB_CFG_ENUM, "info", 0, 0,        \
	    "debug|info|warn|error", false, field, "least severe level logged")

#define OB_CFG_OPT_LOG_FORMAT(field)                                                  \
	OB_CFG_OPT("log-format", "OUTBOX_LOG_FORMAT", OB_CFG_ENUM, "text", 0, 0,      \
	    "text|json", false, field, "log line format")

/* --config: the file ob_cfg_parse reads (it looks the row up by name). */
#define OB_CFG_OPT_CONFIG(field)                                                      \
	OB_CFG_OPT("config", "OUTBOX_CONFIG", OB_CFG_STRING, NULL, 0, 0, NULL, false, \
	    field, OB_CFG_CONFIG_HELP)

/* --metrics (outbox/http_endpoint.h); from: "" or where they are served
 * from, " from a separate process". */
#define OB_CFG_OPT_METRICS(field, from)                                               \
	OB_CFG_OPT("metrics", "OUTBOX_METRICS", OB_CFG_STRING, NULL, 0, 0, NULL, false, \
	    field, "serve /metrics, /healthz and /readyz on HOST:PORT (or :PORT,"      \
	    " [::1]:PORT, http://HOST:PORT)" from "; empty = off (docs/metrics.md)")

/* --ready-file (outbox/ready_file.h); env: the program's variable. */
#define OB_CFG_OPT_READY_FILE(env, field)                                             \
	OB_CFG_OPT("ready-file", env, OB_CFG_STRING, NULL, 0, 0, NULL, false, field,  \
	    "write the served URL (with the bound port) here once listening")

/* --tls-cert, --tls-key, --tls-ca: PEM files whose role is the program's
 * own (a listener, a dialer, an HTTPS server), so the help of the
 * certificate and of the CA is the program's; with: when the key applies,
 * "with --listen tls+tcp://". */
#define OB_CFG_OPT_TLS_CERT(field, help)                                              \
	OB_CFG_OPT("tls-cert", "OUTBOX_TLS_CERT", OB_CFG_STRING, NULL, 0, 0, NULL,    \
	    false, field, help)

#define OB_CFG_OPT_TLS_KEY(field, with)                                               \
	OB_CFG_OPT("tls-key", "OUTBOX_TLS_KEY", OB_CFG_STRING, NULL, 0, 0, NULL,      \
	    false, field, with ": the private key of --tls-cert (PEM, unencrypted)")

#define OB_CFG_OPT_TLS_CA(field, help)                                                \
	OB_CFG_OPT("tls-ca", "OUTBOX_TLS_CA", OB_CFG_STRING, NULL, 0, 0, NULL, false, \
	    field, help)

/* --no-fencing: a broken mode; what it breaks, and whether demos use it,
 * is the program's: "BROKEN MODE for demos and tests: ...". */
#define OB_CFG_OPT_NO_FENCING(field, help)                                            \
	OB_CFG_OPT("no-fencing", "OUTBOX_NO_FENCING", OB_CFG_BOOL, "false", 0, 0, NULL, \
	    false, field, help)

/* --demo-admin (outbox/demo_admin.h); here: the program's faults and modes. */
#define OB_CFG_OPT_DEMO_ADMIN(field, here)                                            \
	OB_CFG_OPT("demo-admin", "OUTBOX_DEMO_ADMIN", OB_CFG_BOOL, "false", 0, 0, NULL, \
	    false, field, "DEMO ONLY (default off): serve GET/POST /admin/faults on the" \
	    " --metrics listener, which must be loopback, to arm fault counters and"   \
	    " switch broken modes at run time over HTTP, without authentication"       \
	    " (docs/faults.md); here: " here)

/* A fault counter (outbox/fault.h): fire N times, 0 = off. */
#define OB_CFG_OPT_FAULT(name, env, field, help)                                      \
	OB_CFG_OPT(name, env, OB_CFG_INT, "0", 0, OB_FAULT_MAX_FIRES, NULL, false,    \
	    field, help)

#endif
