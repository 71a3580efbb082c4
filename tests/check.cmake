# The deterministic protocol checker (tests/check/, issue 29): outbox-check
# drives the outbox's SQL functions through seeded interleavings of
# producers, relays and an operator and checks the invariants S1-S6 after
# every step, with the relay's own retry policy (relay/retry_policy.c, from
# outbox_relaylib) deciding a failed attempt. A test tool, never linked
# into a program.
set(OUTBOX_CHECK_SOURCES check/main.c check/session.c check/model.c check/gen.c
  check/shrink.c check/slot_drive.c check/inbox_drive.c)
add_executable(outbox-check ${OUTBOX_CHECK_SOURCES})
target_link_libraries(outbox-check PRIVATE outbox_relaylib outbox_common PkgConfig::PQ)
# the inbox driver takes the consumer's retention margin from consumer/inbox.h
target_include_directories(outbox-check PRIVATE ${CMAKE_SOURCE_DIR}/consumer)
# the operator's restore step, from this source tree (--simulate overrides)
target_compile_definitions(outbox-check PRIVATE
  OUTBOX_CHECK_SIMULATE="${CMAKE_SOURCE_DIR}/tests/data/sql/simulate_restore.sql")
# The same checker with the shared-outcomes defect put back into the relay's
# pipeline slots (issue 31): relay/slot.c copied with its fix reverted,
# every slot handed the first slot's outcomes, as the worker once gave all
# of them one array. Its relay_slot_* take the place of outbox_relaylib's
# (the library's slot.o is then never pulled in). run.sh expects
# --drive slots to find the defect with it.
set(slot_src ${CMAKE_SOURCE_DIR}/relay/slot.c)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${slot_src})
file(READ ${slot_src} slot_text)
string(REPLACE "p->slot[i].outcomes = p->store + (size_t)i * batch_max;"
  "p->slot[i].outcomes = p->store; /* the defect: one array for every slot */"
  slot_defect "${slot_text}")
if(slot_defect STREQUAL slot_text)
  message(FATAL_ERROR "tests/check.cmake: the revert of the shared-outcomes fix no longer"
    " changes relay/slot.c: update it")
endif()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/slot_shared_outcomes.c.new "${slot_defect}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/slot_shared_outcomes.c.new
  ${CMAKE_CURRENT_BINARY_DIR}/slot_shared_outcomes.c COPYONLY)
add_executable(outbox-check-shared-outcomes ${CMAKE_CURRENT_BINARY_DIR}/slot_shared_outcomes.c
  ${OUTBOX_CHECK_SOURCES})
target_link_libraries(outbox-check-shared-outcomes PRIVATE outbox_relaylib outbox_common
  PkgConfig::PQ)
target_include_directories(outbox-check-shared-outcomes PRIVATE ${CMAKE_SOURCE_DIR}/consumer)
target_compile_definitions(outbox-check-shared-outcomes PRIVATE
  OUTBOX_CHECK_SIMULATE="${CMAKE_SOURCE_DIR}/tests/data/sql/simulate_restore.sql")
# The checker in the suite (tests/check/run.sh): its own PostgreSQL with
# plpgsql_check loaded; 40 seeds on the schema as it is (no violation, the
# same history twice, the protocol functions' coverage >= 95 % of statements
# and 85 % of branches); then issue 29's defects 1, 3, 4 and 5 each with
# its fix reverted, found by the default generator within 25 seeds; and the
# relay's pipeline slots driven through a simulated transport (--drive
# slots): no violation as they are, a violation with the shared-outcomes
# defect put back (outbox-check-shared-outcomes); and the inbox's driver
# (--inbox) on the inbox's functions and on three broken variants.
add_test(NAME check_protocol COMMAND ${CMAKE_SOURCE_DIR}/tests/check/run.sh
  ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(check_protocol PROPERTIES LABELS "integration" TIMEOUT 900)
