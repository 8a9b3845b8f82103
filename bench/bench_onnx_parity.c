/* bench/bench_onnx_parity.c - the tilegraph side of bench/onnx_parity.py:
 * import an ONNX export, train it on the batches PyTorch trained on, and
 * write the per-step losses and the final weights.
 *
 *   bench_onnx_parity MODEL.onnx BATCHES.bin --steps N --batch-size B
 *       [--optimizer sgd|adamw] [--lr X] [--threads N] --save W.safetensors
 *       --losses LOSSES.json
 *
 * BATCHES.bin holds every step's images (f32 [B, C, H, W]) and then every
 * step's labels (i32 [B]), as onnx_parity.py writes them. The optimizers are
 * PyTorch's: SGD with momentum 0.9, or AdamW with its defaults.
 */
#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct args {
    const char *model, *batches, *optimizer, *save, *losses;
    int steps, batch, threads;
    float lr;
} args;

static int parse(int argc, char **argv, args *a)
{
    *a = (args){.optimizer = "sgd", .steps = 50, .batch = 16, .threads = 1, .lr = 0.01f};
    if (argc < 3)
        return -1;
    a->model = argv[1];
    a->batches = argv[2];
    for (int i = 3; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--steps"))
            a->steps = atoi(v);
        else if (!strcmp(k, "--batch-size"))
            a->batch = atoi(v);
        else if (!strcmp(k, "--threads"))
            a->threads = atoi(v);
        else if (!strcmp(k, "--lr"))
            a->lr = strtof(v, NULL);
        else if (!strcmp(k, "--optimizer"))
            a->optimizer = v;
        else if (!strcmp(k, "--save"))
            a->save = v;
        else if (!strcmp(k, "--losses"))
            a->losses = v;
        else
            return -1;
    }
    return a->steps > 0 && a->batch > 0 && a->save && a->losses ? 0 : -1;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Train; losses[] gets one value per step. */
static tg_status train(const args *a, const tg_model_spec *spec, float *losses, double *seconds)
{
    size_t pixels = (size_t)spec->channels * (size_t)spec->height * (size_t)spec->width;
    size_t n_img = (size_t)a->steps * (size_t)a->batch * pixels;
    size_t n_lab = (size_t)a->steps * (size_t)a->batch;
    float *images = malloc(n_img * sizeof(float));
    int32_t *labels = malloc(n_lab * sizeof(int32_t));
    FILE *f = fopen(a->batches, "rb");
    bool ok = images && labels && f && fread(images, sizeof(float), n_img, f) == n_img &&
              fread(labels, sizeof(int32_t), n_lab, f) == n_lab;
    if (f)
        fclose(f);
    tg_status s = ok ? TG_OK : TG_ERR_IO;
    if (!ok)
        fprintf(stderr, "bench_onnx_parity: cannot read %zu images and %zu labels from %s\n",
                n_img / pixels, n_lab, a->batches);
    tg_optimizer opt =
        !strcmp(a->optimizer, "adamw") ? tg_optimizer_adamw(a->lr) : tg_optimizer_sgd(a->lr, 0.9f);
    tg_model_graph mg = {0};
    tg_session *sess = NULL;
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", a->threads);
    if (s == TG_OK)
        s = tg_model_graph_create(spec, a->batch, &opt, &mg);
    if (s == TG_OK)
        s = tg_session_create(mg.graph, o, &sess);
    double t0 = now();
    for (int k = 0; s == TG_OK && k < a->steps; k++) {
        s = tg_session_write(sess, mg.images, images + (size_t)k * a->batch * pixels,
                             (size_t)a->batch * pixels * sizeof(float));
        if (s == TG_OK)
            s = tg_session_write(sess, mg.labels, labels + (size_t)k * a->batch,
                                 (size_t)a->batch * sizeof(int32_t));
        if (s == TG_OK)
            s = tg_session_run(sess);
        if (s == TG_OK)
            s = tg_session_read(sess, mg.loss, &losses[k], sizeof(float));
    }
    *seconds = now() - t0;
    if (s == TG_OK)
        s = tg_checkpoint_save(sess, a->save, spec->name);
    tg_session_destroy(sess);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    free(images);
    free(labels);
    return s;
}

int main(int argc, char **argv)
{
    args a;
    if (parse(argc, argv, &a) != 0) {
        fprintf(stderr, "usage: bench_onnx_parity MODEL.onnx BATCHES.bin --steps N --batch-size B "
                        "[--optimizer sgd|adamw] [--lr X] [--threads N] --save W.safetensors "
                        "--losses LOSSES.json\n");
        return 2;
    }
    const tg_model_spec *spec = NULL;
    float *losses = calloc((size_t)a.steps, sizeof(float));
    double seconds = 0;
    tg_status s = tg_model_open(a.model, TG_LOSS_CROSS_ENTROPY, &spec);
    if (s == TG_OK)
        s = train(&a, spec, losses, &seconds);
    /* written beside the target and renamed: a reader never sees half a file */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", a.losses);
    FILE *f = s == TG_OK ? fopen(tmp, "w") : NULL;
    if (f) {
        fprintf(f, "{\"seconds\":%.6f,\"losses\":[", seconds);
        for (int k = 0; k < a.steps; k++)
            fprintf(f, "%s%.9g", k ? "," : "", (double)losses[k]);
        fprintf(f, "]}\n");
        if (fclose(f) != 0 || rename(tmp, a.losses) != 0)
            f = NULL;
    }
    if (s != TG_OK || !f)
        fprintf(stderr, "bench_onnx_parity: %s\n", s != TG_OK ? tg_error_message() : a.losses);
    tg_model_close(spec);
    free(losses);
    return s == TG_OK && f ? 0 : 1;
}
