# producer/: the HTTP API, the agent-side client and the fault matrix.
outbox_test(test_producer_input SOURCES unit/test_producer_input.c LABELS unit
  LIBS outbox_producer)
outbox_test(test_producer_api SOURCES integration/test_producer_api.c LABELS integration PG
  TIMEOUT 300 LIBS outbox_producer)
outbox_test(test_producer_client SOURCES integration/test_producer_client.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)
outbox_test(test_producer_matrix SOURCES integration/test_producer_matrix.c
  LABELS integration PG TIMEOUT 600 LIBS outbox_producer)

# serve --metrics: the counters move as the requests say, promtool accepts
# the output (promtool from scripts/get-promtool.sh into <build>/tools; the
# test says SKIPPED for that one check when it is absent), /readyz follows
# the database, and no subcommand prints a conninfo's password.
outbox_test(test_producer_metrics SOURCES integration/test_producer_metrics.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)
if(TEST test_producer_metrics)
  set_property(TEST test_producer_metrics APPEND PROPERTY ENVIRONMENT
    "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
endif()

# Slow and hostile clients on raw sockets (common/httpd.c): deadlines that a
# trickle cannot extend, the connection cap, the idle timeout, descriptor
# exhaustion with the protection off, request smuggling and %00 refused.
outbox_test(test_producer_slowclients SOURCES integration/test_producer_slowclients.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)

# serve --api-token-file: 401 + WWW-Authenticate without a valid bearer
# token (nothing written), several tokens, /healthz open, no token logged,
# bad token files exit 2.
outbox_test(test_producer_auth SOURCES integration/test_producer_auth.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)

# Token scopes (`scope=NAME TOKEN`): idempotency keys are per scope (two
# clients' same key = two reports and two messages, each sees only its
# own), tokens of one scope share keys (rotation), the default scope as
# before, the scope's name counted against the key limit, bad lines exit 2.
outbox_test(test_producer_scopes SOURCES integration/test_producer_scopes.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)

# `outbox-producer mcp` driven by the official MCP SDK client (tests/mcp):
# the tools, a lost response retried under the server-made key, the host's
# retry answered from the first result, the lookup, tool errors.
outbox_test(test_mcp_sdk SOURCES integration/test_mcp_sdk.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)

# `outbox-producer mcp` spoken to line by line on its pipes: host keys of
# 0, 255 and 256 bytes and not strings, and while the user is asked
# (--replay ask): a request answered busy, a notification ignored, stdin's
# end, stdout gone.
outbox_test(test_mcp_stdio SOURCES integration/test_mcp_stdio.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)

# serve --http https:// (OpenSSL, common/httpd_tls.c): a POST over HTTPS
# with a token enqueues one message, plain HTTP to the port is refused and
# writes nothing, half a ClientHello is cut off at --header-timeout while a
# legitimate request is served, --tls-ca requires a client certificate, bad
# TLS flags and files exit 2 with one line.
outbox_test(test_producer_https SOURCES integration/test_producer_https.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)

# POST /v1/messages and its lookup: create, replay, 422, bad input (400,
# 405, 413, nothing stored), 409 while in progress then the replay, a slow
# request taken over (one message), keys per token scope.
outbox_test(test_producer_messages SOURCES integration/test_producer_messages.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)

# docs/openapi.json against a running serve: every answer documented for
# its operation with a body of the documented schema, and every documented
# status produced.
outbox_test(test_producer_openapi SOURCES integration/test_producer_openapi.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)
