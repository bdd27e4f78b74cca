# The telemetry module (src/telemetry): the JSON escaper and the formatters
# on hand-built records, and bmoe-cli's telemetry output checked against
# the contract (shared/seeds/telemetry.md) on generated models.
bmoe_add_test(test_tm_json
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tm_json.c
  LIBS bmoe_telemetry PkgConfig::CJSON)
