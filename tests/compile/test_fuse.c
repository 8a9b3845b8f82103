/* tests/compile/test_fuse.c - an inference program's convolutions compute
 * the batch norm and the activation after them (compile/fuse.c): random
 * chains of conv (groups, strides, padding, bias or not) + batch norm or
 * not (gamma and beta or not, random running statistics) + ReLU, hard
 * swish, hard sigmoid, x * hard_sigmoid(x) or nothing give what the unfused
 * program gives within f32 rounding (bf16 models: within bf16's, no norm
 * folded), at 1 and 2 threads; `check` compares every fused value with the
 * chained reference kernels and finds a fault put into one; a view of a
 * fused value reads it; a graph whose convolution is read elsewhere, or a
 * training program, fuses nothing; the folded weights follow the host's
 * writes; NaN and infinities through a fused ReLU as through the unfused.
 * The residual add is fused where oneDNN takes it as a post-op on these
 * operands (AVX-512; not its AVX2 kernels: TILEGRAPH_ISA=avx2).
 * TG_TEST_LABELS: threads isa */
#include "tg_fuse_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/isa.h"
#include "core/process.h"
#include "core/rng.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "runtime/session_internal.h"
#include "runtime/verify.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define MAX_LAYERS 3

typedef struct chain {
    tg_graph *g;
    tg_tensor *x, *y, *conv0;
    tg_tensor *stats[MAX_LAYERS];
    int n_layers;
    int64_t out_numel;
} chain;

static int below(tg_rng *r, int n)
{
    return (int)tg_rng_below(r, (uint64_t)n);
}

/* ReLU, hard swish, hard sigmoid (PyTorch's constants, then others), hard
 * swish as x * hard_sigmoid(x) (either order), x * another hard sigmoid,
 * or none. */
static tg_tensor *activation(tg_graph *g, tg_tensor *h, int which)
{
    switch (which) {
    case 0:
        return tg_relu(g, h);
    case 1:
        return tg_hard_swish(g, h);
    case 2:
        return tg_hard_sigmoid(g, h, 1.0f / 6.0f, 0.5f);
    case 3:
        return tg_hard_sigmoid(g, h, 0.3f, 0.4f);
    case 4: /* hard swish as PyTorch exports it at opset 13 */
        return tg_mul(g, h, tg_hard_sigmoid(g, h, 1.0f / 6.0f, 0.5f));
    case 5:
        return tg_mul(g, tg_hard_sigmoid(g, h, 1.0f / 6.0f, 0.5f), h);
    case 6: /* not hard swish: not fused */
        return tg_mul(g, h, tg_hard_sigmoid(g, h, 0.2f, 0.5f));
    default:
        return h;
    }
}

/* 1 to 3 layers of conv (+ BN) (+ ReLU, hard swish or hard sigmoid),
 * shapes drawn from r. */
static chain build(tg_rng *r, bool training, bool norms)
{
    chain c = {.g = tg_graph_create()};
    tg_graph_set_training(c.g, training);
    static const int widths[] = {3, 8, 16, 24, 32};
    int C = widths[below(r, 5)], H = 5 + below(r, 8), W = 5 + below(r, 8);
    c.x = tg_input(c.g, "x", TG_F32, tg_shape4(1 + below(r, 3), C, H, W));
    tg_tensor *h = c.x;
    c.n_layers = 1 + below(r, MAX_LAYERS);
    for (int l = 0; l < c.n_layers; l++) {
        int K = widths[1 + below(r, 4)], R = below(r, 2) ? 3 : 1, groups = 1;
        if (C % 2 == 0 && K % 2 == 0 && below(r, 3) == 0)
            groups = 2;
        tg_conv2d_params p = {.stride_h = 1 + below(r, 2),
                              .stride_w = 1 + below(r, 2),
                              .pad_h = R / 2,
                              .pad_w = R / 2,
                              .dilation_h = 1,
                              .dilation_w = 1,
                              .groups = groups};
        char name[32];
        snprintf(name, sizeof name, "w%d", l);
        tg_tensor *w = tg_param(c.g, name, tg_shape4(K, C / groups, R, R),
                                (tg_init){TG_INIT_FAN_IN_UNIFORM, C / groups * R * R, 0});
        tg_tensor *b = NULL;
        if (below(r, 2)) {
            snprintf(name, sizeof name, "b%d", l);
            b = tg_param(c.g, name, tg_shape1(K), (tg_init){TG_INIT_FAN_IN_UNIFORM, 8, 0});
        }
        h = tg_conv2d(c.g, h, w, b, p);
        if (l == 0)
            c.conv0 = h;
        tg_tensor *gamma = NULL, *beta = NULL;
        c.stats[l] = NULL;
        if (below(r, 4) == 0 || !norms) { /* no norm (an ONNX file's, folded on export) */
            h = activation(c.g, h, below(r, 6));
            C = K;
            continue;
        }
        if (below(r, 4)) {
            snprintf(name, sizeof name, "gamma%d", l);
            gamma = tg_param(c.g, name, tg_shape1(K), (tg_init){TG_INIT_FAN_IN_UNIFORM, 1, 0});
        }
        if (below(r, 4)) {
            snprintf(name, sizeof name, "beta%d", l);
            beta = tg_param(c.g, name, tg_shape1(K), (tg_init){TG_INIT_FAN_IN_UNIFORM, 1, 0});
        }
        snprintf(name, sizeof name, "stats%d", l);
        c.stats[l] = tg_state(c.g, name, tg_shape2(2, K), (tg_init){TG_INIT_NORM_STATS, 0, 0});
        h = tg_batch_norm(c.g, h, gamma, beta, c.stats[l], 1e-5f);
        if (below(r, 3))
            h = activation(c.g, h, below(r, 8));
        C = K;
    }
    c.y = h;
    TG_CHECK_OK(tg_graph_status(c.g));
    if (!h)
        printf("%s\n", tg_graph_error(c.g));
    c.out_numel = h ? tg_numel(h) : 0;
    tg_tensor_mark_output(h);
    return c;
}

static tg_session *open_with(chain *c, int threads, bool fuse, const char *precision,
                             const char *exe)
{
    return tg_fuse_test_open_with(c->g, threads, fuse, precision, exe);
}

static tg_session *open_session(chain *c, int threads, bool fuse)
{
    return open_with(c, threads, fuse, NULL, NULL);
}

/* Running statistics far from (0, 1) so that the fold matters, the same
 * in every session; then x, then a run; y into out. */
static void run(tg_session *s, const chain *c, uint64_t seed, float *out)
{
    tg_rng r;
    tg_rng_seed(&r, seed);
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->stats[l])
            continue;
        int64_t K = tg_tensor_shape(c->stats[l]).dim[1];
        float st[2 * 64];
        for (int64_t k = 0; k < K; k++) {
            st[k] = (float)(tg_rng_uniform(&r) - 0.5);
            st[K + k] = (float)(0.05 + 2 * tg_rng_uniform(&r));
        }
        TG_CHECK_OK(tg_session_write(s, c->stats[l], st, (size_t)(2 * K) * sizeof(float)));
    }
    tg_fuse_test_run_x(s, &r, c->x, c->y, out);
}

/* Fused chains that end in x * hard_sigmoid(x). */
static int fused_swish_muls(tg_session *s)
{
    const tg_program *p = tg_session_program(s);
    int n = 0;
    for (int i = 0; p->fused_tail && i < p->graph->n_nodes; i++)
        n += p->fused_tail[i] >= 0 && p->graph->nodes[p->fused_tail[i]]->op == TG_OP_MUL;
    return n;
}

/* The checker's rows on s's next run: fused rows checked, none beyond
 * (or, with a fault, the fused row beyond). */
static void check_rows(tg_session *s, const chain *c, bool fault, const char *label)
{
    float *out = tg_malloc((size_t)c->out_numel * sizeof(float));
    TG_CHECK_OK(tg_session_verify_next_run(s));
    tg_verify_test_fault_node = fault ? tg_tensor_id(c->conv0) : -1;
    tg_verify_test_fault_from = 0;
    run(s, c, 7, out);
    tg_verify_test_fault_node = -1;
    tg_fuse_test_rows(s, "fused", fault, label);
    tg_free(out);
}

/* Random chains (with norms or not) in a precision, each run fused and
 * unfused: the difference within `bound`, every fused row checked; faults
 * put into the first `faults` chains are found. Totals into *fused and
 * *muls; the worst difference is returned. */
typedef struct chains_run {
    uint64_t seed;
    int graphs, faults;
    bool norms;
    const char *precision, *what;
    double bound;
} chains_run;

static double run_chains(const chains_run *cr, int *fused, int *muls)
{
    tg_rng r;
    tg_rng_seed(&r, cr->seed);
    double worst = 0;
    for (int k = 0; k < cr->graphs; k++) {
        chain c = build(&r, false, cr->norms);
        int threads = 1 + k % 2;
        tg_session *f = open_with(&c, threads, true, cr->precision, NULL);
        tg_session *u = open_with(&c, threads, false, cr->precision, NULL);
        float *yf = tg_malloc((size_t)c.out_numel * sizeof(float));
        float *yu = tg_malloc((size_t)c.out_numel * sizeof(float));
        run(f, &c, 1 + (uint64_t)k, yf);
        run(u, &c, 1 + (uint64_t)k, yu);
        TG_CHECK(tg_fuse_test_chains(u) == 0);
        *fused += tg_fuse_test_chains(f);
        *muls += fused_swish_muls(f);
        double d = tg_fuse_test_difference(yf, yu, c.out_numel);
        worst = fmax(worst, d);
        char label[64];
        snprintf(label, sizeof label, "%s %d (%d threads)", cr->what, k, threads);
        if (!(d <= cr->bound))
            tg_test_fail(__FILE__, __LINE__, "%s: fused %.3g from unfused", label, d);
        check_rows(f, &c, false, label);
        if (k < cr->faults)
            check_rows(f, &c, true, label);
        tg_free(yf), tg_free(yu);
        tg_session_destroy(f), tg_session_destroy(u);
        tg_graph_destroy(c.g);
    }
    return worst;
}

static void test_random_chains_match_unfused(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    int fused = 0, muls = 0;
    chains_run cr = {42, 24, 4, true, NULL, "random chain", 2e-6};
    double worst = run_chains(&cr, &fused, &muls);
    printf("  %d random chains, %d fused convolutions (%d ending in x * hard_sigmoid(x)), worst "
           "difference from unfused %.3g\n",
           cr.graphs, fused, muls, worst);
    TG_CHECK(fused >= cr.graphs); /* every chain's first conv at least */
    TG_CHECK(muls > 0);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* A bf16 model (precision 32.bf16) fuses the activations (a fold would
 * need f32 weights): the fused value is rounded to bf16 once where the
 * unfused chain rounded twice, so they agree within bf16's rounding, and
 * the checker finds every fused row within its bf16 tolerance. */
static void test_bf16_chains_fuse_activations(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    int fused = 0, muls = 0;
    chains_run cr = {77, 12, 0, false, "32.bf16", "bf16 chain", 3e-2};
    double worst = run_chains(&cr, &fused, &muls);
    printf("  %d bf16 chains, %d fused convolutions, worst difference from unfused %.3g\n",
           cr.graphs, fused, worst);
    TG_CHECK(fused > 0);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* Writing the statistics again (a checkpoint, another training session's
 * weights) folds them again: the next run is a fresh session's. */
static void test_fold_follows_writes(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_rng r;
    tg_rng_seed(&r, 5);
    chain c = build(&r, false, true);
    tg_session *s = open_session(&c, 1, true);
    float *a = tg_malloc((size_t)c.out_numel * sizeof(float));
    float *b = tg_malloc((size_t)c.out_numel * sizeof(float));
    run(s, &c, 1, a);
    run(s, &c, 2, a); /* other statistics written, same session */
    tg_session *f = open_session(&c, 1, true);
    run(f, &c, 2, b);
    TG_CHECK(memcmp(a, b, (size_t)c.out_numel * sizeof(float)) == 0);
    tg_free(a), tg_free(b);
    tg_session_destroy(f), tg_session_destroy(s);
    tg_graph_destroy(c.g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* c's fused and unfused programs on one thread, its 6 outputs within 2e-6
 * of each other and every fused value within tolerance by `check`
 * (labelled what); returns the fused program's chains. */
static int fused_matches_unfused(chain *c, const char *what)
{
    TG_CHECK(c->out_numel == 6);
    if (c->out_numel != 6)
        return -1;
    tg_session *f = open_session(c, 1, true), *u = open_session(c, 1, false);
    float yf[6], yu[6];
    run(f, c, 3, yf);
    run(u, c, 3, yu);
    int chains = tg_fuse_test_chains(f);
    if (!(tg_fuse_test_difference(yf, yu, 6) <= 2e-6))
        tg_test_fail(__FILE__, __LINE__, "%s: fused %.3g from unfused", what,
                     tg_fuse_test_difference(yf, yu, 6));
    check_rows(f, c, false, what);
    tg_session_destroy(f), tg_session_destroy(u);
    return chains;
}

/* A view of a fused chain's last value (a flatten before a linear layer,
 * as every classifier has) reads what the convolution computed: the view
 * was given the fused node's buffer before fusion took it away. With and
 * without a batch norm; fused and unfused agree, and `check` agrees. */
static void test_view_of_fused_value(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (int with_norm = 0; with_norm < 2; with_norm++) {
        tg_graph *g = tg_graph_create();
        tg_graph_set_training(g, false);
        chain c = {.g = g, .n_layers = 1};
        c.x = tg_input(g, "x", TG_F32, tg_shape4(2, 4, 6, 6));
        tg_tensor *w =
            tg_param(g, "w", tg_shape4(32, 4, 1, 1), (tg_init){TG_INIT_FAN_IN_UNIFORM, 4, 0});
        tg_tensor *b = tg_param(g, "b", tg_shape1(32), (tg_init){TG_INIT_FAN_IN_UNIFORM, 4, 0});
        tg_tensor *h = c.conv0 = tg_conv2d(g, c.x, w, b, (tg_conv2d_params){1, 1, 0, 0, 1, 1, 1});
        if (with_norm) {
            c.stats[0] =
                tg_state(g, "stats", tg_shape2(2, 32), (tg_init){TG_INIT_NORM_STATS, 0, 0});
            h = tg_batch_norm(g, h, NULL, NULL, c.stats[0], 1e-5f);
        }
        h = tg_flatten(g, tg_relu(g, h), 1);
        tg_tensor *wl =
            tg_param(g, "wl", tg_shape2(3, 32 * 36), (tg_init){TG_INIT_FAN_IN_UNIFORM, 1152, 0});
        c.y = tg_linear(g, h, wl, NULL);
        tg_tensor_mark_output(c.y);
        TG_CHECK_OK(tg_graph_status(g));
        c.out_numel = 6;
        TG_CHECK(fused_matches_unfused(&c, with_norm ? "view after conv + norm + relu"
                                                     : "view after conv + relu") == 1);
        tg_graph_destroy(g);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* An inference graph with a 2x16x6x6 input x and two 32-channel batch
 * norms' running statistics, for two layers: returns the first layer's
 * 3x3 conv weight (16 -> 32). */
static tg_tensor *two_norm_chain(chain *c)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    *c = (chain){.g = g, .n_layers = 2};
    c->x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 6, 6));
    tg_tensor *w0 =
        tg_param(g, "w0", tg_shape4(32, 16, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 144, 0});
    c->stats[0] = tg_state(g, "stats0", tg_shape2(2, 32), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    c->stats[1] = tg_state(g, "stats1", tg_shape2(2, 32), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    return w0;
}

/* Views of views of fused values (compile/fuse.c's rehome, one pass in
 * graph order): conv + norm + ReLU, reshaped twice back to its own shape
 * and read by a second fused conv, whose value is flattened and reshaped
 * and read by a linear layer; and a third conv reading the first view.
 * Each view takes the buffer of the node computing its root: fused and
 * unfused agree, and `check` agrees. */
static void test_views_of_views(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    chain c;
    tg_tensor *w0 = two_norm_chain(&c);
    tg_graph *g = c.g;
    tg_tensor *w1 =
        tg_param(g, "w1", tg_shape4(32, 32, 1, 1), (tg_init){TG_INIT_FAN_IN_UNIFORM, 32, 0});
    tg_tensor *w2 =
        tg_param(g, "w2", tg_shape4(32, 32, 1, 1), (tg_init){TG_INIT_FAN_IN_UNIFORM, 32, 0});
    tg_conv2d_params same = {1, 1, 1, 1, 1, 1, 1}, one = {1, 1, 0, 0, 1, 1, 1};
    tg_tensor *h = c.conv0 = tg_conv2d(g, c.x, w0, NULL, same);
    h = tg_relu(g, tg_batch_norm(g, h, NULL, NULL, c.stats[0], 1e-5f));
    tg_tensor *v1 = tg_reshape(g, h, tg_shape3(2, 32, 36));
    tg_tensor *v2 = tg_reshape(g, v1, tg_shape4(2, 32, 6, 6));
    tg_tensor *a = tg_conv2d(g, v2, w1, NULL, one);
    a = tg_relu(g, tg_batch_norm(g, a, NULL, NULL, c.stats[1], 1e-5f));
    tg_tensor *b = tg_relu(g, tg_conv2d(g, v2, w2, NULL, one));
    tg_tensor *f = tg_reshape(g, tg_flatten(g, tg_add(g, a, b), 1), tg_shape2(2, 32 * 36));
    tg_tensor *wl =
        tg_param(g, "wl", tg_shape2(3, 32 * 36), (tg_init){TG_INIT_FAN_IN_UNIFORM, 1152, 0});
    c.y = tg_linear(g, f, wl, NULL);
    tg_tensor_mark_output(c.y);
    TG_CHECK_OK(tg_graph_status(g));
    c.out_numel = 6;
    TG_CHECK(fused_matches_unfused(&c, "views of views of fused values") >= 3);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* Outputs a (fused) and b (unfused) of n: the same NaN, the same
 * infinities, the rest close; NaNs and infinities of b counted. */
static int differing(const float *a, const float *b, int64_t n, int *nan, int *inf)
{
    int differ = 0;
    for (int64_t i = 0; i < n; i++) {
        *nan += isnan(b[i]), *inf += isinf(b[i]);
        bool close = isnan(b[i])       ? isnan(a[i])
                     : !isfinite(b[i]) ? a[i] == b[i]
                                       : fabs(a[i] - b[i]) <= 1e-5 * (1 + fabs(b[i]));
        differ += !close;
    }
    return differ;
}

/* Non-finite inputs through a fused ReLU: x with a NaN in one sample and
 * -inf and +inf in another, through conv + norm + ReLU (r, read out too)
 * and then conv + norm + ReLU, or conv + norm + r + ReLU and a conv (y). The fused program's
 * outputs are NaN, +inf and 0 exactly where the unfused program's are (its ReLU, as PyTorch's,
 * passes NaN on and gives 0 for -inf), and close elsewhere: the fused ReLU is oneDNN's max with
 * 0, which gives 0 for NaN, run again as ELU(0) where a NaN raised the invalid flag
 * (backend/cpu/conv_dnnl.c's fast_relu). */
static void test_nonfinite_through_fused_relu(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    /* two threads: the batch in parts, each primitive run by a pool thread,
     * whose own flag must be the one read */
    for (int variant = 0; variant < 4; variant++) {
        int residual = variant % 2, threads = 1 + variant / 2;
        chain c;
        tg_tensor *w0 = two_norm_chain(&c);
        tg_graph *g = c.g;
        tg_tensor *w1 =
            tg_param(g, "w1", tg_shape4(32, 32, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 288, 0});
        tg_conv2d_params same = {1, 1, 1, 1, 1, 1, 1};
        tg_tensor *r = c.conv0 = tg_conv2d(g, c.x, w0, NULL, same);
        r = tg_relu(g, tg_batch_norm(g, r, NULL, NULL, c.stats[0], 1e-5f));
        tg_tensor *conv1 = tg_conv2d(g, r, w1, NULL, same);
        tg_tensor *h = tg_batch_norm(g, conv1, NULL, NULL, c.stats[1], 1e-5f);
        c.y = tg_relu(g, residual ? tg_add(g, h, r) : h);
        if (residual) { /* a conv reads it: the add stays in the blocked layout */
            tg_tensor *w2 = tg_param(g, "w2", tg_shape4(16, 32, 1, 1),
                                     (tg_init){TG_INIT_FAN_IN_UNIFORM, 32, 0});
            c.y = tg_conv2d(g, c.y, w2, NULL, (tg_conv2d_params){1, 1, 0, 0, 1, 1, 1});
        }
        /* without the add, r read out through one more ReLU (unfused, the
         * identity on it; with it, the program would keep r plain, and a
         * plain residual is not fused) */
        tg_tensor *r_out = residual ? NULL : tg_relu(g, r);
        if (r_out)
            tg_tensor_mark_output(r_out);
        tg_tensor_mark_output(c.y);
        TG_CHECK_OK(tg_graph_status(g));
        c.out_numel = tg_numel(c.y);
        tg_session *s[2] = {open_session(&c, threads, true), open_session(&c, threads, false)};
        TG_CHECK(tg_fuse_test_chains(s[0]) == 2);
        TG_CHECK(tg_fuse_test_chains(s[1]) == 0);
        bool add_fused = tg_fuse_conv_add(tg_session_program(s[0]), conv1);
        TG_CHECK(add_fused == (residual && tg_isa_get() >= TG_ISA_AVX512));
        /* the fused ReLU runs as oneDNN's max first, its ELU(0) again where
         * the max met a NaN: the NaN below must come out through that */
        const char *kernel = tg_session_program(s[0])->plans[conv1->id].kernel;
        if ((!residual || add_fused) && !strstr(kernel, "ReLU (max, ELU on NaN) post-op"))
            tg_test_fail(__FILE__, __LINE__, "conv1's kernel is '%s'", kernel);
        float *y[2], *rv[2];
        for (int k = 0; k < 2; k++) {
            y[k] = tg_malloc((size_t)c.out_numel * sizeof(float));
            rv[k] = tg_calloc((size_t)tg_numel(r), sizeof(float));
            run(s[k], &c, 3, y[k]); /* statistics written */
            float x[2 * 16 * 36];
            tg_rng rng;
            tg_rng_seed(&rng, 4);
            for (int i = 0; i < 2 * 16 * 36; i++)
                x[i] = (float)(2 * tg_rng_uniform(&rng) - 1);
            x[3 * 36 + 14] = NAN;                 /* sample 0 */
            x[16 * 36 + 5 * 36 + 26] = -INFINITY; /* sample 1: windows apart */
            x[16 * 36 + 9 * 36 + 2] = INFINITY;
            TG_CHECK_OK(tg_session_write(s[k], c.x, x, sizeof x));
            TG_CHECK_OK(tg_session_run(s[k]));
            TG_CHECK_OK(tg_session_read(s[k], c.y, y[k], (size_t)c.out_numel * sizeof(float)));
            if (r_out)
                TG_CHECK_OK(
                    tg_session_read(s[k], r_out, rv[k], (size_t)tg_numel(r) * sizeof(float)));
        }
        int nan = 0, inf = 0;
        int differ = differing(y[0], y[1], c.out_numel, &nan, &inf) +
                     differing(rv[0], rv[1], tg_numel(r), &nan, &inf);
        printf("  %s, %d thread%s: %d NaN and %d infinite outputs unfused, %d outputs differ "
               "fused\n",
               residual ? "with a residual add" : "without", threads, threads > 1 ? "s" : "", nan,
               inf, differ);
        TG_CHECK(nan > 0 && (residual || inf > 0));
        TG_CHECK(differ == 0);
        for (int k = 0; k < 2; k++)
            tg_free(y[k]), tg_free(rv[k]), tg_session_destroy(s[k]);
        tg_graph_destroy(g);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* The same in a bf16 model (precision 32.bf16, on a CPU with bf16
 * convolutions: the activation fuses, no norm): x with NaN, -inf and +inf
 * through conv + ReLU twice; the fused ReLU's max runs on the f32
 * accumulators and raises the flag there as in f32, so NaN and the
 * infinities land where the unfused program's do. */
static void test_nonfinite_through_fused_relu_bf16(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 6, 6));
    tg_tensor *w0 =
        tg_param(g, "w0", tg_shape4(32, 16, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 144, 0});
    tg_tensor *w1 =
        tg_param(g, "w1", tg_shape4(32, 32, 1, 1), (tg_init){TG_INIT_FAN_IN_UNIFORM, 32, 0});
    tg_conv2d_params same = {1, 1, 1, 1, 1, 1, 1}, one = {1, 1, 0, 0, 1, 1, 1};
    tg_tensor *conv0 = tg_conv2d(g, x, w0, NULL, same);
    tg_tensor *y = tg_relu(g, tg_conv2d(g, tg_relu(g, conv0), w1, NULL, one));
    tg_tensor_mark_output(y);
    TG_CHECK_OK(tg_graph_status(g));
    tg_session *s[2] = {tg_fuse_test_open_with(g, 1, true, "32.bf16", NULL),
                        tg_fuse_test_open_with(g, 1, false, "32.bf16", NULL)};
    const char *kernel = tg_session_program(s[0])->plans[conv0->id].kernel;
    if (!strstr(kernel, "(bf16)") || !strstr(kernel, "ReLU (max, ELU on NaN) post-op")) {
        printf("  (no bf16 convolution with the fast ReLU here: '%s')\n", kernel);
    } else {
        int64_t n = tg_numel(y);
        float *out[2];
        float xs[2 * 16 * 36];
        tg_rng rng;
        tg_rng_seed(&rng, 5);
        for (int i = 0; i < 2 * 16 * 36; i++)
            xs[i] = (float)(2 * tg_rng_uniform(&rng) - 1);
        xs[3 * 36 + 14] = NAN;
        xs[16 * 36 + 5 * 36 + 26] = -INFINITY;
        xs[16 * 36 + 9 * 36 + 2] = INFINITY;
        for (int k = 0; k < 2; k++) {
            out[k] = tg_malloc((size_t)n * sizeof(float));
            TG_CHECK_OK(tg_session_write(s[k], x, xs, sizeof xs));
            TG_CHECK_OK(tg_session_run(s[k]));
            TG_CHECK_OK(tg_session_read(s[k], y, out[k], (size_t)n * sizeof(float)));
        }
        int nan = 0, inf = 0, differ = 0;
        for (int64_t i = 0; i < n; i++) {
            nan += isnan(out[1][i]), inf += isinf(out[1][i]);
            differ += isnan(out[1][i])   ? !isnan(out[0][i])
                      : isinf(out[1][i]) ? out[0][i] != out[1][i]
                                         : isnan(out[0][i]) || isinf(out[0][i]);
        }
        printf("  bf16: %d NaN and %d infinite outputs unfused, %d differ in kind fused\n", nan,
               inf, differ);
        TG_CHECK(nan > 0 && differ == 0);
        tg_free(out[0]), tg_free(out[1]);
    }
    tg_session_destroy(s[0]), tg_session_destroy(s[1]);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* A convolution's own output read by another op, or an output itself, and
 * a training program: nothing fused. */
static void test_nothing_fused_where_seen(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (int variant = 0; variant < 3; variant++) {
        tg_graph *g = tg_graph_create();
        tg_graph_set_training(g, variant == 2);
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 6, 6));
        tg_tensor *w =
            tg_param(g, "w", tg_shape4(16, 16, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 144, 0});
        tg_tensor *st = tg_state(g, "stats", tg_shape2(2, 16), (tg_init){TG_INIT_NORM_STATS, 0, 0});
        tg_tensor *y = tg_conv2d(g, x, w, NULL, (tg_conv2d_params){1, 1, 1, 1, 1, 1, 1});
        tg_tensor *z = tg_relu(g, tg_batch_norm(g, y, NULL, NULL, st, 1e-5f));
        if (variant == 0)
            z = tg_add(g, z, y); /* y read twice */
        if (variant == 1)
            tg_tensor_mark_output(y);
        tg_tensor_mark_output(z);
        TG_CHECK_OK(tg_graph_status(g));
        tg_options *o = tg_options_create();
        tg_session *s = NULL;
        TG_CHECK_OK(tg_session_create(g, o, &s));
        if (s)
            TG_CHECK(tg_fuse_test_chains(s) == 0);
        tg_session_destroy(s);
        tg_options_destroy(o);
        tg_graph_destroy(g);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* An executable file holds the fused plan: a program compiled and written,
 * then loaded from the file, fuses the same convolutions and gives the
 * same bytes as one compiled without a file. */
static void test_executable_file_keeps_fusion(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    char exe[64];
    snprintf(exe, sizeof exe, "/tmp/test_fuse.%d.tgx", (int)getpid());
    tg_rng r;
    tg_rng_seed(&r, 11);
    for (int k = 0; k < 3; k++) {
        chain c = build(&r, false, true);
        unlink(exe);
        tg_session *fresh = open_session(&c, 1, true);
        tg_session *written = open_with(&c, 1, true, NULL, exe);
        tg_session *loaded = open_with(&c, 1, true, NULL, exe);
        TG_CHECK(fresh && written && loaded);
        if (!fresh || !written || !loaded)
            break;
        TG_CHECK(strstr(tg_session_cache(written), "miss (compiled and written)") != NULL);
        if (!strstr(tg_session_cache(loaded), "hit"))
            tg_test_fail(__FILE__, __LINE__, "chain %d: not loaded: %s", k,
                         tg_session_cache(loaded));
        TG_CHECK(tg_fuse_test_chains(fresh) >= 1);
        TG_CHECK(tg_fuse_test_chains(written) == tg_fuse_test_chains(fresh));
        TG_CHECK(tg_fuse_test_chains(loaded) == tg_fuse_test_chains(fresh));
        size_t bytes = (size_t)c.out_numel * sizeof(float);
        float *a = tg_malloc(bytes), *b = tg_malloc(bytes);
        run(fresh, &c, 3, a);
        run(loaded, &c, 3, b);
        TG_CHECK(memcmp(a, b, bytes) == 0);
        check_rows(loaded, &c, false, "loaded from the file");
        tg_free(a), tg_free(b);
        tg_session_destroy(fresh), tg_session_destroy(written), tg_session_destroy(loaded);
        tg_graph_destroy(c.g);
    }
    unlink(exe);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

int main(void)
{
    TG_RUN(test_random_chains_match_unfused);
    TG_RUN(test_bf16_chains_fuse_activations);
    TG_RUN(test_fold_follows_writes);
    TG_RUN(test_view_of_fused_value);
    TG_RUN(test_views_of_views);
    TG_RUN(test_nonfinite_through_fused_relu);
    TG_RUN(test_nonfinite_through_fused_relu_bf16);
    TG_RUN(test_nothing_fused_where_seen);
    TG_RUN(test_executable_file_keeps_fusion);
    return tg_test_finish();
}
