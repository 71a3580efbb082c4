/*
 * json_members.h - the check every JSON object the producer takes in makes
 * first (the API's report and message bodies, the MCP tools' arguments):
 * no member but the known ones, so that a misspelt field is an error that
 * names it instead of a value silently dropped.
 */
#ifndef OUTBOX_PRODUCER_JSON_MEMBERS_H
#define OUTBOX_PRODUCER_JSON_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* true when every member of obj is in known (NULL-terminated); else false
 * with "field 'X' is not known (known: a, b, c)" in err. */
bool producer_json_only_members(const json_t *obj, const char *const *known, char *err,
    size_t errlen);

/* A request body: parsed (duplicate members refused), a JSON object, with
 * only the known members. The document (owned: json_decref), or NULL with
 * the reason in err ("body is not valid JSON: ...", "body must be a JSON
 * object<shape>", or the unknown member). */
json_t *producer_json_load_body(const char *body, size_t len, const char *const *known,
    const char *shape, char *err, size_t errlen);

#endif
