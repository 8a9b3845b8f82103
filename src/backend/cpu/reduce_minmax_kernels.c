/* backend/cpu/reduce_minmax_kernels.c - the cpu backend's REDUCE_MAX,
 * REDUCE_MIN and REDUCE_MINMAX_BWD kernels (ops/reduce_minmax.c is what they
 * are): one pass over x per merged inner run, the gradient's tie counts in
 * scratch. */
#include "backend/backend.h"
#include "ops/broadcast.h"
#include "ops/shape.h"

#include <math.h>
#include <string.h>

/* Calls BODY(i, g) for every element i of x (shape xs) with g the offset of
 * its group in the keep shape ks, one merged inner run at a time. */
#define FOR_GROUPS(xs, ks, BODY)                                                                   \
    do {                                                                                           \
        tg_bcast bc_;                                                                              \
        tg_shape in_[2] = {(ks), (ks)};                                                            \
        tg_bcast_init(&bc_, (xs), 2, in_);                                                         \
        int last_ = bc_.ndim - 1;                                                                  \
        int64_t inner_ = bc_.dim[last_], s_ = bc_.stride[0][last_];                                \
        int64_t total_ = tg_shape_numel(xs);                                                       \
        for (int64_t k_ = 0; k_ < total_; k_ += inner_) {                                          \
            int64_t off_[2];                                                                       \
            tg_bcast_offsets(&bc_, k_, off_);                                                      \
            for (int64_t q_ = 0; q_ < inner_; q_++) {                                              \
                int64_t i = k_ + q_, g = off_[0] + q_ * s_;                                        \
                BODY;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void fwd_reduce(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape xs = node->in[0]->shape, ks = tg_reduce_keep_shape(xs, tg_reduce_mask(node));
    const float *x = a->in[0];
    float *y = a->out;
    bool is_max = node->op == TG_OP_REDUCE_MAX;
    for (int64_t k = 0; k < tg_numel(node); k++)
        y[k] = is_max ? -INFINITY : INFINITY;
    /* NaN wins and then stays: v > NaN and v < NaN are false */
    if (is_max)
        FOR_GROUPS(xs, ks, y[g] = x[i] > y[g] || x[i] != x[i] ? x[i] : y[g]);
    else
        FOR_GROUPS(xs, ks, y[g] = x[i] < y[g] || x[i] != x[i] ? x[i] : y[g]);
}

static size_t scratch_bwd(const tg_tensor *node, int n_threads)
{
    (void)n_threads;
    return (size_t)tg_numel(node->in[2]) * sizeof(float);
}

static void fwd_bwd(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape xs = node->shape, ks = node->in[2]->shape;
    const float *dy = a->in[0], *x = a->in[1], *y = a->in[2];
    float *count = a->scratch, *dx = a->out;
    memset(count, 0, (size_t)tg_numel(node->in[2]) * sizeof(float));
    FOR_GROUPS(xs, ks, count[g] += x[i] == y[g] ? 1.0f : 0.0f);
    FOR_GROUPS(xs, ks, dx[i] = dy[g] / count[g] * (x[i] == y[g] ? 1.0f : 0.0f));
}

const tg_kernel_def tg_cpu_kernel_REDUCE_MAX = {.forward = fwd_reduce};

const tg_kernel_def tg_cpu_kernel_REDUCE_MIN = {.forward = fwd_reduce};

const tg_kernel_def tg_cpu_kernel_REDUCE_MINMAX_BWD = {.scratch = scratch_bwd, .forward = fwd_bwd};
