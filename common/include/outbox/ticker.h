/*
 * ticker.h - a background thread that does one piece of work every
 * interval until it is stopped: the consumer's refusal watch and inbox
 * purge, the producer's key expiry, outboxctl web's poller. One place for
 * the thread, its stop flag and its wake-up, so that every such thread
 * stops the same way: at once between two passes, after the pass in
 * progress otherwise.
 *
 * The work runs on the ticker's thread, never on the caller's; what it
 * touches is the owner's business (its own connection, atomics, a mutex
 * of its own). The wait between passes is on CLOCK_MONOTONIC: a stepped
 * wall clock neither shortens nor stretches it.
 */
#ifndef OUTBOX_TICKER_H
#define OUTBOX_TICKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Embed it in its owner, zeroed (it must not move while the thread runs);
 * read and change it only through the functions below. */
struct ob_ticker {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;     /* on CLOCK_MONOTONIC */
	bool running;          /* started and not yet stopped */
	atomic_bool stopping;  /* set under mu (the wait's wake-up), read anywhere */
	int64_t every_ms;
	void (*work)(void *arg);
	void *arg;
};

/* Start t's thread: work(arg) at once, then every every_ms (counted from
 * the end of a pass) until ob_ticker_stop. t must be zeroed or stopped.
 * OB_OK, or OB_ENOMEM (no thread: t holds nothing, and stopping it is a
 * no-op). arg is borrowed and must outlive the thread. */
int ob_ticker_start(struct ob_ticker *t, int64_t every_ms, void (*work)(void *arg), void *arg);

/* Whether ob_ticker_stop has been called: for a long pass to end early
 * between its steps. The work's thread (or any, while t runs). */
bool ob_ticker_stopping(struct ob_ticker *t);

/* Wake the thread, wait for the pass in progress to end, join it. Returns
 * whether there was a thread to stop (false on a zeroed t, one whose
 * start failed, one already stopped). The owner's thread, never the work
 * itself. */
bool ob_ticker_stop(struct ob_ticker *t);

#endif
