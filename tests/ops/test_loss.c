/* tests/ops/test_loss.c - CROSS_ENTROPY, NLL_LOSS, MSE_LOSS and their _BWD
 * ops: gradients (first and second order), fast kernels against the
 * reference (including the multi-threaded partial sums), hand-computed
 * values, NaN for out-of-range labels, and build errors. */
#include "tg_test.h"

#include "ops/op.h"
#include "runtime/interp.h"

#include <string.h>

static const tg_init U = {TG_INIT_UNIFORM, -2, 2};

typedef struct {
    int kind; /* 0 cross entropy, 1 nll on log_softmax, 2 nll on raw scores, 3 mse */
    int64_t n, c;
    bool second; /* differentiate the _BWD op (dloss is a scalar parameter) */
} loss_case;

static tg_tensor *build_loss(tg_graph *g, void *ctx)
{
    const loss_case *c = ctx;
    tg_tensor *x = tg_param(g, "x", tg_shape2(c->n, c->c), U);
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(c->n));
    tg_tensor *target = c->kind == 3 ? tg_param(g, "target", tg_shape2(c->n, c->c), U) : NULL;
    if (c->second) {
        tg_tensor *dl = tg_param(g, "dloss", tg_shape_of(0, NULL), U);
        switch (c->kind) {
        case 0:
            return tg_node_create(g, TG_OP_CROSS_ENTROPY_BWD, 3, (tg_tensor *[]){dl, x, labels},
                                  NULL);
        case 3:
            return tg_node_create(g, TG_OP_MSE_LOSS_BWD, 3, (tg_tensor *[]){dl, x, target}, NULL);
        default: {
            /* nll_bwd does not read x: sum x in so the graph has a gradient for it */
            tg_node_params p = {0};
            p.i[0] = c->c;
            tg_tensor *b =
                tg_node_create(g, TG_OP_NLL_LOSS_BWD, 2, (tg_tensor *[]){dl, labels}, &p);
            return tg_add(g, b, x);
        }
        }
    }
    switch (c->kind) {
    case 0:
        return tg_cross_entropy(g, x, labels);
    case 1:
        return tg_nll_loss(g, tg_log_softmax(g, x, 1), labels);
    case 2:
        return tg_nll_loss(g, x, labels);
    default:
        return tg_mse_loss(g, x, target);
    }
}

static const char *kind_name[] = {"cross_entropy", "nll(log_softmax)", "nll", "mse"};

static void test_gradcheck(void)
{
    for (int kind = 0; kind < 4; kind++)
        for (int second = 0; second <= 1; second++) {
            loss_case c = {kind, 6, 5, second};
            char label[64];
            snprintf(label, sizeof label, "%s%s", kind_name[kind], second ? " second order" : "");
            /* labels (7k + 3) mod 5 cover every class */
            tg_gradcheck(label, build_loss, &c, (tg_check_opts){.int_range = 5});
        }
}

static void test_kernels(void)
{
    for (int kind = 0; kind < 4; kind++)
        for (int second = 0; second <= 1; second++)
            for (int threads = 1; threads <= 2; threads++) {
                char label[64];
                snprintf(label, sizeof label, "%s%s", kind_name[kind],
                         second ? " second order" : "");
                loss_case c = {kind, 6, 5, second};
                tg_check_kernels(label, build_loss, &c, threads, 1e-5,
                                 (tg_check_opts){.int_range = 5});
                /* 4096 x 10: the pool path, partial sums from two threads */
                c = (loss_case){kind, 4096, 10, second};
                tg_check_kernels(label, build_loss, &c, threads, 1e-4,
                                 (tg_check_opts){.int_range = 10});
            }
}

/* Fast and reference kernels of one node on given inputs. */
static void run_both(const tg_tensor *node, void *const *in_f, double *const *in_d, float *out_f,
                     double *out_d, int threads)
{
    tg_pool *pool = tg_pool_create(threads);
    const tg_op_def *def = tg_op_get(node->op);
    size_t sb = def->scratch ? def->scratch(node, threads) : 0;
    double scratch[8];
    tg_kernel_args a = {.node = node,
                        .out = out_f,
                        .pool = pool,
                        .scratch = sb ? scratch : NULL,
                        .scratch_bytes = sb};
    tg_ref_args r = {.node = node, .out = out_d};
    for (int k = 0; k < node->n_in; k++) {
        a.in[k] = in_f[k];
        r.in[k] = in_d[k];
    }
    def->forward(&a);
    def->reference(&r);
    tg_pool_destroy(pool);
}

/* logits [[1, 2, 3], [1, 1, 1]], labels [2, 0]:
 *   loss = (log(e + e^2 + e^3) - 3 + log 3) / 2 = 0.753109126556245
 * and the gradient of row 0 is (softmax - onehot) / 2. */
static void test_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "logits", TG_F32, tg_shape2(2, 3));
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(2));
    tg_tensor *one = tg_constant(g, tg_shape_of(0, NULL), 1.0f);
    tg_tensor *ce = tg_cross_entropy(g, x, l);
    tg_tensor *ceb =
        tg_node_create(g, TG_OP_CROSS_ENTROPY_BWD, 3, (tg_tensor *[]){one, x, l}, NULL);
    tg_tensor *nll = tg_nll_loss(g, x, l);
    tg_tensor *y = tg_input(g, "target", TG_F32, tg_shape2(2, 3));
    tg_tensor *mse = tg_mse_loss(g, x, y);
    tg_tensor *mseb = tg_node_create(g, TG_OP_MSE_LOSS_BWD, 3, (tg_tensor *[]){one, x, y}, NULL);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(ce->shape.ndim == 0 && tg_numel(ce) == 1 && ce->dtype == TG_F32);

    float xf[6] = {1, 2, 3, 1, 1, 1}, yf[6] = {0, 2, 1, 1, 1, 3}, onef = 1;
    int32_t lf[2] = {2, 0};
    double xd[6], yd[6], ld[2] = {2, 0}, oned = 1;
    for (int k = 0; k < 6; k++)
        xd[k] = xf[k], yd[k] = yf[k];
    for (int threads = 1; threads <= 2; threads++) {
        float of[6];
        double od[6];
        run_both(ce, (void *[]){xf, lf}, (double *[]){xd, ld}, of, od, threads);
        TG_CHECK_NEAR(of[0], 0.753109126556245, 1e-7);
        TG_CHECK_NEAR(od[0], 0.753109126556245, 1e-14);
        run_both(ceb, (void *[]){&onef, xf, lf}, (double *[]){&oned, xd, ld}, of, od, threads);
        const double want_g[3] = {0.04501528658519023, 0.12236423552739883, -0.16737952211258905};
        for (int k = 0; k < 3; k++) {
            TG_CHECK_NEAR(of[k], want_g[k], 1e-7);
            TG_CHECK_NEAR(od[k], want_g[k], 1e-14);
        }
        /* row 1: uniform softmax 1/3, label 0: (1/3 - 1) / 2, 1/6, 1/6 */
        TG_CHECK_NEAR(od[3], -1.0 / 3, 1e-14);
        TG_CHECK_NEAR(od[4], 1.0 / 6, 1e-14);
        /* nll on raw scores: -(3 + 1) / 2 */
        run_both(nll, (void *[]){xf, lf}, (double *[]){xd, ld}, of, od, threads);
        TG_CHECK_NEAR(of[0], -2, 0);
        TG_CHECK_NEAR(od[0], -2, 0);
        /* mse: differences (1, 0, 2, 0, 0, -2): (1 + 4 + 4) / 6 = 1.5 */
        run_both(mse, (void *[]){xf, yf}, (double *[]){xd, yd}, of, od, threads);
        TG_CHECK_NEAR(of[0], 1.5, 0);
        TG_CHECK_NEAR(od[0], 1.5, 0);
        run_both(mseb, (void *[]){&onef, xf, yf}, (double *[]){&oned, xd, yd}, of, od, threads);
        const double want_m[6] = {2.0 / 6, 0, 4.0 / 6, 0, 0, -4.0 / 6};
        for (int k = 0; k < 6; k++) {
            TG_CHECK_NEAR(of[k], want_m[k], 1e-7);
            TG_CHECK_NEAR(od[k], want_m[k], 1e-15);
        }
    }
    tg_graph_destroy(g);
}

/* A label outside [0, C) makes the loss NaN (not a silently clamped value)
 * and that sample's gradient row NaN; other rows stay exact. */
static void test_bad_labels(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "logits", TG_F32, tg_shape2(3, 4));
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(3));
    tg_tensor *one = tg_constant(g, tg_shape_of(0, NULL), 1.0f);
    tg_tensor *ce = tg_cross_entropy(g, x, l), *nll = tg_nll_loss(g, x, l);
    tg_tensor *ceb =
        tg_node_create(g, TG_OP_CROSS_ENTROPY_BWD, 3, (tg_tensor *[]){one, x, l}, NULL);
    tg_node_params p = {0};
    p.i[0] = 4;
    tg_tensor *nllb = tg_node_create(g, TG_OP_NLL_LOSS_BWD, 2, (tg_tensor *[]){one, l}, &p);
    TG_CHECK_OK(tg_graph_status(g));
    float xf[12] = {0}, onef = 1;
    double xd[12] = {0}, oned = 1;
    const int32_t bad[2][3] = {{0, 4, 1}, {-1, 2, 3}};
    for (int b = 0; b < 2; b++) {
        int32_t lf[3];
        double ld[3];
        for (int k = 0; k < 3; k++)
            lf[k] = bad[b][k], ld[k] = bad[b][k];
        int bad_row = b == 0 ? 1 : 0;
        for (int threads = 1; threads <= 2; threads++) {
            float of[12];
            double od[12];
            run_both(ce, (void *[]){xf, lf}, (double *[]){xd, ld}, of, od, threads);
            TG_CHECK(isnan(of[0]) && isnan(od[0]));
            run_both(nll, (void *[]){xf, lf}, (double *[]){xd, ld}, of, od, threads);
            TG_CHECK(isnan(of[0]) && isnan(od[0]));
            run_both(ceb, (void *[]){&onef, xf, lf}, (double *[]){&oned, xd, ld}, of, od, threads);
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 4; c++) {
                    float v = of[r * 4 + c];
                    double w = od[r * 4 + c];
                    if (r == bad_row)
                        TG_CHECK(isnan(v) && isnan(w));
                    else
                        TG_CHECK_NEAR(v, (0.25 - (c == lf[r])) / 3, 1e-7);
                }
            run_both(nllb, (void *[]){&onef, lf}, (double *[]){&oned, ld}, of, od, threads);
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 4; c++) {
                    if (r == bad_row)
                        TG_CHECK(isnan(of[r * 4 + c]) && isnan(od[r * 4 + c]));
                    else
                        TG_CHECK_NEAR(of[r * 4 + c], c == lf[r] ? -1.0 / 3 : 0, 1e-7);
                }
        }
    }
    tg_graph_destroy(g);
}

static void expect_error(tg_graph *g, tg_status s, const char *text)
{
    TG_CHECK(tg_graph_status(g) == s);
    if (!strstr(tg_graph_error(g), text))
        tg_test_fail(__FILE__, __LINE__, "error '%s' does not contain '%s'", tg_graph_error(g),
                     text);
    tg_graph_destroy(g);
}

static void test_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "logits", TG_F32, tg_shape2(4, 10));
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(5));
    TG_CHECK(tg_cross_entropy(g, x, l) == NULL);
    expect_error(g, TG_ERR_SHAPE,
                 "cross_entropy: labels [5] do not match logits [4, 10] (expected [4])");

    g = tg_graph_create();
    x = tg_input(g, "logits", TG_F32, tg_shape2(4, 10));
    l = tg_input(g, "labels", TG_F32, tg_shape1(4));
    TG_CHECK(tg_nll_loss(g, x, l) == NULL);
    expect_error(g, TG_ERR_DTYPE, "nll_loss: labels 'labels' is f32, expected i32");

    g = tg_graph_create();
    x = tg_input(g, "logits", TG_F32, tg_shape3(4, 10, 2));
    l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_cross_entropy(g, x, l) == NULL);
    expect_error(g, TG_ERR_SHAPE, "logits [4, 10, 2] must be [N, C]");

    g = tg_graph_create();
    x = tg_input(g, "a", TG_F32, tg_shape2(4, 10));
    tg_tensor *y = tg_input(g, "b", TG_F32, tg_shape1(10));
    TG_CHECK(tg_mse_loss(g, x, y) == NULL);
    expect_error(g, TG_ERR_SHAPE, "mse_loss: input [4, 10] and target [10] differ in shape");
}

int main(void)
{
    TG_RUN(test_values);
    TG_RUN(test_bad_labels);
    TG_RUN(test_errors);
    TG_RUN(test_gradcheck);
    TG_RUN(test_kernels);
    return tg_test_finish();
}
