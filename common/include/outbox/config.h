/*
 * config.h - one table per program: name, flag, env var, type, default,
 * bounds, help.
 *
 * Every flag also reads an environment variable; a flag beats the variable,
 * the variable beats the default. A table with an option named "config"
 * (OB_CFG_STRING) also reads that file of KEY=VALUE lines, the options'
 * variables: a flag beats the file, the file beats the environment (a
 * reload re-reads the file; the environment cannot change under a running
 * process). --help is generated from the table, and so
 * is the configuration reference in docs/ (ob_cfg_markdown). Invalid config
 * is reported as one line in the caller's buffer before anything is opened.
 */
#ifndef OUTBOX_CONFIG_H
#define OUTBOX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum ob_cfg_type {
	OB_CFG_STRING,   /* char *, owned by the config (NULL if unset) */
	OB_CFG_INT,      /* int64_t, within [min, max] */
	OB_CFG_BOOL,     /* bool; flag without value = true; env 1/0/true/false/yes/no/on/off */
	OB_CFG_DURATION, /* int64_t milliseconds; "250ms", "5s", "2m", "24h", "7d", bare number = ms */
	OB_CFG_SIZE,     /* int64_t bytes; "512", "64k", "1m" (KiB, MiB) */
	OB_CFG_ENUM,     /* char * (owned), one of the '|'-separated choices */
	OB_CFG_LIST,     /* struct ob_cfg_list: repeatable flag; env is comma-separated */
};

struct ob_cfg_list {
	char **items; /* owned */
	size_t n;
};

struct ob_cfg_opt {
	const char *name;    /* flag without dashes: "db" -> --db VALUE or --db=VALUE */
	const char *env;     /* "OUTBOX_DB" */
	enum ob_cfg_type type;
	const char *def;     /* default as text, parsed like a value; NULL = unset */
	int64_t min, max;    /* bounds for INT / DURATION / SIZE (inclusive; 0, 0 = none) */
	const char *choices; /* ENUM: "text|json" */
	bool required;       /* missing -> error */
	bool secret;         /* never printed (e.g. a password); conninfo is redacted anyway */
	size_t offset;       /* offsetof(struct <program config>, field) */
	const char *help;    /* one line */
};

/* One row of a program's table; secret is false. The row names its field,
 * not the struct: that is the including file's OB_CFG_STRUCT, defined above
 * its table, so the shared rows (outbox/config_rows.h) fit any table:
 *
 *     #define OB_CFG_STRUCT struct relay_config
 *     static const struct ob_cfg_opt relay_options[] = {
 *             OB_CFG_OPT("db", "OUTBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true,
 *                 db, "PostgreSQL connection string of ..."),
 *             ...
 *             OB_CFG_END,
 *     };
 */
#define OB_CFG_OPT(name, env, type, def, min, max, choices, req, field, help)   \
	{ name, env, type, def, min, max, choices, req, false,                  \
	    offsetof(OB_CFG_STRUCT, field), help }

#define OB_CFG_END { NULL, NULL, 0, NULL, 0, 0, NULL, false, false, 0, NULL }

/* Parse argv (argv[0] is skipped; parsing stops at the first non-flag
 * argument, whose index goes to *first_arg) and the environment into cfg
 * according to table. "--help"/"-h" sets *want_help and returns OB_OK.
 * On error returns OB_EINVAL with one line in err (e.g.
 * "--lease-ms: 100 is below the minimum 1000"); cfg may then be partly
 * filled and must still be released with ob_cfg_free. Reads getenv(). */
int ob_cfg_parse(const struct ob_cfg_opt *table, void *cfg, int argc,
    char **argv, int *first_arg, bool *want_help, char *err, size_t errlen);

/* The names of the options whose values differ between a and b, comma
 * separated, into out ("" when none). */
void ob_cfg_changed(const struct ob_cfg_opt *table, const void *a, const void *b, char *out,
    size_t outlen);

/* The help of every program's --config option. */
#define OB_CFG_CONFIG_HELP \
    "a file of KEY=VALUE lines, the variables of these options; a flag beats it, it beats" \
    " the environment. SIGHUP re-reads it (and the flags and environment): the log level" \
    " changes at once, other changes are logged as needing a restart"

/* The row of table named name ("log-level"), or NULL: for code that acts
 * on a shared row (outbox/config_rows.h) whatever the program's struct. */
const struct ob_cfg_opt *ob_cfg_find(const struct ob_cfg_opt *table, const char *name);

/* Free every owned STRING / ENUM / LIST field of cfg named by table. */
void ob_cfg_free(const struct ob_cfg_opt *table, void *cfg);

/* Print "usage: <synopsis>" then one block per option: flag, env var,
 * default, bounds and help. */
void ob_cfg_usage(FILE *f, const char *synopsis, const char *description,
    const struct ob_cfg_opt *table);

/* Print the table as a Markdown table (the docs/ configuration reference). */
void ob_cfg_markdown(FILE *f, const char *title, const struct ob_cfg_opt *table);

/* What a program (or subcommand) tells ob_cfg_load about itself. */
enum ob_cfg_markdown {
	OB_CFG_MARKDOWN_ALONE, /* (the default) "<prog> --help-markdown", as the only argument */
	OB_CFG_MARKDOWN_ANY,   /* --help-markdown anywhere before "--" */
};

struct ob_cfg_program {
	const char *name;        /* "outbox-relay", "outboxctl dead list": prefix
	                          * of every error line, --help-markdown title */
	const char *synopsis;    /* --help: "usage: <synopsis>" */
	const char *description; /* --help: paragraph below; NULL = none */
	const struct ob_cfg_opt *options;
	enum ob_cfg_markdown markdown;
	bool positional;         /* arguments after the flags are allowed (their
	                          * index goes to *first_arg); else the first one is
	                          * "unexpected argument" */
};

/* The start of every main and subcommand: parse argv and the environment
 * into cfg by p->options, and handle what ends the program right there:
 *   --help-markdown (see p->markdown): the Markdown table on stdout -> 0
 *   a bad flag or value: "<name>: <error>" on stderr -> 2
 *   --help / -h: ob_cfg_usage on stdout -> 0
 *   a stray argument (!p->positional): "<name>: unexpected argument 'x'"
 *   on stderr -> 2
 * Returns -1 to go on (cfg is filled, *first_arg = index of the first
 * positional argument, == argc if none; first_arg may be NULL) or the exit
 * code to return.
 * Ownership rule: on -1 the caller owns cfg and releases it with
 * ob_cfg_free; on an exit code cfg already holds nothing (released, or
 * cleared without being filled), so the caller just returns the code
 * (calling ob_cfg_free on it anyway is harmless). */
int ob_cfg_load(const struct ob_cfg_program *p, void *cfg, int argc,
    char **argv, int *first_arg);

/* Parse a duration text ("250ms", "5s", "2m", "24h", "7d", bare = ms) into
 * milliseconds. OB_OK or OB_EINVAL. */
int ob_cfg_parse_duration(const char *s, int64_t *ms);


#endif
