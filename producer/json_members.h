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

#endif
