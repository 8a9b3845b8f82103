/* tools/analyse_args.c - shared flags and argument splitting for
 * `tilegraph analyse` and `tilegraph compare`. */
#include "analyse_args.h"

#include <stdlib.h>
#include <string.h>

int analyse_flags(analyse_args *a, cli_flag *flags, bool with_force)
{
    memset(a, 0, sizeof *a);
    a->device = -1;
    a->step = -1;
    a->top = 20;
    a->tile = -1;
    a->instance = -1;
    int n = 0;
    flags[n++] = (cli_flag){"--device", CLI_INT, &a->device, "N", "only device N (all when unset)",
                            0,          4096,    NULL};
    flags[n++] =
        (cli_flag){"--step",
                   CLI_INT,
                   &a->step,
                   "N",
                   "liveness: the program step to list live tensors at (the peak when unset)",
                   0,
                   1e9,
                   NULL};
    flags[n++] = (cli_flag){
        "--op", CLI_STRING, &a->op, "NAME", "only ops and tensors whose name contains NAME",
        1,      0,          NULL};
    flags[n++] = (cli_flag){"--top", CLI_INT, &a->top, "N", "rows in 'largest' and 'top' lists",
                            1,       1e6,     NULL};
    flags[n++] = (cli_flag){"--tile",
                            CLI_INT,
                            &a->tile,
                            "N",
                            "tiled targets, memory view: what tile N of each device holds",
                            0,
                            1e6,
                            NULL};
    flags[n++] = (cli_flag){"--no-group",
                            CLI_BOOL,
                            &a->no_group,
                            NULL,
                            "trace: every execution on its own row, not repeated ones grouped",
                            1,
                            0,
                            NULL};
    flags[n++] = (cli_flag){"--instance",
                            CLI_INT,
                            &a->instance,
                            "K",
                            "an MPI job's directory: instance K's profile (instance 0 when unset)",
                            0,
                            1e6,
                            NULL};
    flags[n++] =
        (cli_flag){"--json", CLI_BOOL, &a->json, NULL, "print JSON for scripts", 1, 0, NULL};
    if (with_force)
        flags[n++] = (cli_flag){"--force",
                                CLI_BOOL,
                                &a->force,
                                NULL,
                                "compare profiles of different targets or program kinds",
                                1,
                                0,
                                NULL};
    return n;
}

int analyse_parse(const cli_command *cmd, analyse_args *a, int argc, char **argv)
{
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) {
        fprintf(stderr, "tilegraph %s: out of memory\n", cmd->name);
        return -1;
    }
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (s[0] == '-' && s[1]) {
            rest[n++] = argv[i];
            /* a flag with a value in the next argument takes it along */
            if (!strchr(s, '='))
                for (int k = 0; k < cmd->n_flags; k++)
                    if (!strcmp(cmd->flags[k].name, s) && cmd->flags[k].type != CLI_BOOL &&
                        i + 1 < argc) {
                        rest[n++] = argv[++i];
                        break;
                    }
        } else if (a->n_positional < (int)(sizeof a->positional / sizeof a->positional[0])) {
            a->positional[a->n_positional++] = s;
        } else {
            fprintf(stderr, "tilegraph %s: too many arguments at '%s'\n", cmd->name, s);
            free(rest);
            return -1;
        }
    }
    int r = cli_parse(cmd, n, rest);
    free(rest);
    return r;
}

void analyse_filter(const analyse_args *a, tg_view_filter *f)
{
    tg_view_filter_defaults(f);
    f->device = (int)a->device;
    f->step = (int)a->step;
    f->op = a->op;
    f->top = (int)a->top;
    f->by_tile = a->tile >= 0;
    f->tile = f->by_tile ? (int)a->tile : 0;
    f->no_group = a->no_group;
}

int analyse_print(const tg_view *v, bool json)
{
    if (!json) {
        tg_view_print_text(v, stdout);
        return 0;
    }
    if (tg_view_print_json(v, stdout) != TG_OK) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        return 1;
    }
    return 0;
}
