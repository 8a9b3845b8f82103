/* tests/backend/cpu/test_conv_pw_bf16.c - the own bf16 1x1 convolution
 * (backend/cpu/conv_pw_bf16.c) against a double reference of the test's
 * own, in nChw16c: input channels 16..160 and padded ones (24, 40: padded
 * lanes hold finite junk that must not count), output channels padded
 * (17, 24, 72), pixel counts that no tile divides, with and without bias,
 * batch norm folded, residual added, ReLU / hard swish (also as x *
 * hard_sigmoid(x)) / hard sigmoid, NaN
 * and infinities where the reference has them, at 1 and 2 threads, and
 * its packed weights kept per weights version and refreshed on a new one.
 * On a CPU without AVX-512 BF16 (or TILEGRAPH_ISA below it) the plan must
 * not choose it.
 * TG_TEST_LABELS: threads isa */
#include "backend/backend.h"
#include "tg_fuse_test.h"
#include "tg_test.h"

#include "backend/cpu/conv_pw_bf16.h"
#include "core/bf16.h"
#include "core/process.h"
#include "ops/conv.h"
#include "compile/program.h"
#include "runtime/session_internal.h"
#include "tilegraph/graph.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ACT_SWISH_MUL: hard swish as the graph of an older export writes it,
 * x * hard_sigmoid(x) (compile/fuse.c fuses the Mul) */
enum { ACT_NONE, ACT_RELU, ACT_HSWISH, ACT_HSIGMOID, ACT_SWISH_MUL, N_ACTS };

typedef struct pw_case {
    int64_t n, c, k, h, w;
    bool bias, specials; /* specials: NaN and infinities in x */
} pw_case;

static const pw_case cases[] = {
    {2, 16, 64, 5, 7, true, false},   /* mobilenet's [64, 16], 35 pixels */
    {1, 24, 72, 9, 9, false, true},   /* [72, 24]: both padded */
    {3, 40, 24, 4, 5, true, false},   /* [24, 40]... input padded to 48 */
    {1, 64, 40, 13, 3, false, false}, /* the most channels, 39 pixels */
    {2, 32, 17, 1, 1, true, true},    /* one pixel, one output lane in a block */
    {1, 48, 240, 3, 3, false, false}, /* 15 output blocks: groups of 4, 4, 4, 3 */
    {7, 40, 120, 1, 1, true, true},   /* squeeze-excite: 1x1 maps, the images as pixels */
    {2, 160, 56, 3, 5, false, false}, /* many input channels */
};

typedef struct operands {
    const pw_case *cs;
    int64_t cb, kb, P;
    uint16_t *x, *res, *y;               /* blocked bf16 */
    float *w, *b, *stats, *gamma, *beta; /* f32 */
} operands;

static float uniform(uint32_t *s, float lo, float hi)
{
    *s = *s * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(*s >> 8) / 16777216.0f;
}

/* Weights of magnitude 0.1..1 (none that bf16 would flush), x in -2..2
 * with junk 7.5 in the padded lanes, a residual, statistics. */
static void fill(operands *o, const pw_case *cs, uint32_t seed)
{
    o->cs = cs;
    o->cb = tg_channel_blocks(cs->c), o->kb = tg_channel_blocks(cs->k), o->P = cs->h * cs->w;
    size_t xn = (size_t)(cs->n * o->cb * o->P * 16), yn = (size_t)(cs->n * o->kb * o->P * 16);
    o->x = malloc(xn * 2), o->res = malloc(yn * 2), o->y = malloc(yn * 2);
    o->w = malloc((size_t)(cs->k * cs->c) * 4), o->b = malloc((size_t)cs->k * 4);
    o->stats = malloc((size_t)cs->k * 8), o->gamma = malloc((size_t)cs->k * 4);
    o->beta = malloc((size_t)cs->k * 4);
    for (size_t i = 0; i < xn; i++) {
        bool pad =
            (int64_t)(i / (size_t)(o->P * 16) % (size_t)o->cb) * 16 + (int64_t)(i % 16) >= cs->c;
        o->x[i] = tg_bf16_narrow(pad ? 7.5f : uniform(&seed, -2.0f, 2.0f));
    }
    for (size_t i = 0; i < yn; i++)
        o->res[i] = tg_bf16_narrow(uniform(&seed, -1.0f, 1.0f));
    for (int64_t i = 0; i < cs->k * cs->c; i++)
        o->w[i] = uniform(&seed, 0.1f, 1.0f) * (uniform(&seed, 0, 1) < 0.5f ? -1.0f : 1.0f);
    for (int64_t k = 0; k < cs->k; k++) {
        o->b[k] = uniform(&seed, -1.0f, 1.0f);
        o->stats[k] = uniform(&seed, -0.5f, 0.5f);
        o->stats[cs->k + k] = uniform(&seed, 0.2f, 2.0f);
        o->gamma[k] = uniform(&seed, 0.5f, 1.5f);
        o->beta[k] = uniform(&seed, -0.5f, 0.5f);
    }
    /* NaN, +inf, -inf and +inf beside it (inf - inf) in real channels of
     * the first block, at pixels 3, 5, 6, 6 counted over the batch */
    static const int at[4] = {3, 5, 6, 6}, lane[4] = {1, 2, 0, 3};
    static const uint16_t bits[4] = {0x7fc0, 0x7f80, 0xff80, 0x7f80};
    for (int i = 0; cs->specials && i < 4; i++) {
        int64_t q = at[i] % (cs->n * o->P), n = q / o->P, p = q % o->P;
        o->x[(n * o->cb * o->P + p) * 16 + lane[i]] = bits[i];
    }
}

static void release(operands *o)
{
    free(o->x), free(o->res), free(o->y), free(o->w), free(o->b);
    free(o->stats), free(o->gamma), free(o->beta);
}

static double act_ref(int act, double v)
{
    switch (act) {
    case ACT_RELU:
        return v < 0 ? 0 : v;
    case ACT_HSWISH:
    case ACT_SWISH_MUL:
        return v * fmax(0, fmin(1, v / 6 + 0.5));
    case ACT_HSIGMOID:
        return fmax(0, fmin(1, 0.2 * v + 0.5));
    default:
        return v;
    }
}

/* Counts outputs outside bf16's tolerance of the double reference: 2^-7
 * of the sum of the products' magnitudes (weights and x in bf16, the
 * result rounded to bf16), NaN and infinities exactly; padded output
 * lanes must be zero (the next convolution's zero weights times a NaN
 * there would be NaN). */
/* mismatches() reports none: the caller expects some */
static bool expect_off;

static int mismatches(const operands *o, bool fold, bool residual, int act, double eps)
{
    const pw_case *cs = o->cs;
    int bad = 0;
    for (int64_t n = 0; n < cs->n; n++)
        for (int64_t k = 0; k < o->kb * 16; k++)
            for (int64_t p = 0; p < o->P; p++) {
                size_t yo = (size_t)(((n * o->kb + k / 16) * o->P + p) * 16 + k % 16);
                float got = tg_bf16_widen(o->y[yo]);
                if (k >= cs->k) {
                    bad += got != 0.0f;
                    continue;
                }
                double scale = 1, shift = cs->bias ? o->b[k] : 0;
                if (fold) {
                    scale = o->gamma[k] / sqrt((double)o->stats[cs->k + k] + eps);
                    shift = (shift - o->stats[k]) * scale + o->beta[k];
                }
                double sum = shift, mag = fabs(shift);
                for (int64_t c = 0; c < cs->c; c++) {
                    size_t xo = (size_t)(((n * o->cb + c / 16) * o->P + p) * 16 + c % 16);
                    double v = (double)o->w[k * cs->c + c] * scale * tg_bf16_widen(o->x[xo]);
                    sum += v, mag += fabs(v);
                }
                if (residual) {
                    double r = tg_bf16_widen(o->res[yo]);
                    sum += r, mag += fabs(r);
                }
                double want = act_ref(act, sum);
                bool ok = isnan(want)   ? isnan(got)
                          : isinf(want) ? got == want
                                        : got == want || fabs(got - want) <= ldexp(mag, -7) + 1e-6;
                if (!ok && bad++ < 3 && !expect_off)
                    tg_test_fail(__FILE__, __LINE__, "n %lld k %lld p %lld: %g, reference %g",
                                 (long long)n, (long long)k, (long long)p, (double)got, want);
            }
    return bad;
}

typedef struct graph_nodes {
    tg_graph *g;
    tg_tensor *conv, *norm, *act[N_ACTS], *add;
} graph_nodes;

/* The nodes whose parameters the plan reads: the convolution, a batch
 * norm after it (its eps), each activation, an add. */
static graph_nodes build(const pw_case *cs)
{
    graph_nodes gn = {.g = tg_graph_create()};
    tg_graph *g = gn.g;
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(cs->n, cs->c, cs->h, cs->w));
    tg_init u = {TG_INIT_FAN_IN_UNIFORM, 1, 0};
    tg_tensor *w = tg_param(g, "w", tg_shape4(cs->k, cs->c, 1, 1), u);
    tg_tensor *b = cs->bias ? tg_param(g, "b", tg_shape1(cs->k), u) : NULL;
    tg_tensor *st = tg_state(g, "st", tg_shape2(2, cs->k), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    tg_conv2d_params p = {1, 1, 0, 0, 1, 1, 1};
    gn.conv = tg_conv2d(g, x, w, b, p);
    gn.norm = tg_batch_norm(g, gn.conv, NULL, NULL, st, 1e-3f);
    gn.act[ACT_RELU] = tg_relu(g, gn.conv);
    gn.act[ACT_HSWISH] = tg_hard_swish(g, gn.conv);
    gn.act[ACT_HSIGMOID] = tg_hard_sigmoid(g, gn.conv, 0.2f, 0.5f);
    gn.act[ACT_SWISH_MUL] = tg_mul(g, gn.conv, tg_hard_sigmoid(g, gn.conv, 1.0f / 6.0f, 0.5f));
    gn.add = tg_add(g, gn.conv, gn.conv);
    TG_CHECK_OK(tg_graph_status(g));
    return gn;
}

/* node planned with the options an inference program in 32.bf16 gives a
 * blocked 1x1 convolution; *ours: the own kernel was chosen. */
static tg_kernel_plan plan_pw(const graph_nodes *gn, bool fold, bool residual, int act, int threads,
                              bool *ours)
{
    tg_plan_opts po = {.n_threads = threads, .compute = TG_BF16, .inference = true};
    po.in_storage[0] = po.out_storage = TG_BF16;
    po.in_storage[1] = po.in_storage[2] = TG_F32;
    po.in_blocked[0] = po.out_blocked = true;
    po.fold_norm = fold ? gn->norm : NULL;
    po.post_act = act ? gn->act[act] : NULL;
    po.post_add = residual ? gn->add : NULL;
    tg_kernel_plan kp = {0};
    TG_CHECK_OK(tg_op_planner_get(TG_OP_CONV2D)->plan(gn->conv, &po, &kp));
    *ours = kp.state && strncmp(kp.kernel, "own 1x1 (bf16)", 14) == 0;
    return kp;
}

/* One run of the planned kernel with weights version `version`. */
static void exec_pw(const graph_nodes *gn, const tg_kernel_plan *kp, operands *o, int threads,
                    uint64_t version)
{
    size_t yn = (size_t)(o->cs->n * o->kb * o->P * 16);
    memset(o->y, 0xff, yn * 2); /* NaN: an output left unwritten shows */
    void *scratch = kp->scratch ? malloc(kp->scratch) : NULL;
    tg_pool *pool = threads > 1 ? tg_pool_create(threads) : NULL;
    tg_kernel_args a = {.node = gn->conv,
                        .out = o->y,
                        .scratch = scratch,
                        .scratch_bytes = kp->scratch,
                        .pool = pool,
                        .plan = kp->state,
                        .weights_version = version,
                        .blocked = true};
    a.in[0] = o->x, a.in[1] = o->w, a.in[2] = o->cs->bias ? o->b : NULL;
    a.in[TG_FUSE_IN_STATS] = o->stats;
    a.in[TG_FUSE_IN_STATS + 1] = o->gamma;
    a.in[TG_FUSE_IN_STATS + 2] = o->beta;
    a.in[TG_FUSE_IN_RESIDUAL] = o->res;
    tg_conv_dnnl_run(kp->state, &a);
    tg_pool_destroy(pool);
    free(scratch);
}

/* Plans, runs once without a weights version (packed into scratch), frees;
 * false where the own kernel was not chosen (nothing run). */
static bool run_pw(const graph_nodes *gn, operands *o, bool fold, bool residual, int act,
                   int threads)
{
    bool ours;
    tg_kernel_plan kp = plan_pw(gn, fold, residual, act, threads, &ours);
    if (ours)
        exec_pw(gn, &kp, o, threads, 0);
    if (kp.state)
        tg_op_planner_get(TG_OP_CONV2D)->plan_free(kp.state);
    return ours;
}

/* Every case, post-op and thread count against the reference. */
static void test_matches_reference(void)
{
    tg_conv_pw_set_max_channels(256); /* case 7's 160 channels on 15 pixels */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const pw_case *cs = &cases[i];
        graph_nodes gn = build(cs);
        operands o;
        fill(&o, cs, 17u + (uint32_t)i);
        for (int v = 0; v < 2 * 2 * N_ACTS * 2; v++) {
            bool fold = v & 1, residual = v & 2;
            int act = v / 4 % N_ACTS, threads = 1 + v / (4 * N_ACTS);
            if (!run_pw(&gn, &o, fold, residual, act, threads)) {
                if (tg_bf16_hw())
                    tg_test_fail(__FILE__, __LINE__, "case %zu: the own 1x1 kernel not chosen", i);
                break;
            }
            int bad = mismatches(&o, fold, residual, act, 1e-3f);
            if (bad)
                tg_test_fail(__FILE__, __LINE__,
                             "case %zu (C %lld, K %lld), fold %d, residual %d, act %d, %d threads: "
                             "%d outputs off",
                             i, (long long)cs->c, (long long)cs->k, fold, residual, act, threads,
                             bad);
        }
        release(&o);
        tg_graph_destroy(gn.g);
    }
    tg_conv_pw_set_max_channels(0);
}

/* The packed weights (batch norm folded) are kept for a weights version:
 * weights the host changed without a new version are not seen (the
 * kept ones serve), and a new version packs them again. */
static void test_weights_follow_the_version(void)
{
    const pw_case *cs = &cases[0];
    graph_nodes gn = build(cs);
    operands o;
    fill(&o, cs, 5u);
    bool ours;
    tg_kernel_plan kp = plan_pw(&gn, true, false, ACT_NONE, 2, &ours);
    if (ours) {
        uint64_t version = tg_process_next_weights_version();
        exec_pw(&gn, &kp, &o, 2, version);
        TG_CHECK(mismatches(&o, true, false, ACT_NONE, 1e-3f) == 0);
        for (int64_t i = 0; i < cs->k * cs->c; i++)
            o.w[i] = -o.w[i];
        exec_pw(&gn, &kp, &o, 2, version); /* the kept weights: the old result */
        expect_off = true;
        TG_CHECK(mismatches(&o, true, false, ACT_NONE, 1e-3f) > 0);
        expect_off = false;
        exec_pw(&gn, &kp, &o, 2, tg_process_next_weights_version());
        TG_CHECK(mismatches(&o, true, false, ACT_NONE, 1e-3f) == 0);
    }
    if (kp.state)
        tg_op_planner_get(TG_OP_CONV2D)->plan_free(kp.state);
    release(&o);
    tg_graph_destroy(gn.g);
}

/* Not where it cannot run or where the shape is not its own: 3x3,
 * stride 2, too many input channels, f32 storage, training. */
static void test_chosen_only_where_it_applies(void)
{
    const pw_case *cs = &cases[0];
    graph_nodes gn = build(cs);
    tg_plan_opts po = {.n_threads = 1, .compute = TG_BF16, .inference = true};
    po.in_storage[0] = po.out_storage = TG_BF16;
    po.in_storage[1] = TG_F32;
    po.in_blocked[0] = po.out_blocked = true;
    tg_conv_pw *pw = NULL;
    tg_kernel_plan kp = {0};
    TG_CHECK_OK(tg_conv_pw_plan(gn.conv, &po, &kp, &pw));
    TG_CHECK((pw != NULL) == tg_bf16_hw());
    tg_conv_pw_free(pw);
    tg_plan_opts other[4] = {po, po, po, po};
    other[0].inference = false;
    other[1].out_storage = TG_F32;
    other[2].in_blocked[0] = false;
    other[3].compute = TG_F32;
    for (int i = 0; i < 4; i++) {
        tg_kernel_plan k2 = {0};
        TG_CHECK_OK(tg_conv_pw_plan(gn.conv, &other[i], &k2, &pw));
        if (pw)
            tg_test_fail(__FILE__, __LINE__, "variant %d chose the own 1x1 kernel", i);
        tg_conv_pw_free(pw);
    }
    tg_conv_pw_set_max_channels(8); /* 16 channels are then too many */
    TG_CHECK_OK(tg_conv_pw_plan(gn.conv, &po, &kp, &pw));
    TG_CHECK(pw == NULL);
    tg_conv_pw_set_max_channels(0);
    tg_graph_destroy(gn.g);
}

/* Through a session: an inference program in 32.bf16 between blocked
 * convolutions (3x3 [24] -> 1x1 [72, 24] + bias, ReLU -> 1x1 [24, 72] +
 * bias, the first output added -> 3x3; bf16 programs fold no batch norm,
 * an ONNX file exported in eval mode has them in the bias), at batch 3
 * (7x9 maps) on 1 and 2 threads: the 1x1 ones run the own kernel where the CPU has AVX-512
 * BF16 (the residual add fused into the second), and the checker finds
 * every value within tolerance of the reference. */
static void session_run(int threads)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(3, 24, 7, 9));
    tg_init u = {TG_INIT_FAN_IN_UNIFORM, 24, 0};
    tg_tensor *w0 = tg_param(g, "w0", tg_shape4(24, 24, 3, 3), u);
    tg_tensor *we = tg_param(g, "we", tg_shape4(72, 24, 1, 1), u);
    tg_tensor *wp = tg_param(g, "wp", tg_shape4(24, 72, 1, 1), u);
    tg_tensor *w3 = tg_param(g, "w3", tg_shape4(16, 24, 3, 3), u);
    tg_tensor *be = tg_param(g, "be", tg_shape1(72), u);
    tg_tensor *bp = tg_param(g, "bp", tg_shape1(24), u);
    tg_conv2d_params p3 = {1, 1, 1, 1, 1, 1, 1}, p1 = {1, 1, 0, 0, 1, 1, 1};
    tg_tensor *c0 = tg_conv2d(g, x, w0, NULL, p3);
    tg_tensor *ce = tg_conv2d(g, c0, we, be, p1);
    tg_tensor *cp = tg_conv2d(g, tg_relu(g, ce), wp, bp, p1);
    tg_tensor *h = tg_add(g, cp, c0);
    tg_tensor *y = tg_conv2d(g, h, w3, NULL, p3);
    tg_tensor_mark_output(y);
    TG_CHECK_OK(tg_graph_status(g));
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set(o, "precision", "32.bf16");
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    tg_options_destroy(o);
    const tg_tensor *convs[2] = {ce, cp};
    for (int i = 0; s && i < 2; i++) {
        const char *k = tg_session_program(s)->plans[convs[i]->id].kernel;
        bool ours = strncmp(k, "own 1x1 (bf16)", 14) == 0;
        if (ours != tg_bf16_hw() || (ours && i == 1 && !strstr(k, "residual add")))
            tg_test_fail(__FILE__, __LINE__, "%d threads, 1x1 conv %d: kernel '%s'", threads, i, k);
    }
    float xs[3 * 24 * 7 * 9];
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
        xs[i] = (float)(((int)i * 29) % 23) / 11.0f - 1.0f;
    TG_CHECK_OK(tg_session_write(s, x, xs, sizeof xs));
    TG_CHECK_OK(tg_session_verify_next_run(s));
    TG_CHECK_OK(tg_session_run(s));
    char label[32];
    snprintf(label, sizeof label, "%d threads", threads);
    tg_fuse_test_rows(s, "fused", false, label); /* every fused row ok, none beyond */
    tg_session_destroy(s);
    tg_graph_destroy(g);
}

static void test_session_checks_against_the_reference(void)
{
    session_run(1);
    session_run(2);
}

int main(void)
{
    TG_RUN(test_matches_reference);
    TG_RUN(test_weights_follow_the_version);
    TG_RUN(test_chosen_only_where_it_applies);
    TG_RUN(test_session_checks_against_the_reference);
    return tg_test_finish();
}
