/* backend/cpu/gather_kernels.c - the cpu backend's GATHER and GATHER_BWD
 * kernels (ops/gather.c is what they are): rows copied in their stored type
 * (a bf16 table read only where asked), the scatter-add summed in double per
 * block of columns, one thread a block, so the bits do not depend on the
 * thread count. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/gather.h"

#include "core/bf16.h"

#include <math.h>
#include <string.h>

typedef struct gather_job {
    tg_gather_geom g;
    const char *data;
    const int32_t *idx;
    char *out;
    bool is_float, ids;
    tg_dtype data_type, out_type; /* as stored (f32 data may be kept in bf16) */
} gather_job;

/* One row of f32 data from `src` to `dst` in their stored types: a copy,
 * or widened or rounded (to nearest even, as staging rounds). */
static void copy_row(const gather_job *j, const char *src, char *dst)
{
    int64_t n = j->g.inner;
    if (j->data_type == TG_BF16 && j->out_type == TG_F32)
        tg_bf16_widen_run((const uint16_t *)(const void *)src, (float *)(void *)dst, (size_t)n);
    else if (j->data_type == TG_F32 && j->out_type == TG_BF16)
        tg_bf16_narrow_run((const float *)(const void *)src, (uint16_t *)(void *)dst, (size_t)n);
    else
        memcpy(dst, src, (size_t)n * tg_dtype_size(j->data_type));
}

/* Rows [begin, end) of the output, a row being one (outer, index) pair. */
static void gather_rows(void *ctx, int64_t begin, int64_t end, int part)
{
    const gather_job *j = ctx;
    size_t in_row = (size_t)j->g.inner * tg_dtype_size(j->data_type);
    size_t out_row = (size_t)j->g.inner * tg_dtype_size(j->out_type);
    for (int64_t r = begin; r < end; r++) {
        int64_t o = r / j->g.n_idx,
                k = tg_gather_table_row(j->idx[r % j->g.n_idx], j->g.dim, j->ids);
        char *dst = j->out + (size_t)r * out_row;
        if (k >= 0) {
            copy_row(j, j->data + (size_t)(o * j->g.dim + k) * in_row, dst);
        } else if (j->is_float && j->out_type == TG_BF16) {
            for (int64_t c = 0; c < j->g.inner; c++)
                ((uint16_t *)(void *)dst)[c] = tg_bf16_narrow(NAN);
        } else if (j->is_float) {
            for (int64_t c = 0; c < j->g.inner; c++)
                ((float *)(void *)dst)[c] = NAN;
        } else {
            memset(dst, 0, out_row);
        }
    }
    (void)part;
}

/* The table and the output in their stored types (a->in_type, out_type:
 * f32 unless the engine passed bf16, gather_reads_bf16): a bf16 table is
 * read row by row, only the rows asked for, instead of staged whole
 * through an f32 copy at every run (BERT's word embeddings: 47 MB). */
static void fwd_gather(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node, *data = node->in[0];
    bool is_float = data->dtype == TG_F32;
    gather_job j = {
        tg_gather_geom_of(data->shape, (int)tg_gather_axis(node), tg_numel(node->in[1])),
        a->in[0],
        a->in[1],
        a->out,
        is_float,
        tg_gather_ids(node) != 0,
        is_float && a->in_type[0] == TG_BF16 ? TG_BF16 : data->dtype,
        is_float && a->out_type == TG_BF16 ? TG_BF16 : data->dtype};
    tg_par_for(a->pool, j.g.outer * j.g.n_idx, tg_numel(node), gather_rows, &j);
}

/* f32 tables read in their stored type (bf16 or f32) by fwd_gather. */
static bool gather_reads_bf16(const tg_tensor *node, bool blocked)
{
    return !blocked && node->in[0]->dtype == TG_F32;
}

/* Columns per unit of work: a cache line of floats, so that threads never
 * write the same line. */
enum { COLS = 16 };

/* Each thread sums its columns of the whole table in double (scratch: dim x
 * COLS doubles per thread), so a row gathered thousands of times (a common
 * token) gets its gradient as accurately as the reference's. */
static size_t scratch_gather_bwd(const tg_tensor *node, int n_threads)
{
    int64_t dim = node->shape.dim[tg_gather_axis(node)];
    return (size_t)(n_threads > 0 ? n_threads : 1) * (size_t)dim * COLS * sizeof(double);
}

typedef struct scatter_job {
    tg_gather_geom g;
    const float *dout;
    const int32_t *idx;
    float *out;
    double *acc; /* per part: dim x COLS */
    int64_t col_blocks;
    bool ids;
} scatter_job;

static void scatter_units(void *ctx, int64_t begin, int64_t end, int part)
{
    const scatter_job *j = ctx;
    double *acc = j->acc + (size_t)part * (size_t)j->g.dim * COLS;
    for (int64_t u = begin; u < end; u++) {
        int64_t o = u / j->col_blocks, c0 = (u % j->col_blocks) * COLS;
        int64_t w = c0 + COLS < j->g.inner ? COLS : j->g.inner - c0;
        memset(acc, 0, (size_t)j->g.dim * COLS * sizeof(double));
        const float *src = j->dout + o * j->g.n_idx * j->g.inner + c0;
        for (int64_t i = 0; i < j->g.n_idx; i++) {
            int64_t k = tg_gather_table_row(j->idx[i], j->g.dim, j->ids);
            if (k < 0)
                continue;
            double *dst = acc + k * COLS;
            const float *row = src + i * j->g.inner;
            for (int64_t c = 0; c < w; c++)
                dst[c] += row[c];
        }
        float *table = j->out + o * j->g.dim * j->g.inner + c0;
        for (int64_t k = 0; k < j->g.dim; k++)
            for (int64_t c = 0; c < w; c++)
                table[k * j->g.inner + c] = (float)acc[k * COLS + c];
    }
}

static void fwd_gather_bwd(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    scatter_job j = {
        tg_gather_geom_of(node->shape, (int)tg_gather_axis(node), tg_numel(node->in[1])),
        a->in[0],
        a->in[1],
        a->out,
        a->scratch,
        0,
        tg_gather_ids(node) != 0};
    j.col_blocks = (j.g.inner + COLS - 1) / COLS;
    tg_par_for(a->pool, j.g.outer * j.col_blocks, tg_numel(node->in[0]) + tg_numel(node),
               scatter_units, &j);
}

const tg_kernel_def tg_cpu_kernel_GATHER = {.forward = fwd_gather, .reads_bf16 = gather_reads_bf16};

const tg_kernel_def tg_cpu_kernel_GATHER_BWD = {.scratch = scratch_gather_bwd,
                                                .forward = fwd_gather_bwd};
