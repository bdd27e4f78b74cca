# bmoe-mkmodel: the tests run build/bin/bmoe-mkmodel as a child process and
# read what it wrote with the GGUF reader, so building a test builds the tool.
foreach(mkmodel_test files split cli targets hybrid quantize)
  bmoe_add_test(test_mkmodel_${mkmodel_test}
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mkmodel_${mkmodel_test}.c
    LIBS bmoe_gguf bmoe_quant bmoe_base m
    TIMEOUT 300)
  add_dependencies(test_mkmodel_${mkmodel_test} bmoe-mkmodel)
endforeach()
# the hybrid architectures' files are also run through bmoe-cli
add_dependencies(test_mkmodel_hybrid bmoe-cli)
bmoe_test_cost(test_mkmodel_files 3 21)
bmoe_test_cost(test_mkmodel_hybrid 16 16)
bmoe_test_cost(test_mkmodel_quantize 11 15)

# Writes the full-size qwen3-30b-a3b file (~18.5 GB of disk, about 2 minutes
# at 160 MB/s) and checks it with bmoe-cli --info; deleted afterwards.
bmoe_add_test(test_mkmodel_full
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mkmodel_full.c
  LIBS bmoe_gguf bmoe_quant bmoe_base m
  LABELS slow
  TIMEOUT 1800
  COST 76)
add_dependencies(test_mkmodel_full bmoe-mkmodel bmoe-cli)
