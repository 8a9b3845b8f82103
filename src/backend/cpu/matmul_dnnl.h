/* backend/cpu/matmul_dnnl.h - MATMUL and LINEAR through oneDNN's matmul primitive,
 * planned when the program is compiled (matmul_dnnl.c). */
#ifndef TG_BACKEND_CPU_MATMUL_DNNL_H
#define TG_BACKEND_CPU_MATMUL_DNNL_H

#include "ops/op.h"

/* The plan hook of MATMUL and LINEAR (op.h's tg_op_planner): a primitive
 * for the node's shapes, or no state (the OpenBLAS kernels run) with the
 * reason in plan->kernel. */
tg_status tg_matmul_dnnl_plan(const tg_tensor *node, const tg_plan_opts *opts,
                              tg_kernel_plan *plan);
void tg_matmul_dnnl_free(void *state);

/* Whether the plan hook would make node's product with B packed once per
 * weight write (an inference program's constant B in a 2-D product of
 * rows): only such a product computes what follows it
 * (compile/fuse_matmul.c). */
bool tg_matmul_dnnl_packs(const tg_tensor *node, const tg_plan_opts *opts);

/* Whether a batched product has the 4-D form of attention's scores
 * ([B, H, M, K] x [B, H, K, N], both batched) in which the plan hook divides
 * it by a scalar and adds mask ([B or 1, 1, M or 1, N]; NULL: none) as
 * post-ops (compile/fuse_matmul.c). */
bool tg_matmul_dnnl_scores(const tg_tensor *node, const tg_tensor *mask, int threads);

/* Whether the plan hook reads the product's operands in their bf16
 * storage, in place (an inference program with bf16 compute whose A and B
 * are stored in bf16, on a CPU with bf16 arithmetic): only then may a
 * product whose values are stored in bf16 compute what follows it. */
bool tg_matmul_dnnl_reads_bf16(const tg_plan_opts *opts);

/* Run the planned product: a->plan is the state from the hook. */
void tg_matmul_dnnl_run(const void *state, const tg_kernel_args *a);

#endif
