bmoe_add_test(test_quant_table SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_table.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
bmoe_add_test(test_quant_vectors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_vectors.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
bmoe_add_test(test_quant_activations SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_activations.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
bmoe_add_test(test_quantizers SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quantizers.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
bmoe_add_test(test_quant_iq SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_iq.c LIBS bmoe_quant bmoe_base m LABELS unit arm64)
# The grid i-quants and ternary formats end to end: tiny models with experts
# in each, against llama.cpp's logits in data/ (written by
# data/regenerate.sh). Not in the kernels-only build: it needs the engine.
if(NOT BMOE_KERNELS_ONLY)
  bmoe_add_test(test_quant_iq_logits SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_iq_logits.c
    LIBS bmoe_engine PkgConfig::CJSON m ARGS qwen3moe-tiny-iq2_xxs LABELS unit oracle)
  target_compile_definitions(test_quant_iq_logits PRIVATE BMOE_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
  add_dependencies(test_quant_iq_logits bmoe-mkmodel)
  foreach(iq_model qwen3moe-tiny-iq2_xs qwen3moe-tiny-iq2_s qwen3moe-tiny-iq3_xxs qwen3moe-tiny-iq3_s
      qwen3moe-tiny-iq1_s qwen3moe-tiny-iq1_m qwen3moe-tiny-tq1_0 qwen3moe-tiny-tq2_0)
    add_test(NAME test_quant_iq_logits_${iq_model} COMMAND test_quant_iq_logits ${iq_model})
    set_tests_properties(test_quant_iq_logits_${iq_model} PROPERTIES LABELS "unit;oracle" TIMEOUT 300)
  endforeach()
endif()
