# GGUF reader/writer tests (all fast, label unit). test_gguf_corpus also
# writes the fuzz corpus when given --write-corpus DIR (scripts/test-fuzz.sh).
set(BMOE_GGUF_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})
foreach(name format validation split models corpus files)
  bmoe_add_test(test_gguf_${name} SOURCES ${BMOE_GGUF_TEST_DIR}/test_gguf_${name}.c LIBS bmoe_gguf m)
endforeach()
