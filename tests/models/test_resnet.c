/* tests/models/test_resnet.c - the zoo's ResNets are torchvision's: the same
 * parameter counts and names, the input-dependent stem, output shapes, a
 * training step on the engine that writes torchvision's state_dict keys, and
 * the engine's forward pass against the double reference interpreter. */
#include "tg_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "data/safetensors.h"
#include "runtime/interp.h"
#include "runtime/session_internal.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tg_model_graph build(const char *model, int batch, const tg_optimizer *opt, int c, int h,
                            int w, int classes)
{
    tg_model_graph mg;
    tg_model_input in = {c, h, w, classes, false, TG_STEM_AUTO, 0, {0}, {0}, 0};
    TG_CHECK_OK(tg_model_graph_create_ex(tg_model_find(model), batch, opt, &in, &mg));
    return mg;
}

static int64_t count_role(const tg_graph *g, tg_role role, int *tensors)
{
    int64_t n = 0;
    *tensors = 0;
    for (int i = 0; g && i < g->n_nodes; i++)
        if (g->nodes[i]->role == role) {
            n += tg_numel(g->nodes[i]);
            ++*tensors;
        }
    return n;
}

static bool has_shape(const tg_graph *g, const char *name, int ndim, const int64_t *dims)
{
    const tg_tensor *t = g ? tg_graph_find(g, name) : NULL;
    if (!t || t->shape.ndim != ndim) {
        printf("    %s: %s\n", name, t ? "wrong rank" : "missing");
        return false;
    }
    for (int d = 0; d < ndim; d++)
        if (t->shape.dim[d] != dims[d]) {
            printf("    %s: dim %d is %lld, not %lld\n", name, d, (long long)t->shape.dim[d],
                   (long long)dims[d]);
            return false;
        }
    return true;
}

/* torchvision's sum(p.numel() for p in resnetN().parameters()), 1000 classes. */
static void test_parameter_counts_match_torchvision(void)
{
    static const struct {
        const char *model;
        int64_t params;
        int convs; /* conv layers, each with a batch norm */
    } want[] = {
        {"resnet18", 11689512, 20},
        {"resnet34", 21797672, 36},
        {"resnet50", 25557032, 53},
        {"resnet101", 44549160, 104},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tg_model_graph mg = build(want[i].model, 1, NULL, 3, 224, 224, 1000);
        int n_params = 0, n_state = 0;
        int64_t params = count_role(mg.graph, TG_ROLE_PARAM, &n_params);
        int64_t state = count_role(mg.graph, TG_ROLE_STATE, &n_state);
        printf("    %s: %lld parameters in %d tensors, %lld running statistics in %d tensors\n",
               want[i].model, (long long)params, n_params, (long long)state, n_state);
        TG_CHECK(params == want[i].params);
        /* conv weight, bn weight and bias per conv; fc weight and bias */
        TG_CHECK(n_params == 3 * want[i].convs + 2);
        TG_CHECK(n_state == want[i].convs);
        tg_model_graph_destroy(&mg);
    }
}

/* torchvision's resnet18().named_parameters(), in order. */
static const char *const resnet18_names[] = {
    "conv1.weight", "bn1.weight", "bn1.bias",
#define BASIC(L, B)                                                                                \
    "layer" #L "." #B ".conv1.weight", "layer" #L "." #B ".bn1.weight",                            \
        "layer" #L "." #B ".bn1.bias", "layer" #L "." #B ".conv2.weight",                          \
        "layer" #L "." #B ".bn2.weight", "layer" #L "." #B ".bn2.bias"
#define DOWN(L)                                                                                    \
    "layer" #L ".0.downsample.0.weight", "layer" #L ".0.downsample.1.weight",                      \
        "layer" #L ".0.downsample.1.bias"
    BASIC(1, 0),    BASIC(1, 1),  BASIC(2, 0), DOWN(2),     BASIC(2, 1), BASIC(3, 0), DOWN(3),
    BASIC(3, 1),    BASIC(4, 0),  DOWN(4),     BASIC(4, 1), "fc.weight", "fc.bias",
#undef BASIC
#undef DOWN
};

static void test_resnet18_parameter_names_in_torchvision_order(void)
{
    tg_model_graph mg = build("resnet18", 1, NULL, 3, 224, 224, 1000);
    const int n_want = (int)(sizeof resnet18_names / sizeof resnet18_names[0]);
    int k = 0;
    for (int i = 0; mg.graph && i < mg.graph->n_nodes; i++) {
        const tg_tensor *t = mg.graph->nodes[i];
        if (t->role != TG_ROLE_PARAM)
            continue;
        char dotted[256];
        snprintf(dotted, sizeof dotted, "%s", t->name);
        for (char *p = dotted; *p; p++)
            if (*p == '/')
                *p = '.';
        if (k >= n_want || strcmp(dotted, resnet18_names[k]) != 0) {
            printf("    parameter %d is %s, torchvision has %s\n", k, dotted,
                   k < n_want ? resnet18_names[k] : "no more");
            TG_CHECK(0);
            break;
        }
        k++;
    }
    TG_CHECK(k == n_want);
    tg_model_graph_destroy(&mg);
}

static void test_names_and_shapes(void)
{
    tg_model_graph r101 = build("resnet101", 1, NULL, 3, 224, 224, 1000);
    TG_CHECK(has_shape(r101.graph, "layer3/8/conv2/weight", 4, (int64_t[]){256, 256, 3, 3}));
    TG_CHECK(has_shape(r101.graph, "layer3/22/conv3/weight", 4, (int64_t[]){1024, 256, 1, 1}));
    TG_CHECK(has_shape(r101.graph, "layer3/8/bn2/running_stats", 2, (int64_t[]){2, 256}));
    TG_CHECK(!tg_graph_find(r101.graph, "layer3/23/conv1/weight"));
    TG_CHECK(has_shape(r101.graph, "fc/weight", 2, (int64_t[]){1000, 2048}));
    /* the split point "layer3.8" opens with the block's first conv */
    TG_CHECK(r101.graph && tg_graph_find(r101.graph, "layer3/8/conv1") &&
             tg_graph_find(r101.graph, "layer3/8/conv1")->op == TG_OP_CONV2D);
    tg_model_graph_destroy(&r101);

    tg_model_graph r50 = build("resnet50", 1, NULL, 3, 224, 224, 1000);
    TG_CHECK(has_shape(r50.graph, "layer1/0/downsample/0/weight", 4, (int64_t[]){256, 64, 1, 1}));
    TG_CHECK(has_shape(r50.graph, "layer1/0/downsample/1/weight", 1, (int64_t[]){256}));
    TG_CHECK(has_shape(r50.graph, "layer1/0/downsample/1/running_stats", 2, (int64_t[]){2, 256}));
    TG_CHECK(has_shape(r50.graph, "layer2/0/conv2/weight", 4, (int64_t[]){128, 128, 3, 3}));
    TG_CHECK(!tg_graph_find(r50.graph, "layer1/1/downsample/0/weight"));
    tg_model_graph_destroy(&r50);

    tg_model_graph r18 = build("resnet18", 1, NULL, 3, 224, 224, 1000);
    /* a basic block keeps its channels in layer1: no downsample there */
    TG_CHECK(!tg_graph_find(r18.graph, "layer1/0/downsample/0/weight"));
    TG_CHECK(has_shape(r18.graph, "layer4/0/downsample/0/weight", 4, (int64_t[]){512, 256, 1, 1}));
    TG_CHECK(has_shape(r18.graph, "fc/weight", 2, (int64_t[]){1000, 512}));
    tg_model_graph_destroy(&r18);
}

/* The stride-2 conv of a v1.5 bottleneck is the 3x3 one: layer2's first
 * block halves the map in conv2, conv1 keeps it. */
static void test_bottleneck_stride_on_3x3(void)
{
    tg_model_graph mg = build("resnet50", 1, NULL, 3, 224, 224, 1000);
    const tg_tensor *c1 = mg.graph ? tg_graph_find(mg.graph, "layer2/0/conv1") : NULL;
    const tg_tensor *c2 = mg.graph ? tg_graph_find(mg.graph, "layer2/0/conv2") : NULL;
    TG_CHECK(c1 && c2);
    if (c1 && c2) {
        TG_CHECK(c1->shape.dim[2] == 56 && c1->shape.dim[3] == 56);
        TG_CHECK(c2->shape.dim[2] == 28 && c2->shape.dim[3] == 28);
    }
    tg_model_graph_destroy(&mg);
}

/* 64x64 and up: 7x7 stride-2 conv and max pool; below: the CIFAR stem. */
static void test_stem_follows_input_size(void)
{
    static const struct {
        int h, w, kernel, map; /* conv1 kernel; layer1's output size */
        bool maxpool;
    } cases[] = {
        {32, 32, 3, 32, false},  {63, 64, 3, 63, false}, {64, 64, 7, 16, true},
        {224, 224, 7, 56, true}, {16, 16, 3, 16, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_model_graph mg = build("resnet18", 2, NULL, 3, cases[i].h, cases[i].w, 10);
        int k = cases[i].kernel;
        TG_CHECK(has_shape(mg.graph, "conv1/weight", 4, (int64_t[]){64, 3, k, k}));
        TG_CHECK(mg.graph && (tg_graph_find(mg.graph, "maxpool") != NULL) == cases[i].maxpool);
        const tg_tensor *l1 = mg.graph ? tg_graph_find(mg.graph, "layer1/1/bn2") : NULL;
        TG_CHECK(l1 && l1->shape.dim[2] == cases[i].map);
        tg_model_graph_destroy(&mg);
    }
}

static void test_output_shapes(void)
{
    static const char *const names[] = {"resnet18", "resnet34", "resnet50", "resnet101"};
    static const int sizes[][3] = {{3, 32, 32}, {3, 64, 64}, {1, 40, 48}};
    for (int m = 0; m < 4; m++)
        for (int s = 0; s < 3; s++) {
            tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
            tg_model_graph mg =
                build(names[m], 3, m == 0 ? &opt : NULL, sizes[s][0], sizes[s][1], sizes[s][2], 7);
            TG_CHECK(mg.output && tg_tensor_shape(mg.output).ndim == 2 &&
                     tg_tensor_shape(mg.output).dim[0] == 3 &&
                     tg_tensor_shape(mg.output).dim[1] == 7);
            TG_CHECK((mg.loss != NULL) == (m == 0));
            TG_CHECK(mg.input.channels == sizes[s][0] && mg.input.height == sizes[s][1] &&
                     mg.input.width == sizes[s][2] && mg.input.classes == 7);
            tg_model_graph_destroy(&mg);
        }
}

static void test_inputs_and_defaults(void)
{
    const tg_model_spec *m = tg_model_find("resnet50");
    TG_CHECK(m && tg_model_any_input(m));
    TG_CHECK(!tg_model_any_input(tg_model_find("fashion-basic")));
    if (!m)
        return;
    /* the default: CIFAR-10 */
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(m, 2, NULL, &mg));
    TG_CHECK(mg.input.channels == 3 && mg.input.height == 32 && mg.input.classes == 10);
    TG_CHECK(mg.output && tg_tensor_shape(mg.output).dim[1] == 10);
    tg_model_graph_destroy(&mg);
    float mean[3], std[3];
    tg_model_normalisation(m, 3, mean, std);
    TG_CHECK_NEAR(mean[0], 0.4914, 1e-6);
    TG_CHECK_NEAR(mean[2], 0.4465, 1e-6);
    TG_CHECK_NEAR(std[1], 0.2435, 1e-6);
    tg_model_normalisation(m, 1, mean, std); /* another channel count: the averages */
    TG_CHECK_NEAR(mean[0], m->mean, 0);
    TG_CHECK_NEAR(std[0], m->std, 0);
    tg_model_normalisation(tg_model_find("fashion-basic"), 1, mean, std);
    TG_CHECK_NEAR(mean[0], 0.2860, 1e-6);

    tg_model_input in = {0, 0, 0, 10, false, TG_STEM_AUTO, 0, {0}, {0}, 0};
    TG_CHECK_OK(tg_model_input_parse("3x64x48", &in));
    TG_CHECK(in.channels == 3 && in.height == 64 && in.width == 48 && in.classes == 10);
    static const char *const bad[] = {"3x64",    "3x64x64x", "0x64x64",
                                      "3x-4x64", "3 x64x64", "3x64x64 ",
                                      "",        "x",        "3x64x99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TG_CHECK(tg_model_input_parse(bad[i], &in) == TG_ERR_INVALID_ARG);
        TG_CHECK(strstr(tg_error_message(), "CxHxW") != NULL);
    }
    TG_CHECK(tg_model_input_parse(NULL, &in) == TG_ERR_INVALID_ARG);

    /* a fixed-input model refuses another input, naming both */
    tg_model_input other = {3, 32, 32, 10, false, TG_STEM_AUTO, 0, {0}, {0}, 0};
    TG_CHECK(tg_model_graph_create_ex(tg_model_find("fashion-basic"), 2, NULL, &other, &mg) ==
             TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "1x28x28") && strstr(tg_error_message(), "3x32x32"));
    TG_CHECK(mg.graph == NULL);
    /* ... and takes its own */
    other = tg_model_default_input(tg_model_find("fashion-basic"));
    TG_CHECK_OK(tg_model_graph_create_ex(tg_model_find("fashion-basic"), 2, NULL, &other, &mg));
    tg_model_graph_destroy(&mg);
    tg_model_input zero = {3, 32, 32, 0, false, TG_STEM_AUTO, 0, {0}, {0}, 0};
    TG_CHECK(tg_model_graph_create_ex(m, 2, NULL, &zero, &mg) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "resnet50") != NULL);
}

/* Seed 003's pipeline: "--split layer3.8" puts layer3's blocks 0..7 on the
 * first device and block 8 (with its weights) onwards on the second. */
static void test_split_layer3_8(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_model_graph mg = build("resnet101", 2, &opt, 3, 64, 64, 10);
    tg_options *o = tg_options_create();
    tg_options_set(o, "executionStrategy", "pipelined");
    tg_options_set(o, "split", "layer3.8");
    tg_options_set_int(o, "Training.gradientAccumulation", 3);
    tg_program *p = NULL;
    if (mg.graph)
        TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->n_devices == 2);
    static const struct {
        const char *name;
        int device;
    } where[] = {
        {"conv1", 0},          {"layer2/0/downsample/0/weight", 0},
        {"layer3/7/conv3", 0}, {"layer3/7/relu.1", 0},
        {"layer3/8/conv1", 1}, {"layer3/8/conv1/weight", 1},
        {"layer4/0/conv2", 1}, {"fc/weight", 1},
    };
    for (size_t i = 0; p && i < sizeof where / sizeof where[0]; i++) {
        const tg_tensor *t = tg_graph_find(mg.graph, where[i].name);
        TG_CHECK(t != NULL);
        if (t && p->device_of[t->id] != where[i].device) {
            printf("    %s is on device %d, not %d\n", where[i].name, p->device_of[t->id],
                   where[i].device);
            TG_CHECK(0);
        }
    }
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static void fill_images(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u + seed * 97u) % 1000u) / 500.0f - 1.0f;
}

/* Training steps of resnet18 on two CIFAR-sized images: the loss is finite
 * and falls on a repeated batch, the weights move, and a checkpoint has
 * torchvision's keys. */
static void test_resnet18_trains_on_engine(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.9f);
    tg_model_graph mg = build("resnet18", 2, &opt, 3, 32, 32, 10);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 2);
    tg_options_set_int(o, "randomSeed", 3);
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    float x[2 * 3 * 32 * 32], loss[3] = {0};
    int32_t y[2] = {3, 7};
    fill_images(x, sizeof x / sizeof x[0], 1);
    const tg_tensor *w = tg_graph_find(mg.graph, "layer3/1/conv2/weight");
    float before = 0, after = 0;
    TG_CHECK(w != NULL);
    if (s && w)
        before = ((const float *)tg_session_data(s, w))[0];
    for (int step = 0; s && step < 3; step++) {
        TG_CHECK_OK(tg_session_write(s, mg.images, x, sizeof x));
        TG_CHECK_OK(tg_session_write(s, mg.labels, y, sizeof y));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_session_read(s, mg.loss, &loss[step], sizeof loss[step]));
        TG_CHECK(isfinite(loss[step]));
    }
    printf("    losses %.4f %.4f %.4f\n", loss[0], loss[1], loss[2]);
    TG_CHECK(loss[2] < loss[0]);
    if (s && w)
        after = ((const float *)tg_session_data(s, w))[0];
    TG_CHECK(isfinite(after) && after != before);

    char path[] = "/tmp/tg_resnet_XXXXXX";
    int fd = mkstemp(path);
    TG_CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    tg_safetensors *st = NULL;
    if (s && fd >= 0) {
        TG_CHECK_OK(tg_checkpoint_save(s, path, "resnet18"));
        TG_CHECK_OK(tg_safetensors_load(path, &st));
    }
    if (st) {
        const int n = (int)(sizeof resnet18_names / sizeof resnet18_names[0]);
        for (int i = 0; i < n; i++)
            TG_CHECK(tg_safetensors_find(st, resnet18_names[i]) != NULL);
        /* PyTorch's buffers, not tilegraph's [2, C] state, so the file
         * loads into torchvision's module */
        TG_CHECK(tg_safetensors_find(st, "layer2.0.downsample.1.running_stats") == NULL);
        const tg_st_tensor *mean = tg_safetensors_find(st, "layer2.0.downsample.1.running_mean");
        const tg_st_tensor *var = tg_safetensors_find(st, "layer2.0.downsample.1.running_var");
        const tg_st_tensor *nbt =
            tg_safetensors_find(st, "layer2.0.downsample.1.num_batches_tracked");
        TG_CHECK(mean && mean->ndim == 1 && mean->shape[0] == 128);
        TG_CHECK(var && var->ndim == 1 && var->shape[0] == 128);
        TG_CHECK(nbt && nbt->ndim == 0 && nbt->dtype == TG_ST_I64 &&
                 *(const int64_t *)nbt->data == 3);
        /* running statistics moved from (0, 1) after three training steps */
        const tg_tensor *rs = tg_graph_find(mg.graph, "layer2/0/downsample/1/running_stats");
        const float *live = s && rs ? tg_session_data(s, rs) : NULL;
        if (mean && var && live) {
            const float *m = mean->data, *v = var->data;
            TG_CHECK(m[0] != 0.0f && v[0] != 1.0f);
            TG_CHECK(memcmp(m, live, 128 * sizeof(float)) == 0);
            TG_CHECK(memcmp(v, live + 128, 128 * sizeof(float)) == 0);
        }
        tg_safetensors_destroy(st);
    }
    /* and back: a fresh session takes the statistics from the two tensors */
    tg_session *fresh = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &fresh));
    const tg_tensor *rs = tg_graph_find(mg.graph, "layer2/0/downsample/1/running_stats");
    if (fresh && rs && s) {
        TG_CHECK_OK(tg_checkpoint_load(fresh, path, "resnet18"));
        TG_CHECK(memcmp(tg_session_data(fresh, rs), tg_session_data(s, rs),
                        2 * 128 * sizeof(float)) == 0);
    }
    tg_session_destroy(fresh);
    remove(path);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* The engine's f32 forward pass of resnet18 (training-mode batch norm, so
 * every layer's output is normalised by its batch statistics) against the
 * reference interpreter in double precision, on 2 images of 3x16x16. */
static void test_resnet18_forward_matches_interpreter(void)
{
    enum { N = 2, C = 3, H = 16, W = 16, CLASSES = 10 };
    const tg_model_spec *m = tg_model_find("resnet18");
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "images", TG_F32, tg_shape4(N, C, H, W));
    tg_tensor *out = NULL;
    tg_model_input in = {C, H, W, CLASSES, false, TG_STEM_AUTO, 0, {0}, {0}, 0};
    TG_CHECK_OK(m->build_for(g, &in, x, NULL, &out, NULL));
    tg_tensor_mark_output(out);
    /* also compare an inner value: layer4's input */
    tg_tensor *inner = tg_graph_find(g, "layer3/1/relu.1");
    TG_CHECK(inner != NULL);
    if (inner)
        tg_tensor_mark_output(inner);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 2);
    tg_options_set_int(o, "randomSeed", 9);
    tg_session *s = NULL;
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    TG_CHECK_OK(tg_interp_create(g, 9, &ip));
    static float xs[N * C * H * W];
    fill_images(xs, sizeof xs / sizeof xs[0], 2);
    if (s && ip) {
        TG_CHECK_OK(tg_session_write(s, x, xs, sizeof xs));
        double *dx = tg_interp_data(ip, x);
        for (int i = 0; i < N * C * H * W; i++)
            dx[i] = xs[i];
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_interp_run(ip, 0));
        const tg_tensor *check[] = {out, inner};
        for (int c = 0; c < 2; c++) {
            if (!check[c])
                continue;
            const float *fast = tg_session_data(s, check[c]);
            const double *ref = tg_interp_data(ip, check[c]);
            double worst = 0;
            for (int64_t k = 0; k < tg_numel(check[c]); k++) {
                double err = fabs(fast[k] - ref[k]) / (1.0 + fabs(ref[k]));
                worst = err > worst ? err : worst;
            }
            printf("    %s: largest difference %.3g\n", check[c]->name, worst);
            TG_CHECK(worst <= 1e-4);
        }
        /* not trivially equal: the scores differ between the two images */
        const double *ref = tg_interp_data(ip, out);
        TG_CHECK(fabs(ref[0] - ref[CLASSES]) > 1e-6);
    }
    tg_interp_destroy(ip);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_parameter_counts_match_torchvision);
    TG_RUN(test_resnet18_parameter_names_in_torchvision_order);
    TG_RUN(test_names_and_shapes);
    TG_RUN(test_bottleneck_stride_on_3x3);
    TG_RUN(test_stem_follows_input_size);
    TG_RUN(test_output_shapes);
    TG_RUN(test_inputs_and_defaults);
    TG_RUN(test_split_layer3_8);
    TG_RUN(test_resnet18_trains_on_engine);
    TG_RUN(test_resnet18_forward_matches_interpreter);
    return tg_test_finish();
}
