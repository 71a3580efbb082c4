# common/: the shared library's units (buffers, wire codec, config engine,
# log, ready file, backoff, metrics registry), the key-claim state machine
# against PostgreSQL, the protocol checks of every program, and the
# generated configuration reference.
outbox_test(test_buf SOURCES unit/test_buf.c LABELS unit)
outbox_test(test_wire SOURCES unit/test_wire.c LABELS unit)
outbox_test(test_config SOURCES unit/test_config.c LABELS unit)
outbox_test(test_log SOURCES unit/test_log.c LABELS unit)
outbox_test(test_ready_file SOURCES unit/test_ready_file.c LABELS unit)
outbox_test(test_backoff SOURCES unit/test_backoff.c LABELS unit)
# The token bucket and the retry budget made of one (outbox/token_bucket.h).
outbox_test(test_token_bucket SOURCES unit/test_token_bucket.c LABELS unit)
# The periodic thread (common/ticker.c): passes, and a stop that never waits out an interval.
outbox_test(test_ticker SOURCES unit/test_ticker.c LABELS unit)
# Secrets never shown (every conninfo form, libpq's own messages scrubbed)
# and stored text escaped for the terminal.
outbox_test(test_redact SOURCES unit/test_redact.c LABELS unit)
outbox_test(test_term SOURCES unit/test_term.c LABELS unit)

# promtool comes from scripts/get-promtool.sh (into <build>/tools); the
# metrics test says SKIPPED for that one case when it is absent.
outbox_test(test_metrics SOURCES unit/test_metrics.c LABELS unit TIMEOUT 120)
if(TEST test_metrics)
  set_property(TEST test_metrics APPEND PROPERTY ENVIRONMENT
    "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
endif()

# The key-claim state machine (common/keyclaim.c) against PostgreSQL.
outbox_test(test_keyclaim SOURCES integration/test_keyclaim.c LABELS integration PG TIMEOUT 120)
# The schema's layers: migrations, then the function/view/trigger files;
# fresh = upgraded step by step (pg_dump), re-apply drops what no file defines.
outbox_test(test_schema SOURCES integration/test_schema.c LABELS integration PG TIMEOUT 300)
if(TEST test_schema)
  # the server's own pg_dump (the one scripts/pg-tmp.sh runs the server
  # from). Not required to configure: the image build (deploy/Dockerfile)
  # configures without a server; the test says what is missing.
  find_program(OUTBOX_PG_DUMP pg_dump HINTS /usr/lib/postgresql/15/bin)
  if(OUTBOX_PG_DUMP)
    set_property(TEST test_schema APPEND PROPERTY ENVIRONMENT "OUTBOX_PG_DUMP=${OUTBOX_PG_DUMP}")
  endif()
endif()
# outboxctl migrate into a user's database changes nothing of theirs: the
# demo and the REVOKE on public only when asked; an earlier release's
# bookkeeping moved out of public.
outbox_test(test_migrate_user_db SOURCES integration/test_migrate_user_db.c
  LABELS integration PG TIMEOUT 300)
if(TEST test_migrate_user_db)
  add_dependencies(test_migrate_user_db outboxctl)
endif()
# One writer per table (sql/README.md's owner table), and the check going
# red on stray writes first.
add_test(NAME table_writers COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-table-writers.sh)
add_test(NAME table_writers_negative COMMAND ${CMAKE_SOURCE_DIR}/tests/ops/table_writers_negative.sh)
set_tests_properties(table_writers table_writers_negative PROPERTIES LABELS "ops" TIMEOUT 120)
# No program includes another program's headers (what several need lives
# in common/), and the check going red on a crossing first.
add_test(NAME program_includes COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-program-includes.sh)
add_test(NAME program_includes_negative
  COMMAND ${CMAKE_SOURCE_DIR}/tests/ops/program_includes_negative.sh)
set_tests_properties(program_includes program_includes_negative PROPERTIES LABELS "ops"
  TIMEOUT 120)
# Every program refuses a schema that does not serve its protocol version.
outbox_test(test_protocol SOURCES integration/test_protocol.c
  LABELS integration PG TIMEOUT 300)
# The group roles and their grants (sql/<set>/functions/grants.sql): the
# whole flow with one login role per program, each forbidden write refused
# (42501), a program whose role lacks a grant refused at start.
outbox_test(test_roles SOURCES integration/test_roles.c LABELS integration PG TIMEOUT 300)
if(TEST test_roles)
  add_dependencies(test_roles outbox-relay outbox-consumer outbox-producer outboxctl)
endif()

# docs/configuration.md is what the programs' --help-markdown prints now.
# Exit 77 = Skipped (shown by ctest, with the reason) while a program lacks
# --help-markdown.
add_test(NAME config_doc_fresh
  COMMAND ${CMAKE_SOURCE_DIR}/scripts/gen-config-doc.sh --check ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(config_doc_fresh PROPERTIES LABELS "ops" TIMEOUT 60 SKIP_RETURN_CODE 77)
# One release string: project(VERSION), the image label, every program's
# --version (the metric's is test_metrics').
add_test(NAME version_strings
  COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-version.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(version_strings PROPERTIES LABELS "ops" TIMEOUT 60)
# What the docs quote (SQL objects, flags of our programs, metric names)
# exists in the code, and the check going red on each kind of drift first.
add_test(NAME doc_drift COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-doc-drift.sh
  ${CMAKE_BINARY_DIR}/bin)
add_test(NAME doc_drift_negative COMMAND ${CMAKE_SOURCE_DIR}/tests/ops/doc_drift_negative.sh
  ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(doc_drift doc_drift_negative PROPERTIES LABELS "ops" TIMEOUT 120)

# The signal layer in every long-running program: SIGHUP reloads (the
# --config file) and leaves each process running, a bad reload keeps the
# old level, a second SIGTERM ends a stop that hangs.
outbox_test(test_signals SOURCES integration/test_signals.c LABELS integration PG TIMEOUT 300)
if(TEST test_signals)
  add_dependencies(test_signals outbox-relay outbox-consumer outbox-producer)
endif()

# No program prints a conninfo's password, in any form, by flag or by
# environment (the test PostgreSQL echoes a URI given as a database name).
outbox_test(test_secrets SOURCES integration/test_secrets.c LABELS integration PG TIMEOUT 300)
if(TEST test_secrets)
  add_dependencies(test_secrets outbox-relay outbox-consumer outbox-producer outboxctl)
endif()

# --demo-admin (common/demo_admin.c) on the real producer and consumer: 404
# without the switch, refused unless --metrics is loopback, 400/405 on bad
# input with nothing changed, producer.lose_response armed once loses one
# response (the retry is the replay), the idempotency and dedup modes
# switched at run time (two reports, two effect rows, and back).
outbox_test(test_demo_admin SOURCES integration/test_demo_admin.c LABELS integration PG
  TIMEOUT 300)
if(TARGET test_demo_admin)
  add_dependencies(test_demo_admin outbox-producer outbox-consumer)
endif()
# PgBouncer in front (issue 33): the producer API and outbox.enqueue
# through transaction pooling; the relay, consumer and outboxctl refused
# by it at start, and working through session pooling (--pooler session).
outbox_test(test_pgbouncer SOURCES integration/test_pgbouncer.c
  LABELS integration PG TIMEOUT 600)
if(TEST test_pgbouncer)
  add_dependencies(test_pgbouncer outbox-producer outbox-relay outbox-consumer outboxctl)
  set_tests_properties(test_pgbouncer PROPERTIES SKIP_RETURN_CODE 77)
endif()
# common/pg.c's failure state: a failed connect or a rolled-back COMMIT
# never reports an older failure's SQLSTATE.
outbox_test(test_pg_failure SOURCES integration/test_pg_failure.c LABELS integration PG)
