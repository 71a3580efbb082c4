/*
 * metrics_serve.c - the relay's metrics process: serves /metrics, /healthz
 * and /readyz from the shared registry on nng's HTTP server.
 *
 * nng does not survive fork(), and the supervisor forks workers for as long
 * as it runs, so the supervisor never starts nng: it forks this dedicated
 * child (and restarts it like a worker if it dies). The child reads only
 * the shared registry's atomics, which every worker updates, so a scrape
 * shows the sum over all workers; a scrape that is slow, or this process
 * being stopped, never holds up delivery (the workers never talk to it).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/http_endpoint.h"
#include "outbox/log.h"
#include "metrics_serve.h"

int
relay_metrics_serve(const char *addr, struct ob_metrics *reg,
    const struct ob_reload *reload, int report_fd)
{
	char err[512], q[600], line[600];
	struct ob_http_endpoint *ep = NULL;
	int rc = ob_http_endpoint_start(addr, reg, NULL, NULL, &ep, err, sizeof(err));
	if (rc != OB_OK) {
		ob_error("relay.metrics.listen_failed", "addr=%s err=%s", addr,
		    ob_log_q(err, q, sizeof(q)));
		snprintf(line, sizeof(line), "ERR %s\n", err);
	} else {
		ob_info("relay.metrics.listening", "addr=%s port=%d pid=%d", addr,
		    ob_http_endpoint_port(ep), (int)getpid());
		snprintf(line, sizeof(line), "OK %d\n", ob_http_endpoint_port(ep));
	}
	if (report_fd >= 0) {
		(void)!write(report_fd, line, strlen(line));
		close(report_fd);
	}
	if (rc != OB_OK)
		return 1;
	ob_reload_until_stop(reload);
	ob_http_endpoint_stop(ep);
	ob_info("relay.metrics.stopped", "addr=%s", addr);
	return 0;
}
