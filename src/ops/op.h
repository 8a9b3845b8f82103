/* ops/op.h - the op table: what each op kind is, and the kernel contract.
 *
 * The op's meaning (shape rule, FLOPs, reference kernel, gradient, memory,
 * cost kind) is its tg_op_def here; the kernels a backend runs it with
 * (fast forward, scratch, plan hooks, layout, bf16 reading)
 * are a tg_kernel_def in that backend's table (backend/backend.h), and an
 * op a backend has no kernel for runs its reference kernel there.
 *
 * One tg_op_def per op kind, defined in the op's family file
 * (src/ops/<family>.c) as `const tg_op_def tg_opdef_<ENUM>`. The registry
 * (ops/registry.c) gathers them into a table indexed by tg_op. The def is
 * the op's only description: besides its rules and kernels it says what the
 * passes need to know of it (memory, flags, cost kind, plan and layout
 * hooks, below), and its params are named in the family's header
 * (ops/<family>.h, TG_PARAM_I in graph/node.h). Its name is its line of
 * graph/op_list.h alone (tg_op_name), not a field here.
 *
 * Kernels:
 *  - forward: the fast f32 kernel used by the engine. It may use the pool to
 *    split work over the device's threads and `scratch` (scratch(node, T)
 *    bytes, planned by the compiler) for temporary buffers.
 *  - reference: plain loops in double precision, for testing the fast kernel
 *    and for gradient checks by finite differences. Inputs and output are
 *    doubles whatever the dtype (i32 labels arrive as doubles).
 * Both read in[i] (typed by node->in[i]->dtype for the fast kernel) and write
 * out; ops with n_mutated > 0 write into in[0..n_mutated-1] instead.
 *
 * plan (optional, tg_op_planner): called once per node when a program is compiled, with the
 * device's thread count and compute type (tg_plan_opts). It may build kernel state for the node's
 * planned shapes (e.g. oneDNN primitives) into plan->state, with the scratch bytes that state needs
 * in plan->scratch (planned into the device arena like scratch()'s) and the kernel's name in
 * plan->kernel; plan_free destroys the state with the program. forward then finds the state in
 * a->plan, and must still run without it (a->plan NULL: tests, benchmarks, other callers).
 *
 * backward: given the node and the gradient of its output (dout), append ops
 * computing the gradient of each input i with need[i] set, into din[i]. It
 * may leave din[i] NULL for an input with no gradient (labels, indices).
 */
#ifndef TG_OPS_OP_H
#define TG_OPS_OP_H

#include "core/check.h"
#include "core/pool.h"
#include "graph/node.h"
#include "graph/op_rules.h"

#include <stddef.h>

/* How a weight update treats its gradient and rounds what it writes back
 * into half precision: the engine's staging does it for a staged update
 * (runtime/staging.c), an update that reads bf16 itself does the same
 * (tg_kernel_args.update). */
typedef struct tg_update_opts {
    float grad_unscale; /* the optimizer's gradient is multiplied by this (1/loss scale) */
    bool stochastic;    /* round the update's in-place writes stochastically */
    uint64_t round_key; /* for stochastic rounding: differs per update and step */
    int64_t first;      /* the element the kernel's first one is (a shard's start) */
} tg_update_opts;

typedef struct tg_kernel_args {
    const tg_tensor *node;
    void *in[TG_MAX_INPUTS];
    void *out;
    void *scratch;
    size_t scratch_bytes;
    tg_pool *pool;
    int64_t step;  /* weight updates done so far (optimizer, dropout) */
    uint64_t seed; /* the session's random seed */
    /* Which micro-batch of which replica this run of the op serves (0 for
     * the first micro-batch of replica 0): random ops mix it into their key
     * so that micro-batches and replicas get different dropout masks. */
    uint64_t stream;
    /* The node's state from its op's plan hook, or NULL. */
    const void *plan;
    /* In an inference program, the version of the weights as the host last
     * wrote them (runtime/session_io.c): a planned kernel may keep what it
     * derives from constant weights (backend/cpu/weight_cache.h) while it stays the
     * same. 0 (training, tests, other callers): derive it afresh. */
    uint64_t weights_version;
    /* The op's 4-D operands (inputs and output) are in the blocked layout
     * (TG_CHANNEL_BLOCK below) instead of NCHW: the compiler's layout pass
     * (compile/layout.c) sets it only for ops whose kernels read it. */
    bool blocked;
    /* The types in[] and out are stored in, for the kernels that read half
     * precision themselves (tg_op_reads_bf16); TG_F32 (0) for every other
     * kernel, whose operands the engine stages through f32. */
    tg_dtype in_type[TG_MAX_INPUTS], out_type;
    /* A weight update given its operands' storage types (in_type): how to
     * unscale its gradient and round its bf16 writes, as staging would;
     * NULL for every other kernel. */
    const tg_update_opts *update;
} tg_kernel_args;

/* The blocked activation layout, oneDNN's nChw16c: [N][C/16][H][W][16], so
 * that 16 channels of one pixel are one AVX-512 vector. A training program
 * keeps only tensors whose channel count is a multiple of the block in it,
 * which then hold exactly the bytes of NCHW (a 1x1 map is the same memory
 * in both); an inference program also keeps others, their last block
 * padded (compile/layout.h tg_layout_padded). */
#define TG_CHANNEL_BLOCK 16

/* The blocks c channels take, the last one maybe padded. */
static inline int64_t tg_channel_blocks(int64_t c)
{
    return (c + TG_CHANNEL_BLOCK - 1) / TG_CHANNEL_BLOCK;
}

/* What the compiler tells an op's plan hook about the program. */
typedef struct tg_plan_opts {
    int n_threads; /* the device's */
    /* TG_BF16 when the program's precision asks for bf16 arithmetic
     * (--precision bf16.*): matrix-like kernels may then multiply in bf16,
     * accumulating in f32, with f32 in and out. TG_F32 (0) otherwise. */
    tg_dtype compute;
    /* The types the operands are stored in (the precision pass's): a hook
     * that reads them as they are sets native_storage below. */
    tg_dtype in_storage[TG_MAX_INPUTS];
    tg_dtype out_storage;
    /* Operands the compiler keeps in the blocked layout (TG_CHANNEL_BLOCK):
     * the planned kernel must read and write them so. */
    bool in_blocked[TG_MAX_INPUTS];
    bool out_blocked;
    /* The program has no backward and no optimizer: its weights change only
     * when the host writes them (tg_kernel_args.weights_version). */
    bool inference;
    /* A convolution that computes the nodes after it (compile/fuse.c): the
     * batch norm it folds (its statistics, gamma and beta are the step's
     * inputs in[4], [5], [6], NULL where absent), and the activation it
     * applies as a post-op (ReLU, hard swish, hard sigmoid); NULL where
     * absent. */
    const tg_tensor *fold_norm;
    const tg_tensor *post_act;
    /* ... and the residual add between the two, whose other operand (the
     * output's shape, storage and layout) is the step's input
     * in[TG_FUSE_IN_RESIDUAL]; NULL where absent. */
    const tg_tensor *post_add;
    /* A matmul that computes the ops after it (compile/fuse_matmul.c): a
     * bias added (in[TG_FUSE_IN_STATS], [N]), then an activation (that
     * GELU node, NULL for none), then a residual of the output's
     * shape added (in[TG_FUSE_IN_STATS + 1]). */
    bool mm_bias, mm_residual;
    const tg_tensor *mm_act;
    /* ... or, attention's scores (a batched product, no bias, no
     * activation): divided by the scalar mm_scale (in[TG_FUSE_IN_STATS]),
     * then the mask mm_mask added, broadcast over the heads
     * (in[TG_FUSE_IN_STATS + 1], mm_residual set); NULL where absent. */
    const tg_tensor *mm_scale, *mm_mask;
    /* ... and, last, a batched product [B, H, M, N] written as its
     * transpose [B, M, H, N] (attention's heads merged back: p v). */
    bool mm_heads_out;
    /* memoryPerDevice is set: a kernel that would spend memory for speed
     * (the Winograd convolution's transformed weights and larger scratch)
     * does not, so that what fitted still fits. */
    bool memory_limited;
} tg_plan_opts;

/* Where a fused convolution's kernel finds the batch norm's statistics,
 * gamma and beta: in[TG_FUSE_IN_STATS + 0, 1, 2] (NULL where absent). */
#define TG_FUSE_IN_STATS 4
/* A fused convolution's residual (the operand of the add it computes). */
#define TG_FUSE_IN_RESIDUAL (TG_FUSE_IN_STATS + 3)
/* One past the last of the inputs a fused step reads beyond its node's. */
#define TG_FUSE_IN_END (TG_FUSE_IN_STATS + 4)

/* What an op's plan hook decided for one node. */
typedef struct tg_kernel_plan {
    void *state;      /* NULL: forward runs without planned state */
    size_t scratch;   /* bytes the planned kernel needs (with state; else scratch()'s) */
    char kernel[160]; /* the kernel chosen, for the compile output and the profile */
    /* The planned kernel reads in[] and writes out in their stored types
     * (tg_plan_opts.in_storage, out_storage), so the engine does not stage
     * them through f32 (runtime/staging.h): bf16 activations go straight
     * to oneDNN, which converts them while it reorders anyway. */
    bool native_storage;
    /* Host memory the planned kernel keeps beside the arena for each
     * replica (its weight cache, backend/cpu/weight_cache.h: the weights reordered
     * into oneDNN's layout, batch norm folded in): the memory report's
     * "weight cache" category (tg_program_kept_bytes). */
    size_t kept_bytes;
} tg_kernel_plan;

typedef struct tg_ref_args {
    const tg_tensor *node;
    double *in[TG_MAX_INPUTS];
    double *out;
    int64_t step;
    uint64_t seed;
    uint64_t
        stream; /* tg_kernel_args' stream: the replica and micro-batch the random ops draw for */
} tg_ref_args;

/* What a pass that treats some ops apart (layout, cost, bf16, aliasing)
 * reads from the op's definition: it never keeps a list of op names of its
 * own. Every flag's absence is the safe choice (plain NCHW layout, operands
 * staged through f32, storage of its own), so an op that says nothing is
 * treated as the general case. */
enum {
    TG_OPF_NONE = 0, /* the general case: NCHW operands, staged through f32 */
    /* The kernel applies one formula per element with no position in it
     * (ReLU, add, their gradients): the op is element-wise
     * (tg_op_is_elementwise) wherever every operand has the output's shape
     * and it has at most TG_ELEMENTWISE_MAX_INPUTS inputs. */
    TG_OPF_ELEMENTWISE = 1u << 0,
    /* How a backend's kernels take the op's operands (blocked, bf16 as
     * they are) is the backend's to say: tg_kernel_def's layout and
     * reads_bf16 (backend/cpu/kernels.c), not a flag here. */
};

/* Whether an op's output is memory of its own or another's bytes
 * reinterpreted. Every def must say (tests/ops/test_registry.c fails on
 * TG_OP_MEMORY_UNSAID): a pass that assumed a view had bytes of its own, or
 * the reverse, would read the wrong bytes (the layout pass once kept a
 * reshape's input blocked and the reshape read it as NCHW). */
typedef enum tg_op_memory {
    TG_OP_MEMORY_UNSAID = 0,
    /* Its output is stored apart from its inputs (or, for an update, it
     * writes into its first n_mutated inputs in place). */
    TG_OP_OWN_STORAGE,
    /* Its output is in[0]'s bytes reinterpreted (a reshape): no storage
     * and no kernel of its own. The graph marks every node of it
     * TG_NODE_ALIAS, and every pass treats the node as a view in NCHW. */
    TG_OP_VIEWS_INPUT,
} tg_op_memory;

/* How an op's kernels take their 4-D operands (compile/layout.c). */
typedef enum tg_op_layout {
    TG_LAYOUT_PLAIN = 0, /* NCHW only: the safe default */
    TG_LAYOUT_TIED,      /* its own kernels run blocked: every 4-D operand in one layout */
    TG_LAYOUT_OWN,       /* each operand as its planned kernel reads it (oneDNN convolutions) */
} tg_op_layout;

/* How the compiler's cost model times an op (compile/cost.c): by FLOPs at
 * a GEMM's or a convolution's rate, or by bytes moved at a pooling
 * window's or plain memory's pace. TG_COST_MEMORY (0) for every op that
 * says nothing. */
typedef enum tg_cost_kind {
    TG_COST_MEMORY, /* everything else: bound by bytes moved */
    TG_COST_GEMM,   /* matmul, linear */
    TG_COST_CONV,   /* conv2d and its two backward ops */
    TG_COST_POOL,   /* pooling and its backward: bytes moved, at a window's pace */
    TG_COST_KIND_COUNT
} tg_cost_kind;

/* The plan hooks of an op kind that has them (see the file's comment). */
typedef struct tg_op_planner {
    tg_status (*plan)(const tg_tensor *node, const tg_plan_opts *opts, tg_kernel_plan *plan);
    void (*plan_free)(void *state);
} tg_op_planner;

/* What an op IS, written with designated initializers: every field but
 * `memory` may be left out, and a field left out is the safe default. How a
 * machine runs it fast is a backend's (tg_kernel_def below,
 * backend/backend.h); the reference kernel is the op's own, and every
 * backend falls back to it. */
typedef struct tg_op_def {
    tg_infer_rule infer; /* graph/op_rules.h */
    /* Floating-point operations of one run (multiply-add = 2). */
    double (*flops)(const tg_tensor *node);
    void (*reference)(const tg_ref_args *a);
    tg_backward_rule backward; /* graph/op_rules.h */
    tg_op_memory memory;       /* required */
    unsigned flags;            /* TG_OPF_* */
    tg_cost_kind cost;
    /* When some operand values are errors no kernel can report (an index
     * outside its table, a label outside its classes): whether the run's
     * operands (a->in, as forward reads them) are all valid; if not, a
     * sentence naming the input, the bad value, its position and the valid
     * range in msg. The engine calls it before forward and stops the run
     * with the message (runtime/engine_passes.c); the kernel itself still
     * reads no memory for a bad value. NULL: every value is valid. It
     * is the op's, not a backend's: whichever kernel runs, reference or
     * fast, reads no memory for a bad value only if it is checked. */
    bool (*check)(const tg_kernel_args *a, char *msg, size_t cap);
} tg_op_def;

/* How a backend runs one op kind (backend/backend.h gathers them into its
 * kernel table; the cpu backend's is backend/cpu/kernels.c): every field
 * may be left out. An op with no kernel on a backend runs its reference
 * kernel there (tg_op_forward). */
typedef struct tg_kernel_def {
    /* Temporary bytes the fast kernel needs with n_threads threads; NULL = 0. */
    size_t (*scratch)(const tg_tensor *node, int n_threads);
    void (*forward)(const tg_kernel_args *a);
    const tg_op_planner *planner; /* NULL: no plan hooks */
    /* The layout the kernels take node's operands in: always blocked
     * (pooling's), or depending on the node (its params, the kernel its
     * plan hook will choose with n_threads threads, in an inference program
     * or not); NULL = tied to the output's for an element-wise node
     * (tg_op_is_elementwise), else plain. */
    tg_op_layout (*layout)(const tg_tensor *node, int n_threads, bool inference);
    /* When the kernel reads and writes bf16-stored operands as they are
     * (tg_kernel_args.in_type, out_type) on a condition of the node's
     * (blocked: it runs in the blocked layout): whether it does; NULL =
     * never. */
    bool (*reads_bf16)(const tg_tensor *node, bool blocked);
    /* Whether the kernel, element-wise, also runs blocked where one operand
     * has one value per channel of the other's 4-D shape
     * (tg_op_per_channel_full: a squeeze-excite block's scale). An inference
     * program's layout pass then ties its operands: planned plain,
     * mobilenet_v3's squeeze-excite Mul kept the depthwise convolution
     * before it and the 1x1 one after it in NCHW, each reordering at every
     * run. */
    bool per_channel_blocked;
} tg_kernel_def;

/* The op's definition, or NULL for a value outside tg_op. tg_op_name and the
 * rules the graph layer uses are declared in graph/op_rules.h. */
const tg_op_def *tg_op_get(tg_op op);
/* The end of every switch over an op (core/check.h): abort naming the op,
 * as "unreachable: op 12 (relu)". */
#define TG_UNREACHABLE_OP(op)                                                                      \
    tg_unreachable_fail(__FILE__, __LINE__, "op", (long long)(op), tg_op_name(op))
/* Whether node's kernel computes each output element from the elements at
 * the same place of its inputs alone (ReLU, add, their gradients, ...) with
 * every operand of the output's shape and at most this many inputs: any
 * permutation or cut of the elements commutes with it (the blocked layout;
 * staging half-precision operands a chunk at a time). */
#define TG_ELEMENTWISE_MAX_INPUTS 3
bool tg_op_is_elementwise(const tg_tensor *node);
/* Which input of a two-input 4-D node has the output's shape [N, C, H, W]
 * while the other has [N or 1, C, 1, 1] (one value per channel, and per
 * sample or for all), not the output's shape; -1 for any other node. */
int tg_op_per_channel_full(const tg_tensor *node);
/* The shape rule of an element-wise gradient op (dy, operand) -> dx: two f32
 * inputs of one shape, the output theirs. `inputs` and `operand` name the
 * second input in the messages ("takes 2 inputs (dy and x)", "dy [4] and x
 * [5] differ in shape"). */
tg_status tg_op_infer_elementwise_grad(tg_tensor *node, const char *inputs, const char *operand);
/* Whether a weight-update node (ops/optim.c) updates each element from the
 * same element of its inputs alone: SGD, Adam and AdamW; not LAMB, whose
 * trust ratio needs whole-tensor norms. */
bool tg_op_update_is_elementwise(const tg_tensor *node);
/* Whether node is a weight update whose kernel reads and writes operands
 * stored in bf16 as they are (tg_kernel_args.in_type and update): SGD, Adam
 * and AdamW (ops/optim.c). */
bool tg_op_update_reads_bf16(const tg_tensor *node);
/* Whether the operands of a run of a->node are valid (its def's check; true
 * when it has none); if not, why in msg. */
bool tg_op_check_operands(const tg_kernel_args *a, char *msg, size_t cap);

#endif
