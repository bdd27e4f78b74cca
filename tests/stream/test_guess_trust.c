/* The verdict on a predictor's guesses: a few right ones do not earn trust,
 * a long run of them does; once trusted, a share right between the two
 * thresholds keeps it and a lower share loses it; untrusted, that middle
 * share never earns it; the judge says when the verdict changes and only
 * then. */
#include "stream/guess_trust.h"
#include "test.h"

/* Judges n guesses, right in the pattern `right of every period`; returns
 * how many times the verdict changed. */
static int judge_pattern(guess_trust *trust, int n, int right, int period)
{
    int changes = 0;
    for (int i = 0; i < n; i++)
        changes += guess_trust_judge(trust, i % period < right);
    return changes;
}

int main(void)
{
    guess_trust trust = {0};
    CHECK(!trust.trusted);
    CHECK(judge_pattern(&trust, 10, 1, 1) == 0 && !trust.trusted);
    CHECK(judge_pattern(&trust, 200, 1, 1) == 1 && trust.trusted);
    /* 80 % right: between the thresholds, trust kept */
    CHECK(judge_pattern(&trust, 500, 4, 5) == 0 && trust.trusted);
    /* two right in three: trust lost, once */
    CHECK(judge_pattern(&trust, 500, 2, 3) == 1 && !trust.trusted);
    /* 80 % right from distrust: never trusted */
    CHECK(judge_pattern(&trust, 1000, 4, 5) == 0 && !trust.trusted);
    /* wrong guesses only, from trust: lost within a window's few dozen */
    guess_trust sure = {0};
    judge_pattern(&sure, 300, 1, 1);
    CHECK(sure.trusted);
    int wrong = 0;
    while (sure.trusted && wrong < 1000)
        guess_trust_judge(&sure, false), wrong++;
    CHECK_MSG(wrong > 1 && wrong <= GUESS_TRUST_WINDOW, "trust lost after %d wrong guesses", wrong);
    return test_finish();
}
