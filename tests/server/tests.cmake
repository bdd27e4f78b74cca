# bmoe-server end to end: the test starts the binary on a generated model
# and talks HTTP/1.1 to it over a socket (tests/server/server_client.h).
if(TARGET bmoe-server)
  bmoe_add_test(test_server
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_server.c
    LIBS PkgConfig::CJSON Threads::Threads m
    LABELS unit
    TIMEOUT 120)
  target_include_directories(test_server PRIVATE ${CMAKE_SOURCE_DIR}/tests/cli)
  add_dependencies(test_server bmoe-server bmoe-cli bmoe-mkmodel)
endif()

# The same server through a real client, in Node.js (tests/server/js): the
# openai npm package against the API (quick: a unit test). run.sh fails with
# one line when node or the npm packages that scripts/setup.sh installs are
# missing.
if(TARGET bmoe-server)
  add_test(NAME test_server_api_js COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/js/run.sh api)
  set_tests_properties(test_server_api_js PROPERTIES LABELS "unit;client" TIMEOUT 120 ENVIRONMENT
    "BMOE_BIN_DIR=${CMAKE_BINARY_DIR}/bin;BMOE_TEST_TMPDIR_DEFAULT=${CMAKE_BINARY_DIR}/test-tmp")
endif()
