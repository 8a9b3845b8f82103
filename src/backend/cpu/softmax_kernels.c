/* backend/cpu/softmax_kernels.c - the cpu backend's kernels for softmax,
 * log-softmax and their gradients (ops/softmax.c is what they are): one
 * lane per (outer, inner) position over the device's pool, the exponentials
 * and their sum vectorised (backend/cpu/vmath.h). */
#include "backend/backend.h"
#include "backend/cpu/vmath.h"
#include "ops/unary.h"

#include "core/check.h"
#include "ops/broadcast.h" /* tg_par_for */

#include <math.h>

typedef struct sm_job {
    tg_op op;
    tg_softmax_lanes l;
    const float *x, *y; /* forward: x; backward: x = dy, y = y */
    float *out;
} sm_job;

/* One lane: n elements at stride st. Sums accumulate in double so long
 * lanes keep full float accuracy. */
static void lane(tg_op op, const float *x, const float *y, float *o, int64_t n, int64_t st)
{
    switch (op) {
    case TG_OP_SOFTMAX:
    case TG_OP_LOG_SOFTMAX: {
        float m = -INFINITY;
        for (int64_t q = 0; q < n; q++)
            m = x[q * st] > m ? x[q * st] : m;
        if (m == -INFINITY)
            m = 0; /* an all -inf lane has no mass: the result is NaN, as in PyTorch */
        double s = 0;
        if (op == TG_OP_SOFTMAX && st == 1) {
            /* the last axis (attention's scores): vectorised exp */
            float inv = (float)(1.0 / tg_vexp_sum(x, o, n, m));
            for (int64_t q = 0; q < n; q++)
                o[q] *= inv;
        } else if (op == TG_OP_SOFTMAX) {
            for (int64_t q = 0; q < n; q++) {
                float e = expf(x[q * st] - m);
                o[q * st] = e;
                s += e;
            }
            float inv = (float)(1.0 / s);
            for (int64_t q = 0; q < n; q++)
                o[q * st] *= inv;
        } else {
            for (int64_t q = 0; q < n; q++)
                s += expf(x[q * st] - m);
            /* (x - m) - log(s), not x - (m + log(s)): with large logits m +
             * log(s) would round away log(s)'s low bits */
            float ls = (float)log(s);
            for (int64_t q = 0; q < n; q++)
                o[q * st] = (x[q * st] - m) - ls;
        }
        break;
    }
    case TG_OP_SOFTMAX_BWD: {
        double s = 0;
        for (int64_t q = 0; q < n; q++)
            s += (double)x[q * st] * y[q * st];
        float sf = (float)s;
        for (int64_t q = 0; q < n; q++)
            o[q * st] = y[q * st] * (x[q * st] - sf);
        break;
    }
    case TG_OP_LOG_SOFTMAX_BWD: {
        double s = 0;
        for (int64_t q = 0; q < n; q++)
            s += x[q * st];
        float sf = (float)s;
        for (int64_t q = 0; q < n; q++)
            o[q * st] = x[q * st] - expf(y[q * st]) * sf;
        break;
    }
    default:
        TG_UNREACHABLE_OP(op);
    }
}

static void sm_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const sm_job *j = ctx;
    int64_t L = j->l.len, I = j->l.inner;
    for (int64_t u = begin; u < end; u++) {
        int64_t off = (u / I) * L * I + u % I;
        lane(j->op, j->x + off, j->y + off, j->out + off, L, I);
    }
}

static void fwd_softmax(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    sm_job j = {node->op, tg_softmax_lanes_of(node), a->in[0], node->n_in > 1 ? a->in[1] : a->in[0],
                a->out};
    if (tg_numel(node) == 0)
        return;
    TG_ASSERT(j.l.outer * j.l.len * j.l.inner == tg_numel(node));
    tg_par_for(a->pool, j.l.outer * j.l.inner, tg_numel(node), sm_range, &j);
}

const tg_kernel_def tg_cpu_kernel_SOFTMAX = {.forward = fwd_softmax};
const tg_kernel_def tg_cpu_kernel_LOG_SOFTMAX = {.forward = fwd_softmax};
const tg_kernel_def tg_cpu_kernel_SOFTMAX_BWD = {.forward = fwd_softmax};
const tg_kernel_def tg_cpu_kernel_LOG_SOFTMAX_BWD = {.forward = fwd_softmax};
