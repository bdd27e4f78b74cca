# The JSON-schema matcher and the vocabulary mask: each feature accepted and
# refused byte by byte, the schema refusals, and the mask against feeding
# every token of a small vocabulary from a copy of the state.
bmoe_add_test(test_json_grammar
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_json_grammar.c
  LIBS bmoe_structured PkgConfig::CJSON)
# The public API on a real vocabulary: generations under a constraint write
# one value of the schema and end, greedy, sampled and drafted alike.
bmoe_add_test(test_structured_api
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_structured_api.c
  LIBS bmoe_structured bmoe_engine PkgConfig::CJSON m)
# The GBNF grammar matcher and its vocabulary mask: each syntax element
# accepted and refused byte by byte, split UTF-8, repetitions and their
# bounds, recursion, the refusals with their place named, the stack bound,
# and the mask against feeding every token of a small vocabulary.
bmoe_add_test(test_gbnf
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gbnf.c
  LIBS bmoe_structured)
