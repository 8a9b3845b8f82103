/* tools/cmd_compare.c - `tilegraph compare A B [VIEW]`: two profiles side
 * by side, with source, target and difference for every number, and rows
 * (tensors, ops) of one report only marked. Profiles of different targets
 * or program kinds are refused unless --force. */
#include "analyse_args.h"

#include <string.h>

static int compare_view(tg_profile_reader *ra, tg_profile_reader *rb, const char *view,
                        const tg_view_filter *f, int top, bool json)
{
    tg_view *va = NULL, *vb = NULL, *out = NULL;
    int status = 0;
    tg_status s = tg_view_build(ra, view, f, &va);
    if (s == TG_OK)
        s = tg_view_build(rb, view, f, &vb);
    if (s == TG_OK)
        s = tg_view_compare(va, vb, top, &out);
    if (s != TG_OK) {
        fprintf(stderr, "tilegraph compare: %s\n", tg_error_message());
        status = s == TG_ERR_INVALID_ARG ? 2 : 1; /* a bad filter (--tile) is a usage error */
    } else {
        status = analyse_print(out, json);
    }
    tg_view_destroy(va);
    tg_view_destroy(vb);
    tg_view_destroy(out);
    return status;
}

int cmd_compare(int argc, char **argv)
{
    analyse_args a;
    cli_flag flags[ANALYSE_MAX_FLAGS];
    int n = analyse_flags(&a, flags, true);
    char views[256], usage[400], list[256];
    tg_view_list(views, sizeof views, ", ", " or ", "all");
    snprintf(usage, sizeof usage, "tilegraph compare A B [%s] [options]",
             tg_view_list(list, sizeof list, "|", "|", "all"));
    cli_command cmd = {
        "compare",
        "Compare two profiles side by side, with differences.",
        usage,
        "A and B are profile.sqlite files or autoReport directories. Every number shows A, B,\n"
        "B - A and (B - A) / A; rows in one report only are marked 'only in A' or 'only in B'.\n"
        "The view defaults to all (every view in turn; with --json one object per line).\n"
        "Example:\n  tilegraph compare ./report_pipelined ./report_sharded memory",
        flags,
        n};
    int r = analyse_parse(&cmd, &a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (a.n_positional < 2 || a.n_positional > 3) {
        fprintf(stderr, "tilegraph compare: expected A B [VIEW] (see tilegraph compare --help)\n");
        return 2;
    }
    const char *view = a.n_positional > 2 ? a.positional[2] : "all";
    if (strcmp(view, "all") && !tg_view_known(view)) {
        fprintf(stderr, "tilegraph compare: unknown view '%s' (%s)\n", view, views);
        return 2;
    }
    tg_profile_reader *ra = NULL, *rb = NULL;
    if (tg_analyse_open(a.positional[0], (int)a.instance, &ra) != TG_OK ||
        tg_analyse_open(a.positional[1], (int)a.instance, &rb) != TG_OK) {
        fprintf(stderr, "tilegraph compare: %s\n", tg_error_message());
        tg_analyse_close(ra);
        return 1;
    }
    int status = 0;
    if (!a.force && tg_analyse_comparable(ra, rb) != TG_OK) {
        fprintf(stderr, "tilegraph compare: %s\n", tg_error_message());
        status = 1;
    }
    tg_view_filter f;
    analyse_filter(&a, &f);
    /* "only in A" must mean absent from B, not outside B's top N: compare
     * everything, then show the first --top rows (all when not given) */
    bool top_given = false;
    for (int i = 0; i < argc; i++)
        top_given |= !strncmp(argv[i], "--top", 5);
    int top = top_given ? f.top : -1;
    f.top = 1 << 30;
    if (!status && !a.json)
        printf("A: %s\nB: %s\n\n", tg_analyse_path(ra), tg_analyse_path(rb));
    for (int i = 0; !status && i < tg_view_count(); i++) {
        if (strcmp(view, "all") && strcmp(view, tg_view_name(i)))
            continue;
        if (!strcmp(view, "all") && !a.json)
            printf("==== %s ====\n", tg_view_name(i));
        status = compare_view(ra, rb, tg_view_name(i), &f, top, a.json);
        if (!strcmp(view, "all") && !a.json)
            printf("\n");
    }
    tg_analyse_close(rb);
    tg_analyse_close(ra);
    return status;
}
