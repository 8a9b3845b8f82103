/* bench/bench_executable.c - compiling a program against loading it from
 * the executable cache (docs/executable-cache.md), on the cases issue 13
 * names: ResNet-50 on the cpu target and ResNet-101 on mk2 (pipelined over
 * two devices split at layer3.8, gradient accumulation 3, 3x64x64 inputs, 10
 * classes, optimizer offloaded, pipeline recomputation: the plan of
 * docs/targets.md). One JSON line per case with both sides: graph build
 * seconds (needed either way: the key hashes the graph), compile seconds,
 * save seconds, load seconds (best of TG_BENCH_REPEAT, default 5) and the
 * file's bytes. The loaded plan is checked to be the compiled one. Timings
 * on a loaded machine are indications only.
 */
#include "bench_util.h"
#include "tilegraph/models.h"

#include "compile/program.h"
#include "core/error.h"
#include "tilegraph/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *label)
{
    fprintf(stderr, "bench_executable: %s: %s\n", label, tg_error_message());
    return 1;
}

static int run_case(const char *label, const char *model, int batch, const char *input, int classes,
                    tg_options *o, const char *file, int repeat)
{
    const tg_model_spec *m = tg_model_find(model);
    tg_model_input in = tg_model_default_input(m);
    if (input && tg_model_input_parse(input, &in) != TG_OK)
        return fail(label);
    if (classes)
        in.classes = classes;
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_model_graph mg;
    double t0 = bench_now();
    if (tg_model_graph_create_ex(m, batch, &opt, &in, &mg) != TG_OK)
        return fail(label);
    double t1 = bench_now();
    tg_program *p = NULL, *q = NULL;
    if (tg_program_compile(mg.graph, o, &p) != TG_OK)
        return fail(label);
    double t2 = bench_now();
    if (tg_executable_save(p, file) != TG_OK)
        return fail(label);
    double t3 = bench_now(), best = 1e30;
    for (int k = 0; k < repeat; k++) {
        double a = bench_now();
        if (tg_executable_load(mg.graph, &p->config, file, &q) != TG_OK)
            return fail(label);
        double b = bench_now() - a;
        best = b < best ? b : best;
        if (k + 1 < repeat)
            tg_program_destroy(q);
    }
    struct stat st;
    stat(file, &st);
    int same = p->arena_bytes == q->arena_bytes && p->n_buffers == q->n_buffers;
    printf("{\"bench\":\"executable\",\"case\":\"%s\",\"model\":\"%s\",\"build_s\":%.4f,"
           "\"compile_s\":%.4f,\"save_s\":%.4f,\"load_s\":%.4f,\"file_bytes\":%lld,"
           "\"same_plan\":%s}\n",
           label, model, t1 - t0, t2 - t1, t3 - t2, best, (long long)st.st_size,
           same ? "true" : "false");
    fflush(stdout);
    tg_program_destroy(p);
    tg_program_destroy(q);
    tg_model_graph_destroy(&mg);
    unlink(file);
    return same ? 0 : 1;
}

int main(int argc, char **argv)
{
    int usage =
        bench_usage(argc, argv, 0,
                    "usage: bench_executable\nCompiling a program against loading it from the "
                    "executable cache: ResNet-50 on cpu and ResNet-101 pipelined on mk2. One JSON "
                    "line per case.\nenvironment: TG_BENCH_REPEAT (repetitions)\n");
    if (usage >= 0)
        return usage;
    const char *r = getenv("TG_BENCH_REPEAT");
    int repeat = r && atoi(r) > 0 ? atoi(r) : 5;
    char file[64];
    snprintf(file, sizeof file, "/tmp/bench_executable.%d.tgx", (int)getpid());
    tg_options *cpu = tg_options_create();
    int rc = run_case("resnet50-cpu", "resnet50", 16, NULL, 0, cpu, file, repeat);
    tg_options_destroy(cpu);
    tg_options *mk2 = tg_options_create();
    const char *kv[][2] = {{"target", "mk2"},
                           {"executionStrategy", "pipelined"},
                           {"split", "layer3.8"},
                           {"Training.gradientAccumulation", "3"},
                           {"TensorLocations.optimizer.onChip", "false"},
                           {"recomputation", "pipeline"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (tg_options_set(mk2, kv[i][0], kv[i][1]) != TG_OK)
            return fail("options");
    rc |= run_case("resnet101-mk2", "resnet101", 16, "3x64x64", 10, mk2, file, repeat);
    tg_options_destroy(mk2);
    return rc;
}
