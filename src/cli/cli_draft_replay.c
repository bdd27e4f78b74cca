/* --draft-replay: a draft source whose acceptance is known in advance, so
 * that a benchmark can price speculative decoding's verify batches apart
 * from any drafter's luck. The list is a previous run's generated ids
 * (--ids-out): replayed, its tokens are exactly what plain decoding
 * samples when the run repeats that one (same model, prompt, sampling and
 * seed), so every draft is accepted; shifted by one id, none is. It drafts
 * through the library's draft callback: the output stays plain decoding's
 * whatever the list holds, only the cost moves. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "cli.h"

/* The longest list --prompt-ids takes (1 << 20 ids), each of up to 10 digits and a comma. */
#define CLI_DRAFT_REPLAY_MAX_BYTES ((size_t)11 << 20)

int cli_draft_replay_load(cli_draft_replay *replay, const char *path, bool reject, double rate)
{
    memset(replay, 0, sizeof *replay);
    replay->reject = reject;
    replay->rate = rate;
    char *text = NULL;
    size_t length = 0;
    bmoe_error error = {0};
    if (bmoe_read_file(path, CLI_DRAFT_REPLAY_MAX_BYTES, &text, &length, &error) != 0) {
        cli_fail("--draft-replay: %s", error.message);
        return -1;
    }
    /* --ids-out ends its line; an editor may add more blank space */
    while (length > 0 && isspace((unsigned char)text[length - 1]))
        text[--length] = '\0';
    char name[1100];
    snprintf(name, sizeof name, "--draft-replay %s", path);
    int status = cli_parse_ids(name, text, &replay->ids, &replay->n_ids);
    bmoe_free(text);
    if (status != 0)
        return -1;
    if (replay->n_ids == 0) {
        cli_fail("%s holds no token ids (write them with --ids-out)", name);
        cli_draft_replay_free(replay);
        return -1;
    }
    return 0;
}

int cli_draft_replay_check(cli_draft_replay *replay, const char *path, int32_t n_vocab)
{
    replay->n_vocab = n_vocab;
    for (int32_t i = 0; i < replay->n_ids; i++) {
        if (replay->ids[i] >= n_vocab) {
            cli_fail("--draft-replay %s: id %d (number %d) is outside the model's vocabulary of %d", path,
                     replay->ids[i], i + 1, n_vocab);
            return -1;
        }
    }
    return 0;
}

void cli_draft_replay_free(cli_draft_replay *replay)
{
    free(replay->ids);
    replay->ids = NULL;
    replay->n_ids = 0;
}

/* Whether the draft of the list's place at is the list's id: never in
 * reject mode, else with probability rate, from a hash of the place alone,
 * so every run and every --draft of one list drafts it the same way. */
static bool kept_right(const cli_draft_replay *replay, int32_t at)
{
    if (replay->reject)
        return false;
    if (replay->rate >= 1.0)
        return true;
    uint64_t place = (uint64_t)at;
    return hash_draw(fnv1a(FNV1A_START, &place, sizeof place)) < replay->rate;
}

int32_t cli_draft_replay_propose(void *user, const int32_t *history, int32_t n_history, int32_t *drafts,
                                 int32_t max_drafts)
{
    (void)history;
    const cli_draft_replay *replay = user;
    /* history ends with the generated token about to be evaluated: the
     * list's tokens from index generated on are the ones after it */
    int32_t generated = n_history - replay->n_prompt;
    if (generated < 1)
        return 0;
    int32_t count = 0;
    for (int32_t at = generated; at < replay->n_ids && count < max_drafts; at++) {
        int32_t id = replay->ids[at];
        drafts[count++] = kept_right(replay, at) ? id : (id + 1) % replay->n_vocab;
    }
    return count;
}
