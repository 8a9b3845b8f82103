/* tests/ops/test_softmax.c - SOFTMAX, LOG_SOFTMAX and their _BWD ops:
 * gradients (first and second order), fast kernels against the reference on
 * every axis, exact values, stability with huge logits, build errors.
 * TG_TEST_LABELS: quick isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "ops/unary.h"
#include "runtime/interp.h"

#include "core/bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bool log;
    tg_shape shape;
    int axis;
    bool second; /* differentiate the _BWD op (dy and x are parameters) */
} sm_case;

static tg_tensor *build_sm(tg_graph *g, void *ctx)
{
    const sm_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -2, 2};
    tg_tensor *x = tg_param(g, "x", c->shape, u);
    tg_tensor *y = c->log ? tg_log_softmax(g, x, c->axis) : tg_softmax(g, x, c->axis);
    if (!c->second)
        return y;
    /* y stays a true (log-)softmax as x moves, as it is in a real backward */
    tg_tensor *dy = tg_param(g, "dy", c->shape, u);
    tg_node_params p = {0};
    tg_softmax_set_axis(&p, c->axis);
    return tg_node_create(g, c->log ? TG_OP_LOG_SOFTMAX_BWD : TG_OP_SOFTMAX_BWD, 2,
                          (tg_tensor *[]){dy, y}, &p);
}

static void test_gradcheck(void)
{
    for (int log = 0; log <= 1; log++)
        for (int second = 0; second <= 1; second++)
            for (int axis = -1; axis < 3; axis++) {
                sm_case c = {log, tg_shape3(2, 3, 4), axis, second};
                char label[64];
                snprintf(label, sizeof label, "%s%s axis %d", log ? "log_softmax" : "softmax",
                         second ? " second order" : "", axis);
                tg_gradcheck(label, build_sm, &c, (tg_check_opts){0});
            }
}

static void test_kernels(void)
{
    for (int log = 0; log <= 1; log++)
        for (int second = 0; second <= 1; second++)
            for (int axis = 0; axis < 3; axis++)
                for (int threads = 1; threads <= 2; threads++) {
                    sm_case c = {log, tg_shape3(3, 5, 7), axis, second};
                    char label[64];
                    snprintf(label, sizeof label, "%s%s axis %d", log ? "log_softmax" : "softmax",
                             second ? " second order" : "", axis);
                    tg_check_kernels(label, build_sm, &c, threads, 1e-5, (tg_check_opts){0});
                    /* large: the pool path, classes on the last and a middle axis */
                    c.shape = tg_shape3(64, 10, 60);
                    tg_check_kernels(label, build_sm, &c, threads, 1e-3, (tg_check_opts){0});
                }
}

/* Hand-computed: softmax([1, 2, 3]) and the same shifted by 1000 (naive exp
 * would overflow); log_softmax([0, 0]) = log(1/2). */
static void test_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(3, 3));
    tg_tensor *s = tg_softmax(g, x, -1), *l = tg_log_softmax(g, x, 1);
    tg_tensor *s0 = tg_softmax(g, x, 0);
    TG_CHECK_OK(tg_graph_status(g));
    const float v[9] = {1, 2, 3, 1001, 1002, 1003, 0, 0, -1e30f};
    const double e = exp(1.0), z = 1 + e + e * e;
    const double want_s[3] = {1 / z, e / z, e * e / z};
    float out[9];
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = tg_pool_create(threads);
        tg_kernel_args a = {.node = s, .in = {(void *)v}, .out = out, .pool = pool};
        tg_backend_cpu.kernel(s->op)->forward(&a);
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 3; k++)
                TG_CHECK_NEAR(out[r * 3 + k], want_s[k], 1e-7);
        TG_CHECK_NEAR(out[6], 0.5, 1e-7);
        TG_CHECK_NEAR(out[8], 0, 0);
        a.node = l;
        tg_backend_cpu.kernel(l->op)->forward(&a);
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 3; k++)
                TG_CHECK_NEAR(out[r * 3 + k], log(want_s[k]), 1e-6);
        TG_CHECK_NEAR(out[6], -log(2.0), 1e-7);
        a.node = s0; /* down the columns: column 0 is (1, 1001, 0) */
        tg_backend_cpu.kernel(s0->op)->forward(&a);
        TG_CHECK_NEAR(out[3], 1, 1e-7);
        TG_CHECK_NEAR(out[0], exp(-1000.0), 1e-30);
        tg_pool_destroy(pool);
    }
    TG_CHECK(tg_softmax_axis(s0) == 0 && tg_softmax_axis(s) == 1);
    tg_graph_destroy(g);
}

/* Softmax over the last axis read and written in bf16 in place
 * (backend/cpu/softmax_kernels.c) has the bits of staging: the whole tensor
 * widened, the f32 kernel, rounded back; rows of lengths around the 16-wide
 * conversions, a row of NaN, of -inf, of huge logits, on 1 and 2 threads,
 * bf16 in and out, and each side alone. */
static void check_bf16_rows(int64_t rows, int64_t len, tg_pool *pool)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(rows, len));
    tg_tensor *s = tg_softmax(g, x, -1);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_op_reads_bf16(s, false));
    int64_t n = rows * len;
    uint16_t *xb = malloc((size_t)n * 2), *ob = malloc((size_t)n * 2);
    float *xf = malloc((size_t)n * 4), *of = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
    TG_CHECK(xb && ob && xf && of && got);
    uint64_t r = (uint64_t)(rows * 1000 + len);
    for (int64_t i = 0; xb && i < n; i++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        xb[i] = tg_f32_to_bf16((float)((r >> 40) % 2001) / 100.0f - 10.0f);
    }
    for (int64_t i = 0; rows >= 3 && i < len; i++) {
        xb[i] = tg_f32_to_bf16(i % 3 ? NAN : 1.0f);                 /* row 0: NaN */
        xb[len + i] = tg_f32_to_bf16(-INFINITY);                    /* row 1: no mass */
        xb[2 * len + i] = tg_f32_to_bf16(3e38f - (float)i * 1e36f); /* row 2: huge */
    }
    for (int64_t i = 0; xb && xf && i < n; i++)
        xf[i] = tg_bf16_to_f32(xb[i]);
    const tg_kernel_def *k = tg_backend_cpu.kernel(TG_OP_SOFTMAX);
    if (xb && ob && xf && of && got) {
        tg_kernel_args a = {.node = s, .in = {xf}, .out = of, .pool = pool};
        k->forward(&a); /* the staged path's f32 kernel */
        for (int side = 0; side < 3; side++) {
            bool in16 = side != 2, out16 = side != 1;
            a = (tg_kernel_args){.node = s, .pool = pool};
            a.in[0] = in16 ? (void *)xb : (void *)xf, a.in_type[0] = in16 ? TG_BF16 : TG_F32;
            a.out = out16 ? (void *)ob : (void *)got, a.out_type = out16 ? TG_BF16 : TG_F32;
            k->forward(&a);
            for (int64_t i = 0; i < n; i++) {
                float want = out16 ? tg_bf16_to_f32(tg_f32_to_bf16(of[i])) : of[i];
                float v = out16 ? tg_bf16_to_f32(ob[i]) : got[i];
                if (memcmp(&v, &want, 4) && !(isnan(v) && isnan(want))) {
                    tg_test_fail(__FILE__, __LINE__,
                                 "softmax %lldx%lld (bf16 in %d, out %d), element %lld: %.9g, "
                                 "want %.9g",
                                 (long long)rows, (long long)len, in16, out16, (long long)i, v,
                                 want);
                    break;
                }
            }
        }
    }
    free(xb), free(ob), free(xf), free(of), free(got);
    tg_graph_destroy(g);
}

static void test_bf16_in_place(void)
{
    static const int64_t lens[] = {1, 15, 16, 17, 33, 128, 300};
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = tg_pool_create(threads);
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
            check_bf16_rows(7, lens[l], pool);
        tg_pool_destroy(pool);
    }
    /* a middle axis, or a row longer than the stack's, is staged */
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(3, 5000));
    TG_CHECK(!tg_op_reads_bf16(tg_softmax(g, x, 0), false));
    TG_CHECK(!tg_op_reads_bf16(tg_softmax(g, x, 1), false));
    TG_CHECK(!tg_op_reads_bf16(tg_log_softmax(g, x, 1), false));
    tg_graph_destroy(g);
}

static void test_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    TG_CHECK(tg_softmax(g, x, 2) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_graph_error(g), "softmax: axis 2 out of range for [2, 3]") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "x", TG_I32, tg_shape2(2, 3));
    TG_CHECK(tg_log_softmax(g, x, -1) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_DTYPE);
    TG_CHECK(strstr(tg_graph_error(g), "log_softmax: input 'x' is i32") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_tensor *y = tg_input(g, "y", TG_F32, tg_shape2(3, 2));
    TG_CHECK(tg_node_create(g, TG_OP_SOFTMAX_BWD, 2, (tg_tensor *[]){x, y}, NULL) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "dy [2, 3] and y [3, 2] differ") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_values);
    TG_RUN(test_errors);
    TG_RUN(test_bf16_in_place);
    TG_RUN(test_gradcheck);
    TG_RUN(test_kernels);
    return tg_test_finish();
}
