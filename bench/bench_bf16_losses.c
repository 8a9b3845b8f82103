/* bench/bench_bf16_losses.c - the loss of every step of bench_resnet's bf16
 * case (ResNet-50, ImageNet stem, 3x64x64, batch 32, the same synthetic batch
 * every step, SGD momentum 0.9, one thread) in 32.32, bf16.32 and bf16.bf16,
 * and PyTorch's on its own random batch in fp32 and under autocast bf16
 * (bench/torch_resnet.py --losses), at two learning rates: bench_resnet's
 * 0.01 and the tilegraph command's default 0.05. It tells a bf16 defect (bf16
 * apart from fp32) from a learning rate too high for the network (all of
 * them alike); docs/precision.md has a run. One JSON line per rate.
 *
 * Environment: TG_BENCH_STEPS (steps, default 30), TG_BENCH_NO_TORCH=1.
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR "."
#endif

#define SIZE 64
#define BATCH 32
#define MAX_STEPS 200

static void die(const char *what)
{
    fprintf(stderr, "bench_bf16_losses: %s: %s\n", what, tg_error_message());
    exit(1);
}

/* bench_resnet's batch: uniform pixels in [-0.5, 0.5), labels 0..9 in turn */
static void synthetic_batch(float *img, int32_t *lab)
{
    uint32_t r = 12345;
    for (size_t i = 0; i < (size_t)BATCH * 3 * SIZE * SIZE; i++) {
        r = r * 1664525u + 1013904223u;
        img[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < BATCH; i++)
        lab[i] = i % 10;
}

static tg_session *open_session(float lr, const char *precision, tg_model_graph *mg)
{
    const tg_model_spec *m = tg_model_find("resnet50");
    tg_model_input in = tg_model_default_input(m);
    in.height = in.width = SIZE;
    in.stem = TG_STEM_IMAGENET;
    tg_optimizer opt = tg_optimizer_sgd(lr, 0.9f);
    if (tg_model_graph_create_ex(m, BATCH, &opt, &in, mg) != TG_OK)
        die("resnet50");
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 1);
    tg_options_set(o, "precision", precision);
    tg_session *s = NULL;
    if (tg_session_create(mg->graph, o, &s) != TG_OK)
        die(precision);
    tg_options_destroy(o);
    return s;
}

/* The loss of each of `steps` steps into out; a step that fails ends the
 * list early (its error on stderr) and the count is returned. */
static int tilegraph_losses(float lr, const char *precision, int steps, double *out)
{
    tg_model_graph mg;
    tg_session *s = open_session(lr, precision, &mg);
    size_t n = (size_t)BATCH * 3 * SIZE * SIZE;
    float *img = malloc(n * sizeof(float));
    int32_t lab[BATCH];
    synthetic_batch(img, lab);
    int k = 0;
    for (; k < steps; k++) {
        tg_session_write(s, mg.images, img, n * sizeof(float));
        tg_session_write(s, mg.labels, lab, sizeof lab);
        if (tg_session_run(s) != TG_OK) {
            fprintf(stderr, "bench_bf16_losses: %s, step %d: %s\n", precision, k,
                    tg_error_message());
            break;
        }
        float loss = 0;
        tg_session_read(s, mg.loss, &loss, sizeof loss);
        out[k] = loss;
    }
    free(img);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    return k;
}

/* PyTorch's losses ("losses": [...] in torch_resnet.py's line); 0 when it
 * cannot run. */
static int torch_losses(float lr, int bf16, int steps, double *out)
{
    char cmd[1024], line[16384];
    snprintf(cmd, sizeof cmd,
             "env -u OMP_WAIT_POLICY /usr/bin/python3 '%s/bench/torch_resnet.py' --model resnet50 "
             "--size %d --batch %d --threads 1 --mode train --losses --warmup 0 --steps %d "
             "--lr %g%s 2>/dev/null",
             TG_SOURCE_DIR, SIZE, BATCH, steps, lr, bf16 ? " --bf16" : "");
    FILE *p = popen(cmd, "r");
    int k = 0;
    while (p && fgets(line, sizeof line, p)) {
        char *c = strstr(line, "\"losses\": [");
        for (c = c ? c + 11 : NULL; c && k < steps;) {
            char *end = NULL;
            double x =
                strtod(c, &end); /* json.dumps writes NaN and Infinity as strtod reads them */
            if (end == c)
                break;
            out[k++] = x;
            c = *end == ',' ? end + 1 : NULL;
        }
    }
    if (p)
        pclose(p);
    return k;
}

static void print_list(const char *key, const double *v, int n)
{
    printf(",\"%s\":[", key);
    for (int i = 0; i < n; i++)
        printf("%s%.4f", i ? "," : "", v[i]);
    printf("]");
}

static void run_rate(float lr, int steps, int no_torch)
{
    static const char *const precisions[] = {"32.32", "bf16.32", "bf16.bf16"};
    static const char *const keys[] = {"losses_32_32", "losses_bf16_32", "losses_bf16_bf16"};
    double v[MAX_STEPS];
    printf("{\"bench\":\"bf16_losses\",\"model\":\"resnet50\",\"input\":\"3x%dx%d\",\"batch\":%d,"
           "\"optimizer\":\"sgd lr %g momentum 0.9\",\"threads\":1",
           SIZE, SIZE, BATCH, lr);
    for (int i = 0; i < 3; i++)
        print_list(keys[i], v, tilegraph_losses(lr, precisions[i], steps, v));
    if (!no_torch) {
        print_list("reference_losses_fp32", v, torch_losses(lr, 0, steps, v));
        print_list("reference_losses_autocast_bf16", v, torch_losses(lr, 1, steps, v));
    }
    printf(",\"load_average\":%.2f}\n", bench_load_average());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int usage =
        bench_usage(argc, argv, 0,
                    "usage: bench_bf16_losses\nThe loss of every step of ResNet-50 (3x64x64, batch "
                    "32, one synthetic batch, SGD momentum 0.9) in 32.32, bf16.32 and bf16.bf16, "
                    "and PyTorch's in fp32 and autocast bf16, at lr 0.01 and 0.05. One JSON line "
                    "per rate.\nenvironment: TG_BENCH_STEPS (30), TG_BENCH_NO_TORCH\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv);
    const char *s = getenv("TG_BENCH_STEPS");
    int steps = s ? atoi(s) : 30;
    steps = steps < 1 ? 1 : steps > MAX_STEPS ? MAX_STEPS : steps;
    run_rate(0.01f, steps, getenv("TG_BENCH_NO_TORCH") != NULL);
    run_rate(0.05f, steps, getenv("TG_BENCH_NO_TORCH") != NULL);
    return 0;
}
