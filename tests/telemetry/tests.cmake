# The telemetry module (src/telemetry): the JSON escaper and the formatters
# on hand-built records, and bmoe-cli's telemetry output checked against
# the contract (shared/seeds/telemetry.md) on generated models.
foreach(tm_test json progress csv report)
  bmoe_add_test(test_tm_${tm_test}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tm_${tm_test}.c
    LIBS bmoe_telemetry bmoe PkgConfig::CJSON m)
endforeach()
bmoe_add_test(test_telemetry_contract
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_telemetry_contract.c
  LIBS PkgConfig::CJSON m
  TIMEOUT 600 COST 11 29)
target_include_directories(test_telemetry_contract PRIVATE ${CMAKE_SOURCE_DIR}/tests/cli)
# It runs both binaries, so building it builds them.
add_dependencies(test_telemetry_contract bmoe-cli bmoe-mkmodel)
