/*
 * metrics_serve.h - the relay's metrics process (metrics_serve.c), forked
 * and stopped by the supervisor.
 */
#ifndef OUTBOX_RELAY_METRICS_SERVE_H
#define OUTBOX_RELAY_METRICS_SERVE_H

#include "outbox/metrics.h"
#include "outbox/reload.h"

/* The metrics process's body (metrics_serve.c): serve reg on addr until a
 * stop signal (common/sig.c), reloading on SIGHUP with reload (NULL =
 * none); reports "OK <port>" or "ERR <reason>" as one line on report_fd
 * (-1 = none) once bound. Returns the exit code. */
int relay_metrics_serve(const char *addr, struct ob_metrics *reg,
    const struct ob_reload *reload, int report_fd);

#endif
