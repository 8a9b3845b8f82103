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
 * Params: p.f[0] = low, p.f[1] = high, p.i[0] = salt.
 */
#include "ops/broadcast.h"

#include "core/error.h"
#include "core/rng.h"

#include <math.h>

static tg_status infer_random(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input (the shape's), got %d", node->n_in);
    float lo = node->p.f[0], hi = node->p.f[1];
    if (!isfinite(lo) || !isfinite(hi) || !(lo <= hi))
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

static uint32_t random_key32(uint64_t seed, uint64_t stream, int64_t step, int64_t salt)
{
    uint64_t s = seed ^ (stream ? tg_hash64(stream) : 0);
    return tg_round_key32(tg_hash64(s ^ tg_hash64((uint64_t)salt ^ tg_hash64((uint64_t)step))));
}

typedef struct random_job {
    float *out;
    uint32_t key32;
    float lo, width;
} random_job;

static void random_range(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const random_job *j = ctx;
    for (int64_t k = begin; k < end; k++) {
        float u = (float)(tg_round_bits(j->key32, (uint32_t)k) >> 8) * 0x1.0p-24f;
        j->out[k] = j->lo + j->width * u;
    }
}

static void fwd_random(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    random_job j = {a->out, random_key32(a->seed, a->stream, a->step, node->p.i[0]), node->p.f[0],
                    node->p.f[1] - node->p.f[0]};
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, 2 * n, random_range, &j);
}

/* The same draws (micro-batch 0 of replica 0: stream 0), in double. */
static void ref_random(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    uint32_t key32 = random_key32(a->seed, 0, a->step, node->p.i[0]);
    double lo = node->p.f[0], width = (double)node->p.f[1] - lo;
    for (int64_t k = 0; k < tg_numel(node); k++)
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
    p.f[0] = low;
    p.f[1] = high;
    tg_tensor *t = tg_node_create(g, TG_OP_RANDOM_UNIFORM, 1, &like, &p);
    if (t)
        t->p.i[0] = name_salt(t->name);
    return t;
}

const tg_op_def tg_opdef_RANDOM_UNIFORM = {"random_uniform", infer_random, flops_random, NULL,
                                           fwd_random,       ref_random,   bwd_random};
