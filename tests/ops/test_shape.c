/* tests/ops/test_shape.c - RESHAPE (alias), flatten, TRANSPOSE, CONCAT,
 * SLICE / SLICE_BWD, REDUCE_SUM and reduce_mean: gradients, fast kernels
 * against the reference at 1 and 2 threads, exact values and build errors. */
#include "backend/backend.h"
#include "core/bf16.h"
#include "core/pool.h"
#include "tg_test.h"

#include "ops/op.h"
#include "ops/shape.h"
#include "runtime/interp.h"

#include <stdlib.h>
#include <string.h>

static const tg_init U = {TG_INIT_UNIFORM, -1, 1};

/* The fast kernels over the whole graph, `in` holding vals; out's values
 * into result. */
static void run_fast(tg_graph *g, tg_tensor *in, const float *vals, tg_tensor *out, float *result,
                     int threads)
{
    tg_test_run_fast(g, &in, &vals, 1, out, result, threads);
}

/* ---- one builder per op, driven by a case struct ------------------------------------ */

typedef struct {
    int kind; /* 0 reshape, 1 flatten, 2 transpose, 3 concat, 4 slice, 5 reduce_sum, 6 reduce_mean
               */
    tg_shape shape;
    int perm[TG_MAX_DIMS];
    int axis;
    int64_t start, end;
    unsigned mask;
    bool keepdim;
    tg_shape other; /* reshape target; second concat input */
    int n_concat;
} sh_case;

static tg_tensor *build_shape(tg_graph *g, void *ctx)
{
    const sh_case *c = ctx;
    tg_tensor *x = tg_param(g, "x", c->shape, U);
    switch (c->kind) {
    case 0:
        /* reshape then an op, so the alias sits between real kernels */
        return tg_scale(g, tg_reshape(g, x, c->other), 2.0f, 0.0f);
    case 1:
        return tg_scale(g, tg_flatten(g, x, c->axis), 1.0f, 0.5f);
    case 2:
        return tg_transpose(g, x, c->perm);
    case 3: {
        tg_tensor *xs[80] = {x};
        for (int k = 1; k < c->n_concat; k++)
            xs[k] = tg_param(g, "y", k % 2 ? c->other : c->shape, U);
        return tg_concat(g, xs, c->n_concat, c->axis);
    }
    case 4:
        return tg_slice(g, x, c->axis, c->start, c->end);
    case 5:
        return tg_reduce_sum(g, x, c->mask, c->keepdim);
    default:
        return tg_reduce_mean(g, x, c->mask, c->keepdim);
    }
}

static void check_case(const char *label, sh_case *c)
{
    tg_gradcheck(label, build_shape, c, (tg_check_opts){.max_elems = 24});
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels(label, build_shape, c, threads, 1e-5, (tg_check_opts){0});
}

/* More inputs than a node takes (DenseNet's concats of up to ~60 maps):
 * built as a tree of concats, every element in its place and the gradient
 * (slices of slices) against finite differences. */
static void test_concat_many(void)
{
    for (int n = TG_MAX_INPUTS + 1; n <= 80; n += 71 - TG_MAX_INPUTS) {
        tg_graph *g = tg_graph_create();
        tg_tensor *xs[80];
        for (int k = 0; k < n; k++)
            xs[k] = tg_input(g, "x", TG_F32, tg_shape2(2, 1 + k % 3));
        tg_tensor *cat = tg_concat(g, xs, n, 1);
        TG_CHECK(cat != NULL);
        tg_interp *ip = NULL;
        TG_CHECK_OK(tg_interp_create(g, 1, &ip));
        int64_t width = 0;
        for (int k = 0; k < n; k++) { /* element (r, j) of input k is 1000 k + 100 r + j */
            for (int r = 0; r < 2; r++)
                for (int j = 0; j < 1 + k % 3; j++)
                    tg_interp_data(ip, xs[k])[r * (1 + k % 3) + j] = 1000.0 * k + 100 * r + j;
            width += 1 + k % 3;
        }
        TG_CHECK(cat->shape.dim[1] == width);
        TG_CHECK_OK(tg_interp_run(ip, 0));
        int64_t col = 0;
        int bad = 0;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < 1 + k % 3; j++, col++)
                for (int r = 0; r < 2; r++)
                    bad += tg_interp_data(ip, cat)[r * width + col] != 1000.0 * k + 100 * r + j;
        TG_CHECK(bad == 0);
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
    sh_case c = {
        .kind = 3, .shape = tg_shape2(2, 1), .other = tg_shape2(2, 2), .axis = 1, .n_concat = 70};
    check_case("concat 70 inputs", &c);
}

static void test_reshape_flatten(void)
{
    sh_case c = {.kind = 0, .shape = tg_shape3(2, 3, 4), .other = tg_shape2(6, 4)};
    check_case("reshape", &c);
    c.other = tg_shape_of(0, NULL);
    c.shape = tg_shape1(1);
    check_case("reshape to scalar", &c);
    c = (sh_case){.kind = 1, .shape = tg_shape4(2, 3, 2, 2), .axis = 1};
    check_case("flatten", &c);

    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 3, 4, 5));
    tg_tensor *r = tg_reshape(g, x, tg_shape2(-1, 20));
    tg_tensor *f = tg_flatten(g, x, 1), *f0 = tg_flatten(g, x, 0), *f4 = tg_flatten(g, x, -1);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_shape_equal(r->shape, tg_shape2(6, 20)));
    TG_CHECK(tg_shape_equal(f->shape, tg_shape2(2, 60)));
    TG_CHECK(tg_shape_equal(f0->shape, tg_shape1(120)));
    TG_CHECK(tg_shape_equal(f4->shape, tg_shape4(2, 3, 4, 5)));
    TG_CHECK(r->flags & TG_NODE_ALIAS);
    TG_CHECK(r->in[0] == x && r->dtype == TG_F32);
    tg_graph_destroy(g);
}

static void test_transpose(void)
{
    sh_case c = {.kind = 2, .shape = tg_shape2(3, 5), .perm = {1, 0}};
    check_case("transpose 2d", &c);
    c = (sh_case){.kind = 2, .shape = tg_shape4(2, 3, 4, 5), .perm = {0, 2, 3, 1}};
    check_case("transpose NCHW->NHWC", &c);
    c = (sh_case){.kind = 2, .shape = tg_shape4(2, 3, 4, 5), .perm = {3, 1, 0, 2}};
    check_case("transpose mixed", &c);
    c = (sh_case){.kind = 2, .shape = tg_shape3(2, 3, 4), .perm = {0, 1, 2}};
    check_case("transpose identity", &c);
    /* last axis stays last: contiguous runs copied row by row */
    c = (sh_case){.kind = 2, .shape = tg_shape3(3, 4, 5), .perm = {1, 0, 2}};
    check_case("transpose keep last", &c);
    /* big batched transposes: tiled path with ragged tiles, on the pool */
    c = (sh_case){.kind = 2, .shape = tg_shape3(4, 97, 131), .perm = {0, 2, 1}};
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("transpose large", build_shape, &c, threads, 1e-3, (tg_check_opts){0});
    c = (sh_case){.kind = 2, .shape = tg_shape4(30, 40, 2, 17), .perm = {1, 0, 2, 3}};
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("transpose large runs", build_shape, &c, threads, 1e-3,
                         (tg_check_opts){0});
    c = (sh_case){.kind = 2, .shape = tg_shape4(3, 40, 20, 17), .perm = {2, 0, 3, 1}};
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("transpose large strided", build_shape, &c, threads, 1e-3,
                         (tg_check_opts){0});

    /* exact values */
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(2, 2, 3));
    tg_tensor *t = tg_transpose(g, x, (int[]){2, 0, 1});
    TG_CHECK(tg_shape_equal(t->shape, tg_shape3(3, 2, 2)));
    float v[12], r[12];
    for (int k = 0; k < 12; k++)
        v[k] = (float)k;
    /* out[c][a][b] = x[a][b][c] = 6a + 3b + c */
    for (int threads = 1; threads <= 2; threads++) {
        run_fast(g, x, v, t, r, threads);
        for (int cc = 0; cc < 3; cc++)
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    TG_CHECK_NEAR(r[cc * 4 + a * 2 + b], 6 * a + 3 * b + cc, 0);
    }
    tg_graph_destroy(g);
}

static void test_concat(void)
{
    sh_case c = {.kind = 3,
                 .shape = tg_shape3(2, 3, 4),
                 .other = tg_shape3(2, 2, 4),
                 .axis = 1,
                 .n_concat = 2};
    check_case("concat axis 1", &c);
    c.axis = -2;
    check_case("concat axis -2", &c);
    c = (sh_case){.kind = 3,
                  .shape = tg_shape2(3, 2),
                  .other = tg_shape2(3, 5),
                  .axis = 1,
                  .n_concat = TG_MAX_INPUTS};
    check_case("concat 8 inputs", &c);
    c = (sh_case){
        .kind = 3, .shape = tg_shape2(2, 3), .other = tg_shape2(4, 3), .axis = 0, .n_concat = 3};
    check_case("concat axis 0", &c);
    c = (sh_case){.kind = 3,
                  .shape = tg_shape2(300, 80),
                  .other = tg_shape2(300, 60),
                  .axis = 1,
                  .n_concat = 2};
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("concat large", build_shape, &c, threads, 1e-3, (tg_check_opts){0});

    tg_graph *g = tg_graph_create();
    tg_tensor *a = tg_input(g, "a", TG_F32, tg_shape2(2, 1));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape2(2, 2));
    tg_tensor *cat = tg_concat(g, (tg_tensor *[]){a, b}, 2, 1);
    tg_tensor *cat0 = tg_concat(g, (tg_tensor *[]){b, b}, 2, 0);
    TG_CHECK(tg_shape_equal(cat->shape, tg_shape2(2, 3)));
    TG_CHECK(tg_shape_equal(cat0->shape, tg_shape2(4, 2)));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    const double av[] = {1, 2}, bv[] = {10, 11, 20, 21};
    memcpy(tg_interp_data(ip, a), av, sizeof av);
    memcpy(tg_interp_data(ip, b), bv, sizeof bv);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    const double want[] = {1, 10, 11, 2, 20, 21};
    for (int k = 0; k < 6; k++)
        TG_CHECK_NEAR(tg_interp_data(ip, cat)[k], want[k], 0);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
    test_concat_many();
}

static void test_slice(void)
{
    sh_case c = {.kind = 4, .shape = tg_shape3(2, 5, 3), .axis = 1, .start = 1, .end = 4};
    check_case("slice middle", &c);
    c.axis = -1, c.start = 0, c.end = 1;
    check_case("slice last axis", &c);
    c.axis = 0, c.start = 1, c.end = 2;
    check_case("slice first axis", &c);
    c.axis = 1, c.start = 2, c.end = 2;
    for (int threads = 1; threads <= 2; threads++) /* empty slice: no parameters reach it */
        tg_check_kernels("slice empty", build_shape, &c, threads, 1e-5, (tg_check_opts){0});
    c = (sh_case){.kind = 4, .shape = tg_shape3(50, 30, 40), .axis = 1, .start = 7, .end = 29};
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("slice large", build_shape, &c, threads, 1e-3, (tg_check_opts){0});

    /* exact values of slice and its backward */
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(2, 4));
    tg_tensor *s = tg_slice(g, x, -1, 1, 3);
    tg_tensor *b = tg_node_create(g, TG_OP_SLICE_BWD, 1, &s, &s->p);
    TG_CHECK(b == NULL); /* slice_bwd needs the original length (len) */
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 4));
    s = tg_slice(g, x, -1, 1, 3);
    tg_node_params p = s->p;
    tg_slice_set_len(&p, 4);
    b = tg_node_create(g, TG_OP_SLICE_BWD, 1, &s, &p);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_shape_equal(s->shape, tg_shape2(2, 2)) && tg_slice_axis(s) == 1);
    TG_CHECK(tg_shape_equal(b->shape, tg_shape2(2, 4)));
    const float v[] = {1, 2, 3, 4, 5, 6, 7, 8};
    float r[8];
    for (int threads = 1; threads <= 2; threads++) {
        run_fast(g, x, v, s, r, threads);
        const float want[] = {2, 3, 6, 7};
        for (int k = 0; k < 4; k++)
            TG_CHECK_NEAR(r[k], want[k], 0);
        run_fast(g, x, v, b, r, threads);
        const float want_b[] = {0, 2, 3, 0, 0, 6, 7, 0};
        for (int k = 0; k < 8; k++)
            TG_CHECK_NEAR(r[k], want_b[k], 0);
    }
    tg_graph_destroy(g);
}

/* SLICE_BWD as a forward op: its gradient is a slice. */
static tg_tensor *build_slice_bwd(tg_graph *g, void *ctx)
{
    tg_tensor *dy = tg_param(g, "dy", tg_shape3(2, 2, 3), U);
    tg_node_params p = {0};
    tg_slice_set_axis(&p, 1), tg_slice_set_start(&p, 1), tg_slice_set_end(&p, 3);
    tg_slice_set_len(&p, 5); /* axis 1, rows [1, 3) of 5 */
    return tg_node_create(g, TG_OP_SLICE_BWD, 1, &dy, &p);
}

static void test_slice_bwd(void)
{
    tg_gradcheck("slice_bwd", build_slice_bwd, NULL, (tg_check_opts){0});
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("slice_bwd", build_slice_bwd, NULL, threads, 1e-5, (tg_check_opts){0});
}

static void test_reduce(void)
{
    sh_case c = {.kind = 5, .shape = tg_shape3(3, 4, 5)};
    for (unsigned mask = 0; mask < 8; mask++)
        for (int keep = 0; keep <= 1; keep++)
            for (int mean = 0; mean <= 1; mean++) {
                c.kind = mean ? 6 : 5;
                c.mask = mask;
                c.keepdim = keep;
                char label[64];
                snprintf(label, sizeof label, "reduce_%s mask %u keep %d", mean ? "mean" : "sum",
                         mask, keep);
                check_case(label, &c);
            }
    /* large reductions on the pool: rows, columns, middle axis */
    unsigned masks[] = {1u, 2u, 4u, 5u};
    for (int k = 0; k < 4; k++) {
        c = (sh_case){.kind = 5, .shape = tg_shape3(40, 30, 50), .mask = masks[k]};
        for (int threads = 1; threads <= 2; threads++)
            tg_check_kernels("reduce large", build_shape, &c, threads, 1e-3, (tg_check_opts){0});
    }

    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_tensor *rows = tg_reduce_sum(g, x, 2u, false), *cols = tg_reduce_mean(g, x, 1u, true);
    tg_tensor *all = tg_reduce_sum(g, x, 3u, false);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_shape_equal(rows->shape, tg_shape1(2)));
    TG_CHECK(tg_shape_equal(cols->shape, tg_shape2(1, 3)));
    TG_CHECK(all->shape.ndim == 0 && tg_numel(all) == 1);
    const float v[] = {1, 2, 3, 4, 5, 6};
    float r[3];
    for (int threads = 1; threads <= 2; threads++) {
        run_fast(g, x, v, rows, r, threads);
        TG_CHECK_NEAR(r[0], 6, 0);
        TG_CHECK_NEAR(r[1], 15, 0);
        run_fast(g, x, v, cols, r, threads);
        TG_CHECK_NEAR(r[0], 2.5, 1e-7);
        TG_CHECK_NEAR(r[1], 3.5, 1e-7);
        TG_CHECK_NEAR(r[2], 4.5, 1e-7);
        run_fast(g, x, v, all, r, threads);
        TG_CHECK_NEAR(r[0], 21, 0);
    }
    tg_graph_destroy(g);
}

static void test_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_reshape(g, x, tg_shape2(5, 2)) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_SHAPE,
                     "reshape: cannot reshape [3, 4] (12 elements) to [5, 2] (10 elements)");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_reshape(g, x, tg_shape2(-1, 5)) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_SHAPE, "cannot infer the -1 dimension of [3, 4]");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape3(2, 3, 4));
    TG_CHECK(tg_transpose(g, x, (int[]){0, 0, 1}) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG, "transpose: perm[1] = 0: not a permutation");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_tensor *y = tg_input(g, "y", TG_F32, tg_shape2(3, 3));
    TG_CHECK(tg_concat(g, (tg_tensor *[]){x, y}, 2, 1) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_SHAPE,
                     "concat: input 1 [3, 3] does not match input 0 [2, 3] outside axis 1");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    TG_CHECK(tg_concat(g, (tg_tensor *[]){x, x}, 2, 2) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG, "concat: axis 2 out of range for 2 dimensions");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_tensor *none[1] = {x};
    TG_CHECK(tg_concat(g, none, 0, 0) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG, "concat: 0 inputs (takes 1 or more)");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    TG_CHECK(tg_slice(g, x, 1, 2, 5) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG,
                     "slice: range [2, 5) does not fit axis 1 of length 3 in [2, 3]");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    TG_CHECK(tg_slice(g, x, -3, 0, 1) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG, "slice: axis -3 out of range for 2 dimensions");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    TG_CHECK(tg_reduce_sum(g, x, 4u, false) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG,
                     "reduce_sum: axes mask 0x4 names an axis beyond [2, 3]");

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    TG_CHECK(tg_flatten(g, x, 3) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG, "flatten: axis 3 out of range");
}

/* Shape ops move any element type: an i32 tensor through transpose,
 * concat and slice keeps its exact values (the fast kernels copy bytes). */
static void test_int_data(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_I32, tg_shape2(2, 3));
    tg_tensor *t = tg_transpose(g, x, (int[]){1, 0});
    tg_tensor *c = tg_concat(g, (tg_tensor *[]){t, t}, 2, 1);
    tg_tensor *s = tg_slice(g, c, 1, 1, 3);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(s->dtype == TG_I32 && tg_shape_equal(s->shape, tg_shape2(3, 2)));
    const int32_t v[] = {1, 2, 3, 4, 5, 6};
    int32_t r[6];
    run_fast(g, x, (const float *)(const void *)v, s, (float *)(void *)r, 2);
    /* t = [[1,4],[2,5],[3,6]]; c rows = [a, b, a, b]; s = columns 1..2 = [b, a] */
    const int32_t want[] = {4, 1, 5, 2, 6, 3};
    for (int k = 0; k < 6; k++)
        TG_CHECK(r[k] == want[k]);
    tg_graph_destroy(g);
}

/* A transpose of an f32 value stored in bf16 moves the two-byte elements
 * as they are (backend/cpu/shape_kernels.c): every permutation of a
 * [3, 5, 4, 2] tensor (both tiled and row paths), bf16 in and out; and
 * an input and output stored in different types convert (widen exactly,
 * narrow as tg_f32_to_bf16 rounds). */
static void test_transpose_bf16(void)
{
    static const int perms[][4] = {{0, 2, 1, 3}, {0, 1, 3, 2}, {3, 2, 1, 0},
                                   {0, 2, 3, 1}, {1, 0, 2, 3}, {0, 1, 2, 3}};
    enum { N = 3 * 5 * 4 * 2 };
    uint16_t in16[N], out16[N];
    float in32[N], out32[N], want[N];
    for (int i = 0; i < N; i++) {
        in32[i] = (float)i * 1.00390625f - 7.0f; /* not all exact in bf16 */
        in16[i] = tg_f32_to_bf16(in32[i]);
    }
    const tg_kernel_def *k = tg_backend_cpu.kernel(TG_OP_TRANSPOSE);
    for (size_t pi = 0; pi < sizeof perms / sizeof *perms; pi++)
        for (int threads = 1; threads <= 2; threads++) {
            tg_graph *g = tg_graph_create();
            tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(3, 5, 4, 2));
            tg_tensor *t = tg_transpose(g, x, perms[pi]);
            TG_CHECK_OK(tg_graph_status(g));
            TG_CHECK(tg_op_reads_bf16(t, false));
            tg_pool *pool = tg_pool_create(threads);
            tg_kernel_args a = {.node = t, .in = {in32}, .out = want, .pool = pool};
            k->forward(&a); /* f32: the reference order */
            a = (tg_kernel_args){.node = t, .in = {in16}, .out = out16, .pool = pool};
            a.in_type[0] = a.out_type = TG_BF16;
            k->forward(&a);
            a.out = out32, a.out_type = TG_F32; /* bf16 in, f32 out */
            k->forward(&a);
            for (int i = 0; i < N; i++) {
                uint16_t w = tg_f32_to_bf16(want[i]);
                if (out16[i] != w || out32[i] != tg_bf16_to_f32(w)) {
                    tg_test_fail(__FILE__, __LINE__,
                                 "perm %zu, element %d: 0x%04x and %g, want 0x%04x", pi, i,
                                 out16[i], out32[i], w);
                    break;
                }
            }
            a = (tg_kernel_args){.node = t, .in = {in32}, .out = out16, .pool = pool};
            a.in_type[0] = TG_F32, a.out_type = TG_BF16; /* f32 in, bf16 out */
            k->forward(&a);
            for (int i = 0; i < N; i++)
                if (out16[i] != tg_f32_to_bf16(want[i])) {
                    tg_test_fail(__FILE__, __LINE__, "perm %zu, f32 in, element %d: 0x%04x", pi, i,
                                 out16[i]);
                    break;
                }
            tg_pool_destroy(pool);
            tg_graph_destroy(g);
        }
}

int main(void)
{
    TG_RUN(test_reshape_flatten);
    TG_RUN(test_transpose);
    TG_RUN(test_concat);
    TG_RUN(test_slice);
    TG_RUN(test_slice_bwd);
    TG_RUN(test_reduce);
    TG_RUN(test_errors);
    TG_RUN(test_int_data);
    TG_RUN(test_transpose_bf16);
    return tg_test_finish();
}
