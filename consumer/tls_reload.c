/*
 * tls_reload.c - SIGHUP's certificate reload for the consumer: build the
 * new configuration from the files, re-open the listener with it, say
 * what happened (tls_reload.h).
 */
#include <stdbool.h>
#include <stdio.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "outbox/backoff.h"
#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/sig.h"
#include "metrics.h"
#include "server.h"
#include "tls_reload.h"

static void
count(struct consumer_tls_reload *r, bool ok)
{
	if (r->metrics != NULL)
		ob_metric_inc(r->metrics->tls_reload[ok ? 0 : 1]);
}

/* Neither configuration listens: try the one in use until it does. */
static void
relisten_lost(struct consumer_tls_reload *r, const char *why)
{
	char err[1024], q[1100];
	bool listening = false;
	struct ob_backoff retry;
	ob_backoff_init(&retry, CONSUMER_RELISTEN_LOST_BASE_MS, CONSUMER_RELISTEN_LOST_CAP_MS);
	ob_error("consumer.listen.lost", "listen=%s err=%s retry_max_ms=%d", r->listen,
	    ob_log_q(why, q, sizeof(q)), CONSUMER_RELISTEN_LOST_CAP_MS);
	unsigned tries = 0;
	while (!listening && ob_sig_stops() == 0) {
		ob_sig_wait(ob_backoff_next(&retry));
		if (consumer_server_relisten(r->srv, NULL, &listening, err, sizeof(err)) != OB_OK &&
		    !listening && ++tries % 30 == 0)
			ob_error("consumer.listen.lost", "listen=%s err=%s tries=%u", r->listen,
			    ob_log_q(err, q, sizeof(q)), tries);
	}
	if (listening)
		ob_warn("consumer.listen.restored", "listen=%s tls=kept", r->listen);
}

void
consumer_tls_reload(void *arg)
{
	struct consumer_tls_reload *r = arg;
	char err[1024], q[1100], qc[700], qk[700], qa[700];
	nng_tls_config *tls = NULL;
	if (ob_bus_tls_config_new(true, &r->files, r->listen, &tls, err, sizeof(err)) != OB_OK) {
		count(r, false);
		ob_warn("consumer.tls.reload_failed", "listen=%s err=%s kept=1", r->listen,
		    ob_log_q(err, q, sizeof(q)));
		return;
	}
	bool listening = false;
	int rc = consumer_server_relisten(r->srv, tls, &listening, err, sizeof(err));
	nng_tls_config_free(tls); /* the server holds its own when it took it */
	if (rc == OB_OK) {
		count(r, true);
		ob_info("consumer.tls.reloaded", "listen=%s cert=%s key=%s ca=%s"
		    " connections=reopened", r->listen, ob_log_q(r->files.cert, qc, sizeof(qc)),
		    ob_log_q(r->files.key, qk, sizeof(qk)), ob_log_q(r->files.ca, qa, sizeof(qa)));
		return;
	}
	count(r, false);
	if (listening) {
		ob_warn("consumer.tls.reload_failed", "listen=%s err=%s kept=1", r->listen,
		    ob_log_q(err, q, sizeof(q)));
		return;
	}
	relisten_lost(r, err);
}
