# ctl/: outboxctl against the throwaway PostgreSQL.
# Parses its --json with jansson (the fixture library links it).
outbox_test(test_ctl SOURCES integration/test_ctl.c LABELS integration PG TIMEOUT 300)
if(TEST test_ctl)
  # the test runs the binary
  add_dependencies(test_ctl outboxctl)
endif()
