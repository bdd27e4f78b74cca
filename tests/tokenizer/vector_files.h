/* Test-side readers for tokenizer test data: llama.cpp's .inp/.out vector
 * files (strings separated by "\n__ggml_vocab_test__\n", one line of ids per
 * string) and whole files. Owns nothing beyond what it returns. */
#ifndef BMOE_TESTS_TOKENIZER_VECTOR_FILES_H
#define BMOE_TESTS_TOKENIZER_VECTOR_FILES_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* Whole file into a NUL-terminated malloc'd buffer; NULL on failure. */
char *vector_read_file(const char *path, size_t *length);

typedef struct vector_set {
    char *inputs_buffer;  /* owns the input strings */
    char **inputs;        /* NUL-terminated (may contain no NULs themselves) */
    size_t *input_lengths;
    int32_t **expected;   /* ids per input */
    int32_t *expected_counts;
    size_t count;
} vector_set;

/* Reads PATH.inp-style and .out-style files; 0 or -1 (message on stderr). */
int vector_set_load(vector_set *set, const char *inp_path, const char *out_path);
void vector_set_free(vector_set *set);

/* Encodes every input (no BOS/EOS) and compares; prints "NAME: P/N vectors
 * pass" and the first mismatches. Returns the number that pass. */
size_t vector_run(const tokenizer *tok, const vector_set *set, const char *name, bool parse_special);

#endif
