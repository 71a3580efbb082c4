/*
 * bus_tls.h - mutual TLS for the relay -> consumer hop (nng's tls+tcp://
 * transport; mbedTLS 2.28 in Debian's nng 1.5.2), and what nng tells us
 * about the handshakes it refused.
 *
 * Settings are four paths / names shared by both programs: a PEM
 * certificate (chain), its unencrypted PEM private key, the PEM CA that
 * signs the peers' certificates, and (relay only) the name the consumer's
 * certificate must carry. The consumer requires a client certificate
 * signed by its CA (auth mode required); the relay requires the consumer's
 * certificate to be signed by its CA and to carry the server name.
 *
 * nng 1.5 exposes no way to read the peer certificate's subject (only
 * NNG_OPT_TLS_VERIFIED), so "signed by the CA" is the whole check: every
 * certificate that CA ever issued is admitted. This hop needs a CA of its
 * own (docs/security.md).
 *
 * Refusals: a handshake that fails never becomes an nng pipe, so no pipe
 * event reports it; nng counts it in the listener's / dialer's statistics
 * by class ("auth", "proto", "timeout", ...). ob_bus_refusals_* read those
 * counters; ob_bus_watch turns their growth into fresh counts (for
 * metrics) and rate-limited log lines.
 */
#ifndef OUTBOX_BUS_TLS_H
#define OUTBOX_BUS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

/* Handshake deadline of nng 1.5's TLS transport (tlstran_pipe_start: the
 * SP header exchange and the TLS handshake together), not settable: a
 * connection that does not finish by then is closed. Stated for docs and
 * log lines. */
#define OB_BUS_TLS_NEGOTIATE_MS 10000

/* The TLS settings of one program (all borrowed; NULL = not set). */
struct ob_bus_tls_files {
	const char *cert;        /* --tls-cert: own certificate (chain), PEM */
	const char *key;         /* --tls-key: its private key, PEM, unencrypted */
	const char *ca;          /* --tls-ca: CA certificate(s) the peer's must chain to */
	const char *server_name; /* relay --tls-server-name: name the consumer's
	                          * certificate must carry; NULL = the URL's host */
};

/* Whether url is one of nng's TLS schemes (tls+tcp://, tls+tcp4://,
 * tls+tcp6://). */
bool ob_bus_tls_url(const char *url);

/* Start-up check without nng (the relay's supervisor must not create nng
 * state before it forks): urls[0..n) are the URLs this program listens on
 * (server) or dials (client). When one is a TLS URL, cert, key and ca must
 * all be set and readable regular files; when none is, none of them (nor a
 * server name) may be set, since settings that protect nothing are a
 * mistake to report, not to ignore. OB_OK, or OB_EINVAL with one line in
 * err that names the URL or the flag and the file. */
int ob_bus_tls_check(const char *const *urls, size_t n, const struct ob_bus_tls_files *f,
    bool server, char *err, size_t errlen);

/* Build the nng TLS configuration for one endpoint: server (consumer
 * listener: own certificate, CA, client certificate required) or client
 * (relay dialer to url: own certificate, CA, server name = f->server_name
 * or url's host). Reads and parses the files (mbedTLS, through nng): a file
 * that cannot be read or parsed gives OB_EINVAL with one line naming the
 * flag, the file and the reason. On OB_OK *out is owned: set it on the
 * dialer/listener (NNG_OPT_TLS_CONFIG takes its own hold), then release
 * with nng_tls_config_free. Initialises nng: never in the relay's
 * supervisor. */
int ob_bus_tls_config_new(bool server, const struct ob_bus_tls_files *f, const char *url,
    nng_tls_config **out, char *err, size_t errlen);

/* Classes of refused connections, as nng counts them on an endpoint. */
enum ob_bus_refusal {
	OB_BUS_REFUSED_AUTH,    /* TLS handshake failed: the peer's certificate was
	                         * not verified (unknown CA, expired, wrong name),
	                         * none was sent, or the peer does not speak TLS */
	OB_BUS_REFUSED_PROTO,   /* not an SP peer of the right protocol (a TLS
	                         * client on a plain listener, or the reverse) */
	OB_BUS_REFUSED_TIMEOUT, /* negotiation not finished in time */
	OB_BUS_REFUSED_CLOSED,  /* the peer closed or reset the connection during
	                         * negotiation (nng's "disconnect" and "other") */
	OB_BUS_REFUSED_COUNT
};

/* "tls_auth", "protocol", "timeout", "closed": the names of the classes,
 * and one of them ("unknown" out of range). */
extern const char *const ob_bus_refusal_names[OB_BUS_REFUSED_COUNT];
const char *ob_bus_refusal_name(enum ob_bus_refusal r);

/* One line for the log: what the class usually means. */
const char *ob_bus_refusal_hint(enum ob_bus_refusal r);

/* An endpoint's refusal counters since it was created. */
struct ob_bus_refusals {
	uint64_t n[OB_BUS_REFUSED_COUNT];
};

/* Read a listener's or dialer's counters from nng's statistics (one
 * nng_stats_get snapshot: a few microseconds for our handful of sockets;
 * do not call per message). OB_OK, or OB_ENET when nng has no
 * statistics for it (built without them). */
int ob_bus_refusals_listener(nng_listener l, struct ob_bus_refusals *out);
int ob_bus_refusals_dialer(nng_dialer d, struct ob_bus_refusals *out);

/* The growth of an endpoint's counters, rate-limited for the log: the first
 * refusal of a class is logged at once, then at most one line per
 * every_ms for that class, carrying the refusals since the last line. Not
 * thread-safe: one owner. */
struct ob_bus_watch {
	struct ob_bus_refusals seen;                  /* counters at the last look */
	uint64_t unlogged[OB_BUS_REFUSED_COUNT];     /* refused since the last line */
	int64_t next_log_ms[OB_BUS_REFUSED_COUNT];   /* no line of the class before */
	int64_t every_ms;
};

/* What one look found for one class. */
struct ob_bus_watch_news {
	uint64_t fresh[OB_BUS_REFUSED_COUNT]; /* refused since the last look (metrics) */
	uint64_t log[OB_BUS_REFUSED_COUNT];   /* > 0: log a line now, for this many */
	uint64_t total[OB_BUS_REFUSED_COUNT]; /* since the endpoint was created */
};

/* Compare now with the last look at now_ms; returns true when there is
 * anything fresh or to log. */
bool ob_bus_watch_update(struct ob_bus_watch *w, const struct ob_bus_refusals *now,
    int64_t now_ms, struct ob_bus_watch_news *news);

#endif
