/* Python's two string formatting languages: "%s and %d" % args and
 * "{} and {name:>8}".format(...). */
#ifndef BMOE_CHAT_STRING_FORMAT_H
#define BMOE_CHAT_STRING_FORMAT_H

#include "chat/callables.h"
#include "chat/value.h"

struct render;

/* format % arguments (a tuple, a dict for %(name)s, or one value). */
int percent_format(struct render *render, int line, chat_value format, chat_value arguments, chat_value *result);
/* format.format(*positional, **keywords). */
int brace_format(struct render *render, const struct expression *node, chat_value format,
                 const struct call_arguments *arguments, chat_value *result);

#endif
