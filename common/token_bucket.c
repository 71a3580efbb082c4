/*
 * token_bucket.c - a bucket of tokens and the retry budget made of one
 * (token_bucket.h).
 */
#include <pthread.h>

#include "outbox/clock.h"
#include "outbox/err.h"
#include "outbox/token_bucket.h"

int
ob_token_bucket_init(struct ob_token_bucket *b, double capacity, double refill_per_s)
{
	if (pthread_mutex_init(&b->mu, NULL) != 0)
		return OB_ENOMEM;
	b->capacity = capacity;
	b->tokens = capacity;
	b->refill_per_s = refill_per_s;
	b->last_ms = ob_mono_ms();
	return OB_OK;
}

void
ob_token_bucket_fini(struct ob_token_bucket *b)
{
	pthread_mutex_destroy(&b->mu);
}

/* Caller holds b->mu. */
static void
refill(struct ob_token_bucket *b)
{
	int64_t now = ob_mono_ms();
	if (b->refill_per_s > 0 && now > b->last_ms) {
		b->tokens += b->refill_per_s * (double)(now - b->last_ms) / 1000.0;
		if (b->tokens > b->capacity)
			b->tokens = b->capacity;
	}
	b->last_ms = now;
}

bool
ob_token_bucket_take(struct ob_token_bucket *b, double cost)
{
	pthread_mutex_lock(&b->mu);
	refill(b);
	bool ok = b->tokens >= cost;
	if (ok)
		b->tokens -= cost;
	pthread_mutex_unlock(&b->mu);
	return ok;
}

void
ob_token_bucket_put(struct ob_token_bucket *b, double n)
{
	pthread_mutex_lock(&b->mu);
	refill(b);
	b->tokens = b->tokens + n > b->capacity ? b->capacity : b->tokens + n;
	pthread_mutex_unlock(&b->mu);
}

double
ob_token_bucket_level(struct ob_token_bucket *b)
{
	pthread_mutex_lock(&b->mu);
	refill(b);
	double t = b->tokens;
	pthread_mutex_unlock(&b->mu);
	return t;
}

bool
ob_retry_budget_take(struct ob_token_bucket *b, bool timed_out, double *cost)
{
	*cost = timed_out ? OB_RETRY_BUDGET_TIMEOUT_COST : OB_RETRY_BUDGET_COST;
	return ob_token_bucket_take(b, *cost);
}

void
ob_retry_budget_success(struct ob_token_bucket *b, double retry_cost)
{
	ob_token_bucket_put(b, retry_cost > 0 ? retry_cost : OB_RETRY_BUDGET_SUCCESS_REFILL);
}
