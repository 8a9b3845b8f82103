/* ops/dropout.c - DROPOUT: in training, zero each element with probability p
 * and scale the survivors by 1 / (1 - p); in inference tg_dropout returns x
 * itself and builds nothing.
 *
 * The mask is never stored. Element i is kept when
 *     tg_hash_uniform(key, i) >= p,  key = hash(seed, step, salt)
 * with the session seed and the step from the kernel arguments and a salt
 * fixed at build time from the node's name (so two dropout layers differ,
 * and the same model built again draws the same masks). The gradient is a
 * DROPOUT node on dy with the same params, hence the same salt: it
 * regenerates exactly the forward mask, on any thread, in any order.
 *
 * Params: p.f[0] = p; p.i[0] = salt.
 */
#include "ops/broadcast.h"

#include "core/error.h"
#include "core/rng.h"

#include <math.h>

static tg_status infer_dropout(tg_tensor *node)
{
    float p = node->p.f[0];
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
    uint64_t key;
    float p, scale;
} drop_job;

/* u >= p with u = bits * 2^-24 (exact in float) is bits >= ceil(p 2^24):
 * an integer compare, the same mask. */
static void drop_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const drop_job *j = ctx;
    uint32_t keep_from = (uint32_t)ceil((double)j->p * 16777216.0);
    for (int64_t k = begin; k < end; k++) {
        float v = j->x[k] * j->scale;
        j->out[k] = tg_hash_bits24(j->key, (uint64_t)k) >= keep_from ? v : 0.0f;
    }
}

static void fwd_dropout(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    drop_job j = {a->in[0], a->out,
                  mask_key(a->seed ^ (a->stream ? tg_hash64(a->stream) : 0), a->step, node->p.i[0]),
                  node->p.f[0], 1.0f / (1.0f - node->p.f[0])};
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, drop_range, &j);
}

static void ref_dropout(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    uint64_t key = mask_key(a->seed, a->step, node->p.i[0]);
    float p = node->p.f[0];
    double scale = 1.0 / (1.0 - (double)p);
    for (int64_t k = 0; k < tg_numel(node); k++)
        a->out[k] = tg_hash_uniform(key, (uint64_t)k) >= p ? a->in[0][k] * scale : 0.0;
}

static tg_status bwd_dropout(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    din[0] = tg_node_create(g, TG_OP_DROPOUT, 1, &dout, &node->p);
    return TG_OK;
}

static int64_t name_salt(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (int64_t)tg_hash64(h);
}

tg_tensor *tg_dropout(tg_graph *g, tg_tensor *x, float p)
{
    tg_node_params prm = {0};
    prm.f[0] = p;
    bool valid = p >= 0.0f && p < 1.0f;
    /* An invalid p still goes through tg_node_create, whose shape rule
     * reports it under the op's scoped name, in either mode. */
    if (valid && g && x && (!tg_graph_training(g) || p == 0.0f))
        return x;
    tg_tensor *t = tg_node_create(g, TG_OP_DROPOUT, 1, &x, &prm);
    if (t)
        t->p.i[0] = name_salt(t->name);
    return t;
}

const tg_op_def tg_opdef_DROPOUT = {"dropout",   infer_dropout, flops,      NULL,
                                    fwd_dropout, ref_dropout,   bwd_dropout};
