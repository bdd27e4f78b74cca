/* Chat templates in bmoe-cli: --render-template (a template file rendered
 * with a JSON context, printed exactly) and the one-shot --chat prompt (the
 * prompt as one user message through the model's own template, thinking as
 * --no-think asks and the model's think control allows, and the reasoning
 * parser primed on the rendered prompt). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Neither file is a prompt to tokenize: a bound against reading a device's worth. */
#define CLI_MAX_TEMPLATE_BYTES ((size_t)64 << 20)

int cli_run_render(const cli_options *options)
{
    char *template_text = NULL, *context = NULL, *out = NULL;
    size_t template_length = 0, context_length = 0, out_length = 0;
    bmoe_error error = {0};
    int status = 1;
    if (bmoe_read_file(options->render_template, CLI_MAX_TEMPLATE_BYTES, &template_text, &template_length, &error) !=
        0) {
        cli_fail("--render-template: %s", error.message);
        goto done;
    }
    if (bmoe_read_file(options->template_context, CLI_MAX_TEMPLATE_BYTES, &context, &context_length, &error) != 0) {
        cli_fail("--template-context: %s", error.message);
        goto done;
    }
    if (bmoe_chat_render_template(template_text, template_length, context, context_length, options->template_now, &out,
                                  &out_length, &error) != 0) {
        cli_fail("%s: %s", options->render_template, error.message);
        goto done;
    }
    if (cli_write(stdout, out, out_length) != 0)
        goto done;
    status = 0;
done:
    bmoe_free(template_text);
    bmoe_free(context);
    bmoe_free(out);
    return status;
}

int cli_chat_prompt(const cli_options *options, const bmoe_model *model, const char *prompt, size_t length,
                    cli_chat_prompt_result *result)
{
    memset(result, 0, sizeof *result);
    bmoe_error error = {0};
    result->chat = bmoe_chat_create(model, &error);
    if (!result->chat)
        return cli_fail("--chat: %s", error.message);
    enum bmoe_think_control control = bmoe_chat_think_control(result->chat);
    bmoe_chat_params params = bmoe_chat_default_params();
    params.enable_thinking = !options->no_think;
    params.reasoning_prefill = options->no_think && control == BMOE_THINK_CONTROL_PREFILL;
    params.now_seconds = options->template_now;
    params.reasoning_effort = options->reasoning_effort;
    if (bmoe_chat_check_reasoning_effort(result->chat, options->reasoning_effort, &error) != 0) {
        cli_fail("--reasoning-effort: %s", error.message);
        cli_chat_prompt_free(result);
        return 1;
    }
    if (options->no_think && control == BMOE_THINK_CONTROL_NONE)
        fprintf(stderr, "bmoe-cli: warning: --no-think: this model reasons on every turn (think_ctl none); its "
                        "template cannot turn reasoning off\n");
    bmoe_chat_message message = {.role = "user", .content = prompt, .content_length = length};
    char *text = NULL;
    size_t text_length = 0;
    if (bmoe_chat_render(result->chat, &message, 1, &params, &text, &text_length, &error) != 0) {
        cli_fail("--chat: the model's template: %s", error.message);
        cli_chat_prompt_free(result);
        return 1;
    }
    /* the prefilled turn is the answer verbatim: no reasoning follows */
    enum bmoe_reasoning_format format =
        params.reasoning_prefill ? BMOE_REASONING_NONE : bmoe_chat_reasoning_format(result->chat);
    /* a held answer waits for the reasoning to end: the
     * prompt opens the span where the model would not */
    const char *opening = "";
    if (cli_holds_answer(options))
        result->reason_first = bmoe_reasoning_opening(format, text, text_length, &opening);
    size_t opening_length = strlen(opening);
    char *prompt_text = malloc(text_length + opening_length + 1);
    if (prompt_text) {
        memcpy(prompt_text, text, text_length);
        memcpy(prompt_text + text_length, opening, opening_length + 1);
        text_length += opening_length;
    }
    bmoe_free(text);
    result->reasoning = prompt_text ? bmoe_reasoning_create(format, prompt_text, text_length, &error) : NULL;
    int32_t count =
        result->reasoning ? bmoe_chat_tokenize(result->chat, prompt_text, text_length, NULL, 0, &error) : -1;
    if (count >= 0) {
        result->tokens = malloc((size_t)(count > 0 ? count : 1) * sizeof *result->tokens);
        if (!result->tokens ||
            bmoe_chat_tokenize(result->chat, prompt_text, text_length, result->tokens, count, &error) != count)
            count = -1;
    }
    free(prompt_text);
    if (count < 0) {
        cli_fail("--chat: %s", error.message[0] ? error.message : "out of memory");
        cli_chat_prompt_free(result);
        return 1;
    }
    result->n_tokens = count;
    return 0;
}

void cli_chat_prompt_free(cli_chat_prompt_result *result)
{
    bmoe_reasoning_free(result->reasoning);
    bmoe_chat_free(result->chat);
    free(result->tokens);
    memset(result, 0, sizeof *result);
}
