/*
 * ctl_util.c - shared plumbing of the outboxctl subcommands: argv
 * reordering on top of the config tables, connecting, the run of a
 * subcommand from its flags to its exit code, and the two output forms
 * (aligned tables for people, JSON via jansson for scripts).
 *
 * Never: decide what a command means; print anything but the result on
 * stdout (errors go to stderr as one line); print a stored value raw:
 * tables and records escape it for the terminal (ob_term_escape), JSON is
 * ASCII only (jansson escapes control characters and, with
 * JSON_ENSURE_ASCII, every character past ASCII as \uXXXX).
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_util.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "outbox/protocol.h"
#include "outbox/term.h"

/* PostgreSQL type OIDs (pg_type.h is server-side only). */
#define OID_BOOL 16
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23
#define OID_JSON 114
#define OID_FLOAT4 700
#define OID_FLOAT8 701
#define OID_NUMERIC 1700
#define OID_JSONB 3802

#define SECONDS_SUFFIX "_seconds"
/* The one column a record shows on several lines, as JSON text
 * (jsonb_pretty: its backslashes are JSON's escapes, kept as they are). */
#define PAYLOAD_COLUMN "payload"

static const struct ob_cfg_opt *
find_opt(const struct ob_cfg_opt *table, const char *flag)
{
	size_t len = strcspn(flag, "=");

	for (const struct ob_cfg_opt *o = table; o->name != NULL; o++)
		if (strlen(o->name) == len && strncmp(o->name, flag, len) == 0)
			return o;
	return NULL;
}

int
ctl_parse(const struct ctl_cmd *cmd, void *cfg, int argc, char **argv,
    char ***pos, int *npos)
{
	char **flags, **args, name[128];
	int nf = 1, na = 0, code;
	bool rest = false;

	*pos = NULL;
	*npos = 0;
	flags = calloc((size_t)argc + 2, sizeof *flags);
	args = calloc((size_t)argc + 1, sizeof *args);
	if (flags == NULL || args == NULL) {
		free(flags);
		free(args);
		fprintf(stderr, "outboxctl %s: out of memory\n", cmd->name);
		return CTL_EXIT_FAIL;
	}
	flags[0] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (rest || strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) {
			if (strcmp(a, "--") == 0 && !rest)
				rest = true;
			else
				args[na++] = argv[i];
			continue;
		}
		flags[nf++] = argv[i];
		const struct ob_cfg_opt *o = find_opt(cmd->table, a + 2);
		/* a separate value follows the flag (the parser checks it) */
		if (o != NULL && o->type != OB_CFG_BOOL && strchr(a, '=') == NULL &&
		    i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
			flags[nf++] = argv[++i];
	}
	/* positional arguments were moved to args: flags holds none */
	snprintf(name, sizeof name, "outboxctl %s", cmd->name);
	const struct ob_cfg_program p = {
		.name = name,
		.synopsis = cmd->synopsis,
		.description = cmd->description,
		.options = cmd->table,
		.markdown = OB_CFG_MARKDOWN_ANY,
		.positional = true,
	};
	code = ob_cfg_load(&p, cfg, nf, flags, NULL);
	free(flags);
	if (code >= 0) {
		free(args);
		return code;
	}
	*pos = args;
	*npos = na;
	return -1;
}

/* Each database (enum ctl_db): the row of a subcommand's table that names
 * it (ctl_rows.h), the schema it must have and the protocol this build
 * needs of that schema. */
static const struct {
	const char *row, *schema, *component;
	int version;
} dbs[] = {
	[CTL_DB_OUTBOX] = { "db", "outbox", "admin", OB_PROTOCOL_ADMIN },
	[CTL_DB_INBOX] = { "inbox-db", "inbox", "consumer", OB_PROTOCOL_CONSUMER },
};

int
ctl_need_session(PGconn *conn, char *err, size_t errlen)
{
	const char *pooler = getenv("OUTBOX_POOLER");
	if (pooler != NULL && pooler[0] != '\0' && strcmp(pooler, "direct") != 0 &&
	    strcmp(pooler, "session") != 0) {
		snprintf(err, errlen, "OUTBOX_POOLER='%.40s' is not one of direct|session", pooler);
		return OB_EINVAL;
	}
	return ob_pg_need_session(conn, pooler != NULL && strcmp(pooler, "session") == 0,
	    "outboxctl", "OUTBOX_POOLER=session", err, errlen);
}

int
ctl_open(enum ctl_db db, const char *conninfo, PGconn **out, char *err, size_t errlen)
{
	PGconn *conn = NULL;
	int rc;

	if ((rc = ob_pg_connect(conninfo, "outboxctl", &conn, err, errlen)) != OB_OK)
		return rc;
	/* timestamps in UTC, ISO 8601; what it reports done is on disk,
	 * whatever the server's default; a schema built for another
	 * outboxctl: one line, nothing read */
	if ((rc = ctl_need_session(conn, err, errlen)) != OB_OK ||
	    (rc = ob_pg_exec(conn, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'", "set session",
	         err, errlen)) != OB_OK ||
	    (rc = ob_pg_durable_commits(conn, err, errlen)) != OB_OK ||
	    (rc = ob_protocol_check(conn, dbs[db].schema, dbs[db].component,
	         dbs[db].version, err, errlen)) != OB_OK) {
		PQfinish(conn);
		return rc;
	}
	*out = conn;
	return OB_OK;
}

PGconn *
ctl_connect(const struct ctl_cmd *cmd, const char *conninfo)
{
	PGconn *conn = NULL;
	char err[1024];

	if (ctl_open(cmd->db, conninfo, &conn, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl %s: %s\n", cmd->name, err);
		return NULL;
	}
	return conn;
}

bool
ctl_no_arguments(const struct ctl_cmd *cmd, char *const *pos, int npos)
{
	char shown[CTL_SHOWN_MAX];
	const char *hint = cmd->arg_hint;

	if (npos == 0)
		return true;
	fprintf(stderr, "outboxctl %s: unexpected argument '%s'%s%s\n", cmd->name,
	    ctl_shown(pos[0], shown, sizeof shown), hint ? " " : "", hint ? hint : "");
	return false;
}

/* The value of the row of cmd->table that names cmd->db: set, the row
 * being required (ctl_rows.h). */
static const char *
conninfo(const struct ctl_cmd *cmd, const void *cfg)
{
	const struct ob_cfg_opt *row = ob_cfg_find(cmd->table, dbs[cmd->db].row);

	return *(char *const *)(const void *)((const char *)cfg + row->offset);
}

int
ctl_run(const struct ctl_cmd *cmd, size_t cfg_size, int argc, char **argv, ctl_check *check,
    ctl_body *body)
{
	void *cfg = calloc(1, cfg_size);
	char **pos = NULL;
	int npos, code;
	PGconn *conn = NULL;

	if (cfg == NULL) {
		fprintf(stderr, "outboxctl %s: out of memory\n", cmd->name);
		return CTL_EXIT_FAIL;
	}
	if ((code = ctl_parse(cmd, cfg, argc, argv, &pos, &npos)) >= 0)
		goto out;
	code = CTL_EXIT_USAGE;
	if (check != NULL ? !check(cmd, cfg, pos, npos) : !ctl_no_arguments(cmd, pos, npos))
		goto out;
	code = CTL_EXIT_FAIL;
	if ((conn = ctl_connect(cmd, conninfo(cmd, cfg))) == NULL)
		goto out;
	code = body(cmd, conn, cfg, pos, npos);
out:
	if (conn != NULL)
		PQfinish(conn);
	free(pos);
	ob_cfg_free(cmd->table, cfg);
	free(cfg);
	return code;
}

int
ctl_read_end(PGconn *conn, PGresult *res, int rc, const char *side, char *err, size_t errlen)
{
	if (rc == OB_OK)
		return ob_pg_commit(conn, err, errlen) == OB_OK ? OB_OK : OB_EDB;
	if (rc == OB_ENOMEM)
		snprintf(err, errlen, "%s: out of memory", side);
	PQclear(res);
	ob_pg_rollback(conn);
	return rc;
}

PGresult *
ctl_query(const struct ctl_cmd *cmd, PGconn *conn, const char *sql, int n,
    const char *const *params)
{
	char err[1024];
	PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);

	if (ob_pg_check(res, PGRES_TUPLES_OK, cmd->name, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl %s: %s\n", cmd->name, err);
		PQclear(res);
		return NULL;
	}
	return res;
}

int
ctl_dispatch(const char *group, const struct ctl_cmd *const *cmds, size_t n,
    int (*run)(const struct ctl_cmd *cmd, int argc, char **argv), int argc, char **argv)
{
	size_t skip = strlen(group) + 1; /* "GROUP " before each subcommand's name */
	char alts[256] = "", list[256] = "";
	size_t at = 0, lat = 0;

	for (size_t i = 0; i < n; i++) {
		const char *sub = cmds[i]->name + skip;
		if (argc >= 2 && strcmp(argv[1], sub) == 0)
			return run(cmds[i], argc - 1, argv + 1);
		at += (size_t)snprintf(alts + at, at < sizeof alts ? sizeof alts - at : 0, "%s%s",
		    i > 0 ? "|" : "", sub);
		lat += (size_t)snprintf(list + lat, lat < sizeof list ? sizeof list - lat : 0, "%s%s",
		    i == 0 ? "" : i + 1 == n ? " or " : ", ", sub);
	}
	if (argc >= 2 && strcmp(argv[1], "--help-markdown") == 0) {
		for (size_t i = 0; i < n; i++) {
			char *md[] = { (char *)cmds[i]->name + skip, argv[1], NULL };
			if (i > 0)
				fputc('\n', stdout);
			(void)run(cmds[i], 2, md);
		}
		return CTL_EXIT_OK;
	}
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: outboxctl %s %s [options]   (outboxctl %s SUBCOMMAND --help)\n", group,
		    alts, group);
		return CTL_EXIT_OK;
	}
	char shown[CTL_SHOWN_MAX];
	fprintf(stderr, "outboxctl %s: want %s%s%s%s\n", group, list, argc >= 2 ? " (got '" : "",
	    argc >= 2 ? ctl_shown(argv[1], shown, sizeof shown) : "", argc >= 2 ? "')" : "");
	return CTL_EXIT_USAGE;
}

const char *
ctl_shown(const char *s, char *out, size_t outlen)
{
	char redacted[CTL_SHOWN_MAX];

	ob_pg_redact_conninfo(s != NULL ? s : "", redacted, sizeof redacted);
	(void)ob_term_escape(out, outlen, redacted, 0);
	return out;
}

bool
ctl_parse_id(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || !isdigit((unsigned char)s[0]))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 1)
		return false;
	*out = v;
	return true;
}

void
ctl_fmt_age(double s, char *out, size_t outlen)
{
	long long t;
	long long big, small;
	const char *bu, *su;

	if (!(s > 0))
		s = 0;
	if (s < 60) {
		snprintf(out, outlen, "%.1fs", s);
		return;
	}
	t = (long long)s;
	if (t < 3600)
		big = t / 60, small = t % 60, bu = "m", su = "s";
	else if (t < 86400)
		big = t / 3600, small = t % 3600 / 60, bu = "h", su = "m";
	else
		big = t / 86400, small = t % 86400 / 3600, bu = "d", su = "h";
	if (small > 0)
		snprintf(out, outlen, "%lld%s%lld%s", big, bu, small, su);
	else
		snprintf(out, outlen, "%lld%s", big, bu);
}

static bool
is_seconds(const char *name)
{
	size_t n = strlen(name), k = strlen(SECONDS_SUFFIX);
	return n > k && strcmp(name + n - k, SECONDS_SUFFIX) == 0;
}

/* jansson refuses text that is not UTF-8: that one goes escaped. */
json_t *
ctl_json_text(const char *v)
{
	if (v == NULL)
		return json_null();
	json_t *j = json_string(v);
	if (j != NULL)
		return j;
	size_t need = ob_term_escape(NULL, 0, v, 0);
	char *e = malloc(need + 1);
	if (e == NULL)
		return json_null();
	(void)ob_term_escape(e, need + 1, v, 0);
	j = json_string(e);
	free(e);
	return j != NULL ? j : json_null();
}

json_t *
ctl_json_cell(const PGresult *res, int row, int col)
{
	const char *v;

	if (PQgetisnull(res, row, col))
		return json_null();
	v = PQgetvalue(res, row, col);
	switch (PQftype(res, col)) {
	case OID_BOOL:
		return json_boolean(v[0] == 't');
	case OID_INT2:
	case OID_INT4:
	case OID_INT8:
		return json_integer(strtoll(v, NULL, 10));
	case OID_FLOAT4:
	case OID_FLOAT8:
	case OID_NUMERIC: {
		double d = strtod(v, NULL);
		return isfinite(d) ? json_real(d) : json_null();
	}
	case OID_JSON:
	case OID_JSONB: {
		json_t *j = json_loads(v, JSON_DECODE_ANY, NULL);
		return j != NULL ? j : ctl_json_text(v);
	}
	default:
		return ctl_json_text(v);
	}
}

static json_t *
row_object(const PGresult *res, int row)
{
	json_t *o = json_object();

	for (int c = 0; c < PQnfields(res); c++)
		json_object_set_new(o, PQfname(res, c), ctl_json_cell(res, row, c));
	return o;
}

void
ctl_print_json(json_t *j, size_t flags)
{
	json_dumpf(j, stdout, flags);
	fputc('\n', stdout);
	json_decref(j);
}

/* Table text of a cell: "-" for NULL, ages for *_seconds, else the value
 * escaped for the terminal on one line (ob_term_escape: "\x1b", "\n"). */
static void
cell_text(const PGresult *res, int row, int col, char *out, size_t outlen)
{
	if (PQgetisnull(res, row, col)) {
		snprintf(out, outlen, "-");
		return;
	}
	if (is_seconds(PQfname(res, col))) {
		ctl_fmt_age(strtod(PQgetvalue(res, row, col), NULL), out, outlen);
		return;
	}
	(void)ob_term_escape(out, outlen, PQgetvalue(res, row, col), 0);
}

static void
header_text(const char *name, char *out, size_t outlen)
{
	size_t n = strlen(name);

	if (is_seconds(name))
		n -= strlen(SECONDS_SUFFIX);
	if (n >= outlen)
		n = outlen - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)toupper((unsigned char)name[i]);
	out[n] = '\0';
}

static bool
hidden(const char *name, const char *const *hide)
{
	for (size_t i = 0; hide != NULL && hide[i] != NULL; i++)
		if (strcmp(hide[i], name) == 0)
			return true;
	return false;
}

#define CELL_MAX 200 /* table cells are cut here; --json has everything */

void
ctl_print_table(const PGresult *res, bool json, const char *const *hide)
{
	int rows = PQntuples(res), cols = PQnfields(res);
	char cell[CELL_MAX + 1];
	size_t *width;

	if (json) {
		json_t *a = json_array();
		for (int r = 0; r < rows; r++)
			json_array_append_new(a, row_object(res, r));
		ctl_print_json(a, CTL_JSON_FLAGS | JSON_ENCODE_ANY);
		return;
	}
	if ((width = calloc((size_t)cols, sizeof *width)) == NULL)
		return;
	for (int c = 0; c < cols; c++) {
		header_text(PQfname(res, c), cell, sizeof cell);
		width[c] = strlen(cell);
		for (int r = 0; r < rows; r++) {
			cell_text(res, r, c, cell, sizeof cell);
			if (strlen(cell) > width[c])
				width[c] = strlen(cell);
		}
	}
	for (int r = -1; r < rows; r++) {
		bool first = true;
		for (int c = 0; c < cols; c++) {
			if (hidden(PQfname(res, c), hide))
				continue;
			if (r < 0)
				header_text(PQfname(res, c), cell, sizeof cell);
			else
				cell_text(res, r, c, cell, sizeof cell);
			printf("%s%-*s", first ? "" : "  ", c == cols - 1 ? 0 : (int)width[c], cell);
			first = false;
		}
		printf("\n");
	}
	free(width);
}

void
ctl_print_record(const PGresult *res, int row, bool json)
{
	int cols = PQnfields(res);
	size_t w = 0;

	if (json) {
		ctl_print_json(row_object(res, row), CTL_JSON_FLAGS | JSON_ENCODE_ANY);
		return;
	}
	for (int c = 0; c < cols; c++)
		if (strlen(PQfname(res, c)) > w)
			w = strlen(PQfname(res, c));
	for (int c = 0; c < cols; c++) {
		const char *name = PQfname(res, c);
		if (PQgetisnull(res, row, c)) {
			printf("%-*s  -\n", (int)w, name);
		} else if (is_seconds(name)) {
			char age[64];
			ctl_fmt_age(strtod(PQgetvalue(res, row, c), NULL), age, sizeof age);
			printf("%-*s  %s\n", (int)w, name, age);
		} else {
			/* escaped for the terminal; the payload (jsonb_pretty) keeps
			 * its lines, every other field stays on its line */
			const char *raw = PQgetvalue(res, row, c);
			unsigned flags = strcmp(name, PAYLOAD_COLUMN) == 0 ?
			    OB_TERM_MULTILINE | OB_TERM_RAW_BACKSLASH : 0;
			size_t need = ob_term_escape(NULL, 0, raw, flags);
			char *v = malloc(need + 1);
			if (v == NULL) {
				printf("%-*s  (out of memory)\n", (int)w, name);
				continue;
			}
			(void)ob_term_escape(v, need + 1, raw, flags);
			printf("%-*s  ", (int)w, name);
			for (const char *p = v; *p != '\0'; p++) {
				putchar(*p);
				if (*p == '\n')
					printf("%-*s  ", (int)w, "");
			}
			putchar('\n');
			free(v);
		}
	}
}
