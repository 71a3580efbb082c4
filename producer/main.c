/*
 * main.c - outbox-producer: dispatch to a subcommand.
 * `outbox-producer --help-markdown` prints every subcommand's config table
 * (docs/configuration.md, scripts/gen-config-doc.sh).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>

#include "outbox/config.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "producer.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
	/* false: exit without nng_fini. nng 1.5.2's reaper can panic (abort)
	 * while nng_fini tears down an HTTP client connection that the server
	 * closed under it (seen in test_chain: `send` after a lost response,
	 * SIGABRT in thread nng:reap2 with the answer already printed); a
	 * one-shot client has nothing to tear down that exit does not. */
	bool nng_teardown;
};

static const struct subcommand subcommands[] = {
	{ "enqueue", producer_cmd_enqueue,
	    "insert bug report(s) and their outbox records, one transaction each", true },
	{ "serve", producer_cmd_serve,
	    "the idempotent HTTP API (POST /v1/reports, /v1/messages with Idempotency-Key)", true },
	{ "submit", producer_cmd_submit,
	    "agent-side client: one key per logical call, retries, one JSON observation", false },
	{ "send", producer_cmd_send,
	    "agent-side client for any message (POST /v1/messages): the same retries and observation",
	    false },
	{ "lookup", producer_cmd_lookup, "look a report or a message up by its idempotency key",
	    false },
	{ "mcp", producer_cmd_mcp,
	    "MCP tool server on stdio for agent hosts: the tools with server-made keys", false },
	{ "matrix", producer_cmd_matrix,
	    "reproduce the article's fault matrix against real servers, compare cell for cell", true },
	{ NULL, NULL, NULL, false },
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: outbox-producer COMMAND [options]   (outbox-producer COMMAND --help)\n\n"
	           "The producer side of the outbox: business row + outbox record in one"
	           " transaction.\n\ncommands:\n");
	for (const struct subcommand *c = subcommands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
}

static void
markdown(void)
{
	static const struct {
		const char *title;
		const struct ob_cfg_opt *const *table;
	} tables[] = {
		{ "outbox-producer enqueue", &producer_enqueue_options },
		{ "outbox-producer serve", &producer_serve_options },
		{ "outbox-producer submit", &producer_submit_options },
		{ "outbox-producer send", &producer_send_options },
		{ "outbox-producer lookup", &producer_lookup_options },
		{ "outbox-producer mcp", &producer_mcp_options },
		{ "outbox-producer matrix", &producer_matrix_options },
	};
	for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
		if (i > 0)
			fputc('\n', stdout);
		ob_cfg_markdown(stdout, tables[i].title, *tables[i].table);
	}
}

int
main(int argc, char **argv)
{
	ob_log_init("outbox-producer", OB_LOG_INFO, OB_LOG_TEXT);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--help-markdown") == 0) {
		markdown();
		return 0;
	}
	int code = -1;
	bool teardown = true;
	for (const struct subcommand *c = subcommands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0) {
			code = c->run(argc - 1, argv + 1);
			teardown = c->nng_teardown;
		}
	if (code < 0) {
		char shown[512]; /* a conninfo where the command goes: not shown with its password */
		ob_pg_redact_conninfo(argv[1], shown, sizeof(shown));
		fprintf(stderr, "outbox-producer: unknown command '%s' (see outbox-producer --help)\n",
		    shown);
		code = 2;
	}
	if (teardown)
		nng_fini();
	return code;
}
