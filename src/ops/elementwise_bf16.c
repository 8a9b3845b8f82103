/* ops/elementwise_bf16.c - ReLU, its gradient and add on operands stored
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
#include "ops/op.h"

#include <string.h>

typedef struct bf16_job {
    tg_op op;
    const uint16_t *a, *b;
    uint16_t *out;
} bf16_job;

TG_WIDE_CLONES static void bf16_range(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const bf16_job *j = ctx;
    const uint16_t *a = j->a, *b = j->b;
    uint16_t *o = j->out;
    switch (j->op) {
    case TG_OP_RELU:
        for (int64_t i = begin; i < end; i++) {
            float x = tg_bf16_widen(a[i]);
            o[i] = tg_bf16_narrow(x < 0.0f ? 0.0f : x);
        }
        break;
    case TG_OP_RELU_BWD: /* (dy, y) */
        for (int64_t i = begin; i < end; i++) {
            float d = tg_bf16_widen(a[i]);
            o[i] = tg_bf16_narrow(tg_bf16_widen(b[i]) > 0.0f ? d : 0.0f);
        }
        break;
    default: /* TG_OP_ADD */
        for (int64_t i = begin; i < end; i++)
            o[i] = tg_bf16_narrow(tg_bf16_widen(a[i]) + tg_bf16_widen(b[i]));
        break;
    }
}

bool tg_elementwise_bf16_supported(const tg_tensor *node)
{
    return (node->op == TG_OP_RELU || node->op == TG_OP_RELU_BWD || node->op == TG_OP_ADD) &&
           tg_op_is_elementwise(node);
}

bool tg_elementwise_bf16_run(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    if (a->out_type != TG_BF16 || !tg_elementwise_bf16_supported(node))
        return false;
    bf16_job j = {node->op, a->in[0], node->n_in > 1 ? a->in[1] : NULL, a->out};
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, bf16_range, &j);
    return true;
}
