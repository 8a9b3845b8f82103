/* backend/cpu/resize_kernels.c - the cpu backend's RESIZE and RESIZE_BWD
 * kernels (ops/resize.c is what they are): the axis tables of ops/resize.h
 * built once in scratch, then planes over the device's pool. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/resize.h"

#include <math.h>
#include <string.h>

static size_t scratch_resize(const tg_tensor *node, int n_threads)
{
    (void)n_threads;
    return (size_t)(tg_resize_out_h(node) + tg_resize_out_w(node)) * sizeof(tg_resize_axis_entry);
}

typedef struct resize_job {
    const tg_node_params *p;
    const tg_resize_axis_entry *t; /* H then W */
    const float *in;
    float *out;
} resize_job;

/* Planes [begin, end) of RESIZE: every output element from its inputs. */
static void resize_planes(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const resize_job *j = ctx;
    int64_t oh = tg_resize_get_out_h(j->p), ow = tg_resize_get_out_w(j->p),
            h = tg_resize_get_in_h(j->p), w = tg_resize_get_in_w(j->p);
    const tg_resize_axis_entry *ty = j->t, *tx = j->t + oh;
    for (int64_t pl = begin; pl < end; pl++) {
        const float *x = j->in + pl * h * w;
        float *y = j->out + pl * oh * ow;
        for (int64_t oy = 0; oy < oh; oy++, y += ow) {
            const float *r0 = x + ty[oy].i0 * w, *r1 = x + ty[oy].i1 * w;
            float wy = (float)ty[oy].w;
            if (tg_resize_get_kind(j->p) == TG_RESIZE_NEAREST) {
                for (int64_t ox = 0; ox < ow; ox++)
                    y[ox] = r0[tx[ox].i0];
                continue;
            }
            for (int64_t ox = 0; ox < ow; ox++) {
                float wx = (float)tx[ox].w;
                float top = r0[tx[ox].i0] * (1.0f - wx) + r0[tx[ox].i1] * wx;
                float bot = r1[tx[ox].i0] * (1.0f - wx) + r1[tx[ox].i1] * wx;
                y[ox] = top * (1.0f - wy) + bot * wy;
            }
        }
    }
}

/* Planes [begin, end) of RESIZE_BWD: dx = 0, then each dy element added to
 * the inputs it read, in output order. */
static void resize_bwd_planes(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const resize_job *j = ctx;
    int64_t oh = tg_resize_get_out_h(j->p), ow = tg_resize_get_out_w(j->p),
            h = tg_resize_get_in_h(j->p), w = tg_resize_get_in_w(j->p);
    const tg_resize_axis_entry *ty = j->t, *tx = j->t + oh;
    for (int64_t pl = begin; pl < end; pl++) {
        const float *dy = j->in + pl * oh * ow;
        float *dx = j->out + pl * h * w;
        memset(dx, 0, (size_t)(h * w) * sizeof *dx);
        for (int64_t oy = 0; oy < oh; oy++, dy += ow) {
            float *r0 = dx + ty[oy].i0 * w, *r1 = dx + ty[oy].i1 * w;
            float wy = (float)ty[oy].w;
            if (tg_resize_get_kind(j->p) == TG_RESIZE_NEAREST) {
                for (int64_t ox = 0; ox < ow; ox++)
                    r0[tx[ox].i0] += dy[ox];
                continue;
            }
            for (int64_t ox = 0; ox < ow; ox++) {
                float wx = (float)tx[ox].w, top = dy[ox] * (1.0f - wy), bot = dy[ox] * wy;
                r0[tx[ox].i0] += top * (1.0f - wx);
                r0[tx[ox].i1] += top * wx;
                r1[tx[ox].i0] += bot * (1.0f - wx);
                r1[tx[ox].i1] += bot * wx;
            }
        }
    }
}

static void fwd_resize(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_resize_axis_entry *t = a->scratch;
    tg_resize_make_tables(&node->p, t);
    resize_job j = {&node->p, t, a->in[0], a->out};
    int64_t planes = node->shape.dim[0] * node->shape.dim[1];
    int64_t work = node->op == TG_OP_RESIZE ? tg_numel(node) : tg_numel(node->in[0]);
    tg_par_for(a->pool, planes, 4 * work,
               node->op == TG_OP_RESIZE ? resize_planes : resize_bwd_planes, &j);
}

const tg_kernel_def tg_cpu_kernel_RESIZE = {.scratch = scratch_resize, .forward = fwd_resize};

const tg_kernel_def tg_cpu_kernel_RESIZE_BWD = {.scratch = scratch_resize, .forward = fwd_resize};
