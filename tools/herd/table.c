/*
 * table.c - print outbox-herd's results (table.h). Formatting only: every
 * number comes in the struct; the text and the JSON say the same.
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
			    "\"ms\":%.2f}", j ? "," : "", t->clients[j], c->calls, c->failed, c->ms);
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
}
