/* tools/analyse_args.h - the flags `analyse` and `compare` share (filters,
 * --json), and separating positional arguments (REPORT, VIEW) from flags,
 * which the table-driven parser does not take. */
#ifndef TG_TOOLS_ANALYSE_ARGS_H
#define TG_TOOLS_ANALYSE_ARGS_H

#include "cli.h"

#include "tilegraph/analyse.h"

enum { ANALYSE_MAX_FLAGS = 10 };

typedef struct analyse_args {
    int64_t device, step, top, tile, instance;
    const char *op;
    bool json, force, no_group;
    const char *positional[8];
    int n_positional;
} analyse_args;

/* Fill `flags` (room for ANALYSE_MAX_FLAGS) for `a`; returns how many. `with_force` adds --force.
 */
int analyse_flags(analyse_args *a, cli_flag *flags, bool with_force);
/* Parse: flags through cli_parse, the rest into a->positional. Returns as cli_parse
 * (0 ok, 1 help printed, -1 error printed). */
int analyse_parse(const cli_command *cmd, analyse_args *a, int argc, char **argv);
void analyse_filter(const analyse_args *a, tg_view_filter *f);
/* Print one view as text or JSON. */
int analyse_print(const tg_view *v, bool json);

#endif
