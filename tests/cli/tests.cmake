# bmoe-cli and the sampler. The sampler test compiles its one source file on
# its own so that it does not depend on the rest of the engine; the others
# run build/bin/bmoe-cli as a child process.
bmoe_add_test(test_sampler
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sampler.c ${CMAKE_SOURCE_DIR}/src/engine/sampler.c
  LIBS m)
target_include_directories(test_sampler PRIVATE ${CMAKE_SOURCE_DIR}/include)

# Perplexity tokenizes two whole corpora (2.4 MB): about 6 s in Release but
# a minute under ASan, so it is "slow" (Release stage only); so is the
# trained model's (sixteen 512-token chunks four times: 3 minutes under ASan).
foreach(cli_test errors stories logits perplexity hardening replay render chat reference model_changes trained
        signals ppl_pricing params profile speculation conversation)
  set(cli_libs "")
  set(cli_labels unit)
  if(cli_test STREQUAL "logits" OR cli_test STREQUAL "render" OR cli_test STREQUAL "reference" OR
     cli_test STREQUAL "conversation")
    set(cli_libs PkgConfig::CJSON m)
  elseif(cli_test STREQUAL "chat")
    set(cli_libs bmoe_engine PkgConfig::CJSON m) # the library's tokenizer gives the id a bias names
  endif()
  if(cli_test STREQUAL "logits")
    set(cli_labels unit arm64) # the whole CLI on the oracle models, under qemu-aarch64 too
  elseif(cli_test STREQUAL "hardening")
    set(cli_libs bmoe_gguf m)
  elseif(cli_test STREQUAL "perplexity" OR cli_test STREQUAL "trained")
    set(cli_libs m)
    set(cli_labels slow)
  elseif(cli_test STREQUAL "params")
    set(cli_libs bmoe_params PkgConfig::CJSON m) # the table is what the help and the schema must list
  elseif(cli_test STREQUAL "ppl_pricing")
    set(cli_libs bmoe_engine m) # the library's tokenizer gives the ids whose logits the test scores
  endif()
  bmoe_add_test(test_cli_${cli_test}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_${cli_test}.c
    LIBS ${cli_libs}
    LABELS ${cli_labels}
    TIMEOUT 600)
  # The tests run the binary, so building one builds it.
  add_dependencies(test_cli_${cli_test} bmoe-cli)
endforeach()
# The longest: ctest starts them first (bmoe_test_cost).
bmoe_test_cost(test_cli_speculation 14 55)
bmoe_test_cost(test_cli_model_changes 4 27)
bmoe_test_cost(test_cli_ppl_pricing 4 18)
bmoe_test_cost(test_cli_chat 2 15)
bmoe_test_cost(test_cli_trained 11)
# These tests generate their models.
add_dependencies(test_cli_chat bmoe-mkmodel)
add_dependencies(test_cli_conversation bmoe-mkmodel)
add_dependencies(test_cli_profile bmoe-analyze) # builds a profile from a route trace
add_dependencies(test_cli_hardening bmoe-mkmodel)
add_dependencies(test_cli_signals bmoe-mkmodel)
add_dependencies(test_cli_reference bmoe-mkmodel)
add_dependencies(test_cli_model_changes bmoe-mkmodel)
add_dependencies(test_cli_params bmoe-mkmodel)
add_dependencies(test_cli_speculation bmoe-mkmodel) # the models with a nextn block --mtp drafts with
# --mtp on the other architectures whose head bmoe runs, each in a run of its own
foreach(head_arch glm4moe bailingmoe2 deepseek2)
  add_test(NAME test_cli_speculation_${head_arch} COMMAND test_cli_speculation ${head_arch})
  set_tests_properties(test_cli_speculation_${head_arch} PROPERTIES LABELS unit TIMEOUT 600)
  bmoe_test_cost(test_cli_speculation_${head_arch} 6 30)
endforeach()

# --describe-params against its JSON schema (tests/cli/describe-params.schema.json),
# checked by Debian's python3-jsonschema.
add_test(NAME test_cli_params_schema
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/check_describe_params.py
          ${CMAKE_CURRENT_LIST_DIR}/describe-params.schema.json ${CMAKE_BINARY_DIR}/bin/bmoe-cli)
set_tests_properties(test_cli_params_schema PROPERTIES LABELS unit TIMEOUT 60)
