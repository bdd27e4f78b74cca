# Oracle logits: one program, one ctest entry per tiny model (both cases each),
# resident and streamed with overlap; the arm64 stage runs them all.
bmoe_add_test(test_oracle SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_oracle.c
  LIBS bmoe_engine PkgConfig::CJSON m ARGS qwen3moe-tiny-f32 LABELS unit oracle arm64)
add_test(NAME test_oracle_qwen3moe-tiny-f32_streamed COMMAND test_oracle qwen3moe-tiny-f32 streamed)
set_tests_properties(test_oracle_qwen3moe-tiny-f32_streamed PROPERTIES LABELS "unit;oracle;arm64" TIMEOUT 300)
foreach(oracle_model qwen3moe-tiny-q8_0 qwen3moe-tiny-q4_k_m gptoss-tiny-f32 gptoss-tiny-mxfp4
    lfm2moe-tiny-f32 lfm2moe-tiny-q4_k_m gemma4-tiny-f32 gemma4-tiny-q4_k_m qwen35moe-tiny-f32
    qwen35moe-tiny-q4_k_m)
  add_test(NAME test_oracle_${oracle_model} COMMAND test_oracle ${oracle_model})
  add_test(NAME test_oracle_${oracle_model}_streamed COMMAND test_oracle ${oracle_model} streamed)
  set_tests_properties(test_oracle_${oracle_model} test_oracle_${oracle_model}_streamed
    PROPERTIES LABELS "unit;oracle;arm64" TIMEOUT 300)
endforeach()
bmoe_add_test(test_batch_invariance SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batch_invariance.c
  LIBS bmoe_engine PkgConfig::CJSON m COST 23 45)
add_dependencies(test_batch_invariance bmoe-mkmodel) # the gemma4 variants and simple_archs.h's models it generates
target_compile_definitions(test_batch_invariance PRIVATE BMOE_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
bmoe_add_test(test_llama_stories SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_stories.c
  LIBS bmoe_engine PkgConfig::CJSON m)
bmoe_add_test(test_model_errors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_model_errors.c
  LIBS bmoe_engine m)
bmoe_add_test(test_dense_weights SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dense_weights.c
  LIBS bmoe_engine PkgConfig::CJSON m)
bmoe_add_test(test_batch_invariance_long SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_batch_invariance_long.c
  LIBS bmoe_engine PkgConfig::CJSON m COST 2 11)
bmoe_add_test(test_arch_errors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_arch_errors.c
  LIBS bmoe_engine m)
add_dependencies(test_arch_errors bmoe-mkmodel) # the gemma4 variants it copies
# grouped top-k expert selection on hand-made keys
bmoe_add_test(test_moe_select SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_select.c LIBS bmoe_engine m)
bmoe_add_test(test_routes SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_routes.c
  LIBS bmoe_engine PkgConfig::CJSON m)
# gemma4's KV sharing and per-layer embeddings: an independent float64
# forward pass, checked against the oracle, then the engine against it on
# models bmoe-mkmodel writes
bmoe_add_test(test_gemma4_reference SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gemma4_reference.c
  LIBS bmoe_engine PkgConfig::CJSON m COST 4 26)
add_dependencies(test_gemma4_reference bmoe-mkmodel)
# The simple MoE architectures (qwen2moe, llama with experts, olmoe,
# bailingmoe2, glm4moe, deepseek2 in both its attention layouts, deepseek4): tiny
# models bmoe-mkmodel generates, against llama.cpp's logits in data/ (written
# by data/regenerate.sh), resident and streamed, and bmoe-cli --info.
bmoe_add_test(test_simple_archs SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_simple_archs.c
  LIBS bmoe_engine PkgConfig::CJSON m ARGS qwen2moe-tiny-f32 LABELS unit oracle)
target_compile_definitions(test_simple_archs PRIVATE BMOE_TEST_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
add_dependencies(test_simple_archs bmoe-mkmodel bmoe-cli)
foreach(simple_model qwen2moe-tiny-q4_k_m mixtral-tiny-f32 mixtral-tiny-q4_k_m olmoe-tiny-f32 olmoe-tiny-q4_k_m
    bailingmoe2-tiny-f32 bailingmoe2-tiny-q4_k_m glm4moe-tiny-f32 glm4moe-tiny-q4_k_m
    deepseek2-tiny-f32 deepseek2-tiny-q4_k_m deepseek2-lite-tiny-f32 deepseek2-lite-tiny-q4_k_m
    deepseek3-tiny-f32 deepseek3-tiny-q4_k_m deepseek4-tiny-f32 deepseek4-tiny-q4_k_m
    deepseek4-hash-tiny-f32 deepseek4-hash-tiny-q4_k_m deepseek4-long-tiny-f32 deepseek4-long-tiny-q4_k_m)
  add_test(NAME test_simple_archs_${simple_model} COMMAND test_simple_archs ${simple_model})
  set_tests_properties(test_simple_archs_${simple_model} PROPERTIES LABELS "unit;oracle" TIMEOUT 300)
  if(simple_model MATCHES "q4_k_m$") # bmoe-mkmodel quantizing it: ~15 s under ASan
    bmoe_test_cost(test_simple_archs_${simple_model} 5 20)
  endif()
endforeach()
# the draft heads (--mtp) of qwen35moe, glm4moe, bailingmoe2 and deepseek2 against a
# float64 computation from the tensors of files bmoe-mkmodel writes; --mtp
# refused without the head
bmoe_add_test(test_mtp_head SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mtp_head.c LIBS bmoe_engine m)
add_dependencies(test_mtp_head bmoe-mkmodel bmoe-cli)
