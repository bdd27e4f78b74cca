/* An app's side of --expert-profile: read the profile into the cache at
 * load, telling the user what happened, and write it back at the end. One
 * piece for bmoe-cli, the session and bmoe-server. */
#ifndef BMOE_TM_PROFILE_H
#define BMOE_TM_PROFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "bmoe.h"

/* Starts warming the cache from the profile at path, logging to log (NULL:
 * silent) as who. A profile that cannot be used (another model's, corrupt)
 * is a warning, not an error: the run starts cold. Returns whether the
 * profile may be written at the end (false: it is left as it is, so a file
 * that is not a profile is never overwritten). */
bool tm_profile_warm(bmoe_model *model, const char *path, FILE *log, const char *who);

#endif
