/* backend/cpu/shape_kernels.c - the cpu backend's kernels for the shape
 * family (ops/shape.c is what they are): RESHAPE's alias (nothing to do),
 * REDUCE_SUM through tg_sum_f32, TRANSPOSE over a merged view of the
 * permutation (in tiles when the innermost axis is strided), CONCAT, SLICE
 * and SLICE_BWD as row copies, over the device's pool.
 *
 * TRANSPOSE reads and writes an activation stored in bf16 as it is
 * (transpose_reads_bf16): two-byte elements moved, where staging widened
 * the whole tensor, moved four-byte ones and narrowed them back (the same
 * bits: widening is exact and the narrowing gives the bits back); an
 * input and output stored in different types convert element by element.
 * In MiniLM's bf16 attention the head split and merge are four of them a
 * layer. */
#include "backend/backend.h"
#include "ops/broadcast.h"
#include "ops/shape.h"

#include "core/bf16.h"

#include <string.h>

static void fwd_alias(const tg_kernel_args *a)
{
    (void)a;
}

static void fwd_reduce(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_sum_f32(a->pool, node->in[0]->shape,
               tg_reduce_keep_shape(node->in[0]->shape, tg_reduce_mask(node)), a->in[0], a->out);
}

/* The input read in output order: output dims with the input's element
 * strides, size-1 dims dropped and regular neighbours merged, so that a
 * batch of 2-D transposes becomes three dims and a no-op permutation one. */
typedef struct perm_view {
    int nd;
    int64_t dim[TG_MAX_DIMS], stride[TG_MAX_DIMS];
} perm_view;

static void perm_view_init(perm_view *v, const tg_tensor *node)
{
    tg_shape in = node->in[0]->shape;
    int64_t istride[TG_MAX_DIMS], s = 1;
    for (int d = in.ndim - 1; d >= 0; d--) {
        istride[d] = s;
        s *= in.dim[d];
    }
    v->nd = 0;
    for (int d = 0; d < in.ndim; d++) {
        int64_t n = node->shape.dim[d], st = istride[tg_transpose_perm(node, d)];
        if (n == 1)
            continue;
        if (v->nd > 0 && v->stride[v->nd - 1] == st * n) {
            v->dim[v->nd - 1] *= n;
            v->stride[v->nd - 1] = st;
            continue;
        }
        v->dim[v->nd] = n;
        v->stride[v->nd++] = st;
    }
    if (v->nd == 0) {
        v->nd = 1;
        v->dim[0] = 1;
        v->stride[0] = 1;
    }
}

typedef struct transpose_job {
    perm_view v;
    const char *in;
    char *out;
    size_t es; /* element size */
} transpose_job;

enum { TILE = 32 };

static int64_t view_offset(const perm_view *v, int64_t flat, int upto)
{
    int64_t off = 0;
    for (int d = upto - 1; d >= 0; d--) {
        off += (flat % v->dim[d]) * v->stride[d];
        flat /= v->dim[d];
    }
    return off;
}

#define COPY_ELEM(dst, src, es)                                                                    \
    do {                                                                                           \
        if ((es) == 4)                                                                             \
            memcpy((dst), (src), 4);                                                               \
        else if ((es) == 2)                                                                        \
            memcpy((dst), (src), 2);                                                               \
        else                                                                                       \
            memcpy((dst), (src), (es));                                                            \
    } while (0)

/* Units are output rows (innermost dim) when the innermost dim is
 * contiguous in the input (plain runs) or when no tiling applies. */
static void transpose_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    const transpose_job *j = ctx;
    const perm_view *v = &j->v;
    int last = v->nd - 1;
    int64_t n = v->dim[last], st = v->stride[last];
    for (int64_t r = begin; r < end; r++) {
        const char *src = j->in + (size_t)view_offset(v, r, last) * j->es;
        char *dst = j->out + (size_t)(r * n) * j->es;
        if (st == 1)
            memcpy(dst, src, (size_t)n * j->es);
        else
            for (int64_t q = 0; q < n; q++)
                COPY_ELEM(dst + (size_t)q * j->es, src + (size_t)(q * st) * j->es, j->es);
    }
}

/* One tile of elements of type T (the common sizes typed, so that the
 * copy is a load and a store, not a call by size). */
#define TILE_OF(T)                                                                                 \
    for (int64_t i = i0; i < i1; i++) {                                                            \
        T *d_ = (T *)(void *)dst + i * C;                                                          \
        const T *s_ = (const T *)(const void *)src + i;                                            \
        for (int64_t q = j0; q < j1; q++)                                                          \
            d_[q] = s_[q * cs];                                                                    \
    }

/* Batched 2-D transpose (the second-innermost view dim is contiguous in the
 * input): TILE x TILE blocks so both sides stay in cache. Units are
 * (batch, row tile) pairs. */
static void transpose_tiles(void *ctx, int64_t begin, int64_t end, int t)
{
    const transpose_job *j = ctx;
    const perm_view *v = &j->v;
    int nd = v->nd;
    int64_t R = v->dim[nd - 2], C = v->dim[nd - 1], cs = v->stride[nd - 1];
    int64_t row_tiles = (R + TILE - 1) / TILE;
    size_t es = j->es;
    for (int64_t u = begin; u < end; u++) {
        int64_t b = u / row_tiles, i0 = (u % row_tiles) * TILE;
        int64_t i1 = i0 + TILE < R ? i0 + TILE : R;
        const char *src = j->in + (size_t)view_offset(v, b, nd - 2) * es;
        char *dst = j->out + (size_t)(b * R * C) * es;
        for (int64_t j0 = 0; j0 < C; j0 += TILE) {
            int64_t j1 = j0 + TILE < C ? j0 + TILE : C;
            if (es == 4) {
                TILE_OF(uint32_t);
            } else if (es == 2) {
                TILE_OF(uint16_t);
            } else {
                for (int64_t i = i0; i < i1; i++)
                    for (int64_t q = j0; q < j1; q++)
                        COPY_ELEM(dst + (size_t)(i * C + q) * es, src + (size_t)(i + q * cs) * es,
                                  es);
            }
        }
    }
}

/* Output rows [begin, end) from an input stored in the other type of f32
 * and bf16 (j->es: the input's element size), converted element by
 * element. */
static void transpose_convert(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const transpose_job *j = ctx;
    const perm_view *v = &j->v;
    int last = v->nd - 1;
    int64_t n = v->dim[last], st = v->stride[last];
    for (int64_t r = begin; r < end; r++) {
        int64_t off = view_offset(v, r, last);
        for (int64_t q = 0; q < n; q++) {
            int64_t i = off + q * st, o = r * n + q;
            if (j->es == 2)
                ((float *)j->out)[o] = tg_bf16_widen(((const uint16_t *)j->in)[i]);
            else
                ((uint16_t *)j->out)[o] = tg_bf16_narrow(((const float *)j->in)[i]);
        }
    }
}

/* An f32 value's transpose moves its elements as they are stored. */
static bool transpose_reads_bf16(const tg_tensor *node, bool blocked)
{
    return !blocked && node->dtype == TG_F32;
}

static void fwd_transpose(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    /* the engine passes the storage types only to a step that reads them
     * itself (an f32 node: transpose_reads_bf16); else they read f32 */
    bool f32 = node->dtype == TG_F32;
    tg_dtype in_t = f32 ? a->in_type[0] : node->dtype, out_t = f32 ? a->out_type : node->dtype;
    transpose_job j = {.in = a->in[0], .out = a->out, .es = tg_dtype_size(in_t)};
    perm_view_init(&j.v, node);
    int64_t n = tg_numel(node);
    if (n == 0)
        return;
    int nd = j.v.nd;
    if (in_t != out_t) {
        tg_par_for(a->pool, n / j.v.dim[nd - 1], n, transpose_convert, &j);
        return;
    }
    if (nd >= 2 && j.v.stride[nd - 1] != 1 && j.v.stride[nd - 2] == 1) {
        int64_t units =
            n / (j.v.dim[nd - 2] * j.v.dim[nd - 1]) * ((j.v.dim[nd - 2] + TILE - 1) / TILE);
        tg_par_for(a->pool, units, n, transpose_tiles, &j);
    } else {
        tg_par_for(a->pool, n / j.v.dim[nd - 1], n, transpose_rows, &j);
    }
}

typedef struct concat_job {
    const tg_tensor *node;
    void *const *in;
    char *out;
    size_t es;
    int64_t inner, out_row; /* elements after the axis; output elements per outer index */
} concat_job;

static void concat_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const concat_job *j = ctx;
    const tg_tensor *node = j->node;
    int axis = (int)tg_concat_axis(node);
    for (int64_t o = begin; o < end; o++) {
        char *dst = j->out + (size_t)(o * j->out_row) * j->es;
        for (int k = 0; k < node->n_in; k++) {
            size_t run = (size_t)(node->in[k]->shape.dim[axis] * j->inner) * j->es;
            memcpy(dst, (const char *)j->in[k] + o * run, run);
            dst += run;
        }
    }
}

static void fwd_concat(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    int64_t outer, inner;
    tg_outer_inner(node->shape, (int)tg_concat_axis(node), &outer, &inner);
    concat_job j = {node,   a->in,
                    a->out, tg_dtype_size(node->dtype),
                    inner,  node->shape.dim[tg_concat_axis(node)] * inner};
    tg_par_for(a->pool, outer, tg_numel(node), concat_range, &j);
}

/* The big tensor (SLICE's input, SLICE_BWD's output) has `len` rows of
 * `inner` per outer index; the small one holds rows [start, end). */
typedef struct slice_job {
    const char *in;
    char *out;
    size_t es;
    int64_t inner, len, start, end;
    bool scatter; /* SLICE_BWD */
} slice_job;

static void slice_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const slice_job *j = ctx;
    size_t es = j->es, run = (size_t)((j->end - j->start) * j->inner) * es;
    size_t big = (size_t)(j->len * j->inner) * es, head = (size_t)(j->start * j->inner) * es;
    for (int64_t o = begin; o < end; o++) {
        /* an empty slice has no buffer (NULL): nothing to copy from or to */
        if (j->scatter) {
            char *dst = j->out + (size_t)o * big;
            memset(dst, 0, head);
            if (run)
                memcpy(dst + head, j->in + (size_t)o * run, run);
            memset(dst + head + run, 0, big - head - run);
        } else if (run) {
            memcpy(j->out + (size_t)o * run, j->in + (size_t)o * big + head, run);
        }
    }
}

static void fwd_slice(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    bool scatter = node->op == TG_OP_SLICE_BWD;
    const tg_tensor *big = scatter ? node : node->in[0];
    int axis = (int)tg_slice_axis(node);
    int64_t outer, inner;
    tg_outer_inner(big->shape, axis, &outer, &inner);
    slice_job j = {a->in[0],
                   a->out,
                   tg_dtype_size(node->dtype),
                   inner,
                   big->shape.dim[axis],
                   tg_slice_start(node),
                   tg_slice_end(node),
                   scatter};
    tg_par_for(a->pool, outer, tg_numel(big), slice_range, &j);
}

const tg_kernel_def tg_cpu_kernel_RESHAPE = {.forward = fwd_alias};

const tg_kernel_def tg_cpu_kernel_REDUCE_SUM = {.forward = fwd_reduce};

const tg_kernel_def tg_cpu_kernel_TRANSPOSE = {.forward = fwd_transpose,
                                               .reads_bf16 = transpose_reads_bf16};

const tg_kernel_def tg_cpu_kernel_CONCAT = {.forward = fwd_concat};

const tg_kernel_def tg_cpu_kernel_SLICE = {.forward = fwd_slice};

const tg_kernel_def tg_cpu_kernel_SLICE_BWD = {.forward = fwd_slice};
