/* bench/bench_onnx_parity.c - tilegraph's half of the ONNX parity benchmark.
 *
 * Imports an ONNX model (exported from PyTorch by bench/onnx_parity.py),
 * appends the cross-entropy loss, its backward pass and the optimizer, and
 * trains on the batches the script wrote, in their order: f32 inputs
 * [steps][batch][sample...] followed by i32 labels [steps][batch]. Writes the
 * loss of every step and the seconds the steps took as JSON (--losses) and
 * the final weights as a safetensors checkpoint (--save), which the script
 * compares with PyTorch's. Run without arguments it prints its usage: the
 * comparison itself (one JSON line per model) is the script's.
 */
#include "tilegraph/checkpoint.h"
#include "tilegraph/onnx.h"
#include "tilegraph/optim.h"
#include "tilegraph/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct parity_args {
    const char *model, *batches, *save, *losses, *optimizer;
    int steps, batch, threads;
    float lr;
} parity_args;

static int usage(void)
{
    fprintf(stderr, "usage: bench_onnx_parity MODEL.onnx BATCHES.bin --steps N --batch-size N "
                    "--optimizer sgd|adamw --lr X --threads N --save CKPT --losses JSON\n"
                    "(run by bench/onnx_parity.py, which writes the batches)\n");
    return 2;
}

static int parse_args(int argc, char **argv, parity_args *a)
{
    if (argc < 3)
        return usage();
    *a = (parity_args){.model = argv[1],
                       .batches = argv[2],
                       .steps = 50,
                       .batch = 16,
                       .threads = 1,
                       .optimizer = "sgd",
                       .lr = 0.01f};
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
            return usage();
    }
    if (a->steps <= 0 || a->batch <= 0 || a->threads <= 0 || !a->save || !a->losses)
        return usage();
    return 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_onnx_parity: %s: %s\n", what, tg_error_message());
    return 1;
}

/* The training graph: the model, the loss on its first output, backward,
 * and PyTorch's SGD (momentum 0.9) or AdamW. */
static tg_status build(const parity_args *a, tg_graph *g, tg_tensor **x, tg_tensor **labels,
                       tg_tensor **loss)
{
    tg_onnx_model *m;
    tg_status st = tg_onnx_load(a->model, &m);
    if (st != TG_OK)
        return st;
    tg_graph_set_training(g, true);
    tg_onnx_build_config c = {.batch = a->batch};
    tg_onnx_outputs io;
    st = tg_onnx_build(m, g, &c, &io);
    tg_onnx_model_destroy(m);
    if (st != TG_OK)
        return st;
    *x = io.inputs[0];
    *labels = tg_input(g, "labels", TG_I32, tg_shape1(a->batch));
    *loss = tg_cross_entropy(g, io.outputs[0], *labels);
    tg_tensor_mark_output(*loss);
    tg_optimizer opt =
        strcmp(a->optimizer, "adamw") ? tg_optimizer_sgd(a->lr, 0.9f) : tg_optimizer_adamw(a->lr);
    if ((st = tg_graph_status(g)) != TG_OK || (st = tg_graph_backward(g, *loss)) != TG_OK)
        return st;
    return tg_graph_add_optimizer(g, &opt);
}

static void *read_all(const char *path, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    void *p = f ? malloc(bytes) : NULL;
    size_t got = p ? fread(p, 1, bytes, f) : 0;
    if (f)
        fclose(f);
    if (got != bytes) {
        fprintf(stderr, "bench_onnx_parity: %s: expected %zu bytes of batches (%s)\n", path, bytes,
                f ? "short file" : strerror(errno));
        free(p);
        return NULL;
    }
    return p;
}

static int write_losses(const char *path, const float *losses, int n, double seconds)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"seconds\": %.6f, \"losses\": [", seconds);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.9g", i ? ", " : "", losses[i]);
    fprintf(f, "]}\n");
    return (fclose(f) != 0 || rename(tmp, path) != 0) ? 1 : 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    parity_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    tg_graph *g = tg_graph_create();
    tg_tensor *x, *labels, *loss;
    if (build(&a, g, &x, &labels, &loss) != TG_OK)
        return fail(a.model);
    tg_options *o = tg_options_create();
    tg_session *s;
    if (tg_options_set_int(o, "threadsPerDevice", a.threads) != TG_OK ||
        tg_session_create(g, o, &s) != TG_OK)
        return fail("compiling");
    tg_options_destroy(o);
    size_t per_batch = (size_t)tg_shape_numel(tg_tensor_shape(x));
    size_t x_bytes = per_batch * sizeof(float) * (size_t)a.steps;
    size_t y_bytes = (size_t)a.batch * sizeof(int32_t) * (size_t)a.steps;
    char *data = read_all(a.batches, x_bytes + y_bytes);
    float *losses = calloc((size_t)a.steps, sizeof *losses);
    if (!data || !losses)
        return 1;
    double t0 = now();
    for (int i = 0; i < a.steps; i++) {
        const float *xs = (const float *)data + per_batch * (size_t)i;
        const int32_t *ys = (const int32_t *)(data + x_bytes) + (size_t)a.batch * (size_t)i;
        if (tg_session_write(s, x, xs, per_batch * sizeof(float)) != TG_OK ||
            tg_session_write(s, labels, ys, (size_t)a.batch * sizeof(int32_t)) != TG_OK ||
            tg_session_run(s) != TG_OK ||
            tg_session_read(s, loss, &losses[i], sizeof(float)) != TG_OK)
            return fail("training");
    }
    double seconds = now() - t0;
    if (tg_checkpoint_save(s, a.save, NULL) != TG_OK)
        return fail(a.save);
    if (write_losses(a.losses, losses, a.steps, seconds) != 0) {
        fprintf(stderr, "bench_onnx_parity: cannot write %s\n", a.losses);
        return 1;
    }
    free(data);
    free(losses);
    tg_session_destroy(s);
    tg_graph_destroy(g);
    return 0;
}
