/* backend/cpu/pad_kernels.c - the cpu backend's PAD and PAD_BWD kernels
 * (ops/pad.c is what they are): whole rows of the last axis copied, the
 * gradient scattered and added per unit, over the device's pool. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/pad.h"

#include <string.h>

/* The offset of the small tensor's row read by padded row r, or -1 if the
 * row is all constant. */
static int64_t source_row(const tg_pad_view *v, int64_t r)
{
    int64_t off = 0, stride = 1;
    for (int d = v->ndim - 2; d >= 0; d--) {
        int64_t o = r % v->big[d];
        r /= v->big[d];
        int64_t j = tg_pad_source_index(o, v->begin[d], v->small[d], v->mode);
        if (j < 0)
            return -1;
        off += j * stride;
        stride *= v->small[d];
    }
    return off * v->small[v->ndim - 1];
}

typedef struct pad_job {
    tg_pad_view v;
    const float *in;
    float *out;
    float value;
    int64_t rows_per_unit; /* PAD_BWD: padded rows per independent unit */
} pad_job;

static void pad_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    const pad_job *j = ctx;
    const tg_pad_view *v = &j->v;
    int last = v->ndim - 1;
    int64_t w = v->big[last], n = v->small[last], b = v->begin[last];
    for (int64_t r = begin; r < end; r++) {
        float *o = j->out + r * w;
        int64_t src = source_row(v, r);
        if (src < 0) {
            for (int64_t q = 0; q < w; q++)
                o[q] = j->value;
            continue;
        }
        const float *x = j->in + src;
        /* the middle part is a plain copy; only the ends need the mapping */
        int64_t lo = b < 0 ? 0 : b < w ? b : w, hi = b + n < w ? b + n : w;
        hi = hi < lo ? lo : hi;
        for (int64_t q = 0; q < lo; q++) {
            int64_t s = tg_pad_source_index(q, b, n, v->mode);
            o[q] = s < 0 ? j->value : x[s];
        }
        if (hi > lo)
            memcpy(o + lo, x + (lo - b), (size_t)(hi - lo) * sizeof(float));
        for (int64_t q = hi; q < w; q++) {
            int64_t s = tg_pad_source_index(q, b, n, v->mode);
            o[q] = s < 0 ? j->value : x[s];
        }
    }
    (void)t;
}

static void fwd_pad(const tg_kernel_args *a)
{
    pad_job j = {tg_pad_make_view(a->node), a->in[0], a->out, tg_pad_value(a->node), 0};
    tg_par_for(a->pool, j.v.rows, tg_numel(a->node), pad_rows, &j);
}

/* Units [begin, end) of PAD_BWD: each unit owns a contiguous part of dx
 * (zeroed here) that no other unit's dy rows reach. */
static void pad_bwd_units(void *ctx, int64_t begin, int64_t end, int t)
{
    const pad_job *j = ctx;
    const tg_pad_view *v = &j->v;
    int last = v->ndim - 1;
    int64_t w = v->big[last], n = v->small[last], b = v->begin[last];
    int64_t small_total = 1;
    for (int d = 0; d < v->ndim; d++)
        small_total *= v->small[d];
    int64_t units = v->rows / j->rows_per_unit, per_unit = small_total / units;
    memset(j->out + begin * per_unit, 0, (size_t)((end - begin) * per_unit) * sizeof(float));
    for (int64_t r = begin * j->rows_per_unit; r < end * j->rows_per_unit; r++) {
        int64_t src = source_row(v, r);
        if (src < 0)
            continue;
        const float *dy = j->in + r * w;
        float *dx = j->out + src;
        for (int64_t q = 0; q < w; q++) {
            int64_t s = tg_pad_source_index(q, b, n, v->mode);
            if (s >= 0)
                dx[s] += dy[q];
        }
    }
    (void)t;
}

static void fwd_pad_bwd(const tg_kernel_args *a)
{
    pad_job j = {tg_pad_make_view(a->node), a->in[0], a->out, 0.0f, 0};
    /* Rows with different indices on an unpadded first axis write disjoint
     * parts of dx, so those slices run in parallel; otherwise one unit. */
    bool split = j.v.ndim >= 2 && j.v.begin[0] == 0 && j.v.big[0] == j.v.small[0];
    int64_t units = split ? j.v.big[0] : 1;
    j.rows_per_unit = j.v.rows / units;
    tg_par_for(a->pool, units, tg_numel(a->node->in[0]), pad_bwd_units, &j);
}

const tg_kernel_def tg_cpu_kernel_PAD = {.forward = fwd_pad};

const tg_kernel_def tg_cpu_kernel_PAD_BWD = {.forward = fwd_pad_bwd};
