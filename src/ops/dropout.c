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
 * Params (ops/random.h): p, salt. The mask's key and bits are
 * ops/random.h's, which the cpu backend's kernel
 * (backend/cpu/dropout_kernels.c) draws from too.
 */
#include "ops/broadcast.h"
#include "ops/random.h"

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

static void ref_dropout(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    uint64_t key = tg_dropout_mask_key(a->seed ^ (a->stream ? tg_hash64(a->stream) : 0), a->step,
                                       tg_dropout_salt(node));
    float p = tg_dropout_p(node);
    double scale = 1.0 / (1.0 - (double)p);
    uint32_t key32 = tg_round_key32(key);
    for (int64_t k = 0; k < tg_numel(node); k++) {
        double u = (double)tg_dropout_bits(key32, k) * 0x1.0p-24; /* uniform in [0, 1) */
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
