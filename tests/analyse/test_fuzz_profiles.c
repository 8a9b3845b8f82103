/* tests/analyse/test_fuzz_profiles.c - the profile fuzzer's seeds and the
 * inputs it found (the .sqlite files of fuzz/corpus/profile/), replayed in every test
 * run: each opens or is refused with a message, and every analyse view,
 * each view compared with itself and the HTML report's data finish without
 * a crash or a leak (under make asan, without a sanitizer report). The
 * libFuzzer target fuzz/fuzz_profile.c does the same open-endedly. */
#include "tg_test.h"

#include "analyse/analyse.h"
#include "analyse/report_data.h"
#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <dirent.h>
#include <string.h>

static int files_run;

static void run_view(tg_profile_reader *r, const char *name, const tg_an_filter *f)
{
    tg_an_view v, out;
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
        TG_CHECK(tg_error_message()[0] != '\0'); /* a refusal says why */
    }
    tg_an_view_free(&out);
    tg_an_view_free(&v);
}

static void run_file(const char *path)
{
    int64_t live = tg_alloc_live_bytes();
    tg_profile_reader *r = NULL;
    if (tg_profile_reader_open(path, &r) != TG_OK) {
        TG_CHECK(strstr(tg_error_message(), path) != NULL);
    } else {
        tg_an_filter f;
        tg_view_filter_defaults(&f);
        for (int i = 0; tg_an_views[i].name; i++)
            run_view(r, tg_an_views[i].name, &f);
        f.by_tile = true;
        f.tile = 0;
        run_view(r, "memory", &f);
        f.by_tile = false;
        f.top = 1 << 30;
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
        tg_profile_reader_close(r);
    }
    if (tg_alloc_live_bytes() != live)
        tg_test_fail(__FILE__, __LINE__, "%s: %lld bytes leaked", path,
                     (long long)(tg_alloc_live_bytes() - live));
    files_run++;
}

static void test_corpus(void)
{
    const char *dir = TG_SOURCE_DIR "/fuzz/corpus/profile";
    DIR *d = opendir(dir);
    TG_CHECK(d != NULL);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 7, ".sqlite"))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        run_file(path);
    }
    if (d)
        closedir(d);
    TG_CHECK(files_run >= 3);
}

int main(void)
{
    TG_RUN(test_corpus);
    return tg_test_finish();
}
