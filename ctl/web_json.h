/*
 * web_json.h - the JSON text every answer of `outboxctl web` carries: ASCII
 * only, with '<', '>' and '&' written \u003c, \u003e, \u0026, so that no
 * answer holds a markup character even if something served it as HTML
 * (keys, payloads, error texts and a tool's parameters come from outside).
 * One writer for the poller's snapshot, the demonstration's state and the
 * server's own answers (docs/web.md, "Text, never markup").
 */
#ifndef OUTBOX_CTL_WEB_JSON_H
#define OUTBOX_CTL_WEB_JSON_H

#include <stddef.h>

#include <jansson.h>

/* j as compact JSON text, markup characters escaped; malloc'd, its length
 * in *len. NULL when out of memory. */
char *web_json_text(const json_t *j, size_t *len);

/* text (compact JSON, malloc'd; taken) with markup characters escaped;
 * malloc'd, its length in *len. NULL when out of memory (text freed). */
char *web_json_escape_markup(char *text, size_t *len);

#endif
