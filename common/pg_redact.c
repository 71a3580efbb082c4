/*
 * pg_redact.c - a conninfo's secrets: where they are in its text, the
 * conninfo shown with them redacted, and any other text scrubbed of them.
 *
 * The other text is libpq's own error message after a failed connect: for
 * a malformed URI it echoes the whole URI ("unexpected character ... in
 * URI: \"postgresql://u:pw@[::1]x/db\"") or the token it could not decode
 * ("invalid percent-encoded token: \"pw%zz\""), and a server echoes a
 * database name that was meant as a URI. So every secret value is looked
 * up in the conninfo first, and every form of it (raw, unquoted and
 * unescaped, percent-decoded, percent-encoded) is replaced by "***".
 *
 * The scan reads a conninfo the way libpq does (fe-connect.c: keyword
 * strings in conninfo_parse, URIs in conninfo_uri_parse_options), and
 * keeps going where libpq would stop with an error. Secret keys are
 * password, sslpassword and passfile, in any letter case and, in a URI
 * query, any percent-encoding ("%70assword"). Where a malformed URI can be
 * read two ways ("u:pa@ss@host", "u:pa/ss@host": libpq takes the first '@'
 * or stops at the '/', the writer meant the last '@'), both readings are
 * redacted, and libpq's message is withheld altogether: libpq has put the
 * rest of the password into the host, port or database name, which its
 * message may show in pieces no scrub can recognise.
 *
 * Never: connect, log, or keep anything after returning.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "outbox/pg.h"
#include "outbox/url.h"

/* Secret values one conninfo may name; past this, libpq's message is
 * withheld rather than scrubbed of only some of them. */
#define SECRETS_MAX 16
/* A URI query key longer than this (decoded) is not a secret key. */
#define QUERY_KEY_MAX 32

#define NONE ((size_t)-1)

static const char *const secret_keys[] = { "password", "sslpassword", "passfile" };

enum span_kind {
	SPAN_KEYWORD, /* keyword form: maybe 'quoted', backslash escapes */
	SPAN_URI,     /* URI: percent-encoded */
};

/* A secret value: [off, off + len) of the conninfo, as written. */
struct span {
	size_t off, len;
	enum span_kind kind;
};

struct secrets {
	struct span s[SECRETS_MAX];
	size_t n;
	bool withhold; /* libpq would split a password (or too many secrets) */
	bool overflow; /* more than SECRETS_MAX: not shown at all */
};

static void
add_span(struct secrets *sec, size_t off, size_t len, enum span_kind kind)
{
	if (sec->n == SECRETS_MAX) {
		sec->withhold = sec->overflow = true;
		return;
	}
	sec->s[sec->n++] = (struct span){ off, len, kind };
}

static bool
is_secret_key(const char *k, size_t n)
{
	for (size_t i = 0; i < sizeof secret_keys / sizeof secret_keys[0]; i++)
		if (strlen(secret_keys[i]) == n && strncasecmp(k, secret_keys[i], n) == 0)
			return true;
	return false;
}

/* Length of a "postgresql://" or "postgres://" prefix (any case) of s[0..n), or 0. */
static size_t
scheme_len(const char *s, size_t n)
{
	static const char *const schemes[] = { "postgresql://", "postgres://" };

	for (size_t i = 0; i < 2; i++) {
		size_t k = strlen(schemes[i]);
		if (n >= k && strncasecmp(s, schemes[i], k) == 0)
			return k;
	}
	return 0;
}

/* Percent-decode s[0..n) into out (room for n + 1); a malformed escape
 * ("%zz", "%4") is kept as written. Returns false when there was one. */
static bool
pct_decode(const char *s, size_t n, char *out)
{
	bool ok = true;
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int hi, lo;
		if (s[i] == '%' && i + 2 < n && (hi = ob_url_hexval((unsigned char)s[i + 1])) >= 0 &&
		    (lo = ob_url_hexval((unsigned char)s[i + 2])) >= 0) {
			out[o++] = (char)(hi * 16 + lo);
			i += 2;
			continue;
		}
		if (s[i] == '%')
			ok = false;
		out[o++] = s[i];
	}
	out[o] = '\0';
	return ok;
}

/* Is a URI query key a secret one, once decoded? One whose decoding is
 * malformed counts as one: libpq refuses it, and what the writer meant
 * is unknown. */
static bool
query_key_secret(const char *k, size_t n)
{
	char key[QUERY_KEY_MAX * 3 + 1];

	if (n > QUERY_KEY_MAX * 3)
		return false;
	if (!pct_decode(k, n, key))
		return true;
	return is_secret_key(key, strlen(key));
}

/* The query of a URI from b[q] ('?') to end: key=value pairs split by '&'
 * ('#' is no delimiter to libpq). Returns how many secret values it found. */
static size_t
scan_query(const char *b, size_t q, size_t end, struct secrets *sec)
{
	size_t found = 0;

	for (size_t p = q + 1; q < end && p <= end;) {
		size_t e, eq;
		for (e = p; e < end && b[e] != '&'; e++)
			;
		for (eq = p; eq < e && b[eq] != '='; eq++)
			;
		if (eq < e && query_key_secret(b + p, eq - p)) {
			add_span(sec, eq + 1, e - eq - 1, SPAN_URI); /* "a=b" whole */
			found++;
		}
		p = e + 1;
	}
	return found;
}

/*
 * The host list of a URI without user info, from b[p]: a "port" that is
 * not digits ("postgresql://u:S3cret", the '@host' forgotten, or
 * "u:S3c/ret@h", where libpq stops at the '/') is taken for a password.
 * libpq reads it as a port, and its message repeats it ("invalid integer
 * value ... for connection option \"port\"").
 */
static void
scan_ports(const char *b, size_t p, size_t end, struct secrets *sec)
{
	size_t e;

	for (e = p; e < end && b[e] != '/' && b[e] != '?'; e++)
		;
	while (p < e) {
		size_t h = p, c, pe;
		if (b[h] == '[') /* an IPv6 address: its ':' are no port */
			while (h < e && b[h] != ']' && b[h] != ',')
				h++;
		for (c = h; c < e && b[c] != ':' && b[c] != ','; c++)
			;
		for (pe = c; pe < e && b[pe] != ','; pe++)
			;
		if (c < e && b[c] == ':') {
			bool digits = true;
			for (size_t i = c + 1; i < pe; i++)
				digits = digits && b[i] >= '0' && b[i] <= '9';
			if (!digits)
				add_span(sec, c + 1, pe - c - 1, SPAN_URI);
		}
		p = pe + 1;
	}
}

/*
 * A URI in b[start..end): the password of its user info (or, without one,
 * a port that is not a number) and the values of secret keys in its query. libpq ends the user info at the first '@'
 * before any '/' (a '?' does not stop it: "u:pa?ss@h" has the password
 * "pa?ss"), and the query starts at the first '?' after that; the writer
 * of "u:pa@ss@host" or "u:pa/ss@host" meant the last '@' before the query,
 * and the writer of "h?password=p@x" meant a query. Both readings are
 * scanned; when they differ on a secret, libpq's message is withheld.
 */
static void
scan_uri(const char *b, size_t start, size_t end, struct secrets *sec)
{
	size_t p = start + scheme_len(b + start, end - start), i, q, q0, at_b = NONE;
	size_t at_a = NONE;

	for (i = p; i < end && b[i] != '@' && b[i] != '/'; i++)
		;
	if (i < end && b[i] == '@')
		at_a = i;
	for (q = at_a != NONE ? at_a : p; q < end && b[q] != '?'; q++)
		;
	for (q0 = p; q0 < end && b[q0] != '?'; q0++)
		;
	for (i = p; i < q; i++)
		if (b[i] == '@')
			at_b = i;
	if (at_b != NONE) {
		size_t c;
		for (c = p; c < at_b && b[c] != ':'; c++)
			;
		if (c < at_b) {
			add_span(sec, c + 1, at_b - c - 1, SPAN_URI);
			if (at_a != at_b)
				sec->withhold = true;
		}
	} else {
		scan_ports(b, p, end, sec);
	}
	if (q0 < q && scan_query(b, q0, end, sec) > 0)
		sec->withhold = true; /* libpq reads that "query" as a user name */
	scan_query(b, q, end, sec);
}

/* Where a keyword value ends: 'quoted' (backslash escapes the next
 * character) or up to the next blank, as libpq's conninfo_parse reads it. */
static size_t
value_end(const char *b, size_t p, size_t end)
{
	if (p < end && b[p] == '\'') {
		for (p++; p < end && b[p] != '\''; p++)
			if (b[p] == '\\' && p + 1 < end)
				p++;
		return p < end ? p + 1 : end;
	}
	for (; p < end && !isspace((unsigned char)b[p]); p++)
		if (b[p] == '\\' && p + 1 < end)
			p++;
	return p;
}

/*
 * Keyword form: "host=h password = 'it\'s' dbname=d". A word that is a URI
 * (the whole conninfo after a blank, or a dbname value: libpq expands
 * one) is scanned as one. Where libpq would stop (a word without '='), the
 * scan goes on; a secret key without '=' takes the next word as its value.
 */
static void
scan_keywords(const char *b, size_t p, size_t end, struct secrets *sec)
{
	bool next_secret = false;

	while (p < end) {
		size_t k, klen, q, v, ve;

		if (isspace((unsigned char)b[p])) {
			p++;
			continue;
		}
		k = p;
		if (next_secret || scheme_len(b + p, end - p) > 0) {
			while (p < end && !isspace((unsigned char)b[p]))
				p++;
			if (next_secret) {
				add_span(sec, k, p - k, SPAN_KEYWORD);
			} else {
				/* libpq takes the word up to its first '=' for a key,
				 * and its message repeats that much: scanned too */
				const char *eq = memchr(b + k, '=', p - k);
				scan_uri(b, k, p, sec);
				if (eq != NULL)
					scan_uri(b, k, (size_t)(eq - b), sec);
			}
			next_secret = false;
			continue;
		}
		while (p < end && b[p] != '=' && !isspace((unsigned char)b[p]))
			p++;
		klen = p - k;
		for (q = p; q < end && isspace((unsigned char)b[q]); q++)
			;
		if (q >= end || b[q] != '=') {
			next_secret = is_secret_key(b + k, klen);
			continue;
		}
		for (v = q + 1; v < end && isspace((unsigned char)b[v]); v++)
			;
		ve = value_end(b, v, end);
		if (is_secret_key(b + k, klen)) {
			add_span(sec, v, ve - v, SPAN_KEYWORD);
		} else {
			size_t is = v, ie = ve;
			if (is < ie && b[is] == '\'') {
				is++;
				if (ie > is && b[ie - 1] == '\'')
					ie--;
			}
			if (scheme_len(b + is, ie - is) > 0)
				scan_uri(b, is, ie, sec);
		}
		p = ve;
	}
}

static int
by_offset(const void *a, const void *b)
{
	size_t x = ((const struct span *)a)->off, y = ((const struct span *)b)->off;
	return x < y ? -1 : x > y ? 1 : 0;
}

static void
scan(const char *conninfo, struct secrets *sec)
{
	size_t n = strlen(conninfo);

	sec->n = 0;
	sec->withhold = sec->overflow = false;
	if (scheme_len(conninfo, n) > 0)
		scan_uri(conninfo, 0, n, sec);
	else
		scan_keywords(conninfo, 0, n, sec);
	/* in order; two readings of one malformed URI may overlap (each is a
	 * form to scrub; the conninfo shown hides their union) */
	qsort(sec->s, sec->n, sizeof sec->s[0], by_offset);
}

/* Bounded output for the redactor: truncates, always NUL-terminated. */
struct out {
	char *p;
	size_t len, cap;
};

static void
put(struct out *o, const char *s, size_t n)
{
	size_t room = o->cap - 1 - o->len;

	if (n > room)
		n = room;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

void
ob_pg_redact_conninfo(const char *conninfo, char *out, size_t outlen)
{
	struct out o = { out, 0, outlen };
	struct secrets sec;
	size_t at = 0;

	if (outlen == 0)
		return;
	out[0] = '\0';
	if (conninfo == NULL)
		return;
	scan(conninfo, &sec);
	if (sec.overflow) { /* the rest may hold secrets the scan did not keep */
		snprintf(out, outlen, "(a conninfo with more than %d secret values: not shown)",
		    SECRETS_MAX);
		return;
	}
	for (size_t i = 0; i < sec.n; i++) {
		size_t off = sec.s[i].off, e = off + sec.s[i].len;
		if (i > 0 && off <= at) { /* overlaps the one before: one "***" */
			if (e > at)
				at = e;
			continue;
		}
		put(&o, conninfo + at, off - at);
		put(&o, "***", 3);
		at = e;
	}
	put(&o, conninfo + at, strlen(conninfo + at));
}

/* ---- scrubbing other text ------------------------------------------- */

/* The forms of the secrets to look for: owned strings, no duplicates. */
struct needles {
	char **v;
	size_t n, cap;
	bool failed; /* out of memory: the caller withholds */
};

static void
needle_add(struct needles *nd, const char *s, size_t n)
{
	size_t stars = 0;

	while (stars < n && s[stars] == '*')
		stars++;
	if (n == 0 || stars == n || nd->failed) /* "***" is what replaces them */
		return;
	for (size_t i = 0; i < nd->n; i++)
		if (strlen(nd->v[i]) == n && memcmp(nd->v[i], s, n) == 0)
			return;
	if (nd->n == nd->cap) {
		size_t cap = nd->cap ? nd->cap * 2 : 16;
		char **v = realloc(nd->v, cap * sizeof *v);
		if (v == NULL) {
			nd->failed = true;
			return;
		}
		nd->v = v;
		nd->cap = cap;
	}
	if ((nd->v[nd->n] = strndup(s, n)) == NULL) {
		nd->failed = true;
		return;
	}
	nd->n++;
}

/* A decoded value, and it percent-encoded (every byte but [A-Za-z0-9-._~],
 * upper- and lower-case hex). */
static void
needle_add_decoded(struct needles *nd, const char *s, size_t n)
{
	static const char *const hex[] = { "0123456789ABCDEF", "0123456789abcdef" };
	char *enc;

	needle_add(nd, s, n);
	if ((enc = malloc(n * 3 + 1)) == NULL) {
		nd->failed = true;
		return;
	}
	for (int h = 0; h < 2; h++) {
		size_t o = 0;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)s[i];
			if (isalnum(c) || strchr("-._~", c) != NULL) {
				enc[o++] = (char)c;
			} else {
				enc[o++] = '%';
				enc[o++] = hex[h][c >> 4];
				enc[o++] = hex[h][c & 15];
			}
		}
		needle_add(nd, enc, o);
	}
	free(enc);
}

/* Every form of one span: as written; keyword: without its quotes and
 * with the backslashes undone; URI: percent-decoded. */
static void
needles_of_span(struct needles *nd, const char *b, const struct span *sp)
{
	const char *s = b + sp->off;
	size_t n = sp->len;
	char *tmp;

	needle_add(nd, s, n);
	if ((tmp = malloc(n + 1)) == NULL) {
		nd->failed = true;
		return;
	}
	if (sp->kind == SPAN_URI) {
		pct_decode(s, n, tmp);
		needle_add_decoded(nd, tmp, strlen(tmp));
	} else {
		size_t o = 0, i = 0, e = n;
		if (n > 0 && s[0] == '\'') {
			i = 1;
			if (e > 1 && s[e - 1] == '\'')
				e--;
			needle_add(nd, s + i, e - i);
		}
		for (; i < e; i++) {
			if (s[i] == '\\' && i + 1 < e)
				i++;
			tmp[o++] = s[i];
		}
		needle_add_decoded(nd, tmp, o);
	}
	free(tmp);
}

/* What libpq itself reads as secrets (when the conninfo parses at all). */
static void
needles_of_libpq(struct needles *nd, const char *conninfo)
{
	char *perr = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);

	PQfreemem(perr);
	if (opts == NULL)
		return;
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (o->val != NULL && is_secret_key(o->keyword, strlen(o->keyword)))
			needle_add_decoded(nd, o->val, strlen(o->val));
	PQconninfoFree(opts);
}

static void
needles_free(struct needles *nd)
{
	for (size_t i = 0; i < nd->n; i++)
		free(nd->v[i]);
	free(nd->v);
}

static int
longer_first(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? 1 : la > lb ? -1 : 0;
}

/* text with every needle replaced by "***" (owned), or NULL (out of memory). */
static char *
replace_all(const char *text, const struct needles *nd)
{
	char *cur = strdup(text);

	for (size_t i = 0; cur != NULL && i < nd->n; i++) {
		const char *nv = nd->v[i], *p, *from = cur;
		size_t nl = strlen(nv), count = 0, len = strlen(cur);
		char *next, *w;

		for (p = cur; (p = strstr(p, nv)) != NULL; p += nl)
			count++;
		if (count == 0)
			continue;
		/* "***" may be longer than a short needle */
		if ((next = malloc(len + count * 3 + 1)) == NULL) {
			free(cur);
			return NULL;
		}
		w = next;
		for (p = cur; (p = strstr(from, nv)) != NULL; from = p + nl) {
			memcpy(w, from, (size_t)(p - from));
			w += p - from;
			memcpy(w, "***", 3);
			w += 3;
		}
		strcpy(w, from);
		free(cur);
		cur = next;
	}
	return cur;
}

bool
ob_pg_scrub(const char *conninfo, const char *text, char *out, size_t outlen)
{
	struct needles nd = { NULL, 0, 0, false };
	struct secrets sec;
	char *clean = NULL;
	bool withheld = true;

	if (outlen == 0)
		return true;
	if (text == NULL)
		text = "";
	if (conninfo == NULL) {
		snprintf(out, outlen, "%s", text);
		return false;
	}
	scan(conninfo, &sec);
	if (!sec.withhold) {
		for (size_t i = 0; i < sec.n; i++)
			needles_of_span(&nd, conninfo, &sec.s[i]);
		needles_of_libpq(&nd, conninfo);
		if (!nd.failed) {
			if (nd.n > 0)
				qsort(nd.v, nd.n, sizeof *nd.v, longer_first);
			clean = replace_all(text, &nd);
		}
	}
	if (clean != NULL) {
		snprintf(out, outlen, "%s", clean);
		withheld = false;
	} else if (sec.withhold) {
		snprintf(out, outlen, "libpq's message not shown: it could hold part of a password"
		    " that the URI leaves ambiguous (percent-encode '@', '/' and ':' in a user name"
		    " or password: %%40, %%2F, %%3A)");
	} else {
		snprintf(out, outlen, "libpq's message not shown: out of memory scrubbing it of"
		    " the password");
	}
	free(clean);
	needles_free(&nd);
	return withheld;
}
