/* N-gram drafting for speculative decoding: propose the tokens that followed
 * the most similar earlier spot of the token history. A pure function over
 * token ids; it needs no model and owns nothing. */
#ifndef BMOE_ENGINE_DRAFT_NGRAM_H
#define BMOE_ENGINE_DRAFT_NGRAM_H

#include <stdint.h>

/* The end of history (its last min_match..max_match tokens) is looked up at
 * every earlier end position: the one sharing the longest suffix with it
 * (compared up to max_match tokens; the most recent on ties; a match may
 * overlap the suffix, so a repeated token predicts itself) gives as drafts
 * the tokens that followed it, up to max_drafts and the end of history.
 * A best match shorter than min_match drafts nothing. Returns the number of
 * drafts written. O(n_history x max_match). */
int32_t draft_ngram(const int32_t *history, int32_t n_history, int32_t min_match, int32_t max_match,
                    int32_t *drafts, int32_t max_drafts);

#endif
