bmoe_add_test(test_chat_renders
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_chat_renders.c
  LIBS bmoe_chat PkgConfig::CJSON)
