/* tools/cmd_options.c - `tilegraph options`: every option, its default and
 * what it does, from the one table the library validates against. */
#include "cli.h"

#include "tilegraph/options.h"

#include <string.h>

int cmd_options(int argc, char **argv)
{
    bool json = false, markdown = false;
    cli_flag flags[] = {{"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0, NULL},
                        {"--markdown", CLI_BOOL, &markdown, NULL,
                         "print the table of docs/options.md", 1, 0, NULL}};
    cli_command cmd = {"options",
                       "List the session options (the keys of --options FILE).",
                       "tilegraph options [--json | --markdown]",
                       NULL,
                       flags,
                       2};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    int width = 0;
    for (int i = 0; i < tg_options_count(); i++)
        if ((int)strlen(tg_options_key(i)) > width)
            width = (int)strlen(tg_options_key(i));
    if (json)
        printf("[");
    if (markdown)
        printf("| option | default | meaning |\n| --- | --- | --- |\n");
    for (int i = 0; i < tg_options_count(); i++) {
        if (markdown)
            printf("| `%s` | `%s` | %s |\n", tg_options_key(i),
                   *tg_options_default(i) ? tg_options_default(i) : "\"\"",
                   tg_options_description(i));
        else if (json)
            printf("%s{\"key\":\"%s\",\"default\":\"%s\"}", i ? "," : "", tg_options_key(i),
                   tg_options_default(i));
        else
            printf("%-*s  %-8s  %s\n", width, tg_options_key(i),
                   *tg_options_default(i) ? tg_options_default(i) : "\"\"",
                   tg_options_description(i));
    }
    if (json)
        printf("]\n");
    return 0;
}
