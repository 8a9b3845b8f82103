/* ops/normalize.c - 8-bit input normalised on the device.
 *
 * NORMALIZE_U8 turns u8 pixels [N, C, ...] into f32 (x / 255 - mean[c]) /
 * std[c]. Params (ops/normalize.h): C, the means, the standard deviations.
 * With raw set (tg_cast_u8) it is the plain conversion of any u8 tensor to
 * the same values in f32 (ONNX's Cast from uint8): the model's own ops then
 * normalise, as a PyTorch model that takes 8-bit images does.
 * The kernel (backend/cpu/normalize_kernels.c) builds a 256-entry table
 * per channel in double and rounds it to float, exactly as the data loader
 * does, so feeding 8-bit images and normalising here gives bit-identical
 * training to normalising on the host.
 */
#include "ops/normalize.h"

#include "core/error.h"

static tg_status infer_normalize(tg_tensor *node)
{
    const tg_tensor *x = node->in[0];
    int64_t c = tg_normalize_channels(node);
    if (tg_normalize_raw(node) == 1) {
        if (x->dtype != TG_U8)
            return tg_error(TG_ERR_DTYPE, "the u8 conversion takes a u8 tensor, not %s",
                            tg_dtype_name(x->dtype));
        node->shape = x->shape;
        node->dtype = TG_F32;
        return TG_OK;
    }
    if (x->dtype != TG_U8 || x->shape.ndim < 2)
        return tg_error(TG_ERR_DTYPE, "8-bit normalisation takes u8 [N, C, ...] images, not %s",
                        tg_dtype_name(x->dtype));
    if (c != x->shape.dim[1] || c < 1 || c > TG_NORMALIZE_MAX_CHANNELS)
        return tg_error(TG_ERR_SHAPE, "%lld channels of statistics for %lld channels (at most %d)",
                        (long long)c, (long long)x->shape.dim[1], TG_NORMALIZE_MAX_CHANNELS);
    for (int k = 0; k < c; k++)
        if (!(tg_normalize_std(node, (int)k) > 0))
            return tg_error(TG_ERR_INVALID_ARG, "channel %d: standard deviation %g is not positive",
                            k, tg_normalize_std(node, (int)k));
    node->shape = x->shape;
    node->dtype = TG_F32;
    return TG_OK;
}

static double flops_normalize(const tg_tensor *node)
{
    return 2.0 * (double)tg_numel(node);
}

static void ref_normalize(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    if (tg_normalize_raw(node) == 1) {
        for (int64_t k = 0; k < tg_numel(node); k++)
            a->out[k] = a->in[0][k];
        return;
    }
    int64_t c = tg_normalize_channels(node), plane = tg_numel(node) / (node->shape.dim[0] * c);
    for (int64_t k = 0; k < tg_numel(node); k++) {
        int64_t ch = (k / plane) % c;
        a->out[k] = (a->in[0][k] / 255.0 - tg_normalize_mean(node, (int)ch)) /
                    tg_normalize_std(node, (int)ch);
    }
}

tg_tensor *tg_normalize_u8(tg_graph *g, tg_tensor *x, const float *mean, const float *std)
{
    tg_node_params p = {{0}, {0}};
    int64_t c = x && x->shape.ndim >= 2 ? x->shape.dim[1] : 0;
    tg_normalize_set_channels(&p, c);
    for (int k = 0; k < c && k < TG_NORMALIZE_MAX_CHANNELS; k++)
        tg_normalize_set_channel(&p, k, mean[k], std[k]);
    return tg_node_create(g, TG_OP_NORMALIZE_U8, 1, &x, &p);
}

tg_tensor *tg_cast_u8(tg_graph *g, tg_tensor *x)
{
    tg_node_params p = {{0}, {0}};
    tg_normalize_set_raw(&p, 1);
    return tg_node_create(g, TG_OP_NORMALIZE_U8, 1, &x, &p);
}

/* The input is data, not a parameter: no gradient rule. */
const tg_op_def tg_opdef_NORMALIZE_U8 = {.infer = infer_normalize,
                                         .flops = flops_normalize,
                                         .reference = ref_normalize,
                                         .memory = TG_OP_OWN_STORAGE};
