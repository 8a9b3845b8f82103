/* tools/cmd_models.c - `tilegraph models`: list the built-in models. */
#include "cli.h"

#include "tilegraph/models.h"

int cmd_models(int argc, char **argv)
{
    bool json = false;
    cli_flag flags[] = {{"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0, NULL}};
    cli_command cmd = {
        "models", "List the built-in models.", "tilegraph models [--json]", NULL, flags, 1};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (json)
        printf("[");
    for (int i = 0; i < tg_model_count(); i++) {
        const tg_model_spec *m = tg_model_at(i);
        bool lm = tg_model_task_tokens(m->task);
        if (json && lm)
            printf("%s{\"name\":\"%s\",\"task\":\"%s\",\"seq_len\":%d,\"vocab\":%d}", i ? "," : "",
                   m->name, m->task == TG_TASK_CAUSAL_LM ? "causal-lm" : "masked-lm", m->seq_len,
                   m->classes);
        else if (lm)
            printf("%-16s %d tokens, vocabulary %d  %s\n", m->name, m->seq_len, m->classes,
                   m->description);
        else if (json)
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
