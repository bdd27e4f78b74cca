# bmoe-analyze: the simulators are linked into their test directly; every
# other test runs build/bin/bmoe-analyze as a child process, so building a
# test builds the tool.
bmoe_add_test(test_analyze_cache
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_analyze_cache.c
          ${CMAKE_SOURCE_DIR}/tools/analyze/cache.c
          ${CMAKE_SOURCE_DIR}/tools/analyze/stats.c
          ${BMOE_CACHE_POLICY_SOURCES}
  LIBS m)
target_include_directories(test_analyze_cache PRIVATE ${CMAKE_SOURCE_DIR}/tools/analyze
  ${CMAKE_SOURCE_DIR}/src/stream)

foreach(analyze_test route drop csv traces errors)
  bmoe_add_test(test_analyze_${analyze_test}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_analyze_${analyze_test}.c
    LIBS m
    TIMEOUT 300)
  add_dependencies(test_analyze_${analyze_test} bmoe-analyze)
endforeach()
