/* tests/compile/test_fuse.c - an inference program's convolutions compute
 * the batch norm and ReLU after them (compile/fuse.c): random chains of
 * conv (groups, strides, padding, bias or not) + batch norm (gamma and beta
 * or not, random running statistics) + ReLU or not give what the unfused
 * program gives within f32 rounding, at 1 and 2 threads; `check` compares
 * every fused value with the chained reference kernels and finds a fault
 * put into one; a graph whose convolution is read elsewhere, or a training
 * program, fuses nothing; the folded weights follow the host's writes.
 * TG_TEST_LABELS: threads */
#include "tg_fuse_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/process.h"
#include "core/rng.h"
#include "ops/dnnl_util.h"
#include "runtime/session_internal.h"
#include "runtime/verify.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <string.h>

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

/* 1 to 3 layers of conv + BN (+ ReLU), shapes drawn from r. */
static chain build(tg_rng *r, bool training)
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
            h = tg_relu(c.g, h);
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

static tg_session *open_session(chain *c, int threads, bool fuse)
{
    return tg_fuse_test_open(c->g, threads, fuse);
}

/* Running statistics far from (0, 1) so that the fold matters, the same
 * in every session; then x, then a run; y into out. */
static void run(tg_session *s, const chain *c, uint64_t seed, float *out)
{
    tg_rng r;
    tg_rng_seed(&r, seed);
    for (int l = 0; l < c->n_layers; l++) {
        int64_t K = tg_tensor_shape(c->stats[l]).dim[1];
        float st[2 * 64];
        for (int64_t k = 0; k < K; k++) {
            st[k] = (float)(tg_rng_uniform(&r) - 0.5);
            st[K + k] = (float)(0.05 + 2 * tg_rng_uniform(&r));
        }
        TG_CHECK_OK(tg_session_write(s, c->stats[l], st, (size_t)(2 * K) * sizeof(float)));
    }
    int64_t n = tg_numel(c->x);
    float *x = tg_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; x && i < n; i++)
        x[i] = (float)(2 * tg_rng_uniform(&r) - 1);
    TG_CHECK_OK(tg_session_write(s, c->x, x, (size_t)n * sizeof(float)));
    tg_free(x);
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, c->y, out, (size_t)c->out_numel * sizeof(float)));
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

static void test_random_chains_match_unfused(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_rng r;
    tg_rng_seed(&r, 42);
    int graphs = 24, fused_total = 0;
    double worst = 0;
    for (int k = 0; k < graphs; k++) {
        chain c = build(&r, false);
        int threads = 1 + k % 2;
        tg_session *f = open_session(&c, threads, true), *u = open_session(&c, threads, false);
        float *yf = tg_malloc((size_t)c.out_numel * sizeof(float));
        float *yu = tg_malloc((size_t)c.out_numel * sizeof(float));
        run(f, &c, 1 + (uint64_t)k, yf);
        run(u, &c, 1 + (uint64_t)k, yu);
        TG_CHECK(tg_fuse_test_chains(u) == 0);
        fused_total += tg_fuse_test_chains(f);
        double d = tg_fuse_test_difference(yf, yu, c.out_numel);
        worst = fmax(worst, d);
        char label[64];
        snprintf(label, sizeof label, "random chain %d (%d threads)", k, threads);
        if (!(d <= 2e-6))
            tg_test_fail(__FILE__, __LINE__, "%s: fused %.3g from unfused", label, d);
        check_rows(f, &c, false, label);
        if (k < 4)
            check_rows(f, &c, true, label);
        tg_free(yf), tg_free(yu);
        tg_session_destroy(f), tg_session_destroy(u);
        tg_graph_destroy(c.g);
    }
    printf("  %d random chains, %d fused convolutions, worst difference from unfused %.3g\n",
           graphs, fused_total, worst);
    TG_CHECK(fused_total >= graphs); /* every chain's first conv at least */
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* Writing the statistics again (a checkpoint, another training session's
 * weights) folds them again: the next run is a fresh session's. */
static void test_fold_follows_writes(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_rng r;
    tg_rng_seed(&r, 5);
    chain c = build(&r, false);
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

int main(void)
{
    TG_RUN(test_random_chains_match_unfused);
    TG_RUN(test_fold_follows_writes);
    TG_RUN(test_nothing_fused_where_seen);
    return tg_test_finish();
}
