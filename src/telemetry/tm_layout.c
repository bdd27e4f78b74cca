/* The per-layer layout of tm_layout.h, from bmoe_model_layer_bytes. */
#include "tm_layout.h"

#include <stdlib.h>
#include <string.h>

void tm_layout_free(tm_layout *layout)
{
    free(layout->expert_bytes);
    free(layout->dense_bytes);
    memset(layout, 0, sizeof *layout);
}

int tm_layout_read(tm_layout *layout, const bmoe_model *model)
{
    memset(layout, 0, sizeof *layout);
    int32_t n_layer = bmoe_model_n_layer(model);
    size_t count = n_layer > 0 ? (size_t)n_layer : 1;
    layout->n_layer = n_layer;
    layout->expert_bytes = calloc(count, sizeof *layout->expert_bytes);
    layout->dense_bytes = calloc(count, sizeof *layout->dense_bytes);
    if (!layout->expert_bytes || !layout->dense_bytes) {
        tm_layout_free(layout);
        return -1;
    }
    for (int32_t il = 0; il < n_layer; il++)
        if (bmoe_model_layer_bytes(model, il, &layout->expert_bytes[il], &layout->dense_bytes[il]) != 0)
            return 0; /* known stays false */
    layout->known = true;
    return 0;
}

uint64_t tm_layout_token_demand(const tm_layout *layout, int32_t n_expert_used)
{
    uint64_t total = 0;
    if (!layout->known)
        return 0;
    for (int32_t il = 0; il < layout->n_layer; il++)
        total += layout->expert_bytes[il] * (uint64_t)n_expert_used;
    return total;
}

uint64_t tm_layout_layer_demand(const tm_layout *layout, int32_t n_expert_used)
{
    uint64_t widest = 0;
    if (!layout->known)
        return 0;
    for (int32_t il = 0; il < layout->n_layer; il++)
        if (layout->expert_bytes[il] * (uint64_t)n_expert_used > widest)
            widest = layout->expert_bytes[il] * (uint64_t)n_expert_used;
    return widest;
}
