/* The llama architecture on a real trained model: stories260K (llama2.c's
 * TinyStories checkpoint converted to GGUF). Greedy decoding from the prompt
 * "Once upon a time" (ids 1 403 407 261 378) must reproduce the ids llama2.c's
 * run.c printed (expected_runc_once_upon_a_time_n200.ids: "pos next_token"
 * lines; positions before the last prompt token are forced prompt tokens). */
#include <stdbool.h>
#include <string.h>

#include "bmoe.h"
#include "oracle_support.h"

int main(void)
{
    char path[1024];
    bmoe_error error = {0};
    test_shared_path(path, sizeof path, "data/models/stories260K/expected_runc_once_upon_a_time_n200.ids");
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return test_finish();
    int expected[512];
    int n_expected = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        int position, next;
        if (line[0] == '#')
            continue;
        if (sscanf(line, "%d %d", &position, &next) == 2 && position == n_expected && n_expected < 512)
            expected[n_expected++] = next;
    }
    fclose(f);
    CHECK(n_expected == 200);

    test_shared_path(path, sizeof path, "data/models/stories260K/stories260K.gguf");
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    if (!model)
        return test_finish();
    CHECK(strcmp(bmoe_model_architecture(model), "llama") == 0);
    CHECK(bmoe_model_n_vocab(model) == 512);
    CHECK(bmoe_model_n_layer(model) == 5);

    for (int threads = 1; threads <= 2; threads++) {
        bmoe_context_params params = bmoe_context_default_params();
        params.n_ctx = 256; /* past the file's context_length of 128, as run.c's seq_len 512 allows */
        params.n_threads = threads;
        bmoe_context *context = bmoe_context_create(model, &params, &error);
        CHECK_MSG(context != NULL, "context: %s", error.message);
        if (!context)
            break;
        const int32_t prompt[5] = {1, 403, 407, 261, 378};
        float logits[512];
        CHECK(bmoe_eval(context, prompt, 5, logits, false, NULL, &error) == 0);
        int matched = 0;
        /* expected[p] is the token after position p; the prompt covers 0..3 */
        for (int position = 4; position < n_expected; position++) {
            int32_t next = oracle_argmax(logits, 512);
            if (next != expected[position]) {
                fprintf(stderr, "threads %d: position %d: got %d, expected %d\n", threads, position, next,
                        expected[position]);
                break;
            }
            matched++;
            if (position + 1 < n_expected &&
                bmoe_eval(context, &next, 1, logits, false, NULL, &error) != 0) {
                fprintf(stderr, "eval: %s\n", error.message);
                break;
            }
        }
        CHECK_MSG(matched == n_expected - 4, "threads %d: %d of %d greedy tokens match run.c", threads, matched,
                  n_expected - 4);
        bmoe_context_free(context);
    }
    bmoe_model_free(model);
    return test_finish();
}
