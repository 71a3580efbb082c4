/*
 * reload.h - what a program does on SIGHUP: read its settings again (the
 * flags it was started with, its --config file, the environment) and
 * apply the ones that can change while it runs. Today that is the log
 * level (and, outside this file, the relay's and the consumer's TLS files,
 * re-read from the same paths: relay/route_tls.h, consumer/tls_reload.h);
 * a setting that changed and cannot is named in the log line as
 * needing a restart. A reload that does not parse or check keeps every
 * setting as it was and says why.
 *
 *   <prefix>.reload         log_level=debug was=info restart_needed=batch
 *   <prefix>.reload_failed  err="..." log_level=info
 */
#ifndef OUTBOX_RELOAD_H
#define OUTBOX_RELOAD_H
#include <stddef.h>

#include "outbox/config.h"

struct ob_reload {
	const struct ob_cfg_program *program;
	void *cfg;          /* the settings in use; its log level is updated */
	size_t cfg_size;    /* sizeof the settings struct */
	int argc;
	char **argv;        /* as main got them */
	const char *prefix; /* of the two events: "relay", "consumer", ... */
	/* the program's own checks after parsing (NULL = none): OB_OK or an
	 * error line in err */
	int (*check)(const void *cfg, char *err, size_t errlen);
};

/* The values of the result label of a reload's counters (the relay's and
 * the consumer's outbox_*_tls_reload_total): "ok", "failed". */
#define OB_RELOAD_RESULTS 2
extern const char *const ob_reload_results[OB_RELOAD_RESULTS];

/* One reload; logs one of the two events. OB_OK when it was applied. */
int ob_reload_run(const struct ob_reload *r);

/* The main thread of a program whose work runs in other threads: wait for
 * signals (common/sig.c) until a stop signal, one reload for each burst of
 * SIGHUPs. */
void ob_reload_until_stop(const struct ob_reload *r);

/* The same, and after each reload (applied or not) after(arg): what else
 * the program re-reads on SIGHUP (the consumer's TLS files); it logs its
 * own result. */
void ob_reload_until_stop_then(const struct ob_reload *r, void (*after)(void *arg),
    void *arg);

#endif
