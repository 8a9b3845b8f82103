/* tools/cmd_report.c - `tilegraph report REPORT [OTHER] -o report.html`:
 * write one self-contained HTML page (the page in web/, embedded into the
 * binary at build time, with the profile data inlined as JSON) that opens
 * offline in any browser. With OTHER, the page shows both reports and their
 * differences. */
#include "cli.h"

#include "analyse/analyse.h"
#include "analyse/report_data.h"
#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
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
        if (stat(tg_profile_reader_path(r[i]), &si) == 0 && si.st_dev == so.st_dev &&
            si.st_ino == so.st_ino) {
            fprintf(stderr,
                    "tilegraph report: -o '%s' is the profile being read (%s); "
                    "writing the page there would destroy it: choose another file, "
                    "e.g. -o report.html\n",
                    out, tg_profile_reader_path(r[i]));
            return 1;
        }
    return 0;
}

/* Write JSON so that it cannot end the <script> block it sits in: "</"
 * becomes "<\/" (the same string to a JSON parser). */
static void write_json_in_script(FILE *f, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] == '<' && s[i + 1] == '/') {
            fwrite(s + from, 1, i + 1 - from, f);
            fputc('\\', f);
            from = i + 1;
        }
    }
    fwrite(s + from, 1, n - from, f);
}

/* Copy the page, replacing the markers @@CSS@@, @@JS@@ and @@DATA@@. */
static void write_page(FILE *f, const char *json, size_t json_len)
{
    const char *p = (const char *)tg_web_report_html, *end = p + tg_web_report_html_len;
    while (p < end) {
        const char *m = strstr(p, "@@");
        if (!m || m >= end) {
            fwrite(p, 1, (size_t)(end - p), f);
            break;
        }
        fwrite(p, 1, (size_t)(m - p), f);
        if (!strncmp(m, "@@CSS@@", 7)) {
            fwrite(tg_web_report_css, 1, tg_web_report_css_len, f);
            p = m + 7;
        } else if (!strncmp(m, "@@JS@@", 6)) {
            fwrite(tg_web_report_js, 1, tg_web_report_js_len, f);
            p = m + 6;
        } else if (!strncmp(m, "@@DATA@@", 8)) {
            write_json_in_script(f, json, json_len);
            p = m + 8;
        } else {
            fwrite(m, 1, 2, f);
            p = m + 2;
        }
    }
}

/* Write the page to a temporary beside `out`, then rename it over `out`:
 * a full disk or a kill leaves the previous report whole, never a
 * truncated one. Returns 0 or 1 (after the message). */
static int write_atomically(const char *out, const char *json, size_t json_len)
{
    tg_atomic_file af;
    tg_status st = tg_atomic_file_open(out, &af);
    if (st == TG_OK) {
        write_page(af.f, json, json_len);
        if (ferror(af.f)) {
            tg_atomic_file_abort(&af);
            st = tg_error(TG_ERR_IO, "%s: cannot write the page: %s", out,
                          strerror(errno ? errno : EIO));
        } else {
            st = tg_atomic_file_commit(&af);
        }
    }
    if (st != TG_OK) {
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
        {"-o", CLI_STRING, &out, "FILE", "the HTML file to write", 1, 0},
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
    tg_json_writer w;
    tg_json_writer_init(&w);
    char *json = NULL;
    size_t json_len = 0;
    /* the same resolution as `analyse`: a file, an autoReport directory or
     * its training/ or inference/ subdirectory */
    for (int i = 0; i < n_pos; i++) {
        if (tg_an_open(pos[i], &r[i]) != TG_OK) {
            fprintf(stderr, "tilegraph report: %s\n", tg_error_message());
            goto done;
        }
        path[i] = tg_profile_reader_path(r[i]);
    }
    if (check_output(out, r, n_pos))
        goto done;
    if (n_pos == 2) {
        char ta[128];
        snprintf(ta, sizeof ta, "%s", tg_profile_reader_meta(r[0], "target"));
        const char *tb = tg_profile_reader_meta(r[1], "target");
        if (strcmp(ta, tb) != 0) {
            fprintf(stderr,
                    "tilegraph report: %s and %s are profiles of different targets "
                    "('%s' and '%s'); compare reports of the same target\n",
                    path[0], path[1], ta, tb);
            goto done;
        }
    }
    tg_json_begin_object(&w);
    tg_json_key(&w, "reports");
    tg_json_begin_array(&w);
    for (int i = 0; i < n_pos; i++)
        if (tg_report_data_write(r[i], &w) != TG_OK) {
            fprintf(stderr, "tilegraph report: %s\n", tg_error_message());
            goto done;
        }
    tg_json_end_array(&w);
    tg_json_end_object(&w);
    if (tg_json_writer_finish(&w, &json, &json_len) != TG_OK) {
        fprintf(stderr, "tilegraph report: %s\n", tg_error_message());
        goto done;
    }
    if (write_atomically(out, json, json_len) != 0)
        goto done;
    printf("%s\n", out);
    rc = 0;
done:
    tg_free(json);
    tg_json_writer_free(&w);
    for (int i = 0; i < 2; i++)
        if (r[i])
            tg_profile_reader_close(r[i]);
    return rc;
}
