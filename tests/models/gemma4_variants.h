/* The gemma4 variants the model tests generate with bmoe-mkmodel (F32, the
 * tiny-gemma4 preset's sizes): KV sharing, per-layer embeddings, both, and
 * both without experts.
 * With 6 layers of period 3 (layers 2 and 5 full attention) and the last 3
 * shared, layers 3 and 4 attend over layer 1's cache and layer 5 over layer
 * 2's (architectures.md 6.4). Header-only; the test's mk_setup comes first. */
#ifndef BMOE_TESTS_GEMMA4_VARIANTS_H
#define BMOE_TESTS_GEMMA4_VARIANTS_H

#include "../mkmodel/mkmodel_run.h"

typedef struct gemma4_variant {
    const char *name;
    const char *flags;
} gemma4_variant;

static const gemma4_variant gemma4_variants[] = {
    {"gemma4-shared-kv", "--layers 6 --swa-period 3 --shared-kv 3"},
    {"gemma4-per-layer", "--per-layer-input 32"},
    {"gemma4-shared-kv-per-layer", "--layers 6 --swa-period 3 --shared-kv 3 --per-layer-input 16 --seed 7"},
    /* the small Gemma 4 models' kind: both, and no experts (the dense MLP only) */
    {"gemma4-dense", "--experts 0 --layers 6 --swa-period 3 --shared-kv 3 --per-layer-input 16 --seed 3"},
};
enum { GEMMA4_VARIANTS = sizeof gemma4_variants / sizeof gemma4_variants[0] };

/* Writes variant v into the test's scratch folder; path gets its name.
 * false (with the tool's message recorded as a failed check) if the tool fails. */
static inline bool gemma4_variant_write(const gemma4_variant *v, char *path, size_t size)
{
    char file[128];
    snprintf(file, sizeof file, "%s.gguf", v->name);
    mk_path(path, size, file);
    int status = mk_run("--shape tiny-gemma4 %s --type f32 --quiet -o '%s'", v->flags, path);
    char *errors = status == 0 ? NULL : test_read_file(mk_stderr, NULL);
    CHECK_MSG(status == 0, "%s: bmoe-mkmodel exited %d: %s", v->name, status, errors ? errors : "");
    free(errors);
    return status == 0;
}

#endif
