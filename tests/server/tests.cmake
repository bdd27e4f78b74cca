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

# Ollama's API on the same server: /api/chat and /api/generate against the
# OpenAI endpoints' answers, the NDJSON stream, the options, the refusals in
# Ollama's shape, the model's description.
if(TARGET bmoe-server)
  bmoe_add_test(test_server_ollama
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_server_ollama.c
    LIBS PkgConfig::CJSON Threads::Threads m
    LABELS unit
    TIMEOUT 120)
  target_include_directories(test_server_ollama PRIVATE ${CMAKE_SOURCE_DIR}/tests/cli)
  add_dependencies(test_server_ollama bmoe-server bmoe-mkmodel)
endif()

# Anthropic's Messages API on the same server: /v1/messages against the
# OpenAI endpoint's answers, its named events, tools, thinking, stop
# sequences, count_tokens, the refusals in Anthropic's shape, x-api-key.
if(TARGET bmoe-server)
  bmoe_add_test(test_server_anthropic
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_server_anthropic.c
    LIBS PkgConfig::CJSON Threads::Threads m
    LABELS unit
    TIMEOUT 120)
  target_include_directories(test_server_anthropic PRIVATE ${CMAKE_SOURCE_DIR}/tests/cli)
  add_dependencies(test_server_anthropic bmoe-server bmoe-mkmodel)
endif()

# The tool-call answers on fixed texts: the server's answer assembly
# (src/server/server_tools.c) compiled into the test.
if(TARGET bmoe-server)
  bmoe_add_test(test_server_tools
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_server_tools.c ${CMAKE_SOURCE_DIR}/src/server/server_tools.c
    LIBS bmoe_shared PkgConfig::CJSON m
    LABELS unit)
  target_include_directories(test_server_tools PRIVATE ${CMAKE_SOURCE_DIR}/src/server)
endif()

# The same server through real clients, in Node.js (tests/server/js): the
# openai, ollama and @anthropic-ai/sdk npm packages against their APIs
# (quick: unit too), and
# the page in headless Chromium (a browser's start-up: its own label, run by
# the Release stage). run.sh fails with one line when node, the npm packages that
# scripts/setup.sh installs, or chromium are missing.
if(TARGET bmoe-server)
  foreach(client api ollama anthropic page)
    add_test(NAME test_server_${client}_js COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/js/run.sh ${client})
    set_tests_properties(test_server_${client}_js PROPERTIES TIMEOUT 120 ENVIRONMENT
      "BMOE_BIN_DIR=${CMAKE_BINARY_DIR}/bin;BMOE_TEST_TMPDIR_DEFAULT=${CMAKE_BINARY_DIR}/test-tmp;BMOE_ARTIFACT_DIR=${CMAKE_BINARY_DIR}/test-artifacts")
  endforeach()
  set_tests_properties(test_server_api_js test_server_ollama_js test_server_anthropic_js PROPERTIES
    LABELS "unit;client")
  set_tests_properties(test_server_page_js PROPERTIES LABELS client)
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
