/*
 * buf.h - a growable byte buffer (the one string builder of the project).
 *
 * Always NUL-terminated after its len bytes, so it can be used as a C
 * string. Functions that grow it return OB_OK or OB_ENOMEM; on OB_ENOMEM the
 * contents are unchanged.
 */
#ifndef OUTBOX_BUF_H
#define OUTBOX_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct ob_buf {
	char *data;  /* owned; NULL until the first append */
	size_t len;
	size_t cap;
};

#define OB_BUF_INIT { NULL, 0, 0 }

void ob_buf_init(struct ob_buf *b);
void ob_buf_fini(struct ob_buf *b);        /* frees data; b may be reused */
void ob_buf_reset(struct ob_buf *b);       /* len = 0, keeps the memory */
int ob_buf_reserve(struct ob_buf *b, size_t extra);
int ob_buf_append(struct ob_buf *b, const void *p, size_t n);
int ob_buf_puts(struct ob_buf *b, const char *s);
int ob_buf_printf(struct ob_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ob_buf_vprintf(struct ob_buf *b, const char *fmt, va_list ap);
int ob_buf_put_u8(struct ob_buf *b, uint8_t v);
int ob_buf_put_u16(struct ob_buf *b, uint16_t v); /* big-endian */
int ob_buf_put_u32(struct ob_buf *b, uint32_t v); /* big-endian */
int ob_buf_put_u64(struct ob_buf *b, uint64_t v); /* big-endian */

/* Append s as one element of a PostgreSQL text-array literal: quoted, with
 * '"' and '\\' escaped. The caller writes '{', ',' and '}'. */
int ob_buf_put_pg_array_text(struct ob_buf *b, const char *s, size_t n);

#endif
