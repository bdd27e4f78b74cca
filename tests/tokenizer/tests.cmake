bmoe_add_test(test_tokenizer_unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_unit.c
  LIBS bmoe_tokenizer)
bmoe_add_test(test_tokenizer_gguf
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_gguf.c ${CMAKE_CURRENT_LIST_DIR}/vector_files.c
  LIBS bmoe_tokenizer PkgConfig::CJSON)
# Loads three large tokenizer.json files (~70 MB of JSON): slow under ASan.
bmoe_add_test(test_tokenizer_hf
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_hf.c ${CMAKE_CURRENT_LIST_DIR}/hf_tokenizer.c
          ${CMAKE_CURRENT_LIST_DIR}/vector_files.c
  LIBS bmoe_tokenizer PkgConfig::CJSON PkgConfig::ZLIB
  LABELS slow TIMEOUT 600)
# tokenizer.ggml.* keys with bad values, in GGUF files written by the test.
bmoe_add_test(test_tokenizer_keys
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_keys.c
  LIBS bmoe_tokenizer)
# The real LFM2 tokenizer data (partial: no tokenizer.json): added tokens,
# special ids and flags, clean-up and the chat template's renderings.
bmoe_add_test(test_tokenizer_lfm2
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_lfm2.c
  LIBS bmoe_tokenizer bmoe_chat PkgConfig::CJSON)
