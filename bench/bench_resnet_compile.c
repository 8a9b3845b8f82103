/* bench/bench_resnet_compile.c - how long building and compiling ResNet-101
 * takes, and the memory the compiled plan asks for per device.
 *
 * Seed 003's configuration: torchvision's ResNet-101 on CIFAR-10 resized to
 * 3x64x64, batch 64, AdamW, fp32, with torchvision's default 1000-class head
 * (the seed calls torchvision.models.resnet101() as it is). Cases: one
 * device; and pipelined over two devices split at layer3.8 with gradient
 * accumulation 3 (the seed's out-of-memory run). The program is compiled
 * with tg_program_compile only: no arena is allocated. One JSON line per
 * case: graph build seconds (model, backward pass, optimizer), compile
 * seconds, nodes, and per device the arena bytes and the bytes of each
 * region of the plan.
 * TG_BENCH_MODEL, TG_BENCH_BATCH, TG_BENCH_INPUT ("3x64x64") and
 * TG_BENCH_CLASSES change the model.
 */
#include "bench_util.h"
#include "tilegraph/models.h"

#include "compile/program.h"
#include "core/error.h"
#include "tilegraph/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

static int run_case(const char *label, const tg_model_spec *m, int batch, const tg_model_input *in,
                    tg_options *o)
{
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_model_graph mg;
    double t0 = bench_now();
    if (tg_model_graph_create_ex(m, batch, &opt, in, &mg) != TG_OK) {
        fprintf(stderr, "bench_resnet_compile: %s\n", tg_error_message());
        return 1;
    }
    double t1 = bench_now();
    tg_program *p = NULL;
    tg_status s = tg_program_compile(mg.graph, o, &p);
    double t2 = bench_now();
    if (s != TG_OK) {
        fprintf(stderr, "bench_resnet_compile: %s: %s\n", label, tg_error_message());
        tg_model_graph_destroy(&mg);
        return 1;
    }
    printf("{\"bench\":\"resnet_compile\",\"case\":\"%s\",\"model\":\"%s\",\"batch\":%d,"
           "\"input\":\"%dx%dx%d\",\"classes\":%d,\"nodes\":%d,\"build_s\":%.4f,\"compile_s\":%.4f,"
           "\"threads_per_device\":%d,\"micro_batches\":%d,\"arena_bytes\":%zu,\"devices\":[",
           label, m->name, batch, in->channels, in->height, in->width, in->classes,
           tg_graph_tensor_count(mg.graph), t1 - t0, t2 - t1, p->n_threads, p->micro_batches,
           p->arena_bytes);
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        printf("%s{\"arena_bytes\":%zu,\"stash_depth\":%d,\"scratch_peak\":%zu", d ? "," : "",
               dp->arena_bytes, dp->stash_depth, dp->scratch_peak);
        for (int r = 0; r < TG_REGION_COUNT; r++)
            if (dp->region_bytes[r])
                printf(",\"%s\":%zu", tg_region_name((tg_region)r), dp->region_bytes[r]);
        printf("}");
    }
    printf("]}\n");
    fflush(stdout);
    tg_program_destroy(p);
    tg_model_graph_destroy(&mg);
    return 0;
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_resnet_compile\nHow long building and compiling ResNet-101 takes, and the "
        "memory its plan asks for per device. One JSON line per case.\nenvironment: TG_BENCH_MODEL "
        "(resnet101), TG_BENCH_BATCH (64), TG_BENCH_INPUT (3x64x64), TG_BENCH_CLASSES (1000)\n");
    if (usage >= 0)
        return usage;
    const tg_model_spec *m = tg_model_find(env_or("TG_BENCH_MODEL", "resnet101"));
    if (!m) {
        fprintf(stderr, "bench_resnet_compile: %s\n", tg_error_message());
        return 1;
    }
    int batch = atoi(env_or("TG_BENCH_BATCH", "64"));
    tg_model_input in = tg_model_default_input(m);
    if (tg_model_input_parse(env_or("TG_BENCH_INPUT", "3x64x64"), &in) != TG_OK) {
        fprintf(stderr, "bench_resnet_compile: %s\n", tg_error_message());
        return 1;
    }
    in.classes = atoi(env_or("TG_BENCH_CLASSES", "1000"));
    int failed = 0;
    tg_options *o = tg_options_create();
    failed |= run_case("one device", m, batch, &in, o);
    tg_options_destroy(o);

    o = tg_options_create();
    tg_options_set(o, "executionStrategy", "pipelined");
    tg_options_set(o, "split", "layer3.8");
    tg_options_set_int(o, "Training.gradientAccumulation", 3);
    failed |= run_case("pipelined 2 devices, split layer3.8, accumulation 3", m, batch, &in, o);
    tg_options_destroy(o);
    return failed;
}
