/* bmoe-cli --info: prints a model's metadata (long arrays and strings
 * abbreviated), its tensor table and totals, ending in a summary whose lines
 * are easy to grep ("tensors: 579", "layers: 48", "experts: 128 (8 used)",
 * "size: 17.28 GiB"). Owns nothing. */
#include "gguf_internal.h"

#include <inttypes.h>
#include <string.h>

#include "../base/text.h"
#include "../quant/quant.h"

/* Elements of an array shown before "... (N total)". */
#define INFO_ARRAY_SHOWN 8
/* Characters of a string value shown before it is cut. */
#define INFO_STRING_SHOWN 64

static void print_string(FILE *out, const uint8_t *bytes, uint64_t length)
{
    fputc('"', out);
    uint64_t shown = length < INFO_STRING_SHOWN ? length : INFO_STRING_SHOWN;
    while (shown < length && shown > 0 && (bytes[shown] & 0xc0) == 0x80)
        shown--; /* never cut a UTF-8 sequence */
    for (uint64_t i = 0; i < shown; i++) {
        uint8_t c = bytes[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out); /* UTF-8 passes through */
    }
    fputc('"', out);
    if (shown < length)
        fprintf(out, "... (%" PRIu64 " bytes)", length);
}

/* One value of the given type at p (for an array, p is its header). */
static void print_value(FILE *out, uint32_t type, const uint8_t *p)
{
    switch (type) {
    case GGUF_TYPE_STRING:
        print_string(out, p + 8, gguf_load_u64(p));
        return;
    case GGUF_TYPE_ARRAY: {
        uint32_t element_type = gguf_load_u32(p);
        uint64_t count = gguf_load_u64(p + 4);
        const uint8_t *element = p + 12;
        fputc('[', out);
        for (uint64_t i = 0; i < count && i < INFO_ARRAY_SHOWN; i++) {
            if (i)
                fputs(", ", out);
            print_value(out, element_type, element);
            element += gguf_element_size(element_type, element);
        }
        if (count > INFO_ARRAY_SHOWN)
            fprintf(out, ", ... (%" PRIu64 " total)", count);
        fputc(']', out);
        return;
    }
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: {
        double value;
        if (type == GGUF_TYPE_FLOAT32) {
            uint32_t bits = gguf_load_u32(p);
            float f;
            memcpy(&f, &bits, sizeof f);
            value = f;
        } else {
            uint64_t bits = gguf_load_u64(p);
            memcpy(&value, &bits, sizeof value);
        }
        fprintf(out, "%g", value);
        return;
    }
    case GGUF_TYPE_BOOL:
        fputs(p[0] ? "true" : "false", out);
        return;
    case GGUF_TYPE_UINT64:
        fprintf(out, "%" PRIu64, gguf_load_u64(p));
        return;
    case GGUF_TYPE_INT64:
        fprintf(out, "%" PRId64, (int64_t)gguf_load_u64(p));
        return;
    case GGUF_TYPE_UINT32:
        fprintf(out, "%" PRIu32, gguf_load_u32(p));
        return;
    case GGUF_TYPE_INT32:
        fprintf(out, "%" PRId32, (int32_t)gguf_load_u32(p));
        return;
    case GGUF_TYPE_UINT16:
        fprintf(out, "%u", (unsigned)gguf_load_u16(p));
        return;
    case GGUF_TYPE_INT16:
        fprintf(out, "%d", (int)(int16_t)gguf_load_u16(p));
        return;
    case GGUF_TYPE_UINT8:
        fprintf(out, "%u", (unsigned)p[0]);
        return;
    case GGUF_TYPE_INT8:
        fprintf(out, "%d", (int)(int8_t)p[0]);
        return;
    default:
        fputs("?", out);
    }
}

static void print_type_of(FILE *out, const gguf_kv *kv)
{
    if (kv->type != GGUF_TYPE_ARRAY) {
        fputs(gguf_type_name(kv->type), out);
        return;
    }
    fprintf(out, "ARRAY[%s x %" PRIu64 "]", gguf_type_name(kv->array_type), kv->array_count);
}

static void print_metadata(const gguf_model *model, FILE *out)
{
    fprintf(out, "metadata: %" PRIu64 " keys\n", gguf_kv_count(model));
    for (uint64_t i = 0; i < gguf_kv_count(model); i++) {
        const gguf_kv *kv = gguf_kv_at(model, i);
        char key[256];
        text_escape_string(kv->key, key, sizeof key);
        fprintf(out, "  %s: ", key);
        print_type_of(out, kv);
        fputs(" = ", out);
        print_value(out, kv->type, kv->type == GGUF_TYPE_ARRAY ? kv->payload - 12 : kv->payload);
        fputc('\n', out);
    }
}

static const char *type_name(uint32_t type)
{
    const quant_format *format = quant_format_of(type);
    return format ? format->name : "?";
}

static void print_tensors(const gguf_model *model, FILE *out)
{
    fprintf(out, "tensor table:\n  %5s  %-40s %-8s %-28s %5s %14s %14s\n", "#", "name", "type", "shape", "shard",
            "offset", "bytes");
    for (uint64_t i = 0; i < gguf_tensor_count(model); i++) {
        const gguf_tensor *tensor = gguf_tensor_at(model, i);
        char name[256], shape[96];
        text_escape_string(tensor->name, name, sizeof name);
        int used = snprintf(shape, sizeof shape, "{");
        for (uint32_t d = 0; d < tensor->n_dims && used < (int)sizeof shape; d++)
            used += snprintf(shape + used, sizeof shape - (size_t)used, "%s%" PRId64, d ? ", " : "",
                             tensor->ne[d]);
        if (used < (int)sizeof shape)
            snprintf(shape + used, sizeof shape - (size_t)used, "}");
        fprintf(out, "  %5" PRIu64 "  %-40s %-8s %-28s %5" PRIu32 " %14" PRIu64 " %14" PRIu64 "\n", i,
                name, type_name(tensor->type), shape, tensor->shard, tensor->file_offset, tensor->nbytes);
    }
}

static void print_arch_key(const gguf_model *model, FILE *out, const char *label, const char *arch,
                           const char *suffix)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t value;
    if (gguf_get_int(model, key, &value))
        fprintf(out, "%s: %" PRId64, label, value);
    else
        fprintf(out, "%s: ?", label);
}

bool gguf_tensor_is_expert(const gguf_tensor *tensor)
{
    return strstr(tensor->name, "_exps") != NULL;
}

static void print_totals(const gguf_model *model, FILE *out)
{
    uint64_t bytes_by_type[TYPE_COUNT] = {0}, tensors_by_type[TYPE_COUNT] = {0};
    uint64_t parameters = 0, total_bytes = 0, expert_bytes = 0, file_bytes = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(model); i++) {
        const gguf_tensor *tensor = gguf_tensor_at(model, i);
        /* The parser checked that this product fits in int64. */
        parameters += (uint64_t)(tensor->ne[0] * tensor->ne[1] * tensor->ne[2] * tensor->ne[3]);
        total_bytes += tensor->nbytes;
        if (tensor->type < TYPE_COUNT) {
            bytes_by_type[tensor->type] += tensor->nbytes;
            tensors_by_type[tensor->type]++;
        }
        if (gguf_tensor_is_expert(tensor))
            expert_bytes += tensor->nbytes;
    }
    for (uint32_t s = 0; s < gguf_shard_count(model); s++)
        file_bytes += gguf_shard_size(model, s);
    const double gib = 1024.0 * 1024.0 * 1024.0;

    fprintf(out, "totals:\n");
    for (uint32_t type = 0; type < TYPE_COUNT; type++)
        if (tensors_by_type[type])
            fprintf(out, "  bytes %-8s %14" PRIu64 " (%" PRIu64 " tensors, %.2f GiB)\n", type_name(type),
                    bytes_by_type[type], tensors_by_type[type], (double)bytes_by_type[type] / gib);
    fprintf(out, "  expert bytes   %14" PRIu64 " (%.2f GiB)\n", expert_bytes, (double)expert_bytes / gib);
    fprintf(out, "  dense bytes    %14" PRIu64 " (%.2f GiB)\n", total_bytes - expert_bytes,
            (double)(total_bytes - expert_bytes) / gib);

    gguf_string arch_string = {"", 0};
    char arch[128] = "";
    if (gguf_get_string(model, "general.architecture", &arch_string))
        text_escape(arch_string.data, (size_t)arch_string.length, arch, sizeof arch);
    fprintf(out, "summary:\n");
    fprintf(out, "architecture: %s\n", arch[0] ? arch : "?");
    fprintf(out, "tensors: %" PRIu64 "\n", gguf_tensor_count(model));
    if (parameters >= 1000000000)
        fprintf(out, "parameters: %" PRIu64 " (%.2f B)\n", parameters, (double)parameters / 1e9);
    else
        fprintf(out, "parameters: %" PRIu64 " (%.2f M)\n", parameters, (double)parameters / 1e6);
    print_arch_key(model, out, "layers", arch, "block_count");
    fputc('\n', out);
    print_arch_key(model, out, "experts", arch, "expert_count");
    char used_key[160];
    snprintf(used_key, sizeof used_key, "%s.expert_used_count", arch);
    int64_t used;
    if (gguf_get_int(model, used_key, &used))
        fprintf(out, " (%" PRId64 " used)\n", used);
    else
        fputc('\n', out);
    /* grouped routing: only a few groups' experts are eligible per token */
    char groups_key[160];
    snprintf(groups_key, sizeof groups_key, "%s.expert_group_count", arch);
    int64_t groups, groups_used;
    snprintf(used_key, sizeof used_key, "%s.expert_group_used_count", arch);
    if (gguf_get_int(model, groups_key, &groups) && groups > 1) {
        if (gguf_get_int(model, used_key, &groups_used))
            fprintf(out, "expert groups: %" PRId64 " (%" PRId64 " used)\n", groups, groups_used);
        else
            fprintf(out, "expert groups: %" PRId64 "\n", groups);
    }
    fprintf(out, "shards: %" PRIu32 "\n", gguf_shard_count(model));
    fprintf(out, "file bytes: %" PRIu64 "\n", file_bytes);
    fprintf(out, "size: %.2f GiB (%" PRIu64 " bytes of tensor data)\n", (double)total_bytes / gib, total_bytes);
}

void gguf_print_info(const gguf_model *model, FILE *out)
{
    fprintf(out, "file: %s (GGUF v%" PRIu32 ", %" PRIu32 " shard%s, alignment %" PRIu32 ")\n",
            gguf_shard_path(model, 0), gguf_version(model), gguf_shard_count(model),
            gguf_shard_count(model) == 1 ? "" : "s", gguf_alignment(model));
    print_metadata(model, out);
    print_tensors(model, out);
    print_totals(model, out);
}
