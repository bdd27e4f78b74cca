# Session mode: bmoe-cli --session driven through pipes on a generated model
# (turns with prefix reuse against fresh processes, cancel, bad requests,
# decide, EOF), and the request parser and line splitter on their own.
bmoe_add_test(test_session
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_session.c
  LIBS PkgConfig::CJSON m
  TIMEOUT 900 COST 3 33)
target_include_directories(test_session PRIVATE ${CMAKE_SOURCE_DIR}/tests/cli)
add_dependencies(test_session bmoe-cli bmoe-mkmodel)

# A soak: 200 requests against a streamed model whose reads fail 1 % of the
# time, the session run in the test's process (its read seam injected).
bmoe_add_test(test_session_soak
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_session_soak.c
  LIBS bmoe_session bmoe PkgConfig::CJSON Threads::Threads m
  TIMEOUT 600 COST 5 51)
add_dependencies(test_session_soak bmoe-mkmodel)
