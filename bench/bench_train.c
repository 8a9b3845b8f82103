/* bench/bench_train.c - training throughput of mnist-pipeline (batch 40,
 * AdamW lr 0.001, the pipelining tutorial's settings) on 1 and 2 threads,
 * side by side with the PyTorch reference (bench/
 * torch_mnist_pipeline.py) run in the same process tree, same machine, same
 * moment. One JSON line per case.
 *
 * Environment: TG_BENCH_SAMPLES (training samples per measurement, default
 * the whole 60000), TG_TORCH_REFERENCE (path of the reference script),
 * TG_BENCH_NO_TORCH=1 to skip the reference.
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include "core/alloc.h"
#include "data/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR "."
#endif

/* Samples per second of one pass over the training samples; with a profile
 * directory, the graph profile and the first two host steps' execution are
 * recorded into it. */
static double train_rate(const tg_dataset *ds, int threads, int batch, const char *profile_dir)
{
    const tg_model_spec *m = tg_model_find("mnist-pipeline");
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_model_graph mg;
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    if (profile_dir) {
        tg_options_set(o, "autoReport.all", "true");
        tg_options_set(o, "autoReport.directory", profile_dir);
    }
    tg_session *s = NULL;
    if (tg_model_graph_create(m, batch, &opt, &mg) != TG_OK ||
        tg_session_create(mg.graph, o, &s) != TG_OK) {
        fprintf(stderr, "bench_train: %s\n", tg_error_message());
        exit(1);
    }
    tg_loader_config lc = tg_loader_defaults(ds, batch);
    lc.mean = m->mean;
    lc.std = m->std;
    tg_loader *l = NULL;
    tg_loader_create(ds, &lc, &l);
    float *img = tg_malloc((size_t)batch * 784 * sizeof(float));
    int32_t *lab = tg_malloc((size_t)batch * sizeof(int32_t));
    float loss = 0;
    tg_loader_start_epoch(l, 0);
    int64_t steps = tg_loader_steps_per_epoch(l), count = 0, seen = 0;
    double t0 = bench_now(); /* includes writing the profile, when on */
    for (int64_t k = 0; k < steps; k++) {
        tg_loader_next(l, img, lab, &count);
        tg_session_write(s, mg.images, img, (size_t)count * 784 * sizeof(float));
        tg_session_write(s, mg.labels, lab, (size_t)count * sizeof(int32_t));
        if (tg_session_run(s) != TG_OK) {
            fprintf(stderr, "bench_train: %s\n", tg_error_message());
            exit(1);
        }
        tg_session_read(s, mg.loss, &loss, sizeof loss);
        seen += count;
    }
    double rate = (double)seen / (bench_now() - t0);
    tg_free(img);
    tg_free(lab);
    tg_loader_destroy(l);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    return rate;
}

/* The reference's samples/s for one epoch on `threads` threads, or -1. */
static double torch_rate(int threads, char *version, size_t cap)
{
    if (getenv("TG_BENCH_NO_TORCH"))
        return -1;
    const char *script = getenv("TG_TORCH_REFERENCE");
    char path[1024], cmd[1200];
    if (!script) {
        snprintf(path, sizeof path, "%s/bench/torch_mnist_pipeline.py", TG_SOURCE_DIR);
        script = path;
    }
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s' --threads %d --epochs 1 --batch-size 40 2>/dev/null", script,
             threads);
    return bench_reference_rate(cmd, version, cap);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_train\nmnist-pipeline training throughput on 1 and 2 threads beside the "
        "PyTorch reference, in the same run. One JSON line per case.\nenvironment: "
        "TG_BENCH_SAMPLES (limit), TG_BENCH_NO_TORCH, TG_TORCH_REFERENCE (script path)\n");
    if (usage >= 0)
        return usage;
    tg_dataset *ds = NULL;
    const char *limit = getenv("TG_BENCH_SAMPLES");
    if (tg_dataset_load(TG_DATASET_FASHION_MNIST, NULL, TG_SPLIT_TRAIN, limit ? atoll(limit) : 0,
                        &ds) != TG_OK) {
        fprintf(stderr, "bench_train: %s\n", tg_error_message());
        return 1;
    }
    for (int threads = 1; threads <= 2; threads++) {
        double ours = train_rate(ds, threads, 40, NULL);
        char version[64] = "none";
        double ref = torch_rate(threads, version, sizeof version);
        printf("{\"bench\":\"train_mnist_pipeline\",\"batch\":40,\"optimizer\":\"adamw\","
               "\"threads\":%d,\"samples\":%lld,\"samples_per_s\":%.1f,\"reference\":\"%s\","
               "\"reference_samples_per_s\":%.1f,\"ratio\":%.3f}\n",
               threads, (long long)ds->n, ours, version, ref, ref > 0 ? ours / ref : 0.0);
        fflush(stdout);
    }
    /* profiling overhead: the same training with profiles on, in the same run */
    char dir[] = "/tmp/tg_bench_profile_XXXXXX";
    if (mkdtemp(dir)) {
        double off = train_rate(ds, 1, 40, NULL), on = train_rate(ds, 1, 40, dir);
        printf("{\"bench\":\"profile_overhead\",\"threads\":1,\"samples_per_s_off\":%.1f,"
               "\"samples_per_s_on\":%.1f,\"slowdown_percent\":%.2f,\"target_percent\":5}\n",
               off, on, 100.0 * (off - on) / off);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_train: could not remove %s\n", dir);
    }
    tg_dataset_destroy(ds);
    return 0;
}
