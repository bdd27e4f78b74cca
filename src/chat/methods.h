/* The str methods templates call (methods_string.c), exposed to the method
 * table of methods.c. */
#ifndef BMOE_CHAT_METHODS_H
#define BMOE_CHAT_METHODS_H

#include "chat/filters.h"

#define METHOD(name)                                                                                           \
    int name(struct render *render, const struct expression *node, chat_value receiver,                       \
             const struct call_arguments *arguments, chat_value *result)

METHOD(string_capitalize);
METHOD(string_casefold);
METHOD(string_center);
METHOD(string_count);
METHOD(string_endswith);
METHOD(string_find);
METHOD(string_format);
METHOD(string_index);
METHOD(string_isalnum);
METHOD(string_isalpha);
METHOD(string_isdigit);
METHOD(string_islower);
METHOD(string_isspace);
METHOD(string_istitle);
METHOD(string_isupper);
METHOD(string_join);
METHOD(string_ljust);
METHOD(string_lower);
METHOD(string_lstrip);
METHOD(string_partition);
METHOD(string_removeprefix);
METHOD(string_removesuffix);
METHOD(string_replace);
METHOD(string_rfind);
METHOD(string_rindex);
METHOD(string_rjust);
METHOD(string_rpartition);
METHOD(string_rsplit);
METHOD(string_rstrip);
METHOD(string_split);
METHOD(string_splitlines);
METHOD(string_startswith);
METHOD(string_strip);
METHOD(string_swapcase);
METHOD(string_title);
METHOD(string_upper);
METHOD(string_zfill);

#endif
