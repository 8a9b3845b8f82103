/* backend/cpu/normalize_kernels.c - the cpu backend's NORMALIZE_U8 kernel
 * (ops/normalize.c is what it is): a 256-entry table per channel, built in
 * double and rounded to float as the data loader does, then one lookup per
 * pixel over the device's pool. */
#include "backend/backend.h"
#include "ops/normalize.h"

typedef struct {
    const uint8_t *x;
    float *y;
    float lut[TG_NORMALIZE_MAX_CHANNELS][256];
    int64_t channels, plane;
} norm_job;

static void normalize_planes(void *ctx, int64_t begin, int64_t end, int t)
{
    const norm_job *j = ctx;
    for (int64_t pl = begin; pl < end; pl++) {
        const float *lut = j->lut[pl % j->channels];
        const uint8_t *x = j->x + pl * j->plane;
        float *y = j->y + pl * j->plane;
        for (int64_t k = 0; k < j->plane; k++)
            y[k] = lut[x[k]];
    }
    (void)t;
}

static void convert_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const norm_job *j = ctx;
    for (int64_t k = begin; k < end; k++)
        j->y[k] = (float)j->x[k];
    (void)t;
}

static void fwd_normalize(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    if (tg_normalize_raw(node) == 1) {
        norm_job raw = {.x = a->in[0], .y = a->out};
        tg_pool_for(a->pool, tg_numel(node), convert_range, &raw);
        return;
    }
    norm_job j = {a->in[0], a->out, {{0}}, tg_normalize_channels(node), 1};
    for (int d = 2; d < node->shape.ndim; d++)
        j.plane *= node->shape.dim[d];
    for (int c = 0; c < j.channels; c++)
        for (int v = 0; v < 256; v++)
            j.lut[c][v] = (float)(((double)v / 255.0 - (double)tg_normalize_mean(node, (int)c)) /
                                  (double)tg_normalize_std(node, (int)c));
    tg_pool_for(a->pool, tg_numel(node) / j.plane, normalize_planes, &j);
}

const tg_kernel_def tg_cpu_kernel_NORMALIZE_U8 = {.forward = fwd_normalize};
