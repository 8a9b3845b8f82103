/* backend/cpu/activation_kernels.c - the cpu backend's ACTIVATION and
 * ACTIVATION_BWD kernel (ops/activation.c is what they are and says the
 * derivatives at the kinks): one formula per element in float over the
 * device's pool, the cheap ones in loops of their own that GCC vectorises. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/unary.h"

#include "core/clones.h"
#include "core/check.h"

#include <math.h>

static float softplusf(float x)
{
    return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

/* u clipped to [0, 1] as fmaxf(0.0f, fminf(1.0f, u)) gives it, bit for
 * bit (NaN to 1, -0 to +0), but in comparisons the compiler vectorises:
 * fminf and fmaxf are calls into libm at -O2 (their NaN and signed-zero
 * rules), which held hard swish and hard sigmoid to about 10 ns an element,
 * a quarter of MobileNetV3's run at batch 1. */
static inline float clip01(float u)
{
    float v = u < 1.0f ? u : 1.0f;
    return v > 0.0f ? v : 0.0f;
}

TG_WIDE_KERNEL static void hard_sigmoid_loop(const float *x, float *o, int64_t n, float a, float b)
{
    for (int64_t q = 0; q < n; q++)
        o[q] = clip01(a * x[q] + b);
}

TG_WIDE_KERNEL static void hard_swish_loop(const float *x, float *o, int64_t n)
{
    for (int64_t q = 0; q < n; q++)
        o[q] = x[q] * clip01(x[q] / 6.0f + 0.5f);
}

/* The cheap ones get loops of their own, which GCC vectorises. */
static void act_forward(tg_act f, const float *x, float *o, int64_t n, float a, float b)
{
    switch (f) {
    case TG_ACT_HARD_SIGMOID:
        hard_sigmoid_loop(x, o, n, a, b);
        return;
    case TG_ACT_HARD_SWISH:
        hard_swish_loop(x, o, n);
        return;
    case TG_ACT_SOFTSIGN:
        for (int64_t q = 0; q < n; q++)
            o[q] = x[q] / (1.0f + fabsf(x[q]));
        return;
    case TG_ACT_FLOOR:
        for (int64_t q = 0; q < n; q++)
            o[q] = floorf(x[q]);
        return;
    case TG_ACT_CEIL:
        for (int64_t q = 0; q < n; q++)
            o[q] = ceilf(x[q]);
        return;
    default: /* the others one element at a time, below */
        break;
    }
    for (int64_t q = 0; q < n; q++) {
        float v = x[q], r;
        switch (f) {
        case TG_ACT_SILU:
            r = v / (1.0f + expf(-v));
            break;
        case TG_ACT_MISH:
            r = v * tanhf(softplusf(v));
            break;
        case TG_ACT_ELU:
            r = v > 0 ? v : a * expm1f(v);
            break;
        case TG_ACT_CELU:
            r = v > 0 ? v : a * expm1f(v / a);
            break;
        case TG_ACT_SELU:
            r = b * (v > 0 ? v : a * expm1f(v));
            break;
        case TG_ACT_SOFTPLUS:
            r = softplusf(v);
            break;
        case TG_ACT_SIGN:
            r = v > 0 ? 1.0f : v < 0 ? -1.0f : v;
            break;
        case TG_ACT_ROUND:
            r = nearbyintf(v);
            break;
        case TG_ACT_COS:
            r = cosf(v);
            break;
        case TG_ACT_SIN:
            r = sinf(v);
            break;
        case TG_ACT_ACOS:
            r = acosf(v);
            break;
        case TG_ACT_ASIN:
            r = asinf(v);
            break;
        case TG_ACT_ATAN:
            r = atanf(v);
            break;
        case TG_ACT_ACOSH:
            r = acoshf(v);
            break;
        case TG_ACT_ASINH:
            r = asinhf(v);
            break;
        case TG_ACT_ATANH:
            r = atanhf(v);
            break;
        case TG_ACT_COSH:
            r = coshf(v);
            break;
        case TG_ACT_SINH:
            r = sinhf(v);
            break;
        case TG_ACT_THRESHOLDED_RELU:
            r = v > a ? v : 0.0f;
            break;
        case TG_ACT_SHRINK:
            r = v < -a ? v + b : v > a ? v - b : 0.0f;
            break;
        case TG_ACT_TAN:
            r = tanf(v);
            break;
        default:
            TG_UNREACHABLE("activation", f);
        }
        o[q] = r;
    }
}

/* o = dy * f'(x). */
static void act_backward(tg_act f, const float *dy, const float *x, float *o, int64_t n, float a,
                         float b)
{
    for (int64_t q = 0; q < n; q++) {
        float v = x[q], d;
        switch (f) {
        case TG_ACT_HARD_SIGMOID: {
            float u = a * v + b;
            d = u > 0 && u < 1 ? a : 0.0f;
            break;
        }
        case TG_ACT_HARD_SWISH:
            d = v < -3.0f ? 0.0f : v < 3.0f ? v / 3.0f + 0.5f : 1.0f;
            break;
        case TG_ACT_SILU: {
            float s = 1.0f / (1.0f + expf(-v));
            d = s * (1.0f + v * (1.0f - s));
            break;
        }
        case TG_ACT_MISH: {
            float t = tanhf(softplusf(v)), s = 1.0f / (1.0f + expf(-v));
            d = t + v * s * (1.0f - t * t);
            break;
        }
        case TG_ACT_ELU:
            d = v > 0 ? 1.0f : a * expf(v);
            break;
        case TG_ACT_CELU:
            d = v > 0 ? 1.0f : expf(v / a);
            break;
        case TG_ACT_SELU:
            d = b * (v > 0 ? 1.0f : a * expf(v));
            break;
        case TG_ACT_SOFTPLUS:
            d = 1.0f / (1.0f + expf(-v));
            break;
        case TG_ACT_SOFTSIGN: {
            float u = 1.0f + fabsf(v);
            d = 1.0f / (u * u);
            break;
        }
        case TG_ACT_COS:
            d = -sinf(v);
            break;
        case TG_ACT_SIN:
            d = cosf(v);
            break;
        case TG_ACT_TAN: {
            float t = tanf(v);
            d = 1.0f + t * t;
            break;
        }
        case TG_ACT_ACOS:
            d = -1.0f / sqrtf(1.0f - v * v);
            break;
        case TG_ACT_ASIN:
            d = 1.0f / sqrtf(1.0f - v * v);
            break;
        case TG_ACT_ATAN:
            d = 1.0f / (1.0f + v * v);
            break;
        case TG_ACT_ACOSH:
            d = 1.0f / sqrtf(v * v - 1.0f);
            break;
        case TG_ACT_ASINH:
            d = 1.0f / sqrtf(v * v + 1.0f);
            break;
        case TG_ACT_ATANH:
            d = 1.0f / (1.0f - v * v);
            break;
        case TG_ACT_COSH:
            d = sinhf(v);
            break;
        case TG_ACT_SINH:
            d = coshf(v);
            break;
        case TG_ACT_THRESHOLDED_RELU:
            d = v > a ? 1.0f : 0.0f;
            break;
        case TG_ACT_SHRINK:
            d = v < -a || v > a ? 1.0f : 0.0f;
            break;
        case TG_ACT_SIGN:
        case TG_ACT_FLOOR:
        case TG_ACT_CEIL:
        case TG_ACT_ROUND:
            d = 0.0f;
            break;
        default:
            TG_UNREACHABLE("activation", f);
        }

        o[q] = dy[q] * d;
    }
}

typedef struct act_job {
    const tg_tensor *node;
    const float *x, *y;
    float *out;
} act_job;

static void act_range(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const act_job *j = ctx;
    tg_act f = (tg_act)tg_act_fn(j->node);
    float a = tg_act_a(j->node), b = tg_act_b(j->node);
    if (j->node->op == TG_OP_ACTIVATION)
        act_forward(f, j->x + begin, j->out + begin, end - begin, a, b);
    else
        act_backward(f, j->x + begin, j->y + begin, j->out + begin, end - begin, a, b);
}

static void fwd_act(const tg_kernel_args *a)
{
    act_job j = {a->node, a->in[0], a->node->n_in > 1 ? a->in[1] : NULL, a->out};
    int64_t n = tg_numel(a->node);
    tg_par_for(a->pool, n, n * 4, act_range, &j);
}

const tg_kernel_def tg_cpu_kernel_ACTIVATION = {.forward = fwd_act};
const tg_kernel_def tg_cpu_kernel_ACTIVATION_BWD = {.forward = fwd_act};
