/* fuzz/fuzz_executable.c - libFuzzer target for the executable loader
 * (compile/executable_file.c): whatever the bytes, a program file is loaded or
 * refused with a message, never a crash, and a loaded program only points at
 * what exists.
 *
 * A real file is written once for a small graph (mnist-pipeline over two
 * pipelined devices on mk2, so the tile plan is present). The first input
 * byte picks the mode: odd, the input is the whole file (header checks);
 * even, the input replaces the payload and the header is made right for it
 * (key, lengths, checksums), so the fuzzer reaches the payload's checks
 * instead of stopping at a checksum. The real file's payload is a good seed.
 */
#include "compile/program.h"
#include "core/error.h"
#include "tilegraph/models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg_model_graph mg;
static tg_options *opts;
static tg_config config; /* opts read, as the session reads them */
static unsigned char header[80];
static bool ready;

static void put_u32(unsigned char *at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        at[i] = (unsigned char)(v >> (8 * i));
}

static void setup(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    opts = tg_options_create();
    tg_options_set(opts, "target", "mk2");
    tg_options_set(opts, "executionStrategy", "pipelined");
    tg_options_set(opts, "Training.gradientAccumulation", "4");
    tg_options_set(opts, "threadsPerDevice", "1");
    if (tg_config_read(opts, &config) != TG_OK)
        abort();
    tg_program *p = NULL;
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_executable.%d.tgx", (int)getpid());
    if (tg_model_graph_create(tg_model_find("mnist-pipeline"), 4, &opt, &mg) != TG_OK ||
        tg_program_compile(mg.graph, opts, &p) != TG_OK || tg_executable_save(p, path) != TG_OK)
        abort();
    FILE *f = fopen(path, "rb");
    if (!f || fread(header, 1, sizeof header, f) != sizeof header)
        abort();
    fclose(f);
    unlink(path);
    tg_program_destroy(p);
    ready = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready)
        setup();
    if (size < 1 || size > (1 << 22))
        return 0;
    size_t len = (data[0] & 1) ? size - 1 : sizeof header + size - 1;
    unsigned char *buf = malloc(len + 1);
    if (!buf)
        return 0;
    if (data[0] & 1) {
        memcpy(buf, data + 1, size - 1);
    } else {
        memcpy(buf, header, sizeof header);
        memcpy(buf + sizeof header, data + 1, size - 1);
        uint64_t payload = size - 1;
        for (int i = 0; i < 8; i++)
            buf[64 + i] = (unsigned char)(payload >> (8 * i));
        put_u32(buf + 72, (uint32_t)crc32(0, buf + sizeof header, (uInt)payload));
        put_u32(buf + 76, (uint32_t)crc32(0, buf, 76));
    }
    tg_program *p = NULL;
    tg_status s = tg_executable_parse(mg.graph, &config, buf, len, "fuzz.tgx", &p);
    if ((s == TG_OK) != (p != NULL))
        abort();
    if (p) { /* what the engine follows must exist */
        for (int i = 0; i < p->n_buffers; i++)
            if (p->buffers[i].device < 0 || p->buffers[i].device >= p->n_devices)
                abort();
    } else if (!tg_error_message()[0]) {
        abort(); /* a refusal always says why */
    }
    tg_program_destroy(p);
    free(buf);
    return 0;
}
