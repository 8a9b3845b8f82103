/* fuzz/profile_check.h - what fuzz_profile does with a profile it opened,
 * shared with the suite's replay of its corpus
 * (tests/analyse/test_fuzz_profiles.c): every analyse view, the memory view
 * of one tile and the host view with every row (what compare asks for),
 * each view compared with itself and printed, and the HTML report's data.
 * A view may be refused, with a message; a crash, a sanitizer report or a
 * leak is what the fuzzer and the test look for.
 */
#ifndef TG_FUZZ_PROFILE_CHECK_H
#define TG_FUZZ_PROFILE_CHECK_H

#include "analyse/analyse.h"
#include "analyse/report_data.h"
#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <stdio.h>
#include <string.h>

/* One view, then the view compared with itself and printed: 1 when it
 * was refused without a message, else 0. */
static int tg_fuzz_profile_view(tg_profile_reader *r, const char *name, const tg_an_filter *f)
{
    tg_an_view v, out;
    int silent = 0;
    memset(&v, 0, sizeof v);
    memset(&out, 0, sizeof out);
    if (tg_an_build(r, name, f, &v) == TG_OK && tg_an_compare(&v, &v, &out) == TG_OK) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            tg_an_print_text(&out, null);
            tg_an_print_json(&v, null);
            fclose(null);
        }
    } else {
        silent = tg_error_message()[0] == '\0';
    }
    tg_an_view_free(&out);
    tg_an_view_free(&v);
    return silent;
}

/* Every reader of r, as above; how many views were refused without a
 * message. */
static int tg_fuzz_profile_read_all(tg_profile_reader *r)
{
    int silent = 0;
    tg_an_filter f;
    tg_view_filter_defaults(&f);
    for (int i = 0; tg_an_views[i].name; i++)
        silent += tg_fuzz_profile_view(r, tg_an_views[i].name, &f);
    f.by_tile = true; /* the one-tile memory view reads tile_spans */
    f.tile = 0;
    silent += tg_fuzz_profile_view(r, "memory", &f);
    f.by_tile = false;
    f.top = 1 << 30; /* what compare asks for: every row */
    silent += tg_fuzz_profile_view(r, "host", &f);

    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_array(&w);
    tg_report_data_write(r, &w);
    tg_json_end_array(&w);
    char *json = NULL;
    size_t len = 0;
    if (tg_json_writer_finish(&w, &json, &len) == TG_OK)
        tg_free(json);
    tg_json_writer_free(&w);
    return silent;
}

#endif
