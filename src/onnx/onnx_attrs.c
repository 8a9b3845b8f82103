/* onnx/onnx_attrs.c - attribute checks the convolution and pooling
 * mappers share (onnx_ops_conv.c, onnx_ops_norm.c): spatial dims,
 * windows, pads and auto_pad.
 */
#include "onnx/onnx_build.h"

#include <string.h>

/* ---- shared attribute checks --------------------------------------------- */

/* Convolution and pooling over 1-D inputs [N, C, L] run as the 2-D ops over
 * [N, C, 1, L]: a window of height 1 with stride and dilation 1 and no
 * padding in the added dimension computes exactly the 1-D op. The helpers
 * below read an attribute's nsp values (1 or 2) into the last nsp of two
 * slots, the added height keeping its neutral value. */

/* The number of spatial dims of x (1 or 2), refusing others. */
tg_status ob_spatial_dims(onnx_builder *b, tg_tensor *x, int *nsp)
{
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim;
    if (nd != 3 && nd != 4)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "only 1-D and 2-D inputs (3-dimensional NCL or 4-dimensional NCHW) are "
                       "supported, not %d dimensions%s",
                       nd,
                       nd == 5 ? " (this op has no 3-D form here: Conv, ConvTranspose, MaxPool, "
                                 "AveragePool and GlobalAveragePool have)"
                               : "");
    *nsp = nd - 2;
    return TG_OK;
}

/* [N, C, L] -> [N, C, 1, L]; a 4-D x as it is. */
tg_tensor *ob_as_2d(onnx_builder *b, tg_tensor *x)
{
    tg_shape s = tg_tensor_shape(x);
    return s.ndim == 3 ? tg_reshape(b->g, x, tg_shape4(s.dim[0], s.dim[1], 1, s.dim[2])) : x;
}

/* The 2-D op's output back to nsp spatial dims: [N, C, 1, L] -> [N, C, L]. */
tg_tensor *ob_from_2d(onnx_builder *b, tg_tensor *y, int nsp)
{
    if (!y || nsp == 2)
        return y;
    tg_shape s = tg_tensor_shape(y);
    return tg_reshape(b->g, y, tg_shape_of(3, (int64_t[]){s.dim[0], s.dim[1], s.dim[3]}));
}

/* Attribute `name` (nsp values, one per spatial dim) into out[2 - nsp ..]:
 * out keeps its values when the attribute is absent. */
tg_status ob_spatial_ints_min(onnx_builder *b, const char *name, int nsp, int64_t lo,
                              int64_t out[2])
{
    int n;
    const int64_t *a = ob_attr_ints(b, name, &n);
    if (!a)
        return TG_OK;
    if (n != nsp)
        return ob_fail(b, TG_ERR_INVALID_ARG, "%s has %d values for %d spatial dimension%s", name,
                       n, nsp, nsp > 1 ? "s" : "");
    for (int i = 0; i < nsp; i++) {
        if (a[i] < lo || a[i] > (1 << 20))
            return ob_fail(b, TG_ERR_INVALID_ARG, "%s has %lld (must be %lld to 2^20)", name,
                           (long long)a[i], (long long)lo);
        out[2 - nsp + i] = a[i];
    }
    return TG_OK;
}

tg_status ob_spatial_ints(onnx_builder *b, const char *name, int nsp, int64_t out[2])
{
    return ob_spatial_ints_min(b, name, nsp, 1, out);
}

/* pads (begins of the spatial dims, then their ends) into lo/hi. */
tg_status ob_spatial_pads(onnx_builder *b, int nsp, int64_t lo[2], int64_t hi[2])
{
    int n;
    const int64_t *a = ob_attr_ints(b, "pads", &n);
    if (!a)
        return TG_OK;
    if (n != 2 * nsp)
        return ob_fail(b, TG_ERR_INVALID_ARG, "pads has %d values (%d for %d-D)", n, 2 * nsp, nsp);
    for (int i = 0; i < nsp; i++) {
        lo[2 - nsp + i] = a[i];
        hi[2 - nsp + i] = a[nsp + i];
    }
    for (int i = 0; i < 2; i++)
        if (lo[i] < 0 || hi[i] < 0 || lo[i] > (1 << 20) || hi[i] > (1 << 20))
            return ob_fail(b, TG_ERR_INVALID_ARG, "pads are negative or too large");
    return TG_OK;
}

/* Conv window attributes: strides, dilations, and padding per side (pads,
 * or auto_pad SAME_UPPER/SAME_LOWER: the odd pixel at the end for UPPER, at
 * the start for LOWER). */
tg_status ob_read_window(onnx_builder *b, tg_shape x, int nsp, const int64_t *kernel, ob_window *w)
{
    char pad_mode[32];
    for (int i = 0; i < 2; i++) {
        w->k[i] = kernel[i];
        w->s[i] = w->d[i] = 1;
        w->lo[i] = w->hi[i] = 0;
    }
    TG_TRY(ob_spatial_ints(b, "strides", nsp, w->s));
    TG_TRY(ob_spatial_ints(b, "dilations", nsp, w->d));
    TG_TRY(ob_spatial_pads(b, nsp, w->lo, w->hi));
    const char *mode = ob_attr_string(b, "auto_pad", pad_mode, sizeof pad_mode);
    bool upper = !strcmp(mode, "SAME_UPPER");
    if (upper || !strcmp(mode, "SAME_LOWER")) {
        for (int i = 0; i < 2; i++) {
            int64_t in = x.dim[2 + i], out = (in + w->s[i] - 1) / w->s[i];
            int64_t total = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in;
            total = total > 0 ? total : 0;
            w->lo[i] = upper ? total / 2 : total - total / 2;
            w->hi[i] = total - w->lo[i];
        }
    } else if (!strcmp(mode, "VALID")) {
        w->lo[0] = w->lo[1] = w->hi[0] = w->hi[1] = 0;
    } else if (mode[0] && strcmp(mode, "NOTSET")) {
        return ob_fail(b, TG_ERR_INVALID_ARG, "auto_pad '%s' is unknown", mode);
    }
    return TG_OK;
}
