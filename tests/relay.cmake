# relay/: units (the breaker, the supervisor's metrics fold), the check
# that a pipeline slot and a breaker each have one writer, delivery rules,
# the process model and shutdown, database loss, the log's reading and
# keeping rules (late commits, slot switch, truncate, wakeup), per-key
# ordering, the metrics endpoint, the fault matrix and the chaos test, and
# the scans check (the hot paths of relay and consumer stay index lookups).
outbox_test(test_breaker SOURCES unit/test_breaker.c LABELS unit LIBS outbox_relaylib)
# One writer per state: a pipeline slot's fields change only in relay/slot.c
# (slot_enter), a breaker's only in relay/breaker.c; the negative test breaks
# a scratch copy seven ways and expects each caught.
add_test(NAME slot_writers COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-slot-writers.sh)
add_test(NAME slot_writers_negative
  COMMAND ${CMAKE_SOURCE_DIR}/tests/ops/slot_writers_negative.sh)
set_tests_properties(slot_writers slot_writers_negative PROPERTIES LABELS "ops" TIMEOUT 120)
# The retry-or-dead decision of a failed attempt (only one that reached a
# consumer can make a message dead), without a database.
outbox_test(test_retry_policy SOURCES unit/test_retry_policy.c LABELS unit LIBS outbox_relaylib)
# The pipeline slot state machine, event by event (relay/slot.h).
outbox_test(test_slot SOURCES unit/test_slot.c LABELS unit LIBS outbox_relaylib)
# The route table and the pick of a destination, without sockets.
outbox_test(test_routes SOURCES unit/test_routes.c LABELS unit LIBS outbox_relaylib)
# --standby-gate: its option checks and pg_lsn reading (the gate itself: failover_phantom)
outbox_test(test_standby_gate SOURCES unit/test_standby_gate.c LABELS unit LIBS outbox_relaylib)
# The supervisor's fold of the workers' live rows, the topic cache and the
# registry/destination limits, without processes.
outbox_test(test_relay_metrics_fold SOURCES unit/test_relay_metrics_fold.c LABELS unit
  LIBS outbox_relaylib)
outbox_test(test_relay_delivery SOURCES integration/test_relay_delivery.c
  LABELS integration PG TIMEOUT 600)
outbox_test(test_relay_process SOURCES integration/test_relay_process.c
  LABELS integration PG TIMEOUT 600)
outbox_test(test_relay_dbloss SOURCES integration/test_relay_dbloss.c
  LABELS integration PG TIMEOUT 300)
# Messages skipped at send time (over --max-payload) keep their own outcome
# while the worker's other frames are out (issue 29): real relay, slowed
# real consumer, each message checked in outbox and inbox.
outbox_test(test_relay_skipped SOURCES integration/test_relay_skipped.c
  LABELS integration PG TIMEOUT 300)
if(TARGET test_relay_skipped)
  add_dependencies(test_relay_skipped outbox-relay outbox-consumer)
endif()
# Issue 30: an outage longer than --max-age leaves every message pending
# (a closed TCP port, then a real consumer: each applied once; retries
# through an outage), a reached consumer still ends them by --max-age, and
# a topic with no route waits (status, metric, log) unless --unrouted
# dead-letter.
outbox_test(test_relay_outage SOURCES integration/test_relay_outage.c
  LABELS integration PG TIMEOUT 300)
if(TARGET test_relay_outage)
  add_dependencies(test_relay_outage outbox-relay outbox-consumer outboxctl)
endif()
# The log's reading and keeping rules and the wakeup, explicit interleavings;
# a poison message ends dead alone; a restore into a younger cluster.
outbox_test(test_streams SOURCES integration/test_streams.c
  LABELS integration PG TIMEOUT 300)
# enqueue's headers and not_before (022): stored, copied, checked; a
# delayed message and its key's later ones held back until it is due, and
# the real relay delivering it then.
outbox_test(test_enqueue_options SOURCES integration/test_enqueue_options.c
  LABELS integration PG TIMEOUT 300)
if(TARGET test_enqueue_options)
  add_dependencies(test_enqueue_options outbox-relay)
endif()
# The same restore for real: cluster A advanced with pg_resetwal -x
# (pg-tmp.sh OUTBOX_PG_NEXT_XID), its outbox dumped into a fresh cluster B,
# the real relay and consumer on both sides: each message applied once, in
# key order (the server's own pg_dump and pg_restore, as test_schema).
outbox_test(test_restore SOURCES integration/test_restore.c LABELS integration PG TIMEOUT 600)
if(TARGET test_restore)
  add_dependencies(test_restore outbox-relay outbox-consumer outboxctl)
  find_program(OUTBOX_PG_DUMP pg_dump HINTS /usr/lib/postgresql/15/bin)
  if(OUTBOX_PG_DUMP)
    set_property(TEST test_restore APPEND PROPERTY ENVIRONMENT "OUTBOX_PG_DUMP=${OUTBOX_PG_DUMP}")
  endif()
endif()
# Per-key ordering: failing head, dead head block/skip, takeover, concurrent
# producers of one key, a dead head past --dead-retention.
outbox_test(test_ordering SOURCES integration/test_ordering.c LABELS integration PG TIMEOUT 600)
# A downstream's Retry-After honoured through consumer and relay (429 with
# seconds, with an HTTP-date, and without, shown first), bounded by
# --max-age/--max-attempts; a consumer of wire version 1 logged once.
outbox_test(test_retry_after_e2e SOURCES integration/test_retry_after.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300)
# outbox.messages says what the per-row outbox.event_state says, in every
# state a message can be in; counting the pending ones reads no delivered
# message (issue 32 item 5).
outbox_test(test_messages_view SOURCES integration/test_messages_view.c
  LABELS integration PG TIMEOUT 300)
# pg_stat_user_tables.seq_scan does not move during a drain.
outbox_test(test_scans SOURCES integration/test_scans.c
  LABELS integration PG TIMEOUT 300)

# /metrics, /healthz, /readyz from the relay's metrics process, numbers that
# move, promtool check (SKIPPED for that check when promtool is absent:
# scripts/get-promtool.sh), passwords never logged.
outbox_test(test_relay_metrics SOURCES integration/test_relay_metrics.c
  LABELS integration PG TIMEOUT 600)
if(TEST test_relay_metrics)
  set_property(TEST test_relay_metrics APPEND PROPERTY ENVIRONMENT
    "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
  add_dependencies(test_relay_metrics outbox-relay)
endif()

# The fault matrix (run through the demo program outbox-fault-matrix) and
# the chaos test, against the real relay and consumer.
outbox_test(test_faultmatrix SOURCES integration/test_faultmatrix.c
  LABELS integration PG TIMEOUT 900)
if(TARGET test_faultmatrix)
  add_dependencies(test_faultmatrix outbox-fault-matrix outbox-relay outbox-consumer)
endif()
# Starts and restarts its own PostgreSQL: no fixture needed. Its configuration
# is drawn from a seed (OUTBOX_CHAOS_SEED replays one); outboxctl prove judges it.
outbox_test(test_chaos SOURCES integration/test_chaos.c
  LABELS integration TIMEOUT 900)
if(TARGET test_chaos)
  add_dependencies(test_chaos outbox-relay outbox-consumer outboxctl)
endif()

# The TLS settings' start-up check, the TLS URL test and the refusal
# watch's rate limit (common/bus_tls.c), without sockets.
outbox_test(test_bus_tls_unit SOURCES unit/test_bus_tls.c LABELS unit)
# Mutual TLS between relay and consumer (tls+tcp://, certificates made with
# the openssl CLI at run time): a rogue REQ client writes an effect into a
# plain consumer and is refused by an mTLS one; wrong CA, expired
# certificate, wrong server name and a plaintext relay are refused (nothing
# written, messages pending, a warning and a metric); the right relay then
# delivers; bad TLS settings stop both programs at start (exit 2).
outbox_test(test_bus_tls SOURCES integration/test_bus_tls.c
  LABELS integration PG TIMEOUT 600)
if(TARGET test_bus_tls)
  add_dependencies(test_bus_tls outbox-relay outbox-consumer)
endif()
# SIGHUP re-reads the TLS files of both programs: a swap to a new CA
# mid-stream under load (2,000 messages, each applied exactly once; the
# old CA's client certificate refused after it), and a bad file on SIGHUP
# (one warning, a failed-reload metric, the running configuration kept).
outbox_test(test_bus_tls_reload SOURCES integration/test_bus_tls_reload.c
  LABELS integration PG TIMEOUT 600)
if(TARGET test_bus_tls_reload)
  add_dependencies(test_bus_tls_reload outbox-relay outbox-consumer)
endif()

# The relay's derived --source on real servers: one name on two servers,
# two names on one, a standby (the same as its primary), a name hashed.
# Makes its second server and standby with scripts/pg-tmp.sh.
outbox_test(test_relay_source SOURCES integration/test_relay_source.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_relaylib)
# No lockstep after a PostgreSQL restart: the relay's workers and the
# consumer's threads, cut off in one instant, reconnect spread over their
# jittered backoff (outbox/backoff.h), read from their log lines.
outbox_test(test_reconnect_spread SOURCES integration/test_reconnect_spread.c
  LABELS integration PG TIMEOUT 300)
if(TEST test_reconnect_spread)
  add_dependencies(test_reconnect_spread outbox-relay outbox-consumer)
endif()
# The retry budget's bound against a failing service: the agent-side
# client's retries per process, the relay's per destination.
outbox_test(test_retry_budget SOURCES integration/test_retry_budget.c
  LABELS integration PG TIMEOUT 600 LIBS outbox_client)
if(TEST test_retry_budget)
  add_dependencies(test_retry_budget outbox-relay outbox-consumer outbox-producer
    outbox-notify-sink)
endif()
