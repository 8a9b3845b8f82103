/* core/rng.c - xoshiro256** and a counter-based hash generator. */
#include "core/rng.h"

#include <math.h>

void tg_rng_seed(tg_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        x += 0x9e3779b97f4a7c15ull;
        r->s[i] = tg_hash64(x);
    }
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t tg_rng_next(tg_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tg_rng_uniform(tg_rng *r)
{
    return (double)(tg_rng_next(r) >> 11) * 0x1.0p-53;
}

double tg_rng_normal(tg_rng *r)
{
    double u1 = tg_rng_uniform(r), u2 = tg_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t tg_rng_below(tg_rng *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = tg_rng_next(r);
    while (x >= limit);
    return x % n;
}

float tg_hash_uniform(uint64_t key, uint64_t counter)
{
    uint64_t h = tg_hash64(key ^ tg_hash64(counter));
    return (float)(h >> 40) * 0x1.0p-24f;
}
