/* tools/cmd_analyse.c - `tilegraph analyse REPORT [VIEW]`: the Graph
 * Analyser's views of a profile in the terminal (or as JSON). REPORT is a
 * profile.sqlite or the autoReport directory that holds one. */
#include "analyse_args.h"

#include <string.h>

int cmd_analyse(int argc, char **argv)
{
    analyse_args a;
    cli_flag flags[ANALYSE_MAX_FLAGS];
    int n = analyse_flags(&a, flags, false);
    char views[256], usage[400], list[256];
    tg_view_list(views, sizeof views, ", ", " or ", NULL);
    char desc[320];
    snprintf(desc, sizeof desc, "Show a profile's views: %s.", views);
    snprintf(usage, sizeof usage, "tilegraph analyse REPORT [%s] [options]",
             tg_view_list(list, sizeof list, "|", "|", NULL));
    char details[2048];
    int used = snprintf(
        details, sizeof details, "%s",
        "REPORT is a profile.sqlite file or a directory holding training/profile.sqlite (or\n"
        "inference/profile.sqlite), as written with autoReport.all, or an MPI job's --profile-dir\n"
        "(instance-K directories: instance 0, or --instance K; the instances view shows them\n"
        "all). The view defaults to summary.\nViews:\n");
    for (int i = 0; i < tg_view_count() && used > 0 && (size_t)used < sizeof details; i++)
        used += snprintf(details + used, sizeof details - (size_t)used, "  %-11s %s\n",
                         tg_view_name(i), tg_view_about(i));
    if (used > 0 && (size_t)used < sizeof details)
        snprintf(details + used, sizeof details - (size_t)used, "%s",
                 "Examples:\n  tilegraph analyse ./report trace\n  tilegraph analyse ./prof "
                 "instances");
    cli_command cmd = {"analyse", desc, usage, details, flags, n};
    int r = analyse_parse(&cmd, &a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (a.n_positional < 1 || a.n_positional > 2) {
        fprintf(stderr,
                "tilegraph analyse: expected REPORT [VIEW] (see tilegraph analyse --help)\n");
        return 2;
    }
    const char *view = a.n_positional > 1 ? a.positional[1] : "summary";
    if (!tg_view_known(view)) {
        fprintf(stderr, "tilegraph analyse: unknown view '%s' (%s)\n", view, views);
        return 2;
    }
    tg_profile_reader *rd = NULL;
    if (tg_analyse_open(a.positional[0], (int)a.instance, &rd) != TG_OK) {
        fprintf(stderr, "tilegraph analyse: %s\n", tg_error_message());
        return 1;
    }
    tg_view_filter f;
    analyse_filter(&a, &f);
    tg_view *v = NULL;
    int status = 0;
    tg_status bs = tg_view_build(rd, view, &f, &v);
    if (bs != TG_OK) {
        fprintf(stderr, "tilegraph analyse: %s\n", tg_error_message());
        status = bs == TG_ERR_INVALID_ARG ? 2 : 1; /* a bad filter (--tile) is a usage error */
    } else {
        status = analyse_print(v, a.json);
    }
    tg_view_destroy(v);
    tg_analyse_close(rd);
    return status;
}
