bmoe_add_test(test_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kernels.c
              LIBS bmoe_kernels bmoe_quant bmoe_base m LABELS unit arm64 COST 1 13)
bmoe_add_test(test_elementwise SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.c
              LIBS bmoe_kernels bmoe_quant bmoe_base m LABELS unit arm64)
# the arm64 stage's longest test under qemu (about 45 s)
bmoe_add_test(test_attend SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attend.c
              LIBS bmoe_kernels bmoe_quant bmoe_base m LABELS unit arm64 COST 4 30)
