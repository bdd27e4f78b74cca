# bmoe_module(NAME DEPS ...): the sources of src/NAME/*.c join libbmoe. Every
# source compiles once, into one object library; bmoe_NAME is a name for
# "link what this module needs" (the static library), kept so that tests and
# tools say which part of the engine they use.
function(bmoe_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.c)
  bmoe_filter_isa_sources(sources ${sources})
  set_property(GLOBAL APPEND PROPERTY BMOE_ALL_SOURCES ${sources})
  set_property(GLOBAL APPEND PROPERTY BMOE_ALL_DEPS ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY BMOE_MODULES ${name})
endfunction()

# libbmoe.a and libbmoe.so from one compilation of every module's sources.
# Symbols are hidden unless the public header marks them BMOE_API, so the
# shared library exports bmoe_* only; the static library still links every
# internal function into the tests and tools that use them.
function(bmoe_library)
  get_property(sources GLOBAL PROPERTY BMOE_ALL_SOURCES)
  get_property(deps GLOBAL PROPERTY BMOE_ALL_DEPS)
  get_property(modules GLOBAL PROPERTY BMOE_MODULES)
  list(REMOVE_DUPLICATES sources)
  list(FILTER deps EXCLUDE REGEX "^bmoe_")
  list(REMOVE_DUPLICATES deps)
  add_library(bmoe_objects OBJECT ${sources})
  set_target_properties(bmoe_objects PROPERTIES C_VISIBILITY_PRESET hidden)
  target_include_directories(bmoe_objects PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(bmoe_objects PUBLIC ${deps})
  add_library(bmoe STATIC $<TARGET_OBJECTS:bmoe_objects>)
  add_library(bmoe_shared SHARED $<TARGET_OBJECTS:bmoe_objects>)
  set_target_properties(bmoe_shared PROPERTIES OUTPUT_NAME bmoe)
  foreach(library bmoe bmoe_shared)
    target_link_libraries(${library} PUBLIC ${deps})
    target_include_directories(${library} PUBLIC ${CMAKE_SOURCE_DIR}/include)
  endforeach()
  target_include_directories(bmoe PUBLIC ${CMAKE_SOURCE_DIR}/src)
  foreach(module ${modules})
    add_library(bmoe_${module} INTERFACE)
    target_link_libraries(bmoe_${module} INTERFACE bmoe)
  endforeach()
endfunction()

# bmoe_add_test(NAME SOURCES ... LIBS ... [ARGS ...] [LABELS ...] [TIMEOUT s])
# A test program from tests/; it knows where shared/ and the scratch folder are.
function(bmoe_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;ARGS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/support ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(${name} PRIVATE
    BMOE_SHARED_DIR_DEFAULT="${BMOE_SHARED_DIR}"
    BMOE_TEST_TMPDIR_DEFAULT="${CMAKE_BINARY_DIR}/test-tmp"
    BMOE_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
