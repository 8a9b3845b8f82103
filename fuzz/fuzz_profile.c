/* fuzz/fuzz_profile.c - libFuzzer target for everything that reads a
 * profile: the input is written to a file and opened as a profile; the
 * reader must accept it or reject it with a message. On an accepted one,
 * every analyse view (and the memory view of one tile), the comparison of
 * each view with itself and the HTML report's data must finish without a
 * crash, a sanitizer report or a leak, whatever the tables hold: crafted
 * counts and spans (issue 17, H2/H3) are what this is for.
 * Seed it with real profiles (fuzz/README.md). */
#include "analyse/analyse.h"
#include "analyse/report_data.h"
#include "core/alloc.h"
#include "profile/reader.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One view, then the view compared with itself; errors are fine (they
 * carry a message), crashes and leaks are not. */
static void run_view(tg_profile_reader *r, const char *name, const tg_an_filter *f)
{
    tg_an_view v, out;
    memset(&v, 0, sizeof v);
    memset(&out, 0, sizeof out);
    if (tg_an_build(r, name, f, &v) == TG_OK) {
        if (tg_an_compare(&v, &v, &out) == TG_OK) {
            FILE *null = fopen("/dev/null", "w");
            if (null) {
                tg_an_print_text(&out, null);
                tg_an_print_json(&v, null);
                fclose(null);
            }
        }
    }
    tg_an_view_free(&out);
    tg_an_view_free(&v);
}

static void run_analysers(tg_profile_reader *r)
{
    tg_an_filter f;
    tg_view_filter_defaults(&f);
    for (int i = 0; tg_an_views[i].name; i++)
        run_view(r, tg_an_views[i].name, &f);
    f.by_tile = true; /* the one-tile memory view reads tile_spans */
    f.tile = 0;
    run_view(r, "memory", &f);
    f.by_tile = false;
    f.top = 1 << 30; /* what compare asks for: every row */
    run_view(r, "host", &f);

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
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/tg_fuzz_profile_%d.sqlite", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    int64_t live = tg_alloc_live_bytes();
    tg_profile_reader *r = NULL;
    if (tg_profile_reader_open(path, &r) == TG_OK) {
        run_analysers(r);
        tg_profile_reader_close(r);
    }
    if (tg_alloc_live_bytes() != live)
        abort(); /* a leak on some path: libFuzzer keeps the input */
    return 0;
}
