/*
 * test_redact.c - a conninfo's secrets never shown (common/pg_redact.c):
 * ob_pg_redact_conninfo over every form a conninfo takes (keywords, URIs,
 * malformed URIs, percent-encoded query keys, a URI as a keyword value),
 * ob_pg_scrub over the forms a secret takes in other text, and
 * ob_pg_connect's error line against libpq's own message, which for the
 * malformed forms does contain the password (shown first, for each case
 * where libpq echoes it), and random conninfos around a password. No
 * server: every conninfo points at a socket directory that does not exist,
 * or is one libpq refuses to parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/pg.h"
#include "testsupport.h"

#define SECRET "S3cretPw"
#define NOSOCK "/nonexistent-outbox-test"

/* One conninfo: what the redactor shows, the piece of the secret that must
 * never appear (the whole secret where it is written in one piece), whether
 * libpq's own message after connecting with it holds that piece (the leak
 * the scrub is there for), and whether the scrub withholds libpq's message
 * (a URI libpq reads differently from its writer). */
struct rcase {
	const char *in, *shown, *secret;
	bool libpq_leaks, withheld;
};

static const struct rcase cases[] = {
	/* keyword form */
	{ "host=" NOSOCK " dbname=x user=u password=" SECRET,
	    "host=" NOSOCK " dbname=x user=u password=***", SECRET, false, false },
	{ "password = 'S3cret\\'Pw x' host=" NOSOCK, "password = *** host=" NOSOCK, "S3cret",
	    false, false },
	{ "password=S3cret\\ Pw host=" NOSOCK, "password=*** host=" NOSOCK, "S3cret", false,
	    false },
	{ "host=" NOSOCK " PASSWORD=" SECRET, "host=" NOSOCK " PASSWORD=***", SECRET, false,
	    false },
	{ "host=" NOSOCK " password='" SECRET, "host=" NOSOCK " password=***", SECRET, false,
	    false },
	/* a key without '=': libpq stops; the next word is taken as its value */
	{ "host=" NOSOCK " password " SECRET "=x", "host=" NOSOCK " password ***", SECRET, false,
	    false },
	{ "sslpassword=" SECRET " host=" NOSOCK, "sslpassword=*** host=" NOSOCK, SECRET, false,
	    false },
	{ "passfile=/tmp/" SECRET " host=" NOSOCK, "passfile=*** host=" NOSOCK, SECRET, false,
	    false },
	/* a URI where a keyword goes: libpq echoes it as an unknown option */
	{ "  postgresql://u:" SECRET "@/x?host=" NOSOCK, "  postgresql://u:***@/x?host=" NOSOCK,
	    SECRET, true, false },
	{ "POSTGRESQL://u:" SECRET "@/x?host=" NOSOCK, "POSTGRESQL://u:***@/x?host=" NOSOCK,
	    SECRET, true, false },
	/* ... where libpq repeats only the word up to its '=' */
	{ " POSTGRES://u:" SECRET "x=y", " POSTGRES://u:***", SECRET, true, false },
	{ "dbname=postgresql://u:" SECRET "@/x host=" NOSOCK,
	    "dbname=postgresql://u:***@/x host=" NOSOCK, SECRET, false, false },
	{ "dbname='postgresql://u:" SECRET "@/x' host=" NOSOCK,
	    "dbname='postgresql://u:***@/x' host=" NOSOCK, SECRET, false, false },
	/* URI user info */
	{ "postgresql://u:" SECRET "@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    SECRET, false, false },
	{ "postgres://:" SECRET "@/x?host=" NOSOCK, "postgres://:***@/x?host=" NOSOCK, SECRET,
	    false, false },
	{ "postgresql://u:" SECRET "%zz@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    SECRET, true, false },
	{ "postgresql://u:" SECRET "%4@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    SECRET, true, false },
	{ "postgresql://u:S3cret%00Pw@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    "S3cret", true, false },
	{ "postgresql://u:S3c%2FretPw@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    "S3c", false, false },
	{ "postgresql://u:S3cret?Pw@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    "S3cret", false, false },
	/* malformed hosts and ports: libpq echoes the whole URI */
	{ "postgresql://u:" SECRET "@[::1]x/db", "postgresql://u:***@[::1]x/db", SECRET, true,
	    false },
	{ "postgresql://u:" SECRET "@[::1/db", "postgresql://u:***@[::1/db", SECRET, true,
	    false },
	{ "postgresql://u:" SECRET "@[]/db", "postgresql://u:***@[]/db", SECRET, true, false },
	{ "postgresql://u:" SECRET "@:12x/x?host=" NOSOCK,
	    "postgresql://u:***@:12x/x?host=" NOSOCK, SECRET, false, false },
	/* no user info: a port that is not a number is taken for a password
	 * (the '@host' forgotten); libpq repeats it as a bad port */
	{ "postgresql://u:" SECRET, "postgresql://u:***", SECRET, true, false },
	{ "postgresql://u:" SECRET "/x?host=" NOSOCK, "postgresql://u:***/x?host=" NOSOCK, SECRET,
	    true, false },
	{ "postgresql://h1:5432,u:" SECRET "/x?host=" NOSOCK "," NOSOCK,
	    "postgresql://h1:5432,u:***/x?host=" NOSOCK "," NOSOCK, SECRET, true, false },
	{ "postgresql://[::1]:" SECRET "/x?host=" NOSOCK, "postgresql://[::1]:***/x?host=" NOSOCK,
	    SECRET, true, false },
	{ "postgresql://:5432,:6543/x?host=" NOSOCK, "postgresql://:5432,:6543/x?host=" NOSOCK,
	    "***", false, false },
	/* read two ways: libpq splits the password into host / port / dbname */
	{ "postgresql://u:S3cret@Pw@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    "S3cret", false, true },
	{ "postgresql://u:S3cret/Pw@/x?host=" NOSOCK, "postgresql://u:***@/x?host=" NOSOCK,
	    "S3cret", true, true },
	{ "postgresql://h?user=me&password=" SECRET "@/x?host=" NOSOCK,
	    "postgresql://h?user=me&password=***", SECRET, false, true },
	/* query keys in any percent-encoding and letter case */
	{ "postgresql:///x?host=" NOSOCK "&password=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&password=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&%70assword=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&%70assword=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&pass%77ord=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&pass%77ord=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&p%61ssw%6Frd=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&p%61ssw%6Frd=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&p%61ssw%6frd=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&p%61ssw%6frd=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&%70%41SSWORD=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&%70%41SSWORD=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&%7zassword=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&%7zassword=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&sslpassword=" SECRET,
	    "postgresql:///x?host=" NOSOCK "&sslpassword=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&passfile=/tmp/" SECRET,
	    "postgresql:///x?host=" NOSOCK "&passfile=***", SECRET, false, false },
	{ "postgresql:///x?host=" NOSOCK "&password=" SECRET "=more",
	    "postgresql:///x?host=" NOSOCK "&password=***", SECRET, false, false },
	{ "postgresql://u:Other9Pw@/x?password=" SECRET "&host=" NOSOCK,
	    "postgresql://u:***@/x?password=***&host=" NOSOCK, SECRET, false, false },
	{ "postgresql://u:" SECRET "@/x?host=" NOSOCK "&password=Other9Pw",
	    "postgresql://u:***@/x?host=" NOSOCK "&password=***", SECRET, false, false },
};

#define NCASES (sizeof cases / sizeof cases[0])

/* Connections go nowhere even where a conninfo names no host. */
static void
setup(void)
{
	setenv("PGHOST", NOSOCK, 1);
	unsetenv("PGPASSWORD");
	unsetenv("PGSERVICE");
}

START_TEST(test_redact_forms)
{
	const struct rcase *c = &cases[_i];
	char out[512];

	ob_pg_redact_conninfo(c->in, out, sizeof out);
	ck_assert_msg(strcmp(out, c->shown) == 0, "case %d: <%s> shown as <%s>, want <%s>", _i,
	    c->in, out, c->shown);
	ck_assert_msg(strstr(out, c->secret) == NULL, "case %d: %s", _i, out);
}
END_TEST

/* libpq's own message, as ob_pg_connect asks for it (the conninfo as an
 * expanded dbname), holds the secret where the case says so; the one line
 * ob_pg_connect reports never does, and names the conninfo redacted. */
START_TEST(test_connect_error_scrubbed)
{
	const struct rcase *c = &cases[_i];
	const char *keys[] = { "dbname", NULL }, *vals[] = { c->in, NULL };
	char err[2048];
	PGconn *conn = PQconnectdbParams(keys, vals, 1);

	ck_assert_ptr_nonnull(conn);
	ck_assert_int_ne(PQstatus(conn), CONNECTION_OK);
	const char *raw = PQerrorMessage(conn);
	if (c->libpq_leaks)
		ck_assert_msg(strstr(raw, c->secret) != NULL,
		    "case %d: libpq no longer echoes the secret: %s", _i, raw);
	PQfinish(conn);

	conn = NULL;
	ck_assert_int_eq(ob_pg_connect(c->in, "test", &conn, err, sizeof err), OB_EDB);
	ck_assert_ptr_null(conn);
	ck_assert_msg(strstr(err, c->secret) == NULL, "case %d: password in <%s>", _i, err);
	ck_assert_msg(strstr(err, c->shown) != NULL, "case %d: <%s> not in <%s>", _i, c->shown,
	    err);
	ck_assert_msg(strchr(err, '\n') == NULL, "case %d: not one line: %s", _i, err);
	ck_assert_msg((strstr(err, "libpq's message not shown") != NULL) == c->withheld,
	    "case %d: withheld should be %d: %s", _i, c->withheld, err);
}
END_TEST

/* Every form of a secret in other text: raw, percent-decoded, encoded with
 * upper- and lower-case hex; the rest of the text stays as it was. */
START_TEST(test_scrub_forms)
{
	char out[512];
	const char *ci = "postgresql://u:S3c%2fret%21Pw@h/x";
	bool w = ob_pg_scrub(ci, "a S3c%2fret%21Pw b S3c/ret!Pw c S3c%2Fret%21Pw d", out,
	    sizeof out);
	ck_assert(!w);
	ck_assert_str_eq(out, "a *** b *** c *** d");

	/* keyword form: quoted, escaped, and as libpq unescapes it */
	ci = "host=h password='it\\'s S3cret'";
	ck_assert(!ob_pg_scrub(ci, "x 'it\\'s S3cret' y it\\'s S3cret z it's S3cret", out,
	    sizeof out));
	ck_assert_msg(strstr(out, "S3cret") == NULL, "%s", out);
	ck_assert_str_eq(out, "x *** y *** z ***");

	/* two secrets, one inside the other's text: the longer goes first */
	ci = "password=abc sslpassword=abcdef";
	ck_assert(!ob_pg_scrub(ci, "abcdef abc ab", out, sizeof out));
	ck_assert_str_eq(out, "*** *** ab");

	/* nothing secret: the text as it is, whatever it holds */
	ck_assert(!ob_pg_scrub("host=h dbname=d", "no password here: h d", out, sizeof out));
	ck_assert_str_eq(out, "no password here: h d");
	ck_assert(!ob_pg_scrub(NULL, "text", out, sizeof out));
	ck_assert_str_eq(out, "text");

	/* a URI read two ways: a note instead of the text */
	ck_assert(ob_pg_scrub("postgresql://u:a@b@h/x", "whatever b@h", out, sizeof out));
	ck_assert(strstr(out, "b@h") == NULL);
	ck_assert(strstr(out, "%40") != NULL);

	/* cut to fit, NUL-terminated */
	ck_assert(!ob_pg_scrub("password=S3cret", "S3cret S3cret", out, 6));
	ck_assert_str_eq(out, "*** *");
}
END_TEST

/* A conninfo with more secret values than the scan keeps: withheld. */
START_TEST(test_scrub_too_many)
{
	char ci[2048] = "", out[256];
	for (int i = 0; i < 40; i++) {
		char kv[64];
		snprintf(kv, sizeof kv, "password=S3cret%d ", i);
		strcat(ci, kv);
	}
	ck_assert(ob_pg_scrub(ci, "S3cret39", out, sizeof out));
	ck_assert(strstr(out, "S3cret") == NULL);
	ob_pg_redact_conninfo(ci, out, sizeof out);
	ck_assert_msg(strstr(out, "S3cret") == NULL, "%s", out);
}
END_TEST

/* Random conninfos around a password: neither the conninfo shown nor the
 * connect error ever holds the password, nor what libpq itself takes for
 * one (PQconninfoParse). It found two classes the table now holds: a
 * port that is not a number, and a URI word cut at its '='. */
#define FUZZ_RUNS 10000

static const char *
opt(const PQconninfoOption *opts, const char *key)
{
	for (const PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, key) == 0)
			return o->val;
	return NULL;
}

/* Would connecting look a host name up? libpq checks the first host's
 * port before it resolves that host; a socket directory needs no lookup. */
static bool
looks_up_names(const PQconninfoOption *opts)
{
	const char *host = opt(opts, "host"), *port = opt(opts, "port");
	if (opt(opts, "hostaddr") != NULL)
		return true;
	size_t n = port != NULL ? strcspn(port, ",") : 0, i;
	for (i = 0; i < n && port[i] >= '0' && port[i] <= '9'; i++)
		;
	if (n > 0 && (i < n || n > 5 || atol(port) < 1 || atol(port) > 65535))
		return false; /* the first host's port fails before any lookup */
	for (const char *h = host; h != NULL && *h != '\0';) {
		if (*h != '/' && *h != ',')
			return true;
		h += strcspn(h, ",");
		if (*h == ',')
			h++;
	}
	return false;
}

START_TEST(test_random_conninfos)
{
	static const char alpha[] = "postgresql://:@/?&=%'\\ pPasswordsl7Oz0[]x,";
	static const char *const pre[] = { "postgresql://u:" SECRET, "password=" SECRET " ",
		"postgresql:///x?password=" SECRET, "postgresql://", "", "host=h password='" SECRET,
		"dbname=postgresql://u:" SECRET, " POSTGRES://u:" SECRET,
		"postgresql://u@h/d?pass%77ord=" SECRET "&", "sslpassword = '" SECRET };
	char ci[128], shown[512], err[2048];
	int tried = 0;

	srand(15);
	for (int it = 0; it < FUZZ_RUNS; it++) {
		size_t k;
		snprintf(ci, sizeof ci, "%s", pre[rand() % (int)(sizeof pre / sizeof pre[0])]);
		k = strlen(ci);
		for (int n = rand() % 40; n > 0 && k < sizeof ci - 1; n--)
			ci[k++] = alpha[rand() % (int)(sizeof alpha - 1)];
		ci[k] = '\0';
		ob_pg_redact_conninfo(ci, shown, sizeof shown);
		char *perr = NULL;
		PQconninfoOption *opts = PQconninfoParse(ci, &perr);
		PQfreemem(perr);
		const char *pw = NULL;
		for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++)
			if (strcmp(o->keyword, "password") == 0 && o->val != NULL && strlen(o->val) >= 4)
				pw = o->val;
		ck_assert_msg(strstr(shown, SECRET) == NULL && (pw == NULL || strstr(shown, pw) == NULL),
		    "<%s> shown as <%s>", ci, shown);
		if (opts != NULL && looks_up_names(opts)) {
			PQconninfoFree(opts); /* loopback only: no name is looked up */
			continue;
		}
		PGconn *conn = NULL;
		if (ob_pg_connect(ci, "test", &conn, err, sizeof err) == OB_OK) {
			PQfinish(conn); /* cannot happen: no server anywhere */
			ck_abort_msg("<%s> connected", ci);
		}
		ck_assert_msg(strstr(err, SECRET) == NULL && (pw == NULL || strstr(err, pw) == NULL),
		    "<%s>: password in <%s>", ci, err);
		PQconninfoFree(opts);
		tried++;
	}
	ck_assert_msg(tried > FUZZ_RUNS / 2, "only %d of %d tried to connect", tried, FUZZ_RUNS);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("redact");
	TCase *tc = tcase_create("redact");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, test_redact_forms, 0, (int)NCASES);
	tcase_add_loop_test(tc, test_connect_error_scrubbed, 0, (int)NCASES);
	tcase_add_test(tc, test_scrub_forms);
	tcase_add_test(tc, test_scrub_too_many);
	tcase_add_test(tc, test_random_conninfos);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
