/* libFuzzer target for the GGUF reader: every input is opened as an
 * in-memory GGUF image; when it loads, every key, array element (a bounded
 * prefix of nested arrays), tensor byte range and the --info printout are
 * touched, so ASan/UBSan see any read the reader lets through. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

/* Nested and string elements cost O(index) each: walk a bounded prefix. */
#define FUZZ_NESTED_ELEMENTS 64

static uint64_t fuzz_walk_array(const gguf_kv *kv, int depth)
{
    uint64_t sum = 0;
    if (kv->array_type == GGUF_TYPE_ARRAY) {
        for (uint64_t i = 0; i < kv->array_count && i < FUZZ_NESTED_ELEMENTS && depth < 16; i++) {
            gguf_kv inner;
            if (gguf_array_element(kv, i, &inner))
                sum += fuzz_walk_array(&inner, depth + 1);
        }
    } else if (kv->array_type == GGUF_TYPE_STRING) {
        gguf_string *list = malloc((kv->array_count ? kv->array_count : 1) * sizeof *list);
        if (list && gguf_array_strings(kv, list))
            for (uint64_t i = 0; i < kv->array_count; i++)
                sum += list[i].length ? (uint8_t)list[i].data[list[i].length - 1] : 0;
        free(list);
    } else {
        for (uint64_t i = 0; i < kv->array_count; i++)
            sum += (uint64_t)gguf_array_int(kv, i) + (gguf_array_float(kv, i) > 0.0);
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bmoe_error err;
    gguf_model *model = gguf_open_memory(data, size, "fuzz", &err);
    if (!model) {
        /* A refusal must be one line. */
        if (err.message[0] == '\0' || strchr(err.message, '\n'))
            abort();
        return 0;
    }
    uint64_t sum = 0;
    for (uint64_t i = 0; i < gguf_kv_count(model); i++) {
        const gguf_kv *kv = gguf_kv_at(model, i);
        int64_t value;
        float real;
        bool flag;
        gguf_string s;
        uint32_t layers[8];
        bmoe_error layer_err;
        sum += gguf_get_int(model, kv->key, &value) + gguf_get_float(model, kv->key, &real) +
               gguf_get_bool(model, kv->key, &flag) + gguf_get_string(model, kv->key, &s);
        sum += (uint64_t)gguf_get_per_layer_uint32(model, kv->key, 8, layers, &layer_err);
        if (gguf_find_kv(model, kv->key) != kv)
            abort();
        if (kv->type == GGUF_TYPE_ARRAY)
            sum += fuzz_walk_array(kv, 0);
        else if (kv->payload_bytes)
            sum += kv->payload[kv->payload_bytes - 1];
    }
    for (uint64_t i = 0; i < gguf_tensor_count(model); i++) {
        const gguf_tensor *tensor = gguf_tensor_at(model, i);
        if (gguf_find_tensor(model, tensor->name) != tensor)
            abort();
        if (tensor->nbytes)
            sum += ((const uint8_t *)tensor->data)[0] + ((const uint8_t *)tensor->data)[tensor->nbytes - 1];
    }
    FILE *sink = fopen("/dev/null", "w");
    if (sink) {
        gguf_print_info(model, sink);
        fprintf(sink, "%llu\n", (unsigned long long)sum);
        fclose(sink);
    }
    gguf_close(model);
    return 0;
}
