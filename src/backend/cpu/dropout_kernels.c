/* backend/cpu/dropout_kernels.c - the cpu backend's DROPOUT kernel
 * (ops/dropout.c is what it is): the mask drawn from ops/random.h's key and
 * bits, eight elements at a time with AVX2. */
#include "backend/backend.h"
#include "backend/cpu/simd.h"
#include "ops/random.h"

#include "ops/broadcast.h" /* tg_par_for */
#include "core/rng.h"

#include <math.h>

typedef struct drop_job {
    const float *x;
    float *out;
    uint32_t key32;
    uint32_t keep_from; /* ceil(p 2^24): bits >= keep_from keeps the element */
    float scale;
} drop_job;

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) static int64_t drop_avx2(const drop_job *j, int64_t begin,
                                                         int64_t end)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i key = _mm256_set1_epi32((int)j->key32);
    const __m256i keep = _mm256_set1_epi32((int)j->keep_from - 1); /* bits > keep_from - 1 */
    const __m256 scale = _mm256_set1_ps(j->scale);
    int64_t k = begin;
    for (; k + 8 <= end; k += 8) {
        __m256i i = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)k), lane);
        __m256i x =
            _mm256_add_epi32(_mm256_mullo_epi32(i, _mm256_set1_epi32((int)0x9e3779b1u)), key);
        x = _mm256_mullo_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 16)),
                               _mm256_set1_epi32((int)0x85ebca6bu));
        x = _mm256_mullo_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 13)),
                               _mm256_set1_epi32((int)0xc2b2ae35u));
        x = _mm256_srli_epi32(_mm256_xor_si256(x, _mm256_srli_epi32(x, 16)), 8);
        __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(x, keep));
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(j->x + k), scale);
        _mm256_storeu_ps(j->out + k, _mm256_and_ps(v, m));
    }
    return k;
}
#endif

static void drop_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const drop_job *j = ctx;
    int64_t k = begin;
#if defined(__x86_64__)
    if (tg_simd_level_get() >= TG_SIMD_AVX2)
        k = drop_avx2(j, begin, end);
#endif
    for (; k < end; k++) {
        float v = j->x[k] * j->scale;
        j->out[k] = tg_dropout_bits(j->key32, k) >= j->keep_from ? v : 0.0f;
    }
}

static void fwd_dropout(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    uint64_t key = tg_dropout_mask_key(a->seed ^ (a->stream ? tg_hash64(a->stream) : 0), a->step,
                                       tg_dropout_salt(node));
    drop_job j = {a->in[0], a->out, tg_round_key32(key),
                  (uint32_t)ceil((double)tg_dropout_p(node) * 16777216.0),
                  1.0f / (1.0f - tg_dropout_p(node))};
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, drop_range, &j);
}

const tg_kernel_def tg_cpu_kernel_DROPOUT = {.forward = fwd_dropout};
