/* The GBNF matcher: the byte step over a set of parse stacks (whose
 * closure expands each stack until its top is a terminal), the matcher that
 * keeps the stacks after the bytes fed in a pool compacted after every byte,
 * and the vocabulary mask: a depth-first walk of the vocabulary's trie from
 * the matcher's stacks, pruned at the first byte no stack takes, and in free
 * text the plain tables that mark the tokens a loop takes whole without
 * walking them (gbnf.h says when, and why that is exact). Owns the matcher's
 * pools, scratch and plain tables; not the grammar, not the vocabulary. */
#include <stdlib.h>
#include <string.h>

#include "structured/gbnf_internal.h"
#include "structured/vocab_internal.h"

/* The walk's scratch: the frames each trie level keeps, and one step's pushes on top. */
#define WALK_SCRATCH_FRAMES (JSON_TOKEN_BYTES_MAX * GBNF_STEP_FRAMES_MAX + GBNF_EXPANSIONS_MAX)
/* The set of expanded stacks: twice what a step may expand, so probes stay short. */
#define VISIT_SLOTS (2 * GBNF_EXPANSIONS_MAX)
/* Links a compaction remembers: the pool and the frames one byte's step keeps. */
#define MEMO_LINKS (GBNF_POOL_LINKS + GBNF_STEP_FRAMES_MAX)
#define KEPT (UINT32_MAX - 1)

typedef struct link_memo {
    uint32_t stamp; /* equal to the matcher's memo_stamp: link was copied in this compaction */
    uint32_t link;
} link_memo;

/* Frames a comparison of two stack sets renames at most (more: taken as different). */
#define RENAMED_FRAMES_MAX 32
/* Stack sets a walk keeps for its whole length: those over the matcher's own frames alone. */
#define CACHED_SETS_MAX 256
#define CACHED_THREADS_MAX 8192
/* Transition rows: one per walk level, then one per cached set. */
#define LEVEL_ROWS (JSON_TOKEN_BYTES_MAX + 1)
#define TRANSITION_ROWS (LEVEL_ROWS + CACHED_SETS_MAX)

/* One trie level of the vocabulary walk. */
typedef struct walk_level {
    const gbnf_thread *threads; /* the stacks after the node's bytes */
    uint32_t thread_count;
    gbnf_utf8 utf8;
    uint32_t node;         /* the trie node whose children are being tried */
    uint32_t next_child;
    uint32_t scratch_mark; /* scratch frames the stacks link to */
    uint32_t row;          /* the stacks' transitions: shared by the levels whose stacks are the same */
    uint32_t cached;       /* the cached set the stacks are, or GBNF_LINK_NONE */
    uint32_t home;         /* between characters: a level with the same stacks (itself or an ancestor); inside
                            * one: the level before the character */
} walk_level;

/* A stack set kept for the whole walk: its stacks link to the matcher's frames only, which do not change. */
typedef struct cached_set {
    uint32_t first, count; /* cached_threads[first, + count) */
    gbnf_utf8 utf8;
    uint32_t home; /* between characters: itself; inside one: the cached set the character began in */
} cached_set;

/* What stepping a byte from a set of stacks gave, remembered per set during one walk. */
enum transition {
    TRANSITION_UNKNOWN,
    TRANSITION_REFUSED,
    TRANSITION_SAME,   /* the same stacks again (text a loop takes): the next level reuses them, no step */
    TRANSITION_OTHER,  /* stacks that link to frames the step pushed: stepped each time */
    TRANSITION_HOME,   /* the last byte of a character that leaves the stacks as they were before it */
    TRANSITION_CACHED, /* and up: cached set (value - TRANSITION_CACHED) */
};

/* The plain tables (gbnf.h, "The mask in free text"). A key names, for a stack set between characters, the code
 * points whose step leaves the stacks as they were: the classes at the tops, the bytes literals at the tops take,
 * and the signatures (which of those classes hold the code point) that give the stacks back. */
#define PLAIN_NEVER 255          /* a token not made of plain code points, or a subtree holding one */
#define PLAIN_UNBOUNDED 254      /* room for any number of plain code points */
#define PLAIN_CHARACTERS_MAX 254 /* a token's plain code points, counted up to this ("this many or more") */
#define PLAIN_CHAIN_MAX 253      /* room counted step by step stays below PLAIN_CHARACTERS_MAX: exact */
/* A key gets a table once a walk without one visits this share of the trie (1/16); the walk stops there and the
 * mask starts again from the table. A table costs about half a full walk in free text to build (o200k: 5 ms
 * against 8 to 15); the small classes (digits, spaces), whose walks are short, never pay for one. */
#define PLAIN_BUILD_SHARE 16

typedef struct plain_key {
    uint32_t class_count;
    uint32_t classes[GBNF_PLAIN_CLASSES_MAX]; /* the classes at the tops, ascending */
    uint32_t bytes[8];                        /* one bit per byte a literal at a top takes */
    uint32_t signatures; /* bit s: a code point held by exactly the classes of bit set s is plain */
} plain_key;
_Static_assert(1u << GBNF_PLAIN_CLASSES_MAX <= 32, "a key's signatures are bits of one uint32_t");

typedef struct plain_table {
    plain_key key;
    bool built;
    uint64_t used;               /* the cache's clock at the last use: the least recent is rebuilt first */
    uint8_t *token_characters;   /* per token: its code points when all are plain, else PLAIN_NEVER */
    uint8_t *subtree_characters; /* per trie node: the most of token_characters over the tokens below it */
    uint8_t longest;             /* the most over the plain tokens */
} plain_table;

/* A trie node on the way down a table's build: what its bytes decode to. */
typedef struct plain_path {
    uint32_t node, end; /* the node and its subtree's end */
    gbnf_utf8 utf8;
    uint32_t characters; /* whole code points, all plain */
    uint8_t most;        /* the most of the token values seen below it so far */
} plain_path;

/* The tables of one vocabulary, told apart from another by address, fingerprint and sizes. */
typedef struct plain_cache {
    const json_vocab *vocab;
    uint64_t fingerprint;
    int32_t n_tokens;
    uint32_t node_count;
    uint64_t clock;
    plain_table tables[GBNF_PLAIN_TABLES_MAX];
} plain_cache;

struct gbnf_matcher {
    const gbnf_grammar *grammar;
    gbnf_thread threads[GBNF_STACKS_MAX]; /* the parse stacks after the bytes fed */
    uint32_t thread_count;
    gbnf_utf8 utf8;
    gbnf_stored *pools[3]; /* the committed one and two that the bytes of one feed alternate between */
    uint32_t committed, pool_used;
    gbnf_thread feed_threads[2][GBNF_STACKS_MAX];
    /* Scratch, used by feed and, through the const matcher, by the walk and can_continue: one thread at a
     * time. */
    gbnf_workspace *space;
    gbnf_thread *walk_threads;
    walk_level *walk_levels;
    uint16_t *transitions; /* TRANSITION_ROWS rows of 256, indexed by byte: enum transition */
    cached_set *cached_sets;
    gbnf_thread *cached_threads;
    link_memo *memo;
    uint32_t memo_stamp;
    plain_cache *plain; /* built on the mask's first calls with a vocabulary, kept while it is the same one */
};

/* One byte's step in progress. */
typedef struct step_state {
    gbnf_context *context;
    const gbnf_grammar *grammar;
    gbnf_thread *out;
    uint32_t count;
    uint32_t work_count, expansions;
    uint32_t first_push; /* the scratch index this step's pushes start at */
    uint32_t mark;       /* the link of the first of them */
    bool overflow;
} step_state;

/* ---- the workspace ---- */

void gbnf_workspace_release(gbnf_workspace *space)
{
    free(space->scratch);
    free(space->work);
    free(space->visits);
    free(space->remap);
    memset(space, 0, sizeof *space);
}

bool gbnf_workspace_init(gbnf_workspace *space, uint32_t scratch_capacity)
{
    space->scratch = malloc((size_t)scratch_capacity * sizeof *space->scratch);
    space->scratch_capacity = scratch_capacity;
    space->work = malloc(GBNF_EXPANSIONS_MAX * sizeof *space->work);
    space->visits = calloc(VISIT_SLOTS, sizeof *space->visits);
    space->visit_mask = VISIT_SLOTS - 1;
    space->visit_stamp = 0;
    space->remap = malloc(GBNF_EXPANSIONS_MAX * sizeof *space->remap);
    return space->scratch && space->work && space->visits && space->remap;
}

const gbnf_stored *gbnf_stored_at(const gbnf_context *context, uint32_t link)
{
    return link < GBNF_POOL_LINKS ? &context->pool[link] : &context->space->scratch[link - GBNF_POOL_LINKS];
}

/* ---- code points ---- */

/* Takes byte into the code point being read; [*low, *high] is then every code point it can still become (or
 * is, once complete). False for a byte no well-formed UTF-8 has here (Unicode's Table 3-7: no overlong form,
 * surrogate or value above U+10FFFF). */
static bool utf8_advance(gbnf_utf8 *state, uint8_t byte, uint32_t *low, uint32_t *high)
{
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (state->remaining == 0) {
        if (byte < 0x80) {
            *state = (gbnf_utf8){byte, 0, 1};
            *low = *high = byte;
            return true;
        }
        if (byte < 0xc0 || byte >= 0xf8)
            return false;
        uint8_t length = byte < 0xe0 ? 2 : byte < 0xf0 ? 3 : 4;
        *state = (gbnf_utf8){byte & (0x7fu >> length), (uint8_t)(length - 1), length};
    } else {
        if ((byte & 0xc0) != 0x80)
            return false;
        state->value = state->value << 6 | (byte & 0x3fu);
        state->remaining--;
    }
    uint32_t shift = 6u * state->remaining;
    uint32_t first = state->value << shift, last = first | ((1u << shift) - 1);
    if (first < least[state->length])
        first = least[state->length];
    if (last > GBNF_CODE_POINT_MAX)
        last = GBNF_CODE_POINT_MAX;
    if (first <= 0xdfff && last >= 0xd800) {
        if (first >= 0xd800 && last <= 0xdfff)
            return false;
        if (last <= 0xdfff)
            last = 0xd7ff; /* after 0xED: only the half below the surrogates */
        else if (first >= 0xd800)
            first = 0xe000;
    }
    *low = first;
    *high = last;
    return first <= last;
}

/* Whether the class holds a code point in [low, high]. */
static bool class_meets(const gbnf_grammar *grammar, uint32_t class_index, uint32_t low, uint32_t high)
{
    const gbnf_class *class = &grammar->classes[class_index];
    if (high < 128 && low == high)
        return class->ascii[low / 32] >> (low % 32) & 1;
    const gbnf_range *ranges = grammar->ranges + class->first;
    uint32_t lo = 0, hi = class->count;
    while (lo < hi) { /* the first range ending at or after low */
        uint32_t middle = lo + (hi - lo) / 2;
        if (ranges[middle].last < low)
            lo = middle + 1;
        else
            hi = middle;
    }
    return lo < class->count && ranges[lo].first <= high;
}

/* ---- the closure ---- */

/* A repetition's count after one more match: held at min once min is reached when max is unbounded, so
 * that the stacks of `x*` stay finitely many. */
static uint32_t next_count(const gbnf_element *element, uint32_t count)
{
    return element->max == GBNF_UNBOUNDED && count >= element->min ? element->min : count + 1;
}

static bool same_frames(const gbnf_context *context, uint32_t a, uint32_t b)
{
    while (a != b) {
        if (a == GBNF_LINK_NONE || b == GBNF_LINK_NONE)
            return false;
        const gbnf_stored *x = gbnf_stored_at(context, a), *y = gbnf_stored_at(context, b);
        if (x->element != y->element || x->count != y->count)
            return false;
        a = x->below;
        b = y->below;
    }
    return true;
}

/* Adds a stack whose top is a terminal (or the accepting one) to the step's result, unless it is there. */
static void emit(step_state *state, const gbnf_thread *thread)
{
    for (uint32_t i = 0; i < state->count; i++) {
        const gbnf_thread *other = &state->out[i];
        if (other->element == thread->element && other->count == thread->count && other->depth == thread->depth &&
            same_frames(state->context, other->below, thread->below))
            return;
    }
    if (state->count == GBNF_STACKS_MAX) {
        state->overflow = true;
        return;
    }
    state->out[state->count++] = *thread;
}

static void schedule(step_state *state, gbnf_thread thread)
{
    if (state->expansions == GBNF_EXPANSIONS_MAX) {
        state->overflow = true;
        return;
    }
    state->expansions++;
    state->context->space->work[state->work_count++] = thread;
}

/* Whether the stack was not yet expanded in this step (and records it). */
static bool first_visit(step_state *state, const gbnf_thread *thread)
{
    gbnf_workspace *space = state->context->space;
    uint32_t hash = thread->element * 0x9e3779b1u ^ thread->count * 0x85ebca77u ^ thread->below * 0xc2b2ae3du;
    hash ^= hash >> 15;
    /* Never full: a step expands at most GBNF_EXPANSIONS_MAX stacks, half the slots. */
    for (uint32_t slot = hash & space->visit_mask;; slot = (slot + 1) & space->visit_mask) {
        gbnf_visit *visit = &space->visits[slot];
        if (visit->stamp != space->visit_stamp) {
            *visit = (gbnf_visit){space->visit_stamp, thread->element, thread->count, thread->below};
            return true;
        }
        if (visit->element == thread->element && visit->count == thread->count && visit->below == thread->below)
            return false;
    }
}

/* Starts each alternative of rule from the stack's top, over a frame to come back to unless push is false (the
 * top's continuation is empty: the rule's end is the caller's end). */
static void enter(step_state *state, const gbnf_thread *thread, uint32_t rule, bool push)
{
    uint32_t below = thread->below, depth = thread->depth;
    if (push) {
        gbnf_context *context = state->context;
        if (depth >= GBNF_DEPTH_MAX)
            return; /* deeper than the matcher follows: not offered */
        if (context->scratch_used == context->space->scratch_capacity) {
            state->overflow = true;
            return;
        }
        uint32_t index = context->scratch_used++;
        context->space->scratch[index] = (gbnf_stored){thread->element, thread->count, thread->below};
        below = GBNF_POOL_LINKS + index;
        depth++;
    }
    const gbnf_rule *entered = &state->grammar->rules[rule];
    for (uint32_t a = entered->count; a-- > 0;)
        schedule(state, (gbnf_thread){state->grammar->alternatives[entered->first + a], 0, below, depth});
}

/* An alternative is matched: back to the frame below. */
static void finish(step_state *state, const gbnf_thread *thread)
{
    const gbnf_stored *frame = gbnf_stored_at(state->context, thread->below);
    const gbnf_element *from = &state->grammar->elements[frame->element];
    gbnf_thread next = {.below = frame->below, .depth = thread->depth - 1};
    if (from->kind == GBNF_RULE) {
        next.element = frame->element + 1;
        next.count = 0;
    } else {
        /* An iteration begun in this step took no byte. Its repetition's stack, already expanded, offered all
         * this one would (a body that may be empty has min 0), so dropping it loses nothing and stops a
         * repetition of an empty body from looping. */
        if (thread->below >= state->mark)
            return;
        next.element = frame->element;
        next.count = next_count(from, frame->count);
    }
    schedule(state, next);
}

/* Expands start until every stack's top is a terminal. It ends: a cycle that takes no byte would be left
 * recursion, which the grammar's creation refused, or an empty iteration, which finish drops; and
 * GBNF_EXPANSIONS_MAX bounds the work whatever the grammar. */
static void expand(step_state *state, gbnf_thread start)
{
    const gbnf_grammar *grammar = state->grammar;
    gbnf_thread *work = state->context->space->work;
    schedule(state, start);
    while (state->work_count > 0 && !state->overflow) {
        gbnf_thread thread = work[--state->work_count];
        const gbnf_element *element = &grammar->elements[thread.element];
        bool continuation_empty = element->kind != GBNF_END && grammar->elements[thread.element + 1].kind == GBNF_END;
        switch (element->kind) {
        case GBNF_BYTE:
        case GBNF_CLASS:
            emit(state, &thread);
            break;
        case GBNF_END:
            if (thread.below == GBNF_LINK_NONE) {
                gbnf_thread accepted = {grammar->accept, 0, GBNF_LINK_NONE, 1};
                emit(state, &accepted);
            } else if (first_visit(state, &thread)) {
                finish(state, &thread);
            }
            break;
        case GBNF_RULE:
            if (first_visit(state, &thread))
                enter(state, &thread, element->target, !continuation_empty);
            break;
        case GBNF_REPEAT:
            if (!first_visit(state, &thread))
                break;
            if (thread.count >= element->min)
                schedule(state, (gbnf_thread){thread.element + 1, 0, thread.below, thread.depth});
            if (thread.count < element->max)
                enter(state, &thread, element->target, thread.count + 1 < element->max || !continuation_empty);
            break;
        case GBNF_REPEAT_CLASS:
            if (!first_visit(state, &thread))
                break;
            if (thread.count < element->max)
                emit(state, &thread);
            if (thread.count >= element->min)
                schedule(state, (gbnf_thread){thread.element + 1, 0, thread.below, thread.depth});
            break;
        }
    }
}

static void begin_step(step_state *state, gbnf_context *context, gbnf_thread *out)
{
    gbnf_workspace *space = context->space;
    if (++space->visit_stamp == 0) {
        memset(space->visits, 0, VISIT_SLOTS * sizeof *space->visits);
        space->visit_stamp = 1;
    }
    *state = (step_state){
        .context = context,
        .grammar = context->grammar,
        .out = out,
        .first_push = context->scratch_used,
        .mark = GBNF_POOL_LINKS + context->scratch_used,
    };
}

/* Keeps, packed, only the frames this step pushed that a resulting stack links to; false (nothing kept) when
 * they are more than GBNF_STEP_FRAMES_MAX. */
static bool keep_pushed(step_state *state)
{
    gbnf_context *context = state->context;
    gbnf_stored *scratch = context->space->scratch;
    uint32_t *remap = context->space->remap, first = state->first_push, end = context->scratch_used;
    for (uint32_t i = first; i < end; i++)
        remap[i - first] = GBNF_LINK_NONE;
    for (uint32_t t = 0; t < state->count; t++) {
        uint32_t link = state->out[t].below;
        while (link != GBNF_LINK_NONE && link >= state->mark && remap[link - state->mark] == GBNF_LINK_NONE) {
            remap[link - state->mark] = KEPT;
            link = scratch[link - GBNF_POOL_LINKS].below;
        }
    }
    uint32_t kept = first;
    for (uint32_t i = first; i < end; i++) {
        if (remap[i - first] == GBNF_LINK_NONE)
            continue;
        gbnf_stored frame = scratch[i];
        if (frame.below != GBNF_LINK_NONE && frame.below >= state->mark)
            frame.below = GBNF_POOL_LINKS + remap[frame.below - state->mark]; /* pushed earlier: already moved */
        remap[i - first] = kept;
        scratch[kept++] = frame;
    }
    if (kept - first > GBNF_STEP_FRAMES_MAX) {
        context->scratch_used = first;
        return false;
    }
    for (uint32_t t = 0; t < state->count; t++) {
        uint32_t *below = &state->out[t].below;
        if (*below != GBNF_LINK_NONE && *below >= state->mark)
            *below = GBNF_POOL_LINKS + remap[*below - state->mark];
    }
    context->scratch_used = kept;
    return true;
}

/* A class (or repeated class) at the stack's top has taken a whole code point. */
static void take_character(step_state *state, const gbnf_thread *thread, const gbnf_element *element)
{
    if (element->kind == GBNF_CLASS)
        expand(state, (gbnf_thread){thread->element + 1, 0, thread->below, thread->depth});
    else
        expand(state, (gbnf_thread){thread->element, next_count(element, thread->count), thread->below,
                                    thread->depth});
}

/* How many stacks the step leaves, its pushes kept; 0 (and nothing kept) when it is refused or over a bound. */
static uint32_t end_step(step_state *state)
{
    if (state->overflow || state->count == 0 || !keep_pushed(state)) {
        state->context->scratch_used = state->first_push;
        return 0;
    }
    return state->count;
}

uint32_t gbnf_step(gbnf_context *context, const gbnf_thread *threads, uint32_t count, gbnf_utf8 utf8,
                   uint8_t byte, gbnf_thread *out, gbnf_utf8 *next)
{
    uint32_t low, high;
    if (!utf8_advance(&utf8, byte, &low, &high))
        return 0;
    bool character_done = utf8.remaining == 0;
    step_state state;
    begin_step(&state, context, out);
    const gbnf_grammar *grammar = context->grammar;
    for (uint32_t i = 0; i < count && !state.overflow; i++) {
        const gbnf_thread *thread = &threads[i];
        const gbnf_element *element = &grammar->elements[thread->element];
        switch (element->kind) {
        case GBNF_BYTE:
            if (element->byte == byte)
                expand(&state, (gbnf_thread){thread->element + 1, 0, thread->below, thread->depth});
            break;
        case GBNF_CLASS:
        case GBNF_REPEAT_CLASS:
            if (!class_meets(grammar, element->target, low, high))
                break;
            if (!character_done)
                emit(&state, thread); /* the same class takes the rest of the character */
            else
                take_character(&state, thread, element);
            break;
        default: /* the accepting stack takes nothing more */
            break;
        }
    }
    uint32_t stepped = end_step(&state);
    if (stepped > 0)
        *next = utf8;
    return stepped;
}

bool gbnf_grammar_start(gbnf_grammar *grammar, bool *out_of_memory)
{
    gbnf_workspace space = {0};
    *out_of_memory = !gbnf_workspace_init(&space, GBNF_EXPANSIONS_MAX);
    bool ok = !*out_of_memory;
    if (ok) {
        gbnf_context context = {.grammar = grammar, .pool = NULL, .space = &space, .scratch_used = 0};
        step_state state;
        begin_step(&state, &context, grammar->initial_threads);
        expand(&state, (gbnf_thread){grammar->start, 0, GBNF_LINK_NONE, 1});
        ok = !state.overflow && state.count > 0 && keep_pushed(&state);
        /* The kept frames become the pool's first links. */
        for (uint32_t i = 0; ok && i < context.scratch_used; i++) {
            gbnf_stored frame = space.scratch[i];
            if (frame.below != GBNF_LINK_NONE)
                frame.below -= GBNF_POOL_LINKS;
            grammar->initial_frames[i] = frame;
        }
        for (uint32_t t = 0; ok && t < state.count; t++)
            if (grammar->initial_threads[t].below != GBNF_LINK_NONE)
                grammar->initial_threads[t].below -= GBNF_POOL_LINKS;
        grammar->initial_frame_count = ok ? context.scratch_used : 0;
        grammar->initial_thread_count = ok ? state.count : 0;
    }
    gbnf_workspace_release(&space);
    return ok;
}

/* ---- the matcher ---- */

/* Copies the frames under a stack out of the context into pool (those already copied in this compaction are
 * shared, not copied again); returns the new link. */
static uint32_t compact_link(gbnf_matcher *matcher, const gbnf_context *context, uint32_t link, gbnf_stored *pool,
                             uint32_t *used)
{
    uint32_t chain[GBNF_DEPTH_MAX], length = 0;
    while (link != GBNF_LINK_NONE && matcher->memo[link].stamp != matcher->memo_stamp) {
        chain[length++] = link;
        link = gbnf_stored_at(context, link)->below;
    }
    uint32_t mapped = link == GBNF_LINK_NONE ? GBNF_LINK_NONE : matcher->memo[link].link;
    while (length > 0) {
        uint32_t original = chain[--length];
        gbnf_stored frame = *gbnf_stored_at(context, original);
        frame.below = mapped;
        mapped = (*used)++;
        pool[mapped] = frame;
        matcher->memo[original] = (link_memo){matcher->memo_stamp, mapped};
    }
    return mapped;
}

static uint32_t compact(gbnf_matcher *matcher, const gbnf_context *context, gbnf_thread *threads, uint32_t count,
                        gbnf_stored *pool)
{
    if (++matcher->memo_stamp == 0) {
        memset(matcher->memo, 0, MEMO_LINKS * sizeof *matcher->memo);
        matcher->memo_stamp = 1;
    }
    uint32_t used = 0;
    for (uint32_t i = 0; i < count; i++)
        threads[i].below = compact_link(matcher, context, threads[i].below, pool, &used);
    return used;
}

/* Frees the tables' arrays: none is built after. */
static void plain_cache_drop(plain_cache *cache)
{
    for (int i = 0; i < GBNF_PLAIN_TABLES_MAX; i++) {
        free(cache->tables[i].token_characters);
        free(cache->tables[i].subtree_characters);
        cache->tables[i] = (plain_table){0};
    }
}

gbnf_matcher *gbnf_matcher_create(const gbnf_grammar *grammar, bmoe_error *err)
{
    if (!grammar) {
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "gbnf matcher: no grammar");
        return NULL;
    }
    gbnf_matcher *matcher = calloc(1, sizeof *matcher);
    bool ok = matcher != NULL;
    if (ok) {
        matcher->grammar = grammar;
        for (int i = 0; i < 3; i++)
            matcher->pools[i] = malloc(GBNF_POOL_LINKS * sizeof *matcher->pools[i]);
        matcher->space = calloc(1, sizeof *matcher->space);
        matcher->walk_threads =
            malloc((size_t)(JSON_TOKEN_BYTES_MAX + 1) * GBNF_STACKS_MAX * sizeof *matcher->walk_threads);
        matcher->walk_levels = malloc((JSON_TOKEN_BYTES_MAX + 1) * sizeof *matcher->walk_levels);
        matcher->transitions = malloc(TRANSITION_ROWS * 256 * sizeof *matcher->transitions);
        matcher->cached_sets = malloc(CACHED_SETS_MAX * sizeof *matcher->cached_sets);
        matcher->cached_threads = malloc(CACHED_THREADS_MAX * sizeof *matcher->cached_threads);
        matcher->memo = calloc(MEMO_LINKS, sizeof *matcher->memo);
        matcher->plain = calloc(1, sizeof *matcher->plain);
        ok = matcher->pools[0] && matcher->pools[1] && matcher->pools[2] && matcher->space && matcher->walk_threads &&
             matcher->walk_levels && matcher->transitions && matcher->cached_sets && matcher->cached_threads &&
             matcher->memo && matcher->plain &&
             gbnf_workspace_init(matcher->space, WALK_SCRATCH_FRAMES);
    }
    if (!ok) {
        gbnf_matcher_free(matcher);
        error_set_status(err, BMOE_ERR_OUT_OF_MEMORY, "gbnf matcher: out of memory");
        return NULL;
    }
    gbnf_matcher_reset(matcher);
    return matcher;
}

void gbnf_matcher_free(gbnf_matcher *matcher)
{
    if (!matcher)
        return;
    for (int i = 0; i < 3; i++)
        free(matcher->pools[i]);
    if (matcher->space)
        gbnf_workspace_release(matcher->space);
    free(matcher->space);
    free(matcher->walk_threads);
    free(matcher->walk_levels);
    free(matcher->transitions);
    free(matcher->cached_sets);
    free(matcher->cached_threads);
    free(matcher->memo);
    if (matcher->plain)
        plain_cache_drop(matcher->plain);
    free(matcher->plain);
    free(matcher);
}

void gbnf_matcher_reset(gbnf_matcher *matcher)
{
    const gbnf_grammar *grammar = matcher->grammar;
    memcpy(matcher->threads, grammar->initial_threads, grammar->initial_thread_count * sizeof *matcher->threads);
    matcher->thread_count = grammar->initial_thread_count;
    memcpy(matcher->pools[0], grammar->initial_frames, grammar->initial_frame_count * sizeof *matcher->pools[0]);
    matcher->committed = 0;
    matcher->pool_used = grammar->initial_frame_count;
    matcher->utf8 = (gbnf_utf8){0, 0, 0};
}

bool gbnf_matcher_copy(gbnf_matcher *to, const gbnf_matcher *from)
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
    to->utf8 = from->utf8;
    return true;
}

bool gbnf_matcher_feed(gbnf_matcher *matcher, const char *bytes, size_t length)
{
    const gbnf_thread *current = matcher->threads;
    uint32_t count = matcher->thread_count, used = matcher->pool_used, pool = matcher->committed;
    gbnf_utf8 utf8 = matcher->utf8;
    /* Each byte reads one pool and compacts into another; the committed one stays untouched until all fit. */
    for (size_t i = 0; i < length; i++) {
        gbnf_thread *next = matcher->feed_threads[i & 1];
        gbnf_context context = {matcher->grammar, matcher->pools[pool], matcher->space, 0};
        gbnf_utf8 next_utf8;
        uint32_t next_count = gbnf_step(&context, current, count, utf8, (uint8_t)bytes[i], next, &next_utf8);
        if (next_count == 0)
            return false;
        uint32_t target = 0;
        while (target == pool || target == matcher->committed)
            target++;
        used = compact(matcher, &context, next, next_count, matcher->pools[target]);
        pool = target;
        current = next;
        count = next_count;
        utf8 = next_utf8;
    }
    if (current != matcher->threads)
        memcpy(matcher->threads, current, count * sizeof *current);
    matcher->thread_count = count;
    matcher->committed = pool;
    matcher->pool_used = used;
    matcher->utf8 = utf8;
    return true;
}

bool gbnf_matcher_complete(const gbnf_matcher *matcher)
{
    for (uint32_t i = 0; i < matcher->thread_count; i++)
        if (matcher->threads[i].element == matcher->grammar->accept)
            return true;
    return false;
}

bool gbnf_matcher_can_continue(const gbnf_matcher *matcher)
{
    for (int byte = 0; byte < 256; byte++) {
        gbnf_context context = {matcher->grammar, matcher->pools[matcher->committed], matcher->space, 0};
        gbnf_utf8 next;
        if (gbnf_step(&context, matcher->threads, matcher->thread_count, matcher->utf8, (uint8_t)byte,
                      matcher->walk_threads, &next) > 0)
            return true;
    }
    return false;
}

static bool utf8_equivalent(gbnf_utf8 a, gbnf_utf8 b)
{
    return (a.remaining == 0 && b.remaining == 0) ||
           (a.value == b.value && a.remaining == b.remaining && a.length == b.length);
}

/* Whether stacks a, just stepped (its frames from link new_links on are the step's), are stacks b with those
 * frames renamed one to one: the same tops in the same order over the same frames, shared alike. Stepping
 * either then does the same, bounds included. */
static bool same_stacks(const gbnf_context *context, const gbnf_thread *a, const gbnf_thread *b, uint32_t count,
                        uint32_t new_links)
{
    uint32_t from[RENAMED_FRAMES_MAX], to[RENAMED_FRAMES_MAX], renamed = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (a[i].element != b[i].element || a[i].count != b[i].count || a[i].depth != b[i].depth)
            return false;
        uint32_t x = a[i].below, y = b[i].below;
        while (x != y) {
            if (x == GBNF_LINK_NONE || y == GBNF_LINK_NONE || x < new_links)
                return false;
            uint32_t pair = 0;
            while (pair < renamed && from[pair] != x)
                pair++;
            if (pair < renamed) {
                if (to[pair] != y)
                    return false;
                break; /* compared below when it was renamed */
            }
            for (pair = 0; pair < renamed; pair++)
                if (to[pair] == y)
                    return false; /* two frames of a where b shares one */
            const gbnf_stored *frame_a = gbnf_stored_at(context, x), *frame_b = gbnf_stored_at(context, y);
            if (renamed == RENAMED_FRAMES_MAX || frame_a->element != frame_b->element ||
                frame_a->count != frame_b->count)
                return false;
            from[renamed] = x;
            to[renamed++] = y;
            x = frame_a->below;
            y = frame_b->below;
        }
    }
    /* A frame renamed to one that a also holds itself would be two frames of a where b shares one. */
    for (uint32_t i = 0; renamed > 0 && i < count; i++) {
        for (uint32_t link = a[i].below; link != GBNF_LINK_NONE; link = gbnf_stored_at(context, link)->below) {
            for (uint32_t pair = 0; link < new_links && pair < renamed; pair++)
                if (to[pair] == link)
                    return false;
        }
    }
    return true;
}

/* The walk's view of a cached set, over the given scratch. */
static walk_level cached_level(const gbnf_matcher *matcher, uint32_t set, uint32_t scratch_mark)
{
    const cached_set *cached = &matcher->cached_sets[set];
    return (walk_level){
        .threads = matcher->cached_threads + cached->first,
        .thread_count = cached->count,
        .utf8 = cached->utf8,
        .scratch_mark = scratch_mark,
        .row = LEVEL_ROWS + set,
        .cached = set,
    };
}

/* Steps byte from level (a trie node's child at depth + 1) and says what the next level is; false when the byte
 * is refused. Records in *known what the step gave, for the levels with the same stacks. */
static bool step_level(const gbnf_matcher *matcher, gbnf_context *context, uint32_t *cached_count,
                       uint32_t *cached_used, int depth, uint8_t byte, uint16_t *known, walk_level *next)
{
    const walk_level *level = &matcher->walk_levels[depth];
    context->scratch_used = level->scratch_mark;
    gbnf_thread *stepped = matcher->walk_threads + (size_t)(depth + 1) * GBNF_STACKS_MAX;
    gbnf_utf8 utf8;
    uint32_t count = gbnf_step(context, level->threads, level->thread_count, level->utf8, byte, stepped, &utf8);
    if (count == 0) {
        *known = TRANSITION_REFUSED;
        return false;
    }
    uint32_t new_links = GBNF_POOL_LINKS + level->scratch_mark;
    bool first = *known == TRANSITION_UNKNOWN, stable = level->cached != GBNF_LINK_NONE;
    if (first && count == level->thread_count && utf8_equivalent(utf8, level->utf8) &&
        same_stacks(context, stepped, level->threads, count, new_links)) {
        *known = TRANSITION_SAME;
        *next = *level; /* the step's frames are dropped */
        return true;
    }
    if (utf8.remaining == 0 && level->utf8.remaining > 0) {
        /* A character ends: the stacks may be those it began in. */
        const walk_level *home = &matcher->walk_levels[level->home];
        if (stable) {
            uint32_t set = matcher->cached_sets[level->cached].home;
            walk_level home_level = cached_level(matcher, set, level->scratch_mark);
            if (count == home_level.thread_count &&
                same_stacks(context, stepped, home_level.threads, count, new_links)) {
                *known = TRANSITION_HOME;
                *next = home_level;
                next->home = (uint32_t)depth + 1;
                return true;
            }
        } else if (count == home->thread_count && same_stacks(context, stepped, home->threads, count, new_links)) {
            *next = *home;
            next->scratch_mark = level->scratch_mark;
            return true;
        }
    }
    uint32_t home = utf8.remaining == 0 ? (uint32_t)depth + 1 : level->utf8.remaining == 0 ? (uint32_t)depth
                                                                                            : level->home;
    if (first && stable && context->scratch_used == level->scratch_mark && *cached_count < CACHED_SETS_MAX &&
        *cached_used + count <= CACHED_THREADS_MAX) {
        /* Stacks over the matcher's frames alone (the step kept none of its own): kept for the whole walk. */
        uint32_t set = (*cached_count)++;
        memcpy(matcher->cached_threads + *cached_used, stepped, count * sizeof *stepped);
        const cached_set *from = &matcher->cached_sets[level->cached];
        matcher->cached_sets[set] = (cached_set){*cached_used, count, utf8,
                                                 utf8.remaining == 0        ? set
                                                 : level->utf8.remaining == 0 ? level->cached
                                                                              : from->home};
        *cached_used += count;
        memset(matcher->transitions + (size_t)(LEVEL_ROWS + set) * 256, 0, 256 * sizeof *matcher->transitions);
        *known = (uint16_t)(TRANSITION_CACHED + set);
        *next = cached_level(matcher, set, level->scratch_mark);
        next->home = home;
        return true;
    }
    if (first)
        *known = TRANSITION_OTHER;
    *next = (walk_level){stepped, count, utf8, 0, 0, context->scratch_used, (uint32_t)depth + 1, GBNF_LINK_NONE,
                         home};
    memset(matcher->transitions + (size_t)(depth + 1) * 256, 0, 256 * sizeof *matcher->transitions);
    return true;
}

/* ---- the mask in free text: plain tables ---- */

static bool key_has_byte(const plain_key *key, uint8_t byte)
{
    return key->bytes[byte / 32] >> (byte % 32) & 1;
}

/* The class's place in the key, or GBNF_PLAIN_CLASSES_MAX when it is not in it. */
static uint32_t key_class(const plain_key *key, uint32_t class_index)
{
    for (uint32_t i = 0; i < key->class_count; i++)
        if (key->classes[i] == class_index)
            return i;
    return GBNF_PLAIN_CLASSES_MAX;
}

static bool same_key(const plain_key *a, const plain_key *b)
{
    return a->class_count == b->class_count && a->signatures == b->signatures &&
           memcmp(a->classes, b->classes, sizeof a->classes) == 0 && memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

static bool is_class(const gbnf_element *element)
{
    return element->kind == GBNF_CLASS || element->kind == GBNF_REPEAT_CLASS;
}

/* The classes and the literal bytes at the stacks' tops (signatures left 0); false with no class there, or more
 * than GBNF_PLAIN_CLASSES_MAX. */
static bool plain_key_of(const gbnf_grammar *grammar, const gbnf_thread *threads, uint32_t count, plain_key *key)
{
    *key = (plain_key){0};
    for (uint32_t i = 0; i < count; i++) {
        const gbnf_element *element = &grammar->elements[threads[i].element];
        if (element->kind == GBNF_BYTE) {
            key->bytes[element->byte / 32] |= 1u << (element->byte % 32);
        } else if (is_class(element) && key_class(key, element->target) == GBNF_PLAIN_CLASSES_MAX) {
            if (key->class_count == GBNF_PLAIN_CLASSES_MAX)
                return false;
            uint32_t at = key->class_count++;
            for (; at > 0 && key->classes[at - 1] > element->target; at--)
                key->classes[at] = key->classes[at - 1];
            key->classes[at] = element->target;
        }
    }
    return key->class_count > 0;
}

/* Whether every top is a literal byte or a class of the key: a plain code point then steps the stacks as its
 * signature says. */
static bool stacks_within(const gbnf_grammar *grammar, const gbnf_thread *threads, uint32_t count,
                          const plain_key *key)
{
    for (uint32_t i = 0; i < count; i++) {
        const gbnf_element *element = &grammar->elements[threads[i].element];
        if (element->kind == GBNF_BYTE ? !key_has_byte(key, element->byte)
                                       : is_class(element) && key_class(key, element->target) == GBNF_PLAIN_CLASSES_MAX)
            return false;
    }
    return true;
}

/* Whether a whole code point is plain under the key (its lead byte, checked apart, is no literal's). */
static bool code_point_plain(const gbnf_grammar *grammar, const plain_key *key, uint32_t code_point)
{
    uint32_t held = 0;
    for (uint32_t i = 0; i < key->class_count; i++)
        held |= (uint32_t)class_meets(grammar, key->classes[i], code_point, code_point) << i;
    return key->signatures >> held & 1;
}

/* What gbnf_step does at the last byte of a code point whose lead byte no literal at the tops takes and which
 * the key's classes of bit set held hold, and no other class at the tops: each top of one of those classes takes
 * it, in order. (The bytes before the last only keep the class tops that may still take the code point, unchanged,
 * and drop the rest: gbnf.h.) */
static uint32_t step_signature(gbnf_context *context, const gbnf_thread *threads, uint32_t count,
                               const plain_key *key, uint32_t held, gbnf_thread *out)
{
    step_state state;
    begin_step(&state, context, out);
    const gbnf_grammar *grammar = context->grammar;
    for (uint32_t i = 0; i < count && !state.overflow; i++) {
        const gbnf_element *element = &grammar->elements[threads[i].element];
        if (is_class(element) && held >> key_class(key, element->target) & 1)
            take_character(&state, &threads[i], element);
    }
    return end_step(&state);
}

/* With several classes at the tops: the signatures whose step gives back the very stacks. */
static uint32_t loop_signatures(const gbnf_matcher *matcher, gbnf_context *context, const plain_key *key)
{
    uint32_t signatures = 0;
    for (uint32_t held = 1; held < 1u << key->class_count; held++) {
        context->scratch_used = 0;
        uint32_t count =
            step_signature(context, matcher->threads, matcher->thread_count, key, held, matcher->walk_threads);
        if (count == matcher->thread_count &&
            same_stacks(context, matcher->walk_threads, matcher->threads, count, GBNF_POOL_LINKS))
            signatures |= 1u << held;
    }
    return signatures;
}

/* With one class at the tops: how many of its plain code points in a row the stacks take, stepped one after the
 * other up to longest; PLAIN_UNBOUNDED once a step gives back the stacks it started from. */
static uint8_t chain_room(const gbnf_matcher *matcher, gbnf_context *context, const plain_key *key, uint8_t longest)
{
    const gbnf_thread *from = matcher->threads;
    uint32_t count = matcher->thread_count, limit = longest < PLAIN_CHAIN_MAX ? longest : PLAIN_CHAIN_MAX;
    context->scratch_used = 0;
    for (uint32_t room = 0; room < limit; room++) {
        if (room > 0 && !stacks_within(matcher->grammar, from, count, key))
            return (uint8_t)room; /* a literal or another class at a top: the next code point may go elsewhere */
        uint32_t mark = context->scratch_used;
        gbnf_thread *out = matcher->walk_threads + (size_t)(room & 1) * GBNF_STACKS_MAX;
        uint32_t next = step_signature(context, from, count, key, 1, out);
        if (next == 0)
            return (uint8_t)room;
        if (next == count && same_stacks(context, out, from, count, GBNF_POOL_LINKS + mark))
            return PLAIN_UNBOUNDED;
        from = out;
        count = next;
    }
    return (uint8_t)limit;
}

/* Fills the table for its key: each trie node's bytes decoded as the matcher reads them, a subtree cut off at the
 * first byte that is invalid, starts a code point with a literal's byte, or ends one that is not plain. A node's
 * subtree value is folded into its parent's as the walk down the trie leaves it. */
static void plain_table_build(plain_table *table, const gbnf_grammar *grammar, const json_vocab *vocab)
{
    const token_trie *trie = json_vocab_trie(vocab);
    const trie_node *nodes = trie->nodes;
    const plain_key *key = &table->key;
    uint8_t *subtree = table->subtree_characters;
    memset(table->token_characters, PLAIN_NEVER, (size_t)json_vocab_n_tokens(vocab));
    bool ascii_plain[128]; /* most nodes end an ASCII character: one lookup */
    for (uint32_t c = 0; c < 128; c++)
        ascii_plain[c] = !key_has_byte(key, (uint8_t)c) && code_point_plain(grammar, key, c);
    plain_path path[JSON_TOKEN_BYTES_MAX + 1]; /* the nodes from the root to the one being read */
    path[0] = (plain_path){0, nodes[0].end, {0, 0, 0}, 0, 0};
    uint32_t depth = 0;
    uint8_t longest = 0;
    for (uint32_t n = 1; n <= trie->node_count;) {
        while (path[depth].end <= n) { /* the subtree is done: its value goes to its node and up */
            subtree[path[depth].node] = path[depth].most;
            if (depth == 0)
                break;
            depth--;
            if (path[depth + 1].most > path[depth].most)
                path[depth].most = path[depth + 1].most;
        }
        if (n == trie->node_count)
            break;
        const trie_node *node = &nodes[n];
        gbnf_utf8 utf8 = path[depth].utf8;
        uint32_t characters = path[depth].characters;
        bool plain;
        if (utf8.remaining == 0 && node->byte < 0x80) {
            plain = ascii_plain[node->byte];
            characters++;
        } else {
            bool starts = utf8.remaining == 0;
            uint32_t low, high;
            plain = utf8_advance(&utf8, node->byte, &low, &high) && !(starts && key_has_byte(key, node->byte));
            if (plain && utf8.remaining == 0) {
                plain = code_point_plain(grammar, key, utf8.value);
                characters++;
            }
        }
        if (!plain) { /* every token below is held back: a walk goes into it */
            memset(subtree + n, PLAIN_NEVER, node->end - n);
            path[depth].most = PLAIN_NEVER;
            n = node->end;
            continue;
        }
        uint8_t value = utf8.remaining > 0                    ? PLAIN_NEVER
                        : characters > PLAIN_CHARACTERS_MAX ? PLAIN_CHARACTERS_MAX
                                                              : (uint8_t)characters;
        for (uint32_t i = 0; i < node->token_count; i++)
            table->token_characters[trie->tokens[node->token_first + i]] = value;
        uint8_t most = node->token_count > 0 ? value : 0;
        if (node->token_count > 0 && value != PLAIN_NEVER && value > longest)
            longest = value;
        if (n + 1 < node->end) {
            path[++depth] = (plain_path){n, node->end, utf8, characters, most};
        } else {
            subtree[n] = most;
            if (most > path[depth].most)
                path[depth].most = most;
        }
        n++;
    }
    table->longest = longest;
    table->built = true;
}

/* Drops the tables when vocab is not the one they were built from. */
static void plain_cache_bind(plain_cache *cache, const json_vocab *vocab)
{
    uint64_t fingerprint = json_vocab_fingerprint(vocab);
    int32_t n_tokens = json_vocab_n_tokens(vocab);
    uint32_t node_count = json_vocab_trie(vocab)->node_count;
    if (cache->vocab == vocab && cache->fingerprint == fingerprint && cache->n_tokens == n_tokens &&
        cache->node_count == node_count)
        return;
    plain_cache_drop(cache);
    cache->vocab = vocab;
    cache->fingerprint = fingerprint;
    cache->n_tokens = n_tokens;
    cache->node_count = node_count;
}

static plain_table *plain_cache_find(plain_cache *cache, const plain_key *key)
{
    for (int i = 0; i < GBNF_PLAIN_TABLES_MAX; i++) {
        plain_table *table = &cache->tables[i];
        if (table->built && same_key(&table->key, key)) {
            table->used = ++cache->clock;
            return table;
        }
    }
    return NULL;
}

/* Builds key's table over the least recently used one. Its arrays are allocated the first time a place is used
 * with a vocabulary, and then kept: at most GBNF_PLAIN_TABLES_MAX of them per matcher. Out of memory, nothing is built
 * (NULL) and the walk alone stays exact. */
static plain_table *plain_cache_add(plain_cache *cache, const gbnf_grammar *grammar, const json_vocab *vocab,
                                    const plain_key *key)
{
    plain_table *table = &cache->tables[0];
    for (int i = 1; i < GBNF_PLAIN_TABLES_MAX; i++)
        if (cache->tables[i].used < table->used)
            table = &cache->tables[i];
    table->built = false;
    if (!table->token_characters)
        table->token_characters = malloc((size_t)cache->n_tokens + 1);
    if (!table->subtree_characters)
        table->subtree_characters = malloc(cache->node_count);
    if (!table->token_characters || !table->subtree_characters)
        return NULL;
    table->key = *key;
    table->used = ++cache->clock;
    plain_table_build(table, grammar, vocab);
    return table;
}

/* ---- the mask ---- */

/* The walk steps each trie node's byte from its parent's stacks. Inside text that a loop takes (a string's
 * characters, [^"]*), a byte gives back the same stacks, and so does a whole multi-byte character; each set
 * remembers, per byte, what a step from it gave, and the levels that hold the same set share that memory.
 * Stacks over the matcher's frames alone are kept for the whole walk, so the bytes inside a character are
 * remembered too, and such text costs a lookup per byte. A subtree whose value in subtree is at most room holds
 * plain tokens only, already marked: it is skipped. Returns how many tokens it marked, or -1 once it has tried
 * more than budget nodes (what it marked then is partial). */
static int32_t walk(const gbnf_matcher *matcher, const json_vocab *vocab, const uint8_t *subtree, uint8_t room,
                    uint32_t budget, uint8_t *allowed)
{
    const token_trie *trie = json_vocab_trie(vocab);
    const trie_node *nodes = trie->nodes;
    gbnf_context context = {matcher->grammar, matcher->pools[matcher->committed], matcher->space, 0};
    walk_level *levels = matcher->walk_levels;
    uint32_t cached_count = 1, cached_used = matcher->thread_count;
    memcpy(matcher->cached_threads, matcher->threads, matcher->thread_count * sizeof *matcher->threads);
    matcher->cached_sets[0] = (cached_set){0, matcher->thread_count, matcher->utf8, 0};
    memset(matcher->transitions + (size_t)LEVEL_ROWS * 256, 0, 256 * sizeof *matcher->transitions);
    levels[0] = cached_level(matcher, 0, 0);
    levels[0].next_child = 1;
    int32_t marked = 0;
    uint32_t visited = 0;
    int depth = 0;
    while (depth >= 0) {
        walk_level *level = &levels[depth];
        uint32_t child = level->next_child;
        if (child >= nodes[level->node].end) {
            depth--;
            continue;
        }
        const trie_node *node = &nodes[child];
        level->next_child = node->end;
        if (subtree && subtree[child] <= room)
            continue;
        if (++visited > budget)
            return -1;
        uint16_t known = matcher->transitions[(size_t)level->row * 256 + node->byte];
        if (known == TRANSITION_REFUSED)
            continue;
        walk_level *next = &levels[depth + 1];
        if (known == TRANSITION_SAME) {
            *next = *level;
        } else if (known == TRANSITION_HOME) {
            *next = cached_level(matcher, matcher->cached_sets[level->cached].home, level->scratch_mark);
            next->home = (uint32_t)depth + 1;
        } else if (known >= TRANSITION_CACHED) {
            *next = cached_level(matcher, known - TRANSITION_CACHED, level->scratch_mark);
            next->home = next->utf8.remaining == 0 ? (uint32_t)depth + 1
                         : level->utf8.remaining == 0 ? (uint32_t)depth
                                                      : level->home;
        } else if (!step_level(matcher, &context, &cached_count, &cached_used, depth, node->byte,
                               &matcher->transitions[(size_t)level->row * 256 + node->byte], next)) {
            continue;
        }
        for (uint32_t i = 0; i < node->token_count; i++) {
            int32_t token = trie->tokens[node->token_first + i];
            marked += !allowed[token]; /* tokens with the same bytes share a node */
            allowed[token] = 1;
        }
        if (child + 1 < node->end) {
            next->node = child;
            next->next_child = child + 1;
            depth++;
        }
    }
    return marked;
}

/* allowed[i] = whether token i's plain code points fit in room; returns how many do. In blocks of 64 counted in a
 * byte, over arrays declared apart: GCC's cost model at -O2 vectorizes only loops of a known trip count that need
 * no check that the arrays are apart, and this loop over the whole vocabulary runs at every mask. */
static int32_t mark_plain(uint8_t *restrict allowed, const uint8_t *restrict characters, int32_t n_tokens,
                          uint8_t room)
{
    int32_t count = 0, i = 0;
    for (; i + 64 <= n_tokens; i += 64) {
        uint8_t block = 0;
        for (int j = 0; j < 64; j++) {
            uint8_t fits = characters[i + j] <= room;
            allowed[i + j] = fits;
            block = (uint8_t)(block + fits);
        }
        count += block;
    }
    for (; i < n_tokens; i++) {
        allowed[i] = characters[i] <= room;
        count += allowed[i];
    }
    return count;
}

/* Between characters, a key names the plain code points of the stacks' tops; with its table, the plain tokens the
 * room allows are marked from it and the walk skips the subtrees that hold nothing else. A key without a table
 * gets one when a walk without it turns out long. */
int32_t gbnf_matcher_allowed(const gbnf_matcher *matcher, const json_vocab *vocab, uint8_t *allowed)
{
    const gbnf_grammar *grammar = matcher->grammar;
    plain_cache *cache = matcher->plain;
    plain_cache_bind(cache, vocab);
    int32_t n_tokens = json_vocab_n_tokens(vocab);
    gbnf_context context = {grammar, matcher->pools[matcher->committed], matcher->space, 0};
    plain_key key;
    bool keyed = matcher->utf8.remaining == 0 && plain_key_of(grammar, matcher->threads, matcher->thread_count, &key);
    if (keyed) {
        key.signatures = key.class_count == 1 ? 1u << 1 : loop_signatures(matcher, &context, &key);
        keyed = key.signatures != 0;
    }
    plain_table *table = keyed ? plain_cache_find(cache, &key) : NULL;
    if (keyed && !table) {
        memset(allowed, 0, (size_t)n_tokens);
        int32_t marked = walk(matcher, vocab, NULL, 0, cache->node_count / PLAIN_BUILD_SHARE, allowed);
        if (marked >= 0)
            return marked;
        table = plain_cache_add(cache, grammar, vocab, &key);
    }
    uint8_t room = 0;
    if (table)
        room = key.class_count == 1 ? chain_room(matcher, &context, &key, table->longest) : PLAIN_UNBOUNDED;
    int32_t count = 0;
    if (room > 0)
        count = mark_plain(allowed, table->token_characters, n_tokens, room);
    else
        memset(allowed, 0, (size_t)n_tokens);
    return count + walk(matcher, vocab, room > 0 ? table->subtree_characters : NULL, room, UINT32_MAX, allowed);
}
