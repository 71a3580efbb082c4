/*
 * main.c - outboxctl: dispatch to a subcommand (web: the live view; prove:
 * the history checker). `outboxctl --help-markdown` prints every
 * subcommand's config table (docs/configuration.md).
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_util.h"
#include "outbox/log.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static const struct subcommand subcommands[] = {
	{ "migrate", ctl_migrate, "apply pending schema migrations (idempotent)" },
	{ "status", ctl_status, "per topic: pending, leased, delivered, dead; lag" },
	{ "dead", ctl_dead, "dead letters: list, show ID, requeue ID... | --all" },
	{ "inspect", ctl_inspect, "where the message with --key K is" },
	{ "purge", ctl_purge, "drop delivered messages, a slot at a time (--older-than)" },
	{ "webhook", ctl_webhook, "parked webhook calls (at-most-once): list, resolve" },
	{ "web", ctl_web, "serve the live view of the pipeline (page + JSON API)" },
	{ "prove", ctl_prove, "judge a run's history since T: lost, duplicated, out of order, phantom" },
	{ NULL, NULL, NULL },
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: outboxctl COMMAND [options]   (outboxctl COMMAND --help)\n\n"
	           "Operate an outbox relay deployment.\n\ncommands:\n");
	for (const struct subcommand *c = subcommands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
}

static void
markdown(void)
{
	static const struct {
		const char *title;
		const struct ob_cfg_opt *table;
	} tables[] = {
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
	};
	for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
		if (i > 0)
			fputc('\n', stdout);
		ob_cfg_markdown(stdout, tables[i].title, tables[i].table);
	}
}

int
main(int argc, char **argv)
{
	ob_log_init("outboxctl", OB_LOG_INFO, OB_LOG_TEXT);
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
	for (const struct subcommand *c = subcommands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->run(argc - 1, argv + 1);
	char shown[CTL_SHOWN_MAX];
	fprintf(stderr, "outboxctl: unknown command '%s' (see outboxctl --help)\n",
	    ctl_shown(argv[1], shown, sizeof shown));
	return 2;
}
