/*
 * clock.h - time for every program: a monotonic clock for durations and
 * deadlines, the wall clock for timestamps, and a sleep that lasts.
 */
#ifndef OUTBOX_CLOCK_H
#define OUTBOX_CLOCK_H
#include <stdint.h>
#include <time.h>

/* Monotonic time (CLOCK_MONOTONIC): for durations and deadlines. */
int64_t ob_mono_ms(void);
int64_t ob_mono_us(void);
int64_t ob_mono_ns(void);
double ob_mono_s(void);

/* Boot time (CLOCK_BOOTTIME), microseconds: monotonic, never stepped, and
 * counting a suspend (which CLOCK_MONOTONIC does not): for carrying
 * another clock forward from a reading. */
int64_t ob_boot_us(void);

/* Wall time (CLOCK_REALTIME), microseconds since the epoch. */
int64_t ob_wall_us(void);

/* The wall time now in UTC, ISO 8601 to the millisecond
 * ("2026-11-30T16:20:01.123Z"), into out (OB_WALL_ISO_LEN bytes): the
 * log's and the tool ledger's timestamps. */
#define OB_WALL_ISO_LEN 64 /* room for any year the format could print */
void ob_wall_iso(char out[OB_WALL_ISO_LEN]);

/* The wall time ms from now, for pthread_cond_timedwait. */
struct timespec ob_wall_deadline(int64_t ms);

/* Sleep ms (<= 0: not at all), the whole time: a signal that interrupts
 * it (EINTR) resumes it for what is left. A loop that must wake on a stop
 * signal waits on the signal pipe instead (common/sig.h). */
void ob_sleep_ms(int64_t ms);

#endif
