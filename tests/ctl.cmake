# ctl/: outboxctl against the throwaway PostgreSQL.
# Parses its --json with jansson (the fixture library links it).
outbox_test(test_ctl SOURCES integration/test_ctl.c LABELS integration PG TIMEOUT 300)
if(TEST test_ctl)
  # the test runs the binary
  add_dependencies(test_ctl outboxctl)
endif()

# outboxctl web (the live view, docs/web.md) against a real relay's work.
outbox_test(test_web SOURCES integration/test_web.c LABELS integration PG TIMEOUT 600)
if(TEST test_web)
  add_dependencies(test_web outboxctl outbox-relay outbox-consumer)
endif()

# The guided demonstration (ctl/web_demo.c) through its interface against
# the real stack of scripts/demo.sh --web: producer serve and consumer with
# --demo-admin, the demo's relay, the steps' own relays; every step's facts
# checked against psql, the modes restored after each.
outbox_test(test_web_demo SOURCES integration/test_web_demo.c LABELS integration PG
  TIMEOUT 600 LIBS outbox_web_demo)
if(TARGET test_web_demo)
  add_dependencies(test_web_demo outbox-producer outbox-consumer outbox-relay
    outbox-fault-matrix)
endif()
