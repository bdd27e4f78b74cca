/* Test-side loader for Hugging Face tokenizer.json files (gzipped): builds the
 * same in-memory vocabulary a GGUF conversion gives (vocab + added tokens,
 * token types, merges) and hands it to tokenizer_create. */
#ifndef BMOE_TESTS_TOKENIZER_HF_TOKENIZER_H
#define BMOE_TESTS_TOKENIZER_HF_TOKENIZER_H

#include "tokenizer/tokenizer.h"

/* model: "gpt2" or "gemma4"; pre: tokenizer.ggml.pre to use (NULL for gemma4);
 * bos_text / eos_text: texts of the BOS and EOS tokens, or NULL. */
tokenizer *hf_tokenizer_load(const char *gz_path, const char *model, const char *pre,
                             const char *bos_text, const char *eos_text, bmoe_error *err);

#endif
