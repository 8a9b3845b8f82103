/* bench/bench_gpt.c - the zoo's gpt-tiny training step against the same
 * model in PyTorch (bench/torch_gpt.py), in the same run (issue 29: "the
 * tiny GPT on the text corpus in samples/s vs the same model in PyTorch").
 *
 * gpt-tiny as `tilegraph train --model gpt-tiny --data text:FILE` trains it:
 * 4 layers, d 128, 4 heads, 64 tokens a window, vocabulary 256 (bytes),
 * micro-batch 16, Adam at 1e-3. The windows are random tokens: the step's
 * work does not depend on the text, and the data loader is not what is
 * timed. tilegraph and PyTorch alternate TG_BENCH_REPS times (default 3),
 * TG_BENCH_STEPS timed steps each (default 20, after 2 untimed), at 1 and
 * 2 threads (TG_BENCH_THREADS=1 or 2 for one); one JSON line per thread
 * count with both ranges (windows per second of wall and of CPU time) and
 * the ratio of the medians. TG_BENCH_NO_TORCH=1 skips PyTorch.
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include "core/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR "."
#endif

#define BATCH 16
#define MAX_REPS 16

typedef bench_rate rate; /* windows per second */

static void die(const char *what)
{
    fprintf(stderr, "bench_gpt: %s: %s\n", what, tg_error_message());
    exit(1);
}

/* Random token windows for every sample a run takes: ids and next-token
 * labels, both in [0, 256). */
static void write_tokens(tg_session *s, const tg_model_graph *mg)
{
    int64_t n = tg_session_samples_per_run(s, mg->images);
    int64_t len =
        n * tg_shape_numel(tg_tensor_shape(mg->images)) / tg_tensor_shape(mg->images).dim[0];
    int32_t *ids = malloc((size_t)len * sizeof *ids), *labels = malloc((size_t)len * sizeof *ids);
    if (!ids || !labels)
        die("out of memory");
    tg_rng r;
    tg_rng_seed(&r, 1);
    for (int64_t i = 0; i < len; i++) {
        ids[i] = (int32_t)tg_rng_below(&r, 256);
        labels[i] = (int32_t)tg_rng_below(&r, 256);
    }
    if (tg_session_write(s, mg->images, ids, (size_t)len * sizeof *ids) != TG_OK ||
        tg_session_write(s, mg->labels, labels, (size_t)len * sizeof *labels) != TG_OK)
        die("writing the tokens");
    free(ids);
    free(labels);
}

static rate tilegraph_rate(int threads, int steps)
{
    const tg_model_spec *m = tg_model_find("gpt-tiny");
    tg_optimizer opt = tg_optimizer_adam(0.001f);
    tg_model_graph mg;
    if (!m || tg_model_graph_create(m, BATCH, &opt, &mg) != TG_OK)
        die("gpt-tiny");
    tg_options *o = tg_options_create();
    tg_session *s = NULL;
    if (tg_options_set_int(o, "threadsPerDevice", threads) != TG_OK ||
        tg_session_create(mg.graph, o, &s) != TG_OK)
        die("session");
    write_tokens(s, &mg);
    for (int k = 0; k < 2; k++)
        if (tg_session_run(s) != TG_OK)
            die("warm-up");
    double t0 = bench_now(), c0 = bench_cpu_seconds();
    for (int k = 0; k < steps; k++)
        if (tg_session_run(s) != TG_OK)
            die("step");
    double n = (double)tg_session_samples_per_run(s, mg.images) * steps;
    rate r = {n / (bench_now() - t0), n / (bench_cpu_seconds() - c0)};
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    return r;
}

/* PyTorch's rates from its JSON line; -1 when it did not run. Its own
 * OpenBLAS threads are bounded too (torch.set_num_threads does not). */
static rate torch_rate(int threads, int steps, char *version, size_t cap)
{
    if (getenv("TG_BENCH_NO_TORCH"))
        return (rate){-1, -1};
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u OMP_WAIT_POLICY OPENBLAS_NUM_THREADS=%d /usr/bin/python3 "
             "'%s/bench/torch_gpt.py' --threads %d --batch %d --steps %d 2>/dev/null",
             threads, TG_SOURCE_DIR, threads, BATCH, steps);
    return bench_reference_rates(cmd, version, cap);
}

static void measure(int threads, int reps, int steps)
{
    double tw[MAX_REPS], tc[MAX_REPS], pw[MAX_REPS], pc[MAX_REPS];
    char version[64] = "none";
    double load = bench_load_average();
    for (int k = 0; k < reps; k++) { /* alternate, so load falls on both alike */
        rate t = tilegraph_rate(threads, steps),
             p = torch_rate(threads, steps, version, sizeof version);
        tw[k] = t.wall, tc[k] = t.cpu, pw[k] = p.wall, pc[k] = p.cpu;
    }
    printf("{\"bench\":\"gpt_tiny_train\",\"model\":\"gpt-tiny\",\"seq\":64,\"batch\":%d,"
           "\"threads\":%d,\"reps\":%d,\"steps\":%d,\"load_average\":%.2f,",
           BATCH, threads, reps, steps, load);
    bench_print_range("samples_per_s", tw, reps);
    printf(",");
    bench_print_range("cpu_samples_per_s", tc, reps);
    printf(",\"reference\":\"%s\",", version);
    bench_print_range("reference_samples_per_s", pw, reps);
    printf(",");
    bench_print_range("reference_cpu_samples_per_s", pc, reps);
    printf(",");
    double tm = bench_median(tw, reps), pm = bench_median(pw, reps);
    double tcm = bench_median(tc, reps), pcm = bench_median(pc, reps);
    printf("\"ratio_of_medians\":%.3f,\"cpu_ratio_of_medians\":%.3f}\n", pm > 0 ? tm / pm : 0,
           pcm > 0 ? tcm / pcm : 0);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(argc, argv, 0,
                            "usage: bench_gpt\ngpt-tiny's training step (micro-batch 16 of 64 "
                            "tokens, Adam) against bench/torch_gpt.py, alternating, at 1 and 2 "
                            "threads. One JSON line per thread count.\nenvironment: "
                            "TG_BENCH_REPS (3), TG_BENCH_STEPS (20), TG_BENCH_THREADS (1 or 2), "
                            "TG_BENCH_NO_TORCH\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv);
    int reps = bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS);
    int steps = bench_env_int("TG_BENCH_STEPS", 20, 1, 100000);
    int only = bench_env_int("TG_BENCH_THREADS", 0, 0, 2);
    for (int threads = 1; threads <= 2; threads++)
        if (!only || only == threads)
            measure(threads, reps, steps);
    return 0;
}
