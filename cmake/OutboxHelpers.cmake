# One line registers a test with ctest: outbox_test(NAME SOURCES ... [LABELS ...]
# [TIMEOUT s] [PG]). PG makes the test require the throwaway PostgreSQL
# fixture and passes its connection file in OUTBOX_TEST_PGENV.
set(OUTBOX_TEST_PGDIR "${CMAKE_BINARY_DIR}/pgtest")

function(outbox_test name)
  cmake_parse_arguments(T "PG" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  foreach(src ${T_SOURCES})
    if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${src})
      # a deleted test must not leave ctest green
      message(FATAL_ERROR "test ${name}: ${src} is missing")
    endif()
  endforeach()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE outbox_testlib ${T_LIBS})
  add_test(NAME ${name} COMMAND ${name})
  set(env "OUTBOX_BIN_DIR=${CMAKE_BINARY_DIR}/bin"
          "OUTBOX_SOURCE_DIR=${CMAKE_SOURCE_DIR}"
          "OUTBOX_TEST_DATA=${CMAKE_SOURCE_DIR}/tests/data")
  if(T_PG)
    list(APPEND env "OUTBOX_TEST_PGENV=${OUTBOX_TEST_PGDIR}/env")
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED pg)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT}
    LABELS "${T_LABELS}" ENVIRONMENT "${env}")
endfunction()
