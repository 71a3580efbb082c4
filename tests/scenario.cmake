# The end-to-end scenario (deploy/scenario.sh): bug reports over HTTP while
# processes are killed, paused past their lease, cut off the network and
# PostgreSQL restarts; psql then proves one effect per report. Included by
# tests/CMakeLists.txt. The scenario starts its own throwaway PostgreSQL
# (scripts/pg-tmp.sh), so it does NOT use the shared pg fixture.
set(SCENARIO_SH ${CMAKE_SOURCE_DIR}/deploy/scenario.sh)

# Producer -> relay -> consumer in one process tree, and outboxctl migrate.
outbox_test(test_e2e SOURCES integration/test_e2e.c LABELS integration PG TIMEOUT 300
  LIBS outbox_producer)
set(SCENARIO_ENV "OUTBOX_BIN_DIR=${CMAKE_BINARY_DIR}/bin")

# The real modes: every assertion must hold (the local-process mode).
add_test(NAME scenario_local COMMAND ${SCENARIO_SH} local)
# The negative control: consumers --no-dedup, producer --idempotency none;
# the assertions must fail with duplicates counted (shorter run).
add_test(NAME scenario_local_broken
  COMMAND ${CMAKE_SOURCE_DIR}/tests/scenario/expect_broken.sh ${SCENARIO_SH})
set_tests_properties(scenario_local scenario_local_broken PROPERTIES
  LABELS integration TIMEOUT 600 ENVIRONMENT "${SCENARIO_ENV}"
  # both start PostgreSQL, two relays, two consumers, a producer and 4
  # clients on a 2-core machine: not alongside each other
  RESOURCE_LOCK scenario)

# The compose mode cannot run here (no Docker engine): its dry run must
# print every step, and bad arguments must be refused.
add_test(NAME scenario_compose_dryrun
  COMMAND ${CMAKE_SOURCE_DIR}/tests/scenario/check_dryrun.sh ${SCENARIO_SH})
set_tests_properties(scenario_compose_dryrun PROPERTIES LABELS ops TIMEOUT 60)

