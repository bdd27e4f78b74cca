/* The per-layer layout of tm_layout.h, read from the tensor table that
 * bmoe_describe_file prints: after a "tensor table:" line and its column
 * header, one row per tensor:
 *   <index>  <name>  <type>  {<shape>}  <shard>  <offset>  <bytes>
 * The streamed expert matrices are blk.<L>.ffn_{gate,up,down}_exps.weight. */
#include "tm_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tm_layout_free(tm_layout *layout)
{
    free(layout->expert_bytes);
    free(layout->dense_bytes);
    memset(layout, 0, sizeof *layout);
}

static int tm_layout_alloc(tm_layout *layout, int32_t n_layer)
{
    memset(layout, 0, sizeof *layout);
    layout->n_layer = n_layer;
    size_t count = n_layer > 0 ? (size_t)n_layer : 1;
    layout->expert_bytes = calloc(count, sizeof *layout->expert_bytes);
    layout->dense_bytes = calloc(count, sizeof *layout->dense_bytes);
    if (!layout->expert_bytes || !layout->dense_bytes) {
        tm_layout_free(layout);
        return -1;
    }
    return 0;
}

static bool tm_is_streamed_matrix(const char *rest)
{
    return strcmp(rest, "ffn_gate_exps.weight") == 0 || strcmp(rest, "ffn_up_exps.weight") == 0 ||
           strcmp(rest, "ffn_down_exps.weight") == 0;
}

/* One table row: the tensor's name and bytes. Returns 0, or -1 when the
 * line is not a row. */
static int tm_parse_row(const char *line, char *name, size_t name_size, unsigned long long *bytes)
{
    const char *c = line;
    while (*c == ' ')
        c++;
    if (*c < '0' || *c > '9')
        return -1;
    while (*c >= '0' && *c <= '9')
        c++;
    while (*c == ' ')
        c++;
    size_t length = 0;
    while (c[length] && c[length] != ' ' && c[length] != '\n')
        length++;
    if (length == 0 || length >= name_size)
        return -1;
    memcpy(name, c, length);
    name[length] = '\0';
    const char *shape_end = strchr(c + length, '}');
    const char *line_end = strchr(c, '\n');
    if (!shape_end || (line_end && shape_end > line_end))
        return -1;
    /* shard, offset, bytes */
    const char *cursor = shape_end + 1;
    unsigned long long value = 0;
    for (int field = 0; field < 3; field++) {
        char *end = NULL;
        value = strtoull(cursor, &end, 10);
        if (end == cursor)
            return -1;
        cursor = end;
    }
    *bytes = value;
    return 0;
}

int tm_layout_parse(tm_layout *layout, const char *text, int32_t n_layer, int32_t n_expert)
{
    if (tm_layout_alloc(layout, n_layer) != 0)
        return -1;
    const char *table = strstr(text, "tensor table:\n");
    if (!table || n_expert < 0)
        return -1;
    const char *line = strchr(table, '\n') + 1; /* the column header */
    line = strchr(line, '\n');
    if (!line)
        return -1;
    line++;
    char name[512];
    for (; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        unsigned long long bytes = 0;
        if (tm_parse_row(line, name, sizeof name, &bytes) != 0)
            break; /* the table ended */
        if (strncmp(name, "blk.", 4) != 0)
            continue;
        char *end = NULL;
        long layer = strtol(name + 4, &end, 10);
        if (end == name + 4 || *end != '.' || layer < 0 || layer >= n_layer)
            return -1;
        if (tm_is_streamed_matrix(end + 1)) {
            if (n_expert <= 0 || bytes % (unsigned long long)n_expert != 0)
                return -1;
            layout->expert_bytes[layer] += bytes / (unsigned long long)n_expert;
        } else {
            layout->dense_bytes[layer] += bytes;
        }
    }
    return 0;
}

uint64_t tm_layout_token_demand(const tm_layout *layout, int32_t n_expert_used)
{
    uint64_t total = 0;
    if (!layout->known)
        return 0;
    for (int32_t il = 0; il < layout->n_layer; il++)
        total += layout->expert_bytes[il] * (uint64_t)n_expert_used;
    return total;
}

uint64_t tm_layout_layer_demand(const tm_layout *layout, int32_t n_expert_used)
{
    uint64_t widest = 0;
    if (!layout->known)
        return 0;
    for (int32_t il = 0; il < layout->n_layer; il++)
        if (layout->expert_bytes[il] * (uint64_t)n_expert_used > widest)
            widest = layout->expert_bytes[il] * (uint64_t)n_expert_used;
    return widest;
}

int tm_layout_read(tm_layout *layout, const char *path, const bmoe_model *model)
{
    bmoe_model_info info;
    bmoe_model_get_info(model, &info);
    memset(layout, 0, sizeof *layout);
    char *text = NULL;
    size_t length = 0;
    FILE *memory = open_memstream(&text, &length);
    if (!memory)
        return -1;
    bmoe_error error = {0};
    int described = bmoe_describe_file(path, memory, &error);
    if (fclose(memory) != 0 || !text) {
        free(text);
        return -1;
    }
    int parsed = -1;
    if (described == 0)
        parsed = tm_layout_parse(layout, text, info.n_layer, info.n_expert);
    else if (tm_layout_alloc(layout, info.n_layer) != 0)
        layout->expert_bytes = NULL;
    free(text);
    if (!layout->expert_bytes)
        return -1; /* out of memory */
    if (parsed != 0)
        return 0;
    /* agree with what the library reports, or stay unknown */
    uint64_t widest = 0;
    for (int32_t il = 0; il < layout->n_layer; il++)
        if (layout->expert_bytes[il] > widest)
            widest = layout->expert_bytes[il];
    /* the library prices the slice from the expert views, which a streamed
     * model no longer maps (then it reports 0 and the store's cycle checks) */
    bmoe_stream_state state;
    bmoe_model_get_stream_state(model, &state);
    bool slice_agrees = info.expert_slice_bytes == 0 ? state.streaming : widest == info.expert_slice_bytes;
    layout->known = true;
    if (!slice_agrees || (state.streaming && tm_layout_token_demand(layout, info.n_expert_used) != state.cycle_bytes))
        layout->known = false;
    return 0;
}
