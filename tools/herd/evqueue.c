/*
 * evqueue.c - a fixed-size binary min-heap of events keyed by (time, push
 * order). Owns its array; never grows: the simulation knows the most
 * events it can have in flight (one per client).
 */
#include <stdlib.h>

#include "evqueue.h"
#include "outbox/err.h"

int
herd_evq_init(struct herd_evq *q, size_t cap)
{
	struct herd_event *heap = calloc(cap > 0 ? cap : 1, sizeof(*heap));
	if (heap == NULL)
		return OB_ENOMEM;
	q->heap = heap;
	q->cap = cap;
	q->n = 0;
	q->next_seq = 0;
	return OB_OK;
}

void
herd_evq_fini(struct herd_evq *q)
{
	free(q->heap);
	q->heap = NULL;
	q->n = q->cap = 0;
}

void
herd_evq_clear(struct herd_evq *q)
{
	q->n = 0;
	q->next_seq = 0;
}

static bool
before(const struct herd_event *a, const struct herd_event *b)
{
	return a->at_ms < b->at_ms || (a->at_ms == b->at_ms && a->seq < b->seq);
}

bool
herd_evq_push(struct herd_evq *q, const struct herd_event *e)
{
	if (q->n >= q->cap)
		return false;
	size_t i = q->n++;
	struct herd_event ev = *e;
	ev.seq = q->next_seq++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!before(&ev, &q->heap[parent]))
			break;
		q->heap[i] = q->heap[parent];
		i = parent;
	}
	q->heap[i] = ev;
	return true;
}

bool
herd_evq_pop(struct herd_evq *q, struct herd_event *out)
{
	if (q->n == 0)
		return false;
	*out = q->heap[0];
	struct herd_event last = q->heap[--q->n];
	size_t i = 0;
	for (;;) {
		size_t child = 2 * i + 1;
		if (child >= q->n)
			break;
		if (child + 1 < q->n && before(&q->heap[child + 1], &q->heap[child]))
			child++;
		if (!before(&q->heap[child], &last))
			break;
		q->heap[i] = q->heap[child];
		i = child;
	}
	if (q->n > 0)
		q->heap[i] = last;
	return true;
}
