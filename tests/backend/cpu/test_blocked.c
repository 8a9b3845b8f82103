/* tests/backend/cpu/test_blocked.c - the kernels' blocked-layout variants (backend/cpu/blocked.h,
 * nChw16c) against the same kernels on NCHW: every op of a small training
 * graph (convolution, batch norm, ReLU, max and average pooling, a residual
 * add, and all their gradients) that can run blocked is run both ways on
 * the values a reference run of the graph gives, and the blocked result,
 * put back in NCHW, must equal the NCHW result (pooling and element-wise
 * ops bit for bit; batch norm's sums, taken in another order, within
 * rounding; convolutions through oneDNN with blocked operands within
 * rounding). The kernels run on two threads.
 * TG_TEST_LABELS: threads isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "backend/cpu/blocked.h"
#include "ops/conv.h"
#include "ops/pool.h"
#include "runtime/interp.h"
#include "tilegraph/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CB TG_CHANNEL_BLOCK

/* NCHW <-> nChw16c for a [N, C, H, W] tensor with C a multiple of 16. */
static void permute(const tg_tensor *t, const float *src, float *dst, bool to_blocked)
{
    int64_t N = t->shape.dim[0], C = t->shape.dim[1], HW = t->shape.dim[2] * t->shape.dim[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < HW; k++) {
                int64_t plain = (n * C + c) * HW + k;
                int64_t blocked = ((n * (C / CB) + c / CB) * HW + k) * CB + c % CB;
                if (to_blocked)
                    dst[blocked] = src[plain];
                else
                    dst[plain] = src[blocked];
            }
}

static bool blockable(const tg_tensor *t)
{
    return t->shape.ndim == 4 && t->shape.dim[1] % CB == 0;
}

/* Whether operand k of t (-1: its output) is given blocked: every 4-D one
 * with whole channel blocks but a convolution's weights or their gradient. */
static bool operand_blocked(const tg_tensor *t, int k)
{
    const tg_tensor *v = k < 0 ? t : t->in[k];
    bool weights = (t->op == TG_OP_CONV2D || t->op == TG_OP_CONV2D_BWD_DATA) ? k == 1
                   : t->op == TG_OP_CONV2D_BWD_WEIGHT                        ? k < 0
                                                                             : false;
    return blockable(v) && !weights;
}

/* A graph with every op the ResNets run blocked, and its gradients. */
static tg_graph *build(tg_pool2d_params pool)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, true);
    tg_init u = {TG_INIT_UNIFORM, -1, 1};
    tg_tensor *x = tg_param(g, "x", tg_shape4(3, 32, 9, 7), u);
    tg_tensor *w = tg_param(g, "w", tg_shape4(32, 32, 3, 3), u);
    tg_tensor *gamma = tg_param(g, "gamma", tg_shape1(32), (tg_init){TG_INIT_UNIFORM, 0.5, 1.5});
    tg_tensor *beta = tg_param(g, "beta", tg_shape1(32), u);
    tg_tensor *h = tg_conv2d(g, x, w, NULL, (tg_conv2d_params){1, 1, 1, 1, 1, 1, 1});
    h = tg_relu(g, tg_batch_norm(g, h, gamma, beta, NULL, 1e-5f));
    h = tg_add(g, h, x);
    h = tg_maxpool2d_ex(g, h, pool);
    h = tg_avgpool2d(g, h, 2, 1, 0);
    h = tg_global_avgpool(g, h);
    tg_tensor *loss = tg_reduce_sum(g, h, 0xf, false);
    if (!loss || tg_graph_backward(g, loss) != TG_OK) {
        TG_CHECK(!"building the graph");
        tg_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* Runs t's kernel on f32 copies of the reference values of its inputs,
 * NCHW or blocked, and returns its output in NCHW (malloc'd). */
static float *run(tg_interp *ip, const tg_tensor *t, tg_pool *pool, bool blocked)
{
    void *in[TG_MAX_INPUTS] = {0};
    for (int k = 0; k < t->n_in; k++) {
        int64_t n = tg_numel(t->in[k]);
        float *f = malloc((size_t)(n ? n : 1) * sizeof *f), *b = NULL;
        const double *d = tg_interp_data(ip, t->in[k]);
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)d[i];
        if (blocked && operand_blocked(t, k)) {
            b = malloc((size_t)n * sizeof *b);
            permute(t->in[k], f, b, true);
            free(f);
            f = b;
        }
        in[k] = f;
    }
    int64_t n = tg_numel(t);
    float *out = malloc((size_t)n * sizeof *out);
    memset(out, 0xff, (size_t)n * sizeof *out); /* NaN: an element left unwritten shows */
    tg_kernel_plan plan = {0};
    const tg_op_planner *planner = tg_op_planner_get(t->op);
    tg_plan_opts po = {.n_threads = 1};
    for (int k = 0; k < t->n_in; k++)
        po.in_blocked[k] = blocked && operand_blocked(t, k);
    po.out_blocked = blocked && operand_blocked(t, -1);
    if (planner)
        TG_CHECK(planner->plan(t, &po, &plan) == TG_OK);
    const tg_kernel_def *def = tg_backend_cpu.kernel(t->op);
    size_t sb = plan.state ? plan.scratch : def->scratch ? def->scratch(t, 1) : 0;
    void *scratch = sb ? malloc(sb) : NULL;
    tg_kernel_args a = {.node = t,
                        .out = out,
                        .scratch = scratch,
                        .scratch_bytes = sb,
                        .pool = pool,
                        .plan = plan.state,
                        .blocked = blocked && !planner};
    memcpy(a.in, in, sizeof in);
    def->forward(&a);
    if (plan.state)
        planner->plan_free(plan.state);
    free(scratch);
    for (int k = 0; k < t->n_in; k++)
        free(in[k]);
    if (blocked && operand_blocked(t, -1)) {
        float *plain = malloc((size_t)n * sizeof *plain);
        permute(t, out, plain, false);
        free(out);
        out = plain;
    }
    return out;
}

/* Ops whose blocked result must equal the NCHW one bit for bit. */
static bool exact(tg_op op)
{
    return op != TG_OP_CONV2D && op != TG_OP_CONV2D_BWD_DATA && op != TG_OP_CONV2D_BWD_WEIGHT &&
           op != TG_OP_NORM_STATS && op != TG_OP_NORM_APPLY_BWD_STATS &&
           op != TG_OP_NORM_APPLY_BWD_AFFINE;
}

static int compare(const tg_tensor *t, const float *plain, const float *blocked)
{
    int64_t n = tg_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)plain[i] - blocked[i]), m = fabs((double)plain[i]);
        bool same = exact(t->op) ? memcmp(&plain[i], &blocked[i], sizeof *plain) == 0
                                 : d <= 1e-5 * m + 1e-5;
        if (!same) {
            tg_test_fail(__FILE__, __LINE__, "%s (%s) element %lld: NCHW %.9g, blocked %.9g",
                         t->name, tg_op_name(t->op), (long long)i, plain[i], blocked[i]);
            return 0;
        }
    }
    return 1;
}

static bool runs_blocked(const tg_tensor *t)
{
    bool conv =
        t->op == TG_OP_CONV2D || t->op == TG_OP_CONV2D_BWD_DATA || t->op == TG_OP_CONV2D_BWD_WEIGHT;
    if (conv)
        return true;
    if (t->n_in == 0 || !tg_blocked_kernel_exists(t))
        return false;
    bool any = blockable(t);
    for (int k = 0; k < t->n_in; k++)
        any |= blockable(t->in[k]);
    return any;
}

static void check_graph(tg_pool2d_params pool_params, int expect_min)
{
    tg_graph *g = build(pool_params);
    if (!g)
        return;
    tg_interp *ip = NULL;
    TG_CHECK(tg_interp_create(g, 11, &ip) == TG_OK);
    TG_CHECK(tg_interp_run(ip, 0) == TG_OK);
    tg_pool *pool = tg_pool_create(2);
    int checked = 0;
    bool kinds[TG_OP_COUNT] = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!runs_blocked(t))
            continue;
        float *plain = run(ip, t, pool, false), *blocked = run(ip, t, pool, true);
        checked += compare(t, plain, blocked);
        kinds[t->op] = true;
        free(plain);
        free(blocked);
    }
    /* every kind the ResNets run blocked was among them */
    tg_op want[] = {TG_OP_CONV2D,
                    TG_OP_CONV2D_BWD_DATA,
                    TG_OP_CONV2D_BWD_WEIGHT,
                    TG_OP_NORM_STATS,
                    TG_OP_NORM_APPLY,
                    TG_OP_NORM_APPLY_BWD_X,
                    TG_OP_NORM_APPLY_BWD_STATS,
                    TG_OP_NORM_APPLY_BWD_AFFINE,
                    TG_OP_NORM_STATS_BWD,
                    TG_OP_RELU,
                    TG_OP_RELU_BWD,
                    TG_OP_ADD,
                    TG_OP_MAXPOOL2D,
                    TG_OP_MAXPOOL2D_BWD,
                    TG_OP_AVGPOOL2D,
                    TG_OP_AVGPOOL2D_BWD};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        if (!kinds[want[k]])
            tg_test_fail(__FILE__, __LINE__, "no %s op was checked", tg_op_name(want[k]));
    TG_CHECK(checked >= expect_min);
    tg_pool_destroy(pool);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

static void test_resnet_stem_pool(void)
{
    /* ResNet's 3x3 stride-2 max pool with padding */
    check_graph((tg_pool2d_params){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true}, 16);
}

static void test_pool_generality(void)
{
    /* asymmetric padding, dilation and ceil_mode */
    check_graph((tg_pool2d_params){2, 3, 2, 1, 0, 1, 1, 0, 2, 1, true, false}, 16);
}

/* Max pooling's forward of x (NCHW) on one layout, put back in NCHW. */
static float *max_forward(const tg_tensor *t, const float *x, tg_pool *pool, bool blocked)
{
    int64_t nx = tg_numel(t->in[0]), n = tg_numel(t);
    float *in = malloc((size_t)nx * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    if (blocked)
        permute(t->in[0], x, in, true);
    else
        memcpy(in, x, (size_t)nx * sizeof *in);
    memset(out, 0xff, (size_t)n * sizeof *out);
    tg_kernel_args a = {.node = t, .out = out, .pool = pool, .blocked = blocked};
    a.in[0] = in;
    tg_backend_cpu.kernel(t->op)->forward(&a);
    float *plain = out;
    if (blocked) {
        plain = malloc((size_t)n * sizeof *plain);
        permute(t, out, plain, false);
        free(out);
    }
    free(in);
    return plain;
}

/* The first maximum of window (oy, ox) of plane xp, taps in row-major
 * order, NaN winning (the first NaN): what both layouts' kernels must
 * give, computed here apart from them (they share their row loop). */
static float first_max(const float *xp, const tg_pool_geom *g, int64_t oy, int64_t ox)
{
    float best = -INFINITY;
    for (int ky = 0; ky < g->kh; ky++)
        for (int kx = 0; kx < g->kw; kx++) {
            int64_t iy = oy * g->sh - g->pt + ky * g->dh, ix = ox * g->sw - g->pl + kx * g->dw;
            if (iy < 0 || iy >= g->ih || ix < 0 || ix >= g->iw)
                continue;
            float v = xp[iy * g->iw + ix];
            if (v > best || (v != v && best == best))
                best = v;
        }
    return best;
}

/* Whether every output of the NCHW result is first_max's, bit for bit. */
static bool matches_first_max(const tg_tensor *y, const float *x, const float *plain)
{
    tg_pool_geom g = tg_pool_geom_of(y, tg_pool_input_shape(y), tg_pool_output_shape(y));
    for (int64_t pl = 0; pl < g.planes; pl++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                float want = first_max(x + pl * g.ih * g.iw, &g, oy, ox);
                if (memcmp(&want, &plain[(pl * g.oh + oy) * g.ow + ox], sizeof want) != 0)
                    return false;
            }
    return true;
}

/* Windows full of ties and non-finite values: NaN (two payloads: the
 * first NaN of a window wins), -inf, +inf, -0 against +0 (the first of
 * equal values wins), so the blocked forward must follow the NCHW one's
 * order of taps, not only its maxima, and both the window's. */
static void test_max_pool_nonfinite_and_ties(void)
{
    static const tg_pool2d_params shapes[] = {
        {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true}, /* ResNet's stem pool */
        {2, 3, 2, 1, 0, 1, 1, 0, 2, 1, true, false}, /* padding, dilation, ceil_mode */
        {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
    };
    uint32_t nan2 = 0x7fc00123u, seed = 7;
    float other_nan;
    memcpy(&other_nan, &nan2, sizeof other_nan);
    const float values[] = {NAN, other_nan, -INFINITY, INFINITY, -0.0f, 0.0f, -1.0f, 1.0f, 1.0f};
    tg_pool *pool = tg_pool_create(2);
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 2 * CB, 9, 11));
        tg_tensor *y = tg_maxpool2d_ex(g, x, shapes[k]);
        int64_t n = tg_numel(x);
        float *xs = malloc((size_t)n * sizeof *xs);
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            /* mostly ordinary values, a few non-finite ones */
            uint32_t r = (seed >> 16) % 24;
            xs[i] = r < sizeof values / sizeof *values ? values[r] : (float)(r % 5) - 2.0f;
        }
        float *plain = max_forward(y, xs, pool, false), *blocked = max_forward(y, xs, pool, true);
        TG_CHECK(compare(y, plain, blocked));
        TG_CHECK(matches_first_max(y, xs, plain));
        int nans = 0;
        for (int64_t i = 0; i < tg_numel(y); i++)
            nans += plain[i] != plain[i];
        TG_CHECK(nans > 0); /* the windows did hold NaN */
        free(plain);
        free(blocked);
        free(xs);
        tg_graph_destroy(g);
    }
    tg_pool_destroy(pool);
}

/* A kernel that ignored the flag would read blocked memory as NCHW: the
 * comparison must see that (this is the check the tests above rely on). */
static void test_detects_wrong_layout(void)
{
    tg_graph *g = build((tg_pool2d_params){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true});
    if (!g)
        return;
    tg_interp *ip = NULL;
    TG_CHECK(tg_interp_create(g, 11, &ip) == TG_OK);
    TG_CHECK(tg_interp_run(ip, 0) == TG_OK);
    tg_pool *pool = tg_pool_create(1);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_NORM_APPLY)
            continue;
        float *plain = run(ip, t, pool, false), *blocked = run(ip, t, pool, true);
        /* the NCHW kernel on permuted data: its output permuted back differs */
        int64_t n = tg_numel(t);
        float *tmp = malloc((size_t)n * sizeof *tmp);
        permute(t, plain, tmp, true);
        int differ = 0;
        for (int64_t k = 0; k < n; k++)
            differ += tmp[k] != blocked[k];
        TG_CHECK(differ > 0);
        free(tmp);
        free(plain);
        free(blocked);
    }
    tg_pool_destroy(pool);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_resnet_stem_pool);
    TG_RUN(test_pool_generality);
    TG_RUN(test_max_pool_nonfinite_and_ties);
    TG_RUN(test_detects_wrong_layout);
    return tg_test_finish();
}
