/* The matcher: the set of parse threads after the bytes fed so far, their
 * stored frames compacted into a pool after every byte, and the scratch the
 * vocabulary walk steps into. Owns its pools and scratch, not the grammar. */
#include <stdlib.h>
#include <string.h>

#include "structured/matcher_internal.h"

/* Copies the frames under each thread out of the context into pool, keeping frames shared by several threads
 * shared, so that threads that become equal compare equal. */
static uint32_t compact_link(json_matcher *matcher, const parse_context *context, uint32_t link, stored_frame *pool,
                             uint32_t *used)
{
    if (link == JSON_LINK_NONE)
        return link;
    json_link_memo *memo = link < JSON_MEMO_LINKS ? &matcher->memo[link] : NULL;
    if (memo && memo->stamp == matcher->memo_stamp)
        return memo->link;
    const stored_frame *stored = parse_stored(context, link);
    uint32_t below = compact_link(matcher, context, stored->below, pool, used);
    uint32_t index = (*used)++;
    pool[index] = *stored;
    pool[index].below = below;
    if (memo)
        *memo = (json_link_memo){matcher->memo_stamp, index};
    return index;
}

static uint32_t compact(json_matcher *matcher, const parse_context *context, thread *threads, uint32_t count,
                        stored_frame *pool)
{
    if (++matcher->memo_stamp == 0) {
        memset(matcher->memo, 0, JSON_MEMO_LINKS * sizeof *matcher->memo);
        matcher->memo_stamp = 1;
    }
    uint32_t used = 0;
    for (uint32_t i = 0; i < count; i++)
        threads[i].below = compact_link(matcher, context, threads[i].below, pool, &used);
    return used;
}

parse_context json_matcher_context(const json_matcher *matcher)
{
    return (parse_context){
        .grammar = matcher->grammar,
        .pool = matcher->pools[matcher->committed],
        .scratch = matcher->scratch,
        .scratch_used = 0,
        .scratch_capacity = JSON_SCRATCH_FRAMES,
    };
}

json_matcher *json_matcher_create(const json_grammar *grammar, bmoe_error *err)
{
    if (!grammar) {
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "json matcher: no grammar");
        return NULL;
    }
    json_matcher *matcher = calloc(1, sizeof *matcher);
    if (matcher) {
        matcher->grammar = grammar;
        for (int i = 0; i < 3; i++)
            matcher->pools[i] = malloc(JSON_POOL_LINKS * sizeof *matcher->pools[i]);
        matcher->scratch = malloc(JSON_SCRATCH_FRAMES * sizeof *matcher->scratch);
        matcher->walk_threads = malloc(JSON_WALK_THREADS * sizeof *matcher->walk_threads);
        matcher->walk_levels = malloc((JSON_TOKEN_BYTES_MAX + 1) * sizeof *matcher->walk_levels);
        matcher->memo = calloc(JSON_MEMO_LINKS, sizeof *matcher->memo);
    }
    if (!matcher || !matcher->pools[0] || !matcher->pools[1] || !matcher->pools[2] || !matcher->scratch ||
        !matcher->walk_threads || !matcher->walk_levels || !matcher->memo) {
        json_matcher_free(matcher);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "json matcher: out of memory");
        return NULL;
    }
    json_matcher_reset(matcher);
    return matcher;
}

void json_matcher_free(json_matcher *matcher)
{
    if (!matcher)
        return;
    for (int i = 0; i < 3; i++)
        free(matcher->pools[i]);
    free(matcher->scratch);
    free(matcher->walk_threads);
    free(matcher->walk_levels);
    free(matcher->memo);
    free(matcher);
}

void json_matcher_reset(json_matcher *matcher)
{
    matcher->threads[0] = parse_initial(matcher->grammar);
    matcher->thread_count = 1;
    matcher->committed = 0;
    matcher->pool_used = 0;
}

bool json_matcher_copy(json_matcher *to, const json_matcher *from)
{
    if (to->grammar != from->grammar)
        return false;
    if (to == from)
        return true;
    memcpy(to->pools[0], from->pools[from->committed], from->pool_used * sizeof *to->pools[0]);
    to->committed = 0;
    to->pool_used = from->pool_used;
    memcpy(to->threads, from->threads, from->thread_count * sizeof *to->threads);
    to->thread_count = from->thread_count;
    return true;
}

bool json_matcher_feed(json_matcher *matcher, const char *bytes, size_t length)
{
    thread current[JSON_THREADS_MAX], next[JSON_THREADS_MAX];
    uint32_t count = matcher->thread_count, used = matcher->pool_used;
    memcpy(current, matcher->threads, count * sizeof *current);
    uint32_t pool = matcher->committed;
    /* Each byte reads one pool and compacts into another; the committed one stays untouched until all fit. */
    for (size_t i = 0; i < length; i++) {
        parse_context context = json_matcher_context(matcher);
        context.pool = matcher->pools[pool];
        uint32_t next_count = parse_step(&context, current, count, (uint8_t)bytes[i], next);
        if (next_count == 0)
            return false;
        uint32_t target = 0;
        while (target == pool || target == matcher->committed)
            target++;
        used = compact(matcher, &context, next, next_count, matcher->pools[target]);
        pool = target;
        count = next_count;
        memcpy(current, next, count * sizeof *current);
    }
    matcher->committed = pool;
    matcher->pool_used = used;
    matcher->thread_count = count;
    memcpy(matcher->threads, current, count * sizeof *current);
    return true;
}

bool json_matcher_complete(const json_matcher *matcher)
{
    parse_context context = json_matcher_context(matcher);
    for (uint32_t i = 0; i < matcher->thread_count; i++)
        if (parse_complete(&context, &matcher->threads[i]))
            return true;
    return false;
}

bool json_matcher_can_continue(const json_matcher *matcher)
{
    thread next[JSON_THREADS_MAX];
    for (int byte = 0; byte < 256; byte++) {
        parse_context context = json_matcher_context(matcher);
        if (parse_step(&context, matcher->threads, matcher->thread_count, (uint8_t)byte, next) > 0)
            return true;
    }
    return false;
}
