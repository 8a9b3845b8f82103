/* tools/cmd_options.c - `tilegraph options`: every option, its flag, its
 * default and what it does, from the one table the library validates against. */
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
        printf("| option | flag | default | meaning |\n| --- | --- | --- | --- |\n");
    for (int i = 0; i < tg_options_count(); i++) {
        const char *key = tg_options_key(i), *flag = tg_options_flag(key);
        if (markdown)
            printf("| `%s` | %s%s%s | `%s` | %s |\n", key, flag ? "`" : "", flag ? flag : "",
                   flag ? "`" : "", *tg_options_default(i) ? tg_options_default(i) : "\"\"",
                   tg_options_description(i));
        else if (json) {
            printf("%s{\"key\":\"%s\",\"default\":\"%s\",\"flag\":", i ? "," : "", key,
                   tg_options_default(i));
            if (flag)
                cli_json_string(flag);
            else
                printf("null");
            printf("}");
        } else
            printf("%-*s  %-8s  %s%s%s\n", width, key,
                   *tg_options_default(i) ? tg_options_default(i) : "\"\"",
                   tg_options_description(i), flag ? "; flag " : "", flag ? flag : "");
    }
    if (json)
        printf("]\n");
    return 0;
}
