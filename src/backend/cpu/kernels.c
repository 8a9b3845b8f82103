/* backend/cpu/kernels.c - the cpu backend's kernel table: op kind -> the
 * host kernel that runs it (backend/backend.h). Each op family's kernels
 * are defined as `const tg_kernel_def tg_cpu_kernel_<ENUM>`; an op with no
 * line here (REVERSE_SEQUENCE, the leaves) runs its reference kernel. To
 * give an op a fast kernel: define its tg_cpu_kernel_<ENUM> and add its
 * line below (docs/architecture.md, "Adding a fast kernel to a backend"). */
#include "backend/backend.h"
#include "backend/cpu/blocked.h"

#include <pthread.h>

#define TG_CPU_KERNELS(X)                                                                          \
    X(ACTIVATION)                                                                                  \
    X(ACTIVATION_BWD)                                                                              \
    X(ADD)                                                                                         \
    X(SUB)                                                                                         \
    X(MUL)                                                                                         \
    X(DIV)                                                                                         \
    X(POW)                                                                                         \
    X(POW_BWD)                                                                                     \
    X(MAXIMUM)                                                                                     \
    X(MINIMUM)                                                                                     \
    X(MINMAX_BWD)                                                                                  \
    X(SUM_TO)                                                                                      \
    X(EXPAND)                                                                                      \
    X(CAST)                                                                                        \
    X(COMPARE)                                                                                     \
    X(LOGICAL)                                                                                     \
    X(WHERE)                                                                                       \
    X(CONV2D)                                                                                      \
    X(CONV2D_BWD_DATA)                                                                             \
    X(CONV2D_BWD_WEIGHT)                                                                           \
    X(DROPOUT)                                                                                     \
    X(GATHER)                                                                                      \
    X(GATHER_BWD)                                                                                  \
    X(MATMUL)                                                                                      \
    X(LINEAR)                                                                                      \
    X(NORM_STATS)                                                                                  \
    X(NORM_STATS_BWD)                                                                              \
    X(NORM_APPLY)                                                                                  \
    X(NORM_APPLY_BWD_X)                                                                            \
    X(NORM_APPLY_BWD_STATS)                                                                        \
    X(NORM_APPLY_BWD_AFFINE)                                                                       \
    X(RUNNING_STATS_UPDATE)                                                                        \
    X(NORMALIZE_U8)                                                                                \
    X(SGD_UPDATE)                                                                                  \
    X(ADAM_UPDATE)                                                                                 \
    X(PAD)                                                                                         \
    X(PAD_BWD)                                                                                     \
    X(MAXPOOL2D)                                                                                   \
    X(MAXPOOL2D_BWD)                                                                               \
    X(AVGPOOL2D)                                                                                   \
    X(AVGPOOL2D_BWD)                                                                               \
    X(RANDOM_UNIFORM)                                                                              \
    X(REDUCE_MAX)                                                                                  \
    X(REDUCE_MIN)                                                                                  \
    X(REDUCE_MINMAX_BWD)                                                                           \
    X(RESIZE)                                                                                      \
    X(RESIZE_BWD)                                                                                  \
    X(RESHAPE)                                                                                     \
    X(REDUCE_SUM)                                                                                  \
    X(TRANSPOSE)                                                                                   \
    X(CONCAT)                                                                                      \
    X(SLICE)                                                                                       \
    X(SLICE_BWD)                                                                                   \
    X(SLICE_STEP)                                                                                  \
    X(SLICE_STEP_BWD)                                                                              \
    X(SOFTMAX)                                                                                     \
    X(LOG_SOFTMAX)                                                                                 \
    X(SOFTMAX_BWD)                                                                                 \
    X(LOG_SOFTMAX_BWD)                                                                             \
    X(RELU)                                                                                        \
    X(RELU_BWD)                                                                                    \
    X(GELU)                                                                                        \
    X(GELU_BWD)                                                                                    \
    X(SIGMOID)                                                                                     \
    X(SIGMOID_BWD)                                                                                 \
    X(TANH)                                                                                        \
    X(TANH_BWD)                                                                                    \
    X(SCALE)                                                                                       \
    X(ERF)                                                                                         \
    X(ERF_BWD)                                                                                     \
    X(EXP)                                                                                         \
    X(LOG)                                                                                         \
    X(SQRT)                                                                                        \
    X(NEG)                                                                                         \
    X(ROUND_HALF)                                                                                  \
    X(ABS)                                                                                         \
    X(ABS_BWD)                                                                                     \
    X(RECIPROCAL)                                                                                  \
    X(LEAKY_RELU)                                                                                  \
    X(LEAKY_RELU_BWD)                                                                              \
    X(CLIP)                                                                                        \
    X(CLIP_BWD)                                                                                    \
    X(CROSS_ENTROPY)                                                                               \
    X(NLL_LOSS)                                                                                    \
    X(MSE_LOSS)                                                                                    \
    X(CROSS_ENTROPY_BWD)                                                                           \
    X(NLL_LOSS_BWD)                                                                                \
    X(MSE_LOSS_BWD)

#define TG_CPU_KERNEL_DECLARE(e) extern const tg_kernel_def tg_cpu_kernel_##e;
TG_CPU_KERNELS(TG_CPU_KERNEL_DECLARE)
#undef TG_CPU_KERNEL_DECLARE

/* The engines that take some runs of a family's ops before its own kernel:
 * ReLU, its gradient and add, element-wise, with every operand in bf16 run
 * backend/cpu/elementwise_bf16.c's loops (their operands read as they are:
 * reads_bf16), batch norm's ops on blocked operands
 * backend/cpu/norm_blocked.c's; every other run is the family's kernel.
 * Their entries are the family's with this forward (wrap). */
#define TG_CPU_BF16_NATIVE(X) X(ADD) X(RELU) X(RELU_BWD)
#define TG_CPU_NORM_BLOCKED(X)                                                                     \
    X(NORM_STATS)                                                                                  \
    X(NORM_STATS_BWD)                                                                              \
    X(NORM_APPLY)                                                                                  \
    X(NORM_APPLY_BWD_X)                                                                            \
    X(NORM_APPLY_BWD_STATS)                                                                        \
    X(NORM_APPLY_BWD_AFFINE)
#define TG_CPU_BF16_FORWARD(e)                                                                     \
    static void fwd_bf16_##e(const tg_kernel_args *a)                                              \
    {                                                                                              \
        if (!tg_elementwise_bf16_run(a))                                                           \
            tg_cpu_kernel_##e.forward(a);                                                          \
    }
TG_CPU_BF16_NATIVE(TG_CPU_BF16_FORWARD)
#undef TG_CPU_BF16_FORWARD
#define TG_CPU_BLOCKED_FORWARD(e)                                                                  \
    static void fwd_blocked_##e(const tg_kernel_args *a)                                           \
    {                                                                                              \
        if (a->blocked)                                                                            \
            tg_norm_blocked_run(a);                                                                \
        else                                                                                       \
            tg_cpu_kernel_##e.forward(a);                                                          \
    }
TG_CPU_NORM_BLOCKED(TG_CPU_BLOCKED_FORWARD)
#undef TG_CPU_BLOCKED_FORWARD

/* The pooling kernels take every 4-D operand blocked, whatever the params
 * (pool_kernels.c: tg_pool_blocked_run): their entries are the family's
 * with this layout. */
#define TG_CPU_POOL_BLOCKED(X) X(MAXPOOL2D) X(MAXPOOL2D_BWD) X(AVGPOOL2D) X(AVGPOOL2D_BWD)

/* The binary kernels' blocked per-channel loop (binary_kernels.c): add, sub
 * and mul with one operand of one value per channel run blocked too. */
#define TG_CPU_PER_CHANNEL(X) X(ADD) X(SUB) X(MUL)

static const tg_kernel_def *cpu_kernel(tg_op op);

bool tg_elementwise_bf16_supported(const tg_tensor *node)
{
#define TG_CPU_IS(e) node->op == TG_OP_##e ||
    bool listed = TG_CPU_BF16_NATIVE(TG_CPU_IS) false;
#undef TG_CPU_IS
    /* ... and the host runs this table's entry for it, not another
     * backend's (tests swap the host) */
    return listed && tg_op_is_elementwise(node) &&
           tg_backend_kernel(tg_backend_host(), node) == cpu_kernel(node->op);
}

static bool reads_bf16_elementwise(const tg_tensor *node, bool blocked)
{
    (void)blocked; /* the element-wise loops read any layout alike */
    return tg_elementwise_bf16_supported(node);
}

static tg_op_layout layout_blocked(const tg_tensor *node, int n_threads, bool inference)
{
    (void)node, (void)n_threads, (void)inference;
    return TG_LAYOUT_TIED;
}

static const tg_kernel_def *cpu_table[TG_OP_COUNT];
static tg_kernel_def cpu_wrapped[TG_OP_COUNT];
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* op's entry as a copy of the family's, for the table to add to. */
static tg_kernel_def *wrap(tg_op op)
{
    cpu_wrapped[op] = *cpu_table[op];
    cpu_table[op] = &cpu_wrapped[op];
    return &cpu_wrapped[op];
}

/* A hook of the family's own stays in these two: it knows its kernel. */
static void wrap_bf16(tg_op op, void (*forward)(const tg_kernel_args *a))
{
    tg_kernel_def *k = wrap(op);
    k->forward = forward;
    if (!k->reads_bf16)
        k->reads_bf16 = reads_bf16_elementwise;
}

static void wrap_blocked_layout(tg_op op)
{
    tg_kernel_def *k = wrap(op);
    if (!k->layout)
        k->layout = layout_blocked;
}

static void cpu_table_fill(void)
{
#define TG_CPU_KERNEL_ENTRY(e) cpu_table[TG_OP_##e] = &tg_cpu_kernel_##e;
    TG_CPU_KERNELS(TG_CPU_KERNEL_ENTRY)
#undef TG_CPU_KERNEL_ENTRY
#define TG_CPU_BF16_WRAP(e) wrap_bf16(TG_OP_##e, fwd_bf16_##e);
    TG_CPU_BF16_NATIVE(TG_CPU_BF16_WRAP)
#undef TG_CPU_BF16_WRAP
#define TG_CPU_BLOCKED_WRAP(e) wrap(TG_OP_##e)->forward = fwd_blocked_##e;
    TG_CPU_NORM_BLOCKED(TG_CPU_BLOCKED_WRAP)
#undef TG_CPU_BLOCKED_WRAP
#define TG_CPU_POOL_WRAP(e) wrap_blocked_layout(TG_OP_##e);
    TG_CPU_POOL_BLOCKED(TG_CPU_POOL_WRAP)
#undef TG_CPU_POOL_WRAP
#define TG_CPU_PER_CHANNEL_WRAP(e) wrap(TG_OP_##e)->per_channel_blocked = true;
    TG_CPU_PER_CHANNEL(TG_CPU_PER_CHANNEL_WRAP)
#undef TG_CPU_PER_CHANNEL_WRAP
}

static const tg_kernel_def *cpu_kernel(tg_op op)
{
    pthread_once(&cpu_once, cpu_table_fill);
    return (unsigned)op < TG_OP_COUNT ? cpu_table[op] : NULL;
}

/* Every entry of the table runs its node: the host's kernels take every
 * shape, dtype and layout the compiler gives them. */
const tg_backend tg_backend_cpu = {.name = "cpu", .kernel = cpu_kernel};
