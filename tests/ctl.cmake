# ctl/: outboxctl against the throwaway PostgreSQL.
# Parses its --json with jansson (the fixture library links it).
outbox_test(test_ctl SOURCES integration/test_ctl.c LABELS integration PG TIMEOUT 300)
if(TEST test_ctl)
  # the test runs the binary
  add_dependencies(test_ctl outboxctl)
endif()

# `outboxctl web` in Debian's chromium driven by playwright-core
# (tests/browser/web_view.mjs, pinned by its package-lock.json, installed by
# scripts/setup-deps.sh --tests): the counts shown equal psql's, keys and
# payloads of markup shown as text with nothing run, requeue refused
# without the token and done with it, hide-payloads. Screenshots in
# build/tests/artifacts. Skipped (77) without chromium or node_modules,
# except under OUTBOX_TEST_STRICT=1.
outbox_test(test_web_browser SOURCES integration/test_web_browser.c
  LABELS integration PG TIMEOUT 300)
if(TEST test_web_browser)
  add_dependencies(test_web_browser outboxctl outbox-relay outbox-consumer)
  set_property(TEST test_web_browser PROPERTY SKIP_RETURN_CODE 77)
  set_property(TEST test_web_browser APPEND PROPERTY ENVIRONMENT
    "OUTBOX_TEST_ARTIFACTS=${CMAKE_BINARY_DIR}/tests/artifacts")
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

# The guided demonstration clicked through in Debian's chromium
# (tests/browser/web_demo.mjs) against the stack of scripts/demo.sh --web
# (tests/support/ts_demo.c) and outboxctl web --demo: each step's facts
# shown checked against psql, its rows highlighted, a screenshot each.
# Skipped (77) without chromium or node_modules, except under OUTBOX_TEST_STRICT=1.
outbox_test(test_web_demo_browser SOURCES integration/test_web_demo_browser.c
  LABELS integration PG TIMEOUT 600)
if(TEST test_web_demo_browser)
  add_dependencies(test_web_demo_browser outboxctl outbox-relay outbox-consumer outbox-producer)
  set_property(TEST test_web_demo_browser PROPERTY SKIP_RETURN_CODE 77)
  set_property(TEST test_web_demo_browser APPEND PROPERTY ENVIRONMENT
    "OUTBOX_TEST_ARTIFACTS=${CMAKE_BINARY_DIR}/tests/artifacts")
endif()

# The demonstration's page (issue 35) in chromium: it leads the page, the
# picture's figures, the herd simulator against outbox-herd, the stepper
# and the 25 combinations against psql, the exercises right and wrong; its
# screenshot is the README's picture. Skipped (77) as the one above.
outbox_test(test_demo_page_browser SOURCES integration/test_demo_page_browser.c
  LABELS integration PG TIMEOUT 1600)
if(TEST test_demo_page_browser)
  add_dependencies(test_demo_page_browser outboxctl outbox-relay outbox-consumer outbox-producer
    outbox-herd)
  set_property(TEST test_demo_page_browser PROPERTY SKIP_RETURN_CODE 77)
  set_property(TEST test_demo_page_browser APPEND PROPERTY ENVIRONMENT
    "OUTBOX_TEST_ARTIFACTS=${CMAKE_BINARY_DIR}/tests/artifacts")
endif()

# outboxctl web (the live view, docs/web.md) against a real relay's work.
outbox_test(test_web SOURCES integration/test_web.c LABELS integration PG TIMEOUT 600)
if(TEST test_web)
  add_dependencies(test_web outboxctl outbox-relay outbox-consumer)
endif()

# outboxctl prove (the history checker) against real runs of the relay and
# the consumer: each class shown failing on a broken mode (consumer
# --no-dedup with lost replies: duplicated; relay --no-ordering with a head
# answered retry: out_of_order) or made by hand (phantom, lost, delivered not
# applied), then passing; a clean run of 50,000 messages, timed.
outbox_test(test_prove SOURCES integration/test_prove.c LABELS integration PG TIMEOUT 600)
if(TEST test_prove)
  add_dependencies(test_prove outboxctl outbox-relay outbox-consumer)
endif()
