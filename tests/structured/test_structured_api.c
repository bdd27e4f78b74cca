/* Structured output through the public API (include/bmoe.h): a generation
 * under a JSON constraint writes one value of the schema, whole, and ends
 * with an end-of-generation token; greedy and sampled, with and without
 * drafting (the same bytes); a reset constraint writes the same again; any
 * JSON object in json_object mode; schemas bmoe cannot hold to are refused
 * with the keyword named; a GBNF grammar's words the same way. The model is the tiny Qwen3 MoE of the oracle
 * (random weights over a byte-level vocabulary of 501 tokens): whatever it
 * would write, the constraint decides what it may. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bmoe.h"
#include "test.h"

/* every value bounded, so a generation must close it: the test can ask for the end */
static const char bounded_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\"},"
    "\"pet\":{\"enum\":[\"cat\",\"dog\",\"caterpillar\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":3}},"
    "\"required\":[\"name\",\"age\",\"pet\"]}";

typedef struct answer {
    char text[8192];
    size_t length;
    int n_tokens;
    enum bmoe_stop_reason stop;
} answer;

static bool collect(void *user, const bmoe_step *step)
{
    answer *a = user;
    if (a->length + step->text_length < sizeof a->text) {
        memcpy(a->text + a->length, step->text, step->text_length);
        a->length += step->text_length;
        a->text[a->length] = '\0';
    }
    if (step->token >= 0)
        a->n_tokens++;
    if (step->stop != BMOE_STOP_NONE)
        a->stop = step->stop;
    return true;
}

static void generate(bmoe_model *model, bmoe_json_constraint *constraint, float temperature, bool drafting,
                     answer *out)
{
    memset(out, 0, sizeof *out);
    bmoe_error error = {0};
    bmoe_context_params context_params = bmoe_context_default_params();
    context_params.n_ctx = 512;
    context_params.n_threads = 2;
    bmoe_context *context = bmoe_context_create(model, &context_params, &error);
    CHECK_MSG(context != NULL, "context: %s", error.message);
    bmoe_generation_params params = bmoe_generation_default_params();
    params.n_predict = 400;
    params.render_special = false;
    params.sampler.temperature = temperature;
    params.sampler.seed = 5;
    params.constraint = bmoe_json_constraint_rule(constraint);
    if (drafting) {
        params.speculation.source = BMOE_DRAFT_NGRAM;
        params.speculation.n_draft = 4;
        params.speculation.ngram_min_match = 1;
        params.speculation.draft_always = true;
    }
    static const char prompt[] = "Describe a person as JSON:";
    bmoe_generation *generation =
        context ? bmoe_generation_start_text(context, &params, prompt, sizeof prompt - 1, &error) : NULL;
    CHECK_MSG(generation != NULL, "start: %s", error.message);
    if (generation)
        CHECK_MSG(bmoe_generation_run(generation, collect, out, &error) == 0, "run: %s", error.message);
    bmoe_generation_free(generation);
    bmoe_context_free(context);
}

/* The answer against bounded_schema, checked here from the schema's words. */
static void check_bounded(const answer *a, const char *what)
{
    CHECK_MSG(a->stop == BMOE_STOP_END_OF_GENERATION, "%s: stopped by %d after %d tokens: %s", what, (int)a->stop,
              a->n_tokens, a->text);
    CHECK_MSG(a->length > 0 && a->text[0] == '{', "%s: no object first: %s", what, a->text);
    cJSON *value = cJSON_Parse(a->text);
    CHECK_MSG(cJSON_IsObject(value), "%s: not one JSON object: %s", what, a->text);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(value, "name");
    const cJSON *age = cJSON_GetObjectItemCaseSensitive(value, "age");
    const cJSON *pet = cJSON_GetObjectItemCaseSensitive(value, "pet");
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(value, "tags");
    CHECK_MSG(cJSON_IsString(name) && cJSON_IsNumber(age) && age->valuedouble == (double)(int64_t)age->valuedouble &&
                  cJSON_IsString(pet) &&
                  (!strcmp(pet->valuestring, "cat") || !strcmp(pet->valuestring, "dog") ||
                   !strcmp(pet->valuestring, "caterpillar")),
              "%s: the required keys do not meet the schema: %s", what, a->text);
    if (tags) {
        CHECK_MSG(cJSON_IsArray(tags) && cJSON_GetArraySize(tags) <= 3, "%s: tags: %s", what, a->text);
        const cJSON *tag;
        cJSON_ArrayForEach(tag, tags) CHECK_MSG(cJSON_IsBool(tag), "%s: a tag: %s", what, a->text);
    }
    int keys = 0;
    const cJSON *field;
    cJSON_ArrayForEach(field, value) {
        keys++;
        CHECK_MSG(!strcmp(field->string, "name") || !strcmp(field->string, "age") || !strcmp(field->string, "pet") ||
                      !strcmp(field->string, "tags"),
                  "%s: a key the schema does not list: %s", what, field->string);
    }
    CHECK(keys >= 3 && keys <= 4);
    cJSON_Delete(value);
}

/* Feeds text's tokens to rule, each one checked allowed first; false at the first refused. */
static bool feed_text(bmoe_model *model, const bmoe_token_constraint *rule, const char *text)
{
    int32_t tokens[64];
    int32_t n = bmoe_tokenize(model, text, strlen(text), false, true, tokens, 64, NULL);
    CHECK_MSG(n > 0 && n <= 64, "%s: %d tokens", text, n);
    for (int32_t i = 0; i < n && i < 64; i++) {
        if (!rule->allows(rule->user, tokens[i]))
            return false;
        rule->accept(rule->user, tokens[i]);
    }
    return n > 0;
}

/* The only token allowed now, or -1 when there are several or none. */
static int32_t only_allowed(const bmoe_token_constraint *rule, uint8_t *allowed, int32_t n_vocab)
{
    if (rule->allowed(rule->user, allowed, n_vocab) != 1)
        return -1;
    for (int32_t t = 0; t < n_vocab; t++)
        if (allowed[t])
            return t;
    return -1;
}

/* bmoe_json_constraint_chat: reasoning free until "</think>", then exactly
 * the template's "\n\n" (and a forced call's "<tool_call>\n"), then the
 * value, then the call's closing tag; without reasoning or a call, held
 * from the first token; a call format that is not one JSON object refused. */
static void check_chat_frame(bmoe_model *model, bmoe_json_constraint *constraint)
{
    bmoe_error error = {0};
    const bmoe_token_constraint *rule = bmoe_json_constraint_rule(constraint);
    int32_t n_vocab = bmoe_model_n_vocab(model);
    uint8_t *allowed = malloc((size_t)n_vocab);
    if (!allowed)
        return;
    static const char *const leads[] = {"\n\n", "\n\n<tool_call>\n"};
    for (int call = 0; call < 2; call++) {
        enum bmoe_tool_format format = call ? BMOE_TOOL_FORMAT_JSON : BMOE_TOOL_FORMAT_NONE;
        CHECK_MSG(bmoe_json_constraint_chat(constraint, model, BMOE_REASONING_THINK, format, &error) == 0, "chat: %s",
                  error.message);
        CHECK_MSG(feed_text(model, rule, "Let me think. {\"name\": no JSON yet. "), "free reasoning");
        /* the marker's tokens as the model writes them (one special token in Qwen3's vocabulary) */
        int32_t marker[16];
        int32_t n_marker = bmoe_tokenize(model, "</think>", 8, false, true, marker, 16, &error);
        CHECK(n_marker >= 1 && n_marker <= 16);
        for (int32_t i = 0; i < n_marker; i++) {
            CHECK_MSG(rule->allowed(rule->user, allowed, n_vocab) > 100, "reasoning is free before the marker's end");
            rule->accept(rule->user, marker[i]);
        }
        int32_t lead[32];
        int32_t n_lead = bmoe_tokenize(model, leads[call], strlen(leads[call]), false, true, lead, 32, &error);
        for (int32_t i = 0; i < n_lead; i++) {
            int32_t only = only_allowed(rule, allowed, n_vocab);
            CHECK_MSG(only == lead[i], "lead %d of %s: %d allowed, expected %d", i, leads[call], only, lead[i]);
            rule->accept(rule->user, lead[i]);
        }
        const char *value = "{\"name\":\"Ann\",\"age\":3,\"pet\":\"cat\"}";
        CHECK_MSG(feed_text(model, rule, value), "the value after the lead");
        CHECK(bmoe_json_constraint_complete(constraint));
        if (call)
            CHECK_MSG(feed_text(model, rule, "\n</tool_call>"), "the call's closing tag");
        int32_t ends[8], n_ends = bmoe_token_end_of_generation_list(model, ends, 8);
        CHECK_MSG(n_ends > 0 && rule->allowed(rule->user, allowed, n_vocab) == n_ends && allowed[ends[0]],
                  "only the end after the %s", call ? "call" : "value");
        bmoe_json_constraint_reset(constraint);
    }
    CHECK(bmoe_json_constraint_chat(constraint, model, BMOE_REASONING_NONE, BMOE_TOOL_FORMAT_NONE, &error) == 0);
    int32_t brace;
    CHECK(bmoe_tokenize(model, "{", 1, false, false, &brace, 1, &error) == 1);
    CHECK_MSG(rule->allows(rule->user, brace) && rule->allowed(rule->user, allowed, n_vocab) < 50,
              "held from the first token without reasoning");
    error = (bmoe_error){0};
    CHECK_MSG(bmoe_json_constraint_chat(constraint, model, BMOE_REASONING_NONE, BMOE_TOOL_FORMAT_XML, &error) ==
                      BMOE_ERR_INVALID_ARGUMENT &&
                  strstr(error.message, "xml"),
              "an xml call cannot be forced: %s", error.message);
    free(allowed);
}

/* Whether text is a word of the GBNF test grammar: (yes|no|maybe) " " then
 * one to three numbers of one or two digits (no leading zero), separated
 * by commas; checked by hand, not by the matcher. */
static bool grammar_word(const char *text)
{
    static const char *const answers[] = {"yes ", "no ", "maybe "};
    const char *at = NULL;
    for (int i = 0; i < 3 && !at; i++)
        if (strncmp(text, answers[i], strlen(answers[i])) == 0)
            at = text + strlen(answers[i]);
    for (int number = 0; at && number < 3; number++) {
        if (*at < '1' || *at > '9')
            return false;
        at += 1 + (at[1] >= '0' && at[1] <= '9');
        if (*at == '\0')
            return true;
        if (*at != ',')
            return false;
        at++;
    }
    return false;
}

/* bmoe_gbnf_constraint_create: generations write one word of the grammar
 * and end, greedy, sampled and drafted alike; bad grammars are refused
 * with their place. */
static void check_gbnf(bmoe_model *model, const bmoe_token_index *index)
{
    static const char grammar[] = "root ::= answer \" \" number (\",\" number){0,2}\n"
                                  "answer ::= \"yes\" | \"no\" | \"maybe\"  # one of three\n"
                                  "number ::= [1-9] [0-9]?\n";
    bmoe_error error = {0};
    CHECK_MSG(bmoe_gbnf_check(grammar, sizeof grammar - 1, &error) == 0, "check: %s", error.message);
    bmoe_json_constraint *constraint = bmoe_gbnf_constraint_create(index, grammar, sizeof grammar - 1, &error);
    CHECK_MSG(constraint != NULL, "gbnf: %s", error.message);
    if (!constraint)
        return;
    answer greedy, drafted, sampled, sampled_drafted;
    generate(model, constraint, 0.0f, false, &greedy);
    bmoe_json_constraint_reset(constraint);
    generate(model, constraint, 0.0f, true, &drafted);
    bmoe_json_constraint_reset(constraint);
    generate(model, constraint, 1.0f, false, &sampled);
    bmoe_json_constraint_reset(constraint);
    generate(model, constraint, 1.0f, true, &sampled_drafted);
    const answer *answers[] = {&greedy, &drafted, &sampled, &sampled_drafted};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(answers[i]->stop == BMOE_STOP_END_OF_GENERATION && grammar_word(answers[i]->text),
                  "gbnf answer %d: \"%s\" (stop %d)", i, answers[i]->text, (int)answers[i]->stop);
    CHECK_MSG(strcmp(greedy.text, drafted.text) == 0, "drafted \"%s\", plain \"%s\"", drafted.text, greedy.text);
    CHECK_MSG(strcmp(sampled.text, sampled_drafted.text) == 0, "sampled drafted \"%s\", plain \"%s\"",
              sampled_drafted.text, sampled.text);
    bmoe_json_constraint_free(constraint);

    static const struct {
        const char *grammar, *words;
    } refused[] = {
        {"root ::= item\n", "undefined rule 'item'"},
        {"start ::= \"a\"\n", "root"},
        {"root ::= root \"a\" | \"b\"\n", "left-recursive"},
        {"root ::= <think>\n", "not supported"},
        {"root ::= \"a\nroot ::= \"b\"\n", "unterminated string literal"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        error = (bmoe_error){0};
        size_t length = strlen(refused[i].grammar);
        bmoe_json_constraint *c = bmoe_gbnf_constraint_create(index, refused[i].grammar, length, &error);
        CHECK_MSG(!c && error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, refused[i].words),
                  "%s: %s", refused[i].grammar, error.message);
        bmoe_json_constraint_free(c);
        error = (bmoe_error){0};
        CHECK(bmoe_gbnf_check(refused[i].grammar, length, &error) == BMOE_ERR_INVALID_ARGUMENT &&
              strstr(error.message, refused[i].words));
    }
}

int main(void)
{
    char path[1024];
    test_shared_path(path, sizeof path, "oracle/models/qwen3moe-tiny-f32.gguf");
    bmoe_error error = {0};
    bmoe_model *model = bmoe_model_load(path, NULL, &error);
    CHECK_MSG(model != NULL, "load: %s", error.message);
    if (!model)
        return test_finish();
    CHECK(bmoe_token_index_create(NULL, &error) == NULL && error.status == BMOE_ERR_INVALID_ARGUMENT);
    bmoe_token_index *index = bmoe_token_index_create(model, &error);
    CHECK_MSG(index != NULL, "index: %s", error.message);
    bmoe_json_constraint *constraint = bmoe_json_constraint_create(index, bounded_schema, strlen(bounded_schema), &error);
    CHECK_MSG(constraint != NULL, "constraint: %s", error.message);
    if (index && constraint) {
        /* unconstrained, this model writes no JSON: the constraint is what the test sees */
        answer free_text;
        generate(model, NULL, 0.0f, false, &free_text);
        cJSON *parsed = cJSON_Parse(free_text.text);
        CHECK_MSG(!parsed, "the model writes JSON by itself: %s", free_text.text);
        cJSON_Delete(parsed);

        answer greedy, again, drafted;
        generate(model, constraint, 0.0f, false, &greedy);
        check_bounded(&greedy, "greedy");
        CHECK(bmoe_json_constraint_complete(constraint));
        bmoe_json_constraint_reset(constraint);
        CHECK(!bmoe_json_constraint_complete(constraint));
        generate(model, constraint, 0.0f, false, &again);
        CHECK_MSG(strcmp(greedy.text, again.text) == 0, "after a reset: %s, before: %s", again.text, greedy.text);
        bmoe_json_constraint_reset(constraint);
        generate(model, constraint, 0.0f, true, &drafted);
        CHECK_MSG(strcmp(greedy.text, drafted.text) == 0, "drafted: %s, plain: %s", drafted.text, greedy.text);

        answer sampled, sampled_drafted;
        bmoe_json_constraint_reset(constraint);
        generate(model, constraint, 1.0f, false, &sampled);
        check_bounded(&sampled, "sampled");
        bmoe_json_constraint_reset(constraint);
        generate(model, constraint, 1.0f, true, &sampled_drafted);
        CHECK_MSG(strcmp(sampled.text, sampled_drafted.text) == 0, "sampled drafted: %s, plain: %s",
                  sampled_drafted.text, sampled.text);
        CHECK_MSG(strcmp(sampled.text, greedy.text) != 0, "sampling wrote the greedy answer: %s", sampled.text);

        /* a frame: its tokens before the value, after it, then the end */
        static const char open_text[] = "<tool_call>\n", close_text[] = "\n</tool_call>";
        int32_t before[16], after[16];
        int32_t n_before = bmoe_tokenize(model, open_text, sizeof open_text - 1, false, true, before, 16, &error);
        int32_t n_after = bmoe_tokenize(model, close_text, sizeof close_text - 1, false, true, after, 16, &error);
        CHECK(n_before > 0 && n_before <= 16 && n_after > 0 && n_after <= 16);
        int32_t bad = bmoe_model_n_vocab(model);
        CHECK(bmoe_json_constraint_frame(constraint, &bad, 1, NULL, 0, &error) == BMOE_ERR_INVALID_ARGUMENT);
        CHECK(bmoe_json_constraint_frame(constraint, before, n_before, after, n_after, &error) == 0);
        answer framed;
        generate(model, constraint, 1.0f, false, &framed);
        size_t open_length = sizeof open_text - 1, close_length = sizeof close_text - 1;
        CHECK_MSG(framed.stop == BMOE_STOP_END_OF_GENERATION && framed.length > open_length + close_length &&
                      memcmp(framed.text, open_text, open_length) == 0 &&
                      memcmp(framed.text + framed.length - close_length, close_text, close_length) == 0,
                  "framed: %s", framed.text);
        answer inner = framed;
        if (framed.length > open_length + close_length) {
            inner.length = framed.length - open_length - close_length;
            memmove(inner.text, framed.text + open_length, inner.length);
            inner.text[inner.length] = '\0';
            check_bounded(&inner, "framed");
        }
        CHECK(bmoe_json_constraint_frame(constraint, NULL, 0, NULL, 0, &error) == 0);

        /* a trigger: free text until its tokens come in a row, then the value */
        int32_t trigger[2], brace, word, other;
        CHECK(bmoe_tokenize(model, "a", 1, false, false, &trigger[0], 1, &error) == 1 &&
              bmoe_tokenize(model, "b", 1, false, false, &trigger[1], 1, &error) == 1 &&
              bmoe_tokenize(model, "{", 1, false, false, &brace, 1, &error) == 1 &&
              bmoe_tokenize(model, "h", 1, false, false, &word, 1, &error) == 1 &&
              bmoe_tokenize(model, "w", 1, false, false, &other, 1, &error) == 1);
        CHECK(bmoe_json_constraint_after(constraint, trigger, 2, &error) == 0);
        const bmoe_token_constraint *rule = bmoe_json_constraint_rule(constraint);
        int32_t n_vocab = bmoe_model_n_vocab(model);
        uint8_t *allowed = malloc((size_t)n_vocab);
        int32_t ends[8], n_ends = bmoe_token_end_of_generation_list(model, ends, 8);
        CHECK(n_ends > 0 && n_ends <= 8);
        if (allowed) {
            /* free text, but no end of generation before the trigger */
            CHECK(rule->allowed(rule->user, allowed, n_vocab) == n_vocab - n_ends && rule->allows(rule->user, word));
            for (int32_t i = 0; i < n_ends && i < 8; i++)
                CHECK_MSG(!allowed[ends[i]] && !rule->allows(rule->user, ends[i]), "end %d before the trigger",
                          ends[i]);
            int32_t free_text[] = {word, trigger[0], other, trigger[1], trigger[0]};
            for (int i = 0; i < 5; i++)
                rule->accept(rule->user, free_text[i]); /* the trigger's tokens, but not in a row */
            CHECK(rule->allows(rule->user, word) && rule->allowed(rule->user, allowed, n_vocab) == n_vocab - n_ends);
            rule->accept(rule->user, trigger[1]);
            int32_t count = rule->allowed(rule->user, allowed, n_vocab);
            CHECK_MSG(count > 0 && count < 50 && allowed[brace] && !allowed[word] && rule->allows(rule->user, brace) &&
                          !rule->allows(rule->user, word),
                      "after the trigger: %d allowed", count);
            free(allowed);
        }
        CHECK(bmoe_json_constraint_after(constraint, NULL, 0, &error) == 0);
        check_chat_frame(model, constraint);

        /* json_object: an object from the first byte, and only that */
        bmoe_json_constraint *object = bmoe_json_constraint_create(index, NULL, 0, &error);
        CHECK_MSG(object != NULL, "json_object: %s", error.message);
        answer any;
        generate(model, object, 0.0f, false, &any);
        CHECK_MSG(any.length > 0 && any.text[0] == '{', "json_object: %s", any.text);
        if (any.stop == BMOE_STOP_END_OF_GENERATION) {
            cJSON *value = cJSON_Parse(any.text);
            CHECK_MSG(cJSON_IsObject(value), "json_object ended on no object: %s", any.text);
            cJSON_Delete(value);
        }
        bmoe_json_constraint_free(object);

        static const struct {
            const char *schema, *word;
        } refused[] = {
            {"{\"type\":\"string\",\"pattern\":\"^a\"}", "pattern"},
            {"{\"type\":\"integer\",\"minimum\":3}", "minimum"},
            {"{\"type\":\"object\",\"properties\":", "JSON"},
            {"{\"type\":\"tuple\"}", "tuple"},
        };
        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
            error = (bmoe_error){0};
            bmoe_json_constraint *c =
                bmoe_json_constraint_create(index, refused[i].schema, strlen(refused[i].schema), &error);
            CHECK_MSG(c == NULL && error.status == BMOE_ERR_INVALID_ARGUMENT && strstr(error.message, refused[i].word),
                      "%s: %s", refused[i].schema, error.message);
            bmoe_json_constraint_free(c);
        }
    }
    if (index)
        check_gbnf(model, index);
    bmoe_json_constraint_free(constraint);
    bmoe_token_index_free(index);
    bmoe_model_free(model);
    return test_finish();
}
