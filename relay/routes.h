/*
 * routes.h - the relay's route table: which destinations (consumer URLs)
 * take which topic. Parsed once from the --route TOPIC=URL specs by the
 * supervisor, before it forks (the workers inherit it); plain data, no nng
 * state. A worker's destination table (dest.h) opens one socket per URL.
 */
#ifndef OUTBOX_RELAY_ROUTES_H
#define OUTBOX_RELAY_ROUTES_H

#include <stddef.h>

/* Topic -> destinations. Topic "*" is the default route. */
struct relay_route {
	char *topic;           /* owned */
	int *dests;            /* owned: indices into relay_routes.urls */
	int ndests;
};

struct relay_routes {
	char **urls;           /* owned: every destination once, in first-seen order */
	int nurls;
	struct relay_route *routes; /* owned: in first-seen order */
	int nroutes;
};

/* Parse "TOPIC=URL" specs (URL checked by nng_url_parse, for a transport
 * nng dials) into rt, which must be zeroed. A URL named twice is one
 * destination; a topic named twice has both. OB_OK, OB_ENOMEM, or OB_EINVAL
 * with a one-line reason in err (rt is then freed). */
int relay_routes_parse(struct relay_routes *rt, char **specs, size_t n, char *err,
    size_t errlen);

/* Free everything; rt is zeroed and may be parsed into again. */
void relay_routes_free(struct relay_routes *rt);

/* The index of topic's route: its own, else the default "*", else -1 (no
 * route: the topic waits, unclaimed, or with --unrouted dead-letter its
 * messages are dead-lettered). */
int relay_routes_find(const struct relay_routes *rt, const char *topic, size_t len);

#endif
