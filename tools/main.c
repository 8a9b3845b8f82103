/* tools/main.c - the `tilegraph` command: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    puts("tilegraph: under construction");
    return 0;
}
