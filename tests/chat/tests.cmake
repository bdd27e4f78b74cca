bmoe_add_test(test_chat_renders
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_chat_renders.c
  LIBS bmoe_chat PkgConfig::CJSON)
bmoe_add_test(test_chat_language
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_chat_language.c
  LIBS bmoe_chat)
# The think-control decision it bounds calls chat_api.c, whose model calls
# come from bmoe_engine (as for test_chat_api below).
bmoe_add_test(test_chat_errors
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_chat_errors.c
  LIBS bmoe_chat bmoe_engine m)
bmoe_add_test(test_chat_values
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_chat_values.c
  LIBS bmoe_chat Threads::Threads)
# The chat API over the interpreter: think control and reasoning format
# from real templates and models, the prefill, the streaming reasoning split.
# The module does not depend on the engine (the template fuzzer links it
# alone); chat_api.c's calls into the public model API come from bmoe_engine.
bmoe_add_test(test_chat_api
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_chat_api.c
  LIBS bmoe_chat bmoe_engine m)
# Tool calls: formats, renders against the reference's (tests/chat/data),
# the parse and the streaming split.
bmoe_add_test(test_tool_calls
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tool_calls.c
  LIBS bmoe_chat bmoe_engine PkgConfig::CJSON m
  ARGS ${CMAKE_CURRENT_LIST_DIR}/data/tool-renders.json)
