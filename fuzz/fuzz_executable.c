/* fuzz/fuzz_executable.c - libFuzzer target for the executable loader
 * (compile/executable_file.c): whatever the bytes, a program file is loaded or
 * refused with a message, never a crash, and a loaded program only points at
 * what exists.
 *
 * Real files are written once for two small graphs: mnist-pipeline over two
 * pipelined devices on mk2 (so the tile plan is present), and an inference
 * program whose convolutions compute the batch norm and ReLU after them
 * (compile/fuse.c: its file holds the fusion, which the loader checks
 * against the compiler's own decisions). The first input byte picks the
 * mode: bit 1 the inference program instead of the training one; bit 0
 * set, the input is the whole file (header checks); clear, the input
 * replaces the payload and the header is made right for it (key, lengths,
 * checksums), so the fuzzer reaches the payload's checks instead of
 * stopping at a checksum. The real files' payloads are good seeds: with
 * TG_FUZZ_WRITE_SEEDS=DIR set, setup writes them there (the corpus after a
 * format change).
 *
 * A program the loader accepts is then run (issue 46, row 8): written to a
 * file, a session made from it through executableFile and one step taken on
 * zeros, so what the checks let through is what the engine follows (a step
 * pointing at no buffer, or at a short one, crashes there, not here).
 */
#include "compile/program.h"
#include "core/error.h"
#include "backend/cpu/dnnl_util.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One program the inputs are read as: its graph, options and file header. */
typedef struct target {
    tg_graph *graph;
    tg_tensor *in[2]; /* what a step is fed (zeros); NULL: nothing */
    tg_options *opts;
    tg_config config; /* opts read, as the session reads them */
    unsigned char header[80];
} target;

static tg_model_graph mg;
static tg_graph *fused_graph;
static target targets[2]; /* training, inference with fusion */
static char run_path[64]; /* where an accepted program is written to be run */
static bool ready;

static void put_u32(unsigned char *at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        at[i] = (unsigned char)(v >> (8 * i));
}

/* x -> (conv -> batch norm -> ReLU) x 2, for inference: both fuse. */
static tg_graph *build_fused(tg_tensor **x)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *h = *x = tg_input(g, "x", TG_F32, tg_shape4(1, 8, 5, 5));
    for (int l = 0; l < 2; l++) {
        tg_tensor *w =
            tg_param(g, l ? "w1" : "w0", tg_shape4(8, 8, 3, 3), (tg_init){TG_INIT_ONES, 0, 0});
        tg_tensor *st =
            tg_state(g, l ? "s1" : "s0", tg_shape2(2, 8), (tg_init){TG_INIT_NORM_STATS, 0, 0});
        h = tg_conv2d(g, h, w, NULL, (tg_conv2d_params){1, 1, 1, 1, 1, 1, 1});
        h = tg_relu(g, tg_batch_norm(g, h, NULL, NULL, st, 1e-5f));
    }
    tg_tensor_mark_output(h);
    return g;
}

/* A seed: mode byte, then the file (odd mode) or its payload. */
static void write_seed(const char *dir, const char *name, unsigned char mode,
                       const unsigned char *file, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    size_t skip = (mode & 1) ? 0 : 80;
    if (!f || fwrite(&mode, 1, 1, f) != 1 || fwrite(file + skip, 1, len - skip, f) != len - skip)
        abort();
    fclose(f);
}

/* Compile t's graph with its options, keep the file's header (and, with
 * TG_FUZZ_WRITE_SEEDS, write its seeds). */
static void prepare(target *t, int k)
{
    if (tg_config_read(t->opts, &t->config) != TG_OK)
        abort();
    tg_program *p = NULL;
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_executable.%d.tgx", (int)getpid());
    if (tg_program_compile(t->graph, t->opts, &p) != TG_OK || tg_executable_save(p, path) != TG_OK)
        abort();
    if (k == 1 && !p->fused_tail)
        abort(); /* the inference program is there to fuzz the fusion's checks */
    FILE *f = fopen(path, "rb");
    static unsigned char file[1 << 20];
    size_t len = f ? fread(file, 1, sizeof file, f) : 0;
    if (len < sizeof t->header || len == sizeof file)
        abort();
    fclose(f);
    memcpy(t->header, file, sizeof t->header);
    const char *seeds = getenv("TG_FUZZ_WRITE_SEEDS");
    if (seeds && k == 0) {
        write_seed(seeds, "payload_mk2_pipelined", 0, file, len);
        write_seed(seeds, "whole_file", 1, file, len);
    } else if (seeds) {
        write_seed(seeds, "payload_fused", 2, file, len);
        write_seed(seeds, "whole_file_fused", 3, file, len);
    }
    unlink(path);
    tg_program_destroy(p);
}

static void setup(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    snprintf(run_path, sizeof run_path, "/tmp/fuzz_executable_run.%d.tgx", (int)getpid());
    if (tg_model_graph_create(tg_model_find("mnist-pipeline"), 4, &opt, &mg) != TG_OK)
        abort();
    target *t = &targets[0];
    t->graph = mg.graph;
    t->in[0] = mg.images, t->in[1] = mg.labels;
    t->opts = tg_options_create();
    tg_options_set(t->opts, "target", "mk2");
    tg_options_set(t->opts, "executionStrategy", "pipelined");
    tg_options_set(t->opts, "Training.gradientAccumulation", "4");
    tg_options_set(t->opts, "threadsPerDevice", "1");
    prepare(t, 0);
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true); /* the convolutions fuse on any CPU */
    t = &targets[1];
    t->graph = fused_graph = build_fused(&t->in[0]);
    t->opts = tg_options_create();
    tg_options_set(t->opts, "threadsPerDevice", "1");
    prepare(t, 1);
    ready = true;
}

/* One step of t's program in buf (accepted by the loader), on zeros. */
static void run_one_step(const target *t, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(run_path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len)
        abort();
    fclose(f);
    tg_options *o = tg_options_clone(t->opts);
    tg_session *s = NULL;
    if (!o || tg_options_set(o, "executableFile", run_path) != TG_OK ||
        tg_session_create(t->graph, o, &s) != TG_OK)
        abort(); /* the program loaded a moment ago: a session must be made of it */
    int64_t n = tg_session_samples_per_run(s, t->in[0]);
    for (int k = 0; k < 2 && t->in[k]; k++) {
        size_t bytes = (size_t)(n * tg_numel(t->in[k]) / tg_tensor_shape(t->in[k]).dim[0]) *
                       tg_dtype_size(tg_tensor_dtype(t->in[k]));
        void *zeros = calloc(bytes + 1, 1);
        if (!zeros || tg_session_write(s, t->in[k], zeros, bytes) != TG_OK)
            abort();
        free(zeros);
    }
    if (tg_session_run(s) != TG_OK && !tg_error_message()[0])
        abort(); /* a failed step says why */
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
    const target *t = &targets[(data[0] >> 1) & 1];
    const unsigned char *header = t->header;
    size_t len = (data[0] & 1) ? size - 1 : 80 + size - 1;
    unsigned char *buf = malloc(len + 1);
    if (!buf)
        return 0;
    if (data[0] & 1) {
        memcpy(buf, data + 1, size - 1);
    } else {
        memcpy(buf, header, 80);
        memcpy(buf + 80, data + 1, size - 1);
        uint64_t payload = size - 1;
        for (int i = 0; i < 8; i++)
            buf[64 + i] = (unsigned char)(payload >> (8 * i));
        put_u32(buf + 72, (uint32_t)crc32(0, buf + 80, (uInt)payload));
        put_u32(buf + 76, (uint32_t)crc32(0, buf, 76));
    }
    tg_program *p = NULL;
    tg_status s = tg_executable_parse(t->graph, &t->config, buf, len, "fuzz.tgx", &p);
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
        run_one_step(t, buf, len);
    free(buf);
    return 0;
}
