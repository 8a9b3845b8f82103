/* backend/backend.h - a backend: the kernels that run ops on one kind of
 * machine, apart from what the ops are (ops/op.h).
 *
 * A backend is a kernel table (op kind -> tg_kernel_def: fast forward,
 * scratch, plan hooks, layout, bf16 reading) and a
 * supports_op hook. The compiler and the engine ask it through the
 * functions below; where supports_op says no (or the table has no entry)
 * the op's own reference kernel runs instead, converted through doubles on
 * one thread, so an op defined with only its meaning and reference kernel
 * runs on every target. A target is a backend plus a cost model
 * (target/target.h: tg_target_ops.backend); cpu, mk2 and tiny all run the
 * host's kernels, the cpu backend (backend/cpu/kernels.c).
 */
#ifndef TG_BACKEND_BACKEND_H
#define TG_BACKEND_BACKEND_H

#include "ops/op.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tg_backend {
    const char *name;
    /* The backend's kernel for op, or NULL when it has none. */
    const tg_kernel_def *(*kernel)(tg_op op);
    /* Whether the backend runs node with its own kernel; false: the op's
     * reference kernel runs (tg_op_forward). NULL: wherever it has one. */
    bool (*supports_op)(const tg_tensor *node);
} tg_backend;

/* The host's kernels (backend/cpu/): OpenBLAS, oneDNN, the own SIMD loops. */
extern const tg_backend tg_backend_cpu;

/* The backend the host runs kernels with: the cpu backend, the one backend
 * every target (cpu, mk2, tiny) uses today. */
const tg_backend *tg_backend_host(void);
/* For tests: run the host's kernels with b from now on (NULL: the cpu
 * backend again). Not for use while a session runs. */
void tg_backend_use_host(const tg_backend *b);

/* b's kernel for node, or NULL where b does not run it (no entry, or its
 * supports_op says no): the reference kernel runs instead. */
const tg_kernel_def *tg_backend_kernel(const tg_backend *b, const tg_tensor *node);

/* The questions below are asked of the host backend (tg_backend_host). */

/* Run node's f32 kernel (a->node): the backend's forward, or, for an op it
 * has no kernel for, the op's reference kernel on the operands converted to
 * doubles in a->scratch (one thread). Every caller runs ops through it, so
 * such an op runs on every target, staged through f32 in half precision. */
void tg_op_forward(const tg_kernel_args *a);
/* The scratch tg_op_forward needs for node with n_threads threads: the
 * kernel's scratch(), or the doubles of its operands when it runs by
 * reference. */
size_t tg_op_scratch(const tg_tensor *node, int n_threads);
/* Whether op has a kernel to run (the backend's or its reference). */
bool tg_op_has_kernel(tg_op op);
/* op's plan hooks, or NULL when its kernel has none (to free a state
 * they made). */
const tg_op_planner *tg_op_planner_get(tg_op op);
/* The plan hooks to plan node with: its kernel's, or NULL when it has none
 * or runs by reference (supports_op said no: a plan's scratch would not
 * be the reference's). */
const tg_op_planner *tg_node_planner(const tg_tensor *node);
/* How node's kernels take their 4-D operands with n_threads threads in an
 * inference program or not (the kernel's layout hook, else the op's
 * flags; plain NCHW for an op run by reference). */
tg_op_layout tg_op_layout_of(const tg_tensor *node, int n_threads, bool inference);
/* Whether node's kernel reads and writes its bf16-stored operands as they
 * are (tg_kernel_args.in_type, out_type), running blocked or not: the
 * kernel's reads_bf16 hook (batch norm's ops when blocked,
 * backend/cpu/norm_blocked.c; the element-wise weight updates; ReLU, its
 * gradient and add where element-wise, backend/cpu/kernels.c). */
bool tg_op_reads_bf16(const tg_tensor *node, bool blocked);
/* The element-wise ops with every operand in bf16 (the cpu table's
 * TG_CPU_BF16_NATIVE, backend/cpu/kernels.c, run by
 * backend/cpu/elementwise_bf16.c: ReLU, its gradient and add): whether node
 * is one, and its kernel, which runs and returns true when a->out_type is
 * bf16 (the compiler then gave it every operand in bf16). */
bool tg_elementwise_bf16_supported(const tg_tensor *node);
bool tg_elementwise_bf16_run(const tg_kernel_args *a);

#endif
