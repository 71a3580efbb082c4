/*
 * http_exchange.c - one HTTP exchange over a new connection, connect and
 * exchange apart (http_exchange.h). Owns the connection and the aio of
 * one call, nothing else: the request, the response and the client are
 * the caller's.
 */
#include <stdbool.h>
#include <stdint.h>

#include "outbox/clock.h"
#include "outbox/http_exchange.h"

int
ob_http_exchange(nng_http_client *client, nng_http_req *req, nng_http_res *res,
    int64_t timeout_ms, bool *connected)
{
	nng_aio *aio;
	nng_http_conn *conn = NULL;
	int64_t deadline = ob_mono_ms() + timeout_ms;
	int rv;
	*connected = false;
	if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0)
		return rv;
	nng_aio_set_timeout(aio, (nng_duration)timeout_ms);
	nng_http_client_connect(client, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) == 0) {
		conn = nng_aio_get_output(aio, 0);
		*connected = true;
		int64_t left = deadline - ob_mono_ms();
		nng_aio_set_timeout(aio, (nng_duration)(left > 0 ? left : 1));
		nng_http_conn_transact(conn, req, res, aio);
		nng_aio_wait(aio);
		rv = nng_aio_result(aio);
		nng_http_conn_close(conn);
	}
	nng_aio_free(aio);
	return rv;
}
