# bmoe-cli and the sampler. The sampler test compiles sampler.c on its own so
# that it does not depend on the rest of the engine.
bmoe_add_test(test_sampler
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sampler.c ${CMAKE_SOURCE_DIR}/src/engine/sampler.c
  LIBS m)
target_include_directories(test_sampler PRIVATE ${CMAKE_SOURCE_DIR}/include)

bmoe_add_test(test_cli_output
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_output.c ${CMAKE_SOURCE_DIR}/src/cli/cli_output.c)
target_include_directories(test_cli_output PRIVATE ${CMAKE_SOURCE_DIR}/include)
