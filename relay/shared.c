/*
 * shared.c - the state the relay's whole process tree shares: fault
 * counters and totals, in one anonymous shared mapping made before fork.
 *
 * Never holds a pointer into a process's heap: only atomics, the names
 * of the fault points (string literals, at the same address in every
 * forked child) and the metric handles (into the registry's own shared
 * mapping, made here, before any fork).
 */
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>

#include "routes.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "relay.h"

/* Register the metrics, one breaker gauge per destination of the route
 * table (the order every worker's deliverer has). */
static int
metrics_new(struct relay_shared *s, const struct relay_config *cfg)
{
	const struct relay_routes *rt = cfg->route_table;
	const char *urls[RELAY_METRICS_MAX_DESTS];
	int n = 0;
	for (; rt != NULL && n < rt->nurls && n < RELAY_METRICS_MAX_DESTS; n++)
		urls[n] = rt->urls[n];
	if (rt != NULL && rt->nurls > RELAY_METRICS_MAX_DESTS)
		ob_warn("relay.metrics.too_many_destinations", "destinations=%d shown=%d",
		    rt->nurls, RELAY_METRICS_MAX_DESTS);
	return relay_metrics_init(&s->metrics, urls, n);
}

struct relay_shared *
relay_shared_new(const struct relay_config *cfg)
{
	void *p = mmap(NULL, sizeof(struct relay_shared), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	struct relay_shared *s = p;
	memset(s, 0, sizeof(*s));
	s->die_after_claim.name = "relay.die_after_claim";
	s->die_after_send.name = "relay.die_after_send";
	s->stall_after_claim.name = "relay.stall_after_claim";
	ob_fault_arm(&s->die_after_claim, cfg->fault_die_after_claim);
	ob_fault_arm(&s->die_after_send, cfg->fault_die_after_send);
	ob_fault_arm(&s->stall_after_claim, cfg->fault_stall_after_claim);
	if (metrics_new(s, cfg) != OB_OK) {
		munmap(s, sizeof(*s));
		return NULL;
	}
	return s;
}

void
relay_shared_free(struct relay_shared *s)
{
	if (s != NULL) {
		relay_metrics_fini(&s->metrics);
		munmap(s, sizeof(*s));
	}
}

void
relay_totals_log(const char *event, const char *prefix, const struct relay_totals *t)
{
	ob_info(event, "%sclaimed=%" PRIu64 " delivered=%" PRIu64 " retried=%" PRIu64
	    " dead=%" PRIu64 " released=%" PRIu64 " fenced_out=%" PRIu64
	    " frames_sent=%" PRIu64 " frames_failed=%" PRIu64 " retry_budget_spent=%" PRIu64
	    " purged=%" PRIu64,
	    prefix, atomic_load(&t->claimed), atomic_load(&t->delivered),
	    atomic_load(&t->retried), atomic_load(&t->dead), atomic_load(&t->released),
	    atomic_load(&t->fenced_out), atomic_load(&t->frames_sent),
	    atomic_load(&t->frames_failed), atomic_load(&t->budget_spent),
	    atomic_load(&t->purged));
}
