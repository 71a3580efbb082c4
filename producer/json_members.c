/*
 * json_members.c - unknown members of a JSON object (see json_members.h).
 */
#include <stdio.h>
#include <string.h>

#include "json_members.h"

bool
producer_json_only_members(const json_t *obj, const char *const *known, char *err,
    size_t errlen)
{
	const char *name;
	json_t *v;
	json_object_foreach((json_t *)obj, name, v) {
		bool ok = false;
		for (const char *const *k = known; *k != NULL; k++)
			ok = ok || strcmp(*k, name) == 0;
		if (ok)
			continue;
		size_t n = (size_t)snprintf(err, errlen, "field '%.64s' is not known (known:", name);
		for (const char *const *k = known; *k != NULL && n < errlen; k++)
			n += (size_t)snprintf(err + n, errlen - n, "%s %s", k == known ? "" : ",", *k);
		if (n < errlen)
			snprintf(err + n, errlen - n, ")");
		return false;
	}
	return true;
}

json_t *
producer_json_load_body(const char *body, size_t len, const char *const *known,
    const char *shape, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "body is not valid JSON: %s (line %d, column %d)", jerr.text,
		    jerr.line, jerr.column);
		return NULL;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "body must be a JSON object%s", shape);
	} else if (producer_json_only_members(root, known, err, errlen)) {
		return root;
	}
	json_decref(root);
	return NULL;
}
