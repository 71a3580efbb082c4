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

static const struct ob_command_doc docs[] = {
	{ "outboxctl migrate", ctl_migrate_options },
	{ "outboxctl status", ctl_status_options },
	{ "outboxctl dead list", ctl_dead_list_options },
	{ "outboxctl dead show", ctl_dead_show_options },
	{ "outboxctl dead requeue", ctl_dead_requeue_options },
	{ "outboxctl inspect", ctl_inspect_options },
	{ "outboxctl purge", ctl_purge_options },
	{ "outboxctl webhook list", ctl_webhook_list_options },
	{ "outboxctl webhook resolve", ctl_webhook_resolve_options },
	{ "outboxctl web", ctl_web_options },
	{ "outboxctl prove", ctl_prove_options },
	{ NULL, NULL },
};

static const struct ob_command_set ctl = {
	"outboxctl",
	"Operate an outbox relay deployment.",
	commands,
	docs,
};

int
main(int argc, char **argv)
{
	const struct ob_command *ran;
	return ob_program_dispatch(&ctl, argc, argv, &ran);
}
