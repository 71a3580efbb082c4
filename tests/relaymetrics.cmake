# The relay's metrics endpoint (issue 6 item 2/3, issue 7 blocked keys):
# /metrics, /healthz, /readyz from the relay's metrics process, numbers that
# move, promtool check (SKIPPED for that check when promtool is absent:
# scripts/get-promtool.sh), passwords never logged.
pkg_check_modules(RELAYMETRICS_JANSSON REQUIRED IMPORTED_TARGET jansson)
outbox_test(test_relay_metrics SOURCES integration/test_relay_metrics.c
  LABELS integration PG TIMEOUT 600 LIBS PkgConfig::RELAYMETRICS_JANSSON)
if(TEST test_relay_metrics)
  set_property(TEST test_relay_metrics APPEND PROPERTY ENVIRONMENT
    "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
  add_dependencies(test_relay_metrics outbox-relay)
endif()

# The supervisor's fold of the workers' live rows, the topic cache and the
# registry/destination limits, without processes.
outbox_test(test_relay_metrics_fold SOURCES unit/test_relay_metrics_fold.c LABELS unit
  LIBS outbox_relaylib)
