/*
 * config.c - the config table engine: flags, environment, defaults, bounds,
 * --help text and the Markdown reference, all driven by one ob_cfg_opt table.
 *
 * It owns the STRING / ENUM / LIST fields it fills in (released by
 * ob_cfg_free). It never exits or logs: a bad value is reported as one line
 * in the caller's buffer and the caller decides (exit 2 at start-up). The
 * one exception is ob_cfg_load, the shared start of every main, which
 * prints --help, --help-markdown and that one line itself and hands back
 * the exit code. Precedence is flag > --config file > environment >
 * default: a table with a "config" option reads that file of KEY=VALUE
 * lines (the options' variables), which a reload (SIGHUP) reads again,
 * so it beats the environment, which a running process cannot re-read.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "outbox/config.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/version.h"

/* Where a value came from: error messages name the flag or the variable. */
enum src { SRC_FLAG, SRC_ENV, SRC_DEF };

/* Number parsers tell a malformed value from one that does not fit. */
enum { NUM_OK = 0, NUM_SYNTAX, NUM_RANGE };

/* The --config file: at most this big, lines at most this long. */
#define FILE_MAX (64 * 1024)
#define FILE_LINE_MAX 4096

/* A bad value is shown up to this long, redacted like a conninfo. */
#define VALUE_SHOWN_MAX 512

/* ob_cfg_load's one error line (what every main used to allocate). */
#define LOAD_ERR_MAX 1024

#define FIELD(cfg, o, type) ((type *)(void *)((char *)(cfg) + (o)->offset))

static const char *const type_names[] = {
	[OB_CFG_STRING] = "string",
	[OB_CFG_INT] = "int",
	[OB_CFG_BOOL] = "bool",
	[OB_CFG_DURATION] = "duration",
	[OB_CFG_SIZE] = "size",
	[OB_CFG_ENUM] = "enum",
	[OB_CFG_LIST] = "list",
};

static bool
is_numeric(const struct ob_cfg_opt *o)
{
	return o->type == OB_CFG_INT || o->type == OB_CFG_DURATION ||
	    o->type == OB_CFG_SIZE;
}

/* min == max == 0 means "no bounds", so a table may leave them out. */
static bool
has_bounds(const struct ob_cfg_opt *o)
{
	return is_numeric(o) && (o->min != 0 || o->max != 0);
}

/*
 * One line describing a bad value, in the form that points at its source:
 *   --lease-ms: 100 is below the minimum 1000
 *   OUTBOX_WORKERS=0: below the minimum 1
 *   --lease-ms: bad default '30x': not a duration
 */
static int
bad_value(char *err, size_t errlen, const struct ob_cfg_opt *o, enum src src,
    const char *v, bool quote, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static int
bad_value(char *err, size_t errlen, const struct ob_cfg_opt *o, enum src src,
    const char *v, bool quote, const char *fmt, ...)
{
	char why[256], shown[VALUE_SHOWN_MAX];
	const char *q = quote ? "'" : "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	/* a conninfo given to the wrong flag is still not shown with its password */
	ob_pg_redact_conninfo(v, shown, sizeof shown);
	v = shown;
	switch (src) {
	case SRC_FLAG:
		snprintf(err, errlen, "--%s: %s%s%s is %s", o->name, q, v, q, why);
		break;
	case SRC_ENV:
		snprintf(err, errlen, "%s=%s: %s", o->env, v, why);
		break;
	case SRC_DEF:
		snprintf(err, errlen, "--%s: bad default '%s': %s", o->name, v, why);
		break;
	}
	return OB_EINVAL;
}

static int
no_memory(char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory");
	return OB_ENOMEM;
}

/* Strict decimal: the whole string, optional sign, no blanks, no overflow. */
static int
parse_int(const char *s, int64_t *out)
{
	const char *d = (*s == '-' || *s == '+') ? s + 1 : s;
	char *end;
	long long v;

	if (!isdigit((unsigned char)*d))
		return NUM_SYNTAX;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end != '\0')
		return NUM_SYNTAX;
	if (errno == ERANGE)
		return NUM_RANGE;
	*out = v;
	return NUM_OK;
}

/* Leading digits of s (at least one) times a unit multiplier looked up from
 * the rest by unit(); no sign, no blanks, no overflow. */
static int
parse_scaled(const char *s, int64_t (*unit)(const char *), int64_t *out)
{
	int64_t n = 0, mul;
	bool ovf = false;

	if (!isdigit((unsigned char)*s))
		return NUM_SYNTAX;
	for (; isdigit((unsigned char)*s); s++) {
		int d = *s - '0';
		if (n > (INT64_MAX - d) / 10)
			ovf = true;
		else
			n = n * 10 + d;
	}
	if ((mul = unit(s)) == 0)
		return NUM_SYNTAX;
	if (ovf || n > INT64_MAX / mul)
		return NUM_RANGE;
	*out = n * mul;
	return NUM_OK;
}

static int64_t
duration_unit(const char *u)
{
	static const struct {
		const char *name;
		int64_t ms;
	} units[] = {
		{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 },
		{ "h", 3600000 }, { "d", 86400000 },
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(u, units[i].name) == 0)
			return units[i].ms;
	return 0;
}

/* "512", "512b", "64k", "64KiB", "1MB", "2g": binary multiples. */
static int64_t
size_unit(const char *u)
{
	int64_t mul = 1;

	switch (*u) {
	case 'k': case 'K': mul = INT64_C(1) << 10; u++; break;
	case 'm': case 'M': mul = INT64_C(1) << 20; u++; break;
	case 'g': case 'G': mul = INT64_C(1) << 30; u++; break;
	}
	if (*u == '\0' || strcmp(u, "b") == 0 || strcmp(u, "B") == 0)
		return mul;
	if (mul > 1 && strcmp(u, "iB") == 0)
		return mul;
	return 0;
}

int
ob_cfg_parse_duration(const char *s, int64_t *ms)
{
	int64_t v;

	if (s == NULL || parse_scaled(s, duration_unit, &v) != NUM_OK)
		return OB_EINVAL;
	*ms = v;
	return OB_OK;
}

static int
parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return NUM_OK;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return NUM_OK;
		}
	}
	return NUM_SYNTAX;
}

static bool
is_choice(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *c = choices; c != NULL && *c != '\0';) {
		size_t len = strcspn(c, "|");
		if (len == n && strncmp(c, v, n) == 0)
			return true;
		c += len;
		if (*c == '|')
			c++;
	}
	return false;
}

static void
list_clear(struct ob_cfg_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->items[i]);
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

static int
list_push(struct ob_cfg_list *l, const char *s, size_t n)
{
	char **items, *copy;

	if ((copy = strndup(s, n)) == NULL)
		return OB_ENOMEM;
	if ((items = realloc(l->items, (l->n + 1) * sizeof *items)) == NULL) {
		free(copy);
		return OB_ENOMEM;
	}
	items[l->n++] = copy;
	l->items = items;
	return OB_OK;
}

/* Environment and default lists are comma-separated; items are trimmed and
 * must not be empty (a stray comma is a typo, not an intent). */
static int
list_split(const struct ob_cfg_opt *o, struct ob_cfg_list *l, enum src src,
    const char *v, char *err, size_t errlen)
{
	list_clear(l);
	for (const char *p = v;;) {
		size_t len = strcspn(p, ",");
		const char *b = p, *e = p + len;

		while (b < e && isspace((unsigned char)*b))
			b++;
		while (e > b && isspace((unsigned char)e[-1]))
			e--;
		if (b == e)
			return bad_value(err, errlen, o, src, v, true,
			    "a list with an empty item");
		if (list_push(l, b, (size_t)(e - b)) != OB_OK)
			return no_memory(err, errlen);
		if (p[len] == '\0')
			return OB_OK;
		p += len + 1;
	}
}

static int
set_string(char **field, const char *v, char *err, size_t errlen)
{
	char *copy;

	if ((copy = strdup(v)) == NULL)
		return no_memory(err, errlen);
	free(*field);
	*field = copy;
	return OB_OK;
}

/* Parse v per the option's type and store it; a later flag replaces an
 * earlier one, except for LIST flags which accumulate. */
static int
apply(const struct ob_cfg_opt *o, void *cfg, enum src src, const char *v,
    char *err, size_t errlen)
{
	int64_t n = 0;
	int rc = NUM_OK;
	const char *what = NULL;

	switch (o->type) {
	case OB_CFG_STRING:
		return set_string(FIELD(cfg, o, char *), v, err, errlen);
	case OB_CFG_ENUM:
		if (!is_choice(o->choices, v))
			return bad_value(err, errlen, o, src, v, true,
			    "not one of %s", o->choices ? o->choices : "");
		return set_string(FIELD(cfg, o, char *), v, err, errlen);
	case OB_CFG_BOOL:
		if (parse_bool(v, FIELD(cfg, o, bool)) != NUM_OK)
			return bad_value(err, errlen, o, src, v, true,
			    "not a boolean (true|false)");
		return OB_OK;
	case OB_CFG_LIST:
		if (src != SRC_FLAG)
			return list_split(o, FIELD(cfg, o, struct ob_cfg_list),
			    src, v, err, errlen);
		if (*v == '\0')
			return bad_value(err, errlen, o, src, v, true,
			    "an empty list item");
		if (list_push(FIELD(cfg, o, struct ob_cfg_list), v,
		    strlen(v)) != OB_OK)
			return no_memory(err, errlen);
		return OB_OK;
	case OB_CFG_INT:
		rc = parse_int(v, &n);
		what = "not an integer";
		break;
	case OB_CFG_DURATION:
		rc = parse_scaled(v, duration_unit, &n);
		what = "not a duration (250ms, 5s, 2m, 24h, 7d)";
		break;
	case OB_CFG_SIZE:
		rc = parse_scaled(v, size_unit, &n);
		what = "not a size (512, 64k, 1m, 2g)";
		break;
	}
	if (rc == NUM_SYNTAX)
		return bad_value(err, errlen, o, src, v, true, "%s", what);
	if (rc == NUM_RANGE)
		return bad_value(err, errlen, o, src, v, true, "out of range");
	if (has_bounds(o) && n < o->min)
		return bad_value(err, errlen, o, src, v, false,
		    "below the minimum %" PRId64, o->min);
	if (has_bounds(o) && n > o->max)
		return bad_value(err, errlen, o, src, v, false,
		    "above the maximum %" PRId64, o->max);
	*FIELD(cfg, o, int64_t) = n;
	return OB_OK;
}

static void
clear_field(const struct ob_cfg_opt *o, void *cfg)
{
	switch (o->type) {
	case OB_CFG_STRING:
	case OB_CFG_ENUM:
		*FIELD(cfg, o, char *) = NULL;
		break;
	case OB_CFG_LIST:
		FIELD(cfg, o, struct ob_cfg_list)->items = NULL;
		FIELD(cfg, o, struct ob_cfg_list)->n = 0;
		break;
	case OB_CFG_BOOL:
		*FIELD(cfg, o, bool) = false;
		break;
	case OB_CFG_INT:
	case OB_CFG_DURATION:
	case OB_CFG_SIZE:
		*FIELD(cfg, o, int64_t) = 0;
		break;
	}
}

static int
find_opt(const struct ob_cfg_opt *table, const char *name, size_t len)
{
	for (int i = 0; table[i].name != NULL; i++)
		if (strlen(table[i].name) == len &&
		    strncmp(table[i].name, name, len) == 0)
			return i;
	return -1;
}

const struct ob_cfg_opt *
ob_cfg_find(const struct ob_cfg_opt *table, const char *name)
{
	int i = find_opt(table, name, strlen(name));
	return i >= 0 ? &table[i] : NULL;
}

/* One "--name", "--name=value", "--name value" or "--no-name" at argv[*i];
 * advances *i past a separate value. */
static int
parse_flag(const struct ob_cfg_opt *table, void *cfg, bool *seen, int argc,
    char **argv, int *i, char *err, size_t errlen)
{
	const char *a = argv[*i] + 2;
	const char *eq = strchr(a, '=');
	size_t len = eq ? (size_t)(eq - a) : strlen(a);
	const char *v = eq ? eq + 1 : NULL;
	const struct ob_cfg_opt *o;
	bool negated = false;
	int k;

	k = find_opt(table, a, len);
	if (k < 0 && len > 3 && strncmp(a, "no-", 3) == 0) {
		k = find_opt(table, a + 3, len - 3);
		if (k >= 0 && table[k].type != OB_CFG_BOOL)
			k = -1;
		negated = k >= 0;
	}
	if (k < 0) {
		snprintf(err, errlen, "unknown option --%.*s (see --help)",
		    (int)len, a);
		return OB_EINVAL;
	}
	o = &table[k];
	if (negated) {
		if (v != NULL) {
			snprintf(err, errlen, "--no-%s takes no value", o->name);
			return OB_EINVAL;
		}
		v = "false";
	} else if (o->type == OB_CFG_BOOL) {
		if (v == NULL)
			v = "true"; /* never eats the next argument */
	} else if (v == NULL) {
		/* "--db --workers 3" forgot the value; "--db=--x" still works */
		if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0) {
			snprintf(err, errlen, "--%s: missing value", o->name);
			return OB_EINVAL;
		}
		v = argv[++*i];
	}
	seen[k] = true;
	return apply(o, cfg, SRC_FLAG, v, err, errlen);
}

static char *
trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* Apply the KEY=VALUE lines of the --config file at path (blank lines and
 * "#" comments skipped, "export " and matching quotes allowed, as in an
 * environment file) to the options not given as flags; each one applied is
 * marked in seen. An unknown key, a key twice or a bad value is an error
 * that names the file and the line. */
static int
read_file(const struct ob_cfg_opt *table, void *cfg, bool *seen, const bool *flagged,
    const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "--config %s: %s", path, strerror(errno));
		return OB_EINVAL;
	}
	size_t n = 0;
	for (; table[n].name != NULL; n++)
		;
	bool *in_file = calloc(n + 1, sizeof(*in_file));
	char *line = malloc(FILE_LINE_MAX + 2);
	int rv = OB_OK;
	if (in_file == NULL || line == NULL) {
		rv = no_memory(err, errlen);
		goto out;
	}
	long total = 0;
	for (int lineno = 1; fgets(line, FILE_LINE_MAX + 2, f) != NULL; lineno++) {
		size_t len = strlen(line);
		total += (long)len;
		if (total > FILE_MAX) {
			snprintf(err, errlen, "--config %s: larger than %d bytes", path, FILE_MAX);
			rv = OB_EINVAL;
			goto out;
		}
		if (len > FILE_LINE_MAX && line[len - 1] != '\n') {
			snprintf(err, errlen, "%s:%d: line longer than %d bytes", path, lineno,
			    FILE_LINE_MAX);
			rv = OB_EINVAL;
			goto out;
		}
		char *t = trim(line);
		if (*t == '\0' || *t == '#')
			continue;
		if (strncmp(t, "export ", 7) == 0)
			t = trim(t + 7);
		char *eq = strchr(t, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "%s:%d: not KEY=VALUE", path, lineno);
			rv = OB_EINVAL;
			goto out;
		}
		*eq = '\0';
		char *key = trim(t), *v = trim(eq + 1);
		size_t vl = strlen(v);
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
			v[vl - 1] = '\0';
			v++;
		}
		size_t k;
		for (k = 0; k < n; k++)
			if (table[k].env != NULL && strcmp(table[k].env, key) == 0 &&
			    strcmp(table[k].name, "config") != 0)
				break;
		if (k == n) {
			snprintf(err, errlen, "%s:%d: unknown setting '%s' (see --help)", path, lineno,
			    key);
			rv = OB_EINVAL;
			goto out;
		}
		if (in_file[k]) {
			snprintf(err, errlen, "%s:%d: %s is set twice", path, lineno, key);
			rv = OB_EINVAL;
			goto out;
		}
		in_file[k] = true;
		if (flagged[k] || *v == '\0') /* a flag beats the file; empty = unset */
			continue;
		if ((rv = apply(&table[k], cfg, SRC_ENV, v, err, errlen)) != OB_OK) {
			char why[512];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			goto out;
		}
		seen[k] = true;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "--config %s: %s", path, strerror(errno));
		rv = OB_EINVAL;
	}
out:
	free(line);
	free(in_file);
	fclose(f);
	return rv;
}

int
ob_cfg_parse(const struct ob_cfg_opt *table, void *cfg, int argc,
    char **argv, int *first_arg, bool *want_help, char *err, size_t errlen)
{
	size_t n;
	bool *seen;
	int i, rv = OB_OK;

	for (n = 0; table[n].name != NULL; n++)
		clear_field(&table[n], cfg);
	if (errlen > 0)
		err[0] = '\0';
	if ((seen = calloc(n + 1, sizeof *seen)) == NULL)
		return no_memory(err, errlen);

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			/* the caller prints usage and exits: skip the rest */
			*want_help = true;
			*first_arg = i + 1;
			goto done;
		}
		if (strncmp(a, "--", 2) != 0)
			break;
		if ((rv = parse_flag(table, cfg, seen, argc, argv, &i, err,
		    errlen)) != OB_OK)
			goto done;
	}

	/* The --config file, named by the flag or its variable. */
	int ck = find_opt(table, "config", 6);
	if (ck >= 0 && table[ck].type == OB_CFG_STRING) {
		const char *v;
		if (!seen[ck] && table[ck].env != NULL && (v = getenv(table[ck].env)) != NULL &&
		    *v != '\0') {
			if ((rv = apply(&table[ck], cfg, SRC_ENV, v, err, errlen)) != OB_OK)
				goto done;
			seen[ck] = true;
		}
		const char *path = *FIELD(cfg, &table[ck], char *);
		if (seen[ck] && path != NULL && *path != '\0') {
			bool *flagged = malloc((n + 1) * sizeof(*flagged));
			if (flagged == NULL) {
				rv = no_memory(err, errlen);
				goto done;
			}
			memcpy(flagged, seen, (n + 1) * sizeof(*flagged));
			rv = read_file(table, cfg, seen, flagged, path, err, errlen);
			free(flagged);
			if (rv != OB_OK)
				goto done;
		}
	}

	for (size_t k = 0; k < n; k++) {
		const struct ob_cfg_opt *o = &table[k];
		const char *v;

		if (seen[k])
			continue;
		/* an empty variable counts as unset (compose files love them) */
		if (o->env != NULL && (v = getenv(o->env)) != NULL && *v != '\0')
			rv = apply(o, cfg, SRC_ENV, v, err, errlen);
		else if (o->def != NULL)
			rv = apply(o, cfg, SRC_DEF, o->def, err, errlen);
		else
			continue;
		if (rv != OB_OK)
			goto done;
		seen[k] = true;
	}

	for (size_t k = 0; k < n; k++) {
		const struct ob_cfg_opt *o = &table[k];

		if (!o->required || seen[k])
			continue;
		if (o->env != NULL)
			snprintf(err, errlen, "--%s is required (or set %s)",
			    o->name, o->env);
		else
			snprintf(err, errlen, "--%s is required", o->name);
		rv = OB_EINVAL;
		goto done;
	}
	*want_help = false;
	*first_arg = i;
done:
	free(seen);
	return rv;
}

void
ob_cfg_free(const struct ob_cfg_opt *table, void *cfg)
{
	for (const struct ob_cfg_opt *o = table; o->name != NULL; o++) {
		if (o->type == OB_CFG_STRING || o->type == OB_CFG_ENUM) {
			free(*FIELD(cfg, o, char *));
			*FIELD(cfg, o, char *) = NULL;
		} else if (o->type == OB_CFG_LIST) {
			list_clear(FIELD(cfg, o, struct ob_cfg_list));
		}
	}
}

static const char *
placeholder(const struct ob_cfg_opt *o)
{
	switch (o->type) {
	case OB_CFG_STRING: return "VALUE";
	case OB_CFG_INT: return "N";
	case OB_CFG_BOOL: return NULL;
	case OB_CFG_DURATION: return "DURATION";
	case OB_CFG_SIZE: return "SIZE";
	case OB_CFG_ENUM: return o->choices;
	case OB_CFG_LIST: return "VALUE...";
	}
	return "VALUE";
}

/* Print ", " between the facts on an option's usage line. */
static void
fact(FILE *f, bool *first, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
fact(FILE *f, bool *first, const char *fmt, ...)
{
	va_list ap;

	fputs(*first ? " " : ", ", f);
	*first = false;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
}

void
ob_cfg_usage(FILE *f, const char *synopsis, const char *description,
    const struct ob_cfg_opt *table)
{
	fprintf(f, "usage: %s\n\n", synopsis ? synopsis : "");
	if (description != NULL && *description != '\0')
		fprintf(f, "%s\n\n", description);
	fputs("options:\n", f);
	for (const struct ob_cfg_opt *o = table; o->name != NULL; o++) {
		const char *ph = placeholder(o);
		char flag[128];
		bool first = true;

		snprintf(flag, sizeof flag, "--%s%s%s", o->name, ph ? " " : "",
		    ph ? ph : "");
		fprintf(f, "  %-23s", flag);
		if (o->env != NULL)
			fprintf(f, " [%s]", o->env);
		if (o->required)
			fact(f, &first, "required");
		if (o->secret)
			fact(f, &first, "secret");
		else if (o->def != NULL)
			fact(f, &first, "default %s", *o->def ? o->def : "''");
		if (has_bounds(o))
			fact(f, &first, "%" PRId64 "..%" PRId64, o->min, o->max);
		if (o->type == OB_CFG_LIST)
			fact(f, &first, "repeatable, env comma-separated");
		fprintf(f, "\n      %s\n", o->help ? o->help : "");
	}
	fputs("  --help\n      print this and exit\n"
	      "  --version\n      print the release and exit\n", f);
}

/* Markdown table cell text: '|' would end the cell. */
static void
md_cell(FILE *f, const char *s)
{
	for (; s != NULL && *s != '\0'; s++) {
		if (*s == '|')
			fputs("\\|", f);
		else
			fputc(*s == '\n' ? ' ' : *s, f);
	}
}

void
ob_cfg_markdown(FILE *f, const char *title, const struct ob_cfg_opt *table)
{
	fprintf(f, "### %s\n\n", title ? title : "");
	fputs("| flag | env | type | default | bounds | description |\n"
	      "|---|---|---|---|---|---|\n", f);
	for (const struct ob_cfg_opt *o = table; o->name != NULL; o++) {
		fputs("| `--", f);
		md_cell(f, o->name);
		fputs("` | ", f);
		if (o->env != NULL) {
			fputc('`', f);
			md_cell(f, o->env);
			fputc('`', f);
		}
		fprintf(f, " | %s | ", type_names[o->type]);
		if (o->required)
			fputs("required", f);
		else if (o->secret && o->def != NULL)
			fputs("(secret)", f);
		else if (o->def != NULL) {
			fputc('`', f);
			md_cell(f, o->def);
			fputc('`', f);
		}
		fputs(" | ", f);
		if (has_bounds(o))
			fprintf(f, "%" PRId64 "..%" PRId64, o->min, o->max);
		else if (o->type == OB_CFG_ENUM)
			md_cell(f, o->choices);
		else if (o->type == OB_CFG_LIST)
			fputs("repeatable", f);
		fputs(" | ", f);
		md_cell(f, o->help);
		fputs(" |\n", f);
	}
}

/* Is this a --help-markdown call, the way p accepts it? */
static bool
wants_markdown(const struct ob_cfg_program *p, int argc, char **argv)
{
	if (p->markdown == OB_CFG_MARKDOWN_ALONE)
		return argc == 2 && strcmp(argv[1], "--help-markdown") == 0;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help-markdown") == 0)
			return true;
	return false;
}

/* Is --version among the flags (before a "--")? */
static bool
wants_version(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--version") == 0)
			return true;
	return false;
}

int
ob_cfg_load(const struct ob_cfg_program *p, void *cfg, int argc,
    char **argv, int *first_arg)
{
	char err[LOAD_ERR_MAX];
	int first = argc;
	bool help = false;

	if (wants_version(argc, argv)) {
		printf("%s %s\n", p->name, OB_VERSION);
		return 0;
	}

	if (wants_markdown(p, argc, argv)) {
		/* before parsing: prints the table even with required flags unset */
		for (const struct ob_cfg_opt *o = p->options; o->name != NULL; o++)
			clear_field(o, cfg);
		ob_cfg_markdown(stdout, p->name, p->options);
		return 0;
	}
	if (ob_cfg_parse(p->options, cfg, argc, argv, &first, &help, err,
	    sizeof err) != OB_OK) {
		fprintf(stderr, "%s: %s\n", p->name, err);
		ob_cfg_free(p->options, cfg);
		return 2;
	}
	if (help) {
		ob_cfg_usage(stdout, p->synopsis, p->description, p->options);
		ob_cfg_free(p->options, cfg);
		return 0;
	}
	if (!p->positional && first < argc) {
		char shown[VALUE_SHOWN_MAX]; /* a conninfo after a flag that takes none */
		ob_pg_redact_conninfo(argv[first], shown, sizeof shown);
		fprintf(stderr, "%s: unexpected argument '%s'\n", p->name, shown);
		ob_cfg_free(p->options, cfg);
		return 2;
	}
	if (first_arg != NULL)
		*first_arg = first;
	return -1;
}

static bool
same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

void
ob_cfg_changed(const struct ob_cfg_opt *table, const void *a, const void *b, char *out,
    size_t outlen)
{
	size_t used = 0;
	if (outlen > 0)
		out[0] = '\0';
	for (const struct ob_cfg_opt *o = table; o->name != NULL; o++) {
		bool same = true;
		switch (o->type) {
		case OB_CFG_STRING:
		case OB_CFG_ENUM:
			same = same_str(*FIELD(a, o, char *const), *FIELD(b, o, char *const));
			break;
		case OB_CFG_BOOL:
			same = *FIELD(a, o, const bool) == *FIELD(b, o, const bool);
			break;
		case OB_CFG_INT:
		case OB_CFG_DURATION:
		case OB_CFG_SIZE:
			same = *FIELD(a, o, const int64_t) == *FIELD(b, o, const int64_t);
			break;
		case OB_CFG_LIST: {
			const struct ob_cfg_list *la = FIELD(a, o, const struct ob_cfg_list);
			const struct ob_cfg_list *lb = FIELD(b, o, const struct ob_cfg_list);
			same = la->n == lb->n;
			for (size_t i = 0; same && i < la->n; i++)
				same = strcmp(la->items[i], lb->items[i]) == 0;
			break;
		}
		}
		if (same)
			continue;
		int w = snprintf(out + used, outlen > used ? outlen - used : 0, "%s%s",
		    used > 0 ? "," : "", o->name);
		if (w > 0)
			used += (size_t)w;
		if (used >= outlen)
			break;
	}
}
