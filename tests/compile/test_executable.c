/* tests/compile/test_executable.c - the executable cache (issue 13, item 5):
 * a loaded program equals the compiled one (memory plan, steps, tile plan)
 * and trains to the same weights; corrupt, truncated and stale files are
 * refused with a reason and recompiled through the cache with a warning;
 * damaged payloads whose checksums are made to match again are still
 * refused by the loader's checks, never a crash; saving and parsing with
 * each of their allocations failed in turn return TG_ERR_NOMEM and leak
 * nothing. */
#include "tg_test.h"

#include "compile/program.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/process.h"
#include "core/rng.h"
#include "target/tiled.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

static char *path(const char *name)
{
    return tg_test_path(tmpdir, name);
}

/* mnist-pipeline over two pipelined devices with accumulation, on `target`. */
static tg_options *options(const char *target)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", target));
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 4));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    return o;
}

static void build(int batch, tg_model_graph *mg)
{
    const tg_model_spec *m = tg_model_find("mnist-pipeline");
    TG_CHECK(m != NULL);
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create(m, batch, &opt, mg));
}

static void check_same_program(const tg_program *a, const tg_program *b)
{
    TG_CHECK(a->n_devices == b->n_devices && a->n_buffers == b->n_buffers);
    TG_CHECK(a->n_transfers == b->n_transfers && a->arena_bytes == b->arena_bytes);
    TG_CHECK(a->micro_batches == b->micro_batches && a->replicas == b->replicas);
    if (a->n_buffers != b->n_buffers || a->n_devices != b->n_devices)
        return;
    TG_CHECK(memcmp(a->buffers, b->buffers, sizeof *a->buffers * (size_t)a->n_buffers) == 0);
    TG_CHECK(memcmp(a->home, b->home, sizeof(int) * (size_t)a->graph->n_nodes) == 0);
    for (int d = 0; d < a->n_devices; d++) {
        const tg_device_program *x = &a->devices[d], *y = &b->devices[d];
        TG_CHECK(x->arena_bytes == y->arena_bytes && x->stash_depth == y->stash_depth);
        TG_CHECK(memcmp(x->region_bytes, y->region_bytes, sizeof x->region_bytes) == 0);
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
            TG_CHECK(x->n_steps[ph] == y->n_steps[ph]);
            if (x->n_steps[ph] == y->n_steps[ph])
                TG_CHECK(memcmp(x->steps[ph], y->steps[ph],
                                sizeof(tg_step) * (size_t)x->n_steps[ph]) == 0);
        }
    }
    TG_CHECK((a->tile_plan == NULL) == (b->tile_plan == NULL));
    for (int d = 0; a->tile_plan && b->tile_plan && d < a->n_devices; d++) {
        const tg_tile_device *x = &a->tile_plan->devices[d], *y = &b->tile_plan->devices[d];
        TG_CHECK(x->max_tile == y->max_tile && x->max_bytes == y->max_bytes);
        TG_CHECK(memcmp(x->bytes, y->bytes,
                        sizeof(int64_t) * TG_TILE_CAT_COUNT * (size_t)a->tile_plan->target.tiles) ==
                 0);
        TG_CHECK(memcmp(x->cycles, y->cycles, sizeof x->cycles) == 0);
    }
}

/* The executable functions take the options read (core/config.h). */
static tg_status load_file(const tg_graph *g, const tg_options *o, const char *file,
                           tg_program **out)
{
    tg_config c;
    *out = NULL;
    TG_TRY(tg_config_read(o, &c));
    tg_status s = tg_executable_load(g, &c, file, out);
    tg_config_free(&c);
    return s;
}

static tg_status key_of(const tg_graph *g, const tg_options *o, char key[33])
{
    tg_config c;
    TG_TRY(tg_config_read(o, &c));
    tg_status s = tg_executable_key(g, &c, key);
    tg_config_free(&c);
    return s;
}

static void test_roundtrip(void)
{
    const char *targets[] = {"cpu", "mk2"};
    for (int t = 0; t < 2; t++) {
        tg_model_graph mg;
        build(8, &mg);
        tg_options *o = options(targets[t]);
        tg_program *compiled = NULL, *loaded = NULL;
        TG_CHECK_OK(tg_program_compile(mg.graph, o, &compiled));
        TG_CHECK_OK(tg_executable_save(compiled, path("p.tgx")));
        TG_CHECK_OK(load_file(mg.graph, o, path("p.tgx"), &loaded));
        if (compiled && loaded)
            check_same_program(compiled, loaded);
        TG_CHECK(access(path("p.tgx.tmp"), F_OK) != 0);
        tg_program_destroy(compiled);
        tg_program_destroy(loaded);
        tg_options_destroy(o);
        tg_model_graph_destroy(&mg);
    }
}

/* oneDNN primitives are host objects: a loaded program makes them again,
 * the same as a fresh compile, and refuses (stale) a file whose kernel
 * scratch this machine's kernels would not match. */
static void test_kernel_plans_made_again(void)
{
    const tg_model_spec *m = tg_model_find("resnet18");
    tg_model_input in = tg_model_default_input(m);
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.9f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create_ex(m, 2, &opt, &in, &mg));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_program *compiled = NULL, *loaded = NULL, *other = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &compiled));
    TG_CHECK_OK(tg_executable_save(compiled, path("r.tgx")));
    TG_CHECK_OK(load_file(mg.graph, o, path("r.tgx"), &loaded));
    int planned = 0;
    for (int i = 0; compiled && loaded && i < mg.graph->n_nodes; i++) {
        TG_CHECK((compiled->plans[i].state == NULL) == (loaded->plans[i].state == NULL));
        TG_CHECK(strcmp(compiled->plans[i].kernel, loaded->plans[i].kernel) == 0);
        planned += loaded->plans[i].state != NULL;
    }
    TG_CHECK(planned > 0);
    tg_dnnl_force_mode(TG_DNNL_NEVER, true);
    TG_CHECK(load_file(mg.graph, o, path("r.tgx"), &other) == TG_ERR_FORMAT);
    TG_CHECK(strstr(tg_error_message(), "scratch") != NULL);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
    tg_program_destroy(compiled);
    tg_program_destroy(loaded);
    tg_program_destroy(other);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static unsigned char *read_all(const char *p, size_t *len)
{
    return (unsigned char *)tg_test_read_file(p, len);
}

static void write_all(const char *p, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(p, "wb");
    TG_CHECK(f && fwrite(buf, 1, len, f) == len);
    if (f)
        fclose(f);
}

static void put_u32(unsigned char *at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        at[i] = (unsigned char)(v >> (8 * i));
}

/* Make both checksums right again, so the loader's own checks are reached. */
static void fix_checksums(unsigned char *buf, size_t len)
{
    put_u32(buf + 72, (uint32_t)crc32(0, buf + 80, (uInt)(len - 80)));
    put_u32(buf + 76, (uint32_t)crc32(0, buf, 76));
}

static tg_status load_bytes(const tg_graph *g, const tg_options *o, const unsigned char *buf,
                            size_t len)
{
    tg_program *p = NULL;
    tg_config c;
    TG_CHECK_OK(tg_config_read(o, &c));
    tg_status s = tg_executable_parse(g, &c, buf, len, "test.tgx", &p);
    tg_config_free(&c);
    TG_CHECK((s == TG_OK) == (p != NULL));
    tg_program_destroy(p);
    return s;
}

static float *train(const char *exe_file, size_t *n_out);

static void test_corrupt_truncated_stale(void)
{
    tg_model_graph mg, other;
    build(8, &mg);
    build(4, &other);
    tg_options *o = options("cpu");
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK_OK(tg_executable_save(p, path("good.tgx")));
    size_t len = 0;
    unsigned char *good = read_all(path("good.tgx"), &len);
    TG_CHECK(good && len > 200);
    if (!good)
        return;
    unsigned char *buf = tg_malloc(len);
    /* a flipped byte anywhere: a checksum catches it */
    for (size_t at = 0; at < len; at += len / 37 + 1) {
        memcpy(buf, good, len);
        buf[at] ^= 0x5a;
        TG_CHECK(load_bytes(mg.graph, o, buf, len) != TG_OK);
    }
    /* every truncation */
    for (size_t n = 0; n < len; n += (n < 100 ? 1 : len / 53 + 1))
        TG_CHECK(load_bytes(mg.graph, o, good, n) == TG_ERR_FORMAT);
    /* stale: another graph, other options, another version */
    TG_CHECK(load_bytes(other.graph, o, good, len) == TG_ERR_NOT_FOUND);
    TG_CHECK(strstr(tg_error_message(), "another graph, options or target") != NULL);
    tg_options *o2 = options("cpu");
    TG_CHECK_OK(tg_options_set(o2, "pipelineSchedule", "1f1b"));
    TG_CHECK(load_bytes(mg.graph, o2, good, len) == TG_ERR_NOT_FOUND);
    memcpy(buf, good, len);
    memcpy(buf + 16, "0.0.0-other\0\0\0\0", 16);
    fix_checksums(buf, len);
    TG_CHECK(load_bytes(mg.graph, o, buf, len) == TG_ERR_NOT_FOUND);
    TG_CHECK(strstr(tg_error_message(), "written by tilegraph 0.0.0-other") != NULL);
    /* damage the payload and repair the checksums: the loader's checks refuse
     * what points outside, never crash (ASan builds check the "never") */
    tg_rng rng;
    tg_rng_seed(&rng, 13);
    int refused = 0;
    for (int round = 0; round < 400; round++) {
        memcpy(buf, good, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            size_t at = 80 + tg_rng_next(&rng) % (len - 80);
            buf[at] = round % 2 ? (unsigned char)tg_rng_next(&rng) : 0xff;
        }
        fix_checksums(buf, len);
        if (load_bytes(mg.graph, o, buf, len) != TG_OK) {
            refused++;
            continue;
        }
        /* what the loader lets through, the engine runs (issue 46, row 8):
         * three training steps, under ASan in the sanitizer builds */
        write_all(path("damaged.tgx"), buf, len);
        size_t n = 0;
        tg_free(train(path("damaged.tgx"), &n));
    }
    printf("  %d of 400 damaged payloads refused\n", refused);
    TG_CHECK(refused > 100); /* most damage is seen (some hits only FLOP counts) */
    tg_free(buf);
    free(good);
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_options_destroy(o2);
    tg_model_graph_destroy(&mg);
    tg_model_graph_destroy(&other);
}

/* ---- tampered files whose checksums were made right again (issue 46, row 8) ---- */

/* Options a program may be compiled with, each as key, value pairs. */
static const char *const configs[][9] = {
    {"executionStrategy", "single", NULL},
    {"executionStrategy", "single", "replicationFactor", "2", NULL},
    {"executionStrategy", "pipelined", "Training.gradientAccumulation", "4", NULL},
    {"executionStrategy", "pipelined", "Training.gradientAccumulation", "4", "pipelineSchedule",
     "zb-h1", NULL},
    {"executionStrategy", "pipelined", "Training.gradientAccumulation", "4", "recomputation",
     "pipeline", NULL},
    {"executionStrategy", "phased", "phases", "B1,B2|B3,B4", NULL},
    {"executionStrategy", "phased", "phases", "B1,B2|B3,B4", "phasedExecutionType", "ParallelIPU",
     NULL},
    {"TensorLocations.weight.onChip", "false", "TensorLocations.optimizer.onChip", "false",
     "TensorLocations.accumulator.onChip", "false", "Training.gradientAccumulation", "2", NULL},
    {"TensorLocations.activation.onChip", "false", "executionStrategy", "pipelined",
     "Training.gradientAccumulation", "4", NULL},
    {"replicationFactor", "2", "TensorLocations.optimizer.replicatedTensorSharding", "true",
     "TensorLocations.optimizer.minElementsForReplicatedTensorSharding", "16", NULL},
    {"replicationFactor", "2", "TensorLocations.weight.replicatedTensorSharding", "true",
     "TensorLocations.weight.minElementsForReplicatedTensorSharding", "16", NULL},
    {"precision", "bf16.bf16", "lossScaling", "static", NULL},
    {"precision", "16.16", "lossScaling", "dynamic", "Training.gradientAccumulation", "2", NULL},
    {"target", "mk2", "executionStrategy", "pipelined", "Training.gradientAccumulation", "4", NULL},
    {"replicationFactor", "2", "TensorLocations.optimizer.replicatedTensorSharding", "true",
     "TensorLocations.optimizer.minElementsForReplicatedTensorSharding", "16",
     "TensorLocations.optimizer.onChip", "false", NULL},
    {"executionStrategy", "phased", "phases", "B1,B2|B3,B4", "TensorLocations.weight.onChip",
     "false", NULL},
    {"TensorLocations.ioSchedule", "preload", "TensorLocations.weight.onChip", "false",
     "TensorLocations.optimizer.onChip", "false", NULL},
    {"executionStrategy", "pipelined", "Training.gradientAccumulation", "4", "pipelineSchedule",
     "zb-h2", "recomputation", "pipeline", NULL},
};

static tg_options *config_options(int k)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    for (int i = 0; configs[k][i]; i += 2)
        TG_CHECK_OK(tg_options_set(o, configs[k][i], configs[k][i + 1]));
    return o;
}

/* p as a file, parsed back: the loader's verdict. */
static tg_status reparse(const tg_program *p)
{
    void *data = NULL;
    size_t len = 0;
    TG_CHECK_OK(tg_executable_serialize(p, &data, &len));
    tg_program *back = NULL;
    tg_status s = tg_executable_parse(p->graph, &p->config, data, len, "tampered.tgx", &back);
    TG_CHECK((s == TG_OK) == (back != NULL));
    tg_program_destroy(back);
    tg_free(data);
    return s;
}

/* Every program the compiler makes passes the loader's checks (none is refused wrongly). */
static void test_compiled_programs_load(void)
{
    tg_model_graph mg;
    build(4, &mg);
    for (int k = 0; k < (int)(sizeof configs / sizeof configs[0]); k++) {
        tg_options *o = config_options(k);
        tg_program *p = NULL;
        TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
        if (p && reparse(p) != TG_OK)
            tg_test_fail(__FILE__, __LINE__, "config %d (%s %s ...) refused: %s", k, configs[k][0],
                         configs[k][1], tg_error_message());
        tg_program_destroy(p);
        tg_options_destroy(o);
    }
    tg_model_graph_destroy(&mg);
}

/* The first step of a phase that reads a weight (an update step reads one). */
static tg_step *update_step(tg_program *p, int nth)
{
    tg_device_program *dp = &p->devices[p->n_devices - 1];
    for (int s = 0; s < dp->n_steps[TG_PHASE_UPDATE]; s++) {
        tg_step *st = &dp->steps[TG_PHASE_UPDATE][s];
        if ((p->graph->nodes[st->node]->flags & TG_NODE_OPTIMIZER) && st->in[0] >= 0 && nth-- == 0)
            return st;
    }
    return NULL;
}

static int first_offloaded(const tg_program *p)
{
    for (int b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].offloaded)
            return b;
    return -1;
}

typedef enum {
    IN_NONE,      /* a step's input -1: the engine read NULL (SIGSEGV) */
    OUT_NONE,     /* a step's output -1 */
    OTHER_WEIGHT, /* an update reads and writes another weight (trains it silently) */
    SHORT_BUFFER, /* a weight's buffer a few bytes long: kernels read past it */
    HOST_STRIDE,  /* an offloaded buffer's slots 2^60 apart: an 18 EB host copy */
    HOME_SWAP,    /* a node kept in another node's buffer */
    ACC_SWAP,     /* an accumulator adds into another weight's accumulator */
    INPUT_SWAP,   /* the host streams an input into a weight */
    ARENA_HUGE,   /* a device's memory and a region made huge together */
    ITERATIONS,   /* more iterations than the options say */
    NO_UPDATE,    /* an update step made a copy of another: one weight never trained */
    SCHEDULE,     /* two passes swapped in the pipeline schedule */
    INPUT_TWICE,  /* the host streams one input twice and the other not */
    OUTPUT_DROP,  /* an output (the loss) no longer streamed to the host */
    MUTATION_COUNT
} mutation;

static const char *const mutation_names[MUTATION_COUNT] = {
    "input -1",       "output -1",   "another weight",     "short buffer",  "host stride",
    "home swapped",   "accumulator", "host input swapped", "arena huge",    "iterations",
    "update dropped", "schedule",    "input twice",        "output dropped"};

/* Apply m to p; false when p has nothing it applies to. */
static bool mutate(tg_program *p, mutation m)
{
    tg_step *a = update_step(p, 0), *b = update_step(p, 1);
    tg_device_program *dp = &p->devices[0];
    switch (m) {
    case IN_NONE:
        return a && (a->in[0] = -1, true);
    case OUT_NONE:
        for (int s = 0; s < dp->n_steps[TG_PHASE_FORWARD]; s++)
            if (dp->steps[TG_PHASE_FORWARD][s].out >= 0)
                return (dp->steps[TG_PHASE_FORWARD][s].out = -1, true);
        return false;
    case OTHER_WEIGHT:
        if (!a || !b)
            return false;
        a->in[0] = b->in[0];
        a->out = b->out;
        return true;
    case SHORT_BUFFER:
        return a && (p->buffers[a->in[0]].bytes = 8, true);
    case HOST_STRIDE: {
        int o = first_offloaded(p);
        if (o < 0)
            return false;
        dp = &p->devices[p->buffers[o].device];
        dp->offloaded_bytes -= p->buffers[o].stride * (size_t)p->buffers[o].slots;
        p->buffers[o].stride = (size_t)1 << 60;
        dp->offloaded_bytes += p->buffers[o].stride * (size_t)p->buffers[o].slots;
        return true;
    }
    case HOME_SWAP:
        if (!a || !b)
            return false;
        p->home[p->buffers[a->in[0]].node] = b->in[0];
        return true;
    case ACC_SWAP:
        for (int d = 0; d < p->n_devices; d++)
            if (p->devices[d].n_accumulators > 1) {
                tg_accumulator *acc = p->devices[d].accumulators;
                int t = acc[0].acc_buffer;
                acc[0].acc_buffer = acc[1].acc_buffer;
                acc[1].acc_buffer = t;
                return true;
            }
        return false;
    case INPUT_SWAP:
        return dp->n_inputs > 0 && a && (dp->inputs[0] = a->in[0], true);
    case ARENA_HUGE:
        dp->arena_bytes += (size_t)1 << 62;
        dp->region_bytes[TG_REGION_ACTIVATION] += (size_t)1 << 62;
        p->arena_bytes += (size_t)1 << 62;
        return true;
    case ITERATIONS:
        p->iterations = 1 << 30;
        return true;
    case OUTPUT_DROP:
        for (int d = 0; d < p->n_devices; d++)
            if (p->devices[d].n_outputs > 0)
                return (p->devices[d].n_outputs--, true);
        return false;
    case INPUT_TWICE:
        return dp->n_inputs > 1 && (dp->inputs[1] = dp->inputs[0], true);
    case NO_UPDATE:
        if (!a || !b)
            return false;
        *a = *b;
        return true;
    case SCHEDULE:
        for (int d = 0; p->schedule.ops && d < p->schedule.n_devices; d++)
            for (int k = 0; k + 1 < p->schedule.n_ops[d]; k++) {
                tg_pipe_op *o = p->schedule.ops[d];
                if (o[k].pass != o[k + 1].pass) {
                    tg_pipe_op t = o[k];
                    o[k] = o[k + 1];
                    o[k + 1] = t;
                    return true;
                }
            }
        return false;
    default:
        return false;
    }
}

/* Each hand-made mutation, checksums made right by the writer, is refused
 * with a message saying what is wrong; every config's program is tried. */
static void test_tampered_refused(void)
{
    tg_model_graph mg;
    build(4, &mg);
    int tried[MUTATION_COUNT] = {0};
    for (int k = 0; k < (int)(sizeof configs / sizeof configs[0]); k++)
        for (int m = 0; m < MUTATION_COUNT; m++) {
            tg_options *o = config_options(k);
            tg_program *p = NULL;
            TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
            if (p && mutate(p, (mutation)m)) {
                tried[m]++;
                tg_status s = reparse(p);
                if (s != TG_ERR_FORMAT || !strstr(tg_error_message(), "tampered.tgx"))
                    tg_test_fail(__FILE__, __LINE__, "config %d, %s: %s, \"%s\"", k,
                                 mutation_names[m], tg_status_name(s), tg_error_message());
                else if (k == 0)
                    printf("  %s: %s\n", mutation_names[m], tg_error_message());
            }
            tg_program_destroy(p);
            tg_options_destroy(o);
        }
    for (int m = 0; m < MUTATION_COUNT; m++)
        if (!tried[m])
            tg_test_fail(__FILE__, __LINE__, "no program to try '%s' on", mutation_names[m]);
    tg_model_graph_destroy(&mg);
}

/* ---- the inference fusion in the file (compile/fuse.c) ---- */

/* x -> conv -> batch norm -> ReLU -> conv -> batch norm -> add: an inference
 * program whose two convolutions compute the nodes after them. */
static tg_graph *build_fused(void)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *h = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 6, 6));
    for (int l = 0; l < 2; l++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", l);
        tg_tensor *w =
            tg_param(g, name, tg_shape4(16, 16, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 144, 0});
        snprintf(name, sizeof name, "gamma%d", l);
        tg_tensor *gamma = tg_param(g, name, tg_shape1(16), (tg_init){TG_INIT_ONES, 0, 0});
        snprintf(name, sizeof name, "stats%d", l);
        tg_tensor *st = tg_state(g, name, tg_shape2(2, 16), (tg_init){TG_INIT_NORM_STATS, 0, 0});
        h = tg_conv2d(g, h, w, NULL, (tg_conv2d_params){1, 1, 1, 1, 1, 1, 1});
        h = tg_batch_norm(g, h, gamma, NULL, st, 1e-5f);
        if (l == 0)
            h = tg_relu(g, h);
    }
    tg_tensor_mark_output(tg_add(g, h, h)); /* a step not fused */
    TG_CHECK_OK(tg_graph_status(g));
    return g;
}

static tg_program *compile_fused(const tg_graph *g)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    int fused = 0;
    for (int i = 0; p && p->fused_tail && i < g->n_nodes; i++)
        fused += p->fused_tail[i] >= 0;
    TG_CHECK(fused == 2);
    return p;
}

/* The forward step of the first (k = 0) or another (k = 1) fused or
 * unfused (fused = false) node. */
static tg_step *fusion_step(tg_program *p, bool fused, int k)
{
    tg_device_program *dp = &p->devices[0];
    for (int s = 0; s < dp->n_steps[TG_PHASE_FORWARD]; s++)
        if (dp->steps[TG_PHASE_FORWARD][s].fused == fused && k-- == 0)
            return &dp->steps[TG_PHASE_FORWARD][s];
    return NULL;
}

typedef enum {
    FUSE_RANGE,     /* a node fused into node 1e6: the kernels would read past the graph */
    FUSE_FOREIGN,   /* the input fused into a convolution */
    FUSE_TAIL,      /* a convolution's last node one it does not compute */
    FUSE_UNDONE,    /* no fusion in the tables, the steps still fused */
    FUSE_STATS,     /* a fused step reads the other norm's statistics */
    FUSE_FLAG_ON,   /* an unfused step marked fused: it would read statistics it has not */
    FUSE_FLAG_OFF,  /* a fused step not marked so */
    FUSE_FLAG_BYTE, /* a fused flag that is no bool */
    FUSE_MUTATION_COUNT
} fuse_mutation;

static const char *const fuse_mutation_names[FUSE_MUTATION_COUNT] = {
    "fused out of range", "input fused",   "tail elsewhere", "fusion undone",
    "other statistics",   "fused flag on", "fused flag off", "fused flag byte"};

static bool mutate_fusion(tg_program *p, fuse_mutation m)
{
    int n = p->graph->n_nodes, conv = -1;
    for (int i = 0; i < n && conv < 0; i++)
        if (p->fused_tail[i] >= 0)
            conv = i;
    tg_step *a = fusion_step(p, true, 0), *b = fusion_step(p, true, 1);
    tg_step *plain = fusion_step(p, false, 0);
    unsigned char two = 2;
    switch (m) {
    case FUSE_RANGE:
        return (p->fused_into[p->fused_tail[conv]] = 1000000, true);
    case FUSE_FOREIGN:
        return (p->fused_into[0] = conv, true);
    case FUSE_TAIL:
        return (p->fused_tail[conv] = n - 1, true);
    case FUSE_UNDONE:
        for (int i = 0; i < n; i++)
            p->fused_into[i] = p->fused_tail[i] = -1;
        return true;
    case FUSE_STATS:
        return a && b && (a->in[TG_FUSE_IN_STATS] = b->in[TG_FUSE_IN_STATS], true);
    case FUSE_FLAG_ON:
        return plain && (plain->fused = true, true);
    case FUSE_FLAG_OFF:
        return a && (a->fused = false, true);
    case FUSE_FLAG_BYTE:
        return a && (memcpy(&a->fused, &two, 1), true);
    default:
        return false;
    }
}

/* A fused program loads; each hand-made change to its fusion is refused
 * naming the file, never followed. */
static void test_fusion_tampered_refused(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_graph *g = build_fused();
    tg_program *p = compile_fused(g);
    if (p && reparse(p) != TG_OK)
        tg_test_fail(__FILE__, __LINE__, "the fused program refused: %s", tg_error_message());
    tg_program_destroy(p);
    for (int m = 0; m < FUSE_MUTATION_COUNT; m++) {
        p = compile_fused(g);
        if (!p || !p->fused_tail || !mutate_fusion(p, (fuse_mutation)m)) {
            tg_test_fail(__FILE__, __LINE__, "no program to try '%s' on", fuse_mutation_names[m]);
            tg_program_destroy(p);
            continue;
        }
        tg_status s = reparse(p);
        if (s != TG_ERR_FORMAT || !strstr(tg_error_message(), "tampered.tgx"))
            tg_test_fail(__FILE__, __LINE__, "%s: %s, \"%s\"", fuse_mutation_names[m],
                         tg_status_name(s), tg_error_message());
        else
            printf("  %s: %s\n", fuse_mutation_names[m], tg_error_message());
        tg_program_destroy(p);
    }
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* A fused file where this build would not fuse (here: fusion turned off)
 * is stale: refused by name, and the cache compiles again. */
static void test_fusion_not_ours_recompiled(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_graph *g = build_fused();
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    TG_CHECK_OK(tg_options_set(o, "executableFile", path("fused.tgx")));
    unlink(path("fused.tgx"));
    tg_program *p = NULL;
    tg_cache_result r;
    TG_CHECK_OK(tg_program_compile_cached(g, o, &p, &r));
    TG_CHECK(r == TG_CACHE_COMPILED && p && p->fused_tail);
    tg_program_destroy(p);
    tg_process_set_fuse_inference(0);
    tg_config c;
    TG_CHECK_OK(tg_config_read(o, &c));
    tg_status s = tg_executable_load(g, &c, path("fused.tgx"), &p);
    TG_CHECK(s == TG_ERR_FORMAT && strstr(tg_error_message(), "fused plan"));
    printf("  %s\n", tg_error_message());
    tg_config_free(&c);
    TG_CHECK_OK(tg_program_compile_cached(g, o, &p, &r));
    TG_CHECK(r == TG_CACHE_REPLACED && p && !p->fused_tail);
    tg_program_destroy(p);
    tg_process_set_fuse_inference(1);
    tg_options_destroy(o);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* Through the cache: a corrupt or stale file is replaced, then loaded. */
static void test_cache_recompiles(void)
{
    tg_model_graph mg, other;
    build(8, &mg);
    build(4, &other);
    tg_options *o = options("cpu");
    TG_CHECK_OK(tg_options_set(o, "executableFile", path("cache.tgx")));
    tg_program *p = NULL;
    tg_cache_result r;
    TG_CHECK_OK(tg_program_compile_cached(mg.graph, o, &p, &r));
    TG_CHECK(r == TG_CACHE_COMPILED);
    tg_program_destroy(p);
    TG_CHECK_OK(tg_program_compile_cached(mg.graph, o, &p, &r));
    TG_CHECK(r == TG_CACHE_LOADED);
    tg_program_destroy(p);
    size_t len = 0;
    unsigned char *buf = read_all(path("cache.tgx"), &len);
    TG_CHECK(buf != NULL);
    if (buf) {
        write_all(path("cache.tgx"), buf, len / 2); /* truncated */
        TG_CHECK_OK(tg_program_compile_cached(mg.graph, o, &p, &r));
        TG_CHECK(r == TG_CACHE_REPLACED);
        tg_program_destroy(p);
        buf[len - 1] ^= 1; /* corrupt */
        write_all(path("cache.tgx"), buf, len);
        TG_CHECK_OK(tg_program_compile_cached(mg.graph, o, &p, &r));
        TG_CHECK(r == TG_CACHE_REPLACED);
        tg_program_destroy(p);
        free(buf);
    }
    TG_CHECK_OK(tg_program_compile_cached(other.graph, o, &p, &r)); /* stale for this graph */
    TG_CHECK(r == TG_CACHE_REPLACED);
    tg_program_destroy(p);
    TG_CHECK_OK(tg_program_compile_cached(other.graph, o, &p, &r));
    TG_CHECK(r == TG_CACHE_LOADED);
    tg_program_destroy(p);
    /* a cache directory: one file per key */
    tg_options *dir = options("cpu");
    TG_CHECK_OK(tg_options_set(dir, "enableExecutableCaching", tmpdir));
    TG_CHECK_OK(tg_program_compile_cached(mg.graph, dir, &p, &r));
    TG_CHECK(r == TG_CACHE_COMPILED);
    tg_program_destroy(p);
    TG_CHECK_OK(tg_program_compile_cached(mg.graph, dir, &p, &r));
    TG_CHECK(r == TG_CACHE_LOADED);
    tg_program_destroy(p);
    char key[33];
    TG_CHECK_OK(key_of(mg.graph, dir, key));
    char name[64];
    snprintf(name, sizeof name, "%s.tgx", key);
    TG_CHECK(access(path(name), F_OK) == 0);
    /* an unwritable cache never fails the compile */
    TG_CHECK_OK(tg_options_set(dir, "enableExecutableCaching", "/dev/null/cache"));
    TG_CHECK_OK(tg_program_compile_cached(mg.graph, dir, &p, &r));
    TG_CHECK(r == TG_CACHE_UNSAVED);
    tg_program_destroy(p);
    tg_options_destroy(dir);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    tg_model_graph_destroy(&other);
}

/* Three host steps of training from the same data; the weights after. */
static float *train(const char *exe_file, size_t *n_out)
{
    tg_model_graph mg;
    build(8, &mg);
    tg_options *o = options("cpu");
    TG_CHECK_OK(tg_options_set(o, "executableFile", exe_file));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    float *w = NULL;
    if (s) {
        int64_t samples = tg_session_samples_per_run(s, mg.images);
        size_t px = (size_t)samples * 28 * 28;
        float *img = tg_malloc(px * sizeof(float));
        int32_t *lab = tg_malloc((size_t)samples * sizeof(int32_t));
        tg_rng rng;
        tg_rng_seed(&rng, 7);
        for (int step = 0; step < 3; step++) {
            for (size_t i = 0; i < px; i++)
                img[i] = (float)(tg_rng_next(&rng) % 256) / 255.0f;
            for (int64_t i = 0; i < samples; i++)
                lab[i] = (int32_t)(tg_rng_next(&rng) % 10);
            TG_CHECK_OK(tg_session_write(s, mg.images, img, px * sizeof(float)));
            TG_CHECK_OK(tg_session_write(s, mg.labels, lab, (size_t)samples * sizeof(int32_t)));
            TG_CHECK_OK(tg_session_run(s));
        }
        /* the first parameter of the graph: its weights after the updates */
        for (int i = 0; i < mg.graph->n_nodes && !w; i++) {
            tg_tensor *t = mg.graph->nodes[i];
            if (t->role != TG_ROLE_PARAM)
                continue;
            *n_out = (size_t)tg_shape_numel(t->shape);
            w = tg_malloc(*n_out * sizeof(float));
            TG_CHECK_OK(tg_session_read(s, t, w, *n_out * sizeof(float)));
        }
        tg_free(img);
        tg_free(lab);
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    return w;
}

static void test_same_training(void)
{
    size_t n1 = 0, n2 = 0;
    unlink(path("train.tgx"));
    float *compiled = train(path("train.tgx"), &n1); /* compiles and writes */
    TG_CHECK(access(path("train.tgx"), F_OK) == 0);
    float *loaded = train(path("train.tgx"), &n2); /* loads */
    TG_CHECK(compiled && loaded && n1 == n2 && n1 > 0);
    if (compiled && loaded && n1 == n2)
        TG_CHECK(memcmp(compiled, loaded, n1 * sizeof(float)) == 0);
    tg_free(compiled);
    tg_free(loaded);
}

/* Allocation 1, 2, .. N of `run` failed in turn, N being what a clean
 * run asks for: TG_ERR_NOMEM with a message each time, nothing leaked. */
static void fails_cleanly(const char *what, tg_status (*run)(void *), void *ctx)
{
    int64_t live = tg_alloc_live_bytes(), before = tg_alloc_count();
    TG_CHECK_OK(run(ctx));
    int64_t n_allocs = tg_alloc_count() - before;
    printf("  %s: %lld allocations, each failed in turn\n", what, (long long)n_allocs);
    TG_CHECK(n_allocs >= 2);
    TG_CHECK(tg_alloc_live_bytes() == live);
    for (int64_t n = 1; n <= n_allocs; n++) {
        tg_alloc_fail_after(n);
        tg_status s = run(ctx);
        tg_alloc_fail_after(0);
        if (s != TG_ERR_NOMEM || !strstr(tg_error_message(), "out of memory"))
            tg_test_fail(__FILE__, __LINE__, "%s, allocation %lld of %lld failed: %s, \"%s\"", what,
                         (long long)n, (long long)n_allocs, tg_status_name(s), tg_error_message());
        if (tg_alloc_live_bytes() != live)
            tg_test_fail(__FILE__, __LINE__, "%s, allocation %lld failed: %lld bytes leaked", what,
                         (long long)n, (long long)(tg_alloc_live_bytes() - live));
    }
}

typedef struct {
    const tg_program *p;
    const tg_graph *g;
    const unsigned char *buf;
    size_t len;
} exe_ctx;

static tg_status save_once(void *ctx)
{
    const exe_ctx *c = ctx;
    return tg_executable_save(c->p, path("faults.tgx"));
}

static tg_status parse_once(void *ctx)
{
    const exe_ctx *c = ctx;
    tg_program *p = NULL;
    tg_status s = tg_executable_parse(c->g, &c->p->config, c->buf, c->len, "faults.tgx", &p);
    TG_CHECK((s == TG_OK) == (p != NULL));
    tg_program_destroy(p);
    return s;
}

static void test_allocation_failures(void)
{
    const char *targets[] = {"cpu", "mk2"};
    for (int t = 0; t < 2; t++) {
        tg_model_graph mg;
        build(8, &mg);
        tg_options *o = options(targets[t]);
        tg_program *p = NULL;
        TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
        exe_ctx c = {p, mg.graph, NULL, 0};
        if (p) {
            fails_cleanly(targets[t] == targets[0] ? "save, cpu" : "save, mk2", save_once, &c);
            c.buf = read_all(path("faults.tgx"), &c.len);
            TG_CHECK(c.buf != NULL);
        }
        if (c.buf)
            fails_cleanly(targets[t] == targets[0] ? "parse, cpu" : "parse, mk2", parse_once, &c);
        free((void *)c.buf);
        tg_program_destroy(p);
        tg_options_destroy(o);
        tg_model_graph_destroy(&mg);
    }
    /* an inference program with its fusion, checked again at load */
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_graph *g = build_fused();
    tg_program *p = compile_fused(g);
    exe_ctx c = {p, g, NULL, 0};
    if (p && tg_executable_save(p, path("faults.tgx")) == TG_OK)
        c.buf = read_all(path("faults.tgx"), &c.len);
    TG_CHECK(c.buf != NULL);
    if (c.buf)
        fails_cleanly("parse, fused", parse_once, &c);
    free((void *)c.buf);
    tg_program_destroy(p);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_executable_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    setenv("TILEGRAPH_MONITOR", "0", 1);
    TG_RUN(test_roundtrip);
    TG_RUN(test_kernel_plans_made_again);
    TG_RUN(test_corrupt_truncated_stale);
    TG_RUN(test_compiled_programs_load);
    TG_RUN(test_tampered_refused);
    TG_RUN(test_fusion_tampered_refused);
    TG_RUN(test_fusion_not_ours_recompiled);
    TG_RUN(test_cache_recompiles);
    TG_RUN(test_same_training);
    TG_RUN(test_allocation_failures);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
