/* backend/cpu/conv_dw_bf16.h - the own depthwise convolution over bf16
 * activations in nChw16c (conv_dw_bf16.c says why and where), which the
 * oneDNN convolution's plan hook (conv_dnnl.c) takes before oneDNN's. */
#ifndef TG_BACKEND_CPU_CONV_DW_BF16_H
#define TG_BACKEND_CPU_CONV_DW_BF16_H

#include "ops/op.h"

typedef struct tg_conv_dw tg_conv_dw;

/* The kernel's state for node (its name, scratch and weight cache in
 * plan), or TG_ERR_UNSUPPORTED where it does not apply (then *out stays
 * NULL and nothing is set). */
tg_status tg_conv_dw_create(const tg_tensor *node, const tg_plan_opts *o, tg_kernel_plan *plan,
                            tg_conv_dw **out);
void tg_conv_dw_run(const tg_conv_dw *d, const tg_kernel_args *a);
void tg_conv_dw_free(tg_conv_dw *d);

#endif
