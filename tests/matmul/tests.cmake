# Thread pool and parallel matrix products (src/kernels/thread_pool.c, matmul.c).
bmoe_add_test(test_thread_pool
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_thread_pool.c
  LIBS bmoe_kernels
  LABELS unit arm64
  TIMEOUT 120)
bmoe_add_test(test_matmul
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_matmul.c
  LIBS bmoe_kernels m
  LABELS unit arm64
  TIMEOUT 120)
