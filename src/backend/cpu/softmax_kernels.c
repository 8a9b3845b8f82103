/* backend/cpu/softmax_kernels.c - the cpu backend's kernels for softmax,
 * log-softmax and their gradients (ops/softmax.c is what they are): one
 * lane per (outer, inner) position over the device's pool, the maximum,
 * the exponentials and their sum vectorised on the last axis
 * (backend/cpu/vmath.h).
 *
 * A softmax over the last axis (attention's scores) reads and writes
 * operands stored in bf16 in place, a row at a time (softmax_reads_bf16):
 * each row widened to f32, the f32 row's formula, rounded back once, so
 * the bits are those of staging the whole tensor through f32, without the
 * two passes over it (MiniLM's scores at batch 8, [8, 12, 128, 128]: the
 * staged softmax took 2.3x the f32 one).
 */
#include "backend/backend.h"
#include "backend/cpu/vmath.h"
#include "ops/unary.h"

#include "core/bf16.h"
#include "core/check.h"
#include "core/clones.h"
#include "ops/broadcast.h" /* tg_par_for */

#include <math.h>
#include <string.h>

/* 16-float vectors pass between static functions of this file only, so
 * the note that their calling convention differs with AVX-512 is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* The longest row the bf16 kernel widens on its stack. */
#define SOFTMAX_BF16_ROW_MAX 4096

/* softmax of one contiguous row of n, into o (which may be x). */
static void row_softmax(const float *x, float *o, int64_t n)
{
    float m = tg_vmax(x, n, -INFINITY);
    if (m == -INFINITY)
        m = 0; /* an all -inf row has no mass: the result is NaN, as in PyTorch */
    tg_vscale(o, n, (float)(1.0 / tg_vexp_sum(x, o, n, m)));
}

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
        if (op == TG_OP_SOFTMAX && st == 1) {
            row_softmax(x, o, n); /* the last axis (attention's scores) */
            break;
        }
        float m = st == 1 ? tg_vmax(x, n, -INFINITY) : -INFINITY;
        for (int64_t q = 0; st != 1 && q < n; q++)
            m = x[q * st] > m ? x[q * st] : m;
        if (m == -INFINITY)
            m = 0; /* an all -inf lane has no mass: the result is NaN, as in PyTorch */
        double s = 0;
        if (op == TG_OP_SOFTMAX) {
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

typedef struct sm_bf16_job {
    const void *x;
    void *out;
    bool x_bf16, out_bf16;
    int64_t len;
} sm_bf16_job;

/* Rows [begin, end) of a last-axis softmax, each widened into row[] where
 * stored in bf16 (16 at a time by cv, the tail one by one), computed there
 * and rounded back as tg_bf16_narrow rounds. */
TG_VEC_INLINE void bf16_rows(const sm_bf16_job *j, int64_t begin, int64_t end, tg_bf16x16_ops cv)
{
    float row[SOFTMAX_BF16_ROW_MAX];
    int64_t n = j->len;
    for (int64_t r = begin; r < end; r++) {
        int64_t i = 0;
        if (j->x_bf16) {
            const uint16_t *x = (const uint16_t *)j->x + r * n;
            for (; i + 16 <= n; i += 16) {
                tg_f32x16 v = cv.widen(x + i);
                memcpy(row + i, &v, sizeof v);
            }
            for (; i < n; i++)
                row[i] = tg_bf16_widen(x[i]);
        } else {
            memcpy(row, (const float *)j->x + r * n, (size_t)n * sizeof(float));
        }
        if (!j->out_bf16) {
            row_softmax(row, (float *)j->out + r * n, n);
            continue;
        }
        row_softmax(row, row, n);
        tg_bf16_narrow_row(cv, (uint16_t *)j->out + r * n, row, n);
    }
}

TG_BF16_POOL_FNS(bf16_range, bf16_rows, TG_BF16X16_GENERIC, TG_BF16X16_HW)

/* A softmax over a last axis short enough for bf16_rows' stack. */
static bool softmax_reads_bf16(const tg_tensor *node, bool blocked)
{
    if (blocked || node->op != TG_OP_SOFTMAX || tg_numel(node) == 0)
        return false;
    tg_softmax_lanes l = tg_softmax_lanes_of(node);
    return l.inner == 1 && l.len <= SOFTMAX_BF16_ROW_MAX;
}

static void fwd_softmax(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    if (a->in_type[0] == TG_BF16 || a->out_type == TG_BF16) {
        TG_ASSERT(softmax_reads_bf16(node, false));
        sm_bf16_job j = {a->in[0], a->out, a->in_type[0] == TG_BF16, a->out_type == TG_BF16,
                         tg_softmax_lanes_of(node).len};
        int64_t rows = tg_numel(node) / j.len;
        tg_par_for(a->pool, rows, tg_numel(node), TG_BF16_POOL_FN(bf16_range), &j);
        return;
    }
    sm_job j = {node->op, tg_softmax_lanes_of(node), a->in[0], node->n_in > 1 ? a->in[1] : a->in[0],
                a->out};
    if (tg_numel(node) == 0)
        return;
    TG_ASSERT(j.l.outer * j.l.len * j.l.inner == tg_numel(node));
    tg_par_for(a->pool, j.l.outer * j.l.inner, tg_numel(node), sm_range, &j);
}

const tg_kernel_def tg_cpu_kernel_SOFTMAX = {.forward = fwd_softmax,
                                             .reads_bf16 = softmax_reads_bf16};
const tg_kernel_def tg_cpu_kernel_LOG_SOFTMAX = {.forward = fwd_softmax};
const tg_kernel_def tg_cpu_kernel_SOFTMAX_BWD = {.forward = fwd_softmax};
const tg_kernel_def tg_cpu_kernel_LOG_SOFTMAX_BWD = {.forward = fwd_softmax};
