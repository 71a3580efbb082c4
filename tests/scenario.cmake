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


# The agent-notification chain (deploy/chain.sh): curl, `send` and an MCP
# host -> producer -> relay -> consumer --handler webhook -> a downstream
# (outbox-notify-sink), a fault at every hop; and its negative control, a
# downstream that ignores the key, which must be caught.
set(CHAIN_SH ${CMAKE_SOURCE_DIR}/deploy/chain.sh)
add_test(NAME chain_local COMMAND ${CHAIN_SH})
add_test(NAME chain_local_broken
  COMMAND ${CMAKE_SOURCE_DIR}/tests/scenario/expect_chain_broken.sh ${CHAIN_SH})
set_tests_properties(chain_local chain_local_broken PROPERTIES
  LABELS integration TIMEOUT 300 ENVIRONMENT "${SCENARIO_ENV}" RESOURCE_LOCK scenario)
add_test(NAME notify_sink_contract
  COMMAND ${CMAKE_SOURCE_DIR}/tests/scenario/check_notify_sink.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(notify_sink_contract PROPERTIES LABELS ops TIMEOUT 60)

# No phantom effect after a failover (tests/failover/check_failover.sh): a
# primary with an asynchronous standby, replication cut, the primary killed
# and the standby promoted; the default relay shows the phantoms (the broken
# case), --standby-gate flush and replay show none. Three PostgreSQL servers
# of its own, so not alongside the other multi-server runs.
add_test(NAME failover_phantom
  COMMAND ${CMAKE_SOURCE_DIR}/tests/failover/check_failover.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(failover_phantom PROPERTIES
  LABELS integration TIMEOUT 400 RESOURCE_LOCK scenario)

# Relays on two hosts (network namespaces, veth pairs in 198.18.0.0/15)
# over TCP to one PostgreSQL; one is cut off in the middle of a batch for
# longer than its lease (tests/netns/check_netns_relays.sh): the other takes
# over, the late write is fenced out, the cut relay reconnects by itself,
# every message is applied once. The broken mode (--no-fencing, --no-dedup)
# must show the duplicates first. Needs root (CI has it; a skip under
# OUTBOX_TEST_STRICT=1 fails).
add_test(NAME netns_relays
  COMMAND ${CMAKE_SOURCE_DIR}/tests/netns/check_netns_relays.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(netns_relays PROPERTIES
  LABELS integration TIMEOUT 300 RESOURCE_LOCK scenario SKIP_RETURN_CODE 3)
