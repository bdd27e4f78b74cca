/* The public face of structured output (include/bmoe.h): a model's token
 * pieces indexed once (bmoe_token_index), and a constraint that a
 * generation asks which tokens may come next (bmoe_token_constraint), its
 * value a JSON schema's or a GBNF grammar's. The grammars, matchers and
 * vocabulary walks are json_grammar.h's and gbnf.h's; this file
 * adds what a generation needs around them: the pieces from the model,
 * the end-of-generation tokens allowed once the value is complete, a
 * scratch matcher to try one token without moving, and the phases around
 * the value: free text until a trigger, a frame's fixed tokens before and
 * after it.
 * Owns: the index's pieces, end-of-generation flags and vocabulary; the
 * constraint's grammar, matchers, frame and trigger. Borrows the model. */
#include <stdlib.h>
#include <string.h>

#include "bmoe.h"
#include "base/error.h"
#include "structured/gbnf.h"
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
    /* the value's grammar and matchers: a JSON schema's, or a GBNF
     * grammar's (gbnf set); now: the value written so far; trial: a copy
     * that tries one token */
    json_grammar *json;
    json_matcher *json_now, *json_trial;
    gbnf_grammar *gbnf;
    gbnf_matcher *gbnf_now, *gbnf_trial;
    bool ended;            /* an end-of-generation token was taken */
    /* the frame around the value (bmoe_json_constraint_frame): before's
     * tokens come first, after's once the value is whole */
    int32_t *before, *after;
    int32_t n_before, n_after;
    int32_t taken_before, taken_after; /* how many of each were taken */
    /* bmoe_json_constraint_after: the text is free until its last tokens
     * are the trigger's (recent holds the last n_trigger taken) */
    int32_t *trigger, *recent;
    int32_t n_trigger, n_recent;
    bool held;             /* the trigger came (or there is none): the frame and value hold */
    bmoe_token_constraint rule;
};

static void *report(bmoe_error *err, bmoe_status fallback, bmoe_error *error)
{
    error_classify(err, fallback);
    if (error)
        *error = *err;
    return NULL;
}

/* The value's matcher, whichever grammar it follows. */
static bool value_complete(const bmoe_json_constraint *c)
{
    return c->gbnf ? gbnf_matcher_complete(c->gbnf_now) : json_matcher_complete(c->json_now);
}

static bool value_can_continue(const bmoe_json_constraint *c)
{
    return c->gbnf ? gbnf_matcher_can_continue(c->gbnf_now) : json_matcher_can_continue(c->json_now);
}

static int32_t value_allowed(const bmoe_json_constraint *c, uint8_t *allowed)
{
    return c->gbnf ? gbnf_matcher_allowed(c->gbnf_now, c->index->vocab, allowed)
                   : json_matcher_allowed(c->json_now, c->index->vocab, allowed);
}

static bool value_feed(bmoe_json_constraint *c, const char *bytes, size_t length)
{
    return c->gbnf ? gbnf_matcher_feed(c->gbnf_now, bytes, length) : json_matcher_feed(c->json_now, bytes, length);
}

/* Whether the value could take bytes now, without moving. */
static bool value_takes(bmoe_json_constraint *c, const char *bytes, size_t length)
{
    if (c->gbnf)
        return gbnf_matcher_copy(c->gbnf_trial, c->gbnf_now) && gbnf_matcher_feed(c->gbnf_trial, bytes, length);
    return json_matcher_copy(c->json_trial, c->json_now) && json_matcher_feed(c->json_trial, bytes, length);
}

static void value_reset(bmoe_json_constraint *c)
{
    if (c->gbnf)
        gbnf_matcher_reset(c->gbnf_now);
    else
        json_matcher_reset(c->json_now);
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

/* Sentinel of forced_token: the value's own tokens may come. */
#define NO_FORCED_TOKEN INT32_MIN

/* The one token the frame allows now: before's next, or after's next once
 * its first was taken; NO_FORCED_TOKEN in the value and at its end. */
static int32_t forced_token(const bmoe_json_constraint *c)
{
    if (c->taken_before < c->n_before)
        return c->before[c->taken_before];
    if (c->taken_after > 0 && c->taken_after < c->n_after)
        return c->after[c->taken_after];
    return NO_FORCED_TOKEN;
}

/* Whether the frame is done with after's tokens (or has none) and the value is whole: the end may come. */
static bool may_end(const bmoe_json_constraint *c)
{
    return c->taken_before == c->n_before && c->taken_after == c->n_after && value_complete(c);
}

static int32_t constraint_allowed(void *user, uint8_t *allowed, int32_t n_vocab)
{
    bmoe_json_constraint *c = user;
    const bmoe_token_index *index = c->index;
    if (n_vocab != index->n_vocab || c->ended) {
        memset(allowed, 0, (size_t)(n_vocab > 0 ? n_vocab : 0));
        return 0;
    }
    if (!c->held) {
        /* the reasoning may not end the text before the answer's hold begins */
        int32_t count = n_vocab;
        for (int32_t t = 0; t < n_vocab; t++) {
            allowed[t] = !index->end_of_generation[t];
            count -= index->end_of_generation[t];
        }
        return count;
    }
    int32_t forced = forced_token(c);
    if (forced != NO_FORCED_TOKEN) {
        memset(allowed, 0, (size_t)n_vocab);
        if (forced < 0 || forced >= n_vocab)
            return 0;
        allowed[forced] = 1;
        return 1;
    }
    int32_t count = 0;
    bool in_value = c->taken_after == 0;
    if (in_value && value_can_continue(c))
        count = value_allowed(c, allowed);
    else
        memset(allowed, 0, (size_t)n_vocab);
    if (in_value && c->n_after > 0 && value_complete(c)) {
        int32_t first = c->after[0];
        if (first >= 0 && first < n_vocab && !allowed[first]) {
            allowed[first] = 1;
            count++;
        }
    } else if (value_complete(c)) {
        for (int32_t t = 0; t < n_vocab; t++)
            if (index->end_of_generation[t] && !allowed[t]) {
                allowed[t] = 1;
                count++;
            }
    }
    return count;
}

static bool constraint_allows(void *user, int32_t token)
{
    bmoe_json_constraint *c = user;
    const bmoe_token_index *index = c->index;
    if (c->ended || token < 0 || token >= index->n_vocab)
        return false;
    if (!c->held)
        return !index->end_of_generation[token];
    int32_t forced = forced_token(c);
    if (forced != NO_FORCED_TOKEN)
        return token == forced;
    if (c->taken_after == c->n_after && c->n_after > 0)
        return index->end_of_generation[token];
    if (c->n_after > 0 && token == c->after[0] && value_complete(c))
        return true;
    if (index->end_of_generation[token])
        return may_end(c);
    size_t length;
    const char *piece = piece_of(index, token, &length);
    return length > 0 && value_takes(c, piece, length);
}

/* Free text before the trigger: the trigger's last token after the rest
 * of it starts the hold (an end of generation, which allowed refuses
 * here, ends the text). */
static void wait_for_trigger(bmoe_json_constraint *c, int32_t token)
{
    if (token < 0 || token >= c->index->n_vocab || c->index->end_of_generation[token]) {
        c->ended = true;
        return;
    }
    if (c->n_recent == c->n_trigger) {
        memmove(c->recent, c->recent + 1, (size_t)(c->n_trigger - 1) * sizeof *c->recent);
        c->n_recent--;
    }
    c->recent[c->n_recent++] = token;
    c->held = c->n_recent == c->n_trigger &&
              memcmp(c->recent, c->trigger, (size_t)c->n_trigger * sizeof *c->trigger) == 0;
}

static void constraint_accept(void *user, int32_t token)
{
    bmoe_json_constraint *c = user;
    const bmoe_token_index *index = c->index;
    if (!c->held) {
        wait_for_trigger(c, token);
        return;
    }
    if (forced_token(c) != NO_FORCED_TOKEN) {
        if (c->taken_before < c->n_before)
            c->taken_before++;
        else
            c->taken_after++;
        return;
    }
    if (token < 0 || token >= index->n_vocab || index->end_of_generation[token]) {
        c->ended = true;
        return;
    }
    size_t length;
    const char *piece = piece_of(index, token, &length);
    /* the generation takes only what allows or allowed said yes to: the
     * value's next bytes, or after's first token once it is whole */
    if (c->taken_after == 0 && value_feed(c, piece, length))
        return;
    if (c->n_after > 0 && c->taken_after == 0 && token == c->after[0] && value_complete(c))
        c->taken_after = 1;
    else
        c->ended = true;
}

void bmoe_json_constraint_free(bmoe_json_constraint *constraint)
{
    if (!constraint)
        return;
    json_matcher_free(constraint->json_now);
    json_matcher_free(constraint->json_trial);
    gbnf_matcher_free(constraint->gbnf_now);
    gbnf_matcher_free(constraint->gbnf_trial);
    free(constraint->before);
    free(constraint->after);
    free(constraint->trigger);
    free(constraint->recent);
    json_grammar_free(constraint->json);
    gbnf_grammar_free(constraint->gbnf);
    free(constraint);
}

/* A constraint on index whose value follows a JSON schema (gbnf false;
 * schema NULL: any object) or a GBNF grammar (text). */
static bmoe_json_constraint *constraint_create(const bmoe_token_index *index, bool gbnf, const char *text,
                                               size_t length, bmoe_error *error)
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
    bool made;
    if (gbnf) {
        c->gbnf = gbnf_grammar_create(text ? text : "", text ? length : 0, &err);
        c->gbnf_now = c->gbnf ? gbnf_matcher_create(c->gbnf, &err) : NULL;
        c->gbnf_trial = c->gbnf_now ? gbnf_matcher_create(c->gbnf, &err) : NULL;
        made = c->gbnf_trial != NULL;
    } else {
        c->json = json_grammar_create(text, text ? length : 0, &err);
        c->json_now = c->json ? json_matcher_create(c->json, &err) : NULL;
        c->json_trial = c->json_now ? json_matcher_create(c->json, &err) : NULL;
        made = c->json_trial != NULL;
    }
    if (!made) {
        bmoe_json_constraint_free(c);
        return report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    }
    c->rule = (bmoe_token_constraint){constraint_allowed, constraint_allows, constraint_accept, c};
    c->held = true;
    return c;
}

bmoe_json_constraint *bmoe_json_constraint_create(const bmoe_token_index *index, const char *schema,
                                                  size_t schema_length, bmoe_error *error)
{
    return constraint_create(index, false, schema, schema_length, error);
}

bmoe_json_constraint *bmoe_gbnf_constraint_create(const bmoe_token_index *index, const char *grammar,
                                                  size_t grammar_length, bmoe_error *error)
{
    return constraint_create(index, true, grammar, grammar_length, error);
}

/* Whether text compiles as a JSON schema (gbnf false) or a GBNF grammar: 0, or a negative bmoe_status. */
static int grammar_check(bool gbnf, const char *text, size_t length, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    bool made;
    if (gbnf) {
        gbnf_grammar *grammar = gbnf_grammar_create(text ? text : "", text ? length : 0, &err);
        made = grammar != NULL;
        gbnf_grammar_free(grammar);
    } else {
        json_grammar *grammar = json_grammar_create(text, text ? length : 0, &err);
        made = grammar != NULL;
        json_grammar_free(grammar);
    }
    if (made)
        return 0;
    report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    return err.status;
}

int bmoe_json_schema_check(const char *schema, size_t schema_length, bmoe_error *error)
{
    return grammar_check(false, schema, schema_length, error);
}

int bmoe_gbnf_check(const char *grammar, size_t grammar_length, bmoe_error *error)
{
    return grammar_check(true, grammar, grammar_length, error);
}

const bmoe_token_constraint *bmoe_json_constraint_rule(bmoe_json_constraint *constraint)
{
    return constraint ? &constraint->rule : NULL;
}

void bmoe_json_constraint_reset(bmoe_json_constraint *constraint)
{
    if (!constraint)
        return;
    value_reset(constraint);
    constraint->ended = false;
    constraint->taken_before = 0;
    constraint->taken_after = 0;
    constraint->n_recent = 0;
    constraint->held = constraint->n_trigger == 0;
}

/* A copy of tokens[0..n) (NULL when n is 0); false when out of memory. */
static bool copy_tokens(const int32_t *tokens, int32_t n, int32_t **out)
{
    *out = NULL;
    if (n == 0)
        return true;
    *out = malloc((size_t)n * sizeof **out);
    if (*out)
        memcpy(*out, tokens, (size_t)n * sizeof **out);
    return *out != NULL;
}

/* Whether tokens[0..n) are all the vocabulary's (else err says which is not). */
static bool in_vocabulary(const bmoe_json_constraint *c, const int32_t *tokens, int32_t n, bmoe_error *err)
{
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->index->n_vocab) {
            error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "structured output: token %d is not in the "
                             "vocabulary of %d", tokens[i], c->index->n_vocab);
            return false;
        }
    return true;
}

int bmoe_json_constraint_frame(bmoe_json_constraint *constraint, const int32_t *before, int32_t n_before,
                               const int32_t *after, int32_t n_after, bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!constraint || n_before < 0 || n_after < 0 || (n_before > 0 && !before) || (n_after > 0 && !after)) {
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "structured output: a frame needs its tokens");
        report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return BMOE_ERR_INVALID_ARGUMENT;
    }
    if (!in_vocabulary(constraint, before, n_before, &err) || !in_vocabulary(constraint, after, n_after, &err)) {
        report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return BMOE_ERR_INVALID_ARGUMENT;
    }
    int32_t *before_copy, *after_copy;
    if (!copy_tokens(before, n_before, &before_copy) || !copy_tokens(after, n_after, &after_copy)) {
        free(before_copy);
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "structured output: out of memory for a frame");
        report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return BMOE_ERR_OUT_OF_MEMORY;
    }
    free(constraint->before);
    free(constraint->after);
    constraint->before = before_copy;
    constraint->after = after_copy;
    constraint->n_before = n_before;
    constraint->n_after = n_after;
    bmoe_json_constraint_reset(constraint);
    return 0;
}

bool bmoe_json_constraint_complete(const bmoe_json_constraint *constraint)
{
    return constraint && value_complete(constraint);
}

int bmoe_json_constraint_after(bmoe_json_constraint *constraint, const int32_t *trigger, int32_t n_trigger,
                               bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    if (!constraint || n_trigger < 0 || (n_trigger > 0 && !trigger) ||
        !in_vocabulary(constraint, trigger, n_trigger, &err)) {
        if (!err.message[0])
            error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "structured output: a trigger needs its tokens");
        report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return BMOE_ERR_INVALID_ARGUMENT;
    }
    int32_t *copy, *recent = NULL;
    if (!copy_tokens(trigger, n_trigger, &copy) || (n_trigger > 0 && !copy_tokens(trigger, n_trigger, &recent))) {
        free(copy);
        error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "structured output: out of memory for a trigger");
        report(&err, BMOE_ERR_OUT_OF_MEMORY, error);
        return BMOE_ERR_OUT_OF_MEMORY;
    }
    free(constraint->trigger);
    free(constraint->recent);
    constraint->trigger = copy;
    constraint->recent = recent;
    constraint->n_trigger = n_trigger;
    bmoe_json_constraint_reset(constraint);
    return 0;
}

/* The tokens of text as plain text with its special tokens parsed (*tokens malloc'ed, NULL when there are none).
 * Their count, or a negative bmoe_status with err. */
static int32_t text_tokens(const bmoe_model *model, const char *text, int32_t **tokens, bmoe_error *err)
{
    *tokens = NULL;
    size_t length = strlen(text);
    int32_t count = length ? bmoe_tokenize(model, text, length, false, true, NULL, 0, err) : 0;
    if (count <= 0)
        return count;
    *tokens = malloc((size_t)count * sizeof **tokens);
    if (!*tokens)
        return error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "structured output: out of memory");
    if (bmoe_tokenize(model, text, length, false, true, *tokens, count, err) != count) {
        free(*tokens);
        *tokens = NULL;
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "structured output: '%s' tokenized twice differs",
                                text);
    }
    return count;
}

int bmoe_json_constraint_chat(bmoe_json_constraint *constraint, const bmoe_model *model,
                              enum bmoe_reasoning_format reasoning, enum bmoe_tool_format call_format,
                              bmoe_error *error)
{
    bmoe_error err;
    error_clear(&err);
    const char *marker = "", *spacing = "", *call_open = "", *call_close = "";
    if (!constraint || !model)
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "structured output: no constraint or no model");
    else if (reasoning != BMOE_REASONING_NONE && !bmoe_reasoning_answer_start(reasoning, &marker, &spacing))
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "structured output: reasoning format %d has no answer "
                         "marker", (int)reasoning);
    else if (call_format != BMOE_TOOL_FORMAT_NONE && !bmoe_tool_call_frame(call_format, &call_open, &call_close))
        error_set_status(&err, BMOE_ERR_INVALID_ARGUMENT, "structured output: %s tool calls are not one JSON "
                         "object, so none can be forced", bmoe_tool_format_name(call_format));
    if (err.status != 0) {
        report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
        return err.status;
    }
    size_t spacing_length = strlen(spacing), open_length = strlen(call_open);
    char *before_text = malloc(spacing_length + open_length + 1);
    int32_t *trigger = NULL, *before = NULL, *after = NULL, n_trigger = 0, n_before = 0, n_after = 0;
    int status = before_text ? 0 : error_set_status(&err, BMOE_ERR_OUT_OF_MEMORY, "structured output: out of memory");
    if (status == 0) {
        memcpy(before_text, spacing, spacing_length);
        memcpy(before_text + spacing_length, call_open, open_length + 1);
        n_trigger = text_tokens(model, marker, &trigger, &err);
        n_before = n_trigger >= 0 ? text_tokens(model, before_text, &before, &err) : 0;
        n_after = n_before >= 0 ? text_tokens(model, call_close, &after, &err) : 0;
        status = n_trigger < 0 ? n_trigger : n_before < 0 ? n_before : n_after < 0 ? n_after : 0;
    }
    if (status == 0)
        status = bmoe_json_constraint_frame(constraint, before, n_before, after, n_after, &err);
    if (status == 0)
        status = bmoe_json_constraint_after(constraint, trigger, n_trigger, &err);
    free(before_text);
    free(trigger);
    free(before);
    free(after);
    if (status != 0)
        report(&err, BMOE_ERR_INVALID_ARGUMENT, error);
    return status;
}
