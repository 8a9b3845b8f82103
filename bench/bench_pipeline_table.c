/* bench/bench_pipeline_table.c - issue 45's table: do two pipelined
 * devices pay on this machine, measured in one run with alternations.
 *
 * 1. mnist-pipeline with the README's flags, through the `tilegraph train`
 *    command itself (loader, host and all, as a user runs it): batch 40,
 *    gradient accumulation 16, AdamW (lr 0.001), 24,000 training samples,
 *    in four configurations taken in turn each round: one device with one
 *    thread, one device with two, `--stages auto --devices 2
 *    --threads-per-device 1 --strategy sharded`, and the same pipelined.
 *    Targets: pipelined >= 1.6x sharded and >= 0.9x one device with two
 *    threads (ratios of the medians).
 * 2. The BERT-base-shaped encoder (bench_bert.c's model, 4 layers;
 *    micro-batch 2 sequences of 128; the attention mask an input of each
 *    layer's own, as a stage cannot read another stage's input) and
 *    ResNet-50 (micro-batch 4 at 224x224; SGD with momentum), both with
 *    gradient accumulation TG_BENCH_ACCUMULATION (default 16, as
 *    mnist-pipeline's; 2 stages over m micro-batches idle (N-1)/(m+N-1)
 *    of the step: 20% at m = 4, 6% at 16), in-process on random data:
 *    `stages auto` pipelined over 2 devices of one thread each against one
 *    device with two threads, in turn. Target: >= 0.9x.
 * Every line carries the CPU model, the kernels' instruction sets and the
 * load average before and after, since the machine may be shared.
 *
 * Environment: TG_BENCH_ACCUMULATION (default 16), TG_BENCH_REPS (rounds, default 3),
 * TG_BENCH_STEPS (timed host steps per encoder/ResNet measurement, default 2), TG_BENCH_ONLY
 * (mnist, encoder or resnet50), TG_BENCH_TILEGRAPH (the command; default
 * the build's, next to this bench's directory).
 */
#include "bench_bert_model.h"
#include "bench_util.h"
#include "tilegraph/devices.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_ROUNDS = 8 };

static void print_machine(double load_before)
{
    tg_host_info h;
    char isa[128];
    tg_host_query(&h);
    tg_host_isa_describe(isa, sizeof isa);
    printf("\"cpu\":\"%s\",\"isa\":\"%s\",\"load_average\":[%.2f,%.2f]", h.cpu_model, isa,
           load_before, bench_load_average());
}

static double median(const double *v, int n)
{
    double c[MAX_ROUNDS];
    memcpy(c, v, sizeof(double) * (size_t)n);
    return bench_median(c, n);
}

/* ---- 1. mnist-pipeline through the command ------------------------------------------- */

enum { MNIST_CONFIGS = 4 };
static const char *const mnist_names[MNIST_CONFIGS] = {
    "one_device_1_thread", "one_device_2_threads", "sharded", "pipelined"};
static const char *const mnist_flags[MNIST_CONFIGS] = {
    "--threads-per-device 1", "--threads-per-device 2",
    "--stages auto --devices 2 --threads-per-device 1 --strategy sharded",
    "--stages auto --devices 2 --threads-per-device 1 --strategy pipelined"};

static void tilegraph_command(char *out, size_t cap)
{
    const char *env = getenv("TG_BENCH_TILEGRAPH");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    self[n > 0 ? n : 0] = '\0';
    snprintf(out, cap, "%s/../tilegraph", dirname(self));
}

static void mnist(int rounds)
{
    char tg[4200], cmd[4800], version[8];
    tilegraph_command(tg, sizeof tg);
    double rate[MNIST_CONFIGS][MAX_ROUNDS], load = bench_load_average();
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < MNIST_CONFIGS; k++) {
            snprintf(cmd, sizeof cmd,
                     "%s train --model mnist-pipeline --batch-size 40 --gradient-accumulation 16 "
                     "--optimizer adamw --lr 0.001 --train-limit 24000 --test-limit 100 --json "
                     "--quiet %s 2>/dev/null",
                     tg, mnist_flags[k]);
            rate[k][r] = bench_reference_rate(cmd, version, sizeof version);
            if (rate[k][r] <= 0) {
                fprintf(stderr, "bench_pipeline_table: '%s' gave no samples/s\n", cmd);
                exit(1);
            }
        }
    printf("{\"bench\":\"pipeline_table\",\"model\":\"mnist-pipeline\",\"batch\":40,"
           "\"gradient_accumulation\":16,\"optimizer\":\"adamw\",\"samples\":24000,"
           "\"rounds\":%d,\"samples_per_s\":{",
           rounds);
    for (int k = 0; k < MNIST_CONFIGS; k++) {
        bench_print_range(mnist_names[k], rate[k], rounds);
        printf(k + 1 < MNIST_CONFIGS ? "," : "},");
    }
    double one2 = median(rate[1], rounds), sharded = median(rate[2], rounds),
           piped = median(rate[3], rounds);
    printf("\"pipelined_over_sharded\":%.3f,\"target_over_sharded\":1.6,"
           "\"pipelined_over_one_device_2_threads\":%.3f,\"target_over_one_device\":0.9,",
           piped / sharded, piped / one2);
    print_machine(load);
    printf("}\n");
    fflush(stdout);
}

/* ---- 2. the encoder and ResNet-50, in-process ------------------------------------------ */

/* Uniform random floats into every float input, labels below `classes`
 * into every int input, for a whole host step. */
static void write_random(tg_session *s, tg_tensor *const *inputs, int n, int classes)
{
    uint32_t lcg = 12345;
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = inputs[i];
        int64_t rows = tg_session_samples_per_run(s, t);
        int64_t per = tg_shape_numel(tg_tensor_shape(t)) / tg_tensor_shape(t).dim[0];
        size_t count = (size_t)(rows * per);
        bool ints = tg_tensor_dtype(t) == TG_I32;
        void *buf = malloc(count * 4);
        for (size_t k = 0; k < count; k++) {
            lcg = lcg * 1664525u + 1013904223u;
            if (ints)
                ((int32_t *)buf)[k] = (int32_t)((lcg >> 8) % (uint32_t)classes);
            else
                ((float *)buf)[k] = (float)(lcg >> 8) / 16777216.0f - 0.5f;
        }
        tg_session_write(s, t, buf, count * 4);
        free(buf);
    }
}

typedef struct {
    tg_graph *g;
    tg_tensor *inputs[3 + BERT_MAX_LAYERS];
    int n_inputs, classes;
    tg_model_graph mg; /* a model of the registry; else g is bench_bert_model.h's */
    bool from_registry;
} model;

static model build(const char *name)
{
    model m = {0};
    if (!strcmp(name, "encoder")) {
        bert_shape shape = {4, 768, 12, 3072, 128, 2, 16, 0.1f, 1};
        bert_graph b = build_bert(&shape);
        m.g = b.g;
        m.inputs[0] = b.x, m.inputs[1] = b.labels;
        for (int l = 0; l < shape.layers; l++)
            m.inputs[2 + l] = b.masks[l];
        m.n_inputs = 2 + shape.layers;
        m.classes = shape.classes;
        return m;
    }
    const tg_model_spec *spec = tg_model_find("resnet50");
    tg_model_input in = tg_model_default_input(spec);
    in.height = in.width = 224;
    in.stem = TG_STEM_IMAGENET;
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.9f);
    if (!spec || tg_model_graph_create_ex(spec, 4, &opt, &in, &m.mg) != TG_OK)
        bert_die("resnet50");
    m.from_registry = true;
    m.g = m.mg.graph;
    m.inputs[0] = m.mg.images, m.inputs[1] = m.mg.labels;
    m.n_inputs = 2;
    m.classes = 10;
    return m;
}

/* Samples per second of `steps` host steps after two untimed ones. */
static double session_rate(const char *name, bool pipelined, int steps, int accumulation)
{
    model m = build(name);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "Training.gradientAccumulation", accumulation);
    if (pipelined) {
        tg_options_set(o, "executionStrategy", "pipelined");
        tg_options_set(o, "stages", "auto");
        tg_options_set(o, "devices", "2");
        tg_options_set(o, "threadsPerDevice", "1");
    } else {
        tg_options_set(o, "threadsPerDevice", "2");
    }
    tg_session *s = NULL;
    if (tg_session_create(m.g, o, &s) != TG_OK)
        bert_die(name);
    int64_t samples = tg_session_samples_per_run(s, m.inputs[0]);
    double t0 = 0;
    for (int k = 0; k < steps + 2; k++) {
        if (k == 2)
            t0 = bench_now();
        write_random(s, m.inputs, m.n_inputs, m.classes);
        if (tg_session_run(s) != TG_OK)
            bert_die("run");
    }
    double rate = (double)steps * (double)samples / (bench_now() - t0);
    tg_session_destroy(s);
    if (m.from_registry)
        tg_model_graph_destroy(&m.mg);
    else
        tg_graph_destroy(m.g);
    tg_options_destroy(o);
    return rate;
}

static void pipelined_vs_one(const char *name, int rounds, int steps, int accumulation)
{
    double one[MAX_ROUNDS], piped[MAX_ROUNDS], load = bench_load_average();
    for (int r = 0; r < rounds; r++) {
        one[r] = session_rate(name, false, steps, accumulation);
        piped[r] = session_rate(name, true, steps, accumulation);
    }
    printf("{\"bench\":\"pipeline_table\",\"model\":\"%s\",\"micro_batch\":%d,"
           "\"gradient_accumulation\":%d,\"rounds\":%d,\"steps\":%d,\"samples_per_s\":{",
           name, strcmp(name, "encoder") ? 4 : 2, accumulation, rounds, steps);
    bench_print_range("one_device_2_threads", one, rounds);
    printf(",");
    bench_print_range("pipelined_2_devices", piped, rounds);
    printf("},\"pipelined_over_one_device_2_threads\":%.3f,\"target\":0.9,",
           median(piped, rounds) / median(one, rounds));
    print_machine(load);
    printf("}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_pipeline_table\nIssue 45's table: mnist-pipeline with the README's flags "
        "(1 device 1 and 2 threads, 2 devices sharded and pipelined) through the tilegraph "
        "command, then the BERT-base-shaped encoder (4 layers) and ResNet-50 pipelined over 2 "
        "devices against 1 device with 2 threads; rounds alternate. One JSON line per model, "
        "with the CPU, ISA and load average.\nenvironment: TG_BENCH_ACCUMULATION (default 16), "
        "TG_BENCH_REPS (default 3), "
        "TG_BENCH_STEPS (default 2), TG_BENCH_ONLY=mnist|encoder|resnet50, TG_BENCH_TILEGRAPH\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv);
    int rounds = bench_env_int("TG_BENCH_REPS", 3, 1, MAX_ROUNDS);
    int steps = bench_env_int("TG_BENCH_STEPS", 2, 1, 100);
    int accumulation = bench_env_int("TG_BENCH_ACCUMULATION", 16, 1, 1024);
    const char *only = getenv("TG_BENCH_ONLY");
    if (!only || !strcmp(only, "mnist"))
        mnist(rounds);
    if (!only || !strcmp(only, "encoder"))
        pipelined_vs_one("encoder", rounds, steps, accumulation);
    if (!only || !strcmp(only, "resnet50"))
        pipelined_vs_one("resnet50", rounds, steps, accumulation);
    return 0;
}
