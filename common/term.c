/*
 * term.c - stored text made safe for a terminal: control bytes, invalid
 * UTF-8, C1 controls and bidi overrides become visible escapes
 * (ob_term_escape, term.h). Pure string work: never allocates, never
 * prints.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "outbox/term.h"

#define SEQ_MAX 8 /* the longest unit written: "\u202e" or a 4-byte character */

/* Length of the valid UTF-8 sequence at s (lead byte >= 0x80), with its
 * code point in *cp; 0 when it is malformed, overlong, a surrogate or past
 * U+10FFFF. */
static size_t
utf8_len(const unsigned char *s, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t v;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		v = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		v = c & 0x07;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		if (c == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		unsigned char k = s[i]; /* a NUL ends the check: not a continuation */
		if (k < (i == 1 ? lo : 0x80) || k > (i == 1 ? hi : 0xbf))
			return 0;
		v = (v << 6) | (k & 0x3f);
	}
	*cp = v;
	return n;
}

static bool
is_shown_escaped(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
	    (cp >= 0x2066 && cp <= 0x2069);
}

/* The unit at s (one escape or one character) into seq; its source length
 * into *used. Returns the unit's length. */
static size_t
unit(const unsigned char *s, unsigned flags, char seq[SEQ_MAX + 1], size_t *used)
{
	unsigned char c = s[0];
	uint32_t cp;
	size_t n;

	*used = 1;
	switch (c) {
	case '\\':
		if (flags & OB_TERM_RAW_BACKSLASH)
			break;
		return (size_t)snprintf(seq, SEQ_MAX + 1, "\\\\");
	case '\n':
		if (flags & OB_TERM_MULTILINE)
			break;
		return (size_t)snprintf(seq, SEQ_MAX + 1, "\\n");
	case '\t':
		if (flags & OB_TERM_MULTILINE)
			break;
		return (size_t)snprintf(seq, SEQ_MAX + 1, "\\t");
	case '\r':
		return (size_t)snprintf(seq, SEQ_MAX + 1, "\\r");
	default:
		if (c < 0x20 || c == 0x7f)
			return (size_t)snprintf(seq, SEQ_MAX + 1, "\\x%02x", c);
		if (c < 0x80)
			break;
		if ((n = utf8_len(s, &cp)) == 0)
			return (size_t)snprintf(seq, SEQ_MAX + 1, "\\x%02x", c);
		*used = n;
		if (is_shown_escaped(cp))
			return (size_t)snprintf(seq, SEQ_MAX + 1, "\\u%04x", (unsigned)cp);
		memcpy(seq, s, n);
		return n;
	}
	seq[0] = (char)c;
	return 1;
}

size_t
ob_term_escape(char *out, size_t outlen, const char *s, unsigned flags)
{
	const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
	size_t need = 0, len = 0;
	bool cut = outlen == 0;

	while (*p != '\0') {
		char seq[SEQ_MAX + 1];
		size_t used, k = unit(p, flags, seq, &used);

		if (!cut && len + k < outlen) {
			memcpy(out + len, seq, k);
			len += k;
		} else {
			cut = true;
		}
		need += k;
		p += used;
	}
	if (outlen > 0)
		out[len] = '\0';
	return need;
}
