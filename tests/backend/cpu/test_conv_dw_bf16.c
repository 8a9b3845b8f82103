/* tests/backend/cpu/test_conv_dw_bf16.c - the own depthwise convolution
 * over bf16 and f32 nChw16c (backend/cpu/conv_dw_bf16.c) against the op's double
 * reference (ops/conv.c, then the activation's): channel counts that are
 * and are not whole 16-channel blocks (16, 24, 32, 40, 72, 120), 3x3, 5x5
 * and 3x5 filters, stride 1 and 2, odd sizes and a tile remainder, bias,
 * a folded batch norm, each fused post-op (ReLU, hard swish, its Mul form,
 * hard sigmoid), NaN and infinities as the reference passes them, at 1 and
 * 2 threads; the padded lanes written zero; and an inference program in
 * 32.bf16 that runs it passes the checker. Where the CPU (or
 * TILEGRAPH_ISA) has no AVX512_BF16 the plan hook must not choose it, and
 * the value checks are skipped.
 * TG_TEST_LABELS: threads isa */
#include "backend/backend.h"
#include "tg_conv_case.h"
#include "tg_test.h"

#include "compile/program.h"
#include "core/bf16.h"
#include "core/pool.h"
#include "ops/conv.h"
#include "runtime/session_internal.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The activations' storage the cases run with: bf16, then f32. */
static tg_dtype storage = TG_BF16;

enum { ACT_NONE, ACT_RELU, ACT_HSWISH, ACT_MUL, ACT_HSIGMOID, N_ACTS };

typedef struct dw_case {
    int64_t N, C, H, W, R, S, stride, ph, pw;
} dw_case;

static const dw_case cases[] = {
    {2, 24, 9, 11, 3, 3, 1, 1, 1},   /* padded block, odd sizes */
    {1, 40, 13, 19, 5, 5, 2, 2, 2},  /* 5x5 stride 2 */
    {2, 72, 8, 17, 3, 3, 2, 1, 1},   /* stride 2, odd width */
    {1, 120, 10, 12, 5, 5, 1, 2, 2}, /* 5x5, 8 blocks */
    {3, 16, 6, 10, 3, 3, 1, 0, 0},   /* no padding, one full block */
    {1, 32, 7, 21, 3, 3, 1, 1, 1},   /* tiles of 8 and a remainder of 5 */
    {2, 24, 11, 13, 3, 5, 1, 1, 2},  /* 3x5 filter */
    {1, 40, 5, 29, 3, 3, 1, 1, 1},   /* 29 wide: f32 too, a remainder of 5 */
    {2, 24, 6, 30, 5, 5, 1, 2, 2},   /* 5x5, 30 wide: f32 too */
};
#define N_CASES (sizeof cases / sizeof *cases)

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static float uniform(uint32_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)(lcg(s) & 0xffff) / 65535.0f;
}

/* The graph of one case: x, w, (b), the conv, (batch norm), (post-op). */
typedef struct dw_net {
    tg_graph *g;
    tg_tensor *x, *w, *b, *stats, *gamma, *beta, *conv, *bn, *act, *sig;
} dw_net;

static dw_net build(const dw_case *c, int act, bool fold, bool bias)
{
    dw_net n = {0};
    n.g = tg_graph_create();
    tg_graph_set_training(n.g, false);
    n.x = tg_input(n.g, "x", TG_F32, tg_shape4(c->N, c->C, c->H, c->W));
    n.w = tg_input(n.g, "w", TG_F32, tg_shape4(c->C, 1, c->R, c->S));
    n.b = bias ? tg_input(n.g, "b", TG_F32, tg_shape1(c->C)) : NULL;
    n.conv = tg_conv2d(n.g, n.x, n.w, n.b, P(c->stride, c->stride, c->ph, c->pw, 1, 1, c->C));
    tg_tensor *h = n.conv;
    if (fold) {
        n.stats = tg_input(n.g, "stats", TG_F32, tg_shape2(2, c->C));
        n.gamma = tg_input(n.g, "gamma", TG_F32, tg_shape1(c->C));
        n.beta = tg_input(n.g, "beta", TG_F32, tg_shape1(c->C));
        h = n.bn = tg_batch_norm(n.g, h, n.gamma, n.beta, n.stats, 1e-3f);
    }
    if (act == ACT_RELU)
        n.act = tg_relu(n.g, h);
    else if (act == ACT_HSWISH)
        n.act = tg_hard_swish(n.g, h);
    else if (act == ACT_HSIGMOID)
        n.act = tg_hard_sigmoid(n.g, h, 0.3f, 0.4f);
    else if (act == ACT_MUL)
        n.act = tg_mul(n.g, h, n.sig = tg_hard_sigmoid(n.g, h, 1.0f / 6.0f, 0.5f));
    TG_CHECK_OK(tg_graph_status(n.g));
    return n;
}

/* The operands in double (NCHW), as the kernel reads them. */
typedef struct dw_values {
    double *x, *w, *b, *stats, *gamma, *beta;
} dw_values;

static double *doubles(size_t n)
{
    return calloc(n ? n : 1, sizeof(double));
}

/* Random operands: x bf16 values (as stored), w and b f32, a positive
 * variance; with `special`, a NaN, a +inf and a -inf in x's first sample. */
static dw_values make_values(const dw_case *c, uint32_t seed, bool special)
{
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->C * c->R * c->S);
    dw_values v = {doubles(nx),           doubles(nw),
                   doubles((size_t)c->C), doubles(2 * (size_t)c->C),
                   doubles((size_t)c->C), doubles((size_t)c->C)};
    for (size_t i = 0; i < nx; i++)
        v.x[i] = storage == TG_BF16 ? tg_bf16_widen(tg_bf16_narrow(uniform(&seed, -2, 2)))
                                    : uniform(&seed, -2, 2);
    for (size_t i = 0; i < nw; i++)
        v.w[i] = uniform(&seed, -1, 1);
    for (int64_t k = 0; k < c->C; k++) {
        v.b[k] = uniform(&seed, -1, 1);
        v.stats[k] = uniform(&seed, -0.5f, 0.5f);
        v.stats[c->C + k] = uniform(&seed, 0.2f, 2.0f);
        v.gamma[k] = uniform(&seed, 0.5f, 1.5f);
        v.beta[k] = uniform(&seed, -0.5f, 0.5f);
    }
    if (special) { /* channels 1, 2, 3 of sample 0, row 2, column 3 */
        int64_t hw = c->H * c->W, at = 2 * c->W + 3;
        v.x[1 * hw + at] = NAN;
        v.x[2 * hw + at] = INFINITY;
        v.x[3 * hw + at] = -INFINITY;
    }
    return v;
}

static void free_values(dw_values *v)
{
    free(v->x), free(v->w), free(v->b), free(v->stats), free(v->gamma), free(v->beta);
}

static float *floats_of(const double *d, size_t n)
{
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    return f;
}

/* x in nChw16c as stored, the padded lanes a finite value that is no zero. */
static void *blocked(const double *x, int64_t N, int64_t C, int64_t HW)
{
    int64_t blocks = tg_channel_blocks(C);
    size_t n = (size_t)(N * blocks * HW * TG_CHANNEL_BLOCK);
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = 1.5f;
    for (int64_t s = 0; s < N; s++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++)
                f[((s * blocks + c / 16) * HW + p) * 16 + c % 16] = (float)x[(s * C + c) * HW + p];
    if (storage == TG_F32)
        return f;
    uint16_t *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        b[i] = tg_bf16_narrow(f[i]);
    free(f);
    return b;
}

/* The node's reference over doubles: the op's own kernel. */
static void reference(const tg_tensor *node, double *in0, double *in1, double *in2, double *out)
{
    tg_ref_args r = {.node = node, .out = out};
    r.in[0] = in0, r.in[1] = in1, r.in[2] = in2;
    tg_op_get(node->op)->reference(&r);
}

/* What the kernel must give, in double NCHW: the conv's reference, the
 * batch norm on running statistics, the post-op's reference; and *mag,
 * the same conv over |x|, |w|, |b| (times the batch norm's |scale|), which
 * bounds the f32 sums' rounding. */
static void expected(const dw_net *n, const dw_case *c, dw_values *v, double *y, double *mag)
{
    size_t ny = (size_t)tg_numel(n->conv), nx = (size_t)tg_numel(n->x), nw = (size_t)tg_numel(n->w);
    reference(n->conv, v->x, v->w, n->b ? v->b : NULL, y);
    double *ax = doubles(nx), *aw = doubles(nw), *ab = doubles((size_t)c->C);
    for (size_t i = 0; i < nx; i++)
        ax[i] = isfinite(v->x[i]) ? fabs(v->x[i]) : 0;
    for (size_t i = 0; i < nw; i++)
        aw[i] = fabs(v->w[i]);
    for (int64_t k = 0; k < c->C; k++)
        ab[k] = fabs(v->b[k]);
    reference(n->conv, ax, aw, n->b ? ab : NULL, mag);
    int64_t hw = ny / (size_t)(c->N * c->C);
    for (size_t i = 0; n->bn && i < ny; i++) {
        int64_t k = (int64_t)(i / (size_t)hw) % c->C;
        double scale = v->gamma[k] / sqrt(v->stats[c->C + k] + 1e-3);
        y[i] = (y[i] - v->stats[k]) * scale + v->beta[k];
        mag[i] = mag[i] * scale + fabs(v->stats[k] * scale) + fabs(v->beta[k]);
    }
    double *h = doubles(ny);
    if (n->sig) { /* x * hard_sigmoid(x) */
        reference(n->sig, y, NULL, NULL, h);
        for (size_t i = 0; i < ny; i++)
            y[i] *= h[i];
    } else if (n->act) {
        reference(n->act, y, NULL, NULL, h);
        memcpy(y, h, ny * sizeof *y);
    }
    free(h), free(ax), free(aw), free(ab);
}

/* The kernel's plan for n as an inference program's conv between blocked
 * bf16 activations; NULL state where it is not the own kernel. */
static const tg_op_planner *plan(const dw_net *n, int threads, tg_kernel_plan *kp)
{
    tg_plan_opts po = {.n_threads = threads, .compute = TG_BF16, .inference = true};
    for (int k = 0; k < TG_MAX_INPUTS; k++)
        po.in_storage[k] = TG_F32;
    po.in_storage[0] = po.out_storage = storage;
    po.in_blocked[0] = po.out_blocked = true;
    po.fold_norm = n->bn;
    po.post_act = n->act;
    const tg_op_planner *pl = tg_op_planner_get(TG_OP_CONV2D);
    TG_CHECK_OK(pl->plan(n->conv, &po, kp));
    return pl;
}

/* Bad elements of got (nChw16c bf16) against y (NCHW): NaN where y is
 * NaN, the infinity y has, else within bf16 rounding of y plus the f32
 * sums' rounding (and the post-op's slope, at most 1.5, over it); the
 * padded lanes zero. The first bad one is reported. */
static int64_t compare(const dw_case *c, int64_t OH, int64_t OW, const void *got, const double *y,
                       const double *mag, const char *label)
{
    int64_t blocks = tg_channel_blocks(c->C), hw = OH * OW, bad = 0;
    for (int64_t s = 0; s < c->N; s++)
        for (int64_t k = 0; k < blocks * 16; k++)
            for (int64_t p = 0; p < hw; p++) {
                size_t at = (size_t)(((s * blocks + k / 16) * hw + p) * 16 + k % 16);
                double g = storage == TG_BF16 ? tg_bf16_widen(((const uint16_t *)got)[at])
                                              : ((const float *)got)[at];
                bool ok;
                double want = 0, tol = 0;
                if (k >= c->C) {
                    ok = g == 0;
                } else {
                    size_t i = (size_t)((s * c->C + k) * hw + p);
                    want = y[i];
                    tol = ldexp(fabs(want), storage == TG_BF16 ? -8 : -22) + 1.5 * 4e-6 * mag[i] +
                          1e-30;
                    ok = isnan(want) ? isnan(g) : isinf(want) ? g == want : fabs(g - want) <= tol;
                }
                if (!ok && bad++ == 0)
                    tg_test_fail(
                        __FILE__, __LINE__,
                        "%s: sample %lld channel %lld pixel %lld: %.9g, want %.9g (tol %.3g)",
                        label, (long long)s, (long long)k, (long long)p, g, want, tol);
            }
    return bad;
}

static const char *const act_names[N_ACTS] = {"none", "ReLU", "hard swish", "x * hard_sigmoid(x)",
                                              "hard sigmoid"};

/* One case through the planned kernel at `threads` threads against the
 * reference; false where the plan is not the own kernel (no AVX512_BF16). */
static bool run_case(const dw_case *c, int act, bool fold, bool bias, int threads, bool special)
{
    dw_net n = build(c, act, fold, bias);
    tg_kernel_plan kp = {0};
    const tg_op_planner *pl = plan(&n, threads, &kp);
    bool own = strstr(kp.kernel, storage == TG_BF16 ? "own dw_bf16" : "own dw_f32") != NULL;
    /* f32: only at stride 1 on maps 28 wide and more */
    bool f32_shape = c->stride == 1 && n.conv->shape.dim[3] >= 28;
    if (storage == TG_F32 && !f32_shape) {
        if (own)
            tg_test_fail(__FILE__, __LINE__, "f32 at stride %lld, %lld wide: kernel '%s'",
                         (long long)c->stride, (long long)n.conv->shape.dim[3], kp.kernel);
        if (kp.state)
            pl->plan_free(kp.state);
        tg_graph_destroy(n.g);
        return false;
    }
    if (own != tg_bf16_hw())
        tg_test_fail(__FILE__, __LINE__, "AVX512_BF16 %s, kernel '%s'", tg_bf16_hw() ? "on" : "off",
                     kp.kernel);
    if (!own) {
        if (kp.state)
            pl->plan_free(kp.state);
        tg_graph_destroy(n.g);
        return false;
    }
    char label[200];
    snprintf(label, sizeof label,
             "%s: %lldx%lld on %lld channels %lldx%lld stride %lld, %s%s%s, %d threads%s",
             tg_dtype_name(storage), (long long)c->R, (long long)c->S, (long long)c->C,
             (long long)c->H, (long long)c->W, (long long)c->stride, act_names[act],
             fold ? ", batch norm" : "", bias ? ", bias" : "", threads,
             special ? ", NaN and inf" : "");
    dw_values v = make_values(c, 7u + (uint32_t)(c - cases) * 31u + (uint32_t)act, special);
    int64_t OH = n.conv->shape.dim[2], OW = n.conv->shape.dim[3];
    size_t ny = (size_t)tg_numel(n.conv);
    void *xb = blocked(v.x, c->N, c->C, c->H * c->W);
    size_t out_n = (size_t)(c->N * tg_channel_blocks(c->C) * OH * OW * 16);
    size_t es = tg_dtype_size(storage);
    void *out = malloc(out_n * es);
    memset(out, 0xff, out_n * es); /* NaN: an element left unwritten shows */
    float *w = floats_of(v.w, (size_t)tg_numel(n.w)), *b = floats_of(v.b, (size_t)c->C);
    float *stats = floats_of(v.stats, 2 * (size_t)c->C), *gamma = floats_of(v.gamma, (size_t)c->C),
          *beta = floats_of(v.beta, (size_t)c->C);
    /* the reference reads the weights as the kernel does: f32 */
    for (size_t i = 0; i < (size_t)tg_numel(n.w); i++)
        v.w[i] = w[i];
    for (int64_t k = 0; k < c->C; k++)
        v.b[k] = b[k], v.gamma[k] = gamma[k], v.beta[k] = beta[k], v.stats[k] = stats[k],
        v.stats[c->C + k] = stats[c->C + k];
    void *scratch = kp.scratch ? malloc(kp.scratch) : NULL;
    tg_pool *pool = threads > 1 ? tg_pool_create(threads) : NULL;
    tg_kernel_args a = {.node = n.conv,
                        .out = out,
                        .scratch = scratch,
                        .scratch_bytes = kp.scratch,
                        .pool = pool,
                        .plan = kp.state};
    a.in[0] = xb, a.in[1] = w, a.in[2] = bias ? b : NULL;
    a.in[TG_FUSE_IN_STATS] = stats, a.in[TG_FUSE_IN_STATS + 1] = gamma;
    a.in[TG_FUSE_IN_STATS + 2] = beta;
    tg_conv_dnnl_run(kp.state, &a);
    double *y = doubles(ny), *mag = doubles(ny);
    expected(&n, c, &v, y, mag);
    compare(c, OH, OW, out, y, mag, label);
    free(y), free(mag), free(scratch), free(xb), free(out), free(w), free(b), free(stats);
    free(gamma), free(beta);
    tg_pool_destroy(pool);
    free_values(&v);
    pl->plan_free(kp.state);
    tg_graph_destroy(n.g);
    return true;
}

/* Every case with every post-op in turn, with and without bias and a
 * folded batch norm, at 1 and 2 threads. */
static void test_matches_reference(void)
{
    int ran = 0;
    for (int st = 0; st < 2; st++)
        for (size_t i = 0; i < N_CASES; i++)
            for (int threads = 1; threads <= 2; threads++) {
                storage = st ? TG_F32 : TG_BF16;
                int act = (int)(i + (size_t)threads) % N_ACTS;
                bool fold = (i + (size_t)threads) % 2 == 0, bias = i % 3 != 1;
                ran += run_case(&cases[i], act, fold, bias, threads, false);
                ran += run_case(&cases[i], (act + 2) % N_ACTS, !fold, !bias, threads, false);
            }
    storage = TG_BF16;
    if (!ran)
        printf("  (no AVX512_BF16 here: the plan hook leaves the convolutions to oneDNN)\n");
}

/* A NaN and both infinities in the input reach the outputs that read them
 * as in the reference, through each post-op (hard sigmoid of a NaN is 1
 * there: fmin / fmax). */
static void test_nan_and_inf_propagate(void)
{
    for (int st = 0; st < 2; st++)
        for (int act = 0; act < N_ACTS; act++)
            for (int threads = 1; threads <= 2; threads++) {
                storage = st ? TG_F32 : TG_BF16;
                run_case(&cases[act % 2 ? 7 : 8], act, act % 2 == 0, true, threads, true);
            }
    storage = TG_BF16;
}

/* The hook leaves to oneDNN what the kernel does not do: f16 storage, a
 * plain layout, a fused residual add, a training program, a 7x7 map
 * (oneDNN's faster there). */
static void test_falls_back_to_onednn(void)
{
    dw_case c = {1, 24, 12, 12, 3, 3, 1, 1, 1};
    dw_net n = build(&c, ACT_RELU, false, true);
    for (int v = 0; v < 4; v++) { /* f16, plain, a residual add, training */
        tg_plan_opts po = {.n_threads = 1, .compute = TG_BF16, .inference = v != 3};
        po.in_storage[0] = po.out_storage = v == 0 ? TG_F16 : TG_BF16;
        po.in_storage[1] = po.in_storage[2] = TG_F32;
        po.in_blocked[0] = po.out_blocked = v != 1;
        po.post_act = n.act;
        po.post_add = v == 2 ? n.x : NULL;
        tg_kernel_plan kp = {0};
        const tg_op_planner *pl = tg_op_planner_get(TG_OP_CONV2D);
        /* oneDNN may have no kernel for it on an AVX2 machine: no matter here */
        tg_status st = pl->plan(n.conv, &po, &kp);
        if (st == TG_OK && strstr(kp.kernel, "own dw_"))
            tg_test_fail(__FILE__, __LINE__, "variant %d: kernel '%s'", v, kp.kernel);
        if (kp.state)
            pl->plan_free(kp.state);
    }
    tg_graph_destroy(n.g);
    dw_case small = {1, 24, 7, 7, 5, 5, 1, 2, 2};
    dw_net m = build(&small, ACT_NONE, false, false);
    tg_kernel_plan kp = {0};
    const tg_op_planner *pl = plan(&m, 1, &kp);
    if (strstr(kp.kernel, "own dw_"))
        tg_test_fail(__FILE__, __LINE__, "7x7 map: kernel '%s'", kp.kernel);
    if (kp.state)
        pl->plan_free(kp.state);
    tg_graph_destroy(m.g);
}

/* An inference program in 32.bf16 and in f32 (1x1 16 -> 24 + ReLU,
 * depthwise 3x3 + bias + hard swish, 1x1 24 -> 16; the weights stored in
 * bf16 in the first): the depthwise convolution reads and writes nChw16c
 * with the own kernel, and the checker finds every value within tolerance
 * of the reference, at 1 and 2 threads. */
static void test_program_passes_checker(void)
{
    for (int v = 0; v < 4; v++) {
        int threads = 1 + v % 2;
        bool bf16 = v < 2;
        tg_graph *g = tg_graph_create();
        tg_graph_set_training(g, false);
        tg_init u = {TG_INIT_UNIFORM, -0.5, 0.5};
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 16, 10, 28));
        tg_tensor *we = tg_param(g, "we", tg_shape4(24, 16, 1, 1), u);
        tg_tensor *wd = tg_param(g, "wd", tg_shape4(24, 1, 3, 3), u);
        tg_tensor *wp = tg_param(g, "wp", tg_shape4(16, 24, 1, 1), u);
        tg_tensor *bd = tg_param(g, "bd", tg_shape1(24), u);
        tg_tensor *h = tg_relu(g, tg_conv2d(g, x, we, NULL, P(1, 1, 0, 0, 1, 1, 1)));
        tg_tensor *dw = tg_conv2d(g, h, wd, bd, P(1, 1, 1, 1, 1, 1, 24));
        h = tg_hard_swish(g, dw);
        tg_tensor *y = tg_conv2d(g, h, wp, NULL, P(1, 1, 0, 0, 1, 1, 1));
        tg_tensor_mark_output(y);
        TG_CHECK_OK(tg_graph_status(g));
        tg_options *o = tg_options_create();
        tg_options_set_int(o, "threadsPerDevice", threads);
        if (bf16)
            tg_options_set(o, "precision", "32.bf16");
        tg_session *s = NULL;
        TG_CHECK_OK(tg_session_create(g, o, &s));
        tg_options_destroy(o);
        const char *k = s ? tg_session_program(s)->plans[dw->id].kernel : "";
        if ((strstr(k, bf16 ? "own dw_bf16" : "own dw_f32") != NULL) != tg_bf16_hw())
            tg_test_fail(__FILE__, __LINE__, "%d threads: depthwise kernel '%s'", threads, k);
        float xs[16 * 10 * 28], out[16 * 10 * 28];
        for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
            xs[i] = (float)(((int)i * 29) % 23) / 11.0f - 1.0f;
        TG_CHECK_OK(tg_session_verify_next_run(s));
        TG_CHECK_OK(tg_session_write(s, x, xs, sizeof xs));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_session_read(s, y, out, sizeof out));
        const tg_verify_report *r = s ? tg_session_verify_report(s) : NULL;
        int ok = 0;
        for (int i = 0; r && i < tg_verify_rows(r); i++) {
            const tg_verify_row *row = tg_verify_row_at(r, i);
            ok += row->verdict == TG_VERIFY_OK;
            if (row->verdict != TG_VERIFY_OK)
                tg_test_fail(__FILE__, __LINE__, "%d threads: %s not ok: %s", threads, row->name,
                             row->note);
        }
        TG_CHECK(ok >= 3);
        tg_session_destroy(s);
        tg_graph_destroy(g);
    }
}

int main(void)
{
    TG_RUN(test_matches_reference);
    TG_RUN(test_nan_and_inf_propagate);
    TG_RUN(test_falls_back_to_onednn);
    TG_RUN(test_program_passes_checker);
    return tg_test_finish();
}
