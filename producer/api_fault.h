/*
 * api_fault.h - the fault points a create fires (api.h, struct
 * producer_faults), for the fault tests of every mode and endpoint. Each
 * does nothing when cfg has no faults or the point does not fire.
 */
#ifndef OUTBOX_PRODUCER_API_FAULT_H
#define OUTBOX_PRODUCER_API_FAULT_H

#include <stdbool.h>

#include "api.h"

/* Sleep faults->slow_ms. Blocks. */
void api_fault_slow(const struct api_config *cfg);
/* Kill the process at once, where naming the point (ob_fault_die). */
void api_fault_crash(const struct api_config *cfg, const char *where);
/* true: close the connection without an answer (after COMMIT). */
bool api_fault_lose(const struct api_config *cfg);

#endif
