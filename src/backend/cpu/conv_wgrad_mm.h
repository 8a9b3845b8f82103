/* backend/cpu/conv_wgrad_mm.h - a convolution's weight gradient over a small output
 * map as one oneDNN matrix product over the batch (conv_wgrad_mm.c). Used
 * by backend/cpu/conv_dnnl.c's plan hook where it beats oneDNN's convolution. */
#ifndef TG_BACKEND_CPU_CONV_WGRAD_MM_H
#define TG_BACKEND_CPU_CONV_WGRAD_MM_H

#include "ops/conv.h"
#include "ops/op.h"

#include <stdbool.h>

typedef struct tg_wgrad_mm tg_wgrad_mm;

/* Whether the geometry suits it: no groups, at most 4 output pixels. */
bool tg_wgrad_mm_applies(const tg_conv_geom *g);

/* The product for node (a CONV2D_BWD_WEIGHT: dy, x -> dW) and the options,
 * in *out; sets plan's scratch, kernel name and native_storage (not its
 * state). TG_ERR_UNSUPPORTED (no message) for storage types other than f32
 * and bf16. */
tg_status tg_wgrad_mm_create(const tg_tensor *node, const tg_plan_opts *o, tg_kernel_plan *plan,
                             tg_wgrad_mm **out);

/* Run it: a->in[0] = dy, a->in[1] = x, a->out = dW, a->scratch planned. */
void tg_wgrad_mm_run(const tg_wgrad_mm *m, const tg_kernel_args *a);

void tg_wgrad_mm_free(tg_wgrad_mm *m);

#endif
