# Upgrades: relays of the previous protocol (built from this repository's
# history by tests/upgrade/mixed_relays.sh) and the new ones on one database
# across the migration that changed the protocol, then the old ones killed;
# first the negative control (the carried-over claims deleted: messages
# lost), then the real run (nothing lost or applied twice, keys in order).
# The protocol checks themselves are test_protocol (relay.cmake).
set(UPGRADE_SH ${CMAKE_SOURCE_DIR}/tests/upgrade/mixed_relays.sh)
add_test(NAME upgrade_prev_build COMMAND ${UPGRADE_SH} ${CMAKE_BINARY_DIR}/bin --build-only)
add_test(NAME upgrade_mixed_relays_broken COMMAND ${UPGRADE_SH} ${CMAKE_BINARY_DIR}/bin --broken)
add_test(NAME upgrade_mixed_relays COMMAND ${UPGRADE_SH} ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(upgrade_prev_build PROPERTIES FIXTURES_SETUP upgrade_prev
  LABELS "integration" TIMEOUT 900 SKIP_RETURN_CODE 77)
set_tests_properties(upgrade_mixed_relays_broken upgrade_mixed_relays PROPERTIES
  FIXTURES_REQUIRED upgrade_prev LABELS "integration" TIMEOUT 600 SKIP_RETURN_CODE 77
  RESOURCE_LOCK upgrade)
