/* backend/cpu/compare_kernels.c - the cpu backend's CAST, COMPARE, LOGICAL
 * and WHERE kernels (ops/compare.c is what they are): a walk over up to
 * three inputs broadcast to the output, row by row over the device's pool,
 * each value from ops/compare.h's tg_compare_element. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/compare.h"

#include <stdint.h>

typedef struct walk {
    int ndim;
    int64_t dim[TG_MAX_DIMS];
    int64_t stride[3][TG_MAX_DIMS]; /* element strides, 0 on stretched dims */
    int64_t inner;                  /* dim[ndim - 1] (1 for a scalar output) */
} walk;

static void walk_init(walk *w, tg_shape out, int n_in, const tg_tensor *const *in)
{
    w->ndim = out.ndim;
    for (int d = 0; d < out.ndim; d++)
        w->dim[d] = out.dim[d];
    for (int k = 0; k < n_in; k++) {
        tg_shape s = tg_shape_pad_left(in[k]->shape, out.ndim);
        int64_t st = 1;
        for (int d = out.ndim - 1; d >= 0; d--) {
            w->stride[k][d] = s.dim[d] == 1 ? 0 : st;
            st *= s.dim[d];
        }
    }
    w->inner = out.ndim ? out.dim[out.ndim - 1] : 1;
}

/* Offsets of each input at the start of output row `row` (all dims but the last). */
static void walk_row(const walk *w, int n_in, int64_t row, int64_t *off)
{
    for (int k = 0; k < n_in; k++)
        off[k] = 0;
    for (int d = w->ndim - 2; d >= 0; d--) {
        int64_t i = row % w->dim[d];
        row /= w->dim[d];
        for (int k = 0; k < n_in; k++)
            off[k] += i * w->stride[k][d];
    }
}

static int64_t inner_stride(const walk *w, int k)
{
    return w->ndim ? w->stride[k][w->ndim - 1] : 0;
}

static inline double fetch(const void *p, tg_dtype t, int64_t k)
{
    return t == TG_I32 ? (double)((const int32_t *)p)[k] : (double)((const float *)p)[k];
}

static void cast_range(void *ctx, int64_t begin, int64_t end, int part)
{
    const tg_kernel_args *a = ctx;
    tg_dtype from = a->node->in[0]->dtype;
    if (a->node->dtype == TG_I32) {
        for (int64_t k = begin; k < end; k++)
            ((int32_t *)a->out)[k] = tg_to_i32(fetch(a->in[0], from, k));
    } else {
        for (int64_t k = begin; k < end; k++)
            ((float *)a->out)[k] = (float)fetch(a->in[0], from, k);
    }
    (void)part;
}

static void fwd_cast(const tg_kernel_args *a)
{
    tg_par_for(a->pool, tg_numel(a->node), tg_numel(a->node), cast_range, (void *)a);
}

typedef struct select_job {
    const tg_kernel_args *a;
    walk w;
} select_job;

static void select_rows(void *ctx, int64_t begin, int64_t end, int part)
{
    const select_job *j = ctx;
    const tg_tensor *node = j->a->node;
    int n = node->n_in;
    int64_t st[3];
    for (int k = 0; k < n; k++)
        st[k] = inner_stride(&j->w, k);
    for (int64_t r = begin; r < end; r++) {
        int64_t off[3];
        walk_row(&j->w, n, r, off);
        for (int64_t c = 0; c < j->w.inner; c++) {
            double v[3];
            for (int k = 0; k < n; k++)
                v[k] = fetch(j->a->in[k], node->in[k]->dtype, off[k] + c * st[k]);
            double y = tg_compare_element(node, v);
            int64_t at = r * j->w.inner + c;
            if (node->dtype == TG_I32)
                ((int32_t *)j->a->out)[at] = (int32_t)y;
            else
                ((float *)j->a->out)[at] = (float)y;
        }
    }
    (void)part;
}

static void fwd_select(const tg_kernel_args *a)
{
    select_job j = {a, {0}};
    walk_init(&j.w, a->node->shape, a->node->n_in, (const tg_tensor *const *)a->node->in);
    int64_t rows = j.w.inner ? tg_numel(a->node) / j.w.inner : 0;
    tg_par_for(a->pool, rows, tg_numel(a->node), select_rows, &j);
}

const tg_kernel_def tg_cpu_kernel_CAST = {.forward = fwd_cast};

const tg_kernel_def tg_cpu_kernel_COMPARE = {.forward = fwd_select};

const tg_kernel_def tg_cpu_kernel_LOGICAL = {.forward = fwd_select};

const tg_kernel_def tg_cpu_kernel_WHERE = {.forward = fwd_select};
