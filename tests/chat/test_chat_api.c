/* The chat layer's model-facing part: the think control and reasoning
 * format decided for real templates (shared/data/chat-templates) from what
 * the vocabulary declares, with the expected values the telemetry contract
 * names (Qwen3 and Gemma 4: template; gpt-oss: prefill; LFM2.5-8B-A1B:
 * none; LFM2-8B-A1B and LFM2.5-Instruct: template); the prefilled prompt of
 * gpt-oss, and its prompt with each reasoning effort (which of the
 * templates read one); and the streaming reasoning split on outputs of each format, fed
 * whole, byte by byte and in uneven pieces, with the deltas applied as the
 * contract says (append, or replace on reset) and compared with the split
 * the contract describes. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat_model.h"
#include "chat_test_util.h"
#include "test.h"

typedef struct template_case {
    const char *file;
    bool think, channel, harmony; /* what the family's vocabulary declares */
    enum bmoe_think_control control;
    enum bmoe_reasoning_format format;
    bool reads_effort; /* the template's text reads reasoning_effort */
} template_case;

static const template_case template_cases[] = {
    {"Qwen-Qwen3-0.6B.jinja", true, false, false, BMOE_THINK_CONTROL_TEMPLATE, BMOE_REASONING_THINK, false},
    {"google-gemma-4-31B-it.jinja", false, true, false, BMOE_THINK_CONTROL_TEMPLATE, BMOE_REASONING_CHANNEL, false},
    {"openai-gpt-oss-120b.jinja", false, false, true, BMOE_THINK_CONTROL_PREFILL, BMOE_REASONING_HARMONY, true},
    {"LFM2.5-8B-A1B.jinja", true, false, false, BMOE_THINK_CONTROL_NONE, BMOE_REASONING_THINK, false},
    {"LFM2-8B-A1B.jinja", true, false, false, BMOE_THINK_CONTROL_TEMPLATE, BMOE_REASONING_THINK, false},
    {"LFM2.5-Instruct.jinja", true, false, false, BMOE_THINK_CONTROL_TEMPLATE, BMOE_REASONING_THINK, false},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", false, false, false, BMOE_THINK_CONTROL_TEMPLATE, BMOE_REASONING_NONE,
     false},
    {"Qwen3.5-4B.jinja", true, false, false, BMOE_THINK_CONTROL_TEMPLATE, BMOE_REASONING_THINK, false},
};

static void check_templates(void)
{
    for (size_t i = 0; i < sizeof template_cases / sizeof template_cases[0]; i++) {
        const template_case *c = &template_cases[i];
        size_t length = 0;
        char *source = chat_test_load_template(c->file, &length);
        CHECK_MSG(source != NULL, "%s", c->file);
        if (!source)
            continue;
        bmoe_error err;
        chat_template *parsed = chat_template_parse(source, length, &err);
        CHECK_MSG(parsed != NULL, "%s: %s", c->file, err.message);
        if (parsed) {
            chat_model model = {parsed, source, length, "<|bos|>", "<|eos|>", c->think, c->channel, c->harmony};
            enum bmoe_think_control control = chat_think_control_decide(&model, 1795996800);
            CHECK_MSG(control == c->control, "%s: think_ctl %s, expected %s", c->file, bmoe_think_control_name(control),
                      bmoe_think_control_name(c->control));
            enum bmoe_reasoning_format format = chat_reasoning_format_decide(&model);
            CHECK_MSG(format == c->format, "%s: format %s, expected %s", c->file, bmoe_reasoning_format_name(format),
                      bmoe_reasoning_format_name(c->format));
            bool reads = chat_reads_reasoning_effort_decide(&model, 1795996800);
            CHECK_MSG(reads == c->reads_effort, "%s: reads reasoning_effort %d, expected %d", c->file, reads,
                      c->reads_effort);
            chat_template_destroy(parsed);
        }
        free(source);
    }
}

/* "Hi" rendered with gpt-oss's template and params (the clock fixed): the
 * prompt, NULL when the template does not parse or render. */
static char *render_gptoss(bmoe_chat_params params, size_t *out_length)
{
    size_t length = 0;
    char *source = chat_test_load_template("openai-gpt-oss-120b.jinja", &length);
    bmoe_error err;
    chat_template *parsed = source ? chat_template_parse(source, length, &err) : NULL;
    CHECK(parsed != NULL);
    char *out = NULL;
    *out_length = 0;
    if (parsed) {
        chat_model model = {parsed, source, length, "<|startoftext|>", "<|return|>", false, false, true};
        bmoe_chat_message question = {.role = "user", .content = "Hi", .content_length = 2};
        params.now_seconds = 1795996800;
        CHECK(chat_conversation_render(&model, &question, 1, &params, 0, &out, out_length, &err) == 0);
        chat_template_destroy(parsed);
    }
    free(source);
    return out;
}

/* gpt-oss with thinking off on the prefill: the turn starts in the final
 * channel, after an analysis message holding only whitespace. */
static void check_prefill_render(void)
{
    bmoe_chat_params params = bmoe_chat_default_params();
    params.reasoning_prefill = true;
    size_t out_length;
    char *out = render_gptoss(params, &out_length);
    const char *tail = "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>analysis<|message|> <|end|>"
                       "<|start|>assistant<|channel|>final<|message|>";
    size_t tail_length = strlen(tail);
    CHECK_MSG(out && out_length >= tail_length && memcmp(out + out_length - tail_length, tail, tail_length) == 0,
              "prefilled prompt ends \"%s\"", out && out_length > 120 ? out + out_length - 120 : "");
    free(out);
}

/* gpt-oss with a reasoning effort: the system message says it ("Reasoning:
 * medium" unless told, the template's default). */
static void check_effort_render(void)
{
    const char *efforts[] = {NULL, "low", "medium", "high"};
    const char *said[] = {"Reasoning: medium", "Reasoning: low", "Reasoning: medium", "Reasoning: high"};
    for (int i = 0; i < 4; i++) {
        bmoe_chat_params params = bmoe_chat_default_params();
        params.reasoning_effort = efforts[i];
        size_t out_length;
        char *out = render_gptoss(params, &out_length);
        CHECK_MSG(out && strstr(out, said[i]), "effort %s: no '%s' in the prompt", efforts[i] ? efforts[i] : "unset",
                  said[i]);
        free(out);
    }
}

/* ---- the reasoning split ---------------------------------------------- */

typedef struct applied {
    char reasoning[4096], text[4096];
    int resets;
    int lines;
} applied;

static void apply(applied *a, const bmoe_reasoning_delta *d)
{
    a->lines++;
    if (d->reset) {
        a->resets++;
        a->reasoning[0] = a->text[0] = '\0';
    }
    strncat(a->reasoning, d->reasoning, d->reasoning_length);
    strncat(a->text, d->text, d->text_length);
    CHECK(strlen(d->reasoning) == d->reasoning_length && strlen(d->text) == d->text_length);
}

/* Feeds output in pieces of piece bytes (0: whole) and checks the split. */
static void run_split(const char *name, enum bmoe_reasoning_format format, const char *prompt, const char *output,
                      size_t piece, const char *reasoning, const char *answer, int resets)
{
    bmoe_error err;
    bmoe_reasoning *r = bmoe_reasoning_create(format, prompt, prompt ? strlen(prompt) : 0, &err);
    CHECK(r != NULL);
    if (!r)
        return;
    applied a;
    memset(&a, 0, sizeof a);
    size_t length = strlen(output);
    for (size_t at = 0; at < length;) {
        size_t n = piece == 0 || at + piece > length ? length - at : piece;
        bmoe_reasoning_delta d;
        CHECK(bmoe_reasoning_feed(r, output + at, n, &d, &err) == 0);
        apply(&a, &d);
        at += n;
    }
    bmoe_reasoning_delta d;
    CHECK(bmoe_reasoning_finish(r, &d, &err) == 0);
    apply(&a, &d);
    CHECK_MSG(strcmp(a.reasoning, reasoning) == 0, "%s (pieces of %zu): reasoning \"%s\", expected \"%s\"", name,
              piece, a.reasoning, reasoning);
    CHECK_MSG(strcmp(a.text, answer) == 0, "%s (pieces of %zu): answer \"%s\", expected \"%s\"", name, piece, a.text,
              answer);
    CHECK_MSG(a.resets == resets, "%s (pieces of %zu): %d resets, expected %d", name, piece, a.resets, resets);
    size_t total;
    CHECK(strcmp(bmoe_reasoning_thinking(r, &total), reasoning) == 0 && total == strlen(reasoning));
    CHECK(strcmp(bmoe_reasoning_answer(r, &total), answer) == 0 && total == strlen(answer));
    bmoe_reasoning_free(r);
}

static void split_all_ways(const char *name, enum bmoe_reasoning_format format, const char *prompt,
                           const char *output, const char *reasoning, const char *answer, int resets)
{
    static const size_t pieces[] = {0, 1, 2, 3, 5, 7};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        run_split(name, format, prompt, output, pieces[i], reasoning, answer, resets);
}

static void check_splits(void)
{
    const char *qwen_prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    split_all_ways("think span", BMOE_REASONING_THINK, qwen_prompt,
                   "<think>\nLet me see: 17 x 23.\n</think>\n\nThe answer is 391.", "Let me see: 17 x 23.",
                   "The answer is 391.", 0);
    split_all_ways("no span", BMOE_REASONING_THINK, qwen_prompt, "  Hello <b>world</b> < think \n",
                   "", "  Hello <b>world</b> < think \n", 0);
    split_all_ways("whitespace before the span", BMOE_REASONING_THINK, qwen_prompt, "\n\n<think>ok</think>yes", "ok",
                   "yes", 0);
    split_all_ways("open at the end", BMOE_REASONING_THINK, qwen_prompt, "<think>\nstill thinking  \n",
                   "still thinking", "", 0);
    /* the prompt opened the span (DeepSeek R1): the output starts inside it */
    split_all_ways("prompt opened", BMOE_REASONING_THINK, "<｜Assistant｜><think>\n",
                   "First, é and 中.\n</think>\n\nAnswer: 391", "First, é and 中.", "Answer: 391", 0);
    /* a closing marker with no span before it: what was answer is reasoning */
    split_all_ways("reclassified", BMOE_REASONING_THINK, qwen_prompt, "I think so. </think>\n\nAnswer.",
                   "I think so.", "Answer.", 1);
    /* the prompt closed the span (thinking off): the output is the answer */
    split_all_ways("prompt closed", BMOE_REASONING_THINK, "assistant\n<think>\n\n</think>\n\n", "  Yes</think>no",
                   "", "Yes</think>no", 0);
    split_all_ways("channel span", BMOE_REASONING_CHANNEL, "<|turn>model\n",
                   "<|channel>thought\nStep one.\n<channel|>Final.", "Step one.", "Final.", 0);
    split_all_ways("channel closed by the prompt", BMOE_REASONING_CHANNEL, "<|turn>model\n<|channel>thought\n<channel|>",
                   "Final.", "", "Final.", 0);
    const char *harmony_prompt = "<|start|>user<|message|>Hi<|end|><|start|>assistant";
    split_all_ways("harmony", BMOE_REASONING_HARMONY, harmony_prompt,
                   "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.",
                   "Think.", "Answer.", 0);
    split_all_ways("harmony prefilled", BMOE_REASONING_HARMONY,
                   "<|start|>assistant<|channel|>analysis<|message|> <|end|><|start|>assistant<|channel|>final<|message|>",
                   "Answer <b>.", "", "Answer <b>.", 0);
    split_all_ways("harmony without headers", BMOE_REASONING_HARMONY, harmony_prompt, "foo bar", "", "foo bar", 0);
    split_all_ways("none", BMOE_REASONING_NONE, NULL, "<think>x</think>y", "", "<think>x</think>y", 0);

    bmoe_error err;
    CHECK(bmoe_reasoning_create((enum bmoe_reasoning_format)9, NULL, 0, &err) == NULL);
    CHECK(err.status == BMOE_ERR_INVALID_ARGUMENT && err.message[0]);
    CHECK(strcmp(bmoe_think_control_name(BMOE_THINK_CONTROL_PREFILL), "prefill") == 0);
    CHECK(bmoe_reasoning_effort_valid("low") && bmoe_reasoning_effort_valid("medium") &&
          bmoe_reasoning_effort_valid("high") && !bmoe_reasoning_effort_valid("minimal") &&
          !bmoe_reasoning_effort_valid("") && !bmoe_reasoning_effort_valid(NULL) && !bmoe_reasoning_effort_valid("Low"));
    CHECK(strcmp(bmoe_reasoning_format_name(BMOE_REASONING_HARMONY), "harmony") == 0);
}

/* A loaded model: the oracle files carry their family's real template and
 * special tokens. */
static void check_models(void)
{
    struct {
        const char *file;
        enum bmoe_think_control control;
        enum bmoe_reasoning_format format;
        bool reads_effort;
    } cases[] = {
        {"oracle/models/qwen3moe-tiny-f32.gguf", BMOE_THINK_CONTROL_TEMPLATE, BMOE_REASONING_THINK, false},
        {"oracle/models/gptoss-tiny-f32.gguf", BMOE_THINK_CONTROL_PREFILL, BMOE_REASONING_HARMONY, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        test_shared_path(path, sizeof path, cases[i].file);
        bmoe_model_params params = bmoe_model_default_params();
        params.dense_weights = BMOE_DENSE_WEIGHTS_MMAP;
        bmoe_error err;
        bmoe_model *model = bmoe_model_load(path, &params, &err);
        CHECK_MSG(model != NULL, "%s: %s", path, err.message);
        if (!model)
            continue;
        bmoe_chat *chat = bmoe_chat_create(model, &err);
        CHECK_MSG(chat != NULL, "%s: %s", path, err.message);
        CHECK(bmoe_chat_think_control(chat) == cases[i].control);
        CHECK(bmoe_chat_reasoning_format(chat) == cases[i].format);
        CHECK_MSG(bmoe_chat_reads_reasoning_effort(chat) == cases[i].reads_effort, "%s: reads reasoning_effort %d",
                  path, bmoe_chat_reads_reasoning_effort(chat));
        bmoe_chat_message messages[] = {{.role = "user", .content = "Hi", .content_length = 2}};
        char *text = NULL;
        size_t length = 0;
        CHECK(bmoe_chat_render(chat, messages, 1, NULL, &text, &length, &err) == 0);
        int32_t tokens[256];
        int32_t n = text ? bmoe_chat_tokenize(chat, text, length, tokens, 256, &err) : -1;
        int32_t direct = text ? bmoe_tokenize(model, text, length, false, true, NULL, 0, &err) : -2;
        CHECK_MSG(n > 0 && n == direct, "%d tokens, %d without a BOS rule", n, direct);
        bmoe_free(text);
        /* an effort outside low, medium and high is refused in one line */
        bmoe_chat_params bad = bmoe_chat_default_params();
        bad.reasoning_effort = "extreme";
        text = NULL;
        CHECK(bmoe_chat_render(chat, messages, 1, &bad, &text, &length, &err) == BMOE_ERR_INVALID_ARGUMENT &&
              text == NULL && strstr(err.message, "'extreme'") && !strchr(err.message, '\n'));
        bmoe_chat_free(chat);
        bmoe_model_free(model);
    }
}

static void check_render_template(void)
{
    char *out = NULL;
    size_t length = 0;
    bmoe_error err;
    const char *t = "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}";
    const char *ctx = "{\"bos_token\": \"<s>\", \"messages\": [{\"role\": \"user\", \"content\": \"é\"}]}";
    CHECK(bmoe_chat_render_template(t, strlen(t), ctx, strlen(ctx), 0, &out, &length, &err) == 0);
    CHECK(out && strcmp(out, "<s>[user:é]") == 0 && length == strlen("<s>[user:é]"));
    bmoe_free(out);
    const char *bad = "{{ raise_exception('no way') }}";
    CHECK(bmoe_chat_render_template(bad, strlen(bad), "{}", 2, 0, &out, &length, &err) < 0);
    CHECK(out == NULL && strstr(err.message, "no way") != NULL);
    CHECK(bmoe_chat_render_template(t, strlen(t), "[1]", 3, 0, &out, &length, &err) < 0 && err.message[0]);
}

int main(void)
{
    check_templates();
    check_prefill_render();
    check_effort_render();
    check_splits();
    check_models();
    check_render_template();
    return test_finish();
}
