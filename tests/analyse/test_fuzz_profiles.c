/* tests/analyse/test_fuzz_profiles.c - the profile fuzzer's seeds and the
 * inputs it found (the .sqlite files of fuzz/corpus/profile/), replayed in every test
 * run: each opens or is refused with a message, and every analyse view,
 * each view compared with itself and the HTML report's data finish without
 * a crash or a leak (under make asan, without a sanitizer report). The
 * libFuzzer target fuzz/fuzz_profile.c does the same open-endedly, through
 * the same fuzz/profile_check.h. */
#include "tg_test.h"

#include "../../fuzz/profile_check.h"

#include <dirent.h>
#include <string.h>

static int files_run;

static void run_file(const char *path)
{
    int64_t live = tg_alloc_live_bytes();
    tg_profile_reader *r = NULL;
    if (tg_profile_reader_open(path, &r) != TG_OK) {
        TG_CHECK(strstr(tg_error_message(), path) != NULL);
    } else {
        TG_CHECK(tg_fuzz_profile_read_all(r) == 0); /* a refusal says why */
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
