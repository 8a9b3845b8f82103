/* graph/init.c - initialisers: constant, uniform, normal, PyTorch's fan-in uniform. */
#include "graph/init.h"

#include "core/rng.h"

#include <math.h>
#include <string.h>

static uint64_t name_seed(const char *name, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *s = name ? name : ""; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return tg_hash64(h ^ tg_hash64(seed));
}

void tg_init_fill_f32(const tg_tensor *t, uint64_t seed, float *dst)
{
    int64_t n = tg_numel(t);
    tg_rng rng;
    tg_rng_seed(&rng, name_seed(t->name, seed));
    const tg_init *in = &t->init;
    double lo = in->a, hi = in->b;
    switch (in->kind) {
    case TG_INIT_ZEROS:
        for (int64_t i = 0; i < n; i++)
            dst[i] = 0.0f;
        return;
    case TG_INIT_ONES:
        for (int64_t i = 0; i < n; i++)
            dst[i] = 1.0f;
        return;
    case TG_INIT_CONSTANT:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)in->a;
        return;
    case TG_INIT_NORM_STATS:
        for (int64_t i = 0; i < n; i++)
            dst[i] = i < n / 2 ? 0.0f : 1.0f;
        return;
    case TG_INIT_DATA:
        memcpy(dst, t->init_data, (size_t)n * sizeof(float));
        return;
    case TG_INIT_NORMAL:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)(in->a + in->b * tg_rng_normal(&rng));
        return;
    case TG_INIT_FAN_IN_UNIFORM:
        hi = in->a > 0 ? 1.0 / sqrt(in->a) : 0.0;
        lo = -hi;
        /* fall through */
    case TG_INIT_UNIFORM:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)(lo + (hi - lo) * tg_rng_uniform(&rng));
        return;
    }
}
