/*
 * fault.h - fault injection points: counters that fire N times.
 *
 * Faults are part of the product (a user demonstrates the pattern with
 * them), set by flag or environment. A point fires while its counter is
 * above zero, decrementing it each time; thread-safe. Counters are per
 * process (a forked worker gets its own copy).
 */
#ifndef OUTBOX_FAULT_H
#define OUTBOX_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define OB_FAULT_MAX_FIRES 1000000000 /* the largest N of a fault flag */

struct ob_fault {
	const char *name;            /* stable name, logged when it fires */
	_Atomic int64_t remaining;   /* fires this many more times */
};

/* Arm f to fire n more times (n <= 0 disarms). */
void ob_fault_arm(struct ob_fault *f, int64_t n);

/* True (and one fewer left) when f is armed; logs "fault.fired name=...". */
bool ob_fault_fire(struct ob_fault *f);

/* Kill the calling process at once, as a crash would (SIGKILL to self):
 * no atexit handlers, no flushing, no goodbyes. */
_Noreturn void ob_fault_die(const char *where);

#endif
