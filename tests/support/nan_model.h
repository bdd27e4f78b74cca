/* A copy of a model whose output norm is NaN (the norm must be F32), for the
 * tests of non-finite logits. Header-only; links the gguf module. */
#ifndef BMOE_TESTS_NAN_MODEL_H
#define BMOE_TESTS_NAN_MODEL_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "test.h"

static inline bool write_nan_model(const char *source, const char *path)
{
    size_t size;
    char *bytes = test_read_file(source, &size);
    bmoe_error err = {0};
    gguf_model *file = gguf_open(source, &err);
    const gguf_tensor *norm = file ? gguf_find_tensor(file, "output_norm.weight") : NULL;
    bool ok = bytes && norm && norm->type == 0 /* F32 */;
    if (ok) {
        float nan = NAN;
        for (uint64_t i = 0; i < norm->nbytes / 4; i++)
            memcpy(bytes + norm->file_offset + i * 4, &nan, 4);
        FILE *out = fopen(path, "wb");
        ok = out && fwrite(bytes, 1, size, out) == size;
        if (out)
            ok &= fclose(out) == 0;
    }
    if (file)
        gguf_close(file);
    free(bytes);
    return ok;
}

#endif
