/* bmoe-cli: the command-line front end. Parses flags, then hands the work to
 * the library. Every failure is one line on stderr and a non-zero exit. */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: bmoe-cli --info MODEL\n"
            "  --info MODEL   print metadata, tensor table and totals of a GGUF model\n");
}

static int run_info(const char *path)
{
    bmoe_error err;
    error_clear(&err);
    gguf_model *model = gguf_open(path, &err);
    if (!model) {
        fprintf(stderr, "bmoe-cli: %s\n", err.message);
        return 1;
    }
    gguf_print_info(model, stdout);
    gguf_close(model);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--info") == 0)
        return run_info(argv[2]);
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        print_usage(stdout);
        return 0;
    }
    print_usage(stderr);
    return 2;
}
