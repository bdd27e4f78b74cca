/* One decide request (--decide): prefix + suffix as one user message
 * rendered with reasoning off (the template's flag, or the prefill where the
 * think control says so), one prefill and no decode, then the
 * log-probability of each choice's first token over the whole vocabulary
 * from the row the next token would be sampled from. Each choice is
 * tokenized on its own (no template, no special tokens); two choices that
 * share a first token cannot be told apart and are refused.
 *
 * The kept prefix state is the context's own KV cache: the generation keeps
 * the longest cached prefix the prompt shares, so a decide whose prefix
 * equals or extends the previous one prefills only what follows it, and
 * bmoe's batch-invariant logits make the result the same as a fresh
 * prefill's. reuse_prefix false empties the cache first. Nothing is copied
 * to keep or restore the state: store_s and restore_s are 0, and
 * prefix_state_mib is 0 (no memory beyond the context's own cache). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"
#include "tm_json.h"

#define SESSION_MIB 1048576.0

static void key_number(tm_buffer *out, const char *key, double value, int decimals, double fallback)
{
    tm_buffer_printf(out, ",\"%s\":", key);
    tm_json_number(out, value, decimals, fallback);
}

/* Each choice's first token; -1 with message when one has none or two share one. */
static int first_tokens(const session *s, const session_request *r, int32_t *firsts, char *message, size_t size)
{
    for (int32_t i = 0; i < r->n_choices; i++) {
        int32_t tokens[8];
        bmoe_error error = {0};
        int32_t count =
            bmoe_tokenize(s->model, r->choices[i].data, r->choices[i].length, false, false, tokens, 8, &error);
        if (count < 0) {
            snprintf(message, size, "choice %d: %s", i, error.message);
            return -1;
        }
        if (count == 0) {
            snprintf(message, size, "choice %d is empty: it has no first token", i);
            return -1;
        }
        firsts[i] = tokens[0];
        for (int32_t j = 0; j < i; j++) {
            if (firsts[j] == firsts[i]) {
                snprintf(message, size, "choices %d and %d share their first token (%d): they cannot be told apart",
                         j, i, firsts[i]);
                return -1;
            }
        }
    }
    return 0;
}

void session_format_decide(tm_buffer *out, int64_t id, bool cancelled, int32_t best, const double *logp,
                          int32_t n_choices, int32_t n_tokens, int32_t n_reused, const bmoe_stats *prefill)
{
    tm_buffer_printf(out, "BMOE_DECIDE {\"id\":%" PRId64 ",\"cancelled\":%s,\"best\":%" PRId32 ",\"choice_logp\":[",
                     id, cancelled ? "true" : "false", best);
    for (int32_t i = 0; i < n_choices; i++) {
        if (i > 0)
            tm_buffer_append_string(out, ",");
        if (logp && isfinite(logp[i]))
            tm_json_number(out, logp[i], 6, 0.0);
        else
            tm_buffer_append_string(out, "null");
    }
    tm_buffer_printf(out, "],\"n_tokens\":%" PRId32 ",\"n_reused\":%" PRId32 ",\"n_prefilled\":%" PRId32, n_tokens,
                     n_reused, n_tokens - n_reused);
    tm_buffer_append_string(out, ",\"restore_s\":0.0000,\"store_s\":0.0000");
    key_number(out, "prefill_s", prefill->wall_ms * 1e-3, 4, 0.0);
    key_number(out, "prefill_cpu_s", prefill->cpu_ms * 1e-3, 4, 0.0);
    key_number(out, "prefill_read_mib", (double)prefill->read_bytes / SESSION_MIB, 3, 0.0);
    key_number(out, "prefill_io_s", prefill->io_ms * 1e-3, 4, 0.0);
    key_number(out, "prefill_stall_s", prefill->stall_ms * 1e-3, 4, 0.0);
    key_number(out, "prefill_mgmt_s", prefill->mgmt_ms * 1e-3, 4, 0.0);
    tm_buffer_append_string(out, ",\"prefill_dev_tokens\":0,\"prefill_dev_read_mib\":0.000,\"prefill_dev_stall_s\":0.0000"
                                 ",\"prefill_dev_routed\":0,\"prefill_dev_demand\":0,\"prefix_state_mib\":0.000}\n");
}

int session_decide(session *s, const session_request *r)
{
    int64_t id = r->id;
    char message[BMOE_ERROR_MAX + 128];
    if (!s->config->decide)
        return session_error(s, id, false, "decide needs a session opened with --decide");
    int32_t *firsts = malloc((size_t)r->n_choices * sizeof *firsts);
    double *logp = malloc((size_t)r->n_choices * sizeof *logp);
    int32_t *tokens = NULL;
    char *text = NULL;
    size_t text_length = 0;
    bmoe_error error = {0};
    int status = 0;
    const char *refusal = NULL;
    session_conversation question;
    session_conversation_init(&question);
    size_t joined_length = r->prefix.length + r->suffix.length;
    char *joined = malloc(joined_length + 1);
    if (!firsts || !logp || !joined) {
        refusal = "out of memory for the decide request";
        goto refuse;
    }
    if (first_tokens(s, r, firsts, message, sizeof message) != 0) {
        refusal = message;
        goto refuse;
    }
    memcpy(joined, r->prefix.data, r->prefix.length);
    memcpy(joined + r->prefix.length, r->suffix.data ? r->suffix.data : "", r->suffix.length);
    joined[joined_length] = '\0';
    bmoe_chat_params params = bmoe_chat_default_params();
    params.enable_thinking = false; /* a decision is always rendered with reasoning off */
    params.reasoning_prefill = s->chat && s->think_control == BMOE_THINK_CONTROL_PREFILL;
    params.now_seconds = s->config->template_now;
    if (session_conversation_add(&question, "user", joined, joined_length, NULL, 0) != 0 ||
        session_conversation_render(&question, s->chat, &params, &text, &text_length, &error) != 0) {
        snprintf(message, sizeof message, "the chat template: %s",
                 error.message[0] ? error.message : "out of memory");
        refusal = message;
        goto refuse;
    }
    int32_t n_tokens = session_prompt_tokens(s, s->chat, text, text_length, &tokens, &error);
    if (n_tokens < 0) {
        snprintf(message, sizeof message, "tokenizing the prompt: %s", error.message[0] ? error.message : "out of memory");
        refusal = message;
    } else if (n_tokens == 0) {
        refusal = "empty prompt: it has no tokens";
    } else if (n_tokens > bmoe_context_n_ctx(s->context)) {
        snprintf(message, sizeof message, "the prompt (%d tokens) exceeds the session n_ctx (%d)", n_tokens,
                 bmoe_context_n_ctx(s->context));
        refusal = message;
    }
    if (refusal)
        goto refuse;

    session_format_begin(&s->lines, id);
    if (session_emit(s) != 0) {
        status = -1;
        goto done;
    }
    if (!r->reuse_prefix || !s->config->decide_reuse)
        bmoe_context_truncate(s->context, 0);
    bmoe_generation_params generation_params = bmoe_generation_default_params();
    generation_params.n_predict = 0; /* one prefill, no decode */
    tm_files_stamp(&s->files, s->turn, TM_PHASE_PREFILL, n_tokens - 1);
    bmoe_generation *generation = bmoe_generation_start(s->context, &generation_params, tokens, n_tokens, &error);
    tm_files_after_eval(&s->files);
    bmoe_stats none;
    memset(&none, 0, sizeof none);
    if (!generation) {
        if (error.status != BMOE_ERR_ABORTED) {
            snprintf(message, sizeof message, "decide: %s", error.message);
            status = session_error(s, id, !session_recoverable(error.status), message);
            goto done;
        }
        session_format_decide(&s->lines, id, true, -1, NULL, r->n_choices, n_tokens, 0, &none);
        status = session_answer(s);
        goto done;
    }
    tm_lookups_add(&s->lookups, bmoe_generation_prefill_stats(generation));
    const float *logits = bmoe_generation_logits(generation);
    double log_total = bmoe_log_sum_exp(logits, bmoe_model_n_vocab(s->model));
    int32_t best = -1;
    for (int32_t i = 0; i < r->n_choices; i++) {
        logp[i] = (double)logits[firsts[i]] - log_total;
        if (isfinite(logp[i]) && (best < 0 || logp[i] > logp[best]))
            best = i;
    }
    session_format_decide(&s->lines, id, false, best, logp, r->n_choices, n_tokens, bmoe_generation_n_reused(generation),
                  bmoe_generation_prefill_stats(generation));
    bmoe_generation_free(generation);
    status = session_answer(s);
    goto done;
refuse:
    status = session_error(s, id, false, refusal);
done:
    session_conversation_free(&question);
    free(joined);
    free(text);
    free(tokens);
    free(firsts);
    free(logp);
    return status;
}
