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

# Faults, concurrency and load: many clients at once, clients that leave or
# trickle, the connection bound, malformed requests.
if(TARGET bmoe-server)
  bmoe_add_test(test_server_faults
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_server_faults.c
    LIBS Threads::Threads
    LABELS unit
    TIMEOUT 300)
  target_include_directories(test_server_faults PRIVATE ${CMAKE_SOURCE_DIR}/tests/cli)
  add_dependencies(test_server_faults bmoe-server bmoe-mkmodel)
endif()
