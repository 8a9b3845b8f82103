/* core/rng.h - seeded random numbers.
 *
 * tg_rng is a sequential generator (xoshiro256**, seeded through splitmix64)
 * for initialisers and shuffling. tg_hash_uniform is counter-based: the same
 * (key, counter) always gives the same number, so dropout can regenerate its
 * mask in the backward pass instead of storing it, on any thread, in any order.
 */
#ifndef TG_CORE_RNG_H
#define TG_CORE_RNG_H

#include <stdint.h>

typedef struct tg_rng {
    uint64_t s[4];
} tg_rng;

void tg_rng_seed(tg_rng *r, uint64_t seed);
uint64_t tg_rng_next(tg_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double tg_rng_uniform(tg_rng *r);
/* Standard normal (Box-Muller). */
double tg_rng_normal(tg_rng *r);
/* Uniform integer in [0, n), without modulo bias. */
uint64_t tg_rng_below(tg_rng *r, uint64_t n);

/* Mix a 64-bit value (splitmix64 finaliser). Inline: the weight updates'
 * stochastic rounding hashes every element in vectorised loops. */
static inline uint64_t tg_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* Uniform in [0, 1) from (key, counter), 24 random bits: exact in float. */
float tg_hash_uniform(uint64_t key, uint64_t counter);

#endif
