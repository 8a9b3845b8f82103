/* tests/ops/test_resize.c - RESIZE and RESIZE_BWD (ops/resize.c): every
 * coordinate mode and nearest rounding, enlarging and shrinking, from
 * scales and from sizes: the gradient against finite differences, the fast
 * kernels against the reference, values against torch's F.interpolate in
 * float64, and the shapes and parameters refused. */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "runtime/interp.h"

#include <math.h>
#include <string.h>

typedef struct {
    tg_shape shape;
    tg_resize_params p;
    bool bwd; /* RESIZE_BWD itself, its input dy a parameter */
} rs_case;

static tg_tensor *build(tg_graph *g, void *ctx)
{
    const rs_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -2, 2};
    if (!c->bwd)
        return tg_resize(g, tg_param(g, "x", c->shape, u), &c->p);
    /* the forward node made on an input, for its params and dy's shape */
    tg_tensor *y = tg_resize(g, tg_input(g, "x", TG_F32, c->shape), &c->p);
    if (!y)
        return NULL;
    tg_tensor *dy = tg_param(g, "dy", y->shape, u);
    return tg_node_create(g, TG_OP_RESIZE_BWD, 1, &dy, &y->p);
}

/* A sweep of modes over shrinking and enlarging, from scales and sizes. */
static int cases(rs_case *out)
{
    int n = 0;
    const struct {
        int64_t h, w, oh, ow;
        float sh, sw;
    } sz[] = {{3, 4, 6, 8, 2, 2},
              {5, 7, 8, 3, 0, 0},
              {4, 6, 2, 3, 0.5f, 0.5f},
              {4, 5, 6, 5, 1.6f, 1.1f},
              {1, 3, 2, 1, 0, 0}};
    for (int s = 0; s < 5; s++)
        for (int mode = 0; mode <= 1; mode++)
            for (int coord = 0; coord <= TG_RESIZE_HALF_PIXEL_SYMMETRIC; coord++) {
                int nearest = (s + coord) % 4; /* each rounding meets several modes */
                rs_case c = {tg_shape4(2, 3, sz[s].h, sz[s].w),
                             {(tg_resize_mode)mode, (tg_resize_coord)coord,
                              (tg_resize_nearest)nearest, sz[s].oh, sz[s].ow, sz[s].sh, sz[s].sw},
                             false};
                out[n++] = c;
            }
    return n;
}

static void label_of(const rs_case *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s coord %d round %d %lldx%lld to %lldx%lld%s",
             c->p.mode ? "linear" : "nearest", (int)c->p.coord, (int)c->p.nearest,
             (long long)c->shape.dim[2], (long long)c->shape.dim[3], (long long)c->p.out_h,
             (long long)c->p.out_w, c->bwd ? " backward" : "");
}

static void test_gradcheck(void)
{
    rs_case all[64];
    int n = cases(all);
    for (int k = 0; k < n; k++)
        for (int bwd = 0; bwd <= 1; bwd++) {
            rs_case c = all[k];
            c.bwd = bwd;
            char label[128];
            label_of(&c, label, sizeof label);
            tg_gradcheck(label, build, &c, (tg_check_opts){.max_elems = 24});
        }
}

static void test_kernels(void)
{
    rs_case all[64];
    int n = cases(all);
    for (int k = 0; k < n; k++)
        for (int bwd = 0; bwd <= 1; bwd++)
            for (int threads = 1; threads <= 2; threads++) {
                rs_case c = all[k];
                c.bwd = bwd;
                char label[128];
                label_of(&c, label, sizeof label);
                tg_check_kernels(label, build, &c, threads, 2e-5, (tg_check_opts){0});
            }
    /* a larger one through the pool's split over planes */
    rs_case big = {tg_shape4(4, 16, 24, 20),
                   {TG_RESIZE_LINEAR, TG_RESIZE_PYTORCH_HALF_PIXEL, 0, 48, 40, 2, 2},
                   false};
    for (int bwd = 0; bwd <= 1; bwd++)
        for (int threads = 1; threads <= 2; threads++) {
            big.bwd = bwd;
            tg_check_kernels("linear large", build, &big, threads, 1e-3, (tg_check_opts){0});
        }
}

/* torch.nn.functional.interpolate in float64 on x [1, 1, 3, 4], with the
 * ONNX modes torch exports it as: nearest = asymmetric + floor, bilinear =
 * pytorch_half_pixel, align_corners=True = align_corners. */
static const double X[12] = {0.0, 0.5, 3.0, 0.5, 0.0, 1.5, -2.0, -3.5, -3.0, -0.5, -3.0, -3.5};
static const double nearest_x2[48] = {
    0.0,  0.0,  0.5,  0.5,  3.0,  3.0,  0.5,  0.5,  0.0,  0.0,  0.5,  0.5,  3.0,  3.0,  0.5,  0.5,
    0.0,  0.0,  1.5,  1.5,  -2.0, -2.0, -3.5, -3.5, 0.0,  0.0,  1.5,  1.5,  -2.0, -2.0, -3.5, -3.5,
    -3.0, -3.0, -0.5, -0.5, -3.0, -3.0, -3.5, -3.5, -3.0, -3.0, -0.5, -0.5, -3.0, -3.0, -3.5, -3.5};
static const double nearest_5x3[15] = {0.0,  0.5, 3.0, 0.0,  0.5,  3.0,  0.0, 1.5,
                                       -2.0, 0.0, 1.5, -2.0, -3.0, -0.5, -3.0};
static const double bilinear_5x3[15] = {0.08333333333333331,
                                        1.75,
                                        0.9166666666666674,
                                        0.14999999999999997,
                                        0.9500000000000004,
                                        -0.7499999999999992,
                                        0.24999999999999994,
                                        -0.25,
                                        -3.2499999999999996,
                                        -1.4499999999999997,
                                        -1.15,
                                        -3.3499999999999996,
                                        -2.583333333333334,
                                        -1.7499999999999998,
                                        -3.416666666666666};
static const double bilinear_x2[48] = {
    0.0,     0.125,   0.375,   1.125,   2.375,   2.375,   1.125,   0.5,     0.0,     0.1875,
    0.5625,  1.0,     1.5,     1.1875,  0.0625,  -0.5,    0.0,     0.3125,  0.9375,  0.75,
    -0.25,   -1.1875, -2.0625, -2.5,    -0.75,   -0.3125, 0.5625,  0.1875,  -1.4375, -2.5625,
    -3.1875, -3.5,    -2.25,   -1.6875, -0.5625, -0.6875, -2.0625, -2.9375, -3.3125, -3.5,
    -3.0,    -2.375,  -1.125,  -1.125,  -2.375,  -3.125,  -3.375,  -3.5};
static const double align_5x6[30] = {0.0,  0.3,  1.0,  2.5,  2.0,  0.5,  0.0,  0.6,  0.9,  0.6,
                                     -0.3, -1.5, 0.0,  0.9,  0.8,  -1.3, -2.6, -3.5, -1.5, -0.3,
                                     -0.1, -1.9, -2.9, -3.5, -3.0, -1.5, -1.0, -2.5, -3.2, -3.5};

static void check_values(const char *label, tg_resize_params p, const double *want)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 3, 4));
    tg_tensor *y = tg_resize(g, x, &p);
    TG_CHECK_OK(tg_graph_status(g));
    int64_t n = p.out_h * p.out_w;
    float xf[12], out[64];
    double xd[12], outd[64];
    for (int k = 0; k < 12; k++)
        xf[k] = (float)X[k], xd[k] = X[k];
    char scratch[4096];
    tg_pool *pool = tg_pool_create(2);
    tg_kernel_args a = {.node = y, .in = {xf}, .out = out, .pool = pool, .scratch = scratch};
    tg_backend_cpu.kernel(TG_OP_RESIZE)->forward(&a);
    tg_ref_args r = {.node = y, .in = {xd}, .out = outd};
    tg_op_get(TG_OP_RESIZE)->reference(&r);
    int bad = 0;
    for (int64_t k = 0; k < n; k++) {
        bad += !(fabs(out[k] - want[k]) <= 1e-6) || !(fabs(outd[k] - want[k]) <= 1e-12);
        if (bad == 1 && (!(fabs(out[k] - want[k]) <= 1e-6) || !(fabs(outd[k] - want[k]) <= 1e-12)))
            tg_test_fail(__FILE__, __LINE__,
                         "%s: element %lld is %.9g (reference %.17g), torch %.17g", label,
                         (long long)k, (double)out[k], outd[k], want[k]);
    }
    TG_CHECK(bad == 0);
    tg_pool_destroy(pool);
    tg_graph_destroy(g);
}

static void test_against_pytorch(void)
{
    check_values(
        "nearest x2",
        (tg_resize_params){TG_RESIZE_NEAREST, TG_RESIZE_ASYMMETRIC, TG_RESIZE_FLOOR, 6, 8, 2, 2},
        nearest_x2);
    check_values(
        "nearest 5x3",
        (tg_resize_params){TG_RESIZE_NEAREST, TG_RESIZE_ASYMMETRIC, TG_RESIZE_FLOOR, 5, 3, 0, 0},
        nearest_5x3);
    check_values("bilinear 5x3",
                 (tg_resize_params){TG_RESIZE_LINEAR, TG_RESIZE_PYTORCH_HALF_PIXEL, 0, 5, 3, 0, 0},
                 bilinear_5x3);
    check_values("bilinear x2",
                 (tg_resize_params){TG_RESIZE_LINEAR, TG_RESIZE_PYTORCH_HALF_PIXEL, 0, 6, 8, 2, 2},
                 bilinear_x2);
    check_values("bilinear align_corners 5x6",
                 (tg_resize_params){TG_RESIZE_LINEAR, TG_RESIZE_ALIGN_CORNERS, 0, 5, 6, 0, 0},
                 align_5x6);
}

static void test_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(1, 2, 3));
    tg_resize_params p = {TG_RESIZE_LINEAR, TG_RESIZE_HALF_PIXEL, 0, 4, 4, 0, 0};
    TG_CHECK(tg_resize(g, x, &p) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "resize: x is [1, 2, 3]; it resizes the last two axes") !=
             NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 2, 3, 3));
    p.out_h = 0;
    TG_CHECK(tg_resize(g, x, &p) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "sizes 0x4 from 3x3: each must be >= 1") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 2, 3, 3));
    p.out_h = 4, p.scale_h = -1;
    TG_CHECK(tg_resize(g, x, &p) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "scales -1, 0") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_gradcheck);
    TG_RUN(test_kernels);
    TG_RUN(test_against_pytorch);
    TG_RUN(test_errors);
    return tg_test_finish();
}
