/* The table as a reader sees it: --help text, the Markdown flag reference,
 * the --describe-params schema and the --show-config document. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

#define HELP_WIDTH 100
#define HELP_COLUMN 28 /* where descriptions start */

/* "-m, --model MODEL" or "    --cache-mb N|auto" into buffer. */
static void params_flag_text(const param_def *row, char *buffer, size_t size)
{
    const char *value = row->type == PARAM_SWITCH ? NULL
                        : row->value_name       ? row->value_name
                        : row->choices          ? row->choices
                                                : "VALUE";
    if (row->id == P_UNAVAILABLE)
        value = NULL;
    snprintf(buffer, size, "%s%s%s%s%s%s%s", row->short_flag ? row->short_flag : "", row->short_flag ? ", " : "",
             row->flag, row->alias ? ", " : "", row->alias ? row->alias : "", value ? " " : "", value ? value : "");
}

/* Writes text wrapped at HELP_WIDTH, every line after the first indented to
 * HELP_COLUMN; column is where the cursor is now. */
static void params_wrap(FILE *out, const char *text, int column)
{
    const char *word = text;
    while (*word) {
        while (*word == ' ')
            word++;
        if (!*word)
            break;
        size_t length = strcspn(word, " ");
        if (column > HELP_COLUMN && column + 1 + (int)length > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_COLUMN, "");
            column = HELP_COLUMN;
        } else if (column > HELP_COLUMN) {
            fputc(' ', out);
            column++;
        }
        fwrite(word, 1, length, out);
        column += (int)length;
        word += length;
    }
    fputc('\n', out);
}

/* The description with its default, lossy mark and environment variable. */
static void params_description(const param_def *row, bool with_default, char *buffer, size_t size)
{
    bool shown = with_default && row->default_text;
    snprintf(buffer, size, "%s%s%s%s%s%s%s%s", row->lossy ? "LOSSY: " : "", row->help ? row->help : "",
             shown ? " [default " : "", shown ? row->default_text : "", shown ? "]" : "", row->env ? " [env " : "", row->env ? row->env : "", row->env ? "]" : "");
}

/* Whether a row belongs in the help of a program of these jobs. */
static bool params_row_for(const param_def *row, unsigned jobs)
{
    return row->jobs ? (row->jobs & jobs) != 0 : (jobs & PARAM_JOBS_CLI) != 0;
}

void params_print_help(FILE *out, param_level max_level, unsigned jobs)
{
    size_t count = 0;
    const param_def *rows = params_table(&count);
    char flag[96], description[1200];
    for (int group = 0; group < PARAM_GROUP_COUNT; group++) {
        bool header = false;
        for (size_t i = 0; i < count; i++) {
            const param_def *row = &rows[i];
            if ((int)row->group != group || row->level > max_level || row->id == P_UNAVAILABLE ||
                !params_row_for(row, jobs))
                continue;
            if (!header) {
                fprintf(out, "\n%s:\n", params_group_name(row->group));
                header = true;
            }
            params_flag_text(row, flag, sizeof flag);
            params_description(row, true, description, sizeof description);
            int column = fprintf(out, "  %s%s", row->short_flag ? "" : "    ", flag);
            if (column + 2 > HELP_COLUMN) {
                fprintf(out, "\n%*s", HELP_COLUMN, "");
                column = HELP_COLUMN;
            } else {
                column += fprintf(out, "%*s", HELP_COLUMN - column, "");
            }
            params_wrap(out, description, column);
        }
    }
    if (max_level < PARAM_DEBUG || !(jobs & PARAM_JOBS_CLI))
        return;
    fprintf(out, "\n%s (each refused with the reason):\n", params_group_name(PARAM_GROUP_UNAVAILABLE));
    for (size_t i = 0; i < count; i++) {
        if (rows[i].id != P_UNAVAILABLE)
            continue;
        int column = fprintf(out, "      %s", rows[i].flag);
        if (column + 2 > HELP_COLUMN) {
            fprintf(out, "\n%*s", HELP_COLUMN, "");
            column = HELP_COLUMN;
        } else {
            column += fprintf(out, "%*s", HELP_COLUMN - column, "");
        }
        params_wrap(out, rows[i].refusal, column);
    }
}

/* Text in a Markdown table cell: '|' escaped, nothing else changes. */
static void params_markdown_cell(FILE *out, const char *text)
{
    fputc(' ', out);
    for (const char *c = text ? text : ""; *c; c++) {
        if (*c == '|')
            fputc('\\', out);
        fputc(*c, out);
    }
    fputs(" |", out);
}

void params_print_markdown(FILE *out)
{
    size_t count = 0;
    const param_def *rows = params_table(&count);
    char flag[96];
    fputs("# bmoe-cli flags\n\n"
          "Generated from the parameter table (src/params/params_table.c) by `bmoe-cli --help-markdown`;\n"
          "a test keeps this file equal to its output. Levels: `--help` lists basic and advanced flags,\n"
          "`--help-all` every flag. `--describe-params` gives the same table as JSON.\n",
          out);
    for (int group = 0; group < PARAM_GROUP_COUNT; group++) {
        bool header = false;
        for (size_t i = 0; i < count; i++) {
            const param_def *row = &rows[i];
            if ((int)row->group != group)
                continue;
            if (!header) {
                fprintf(out, "\n## %s\n\n", params_group_name(row->group));
                if (group == PARAM_GROUP_UNAVAILABLE)
                    fputs("| flag | refused because it |\n|---|---|\n", out);
                else
                    fputs("| flag | key | level | default | description |\n|---|---|---|---|---|\n", out);
                header = true;
            }
            params_flag_text(row, flag, sizeof flag);
            fputc('|', out);
            params_markdown_cell(out, flag);
            if (row->id == P_UNAVAILABLE) {
                params_markdown_cell(out, row->refusal);
                fputc('\n', out);
                continue;
            }
            params_markdown_cell(out, row->key);
            params_markdown_cell(out, params_level_name(row->level));
            params_markdown_cell(out, row->default_text ? row->default_text : "");
            char description[1200];
            params_description(row, false, description, sizeof description);
            params_markdown_cell(out, description);
            fputc('\n', out);
        }
    }
}

/* Prints and frees a cJSON document; -1 when it could not be made. */
static int params_emit(FILE *out, cJSON *document)
{
    char *text = document ? cJSON_Print(document) : NULL;
    cJSON_Delete(document);
    if (!text)
        return -1;
    fputs(text, out);
    fputc('\n', out);
    cJSON_free(text);
    return 0;
}

/* "a|b|c" as a JSON array of strings. */
static cJSON *params_choice_array(const char *choices)
{
    cJSON *array = cJSON_CreateArray();
    for (const char *c = choices; array && *c;) {
        size_t length = strcspn(c, "|");
        char choice[64];
        snprintf(choice, sizeof choice, "%.*s", (int)length, c);
        cJSON_AddItemToArray(array, cJSON_CreateString(choice));
        c += length + (c[length] == '|');
    }
    return array;
}

static const char *const params_job_names[] = {"generate", "logits", "perplexity", "session", "render", "serve"};

int params_describe_json(FILE *out)
{
    size_t count = 0;
    const param_def *rows = params_table(&count);
    cJSON *document = cJSON_CreateObject();
    cJSON_AddStringToObject(document, "schema", "bmoe-params/1");
    cJSON *list = cJSON_AddArrayToObject(document, "params");
    for (size_t i = 0; list && i < count; i++) {
        const param_def *row = &rows[i];
        cJSON *item = cJSON_CreateObject();
        if (!item)
            break;
        cJSON_AddItemToArray(list, item);
        cJSON *flags = cJSON_AddArrayToObject(item, "flags");
        cJSON_AddItemToArray(flags, cJSON_CreateString(row->flag));
        if (row->short_flag)
            cJSON_AddItemToArray(flags, cJSON_CreateString(row->short_flag));
        if (row->alias)
            cJSON_AddItemToArray(flags, cJSON_CreateString(row->alias));
        if (row->id == P_UNAVAILABLE) {
            cJSON_AddBoolToObject(item, "available", false);
            cJSON_AddStringToObject(item, "refusal", row->refusal);
            continue;
        }
        cJSON_AddStringToObject(item, "key", row->key);
        cJSON_AddBoolToObject(item, "available", true);
        cJSON_AddStringToObject(item, "label", row->flag + 2);
        cJSON_AddStringToObject(item, "group", params_group_name(row->group));
        cJSON_AddStringToObject(item, "level", params_level_name(row->level));
        cJSON_AddStringToObject(item, "scope", row->scope == PARAM_SCOPE_REQUEST ? "request" : "session");
        cJSON_AddStringToObject(item, "type", params_type_name(row->type));
        if (row->type == PARAM_INT || row->type == PARAM_FLOAT || row->type == PARAM_MIB) {
            cJSON_AddNumberToObject(item, "min", (double)row->low);
            cJSON_AddNumberToObject(item, "max", (double)row->high);
        }
        if (row->choices)
            cJSON_AddItemToObject(item, "choices", params_choice_array(row->choices));
        if (row->unit)
            cJSON_AddStringToObject(item, "unit", row->unit);
        if (row->value_name)
            cJSON_AddStringToObject(item, "value_name", row->value_name);
        if (row->default_text)
            cJSON_AddStringToObject(item, "default", row->default_text);
        cJSON_AddBoolToObject(item, "lossy", row->lossy);
        cJSON_AddBoolToObject(item, "accepts_auto", row->accepts_auto);
        cJSON_AddBoolToObject(item, "needs_stream", row->needs_stream);
        if (row->env)
            cJSON_AddStringToObject(item, "env", row->env);
        cJSON *jobs = cJSON_AddArrayToObject(item, "jobs");
        for (size_t j = 0; j < sizeof params_job_names / sizeof params_job_names[0]; j++)
            if (row->jobs & (1u << j))
                cJSON_AddItemToArray(jobs, cJSON_CreateString(params_job_names[j]));
        cJSON_AddStringToObject(item, "help", row->help ? row->help : "");
    }
    return params_emit(out, document);
}

/* A value as JSON, typed as the row says when the text reads as that type. */
static cJSON *params_value_json(const param_def *row, const char *text)
{
    if (row->type == PARAM_SWITCH)
        return cJSON_CreateBool(text != NULL);
    if (!text)
        return row->default_text ? cJSON_CreateString(row->default_text) : cJSON_CreateNull();
    if (row->type == PARAM_INT || row->type == PARAM_FLOAT || row->type == PARAM_MIB || row->type == PARAM_U64) {
        char *end = NULL;
        double number = strtod(text, &end);
        if (end != text && *end == '\0')
            return cJSON_CreateNumber(number);
    }
    return cJSON_CreateString(text);
}

int params_config_json(FILE *out, const param_values *values, unsigned jobs, int argc, char **argv,
                       const char *extra_key, const char *extra_json)
{
    size_t count = 0;
    const param_def *rows = params_table(&count);
    cJSON *document = cJSON_CreateObject();
    cJSON_AddStringToObject(document, "schema", "bmoe-config/1");
    cJSON *config = cJSON_AddObjectToObject(document, "config");
    for (size_t i = 0; config && i < count; i++) {
        const param_def *row = &rows[i];
        if (row->id == P_UNAVAILABLE || row->jobs == 0 || (jobs && !(row->jobs & jobs)) ||
            row->group == PARAM_GROUP_PROGRAM)
            continue;
        const param_value *value = &values->value[row->id];
        cJSON *item = cJSON_AddObjectToObject(config, row->key);
        if (!item)
            break;
        cJSON_AddItemToObject(item, "value", params_value_json(row, value->text));
        cJSON_AddStringToObject(item, "source", params_source_name(value->text ? value->source : PARAM_SOURCE_DEFAULT));
    }
    cJSON *args = cJSON_AddArrayToObject(document, "args");
    for (int i = 1; args && i < argc; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(argv[i]));
    if (extra_key && extra_json) {
        cJSON *extra = cJSON_Parse(extra_json);
        if (!extra) {
            cJSON_Delete(document);
            return -1;
        }
        cJSON_AddItemToObject(document, extra_key, extra);
    }
    cJSON_AddBoolToObject(document, "valid", true);
    return params_emit(out, document);
}
