/* tests/ops/test_loss.c - CROSS_ENTROPY, NLL_LOSS, MSE_LOSS and their _BWD
 * ops: gradients (first and second order), fast kernels against the
 * reference (including the multi-threaded partial sums), hand-computed
 * values, NaN for out-of-range labels, and build errors.
 * TG_TEST_LABELS: quick */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "ops/loss.h"
#include "runtime/interp.h"

#include <stdlib.h>
#include <string.h>

static const tg_init U = {TG_INIT_UNIFORM, -2, 2};

typedef struct {
    int kind; /* 0 cross entropy, 1 nll on log_softmax, 2 nll on raw scores, 3 mse */
    int64_t n, c;
    bool second; /* differentiate the _BWD op (dloss is a scalar parameter) */
    /* class losses: reduction, ignore_index 1, constant class weights,
     * scores [n, c, d] (d > 0), labels as an f32 constant */
    tg_loss_reduction red;
    bool ii, weights;
    int64_t d;
    bool f32_labels;
    int64_t d2; /* scores [n, c, d, d2]: a segmentation's [N, C, H, W] */
} loss_case;

static const float class_weights[10] = {0.5f, 2.0f,  1.5f,  0.25f, 1.0f,
                                        3.0f, 0.75f, 1.25f, 2.5f,  0.1f};

/* (7k + 3) mod c: the harness's i32 fill, as an f32 constant. */
static tg_tensor *f32_labels(tg_graph *g, tg_shape s, int64_t c)
{
    int64_t n = tg_shape_numel(s);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++)
        v[k] = (float)((7 * k + 3) % c);
    tg_tensor *t = tg_constant_data(g, "labels", s, v);
    free(v);
    return t;
}

static tg_tensor *build_loss(tg_graph *g, void *ctx)
{
    const loss_case *c = ctx;
    tg_shape xs = c->d2  ? tg_shape4(c->n, c->c, c->d, c->d2)
                  : c->d ? tg_shape3(c->n, c->c, c->d)
                         : tg_shape2(c->n, c->c);
    tg_shape ls = c->d2  ? tg_shape3(c->n, c->d, c->d2)
                  : c->d ? tg_shape2(c->n, c->d)
                         : tg_shape1(c->n);
    tg_tensor *x = tg_param(g, "x", xs, U);
    tg_tensor *labels = c->f32_labels ? f32_labels(g, ls, c->c) : tg_input(g, "labels", TG_I32, ls);
    tg_tensor *target = c->kind == 3 ? tg_param(g, "target", tg_shape2(c->n, c->c), U) : NULL;
    tg_tensor *w = c->weights ? tg_constant_data(g, "w", tg_shape1(c->c), class_weights) : NULL;
    tg_loss_params lp = {c->red, c->ii, 1};
    if (c->second) {
        tg_shape ds = c->kind != 3 && c->red == TG_LOSS_NONE ? ls : tg_shape_of(0, NULL);
        tg_tensor *dl = tg_param(g, "dloss", ds, U);
        tg_node_params p = {0};
        tg_loss_set_reduce(&p, c->red);
        tg_loss_set_has_ignore_index(&p, c->ii);
        tg_loss_set_ignore_index(&p, 1);
        switch (c->kind) {
        case 0:
            return tg_node_create(g, TG_OP_CROSS_ENTROPY_BWD, w ? 4 : 3,
                                  (tg_tensor *[]){dl, x, labels, w}, &p);
        case 3:
            return tg_node_create(g, TG_OP_MSE_LOSS_BWD, 3, (tg_tensor *[]){dl, x, target}, NULL);
        default: {
            /* nll_bwd does not read x: sum x in so the graph has a gradient for it */
            tg_loss_set_classes(&p, c->c);
            tg_tensor *b = tg_node_create(g, TG_OP_NLL_LOSS_BWD, w ? 3 : 2,
                                          (tg_tensor *[]){dl, labels, w}, &p);
            return tg_add(g, b, x);
        }
        }
    }
    switch (c->kind) {
    case 0:
        return tg_cross_entropy_ex(g, x, labels, w, lp);
    case 1:
        return tg_nll_loss_ex(g, tg_log_softmax(g, x, 1), labels, w, lp);
    case 2:
        return tg_nll_loss_ex(g, x, labels, w, lp);
    default:
        return tg_mse_loss(g, x, target);
    }
}

static const char *kind_name[] = {"cross_entropy", "nll(log_softmax)", "nll", "mse"};

/* The class losses' variants beyond the plain mean: ignore_index (label 1),
 * sum and none, class weights, N-D scores [N, C, d], f32 labels. */
static const loss_case variants[] = {
    {.red = TG_LOSS_MEAN, .ii = true},
    {.red = TG_LOSS_SUM},
    {.red = TG_LOSS_NONE, .ii = true, .weights = true},
    {.red = TG_LOSS_MEAN, .ii = true, .weights = true, .d = 3},
    {.red = TG_LOSS_SUM, .d = 2, .f32_labels = true},
    {.red = TG_LOSS_NONE, .d = 4},
    /* what --loss cross-entropy is for a segmentation model: the mean over
     * every pixel of [N, C, H, W] against labels [N, H, W] */
    {.red = TG_LOSS_MEAN, .d = 2, .d2 = 3},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

static void label_of(char *buf, size_t cap, const loss_case *c)
{
    static const char *red[] = {"mean", "sum", "none"};
    snprintf(buf, cap, "%s%s %s%s%s%s%s", kind_name[c->kind], c->second ? " second order" : "",
             c->kind == 3 ? "" : red[c->red], c->ii ? " ignore_index" : "",
             c->weights ? " weights" : "",
             c->d2  ? " [N, C, H, W]"
             : c->d ? " N-D"
                    : "",
             c->f32_labels ? " f32 labels" : "");
}

static void test_gradcheck(void)
{
    for (int kind = 0; kind < 4; kind++)
        for (int second = 0; second <= 1; second++)
            for (int v = -1; v < (kind == 3 ? 0 : N_VARIANTS); v++) {
                loss_case c = v < 0 ? (loss_case){0} : variants[v];
                c.kind = kind, c.n = 6, c.c = 5, c.second = second;
                char label[128];
                label_of(label, sizeof label, &c);
                /* labels (7k + 3) mod 5 cover every class */
                tg_gradcheck(label, build_loss, &c, (tg_check_opts){.int_range = 5});
            }
}

static void test_kernels(void)
{
    for (int kind = 0; kind < 4; kind++)
        for (int second = 0; second <= 1; second++)
            for (int v = -1; v < (kind == 3 ? 0 : N_VARIANTS); v++)
                for (int threads = 1; threads <= 2; threads++) {
                    loss_case c = v < 0 ? (loss_case){0} : variants[v];
                    c.kind = kind, c.n = 6, c.c = 5, c.second = second;
                    char label[128];
                    label_of(label, sizeof label, &c);
                    tg_check_kernels(label, build_loss, &c, threads, 1e-5,
                                     (tg_check_opts){.int_range = 5});
                    /* 4096 x 10: the pool path, partial sums from two threads
                     * (700 x 10 x 2 x 3 for [N, C, H, W]: about as many rows) */
                    c.n = c.d2 ? 700 : 4096, c.c = 10;
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
    const tg_kernel_def *kd = tg_backend_cpu.kernel(node->op);
    size_t sb = kd->scratch ? kd->scratch(node, threads) : 0;
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
    kd->forward(&a);
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
    tg_loss_set_classes(&p, 4);
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

/* Weights [1, 2, 3], ignore_index 0, logits [[1, 2, 3], [1, 1, 1], [0, 0, 5]],
 * labels [2, 0, 1] (row 1 ignored), and the same labels as f32: PyTorch's
 * cross_entropy in float64 gives these losses and gradients. */
static void test_ignore_weights(void)
{
    static const double want_loss[3] = {2.24991793935520779, 11.24958969677603982, 0};
    static const double want_none[3] = {1.22281789333314128, 0, 10.02677180344289809};
    static const double sum_grad[9] = {
        0.27009171951114130, 0.73418541316439290,  -1.00427713267553465, 0, 0, 0,
        0.01329670895773201, -1.98670329104226795, 1.97340658208453590};
    for (int red = TG_LOSS_MEAN; red <= TG_LOSS_NONE; red++)
        for (int f32 = 0; f32 <= 1; f32++) {
            tg_graph *g = tg_graph_create();
            tg_tensor *x = tg_input(g, "logits", TG_F32, tg_shape2(3, 3));
            tg_tensor *l = tg_input(g, "labels", f32 ? TG_F32 : TG_I32, tg_shape1(3));
            tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape1(3));
            tg_loss_params lp = {(tg_loss_reduction)red, true, 0};
            tg_tensor *ce = tg_cross_entropy_ex(g, x, l, w, lp);
            tg_shape ds = red == TG_LOSS_NONE ? tg_shape1(3) : tg_shape_of(0, NULL);
            tg_tensor *one = tg_constant(g, ds, 1.0f);
            tg_node_params p = {0};
            tg_loss_set_reduce(&p, red), tg_loss_set_has_ignore_index(&p, 1);
            tg_loss_set_ignore_index(&p, 0);
            tg_tensor *ceb =
                tg_node_create(g, TG_OP_CROSS_ENTROPY_BWD, 4, (tg_tensor *[]){one, x, l, w}, &p);
            TG_CHECK_OK(tg_graph_status(g));
            float xf[9] = {1, 2, 3, 1, 1, 1, 0, 0, 5}, wf[3] = {1, 2, 3}, onef[3] = {1, 1, 1};
            int32_t li[3] = {2, 0, 1};
            float lf[3] = {2, 0, 1};
            double xd[9], wd[3] = {1, 2, 3}, ld[3] = {2, 0, 1}, oned[3] = {1, 1, 1};
            for (int k = 0; k < 9; k++)
                xd[k] = xf[k];
            void *lab = f32 ? (void *)lf : (void *)li;
            for (int threads = 1; threads <= 2; threads++) {
                float of[9];
                double od[9];
                run_both(ce, (void *[]){xf, lab, wf}, (double *[]){xd, ld, wd}, of, od, threads);
                for (int k = 0; k < (red == TG_LOSS_NONE ? 3 : 1); k++) {
                    double want = red == TG_LOSS_NONE ? want_none[k] : want_loss[red];
                    TG_CHECK_NEAR(of[k], want, 1e-6 * fabs(want) + 1e-7);
                    TG_CHECK_NEAR(od[k], want, 1e-13);
                }
                run_both(ceb, (void *[]){onef, xf, lab, wf}, (double *[]){oned, xd, ld, wd}, of, od,
                         threads);
                /* mean divides the sum's gradient by the weights of rows 0 and
                 * 2 */
                double scale = red == TG_LOSS_MEAN ? 1.0 / 5 : 1.0;
                for (int k = 0; k < 9; k++) {
                    TG_CHECK_NEAR(of[k], sum_grad[k] * scale, 1e-6);
                    TG_CHECK_NEAR(od[k], sum_grad[k] * scale, 1e-14);
                }
            }
            tg_graph_destroy(g);
        }
}

/* A mean over only ignored rows (a masked LM's micro-batch with no masked
 * token) is 0 with a zero gradient, not PyTorch's 0/0 = NaN, which stopped
 * the run as diverged; a sum is 0 too. Fast kernels and the reference. */
static void test_all_ignored(void)
{
    for (int red = TG_LOSS_MEAN; red <= TG_LOSS_SUM; red++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "logits", TG_F32, tg_shape2(2, 3));
        tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(2));
        tg_tensor *ce = tg_cross_entropy_ex(g, x, l, NULL,
                                            (tg_loss_params){(tg_loss_reduction)red, true, -100});
        tg_tensor *one = tg_constant(g, tg_shape_of(0, NULL), 1.0f);
        tg_tensor *d =
            tg_node_create(g, TG_OP_CROSS_ENTROPY_BWD, 3, (tg_tensor *[]){one, x, l}, &ce->p);
        TG_CHECK_OK(tg_graph_status(g));
        float xf[6] = {1, 2, 3, 4, 5, 6}, of[1], onef = 1, gf[6];
        int32_t li[2] = {-100, -100};
        double xd[6] = {1, 2, 3, 4, 5, 6}, ld[2] = {-100, -100}, od[1], oned = 1, gd[6];
        run_both(ce, (void *[]){xf, li}, (double *[]){xd, ld}, of, od, 1);
        TG_CHECK(of[0] == 0 && od[0] == 0);
        run_both(d, (void *[]){&onef, xf, li}, (double *[]){&oned, xd, ld}, gf, gd, 1);
        for (int k = 0; k < 6; k++)
            TG_CHECK(gf[k] == 0 && gd[k] == 0);
        tg_graph_destroy(g);
    }
}

/* Labels outside [0, C), not the ignore_index, are refused by the op's
 * check (tg_op_def.check) naming the labels, the value, the sample and
 * position, and the range; PyTorch raises for them too. */
static void test_labels_check(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "logits", TG_F32, tg_shape3(2, 3, 4));
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape2(2, 4));
    tg_tensor *ce = tg_cross_entropy_ex(g, x, l, NULL, (tg_loss_params){TG_LOSS_MEAN, true, -100});
    tg_tensor *nll = tg_nll_loss(g, x, l);
    TG_CHECK_OK(tg_graph_status(g));
    const tg_op_def *def = tg_op_get(TG_OP_CROSS_ENTROPY);
    int32_t li[8] = {0, 1, 2, -100, 2, 1, 3, 0};
    tg_kernel_args a = {.node = ce, .in = {NULL, li}};
    char msg[320] = "";
    TG_CHECK(!def->check(&a, msg, sizeof msg));
    if (!strstr(msg, "labels 'labels' hold 3 at sample 1, position 2: there are 3 classes, so "
                     "labels must be integers in [0, 3), or the ignore_index -100"))
        tg_test_fail(__FILE__, __LINE__, "message: %s", msg);
    li[6] = -100;
    TG_CHECK(def->check(&a, msg, sizeof msg));
    tg_kernel_args b = {.node = nll, .in = {NULL, li}}; /* no ignore_index: -100 is refused */
    TG_CHECK(!tg_op_get(TG_OP_NLL_LOSS)->check(&b, msg, sizeof msg));
    if (!strstr(msg, "hold -100 at sample 0, position 3") || strstr(msg, "ignore_index"))
        tg_test_fail(__FILE__, __LINE__, "message: %s", msg);
    tg_graph_destroy(g);
}

static void test_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "logits", TG_F32, tg_shape2(4, 10));
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(5));
    TG_CHECK(tg_cross_entropy(g, x, l) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_SHAPE,
                     "cross_entropy: labels [5] do not match logits [4, 10] (expected [4])");

    g = tg_graph_create();
    x = tg_input(g, "logits", TG_F32, tg_shape2(4, 10));
    l = tg_input(g, "labels", TG_U8, tg_shape1(4));
    TG_CHECK(tg_nll_loss(g, x, l) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_DTYPE, "nll_loss: labels 'labels' is u8, expected i32");

    g = tg_graph_create();
    x = tg_input(g, "logits", TG_F32, tg_shape3(4, 10, 2));
    l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_cross_entropy(g, x, l) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_SHAPE,
                     "labels [4] do not match logits [4, 10, 2] (expected [4, 2])");

    g = tg_graph_create();
    x = tg_input(g, "logits", TG_F32, tg_shape2(4, 10));
    l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape1(9));
    TG_CHECK(tg_cross_entropy_ex(g, x, l, w, (tg_loss_params){TG_LOSS_MEAN, false, 0}) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_SHAPE, "weights [9] must be [10], one per class");

    g = tg_graph_create();
    x = tg_input(g, "logits", TG_F32, tg_shape2(4, 10));
    l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_nll_loss_ex(g, x, l, NULL, (tg_loss_params){(tg_loss_reduction)7, false, 0}) ==
             NULL);
    TG_CHECK_REFUSED(g, TG_ERR_INVALID_ARG, "reduction 7 is not mean, sum or none");

    /* class weights that would need a gradient are refused, not ignored */
    g = tg_graph_create();
    x = tg_param(g, "logits", tg_shape2(4, 10), U);
    l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    w = tg_param(g, "w", tg_shape1(10), U);
    TG_CHECK(tg_graph_backward(
                 g, tg_cross_entropy_ex(g, x, l, w, (tg_loss_params){TG_LOSS_MEAN, false, 0})) ==
             TG_ERR_UNSUPPORTED);
    if (!strstr(tg_error_message(), "gradient of the class weights 'w' is not supported"))
        tg_test_fail(__FILE__, __LINE__, "error '%s'", tg_error_message());
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "a", TG_F32, tg_shape2(4, 10));
    tg_tensor *y = tg_input(g, "b", TG_F32, tg_shape1(10));
    TG_CHECK(tg_mse_loss(g, x, y) == NULL);
    TG_CHECK_REFUSED(g, TG_ERR_SHAPE, "mse_loss: input [4, 10] and target [10] differ in shape");
}

int main(void)
{
    TG_RUN(test_values);
    TG_RUN(test_bad_labels);
    TG_RUN(test_ignore_weights);
    TG_RUN(test_all_ignored);
    TG_RUN(test_labels_check);
    TG_RUN(test_errors);
    TG_RUN(test_gradcheck);
    TG_RUN(test_kernels);
    return tg_test_finish();
}
