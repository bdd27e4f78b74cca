bmoe_add_test(test_ops SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ops.c LIBS bmoe_ops bmoe_kernels bmoe_base m)
