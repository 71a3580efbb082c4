/*
 * ts_proxy.h - a real forward HTTP proxy for the webhook's proxy tests:
 * Debian's tinyproxy (scripts/setup-deps.sh --tests), started by the test
 * on a loopback port the kernel chose, CONNECT allowed only to the ports
 * given, its log read for what it was asked. tinyproxy cannot listen on
 * port 0, so the port is taken from a socket bound to 127.0.0.1:0 and held
 * (bound, never listening, SO_REUSEADDR) until tinyproxy listens on it:
 * no other program can be handed it meanwhile.
 */
#ifndef OUTBOX_TS_PROXY_H
#define OUTBOX_TS_PROXY_H

#include <stdbool.h>
#include <stddef.h>

struct ts_proxy;

/* Whether tinyproxy is installed; why not into why when it is not. */
bool ts_proxy_available(char *why, size_t whylen);

/* Start tinyproxy on 127.0.0.1 allowing CONNECT to ports[0..n) only (and
 * forwarding plain http:// requests anywhere on loopback); returns once it
 * accepts connections. Asserts it started, showing its log when not.
 * Release with ts_proxy_stop. */
struct ts_proxy *ts_proxy_start(const int *ports, int n);

/* "http://127.0.0.1:PORT": what HTTPS_PROXY / http_proxy are set to. */
const char *ts_proxy_url(const struct ts_proxy *p);

/* How many requests it logged whose request line contains needle, e.g.
 * "CONNECT 127.0.0.1:4433 " or "POST http://127.0.0.1:8080/hook ". */
int ts_proxy_requests(const struct ts_proxy *p, const char *needle);

/* Its log file (for a failing assertion's message). */
const char *ts_proxy_log(const struct ts_proxy *p);

/* SIGTERM, wait, free. */
void ts_proxy_stop(struct ts_proxy *p);

#endif
