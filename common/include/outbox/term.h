/*
 * term.h - text from the database (or a user) made safe to print on a
 * terminal.
 *
 * A producer chooses idempotency keys, topics and payloads, and a
 * consumer's error text is stored as last_error: printed raw, an ESC
 * sequence in one of them clears the screen, retitles the window or
 * rewrites what an operator reads. Everything outboxctl prints from a
 * stored field goes through ob_term_escape.
 */
#ifndef OUTBOX_TERM_H
#define OUTBOX_TERM_H

#include <stddef.h>

/* Keep '\n' and '\t' as they are (a multi-line field: a pretty payload).
 * Without it they are escaped too: a field stays on its line. */
#define OB_TERM_MULTILINE 1u
/* Copy '\\' as it is: for text whose backslashes are escapes already
 * (JSON: a payload, where PostgreSQL writes an ESC as \u001b). Without
 * it a backslash is doubled, so no escape in the output is ever text. */
#define OB_TERM_RAW_BACKSLASH 2u

/*
 * Copy s into out (at most outlen bytes, NUL included; nothing written
 * when outlen is 0) with every byte that a terminal could act on shown as
 * a visible escape:
 *   \n \r \t         as "\n" "\r" "\t" ('\n' and '\t' kept with
 *                    OB_TERM_MULTILINE; '\r' always escaped)
 *   other < 0x20, DEL as "\x1b", "\x7f"
 *   not UTF-8        each byte of a malformed, overlong, surrogate or
 *                    out-of-range sequence as "\xff"
 *   C1 controls and  (U+0080..U+009F; U+202A..U+202E, U+2066..U+2069:
 *   bidi overrides   they reorder what is shown) as "\u009b", "\u202e"
 *   backslash        as "\\" (so an escape in the output is never
 *                    text), unless OB_TERM_RAW_BACKSLASH
 * Everything else (printable ASCII, valid UTF-8) is copied. A cut never
 * splits an escape or a UTF-8 sequence. Returns the length the whole
 * escaped text needs without the NUL (as snprintf: >= outlen means cut).
 * s NULL is "". Borrows s; never allocates.
 */
size_t ob_term_escape(char *out, size_t outlen, const char *s, unsigned flags);

#endif
