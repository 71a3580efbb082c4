/*
 * api_fault.c - the producer's fault points (api_fault.h): slow, crash
 * and lose-response, each a counter of its own (outbox/fault.h) that the
 * fault tests arm. Where each fires is the caller's choice, documented
 * with struct producer_faults (api.h).
 */
#include "api_fault.h"
#include "outbox/clock.h"
#include "outbox/fault.h"

void
api_fault_slow(const struct api_config *cfg)
{
	if (cfg->faults != NULL && ob_fault_fire(&cfg->faults->slow))
		ob_sleep_ms(cfg->faults->slow_ms);
}

void
api_fault_crash(const struct api_config *cfg, const char *where)
{
	if (cfg->faults != NULL && ob_fault_fire(&cfg->faults->crash))
		ob_fault_die(where);
}

bool
api_fault_lose(const struct api_config *cfg)
{
	return cfg->faults != NULL && ob_fault_fire(&cfg->faults->lose_response);
}
