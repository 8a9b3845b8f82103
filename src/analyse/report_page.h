/* analyse/report_page.h - the self-contained HTML page of `tilegraph report`:
 * the page's HTML, CSS and script (embedded into the binary that serves it)
 * with the reports' data inlined as JSON, written atomically. */
#ifndef TG_ANALYSE_REPORT_PAGE_H
#define TG_ANALYSE_REPORT_PAGE_H

#include "analyse/analyse.h"

#include <stddef.h>

/* The page: HTML with the markers @@CSS@@, @@JS@@ and @@DATA@@. */
typedef struct tg_an_page {
    const unsigned char *html, *css, *js;
    size_t html_len, css_len, js_len;
} tg_an_page;

/* {"reports": [one object per profile]} (analyse/report_data.h) in *json,
 * *len bytes; free it with tg_an_report_json_free. */
tg_status tg_an_report_json(tg_profile_reader *const *r, int n, char **json, size_t *len);
void tg_an_report_json_free(char *json);

/* Write the page with `json` as its data to a temporary beside `out`, then
 * rename it over `out`: a full disk or a kill leaves the previous report
 * whole, never a truncated one. */
tg_status tg_an_write_report_page(const char *out, const tg_an_page *page, const char *json,
                                  size_t len);

#endif
