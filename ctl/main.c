/*
 * main.c - outboxctl: dispatch to a subcommand (ob_program_dispatch; web:
 * the live view; prove: the history checker). `outboxctl --help-markdown`
 * prints every subcommand's config table (docs/configuration.md).
 */
#include <stddef.h>

#include "ctl.h"
#include "outbox/program.h"

static const struct ob_command commands[] = {
	{ "migrate", ctl_migrate, "apply pending schema migrations (idempotent)", 0 },
	{ "status", ctl_status, "per topic: pending, leased, delivered, dead; lag", 0 },
	{ "dead", ctl_dead, "dead letters: list, show ID, requeue ID... | --all", 0 },
	{ "inspect", ctl_inspect, "where the message with --key K is", 0 },
	{ "purge", ctl_purge, "drop delivered messages, a slot at a time (--older-than)", 0 },
	{ "webhook", ctl_webhook, "parked webhook calls (at-most-once): list, resolve", 0 },
	{ "web", ctl_web, "serve the live view of the pipeline (page + JSON API)", 0 },
	{ "prove", ctl_prove, "judge a run's history since T: lost, duplicated, out of order, phantom",
	    0 },
	{ NULL, NULL, NULL, 0 },
};

int
main(int argc, char **argv)
{
	const struct ob_command *ran;
	return ob_program_dispatch("outboxctl", "Operate an outbox relay deployment.", commands,
	    argc, argv, &ran);
}
