/*
 * loadgen.c - load generator for outbox-consumer: sends request frames of
 * --batch messages with fresh idempotency keys over nng REQ, --inflight
 * requests outstanding at once (one REQ context per in-flight slot), for
 * --seconds, and reports applied messages per second. With --consumer-pid
 * it also reads the consumer's CPU time from /proc/PID/stat before and
 * after, and reports CPU microseconds per applied message.
 *
 *   consumer-loadgen --url ipc:///tmp/c.ipc --batch 100 --inflight 4 \
 *       --seconds 10 --consumer-pid 1234
 *
 * --prefix P makes the keys P-SLOT-N: running twice with the same prefix
 * sends the first run's keys again (duplicates: the per-message path).
 *
 * Output: one line of key=value (batch, inflight, seconds, messages,
 * msgs_per_s, requests, retry, reject, cpu_us_per_msg).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "outbox/buf.h"
#include "outbox/config.h"
#include "outbox/err.h"
#include "outbox/wire.h"

struct lg_config {
	char *url;
	int64_t batch;
	int64_t inflight;
	int64_t seconds;
	int64_t payload;
	int64_t consumer_pid;
	char *prefix;
	char *source;
};

#define OB_CFG_STRUCT struct lg_config

static const struct ob_cfg_opt lg_options[] = {
	OB_CFG_OPT("url", "LOADGEN_URL", OB_CFG_STRING, NULL, 0, 0, NULL, true, url,
	    "the consumer's nng URL"),
	OB_CFG_OPT("batch", "LOADGEN_BATCH", OB_CFG_INT, "100", 1, OB_WIRE_MAX_BATCH, NULL, false,
	    batch, "messages per request"),
	OB_CFG_OPT("inflight", "LOADGEN_INFLIGHT", OB_CFG_INT, "4", 1, 256, NULL, false, inflight,
	    "requests outstanding at once"),
	OB_CFG_OPT("seconds", "LOADGEN_SECONDS", OB_CFG_INT, "10", 1, 3600, NULL, false, seconds,
	    "how long to send"),
	OB_CFG_OPT("payload", "LOADGEN_PAYLOAD", OB_CFG_SIZE, "100", 2, 1048576, NULL, false,
	    payload, "payload bytes per message (a JSON object)"),
	OB_CFG_OPT("consumer-pid", "LOADGEN_CONSUMER_PID", OB_CFG_INT, "0", 0, 4194304, NULL,
	    false, consumer_pid, "the consumer's pid, to report its CPU per message (0 = no)"),
	OB_CFG_OPT("prefix", "LOADGEN_PREFIX", OB_CFG_STRING, NULL, 0, 0, NULL, false, prefix,
	    "idempotency key prefix: keys are PREFIX-SLOT-N (default lg-PID, fresh keys);"
	    " a second run with the same prefix redelivers the first run's keys"),
	OB_CFG_OPT("source", "LOADGEN_SOURCE", OB_CFG_STRING, "loadgen", 0, 0, NULL, false, source,
	    "the frames' source, as a relay's --source names it (1..63 bytes);"
	    " \"\" sends the empty source of relays before wire version 3"),
	OB_CFG_END,
};

static struct lg_config cfg;
static nng_socket sock;
static _Atomic uint64_t applied, duplicate, retry, reject, requests, errors;
static _Atomic int stop;
static char *payload;
static char prefix[48];

static int64_t
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* utime + stime of pid, in clock ticks. */
static long long
cpu_ticks(long pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (p == NULL)
		return -1;
	long long ut = 0, st = 0;
	/* after ')': state ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime stime */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld",
	        &ut, &st) != 2)
		return -1;
	return ut + st;
}

static void *
slot(void *arg)
{
	long id = (long)arg;
	nng_ctx ctx;
	nng_aio *aio;
	if (nng_ctx_open(&ctx, sock) != 0 || nng_aio_alloc(&aio, NULL, NULL) != 0) {
		fprintf(stderr, "loadgen: cannot open a context\n");
		exit(1);
	}
	nng_aio_set_timeout(aio, 30000);
	struct ob_wire_limits lim = { OB_WIRE_MAX_PAYLOAD, OB_WIRE_MAX_BATCH };
	struct ob_wire_msg *msgs = calloc((size_t)cfg.batch, sizeof(*msgs));
	char (*keys)[64] = calloc((size_t)cfg.batch, 64);
	struct ob_buf b = OB_BUF_INIT;
	uint64_t n = 0;
	while (!atomic_load(&stop)) {
		int64_t created = now_us();
		for (int64_t i = 0; i < cfg.batch; i++) {
			struct ob_wire_msg *m = &msgs[i];
			snprintf(keys[i], 64, "%s-%ld-%" PRIu64, prefix, id, n++);
			*m = (struct ob_wire_msg){ .id = n, .fence = 1, .attempt = 1,
				.created_at_us = created, .topic = "bench", .topic_len = 5,
				.key = keys[i], .key_len = (uint16_t)strlen(keys[i]),
				.payload = payload, .payload_len = (uint32_t)cfg.payload,
				.source = cfg.source[0] ? cfg.source : NULL,
				.source_len = (uint8_t)strlen(cfg.source) };
		}
		ob_buf_reset(&b);
		if (ob_wire_encode_request(&b, msgs, (uint32_t)cfg.batch, &lim) != OB_OK) {
			fprintf(stderr, "loadgen: encode failed\n");
			exit(1);
		}
		nng_msg *msg;
		nng_msg_alloc(&msg, 0);
		nng_msg_append(msg, b.data, b.len);
		nng_aio_set_msg(aio, msg);
		nng_ctx_send(ctx, aio);
		nng_aio_wait(aio);
		if (nng_aio_result(aio) != 0) {
			nng_msg_free(msg);
			atomic_fetch_add(&errors, 1);
			continue;
		}
		nng_ctx_recv(ctx, aio);
		nng_aio_wait(aio);
		if (nng_aio_result(aio) != 0) {
			atomic_fetch_add(&errors, 1);
			continue;
		}
		msg = nng_aio_get_msg(aio);
		struct ob_wire_reply rep;
		if (ob_wire_decode_reply(nng_msg_body(msg), nng_msg_len(msg), &lim, &rep) == OB_OK) {
			for (uint32_t i = 0; i < rep.count; i++) {
				switch (rep.results[i].status) {
				case OB_WIRE_APPLIED: atomic_fetch_add(&applied, 1); break;
				case OB_WIRE_DUPLICATE: atomic_fetch_add(&duplicate, 1); break;
				case OB_WIRE_RETRY: atomic_fetch_add(&retry, 1); break;
				default: atomic_fetch_add(&reject, 1); break;
				}
			}
			ob_wire_reply_fini(&rep);
		} else
			atomic_fetch_add(&errors, 1);
		atomic_fetch_add(&requests, 1);
		nng_msg_free(msg);
	}
	ob_buf_fini(&b);
	free(keys);
	free(msgs);
	nng_aio_free(aio);
	nng_ctx_close(ctx);
	return NULL;
}

int
main(int argc, char **argv)
{
	/* arguments after the flags are ignored */
	static const struct ob_cfg_program program = {
		.name = "consumer-loadgen",
		.synopsis = "consumer-loadgen --url URL [options]",
		.description = "Load generator for outbox-consumer (bench/consumer/README.md).",
		.options = lg_options,
		.positional = true,
	};
	int code;
	if ((code = ob_cfg_load(&program, &cfg, argc, argv, NULL)) >= 0)
		return code;
	if (strlen(cfg.source) > OB_WIRE_MAX_SOURCE) {
		fprintf(stderr, "consumer-loadgen: --source: at most %d bytes\n", OB_WIRE_MAX_SOURCE);
		return 2;
	}
	if (cfg.prefix != NULL)
		snprintf(prefix, sizeof(prefix), "%s", cfg.prefix);
	else
		snprintf(prefix, sizeof(prefix), "lg-%d", (int)getpid());
	payload = malloc((size_t)cfg.payload + 1);
	memset(payload, ' ', (size_t)cfg.payload);
	payload[0] = '{';
	payload[cfg.payload - 1] = '}';
	if (nng_req0_open(&sock) != 0 || nng_dial(sock, cfg.url, NULL, 0) != 0) {
		fprintf(stderr, "consumer-loadgen: cannot dial %s\n", cfg.url);
		return 1;
	}
	nng_socket_set_ms(sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	long hz = sysconf(_SC_CLK_TCK);
	long long cpu0 = cfg.consumer_pid ? cpu_ticks((long)cfg.consumer_pid) : -1;
	int64_t t0 = now_us();
	pthread_t *th = calloc((size_t)cfg.inflight, sizeof(*th));
	for (long i = 0; i < cfg.inflight; i++)
		pthread_create(&th[i], NULL, slot, (void *)i);
	sleep((unsigned)cfg.seconds);
	atomic_store(&stop, 1);
	for (long i = 0; i < cfg.inflight; i++)
		pthread_join(th[i], NULL);
	double secs = (double)(now_us() - t0) / 1e6;
	long long cpu1 = cfg.consumer_pid ? cpu_ticks((long)cfg.consumer_pid) : -1;
	uint64_t a = atomic_load(&applied);
	printf("batch=%" PRId64 " inflight=%" PRId64 " seconds=%.1f messages=%" PRIu64
	    " msgs_per_s=%.0f requests=%" PRIu64 " duplicate=%" PRIu64 " retry=%" PRIu64
	    " reject=%" PRIu64 " errors=%" PRIu64,
	    cfg.batch, cfg.inflight, secs, a, (double)a / secs, atomic_load(&requests),
	    atomic_load(&duplicate), atomic_load(&retry), atomic_load(&reject),
	    atomic_load(&errors));
	if (cpu0 >= 0 && cpu1 >= 0 && a > 0)
		printf(" consumer_cpu_us_per_msg=%.1f consumer_cpu_pct=%.0f",
		    (double)(cpu1 - cpu0) * 1e6 / (double)hz / (double)a,
		    (double)(cpu1 - cpu0) * 100.0 / (double)hz / secs);
	printf("\n");
	free(th);
	free(payload);
	ob_cfg_free(lg_options, &cfg);
	nng_close(sock);
	nng_fini();
	return 0;
}
