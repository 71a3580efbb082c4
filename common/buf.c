/*
 * buf.c - the growable byte buffer.
 *
 * Invariant: once data is allocated, data[len] == '\0' and len < cap, so the
 * buffer is always a valid C string. Every growing call either succeeds
 * completely or leaves len and the bytes before it untouched (OB_ENOMEM):
 * callers building a frame or a query may give up without cleaning up.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/buf.h"
#include "outbox/err.h"

void
ob_buf_init(struct ob_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void
ob_buf_fini(struct ob_buf *b)
{
	free(b->data);
	ob_buf_init(b);
}

void
ob_buf_reset(struct ob_buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

int
ob_buf_reserve(struct ob_buf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	/* Room for extra bytes plus the NUL; refuse sizes that would wrap. */
	if (extra > SIZE_MAX - 1 - b->len)
		return OB_ENOMEM;
	need = b->len + extra + 1;
	if (b->data != NULL && need <= b->cap)
		return OB_OK;

	cap = b->cap < 64 ? 64 : b->cap;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;

	if ((p = realloc(b->data, cap)) == NULL)
		return OB_ENOMEM;
	if (b->data == NULL)
		p[0] = '\0';
	b->data = p;
	b->cap = cap;
	return OB_OK;
}

int
ob_buf_append(struct ob_buf *b, const void *p, size_t n)
{
	int rv;

	if ((rv = ob_buf_reserve(b, n)) != OB_OK)
		return rv;
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return OB_OK;
}

int
ob_buf_puts(struct ob_buf *b, const char *s)
{
	return ob_buf_append(b, s, strlen(s));
}

int
ob_buf_printf(struct ob_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rv;

	va_start(ap, fmt);
	rv = ob_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rv;
}

int
ob_buf_vprintf(struct ob_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	size_t room;
	int n, rv;

	/* First try in the spare room; most messages fit. */
	if ((rv = ob_buf_reserve(b, 0)) != OB_OK)
		return rv;
	room = b->cap - b->len;
	va_copy(cp, ap);
	n = vsnprintf(b->data + b->len, room, fmt, cp);
	va_end(cp);
	if (n < 0) {
		b->data[b->len] = '\0';
		return OB_EINVAL;
	}
	if ((size_t)n < room) {
		b->len += (size_t)n;
		return OB_OK;
	}

	/* vsnprintf overwrote data[len]: restore it if growing fails. */
	if ((rv = ob_buf_reserve(b, (size_t)n)) != OB_OK) {
		b->data[b->len] = '\0';
		return rv;
	}
	va_copy(cp, ap);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, cp);
	va_end(cp);
	b->len += (size_t)n;
	return OB_OK;
}

int
ob_buf_put_u8(struct ob_buf *b, uint8_t v)
{
	return ob_buf_append(b, &v, 1);
}

/* v's low n bytes, most significant first (the wire's byte order). */
static int
put_be(struct ob_buf *b, uint64_t v, size_t n)
{
	uint8_t p[8];

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	return ob_buf_append(b, p, n);
}

int
ob_buf_put_u16(struct ob_buf *b, uint16_t v)
{
	return put_be(b, v, 2);
}

int
ob_buf_put_u32(struct ob_buf *b, uint32_t v)
{
	return put_be(b, v, 4);
}

int
ob_buf_put_u64(struct ob_buf *b, uint64_t v)
{
	return put_be(b, v, 8);
}

/* '"' and '\\' are the two bytes a PostgreSQL array element escapes. */
static bool
array_escaped(char c)
{
	return c == '"' || c == '\\';
}

int
ob_buf_put_pg_array_text(struct ob_buf *b, const char *s, size_t n)
{
	size_t esc = 0;
	char *w;
	int rv;

	for (size_t i = 0; i < n; i++)
		if (array_escaped(s[i]))
			esc++;
	/* Size it all up front so a failure leaves the buffer as it was. */
	if (n > SIZE_MAX - 2 - esc)
		return OB_ENOMEM;
	if ((rv = ob_buf_reserve(b, n + esc + 2)) != OB_OK)
		return rv;

	w = b->data + b->len;
	*w++ = '"';
	for (size_t i = 0; i < n; i++) {
		if (array_escaped(s[i]))
			*w++ = '\\';
		*w++ = s[i];
	}
	*w++ = '"';
	*w = '\0';
	b->len = (size_t)(w - b->data);
	return OB_OK;
}
