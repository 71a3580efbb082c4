# Fuzzing of every decoder, in the suite: libFuzzer targets under
# tests/fuzz/, each built with clang by a custom command (the main build
# uses gcc) with ASan + UBSan, each run for OUTBOX_FUZZ_SECONDS from its
# seed corpus in tests/data as a ctest (label fuzz). libFuzzer writes the
# inputs it finds into a temp dir, first on its command line, so the seeds
# stay as committed; an input that crashes is kept beside the binary
# (build/bin/NAME.crash-<sha1>: rerun it with `build/bin/NAME FILE`).
# scripts/setup-deps.sh --tests installs clang and its
# fuzzer runtime; without them the configure says so and registers a test
# that fails, so a machine that cannot fuzz never passes silently.
set(OUTBOX_FUZZ_SECONDS 30 CACHE STRING "seconds each fuzz test runs")
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
set(_fuzz_inc)
foreach(d ${PQ_INCLUDE_DIRS})
  list(APPEND _fuzz_inc -I${d})
endforeach()

# outbox_fuzz(NAME SOURCES <files relative to the source dir> [INCLUDES dirs]
#             [LINK -lfoo ...] CORPUS <dirs under tests/data>)
function(outbox_fuzz name)
  cmake_parse_arguments(F "" "" "SOURCES;INCLUDES;LINK;CORPUS" ${ARGN})
  if(NOT _fuzz_ok)
    add_test(NAME ${name} COMMAND sh -c
      "echo '${name}: clang with libFuzzer (clang, libclang-rt-14-dev) is missing: run scripts/setup-deps.sh --tests' >&2; exit 1")
    set_tests_properties(${name} PROPERTIES LABELS fuzz)
    return()
  endif()
  set(src)
  foreach(s ${F_SOURCES})
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/${s})
      message(FATAL_ERROR "outbox_fuzz(${name}): ${s} is missing")
    endif()
    list(APPEND src ${CMAKE_SOURCE_DIR}/${s})
  endforeach()
  set(inc -I${CMAKE_SOURCE_DIR}/common/include)
  foreach(d ${F_INCLUDES})
    list(APPEND inc -I${CMAKE_SOURCE_DIR}/${d})
  endforeach()
  set(corpus)
  foreach(c ${F_CORPUS})
    if(NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/data/${c})
      message(FATAL_ERROR "outbox_fuzz(${name}): tests/data/${c} is missing")
    endif()
    list(APPEND corpus ${CMAKE_SOURCE_DIR}/tests/data/${c})
  endforeach()
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/bin/${name}
    COMMAND ${OUTBOX_CLANG} -g -O1 -fsanitize=fuzzer,address,undefined
      -fno-sanitize-recover=undefined -D_GNU_SOURCE -DOB_RELEASE=${PROJECT_VERSION}
      ${inc} ${_fuzz_inc} ${src}
      ${F_LINK} -o ${CMAKE_BINARY_DIR}/bin/${name}
    DEPENDS ${src}
    COMMENT "Building the libFuzzer target ${name} with clang")
  add_custom_target(${name}_bin ALL DEPENDS ${CMAKE_BINARY_DIR}/bin/${name})
  add_test(NAME ${name} COMMAND sh -c
    "b=$0 s=$1; shift 2; d=$(mktemp -d) && \"$b\" -max_total_time=$s -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$b. \"$d\" \"$@\"; rc=$?; rm -rf \"$d\"; exit $rc"
    ${CMAKE_BINARY_DIR}/bin/${name} ${OUTBOX_FUZZ_SECONDS} ${corpus})
  math(EXPR _t "${OUTBOX_FUZZ_SECONDS} * 10 + 60")
  set_tests_properties(${name} PROPERTIES LABELS fuzz TIMEOUT ${_t})
endfunction()
if(NOT _fuzz_ok)
  message(WARNING "fuzz: clang with libFuzzer not found; the fuzz tests will fail (scripts/setup-deps.sh --tests installs clang and libclang-rt-14-dev)")
endif()

# The wire codec, both directions: decode, re-encode byte for byte, decode.
outbox_fuzz(fuzz_wire SOURCES tests/fuzz/fuzz_wire.c common/wire.c common/buf.c
  common/err.c CORPUS wire-corpus)
# The consumer's request front end: decode, refuse or plan, reply.
outbox_fuzz(fuzz_request SOURCES tests/fuzz/fuzz_request.c consumer/request.c
  consumer/inbox_plan.c common/wire.c common/buf.c common/err.c common/log.c common/clock.c
  INCLUDES consumer CORPUS wire-corpus)
# Config values of every kind, and the relay's TOPIC=URL routes.
outbox_fuzz(fuzz_config SOURCES tests/fuzz/fuzz_config.c common/config.c
  common/pg_redact.c common/url.c common/err.c relay/routes.c INCLUDES relay
  LINK -lnng -lpq
  CORPUS config fuzz-config)
# The producer API's Idempotency-Key header and JSON bodies (reports, messages).
outbox_fuzz(fuzz_producer_input SOURCES tests/fuzz/fuzz_producer_input.c
  producer/report_input.c producer/message_input.c producer/json_members.c common/err.c
  common/idem_key.c INCLUDES producer LINK -ljansson
  CORPUS fuzz-producer)
# The agent ledger's reader, over torn and foreign lines.
outbox_fuzz(fuzz_ledger SOURCES tests/fuzz/fuzz_ledger.c client/ledger.c
  common/err.c common/clock.c INCLUDES client LINK -ljansson CORPUS fuzz-ledger)
