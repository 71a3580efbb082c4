/*
 * ts_relay.c - the relay's test fixtures (ts_relay.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"
#include "ts_relay.h"

static void *
fake_serve(void *arg)
{
	struct ts_fake_consumer *fc = arg;
	struct ob_wire_limits lim = { OB_WIRE_MAX_PAYLOAD, OB_WIRE_MAX_BATCH };
	for (;;) {
		nng_msg *m = NULL;
		if (nng_recvmsg(fc->sock, &m, 0) != 0)
			return NULL; /* closed */
		struct ob_wire_request req;
		int rc = ob_wire_decode_request(nng_msg_body(m), nng_msg_len(m), &lim, &req);
		atomic_fetch_add(&fc->frames, 1);
		struct ob_buf out = OB_BUF_INIT;
		int mode = atomic_load(&fc->mode);
		int speaks = mode == TS_FAKE_V1_ONLY ? 1 : mode == TS_FAKE_V2_ONLY ? 2 : 0;
		if (speaks > 0 && (rc == OB_EWIRE_VERSION ||
		        (rc == OB_OK && req.version > speaks))) {
			if (rc == OB_OK)
				ob_wire_request_fini(&req);
			rc = OB_EWIRE_VERSION;
			/* its answer to a version it does not know: version 1 */
			ob_wire_encode_error_reply_v(&out, 1, rc, speaks == 1
			    ? "request refused: unsupported protocol version (wire.version)"
			    : "request refused: unsupported protocol version (wire.version);"
			      " this consumer speaks wire versions 1..2");
		} else if (rc == OB_OK) {
			atomic_fetch_add(&fc->messages, req.count);
			struct ob_wire_result *res = calloc(req.count, sizeof(*res));
			for (uint32_t i = 0; i < req.count; i++) {
				res[i].id = req.msgs[i].id;
				res[i].status = mode == TS_FAKE_REJECT ? OB_WIRE_REJECT
				    : mode == TS_FAKE_RETRY ? OB_WIRE_RETRY : OB_WIRE_APPLIED;
				res[i].detail = mode == TS_FAKE_REJECT ? "no such project"
				    : mode == TS_FAKE_RETRY ? "busy, try later" : NULL;
				res[i].detail_len = res[i].detail ? (uint16_t)strlen(res[i].detail) : 0;
				if (mode == TS_FAKE_RETRY)
					res[i].retry_after_ms = atomic_load(&fc->retry_after_ms);
			}
			ob_wire_encode_reply_v(&out, req.version, res, req.count);
			free(res);
			ob_wire_request_fini(&req);
		}
		nng_msg_free(m);
		if (mode == TS_FAKE_SILENT) {
			ob_buf_fini(&out);
			continue;
		}
		if (mode == TS_FAKE_GARBAGE) {
			ob_buf_reset(&out);
			ob_buf_puts(&out, "this is not a reply frame");
		}
		nng_msg *r = NULL;
		if (nng_msg_alloc(&r, 0) == 0 && nng_msg_append(r, out.data, out.len) == 0) {
			if (nng_sendmsg(fc->sock, r, 0) != 0)
				nng_msg_free(r);
		} else if (r != NULL)
			nng_msg_free(r);
		ob_buf_fini(&out);
	}
}

void
ts_fake_consumer_start(struct ts_fake_consumer *fc, const char *url, enum ts_fake_mode mode)
{
	memset(fc, 0, sizeof(*fc));
	atomic_store(&fc->mode, (int)mode);
	ck_assert_int_eq(nng_rep0_open(&fc->sock), 0);
	ck_assert_int_eq(nng_listen(fc->sock, url, NULL, 0), 0);
	ck_assert_int_eq(pthread_create(&fc->thread, NULL, fake_serve, fc), 0);
	fc->running = true;
}

void
ts_fake_consumer_routed(struct ts_fake_consumer *fc, const char *name, const char *topic,
    enum ts_fake_mode mode, char *url, size_t urllen, char *route, size_t routelen)
{
	ts_ipc_url(name, url, urllen);
	snprintf(route, routelen, "%s=%s", topic, url);
	ts_fake_consumer_start(fc, url, mode);
}

void
ts_fake_consumer_stop(struct ts_fake_consumer *fc)
{
	if (!fc->running)
		return;
	nng_close(fc->sock);
	pthread_join(fc->thread, NULL);
	fc->running = false;
}

pid_t
ts_relay_spawn(char *log, const char *db, const char *route, const char *const *extra)
{
	char *argv[64];
	int n = 0;
	argv[n++] = "outbox-relay";
	argv[n++] = "--db";
	argv[n++] = (char *)db;
	argv[n++] = "--route";
	argv[n++] = (char *)route;
	for (int i = 0; extra != NULL && extra[i] != NULL && n < 62; i++)
		argv[n++] = (char *)extra[i];
	argv[n] = NULL;
	return ts_spawn(argv, NULL, log);
}

