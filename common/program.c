/*
 * program.c - the start-up and the end of every program (program.h): the
 * config loaded and its shared rows checked, the log, the signal layer,
 * the metrics endpoint, the ready file, the wait for a stop; and the main
 * of a program made of subcommands.
 *
 * It reads the shared rows through the table (ob_cfg_find), never a
 * program's struct by name, and decides nothing a program decides: what
 * it serves, its own checks, its exit codes past the start.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "outbox/demo_admin.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/pg.h"
#include "outbox/program.h"
#include "outbox/ready_file.h"
#include "outbox/sig.h"
#include "outbox/term.h"
#include "outbox/version.h"

#define PROGRAM_ERR_MAX 1024
#define PROGRAM_SHOWN_MAX 512
#define PROGRAM_NAME_MAX 64   /* the log's program field (log.c keeps as much) */ /* a stray command name, as an error line shows it */

/* The text of the STRING or ENUM row name in cfg; NULL when the table has
 * no such row or it is unset. */
static const char *
row_text(const struct ob_cfg_opt *table, const void *cfg, const char *name)
{
	const struct ob_cfg_opt *o = ob_cfg_find(table, name);
	return o != NULL ? *(char *const *)(const void *)((const char *)cfg + o->offset) : NULL;
}

/* The BOOL row name in cfg; false when the table has none. */
static bool
row_flag(const struct ob_cfg_opt *table, const void *cfg, const char *name)
{
	const struct ob_cfg_opt *o = ob_cfg_find(table, name);
	return o != NULL && *(const bool *)(const void *)((const char *)cfg + o->offset);
}

/* The log lines' program field: the first word of the name. */
static void
log_name(const struct ob_program *p, char *out, size_t outlen)
{
	snprintf(out, outlen, "%.*s", (int)strcspn(p->config.name, " "), p->config.name);
}

static bool
is_set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

int
ob_program_check(const struct ob_cfg_opt *table, const void *cfg, char *err, size_t errlen)
{
	const char *metrics = row_text(table, cfg, "metrics");
	if (is_set(metrics)) {
		char url[OB_HTTP_ENDPOINT_URL_MAX], why[512];
		if (ob_http_endpoint_url(metrics, url, sizeof(url), why, sizeof(why)) != OB_OK) {
			snprintf(err, errlen, "--metrics: %s", why);
			return OB_EINVAL;
		}
	}
	if (row_flag(table, cfg, "demo-admin") &&
	    ob_demo_admin_check(metrics, err, errlen) != OB_OK)
		return OB_EINVAL;
	return OB_OK;
}

int
ob_program_start(const struct ob_program *p, void *cfg, int argc, char **argv, int *first_arg)
{
	const struct ob_cfg_opt *table = p->config.options;
	char err[PROGRAM_ERR_MAX];
	int code;

	if ((code = ob_cfg_load(&p->config, cfg, argc, argv, first_arg)) >= 0)
		return code;
	if (ob_program_check(table, cfg, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "%s: %s\n", p->config.name, err);
		ob_cfg_free(table, cfg);
		return 2;
	}
	/* the config engine took only the rows' choices: these parse */
	enum ob_log_level level = OB_LOG_INFO;
	enum ob_log_format format = OB_LOG_TEXT;
	const char *lv = row_text(table, cfg, "log-level");
	const char *fmt = row_text(table, cfg, "log-format");
	if (lv != NULL)
		(void)ob_log_level_parse(lv, &level);
	if (fmt != NULL)
		(void)ob_log_format_parse(fmt, &format);
	char name[PROGRAM_NAME_MAX];
	log_name(p, name, sizeof(name));
	ob_log_init(name, level, format);
	return -1;
}

int
ob_program_signals(const struct ob_program *p)
{
	char err[PROGRAM_ERR_MAX];

	if (ob_sig_init(p->config.name, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "%s: %s\n", p->config.name, err);
		return OB_EINVAL;
	}
	ob_sig_exit_on_second_stop();
	return OB_OK;
}

int
ob_program_serve_metrics(const struct ob_program *p, const void *cfg, struct ob_metrics *reg,
    ob_ready_fn ready, void *arg, const struct ob_demo_admin *admin,
    struct ob_http_endpoint **ep)
{
	const struct ob_cfg_opt *table = p->config.options;
	const char *metrics = row_text(table, cfg, "metrics");
	bool demo = row_flag(table, cfg, "demo-admin");
	char err[PROGRAM_ERR_MAX], event[64];
	int rc;

	*ep = NULL;
	if (!is_set(metrics))
		return OB_OK;
	rc = ob_http_endpoint_start_with(metrics, reg, ready, arg, demo ? ob_demo_admin_route : NULL,
	    (void *)admin, ep, err, sizeof(err));
	if (rc != OB_OK) {
		fprintf(stderr, "%s: --metrics: %s\n", p->config.name, err);
		return rc;
	}
	snprintf(event, sizeof(event), "%s.metrics.listening", p->events);
	ob_info(event, "addr=%s port=%d", metrics, ob_http_endpoint_port(*ep));
	if (demo) {
		char name[PROGRAM_NAME_MAX];
		log_name(p, name, sizeof(name));
		ob_demo_admin_announce(name, ob_http_endpoint_port(*ep));
	}
	return OB_OK;
}

int
ob_program_ready(const struct ob_program *p, const void *cfg, const char *url)
{
	const char *path = row_text(p->config.options, cfg, "ready-file");
	char err[PROGRAM_ERR_MAX];

	if (path != NULL && ob_ready_file_write(path, url, err, sizeof(err)) != OB_OK) {
		fprintf(stderr, "%s: cannot write --ready-file %s\n", p->config.name, err);
		return OB_EINVAL;
	}
	return OB_OK;
}

void
ob_program_wait(const struct ob_program *p, const struct ob_reload *reload,
    void (*after)(void *arg), void *arg)
{
	char event[64];

	if (reload != NULL)
		ob_reload_until_stop_then(reload, after, arg);
	else
		while (ob_sig_stops() == 0)
			ob_sig_wait(-1);
	snprintf(event, sizeof(event), "%s.stopping", p->events);
	ob_info(event, "signal=%d", (int)*ob_sig_stop_flag());
}

static void
usage(FILE *f, const char *program, const char *summary, const struct ob_command *commands)
{
	fprintf(f, "usage: %s COMMAND [options]   (%s COMMAND --help; %s --version)\n\n%s\n\n"
	    "commands:\n", program, program, program, summary);
	for (const struct ob_command *c = commands; c->name != NULL; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
}

/* The tables are the commands' own: each prints them (ob_cfg_load). */
static void
markdown(const struct ob_command *commands)
{
	for (const struct ob_command *c = commands; c->name != NULL; c++) {
		char *argv[] = { (char *)c->name, "--help-markdown", NULL };
		if (c != commands)
			fputc('\n', stdout);
		(void)c->run(2, argv);
	}
}

int
ob_program_dispatch(const char *program, const char *summary,
    const struct ob_command *commands, int argc, char **argv, const struct ob_command **ran)
{
	*ran = NULL;
	ob_log_init(program, OB_LOG_INFO, OB_LOG_TEXT);
	if (argc < 2) {
		usage(stderr, program, summary, commands);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout, program, summary, commands);
		return 0;
	}
	if (strcmp(argv[1], "--help-markdown") == 0) {
		markdown(commands);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("%s %s\n", program, OB_VERSION);
		return 0;
	}
	for (const struct ob_command *c = commands; c->name != NULL; c++)
		if (strcmp(argv[1], c->name) == 0) {
			*ran = c;
			return c->run(argc - 1, argv + 1);
		}
	/* a conninfo where the command goes: not shown with its password */
	char redacted[PROGRAM_SHOWN_MAX], shown[PROGRAM_SHOWN_MAX];
	ob_pg_redact_conninfo(argv[1], redacted, sizeof(redacted));
	(void)ob_term_escape(shown, sizeof(shown), redacted, 0);
	fprintf(stderr, "%s: unknown command '%s' (see %s --help)\n", program, shown, program);
	return 2;
}
