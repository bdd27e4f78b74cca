/* Text generation: the prompt (text, -f or --prompt-ids) through the
 * library's generation loop, printing the prompt and then each step's text
 * as it comes, then the contract's end-of-run lines; the timing summary
 * goes to stderr. With --progress, stdout carries the telemetry contract's
 * per-token lines instead, then the answer and the end-of-run lines under
 * === answer === / === perf ===. The telemetry itself is cli_telemetry.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_telemetry.h"
#include "tm_profile.h"

static uint64_t cli_clock_seed(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t seed = (uint64_t)now.tv_sec * 1000000007ull ^ (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 32);
    return seed;
}

static const char *cli_stop_text(enum bmoe_stop_reason stop)
{
    switch (stop) {
    case BMOE_STOP_END_OF_GENERATION: return "end of generation";
    case BMOE_STOP_N_PREDICT: return "token limit (-n)";
    case BMOE_STOP_CONTEXT_FULL: return "context full (raise -c)";
    case BMOE_STOP_STRING: return "stop string";
    case BMOE_STOP_ABORTED: return "aborted";
    case BMOE_STOP_NONE: break;
    }
    return "unknown";
}

/* The prompt's tokens (the ids, or the text tokenized as
 * bmoe_generation_start_text would: BOS as the vocabulary asks, special
 * tokens parsed), so that the prompt length is known before the prefill.
 * text: the -f file's bytes (NULL: -p). Returns 0 or -1 (message printed);
 * *owned is set when tokens must be freed. */
static int cli_prompt_tokens(const bmoe_model *model, const cli_options *options, const char *text, size_t length,
                             int32_t **tokens, int32_t *n_tokens, bool *owned, cli_chat_prompt_result *chat)
{
    *owned = false;
    if (options->prompt_ids) {
        *tokens = options->prompt_ids;
        *n_tokens = options->n_prompt_ids;
        return 0;
    }
    const char *prompt = text ? text : options->prompt ? options->prompt : "";
    size_t prompt_length = text ? length : strlen(prompt);
    if (options->chat) {
        int status = cli_chat_prompt(options, model, prompt, prompt_length, chat) == 0 ? 0 : -1;
        if (status == 0) {
            *tokens = chat->tokens;
            *n_tokens = chat->n_tokens;
        }
        return status;
    }
    int status = cli_tokenize(model, prompt, prompt_length, true, true, tokens, n_tokens);
    *owned = status == 0;
    return status;
}

/* Appends a generated id to a growing list. Returns 0 or 1 (message printed). */
static int cli_ids_append(int32_t **ids, int32_t *capacity, int32_t *count, int32_t id)
{
    if (*count == *capacity) {
        int32_t wanted = *capacity ? *capacity * 2 : 256;
        int32_t *bigger = realloc(*ids, (size_t)wanted * sizeof *bigger);
        if (!bigger)
            return cli_fail("out of memory for %d generated ids", *count + 1);
        *ids = bigger;
        *capacity = wanted;
    }
    (*ids)[(*count)++] = id;
    return 0;
}

/* --ids-out: the ids comma-separated on one line, published. Returns 0 or 1 (message printed). */
static int cli_write_ids(bmoe_output *output, const char *path, const int32_t *ids, int32_t count)
{
    bmoe_error error = {0};
    char number[16];
    for (int32_t i = 0; i < count; i++) {
        int length = snprintf(number, sizeof number, "%s%d", i ? "," : "", ids[i]);
        if (bmoe_output_write(output, number, (size_t)length, &error) != 0) {
            bmoe_output_discard(output);
            return cli_fail("--ids-out %s: %s", path, error.message);
        }
    }
    if (bmoe_output_write(output, "\n", 1, &error) != 0) {
        bmoe_output_discard(output);
        return cli_fail("--ids-out %s: %s", path, error.message);
    }
    if (bmoe_output_commit(output, &error) != 0)
        return cli_fail("--ids-out %s: %s", path, error.message);
    return 0;
}

/* --draft-replay: a warning when the run left the list, whose drafts then
 * were not plain decoding's tokens (the acceptance is not the forced one). */
static void cli_draft_replay_report(const cli_draft_replay *replay, const char *path, const int32_t *ids,
                                    int32_t count)
{
    int32_t same = 0;
    while (same < count && same < replay->n_ids && ids[same] == replay->ids[same])
        same++;
    if (same < count)
        fprintf(stderr,
                "bmoe-cli: warning: --draft-replay %s: the run left the list at generated token %d (%s); the drafts "
                "after it were not this run's tokens\n",
                path, same + 1, same < replay->n_ids ? "another token" : "the list ended");
}

/* Appends text to a growing copy (step texts are valid only until the next
 * call on the generation). Returns 0 or 1 (message printed). */
static int cli_text_append(char **data, size_t *capacity, size_t *length, const char *text, size_t n)
{
    if (*length + n + 1 > *capacity) {
        size_t wanted = (*length + n + 1) * 2;
        char *bigger = realloc(*data, wanted);
        if (!bigger)
            return cli_fail("out of memory for %zu bytes of text", *length + n);
        *data = bigger;
        *capacity = wanted;
    }
    memcpy(*data + *length, text, n);
    *length += n;
    (*data)[*length] = '\0';
    return 0;
}

/* --json-schema / --json-schema-file / --grammar / --grammar-file: the
 * constraint that holds the answer to the schema's JSON or the grammar's
 * words, from its first token or, in a chat whose model reasons first,
 * from the end of its reasoning (cli_chat_prompt opened the span in the
 * prompt). 0, or 1 with the reason printed. */
static int cli_held_answer(const cli_options *options, const bmoe_model *model, const cli_chat_prompt_result *chat,
                           char **file_text, bmoe_token_index **index, bmoe_json_constraint **constraint)
{
    bool gbnf = options->grammar || options->grammar_file;
    const char *file = gbnf ? options->grammar_file : options->json_schema_file;
    const char *flag = gbnf ? (file ? "--grammar-file" : "--grammar") : (file ? "--json-schema-file" : "--json-schema");
    const char *text = gbnf ? options->grammar : options->json_schema;
    size_t length = text ? strlen(text) : 0;
    if (file) {
        if (cli_read_file(file, file_text, &length) != 0)
            return 1;
        text = *file_text;
    }
    bmoe_error error = {0};
    enum bmoe_reasoning_format reasoning = chat->reason_first ? bmoe_chat_reasoning_format(chat->chat)
                                                              : BMOE_REASONING_NONE;
    if (!(*index = bmoe_token_index_create(model, &error)) ||
        !(*constraint = gbnf ? bmoe_gbnf_constraint_create(*index, text, length, &error)
                             : bmoe_json_constraint_create(*index, text, length, &error)) ||
        bmoe_json_constraint_chat(*constraint, model, reasoning, BMOE_TOOL_FORMAT_NONE, &error) != 0)
        return cli_fail("%s: %s", flag, error.message);
    return 0;
}

int cli_run_generate(const cli_options *options)
{
    int status = 1;
    bmoe_model *model = NULL;
    bmoe_context *context = NULL;
    bmoe_generation *generation = NULL;
    int32_t *prompt = NULL;
    bool prompt_owned = false;
    char *kept = NULL;
    size_t kept_capacity = 0;
    double load_seconds = 0.0;
    cli_replay replay = {0};
    cli_draft_replay drafts = {0};
    int32_t *ids = NULL, ids_capacity = 0, n_ids = 0;
    bmoe_output *ids_output = NULL;
    cli_chat_prompt_result chat = {0};
    char *held_text = NULL;
    bmoe_token_index *token_index = NULL;
    bmoe_json_constraint *held_answer = NULL;
    /* the prompt file first: a read that waits (standard input) holds no
     * output open, so a stop signal then has nothing to clean */
    char *prompt_text = NULL;
    size_t prompt_text_length = 0;
    if (options->prompt_file && cli_read_file(options->prompt_file, &prompt_text, &prompt_text_length) != 0)
        return 1;
    if (options->draft_replay && options->draft_replay_reject && options->draft_replay_rate_given) {
        free(prompt_text);
        return cli_fail("--draft-replay-rate is for --draft-replay-mode accept (reject drafts every id wrong)");
    }
    if (options->draft_replay &&
        cli_draft_replay_load(&drafts, options->draft_replay, options->draft_replay_reject,
                              options->draft_replay_rate_given ? options->draft_replay_rate : 1.0) != 0) {
        free(prompt_text);
        return 1;
    }
    cli_telemetry telemetry;
    if (cli_telemetry_open(&telemetry, options) != 0) {
        cli_telemetry_close(&telemetry);
        cli_draft_replay_free(&drafts);
        free(prompt_text);
        return 1;
    }
    if (options->ids_out) {
        bmoe_error error = {0};
        ids_output = bmoe_output_open(options->ids_out, &error);
        if (!ids_output) {
            cli_fail("--ids-out %s: %s", options->ids_out, error.message);
            goto done;
        }
    }
    bool progress = options->progress;
    model = cli_load_model(options, &load_seconds);
    if (!model)
        goto done;
    bool profile_writable = options->expert_profile &&
                            tm_profile_warm(model, options->expert_profile, stderr, "bmoe-cli");
    bmoe_context_params context_params = cli_context_params(options, options->n_ctx);
    context_params.predict_log = options->predict_log;
    cli_telemetry_context_params(&telemetry, &context_params);
    if (options->route_replay) {
        if (cli_replay_load(&replay, options->route_replay) != 0)
            goto done;
        bmoe_model_params resolved;
        bmoe_model_get_params(model, &resolved);
        if (replay.n_layer != bmoe_model_n_layer(model) || replay.n_used < resolved.n_expert_used) {
            cli_fail("--route-replay: the trace routes %d layers to %d experts, the model has %d layers routed to %d "
                     "(it needs as many layers and at least as many experts, see --n-expert-used)",
                     replay.n_layer, replay.n_used, bmoe_model_n_layer(model), resolved.n_expert_used);
            goto done;
        }
        context_params.route_override = cli_replay_route;
        context_params.route_override_user = &replay;
        if (options->route_guess_right < 1.0f) {
            bmoe_model_info info;
            bmoe_model_get_info(model, &info);
            replay.n_expert = info.n_expert;
            replay.guess_right = options->route_guess_right;
            context_params.route_guess = cli_replay_guess;
            context_params.route_guess_user = &replay;
        }
    }
    context = cli_create_context_from(model, &context_params);
    if (!context)
        goto done;

    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = options->n_predict;
    params.ignore_eos = options->ignore_eos;
    /* --progress: the deltas and the answer are the generated text; --chat:
     * the prompt is the template's rendering, not what was typed */
    params.echo_prompt = !progress && !options->chat;
    params.sampler = options->sampler;
    if (!options->seed_given)
        params.sampler.seed = cli_clock_seed();
    params.speculation = options->speculation;
    int32_t n_prompt = 0;
    if (cli_prompt_tokens(model, options, prompt_text, prompt_text_length, &prompt, &n_prompt, &prompt_owned,
                          &chat) != 0)
        goto done;
    if (cli_holds_answer(options) &&
        cli_held_answer(options, model, &chat, &held_text, &token_index, &held_answer) != 0)
        goto done;
    params.constraint = bmoe_json_constraint_rule(held_answer);
    if (options->draft_replay) {
        if (cli_draft_replay_check(&drafts, options->draft_replay, bmoe_model_n_vocab(model)) != 0)
            goto done;
        drafts.n_prompt = n_prompt;
        params.speculation.source = BMOE_DRAFT_CALLBACK;
        params.speculation.draft_callback = cli_draft_replay_propose;
        params.speculation.draft_user = &drafts;
        /* a replay prices a verify batch at a known acceptance: pausing it
         * would price plain decoding */
        params.speculation.draft_always = true;
    }
    cli_telemetry_set_reasoning(&telemetry, chat.reasoning);
    replay.first_position = n_prompt;
    int32_t n_ctx = bmoe_context_n_ctx(context);
    int32_t steps = params.n_predict >= 0 ? params.n_predict : n_ctx - n_prompt > 0 ? n_ctx - n_prompt : 0;
    replay.n_generated = steps;
    if (cli_telemetry_begin(&telemetry, model, context, params.sampler.seed, n_prompt, steps) != 0)
        goto done;

    bmoe_error error = {0};
    cli_telemetry_stamp(&telemetry, TM_PHASE_PREFILL, n_prompt > 0 ? n_prompt - 1 : 0);
    generation = bmoe_generation_start(context, &params, prompt, n_prompt, &error);
    cli_telemetry_after_eval(&telemetry);
    if (!generation) {
        if (error.message[0])
            cli_fail("%s%s", error.message, error.status == BMOE_ERR_CONTEXT_FULL ? " (raise -c)" : "");
        goto done;
    }
    cli_telemetry_prefilled(&telemetry, bmoe_generation_prefill_stats(generation));

    bmoe_step step;
    int stepped;
    for (;;) {
        cli_telemetry_stamp(&telemetry, TM_PHASE_DECODE, n_prompt + bmoe_generation_n_generated(generation));
        stepped = bmoe_generation_step(generation, &step, &error);
        cli_telemetry_after_eval(&telemetry);
        if (stepped < 0)
            break;
        if (step.token < 0) { /* the final step: text the last token left held back */
            if (!progress && step.text_length > 0 && cli_write(stdout, step.text, step.text_length) != 0)
                goto done;
            if (progress && cli_telemetry_trailing_text(&telemetry, step.text, step.text_length) != 0)
                goto done;
            break;
        }
        if (!progress && step.text_length > 0 && cli_write(stdout, step.text, step.text_length) != 0)
            goto done;
        if ((options->ids_out || options->draft_replay) && cli_ids_append(&ids, &ids_capacity, &n_ids, step.token) != 0)
            goto done;
        const char *text = step.text;
        size_t length = step.text_length;
        bmoe_step last = step;
        if (progress && params.n_predict >= 0 && step.index >= params.n_predict) {
            /* the token limit is reached: the final step does no work, and
             * any text it still holds rides this token's line */
            size_t kept_length = 0;
            if (cli_text_append(&kept, &kept_capacity, &kept_length, step.text, step.text_length) != 0)
                goto done;
            stepped = bmoe_generation_step(generation, &step, &error);
            if (stepped < 0)
                break;
            if (cli_text_append(&kept, &kept_capacity, &kept_length, step.text, step.text_length) != 0)
                goto done;
            text = kept;
            length = kept_length;
        }
        if (cli_telemetry_token(&telemetry, generation, &last, text, length) != 0)
            goto done;
        if (stepped == 0)
            break;
    }
    /* text the reasoning parser still held (a partial marker) */
    if (stepped >= 0 && progress && cli_telemetry_trailing_text(&telemetry, NULL, 0) != 0)
        goto done;
    if (!progress && (cli_write(stdout, "\n", 1) != 0 || cli_flush(stdout) != 0))
        goto done;
    if (stepped < 0) {
        cli_fail("%s", error.message);
        goto done;
    }
    /* stopped by a signal (the only abort here): the files are not published */
    if (cli_stop_requested(NULL))
        goto done;

    const bmoe_stats *prefill = bmoe_generation_prefill_stats(generation);
    const bmoe_stats *decode = bmoe_generation_decode_stats(generation);
    double prefill_seconds = prefill->wall_ms * 1e-3, decode_seconds = decode->wall_ms * 1e-3;
    fprintf(stderr, "bmoe-cli: load: %.3f s\n", load_seconds);
    fprintf(stderr, "bmoe-cli: prefill: %d tokens in %.3f s, %.2f tok/s\n", n_prompt, prefill_seconds,
            prefill_seconds > 0 ? prefill->n_tokens / prefill_seconds : 0.0);
    /* with drafting, the evaluated tokens count the rejected drafts too */
    fprintf(stderr, "bmoe-cli: decode: %d tokens generated, %d tokens evaluated in %.3f s, %.2f tok/s\n",
            bmoe_generation_n_generated(generation), decode->n_tokens, decode_seconds,
            decode_seconds > 0 ? decode->n_tokens / decode_seconds : 0.0);
    fprintf(stderr, "bmoe-cli: stopped: %s\n", cli_stop_text(step.stop));
    if (params.sampler.temperature > 0.0f)
        fprintf(stderr, "bmoe-cli: seed: %llu\n", (unsigned long long)params.sampler.seed);
    fprintf(stderr, "bmoe-cli: peak RSS: %.1f MiB\n", cli_peak_rss_mib());
    if (options->draft_replay)
        cli_draft_replay_report(&drafts, options->draft_replay, ids, n_ids);
    status = cli_telemetry_finish(&telemetry, generation, load_seconds);
    if (status == 0 && ids_output) {
        status = cli_write_ids(ids_output, options->ids_out, ids, n_ids);
        ids_output = NULL;
    }
    if (status == 0)
        status = cli_plan_line(options, decode);
    if (status == 0 && profile_writable) {
        bmoe_error profile_error = {0};
        if (bmoe_model_save_expert_profile(model, options->expert_profile, &profile_error) != 0)
            status = cli_fail("%s", profile_error.message);
    }
    if (status == 0 && options->predict_log)
        status = cli_print_predict_log(context);

done:
    cli_telemetry_close(&telemetry);
    bmoe_output_discard(ids_output);
    free(ids);
    free(prompt_text);
    cli_replay_free(&replay);
    cli_draft_replay_free(&drafts);
    cli_chat_prompt_free(&chat);
    bmoe_json_constraint_free(held_answer);
    bmoe_token_index_free(token_index);
    free(held_text);
    free(kept);
    if (prompt_owned)
        free(prompt);
    bmoe_generation_free(generation);
    bmoe_context_free(context);
    bmoe_model_free(model);
    return status;
}
