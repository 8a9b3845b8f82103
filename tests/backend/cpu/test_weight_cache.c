/* tests/backend/cpu/test_weight_cache.c - an inference program's convolutions keep
 * their weights in oneDNN's layout between runs (backend/cpu/weight_cache.h,
 * conv_dnnl.c's keep_weights): reordered once per host write of the
 * weights, never per run, and never stale. After every way the host writes
 * weights (tg_session_write, tg_session_copy_weights, a checkpoint through
 * tg_session_value_in) the next run must give exactly what a fresh session
 * with those weights gives, in f32 and bf16 storage (converted, then
 * reordered), at 1 thread and at 2 (the batch in parts, the weights shared
 * by them), and with 2 replicas (two device threads run each node at
 * once). A training program keeps nothing: its weights change at every
 * update.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"

#include "compile/program.h"
#include "backend/cpu/conv_dnnl_state.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "runtime/session_internal.h"
#include "tilegraph/optim.h"
#include "tilegraph/session.h"

#include <math.h>
#include <string.h>

#define N 2
#define C 16
#define K 32
#define HW 8

typedef struct net {
    tg_graph *g;
    tg_tensor *x, *w1, *b1, *w2, *y;
} net;

/* conv 3x3 + bias, ReLU, conv 3x3 stride 2: the weights of both need a
 * reorder into oneDNN's layout. Inference, or a training step of SGD. */
static net build(bool training)
{
    net n = {.g = tg_graph_create()};
    tg_graph_set_training(n.g, training);
    n.x = tg_input(n.g, "x", TG_F32, tg_shape4(N, C, HW, HW));
    n.w1 = tg_param(n.g, "w1", tg_shape4(K, C, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, C * 9, 0});
    n.b1 = tg_param(n.g, "b1", tg_shape1(K), (tg_init){TG_INIT_FAN_IN_UNIFORM, C * 9, 0});
    n.w2 = tg_param(n.g, "w2", tg_shape4(K, K, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, K * 9, 0});
    tg_conv2d_params p1 = {1, 1, 1, 1, 1, 1, 1}; /* stride 1, pad 1: 3x3 keeps the size */
    tg_conv2d_params p2 = p1;
    p2.stride_h = p2.stride_w = 2;
    tg_tensor *h = tg_relu(n.g, tg_conv2d(n.g, n.x, n.w1, n.b1, p1));
    n.y = tg_conv2d(n.g, h, n.w2, NULL, p2);
    if (training) {
        n.y = tg_reduce_mean(n.g, tg_mul(n.g, n.y, n.y), 1u | 2u | 4u | 8u, false);
        TG_CHECK_OK(tg_graph_backward(n.g, n.y));
        tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
        TG_CHECK_OK(tg_graph_add_optimizer(n.g, &opt));
    }
    tg_tensor_mark_output(n.y);
    TG_CHECK_OK(tg_graph_status(n.g));
    return n;
}

/* Replicas of the sessions check_writes opens: 2 runs the same convolution
 * on two device threads at once, each with its own weights' address. */
static int replicas = 1;

static tg_session *open_session(const net *n, int threads, const char *precision)
{
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "replicationFactor", replicas);
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", 5);
    TG_CHECK_OK(tg_options_set(o, "precision", precision));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(n->g, o, &s));
    tg_options_destroy(o);
    return s;
}

static void fill(float *v, size_t count, int seed)
{
    for (size_t i = 0; i < count; i++)
        v[i] = (float)((int)((i * 37 + (size_t)seed * 11) % 23) - 11) / 40.0f;
}

/* One run on the fixed input; y read into out. */
static void run(tg_session *s, const net *n, float *out, size_t count)
{
    static float x[2 * N * C * HW * HW];
    size_t one = N * C * HW * HW;
    fill(x, one, 1);
    fill(x + one, one, 6); /* replica 1's samples differ */
    TG_CHECK_OK(tg_session_write(s, n->x, x, (size_t)replicas * one * sizeof *x));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, n->y, out, (size_t)replicas * count * sizeof *out));
}

/* The weight cache of node t's convolution in s's program, or NULL. */
static const tg_weight_cache *cache_of(tg_session *s, const tg_tensor *t)
{
    const tg_program *p = tg_session_program(s);
    const conv_state *st = p->plans ? p->plans[t->id].state : NULL;
    return st ? st->cache : NULL;
}

static const tg_tensor *conv_of(const tg_tensor *t)
{
    while (t && t->op != TG_OP_CONV2D)
        t = t->n_in ? t->in[0] : NULL;
    return t;
}

static void check_same(const char *what, const float *a, const float *b, size_t count)
{
    if (memcmp(a, b, count * sizeof *a) != 0)
        tg_test_fail(__FILE__, __LINE__, "%s: differs from a fresh session's run", what);
}

/* New w1 and w2 written three ways; each next run as a fresh session's. */
static void check_writes(int threads, const char *precision)
{
    net n = build(false);
    tg_session *s = open_session(&n, threads, precision);
    const tg_tensor *c2 = conv_of(n.y), *c1 = conv_of(c2->in[0]);
    const tg_weight_cache *k1 = s ? cache_of(s, c1) : NULL, *k2 = s ? cache_of(s, c2) : NULL;
    if (!k1 || !k2)
        tg_test_fail(__FILE__, __LINE__, "%s, %d threads: conv weights not kept (%s / %s)",
                     precision, threads, tg_session_program(s)->plans[c1->id].kernel,
                     tg_session_program(s)->plans[c2->id].kernel);
    enum { Y = N * K * (HW / 2) * (HW / 2) };
    static float first[2 * Y], again[2 * Y], after[2 * Y], fresh[2 * Y];
    static float w1[K * C * 9], w2[K * K * 9];
    run(s, &n, first, Y);
    run(s, &n, again, Y);
    run(s, &n, again, Y);
    check_same("a second run", first, again, (size_t)replicas * Y);
    /* once for the first run (per replica), not again: the weights were not written */
    TG_CHECK(tg_weight_cache_fills(k1) == replicas && tg_weight_cache_fills(k2) == replicas);

    /* 1. tg_session_write */
    fill(w1, sizeof w1 / sizeof *w1, 2);
    fill(w2, sizeof w2 / sizeof *w2, 3);
    TG_CHECK_OK(tg_session_write(s, n.w1, w1, sizeof w1));
    TG_CHECK_OK(tg_session_write(s, n.w2, w2, sizeof w2));
    run(s, &n, after, Y);
    TG_CHECK(memcmp(after, first, sizeof after) != 0); /* the weights did change */
    tg_session *f = open_session(&n, threads, precision);
    TG_CHECK_OK(tg_session_write(f, n.w1, w1, sizeof w1));
    TG_CHECK_OK(tg_session_write(f, n.w2, w2, sizeof w2));
    run(f, &n, fresh, Y);
    check_same("after tg_session_write", after, fresh, (size_t)replicas * Y);
    TG_CHECK(tg_weight_cache_fills(k1) == 2 * replicas &&
             tg_weight_cache_fills(k2) == 2 * replicas);

    /* 2. tg_session_copy_weights from a session with other weights */
    tg_session *src = open_session(&n, threads, precision);
    fill(w2, sizeof w2 / sizeof *w2, 4);
    TG_CHECK_OK(tg_session_write(src, n.w2, w2, sizeof w2));
    TG_CHECK_OK(tg_session_copy_weights(s, src));
    TG_CHECK_OK(tg_session_copy_weights(f, src));
    run(s, &n, after, Y);
    run(f, &n, fresh, Y);
    check_same("after tg_session_copy_weights", after, fresh, (size_t)replicas * Y);

    /* 3. a checkpoint's values, as stored (tg_session_value_in) */
    size_t es = tg_dtype_size(tg_session_storage_dtype(s, n.w1));
    static unsigned char stored[K * C * 9 * 4];
    TG_CHECK_OK(tg_session_value_out(src, n.w1, stored));
    for (size_t i = 0; i < (size_t)K * C * 9 * es; i += es)
        stored[i + es - 1] ^= 0x01; /* another value in the top byte */
    TG_CHECK_OK(tg_session_value_in(s, n.w1, stored));
    TG_CHECK_OK(tg_session_value_in(f, n.w1, stored));
    run(s, &n, after, Y);
    tg_session *g2 = open_session(&n, threads, precision);
    TG_CHECK_OK(tg_session_copy_weights(g2, f));
    run(g2, &n, fresh, Y);
    check_same("after a checkpoint's values", after, fresh, (size_t)replicas * Y);

    tg_session_destroy(g2);
    tg_session_destroy(src);
    tg_session_destroy(f);
    tg_session_destroy(s);
    tg_graph_destroy(n.g);
}

static void test_inference_keeps_weights_until_written(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (int threads = 1; threads <= 2; threads++) {
        check_writes(threads, "32.32");
        check_writes(threads, "16.16"); /* f16 storage: staged through f32 */
        check_writes(threads, "bf16.32");
    }
    replicas = 2;
    check_writes(1, "32.32");
    replicas = 1;
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* A training program's weights change at every update: nothing is kept. */
static void test_training_keeps_nothing(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    net n = build(true);
    tg_session *s = open_session(&n, 1, "32.32");
    for (int i = 0; s && i < n.g->n_nodes; i++)
        if (n.g->nodes[i]->op == TG_OP_CONV2D)
            TG_CHECK(cache_of(s, n.g->nodes[i]) == NULL);
    tg_session_destroy(s);
    tg_graph_destroy(n.g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* The cache itself: a buffer per source, refilled when the version moves,
 * version 0 never cached. */
static void test_cache_versions(void)
{
    tg_weight_cache *c = tg_weight_cache_create(256);
    int a, b;
    bool fill;
    TG_CHECK(tg_weight_cache_get(c, &a, 0, &fill) == NULL && !fill);
    void *pa = tg_weight_cache_get(c, &a, 7, &fill);
    TG_CHECK(pa && fill && ((uintptr_t)pa % 64) == 0);
    TG_CHECK(tg_weight_cache_get(c, &a, 7, &fill) == pa && !fill);
    void *pb = tg_weight_cache_get(c, &b, 7, &fill);
    TG_CHECK(pb && pb != pa && fill);
    TG_CHECK(tg_weight_cache_get(c, &a, 8, &fill) == pa && fill);
    TG_CHECK(tg_weight_cache_fills(c) == 3);
    tg_weight_cache_destroy(c);
}

int main(void)
{
    TG_RUN(test_cache_versions);
    TG_RUN(test_inference_keeps_weights_until_written);
    TG_RUN(test_training_keeps_nothing);
    return tg_test_finish();
}
