# The relay's tests (issue 3): backoff and breaker units, delivery rules,
# process model and shutdown, database loss.
outbox_test(test_backoff SOURCES unit/test_backoff.c LABELS unit)
outbox_test(test_breaker SOURCES unit/test_breaker.c LABELS unit LIBS outbox_relaylib)
outbox_test(test_relay_delivery SOURCES integration/test_relay_delivery.c
  LABELS integration PG TIMEOUT 600)
outbox_test(test_relay_process SOURCES integration/test_relay_process.c
  LABELS integration PG TIMEOUT 600)
outbox_test(test_relay_dbloss SOURCES integration/test_relay_dbloss.c
  LABELS integration PG TIMEOUT 300)
# Every program refuses a schema that does not serve its protocol version.
outbox_test(test_protocol SOURCES integration/test_protocol.c
  LABELS integration PG TIMEOUT 300)
# The log's reading and keeping rules (late commits, slot switch, truncate).
outbox_test(test_streams SOURCES integration/test_streams.c
  LABELS integration PG TIMEOUT 120)
