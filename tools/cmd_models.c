/* tools/cmd_models.c - `tilegraph models`: list the built-in models. */
#include "cli.h"

#include "tilegraph/models.h"

int cmd_models(int argc, char **argv)
{
    bool json = false;
    cli_flag flags[] = {{"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0}};
    cli_command cmd = {
        "models", "List the built-in models.", "tilegraph models [--json]", NULL, flags, 1};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (json)
        printf("[");
    for (int i = 0; i < tg_model_count(); i++) {
        const tg_model_spec *m = tg_model_at(i);
        if (json)
            printf("%s{\"name\":\"%s\",\"input\":[%d,%d,%d],\"classes\":%d}", i ? "," : "", m->name,
                   m->channels, m->height, m->width, m->classes);
        else
            printf("%-16s %dx%dx%d -> %d classes  %s\n", m->name, m->channels, m->height, m->width,
                   m->classes, m->description);
    }
    if (json)
        printf("]\n");
    return 0;
}
