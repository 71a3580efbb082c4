/*
 * tally.c - a worker's counters and the lines that report them (tally.h).
 * Must never block: it runs between a frame's reply and its record.
 */
#include <inttypes.h>

#include "outbox/log.h"
#include "tally.h"

void
relay_tally_recorded(struct relay_tally *t, const struct relay_batch *b,
    const struct relay_outcome *o)
{
	char q[600];
	for (uint32_t i = 0; i < b->n; i++) {
		switch (o[i].kind) {
		case RELAY_OUT_DELIVERED: RELAY_TALLY_ADD(t, delivered, 1); break;
		case RELAY_OUT_RELEASE: RELAY_TALLY_ADD(t, released, 1); break;
		case RELAY_OUT_DEAD:
			RELAY_TALLY_ADD(t, dead, 1);
			ob_warn("relay.message.dead", "id=%" PRIu64 " attempt=%u err=%s", o[i].id,
			    b->msgs[i].attempt, ob_log_q(o[i].error, q, sizeof(q)));
			break;
		case RELAY_OUT_RETRY: RELAY_TALLY_ADD(t, retried, 1); break;
		}
		if (t->metrics == NULL)
			continue;
		if (o[i].kind == RELAY_OUT_RELEASE) {
			ob_metric_inc(t->metrics->released);
			continue;
		}
		const struct ob_wire_msg *m = &b->msgs[i];
		struct relay_topic_metrics *tm = relay_metrics_topic(t->metrics, &t->topics,
		    m->topic, m->topic_len);
		ob_metric_inc(o[i].kind == RELAY_OUT_DELIVERED ? tm->delivered
		    : o[i].kind == RELAY_OUT_DEAD ? tm->dead : tm->retried);
	}
}

void
relay_tally_log_progress(struct relay_tally *t, const char *event)
{
	ob_info(event, "claimed=%" PRIu64 " delivered=%" PRIu64
	    " retried=%" PRIu64 " dead=%" PRIu64 " fenced_out=%" PRIu64,
	    atomic_load(&t->mine.claimed), atomic_load(&t->mine.delivered),
	    atomic_load(&t->mine.retried), atomic_load(&t->mine.dead),
	    atomic_load(&t->mine.fenced_out));
}
