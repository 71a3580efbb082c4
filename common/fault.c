/*
 * fault.c - fault injection counters (see fault.h).
 */
#include <signal.h>
#include <unistd.h>

#include "outbox/fault.h"
#include "outbox/log.h"

void
ob_fault_arm(struct ob_fault *f, int64_t n)
{
	atomic_store(&f->remaining, n > 0 ? n : 0);
}

bool
ob_fault_fire(struct ob_fault *f)
{
	int64_t left = atomic_load(&f->remaining);
	while (left > 0) {
		if (atomic_compare_exchange_weak(&f->remaining, &left, left - 1)) {
			ob_warn("fault.fired", "fault=%s left=%lld", f->name, (long long)(left - 1));
			return true;
		}
	}
	return false;
}

_Noreturn void
ob_fault_die(const char *where)
{
	ob_warn("fault.die", "where=%s", where);
	kill(getpid(), SIGKILL);
	for (;;)
		pause();
}
