/*
 * test_config.c - the config table engine: flags, environment, defaults,
 * bounds and their exact error lines, --help / Markdown output, and
 * conninfo redaction, and ob_cfg_load (the start of every main: what it
 * prints where, and the exit code). Duration and size parsing is
 * table-driven from tests/data/config/.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/config.h"
#include "outbox/err.h"
#include "outbox/pg.h"
#include "testsupport.h"

struct sample {
	char *db;
	int64_t workers;
	bool dry_run;
	int64_t lease_ms;
	int64_t max_payload;
	char *log_format;
	struct ob_cfg_list topics;
	char *password;
	bool color;
};

#define OFF(f) offsetof(struct sample, f)

static const struct ob_cfg_opt table[] = {
	{ "db", "OUTBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true, false,
	    OFF(db), "PostgreSQL conninfo" },
	{ "workers", "OUTBOX_WORKERS", OB_CFG_INT, "4", 1, 64, NULL, false,
	    false, OFF(workers), "worker processes" },
	{ "dry-run", "OUTBOX_DRY_RUN", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    false, OFF(dry_run), "claim but do not deliver" },
	{ "lease-ms", "OUTBOX_LEASE_MS", OB_CFG_DURATION, "30s", 1000, 3600000,
	    NULL, false, false, OFF(lease_ms), "lease length for a claim" },
	{ "max-payload", "OUTBOX_MAX_PAYLOAD", OB_CFG_SIZE, "1MiB", 1,
	    16777216, NULL, false, false, OFF(max_payload),
	    "largest payload | bytes" },
	{ "log-format", "OUTBOX_LOG_FORMAT", OB_CFG_ENUM, "text", 0, 0,
	    "text|json", false, false, OFF(log_format), "log line format" },
	{ "topic", "OUTBOX_TOPICS", OB_CFG_LIST, NULL, 0, 0, NULL, false, false,
	    OFF(topics), "topics to relay" },
	{ "password", "OUTBOX_PASSWORD", OB_CFG_STRING, "hunter2", 0, 0, NULL,
	    false, true, OFF(password), "bus password" },
	{ "color", NULL, OB_CFG_BOOL, "true", 0, 0, NULL, false, false,
	    OFF(color), "colour output" },
	OB_CFG_END
};

static const char *const envs[] = { "OUTBOX_DB", "OUTBOX_WORKERS",
	"OUTBOX_DRY_RUN", "OUTBOX_LEASE_MS", "OUTBOX_MAX_PAYLOAD",
	"OUTBOX_LOG_FORMAT", "OUTBOX_TOPICS", "OUTBOX_PASSWORD" };

static struct sample cfg;
static char err[256];
static int first;
static bool help;

static void
setup(void)
{
	for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++)
		unsetenv(envs[i]);
	memset(&cfg, 0, sizeof cfg);
	err[0] = '\0';
	first = -1;
	help = false;
}

static void
teardown(void)
{
	ob_cfg_free(table, &cfg);
}

static int
count_args(const char **argv)
{
	int n = 0;
	while (argv[n] != NULL)
		n++;
	return n;
}

static int
parse_with(const struct ob_cfg_opt *t, void *c, const char **argv)
{
	return ob_cfg_parse(t, c, count_args(argv), (char **)argv, &first,
	    &help, err, sizeof err);
}

/* Parse into cfg again, releasing what the previous parse left. */
static int
parse_cfg(const char **argv)
{
	ob_cfg_free(table, &cfg);
	return parse_with(table, &cfg, argv);
}

/* PARSE(...) parses "prog" followed by the given arguments into cfg. */
#define PARSE(...) parse_cfg((const char *[]){ "prog", __VA_ARGS__, NULL })
#define PARSE0() parse_cfg((const char *[]){ "prog", NULL })

static bool
starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

#define ck_fails_with(rv, msg)                                          \
	do {                                                            \
		ck_assert_int_eq((rv), OB_EINVAL);                      \
		ck_assert_str_eq(err, (msg));                           \
	} while (0)

START_TEST(test_defaults)
{
	ck_assert_int_eq(PARSE("--db", "host=x"), OB_OK);
	ck_assert_str_eq(cfg.db, "host=x");
	ck_assert_int_eq(cfg.workers, 4);
	ck_assert(!cfg.dry_run);
	ck_assert_int_eq(cfg.lease_ms, 30000);
	ck_assert_int_eq(cfg.max_payload, 1048576);
	ck_assert_str_eq(cfg.log_format, "text");
	ck_assert_uint_eq(cfg.topics.n, 0);
	ck_assert_ptr_null(cfg.topics.items);
	ck_assert_str_eq(cfg.password, "hunter2");
	ck_assert(cfg.color);
	ck_assert(!help);
	ck_assert_int_eq(first, 3);
	ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_good_values)
{
	ck_assert_int_eq(PARSE("--db", "host=a", "--workers", "64",
	    "--dry-run", "--lease-ms", "1h", "--max-payload", "16m",
	    "--log-format", "json", "--topic", "orders", "--password", "pw",
	    "--no-color"), OB_OK);
	ck_assert_str_eq(cfg.db, "host=a");
	ck_assert_int_eq(cfg.workers, 64);
	ck_assert(cfg.dry_run);
	ck_assert_int_eq(cfg.lease_ms, 3600000);
	ck_assert_int_eq(cfg.max_payload, 16777216);
	ck_assert_str_eq(cfg.log_format, "json");
	ck_assert_uint_eq(cfg.topics.n, 1);
	ck_assert_str_eq(cfg.topics.items[0], "orders");
	ck_assert_str_eq(cfg.password, "pw");
	ck_assert(!cfg.color);
	ck_assert_int_eq(first, 17); /* == argc */
}
END_TEST

START_TEST(test_equals_form)
{
	ck_assert_int_eq(PARSE("--db=host=a port=5", "--workers=1",
	    "--lease-ms=1000", "--max-payload=1", "--log-format=json",
	    "--topic=a=b"), OB_OK);
	ck_assert_str_eq(cfg.db, "host=a port=5"); /* split at the first '=' */
	ck_assert_int_eq(cfg.workers, 1);
	ck_assert_int_eq(cfg.lease_ms, 1000);
	ck_assert_int_eq(cfg.max_payload, 1);
	ck_assert_str_eq(cfg.log_format, "json");
	ck_assert_str_eq(cfg.topics.items[0], "a=b");
	ck_assert_int_eq(first, 7);
}
END_TEST

START_TEST(test_empty_string_value)
{
	ck_assert_int_eq(PARSE("--db="), OB_OK);
	ck_assert_str_eq(cfg.db, "");
}
END_TEST

START_TEST(test_repeated_flag_last_wins)
{
	ck_assert_int_eq(PARSE("--db=a", "--db=b", "--workers=2",
	    "--workers=3", "--log-format=json", "--log-format=text"), OB_OK);
	ck_assert_str_eq(cfg.db, "b");
	ck_assert_int_eq(cfg.workers, 3);
	ck_assert_str_eq(cfg.log_format, "text");
}
END_TEST

START_TEST(test_bool_forms)
{
	static const struct {
		const char *arg;
		bool dry_run, color;
	} cases[] = {
		{ "--dry-run", true, true },
		{ "--dry-run=true", true, true },
		{ "--dry-run=1", true, true },
		{ "--dry-run=YES", true, true },
		{ "--dry-run=on", true, true },
		{ "--dry-run=false", false, true },
		{ "--dry-run=0", false, true },
		{ "--dry-run=no", false, true },
		{ "--dry-run=Off", false, true },
		{ "--no-dry-run", false, true },
		{ "--no-color", false, false },
		{ "--color=false", false, false },
		{ "--color", false, true },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_int_eq(PARSE("--db=x", cases[i].arg), OB_OK);
		ck_assert_msg(cfg.dry_run == cases[i].dry_run &&
		    cfg.color == cases[i].color, "case %s", cases[i].arg);
		ob_cfg_free(table, &cfg);
	}
	/* a bare bool never eats the next argument */
	ck_assert_int_eq(PARSE("--db=x", "--dry-run", "false"), OB_OK);
	ck_assert(cfg.dry_run);
	ck_assert_int_eq(first, 3);
}
END_TEST

START_TEST(test_bool_bad)
{
	ck_fails_with(PARSE("--db=x", "--dry-run=maybe"),
	    "--dry-run: 'maybe' is not a boolean (true|false)");
	ck_fails_with(PARSE("--db=x", "--dry-run="),
	    "--dry-run: '' is not a boolean (true|false)");
	ck_fails_with(PARSE("--db=x", "--no-color=1"),
	    "--no-color takes no value");
	setenv("OUTBOX_DRY_RUN", "2", 1);
	ck_fails_with(PARSE("--db=x"),
	    "OUTBOX_DRY_RUN=2: not a boolean (true|false)");
	setenv("OUTBOX_DRY_RUN", "yes", 1);
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert(cfg.dry_run);
}
END_TEST

START_TEST(test_unknown_option)
{
	ck_fails_with(PARSE("--db=x", "--bogus"),
	    "unknown option --bogus (see --help)");
	ck_fails_with(PARSE("--bogus=1"), "unknown option --bogus (see --help)");
	/* --no- only negates booleans */
	ck_fails_with(PARSE("--no-db"), "unknown option --no-db (see --help)");
	ck_fails_with(PARSE("--no-bogus"),
	    "unknown option --no-bogus (see --help)");
	/* names match whole, never by prefix */
	ck_fails_with(PARSE("--work=2"), "unknown option --work (see --help)");
}
END_TEST

START_TEST(test_missing_value)
{
	ck_fails_with(PARSE("--db=x", "--workers"), "--workers: missing value");
	ck_fails_with(PARSE("--db", "--workers", "3"), "--db: missing value");
	ck_fails_with(PARSE("--topic"), "--topic: missing value");
	/* the = form takes anything */
	ck_assert_int_eq(PARSE("--db=--x"), OB_OK);
	ck_assert_str_eq(cfg.db, "--x");
}
END_TEST

START_TEST(test_int_values)
{
	ck_assert_int_eq(PARSE("--db=x", "--workers=1"), OB_OK);
	ck_assert_int_eq(cfg.workers, 1);
	ck_assert_int_eq(PARSE("--db=x", "--workers=+7"), OB_OK);
	ck_assert_int_eq(cfg.workers, 7);
	ck_fails_with(PARSE("--db=x", "--workers=abc"),
	    "--workers: 'abc' is not an integer");
	ck_fails_with(PARSE("--db=x", "--workers=4x"),
	    "--workers: '4x' is not an integer");
	ck_fails_with(PARSE("--db=x", "--workers= 4"),
	    "--workers: ' 4' is not an integer");
	ck_fails_with(PARSE("--db=x", "--workers=4 "),
	    "--workers: '4 ' is not an integer");
	ck_fails_with(PARSE("--db=x", "--workers="),
	    "--workers: '' is not an integer");
	ck_fails_with(PARSE("--db=x", "--workers=-"),
	    "--workers: '-' is not an integer");
	ck_fails_with(PARSE("--db=x", "--workers=0x10"),
	    "--workers: '0x10' is not an integer");
	ck_fails_with(PARSE("--db=x", "--workers=99999999999999999999"),
	    "--workers: '99999999999999999999' is out of range");
	ck_fails_with(PARSE("--db=x", "--workers=-99999999999999999999"),
	    "--workers: '-99999999999999999999' is out of range");
}
END_TEST

START_TEST(test_int_bounds)
{
	ck_assert_int_eq(PARSE("--db=x", "--workers=64"), OB_OK);
	ck_assert_int_eq(cfg.workers, 64);
	ck_fails_with(PARSE("--db=x", "--workers=0"),
	    "--workers: 0 is below the minimum 1");
	ck_fails_with(PARSE("--db=x", "--workers=-3"),
	    "--workers: -3 is below the minimum 1");
	ck_fails_with(PARSE("--db=x", "--workers", "65"),
	    "--workers: 65 is above the maximum 64");
	setenv("OUTBOX_WORKERS", "0", 1);
	ck_fails_with(PARSE("--db=x"), "OUTBOX_WORKERS=0: below the minimum 1");
	setenv("OUTBOX_WORKERS", "abc", 1);
	ck_fails_with(PARSE("--db=x"), "OUTBOX_WORKERS=abc: not an integer");
}
END_TEST

START_TEST(test_unbounded_int)
{
	struct {
		int64_t n;
	} c;
	static const struct ob_cfg_opt t[] = {
		{ "n", NULL, OB_CFG_INT, NULL, 0, 0, NULL, false, false, 0,
		    "no bounds" },
		OB_CFG_END
	};
	const char *argv[] = { "prog", "--n=-9223372036854775808", NULL };

	ck_assert_int_eq(parse_with(t, &c, argv), OB_OK);
	ck_assert(c.n == INT64_MIN);
	argv[1] = "--n=9223372036854775807";
	ck_assert_int_eq(parse_with(t, &c, argv), OB_OK);
	ck_assert(c.n == INT64_MAX);
}
END_TEST

START_TEST(test_duration_bounds)
{
	ck_assert_int_eq(PARSE("--db=x", "--lease-ms=1s"), OB_OK);
	ck_assert_int_eq(cfg.lease_ms, 1000);
	ck_fails_with(PARSE("--db=x", "--lease-ms", "100"),
	    "--lease-ms: 100 is below the minimum 1000");
	ck_fails_with(PARSE("--db=x", "--lease-ms=2h"),
	    "--lease-ms: 2h is above the maximum 3600000");
	ck_fails_with(PARSE("--db=x", "--lease-ms=5x"),
	    "--lease-ms: '5x' is not a duration (250ms, 5s, 2m, 24h, 7d)");
	ck_fails_with(PARSE("--db=x", "--lease-ms=999999999999999d"),
	    "--lease-ms: '999999999999999d' is out of range");
	setenv("OUTBOX_LEASE_MS", "500ms", 1);
	ck_fails_with(PARSE("--db=x"),
	    "OUTBOX_LEASE_MS=500ms: below the minimum 1000");
	setenv("OUTBOX_LEASE_MS", "2m", 1);
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert_int_eq(cfg.lease_ms, 120000);
}
END_TEST

START_TEST(test_size_bounds)
{
	ck_assert_int_eq(PARSE("--db=x", "--max-payload=64k"), OB_OK);
	ck_assert_int_eq(cfg.max_payload, 65536);
	ck_fails_with(PARSE("--db=x", "--max-payload=32m"),
	    "--max-payload: 32m is above the maximum 16777216");
	ck_fails_with(PARSE("--db=x", "--max-payload=0"),
	    "--max-payload: 0 is below the minimum 1");
	ck_fails_with(PARSE("--db=x", "--max-payload=1t"),
	    "--max-payload: '1t' is not a size (512, 64k, 1m, 2g)");
	setenv("OUTBOX_MAX_PAYLOAD", "99999999999g", 1);
	ck_fails_with(PARSE("--db=x"), "OUTBOX_MAX_PAYLOAD=99999999999g: "
	    "out of range");
}
END_TEST

START_TEST(test_enum)
{
	ck_assert_int_eq(PARSE("--db=x", "--log-format", "json"), OB_OK);
	ck_assert_str_eq(cfg.log_format, "json");
	ck_fails_with(PARSE("--db=x", "--log-format=xml"),
	    "--log-format: 'xml' is not one of text|json");
	ck_fails_with(PARSE("--db=x", "--log-format=JSON"),
	    "--log-format: 'JSON' is not one of text|json");
	ck_fails_with(PARSE("--db=x", "--log-format=tex"),
	    "--log-format: 'tex' is not one of text|json");
	ck_fails_with(PARSE("--db=x", "--log-format=text|json"),
	    "--log-format: 'text|json' is not one of text|json");
	ck_fails_with(PARSE("--db=x", "--log-format="),
	    "--log-format: '' is not one of text|json");
	setenv("OUTBOX_LOG_FORMAT", "xml", 1);
	ck_fails_with(PARSE("--db=x"), "OUTBOX_LOG_FORMAT=xml: not one of "
	    "text|json");
	setenv("OUTBOX_LOG_FORMAT", "json", 1);
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert_str_eq(cfg.log_format, "json");
}
END_TEST

START_TEST(test_precedence)
{
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert_int_eq(cfg.workers, 4); /* default */
	ob_cfg_free(table, &cfg);

	setenv("OUTBOX_WORKERS", "8", 1);
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert_int_eq(cfg.workers, 8); /* env beats default */
	ob_cfg_free(table, &cfg);

	ck_assert_int_eq(PARSE("--db=x", "--workers=2"), OB_OK);
	ck_assert_int_eq(cfg.workers, 2); /* flag beats env */
	ob_cfg_free(table, &cfg);

	/* a flag wins without the variable even being parsed */
	setenv("OUTBOX_WORKERS", "abc", 1);
	ck_assert_int_eq(PARSE("--db=x", "--workers=2"), OB_OK);
	ck_assert_int_eq(cfg.workers, 2);
	ob_cfg_free(table, &cfg);

	/* an empty variable counts as unset */
	setenv("OUTBOX_WORKERS", "", 1);
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert_int_eq(cfg.workers, 4);
	ob_cfg_free(table, &cfg);

	setenv("OUTBOX_DB", "host=env", 1);
	setenv("OUTBOX_PASSWORD", "envpw", 1);
	ck_assert_int_eq(PARSE0(), OB_OK);
	ck_assert_str_eq(cfg.db, "host=env");
	ck_assert_str_eq(cfg.password, "envpw");
	ck_assert_int_eq(first, 1);
	ob_cfg_free(table, &cfg);

	ck_assert_int_eq(PARSE("--db", "host=flag"), OB_OK);
	ck_assert_str_eq(cfg.db, "host=flag");
}
END_TEST

START_TEST(test_list_flags)
{
	setenv("OUTBOX_TOPICS", "x,y", 1);
	ck_assert_int_eq(PARSE("--db=x", "--topic", "a", "--topic=b",
	    "--topic", " c d "), OB_OK);
	/* any flag replaces the environment; flags are not split or trimmed */
	ck_assert_uint_eq(cfg.topics.n, 3);
	ck_assert_str_eq(cfg.topics.items[0], "a");
	ck_assert_str_eq(cfg.topics.items[1], "b");
	ck_assert_str_eq(cfg.topics.items[2], " c d ");
	ob_cfg_free(table, &cfg);
	ck_fails_with(PARSE("--db=x", "--topic="),
	    "--topic: '' is an empty list item");
}
END_TEST

START_TEST(test_list_env)
{
	setenv("OUTBOX_TOPICS", " x , y,z ", 1);
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert_uint_eq(cfg.topics.n, 3);
	ck_assert_str_eq(cfg.topics.items[0], "x");
	ck_assert_str_eq(cfg.topics.items[1], "y");
	ck_assert_str_eq(cfg.topics.items[2], "z");
	ob_cfg_free(table, &cfg);

	setenv("OUTBOX_TOPICS", "single", 1);
	ck_assert_int_eq(PARSE("--db=x"), OB_OK);
	ck_assert_uint_eq(cfg.topics.n, 1);
	ck_assert_str_eq(cfg.topics.items[0], "single");

	setenv("OUTBOX_TOPICS", "x,,y", 1);
	ck_fails_with(PARSE("--db=x"),
	    "OUTBOX_TOPICS=x,,y: a list with an empty item");
	setenv("OUTBOX_TOPICS", "x,", 1);
	ck_fails_with(PARSE("--db=x"),
	    "OUTBOX_TOPICS=x,: a list with an empty item");
	setenv("OUTBOX_TOPICS", " , ", 1);
	ck_fails_with(PARSE("--db=x"),
	    "OUTBOX_TOPICS= , : a list with an empty item");
}
END_TEST

START_TEST(test_list_default)
{
	struct {
		struct ob_cfg_list l;
	} c;
	static const struct ob_cfg_opt t[] = {
		{ "peer", NULL, OB_CFG_LIST, "a, b", 0, 0, NULL, false, false,
		    0, "peers" },
		OB_CFG_END
	};
	const char *argv[] = { "prog", NULL };

	ck_assert_int_eq(parse_with(t, &c, argv), OB_OK);
	ck_assert_uint_eq(c.l.n, 2);
	ck_assert_str_eq(c.l.items[0], "a");
	ck_assert_str_eq(c.l.items[1], "b");
	ob_cfg_free(t, &c);
	ck_assert_ptr_null(c.l.items);
	ck_assert_uint_eq(c.l.n, 0);
}
END_TEST

START_TEST(test_required)
{
	struct {
		char *name;
	} c;
	static const struct ob_cfg_opt t[] = {
		{ "name", NULL, OB_CFG_STRING, NULL, 0, 0, NULL, true, false, 0,
		    "a name" },
		OB_CFG_END
	};
	const char *argv[] = { "prog", NULL };

	ck_fails_with(PARSE0(), "--db is required (or set OUTBOX_DB)");
	ck_fails_with(PARSE("--workers=2"), "--db is required (or set OUTBOX_DB)");
	/* an empty variable does not satisfy it either */
	setenv("OUTBOX_DB", "", 1);
	ck_fails_with(PARSE0(), "--db is required (or set OUTBOX_DB)");
	setenv("OUTBOX_DB", "host=x", 1);
	ck_assert_int_eq(PARSE0(), OB_OK);
	ck_assert_str_eq(cfg.db, "host=x");

	ck_fails_with(parse_with(t, &c, argv), "--name is required");
	ob_cfg_free(t, &c);
}
END_TEST

START_TEST(test_help)
{
	/* help wins over missing required options */
	ck_assert_int_eq(PARSE("--help"), OB_OK);
	ck_assert(help);
	ob_cfg_free(table, &cfg);

	help = false;
	ck_assert_int_eq(PARSE("-h"), OB_OK);
	ck_assert(help);
	ob_cfg_free(table, &cfg);

	help = false;
	ck_assert_int_eq(PARSE("--workers=2", "--help", "--bogus"), OB_OK);
	ck_assert(help);
	ob_cfg_free(table, &cfg);

	/* after the first argument it is just an argument */
	help = true;
	ck_assert_int_eq(PARSE("--db=x", "file", "--help"), OB_OK);
	ck_assert(!help);
	ck_assert_int_eq(first, 2);
	ob_cfg_free(table, &cfg);

	help = true;
	ck_assert_int_eq(PARSE("--db=x", "--", "-h"), OB_OK);
	ck_assert(!help);
	ck_assert_int_eq(first, 3);
}
END_TEST

START_TEST(test_first_arg)
{
	ck_assert_int_eq(PARSE("--db", "x", "file", "--workers=9"), OB_OK);
	ck_assert_int_eq(first, 3);
	ck_assert_int_eq(cfg.workers, 4); /* after the stop: not parsed */
	ob_cfg_free(table, &cfg);

	ck_assert_int_eq(PARSE("--db=x", "--", "--workers=9"), OB_OK);
	ck_assert_int_eq(first, 3);
	ck_assert_int_eq(cfg.workers, 4);
	ob_cfg_free(table, &cfg);

	ck_assert_int_eq(PARSE("--db=x", "-"), OB_OK);
	ck_assert_int_eq(first, 2);
	ob_cfg_free(table, &cfg);

	ck_assert_int_eq(PARSE("--db=x", "--"), OB_OK);
	ck_assert_int_eq(first, 3); /* == argc */
	ob_cfg_free(table, &cfg);

	ck_assert_int_eq(PARSE("--db=x", "--workers=5"), OB_OK);
	ck_assert_int_eq(first, 3); /* == argc */
	ck_assert_int_eq(cfg.workers, 5);
}
END_TEST

START_TEST(test_bad_default)
{
	struct {
		int64_t d;
		int64_t n;
		char *e;
	} c;
	static const struct ob_cfg_opt bad_dur[] = {
		{ "lease", NULL, OB_CFG_DURATION, "30x", 0, 0, NULL, false,
		    false, 0, "bad" },
		OB_CFG_END
	};
	static const struct ob_cfg_opt bad_int[] = {
		{ "n", "T_N", OB_CFG_INT, "0", 1, 10, NULL, false, false,
		    sizeof(int64_t), "bad" },
		OB_CFG_END
	};
	static const struct ob_cfg_opt bad_enum[] = {
		{ "e", NULL, OB_CFG_ENUM, "xml", 0, 0, "text|json", false,
		    false, 2 * sizeof(int64_t), "bad" },
		OB_CFG_END
	};
	const char *argv[] = { "prog", NULL };

	unsetenv("T_N");
	ck_fails_with(parse_with(bad_dur, &c, argv), "--lease: bad default "
	    "'30x': not a duration (250ms, 5s, 2m, 24h, 7d)");
	ck_fails_with(parse_with(bad_int, &c, argv),
	    "--n: bad default '0': below the minimum 1");
	ck_fails_with(parse_with(bad_enum, &c, argv),
	    "--e: bad default 'xml': not one of text|json");
	ob_cfg_free(bad_enum, &c);
	/* a flag or variable avoids the default entirely */
	setenv("T_N", "3", 1);
	ck_assert_int_eq(parse_with(bad_int, &c, argv), OB_OK);
	ck_assert_int_eq(c.n, 3);
	unsetenv("T_N");
}
END_TEST

START_TEST(test_init_and_free)
{
	/* garbage in, parse fails before reading anything: still safe to free */
	memset(&cfg, 0xa5, sizeof cfg);
	ck_assert_int_eq(parse_with(table, &cfg,
	    (const char *[]){ "prog", "--bogus", NULL }), OB_EINVAL);
	ck_assert_ptr_null(cfg.db);
	ck_assert_ptr_null(cfg.log_format);
	ck_assert_ptr_null(cfg.password);
	ck_assert_ptr_null(cfg.topics.items);
	ck_assert_uint_eq(cfg.topics.n, 0);
	ck_assert_int_eq(cfg.workers, 0);
	ck_assert(!cfg.dry_run);
	ob_cfg_free(table, &cfg);

	/* failing half way leaves owned fields for ob_cfg_free */
	ck_assert_int_eq(PARSE("--db=x", "--topic=a", "--workers=0"),
	    OB_EINVAL);
	ck_assert_str_eq(cfg.db, "x");
	ob_cfg_free(table, &cfg);
	ck_assert_ptr_null(cfg.db);
	ck_assert_ptr_null(cfg.topics.items);

	ck_assert_int_eq(PARSE("--db=x", "--topic=a", "--topic=b"), OB_OK);
	ob_cfg_free(table, &cfg);
	ck_assert_ptr_null(cfg.db);
	ck_assert_ptr_null(cfg.log_format);
	ck_assert_ptr_null(cfg.password);
	ck_assert_ptr_null(cfg.topics.items);
	ck_assert_uint_eq(cfg.topics.n, 0);
	ob_cfg_free(table, &cfg); /* twice is harmless */
}
END_TEST

START_TEST(test_out_params_on_error)
{
	first = -7;
	help = true;
	ck_assert_int_eq(PARSE("--workers=0", "file"), OB_EINVAL);
	ck_assert_int_eq(first, -7);
	ck_assert(help);
}
END_TEST

/* Table-driven cases: "<text> <number|error|overflow>" per line. */
struct tcase {
	char text[64];
	char want[64];
};

static size_t
load_cases(const char *file, struct tcase *cases, size_t max)
{
	const char *dir = getenv("OUTBOX_TEST_DATA");
	char path[1024], line[256];
	size_t n = 0;
	FILE *f;

	ck_assert_msg(dir != NULL, "OUTBOX_TEST_DATA is not set");
	snprintf(path, sizeof path, "%s/config/%s", dir, file);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	while (fgets(line, sizeof line, f) != NULL) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		ck_assert_uint_lt(n, max);
		ck_assert_msg(sscanf(line, "%63s %63s", cases[n].text,
		    cases[n].want) == 2, "bad line in %s: %s", file, line);
		if (strcmp(cases[n].text, "''") == 0)
			cases[n].text[0] = '\0';
		n++;
	}
	fclose(f);
	return n;
}

START_TEST(test_durations_table)
{
	struct tcase cases[128];
	size_t n = load_cases("durations.txt", cases, 128);
	struct {
		int64_t ms;
	} c;
	static const struct ob_cfg_opt t[] = {
		{ "d", NULL, OB_CFG_DURATION, NULL, 0, 0, NULL, false, false, 0,
		    "unbounded" },
		OB_CFG_END
	};

	ck_assert_uint_ge(n, 20);
	for (size_t i = 0; i < n; i++) {
		const char *s = cases[i].text, *want = cases[i].want;
		char arg[128];
		const char *argv[] = { "prog", arg, NULL };
		int64_t ms = -42;
		int rv = ob_cfg_parse_duration(s, &ms);

		snprintf(arg, sizeof arg, "--d=%s", s);
		if (strcmp(want, "error") == 0 || strcmp(want, "overflow") == 0) {
			char msg[128];
			snprintf(msg, sizeof msg, "--d: '%s' is %s", s,
			    want[0] == 'e' ? "not a duration (250ms, 5s, 2m, "
			    "24h, 7d)" : "out of range");
			ck_assert_msg(rv == OB_EINVAL, "'%s' parsed", s);
			ck_assert_msg(ms == -42, "'%s' wrote *ms", s);
			ck_assert_int_eq(parse_with(t, &c, argv), OB_EINVAL);
			ck_assert_str_eq(err, msg);
		} else {
			int64_t v = strtoll(want, NULL, 10);
			ck_assert_msg(rv == OB_OK, "'%s' rejected", s);
			ck_assert_msg(ms == v, "'%s' -> %" PRId64 ", want %s",
			    s, ms, want);
			ck_assert_int_eq(parse_with(t, &c, argv), OB_OK);
			ck_assert(c.ms == v);
		}
	}
	ck_assert_int_eq(ob_cfg_parse_duration(NULL, &c.ms), OB_EINVAL);
}
END_TEST

START_TEST(test_sizes_table)
{
	struct tcase cases[128];
	size_t n = load_cases("sizes.txt", cases, 128);
	struct {
		int64_t bytes;
	} c;
	static const struct ob_cfg_opt t[] = {
		{ "s", NULL, OB_CFG_SIZE, NULL, 0, 0, NULL, false, false, 0,
		    "unbounded" },
		OB_CFG_END
	};

	ck_assert_uint_ge(n, 20);
	for (size_t i = 0; i < n; i++) {
		const char *s = cases[i].text, *want = cases[i].want;
		char arg[128];
		const char *argv[] = { "prog", arg, NULL };
		int rv;

		snprintf(arg, sizeof arg, "--s=%s", s);
		rv = parse_with(t, &c, argv);
		if (strcmp(want, "error") == 0 || strcmp(want, "overflow") == 0) {
			char msg[128];
			snprintf(msg, sizeof msg, "--s: '%s' is %s", s,
			    want[0] == 'e' ? "not a size (512, 64k, 1m, 2g)" :
			    "out of range");
			ck_assert_msg(rv == OB_EINVAL, "'%s' parsed", s);
			ck_assert_str_eq(err, msg);
		} else {
			ck_assert_msg(rv == OB_OK, "'%s' rejected: %s", s, err);
			ck_assert_msg(c.bytes == strtoll(want, NULL, 10),
			    "'%s' -> %" PRId64 ", want %s", s, c.bytes, want);
		}
	}
}
END_TEST

/* Run an output function into a string; returns owned text. */
static char *
capture_usage(bool markdown)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	if (markdown)
		ob_cfg_markdown(f, "outbox-relay", table);
	else
		ob_cfg_usage(f, "outbox-relay [options]", "Relays the outbox.",
		    table);
	fclose(f);
	return text;
}

START_TEST(test_usage)
{
	char *u = capture_usage(false);

	ck_assert_msg(starts_with(u, "usage: outbox-relay [options]\n\n"
	    "Relays the outbox.\n\noptions:\n  --db "), "head: %s", u);
	ck_assert_ptr_nonnull(strstr(u,
	    "  --lease-ms DURATION     [OUTBOX_LEASE_MS] default 30s, "
	    "1000..3600000\n      lease length for a claim\n"));
	ck_assert_ptr_nonnull(strstr(u,
	    "  --db VALUE              [OUTBOX_DB] required\n"
	    "      PostgreSQL conninfo\n"));
	ck_assert_ptr_nonnull(strstr(u, "  --workers N "));
	ck_assert_ptr_nonnull(strstr(u, "[OUTBOX_WORKERS] default 4, 1..64\n"));
	ck_assert_ptr_nonnull(strstr(u, "  --dry-run               "
	    "[OUTBOX_DRY_RUN] default false\n"));
	ck_assert_ptr_nonnull(strstr(u, "  --max-payload SIZE "));
	ck_assert_ptr_nonnull(strstr(u, "default 1MiB, 1..16777216\n"));
	ck_assert_ptr_nonnull(strstr(u, "  --log-format text|json "));
	ck_assert_ptr_nonnull(strstr(u, "  --topic VALUE... "));
	ck_assert_ptr_nonnull(strstr(u, "[OUTBOX_TOPICS] repeatable"));
	ck_assert_ptr_nonnull(strstr(u, "[OUTBOX_PASSWORD] secret\n"));
	ck_assert_ptr_nonnull(strstr(u, "  --color                 default true\n"));
	ck_assert_ptr_null(strstr(u, "hunter2"));
	free(u);
}
END_TEST

START_TEST(test_markdown)
{
	char *m = capture_usage(true);

	ck_assert_msg(starts_with(m, "### outbox-relay\n\n"
	    "| flag | env | type | default | bounds | description |\n"
	    "|---|---|---|---|---|---|\n| `--db` |"), "head: %s", m);
	ck_assert_ptr_nonnull(strstr(m, "| `--lease-ms` | `OUTBOX_LEASE_MS` | "
	    "duration | `30s` | 1000..3600000 | lease length for a claim |\n"));
	ck_assert_ptr_nonnull(strstr(m, "| `--db` | `OUTBOX_DB` | string | "
	    "required |  | PostgreSQL conninfo |\n"));
	ck_assert_ptr_nonnull(strstr(m, "| `--log-format` | `OUTBOX_LOG_FORMAT` "
	    "| enum | `text` | text\\|json | log line format |\n"));
	ck_assert_ptr_nonnull(strstr(m, "| largest payload \\| bytes |\n"));
	ck_assert_ptr_nonnull(strstr(m, "| `--password` | `OUTBOX_PASSWORD` | "
	    "string | (secret) |  | bus password |\n"));
	ck_assert_ptr_nonnull(strstr(m, "| `--color` |  | bool | `true` |"));
	ck_assert_ptr_null(strstr(m, "hunter2"));
	/* one row per option */
	size_t rows = 0;
	for (const char *p = m; (p = strstr(p, "\n| `--")) != NULL; p++)
		rows++;
	ck_assert_uint_eq(rows, sizeof table / sizeof table[0] - 1);
	free(m);
}
END_TEST

START_TEST(test_redact)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "host=db user=app password=s3cret dbname=outbox",
		    "host=db user=app password=*** dbname=outbox" },
		{ "password='it\\'s s3cret' host=db", "password=*** host=db" },
		{ "host=db password = s3cret", "host=db password = ***" },
		{ "host=db password=s3\\ cret port=5",
		    "host=db password=*** port=5" },
		{ "password=", "password=***" },
		{ "mypassword=x password_file=y", "mypassword=x password_file=y" },
		{ "postgresql://app:s3cret@db:5432/outbox",
		    "postgresql://app:***@db:5432/outbox" },
		{ "postgres://app:s3cret@db", "postgres://app:***@db" },
		{ "postgresql://app:s3c@ret@db/x", "postgresql://app:***@db/x" },
		{ "postgres://app@db/outbox?password=s3cret&sslmode=require",
		    "postgres://app@db/outbox?password=***&sslmode=require" },
		{ "postgresql://db/outbox?sslmode=require&password=s3cret",
		    "postgresql://db/outbox?sslmode=require&password=***" },
		{ "postgresql://db/x?mypassword=1#password=2",
		    "postgresql://db/x?mypassword=1#password=2" },
		{ "postgresql://app@db/outbox", "postgresql://app@db/outbox" },
		{ "host=db dbname=outbox", "host=db dbname=outbox" },
		{ "", "" },
	};
	char out[128];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memset(out, 'Z', sizeof out);
		ob_pg_redact_conninfo(cases[i].in, out, sizeof out);
		ck_assert_str_eq(out, cases[i].out);
		ck_assert_ptr_null(strstr(out, "s3c"));
	}
}
END_TEST

START_TEST(test_redact_truncates)
{
	char out[32];

	memset(out, 'Z', sizeof out);
	ob_pg_redact_conninfo("host=db password=s3cret", out, 10);
	ck_assert_str_eq(out, "host=db p");
	ck_assert_int_eq(out[10], 'Z'); /* nothing past outlen */

	ob_pg_redact_conninfo("postgresql://a:s3cret@h", out, 18);
	ck_assert_str_eq(out, "postgresql://a:**");

	ob_pg_redact_conninfo("host=db", out, 1);
	ck_assert_str_eq(out, "");

	out[0] = 'Z';
	ob_pg_redact_conninfo("host=db", out, 0);
	ck_assert_int_eq(out[0], 'Z');
}
END_TEST

/* ob_cfg_load on "prog" + argv with stdout and stderr captured into owned
 * strings *out and *errout (never NULL). */
static char *
slurp(FILE *f)
{
	long len;
	char *text;

	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	ck_assert_int_ge(len, 0);
	rewind(f);
	text = calloc((size_t)len + 1, 1);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	return text;
}

static int
load_captured(const struct ob_cfg_program *p, const char **argv, char **out,
    char **errout)
{
	FILE *fo = tmpfile(), *fe = tmpfile();
	int so, se, code;

	ck_assert_ptr_nonnull(fo);
	ck_assert_ptr_nonnull(fe);
	fflush(stdout);
	fflush(stderr);
	so = dup(STDOUT_FILENO);
	se = dup(STDERR_FILENO);
	ck_assert_int_ge(so, 0);
	ck_assert_int_ge(se, 0);
	dup2(fileno(fo), STDOUT_FILENO);
	dup2(fileno(fe), STDERR_FILENO);
	code = ob_cfg_load(p, &cfg, count_args(argv), (char **)argv, &first);
	fflush(stdout);
	fflush(stderr);
	dup2(so, STDOUT_FILENO);
	dup2(se, STDERR_FILENO);
	close(so);
	close(se);
	*out = slurp(fo);
	*errout = slurp(fe);
	return code;
}

static const struct ob_cfg_program prog = {
	.name = "prog sub",
	.synopsis = "prog sub --db CONNINFO [options]",
	.description = "Does one thing.",
	.options = table,
};

/* LOAD(p, ...) releases cfg, then loads "prog" + the arguments into it. */
#define LOAD(p, ...) (ob_cfg_free(table, &cfg), load_captured((p),       \
	(const char *[]){ "prog", __VA_ARGS__, NULL }, &out, &errout))

/* The ownership rule: after an exit code cfg holds nothing. */
static void
ck_cfg_empty(void)
{
	ck_assert_ptr_null(cfg.db);
	ck_assert_ptr_null(cfg.log_format);
	ck_assert_ptr_null(cfg.password);
	ck_assert_ptr_null(cfg.topics.items);
}

START_TEST(test_load_help)
{
	char *out, *errout;

	/* required --db unset: --help still works */
	ck_assert_int_eq(LOAD(&prog, "--topic", "a", "--help"), 0);
	ck_assert_msg(starts_with(out, "usage: prog sub --db CONNINFO [options]\n\n"
	    "Does one thing.\n\noptions:\n  --db "), "stdout: %s", out);
	ck_assert_str_eq(errout, "");
	ck_assert_int_eq(first, -1); /* only set on -1 */
	ck_cfg_empty();
	free(out);
	free(errout);

	ck_assert_int_eq(LOAD(&prog, "-h"), 0);
	ck_assert(starts_with(out, "usage: prog sub "));
	ck_assert_str_eq(errout, "");
	free(out);
	free(errout);
}
END_TEST

START_TEST(test_load_bad_flag)
{
	char *out, *errout;

	ck_assert_int_eq(LOAD(&prog, "--db=x", "--bogus"), 2);
	ck_assert_str_eq(out, "");
	ck_assert_str_eq(errout, "prog sub: unknown option --bogus (see --help)\n");
	ck_cfg_empty();
	free(out);
	free(errout);

	ck_assert_int_eq(LOAD(&prog, "--db=x", "--topic=a", "--workers", "0"), 2);
	ck_assert_str_eq(out, "");
	ck_assert(starts_with(errout, "prog sub: --workers: "));
	ck_assert_ptr_eq(strchr(errout, '\n'), errout + strlen(errout) - 1);
	ck_cfg_empty();
	free(out);
	free(errout);

	/* a missing required flag is a bad flag too */
	ck_assert_int_eq(LOAD(&prog, "--workers=2"), 2);
	ck_assert_str_eq(errout, "prog sub: --db is required (or set OUTBOX_DB)\n");
	free(out);
	free(errout);
}
END_TEST

START_TEST(test_load_stray_argument)
{
	char *out, *errout;

	ck_assert_int_eq(LOAD(&prog, "--db", "x", "--topic=a", "extra", "more"), 2);
	ck_assert_str_eq(out, "");
	ck_assert_str_eq(errout, "prog sub: unexpected argument 'extra'\n");
	ck_cfg_empty();
	free(out);
	free(errout);

	ck_assert_int_eq(LOAD(&prog, "--db=x", "--", "--workers=9"), 2);
	ck_assert_str_eq(errout, "prog sub: unexpected argument '--workers=9'\n");
	free(out);
	free(errout);

	/* none: go on, first_arg == argc */
	ck_assert_int_eq(LOAD(&prog, "--db=x", "--workers=9"), -1);
	ck_assert_int_eq(first, 3);
	ck_assert_str_eq(cfg.db, "x");
	ck_assert_int_eq(cfg.workers, 9);
	ck_assert_str_eq(out, "");
	ck_assert_str_eq(errout, "");
	free(out);
	free(errout);
}
END_TEST

START_TEST(test_load_positional)
{
	struct ob_cfg_program p = prog;
	char *out, *errout;

	p.positional = true;
	ck_assert_int_eq(LOAD(&p, "--db", "x", "file", "--workers=9"), -1);
	ck_assert_int_eq(first, 3);
	ck_assert_str_eq(cfg.db, "x");
	ck_assert_int_eq(cfg.workers, 4); /* after the stop: not parsed */
	ck_assert_str_eq(out, "");
	ck_assert_str_eq(errout, "");
	free(out);
	free(errout);

	/* first_arg may be NULL */
	ob_cfg_free(table, &cfg);
	const char *argv[] = { "prog", "--db=y", "a", NULL };
	ck_assert_int_eq(ob_cfg_load(&p, &cfg, 3, (char **)argv, NULL), -1);
	ck_assert_str_eq(cfg.db, "y");
}
END_TEST

START_TEST(test_load_markdown)
{
	struct ob_cfg_program p = prog;
	char *out, *errout;

	/* ALONE (the default): only as the one argument, and before the
	 * required check */
	ck_assert_int_eq(p.markdown, OB_CFG_MARKDOWN_ALONE);
	ck_assert_int_eq(LOAD(&p, "--help-markdown"), 0);
	ck_assert_msg(starts_with(out, "### prog sub\n\n| flag |"), "stdout: %s", out);
	ck_assert_str_eq(errout, "");
	free(out);
	free(errout);
	ck_assert_int_eq(LOAD(&p, "--db=x", "--help-markdown"), 2);
	ck_assert_str_eq(out, "");
	free(out);
	free(errout);

	/* ANY: anywhere before "--" */
	p.markdown = OB_CFG_MARKDOWN_ANY;
	ck_assert_int_eq(LOAD(&p, "--db=x", "--bogus", "--help-markdown"), 0);
	ck_assert(starts_with(out, "### prog sub\n\n"));
	ck_assert_str_eq(errout, "");
	ck_cfg_empty();
	free(out);
	free(errout);
	p.positional = true;
	ck_assert_int_eq(LOAD(&p, "--db=x", "--", "--help-markdown"), -1);
	ck_assert_int_eq(first, 3);
	ck_assert_str_eq(out, "");
	free(out);
	free(errout);

	/* cfg is cleared, not freed: it was never filled */
	ob_cfg_free(table, &cfg);
	cfg.db = (char *)"not owned";
	cfg.workers = 77;
	ck_assert_int_eq(load_captured(&p, (const char *[]){ "prog", "--help-markdown",
	    NULL }, &out, &errout), 0);
	ck_assert_ptr_null(cfg.db);
	ck_assert_int_eq(cfg.workers, 0);
	free(out);
	free(errout);
}
END_TEST


/* The --config file: a table with a "config" option. */
struct filecfg {
	char *db;
	int64_t workers;
	char *log_level;
	struct ob_cfg_list topics;
	char *config;
};

#define FOFF(f) offsetof(struct filecfg, f)

static const struct ob_cfg_opt ftable[] = {
	{ "db", "OUTBOX_DB", OB_CFG_STRING, NULL, 0, 0, NULL, true, false, FOFF(db), "db" },
	{ "workers", "OUTBOX_WORKERS", OB_CFG_INT, "4", 1, 64, NULL, false, false,
	    FOFF(workers), "workers" },
	{ "log-level", "OUTBOX_LOG_LEVEL", OB_CFG_ENUM, "info", 0, 0, "debug|info|warn|error",
	    false, false, FOFF(log_level), "level" },
	{ "topic", "OUTBOX_TOPICS", OB_CFG_LIST, NULL, 0, 0, NULL, false, false, FOFF(topics),
	    "topics" },
	{ "config", "OUTBOX_CONFIG", OB_CFG_STRING, NULL, 0, 0, NULL, false, false,
	    FOFF(config), OB_CFG_CONFIG_HELP },
	OB_CFG_END
};

/* Write text to a file in the temp dir; its path into path. */
static void
config_file(const char *text, char *path, size_t len)
{
	static int n;
	snprintf(path, len, "%s/cfg-%d-%d.conf", ts_tmpdir(), (int)getpid(), ++n);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static int
fparse(struct filecfg *c, const char **argv)
{
	memset(c, 0, sizeof(*c));
	return parse_with(ftable, c, argv);
}

START_TEST(test_config_file_precedence)
{
	char path[512], flag[600];
	struct filecfg c;
	unsetenv("OUTBOX_CONFIG");
	unsetenv("OUTBOX_LOG_LEVEL");
	config_file("# the relay's settings\n\n  export OUTBOX_DB = \"host=file\"\n"
	    "OUTBOX_WORKERS=6\nOUTBOX_TOPICS='a,b'\n", path, sizeof(path));
	snprintf(flag, sizeof(flag), "--config=%s", path);
	/* the file beats the environment and the default */
	setenv("OUTBOX_WORKERS", "8", 1);
	setenv("OUTBOX_LOG_LEVEL", "warn", 1);
	ck_assert_int_eq(fparse(&c, (const char *[]){ "prog", flag, NULL }), OB_OK);
	ck_assert_str_eq(c.db, "host=file");
	ck_assert_int_eq(c.workers, 6);
	ck_assert_uint_eq(c.topics.n, 2);
	ck_assert_str_eq(c.topics.items[1], "b");
	ck_assert_str_eq(c.log_level, "warn"); /* not in the file: the environment */
	ob_cfg_free(ftable, &c);
	/* a flag beats the file */
	ck_assert_int_eq(fparse(&c, (const char *[]){ "prog", flag, "--workers", "2", NULL }),
	    OB_OK);
	ck_assert_int_eq(c.workers, 2);
	ob_cfg_free(ftable, &c);
	/* the file named by its variable */
	setenv("OUTBOX_CONFIG", path, 1);
	ck_assert_int_eq(fparse(&c, (const char *[]){ "prog", NULL }), OB_OK);
	ck_assert_int_eq(c.workers, 6);
	ck_assert_str_eq(c.config, path);
	ob_cfg_free(ftable, &c);
	unsetenv("OUTBOX_CONFIG");
	unsetenv("OUTBOX_WORKERS");
	unsetenv("OUTBOX_LOG_LEVEL");
}
END_TEST

/* Every bad file is one line naming the file and the line; nothing else
 * counts. */
START_TEST(test_config_file_errors)
{
	static const struct {
		const char *text;
		const char *want; /* after "<path>:" */
	} cases[] = {
		{ "OUTBOX_DB=x\nOUTBOX_WORKRES=3\n", "2: unknown setting 'OUTBOX_WORKRES' (see --help)" },
		{ "OUTBOX_DB=x\nOUTBOX_DB=y\n", "2: OUTBOX_DB is set twice" },
		{ "OUTBOX_WORKERS=0\n", "1: OUTBOX_WORKERS=0: below the minimum 1" },
		{ "OUTBOX_LOG_LEVEL=loud\n",
		    "1: OUTBOX_LOG_LEVEL=loud: not one of debug|info|warn|error" },
		{ "just words\n", "1: not KEY=VALUE" },
		{ "OUTBOX_CONFIG=/other\n", "1: unknown setting 'OUTBOX_CONFIG' (see --help)" },
	};
	char path[512], flag[600], want[700];
	struct filecfg c;
	unsetenv("OUTBOX_CONFIG");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		config_file(cases[i].text, path, sizeof(path));
		snprintf(flag, sizeof(flag), "--config=%s", path);
		int rv = fparse(&c, (const char *[]){ "prog", "--db", "x", flag, NULL });
		snprintf(want, sizeof(want), "%s:%s", path, cases[i].want);
		ck_assert_msg(rv == OB_EINVAL, "case %zu: parsed", i);
		ck_assert_str_eq(err, want);
		ob_cfg_free(ftable, &c);
	}
	int rv = fparse(&c, (const char *[]){ "prog", "--db", "x", "--config", "/nonexistent/x.conf",
	    NULL });
	ck_fails_with(rv, "--config /nonexistent/x.conf: No such file or directory");
	ob_cfg_free(ftable, &c);
}
END_TEST

START_TEST(test_config_changed)
{
	struct filecfg a, b;
	char out[256];
	ck_assert_int_eq(fparse(&a, (const char *[]){ "prog", "--db", "x", "--topic", "t", NULL }),
	    OB_OK);
	ck_assert_int_eq(fparse(&b, (const char *[]){ "prog", "--db", "x", "--topic", "t", NULL }),
	    OB_OK);
	ob_cfg_changed(ftable, &a, &b, out, sizeof(out));
	ck_assert_str_eq(out, "");
	ob_cfg_free(ftable, &b);
	ck_assert_int_eq(fparse(&b, (const char *[]){ "prog", "--db", "y", "--workers", "5",
	    "--log-level", "debug", "--topic", "t", "--topic", "u", NULL }), OB_OK);
	ob_cfg_changed(ftable, &a, &b, out, sizeof(out));
	ck_assert_str_eq(out, "db,workers,log-level,topic");
	ob_cfg_free(ftable, &a);
	ob_cfg_free(ftable, &b);
}
END_TEST

static Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_good_values);
	tcase_add_test(tc, test_equals_form);
	tcase_add_test(tc, test_empty_string_value);
	tcase_add_test(tc, test_repeated_flag_last_wins);
	tcase_add_test(tc, test_bool_forms);
	tcase_add_test(tc, test_bool_bad);
	tcase_add_test(tc, test_unknown_option);
	tcase_add_test(tc, test_missing_value);
	tcase_add_test(tc, test_int_values);
	tcase_add_test(tc, test_int_bounds);
	tcase_add_test(tc, test_unbounded_int);
	tcase_add_test(tc, test_duration_bounds);
	tcase_add_test(tc, test_size_bounds);
	tcase_add_test(tc, test_enum);
	tcase_add_test(tc, test_precedence);
	tcase_add_test(tc, test_list_flags);
	tcase_add_test(tc, test_list_env);
	tcase_add_test(tc, test_list_default);
	tcase_add_test(tc, test_required);
	tcase_add_test(tc, test_help);
	tcase_add_test(tc, test_first_arg);
	tcase_add_test(tc, test_bad_default);
	tcase_add_test(tc, test_init_and_free);
	tcase_add_test(tc, test_out_params_on_error);
	tcase_add_test(tc, test_durations_table);
	tcase_add_test(tc, test_sizes_table);
	suite_add_tcase(s, tc);

	tc = tcase_create("output");
	tcase_add_test(tc, test_usage);
	tcase_add_test(tc, test_markdown);
	tcase_add_test(tc, test_redact);
	tcase_add_test(tc, test_redact_truncates);
	suite_add_tcase(s, tc);

	tc = tcase_create("load");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_load_help);
	tcase_add_test(tc, test_load_bad_flag);
	tcase_add_test(tc, test_load_stray_argument);
	tcase_add_test(tc, test_load_positional);
	tcase_add_test(tc, test_load_markdown);
	tcase_add_test(tc, test_config_file_precedence);
	tcase_add_test(tc, test_config_file_errors);
	tcase_add_test(tc, test_config_changed);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(config_suite());
}
