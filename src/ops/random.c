/* ops/random.c - RANDOM_UNIFORM: a tensor of the shape of its input, each
 * element uniform in [low, high), drawn afresh each step (ONNX
 * RandomUniformLike, and through a comparison Bernoulli: the random masks of
 * stochastic depth as other exporters write them).
 *
 * Element i is low + (high - low) u(i), u(i) = (tg_round_bits(key32, i) >> 8)
 * 2^-24 (24 bits, exact in float), keyed as dropout's masks are
 * (ops/dropout.c): by the session seed, the step, the micro-batch and
 * replica (a->stream) and a salt from the node's name, so each step, each
 * replica and each such node draws its own values and the same model built
 * again draws the same. The input's values are not read. The output is not
 * a function of the input: it has no gradient.
 *
 * With normal set (ops/random.h) the draws are normal instead (ONNX RandomNormalLike and
 * RandomNormal): element i is mean + scale z(i), z by Box-Muller from the
 * bits of 2i and 2i + 1, u1 = ((bits >> 8) + 1) 2^-24 in (0, 1] (so the
 * log is finite: |z| is at most 5.8) and u2 = (bits >> 8) 2^-24:
 * z = sqrt(-2 ln u1) cos(2 pi u2).
 *
 * Params (ops/random.h): low (the mean), high (the scale), salt, normal.
 */
#include "ops/broadcast.h"
#include "ops/random.h"

#include "core/error.h"
#include "core/rng.h"

#include <math.h>

static tg_status infer_random(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input (the shape's), got %d", node->n_in);
    float lo = tg_random_low(node), hi = tg_random_high(node);
    if (tg_random_normal(node) == 1) {
        if (!isfinite(lo) || !isfinite(hi) || !(hi >= 0))
            return tg_error(TG_ERR_INVALID_ARG,
                            "normal of mean %g and scale %g: give finite ones, scale >= 0",
                            (double)lo, (double)hi);
    } else if (!isfinite(lo) || !isfinite(hi) || !(lo <= hi))
        return tg_error(TG_ERR_INVALID_ARG, "bounds [%g, %g): give finite low <= high", (double)lo,
                        (double)hi);
    node->dtype = TG_F32;
    node->shape = node->in[0]->shape;
    return TG_OK;
}

static double flops_random(const tg_tensor *node)
{
    return 2.0 * (double)tg_numel(node);
}

/* The same draws (of the replica and micro-batch a->stream), in double. */
static void ref_random(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    uint32_t key32 = tg_random_key32(a->seed, a->stream, a->step, tg_random_salt(node));
    double lo = tg_random_low(node), width = (double)tg_random_high(node) - lo;
    for (int64_t k = 0; k < tg_numel(node) && tg_random_normal(node) == 1; k++) {
        double u1, u2;
        tg_random_normal_uniforms(key32, k, &u1, &u2);
        a->out[k] = lo + (double)tg_random_high(node) * sqrt(-2 * log(u1)) * cos(TG_TWO_PI * u2);
    }
    for (int64_t k = 0; k < tg_numel(node) && tg_random_normal(node) != 1; k++)
        a->out[k] = lo + width * ((double)(tg_round_bits(key32, (uint32_t)k) >> 8) * 0x1.0p-24);
}

static tg_status bwd_random(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    (void)g, (void)node, (void)dout, (void)need, (void)din; /* not a function of its input */
    return TG_OK;
}

static int64_t name_salt(const char *s)
{
    /* apart from a dropout of the same name */
    return (int64_t)tg_hash64(tg_hash_string(s) ^ 0x72616e646f6dull);
}

tg_tensor *tg_random_uniform_like(tg_graph *g, tg_tensor *like, float low, float high)
{
    tg_node_params p = {0};
    tg_random_set_low(&p, low);
    tg_random_set_high(&p, high);
    tg_tensor *t = tg_node_create(g, TG_OP_RANDOM_UNIFORM, 1, &like, &p);
    if (t)
        tg_random_set_salt(&t->p, name_salt(t->name));
    return t;
}

tg_tensor *tg_random_normal_like(tg_graph *g, tg_tensor *like, float mean, float scale)
{
    tg_node_params p = {0};
    tg_random_set_low(&p, mean);
    tg_random_set_high(&p, scale);
    tg_random_set_normal(&p, 1);
    tg_tensor *t = tg_node_create(g, TG_OP_RANDOM_UNIFORM, 1, &like, &p);
    if (t)
        tg_random_set_salt(&t->p, name_salt(t->name));
    return t;
}

const tg_op_def tg_opdef_RANDOM_UNIFORM = {.infer = infer_random,
                                           .flops = flops_random,
                                           .reference = ref_random,
                                           .backward = bwd_random,
                                           .memory = TG_OP_OWN_STORAGE};
