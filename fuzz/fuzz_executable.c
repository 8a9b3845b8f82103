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
 *
 * A program the loader accepts is then run (issue 46, row 8): written to a
 * file, a session made from it through executableFile and one training step
 * taken on zeros, so what the checks let through is what the engine follows
 * (a step pointing at no buffer, or at a short one, crashes there, not here).
 */
#include "compile/program.h"
#include "core/error.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg_model_graph mg;
static tg_options *opts;
static tg_config config;  /* opts read, as the session reads them */
static char run_path[64]; /* where an accepted program is written to be run */
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
    snprintf(run_path, sizeof run_path, "/tmp/fuzz_executable_run.%d.tgx", (int)getpid());
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

/* One training step of the program in buf (accepted by the loader), on zeros. */
static void run_one_step(const unsigned char *buf, size_t len)
{
    FILE *f = fopen(run_path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len)
        abort();
    fclose(f);
    tg_options *o = tg_options_clone(opts);
    tg_session *s = NULL;
    if (!o || tg_options_set(o, "executableFile", run_path) != TG_OK ||
        tg_session_create(mg.graph, o, &s) != TG_OK)
        abort(); /* the program loaded a moment ago: a session must be made of it */
    int64_t n = tg_session_samples_per_run(s, mg.images);
    float *img = calloc((size_t)n * 28 * 28 + 1, sizeof(float));
    int32_t *lab = calloc((size_t)n + 1, sizeof(int32_t));
    if (!img || !lab ||
        tg_session_write(s, mg.images, img, (size_t)n * 28 * 28 * sizeof(float)) != TG_OK ||
        tg_session_write(s, mg.labels, lab, (size_t)n * sizeof(int32_t)) != TG_OK)
        abort();
    if (tg_session_run(s) != TG_OK && !tg_error_message()[0])
        abort(); /* a failed step says why */
    free(img);
    free(lab);
    tg_session_destroy(s);
    tg_options_destroy(o);
    unlink(run_path);
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
    if (s == TG_OK)
        run_one_step(buf, len);
    free(buf);
    return 0;
}
