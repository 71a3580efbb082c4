# Operations area: outboxctl, metrics and its HTTP endpoint, deploy/ and
# docs/ checks. Included by tests/CMakeLists.txt.

# promtool comes from scripts/get-promtool.sh (into <build>/tools); the
# metrics test says SKIPPED for that one case when it is absent.
outbox_test(test_metrics SOURCES unit/test_metrics.c LABELS unit TIMEOUT 120)
if(TEST test_metrics)
  set_property(TEST test_metrics APPEND PROPERTY ENVIRONMENT
    "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
endif()

# outboxctl against the throwaway PostgreSQL; parses its --json with jansson.
pkg_check_modules(OPS_JANSSON REQUIRED IMPORTED_TARGET jansson)
outbox_test(test_ctl SOURCES integration/test_ctl.c LABELS integration PG TIMEOUT 300
  LIBS PkgConfig::OPS_JANSSON)
if(TEST test_ctl)
  # the test runs the binary
  add_dependencies(test_ctl outboxctl)
endif()

# deploy/: compose files validate offline (docker-compose config -q), every
# variable is documented, Dockerfile COPY paths exist, systemd units carry
# Restart=/KillSignal/stop timeout/hardening; and the lint itself goes red on
# each kind of breakage (negative test).
add_test(NAME lint_deploy COMMAND ${CMAKE_SOURCE_DIR}/scripts/lint-deploy.sh)
add_test(NAME lint_deploy_negative COMMAND ${CMAKE_SOURCE_DIR}/tests/ops/lint_deploy_negative.sh)
set_tests_properties(lint_deploy lint_deploy_negative PROPERTIES LABELS "ops" TIMEOUT 300
  ENVIRONMENT "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")

# docs/configuration.md is what the programs' --help-markdown prints now.
# Exit 77 = Skipped (shown by ctest, with the reason) while a program lacks
# --help-markdown.
add_test(NAME config_doc_fresh
  COMMAND ${CMAKE_SOURCE_DIR}/scripts/gen-config-doc.sh --check ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(config_doc_fresh PROPERTIES LABELS "ops" TIMEOUT 60 SKIP_RETURN_CODE 77)
