/* The per-layer byte layout of a model, for the route trace's preamble
 * (expert_bytes and dense_bytes per layer) and the demand figures of the CSV
 * trailer: one expert of a layer as the streamer reads it (its gate, up and
 * down matrices) and the layer's resident tensors (everything else named
 * blk.<layer>.*, the experts' biases included).
 *
 * bmoe.h has no per-layer accessor, so this reads the tensor table
 * bmoe_describe_file prints and checks the result against what the library
 * does report: the largest layer's expert slice (bmoe_model_info) and, when
 * streaming, one token's routed bytes (bmoe_stream_state.cycle_bytes). A
 * table that does not parse or does not agree leaves the layout unknown
 * rather than guessed. */
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

/* Reads the layout of the model at path. Returns 0 (layout->known tells
 * whether it was established) or -1 when out of memory. */
int tm_layout_read(tm_layout *layout, const char *path, const bmoe_model *model);
/* Parses a bmoe_describe_file text (for tests); checks nothing. Returns 0
 * when every blk tensor row parsed, -1 otherwise. */
int tm_layout_parse(tm_layout *layout, const char *text, int32_t n_layer, int32_t n_expert);
void tm_layout_free(tm_layout *layout);

/* One token's routed expert bytes (k experts in every MoE layer) and the
 * widest layer's (k x its expert), from the layout; 0 when unknown. */
uint64_t tm_layout_token_demand(const tm_layout *layout, int32_t n_expert_used);
uint64_t tm_layout_layer_demand(const tm_layout *layout, int32_t n_expert_used);

#endif
