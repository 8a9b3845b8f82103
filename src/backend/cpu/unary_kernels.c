/* backend/cpu/unary_kernels.c - the cpu backend's kernel for the unary
 * family (ops/unary.c is what they are): one formula per element over the
 * device's pool, GELU and its gradient vectorised (backend/cpu/vmath.h). */
#include "backend/backend.h"
#include "backend/cpu/vmath.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/unary.h"

#include "core/check.h"

#include <math.h>

#define INV_SQRT_2PI 0.39894228040143267794
#define TWO_OVER_SQRT_PI 1.12837916709551257390

typedef struct map_job {
    tg_op op;
    const float *x, *y; /* y: second input of the _BWD ops */
    float *out;
    float s, b; /* SCALE */
    int order;  /* GELU_BWD */
    int form;   /* GELU, GELU_BWD: 0 erf, 1 tanh */
} map_job;

/* The math functions and the activations with parameters (s, b: ops/unary.h); kept apart from
 * map_range so that each switch stays short. */
static void map_math(tg_op op, const float *x, const float *y, float *o, int64_t n, float s,
                     float b)
{
    const float c = (float)TWO_OVER_SQRT_PI;
    switch (op) {
    case TG_OP_ERF:
        for (int64_t q = 0; q < n; q++)
            o[q] = erff(x[q]);
        break;
    case TG_OP_ERF_BWD: /* x = dy, y = the forward input */
        for (int64_t q = 0; q < n; q++)
            o[q] = x[q] * c * expf(-y[q] * y[q]);
        break;
    case TG_OP_EXP:
        for (int64_t q = 0; q < n; q++)
            o[q] = expf(x[q]);
        break;
    case TG_OP_LOG:
        for (int64_t q = 0; q < n; q++)
            o[q] = logf(x[q]);
        break;
    case TG_OP_SQRT:
        for (int64_t q = 0; q < n; q++)
            o[q] = sqrtf(x[q]);
        break;
    case TG_OP_NEG:
        for (int64_t q = 0; q < n; q++)
            o[q] = -x[q];
        break;
    case TG_OP_ABS:
        for (int64_t q = 0; q < n; q++)
            o[q] = fabsf(x[q]);
        break;
    case TG_OP_ABS_BWD: /* dy * sign(x), sign(0) = 0 as PyTorch */
        for (int64_t q = 0; q < n; q++) {
            float d = x[q];
            o[q] = y[q] > 0.0f ? d : y[q] < 0.0f ? -d : 0.0f;
        }
        break;
    case TG_OP_RECIPROCAL:
        for (int64_t q = 0; q < n; q++)
            o[q] = 1.0f / x[q];
        break;
    case TG_OP_LEAKY_RELU: /* s = alpha; NaN passes through */
        for (int64_t q = 0; q < n; q++)
            o[q] = x[q] > 0.0f ? x[q] : x[q] * s;
        break;
    case TG_OP_LEAKY_RELU_BWD:
        for (int64_t q = 0; q < n; q++) {
            float d = x[q];
            o[q] = y[q] > 0.0f ? d : d * s;
        }
        break;
    case TG_OP_CLIP: /* s = min, b = max; min > max gives max (as numpy and PyTorch) */
        for (int64_t q = 0; q < n; q++) {
            float v = x[q] < s ? s : x[q];
            o[q] = v > b ? b : v;
        }
        break;
    case TG_OP_CLIP_BWD: /* y = the output: strictly inside (min, max) iff x is */
        for (int64_t q = 0; q < n; q++) {
            float d = x[q], v = y[q];
            o[q] = v > s && v < b ? d : 0.0f;
        }
        break;
    default: /* an op of this file left out of map_range and here */
        TG_UNREACHABLE_OP(op);
    }
}

static void map_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const map_job *j = ctx;
    const float *x = j->x + begin, *y = j->y + begin;
    float *o = j->out + begin;
    int64_t n = end - begin;
    const float r2pi = (float)INV_SQRT_2PI;
    switch (j->op) {
    case TG_OP_RELU:
        for (int64_t q = 0; q < n; q++)
            o[q] = x[q] < 0.0f ? 0.0f : x[q]; /* NaN passes through, as in PyTorch */
        break;
    case TG_OP_RELU_BWD: /* x = dy, y = the forward input or output (same sign) */
        /* dy is loaded whatever the sign: a load under the condition keeps
         * GCC from vectorising, and the branch on random signs mispredicts
         * (4 ns an element against 0.3 ns). */
        for (int64_t q = 0; q < n; q++) {
            float d = x[q];
            o[q] = y[q] > 0.0f ? d : 0.0f;
        }
        break;
    case TG_OP_GELU:
        if (j->form)
            tg_vgelu_tanh(x, o, n);
        else
            tg_vgelu(x, o, n);
        break;
    case TG_OP_GELU_BWD:
        if (j->order == 0) {
            if (j->form)
                tg_vgelu_tanh_bwd(x, y, o, n);
            else
                tg_vgelu_bwd(x, y, o, n);
            break;
        }
        for (int64_t q = 0; q < n; q++) /* dy * gelu''(x) */
            o[q] = x[q] * (j->form ? (float)tg_gelu_tanh_d2(y[q])
                                   : r2pi * expf(-0.5f * y[q] * y[q]) * (2.0f - y[q] * y[q]));
        break;
    case TG_OP_SIGMOID:
        for (int64_t q = 0; q < n; q++)
            o[q] = 1.0f / (1.0f + expf(-x[q]));
        break;
    case TG_OP_SIGMOID_BWD:
        for (int64_t q = 0; q < n; q++)
            o[q] = x[q] * y[q] * (1.0f - y[q]);
        break;
    case TG_OP_TANH:
        for (int64_t q = 0; q < n; q++)
            o[q] = tanhf(x[q]);
        break;
    case TG_OP_TANH_BWD:
        for (int64_t q = 0; q < n; q++)
            o[q] = x[q] * (1.0f - y[q] * y[q]);
        break;
    case TG_OP_SCALE:
        for (int64_t q = 0; q < n; q++)
            o[q] = x[q] * j->s + j->b;
        break;
    case TG_OP_ROUND_HALF:
        tg_round_half(x, o, n, (tg_dtype)j->order);
        break;
    default:
        map_math(j->op, x, y, o, n, j->s, j->b);
        break;
    }
}

static void fwd_map(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    map_job j = {.op = node->op, .x = a->in[0], .out = a->out};
    j.y = node->n_in > 1 ? a->in[1] : a->in[0];
    j.s = tg_unary_s(node);
    j.b = tg_unary_b(node);
    j.order = (int)(node->op == TG_OP_ROUND_HALF ? tg_round_half_to(node) : tg_gelu_order(node));
    j.form = (int)tg_gelu_form(node);
    int64_t n = tg_numel(node);
    TG_ASSERT(tg_numel(node->in[0]) == n && (node->n_in < 2 || tg_numel(node->in[1]) == n));
    tg_par_for(a->pool, n, n, map_range, &j);
}

/* The same kernel for every op of the family (UNARY_DEF in ops/unary.c). */
#define UNARY_KERNEL(E) const tg_kernel_def tg_cpu_kernel_##E = {.forward = fwd_map};
UNARY_KERNEL(RELU)
UNARY_KERNEL(RELU_BWD)
UNARY_KERNEL(GELU)
UNARY_KERNEL(GELU_BWD)
UNARY_KERNEL(SIGMOID)
UNARY_KERNEL(SIGMOID_BWD)
UNARY_KERNEL(TANH)
UNARY_KERNEL(TANH_BWD)
UNARY_KERNEL(SCALE)
UNARY_KERNEL(ERF)
UNARY_KERNEL(ERF_BWD)
UNARY_KERNEL(EXP)
UNARY_KERNEL(LOG)
UNARY_KERNEL(SQRT)
UNARY_KERNEL(NEG)
UNARY_KERNEL(ROUND_HALF)
UNARY_KERNEL(ABS)
UNARY_KERNEL(ABS_BWD)
UNARY_KERNEL(RECIPROCAL)
UNARY_KERNEL(LEAKY_RELU)
UNARY_KERNEL(LEAKY_RELU_BWD)
UNARY_KERNEL(CLIP)
UNARY_KERNEL(CLIP_BWD)
