/* Helpers shared by the model tests: reading an oracle case (JSON + logits
 * file) and its model, and comparing rows of logits with the oracle's
 * tolerances. */
#ifndef BMOE_TESTS_ORACLE_SUPPORT_H
#define BMOE_TESTS_ORACLE_SUPPORT_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmoe.h"
#include "test.h"

typedef struct oracle_case {
    int32_t *prompt_ids;
    int n_prompt;
    int32_t *greedy_ids;
    int n_greedy;
    int n_vocab;
    int rows;
    float *logits; /* rows * n_vocab */
    char *text;    /* the prompt text */
} oracle_case;

static inline int32_t *oracle_int_array(const cJSON *json, const char *key, int *count)
{
    const cJSON *array = cJSON_GetObjectItemCaseSensitive(json, key);
    *count = cJSON_GetArraySize(array);
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(*count > 0 ? *count : 1));
    for (int i = 0; i < *count; i++)
        out[i] = (int32_t)cJSON_GetArrayItem(array, i)->valuedouble;
    return out;
}

/* Loads cases/<model>.<name>.json and its logits; exits loudly if missing. */
static inline int oracle_case_load(oracle_case *c, const char *model_name, const char *case_name)
{
    char relative[256], path[1024];
    snprintf(relative, sizeof relative, "oracle/cases/%s.%s.json", model_name, case_name);
    test_shared_path(path, sizeof path, relative);
    size_t size;
    char *text = test_read_file(path, &size);
    cJSON *json = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!json) {
        fprintf(stderr, "cannot parse %s\n", path);
        return -1;
    }
    c->prompt_ids = oracle_int_array(json, "prompt_ids", &c->n_prompt);
    c->greedy_ids = oracle_int_array(json, "greedy_ids", &c->n_greedy);
    c->n_vocab = cJSON_GetObjectItemCaseSensitive(json, "n_vocab")->valueint;
    c->rows = cJSON_GetObjectItemCaseSensitive(json, "rows")->valueint;
    const char *prompt_text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(json, "text"));
    c->text = strdup(prompt_text ? prompt_text : "");
    cJSON_Delete(json);
    snprintf(relative, sizeof relative, "oracle/cases/%s.%s.logits.f32", model_name, case_name);
    test_shared_path(path, sizeof path, relative);
    c->logits = (float *)test_read_file(path, &size);
    if (!c->logits || size != (size_t)c->rows * (size_t)c->n_vocab * sizeof(float)) {
        fprintf(stderr, "bad logits file %s\n", path);
        return -1;
    }
    return 0;
}

/* The path of oracle/models/<model>.gguf in the shared folder. */
static inline const char *oracle_model_path(char *path, size_t size, const char *model_name)
{
    char relative[256];
    snprintf(relative, sizeof relative, "oracle/models/%s.gguf", model_name);
    return test_shared_path(path, size, relative);
}

/* Loads the oracle's model (params NULL: the defaults); NULL, recorded as a
 * failed check with the library's message, if it does not load. */
static inline bmoe_model *oracle_model_load_with(const char *model_name, const bmoe_model_params *params)
{
    char path[1024];
    bmoe_error error = {0};
    oracle_model_path(path, sizeof path, model_name);
    bmoe_model *model = bmoe_model_load(path, params, &error);
    CHECK_MSG(model != NULL, "load %s: %s", path, error.message);
    return model;
}

static inline bmoe_model *oracle_model_load(const char *model_name)
{
    return oracle_model_load_with(model_name, NULL);
}

static inline void oracle_case_free(oracle_case *c)
{
    free(c->prompt_ids);
    free(c->greedy_ids);
    free(c->logits);
    free(c->text);
}

static inline int oracle_argmax(const float *row, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    return best;
}

/* How far a row's top logit stands above its second. */
static inline float oracle_top2_margin(const float *row, int n)
{
    int top = oracle_argmax(row, n);
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != top && row[i] > second)
            second = row[i];
    return row[top] - second;
}

/* The largest |mine - theirs| over a row; a NaN anywhere gives INFINITY. */
static inline float oracle_row_max_diff(const float *mine, const float *theirs, int n)
{
    float d = 0;
    for (int i = 0; i < n; i++) {
        float diff = fabsf(mine[i] - theirs[i]);
        if (!(diff <= d))
            d = isnan(diff) ? INFINITY : diff;
    }
    return d;
}

/* Loads DIR/<name>.json and its logits, reference data a test keeps beside
 * it (the oracle's layout, without the prompt text: the prompt is ids). -1
 * (with a failed check) if missing. */
static inline int oracle_data_case_load(oracle_case *c, const char *dir, const char *name)
{
    char path[1024];
    size_t size;
    memset(c, 0, sizeof *c);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    char *text = test_read_file(path, &size);
    cJSON *json = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK_MSG(json != NULL, "cannot read %s", path);
    if (!json)
        return -1;
    c->prompt_ids = oracle_int_array(json, "prompt_ids", &c->n_prompt);
    c->greedy_ids = oracle_int_array(json, "greedy_ids", &c->n_greedy);
    c->n_vocab = cJSON_GetObjectItemCaseSensitive(json, "n_vocab")->valueint;
    c->rows = cJSON_GetObjectItemCaseSensitive(json, "rows")->valueint;
    c->text = strdup("");
    cJSON_Delete(json);
    snprintf(path, sizeof path, "%s/%s.logits.f32", dir, name);
    c->logits = (float *)test_read_file(path, &size);
    bool whole = c->logits && size == (size_t)c->rows * (size_t)c->n_vocab * sizeof(float);
    CHECK_MSG(whole, "bad logits file %s", path);
    return whole ? 0 : -1;
}

static inline int compare_floats(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

#endif
