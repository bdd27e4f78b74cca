# The engine: the generation's text stream, the generation API, speculative
# decoding, errors, abort, prefix reuse and the shared library's exports.
bmoe_add_test(test_text_stream SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_text_stream.c LIBS bmoe_engine)
bmoe_add_test(test_generation SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_generation.c
  LIBS bmoe_engine PkgConfig::CJSON m TIMEOUT 600)
add_dependencies(test_generation bmoe-cli)
# Speculative decoding: byte-identical to plain decoding on every draft source.
bmoe_add_test(test_speculation SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_speculation.c LIBS bmoe_engine m TIMEOUT 120
  COST 5 40)
# When drafting pauses and resumes, on made-up timings.
bmoe_add_test(test_option_gate SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_option_gate.c LIBS bmoe_engine)
bmoe_add_test(test_errors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_errors.c LIBS bmoe_engine m)
# Through libbmoe.so and bmoe.h alone, as an application links it.
add_executable(test_public_api ${CMAKE_CURRENT_LIST_DIR}/test_public_api.c)
target_include_directories(test_public_api PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
target_compile_definitions(test_public_api PRIVATE BMOE_SHARED_DIR_DEFAULT="${BMOE_SHARED_DIR}"
  BMOE_TEST_TMPDIR_DEFAULT="${CMAKE_BINARY_DIR}/test-tmp")
target_link_libraries(test_public_api PRIVATE bmoe_shared)
add_test(NAME test_public_api COMMAND test_public_api)
add_test(NAME test_exports COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_exports.sh $<TARGET_FILE:bmoe_shared>)
set_tests_properties(test_public_api test_exports PROPERTIES LABELS unit TIMEOUT 120)
# The sliding-window layers' rings: the logits of a whole cache, cut back near and far.
bmoe_add_test(test_swa_ring SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_swa_ring.c LIBS bmoe_engine m TIMEOUT 300)
add_dependencies(test_swa_ring bmoe-mkmodel)
