# Expert streaming: byte identity with the resident run in every
# configuration, the counters, faults, memory bounds.
bmoe_add_test(test_stream_identity SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stream_identity.c
  LIBS bmoe_engine m TIMEOUT 900 COST 56 35)
add_dependencies(test_stream_identity bmoe-mkmodel)
bmoe_add_test(test_stream_order SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stream_order.c LIBS bmoe_engine m
  Threads::Threads TIMEOUT 120)
add_dependencies(test_stream_order bmoe-mkmodel)
bmoe_add_test(test_stream_faults SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stream_faults.c LIBS bmoe_engine m TIMEOUT 600
  COST 7 20)
add_dependencies(test_stream_faults bmoe-mkmodel)
bmoe_add_test(test_stream_memory SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stream_memory.c LIBS bmoe_engine m
  TIMEOUT 900 LABELS slow COST 16)
set_tests_properties(test_stream_memory PROPERTIES SKIP_RETURN_CODE 77)
add_dependencies(test_stream_memory bmoe-mkmodel bmoe-cli)
bmoe_add_test(test_io_lanes SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_io_lanes.c LIBS bmoe_stream bmoe_base TIMEOUT 120)
bmoe_add_test(test_guess_trust SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_guess_trust.c LIBS bmoe_stream TIMEOUT 30)
bmoe_add_test(test_memory_budget SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_memory_budget.c LIBS bmoe_stream bmoe_base
  TIMEOUT 60)
bmoe_add_test(test_cache_policy SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cache_policy.c LIBS bmoe_stream m TIMEOUT 120)
bmoe_add_test(test_mapping_pages SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mapping_pages.c LIBS bmoe_stream bmoe_base
  TIMEOUT 120)
add_test(NAME test_mapping_pages_huge COMMAND test_mapping_pages huge)
set_tests_properties(test_mapping_pages_huge PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)
bmoe_add_test(test_stream_contexts SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stream_contexts.c LIBS bmoe_engine m
  Threads::Threads TIMEOUT 600 COST 6 32)
add_dependencies(test_stream_contexts bmoe-mkmodel)
bmoe_add_test(test_mapping_changes SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mapping_changes.c LIBS bmoe_engine m
  TIMEOUT 300 COST 8 27)
add_dependencies(test_mapping_changes bmoe-mkmodel)
bmoe_add_test(test_lossy_levers SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_lossy_levers.c LIBS bmoe_engine m TIMEOUT 300
  COST 6 27)
bmoe_add_test(test_expert_profile SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_expert_profile.c LIBS bmoe_engine m
  TIMEOUT 300)
add_dependencies(test_expert_profile bmoe-mkmodel)
# The draft head's dense tensors placed with the dense weights when asked.
bmoe_add_test(test_draft_head SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_draft_head.c LIBS bmoe_engine m TIMEOUT 120)
add_dependencies(test_draft_head bmoe-mkmodel)
