# consumer/: the idempotency contract, batch apply, bad input, the webhook
# handler, the metrics endpoint, and the fuzz run of the request front end.
# The decisions made before any transaction (retention), without a database.
outbox_test(test_inbox_plan SOURCES unit/test_inbox_plan.c LABELS unit LIBS outbox_consumer)
outbox_test(test_consumer_dedup SOURCES integration/test_consumer_dedup.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
outbox_test(test_consumer_badinput SOURCES integration/test_consumer_badinput.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
# The receive limit: a frame over --max-batch x (--max-payload + overhead)
# closes its connection from its length header (RSS flat); the defaults'
# ~1 GiB limit buffers a 64 MiB partial frame (shown first); the limit is
# exact and admits the largest legal frame.
outbox_test(test_consumer_recvmax SOURCES integration/test_consumer_recvmax.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
if(TARGET test_consumer_recvmax)
  add_dependencies(test_consumer_recvmax outbox-consumer)
endif()
outbox_test(test_consumer_webhook SOURCES integration/test_consumer_webhook.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)

# libFuzzer over the request front end (tests/fuzz/fuzz_request.c), built
# with clang by a custom command because the main build uses gcc, and run
# for about 60 s as a test. Skipped (with a message) when clang cannot link
# -fsanitize=fuzzer (no clang, or no libclang-rt-*-dev).
set(OUTBOX_FUZZ_SECONDS 60 CACHE STRING "seconds the fuzz_request test runs")
find_program(OUTBOX_CLANG NAMES clang clang-14)
set(_fuzz_ok FALSE)
if(OUTBOX_CLANG)
  file(WRITE ${CMAKE_BINARY_DIR}/fuzz_probe.c
    "#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
  execute_process(COMMAND ${OUTBOX_CLANG} -fsanitize=fuzzer,address,undefined
      ${CMAKE_BINARY_DIR}/fuzz_probe.c -o ${CMAKE_BINARY_DIR}/fuzz_probe
    RESULT_VARIABLE _fuzz_rc OUTPUT_QUIET ERROR_QUIET)
  if(_fuzz_rc EQUAL 0)
    set(_fuzz_ok TRUE)
  endif()
endif()
if(_fuzz_ok)
  set(_fz ${CMAKE_SOURCE_DIR})
  set(_fuzz_src ${_fz}/tests/fuzz/fuzz_request.c ${_fz}/consumer/request.c
    ${_fz}/consumer/inbox_plan.c ${_fz}/common/wire.c ${_fz}/common/buf.c
    ${_fz}/common/err.c ${_fz}/common/log.c)
  set(_fuzz_inc)
  foreach(d ${PQ_INCLUDE_DIRS})
    list(APPEND _fuzz_inc -I${d})
  endforeach()
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/bin/fuzz_request
    COMMAND ${OUTBOX_CLANG} -g -O1 -fsanitize=fuzzer,address,undefined
      -fno-sanitize-recover=undefined -D_GNU_SOURCE -I${_fz}/common/include
      -I${_fz}/consumer ${_fuzz_inc} ${_fuzz_src} -o ${CMAKE_BINARY_DIR}/bin/fuzz_request
    DEPENDS ${_fuzz_src}
    COMMENT "Building the libFuzzer target fuzz_request with clang")
  add_custom_target(fuzz_request_bin ALL DEPENDS ${CMAKE_BINARY_DIR}/bin/fuzz_request)
  add_test(NAME fuzz_request COMMAND sh -c
    "d=$(mktemp -d) && \"$0\" -max_total_time=$1 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \"$d\" \"$2\"; rc=$?; rm -rf \"$d\"; exit $rc"
    ${CMAKE_BINARY_DIR}/bin/fuzz_request ${OUTBOX_FUZZ_SECONDS}
    ${CMAKE_SOURCE_DIR}/tests/data/wire-corpus)
  set_tests_properties(fuzz_request PROPERTIES LABELS fuzz
    TIMEOUT ${OUTBOX_FUZZ_SECONDS}0)
else()
  message(STATUS "fuzz_request: clang with libFuzzer not found; the fuzz test is skipped")
endif()

# The consumer's metrics endpoint:
# /metrics, /healthz, /readyz, numbers that move exactly, promtool check
# (SKIPPED for that check without promtool: scripts/get-promtool.sh),
# readiness following the database, passwords never logged.
outbox_test(test_consumer_metrics SOURCES integration/test_consumer_metrics.c
  support/webhook_target.c LABELS integration PG TIMEOUT 300 LIBS outbox_consumer)
if(TEST test_consumer_metrics)
  set_property(TEST test_consumer_metrics APPEND PROPERTY ENVIRONMENT
    "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
  add_dependencies(test_consumer_metrics outbox-consumer)
endif()
