/*
 * test_consumer_recvmax.c - the consumer's receive limit: a frame longer
 * than CONSUMER_RECV_MAX(--max-batch, --max-payload) closes its connection
 * from the length header, before the consumer reads or allocates it.
 *
 * A raw SP-over-TCP client (the 8-byte SP header, then an 8-byte frame
 * length) plays the attacker. First the unbounded case: with the default
 * limits (1000 x 1 MiB: about 1 GiB) a 64 MiB frame held one byte short
 * of its end is buffered whole, and the consumer's RSS grows by about its
 * size. With --max-batch 10 --max-payload 64k the same frame is refused
 * and RSS does not grow; the limit is exact (a length of the limit is
 * read, one more byte is refused) and is enough (a frame of 10 messages
 * with every string and payload at its maximum is applied).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "outbox/wire.h"
#include "server.h"
#include "testsupport.h"
#include "ts_consumer.h"

#define T_SEC 1000
#define BIG_FRAME (64u * 1024 * 1024) /* what the attacker announces */
#define GROWN_KB (48 * 1024)          /* "grew by its size": at least this */
#define FLAT_KB (8 * 1024)            /* "did not grow": less than this */
#define SMALL_BATCH 10
#define SMALL_PAYLOAD (64 * 1024)

static long
rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	ck_assert_int_gt(kb, 0);
	return kb;
}

/* A TCP connection to 127.0.0.1:port that has done the SP handshake as a
 * REQ peer (protocol 0x30) with a REP (0x31). */
static int
sp_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	static const unsigned char hello[8] = { 0, 'S', 'P', 0, 0x00, 0x30, 0, 0 };
	ck_assert_int_eq(send(fd, hello, 8, MSG_NOSIGNAL), 8);
	unsigned char peer[8];
	size_t got = 0;
	while (got < 8) {
		ssize_t n = recv(fd, peer + got, 8 - got, 0);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	ck_assert_int_eq(peer[5], 0x31);
	return fd;
}

/* Announce a frame of len bytes. */
static void
send_length(int fd, uint64_t len)
{
	unsigned char h[8];
	for (int i = 0; i < 8; i++)
		h[i] = (unsigned char)(len >> (56 - 8 * i));
	ck_assert_int_eq(send(fd, h, 8, MSG_NOSIGNAL), 8);
}

/* Send up to n bytes of body; returns what the kernel took before the
 * consumer closed the connection. */
static size_t
send_body(int fd, size_t n)
{
	static char chunk[1 << 20];
	size_t sent = 0;
	while (sent < n) {
		size_t k = n - sent < sizeof(chunk) ? n - sent : sizeof(chunk);
		ssize_t w = send(fd, chunk, k, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		sent += (size_t)w;
	}
	return sent;
}

/* Whether the consumer closes fd within ms (EOF or reset on read). */
static bool
closed_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t end = ts_now_ms() + ms;
	while (ts_now_ms() < end) {
		int left = (int)(end - ts_now_ms());
		if (poll(&p, 1, left > 0 ? left : 1) > 0) {
			char b;
			ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
				return true;
		}
	}
	return false;
}

struct consumer {
	pid_t pid;
	char log[256];
	int port;
	char *url;
};

static void
consumer_start(struct consumer *c, const char *db, const char *const *limits)
{
	char ready[512];
	static int n;
	snprintf(ready, sizeof(ready), "%s/recvmax-%d.ready", ts_tmpdir(), ++n);
	const char *base[] = { "--ready-file", ready, "--threads", "1", NULL };
	const char *args[16];
	ts_args_cat(args, 16, base, limits);
	c->pid = ts_consumer_spawn(c->log, db, "tcp://127.0.0.1:0", args);
	c->url = ts_wait_ready_file(ready, c->pid, c->log, 60 * T_SEC);
	c->port = atoi(strrchr(c->url, ':') + 1);
	ck_assert_int_gt(c->port, 0);
}

/* Poll the consumer's RSS until it reaches at least kb, up to ms; the last
 * value seen. */
static long
wait_rss(pid_t pid, long kb, int ms)
{
	int64_t end = ts_now_ms() + ms;
	long now;
	while ((now = rss_kb(pid)) < kb && ts_now_ms() < end) {
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
	return now;
}

START_TEST(test_unbounded_default_buffers_a_big_frame)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("recvbig", "inbox", db, sizeof(db));
	struct consumer c;
	consumer_start(&c, db, NULL);
	long before = rss_kb(c.pid);
	int fd = sp_connect(c.port);
	send_length(fd, BIG_FRAME);
	/* held one byte short: the frame is never complete */
	size_t sent = send_body(fd, BIG_FRAME - 1);
	ck_assert_msg(sent == BIG_FRAME - 1, "the default limit refused %u bytes (took %zu)",
	    BIG_FRAME, sent);
	long during = wait_rss(c.pid, before + GROWN_KB, 30 * T_SEC);
	ck_assert_msg(during >= before + GROWN_KB, "RSS %ld -> %ld kB: the partial frame"
	    " was not buffered", before, during);
	close(fd);
	ts_stop(c.pid, SIGTERM);
	free(c.url);
}
END_TEST

START_TEST(test_limit_refuses_a_big_frame)
{
	char db[TS_CONNINFO_MAX];
	ts_db_create("recvmax", "inbox", db, sizeof(db));
	char batch[16], payload[16], want[64];
	snprintf(batch, sizeof(batch), "%d", SMALL_BATCH);
	snprintf(payload, sizeof(payload), "%d", SMALL_PAYLOAD);
	const char *limits[] = { "--max-batch", batch, "--max-payload", payload, NULL };
	struct consumer c;
	consumer_start(&c, db, limits);
	const struct ob_wire_limits lim = { SMALL_PAYLOAD, SMALL_BATCH };
	size_t max = CONSUMER_RECV_MAX(&lim);
	snprintf(want, sizeof(want), "recv_max=%zu", max);
	ts_assert_logged(c.log, want);

	/* exact: the limit is read (the connection stays), one more is not */
	int fd = sp_connect(c.port);
	send_length(fd, max);
	ck_assert_msg(!closed_within(fd, 1000), "a frame of the limit (%zu) was refused", max);
	close(fd);
	fd = sp_connect(c.port);
	send_length(fd, max + 1);
	ck_assert_msg(closed_within(fd, 10 * T_SEC), "a frame over the limit was read");
	close(fd);

	/* the attack: refused from its header, memory flat */
	long before = rss_kb(c.pid);
	fd = sp_connect(c.port);
	send_length(fd, BIG_FRAME);
	size_t sent = send_body(fd, BIG_FRAME - 1);
	ck_assert_msg(sent < BIG_FRAME - 1, "the consumer read the whole %u-byte frame",
	    BIG_FRAME);
	close(fd);
	long after = rss_kb(c.pid);
	ck_assert_msg(after < before + FLAT_KB, "RSS %ld -> %ld kB for a refused frame", before,
	    after);

	/* enough: the largest frame these limits admit is applied */
	static char topic[OB_WIRE_MAX_TOPIC + 1], ord[OB_WIRE_MAX_ORDKEY + 1];
	static char keys[SMALL_BATCH][OB_WIRE_MAX_KEY + 1];
	static char body[SMALL_PAYLOAD + 1];
	memset(topic, 't', OB_WIRE_MAX_TOPIC);
	memset(ord, 'o', OB_WIRE_MAX_ORDKEY);
	memset(body, 'p', SMALL_PAYLOAD);
	body[0] = body[SMALL_PAYLOAD - 1] = '"'; /* a JSON string */
	char source[OB_WIRE_MAX_SOURCE + 1];
	memset(source, 's', OB_WIRE_MAX_SOURCE);
	source[OB_WIRE_MAX_SOURCE] = '\0';
	struct ob_wire_msg msgs[SMALL_BATCH];
	for (int i = 0; i < SMALL_BATCH; i++) {
		memset(keys[i], 'k', OB_WIRE_MAX_KEY);
		snprintf(keys[i], 8, "k%05d", i);
		keys[i][6] = 'k';
		msgs[i] = ts_consumer_msg((uint64_t)i + 1, topic, keys[i], body);
		msgs[i].ordering_key = ord;
		msgs[i].ordering_key_len = OB_WIRE_MAX_ORDKEY;
		msgs[i].ordering_seq = (uint64_t)i + 1;
		msgs[i].source = source; /* the longest source too */
		msgs[i].source_len = OB_WIRE_MAX_SOURCE;
	}
	struct ob_buf b = OB_BUF_INIT;
	ck_assert_int_eq(ob_wire_encode_request(&b, msgs, SMALL_BATCH, &lim), 0);
	ck_assert_uint_eq(b.len, OB_WIRE_REQUEST_MAX_BYTES(SMALL_BATCH, SMALL_PAYLOAD));
	ob_buf_fini(&b);
	struct ts_consumer_conn conn;
	struct ts_consumer_reply r;
	ts_consumer_open(&conn, c.url);
	ts_consumer_call(&conn, msgs, SMALL_BATCH, &r);
	ck_assert_int_eq(r.rep.frame_err, 0);
	for (uint32_t i = 0; i < r.rep.count; i++)
		ck_assert_int_eq(r.rep.results[i].status, OB_WIRE_APPLIED);
	ts_consumer_reply_fini(&r);
	ts_consumer_close(&conn);
	PGconn *pg = ts_connect(db);
	ck_assert_int_eq(ts_query_int(pg, "SELECT count(*) FROM inbox.notifications"), SMALL_BATCH);
	PQfinish(pg);
	ts_stop(c.pid, SIGTERM);
	free(c.url);
}
END_TEST

static Suite *
recvmax_suite(void)
{
	Suite *s = suite_create("consumer_recvmax");
	TCase *tc = tcase_create("recvmax");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_unbounded_default_buffers_a_big_frame);
	tcase_add_test(tc, test_limit_refuses_a_big_frame);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return ts_run_suite(recvmax_suite());
}
