/* onnx/onnx_ops_random.c - the ONNX random ops: those of stochastic depth,
 * RandomUniformLike and Bernoulli, with RandomNormalLike, RandomNormal and
 * RandomUniform.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- random: RandomUniformLike, Bernoulli --------------------------------------------- */

/* The dtype attribute of a random op: float (the default, or dflt_int for
 * Bernoulli's input type) or, with ints_ok, an integer type. */
static tg_status random_dtype(onnx_builder *b, bool ints_ok, bool *is_int)
{
    int64_t dt = ob_attr_int(b, "dtype", 1);
    bool integer = dt == 2 || dt == 3 || dt == 4 || dt == 5 || dt == 6 || dt == 7 || dt == 9 ||
                   dt == 12 || dt == 13;
    *is_int = integer;
    if (dt == 1 || (ints_ok && integer))
        return TG_OK;
    return ob_fail(b, TG_ERR_UNSUPPORTED, "dtype %s (float%s is produced)",
                   tg_onnx_elem_name((int)dt), ints_ok ? " or an integer type" : "");
}

/* Normal of mean and scale, or uniform in [low, high), of like's shape,
 * from the session's seed: a seed attribute is not used (each step and
 * replica draws its own). */
static tg_status random_draw(onnx_builder *b, tg_tensor *like, bool normal)
{
    if (normal)
        return ob_set(b, 0,
                      tg_random_normal_like(b->g, like, ob_attr_float(b, "mean", 0.0f),
                                            ob_attr_float(b, "scale", 1.0f)));
    return ob_set(b, 0,
                  tg_random_uniform_like(b->g, like, ob_attr_float(b, "low", 0.0f),
                                         ob_attr_float(b, "high", 1.0f)));
}

/* RandomUniformLike and RandomNormalLike: of the input's shape. */
static tg_status random_like(onnx_builder *b, bool normal)
{
    tg_tensor *x = ob_typed_tensor(b, 0);
    bool is_int;
    if (!x)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(random_dtype(b, false, &is_int));
    return random_draw(b, x, normal);
}

/* RandomUniform and RandomNormal: the shape attribute's; a constant of
 * that shape stands for the input of the Like forms (its values unread). */
static tg_status random_of_shape(onnx_builder *b, bool normal)
{
    int n;
    const int64_t *dims = ob_attr_ints(b, "shape", &n);
    bool is_int;
    TG_TRY(random_dtype(b, false, &is_int));
    if (!dims || n > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_INVALID_ARG, "the shape attribute is %s (give 0 to %d dims)",
                       dims ? "too long" : "missing", TG_MAX_DIMS);
    for (int d = 0; d < n; d++)
        if (dims[d] < 1 || dims[d] > (1 << 30))
            return ob_fail(b, TG_ERR_INVALID_ARG, "shape dim %d is %lld", d, (long long)dims[d]);
    return random_draw(b, tg_constant(b->g, tg_shape_of(n, dims), 0.0f), normal);
}

static tg_status map_random_uniform_like(onnx_builder *b)
{
    return random_like(b, false);
}

static tg_status map_random_normal_like(onnx_builder *b)
{
    return random_like(b, true);
}

static tg_status map_random_normal(onnx_builder *b)
{
    return random_of_shape(b, true);
}

static tg_status map_random_uniform(onnx_builder *b)
{
    return random_of_shape(b, false);
}

/* 1 with probability p (each element of the input), else 0: u < p for u
 * uniform in [0, 1). No gradient reaches p. */
static tg_status map_bernoulli(onnx_builder *b)
{
    tg_tensor *p = ob_tensor(b, 0);
    bool is_int;
    if (!p)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(random_dtype(b, true, &is_int));
    tg_graph *g = b->g;
    tg_tensor *hit = tg_less(g, tg_random_uniform_like(g, p, 0.0f, 1.0f), p);
    return ob_set(b, 0, is_int ? hit : tg_cast(g, hit, TG_F32));
}

const ob_op tg_onnx_random_ops[] = {
    {"RandomUniformLike", map_random_uniform_like, "dtype,high,low,seed"},
    {"Bernoulli", map_bernoulli, "dtype,seed"},
    {"RandomNormalLike", map_random_normal_like, "dtype,mean,scale,seed"},
    {"RandomNormal", map_random_normal, "dtype,mean,scale,seed,shape"},
    {"RandomUniform", map_random_uniform, "dtype,high,low,seed,shape"},
};
const int tg_onnx_random_op_count = (int)(sizeof tg_onnx_random_ops / sizeof tg_onnx_random_ops[0]);
