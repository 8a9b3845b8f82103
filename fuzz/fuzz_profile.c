/* fuzz/fuzz_profile.c - libFuzzer target for everything that reads a
 * profile: the input is written to a file and opened as a profile; the
 * reader must accept it or reject it with a message. On an accepted one,
 * every analyse view (and the memory view of one tile), the comparison of
 * each view with itself and the HTML report's data must finish without a
 * crash, a sanitizer report or a leak, whatever the tables hold: crafted
 * counts and spans (issue 17, H2/H3) are what this is for (the readers:
 * profile_check.h, which the suite's tests/analyse/test_fuzz_profiles.c
 * runs on the corpus). Seed it with real profiles (fuzz/README.md). */
#include "profile_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
        tg_fuzz_profile_read_all(r); /* a refusal without a message is the test's to find */
        tg_profile_reader_close(r);
    }
    if (tg_alloc_live_bytes() != live)
        abort(); /* a leak on some path: libFuzzer keeps the input */
    return 0;
}
