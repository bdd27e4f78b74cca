/* --session: stub */
#include "cli.h"
int cli_run_session(const cli_options *options)
{
    (void)options;
    return cli_fail("--session: not yet");
}
