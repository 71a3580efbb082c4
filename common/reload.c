/*
 * reload.c - SIGHUP's reload (reload.h): parse the settings again into a
 * fresh struct, check them, apply the log level, name what needs a restart.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/log.h"
#include "outbox/reload.h"
#include "outbox/sig.h"

const char *const ob_reload_results[OB_RELOAD_RESULTS] = { "ok", "failed" };

#define CHANGED_MAX 512
#define LOG_LEVEL_OPT "log-level"

/* Drop name from the comma-separated list s, in place. */
static void
drop_name(char *s, const char *name)
{
	size_t n = strlen(name);
	for (char *p = s; (p = strstr(p, name)) != NULL; p++) {
		bool starts = p == s || p[-1] == ',';
		bool ends = p[n] == '\0' || p[n] == ',';
		if (!starts || !ends)
			continue;
		char *rest = p[n] == ',' ? p + n + 1 : p + n;
		if (p > s && *rest == '\0')
			p--; /* the last one: drop the comma before it */
		memmove(p, rest, strlen(rest) + 1);
		return;
	}
}

int
ob_reload_run(const struct ob_reload *r)
{
	if (r == NULL)
		return OB_EINVAL;
	const struct ob_cfg_opt *table = r->program->options;
	const struct ob_cfg_opt *lv = ob_cfg_find(table, LOG_LEVEL_OPT);
	char err[1024], q[1100], changed[CHANGED_MAX];
	const char *was = lv != NULL ? *(char **)(void *)((char *)r->cfg + lv->offset) : NULL;
	char event[64];
	snprintf(event, sizeof(event), "%s.reload_failed", r->prefix);
	void *fresh = calloc(1, r->cfg_size);
	if (fresh == NULL) {
		ob_warn(event, "err=%s log_level=%s kept=1", "\"out of memory\"", was != NULL ? was : "-");
		return OB_ENOMEM;
	}
	int first = 0;
	bool help = false;
	int rc = ob_cfg_parse(table, fresh, r->argc, r->argv, &first, &help, err, sizeof(err));
	if (rc == OB_OK && r->check != NULL)
		rc = r->check(fresh, err, sizeof(err));
	if (rc != OB_OK) {
		ob_warn(event, "err=%s log_level=%s kept=1", ob_log_q(err, q, sizeof(q)),
		    was != NULL ? was : "-");
		ob_cfg_free(table, fresh);
		free(fresh);
		return rc;
	}
	ob_cfg_changed(table, r->cfg, fresh, changed, sizeof(changed));
	char restart[CHANGED_MAX];
	snprintf(restart, sizeof(restart), "%s", changed);
	drop_name(restart, LOG_LEVEL_OPT);
	snprintf(event, sizeof(event), "%s.reload", r->prefix);
	enum ob_log_level old_level = ob_log_min_level, new_level = old_level;
	char *now = NULL;
	if (lv != NULL) {
		char **slot = (char **)(void *)((char *)r->cfg + lv->offset);
		char **fslot = (char **)(void *)((char *)fresh + lv->offset);
		now = *fslot;
		if (now != NULL)
			(void)ob_log_level_parse(now, &new_level);
		/* the line is logged under the more permissive of the two levels */
		if (new_level > old_level)
			ob_info(event, "log_level=%s was=%s restart_needed=%s", now, was,
			    restart[0] != '\0' ? restart : "-");
		ob_log_set_level(new_level);
		if (new_level <= old_level)
			ob_info(event, "log_level=%s was=%s restart_needed=%s", now, was,
			    restart[0] != '\0' ? restart : "-");
		/* the settings in use take the new level's text */
		char *keep = *slot;
		*slot = *fslot;
		*fslot = keep;
	} else {
		ob_info(event, "restart_needed=%s", restart[0] != '\0' ? restart : "-");
	}
	ob_cfg_free(table, fresh);
	free(fresh);
	return OB_OK;
}

void
ob_reload_until_stop(const struct ob_reload *r)
{
	ob_reload_until_stop_then(r, NULL, NULL);
}

void
ob_reload_until_stop_then(const struct ob_reload *r, void (*after)(void *arg), void *arg)
{
	unsigned reloads = ob_sig_reloads();
	while (ob_sig_stops() == 0) {
		ob_sig_wait(-1);
		if (ob_sig_reloads() != reloads) { /* SIGHUPs that came together: one reload */
			reloads = ob_sig_reloads();
			(void)ob_reload_run(r);
			if (after != NULL)
				after(arg);
		}
	}
}
