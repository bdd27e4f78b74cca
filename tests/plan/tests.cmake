# The planner (src/plan): plan_make over a table of model and machine
# descriptions, and the probes on a tiny model of the oracle (its bytes, the
# machine's memory and read rates, the probe cache).
bmoe_add_test(test_plan_make
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan_make.c
  LIBS bmoe_plan m)
bmoe_add_test(test_plan_probe
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan_probe.c
  LIBS bmoe_plan PkgConfig::CJSON m
  TIMEOUT 60)
add_dependencies(test_plan_probe bmoe-mkmodel)
