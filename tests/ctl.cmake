# ctl/: outboxctl against the throwaway PostgreSQL.
# Parses its --json with jansson.
pkg_check_modules(OPS_JANSSON REQUIRED IMPORTED_TARGET jansson)
outbox_test(test_ctl SOURCES integration/test_ctl.c LABELS integration PG TIMEOUT 300
  LIBS PkgConfig::OPS_JANSSON)
if(TEST test_ctl)
  # the test runs the binary
  add_dependencies(test_ctl outboxctl)
endif()
