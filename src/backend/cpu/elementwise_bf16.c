/* backend/cpu/elementwise_bf16.c - ReLU, its gradient and add on operands stored
 * in bf16, read and written in place (tg_op_reads_bf16) instead of staged
 * through f32 copies: these three are most of a ResNet's element-wise work,
 * and in bf16.bf16 staging them cost 3-4x their f32 time.
 *
 * Each element is widened to f32, computed with the f32 kernel's formula
 * and rounded back as tg_f32_to_bf16 rounds (to nearest even, NaN kept
 * quiet), so the bits are those of the staged path. The loops are
 * branch-free for the compiler to vectorise.
 */
#include "core/bf16.h"
#include "core/clones.h"
#include "ops/broadcast.h"
#include "backend/backend.h"

#include <string.h>

/* 16-float vectors pass between static functions of this file only, so
 * the note that their calling convention differs with AVX-512 is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef struct bf16_job {
    tg_op op;
    const uint16_t *a, *b;
    uint16_t *out;
} bf16_job;

/* One element with the f32 kernel's formula (ops/unary.c, binary.c). */
static inline uint16_t one(tg_op op, uint16_t a, uint16_t b)
{
    float x = tg_bf16_widen(a);
    switch (op) {
    case TG_OP_RELU:
        return tg_bf16_narrow(x < 0.0f ? 0.0f : x);
    case TG_OP_RELU_BWD: /* (dy, y) */
        return tg_bf16_narrow(tg_bf16_widen(b) > 0.0f ? x : 0.0f);
    case TG_OP_ADD:
        return tg_bf16_narrow(x + tg_bf16_widen(b));
    default:
        TG_UNREACHABLE_OP(op);
    }
}

/* x's bits where keep is all ones, else +0 */
TG_VEC_INLINE tg_f32x16 masked(tg_f32x16 x, tg_u32x16 keep)
{
    tg_u32x16 bits;
    memcpy(&bits, &x, sizeof bits);
    bits &= keep;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* The loop, inlined into each copy below with its conversions
 * (tg_bf16x16_ops), one loop per op; 16 at a time in
 * registers, a comparison's mask keeping the bits (x < 0 is false for NaN,
 * which passes through, as in the scalar form), the tail one by one. */
TG_VEC_INLINE void bf16_loop(const bf16_job *j, int64_t begin, int64_t end, tg_bf16x16_ops cv)
{
    const uint16_t *restrict a = j->a, *restrict b = j->b;
    uint16_t *restrict o = j->out;
    int64_t i = begin;
    switch (j->op) {
    case TG_OP_RELU:
        for (; i + 16 <= end; i += 16) {
            tg_f32x16 x = cv.widen(a + i);
            cv.narrow(o + i, masked(x, (tg_u32x16) ~(x < 0.0f)));
        }
        break;
    case TG_OP_RELU_BWD:
        for (; i + 16 <= end; i += 16)
            cv.narrow(o + i, masked(cv.widen(a + i), (tg_u32x16)(cv.widen(b + i) > 0.0f)));
        break;
    case TG_OP_ADD:
        for (; i + 16 <= end; i += 16)
            cv.narrow(o + i, cv.widen(a + i) + cv.widen(b + i));
        break;
    default:
        TG_UNREACHABLE_OP(j->op);
    }

    for (; i < end; i++)
        o[i] = one(j->op, a[i], b ? b[i] : 0);
}

TG_BF16_POOL_FNS(bf16_range, bf16_loop, TG_BF16X16_GENERIC, TG_BF16X16_HW)

bool tg_elementwise_bf16_run(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    if (a->out_type != TG_BF16 || !tg_elementwise_bf16_supported(node))
        return false;
    bf16_job j = {node->op, a->in[0], node->n_in > 1 ? a->in[1] : NULL, a->out};
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, TG_BF16_POOL_FN(bf16_range), &j);
    return true;
}
