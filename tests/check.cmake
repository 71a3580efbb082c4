# The deterministic protocol checker (tests/check/, issue 29): outbox-check
# drives the outbox's SQL functions through seeded interleavings of
# producers, relays and an operator and checks the invariants S1-S6 after
# every step, with the relay's own retry policy (relay/retry_policy.c, from
# outbox_relaylib) deciding a failed attempt. A test tool, never linked
# into a program.
add_executable(outbox-check check/main.c check/session.c check/model.c check/gen.c
  check/shrink.c)
target_link_libraries(outbox-check PRIVATE outbox_relaylib outbox_common PkgConfig::PQ)
# the operator's restore step, from this source tree (--simulate overrides)
target_compile_definitions(outbox-check PRIVATE
  OUTBOX_CHECK_SIMULATE="${CMAKE_SOURCE_DIR}/tests/data/sql/simulate_restore.sql")
# The checker in the suite (tests/check/run.sh): its own PostgreSQL with
# plpgsql_check loaded; 40 seeds on the schema as it is (no violation, the
# same history twice, the protocol functions' coverage >= 95 % of statements
# and 85 % of branches); then issue 29's defects 1, 3, 4 and 5 each with
# its fix reverted, found by the default generator within 25 seeds.
add_test(NAME check_protocol COMMAND ${CMAKE_SOURCE_DIR}/tests/check/run.sh
  ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(check_protocol PROPERTIES LABELS "integration" TIMEOUT 900)
