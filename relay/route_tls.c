/*
 * route_tls.c - mutual TLS from the relay's side: the settings, the start-up
 * probe in a child process, and SIGHUP's reload logged and counted
 * (route_tls.h). The dialers' refusal counters are dest.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dest.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "route_tls.h"

struct ob_bus_tls_files
relay_tls_files(const struct relay_config *c)
{
	return (struct ob_bus_tls_files){ c->tls_cert, c->tls_key, c->tls_ca,
		c->tls_server_name };
}

/* The child: one configuration per TLS URL, the first error down the pipe. */
static void
probe_child(const struct ob_bus_tls_files *f, const struct relay_routes *rt, int fd)
{
	char err[1024];
	int code = 0;
	for (int i = 0; i < rt->nurls && code == 0; i++) {
		nng_tls_config *cfg = NULL;
		if (!ob_bus_tls_url(rt->urls[i]))
			continue;
		if (ob_bus_tls_config_new(false, f, rt->urls[i], &cfg, err, sizeof(err)) != OB_OK) {
			(void)!write(fd, err, strlen(err));
			code = 2;
		} else {
			nng_tls_config_free(cfg);
		}
	}
	close(fd);
	_exit(code); /* no atexit, no nng_fini: this process only checked */
}

int
relay_tls_probe(const struct ob_bus_tls_files *f, const struct relay_routes *rt, char *err,
    size_t errlen)
{
	bool any = false;
	for (int i = 0; i < rt->nurls; i++)
		any |= ob_bus_tls_url(rt->urls[i]);
	if (!any)
		return OB_OK;
	int fds[2];
	if (pipe(fds) != 0) {
		snprintf(err, errlen, "TLS check: pipe: %s", strerror(errno));
		return OB_EINVAL;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "TLS check: fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return OB_EINVAL;
	}
	if (pid == 0) {
		close(fds[0]);
		probe_child(f, rt, fds[1]);
	}
	close(fds[1]);
	char line[1024];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(line) - 1 &&
	    ((n = read(fds[0], line + len, sizeof(line) - 1 - len)) > 0 ||
	        (n < 0 && errno == EINTR)))
		if (n > 0)
			len += (size_t)n;
	line[len] = '\0';
	close(fds[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return OB_OK;
	if (len > 0)
		snprintf(err, errlen, "%s", line);
	else
		snprintf(err, errlen, "TLS check: the checking process ended abnormally (status %d)",
		    st);
	return OB_EINVAL;
}

void
relay_tls_reload(struct relay_dest_table *t, int worker)
{
	bool any = false;
	for (int i = 0; i < t->n; i++)
		any |= t->dest[i].tls != NULL;
	if (!any)
		return;
	char err[1024], q[1100], qc[700], qk[700], qa[700];
	int n = 0;
	int rc = relay_dest_table_reload_tls(t, &n, err, sizeof(err));
	if (rc != OB_OK) {
		ob_metric_inc(t->tls_reload[1]);
		ob_warn("relay.tls.reload_failed", "worker=%d err=%s kept=%s", worker,
		    ob_log_q(err, q, sizeof(q)), n > 0 ? "partly" : "1");
		return;
	}
	ob_metric_inc(t->tls_reload[0]);
	ob_info("relay.tls.reloaded", "worker=%d dests=%d cert=%s key=%s ca=%s"
	    " applies_to=new_connections", worker, n, ob_log_q(t->tls.cert, qc, sizeof(qc)),
	    ob_log_q(t->tls.key, qk, sizeof(qk)), ob_log_q(t->tls.ca, qa, sizeof(qa)));
}
