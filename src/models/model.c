/* The model as a whole: finding a file's architecture and binding it (the
 * architecture's bind function, then the check that every tensor of the file
 * was bound), its release, and its bound views as weight residency sees
 * them: where the routed experts are in the file, their detaching when they
 * stream, and the dense views pointed at a copy. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/text.h"
#include "../stream/expert_store.h"

/* The layer of a tensor named blk.<layer>.*, or -1. */
static long layer_of_tensor(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9')
        return -1;
    char *end = NULL;
    long layer = strtol(name + 4, &end, 10);
    return *end == '.' ? layer : -1;
}

bool model_tensor_in_nextn(const model *m, const char *name)
{
    long layer = layer_of_tensor(name);
    return layer >= m->hparams.n_layer && layer < m->hparams.n_layer + m->hparams.n_layer_nextn;
}

bool model_tensor_in_head(const model *m, const char *name)
{
    return m->hparams.n_layer_head > 0 && layer_of_tensor(name) == m->hparams.n_layer;
}

/* Tensors the architecture left unbound: a block_count smaller than the
 * layers present would otherwise run the first layers only, silently. */
static int check_every_tensor_used(const model *m, bmoe_error *err)
{
    const model_hparams *hp = &m->hparams;
    int32_t block_count = hp->n_layer + hp->n_layer_nextn;
    uint64_t unused = 0;
    const gguf_tensor *first = NULL;
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++) {
        if (m->tensor_used[i])
            continue;
        const gguf_tensor *tensor = gguf_tensor_at(m->file, i);
        /* the multi-token-prediction layers nextn_predict_layers declares */
        if (model_tensor_in_nextn(m, tensor->name))
            continue;
        if (unused++ == 0)
            first = tensor;
    }
    if (unused == 0)
        return 0;
    char shown[128], more[64] = "";
    text_escape_string(first->name, shown, sizeof shown);
    if (unused > 1)
        snprintf(more, sizeof more, " (and %llu more unused tensors)", (unsigned long long)(unused - 1));
    long layer = layer_of_tensor(first->name);
    if (layer >= block_count)
        return error_set(err, "model: tensor '%s' belongs to layer %ld, but %s.block_count is %d%s", shown, layer,
                         hp->architecture, block_count, more);
    return error_set(err, "model: tensor '%s' is not used by the %s architecture%s", shown, hp->architecture,
                     more);
}

int model_init(model *m, const gguf_model *file, bmoe_error *err)
{
    memset(m, 0, sizeof *m);
    m->file = file;
    gguf_string name;
    if (!gguf_get_string(file, "general.architecture", &name))
        return error_set(err, "model: missing or non-string key 'general.architecture'");
    char shown[160];
    text_escape(name.data, (size_t)name.length, shown, sizeof shown);
    if (name.length == 0 || name.length >= sizeof m->hparams.architecture || memchr(name.data, 0, name.length))
        return error_set(err, "model: general.architecture '%s' (%llu bytes) is not an architecture name", shown,
                         (unsigned long long)name.length);
    memcpy(m->hparams.architecture, name.data, name.length);
    m->hparams.architecture[name.length] = '\0';
    m->arch = model_arch_find(m->hparams.architecture);
    if (!m->arch)
        return error_set(err, "model: unknown architecture '%s' (supported: %s)", shown, model_arch_names());
    uint64_t count = gguf_tensor_count(file);
    m->tensor_used = calloc(count ? count : 1, 1);
    if (!m->tensor_used)
        return error_set(err, "model: out of memory for %llu tensors", (unsigned long long)count);
    int status = m->arch->bind(m, err);
    if (status == 0)
        status = check_every_tensor_used(m, err);
    free(m->tensor_used);
    m->tensor_used = NULL;
    if (status != 0) {
        model_release(m);
        return -1;
    }
    return 0;
}

void model_release(model *m)
{
    free(m->weights.layers);
    m->weights.layers = NULL;
}

/* ---- The experts' place in the file ----------------------------------- */

static void expert_projection_of(const tensor_view *view, expert_projection_source *out)
{
    out->resident = view->data;
    out->shard = view->shard;
    out->file_offset = view->file_offset;
    out->expert_bytes = (uint64_t)view->row_bytes * (uint64_t)view->ne[1];
}

void model_expert_sources(const model *m, expert_layer_source *layers)
{
    for (int il = 0; il < m->hparams.n_layer + m->hparams.n_layer_head; il++) {
        const layer_weights *l = &m->weights.layers[il];
        memset(&layers[il], 0, sizeof layers[il]);
        if (l->ffn_gate_up_exps.name) {
            /* fused: gate_up, then down (the order moe.c asks for them) */
            layers[il].n_projections = 2;
            expert_projection_of(&l->ffn_gate_up_exps, &layers[il].projections[0]);
            expert_projection_of(&l->ffn_down_exps, &layers[il].projections[1]);
            continue;
        }
        if (!l->ffn_gate_exps.name)
            continue;
        const tensor_view *views[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
        layers[il].n_projections = 3;
        for (int p = 0; p < 3; p++)
            expert_projection_of(views[p], &layers[il].projections[p]);
    }
}

void model_detach_expert_data(model *m)
{
    for (int il = 0; il < m->hparams.n_layer + m->hparams.n_layer_head; il++) {
        layer_weights *l = &m->weights.layers[il];
        l->ffn_gate_exps.data = l->ffn_up_exps.data = l->ffn_gate_up_exps.data = l->ffn_down_exps.data = NULL;
    }
}

void model_each_view(model *m, void (*visit)(void *user, tensor_view *view), void *user)
{
    tensor_view *globals[] = {&m->weights.token_embd, &m->weights.output_norm, &m->weights.output,
                              &m->weights.per_layer_token_embd, &m->weights.per_layer_model_proj,
                              &m->weights.per_layer_proj_norm, &m->weights.output_hc_fn,
                              &m->weights.output_hc_base, &m->weights.output_hc_scale};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (globals[i]->name)
            visit(user, globals[i]);
    /* layer_weights is tensor views only */
    _Static_assert(sizeof(layer_weights) % sizeof(tensor_view) == 0, "layer_weights holds tensor views only");
    size_t per_layer = sizeof(layer_weights) / sizeof(tensor_view);
    for (int il = 0; il < m->hparams.n_layer + m->hparams.n_layer_head; il++) {
        tensor_view *views = (tensor_view *)&m->weights.layers[il];
        for (size_t i = 0; i < per_layer; i++)
            if (views[i].name)
                visit(user, &views[i]);
    }
}

typedef struct relocation {
    model_locate_fn locate;
    void *user;
} relocation;

static void relocate_view(void *user, tensor_view *view)
{
    const relocation *r = user;
    if (!view->data)
        return;
    const void *copy = r->locate(r->user, view->shard, view->file_offset);
    if (copy)
        view->data = copy;
}

void model_relocate_views(model *m, model_locate_fn locate, void *user)
{
    relocation r = {locate, user};
    model_each_view(m, relocate_view, &r);
}
