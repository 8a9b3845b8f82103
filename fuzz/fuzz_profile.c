/* fuzz/fuzz_profile.c - libFuzzer target for the profile reader: the input
 * is written to a file and opened as a profile; the reader must accept it or
 * reject it with a message, and queries on an accepted one must not crash.
 * Seed it with real profiles (fuzz/README.md). */
#include "profile/reader.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
    tg_profile_reader *r = NULL;
    if (tg_profile_reader_open(path, &r) == TG_OK) {
        int64_t v;
        tg_profile_reader_int(r, "SELECT COUNT(*) FROM trace", 0, &v);
        tg_profile_reader_int(r, "SELECT MAX(live_bytes) FROM liveness", 0, &v);
        tg_profile_reader_meta(r, "program");
        tg_profile_reader_close(r);
    }
    return 0;
}
