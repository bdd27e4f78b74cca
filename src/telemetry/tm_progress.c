/* The per-token lines of tm_progress.h, keys in the contract's order. */
#include "tm_progress.h"

#include <inttypes.h>

#include "tm_json.h"

#define TM_MIB 1048576.0

bool tm_progress_load_line(tm_buffer *out, const tm_token *token)
{
    /* the contract: only on tokens that read expert bytes (lane time without
     * a read, e.g. a cancelled guess, is not a load) */
    if (token->read_bytes == 0)
        return false;
    tm_buffer_append_string(out, "BMOE_LOAD {\"mb\":");
    tm_json_number(out, (double)token->read_bytes / TM_MIB, 3, 0.0);
    tm_buffer_append_string(out, ",\"ms\":");
    tm_json_number(out, token->io_ms, 3, 0.0);
    tm_buffer_append_string(out, "}\n");
    return true;
}

static void tm_key_number(tm_buffer *out, const char *key, double value, int decimals, double fallback)
{
    tm_buffer_printf(out, ",\"%s\":", key);
    tm_json_number(out, value, decimals, fallback);
}

void tm_progress_line(tm_buffer *out, const tm_token *token, const tm_deltas *deltas)
{
    tm_buffer_printf(out, "BMOE_PROGRESS {\"step\":%" PRId32 ",\"steps\":%" PRId32, token->step, token->steps);
    tm_key_number(out, "wall_ms", token->wall_ms, 3, 0.0);
    tm_key_number(out, "io_ms", token->io_ms, 3, 0.0);
    tm_key_number(out, "compute_ms", token->compute_ms, 3, 0.0);
    tm_key_number(out, "mgmt_ms", token->mgmt_ms, 3, 0.0);
    tm_key_number(out, "stall_ms", token->stall_ms, 3, 0.0);
    tm_key_number(out, "read_mb", (double)token->read_bytes / TM_MIB, 3, 0.0);
    tm_key_number(out, "cache_hit_pct", token->cache_hit_pct, 2, -1.0);
    tm_buffer_printf(out, ",\"majflt\":%" PRId64, token->majflt);
    tm_key_number(out, "cpu_ms", token->cpu_ms, 3, 0.0);
    tm_key_number(out, "dense_resident_frac", token->dense_resident_frac, 3, -1.0);
    if (deltas && deltas->reset)
        tm_buffer_append_string(out, ",\"reset\":1");
    tm_buffer_append_string(out, ",\"delta_reasoning\":");
    if (deltas && deltas->reasoning)
        tm_json_string(out, deltas->reasoning, deltas->reasoning_length);
    else
        tm_json_string(out, "", 0);
    tm_buffer_append_string(out, ",\"delta_text\":");
    if (deltas && deltas->text)
        tm_json_string(out, deltas->text, deltas->text_length);
    else
        tm_json_string(out, "", 0);
    tm_buffer_append_string(out, "}\n");
}
