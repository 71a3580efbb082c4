/*
 * log.c - one line per event on stderr, as key=value text or JSON.
 *
 * Owns the program name, level, format and cached pid set at start-up. Each
 * line is built in a stack buffer no larger than PIPE_BUF and emitted with
 * one write(2), so lines from threads and forked children never interleave.
 * Never allocates, never changes errno, and must never be called from a
 * signal handler (the clock and stdio formatting are not async-signal-safe).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/clock.h"
#include "outbox/log.h"

#define LINE_CAP 4096 /* <= PIPE_BUF: one write to a pipe stays atomic */
#define EVENT_MAX 200 /* an event name is a short dotted identifier */

enum ob_log_level ob_log_min_level = OB_LOG_INFO;

static enum ob_log_format log_format = OB_LOG_TEXT;
static char log_prog[64] = "outbox";
static pid_t log_pid; /* 0 until first read */

static const char *const level_names[] = { "debug", "info", "warn", "error" };
static const char *const format_names[] = { "text", "json" };

/* A reload (SIGHUP) changes the level while other threads log: one
 * aligned int store, which they read as old or new. */
void
ob_log_set_level(enum ob_log_level level)
{
	__atomic_store_n(&ob_log_min_level, level, __ATOMIC_RELAXED);
}

void
ob_log_init(const char *program, enum ob_log_level level,
    enum ob_log_format format)
{
	snprintf(log_prog, sizeof log_prog, "%s", program ? program : "outbox");
	ob_log_min_level = level;
	log_format = format;
	log_pid = getpid();
}

/* The index of s in names[0..n), or -1. */
static int
name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; s != NULL && i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int
ob_log_level_parse(const char *s, enum ob_log_level *out)
{
	int i = name_index(s, level_names, OB_LOG_ERROR + 1);
	if (i < 0)
		return OB_EINVAL;
	*out = (enum ob_log_level)i;
	return OB_OK;
}

int
ob_log_format_parse(const char *s, enum ob_log_format *out)
{
	int i = name_index(s, format_names, OB_LOG_JSON + 1);
	if (i < 0)
		return OB_EINVAL;
	*out = (enum ob_log_format)i;
	return OB_OK;
}

void
ob_log_set_pid(void)
{
	log_pid = getpid();
}

/* One byte of a quoted value as written: its escape (\" \\ \n \r \t, other
 * control bytes \xNN in key=value text, \u00NN in JSON) or the byte itself.
 * Returns the length put in seq; more than 1 only for an escape. */
static size_t
escape_byte(unsigned char c, bool json, char seq[8])
{
	switch (c) {
	case '"': return (size_t)snprintf(seq, 8, "\\\"");
	case '\\': return (size_t)snprintf(seq, 8, "\\\\");
	case '\n': return (size_t)snprintf(seq, 8, "\\n");
	case '\r': return (size_t)snprintf(seq, 8, "\\r");
	case '\t': return (size_t)snprintf(seq, 8, "\\t");
	}
	if (c < 0x20 || c == 0x7f)
		return (size_t)snprintf(seq, 8, json ? "\\u%04x" : "\\x%02x", c);
	seq[0] = (char)c;
	return 1;
}

const char *
ob_log_q(const char *s, char *buf, unsigned buflen)
{
	size_t need = 2, len = 0, lim;
	bool plain = true, cut;
	char seq[8];

	if (s == NULL)
		s = "";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		size_t k = escape_byte(*p, false, seq);
		need += k;
		if (k > 1 || *p == ' ' || *p == '=')
			plain = false;
	}
	if (plain && *s != '\0')
		return s;
	if (buflen < 3) /* not even room for "" */
		return buflen ? (buf[0] = '\0', buf) : "";

	/* room for the closing quote and NUL; or for ..." and NUL if cut */
	cut = need + 1 > buflen;
	lim = !cut ? buflen - 2 : buflen >= 6 ? buflen - 5 : 1;
	buf[len++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		size_t k = escape_byte(*p, false, seq);
		if (len + k > lim)
			break;
		memcpy(buf + len, seq, k);
		len += k;
	}
	if (cut && buflen >= 6) {
		memcpy(buf + len, "...", 3);
		len += 3;
	}
	buf[len++] = '"';
	buf[len] = '\0';
	return buf;
}

static void
emit(const char *b, size_t n)
{
	int saved = errno;

	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			break; /* nowhere left to complain */
		}
		b += w;
		n -= (size_t)w;
	}
	errno = saved;
}

/*
 * JSON writer over a fixed buffer. Everything stays below lim, which keeps
 * room for the worst-case ending ..."}\n so a cut line is still one valid
 * object whose last string value ends in "...".
 */
struct jw {
	char *b;
	size_t len, lim;
	bool cut;
};

static bool
j_raw(struct jw *w, const char *s, size_t n)
{
	if (w->len + n > w->lim)
		return false;
	memcpy(w->b + w->len, s, n);
	w->len += n;
	return true;
}

/* String content (no quotes); false if it did not all fit. */
static bool
j_str(struct jw *w, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char seq[8];
		size_t k = escape_byte((unsigned char)s[i], true, seq);

		if (!j_raw(w, seq, k))
			return false;
	}
	return true;
}

/* ,"key":"value" -- all of it, or as much of the value as fits. */
static void
j_member(struct jw *w, const char *k, size_t kn, const char *v, size_t vn)
{
	size_t mark = w->len;

	if (w->cut)
		return;
	if (!j_raw(w, ",\"", 2) || !j_str(w, k, kn) || !j_raw(w, "\":\"", 3)) {
		w->len = mark; /* not even the key: drop the member */
		w->cut = true;
		w->b[--w->len] = '\0'; /* reopen the previous value */
		return;
	}
	if (!j_str(w, v, vn)) {
		w->cut = true; /* value left open, closed by j_end */
		return;
	}
	w->b[w->len++] = '"'; /* fits: lim keeps room */
}

static size_t
j_end(struct jw *w)
{
	if (w->cut) {
		memcpy(w->b + w->len, "...\"", 4);
		w->len += 4;
	}
	memcpy(w->b + w->len, "}\n", 2);
	return w->len + 2;
}

static int
hexval(char c)
{
	return isdigit((unsigned char)c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Decode a key=value value in place: "..." with \" \\ \n \r \t \xNN (as
 * written by ob_log_q), or a bare run up to the next space. Advances *sp. */
static size_t
take_value(char **sp)
{
	char *s = *sp, *start = s, *dst = s;

	if (*s != '"') {
		while (*s != '\0' && *s != ' ')
			s++;
		*sp = s;
		return (size_t)(s - dst);
	}
	for (s++; *s != '\0' && *s != '"'; s++) {
		if (*s != '\\' || s[1] == '\0') {
			*dst++ = *s;
			continue;
		}
		switch (*++s) {
		case 'n': *dst++ = '\n'; break;
		case 'r': *dst++ = '\r'; break;
		case 't': *dst++ = '\t'; break;
		case 'x':
			if (isxdigit((unsigned char)s[1]) &&
			    isxdigit((unsigned char)s[2])) {
				*dst++ = (char)(hexval(s[1]) << 4 | hexval(s[2]));
				s += 2;
			} else {
				*dst++ = 'x';
			}
			break;
		default: *dst++ = *s; break;
		}
	}
	if (*s == '"')
		s++;
	*sp = s;
	return (size_t)(dst - start);
}

/* Does the token at s start with key= ? */
static bool
has_key(const char *s)
{
	while (*s != '\0' && *s != ' ' && *s != '=' && *s != '"')
		s++;
	return *s == '=';
}

/* Turn the caller's key=value text into JSON members; runs of words
 * without '=' become one "msg" member. body is decoded in place. */
static void
j_body(struct jw *w, char *s)
{
	while (*s != '\0') {
		char *k, *v;
		size_t kn, vn;

		if (*s == ' ') {
			s++;
			continue;
		}
		if (has_key(s)) {
			k = s;
			kn = strcspn(s, "=");
			s += kn + 1;
			v = s;
			vn = take_value(&s);
		} else if (*s == '"') {
			k = "msg";
			kn = 3;
			v = s;
			vn = take_value(&s);
		} else {
			k = "msg";
			kn = 3;
			v = s;
			for (;;) {
				s += strcspn(s, " ");
				char *next = s + strspn(s, " ");
				if (*next == '\0' || has_key(next) ||
				    *next == '"')
					break;
				s = next;
			}
			vn = (size_t)(s - v);
		}
		j_member(w, k, kn, v, vn);
	}
}

void
ob_log_event(enum ob_log_level level, const char *event, const char *fmt,
    ...)
{
	char line[LINE_CAP], ts[OB_WALL_ISO_LEN];
	size_t len;
	va_list ap;
	int n;

	if (level < ob_log_min_level)
		return;
	if ((unsigned)level > OB_LOG_ERROR)
		level = OB_LOG_ERROR;
	if (log_pid == 0)
		log_pid = getpid();
	if (event == NULL)
		event = "";
	ob_wall_iso(ts);

	if (log_format == OB_LOG_JSON) {
		char body[LINE_CAP];
		struct jw w = { line, 0, sizeof line - 8, false };

		va_start(ap, fmt);
		n = vsnprintf(body, sizeof body, fmt, ap);
		va_end(ap);
		w.len = (size_t)snprintf(line, sizeof line,
		    "{\"ts\":\"%s\",\"level\":\"%s\",\"prog\":\"", ts,
		    level_names[level]);
		j_str(&w, log_prog, strlen(log_prog));
		w.len += (size_t)snprintf(line + w.len, sizeof line - w.len,
		    "\",\"pid\":%ld,\"event\":\"", (long)log_pid);
		if (!j_str(&w, event, strnlen(event, EVENT_MAX)))
			w.cut = true;
		else
			line[w.len++] = '"';
		if (n < 0)
			body[0] = '\0';
		j_body(&w, body);
		if (n >= (int)sizeof body && !w.cut) {
			w.cut = true; /* the body itself was cut */
			w.len--;
		}
		emit(line, j_end(&w));
		return;
	}

	n = snprintf(line, sizeof line, "%s level=%s prog=%s pid=%ld event=%.*s",
	    ts, level_names[level], log_prog, (long)log_pid, EVENT_MAX, event);
	len = (size_t)n;
	if (fmt[0] != '\0') {
		size_t start = ++len;

		line[start - 1] = ' ';
		va_start(ap, fmt);
		n = vsnprintf(line + len, sizeof line - len, fmt, ap);
		va_end(ap);
		if (n < 0)
			n = 0;
		if ((size_t)n >= sizeof line - len) {
			len = sizeof line - 1; /* keep one byte for '\n' */
			memcpy(line + len - 3, "...", 3);
		} else if (n == 0) {
			len = start - 1; /* "%s" of "": no trailing blank */
		} else {
			len += (size_t)n;
		}
		/* one event, one line: no raw control bytes from callers */
		for (size_t i = start; i < len; i++)
			if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
				line[i] = ' ';
	}
	line[len++] = '\n';
	emit(line, len);
}
