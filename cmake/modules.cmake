# bmoe_module(NAME DEPS ...): the sources of src/NAME/*.c, compiled once into
# the object library bmoe_NAME_objects. bmoe_NAME is a static library of those
# objects (and, through DEPS, the modules it needs), so that a test or tool
# links, and a build compiles, only the part of the engine it uses; libbmoe
# is built from the same objects.
function(bmoe_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.c)
  bmoe_filter_isa_sources(sources ${sources})
  add_library(bmoe_${name}_objects OBJECT ${sources})
  set_target_properties(bmoe_${name}_objects PROPERTIES C_VISIBILITY_PRESET hidden)
  target_include_directories(bmoe_${name}_objects PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  set(external ${ARG_DEPS})
  list(FILTER external EXCLUDE REGEX "^bmoe_")
  target_link_libraries(bmoe_${name}_objects PUBLIC ${external})
  add_library(bmoe_${name} STATIC $<TARGET_OBJECTS:bmoe_${name}_objects>)
  target_include_directories(bmoe_${name} PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(bmoe_${name} PUBLIC ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY BMOE_ALL_DEPS ${external})
  set_property(GLOBAL APPEND PROPERTY BMOE_MODULES ${name})
endfunction()

# libbmoe.a and libbmoe.so from every module's objects. Symbols are hidden
# unless the public header marks them BMOE_API, so the shared library
# exports bmoe_* only.
function(bmoe_library)
  get_property(deps GLOBAL PROPERTY BMOE_ALL_DEPS)
  get_property(modules GLOBAL PROPERTY BMOE_MODULES)
  list(REMOVE_DUPLICATES deps)
  set(objects)
  foreach(module ${modules})
    list(APPEND objects $<TARGET_OBJECTS:bmoe_${module}_objects>)
  endforeach()
  add_library(bmoe STATIC ${objects})
  add_library(bmoe_shared SHARED ${objects})
  set_target_properties(bmoe_shared PROPERTIES OUTPUT_NAME bmoe)
  foreach(library bmoe bmoe_shared)
    target_link_libraries(${library} PUBLIC ${deps})
    target_include_directories(${library} PUBLIC ${CMAKE_SOURCE_DIR}/include)
  endforeach()
endfunction()

# The programs of the tests labelled arm64: what scripts/test-arm64.sh builds
# and runs under qemu-aarch64 (building every test there would take minutes).
add_custom_target(bmoe_arm64_tests)

# bmoe_test_cost(NAME SECONDS [SLOW_SECONDS]): about how long test NAME runs,
# in a native Release build and (SLOW_SECONDS, if given) where each test runs
# many times slower: under the sanitizers or an emulator. ctest -j starts the
# costliest tests first; without it a clean clone (no timing data of ctest's
# own yet) starts them in the order they are defined, and a long one started
# last stretches the stage by its whole length.
function(bmoe_test_cost name seconds)
  set(cost ${seconds})
  if(ARGC GREATER 2 AND (BMOE_SANITIZE OR CMAKE_CROSSCOMPILING_EMULATOR))
    set(cost ${ARGV2})
  endif()
  set_tests_properties(${name} PROPERTIES COST ${cost})
endfunction()

# bmoe_add_test(NAME SOURCES ... LIBS ... [ARGS ...] [LABELS ...] [TIMEOUT s]
#               [COST s [slow s]])
# A test program from tests/; it knows where shared/ and the scratch folder are,
# and, cross-built, how to run the programs it starts (BMOE_TEST_EMULATOR: the
# emulator's command line, words separated by spaces). COST: bmoe_test_cost's
# seconds, for the tests that run longest.
function(bmoe_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;ARGS;LABELS;COST" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/support ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(${name} PRIVATE
    BMOE_SHARED_DIR_DEFAULT="${BMOE_SHARED_DIR}"
    BMOE_TEST_TMPDIR_DEFAULT="${CMAKE_BINARY_DIR}/test-tmp"
    BMOE_BIN_DIR="${CMAKE_BINARY_DIR}/bin"
    BMOE_MODELS_DIR="${CMAKE_SOURCE_DIR}/models")
  if(CMAKE_CROSSCOMPILING_EMULATOR)
    list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " emulator)
    target_compile_definitions(${name} PRIVATE BMOE_TEST_EMULATOR="${emulator}")
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
  if(ARG_COST)
    bmoe_test_cost(${name} ${ARG_COST})
  endif()
  if("arm64" IN_LIST ARG_LABELS)
    add_dependencies(bmoe_arm64_tests ${name})
  endif()
endfunction()
