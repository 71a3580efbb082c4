/*
 * test_relay_util.h - helpers shared by the relay's integration tests: a
 * fake consumer (an nng REP socket served by a thread of the test process
 * that answers every request in a chosen way: applied, reject, retry,
 * garbage, or silence), log-file scanning, and relay argv building.
 * Header-only (static functions): each test program includes it once.
 */
#ifndef OUTBOX_TEST_RELAY_UTIL_H
#define OUTBOX_TEST_RELAY_UTIL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/wire.h"
#include "testsupport.h"

enum fake_mode { FAKE_APPLIED, FAKE_REJECT, FAKE_RETRY, FAKE_GARBAGE, FAKE_SILENT };

struct fake_consumer {
	nng_socket sock;
	pthread_t thread;
	_Atomic int mode;
	_Atomic uint64_t frames;    /* requests received */
	_Atomic uint64_t messages;  /* messages in them */
	_Atomic bool closing;
	bool running;
};

static __attribute__((unused)) void *
fake_serve(void *arg)
{
	struct fake_consumer *fc = arg;
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
		if (rc == OB_OK) {
			atomic_fetch_add(&fc->messages, req.count);
			struct ob_wire_result *res = calloc(req.count, sizeof(*res));
			for (uint32_t i = 0; i < req.count; i++) {
				res[i].id = req.msgs[i].id;
				res[i].status = mode == FAKE_REJECT ? OB_WIRE_REJECT
				    : mode == FAKE_RETRY ? OB_WIRE_RETRY : OB_WIRE_APPLIED;
				res[i].detail = mode == FAKE_REJECT ? "no such project"
				    : mode == FAKE_RETRY ? "busy, try later" : NULL;
				res[i].detail_len = res[i].detail ? (uint16_t)strlen(res[i].detail) : 0;
			}
			ob_wire_encode_reply(&out, res, req.count);
			free(res);
			ob_wire_request_fini(&req);
		}
		nng_msg_free(m);
		if (mode == FAKE_SILENT) {
			ob_buf_fini(&out);
			continue;
		}
		if (mode == FAKE_GARBAGE) {
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

static __attribute__((unused)) void
fake_start(struct fake_consumer *fc, const char *url, enum fake_mode mode)
{
	memset(fc, 0, sizeof(*fc));
	atomic_store(&fc->mode, (int)mode);
	ck_assert_int_eq(nng_rep0_open(&fc->sock), 0);
	ck_assert_int_eq(nng_listen(fc->sock, url, NULL, 0), 0);
	ck_assert_int_eq(pthread_create(&fc->thread, NULL, fake_serve, fc), 0);
	fc->running = true;
}

/* Close the socket: the relay sees the consumer go away. */
static __attribute__((unused)) void
fake_stop(struct fake_consumer *fc)
{
	if (!fc->running)
		return;
	nng_close(fc->sock);
	pthread_join(fc->thread, NULL);
	fc->running = false;
}

/* The integer after "key=" on the last line containing event, or -1. */
static __attribute__((unused)) int64_t
log_last_value(const char *path, const char *event, const char *key)
{
	char *text = ts_read_file(path);
	int64_t v = -1;
	const char *p = text, *line = NULL;
	while (p != NULL && (p = strstr(p, event)) != NULL)
		line = p++;
	if (line != NULL) {
		const char *eol = strchr(line, '\n');
		char k[64];
		snprintf(k, sizeof(k), " %s=", key);
		const char *kv = strstr(line, k);
		if (kv != NULL && (eol == NULL || kv < eol))
			v = strtoll(kv + strlen(k), NULL, 10);
	}
	free(text);
	return v;
}

/* Start outbox-relay on db with one route and extra flags (NULL-ended);
 * its output goes to log. */
static __attribute__((unused)) pid_t
relay_spawn(char *log, const char *db, const char *route, const char *const *extra)
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

/* Enqueue n messages on topic with keys prefix-0..n-1. */
static __attribute__((unused)) void
enqueue_n(PGconn *conn, const char *topic, const char *prefix, int n)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	    "SELECT count(outbox.enqueue('%s', '%s-' || g, jsonb_build_object('n', g)))"
	    " FROM generate_series(1, %d) g", topic, prefix, n);
	ts_exec(conn, sql);
}

#endif
