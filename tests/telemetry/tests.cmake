# The telemetry module (src/telemetry): the JSON escaper and the formatters
# on hand-built records, and bmoe-cli's telemetry output checked against
# the contract (shared/seeds/telemetry.md) on generated models.
foreach(tm_test json progress csv report)
  bmoe_add_test(test_tm_${tm_test}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tm_${tm_test}.c
    LIBS bmoe_telemetry bmoe PkgConfig::CJSON m)
endforeach()
