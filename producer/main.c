/*
 * main.c - outbox-producer: dispatch to a subcommand (ob_program_dispatch).
 * `outbox-producer --help-markdown` prints every subcommand's config table
 * (docs/configuration.md, scripts/gen-config-doc.sh).
 */
#include <stddef.h>

#include <nng/nng.h>

#include "outbox/program.h"
#include "producer.h"

/* A subcommand's mark: exit without nng_fini. nng 1.5.2's reaper can
 * panic (abort) while nng_fini tears down an HTTP client connection that
 * the server closed under it (seen in test_chain: `send` after a lost
 * response, SIGABRT in thread nng:reap2 with the answer already printed);
 * a one-shot client has nothing to tear down that exit does not. */
#define NO_NNG_TEARDOWN 1u

static const struct ob_command commands[] = {
	{ "enqueue", producer_cmd_enqueue,
	    "insert bug report(s) and their outbox records, one transaction each", 0 },
	{ "serve", producer_cmd_serve,
	    "the idempotent HTTP API (POST /v1/reports, /v1/messages with Idempotency-Key)", 0 },
	{ "submit", producer_cmd_submit,
	    "agent-side client: one key per logical call, retries, one JSON observation",
	    NO_NNG_TEARDOWN },
	{ "send", producer_cmd_send,
	    "agent-side client for any message (POST /v1/messages): the same retries and observation",
	    NO_NNG_TEARDOWN },
	{ "lookup", producer_cmd_lookup, "look a report or a message up by its idempotency key",
	    NO_NNG_TEARDOWN },
	{ "mcp", producer_cmd_mcp,
	    "MCP tool server on stdio for agent hosts: the tools with server-made keys",
	    NO_NNG_TEARDOWN },
	{ "matrix", producer_cmd_matrix,
	    "reproduce the article's fault matrix against real servers, compare cell for cell", 0 },
	{ NULL, NULL, NULL, 0 },
};

int
main(int argc, char **argv)
{
	const struct ob_command *ran;
	int code = ob_program_dispatch("outbox-producer", "The producer side of the outbox:"
	    " business row + outbox record in one transaction.", commands, argc, argv, &ran);

	if (ran == NULL || !(ran->flags & NO_NNG_TEARDOWN))
		nng_fini();
	return code;
}
