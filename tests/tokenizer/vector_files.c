/* Readers for tokenizer vector files (see vector_files.h). */
#include "vector_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *vector_read_file(const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    char *data = NULL;
    size_t used = 0, capacity = 0;
    for (;;) {
        if (used + 65536 + 1 > capacity) {
            capacity = capacity ? capacity * 2 : 1 << 20;
            char *grown = realloc(data, capacity);
            if (!grown) {
                free(data);
                fclose(file);
                return NULL;
            }
            data = grown;
        }
        size_t got = fread(data + used, 1, 65536, file);
        used += got;
        if (got == 0)
            break;
    }
    fclose(file);
    data[used] = '\0';
    if (length)
        *length = used;
    return data;
}

static const char separator[] = "\n__ggml_vocab_test__\n";

int vector_set_load(vector_set *set, const char *inp_path, const char *out_path)
{
    memset(set, 0, sizeof(*set));
    size_t inp_length = 0, out_length = 0;
    set->inputs_buffer = vector_read_file(inp_path, &inp_length);
    char *out_text = vector_read_file(out_path, &out_length);
    if (!set->inputs_buffer || !out_text) {
        fprintf(stderr, "cannot read %s or %s\n", inp_path, out_path);
        free(out_text);
        return -1;
    }
    size_t separator_length = strlen(separator);
    size_t count = 0;
    for (char *at = set->inputs_buffer; (at = strstr(at, separator)) != NULL; at += separator_length)
        count++;
    set->inputs = calloc(count + 1, sizeof(char *));
    set->input_lengths = calloc(count + 1, sizeof(size_t));
    set->expected = calloc(count + 1, sizeof(int32_t *));
    set->expected_counts = calloc(count + 1, sizeof(int32_t));
    if (!set->inputs || !set->input_lengths || !set->expected || !set->expected_counts) {
        free(out_text);
        return -1;
    }
    char *cursor = set->inputs_buffer;
    for (size_t i = 0; i < count; i++) {
        char *end = strstr(cursor, separator);
        *end = '\0';
        set->inputs[i] = cursor;
        set->input_lengths[i] = (size_t)(end - cursor);
        cursor = end + separator_length;
    }
    /* One line of ids per input. */
    char *line = out_text;
    for (size_t i = 0; i < count; i++) {
        if (!line) {
            fprintf(stderr, "%s has fewer lines than %s has inputs\n", out_path, inp_path);
            free(out_text);
            return -1;
        }
        char *newline = strchr(line, '\n');
        if (newline)
            *newline = '\0';
        size_t capacity = strlen(line) / 2 + 1;
        set->expected[i] = malloc(capacity * sizeof(int32_t));
        int32_t n = 0;
        char *at = line;
        for (;;) {
            char *end;
            long value = strtol(at, &end, 10);
            if (end == at)
                break;
            set->expected[i][n++] = (int32_t)value;
            at = end;
        }
        set->expected_counts[i] = n;
        line = newline ? newline + 1 : NULL;
    }
    set->count = count;
    free(out_text);
    return 0;
}

void vector_set_free(vector_set *set)
{
    if (set->expected)
        for (size_t i = 0; i < set->count; i++)
            free(set->expected[i]);
    free(set->expected);
    free(set->expected_counts);
    free(set->inputs);
    free(set->input_lengths);
    free(set->inputs_buffer);
    memset(set, 0, sizeof(*set));
}

size_t vector_run(const tokenizer *tok, const vector_set *set, const char *name, bool parse_special)
{
    size_t passed = 0, shown = 0;
    for (size_t i = 0; i < set->count; i++) {
        int32_t capacity = (int32_t)set->input_lengths[i] * 3 + 16;
        int32_t *ids = malloc((size_t)capacity * sizeof(int32_t));
        bmoe_error err = {0};
        int32_t n = tokenizer_encode(tok, set->inputs[i], set->input_lengths[i], false, parse_special,
                                     ids, capacity, &err);
        bool same = n == set->expected_counts[i] &&
                    memcmp(ids, set->expected[i], (size_t)(n > 0 ? n : 0) * sizeof(int32_t)) == 0;
        if (same) {
            passed++;
        } else if (shown++ < 5) {
            fprintf(stderr, "%s #%zu: input \"%.60s\"\n  expected (%d):", name, i, set->inputs[i],
                    (int)set->expected_counts[i]);
            for (int32_t k = 0; k < set->expected_counts[i] && k < 24; k++)
                fprintf(stderr, " %d", (int)set->expected[i][k]);
            fprintf(stderr, "\n  got      (%d):", (int)n);
            for (int32_t k = 0; k < n && k < 24; k++)
                fprintf(stderr, " %d", (int)ids[k]);
            fprintf(stderr, "%s%s\n", n < 0 ? " error: " : "", n < 0 ? err.message : "");
        }
        free(ids);
    }
    printf("%s: %zu/%zu vectors pass\n", name, passed, set->count);
    return passed;
}
