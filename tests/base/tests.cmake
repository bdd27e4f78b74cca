bmoe_add_test(test_fp16 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fp16.c LIBS bmoe_base m LABELS unit arm64)
bmoe_add_test(test_text SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_text.c LIBS bmoe_base LABELS unit arm64)
bmoe_add_test(test_file SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_file.c LIBS bmoe_base)
