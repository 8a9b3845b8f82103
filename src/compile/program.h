/* compile/program.h - the executable: what each device runs, in which
 * order, and where every byte lives.
 *
 * A program is compiled from a graph and is the whole truth about a run: the
 * engine allocates exactly each device's `arena_bytes` (per replica) and
 * executes exactly its steps, and the memory report, liveness and schedule
 * shown to the user are read from here. The graph must outlive the program.
 *
 * Each device runs three phases: forward (F) and backward (B) once per
 * micro-batch, in the order of the pipeline schedule, and update (U) once
 * per weight update. Buffers that must survive from a micro-batch's forward
 * to its backward (stashed activations, inputs, values received from other
 * devices) have one slot per micro-batch in flight: slot = micro-batch mod
 * slots. Everything else lives within one phase and shares memory by
 * liveness. Values that cross devices are copied after the producing phase
 * into a receive buffer on the consumer (a transfer); under ParallelIPU
 * phased execution, between two phases inside it (compile/parallel_phases.c).
 *
 * The zero-bubble schedules run the backward phase as two passes: its
 * input-gradient steps, then later its weight-gradient steps
 * (input_grad_steps, compile/split_backward.c).
 */
#ifndef TG_COMPILE_PROGRAM_H
#define TG_COMPILE_PROGRAM_H

#include "compile/pipeline.h"
#include "core/cpus.h"
#include "compile/precision.h"
#include "graph/node.h"
#include "core/config.h"
#include "tilegraph/options.h"

#include <stddef.h>
#include <stdint.h>

#define TG_ALIGN 64

/* x rounded up to TG_ALIGN, as every buffer, slot and scratch part is. */
static inline size_t tg_align(size_t x)
{
    return (x + TG_ALIGN - 1) & ~(size_t)(TG_ALIGN - 1);
}

/* Where a buffer lives. Persistent regions keep their values across runs. */
#define TG_REGION_LIST(X)                                                                          \
    X(NONE, "none")                  /* not stored */                                              \
    X(PARAM, "weights")              /* trainable parameters */                                    \
    X(STATE, "optimizer state")      /* the optimizer's moments, momentum, step */                 \
    X(RUNNING, "running statistics") /* other state: batch norm's running stats */                 \
    X(ACCUMULATOR, "gradient accumulators")                                                        \
    X(CONSTANT, "constants")                                                                       \
    X(INPUT, "host-stream buffers") /* inputs fed by the host, per micro-batch */                  \
    X(STASH, "pipeline stash")      /* kept from forward to backward */                            \
    X(EXCHANGE, "inter-device copy buffers")                                                       \
    X(ACTIVATION, "activations") /* within one phase, shared by liveness */

typedef enum tg_region {
#define TG_REGION_ENUM(e, name) TG_REGION_##e,
    TG_REGION_LIST(TG_REGION_ENUM)
#undef TG_REGION_ENUM
        TG_REGION_COUNT
} tg_region;

/* Inline, so that the target layer below (target/tileplan.c) names a region
 * without calling into compile (scripts/check_layers.sh reads the symbols). */
static inline const char *tg_region_name(tg_region r)
{
    static const char *const names[] = {
#define TG_REGION_NAME(e, name) name,
        TG_REGION_LIST(TG_REGION_NAME)
#undef TG_REGION_NAME
    };
    return (unsigned)r < TG_REGION_COUNT ? names[r] : "?";
}

typedef enum tg_phase {
    TG_PHASE_FORWARD,
    TG_PHASE_BACKWARD,
    TG_PHASE_UPDATE,
    TG_PHASE_COUNT
} tg_phase;

typedef struct tg_buffer {
    int node; /* the value it holds (the root, for aliases) */
    int device;
    tg_dtype dtype; /* how the value is stored (compile/precision.h) */
    tg_region region;
    size_t offset;   /* of slot 0, from the device arena's start */
    size_t bytes;    /* of one slot */
    int slots;       /* >= 1 */
    size_t stride;   /* between slots */
    int first, last; /* activations: live steps on the device's timeline */
    /* Offloaded (TensorLocations, compile/streaming.c): the value lives in
     * host memory ("streaming memory": slots x stride bytes per replica),
     * not in the arena (region NONE); steps read it through streamed copies. */
    bool offloaded;
    /* Replicated tensor sharding: replica r holds elements
     * [n*r/R, n*(r+1)/R) of the value, at the start of the buffer. */
    bool sharded;
    /* A streamed copy: the offloaded buffer whose value this activation
     * buffer holds for the steps of one pass (or the sharded weight it
     * holds whole, gathered); -1 otherwise. */
    int copy_of;
} tg_buffer;

/* One copy between host memory and a streamed copy around a step; or,
 * after the step that finishes a gradient, adding it into its offloaded
 * accumulator in host memory (so the gradient dies there, not at the end
 * of the backward pass); or, before the first step of a pass that reads a
 * sharded weight, all-gathering its shards into the pass's copy of it
 * (compile/sharding.c). */
typedef enum { TG_STREAM_COPY, TG_STREAM_ACCUMULATE, TG_STREAM_GATHER } tg_stream_kind;

typedef struct tg_stream_op {
    int copy; /* the streamed copy (an activation buffer); the gradient to accumulate */
    int home; /* the offloaded buffer it stands for; the accumulator */
    int kind; /* tg_stream_kind */
} tg_stream_op;

typedef struct tg_step {
    int node;
    int out;                              /* buffer index, -1 for an empty output */
    int in[TG_MAX_INPUTS];                /* buffer indices */
    size_t scratch_offset, scratch_bytes; /* kernel scratch, then f32 staging */
    size_t kernel_scratch;                /* the kernel's own part of scratch_bytes */
    /* Inputs or output stored in another type than the kernel computes in:
     * the engine stages them through f32 copies after the kernel scratch. */
    bool staged;
    /* The convolution computes a batch norm (and a ReLU) fused into it
     * (compile/fuse.c): in[TG_FUSE_IN_STATS ..] are that norm's inputs,
     * in[TG_FUSE_IN_RESIDUAL] the residual it adds (-1 where absent); or
     * the matmul computes a bias add, activation or residual add
     * (compile/fuse_matmul.c): in[TG_FUSE_IN_STATS] is the bias,
     * [TG_FUSE_IN_STATS + 1] the residual (-1 where absent). These inputs
     * are read at this step too (the memory plan keeps them live). */
    bool fused;
    /* ParallelIPU (compile/parallel_phases.c): values are sent to or
     * received from the other device before this step runs, at a boundary
     * between two phases of the pass (tg_transfer.send_at, recv_at). */
    bool exchange_before;
    /* Streamed copies (compile/streaming.c): the device program's
     * streams[phase][stream_at ...]: n_stream_in copied in from host memory
     * before the step runs, then n_stream_out copied back after it. */
    int stream_at, n_stream_in, n_stream_out;
} tg_step;

/* A value sent from one device to another after a phase of the sender. */
typedef struct tg_transfer {
    int node;
    int src_device, dst_device;
    tg_phase phase; /* the sender's phase that produces it */
    int src_buffer, dst_buffer;
    bool used_forward, used_backward; /* by the receiver */
    /* Where in a pass it moves. -1: sent after the sender's pass, waited
     * for before the receiver's pass starts. ParallelIPU, whose devices
     * take turns inside one pass (compile/parallel_phases.c): sent before
     * the sender's step send_at of `phase` (once the phase that makes it
     * is done), waited for before the receiver's step recv_at[0] of its
     * forward and recv_at[1] of its backward (the first step of the phase
     * that reads it there). */
    int send_at;
    int recv_at[2];
} tg_transfer;

/* A parameter's gradient summed over the micro-batches of one update. */
typedef struct tg_accumulator {
    int param, grad_buffer, acc_buffer;
    /* added into after the gradient's last backward step (a stream op), not
     * at the end of the backward pass (compile/streaming.c) */
    bool early;
} tg_accumulator;

typedef struct tg_device_program {
    tg_step *steps[TG_PHASE_COUNT];
    int n_steps[TG_PHASE_COUNT];
    int *inputs, n_inputs;   /* buffers the host streams in before each forward */
    int *outputs, n_outputs; /* buffers streamed to the host after each forward */
    tg_accumulator *accumulators;
    int n_accumulators;
    size_t arena_bytes;
    size_t region_bytes[TG_REGION_COUNT];
    size_t scratch_peak;
    size_t offloaded_bytes; /* kept in host memory (streaming memory), all slots */
    /* the copies between host memory and streamed copies, per phase, in
     * the order of the steps they surround */
    tg_stream_op *streams[TG_PHASE_COUNT];
    int n_streams[TG_PHASE_COUNT];
    /* bytes those copies move each time the phase runs; the backward's
     * include adding into offloaded accumulators (in and out) */
    size_t stream_in_bytes[TG_PHASE_COUNT], stream_out_bytes[TG_PHASE_COUNT];
    int stash_depth; /* slots of stash and exchange buffers; input buffers have more
                      * with prefetch or I/O tiles (memplan.c) */
    /* backward steps [0, input_grad_steps) are the input gradient (B), the
     * rest the weight gradient (W); all of them unless the schedule splits
     * the backward (compile/split_backward.c) */
    int input_grad_steps;
    double flops[TG_PHASE_COUNT];
} tg_device_program;

typedef struct tg_program {
    const tg_graph *graph;
    /* the options it was compiled with, read once (core/config.h): the
     * session and the profile read them here, never from the options */
    tg_config config;
    int n_threads;     /* per device, in a run */
    int plan_threads;  /* kernel scratch is planned for this many (>= n_threads) */
    bool threads_auto; /* n_threads is the default rule's (core/cpus.h), not the user's */
    bool threads_free; /* ... over the cores free at compile time (threadsPerDevice -1) */
    tg_cpu_load cpu;   /* the cores at compile time (busy measured only for the default) */
    /* non-empty when devices x replicas x threads exceed the cores this
     * process may use: the numbers and what to do (also printed on stderr) */
    char threads_warning[320];
    int n_devices;
    int micro_batches; /* per weight update (or per inference run) */
    int iterations;    /* weight updates per run */
    int replicas;
    /* samples one run (host step) streams in: the first host input's
     * micro-batch x micro_batches x iterations x replicas; 0 without one */
    int64_t samples_per_step;
    bool training;
    bool accumulate; /* gradients go through accumulators (micro-batches x replicas > 1) */
    tg_pipe_schedule schedule;
    int *device_of; /* per node: the device that computes or holds it; -1 none */
    int *home;      /* per node: its buffer on its device, through aliases; -1 none */
    tg_buffer *buffers;
    int n_buffers, cap_buffers;
    tg_device_program *devices;
    tg_transfer *transfers;
    int n_transfers, cap_transfers;
    size_t arena_bytes;             /* all devices of one replica */
    double flops;                   /* one run: every micro-batch and update of every replica */
    struct tg_tile_plan *tile_plan; /* tiled targets (mk2): tiles, memory and cycles; else NULL */
    tg_precision precision;
    tg_dtype *storage; /* per node: its storage type */
    /* availableMemoryProportion x the device capacity: the most kernel
     * scratch one step is planned with (SIZE_MAX without a capacity) */
    size_t scratch_cap;
    /* per node: what its op's plan hook built at compile time (ops/op.h);
     * state NULL and kernel "" for nodes whose op has none */
    struct tg_kernel_plan *plans;
    /* whether the plan hooks run: on the cpu target; a tiled target models
     * its own kernels, and host libraries' buffers have no place on tiles */
    bool plan_kernels;
    /* Inference fusion (compile/fuse.c, fuse_matmul.c), NULL when nothing
     * is fused: per node, for a batch norm or ReLU computed by the
     * convolution before it, or a bias add, GELU or residual add
     * computed by the matmul before it, that convolution's or matmul's id,
     * else -1 (fused_into); for such a convolution or matmul, the last node
     * it computes, else -1 (fused_tail). What a matmul's chain holds is
     * read back from these (tg_fuse_matmul_opts). */
    int *fused_into, *fused_tail;
    /* per node: TG_LAYOUT_* bits, which activations are kept blocked
     * (nChw16c) and which ops run their blocked kernels (compile/layout.h) */
    uint8_t *layout;
    /* executionStrategy phased: the phases, and per node its phase (-1:
     * none); 0 and NULL otherwise */
    int n_phases;
    int *phase_of;
    /* stages or split "auto": the split chosen (compile/stages.h), else "" */
    char auto_stages[256];
    /* phases "auto" (compile/phases_auto.h): the phases chosen ("B1@0|B2@1"),
     * the kinds off chip as --offload spells them ("weights,optimizer" or
     * "none") and why; "" otherwise. Not kept in executables: phases auto
     * compiles past the cache. */
    char auto_phases[512];
    char auto_offload[64];
    char auto_phases_why[1024];
} tg_program;

/* Compile `g` with the options (strategy, stages, schedule, replication,
 * accumulation, device iterations, threads per device, memory per device):
 * tg_program_compile_config after tg_config_read. */
tg_status tg_program_compile(const tg_graph *g, const tg_options *o, tg_program **out);
/* The same from a config read already; the program keeps a copy of it. */
tg_status tg_program_compile_config(const tg_graph *g, const tg_config *c, tg_program **out);
void tg_program_destroy(tg_program *p);

/* Whether a staged step of t converts its operands a chunk at a time
 * (element-wise ops: runtime/staging.c) instead of whole in its scratch. */
bool tg_step_stages_in_chunks(const tg_tensor *t);

/* Threads per device for a run of p (n_threads, threads_auto, cpu,
 * threads_warning): the user's threadsPerDevice, or the default rule's over
 * the cores this process may use (over those free now for -1), shared with the other instances of
 * an MPI job on this host (config.threads.host_instances). The run uses n_threads as it is. The
 * compiler calls it; so does loading an executable, whose plan does not depend on the load but
 * whose run does. */
void tg_program_choose_threads(tg_program *p);

/* After loading an executable: make the kernel plans again (oneDNN
 * primitives are host objects, not stored) and check every step's kernel
 * scratch against them; TG_ERR_FORMAT (stale) when they differ. */
tg_status tg_program_plan_loaded(tg_program *p);
/* Host memory device d's planned kernels keep beside its arena for each
 * replica (tg_kernel_plan.kept_bytes: an inference program's weight caches,
 * ~98 MiB for ResNet-50), counted once per node. */
size_t tg_program_kept_bytes(const tg_program *p, int d);
/* Its category in the profile's `memory` table and the memory table. */
#define TG_WEIGHT_CACHE_CATEGORY "weight cache"

/* ---- executables (compile/executable.c, executable_file.c, docs/executable-cache.md) */

/* The file format's version, in the key and the header (4: activations may
 * be blocked, the layout recomputed at load; 5: transfers may move inside a
 * pass, ParallelIPU; 6: the running statistics region; 7: the inference
 * fusion, fused_into and fused_tail; 8: a step's unused fused-input slots
 * are -1, and a convolution's step may read the residual it adds; 9: a
 * batched product's step may read the divisor and the mask it applies,
 * attention's scores, and write its heads merged, so the same graph's
 * inference program differs from an 8's; 10: an inference program's
 * buffers of blocked values whose channels are no whole blocks hold the
 * padded size; 11: a 2-D product with constant weights whose rows the
 * threads do not divide, a classifier's at batch 1, runs in parts of its
 * columns, so it is fused at several threads where OpenMP threads spin,
 * and its plan's scratch differs). Written and read in
 * compile/executable_file.c. */
#define TG_EXECUTABLE_FORMAT_VERSION 11u

/* The cache key of compiling g with o: 32 hex digits hashing the graph, the
 * options that shape the program, the target description, the threads per
 * device and the tilegraph and format versions. */
tg_status tg_executable_key(const tg_graph *g, const tg_config *c, char out[33]);
/* p (compiled from its graph with its config) as the bytes of an executable
 * file: *data is the caller's (tg_free). */
tg_status tg_executable_serialize(const tg_program *p, void **data, size_t *len);
/* Write p (compiled from its graph with its config) to path, atomically. */
tg_status tg_executable_save(const tg_program *p, const char *path);
/* Read a program for g and o back. TG_ERR_FORMAT for a corrupt or truncated
 * file, TG_ERR_NOT_FOUND for a sound one written for another graph, options,
 * target or version (stale); the message names the file and the reason. */
tg_status tg_executable_load(const tg_graph *g, const tg_config *c, const char *path,
                             tg_program **out);
/* The same from memory (the fuzz target's entry); `path` names it in messages. */
tg_status tg_executable_parse(const tg_graph *g, const tg_config *c, const void *data, size_t len,
                              const char *path, tg_program **out);
/* Whether a program read from a file agrees with its graph and options:
 * every step, transfer, accumulator and host stream moves the values the
 * graph says into buffers of those values, every buffer has its value's
 * bytes, every size is the sum of its parts (compile/executable_check.c).
 * TG_ERR_FORMAT naming the first disagreement. */
tg_status tg_executable_check(const tg_program *p);

typedef enum tg_cache_result {
    TG_CACHE_OFF,      /* neither executableFile nor enableExecutableCaching is set */
    TG_CACHE_LOADED,   /* loaded, nothing compiled */
    TG_CACHE_COMPILED, /* no file yet: compiled and written */
    TG_CACHE_REPLACED, /* the file was corrupt, truncated or stale: warned, compiled, rewritten */
    TG_CACHE_UNSAVED   /* compiled, but the file could not be written (warned) */
} tg_cache_result;

/* tg_program_compile through the cache the options name: executableFile, or
 * KEY.tgx in the enableExecutableCaching directory. A file that does not load
 * is never trusted and never fatal: a warning on stderr, then a compile.
 * Failing to write the file is a warning too. *result (may be NULL) says
 * which happened. This is the entry for "one instance compiles, the others
 * load": the first writes executableFile, the others then load it. */
tg_status tg_program_compile_cached(const tg_graph *g, const tg_options *o, tg_program **out,
                                    tg_cache_result *result);
/* The same from a config read already (the session's, with its MPI share). */
tg_status tg_program_compile_cached_config(const tg_graph *g, const tg_config *c, tg_program **out,
                                           tg_cache_result *result);

/* TG_OK when every device (and, on tiled targets, every tile) holds its
 * plan; else TG_ERR_CAPACITY naming the first that does not, whatever
 * debug.allowOutOfMemory says (the compile skips this check under it; a
 * session warns with this message before running such a plan). */
tg_status tg_program_capacity_check(const tg_program *p);

/* The buffer a step on `device` reads for node `id` (its own or a received copy). */
int tg_program_buffer_on(const tg_program *p, int id, int device);

/* Elements [*begin, *end) of an n-element value that replica r of R holds
 * or updates under replicated tensor sharding (also the all-reduce's share). */
/* The shards of a buffer under replicated tensor sharding: one per replica
 * of the whole job, every instance's replicas included (shard k of a
 * session is its replica_offset + local replica). */
static inline int tg_program_shards(const tg_program *p)
{
    int n = p->config.distributed.instances;
    return p->replicas * (n > 1 ? n : 1);
}

static inline void tg_shard_range(int64_t n, int r, int R, int64_t *begin, int64_t *end)
{
    *begin = n * r / R;
    *end = n * (r + 1) / R;
}

/* Bytes of node t as stored by the program. */
size_t tg_program_node_bytes(const tg_program *p, const tg_tensor *t);

/* Whether step st reads input k through an f32 copy: the input is stored in
 * another type than its node's, or it is a weight update's gradient to be
 * divided by the loss scale. The output likewise, when stored in another
 * type. The staging area follows the kernel's scratch (aligned): one aligned
 * f32 copy per staged input in input order, then the output's. */
bool tg_step_stages_input(const tg_program *p, const tg_step *st, int k);
/* Whether step st's kernel reads and writes its operands in their storage
 * types itself (tg_op_reads_bf16): the engine then passes the types in
 * tg_kernel_args.in_type / out_type and stages nothing. */
bool tg_step_reads_native(const tg_program *p, const tg_step *st);
/* The f32 copies such a step makes of its operands that are not 4-D (batch
 * norm's statistics, gamma, beta), after its kernel scratch; none for a
 * weight update (it widens a block at a time on its stack). */
size_t tg_step_native_scratch(const tg_tensor *t);
bool tg_step_stages_output(const tg_program *p, const tg_step *st);
/* Whether step st, a weight update, multiplies its gradient by the
 * unscale (tg_update_opts.grad_unscale): when the gradient is stored in
 * half precision or loss scaling is on, staged or read natively alike. */
bool tg_step_unscales_gradient(const tg_program *p, const tg_step *st);

/* A new buffer for node on device (its bytes from the node and dtype);
 * -1 when out of memory. For the passes that add buffers. */
int tg_program_add_buffer(tg_program *p, int node, int device, tg_region region, tg_dtype dtype);
/* Whether t is optimizer state: a STATE leaf read only by optimizer steps. */
bool tg_program_is_optimizer_state(const tg_graph *g, const tg_tensor *t);

/* What one phase of a phased program (executionStrategy phased) costs on
 * device d, from the memory plan (compile/phases.c). */
typedef struct tg_phase_memory {
    size_t persistent;       /* the device's persistent and slotted regions: every phase's */
    size_t peak_activations; /* the most activation-region bytes live at one of its steps,
                              * streamed copies and kernel scratch included */
    size_t loaded;           /* loaded from streaming memory by its forward, backward and
                              * update steps, once each */
    size_t stored;           /* stored back to streaming memory by them */
    int steps;
} tg_phase_memory;

/* Step s of phase ph's place on device dp's timeline (its forward,
 * backward and update steps in order), as the memory plan counts it. */
int tg_program_timeline_at(const tg_device_program *dp, tg_phase ph, int s);
/* Widen buffer b's live range to take in timeline step `at` (the memory
 * plan only widens; compile/streaming.c widens streamed copies ahead of it). */
void tg_buffer_live_at(tg_buffer *b, int at);

/* Bytes of device d's activation buffers live at step `at` of its timeline
 * (its forward, backward and update steps in order), kernel scratch not
 * counted: the memory plan's liveness (compile/memplan.c). */
size_t tg_program_live_bytes(const tg_program *p, int d, int at);

/* out[n_phases] for device d. */
void tg_program_phase_memory(const tg_program *p, int d, tg_phase_memory *out);

/* Inference fusion (compile/fuse.c): in a program with no backward, a
 * batch norm on running statistics, and a ReLU after it, computed by the
 * oneDNN convolution before them (weights and bias folded, ReLU a post-op);
 * after the layout pass, before the steps are made. The fused nodes get no
 * step and no buffer: they are the convolution's buffer. */
tg_status tg_fuse_inference(tg_program *p, const bool *needed);
/* The pass's decisions alone (fused_into, fused_tail; nothing else of p
 * changed): what tg_fuse_inference applies, and what a loaded program's
 * stored decisions are checked against. */
tg_status tg_fuse_decide(tg_program *p, const bool *needed);
/* A loaded program (layout assigned): its stored fusion is the pass's on
 * this machine, and its steps are linked as tg_fuse_link links them;
 * TG_ERR_FORMAT naming the first difference. */
tg_status tg_fuse_check_loaded(tg_program *p);
/* The node whose value node id's buffer holds: a fused convolution's and
 * the nodes fused into it hold the last one it computes; others their own. */
int tg_fuse_value_node(const tg_program *p, int id);
/* After the steps' buffers are linked: the fused convolutions' steps read
 * the norm's statistics, gamma and beta too (tg_step.fused). */
void tg_fuse_link(tg_program *p);
/* The residual add convolution conv computes (between its norm and its
 * activation; its other operand is the step's in[TG_FUSE_IN_RESIDUAL]),
 * or NULL. */
const tg_tensor *tg_fuse_conv_add(const tg_program *p, const tg_tensor *conv);
/* Whether convolution conv computes nodes fused into it (fused_tail), and
 * then the batch norm it folds and the activation it applies after (each
 * NULL where absent): the chain is read from the graph, from the tail back
 * to conv, so fused_into and fused_tail are all the state fusion adds. */
bool tg_fuse_chain(const tg_program *p, const tg_tensor *conv, const tg_tensor **norm,
                   const tg_tensor **act);
struct tg_plan_opts; /* ops/op.h */
/* The matmul chains (compile/fuse_matmul.c), called by tg_fuse_decide
 * with its arrays made: readers[] counts each needed node's readings,
 * reader[] its sole reader (-1: none or several). */
void tg_fuse_matmul(tg_program *p, const bool *needed, const int *readers, const int *reader);
/* Whether node's plan hook, asked with the options the plan will give it
 * (the chain fused_into/fused_tail now hold included), takes them
 * (compile/fuse.c); true where no hook plans it. */
bool tg_fuse_plan_takes(const tg_program *p, const tg_tensor *node);
/* For a matmul computing a chain: the plan options saying what it computes
 * (o->mm_bias, mm_act, mm_residual), the bias and residual nodes (NULL where
 * absent); false (o untouched) for any other node. */
bool tg_fuse_matmul_opts(const tg_program *p, const tg_tensor *head, struct tg_plan_opts *o,
                         const tg_tensor **bias, const tg_tensor **residual);
/* The plan options of node t as compile() gives its plan hook before any
 * fusion: threads, compute type, inference, the operands' storage types
 * (compile/program_steps.c; the fusion passes ask the hooks with them). */
void tg_program_plan_opts(const tg_program *p, const tg_tensor *t, struct tg_plan_opts *po);
/* The options t's plan hook is called with, its fused chain's included
 * (compile/program_steps.c): fusion asks with them whether oneDNN takes a
 * chain before it keeps it. */
void tg_program_node_plan_opts(const tg_program *p, const tg_tensor *t, struct tg_plan_opts *po,
                               bool *fused, bool *mm_fused, bool *blocked);
/* A fused matmul's step: marked fused, the bias and residual buffers as its
 * in[TG_FUSE_IN_STATS], [TG_FUSE_IN_STATS + 1]. */
void tg_fuse_matmul_link(tg_program *p, tg_step *st);

/* Internal passes, each in its own file. */
tg_status tg_schedule(const tg_graph *g, int **order, int *n_order);
tg_status tg_memplan_device(tg_program *p, int device);
tg_status tg_recompute(tg_program *p);
tg_status tg_split_backward(tg_program *p);
/* Where device dp's backward splits into two passes, each with streamed
 * copies of its own: input_grad_steps when the backward is split with
 * steps on both sides (B, then W), else 0 (one pass). The streaming plan
 * (compile/streaming.c) keeps no copy live across it and the I/O thread
 * (runtime/stream_io.c) loads nothing ahead over it: one rule for both. */
int tg_backward_cut(const tg_device_program *dp);
tg_status tg_streaming_plan(tg_program *p);
/* Replicated tensor sharding of weights (compile/sharding.c): shrink the
 * chosen weights' home buffers and their optimizer state to one shard. */
tg_status tg_sharding_plan(tg_program *p);
/* ParallelIPU phased execution (compile/parallel_phases.c): whether p
 * alternates its phases over two devices; order each device's forward
 * steps by phase and its backward steps by phase from the last (after
 * recompute, before the backward is split); then, once the streamed copies
 * are planned, mark where values move between the devices inside a pass
 * (tg_transfer.send_at, recv_at, tg_step.exchange_before) and check that
 * no device waits for a value that is sent after its wait. Every program
 * passes through both; only a ParallelIPU one changes. */
bool tg_program_parallel_phases(const tg_program *p);
tg_status tg_parallel_phases_order(tg_program *p);
tg_status tg_parallel_phases_exchange(tg_program *p);
/* Whether steps of phase ph read sharded buffer b through a gathered copy. */
bool tg_sharding_gathers(const tg_program *p, int b, tg_phase ph);
/* Whether buffer b is the home of a sharded weight, on chip or offloaded to
 * streaming memory (not a streamed or gathered copy of one). */
bool tg_sharding_is_weight(const tg_program *p, int b);
/* Bytes of one shard of buffer b's value (the first, the largest). */
size_t tg_sharding_shard_bytes(const tg_program *p, int b);

/* The home buffer that buffer b stands for in a pass: the offloaded or
 * sharded buffer of a streamed or gathered copy, else b itself. */
static inline int tg_program_home_of(const tg_program *p, int b)
{
    return b >= 0 && p->buffers[b].copy_of >= 0 ? p->buffers[b].copy_of : b;
}

#endif
