/* bmoe-mkmodel --quantize: an F32 file rewritten in a --type is
 * byte-identical to the file the generator writes in that type from the
 * same seed (same per-tensor recipe, same quantizers, metadata copied in
 * order with general.file_type set); a tied output head (no output.weight)
 * takes the head's type in Q4_K_M; bad uses fail with one line. */
#include "mkmodel_run.h"

#define SHAPE "--shape tiny-qwen3moe --quiet"
/* Sanitized: 4 experts a layer, not the presets' 16. The recipe and the
 * quantizers run the same code for any count, and under ASan the Q4_K_M
 * search takes ~13 s a file at 16. */
static const char *const experts = TEST_SANITIZED ? "--experts 4" : "";

static bool files_equal(const char *a, const char *b)
{
    size_t size_a = 0, size_b = 0;
    char *x = test_read_file(a, &size_a), *y = test_read_file(b, &size_b);
    bool equal = x && y && size_a == size_b && memcmp(x, y, size_a) == 0;
    free(x);
    free(y);
    return equal;
}

int main(void)
{
    mk_setup("mkmodel_quantize");
    char f32[1200], direct[1200], converted[1200];
    mk_path(f32, sizeof f32, "f32.gguf");
    mk_path(direct, sizeof direct, "direct.gguf");
    mk_path(converted, sizeof converted, "converted.gguf");
    CHECK(mk_run(SHAPE " %s --type f32 --seed 5 -o '%s'", experts, f32) == 0);
    const char *types[] = {"q8_0", "q4_k_m"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        CHECK(mk_run(SHAPE " %s --type %s --seed 5 -o '%s'", experts, types[i], direct) == 0);
        CHECK(mk_run("--quantize '%s' --type %s --quiet -o '%s'", f32, types[i], converted) == 0);
        CHECK_MSG(files_equal(direct, converted), "--quantize to %s differs from the generator's file", types[i]);
    }

    /* gemma4's head is tied to token_embd: in Q4_K_M it gets output's Q6_K */
    CHECK(mk_run("--shape tiny-gemma4 --embd 256 %s --quiet --type f32 -o '%s'", experts, f32) == 0);
    CHECK(mk_run("--quantize '%s' --type q4_k_m --quiet -o '%s'", f32, converted) == 0);
    bmoe_error err;
    error_clear(&err);
    gguf_model *m = gguf_open(converted, &err);
    CHECK_MSG(m != NULL, "%s", err.message);
    if (m) {
        const gguf_tensor *embd = gguf_find_tensor(m, "token_embd.weight");
        CHECK(gguf_find_tensor(m, "output.weight") == NULL);
        CHECK_MSG(embd && embd->type == TYPE_Q6_K, "tied token_embd type %u", embd ? embd->type : 0);
        uint32_t file_type = 0;
        CHECK(gguf_get_uint32(m, "general.file_type", &file_type) && file_type == 15);
        gguf_close(m);
    }

    CHECK(mk_run("--quantize '%s/missing.gguf' --type q8_0 -o '%s'", mk_dir, converted) == 1);
    size_t length = 0;
    char *message = test_read_file(mk_stderr, &length);
    CHECK_MSG(message && mk_count_lines(message) == 1, "stderr: %s", message ? message : "(none)");
    free(message);
    CHECK(mk_run("--quantize '%s' --type q8_0 --plan", f32) == 2);
    return test_finish();
}
