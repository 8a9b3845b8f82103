/* analyse/report_page.c - the HTML page of `tilegraph report`
 * (tilegraph/analyse.h). */
#include "analyse/analyse.h"

#include "analyse/report_data.h"
#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <string.h>

tg_status tg_report_json(tg_profile_reader *const *r, int n, char **json, size_t *len)
{
    *json = NULL;
    *len = 0;
    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
    tg_json_key(&w, "reports");
    tg_json_begin_array(&w);
    tg_status st = TG_OK;
    for (int i = 0; i < n && st == TG_OK; i++)
        st = tg_report_data_write(r[i], &w);
    if (st == TG_OK) {
        tg_json_end_array(&w);
        tg_json_end_object(&w);
        st = tg_json_writer_finish(&w, json, len);
    }
    tg_json_writer_free(&w);
    return st;
}

void tg_report_json_free(char *json)
{
    tg_free(json);
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
static void write_page(FILE *f, const tg_report_page *page, const char *json, size_t json_len)
{
    const char *p = (const char *)page->html, *end = p + page->html_len;
    while (p < end) {
        const char *m = strstr(p, "@@");
        if (!m || m >= end) {
            fwrite(p, 1, (size_t)(end - p), f);
            break;
        }
        fwrite(p, 1, (size_t)(m - p), f);
        if (!strncmp(m, "@@CSS@@", 7)) {
            fwrite(page->css, 1, page->css_len, f);
            p = m + 7;
        } else if (!strncmp(m, "@@JS@@", 6)) {
            fwrite(page->js, 1, page->js_len, f);
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

tg_status tg_report_page_write(const char *out, const tg_report_page *page, const char *json,
                               size_t len)
{
    tg_atomic_file af;
    TG_TRY(tg_atomic_file_open(out, &af));
    write_page(af.f, page, json, len);
    if (ferror(af.f)) {
        tg_atomic_file_abort(&af);
        return tg_error(TG_ERR_IO, "%s: cannot write the page: %s", out,
                        strerror(errno ? errno : EIO));
    }
    return tg_atomic_file_commit(&af);
}
