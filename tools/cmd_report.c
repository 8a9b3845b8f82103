/* tools/cmd_report.c - `tilegraph report REPORT [OTHER] -o report.html`:
 * write one self-contained HTML page (the page in web/, embedded into the
 * binary at build time, with the profile data inlined as JSON) that opens
 * offline in any browser. With OTHER, the page shows both reports and their
 * differences. */
#include "cli.h"

#include "tilegraph/analyse.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The page, from the generated web_assets.c (cmake/embed_web.cmake). */
extern const unsigned char tg_web_report_html[], tg_web_report_css[], tg_web_report_js[];
extern const size_t tg_web_report_html_len, tg_web_report_css_len, tg_web_report_js_len;

/* Refuse an output that is one of the inputs (`report p.sqlite -o
 * p.sqlite` would replace the profile with HTML) or a directory. */
static int check_output(const char *out, tg_profile_reader *const *r, int n)
{
    struct stat so, si;
    if (stat(out, &so) != 0)
        return 0; /* a new file */
    if (S_ISDIR(so.st_mode)) {
        fprintf(stderr,
                "tilegraph report: -o '%s' is a directory; name the HTML file to write, "
                "e.g. -o %s/report.html\n",
                out, out);
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (stat(tg_analyse_path(r[i]), &si) == 0 && si.st_dev == so.st_dev &&
            si.st_ino == so.st_ino) {
            fprintf(stderr,
                    "tilegraph report: -o '%s' is the profile being read (%s); "
                    "writing the page there would destroy it: choose another file, "
                    "e.g. -o report.html\n",
                    out, tg_analyse_path(r[i]));
            return 1;
        }
    return 0;
}

/* Write the page atomically (tg_report_page_write, tilegraph/analyse.h). Returns 0 or 1 (after
 * the message). */
static int write_atomically(const char *out, const char *json, size_t json_len)
{
    const tg_report_page page = {tg_web_report_html,    tg_web_report_css,
                                 tg_web_report_js,      tg_web_report_html_len,
                                 tg_web_report_css_len, tg_web_report_js_len};
    if (tg_report_page_write(out, &page, json, json_len) != TG_OK) {
        fprintf(stderr, "tilegraph report: %s (any previous file is left as it was)\n",
                tg_error_message());
        return 1;
    }
    return 0;
}

int cmd_report(int argc, char **argv)
{
    const char *out = "report.html";
    cli_flag flags[] = {
        {"-o", CLI_STRING, &out, "FILE", "the HTML file to write", 1, 0, "report.html"},
    };
    cli_command cmd = {"report",
                       "write a self-contained HTML report of a profile",
                       "tilegraph report REPORT [OTHER] [-o report.html]",
                       "REPORT and OTHER are what `tilegraph analyse` takes: profile.sqlite "
                       "files, directories holding training/profile.sqlite (autoReport.directory) "
                       "or such a training/ or inference/ directory. With OTHER the page "
                       "compares the two. The page needs no network and opens in any browser; "
                       "it is written to a temporary file and renamed over FILE, never over a "
                       "profile it reads.",
                       flags,
                       (int)(sizeof flags / sizeof flags[0])};
    /* positional arguments first, then the flags */
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    char *rest[16];
    int n_rest = 0;
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) {
            if (n_rest < 15)
                rest[n_rest++] = argv[i];
            if (!strcmp(argv[i], "-o") && i + 1 < argc && n_rest < 15)
                rest[n_rest++] = argv[++i];
        } else if (n_pos < 2) {
            pos[n_pos++] = argv[i];
        } else {
            fprintf(stderr, "tilegraph report: at most two reports, not '%s'\n", argv[i]);
            return 1;
        }
    }
    int pr = cli_parse(&cmd, n_rest, rest);
    if (pr != 0)
        return pr > 0 ? 0 : 1;
    if (n_pos == 0) {
        fprintf(stderr, "tilegraph report: which report? (see tilegraph report --help)\n");
        return 1;
    }

    tg_profile_reader *r[2] = {NULL, NULL};
    const char *path[2] = {NULL, NULL};
    int rc = 1;
    char *json = NULL;
    size_t json_len = 0;
    /* the same resolution as `analyse`: a file, an autoReport directory or
     * its training/ or inference/ subdirectory */
    for (int i = 0; i < n_pos; i++) {
        if (tg_analyse_open(pos[i], -1, &r[i]) != TG_OK) {
            fprintf(stderr, "tilegraph report: %s\n", tg_error_message());
            goto done;
        }
        path[i] = tg_analyse_path(r[i]);
    }
    if (check_output(out, r, n_pos))
        goto done;
    if (n_pos == 2) {
        char ta[128];
        snprintf(ta, sizeof ta, "%s", tg_analyse_meta(r[0], "target"));
        const char *tb = tg_analyse_meta(r[1], "target");
        if (strcmp(ta, tb) != 0) {
            fprintf(stderr,
                    "tilegraph report: %s and %s are profiles of different targets "
                    "('%s' and '%s'); compare reports of the same target\n",
                    path[0], path[1], ta, tb);
            goto done;
        }
    }
    if (tg_report_json(r, n_pos, &json, &json_len) != TG_OK) {
        fprintf(stderr, "tilegraph report: %s\n", tg_error_message());
        goto done;
    }
    if (write_atomically(out, json, json_len) != 0)
        goto done;
    printf("%s\n", out);
    rc = 0;
done:
    tg_report_json_free(json);
    for (int i = 0; i < 2; i++)
        if (r[i])
            tg_analyse_close(r[i]);
    return rc;
}
