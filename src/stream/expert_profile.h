/* The expert profile file: each (layer, expert)'s uses as the cache policy
 * weighs them, with the identity of the model they were counted on, so that
 * the next run of the same model starts with its hottest experts cached
 * (expert_store_warm) instead of an empty cache.
 *
 * Layout, little-endian: "BMOEPRF1", u32 version (1), u32 n_layer, u32
 * n_expert, u32 0, u64 the model's identity, f32 counts[n_layer x n_expert]
 * (layer-major), then u64 the FNV-1a hash of every byte before it. The
 * identity is gguf_identity's.
 * Owns nothing past a call. */
#ifndef BMOE_STREAM_EXPERT_PROFILE_H
#define BMOE_STREAM_EXPERT_PROFILE_H

#include <stdint.h>

#include "../base/error.h"

/* Writes counts as path's new content (the old file, if any, replaced only
 * once the new one is whole). Returns 0 or -1 with err. */
int expert_profile_write(const char *path, uint64_t model_identity, int32_t n_layer, int32_t n_expert,
                         const float *counts, bmoe_error *err);

/* Reads path into counts[n_layer x n_expert]. A file that is no profile,
 * is cut short or damaged, was counted on another model (identity or
 * shape) or holds a count that is not a finite number >= 0 is refused with
 * one line saying which. Returns 0 or -1 with err; counts is unspecified
 * then. */
int expert_profile_read(const char *path, uint64_t model_identity, int32_t n_layer, int32_t n_expert, float *counts,
                        bmoe_error *err);

#endif
