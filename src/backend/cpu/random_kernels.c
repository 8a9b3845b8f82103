/* backend/cpu/random_kernels.c - the cpu backend's RANDOM_UNIFORM kernel
 * (ops/random.c is what it is): the draws from ops/random.h's key and
 * uniforms, over the device's pool. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/random.h"

#include "core/rng.h"

#include <math.h>

typedef struct random_job {
    float *out;
    uint32_t key32;
    float lo, width;
    bool normal;
} random_job;

static void random_range(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const random_job *j = ctx;
    for (int64_t k = begin; k < end && j->normal; k++) {
        double u1, u2; /* both exact in float: 24 bits */
        tg_random_normal_uniforms(j->key32, k, &u1, &u2);
        float z = sqrtf(-2.0f * logf((float)u1)) * cosf((float)TG_TWO_PI * (float)u2);
        j->out[k] = j->lo + j->width * z;
    }
    for (int64_t k = begin; k < end && !j->normal; k++) {
        float u = (float)(tg_round_bits(j->key32, (uint32_t)k) >> 8) * 0x1.0p-24f;
        j->out[k] = j->lo + j->width * u;
    }
}

static void fwd_random(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    bool normal = tg_random_normal(node) == 1;
    random_job j = {a->out, tg_random_key32(a->seed, a->stream, a->step, tg_random_salt(node)),
                    tg_random_low(node),
                    normal ? tg_random_high(node) : tg_random_high(node) - tg_random_low(node),
                    normal};
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, (normal ? 20 : 2) * n, random_range, &j);
}

const tg_kernel_def tg_cpu_kernel_RANDOM_UNIFORM = {.forward = fwd_random};
