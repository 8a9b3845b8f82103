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

/* Mix a 64-bit value (splitmix64 finaliser). */
static inline uint64_t tg_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* FNV-1a of a NUL-terminated string (NULL hashes as ""): a stable key
 * from a name, the same on every run and machine. */
static inline uint64_t tg_hash_string(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* 32 random bits for element `index` of a stochastically rounded write
 * keyed by `key32` (tg_round_key32 of the write's 64-bit key, once per
 * write): a multiplicative step and murmur3's 32-bit finaliser. Only 32-bit
 * arithmetic, so the loops that round every element of a weight update
 * vectorise with AVX-512F's VPMULLD in 16 lanes; two splitmix64 rounds per
 * element emulated each 64-bit multiply from three 32-bit ones and cost 7%
 * of a ResNet-50 bf16.bf16 step. The index is taken modulo 2^32: elements
 * 4G apart in one tensor share their bits, which biases nothing. bf16's
 * rounding uses the low 16 bits. */
static inline uint32_t tg_round_bits(uint32_t key32, uint32_t index)
{
    uint32_t x = index * 0x9e3779b1u + key32;
    x = (x ^ (x >> 16)) * 0x85ebca6bu;
    x = (x ^ (x >> 13)) * 0xc2b2ae35u;
    return x ^ (x >> 16);
}
static inline uint32_t tg_round_key32(uint64_t key)
{
    return (uint32_t)tg_hash64(key);
}
/* Uniform in [0, 1) from (key, counter), 24 random bits: exact in float. */
float tg_hash_uniform(uint64_t key, uint64_t counter);

#endif
