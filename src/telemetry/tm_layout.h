/* The per-layer byte layout of a model, for the route trace's preamble
 * (expert_bytes and dense_bytes per layer) and the demand figures of the CSV
 * trailer: one expert of a layer as the streamer reads it (its gate, up and
 * down matrices) and the layer's resident tensors (everything else named
 * blk.<layer>.*, the experts' biases included).
 * Read from the library (bmoe_model_layer_bytes). */
#ifndef BMOE_TM_LAYOUT_H
#define BMOE_TM_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "bmoe.h"

typedef struct tm_layout {
    bool known;
    int32_t n_layer;
    uint64_t *expert_bytes;   /* [n_layer] one expert's streamed bytes; 0 for a dense layer */
    uint64_t *dense_bytes;    /* [n_layer] */
} tm_layout;

/* Reads the model's layout. Returns 0 (layout->known tells whether it was
 * established) or -1 when out of memory. */
int tm_layout_read(tm_layout *layout, const bmoe_model *model);
void tm_layout_free(tm_layout *layout);

/* One token's routed expert bytes (k experts in every MoE layer) and the
 * widest layer's (k x its expert), from the layout; 0 when unknown. */
uint64_t tm_layout_token_demand(const tm_layout *layout, int32_t n_expert_used);
uint64_t tm_layout_layer_demand(const tm_layout *layout, int32_t n_expert_used);

#endif
