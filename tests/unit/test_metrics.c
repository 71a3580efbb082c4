/*
 * test_metrics.c - the metrics registry and its HTTP endpoint: exact text
 * exposition, every way a series is dropped, the output accepted by
 * promtool, counting across fork() in a shared registry (and NOT in a
 * private one: the broken mode first), and /metrics, /healthz, /readyz,
 * 404 and 405 over a real HTTP connection.
 *
 * promtool comes from scripts/get-promtool.sh (OUTBOX_PROMTOOL, set by
 * tests/ops.cmake); when it is absent the promtool case says why and passes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>

#include "outbox/buf.h"
#include "outbox/err.h"
#include "outbox/http_endpoint.h"
#include "outbox/metrics.h"
#include "outbox/version.h"
#include "testsupport.h"

#define FORK_CHILDREN 4
#define FORK_INCS 50000

static char *
render(struct ob_metrics *m)
{
	struct ob_buf b = OB_BUF_INIT;
	ck_assert_int_eq(ob_metrics_render(m, &b), OB_OK);
	char *s = strdup(b.data ? b.data : "");
	ob_buf_fini(&b);
	return s;
}

#define assert_has(text, needle) \
	ck_assert_msg(strstr((text), (needle)) != NULL, "missing <%s> in:\n%s", (needle), (text))

START_TEST(test_new_bounds)
{
	struct ob_metrics *m = NULL;
	ck_assert_int_eq(ob_metrics_new(0, &m), OB_EINVAL);
	ck_assert_int_eq(ob_metrics_new(OB_METRICS_CAPACITY_MAX + 1, &m), OB_EINVAL);
	ck_assert_ptr_null(m);
	ck_assert_int_eq(ob_metrics_new(OB_METRICS_CAPACITY_MIN, &m), OB_OK);
	ob_metrics_free(m);
	ck_assert_int_eq(ob_metrics_new_shared(OB_METRICS_CAPACITY_DEFAULT, &m), OB_OK);
	ob_metrics_free(m);
	ob_metrics_free(NULL);
}
END_TEST

START_TEST(test_render_exact)
{
	struct ob_metrics *m;
	ck_assert_int_eq(ob_metrics_new(16, &m), OB_OK);
	const char *l1[] = { "topic", "report.created", "outcome", "applied", NULL };
	const char *l2[] = { "topic", "we\"ird\\ta\nb", "outcome", "retry", NULL };
	struct ob_metric *c1 = ob_metrics_counter(m, "outbox_relay_delivered_total",
	    "Messages delivered.\nSecond line \\ backslash", l1);
	struct ob_metric *c2 = ob_metrics_counter(m, "outbox_relay_delivered_total", "ignored", l2);
	struct ob_metric *g = ob_metrics_gauge(m, "outbox_relay_in_flight", "In flight.", NULL);
	double b[] = { 0.01, 0.1, 1 };
	struct ob_metric *h = ob_metrics_histogram(m, "outbox_relay_delivery_seconds",
	    "Delivery latency.", NULL, b, 3);
	ck_assert_ptr_nonnull(c1);
	ck_assert_ptr_nonnull(c2);
	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(h);
	/* the same (name, labels) is the same series */
	ck_assert_ptr_eq(ob_metrics_counter(m, "outbox_relay_delivered_total", "x", l1), c1);

	ob_metric_inc(c1);
	ob_metric_add(c1, 41);
	ob_metric_inc(c2);
	ob_metric_set(g, 7);
	ob_metric_gauge_add(g, -2.5);
	ob_metric_observe(h, 0.005);
	ob_metric_observe(h, 0.01); /* le is inclusive */
	ob_metric_observe(h, 0.5);
	ob_metric_observe(h, 30);
	ob_metric_observe(h, NAN); /* ignored */
	/* wrong-type updates are ignored */
	ob_metric_set(c1, 1000);
	ob_metric_inc(g);
	ob_metric_inc(h);
	ck_assert(ob_metric_value(c1) == 42);
	ck_assert(ob_metric_value(g) == 4.5);
	ck_assert(ob_metric_value(h) == 4);

	char *t = render(m);
	const char *want =
	    "# HELP outbox_relay_delivered_total Messages delivered.\\nSecond line \\\\ backslash\n"
	    "# TYPE outbox_relay_delivered_total counter\n"
	    "outbox_relay_delivered_total{topic=\"report.created\",outcome=\"applied\"} 42\n"
	    "outbox_relay_delivered_total{topic=\"we\\\"ird\\\\ta\\nb\",outcome=\"retry\"} 1\n"
	    "# HELP outbox_relay_delivery_seconds Delivery latency.\n"
	    "# TYPE outbox_relay_delivery_seconds histogram\n"
	    "outbox_relay_delivery_seconds_bucket{le=\"0.01\"} 2\n"
	    "outbox_relay_delivery_seconds_bucket{le=\"0.1\"} 2\n"
	    "outbox_relay_delivery_seconds_bucket{le=\"1\"} 3\n"
	    "outbox_relay_delivery_seconds_bucket{le=\"+Inf\"} 4\n"
	    "outbox_relay_delivery_seconds_sum 30.515\n"
	    "outbox_relay_delivery_seconds_count 4\n"
	    "# HELP outbox_relay_in_flight In flight.\n"
	    "# TYPE outbox_relay_in_flight gauge\n"
	    "outbox_relay_in_flight 4.5\n"
	    "# HELP outbox_metrics_dropped_series_total";
	ck_assert_msg(strncmp(t, want, strlen(want)) == 0, "got:\n%s", t);
	assert_has(t, "\noutbox_metrics_dropped_series_total 0\n");
	assert_has(t, "\noutbox_metrics_series 4\n");
	assert_has(t, "\noutbox_metrics_capacity 16\n");
	assert_has(t, "\noutbox_build_info{version=\"" OB_VERSION "\"} 1\n");
	free(t);
	ob_metrics_free(m);
}
END_TEST

START_TEST(test_labeled_histogram)
{
	struct ob_metrics *m;
	ck_assert_int_eq(ob_metrics_new(4, &m), OB_OK);
	const char *l[] = { "topic", "t", NULL };
	struct ob_metric *h = ob_metrics_histogram(m, "apply_seconds", "h", l,
	    ob_metrics_latency_buckets, OB_METRICS_LATENCY_N);
	ob_metric_observe(h, 0.003);
	char *t = render(m);
	assert_has(t, "apply_seconds_bucket{topic=\"t\",le=\"0.0025\"} 0\n");
	assert_has(t, "apply_seconds_bucket{topic=\"t\",le=\"0.005\"} 1\n");
	assert_has(t, "apply_seconds_bucket{topic=\"t\",le=\"+Inf\"} 1\n");
	assert_has(t, "apply_seconds_sum{topic=\"t\"} 0.003\n");
	assert_has(t, "apply_seconds_count{topic=\"t\"} 1\n");
	free(t);
	ob_metrics_free(m);
}
END_TEST

/* Every way a series is refused: NULL handle, counted as dropped. */
START_TEST(test_dropped)
{
	struct ob_metrics *m;
	ck_assert_int_eq(ob_metrics_new(3, &m), OB_OK);
	double b[] = { 1, 2 }, bad_order[] = { 2, 1 }, bad_inf[] = { 1, INFINITY };
	const char *bad_label[] = { "9x", "v", NULL };
	const char *reserved_label[] = { "__name", "v", NULL };
	const char *le_label[] = { "le", "v", NULL };
	const char *dup_label[] = { "a", "1", "a", "2", NULL };
	const char *odd_label[] = { "a", NULL };
	char longname[OB_METRICS_NAME_MAX + 8], longval[OB_METRICS_LABELS_MAX + 8];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	memset(longval, 'v', sizeof longval - 1);
	longval[sizeof longval - 1] = '\0';
	const char *long_label[] = { "a", longval, NULL };
	uint64_t d = 0;

	ck_assert_ptr_null(ob_metrics_counter(m, "", "h", NULL)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, NULL, "h", NULL)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "1abc", "h", NULL)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "a-b", "h", NULL)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, longname, "h", NULL)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "outbox_metrics_mine", "h", NULL)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "c", "h", bad_label)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "c", "h", reserved_label)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "c", "h", le_label)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "c", "h", dup_label)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "c", "h", odd_label)); d++;
	ck_assert_ptr_null(ob_metrics_counter(m, "c", "h", long_label)); d++;
	ck_assert_ptr_null(ob_metrics_histogram(m, "h", "h", NULL, NULL, 0)); d++;
	ck_assert_ptr_null(ob_metrics_histogram(m, "h", "h", NULL, b, 0)); d++;
	ck_assert_ptr_null(ob_metrics_histogram(m, "h", "h", NULL, b,
	    OB_METRICS_BUCKETS_MAX + 1)); d++;
	ck_assert_ptr_null(ob_metrics_histogram(m, "h", "h", NULL, bad_order, 2)); d++;
	ck_assert_ptr_null(ob_metrics_histogram(m, "h", "h", NULL, bad_inf, 2)); d++;
	ck_assert_uint_eq(ob_metrics_dropped(m), d);

	/* a name keeps its type and buckets */
	ck_assert_ptr_nonnull(ob_metrics_counter(m, "c", "h", NULL));
	ck_assert_ptr_null(ob_metrics_gauge(m, "c", "h", NULL)); d++;
	ck_assert_ptr_nonnull(ob_metrics_histogram(m, "h", "h", NULL, b, 2));
	ck_assert_ptr_null(ob_metrics_histogram(m, "h", "h", NULL, b, 1)); d++;
	/* full: the third series fits, the fourth is dropped */
	ck_assert_ptr_nonnull(ob_metrics_gauge(m, "g", "h", NULL));
	ck_assert_ptr_null(ob_metrics_gauge(m, "g2", "h", NULL)); d++;
	/* existing series are still found when full */
	ck_assert_ptr_nonnull(ob_metrics_gauge(m, "g", "h", NULL));
	ck_assert_uint_eq(ob_metrics_dropped(m), d);

	/* NULL handles and registry are no-ops */
	ob_metric_inc(NULL);
	ob_metric_add(NULL, 3);
	ob_metric_set(NULL, 1);
	ob_metric_gauge_add(NULL, 1);
	ob_metric_observe(NULL, 1);
	ck_assert(ob_metric_value(NULL) == 0);
	ck_assert_ptr_null(ob_metrics_counter(NULL, "c", "h", NULL));

	char *t = render(m);
	char line[80];
	snprintf(line, sizeof line, "\noutbox_metrics_dropped_series_total %llu\n",
	    (unsigned long long)d);
	assert_has(t, line);
	free(t);
	ob_metrics_free(m);
}
END_TEST

/* A registry shaped like the programs' (names, labels, histograms) passes
 * `promtool check metrics` with no lint complaint. */
START_TEST(test_promtool)
{
	struct ob_metrics *m;
	ck_assert_int_eq(ob_metrics_new(64, &m), OB_OK);
	const char *outcomes[] = { "applied", "duplicate", "retry", "reject" };
	for (int i = 0; i < 4; i++) {
		const char *l[] = { "topic", "report.created", "outcome", outcomes[i], NULL };
		ob_metric_add(ob_metrics_counter(m, "outbox_relay_delivered_total",
		    "Messages delivered, by topic and outcome.", l), (uint64_t)i * 3);
	}
	const char *l[] = { "destination", "tcp://127.0.0.1:5555", NULL };
	ob_metric_set(ob_metrics_gauge(m, "outbox_relay_breaker_open",
	    "1 while the destination's circuit breaker is open.", l), 1);
	ob_metric_set(ob_metrics_gauge(m, "outbox_relay_oldest_claimable_age_seconds",
	    "Age of the oldest claimable message.", NULL), 12.25);
	ob_metric_observe(ob_metrics_histogram(m, "outbox_relay_delivery_seconds",
	    "Delivery latency.", NULL, ob_metrics_latency_buckets,
	    OB_METRICS_LATENCY_N), 0.02);
	const char *wl[] = { "note", "quote\" backslash\\ newline\n", NULL };
	ob_metric_inc(ob_metrics_counter(m, "outbox_test_weird_total", "Escapes.", wl));
	char *t = render(m);
	ob_metrics_free(m);

	ts_promtool_check("test_promtool", t);
	free(t);
}
END_TEST

/* Workers forked after the registry exists count into the same series,
 * including series they register themselves. A private registry does not
 * share: shown first, as the broken mode. */
static void
fork_and_count(struct ob_metrics *m)
{
	pid_t pids[FORK_CHILDREN];
	for (int i = 0; i < FORK_CHILDREN; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			const char *l[] = { "worker", "any", NULL };
			struct ob_metric *c = ob_metrics_counter(m, "forked_total", "h", l);
			struct ob_metric *g = ob_metrics_gauge(m, "in_flight", "h", NULL);
			double b[] = { 1, 10 };
			struct ob_metric *h = ob_metrics_histogram(m, "lat_seconds", "h", NULL, b, 2);
			for (int k = 0; k < FORK_INCS; k++) {
				ob_metric_inc(c);
				ob_metric_gauge_add(g, 1);
				ob_metric_observe(h, (k % 3) * 5.0); /* 0, 5, 10 */
			}
			_exit(c != NULL && g != NULL && h != NULL ? 0 : 1);
		}
	}
	for (int i = 0; i < FORK_CHILDREN; i++) {
		int st;
		ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

START_TEST(test_shared_across_fork)
{
	const char *l[] = { "worker", "any", NULL };
	double b[] = { 1, 10 };
	struct ob_metrics *priv, *shared;

	ck_assert_int_eq(ob_metrics_new(8, &priv), OB_OK);
	fork_and_count(priv);
	ck_assert(ob_metric_value(ob_metrics_counter(priv, "forked_total", "h", l)) == 0);
	ob_metrics_free(priv);

	ck_assert_int_eq(ob_metrics_new_shared(8, &shared), OB_OK);
	fork_and_count(shared);
	struct ob_metric *c = ob_metrics_counter(shared, "forked_total", "h", l);
	ck_assert(ob_metric_value(c) == FORK_CHILDREN * FORK_INCS);
	ck_assert(ob_metric_value(ob_metrics_gauge(shared, "in_flight", "h", NULL)) ==
	    FORK_CHILDREN * FORK_INCS);
	struct ob_metric *h = ob_metrics_histogram(shared, "lat_seconds", "h", NULL, b, 2);
	ck_assert(ob_metric_value(h) == FORK_CHILDREN * FORK_INCS);
	char *t = render(shared);
	/* one series each, though 4 processes registered them concurrently */
	assert_has(t, "\noutbox_metrics_series 3\n");
	char line[128];
	snprintf(line, sizeof line, "forked_total{worker=\"any\"} %d\n", FORK_CHILDREN * FORK_INCS);
	assert_has(t, line);
	/* k%3==0 -> 0 (le 1), 1 -> 5 (le 10), 2 -> 10 (le 10, inclusive) */
	int n0 = FORK_CHILDREN * ((FORK_INCS + 2) / 3);
	snprintf(line, sizeof line, "lat_seconds_bucket{le=\"1\"} %d\n", n0);
	assert_has(t, line);
	snprintf(line, sizeof line, "lat_seconds_bucket{le=\"10\"} %d\n", FORK_CHILDREN * FORK_INCS);
	assert_has(t, line);
	free(t);
	ob_metrics_free(shared);
}
END_TEST

/* One HTTP/1.1 request over a raw socket; returns the status code and the
 * response (headers + body) in out. */
static int
http_request(int port, const char *method, const char *path, char *out, size_t outlen)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	char req[256];
	int n = snprintf(req, sizeof req,
	    "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	    method, path);
	ck_assert_int_eq(write(fd, req, (size_t)n), n);
	size_t len = 0;
	ssize_t r;
	while (len + 1 < outlen && (r = read(fd, out + len, outlen - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = '\0';
	close(fd);
	int status = -1;
	ck_assert_int_eq(sscanf(out, "HTTP/1.1 %d", &status), 1);
	return status;
}

/* A connect to 127.0.0.1:port is refused: nothing listens there. */
static bool
connect_refused(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bool refused = connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 &&
	    errno == ECONNREFUSED;
	close(fd);
	return refused;
}

static bool
ready_cb(void *arg)
{
	return *(volatile int *)arg != 0;
}

START_TEST(test_http_endpoint)
{
	struct ob_metrics *m;
	struct ob_http_endpoint *e = NULL, *e2 = NULL;
	char err[256], resp[65536];

	/* room for the endpoint's own outbox_http_* series too (common/httpd.c
	 * counts its connections in the registry it serves) */
	ck_assert_int_eq(ob_metrics_new(32, &m), OB_OK);
	ob_metric_add(ob_metrics_counter(m, "outbox_test_requests_total", "Requests.", NULL), 5);
	ck_assert_int_eq(ob_http_endpoint_start("127.0.0.1:0", m, NULL, NULL, &e, err,
	    sizeof err), OB_OK);
	int port = ob_http_endpoint_port(e);
	ck_assert_int_gt(port, 0);

	ck_assert_int_eq(http_request(port, "GET", "/metrics", resp, sizeof resp), 200);
	assert_has(resp, "Content-Type: text/plain; version=0.0.4");
	assert_has(resp, "\r\n\r\n# HELP outbox_");
	assert_has(resp, "\n# HELP outbox_test_requests_total Requests.\n");
	assert_has(resp, "\noutbox_http_connections_open{server=\"metrics\"} 1\n");
	assert_has(resp, "\noutbox_metrics_dropped_series_total 0\n");
	assert_has(resp, "\noutbox_test_requests_total 5\n");
	/* the numbers move between scrapes */
	ob_metric_inc(ob_metrics_counter(m, "outbox_test_requests_total", "Requests.", NULL));
	ck_assert_int_eq(http_request(port, "GET", "/metrics", resp, sizeof resp), 200);
	assert_has(resp, "\noutbox_test_requests_total 6\n");

	ck_assert_int_eq(http_request(port, "GET", "/healthz", resp, sizeof resp), 200);
	assert_has(resp, "\r\n\r\nok\n");
	/* readiness from the registry's flag */
	ck_assert_int_eq(http_request(port, "GET", "/readyz", resp, sizeof resp), 503);
	ob_metrics_set_ready(m, true);
	ck_assert_int_eq(http_request(port, "GET", "/readyz", resp, sizeof resp), 200);
	assert_has(resp, "\r\n\r\nready\n");

	ck_assert_int_eq(http_request(port, "GET", "/nope", resp, sizeof resp), 404);
	ck_assert_int_eq(http_request(port, "GET", "/metrics/x", resp, sizeof resp), 404);
	ck_assert_int_eq(http_request(port, "POST", "/metrics", resp, sizeof resp), 405);
	ck_assert_int_eq(http_request(port, "DELETE", "/healthz", resp, sizeof resp), 405);
	ck_assert_int_eq(http_request(port, "PUT", "/readyz", resp, sizeof resp), 405);

	char addr[64];
	ob_http_endpoint_stop(e);
	e = NULL;
	/* stopped: nothing listens on its port any more */
	ck_assert_msg(connect_refused(port), "port %d still accepts after stop", port);

	/* a caller's readiness callback; a port of its own (binding the old one
	 * again would race with anything else on the machine taking it) */
	volatile int ready = 0;
	ck_assert_int_eq(ob_http_endpoint_start("http://127.0.0.1:0", m, ready_cb,
	    (void *)&ready, &e, err, sizeof err), OB_OK);
	port = ob_http_endpoint_port(e);
	ck_assert_int_gt(port, 0);
	ck_assert_int_eq(http_request(port, "GET", "/readyz", resp, sizeof resp), 503);
	ready = 1;
	ck_assert_int_eq(http_request(port, "GET", "/readyz", resp, sizeof resp), 200);

	ob_http_endpoint_stop(e);
	e = NULL;

	/* a port someone else holds: OB_ENET with the address in the reason */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t salen = sizeof sa;
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &salen), 0);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sa.sin_port));
	ck_assert_int_eq(ob_http_endpoint_start(addr, m, NULL, NULL, &e2, err, sizeof err),
	    OB_ENET);
	ck_assert_ptr_null(e2);
	assert_has(err, addr);
	close(fd);
	ob_metrics_free(m);
}
END_TEST

START_TEST(test_endpoint_url)
{
	static const struct {
		const char *in, *want; /* want NULL: rejected */
	} cases[] = {
		{ "127.0.0.1:9464", "http://127.0.0.1:9464" },
		{ "http://127.0.0.1:9464", "http://127.0.0.1:9464" },
		{ "http://127.0.0.1:9464/", "http://127.0.0.1:9464" },
		{ ":9464", "http://0.0.0.0:9464" },
		{ "localhost:0", "http://localhost:0" },
		{ "[::1]:9464", "http://[::1]:9464" },
		{ "", NULL },
		{ "127.0.0.1", NULL },
		{ "http://127.0.0.1", NULL },
		{ "127.0.0.1:", NULL },
		{ "127.0.0.1:70000", NULL },
		{ "127.0.0.1:-1", NULL },
		{ "127.0.0.1:12ab", NULL },
		{ "https://127.0.0.1:9464", NULL },
		{ "tcp://127.0.0.1:9464", NULL },
		{ "127.0.0.1:9464/metrics", NULL },
		{ "user@127.0.0.1:9464", NULL },
		{ "127.0.0.1:9464?x=1", NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char out[OB_HTTP_ENDPOINT_URL_MAX] = "", err[256] = "";
		int rc = ob_http_endpoint_url(cases[i].in, out, sizeof out, err, sizeof err);
		if (cases[i].want != NULL) {
			ck_assert_msg(rc == OB_OK, "'%s' rejected: %s", cases[i].in, err);
			ck_assert_str_eq(out, cases[i].want);
		} else {
			ck_assert_msg(rc == OB_EINVAL, "'%s' accepted as %s", cases[i].in, out);
			ck_assert_msg(err[0] != '\0' && strchr(err, '\n') == NULL,
			    "'%s': no one-line reason", cases[i].in);
		}
	}
	struct ob_metrics *m;
	struct ob_http_endpoint *e = NULL;
	char err[256];
	ck_assert_int_eq(ob_metrics_new(1, &m), OB_OK);
	ck_assert_int_eq(ob_http_endpoint_start("nope", m, NULL, NULL, &e, err, sizeof err),
	    OB_EINVAL);
	ck_assert_int_eq(ob_http_endpoint_start("127.0.0.1:0", NULL, NULL, NULL, &e, err,
	    sizeof err), OB_EINVAL);
	ck_assert_ptr_null(e);
	ob_metrics_free(m);
}
END_TEST

static Suite *
metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("registry");
	tcase_add_test(tc, test_new_bounds);
	tcase_add_test(tc, test_render_exact);
	tcase_add_test(tc, test_labeled_histogram);
	tcase_add_test(tc, test_dropped);
	tcase_add_test(tc, test_promtool);
	tcase_add_test(tc, test_shared_across_fork);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("http");
	tcase_add_test(tc, test_endpoint_url);
	tcase_add_test(tc, test_http_endpoint);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc = ts_run_suite(metrics_suite());
	nng_fini();
	return rc;
}
