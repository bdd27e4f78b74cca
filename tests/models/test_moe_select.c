/* Grouped top-k expert selection (moe_select_experts, architectures.md 1.9
 * step 4) on hand-made keys: a group scores the sum of its two highest keys
 * (not its best key, not its whole sum), only the best groups' experts are
 * eligible however high another group's best expert, excluded experts lose
 * to eligible ones even when every key is negative, and one group (or none)
 * is the plain top-k. */
#include <math.h>

#include "models/model.h"
#include "models/route_levers.h"
#include "test.h"

static bool same(const int32_t *experts, const int32_t *expected, int n)
{
    for (int k = 0; k < n; k++)
        if (experts[k] != expected[k])
            return false;
    return true;
}

int main(void)
{
    int32_t experts[8];

    /* groups {0,1} {2,3} {4,5} {6,7} score 0.9, 1.0, 0.92, 0.2: groups 1 and 2
     * are kept, and expert 0, the best of all, is not eligible */
    const float spread[8] = {0.9f, 0.0f, 0.5f, 0.5f, 0.46f, 0.46f, 0.1f, 0.1f};
    moe_select_experts(spread, 8, 3, 4, 2, experts);
    CHECK(same(experts, (const int32_t[]){2, 3, 4}, 3)); /* the tie 2, 3 to the lower index */
    moe_select_experts(spread, 8, 4, 4, 2, experts);
    CHECK(same(experts, (const int32_t[]){2, 3, 4, 5}, 4));

    /* the two highest keys decide: group 0 {0.8, 0.1, 0.1, 0.1} has the best
     * key and the larger sum (1.1), group 1 {0.5, 0.5, 0, 0} the larger top-2 (1.0 > 0.9) */
    const float top2[8] = {0.8f, 0.1f, 0.1f, 0.1f, 0.5f, 0.5f, 0.0f, 0.0f};
    moe_select_experts(top2, 8, 2, 2, 1, experts);
    CHECK(same(experts, (const int32_t[]){4, 5}, 2));

    /* every key negative (sigmoid scores plus a negative selection bias):
     * the excluded group's experts still rank below the kept group's */
    const float negative[4] = {-0.5f, -0.6f, -0.1f, -0.2f};
    moe_select_experts(negative, 4, 2, 2, 1, experts);
    CHECK(same(experts, (const int32_t[]){2, 3}, 2));
    const float negative_first[4] = {-0.1f, -0.2f, -0.5f, -0.6f};
    moe_select_experts(negative_first, 4, 2, 2, 1, experts);
    CHECK(same(experts, (const int32_t[]){0, 1}, 2));

    /* the order within the result is the keys' order across the kept groups */
    const float interleaved[8] = {0.3f, 0.7f, 0.0f, 0.0f, 0.6f, 0.5f, 0.2f, 0.1f};
    moe_select_experts(interleaved, 8, 4, 4, 2, experts);
    CHECK(same(experts, (const int32_t[]){1, 4, 5, 0}, 4));

    /* no groups, or one: the plain top-k */
    int32_t plain[8];
    route_top_k(spread, 8, 4, plain);
    moe_select_experts(spread, 8, 4, 0, 0, experts);
    CHECK(same(experts, plain, 4));
    moe_select_experts(spread, 8, 4, 1, 1, experts);
    CHECK(same(experts, plain, 4));
    CHECK(same(plain, (const int32_t[]){0, 2, 3, 4}, 4));

    /* 256 experts in 8 groups, 4 kept, top-8 (Ling-mini-2.0's shape): every
     * chosen expert lies in a kept group, and the choice is the top-8 of those */
    float keys[256];
    for (int e = 0; e < 256; e++)
        keys[e] = sinf((float)e * 12.9898f) * 0.5f + 0.5f;
    int32_t chosen[8];
    moe_select_experts(keys, 256, 8, 8, 4, chosen);
    bool group_used[8] = {false};
    for (int k = 0; k < 8; k++)
        group_used[chosen[k] / 32] = true;
    int n_groups = 0;
    for (int g = 0; g < 8; g++)
        n_groups += group_used[g];
    CHECK_MSG(n_groups <= 4, "the top-8 spans %d groups", n_groups);
    for (int k = 1; k < 8; k++)
        CHECK(keys[chosen[k - 1]] >= keys[chosen[k]]);
    return test_finish();
}
