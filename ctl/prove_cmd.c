/*
 * prove_cmd.c - `outboxctl prove`: the history checker every chaos,
 * scenario and compose run ends with. It judges every message created at
 * or after --since from the producer database (--db) and the consumer's
 * (--inbox-db), per dedup identity (--source, topic, key), prints one line
 * per class with its count and the first --max-ids members of each, or
 * (--json) one object, and exits 1 when the run broke a guarantee: lost,
 * duplicated, out of order, phantom, delivered but not applied (and, with
 * --drained, pending). The judging is prove_sql.c's (prove.h); this file
 * parses the command line, connects, prints and picks the exit code.
 *
 * Exit codes are prove's own: 0 clean, 1 a violation, 2 a bad argument or
 * a database that could not be read (one line on stderr), so that a
 * script can tell a broken run from a broken check.
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "ctl_rows.h"
#include "ctl_util.h"
#include "outbox/err.h"
#include "outbox/term.h"
#include "outbox/wire.h"
#include "prove.h"
#include "outbox/source.h" /* the source a relay derives (--derived-source) */

#define PROVE_EXIT_OK 0
#define PROVE_EXIT_VIOLATION 1
#define PROVE_EXIT_ERROR 2

#define MAX_IDS_DEFAULT "20"
#define MAX_IDS_MAX 1000000
#define SINCE_MAX 64 /* a resolved --since: "2025-01-31T12:00:00.000000Z" */

struct prove_config {
	char *db;
	char *inbox_db;
	char *since;
	char *source;
	bool derived_source;
	int64_t max_ids;
	bool drained;
	bool json;
};

#define OB_CFG_STRUCT struct prove_config

static const struct ob_cfg_opt ctl_prove_options[] = {
	OB_CFG_OPT_DB(db, "the producer database (outbox schema)"),
	CTL_OPT_INBOX_DB(inbox_db),
	OB_CFG_OPT("since", "OUTBOX_CTL_SINCE", OB_CFG_STRING, NULL, 0, 0, NULL, true, since,
	    "judge the messages created at or after this time: ISO 8601 (2025-01-31T12:00:00Z,"
	    " 2025-01-31 12:00:00.5+02:00, 2025-01-31; no zone = UTC) or an age before the"
	    " producer database's clock (30s, 10m, 2h, 7d)"),
	OB_CFG_OPT("source", "OUTBOX_SOURCE", OB_CFG_STRING, NULL, 0, 0, NULL, false, source,
	    "the source the relay delivered under (outbox-relay --source): inbox rows of this"
	    " source only are matched; unset = the empty source (relays with --no-source)"),
	OB_CFG_OPT("derived-source", "OUTBOX_CTL_DERIVED_SOURCE", OB_CFG_BOOL, "false", 0, 0, NULL,
	    false, derived_source,
	    "use the source outbox-relay derives from --db when it has neither --source nor"
	    " --no-source ('<system identifier>.<database name>'); not with --source"),
	OB_CFG_OPT("max-ids", "OUTBOX_CTL_MAX_IDS", OB_CFG_INT, MAX_IDS_DEFAULT, 0, MAX_IDS_MAX,
	    NULL, false, max_ids,
	    "list at most this many messages per class, lowest ids first (0: counts only)"),
	OB_CFG_OPT("drained", "OUTBOX_CTL_DRAINED", OB_CFG_BOOL, "false", 0, 0, NULL, false,
	    drained, "the run should have finished: a pending message is a violation too"),
	OB_CFG_OPT("json", "OUTBOX_CTL_JSON", OB_CFG_BOOL, "false", 0, 0, NULL, false, json,
	    "print one JSON object instead of text"),
	OB_CFG_END,
};

static const struct ctl_cmd cmd = {
	"prove",
	"outboxctl prove --db CONNINFO --inbox-db CONNINFO --since T [--source S |"
	" --derived-source] [--max-ids N] [--drained] [--json]",
	"Judge the history of every message created at or after T, per dedup identity"
	" (source, topic, key), from the producer and the consumer databases: committed,"
	" delivered, applied (an effect row in inbox.notifications), pending, dead (by"
	" reason), lost (delivered, no effect row), duplicated (more than one effect row),"
	" out_of_order (applied before a lower ordering_seq of its key), phantom (applied,"
	" never committed), delivered_not_applied (delivered, neither a dedup record nor an"
	" effect), takeovers, parked_webhook_calls. One line per class, then the first"
	" --max-ids of each (not of committed, delivered, applied). Exit 0: no violation;"
	" 1: lost, duplicated, out_of_order, phantom or delivered_not_applied (or pending,"
	" with --drained); 2: a bad argument or a database error. docs/operations.md,"
	" \"Proving a run\".",
	ctl_prove_options, CTL_DB_OUTBOX, NULL, /* --inbox-db: opened as CTL_DB_INBOX */
};

/* --- --since ---------------------------------------------------------- */

/* n decimal digits at *p into *out; advances *p. */
static bool
digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return false;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return true;
}

/* An ISO 8601 time: DATE, or DATE[T ]HH:MM[:SS[.fraction]][Z|+HH[:MM]|-HH[:MM]]
 * (no zone: UTC), into out as UTC "YYYY-MM-DDTHH:MM:SS.ffffffZ". A
 * fraction past microseconds is cut. */
static bool
parse_iso(const char *s, char *out, size_t outlen)
{
	const char *p = s;
	int y, mo, d, h = 0, mi = 0, sec = 0, oh = 0, om = 0;
	long usec = 0, off = 0;

	if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
	    !digits(&p, 2, &d))
		return false;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		p++;
		if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi))
			return false;
		if (*p == ':') {
			p++;
			if (!digits(&p, 2, &sec))
				return false;
			if (*p == '.' || *p == ',') {
				int nd = 0;
				for (p++; isdigit((unsigned char)*p); p++, nd++)
					if (nd < 6)
						usec = usec * 10 + (*p - '0');
				if (nd == 0 || nd > 9)
					return false;
				for (; nd < 6; nd++)
					usec *= 10;
			}
		}
		if (*p == 'Z' || *p == 'z') {
			p++;
		} else if (*p == '+' || *p == '-') {
			int sign = *p++ == '-' ? -1 : 1;
			if (!digits(&p, 2, &oh))
				return false;
			if (*p == ':')
				p++;
			if (isdigit((unsigned char)*p) && !digits(&p, 2, &om))
				return false;
			if (oh > 23 || om > 59)
				return false;
			off = sign * (oh * 3600L + om * 60L);
		}
	}
	if (*p != '\0' || y < 1900 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    sec > 59)
		return false;
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
		.tm_min = mi, .tm_sec = sec };
	time_t t = timegm(&tm);
	struct tm back;
	if (gmtime_r(&t, &back) == NULL || back.tm_mday != d || back.tm_mon != mo - 1)
		return false; /* 2025-02-30 */
	t -= off;
	if (gmtime_r(&t, &back) == NULL)
		return false;
	char date[32];
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &back);
	snprintf(out, outlen, "%s.%06ldZ", date, usec);
	return true;
}

/* An age: digits and a unit (ms, s, m, h, d), as ob_cfg_parse_duration
 * reads it; a bare number (milliseconds there) is refused: ambiguous. */
static bool
parse_age(const char *s, int64_t *ms)
{
	size_t n = strlen(s);
	if (n < 2 || !isdigit((unsigned char)s[0]) || !isalpha((unsigned char)s[n - 1]))
		return false;
	return ob_cfg_parse_duration(s, ms) == OB_OK;
}

/* --- printing ---------------------------------------------------------- */

/* Classes whose members text lists (committed, delivered and applied are
 * every message of a good run). */
static bool
listed_in_text(enum prove_class c)
{
	return c != PROVE_COMMITTED && c != PROVE_DELIVERED && c != PROVE_APPLIED;
}

static void
print_item(enum prove_class c, const struct prove_item *it)
{
	char topic[CTL_SHOWN_MAX], key[CTL_SHOWN_MAX], detail[CTL_SHOWN_MAX];

	(void)ob_term_escape(topic, sizeof topic, it->topic, 0);
	(void)ob_term_escape(key, sizeof key, it->key, 0);
	(void)ob_term_escape(detail, sizeof detail, it->detail, 0);
	printf("%s: ", prove_class_name(c));
	if (c == PROVE_TAKEOVERS)
		printf("batch %" PRId64 ", ", it->id);
	else if (c != PROVE_PARKED)
		printf("id %" PRId64 ", ", it->id);
	printf("topic '%s'", topic);
	if (c != PROVE_TAKEOVERS)
		printf(", key '%s'", key);
	if (c == PROVE_DEAD)
		printf(": %s: %s\n", prove_reason_name((enum prove_reason)it->reason), detail);
	else
		printf("%s%s\n", it->detail != NULL ? ": " : "", it->detail != NULL ? detail : "");
}

static void
print_text(const struct prove_result *r, const struct prove_config *cfg, const char *since,
    const char *source)
{
	char shown[CTL_SHOWN_MAX];
	int violations = 0;

	printf("prove: messages created at or after %s, source '%s'\n", since,
	    ctl_shown(source, shown, sizeof shown));
	for (int c = 0; c < PROVE_CLASS_COUNT; c++) {
		const struct prove_list *l = &r->classes[c];
		bool bad = l->count > 0 && prove_class_violates((enum prove_class)c, cfg->drained);
		printf("%-22s %8" PRId64, prove_class_name((enum prove_class)c), l->count);
		if (bad)
			printf("  VIOLATION");
		if (c == PROVE_DEAD && l->count > 0) {
			const char *sep = "  (";
			for (int w = 0; w < PROVE_REASON_COUNT; w++)
				if (r->dead_by_reason[w] > 0) {
					printf("%s%s %" PRId64, sep, prove_reason_name((enum prove_reason)w),
					    r->dead_by_reason[w]);
					sep = ", ";
				}
			printf(")");
		}
		if (c == PROVE_TAKEOVERS && l->count > 0)
			printf("  (in %" PRId64 " batch%s)", r->takeover_batches,
			    r->takeover_batches == 1 ? "" : "es");
		printf("\n");
		violations += bad;
	}
	bool head = false;
	for (int c = 0; c < PROVE_CLASS_COUNT; c++) {
		const struct prove_list *l = &r->classes[c];
		if (!listed_in_text((enum prove_class)c) || l->n == 0)
			continue;
		if (!head)
			printf("\n");
		head = true;
		for (size_t i = 0; i < l->n; i++)
			print_item((enum prove_class)c, &l->items[i]);
		/* takeovers lists batches, and counts takeovers */
		int64_t members = c == PROVE_TAKEOVERS ? r->takeover_batches : l->count;
		if (members > (int64_t)l->n)
			printf("%s: ... and %" PRId64 " more (--max-ids)\n",
			    prove_class_name((enum prove_class)c), members - (int64_t)l->n);
	}
	if (r->partial && r->emptied)
		printf("\nnote: the outbox holds no message any more (housekeeping truncated every"
		       " slot: relay --retention, outboxctl purge): what the inbox applied cannot be"
		       " judged against it (%" PRId64 " inbox identit%s left out of phantom), and the"
		       " consumer purges its dedup records after --dedup-retention: the verdict is"
		       " partial\n", r->unjudged, r->unjudged == 1 ? "y" : "ies");
	else if (r->partial)
		printf("\nnote: the window starts before the oldest message the outbox still holds"
		       " (id %" PRId64 ", created %s) and lower ids were handed out: housekeeping"
		       " truncated them (relay --retention, outboxctl purge; dead letters after"
		       " --dead-retention) or their enqueue rolled back. What is gone is not judged"
		       " (%" PRId64 " inbox identit%s below id %" PRId64 " left out of phantom), and"
		       " the consumer purges its dedup records after --dedup-retention: the verdict"
		       " is partial\n",
		    r->oldest_event_id, r->oldest_event_at, r->unjudged, r->unjudged == 1 ? "y" : "ies",
		    r->oldest_event_id);
	if (r->classes[PROVE_APPLIED].count == 0 && r->classes[PROVE_COMMITTED].count > 0 &&
	    r->other_source_records > 0) {
		char other[CTL_SHOWN_MAX];
		printf("\nnote: nothing was applied under source '%s', but the inbox has %" PRId64
		       " dedup record%s of other sources in the window (one: '%s'): is --source"
		       " right? (outbox-relay derives its source from its database unless given"
		       " --source or --no-source: --derived-source)\n",
		    shown, r->other_source_records, r->other_source_records == 1 ? "" : "s",
		    ctl_shown(r->other_source, other, sizeof other));
	}
	if (violations == 0) {
		printf("verdict: ok\n");
		return;
	}
	printf("verdict: VIOLATION:");
	const char *sep = " ";
	for (int c = 0; c < PROVE_CLASS_COUNT; c++)
		if (r->classes[c].count > 0 && prove_class_violates((enum prove_class)c, cfg->drained)) {
			printf("%s%s %" PRId64, sep, prove_class_name((enum prove_class)c),
			    r->classes[c].count);
			sep = ", ";
		}
	printf("\n");
}

static void
print_json(const struct prove_result *r, const struct prove_config *cfg, const char *since,
    const char *source)
{
	json_t *root = json_object(), *classes = json_object(), *violations = json_array();
	json_t *notes = json_array();

	json_object_set_new(root, "since", ctl_json_text(since));
	json_object_set_new(root, "source", ctl_json_text(source));
	json_object_set_new(root, "drained", json_boolean(cfg->drained));
	json_object_set_new(root, "max_ids", json_integer(cfg->max_ids));
	for (int c = 0; c < PROVE_CLASS_COUNT; c++) {
		const struct prove_list *l = &r->classes[c];
		bool bad = l->count > 0 && prove_class_violates((enum prove_class)c, cfg->drained);
		json_t *o = json_object(), *ids = json_array(), *msgs = json_array();
		json_object_set_new(o, "count", json_integer(l->count));
		json_object_set_new(o, "violation", json_boolean(bad));
		for (size_t i = 0; i < l->n; i++) {
			const struct prove_item *it = &l->items[i];
			json_t *m = json_object();
			if (c != PROVE_PARKED) {
				json_array_append_new(ids, json_integer(it->id));
				json_object_set_new(m, c == PROVE_TAKEOVERS ? "batch" : "id",
				    json_integer(it->id));
			}
			json_object_set_new(m, "topic", ctl_json_text(it->topic));
			if (c != PROVE_TAKEOVERS)
				json_object_set_new(m, "key", ctl_json_text(it->key));
			if (c == PROVE_DEAD)
				json_object_set_new(m, "reason",
				    json_string(prove_reason_name((enum prove_reason)it->reason)));
			if (it->detail != NULL)
				json_object_set_new(m, c == PROVE_DEAD ? "last_error" : "detail",
				    ctl_json_text(it->detail));
			json_array_append_new(msgs, m);
		}
		if (c != PROVE_PARKED)
			json_object_set_new(o, c == PROVE_TAKEOVERS ? "batch_ids" : "ids", ids);
		else
			json_decref(ids);
		json_object_set_new(o, c == PROVE_TAKEOVERS ? "batches" :
		    c == PROVE_PARKED ? "calls" : "messages", msgs);
		if (c == PROVE_DEAD) {
			json_t *by = json_object();
			for (int w = 0; w < PROVE_REASON_COUNT; w++)
				json_object_set_new(by, prove_reason_name((enum prove_reason)w),
				    json_integer(r->dead_by_reason[w]));
			json_object_set_new(o, "by_reason", by);
		}
		if (c == PROVE_TAKEOVERS)
			json_object_set_new(o, "batch_count", json_integer(r->takeover_batches));
		json_object_set_new(classes, prove_class_name((enum prove_class)c), o);
		if (bad)
			json_array_append_new(violations, json_string(prove_class_name((enum prove_class)c)));
	}
	json_object_set_new(root, "verdict",
	    json_string(json_array_size(violations) > 0 ? "violation" : "ok"));
	json_object_set_new(root, "violations", violations);
	json_object_set_new(root, "partial", json_boolean(r->partial));
	if (r->oldest_event_id > 0)
		json_object_set_new(root, "oldest_retained",
		    json_pack("{sIss}", "id", (json_int_t)r->oldest_event_id, "created_at",
		        r->oldest_event_at));
	else
		json_object_set_new(root, "oldest_retained", json_null());
	json_object_set_new(root, "unjudged", json_integer(r->unjudged));
	json_object_set_new(root, "emptied", json_boolean(r->emptied));
	if (r->partial)
		json_array_append_new(notes, json_string(r->emptied ? "the outbox holds no message"
		    " any more: what the inbox applied is not judged" : "the window starts before the"
		    " oldest message the outbox still holds and lower ids were handed out: what"
		    " housekeeping removed is not judged"));
	if (r->classes[PROVE_APPLIED].count == 0 && r->classes[PROVE_COMMITTED].count > 0 &&
	    r->other_source_records > 0)
		json_array_append_new(notes, json_string("nothing was applied under this source,"
		    " but the inbox has dedup records of other sources in the window: is --source"
		    " right?"));
	json_object_set_new(root, "other_source_records", json_integer(r->other_source_records));
	json_object_set_new(root, "notes", notes);
	json_object_set_new(root, "classes", classes);
	ctl_print_json(root, CTL_JSON_FLAGS);
}

/* --- the command -------------------------------------------------------- */

int
ctl_prove(int argc, char **argv)
{
	struct prove_config cfg;
	char since[SINCE_MAX], source[OB_WIRE_MAX_SOURCE + 1] = "", err[1024];
	char shown[CTL_SHOWN_MAX];
	char **pos = NULL;
	int npos, code;
	int64_t ago_ms = -1;
	PGconn *outbox = NULL, *inbox = NULL;
	struct prove_result r;
	bool have_result = false;

	memset(&cfg, 0, sizeof cfg);
	if ((code = ctl_parse(&cmd, &cfg, argc, argv, &pos, &npos)) >= 0) {
		if (code != PROVE_EXIT_OK) /* a bad flag (2), out of memory (1) */
			code = PROVE_EXIT_ERROR;
		goto out;
	}
	code = PROVE_EXIT_ERROR;
	if (!ctl_no_arguments(&cmd, pos, npos))
		goto out;
	if (!parse_iso(cfg.since, since, sizeof since) && !parse_age(cfg.since, &ago_ms)) {
		fprintf(stderr, "outboxctl prove: --since '%s': want an ISO 8601 time"
		    " (2025-01-31T12:00:00Z; no zone = UTC) or an age (30s, 10m, 2h, 7d)\n",
		    ctl_shown(cfg.since, shown, sizeof shown));
		goto out;
	}
	if (cfg.source != NULL && cfg.derived_source) {
		fprintf(stderr, "outboxctl prove: --source and --derived-source exclude each other\n");
		goto out;
	}
	if (cfg.source != NULL && cfg.source[0] != '\0') {
		if (ob_source_check(cfg.source, err, sizeof err) != OB_OK) {
			fprintf(stderr, "outboxctl prove: --source '%s': must be 1..%d bytes of"
			    " [A-Za-z0-9._-] (or empty: the empty source)\n",
			    ctl_shown(cfg.source, shown, sizeof shown), OB_WIRE_MAX_SOURCE);
			goto out;
		}
		snprintf(source, sizeof source, "%s", cfg.source);
	}
	if ((outbox = ctl_connect(&cmd, cfg.db)) == NULL)
		goto out;
	/* the inbox: the dedup identity with its source (inbox 008) */
	if (ctl_open(CTL_DB_INBOX, cfg.inbox_db, &inbox, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl prove: inbox: %s\n", err);
		goto out;
	}
	if (cfg.derived_source && ob_source_derive(outbox, source, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl prove: %s\n", err);
		goto out;
	}
	if (ago_ms >= 0 && prove_since_ago(outbox, ago_ms, since, sizeof since, err, sizeof err) !=
	    OB_OK) {
		fprintf(stderr, "outboxctl prove: %s\n", err);
		goto out;
	}
	const struct prove_query q = { since, source, cfg.max_ids };
	if (prove_run(outbox, inbox, &q, &r, err, sizeof err) != OB_OK) {
		fprintf(stderr, "outboxctl prove: %s\n", err);
		goto out;
	}
	have_result = true;
	if (cfg.json)
		print_json(&r, &cfg, since, source);
	else
		print_text(&r, &cfg, since, source);
	code = PROVE_EXIT_OK;
	for (int c = 0; c < PROVE_CLASS_COUNT; c++)
		if (r.classes[c].count > 0 && prove_class_violates((enum prove_class)c, cfg.drained))
			code = PROVE_EXIT_VIOLATION;
out:
	if (have_result)
		prove_result_free(&r);
	if (outbox != NULL)
		PQfinish(outbox);
	if (inbox != NULL)
		PQfinish(inbox);
	free(pos);
	ob_cfg_free(ctl_prove_options, &cfg);
	return code;
}
