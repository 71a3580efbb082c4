/*
 * web_cmd.c - `outboxctl web`: the live view of the pipeline (docs/web.md).
 * Wiring only: parse the flags, read the token, open the demonstration
 * (--demo), start the one poller (web_poll.c) and the server
 * (web_server.c), write --ready-file, wait for SIGTERM/SIGINT through the
 * one signal layer (outbox/sig.h, set up by outbox/program.h), stop in
 * the reverse order.
 *
 * Bad config exits 2 before anything is opened; a server that cannot
 * listen exits 1. The database may be down at start: the poller retries,
 * and /api/overview answers 503 until its first snapshot.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "outbox/config_rows.h"
#include "ctl_util.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/program.h"
#include "web.h"
#include "web_demo.h"

#define WEB_HTTP_DEFAULT "http://127.0.0.1:8090"
#define WEB_POLL_DEFAULT "1s"
#define WEB_POLL_MIN 100
#define WEB_POLL_MAX 60000
#define WEB_STMT_TIMEOUT_DEFAULT "5s"
#define WEB_STMT_TIMEOUT_MIN 100
#define WEB_STMT_TIMEOUT_MAX 600000
#define WEB_RETENTION_DEFAULT "7d"
#define WEB_RETENTION_MAX (3650LL * 86400 * 1000)
#define WEB_MAX_BODY_DEFAULT "64k"
#define WEB_MAX_BODY_MIN 1024
#define WEB_MAX_BODY_MAX (1024 * 1024)
#define WEB_MAX_CONNS_DEFAULT "64"
#define WEB_MAX_CONNS_MAX 4096
#define WEB_MESSAGES_DEFAULT "50"
#define WEB_MESSAGES_MAX 1000
#define WEB_DEAD_DEFAULT "100"
#define WEB_DEAD_MAX 1000
#define WEB_DEDUP_DEFAULT "20"
#define WEB_DEDUP_MAX 1000
#define WEB_SERIES_DEFAULT "300"
#define WEB_SERIES_MAX 3600
#define WEB_REQUEUE_IDS_DEFAULT "1000"
#define WEB_REQUEUE_IDS_MAX 10000

struct web_config {
	char *db, *inbox_db, *requeue_db, *http, *token_file, *demo, *ready_file, *consumer_metrics;
	int64_t poll_ms, statement_timeout_ms, retention_ms, max_body, max_conns;
	int64_t messages, dead, dedup, series, requeue_ids;
	bool payloads_need_token;
};

#define OB_CFG_STRUCT struct web_config

static const struct ob_cfg_opt ctl_web_options[] = {
	OB_CFG_OPT_DB(db, "the producer database; its role needs only"
	    " outbox_viewer's grants (read-only)"),
	OB_CFG_OPT("inbox-db", "OUTBOX_INBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, false, inbox_db,
	    "the consumer's database: show its dedup records (outbox_viewer there too)"),
	OB_CFG_OPT("consumer-metrics", "OUTBOX_WEB_CONSUMER_METRICS", OB_CFG_STRING, NULL, 0, 0,
	    NULL, false, consumer_metrics, "the consumer's /metrics URL (http://HOST:PORT/metrics):"
	    " duplicates answered and key-reuse rejects, with --inbox-db"),
	OB_CFG_OPT("requeue-db", "OUTBOX_WEB_REQUEUE_DB", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    requeue_db, "the connection a requeue uses, of an outbox_admin role (default: --db)"),
	OB_CFG_OPT("http", "OUTBOX_WEB_HTTP", OB_CFG_STRING, WEB_HTTP_DEFAULT, 0, 0, NULL, false,
	    http, "serve on http://HOST:PORT (port 0: any free port, see --ready-file)"),
	OB_CFG_OPT("token-file", "OUTBOX_WEB_TOKEN_FILE", OB_CFG_STRING, NULL, 0, 0, NULL, false,
	    token_file, "the bearer token (first line) that requeue and, off loopback, the"
	    " payloads need; without it requeue is disabled"),
	OB_CFG_OPT("payloads-need-token", "OUTBOX_WEB_PAYLOADS_NEED_TOKEN", OB_CFG_BOOL, "false", 0,
	    0, NULL, false, payloads_need_token,
	    "payloads need the token even on loopback (behind a reverse proxy on this host)"),
	OB_CFG_OPT("demo", "OUTBOX_WEB_DEMO", OB_CFG_STRING, NULL, 0, 0, NULL, false, demo,
	    "serve the demonstration of this config file (scripts/demo.sh --web): guided"
	    " steps, the herd simulator, the idempotency stepper, exercises; docs/web.md"),
	OB_CFG_OPT_READY_FILE("OUTBOX_WEB_READY_FILE", ready_file),
	OB_CFG_OPT("poll-interval", "OUTBOX_WEB_POLL_INTERVAL", OB_CFG_DURATION, WEB_POLL_DEFAULT,
	    WEB_POLL_MIN, WEB_POLL_MAX, NULL, false, poll_ms,
	    "how often the one poller reads a snapshot (whatever the number of open pages)"),
	OB_CFG_OPT("statement-timeout", "OUTBOX_WEB_STATEMENT_TIMEOUT", OB_CFG_DURATION,
	    WEB_STMT_TIMEOUT_DEFAULT, WEB_STMT_TIMEOUT_MIN, WEB_STMT_TIMEOUT_MAX, NULL, false,
	    statement_timeout_ms, "statement_timeout of every query the view runs"),
	OB_CFG_OPT("dedup-retention", "OUTBOX_DEDUP_RETENTION", OB_CFG_DURATION,
	    WEB_RETENTION_DEFAULT, 1000, WEB_RETENTION_MAX, NULL, false, retention_ms,
	    "the consumer's --dedup-retention: older dead letters are not requeued (as dead"
	    " requeue)"),
	OB_CFG_OPT("max-body", "OUTBOX_WEB_MAX_BODY", OB_CFG_SIZE, WEB_MAX_BODY_DEFAULT,
	    WEB_MAX_BODY_MIN, WEB_MAX_BODY_MAX, NULL, false, max_body,
	    "largest request body; more is refused with 413, unread"),
	OB_CFG_OPT("max-connections", "OUTBOX_WEB_MAX_CONNECTIONS", OB_CFG_INT,
	    WEB_MAX_CONNS_DEFAULT, 1, WEB_MAX_CONNS_MAX, NULL, false, max_conns,
	    "open HTTP connections at most"),
	OB_CFG_OPT("messages", "OUTBOX_WEB_MESSAGES", OB_CFG_INT, WEB_MESSAGES_DEFAULT, 1,
	    WEB_MESSAGES_MAX, NULL, false, messages, "newest messages shown"),
	OB_CFG_OPT("dead-limit", "OUTBOX_WEB_DEAD_LIMIT", OB_CFG_INT, WEB_DEAD_DEFAULT, 1,
	    WEB_DEAD_MAX, NULL, false, dead, "dead letters shown (oldest first, as dead list)"),
	OB_CFG_OPT("dedup-records", "OUTBOX_WEB_DEDUP_RECORDS", OB_CFG_INT, WEB_DEDUP_DEFAULT, 1,
	    WEB_DEDUP_MAX, NULL, false, dedup, "newest dedup records shown (--inbox-db)"),
	OB_CFG_OPT("series", "OUTBOX_WEB_SERIES", OB_CFG_INT, WEB_SERIES_DEFAULT, 2, WEB_SERIES_MAX,
	    NULL, false, series, "points of the throughput and lag chart kept (one per poll)"),
	OB_CFG_OPT("requeue-max", "OUTBOX_WEB_REQUEUE_MAX", OB_CFG_INT, WEB_REQUEUE_IDS_DEFAULT, 1,
	    WEB_REQUEUE_IDS_MAX, NULL, false, requeue_ids, "ids in one requeue at most"),
	OB_CFG_END,
};

static const struct ctl_cmd cmd = {
	"web",
	"outboxctl web --db CONNINFO [--inbox-db CONNINFO] [--http http://HOST:PORT]"
	" [--token-file FILE] [--requeue-db CONNINFO] [--consumer-metrics URL] [--demo FILE]"
	" [--ready-file F]",
	"Serve the live view of the pipeline: per topic counts, the newest messages and their"
	" claims, dead letters (requeue with the token), blocked keys, the consumer's dedup"
	" records, a throughput and lag chart. One page and a JSON API (docs/web.md); one"
	" poller per server, read-only.",
	ctl_web_options, CTL_DB_OUTBOX, NULL, /* the poller and the server connect on their own */
};

/* The names the shared start-up prints and reads (outbox/program.h); the
 * flags are parsed by ctl_parse, which takes them after arguments too. */
static const struct ob_program program = { .events = "web",
	.config = { .name = "outboxctl web", .options = ctl_web_options } };

/* True when url's host is a loopback address (127.0.0.0/8, ::1, localhost). */
static bool
loopback_url(const char *url)
{
	const char *h = strstr(url, "://");
	h = h != NULL ? h + 3 : url;
	return strncmp(h, "127.", 4) == 0 || strncmp(h, "localhost:", 10) == 0 ||
	    strncmp(h, "[::1]:", 6) == 0;
}

/* url with its port replaced by port, into out. */
static void
bound_url(const char *url, int port, char *out, size_t outlen)
{
	const char *colon = strrchr(url, ':');
	int n = colon != NULL ? (int)(colon - url) : (int)strlen(url);
	snprintf(out, outlen, "%.*s:%d", n, url, port);
}

int
ctl_web(int argc, char **argv)
{
	struct web_config cfg;
	struct web_token token;
	struct web_poll *poll = NULL;
	struct web_server *srv = NULL;
	struct web_demo *demo = NULL;
	char **pos = NULL, err[1024], shown[CTL_SHOWN_MAX];
	int npos, code;

	memset(&cfg, 0, sizeof cfg);
	if ((code = ctl_parse(&cmd, &cfg, argc, argv, &pos, &npos)) >= 0)
		goto out;
	code = CTL_EXIT_USAGE;
	if (!ctl_no_arguments(&cmd, pos, npos))
		goto out;
	if (strncmp(cfg.http, "http://", 7) != 0) {
		fprintf(stderr, "outboxctl web: --http '%s': want http://HOST:PORT\n",
		    ctl_shown(cfg.http, shown, sizeof shown));
		goto out;
	}
	if (cfg.consumer_metrics != NULL && (cfg.inbox_db == NULL ||
	    strncmp(cfg.consumer_metrics, "http://", 7) != 0)) {
		fprintf(stderr, "outboxctl web: --consumer-metrics '%s': want http://HOST:PORT/metrics,"
		    " with --inbox-db\n", ctl_shown(cfg.consumer_metrics, shown, sizeof shown));
		goto out;
	}
	if (cfg.token_file != NULL && web_token_load(cfg.token_file, &token, err, sizeof err)
	    != OB_OK) {
		fprintf(stderr, "outboxctl web: %s\n", err);
		goto out;
	}
	if (cfg.demo != NULL) {
#ifdef OUTBOX_WEB_DEMO
		if (web_demo_open(cfg.demo, cfg.db, cfg.inbox_db, &demo, err, sizeof err) != OB_OK) {
			fprintf(stderr, "outboxctl web: --demo %s: %s\n",
			    ctl_shown(cfg.demo, shown, sizeof shown), err);
			goto out;
		}
#else
		fprintf(stderr, "outboxctl web: --demo: this outboxctl was built without the"
		    " guided demonstration (ctl/web_demo.c)\n");
		goto out;
#endif
	}

	code = CTL_EXIT_FAIL;
	if (ob_program_signals(&program) != OB_OK)
		goto out;
	struct web_poll_config pc = {
		.db = cfg.db, .inbox_db = cfg.inbox_db, .consumer_metrics = cfg.consumer_metrics,
		.interval_ms = cfg.poll_ms,
		.statement_timeout_ms = cfg.statement_timeout_ms, .messages_max = cfg.messages,
		.dead_max = cfg.dead, .dedup_max = cfg.dedup, .series_max = cfg.series,
		.retention_ms = cfg.retention_ms,
	};
	if (web_poll_start(&pc, &poll, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl web: %s\n", err);
		goto out;
	}
	/* behind a proxy on this host, loopback says nothing about the reader */
	bool loopback = loopback_url(cfg.http) && !cfg.payloads_need_token;
	struct web_server_config sc = {
		.url = cfg.http, .token = cfg.token_file != NULL ? &token : NULL,
		.loopback = loopback, .requeue_db = cfg.requeue_db != NULL ? cfg.requeue_db : cfg.db,
		.retention_ms = cfg.retention_ms, .statement_timeout_ms = cfg.statement_timeout_ms,
		.max_body = cfg.max_body, .max_conns = cfg.max_conns,
		.requeue_ids_max = cfg.requeue_ids, .poll = poll, .demo = demo,
	};
	if (web_server_start(&sc, &srv, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl web: %s\n", err);
		goto out;
	}
	char url[CTL_SHOWN_MAX];
	bound_url(cfg.http, web_server_port(srv), url, sizeof url);
	if (ob_program_ready(&program, &cfg, url) != OB_OK)
		goto out;
	ob_info("web.listening", "url=%s port=%d poll_ms=%" PRId64 " requeue=%s payloads=%s"
	    " demo=%s", url, web_server_port(srv), cfg.poll_ms,
	    cfg.token_file != NULL ? "token" : "disabled",
	    loopback ? "loopback" : cfg.token_file != NULL ? "token" : "hidden",
	    demo != NULL ? "on" : "off");
	ob_program_wait(&program, NULL, NULL, NULL);
	code = CTL_EXIT_OK;
out:
	web_server_stop(srv);
	web_poll_stop(poll);
#ifdef OUTBOX_WEB_DEMO
	web_demo_close(demo);
#endif
	free(pos);
	ob_cfg_free(ctl_web_options, &cfg);
	return code;
}
