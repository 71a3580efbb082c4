/*
 * fuzz_config.c - libFuzzer target for the config values every program
 * parses from its flags, environment and --config file (common/config.c)
 * and for the relay's TOPIC=URL routes (relay/routes.c).
 *
 * The input is split at newlines into arguments. Each piece is given as
 * the value of every kind of option (string, int, bool, duration, size,
 * enum, list) and to ob_cfg_parse_duration; all the pieces together are
 * a route table. A value must either be refused with a one-line reason or
 * be accepted within the option's bounds (an accepted route table names
 * only URLs that were in the input). Anything else aborts.
 *
 * Built and run by ctest (tests/fuzz.cmake); by hand:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *       -I common/include -I relay -I /usr/include/postgresql tests/fuzz/fuzz_config.c \
 *       common/config.c common/pg_redact.c common/url.c common/err.c relay/routes.c -lnng -lpq \
 *       -o /tmp/fuzz_config
 *   mkdir -p /tmp/cfg-new && /tmp/fuzz_config -max_total_time=60 /tmp/cfg-new tests/data/config
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/config.h"
#include "outbox/err.h"
#include "routes.h"

#define CHECK(c)                 \
	do {                     \
		if (!(c))        \
			abort(); \
	} while (0)

#define FUZZ_MAX_ARGS 64 /* pieces looked at per input */

struct fuzz_cfg {
	char *s;
	int64_t i;
	bool b;
	int64_t d;
	int64_t z;
	char *e;
	struct ob_cfg_list l;
};

#define F(field) offsetof(struct fuzz_cfg, field)
static const struct ob_cfg_opt table[] = {
	{ "s", "FUZZ_S", OB_CFG_STRING, NULL, 0, 0, NULL, false, false, F(s), "string" },
	{ "i", "FUZZ_I", OB_CFG_INT, "1", -5, 1000, NULL, false, false, F(i), "int" },
	{ "b", "FUZZ_B", OB_CFG_BOOL, "false", 0, 0, NULL, false, false, F(b), "bool" },
	{ "d", "FUZZ_D", OB_CFG_DURATION, "1s", 10, 86400000, NULL, false, false, F(d), "duration" },
	{ "z", "FUZZ_Z", OB_CFG_SIZE, "1k", 0, 1 << 30, NULL, false, false, F(z), "size" },
	{ "e", "FUZZ_E", OB_CFG_ENUM, "on", 0, 0, "on|off", false, false, F(e), "enum" },
	{ "l", "FUZZ_L", OB_CFG_LIST, NULL, 0, 0, NULL, false, false, F(l), "list" },
	OB_CFG_END
};

/* --NAME VALUE through the real parser; the result within bounds. */
static void
one_value(const char *name, const char *value)
{
	struct fuzz_cfg c;
	char flag[8], err[512];
	memset(&c, 0, sizeof(c));
	snprintf(flag, sizeof(flag), "--%s", name);
	char *argv[] = { "fuzz", flag, (char *)value, NULL };
	int first = 0;
	bool help = false;
	int rc = ob_cfg_parse(table, &c, 3, argv, &first, &help, err, sizeof(err));
	if (rc == OB_OK && help) {
		/* "-h" / "--help" where a value was expected: help, nothing parsed */
	} else if (rc == OB_OK) {
		CHECK(c.i >= -5 && c.i <= 1000);
		CHECK(c.d >= 10 && c.d <= 86400000);
		CHECK(c.z >= 0 && c.z <= (1 << 30));
		CHECK(c.e != NULL && (strcmp(c.e, "on") == 0 || strcmp(c.e, "off") == 0));
	} else {
		CHECK(rc == OB_EINVAL && err[0] != '\0' && strchr(err, '\n') == NULL);
	}
	ob_cfg_free(table, &c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *args[FUZZ_MAX_ARGS];
	size_t n = 0;
	for (char *p = text, *nl; n < FUZZ_MAX_ARGS; p = nl + 1) {
		nl = strchr(p, '\n');
		args[n++] = p;
		if (nl == NULL)
			break;
		*nl = '\0';
	}
	static const char *names[] = { "s", "i", "b", "d", "z", "e", "l" };
	for (size_t k = 0; k < n; k++) {
		for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
			one_value(names[j], args[k]);
		int64_t ms = 0;
		if (ob_cfg_parse_duration(args[k], &ms) == OB_OK)
			CHECK(ms >= 0);
	}

	struct relay_routes rt;
	char err[512];
	memset(&rt, 0, sizeof(rt));
	int rc = relay_routes_parse(&rt, args, n, err, sizeof(err));
	if (rc == OB_OK) {
		for (int u = 0; u < rt.nurls; u++) {
			bool seen = false;
			for (size_t k = 0; k < n && !seen; k++)
				seen = strstr(args[k], rt.urls[u]) != NULL;
			CHECK(seen);
		}
		for (int r = 0; r < rt.nroutes; r++)
			CHECK(relay_routes_find(&rt, rt.routes[r].topic, strlen(rt.routes[r].topic)) >= 0);
		relay_routes_free(&rt);
	} else {
		CHECK(err[0] != '\0');
	}
	free(text);
	return 0;
}
