#include "guess_trust.h"

bool guess_trust_judge(guess_trust *trust, bool right)
{
    trust->right += ((right ? 1.0 : 0.0) - trust->right) / GUESS_TRUST_WINDOW;
    bool trusted = trust->trusted ? trust->right >= GUESS_TRUST_OFF : trust->right >= GUESS_TRUST_ON;
    bool changed = trusted != trust->trusted;
    trust->trusted = trusted;
    return changed;
}
