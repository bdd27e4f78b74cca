/* N-gram drafting (draft_ngram.h): the longest earlier match of the
 * history's end, most recent on ties. */
#include "draft_ngram.h"

int32_t draft_ngram(const int32_t *history, int32_t n_history, int32_t min_match, int32_t max_match,
                    int32_t *drafts, int32_t max_drafts)
{
    if (n_history < 2 || max_drafts <= 0 || min_match < 1 || max_match < min_match)
        return 0;
    const int32_t *suffix_end = history + n_history - 1;
    int32_t best_length = 0, best_end = -1;
    /* end: the last token of a candidate match; the suffix itself (end
     * n_history - 1) is never a candidate. Walking from the most recent
     * means a later candidate replaces the best only when strictly longer. */
    for (int32_t end = n_history - 2; end >= 0; end--) {
        int32_t limit = end + 1 < max_match ? end + 1 : max_match;
        int32_t length = 0;
        while (length < limit && history[end - length] == suffix_end[-length])
            length++;
        if (length > best_length) {
            best_length = length;
            best_end = end;
            if (length == max_match)
                break; /* nothing earlier can beat it, and ties go to the recent one */
        }
    }
    if (best_length < min_match)
        return 0;
    int32_t count = 0;
    for (int32_t at = best_end + 1; at < n_history && count < max_drafts; at++)
        drafts[count++] = history[at];
    return count;
}
