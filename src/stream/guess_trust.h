#ifndef BMOE_STREAM_GUESS_TRUST_H
#define BMOE_STREAM_GUESS_TRUST_H

#include <stdbool.h>

/* Whether a predictor's guesses are right often enough to be read at the
 * disk's whole rate (io_lanes_trust_guesses): a decayed share of the guesses
 * the layer they were for used, trusted from GUESS_TRUST_ON on and no longer
 * below GUESS_TRUST_OFF (the gap keeps a share near one threshold from
 * switching the lanes at every guess). A wrong guess read whole costs a
 * demand read its place; one read in small pieces at a shallow depth costs
 * little, and so does a right one read that way while the disk is idle, but
 * a right one read that way is late where the reads bound the token. The
 * thresholds are not tuned: a never-wrong predictor gains, and the stale
 * gate on random weights stays below them, where the lanes' limits measured
 * no worse. */
#define GUESS_TRUST_WINDOW 32 /* guesses: the decay's time constant */
#define GUESS_TRUST_ON 0.90
#define GUESS_TRUST_OFF 0.75

typedef struct guess_trust {
    double right;  /* decayed share of guesses used, from 0 */
    bool trusted;
} guess_trust;

/* Counts one guess, used by its layer (right) or not. Returns true when the
 * verdict changed. */
bool guess_trust_judge(guess_trust *trust, bool right);

#endif
