/*
 * main.c - outboxctl: dispatch to a subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "outbox/log.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static const struct subcommand subcommands[] = {
	{ "migrate", ctl_migrate, "apply pending schema migrations (idempotent)" },
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
	for (const struct subcommand *c = subcommands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "outboxctl: unknown command '%s' (see outboxctl --help)\n", argv[1]);
	return 2;
}
