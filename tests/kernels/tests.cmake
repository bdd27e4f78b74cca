bmoe_add_test(test_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kernels.c
              LIBS bmoe_kernels bmoe_quant bmoe_base m)
