/*
 * ts_proxy.c - tinyproxy as the webhook tests' forward proxy (ts_proxy.h):
 * its configuration written into the test's temp dir, the port reserved
 * until it listens, readiness and requests read from its log.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testsupport.h"
#include "ts_proxy.h"

#define TS_PROXY_START_MS 20000

struct ts_proxy {
	pid_t pid;
	int port;
	char url[64];
	char log[300];  /* tinyproxy's LogFile */
	char out[256];  /* its stdout and stderr (ts_spawn) */
};

static const char *
binary(void)
{
	static const char *const paths[] = { "/usr/bin/tinyproxy", "/usr/sbin/tinyproxy", NULL };
	for (int i = 0; paths[i] != NULL; i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

bool
ts_proxy_available(char *why, size_t whylen)
{
	if (binary() != NULL)
		return true;
	snprintf(why, whylen, "no tinyproxy (apt-get install tinyproxy-bin; scripts/setup-deps.sh"
	    " --tests)");
	return false;
}

/* A socket bound to 127.0.0.1 on a port the kernel picks, SO_REUSEADDR,
 * not listening: the port stays ours, yet a listener with SO_REUSEADDR
 * (tinyproxy's) may bind it. */
static int
reserve_port(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	int on = 1;
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t len = sizeof(a);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

struct ts_proxy *
ts_proxy_start(const int *ports, int n)
{
	static int seq;
	const char *bin = binary();
	ck_assert_msg(bin != NULL, "no tinyproxy");
	struct ts_proxy *p = calloc(1, sizeof(*p));
	ck_assert_ptr_nonnull(p);
	int hold = reserve_port(&p->port);
	snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%d", p->port);
	char conf[300], text[4096];
	seq++;
	snprintf(conf, sizeof(conf), "%s/tinyproxy-%d.conf", ts_tmpdir(), seq);
	snprintf(p->log, sizeof(p->log), "%s/tinyproxy-%d.log", ts_tmpdir(), seq);
	/* Loopback only; no PidFile, no User (runs as the test's user). */
	int len = snprintf(text, sizeof(text), "Port %d\nListen 127.0.0.1\nTimeout 60\n"
	    "LogFile \"%s\"\nLogLevel Info\nMaxClients 64\nAllow 127.0.0.1\n", p->port, p->log);
	for (int i = 0; i < n; i++)
		len += snprintf(text + len, sizeof(text) - (size_t)len, "ConnectPort %d\n",
		    ports[i]);
	ck_assert_int_lt(len, (int)sizeof(text));
	ts_write_file(conf, text);
	char *argv[] = { (char *)bin, "-d", "-c", conf, NULL };
	p->pid = ts_spawn(argv, NULL, p->out);
	int64_t end = ts_now_ms() + TS_PROXY_START_MS;
	/* until it says it accepts, it exits, or the time is up (10 ms polls) */
	while (ts_log_count(p->log, "Starting main loop") == 0 && ts_now_ms() < end &&
	    ts_wait_exit(p->pid, 10) == -1)
		;
	char *l = ts_read_file(p->log), *o = ts_read_file(p->out);
	ck_assert_msg(ts_log_count(p->log, "Starting main loop") == 1,
	    "tinyproxy did not start on port %d:\n%s\n%s", p->port, l ? l : "", o ? o : "");
	free(l);
	free(o);
	close(hold); /* tinyproxy listens on it now */
	return p;
}

const char *
ts_proxy_url(const struct ts_proxy *p)
{
	return p->url;
}

const char *
ts_proxy_log(const struct ts_proxy *p)
{
	return p->log;
}

int
ts_proxy_requests(const struct ts_proxy *p, const char *needle)
{
	char *text = ts_read_file(p->log);
	if (text == NULL)
		return 0;
	int count = 0;
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		const char *r = strstr(line, "]: Request (");
		if (r != NULL && strstr(r, needle) != NULL)
			count++;
	}
	free(text);
	return count;
}

void
ts_proxy_stop(struct ts_proxy *p)
{
	ts_stop(p->pid, SIGTERM);
	free(p);
}
