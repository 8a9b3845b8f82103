/* tests/runtime/test_verify.c - the differential checker (runtime/verify.c):
 * the two graphs of issue 28 that the blocked layout got wrong, a few
 * hundred random graphs (seeded) checked against the reference under
 * several device settings, and proof that the checker and the random
 * graphs catch those defects when the layout pass is made to overlook
 * views again (compile/layout.h tg_layout_test_ignore_views). A failure
 * prints the shortest prefix of the random graph that still fails.
 * TG_TEST_LABELS: threads isa */
#include "tg_test.h"
#include "tg_random_graph.h"

#include "compile/layout.h"
#include "runtime/verify.h"
#include "tilegraph/models.h"
#include "tilegraph/tilegraph.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_OPS = 8 };

/* 240 in the suite, 60 in the sanitizer builds (whose point is the
 * checker's memory and threads, not more graphs: 240 took 158 s under
 * ThreadSanitizer); TG_RANDOM_GRAPHS=N for a longer run. */
#define RELEASE_GRAPHS 240
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SUITE_GRAPHS 60
#else
#define SUITE_GRAPHS RELEASE_GRAPHS
#endif
static int random_graphs(void)
{
    const char *e = getenv("TG_RANDOM_GRAPHS");
    int n = e ? atoi(e) : SUITE_GRAPHS;
    return n >= 8 ? n : SUITE_GRAPHS;
}

static tg_options *options(int threads, const char *extra_key, const char *extra_value)
{
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", 5);
    if (extra_key)
        TG_CHECK_OK(tg_options_set(o, extra_key, extra_value));
    return o;
}

/* One verified step of g; the first tensor beyond tolerance or -1. */
static int first_beyond(tg_graph *g, tg_tensor *x, tg_tensor *labels, int classes, int threads,
                        const char **name)
{
    tg_options *o = options(threads, NULL, NULL);
    tg_session *s = NULL;
    int first = -2;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    int64_t n = tg_shape_numel(tg_tensor_shape(x));
    float *data = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; s && data && i < n; i++)
        data[i] = (float)((i * 37) % 29) / 14.0f - 1.0f;
    if (s && data) {
        TG_CHECK_OK(tg_session_write(s, x, data, (size_t)n * sizeof(float)));
        int32_t y[8] = {1, 0, 2, 1, 0, 2, 1, 0};
        if (labels)
            TG_CHECK_OK(tg_session_write(s, labels, y, (size_t)tg_tensor_shape(labels).dim[0] * 4));
        (void)classes;
        TG_CHECK_OK(tg_session_verify_next_run(s));
        TG_CHECK_OK(tg_session_run(s));
        const tg_verify_report *r = tg_session_verify_report(s);
        TG_CHECK(r != NULL && tg_verify_rows(r) > 0);
        first = tg_verify_first_beyond(r);
        if (first >= 0 && name)
            *name = tg_verify_row_at(r, first)->name;
    }
    free(data);
    tg_session_destroy(s);
    tg_options_destroy(o);
    return first;
}

/* nn.Sequential(nn.Conv2d(4, 256, 1), nn.Flatten()) on [2, 4, 6, 6]: the
 * flatten read the convolution's nChw16c bytes as NCHW. */
static tg_graph *conv_flatten(tg_tensor **x)
{
    tg_graph *g = tg_graph_create();
    *x = tg_input(g, "x", TG_F32, tg_shape4(2, 4, 6, 6));
    tg_tensor *y = tg_flatten(g, tg_nn_conv2d(g, *x, "conv", 4, 256, 1, 1, 0), 1);
    tg_graph_rename(g, y, "flatten");
    tg_tensor_mark_output(y);
    return g;
}

/* Conv2d(3, 48, 3, padding 1) -> channel shuffle -> Conv2d(48, 64, 1) ->
 * mean -> Linear: the first convolution's weight gradient was wrong (the
 * shuffle's views read the second convolution's blocked input gradient). */
static tg_graph *shuffle_net(tg_tensor **x, tg_tensor **labels)
{
    tg_graph *g = tg_graph_create();
    *x = tg_input(g, "x", TG_F32, tg_shape4(2, 3, 8, 8));
    *labels = tg_input(g, "labels", TG_I32, tg_shape1(2));
    tg_tensor *h = tg_nn_conv2d(g, *x, "conv1", 3, 48, 3, 1, 1);
    static const int perm[5] = {0, 2, 1, 3, 4};
    h = tg_reshape(g, h, tg_shape_of(5, (int64_t[]){2, 2, 24, 8, 8}));
    h = tg_reshape(g, tg_transpose(g, h, perm), tg_shape4(2, 48, 8, 8));
    h = tg_nn_conv2d(g, h, "conv2", 48, 64, 1, 1, 0);
    h = tg_flatten(g, tg_global_avgpool(g, h), 1);
    tg_tensor *loss = tg_cross_entropy(g, tg_nn_linear(g, h, "fc", 64, 3, true), *labels);
    tg_tensor_mark_output(loss);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer opt = tg_optimizer_sgd(1.0f, 0.0f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    return g;
}

static void test_issue_graphs(void)
{
    for (int broken = 0; broken < 2; broken++) {
        tg_layout_test_ignore_views = broken;
        tg_tensor *x, *labels;
        const char *name = NULL;
        tg_graph *g = conv_flatten(&x);
        int first = first_beyond(g, x, NULL, 0, 1, &name);
        /* caught exactly at the view, not only at some later tensor */
        TG_CHECK(broken ? first >= 0 && name && !strcmp(name, "flatten") : first == -1);
        tg_graph_destroy(g);
        g = shuffle_net(&x, &labels);
        name = NULL;
        first = first_beyond(g, x, labels, 3, 1, &name);
        TG_CHECK(broken ? first >= 0 && name && strstr(name, "reshape") : first == -1);
        tg_graph_destroy(g);
    }
    tg_layout_test_ignore_views = false;
}

/* The option fails the first run, naming the tensor; later runs are not checked. */
static void test_option_fails_the_run(void)
{
    tg_layout_test_ignore_views = true;
    tg_tensor *x;
    tg_graph *g = conv_flatten(&x);
    tg_options *o = options(1, "debug.verifyAgainstReference", "true");
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    float data[2 * 4 * 6 * 6];
    for (int i = 0; i < 2 * 4 * 6 * 6; i++)
        data[i] = (float)(i % 13) / 6.0f - 1.0f;
    if (s) {
        TG_CHECK_OK(tg_session_write(s, x, data, sizeof data));
        TG_CHECK(tg_session_run(s) == TG_ERR_NUMERIC);
        TG_CHECK(strstr(tg_error_message(), "'flatten'") != NULL);
        TG_CHECK(strstr(tg_error_message(), "tilegraph check") != NULL);
        TG_CHECK_OK(tg_session_run(s));
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
    tg_layout_test_ignore_views = false;
    /* and passes when the layout is right */
    g = conv_flatten(&x);
    o = options(1, "debug.verifyAgainstReference", "true");
    TG_CHECK_OK(tg_session_create(g, o, &s));
    if (s) {
        TG_CHECK_OK(tg_session_write(s, x, data, sizeof data));
        TG_CHECK_OK(tg_session_run(s));
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

/* One verified step of mnist-pipeline accumulating 4 micro-batches (o's
 * strategy), with a fault in 'layer3/matmul' from micro-batch `fault_from`
 * on (-1: none): the first row beyond tolerance, its micro-batch in *mb. */
static int accumulated_step(const tg_options *o, int fault_from, int *mb)
{
    const tg_model_spec *m = NULL;
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_session *s = NULL;
    int first = -2;
    TG_CHECK_OK(tg_model_open("mnist-pipeline", TG_LOSS_CROSS_ENTROPY, &m));
    TG_CHECK_OK(tg_model_graph_create_ex(m, 2, &opt, NULL, &mg));
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    enum { N = 4 * 2 * 28 * 28 };
    static float x[N];
    int32_t y[8] = {1, 0, 2, 9, 4, 5, 6, 7};
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 37) % 29) / 14.0f - 1.0f;
    tg_tensor *faulty = mg.graph ? tg_graph_find(mg.graph, "layer3/matmul") : NULL;
    TG_CHECK(faulty != NULL);
    if (s && faulty) {
        TG_CHECK_OK(tg_session_write(s, mg.images, x, sizeof x));
        TG_CHECK_OK(tg_session_write(s, mg.labels, y, sizeof y));
        TG_CHECK_OK(tg_session_verify_next_run(s));
        tg_verify_test_fault_node = fault_from >= 0 ? tg_tensor_id(faulty) : -1;
        tg_verify_test_fault_from = fault_from;
        TG_CHECK_OK(tg_session_run(s));
        tg_verify_test_fault_node = -1;
        const tg_verify_report *r = tg_session_verify_report(s);
        TG_CHECK(r != NULL && tg_verify_rows(r) > 0);
        first = tg_verify_first_beyond(r);
        *mb = first >= 0 ? tg_verify_row_at(r, first)->micro_batch : -1;
    }
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_model_close(m);
    return first;
}

/* Every micro-batch is compared (issue 46 row 5): a kernel wrong on
 * micro-batches 1..3 only is caught, at micro-batch 1, plain and pipelined;
 * without the fault every micro-batch is within tolerance. */
static void test_every_micro_batch_is_compared(void)
{
    tg_options *o[2] = {options(1, "Training.gradientAccumulation", "4"),
                        options(1, "Training.gradientAccumulation", "4")};
    TG_CHECK_OK(tg_options_set(o[1], "executionStrategy", "pipelined"));
    for (int k = 0; k < 2; k++) {
        int mb = -2;
        TG_CHECK(accumulated_step(o[k], -1, &mb) == -1);
        TG_CHECK(accumulated_step(o[k], 1, &mb) >= 0 && mb == 1);
        TG_CHECK(accumulated_step(o[k], 3, &mb) >= 0 && mb == 3);
        tg_options_destroy(o[k]);
    }
}

/* The graph seed names under o: a quarter inference, unless o accumulates
 * gradients; pipelined, a stage per block, each on its device. */
static tg_rg_spec spec_of(uint64_t seed, int ops, const tg_options *o)
{
    int64_t acc = tg_options_get_int(o, "Training.gradientAccumulation");
    tg_rg_spec spec = {.seed = seed, .max_ops = ops, .training = seed % 4 != 0 || acc > 1};
    if (strcmp(tg_options_get_string(o, "executionStrategy"), "pipelined") == 0)
        spec.blocks = 2;
    return spec;
}

/* A random graph's check: -1 passes, else the failing row. */
static int check_random(uint64_t seed, int ops, const tg_options *o, char *why, size_t cap,
                        char *listing, size_t listing_cap)
{
    tg_rg_spec spec = spec_of(seed, ops, o);
    tg_random_graph rg;
    int beyond = -1;
    tg_status st = tg_random_graph_build(&spec, &rg);
    if (st == TG_OK)
        st = tg_random_graph_check(&rg, o, seed, &beyond, why, cap);
    if (st != TG_OK) {
        snprintf(why, cap, "%s", tg_error_message());
        beyond = -2;
    }
    if (listing)
        snprintf(listing, listing_cap, "%s", rg.listing);
    tg_random_graph_destroy(&rg);
    return beyond;
}

/* The shortest prefix of seed's graph that still fails, printed. */
static void print_minimal(uint64_t seed, const tg_options *o)
{
    static char why[512], listing[8192];
    for (int ops = 1; ops <= MAX_OPS; ops++) {
        if (check_random(seed, ops, o, why, sizeof why, listing, sizeof listing) != -1) {
            fprintf(stderr, "random graph %llu, first %d ops, fails: %s\n%s",
                    (unsigned long long)seed, ops, why, listing);
            return;
        }
    }
}

/* Failing graphs among seeds [first, first + count) under o; prints the
 * first failure's minimal graph when `report`. */
static int failures(uint64_t first, int count, const tg_options *o, bool report)
{
    int failed = 0;
    char why[512];
    for (uint64_t seed = first; seed < first + (uint64_t)count; seed++) {
        if (check_random(seed, MAX_OPS, o, why, sizeof why, NULL, 0) == -1)
            continue;
        if (report && failed == 0)
            print_minimal(seed, o);
        failed++;
    }
    return failed;
}

/* one thread, two threads (other kernel choices, so other layouts), two
 * micro-batches per update, bf16 storage (staged and native half-precision
 * kernels), and pipelined over two devices (a block each) with
 * recomputation and the backward split in two (zb-h1); setting i checks
 * the seeds from 1000 i + 1 */
enum { SETTINGS = 5 };
static void settings(tg_options **o)
{
    o[0] = options(1, NULL, NULL);
    o[1] = options(2, NULL, NULL);
    o[2] = options(1, "Training.gradientAccumulation", "2");
    o[3] = options(1, "precision", "bf16.bf16");
    o[4] = options(1, "Training.gradientAccumulation", "4");
    TG_CHECK_OK(tg_options_set(o[4], "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set(o[4], "recomputation", "pipeline"));
    TG_CHECK_OK(tg_options_set(o[4], "pipelineSchedule", "zb-h1"));
}

/* Setting i's share of n graphs. */
static int setting_graphs(int i, int n)
{
    return i == 0 ? n / 3 : n / 6;
}

/* The suite's random graphs train pow, maximum and minimum (whose
 * backward ops are POW_BWD and MINMAX_BWD) and reverse_sequence (the op
 * with only a reference kernel) in f32 and in bf16, so those
 * kernels are checked against the reference kernels too, element-wise
 * (blocked, staged in chunks) as their definitions now say. The Release
 * suite's graphs are counted in every build (building them is cheap): the
 * sanitizer builds run a quarter of them, for memory and threads, not for
 * coverage. */
static void test_random_graphs_cover_pow_and_minmax(void)
{
    static const char *ops[] = {"pow_bounded(", "maximum(", "minimum(", "reverse_sequence("};
    tg_options *o[SETTINGS];
    settings(o);
    int trained[SETTINGS][4] = {{0}};
    for (int i = 0; i < SETTINGS; i++) {
        for (int k = 0; k < setting_graphs(i, RELEASE_GRAPHS); k++) {
            tg_rg_spec spec = spec_of(1000 * (uint64_t)i + 1 + (uint64_t)k, MAX_OPS, o[i]);
            tg_random_graph rg;
            if (tg_random_graph_build(&spec, &rg) == TG_OK && spec.training)
                for (int op = 0; op < 4; op++)
                    trained[i][op] += strstr(rg.listing, ops[op]) != NULL;
            tg_random_graph_destroy(&rg);
        }
        printf("setting %d: graphs training pow %d, maximum %d, minimum %d, reverse_sequence %d\n",
               i, trained[i][0], trained[i][1], trained[i][2], trained[i][3]);
        tg_options_destroy(o[i]);
    }
    for (int op = 0; op < 4; op++) {
        TG_CHECK(trained[0][op] + trained[1][op] + trained[2][op] + trained[4][op] >= 10);
        TG_CHECK(trained[3][op] >= 2); /* bf16 */
    }
}

static void test_random_graphs(void)
{
    tg_options *o[SETTINGS];
    settings(o);
    int failed = 0;
    for (int i = 0; i < SETTINGS; i++) {
        int f = failures(1000 * (uint64_t)i + 1, setting_graphs(i, random_graphs()), o[i], true);
        if (f)
            fprintf(stderr, "setting %d: %d random graphs beyond tolerance\n", i, f);
        failed += f;
        tg_options_destroy(o[i]);
    }
    TG_CHECK(failed == 0);
}

/* The random graphs find the view defect on their own when it is back. */
static void test_random_graphs_find_the_view_defect(void)
{
    tg_layout_test_ignore_views = true;
    tg_options *o = options(1, NULL, NULL);
    int failed = failures(1, random_graphs() / 2, o, false);
    tg_layout_test_ignore_views = false;
    printf("with views overlooked by the layout pass, %d of %d random graphs fail\n", failed,
           random_graphs() / 2);
    TG_CHECK(failed >= 3); /* 13 of 120 here (Release); 7 of 30 in the sanitizer builds */
    tg_options_destroy(o);
}

int main(void)
{
    TG_RUN(test_issue_graphs);
    TG_RUN(test_option_fails_the_run);
    TG_RUN(test_every_micro_batch_is_compared);
    TG_RUN(test_random_graphs_cover_pow_and_minmax);
    TG_RUN(test_random_graphs);
    TG_RUN(test_random_graphs_find_the_view_defect);
    return tg_test_finish();
}
