/*
 * log.h - one line per event on stderr.
 *
 * Fixed leading fields: time (UTC, ms), level, program, pid, a stable dotted
 * event name; then the caller's key=value context. --log-format picks text
 * (key=value) or json. The level check happens before any formatting.
 * Never call from a signal handler. Thread-safe (one write(2) per line).
 */
#ifndef OUTBOX_LOG_H
#define OUTBOX_LOG_H

#include <stdbool.h>

enum ob_log_level { OB_LOG_DEBUG = 0, OB_LOG_INFO, OB_LOG_WARN, OB_LOG_ERROR };
enum ob_log_format { OB_LOG_TEXT = 0, OB_LOG_JSON };

/* Set the program name, level and format. Call once at start-up (before
 * threads). Defaults: "outbox", info, text. */
void ob_log_init(const char *program, enum ob_log_level level,
    enum ob_log_format format);

/* Parse "debug|info|warn|error" / "text|json". OB_OK or OB_EINVAL. */
int ob_log_level_parse(const char *s, enum ob_log_level *out);
/* Change the least severe level logged (a reload). */
void ob_log_set_level(enum ob_log_level level);
int ob_log_format_parse(const char *s, enum ob_log_format *out);

/* Refresh the pid field (call in a child after fork). */
void ob_log_set_pid(void);

extern enum ob_log_level ob_log_min_level;

/* Log one event. fmt yields space-separated key=value pairs; a value with
 * spaces or quotes must be wrapped with ob_log_q (below) by the caller.
 * In json mode every pair becomes a JSON member. */
void ob_log_event(enum ob_log_level level, const char *event, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

#define ob_log(level, event, ...)                                   \
	do {                                                        \
		if ((level) >= ob_log_min_level)                    \
			ob_log_event((level), (event), __VA_ARGS__); \
	} while (0)

#define ob_debug(event, ...) ob_log(OB_LOG_DEBUG, event, __VA_ARGS__)
#define ob_info(event, ...) ob_log(OB_LOG_INFO, event, __VA_ARGS__)
#define ob_warn(event, ...) ob_log(OB_LOG_WARN, event, __VA_ARGS__)
#define ob_error(event, ...) ob_log(OB_LOG_ERROR, event, __VA_ARGS__)

/* Quote a value for a key=value line: returns s itself when it needs no
 * quoting, else a "..."-quoted, escaped copy in buf (truncated to fit). */
const char *ob_log_q(const char *s, char *buf, unsigned buflen);

#endif
