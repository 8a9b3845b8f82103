/* backend/cpu/conv_pw_bf16.h - an inference program's 1x1 convolution with
 * few input channels on bf16 storage in nChw16c, with AVX-512 BF16's dot
 * products (conv_pw_bf16.c says where it beats oneDNN and why). Planned by
 * conv_dnnl.c's plan hook before oneDNN is asked, run by its run. */
#ifndef TG_BACKEND_CPU_CONV_PW_BF16_H
#define TG_BACKEND_CPU_CONV_PW_BF16_H

#include "ops/op.h"

typedef struct tg_conv_pw tg_conv_pw;

/* The kernel's state for node, its scratch and name in *plan; TG_OK with
 * *out NULL where it does not apply (the CPU lacks AVX-512 BF16, the
 * shapes, layouts, types or post-ops are others), an error only when
 * out of memory. */
tg_status tg_conv_pw_plan(const tg_tensor *node, const tg_plan_opts *o, tg_kernel_plan *plan,
                          tg_conv_pw **out);
void tg_conv_pw_run(const tg_conv_pw *pw, const tg_kernel_args *a);
void tg_conv_pw_free(tg_conv_pw *pw);

/* The most input channels (whole blocks) it takes, twice that on maps of
 * 100 pixels and more (conv_pw_bf16.c says why): tests and benchmarks may
 * change it (0 restores the default, 128). */
void tg_conv_pw_set_max_channels(int c);

#endif
