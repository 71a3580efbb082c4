/*
 * api_query.h - a request's query string, for the API's lookups by key
 * (GET /v1/reports?idempotency_key=K, GET /v1/messages?...).
 */
#ifndef OUTBOX_PRODUCER_API_QUERY_H
#define OUTBOX_PRODUCER_API_QUERY_H

#include <stddef.h>

/* The value of name in a query string, percent-decoded into out. OB_OK,
 * or OB_EINVAL when absent, malformed, decoding to a NUL, or too long. */
int api_query_param(const char *query, const char *name, char *out, size_t outlen);

#endif
