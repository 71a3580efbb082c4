/*
 * token_bucket.h - a bucket of tokens that what it limits takes from and
 * successes or time put back, and the retry budget made of one.
 *
 * One module for every budget and rate limit: the retry budget of the
 * agent-side client (one per process: send, submit and the MCP server)
 * and of the relay (one per destination in each worker), and the
 * operator's rate limit per route to come. Thread-safe: a mutex per
 * bucket (the MCP server's calls may overlap).
 */
#ifndef OUTBOX_TOKEN_BUCKET_H
#define OUTBOX_TOKEN_BUCKET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct ob_token_bucket {
	pthread_mutex_t mu;
	double tokens;       /* now, 0..capacity */
	double capacity;
	double refill_per_s; /* added with time; 0: only ob_token_bucket_put */
	int64_t last_ms;     /* ob_mono_ms() of the last refill */
};

/* Full, with capacity tokens (> 0). OB_OK, or OB_ENOMEM (the mutex). */
int ob_token_bucket_init(struct ob_token_bucket *b, double capacity, double refill_per_s);
void ob_token_bucket_fini(struct ob_token_bucket *b);

/* Take cost tokens when there are that many: true; else false, nothing
 * taken. */
bool ob_token_bucket_take(struct ob_token_bucket *b, double cost);

/* Put n tokens back, up to the capacity. */
void ob_token_bucket_put(struct ob_token_bucket *b, double n);

/* The tokens there are now (after the refill due). */
double ob_token_bucket_level(struct ob_token_bucket *b);

/*
 * The retry budget, as the AWS SDKs define theirs (the "retry quota"
 * of their standard mode, since 2016): retries are selfish, so a process
 * pays for each from a bucket that only successes refill.
 *   - the bucket starts full with OB_RETRY_BUDGET_CAPACITY tokens;
 *   - a retry costs OB_RETRY_BUDGET_COST, or OB_RETRY_BUDGET_TIMEOUT_COST
 *     after a timeout (a slow server is likelier overloaded);
 *   - a success puts back what its retries cost (its last one), or
 *     OB_RETRY_BUDGET_SUCCESS_REFILL when it needed none;
 *   - an empty bucket refuses the retry: the caller stops (the client
 *     reports its last outcome) or waits its slow rate (the relay).
 * While everything fails, a process so makes at most CAPACITY / COST
 * retries in all (100), whatever its calls' own attempt limits.
 */
#define OB_RETRY_BUDGET_CAPACITY 500
#define OB_RETRY_BUDGET_COST 5
#define OB_RETRY_BUDGET_TIMEOUT_COST 10
#define OB_RETRY_BUDGET_SUCCESS_REFILL 1

/* A retry after a failure (timed_out: it was a timeout): true and its
 * cost in *cost when the budget pays for it; false when it is spent. */
bool ob_retry_budget_take(struct ob_token_bucket *b, bool timed_out, double *cost);

/* A success; retry_cost: what its last retry cost (0 when it had none). */
void ob_retry_budget_success(struct ob_token_bucket *b, double retry_cost);

#endif
