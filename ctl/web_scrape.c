/*
 * web_scrape.c - what the consumer counts but does not store, for the web
 * view's consumer panel (--consumer-metrics URL): one GET of its
 * Prometheus /metrics with nng's HTTP client, summed over labels:
 * duplicates answered (outbox_consumer_duplicate_total) and key-reuse
 * rejects (outbox_consumer_fingerprint_mismatch_total: a key redelivered
 * with another topic or payload). Called by the poller's thread only; it
 * blocks up to the timeout, never a request.
 */
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "web.h"

/* The sum of every sample of metric name (any labels) in an exposition
 * text of len bytes; -1 when there is none. Comment lines are skipped. */
static double
sum_of(const char *text, size_t len, const char *name)
{
	size_t n = strlen(name);
	double sum = -1;
	const char *end = text + len;
	for (const char *p = text; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == NULL)
			eol = end;
		if ((size_t)(eol - p) > n && p[0] != '#' && strncmp(p, name, n) == 0 &&
		    (p[n] == '{' || p[n] == ' ')) {
			/* the value is the last field (no timestamps are exposed) */
			const char *v = eol;
			while (v > p && v[-1] != ' ')
				v--;
			char num[64];
			size_t vl = (size_t)(eol - v) < sizeof num - 1 ? (size_t)(eol - v) : sizeof num - 1;
			memcpy(num, v, vl);
			num[vl] = '\0';
			char *e;
			double d = strtod(num, &e);
			if (e != num)
				sum = (sum < 0 ? 0 : sum) + d;
		}
		p = eol + 1;
	}
	return sum;
}

int
web_scrape_consumer(const char *url, int64_t timeout_ms, struct web_consumer_counts *out,
    char *err, size_t errlen)
{
	nng_url *u = NULL;
	nng_http_client *cli = NULL;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	nng_aio *aio = NULL;
	int rv, rc = OB_ENET;

	if ((rv = nng_url_parse(&u, url)) != 0 || (rv = nng_http_client_alloc(&cli, u)) != 0 ||
	    (rv = nng_http_req_alloc(&req, u)) != 0 || (rv = nng_http_res_alloc(&res)) != 0 ||
	    (rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
		snprintf(err, errlen, "--consumer-metrics %s: %s", url, nng_strerror(rv));
		goto out;
	}
	nng_aio_set_timeout(aio, (nng_duration)timeout_ms);
	nng_http_client_transact(cli, req, res, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) != 0) {
		snprintf(err, errlen, "--consumer-metrics %s: %s", url, nng_strerror(rv));
		goto out;
	}
	if (nng_http_res_get_status(res) != 200) {
		snprintf(err, errlen, "--consumer-metrics %s: status %d", url,
		    (int)nng_http_res_get_status(res));
		goto out;
	}
	void *data = NULL;
	size_t len = 0;
	nng_http_res_get_data(res, &data, &len);
	/* a consumer that has seen no message has no topic series yet: 0 */
	double dup = sum_of(data, len, "outbox_consumer_duplicate_total");
	double reuse = sum_of(data, len, "outbox_consumer_fingerprint_mismatch_total");
	if (reuse < 0) {
		snprintf(err, errlen, "--consumer-metrics %s: no outbox_consumer_* metrics there"
		    " (not a consumer's /metrics?)", url);
		goto out;
	}
	out->duplicates = dup < 0 ? 0 : (int64_t)dup;
	out->key_reuse_rejects = (int64_t)reuse;
	rc = OB_OK;
out:
	nng_aio_free(aio);
	nng_http_res_free(res);
	nng_http_req_free(req);
	nng_http_client_free(cli);
	nng_url_free(u);
	return rc;
}
