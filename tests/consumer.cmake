# consumer/: the idempotency contract, batch apply, bad input, the webhook
# handler and the metrics endpoint (its request front end is fuzzed in
# tests/fuzz.cmake).
# The decisions made before any transaction (retention), without a database.
outbox_test(test_inbox_plan SOURCES unit/test_inbox_plan.c LABELS unit LIBS outbox_consumer)
# A downstream's Retry-After as a delay: both forms, the cap, garbage (table-driven).
outbox_test(test_retry_after SOURCES unit/test_retry_after.c LABELS unit LIBS outbox_consumer)
outbox_test(test_consumer_dedup SOURCES integration/test_consumer_dedup.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
outbox_test(test_consumer_badinput SOURCES integration/test_consumer_badinput.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
# The receive limit: a frame over --max-batch x (--max-payload + overhead)
# closes its connection from its length header (RSS flat); the defaults'
# ~1 GiB limit buffers a 64 MiB partial frame (shown first); the limit is
# exact and admits the largest legal frame.
outbox_test(test_consumer_recvmax SOURCES integration/test_consumer_recvmax.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
if(TARGET test_consumer_recvmax)
  add_dependencies(test_consumer_recvmax outbox-consumer)
endif()
outbox_test(test_consumer_webhook SOURCES integration/test_consumer_webhook.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
# A fence the effect itself checks: a webhook holder that lost its lease
# calls late; outbox-notify-sink --db refuses it by its fence (409), the
# broken --ignore-fence answers it as a replay (issue 33).
outbox_test(test_webhook_fence SOURCES integration/test_webhook_fence.c
  LABELS integration PG TIMEOUT 300)
if(TEST test_webhook_fence)
  add_dependencies(test_webhook_fence outbox-consumer outbox-notify-sink)
endif()
# Who frees outbox-notify-sink --db's records: created_at from the call's
# Outbox-Created-At (malformed 400), a call older than --retention-ms 422,
# the records past the retention purged by the sink itself (logged).
outbox_test(test_notify_sink_retention SOURCES integration/test_notify_sink_retention.c
  LABELS integration PG TIMEOUT 300)
if(TEST test_notify_sink_retention)
  add_dependencies(test_notify_sink_retention outbox-notify-sink)
endif()
# examples/: the Python, Node and Go services a user copies (enqueue in its
# transaction, OB002 under a savepoint; a signed-webhook receiver applying
# once in its own database), against a real relay and consumer; the Go one
# built offline in the test. Skipped without python3-psycopg, pg in
# examples/node, golang-go or golang-github-jackc-pgx-v4-dev (a failure
# under OUTBOX_TEST_STRICT=1).
outbox_test(test_examples SOURCES integration/test_examples.c
  LABELS integration PG TIMEOUT 300 LIBS OpenSSL::Crypto)
if(TEST test_examples)
  add_dependencies(test_examples outbox-consumer outbox-relay)
  set_tests_properties(test_examples PROPERTIES SKIP_RETURN_CODE 77)
endif()
# https:// targets: verification always on, against the system store (the
# test's CA handed over as SSL_CERT_FILE / SSL_CERT_DIR) or --webhook-ca
# alone; a store without the CA, another CA, another name, an expired
# certificate: retried, never applied, never parked.
outbox_test(test_consumer_webhook_https SOURCES integration/test_consumer_webhook_https.c
  support/webhook_target.c support/ts_tls_webhook.c LABELS integration PG TIMEOUT 300
  LIBS outbox_consumer)
# The webhook through a real forward proxy (tinyproxy): HTTPS_PROXY's
# CONNECT, the tunnel reused, NO_PROXY, http_proxy; at most once, the proxy
# reached is not the target reached. Skipped without tinyproxy (a failure
# under OUTBOX_TEST_STRICT=1).
outbox_test(test_consumer_webhook_proxy SOURCES integration/test_consumer_webhook_proxy.c
  support/webhook_target.c support/ts_proxy.c LABELS integration PG TIMEOUT 300
  LIBS outbox_consumer)
if(TEST test_consumer_webhook_proxy)
  set_tests_properties(test_consumer_webhook_proxy PROPERTIES SKIP_RETURN_CODE 77)
endif()

# The consumer's metrics endpoint:
# /metrics, /healthz, /readyz, numbers that move exactly, promtool check
# (SKIPPED for that check without promtool: scripts/get-promtool.sh),
# readiness following the database, passwords never logged.
outbox_test(test_consumer_metrics SOURCES integration/test_consumer_metrics.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
if(TEST test_consumer_metrics)
  set_property(TEST test_consumer_metrics APPEND PROPERTY ENVIRONMENT
    "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
  add_dependencies(test_consumer_metrics outbox-consumer)
endif()

# 1,100 idle connections on the metrics port of a consumer under a 1,024
# descriptor limit: the endpoint's cap keeps delivery flowing.
outbox_test(test_consumer_metrics_flood SOURCES integration/test_consumer_metrics_flood.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)

# The dedup identity is (topic, idempotency_key), as enqueue's uniqueness:
# one key on two topics through relay and consumer (the old key-alone
# identity first: the second dead-lettered), redeliveries per (topic, key),
# a handler's detail stored in its own record, the purge by row, migration inbox/005 on a table with records (built in
# place, or from an index built CONCURRENTLY beforehand), and consumer
# protocol 2's refusals of the old schema and of a consumer 1.
outbox_test(test_dedup_identity SOURCES integration/test_dedup_identity.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300)
if(TARGET test_dedup_identity)
  add_dependencies(test_dedup_identity outbox-consumer outbox-relay)
endif()

# One agent call to a downstream notification service, end to end (send
# and an MCP host -> producer -> outbox -> relay -> webhook -> downstream),
# with a fault at every hop: one message per call, the same key on every
# attempt, each key acted on once downstream.
outbox_test(test_chain SOURCES integration/test_chain.c support/webhook_target.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer outbox_producer)

# The webhook's at-most-once mode end to end (relay, consumer, a downstream
# that ignores the key, outboxctl webhook list/resolve): the default applies
# a lost answer twice there; at most once parks it (dead-lettered, listed),
# a requeue sends nothing until resolved (sent -> duplicate, not-sent ->
# once more); expired claims park, refused connections retry, other topics
# keep at-least-once.
outbox_test(test_webhook_at_most_once SOURCES integration/test_webhook_at_most_once.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300)
if(TARGET test_webhook_at_most_once)
  add_dependencies(test_webhook_at_most_once outbox-consumer outbox-relay outboxctl)
endif()

# The webhook's per-route mode: --webhook-at-most-once patterns and their
# limits, which failed calls are an unknown outcome, libcurl's codes.
outbox_test(test_webhook_mode SOURCES unit/test_webhook_mode.c LABELS unit
  LIBS outbox_consumer CURL::libcurl)
# The webhook's key from (source, topic, key): forms, escaping, bound.
outbox_test(test_webhook_key SOURCES unit/test_webhook_key.c LABELS unit)

# The webhook's signatures against an independent HMAC, and the secret file.
outbox_test(test_webhook_sign SOURCES unit/test_webhook_sign.c LABELS unit
  LIBS outbox_consumer)

# Several producer databases into one consumer (issue 18, part 2): the
# dedup identity (source, topic, key), one source per relay (--source, wire
# version 3), the webhook's key derived from it; the collision with one
# source shown first; records from before inbox 008 and v2 requests.
outbox_test(test_source_identity SOURCES integration/test_source_identity.c
  support/webhook_target.c LABELS integration PG TIMEOUT 600)
if(TARGET test_source_identity)
  add_dependencies(test_source_identity outbox-consumer outbox-relay)
endif()
# Relays upgraded from source '' to a named source: nothing applied twice.
outbox_test(test_source_legacy SOURCES integration/test_source_legacy.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
if(TARGET test_source_legacy)
  add_dependencies(test_source_legacy outbox-consumer outbox-relay outboxctl)
endif()
# The empty source and a named one of one key in two consumers at once:
# the source gate makes the second wait (the broken mode applies it twice).
outbox_test(test_source_race SOURCES integration/test_source_race.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
if(TARGET test_source_race)
  add_dependencies(test_source_race outbox-consumer)
endif()

# The crash harness (tests/support/ts_crash.h, issue 30): a PostgreSQL of
# the test's own with synchronous_commit = off as its default and the WAL
# writer's round at 10 s, stopped immediately (pg-tmp.sh crash) at a chosen
# point. After an "applied" reply the record and effect survive (also
# through a real relay: outboxctl prove --drained); a producer's
# asynchronous commit is on disk before its message is delivered (no
# phantom); an at-most-once webhook call in flight during the crash is not
# made again. No pg fixture: each
# case runs its own servers.
outbox_test(test_crash SOURCES integration/test_crash.c support/ts_crash.c
  support/webhook_target.c LABELS integration crash TIMEOUT 600)
if(TARGET test_crash)
  add_dependencies(test_crash outbox-consumer outbox-relay outboxctl)
endif()
# One clock decides the dedup retention (issue 30): a message stamped 2 h
# ahead by its producer's clock, time made to pass by moving its stored
# times: its record and its webhook claim are kept until the message is old
# by the inbox database's clock (the redelivery a duplicate), and one that
# is old is purged and refused.
outbox_test(test_retention_clock SOURCES integration/test_retention_clock.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300)
if(TARGET test_retention_clock)
  add_dependencies(test_retention_clock outbox-consumer)
endif()
