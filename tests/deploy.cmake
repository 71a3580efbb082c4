# The compose stack for real: a throwaway Docker engine (scripts/docker-tmp.sh,
# state under <build>/dockertest, started and always stopped by the suite),
# the images made offline (deploy/offline-images.sh: a debootstrapped
# Debian base and PostgreSQL from Debian's packages), the project image
# built from deploy/Dockerfile by docker-compose as a user builds it, then
# deploy/scenario.sh compose (faults + rolling restart), its negative
# control (--broken must fail with duplicates) and a check that nothing of
# the stack is left. Without root or dockerd every step says SKIPPED with
# the reason; with OUTBOX_TEST_STRICT=1 that is a failure. Included by tests/CMakeLists.txt.
set(DOCKER_TEST_DIR ${CMAKE_BINARY_DIR}/dockertest)
set(DOCKER_TMP ${CMAKE_SOURCE_DIR}/scripts/docker-tmp.sh)
set(IN_ENGINE ${CMAKE_SOURCE_DIR}/tests/deploy/in-engine.sh ${DOCKER_TEST_DIR})
set(COMPOSE_CMD docker-compose -p outboxsuite -f ${CMAKE_SOURCE_DIR}/deploy/docker-compose.yml
  --env-file ${CMAKE_SOURCE_DIR}/deploy/.env.example)

add_test(NAME docker_start COMMAND ${DOCKER_TMP} start ${DOCKER_TEST_DIR})
add_test(NAME docker_images COMMAND ${DOCKER_TMP} images ${DOCKER_TEST_DIR})
add_test(NAME docker_stop COMMAND ${DOCKER_TMP} stop ${DOCKER_TEST_DIR})
set_tests_properties(docker_start PROPERTIES FIXTURES_SETUP docker TIMEOUT 120)
set_tests_properties(docker_images PROPERTIES FIXTURES_SETUP docker_images
  FIXTURES_REQUIRED docker TIMEOUT 900)
set_tests_properties(docker_stop PROPERTIES FIXTURES_CLEANUP "docker;docker_images" TIMEOUT 120)

# 1. the project image, from deploy/Dockerfile through the compose file
add_test(NAME compose_build COMMAND ${IN_ENGINE} ${COMPOSE_CMD} build)
# 2. the scenario for real, then 3. its negative control
add_test(NAME compose_scenario COMMAND ${IN_ENGINE} ${SCENARIO_SH} compose)
add_test(NAME compose_scenario_broken COMMAND ${IN_ENGINE}
  ${CMAKE_SOURCE_DIR}/tests/scenario/expect_broken.sh ${SCENARIO_SH} compose)
# and nothing of any stack is left in the engine
add_test(NAME compose_nothing_left COMMAND ${IN_ENGINE}
  ${CMAKE_SOURCE_DIR}/tests/deploy/nothing_left.sh)
set_tests_properties(docker_start docker_images docker_stop compose_build compose_scenario
  compose_scenario_broken compose_nothing_left PROPERTIES
  LABELS "deploy" SKIP_RETURN_CODE 77 ENVIRONMENT "${SCENARIO_ENV}")
set_tests_properties(compose_build compose_scenario compose_scenario_broken compose_nothing_left
  PROPERTIES FIXTURES_REQUIRED "docker;docker_images" TIMEOUT 900
  # a stack of six containers on a 2-core machine: not beside the local scenario
  RESOURCE_LOCK scenario)
set_tests_properties(compose_scenario PROPERTIES DEPENDS compose_build)
set_tests_properties(compose_scenario_broken PROPERTIES DEPENDS compose_scenario)
set_tests_properties(compose_nothing_left PROPERTIES DEPENDS compose_scenario_broken)

# systemd: `cmake --install` into a temp prefix, then systemd-analyze verify
# on the installed units (no systemd runs as PID 1 here; nothing is started)
add_test(NAME systemd_units_verify COMMAND ${CMAKE_SOURCE_DIR}/tests/deploy/units_verify.sh
  ${CMAKE_BINARY_DIR})
set_tests_properties(systemd_units_verify PROPERTIES LABELS "deploy" TIMEOUT 120
  SKIP_RETURN_CODE 77)

# deploy/: compose files validate offline (docker-compose config -q), every
# variable is documented, Dockerfile COPY paths exist, systemd units carry
# Restart=/KillSignal/stop timeout/hardening; and the lint itself goes red on
# each kind of breakage (negative test).
add_test(NAME lint_deploy COMMAND ${CMAKE_SOURCE_DIR}/scripts/lint-deploy.sh)
add_test(NAME lint_deploy_negative COMMAND ${CMAKE_SOURCE_DIR}/tests/ops/lint_deploy_negative.sh)
set_tests_properties(lint_deploy lint_deploy_negative PROPERTIES LABELS "ops" TIMEOUT 300
  ENVIRONMENT "OUTBOX_PROMTOOL=${CMAKE_BINARY_DIR}/tools/promtool")
