#include "tm_profile.h"

bool tm_profile_warm(bmoe_model *model, const char *path, FILE *log, const char *who)
{
    bmoe_error error = {0};
    int warming = bmoe_model_load_expert_profile(model, path, &error);
    if (log && warming > 0)
        fprintf(log, "%s: expert profile %s: %d experts read into the cache in the background\n", who, path,
                warming);
    else if (log && warming < 0)
        fprintf(log, "%s: warning: %s; starting cold, the profile left as it is\n", who, error.message);
    return warming >= 0;
}
