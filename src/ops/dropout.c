/* ops/dropout.c - DROPOUT: in training, zero each element with probability p
 * and scale the survivors by 1 / (1 - p); in inference tg_dropout returns x
 * itself and builds nothing.
 *
 * The mask is never stored. Element i is kept when
 *     u(i) >= p,  u(i) = (tg_round_bits(key32, i) >> 8) 2^-24,
 *     key32 = tg_round_key32(hash(seed, step, salt))
 * with the session seed and the step from the kernel arguments and a salt
 * fixed at build time from the node's name (so two dropout layers differ,
 * and the same model built again draws the same masks). The gradient is a
 * DROPOUT node on dy with the same params, hence the same salt: it
 * regenerates exactly the forward mask, on any thread, in any order.
 *
 * Params (ops/random.h): p, salt.
 */
#include "ops/broadcast.h"
#include "ops/random.h"
#include "backend/cpu/simd.h"

#include "core/error.h"
#include "core/rng.h"

#include <math.h>

static tg_status infer_dropout(tg_tensor *node)
{
    float p = tg_dropout_p(node);
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    if (node->in[0]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; this op takes f32", node->in[0]->name,
                        tg_dtype_name(node->in[0]->dtype));
    if (!(p >= 0.0f && p < 1.0f))
        return tg_error(TG_ERR_INVALID_ARG, "p = %g is outside [0, 1)", (double)p);
    node->dtype = TG_F32;
    node->shape = node->in[0]->shape;
    return TG_OK;
}

/* hash + compare + multiply per element */
static double flops(const tg_tensor *node)
{
    return 2.0 * (double)tg_numel(node);
}

static uint64_t mask_key(uint64_t seed, int64_t step, int64_t salt)
{
    return tg_hash64(seed ^ tg_hash64((uint64_t)salt ^ tg_hash64((uint64_t)step)));
}

typedef struct drop_job {
    const float *x;
    float *out;
    uint32_t key32;
    uint32_t keep_from; /* ceil(p 2^24): bits >= keep_from keeps the element */
    float scale;
} drop_job;

/* Element k's 24 random bits (tg_round_bits: 32-bit arithmetic only, so
 * the AVX2 loop below makes 8 at a time; a splitmix64 per element, whose
 * 64-bit multiplies AVX2 lacks, cost 8 ns an element, 6% of BERT's step).
 * u = bits 2^-24 is uniform in [0, 1) and exact in float; u >= p is
 * bits >= ceil(p 2^24). */
static inline uint32_t drop_bits(uint32_t key32, int64_t k)
{
    return tg_round_bits(key32, (uint32_t)k) >> 8;
}

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
        j->out[k] = drop_bits(j->key32, k) >= j->keep_from ? v : 0.0f;
    }
}

static void fwd_dropout(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    uint64_t key =
        mask_key(a->seed ^ (a->stream ? tg_hash64(a->stream) : 0), a->step, tg_dropout_salt(node));
    drop_job j = {a->in[0], a->out, tg_round_key32(key),
                  (uint32_t)ceil((double)tg_dropout_p(node) * 16777216.0),
                  1.0f / (1.0f - tg_dropout_p(node))};
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, drop_range, &j);
}

static void ref_dropout(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    uint64_t key =
        mask_key(a->seed ^ (a->stream ? tg_hash64(a->stream) : 0), a->step, tg_dropout_salt(node));
    float p = tg_dropout_p(node);
    double scale = 1.0 / (1.0 - (double)p);
    uint32_t key32 = tg_round_key32(key);
    for (int64_t k = 0; k < tg_numel(node); k++) {
        double u = (double)drop_bits(key32, k) * 0x1.0p-24; /* uniform in [0, 1) */
        a->out[k] = u >= p ? a->in[0][k] * scale : 0.0;
    }
}

static tg_status bwd_dropout(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    din[0] = tg_node_create(g, TG_OP_DROPOUT, 1, &dout, &node->p);
    return TG_OK;
}

static int64_t name_salt(const char *s)
{
    return (int64_t)tg_hash64(tg_hash_string(s));
}

tg_tensor *tg_dropout(tg_graph *g, tg_tensor *x, float p)
{
    tg_node_params prm = {0};
    tg_dropout_set_p(&prm, p);
    bool valid = p >= 0.0f && p < 1.0f;
    /* An invalid p still goes through tg_node_create, whose shape rule
     * reports it under the op's scoped name, in either mode. */
    if (valid && g && x && (!tg_graph_training(g) || p == 0.0f))
        return x;
    tg_tensor *t = tg_node_create(g, TG_OP_DROPOUT, 1, &x, &prm);
    if (t)
        tg_dropout_set_salt(&t->p, name_salt(t->name));
    return t;
}

const tg_op_def tg_opdef_DROPOUT = {.infer = infer_dropout,
                                    .flops = flops,
                                    .reference = ref_dropout,
                                    .backward = bwd_dropout,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_DROPOUT = {.forward = fwd_dropout};
