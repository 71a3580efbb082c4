/*
 * table.c - print outbox-herd's results (table.h): the simulation's table
 * and a --target run's report. Formatting only: every number comes in the
 * struct; the text and the JSON say the same.
 */
#include <inttypes.h>

#include "table.h"

#define TABLE_LABEL_WIDTH 20 /* the longest label, "Decorrelated Jitter", and a space */
#define TABLE_CELL_WIDTH 25  /* "  %6.0f calls %7.0f ms" */

void
herd_table_text(FILE *f, const struct herd_table *t)
{
	fprintf(f, "Thundering herd (synthetic): clients update one row under optimistic"
	    " concurrency; each cell the mean of %" PRIu32 " run%s, seed %" PRIu64 "\n",
	    t->runs, t->runs == 1 ? "" : "s", t->seed);
	fprintf(f, "backoff base %g ms, cap %g ms; network |N(%g, %g)| ms one way;"
	    " calls = write requests, ms = until every client is done\n\n",
	    t->range.base_ms, t->range.cap_ms, t->delay_mean_ms, t->delay_sd_ms);
	fprintf(f, "%-*s", TABLE_LABEL_WIDTH, "strategy");
	for (size_t j = 0; j < t->nclients; j++) {
		char head[32];
		snprintf(head, sizeof(head), "%" PRIu32 " clients", t->clients[j]);
		fprintf(f, "%*s", TABLE_CELL_WIDTH, head);
	}
	fputc('\n', f);
	for (size_t i = 0; i < t->nstrategies; i++) {
		fprintf(f, "%-*s", TABLE_LABEL_WIDTH, ob_jitter_strategies[t->strategies[i]].label);
		for (size_t j = 0; j < t->nclients; j++) {
			const struct herd_cell *c = &t->cells[i * t->nclients + j];
			fprintf(f, "  %6.0f calls %7.0f ms", c->calls, c->ms);
		}
		fputc('\n', f);
	}
}

/* A cell's ,"histogram":{...} member (table.h). */
static void
json_histogram(FILE *f, const struct herd_histogram *h)
{
	fprintf(f, ",\"histogram\":{\"run\":%" PRIu32 ",\"calls\":%" PRIu64 ",\"ms\":%.2f,"
	    "\"bin_ms\":%" PRIu64 ",\"counts\":[", h->run, h->calls, h->ms, h->bin_ms);
	for (uint32_t i = 0; i < h->bins; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", h->counts[i]);
	fputs("]}", f);
}

void
herd_table_json(FILE *f, const struct herd_table *t)
{
	/* names and labels are fixed ASCII without quotes or backslashes */
	fprintf(f, "{\"seed\":%" PRIu64 ",\"runs\":%" PRIu32 ",\"base_ms\":%g,\"cap_ms\":%g,"
	    "\"delay_mean_ms\":%g,\"delay_sd_ms\":%g,\"clients\":[",
	    t->seed, t->runs, t->range.base_ms, t->range.cap_ms, t->delay_mean_ms,
	    t->delay_sd_ms);
	for (size_t j = 0; j < t->nclients; j++)
		fprintf(f, "%s%" PRIu32, j ? "," : "", t->clients[j]);
	fputs("],\"strategies\":[", f);
	for (size_t i = 0; i < t->nstrategies; i++) {
		const struct ob_jitter_strategy *s = &ob_jitter_strategies[t->strategies[i]];
		fprintf(f, "%s{\"name\":\"%s\",\"label\":\"%s\",\"cells\":[", i ? "," : "",
		    s->name, s->label);
		for (size_t j = 0; j < t->nclients; j++) {
			const struct herd_cell *c = &t->cells[i * t->nclients + j];
			fprintf(f, "%s{\"clients\":%" PRIu32 ",\"calls\":%.2f,\"failed\":%.2f,"
			    "\"ms\":%.2f", j ? "," : "", t->clients[j], c->calls, c->failed, c->ms);
			if (t->histograms != NULL)
				json_histogram(f, &t->histograms[i * t->nclients + j]);
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
}

/* s as a JSON string, quotes included: '"', '\' and control bytes escaped. */
static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* A time of the report: "-" (text) or null (JSON) when it never came. */
static void
text_ms(FILE *f, int width, double ms)
{
	if (ms < 0)
		fprintf(f, "%*s", width, "-");
	else
		fprintf(f, "%*.0f", width, ms);
}

static void
json_ms(FILE *f, const char *name, double ms)
{
	if (ms < 0)
		fprintf(f, ",\"%s\":null", name);
	else
		fprintf(f, ",\"%s\":%.1f", name, ms);
}

void
herd_target_text(FILE *f, const struct herd_target_report *r)
{
	const struct herd_target_params *p = r->params;
	const struct herd_target_result *x = r->result;
	fprintf(f, "Against %s%s: %" PRIu32 " clients each POST once (Idempotency-Key %s-<i>),"
	    " retried on no connection, no answer, 409, 429 and 5xx; Retry-After ignored\n",
	    p->url, HERD_TARGET_PATH, p->clients, p->key_prefix);
	fprintf(f, "backoff base %g ms, cap %g ms; deadline %" PRId64 " ms, %" PRId64 " ms an"
	    " attempt; requests = every attempt; ms from the start; recover = from the first"
	    " 2xx to the last\n\n", p->range.base_ms, p->range.cap_ms, p->deadline_ms,
	    p->request_timeout_ms);
	fprintf(f, "%-*s%10s%11s%14s%10s%12s\n", TABLE_LABEL_WIDTH, "strategy", "requests",
	    "completed", "first 2xx ms", "done ms", "recover ms");
	char done[32];
	snprintf(done, sizeof(done), "%" PRIu32 "/%" PRIu32, x->completed, p->clients);
	fprintf(f, "%-*s%10" PRIu64 "%11s", TABLE_LABEL_WIDTH,
	    ob_jitter_strategies[p->strategy].label, x->requests, done);
	text_ms(f, 14, x->first_ok_ms);
	text_ms(f, 10, x->done_ms);
	text_ms(f, 12, x->recover_ms);
	fprintf(f, "\nanswers: %" PRIu64 " 2xx, %" PRIu64 " 409, %" PRIu64 " 429, %" PRIu64
	    " 5xx, %" PRIu64 " other; %" PRIu64 " not connected, %" PRIu64 " without an answer;"
	    " %" PRIu32 " refused, %" PRIu32 " gave up\n", x->status_2xx, x->status_409,
	    x->status_429, x->status_5xx, x->status_other, x->not_connected, x->lost, x->refused,
	    x->gave_up);
}

void
herd_target_json(FILE *f, const struct herd_target_report *r)
{
	const struct herd_target_params *p = r->params;
	const struct herd_target_result *x = r->result;
	const struct ob_jitter_strategy *s = &ob_jitter_strategies[p->strategy];
	fputs("{\"target\":", f);
	json_str(f, p->url);
	fprintf(f, ",\"path\":\"%s\",\"topic\":\"%s\",\"clients\":%" PRIu32 ",\"seed\":%" PRIu64
	    ",\"key_prefix\":", HERD_TARGET_PATH, HERD_TARGET_TOPIC, p->clients, p->seed);
	json_str(f, p->key_prefix);
	fprintf(f, ",\"base_ms\":%g,\"cap_ms\":%g,\"deadline_ms\":%" PRId64 ",\"request_timeout_ms\":"
	    "%" PRId64 ",\"started_unix_ms\":%" PRId64 ",\"strategies\":[", p->range.base_ms,
	    p->range.cap_ms, p->deadline_ms, p->request_timeout_ms, x->started_unix_ms);
	fprintf(f, "{\"name\":\"%s\",\"label\":\"%s\",\"requests\":%" PRIu64 ",\"completed\":%"
	    PRIu32 ",\"refused\":%" PRIu32 ",\"gave_up\":%" PRIu32 ",\"status_2xx\":%" PRIu64
	    ",\"status_409\":%" PRIu64 ",\"status_429\":%" PRIu64 ",\"status_5xx\":%" PRIu64
	    ",\"status_other\":%" PRIu64 ",\"not_connected\":%" PRIu64 ",\"lost\":%" PRIu64,
	    s->name, s->label, x->requests, x->completed, x->refused, x->gave_up, x->status_2xx,
	    x->status_409, x->status_429, x->status_5xx, x->status_other, x->not_connected, x->lost);
	json_ms(f, "first_failure_ms", x->first_failure_ms);
	json_ms(f, "first_ok_ms", x->first_ok_ms);
	json_ms(f, "done_ms", x->done_ms);
	json_ms(f, "recover_ms", x->recover_ms);
	fputs("}]}\n", f);
}
