bmoe_add_test(test_tokenizer_unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_unit.c
  LIBS bmoe_tokenizer)
bmoe_add_test(test_tokenizer_gguf
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_gguf.c ${CMAKE_CURRENT_LIST_DIR}/vector_files.c
  LIBS bmoe_tokenizer PkgConfig::CJSON)
