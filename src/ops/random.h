/* ops/random.h - the params of the random ops: RANDOM_UNIFORM (ops/random.c)
 * and DROPOUT (ops/dropout.c). */
#ifndef TG_OPS_RANDOM_H
#define TG_OPS_RANDOM_H

#include "ops/op.h"
#include "core/rng.h"

/* Both: a salt from the node's name, so that two random nodes of one graph
 * draw different streams. */
TG_PARAM_I(random, salt, 0)
/* RANDOM_UNIFORM: uniform in [low, high), or normal (mean low, scale high). */
TG_PARAM_I(random, normal, 1) /* 0 uniform, 1 normal */
TG_PARAM_F(random, low, 0)
TG_PARAM_F(random, high, 1)
/* DROPOUT: the probability an element is dropped. */
TG_PARAM_F(dropout, p, 0)
TG_PARAM_I(dropout, salt, 0)

/* DROPOUT's mask (ops/dropout.c), which its reference and every backend's
 * kernel draw alike: the key of a run, and element k's 24 random bits. */
static inline uint64_t tg_dropout_mask_key(uint64_t seed, int64_t step, int64_t salt)
{
    return tg_hash64(seed ^ tg_hash64((uint64_t)salt ^ tg_hash64((uint64_t)step)));
}

/* Element k's 24 random bits (tg_round_bits: 32-bit arithmetic only, so
 * the cpu backend's AVX2 loop makes 8 at a time; a splitmix64 per element, whose
 * 64-bit multiplies AVX2 lacks, cost 8 ns an element, 6% of BERT's step).
 * u = bits 2^-24 is uniform in [0, 1) and exact in float; u >= p is
 * bits >= ceil(p 2^24). */
static inline uint32_t tg_dropout_bits(uint32_t key32, int64_t k)
{
    return tg_round_bits(key32, (uint32_t)k) >> 8;
}

/* RANDOM_UNIFORM's draws (ops/random.c), which its reference and every
 * backend's kernel make alike: the key of a run (the replica and micro-batch
 * stream, the step, the node's salt) and the two uniforms of normal draw k. */
static inline uint32_t tg_random_key32(uint64_t seed, uint64_t stream, int64_t step, int64_t salt)
{
    uint64_t s = seed ^ (stream ? tg_hash64(stream) : 0);
    return tg_round_key32(tg_hash64(s ^ tg_hash64((uint64_t)salt ^ tg_hash64((uint64_t)step))));
}

#define TG_TWO_PI 6.283185307179586

/* The two uniforms of normal draw k (ops/random.c's top). */
static inline void tg_random_normal_uniforms(uint32_t key32, int64_t k, double *u1, double *u2)
{
    *u1 = ((double)(tg_round_bits(key32, (uint32_t)(2 * k)) >> 8) + 1) * 0x1.0p-24;
    *u2 = (double)(tg_round_bits(key32, (uint32_t)(2 * k + 1)) >> 8) * 0x1.0p-24;
}

#endif
