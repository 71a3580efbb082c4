/*
 * clock.c - monotonic and wall time, deadlines and sleep (clock.h).
 */
#include <errno.h>
#include <stdio.h>

#include "outbox/clock.h"

static struct timespec
now(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts;
}

int64_t
ob_mono_ns(void)
{
	struct timespec ts = now(CLOCK_MONOTONIC);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
ob_mono_us(void)
{
	return ob_mono_ns() / 1000;
}

int64_t
ob_mono_ms(void)
{
	return ob_mono_ns() / 1000000;
}

double
ob_mono_s(void)
{
	return (double)ob_mono_ns() / 1e9;
}

int64_t
ob_boot_us(void)
{
	struct timespec ts = now(CLOCK_BOOTTIME);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
ob_wall_us(void)
{
	struct timespec ts = now(CLOCK_REALTIME);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timespec
ob_wall_deadline(int64_t ms)
{
	struct timespec ts = now(CLOCK_REALTIME);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

void
ob_sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void
ob_wall_iso(char out[OB_WALL_ISO_LEN])
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(out, OB_WALL_ISO_LEN, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	    ts.tv_nsec / 1000000L);
}
