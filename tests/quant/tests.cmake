bmoe_add_test(test_quant_table SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_table.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
bmoe_add_test(test_quant_vectors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_vectors.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
bmoe_add_test(test_quant_activations SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_activations.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
bmoe_add_test(test_quantizers SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quantizers.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
