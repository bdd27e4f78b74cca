/* bmoe-mkmodel: placeholder until the generator lands. */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "bmoe-mkmodel: not implemented yet\n");
    return 1;
}
