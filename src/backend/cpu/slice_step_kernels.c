/* backend/cpu/slice_step_kernels.c - the cpu backend's SLICE_STEP and
 * SLICE_STEP_BWD kernel (ops/slice_step.c is what they are): whole rows
 * copied with memcpy over the device's pool. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/shape.h"

#include <string.h>

typedef struct step_job {
    const char *in;
    char *out;
    size_t row;                      /* bytes of one row (the elements after the axis) */
    int64_t len, start, step, count; /* len: rows of the big tensor per outer index */
    bool scatter;                    /* SLICE_STEP_BWD */
} step_job;

static void step_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const step_job *j = ctx;
    for (int64_t o = begin; o < end; o++) {
        const char *big_in = j->in + (size_t)(o * j->len) * j->row;
        char *big_out = j->out + (size_t)(o * j->len) * j->row;
        if (j->scatter)
            memset(big_out, 0, (size_t)j->len * j->row);
        for (int64_t r = 0; r < j->count; r++) {
            size_t b = (size_t)(j->start + r * j->step) * j->row;
            size_t s = (size_t)(o * j->count + r) * j->row;
            if (j->scatter)
                memcpy(big_out + b, j->in + s, j->row);
            else
                memcpy(j->out + s, big_in + b, j->row);
        }
    }
    (void)t;
}

static void fwd_slice_step(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    bool scatter = node->op == TG_OP_SLICE_STEP_BWD;
    const tg_tensor *big = scatter ? node : node->in[0];
    int64_t outer, inner;
    tg_outer_inner(big->shape, (int)tg_slice_step_axis(node), &outer, &inner);
    step_job j = {a->in[0],
                  a->out,
                  (size_t)inner * tg_dtype_size(node->dtype),
                  big->shape.dim[tg_slice_step_axis(node)],
                  tg_slice_step_start(node),
                  tg_slice_step_step(node),
                  tg_slice_step_count(node),
                  scatter};
    tg_par_for(a->pool, outer, tg_numel(big), step_range, &j);
}

const tg_kernel_def tg_cpu_kernel_SLICE_STEP = {.forward = fwd_slice_step};
const tg_kernel_def tg_cpu_kernel_SLICE_STEP_BWD = {.forward = fwd_slice_step};
