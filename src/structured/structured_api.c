/* The public face of structured output (include/bmoe.h): a model's token
 * pieces indexed once (bmoe_token_index), and a JSON constraint that a
 * generation asks which tokens may come next (bmoe_token_constraint). The
 * grammar, matcher and vocabulary walk are json_grammar.h's; this file
 * adds what a generation needs around them: the pieces from the model,
 * the end-of-generation tokens allowed once the value is complete, and a
 * scratch matcher to try one token without moving.
 * Owns: the index's pieces, end-of-generation flags and vocabulary; the
 * constraint's grammar and matchers. Borrows the model. */
#include <stdlib.h>
#include <string.h>

#include "bmoe.h"
#include "base/error.h"
#include "structured/json_grammar.h"

struct bmoe_token_index {
    int32_t n_vocab;
    char *bytes;          /* every token's piece, one after the other */
    size_t *offsets;      /* [n_vocab + 1] token t's piece is bytes[offsets[t], offsets[t + 1]) */
    uint8_t *end_of_generation; /* [n_vocab] */
    json_vocab *vocab;
};

struct bmoe_json_constraint {
    const bmoe_token_index *index;
    json_grammar *grammar;
    json_matcher *matcher; /* the value written so far */
    json_matcher *trial;   /* a copy that tries one token */
    bool ended;            /* an end-of-generation token was taken */
    bmoe_token_constraint rule;
};

static void *report(bmoe_error *err, bmoe_status fallback, bmoe_error *error)
{
    error_classify(err, fallback);
    if (error)
        *error = *err;
    return NULL;
}

void bmoe_token_index_free(bmoe_token_index *index)
{
    if (!index)
        return;
    json_vocab_free(index->vocab);
    free(index->bytes);
    free(index->offsets);
    free(index->end_of_generation);
    free(index);
}

/* Reads every token's piece (control tokens give none) into index. */
static int read_pieces(bmoe_token_index *index, const bmoe_model *model, bmoe_error *err)
{
    size_t capacity = (size_t)index->n_vocab * 8 + 64, used = 0;
    index->bytes = malloc(capacity);
    if (!index->bytes)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "structured output: out of memory for the pieces");
    for (int32_t t = 0; t < index->n_vocab; t++) {
        index->offsets[t] = used;
        int32_t length = bmoe_token_to_piece(model, t, false, NULL, 0, err);
        if (length < 0)
            return -1;
        if (used + (size_t)length > capacity) {
            size_t grown_capacity = 2 * capacity + (size_t)length;
            char *grown = realloc(index->bytes, grown_capacity);
            if (!grown)
                return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY,
                                        "structured output: out of memory for the pieces");
            index->bytes = grown;
            capacity = grown_capacity;
        }
        if (length > 0 && bmoe_token_to_piece(model, t, false, index->bytes + used, length, err) != length)
            return error_set(err, "structured output: token %d's piece changed length", t);
        used += (size_t)length;
    }
    index->offsets[index->n_vocab] = used;
    return 0;
}

bmoe_token_index *bmoe_token_index_create(const bmoe_model *model, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!model) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "structured output: no model");
        return report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    bmoe_token_index *index = calloc(1, sizeof *index);
    int32_t n_vocab = bmoe_model_n_vocab(model);
    if (index) {
        index->n_vocab = n_vocab;
        index->offsets = malloc(((size_t)n_vocab + 1) * sizeof *index->offsets);
        index->end_of_generation = calloc((size_t)n_vocab, 1);
    }
    const char **pieces = malloc((size_t)n_vocab * sizeof *pieces);
    size_t *lengths = malloc((size_t)n_vocab * sizeof *lengths);
    int32_t *ends = malloc((size_t)n_vocab * sizeof *ends);
    if (!index || !index->offsets || !index->end_of_generation || !pieces || !lengths || !ends) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "structured output: out of memory for %d tokens", n_vocab);
    } else if (read_pieces(index, model, &err) == 0) {
        int32_t n_ends = bmoe_token_end_of_generation_list(model, ends, n_vocab);
        for (int32_t i = 0; i < n_ends && i < n_vocab; i++)
            if (ends[i] >= 0 && ends[i] < n_vocab)
                index->end_of_generation[ends[i]] = 1;
        for (int32_t t = 0; t < n_vocab; t++) {
            pieces[t] = index->bytes + index->offsets[t];
            /* an end-of-generation token is allowed by the constraint itself, never as text */
            lengths[t] = index->end_of_generation[t] ? 0 : index->offsets[t + 1] - index->offsets[t];
        }
        index->vocab = json_vocab_create(pieces, lengths, n_vocab, &err);
    }
    free(pieces);
    free(lengths);
    free(ends);
    if (!index || !index->vocab) {
        bmoe_token_index_free(index);
        return report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    return index;
}

static const char *piece_of(const bmoe_token_index *index, int32_t token, size_t *length)
{
    *length = index->offsets[token + 1] - index->offsets[token];
    return index->bytes + index->offsets[token];
}

static int32_t constraint_allowed(void *user, uint8_t *allowed, int32_t n_vocab)
{
    bmoe_json_constraint *c = user;
    const bmoe_token_index *index = c->index;
    if (n_vocab != index->n_vocab || c->ended) {
        memset(allowed, 0, (size_t)(n_vocab > 0 ? n_vocab : 0));
        return 0;
    }
    int32_t count = 0;
    if (json_matcher_can_continue(c->matcher))
        count = json_matcher_allowed(c->matcher, index->vocab, allowed);
    else
        memset(allowed, 0, (size_t)n_vocab);
    if (json_matcher_complete(c->matcher))
        for (int32_t t = 0; t < n_vocab; t++)
            if (index->end_of_generation[t] && !allowed[t]) {
                allowed[t] = 1;
                count++;
            }
    return count;
}

static bool constraint_allows(void *user, int32_t token)
{
    bmoe_json_constraint *c = user;
    const bmoe_token_index *index = c->index;
    if (c->ended || token < 0 || token >= index->n_vocab)
        return false;
    if (index->end_of_generation[token])
        return json_matcher_complete(c->matcher);
    size_t length;
    const char *piece = piece_of(index, token, &length);
    return length > 0 && json_matcher_copy(c->trial, c->matcher) && json_matcher_feed(c->trial, piece, length);
}

static void constraint_accept(void *user, int32_t token)
{
    bmoe_json_constraint *c = user;
    const bmoe_token_index *index = c->index;
    if (token < 0 || token >= index->n_vocab || index->end_of_generation[token]) {
        c->ended = true;
        return;
    }
    size_t length;
    const char *piece = piece_of(index, token, &length);
    /* the generation takes only what allows or allowed said yes to */
    if (!json_matcher_feed(c->matcher, piece, length))
        c->ended = true;
}

void bmoe_json_constraint_free(bmoe_json_constraint *constraint)
{
    if (!constraint)
        return;
    json_matcher_free(constraint->matcher);
    json_matcher_free(constraint->trial);
    json_grammar_free(constraint->grammar);
    free(constraint);
}

bmoe_json_constraint *bmoe_json_constraint_create(const bmoe_token_index *index, const char *schema,
                                                  size_t schema_length, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!index) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "structured output: no token index");
        return report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    bmoe_json_constraint *c = calloc(1, sizeof *c);
    if (!c) {
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "structured output: out of memory");
        return report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
    }
    c->index = index;
    c->grammar = json_grammar_create(schema, schema ? schema_length : 0, &err);
    if (c->grammar) {
        c->matcher = json_matcher_create(c->grammar, &err);
        c->trial = c->matcher ? json_matcher_create(c->grammar, &err) : NULL;
    }
    if (!c->trial) {
        bmoe_json_constraint_free(c);
        return report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    c->rule = (bmoe_token_constraint){constraint_allowed, constraint_allows, constraint_accept, c};
    return c;
}

const bmoe_token_constraint *bmoe_json_constraint_rule(bmoe_json_constraint *constraint)
{
    return constraint ? &constraint->rule : NULL;
}

void bmoe_json_constraint_reset(bmoe_json_constraint *constraint)
{
    if (!constraint)
        return;
    json_matcher_reset(constraint->matcher);
    constraint->ended = false;
}

bool bmoe_json_constraint_complete(const bmoe_json_constraint *constraint)
{
    return constraint && json_matcher_complete(constraint->matcher);
}
