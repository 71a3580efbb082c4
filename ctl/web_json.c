/*
 * web_json.c - the JSON text of `outboxctl web`'s answers (web_json.h):
 * jansson's compact ASCII output, then '<', '>' and '&' as \u escapes.
 * They can only occur inside strings in JSON text, where the escape means
 * the same character to every JSON reader.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web_json.h"

static bool
markup(char c)
{
	return c == '<' || c == '>' || c == '&';
}

char *
web_json_escape_markup(char *text, size_t *len)
{
	if (text == NULL)
		return NULL;
	size_t n = 0, extra = 0;
	for (; text[n] != '\0'; n++)
		extra += markup(text[n]) ? 5 : 0;
	char *o = malloc(n + extra + 1), *w = o;
	if (o == NULL) {
		free(text);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (markup(text[i]))
			w += sprintf(w, "\\u%04x", (unsigned)text[i]);
		else
			*w++ = text[i];
	}
	*w = '\0';
	free(text);
	*len = (size_t)(w - o);
	return o;
}

char *
web_json_text(const json_t *j, size_t *len)
{
	return web_json_escape_markup(json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII |
	    JSON_REAL_PRECISION(6)), len);
}
