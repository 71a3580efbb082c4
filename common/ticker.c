/*
 * ticker.c - a thread that does its work every interval until stopped
 * (ticker.h). The stop flag is atomic, so that a pass can ask it without
 * a lock; it is set under the ticker's mutex, so that the wait between
 * passes (on the condition variable, under that mutex) cannot miss it.
 *
 * Never: run the work with the mutex held (a pass may take as long as a
 * database round trip, and the stop must not wait for the lock meanwhile).
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/ticker.h"

static void *
ticker_main(void *arg)
{
	struct ob_ticker *t = arg;
	while (!atomic_load(&t->stopping)) {
		t->work(t->arg);
		/* every_ms from now on the condition variable's clock */
		int64_t ns = ob_mono_ns() + t->every_ms * 1000000;
		struct timespec until = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
		pthread_mutex_lock(&t->mu);
		while (!atomic_load(&t->stopping) &&
		    pthread_cond_timedwait(&t->cv, &t->mu, &until) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&t->mu);
	}
	return NULL;
}

int
ob_ticker_start(struct ob_ticker *t, int64_t every_ms, void (*work)(void *arg), void *arg)
{
	pthread_condattr_t ca;
	t->every_ms = every_ms;
	t->work = work;
	t->arg = arg;
	atomic_store(&t->stopping, false);
	pthread_mutex_init(&t->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t->thread, NULL, ticker_main, t) != 0) {
		pthread_cond_destroy(&t->cv);
		pthread_mutex_destroy(&t->mu);
		return OB_ENOMEM;
	}
	t->running = true;
	return OB_OK;
}

bool
ob_ticker_stopping(struct ob_ticker *t)
{
	return atomic_load(&t->stopping);
}

bool
ob_ticker_stop(struct ob_ticker *t)
{
	if (!t->running)
		return false;
	pthread_mutex_lock(&t->mu);
	atomic_store(&t->stopping, true);
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	t->running = false;
	return true;
}
