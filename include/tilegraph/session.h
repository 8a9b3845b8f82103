/* tilegraph/session.h - compile a graph and run it.
 *
 * A session compiles the graph (schedule and memory plan), allocates the one
 * arena the plan asks for, fills parameters from their initialisers and runs
 * the compiled program; nothing is allocated per run. The graph must outlive
 * the session. A session is used from one thread at a time.
 *
 *     tg_session *s;
 *     if (tg_session_create(g, opts, &s) != TG_OK) puts(tg_error_message());
 *     tg_session_write(s, images, buf, bytes);
 *     tg_session_run(s);           // forward, backward and update
 *     tg_session_read(s, loss, &value, sizeof value);
 *     tg_session_destroy(s);
 */
#ifndef TILEGRAPH_SESSION_H
#define TILEGRAPH_SESSION_H

#include "tilegraph/export.h"

#include "tilegraph/graph.h"
#include "tilegraph/options.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_session tg_session;

/* opts may be NULL for the defaults. */
TG_API tg_status tg_session_create(tg_graph *g, const tg_options *opts, tg_session **out);
TG_API void tg_session_destroy(tg_session *s);

/* Copy host data into an input (all micro-batches of one run: see
 * tg_session_samples_per_run) or into a weight or state tensor (on every
 * replica). */
TG_API tg_status tg_session_write(tg_session *s, const tg_tensor *t, const void *data,
                                  size_t bytes);
/* Copy a tensor out: parameters, state, inputs, and outputs marked with
 * tg_tensor_mark_output (other values do not outlive their last use). */
TG_API tg_status tg_session_read(tg_session *s, const tg_tensor *t, void *data, size_t bytes);

/* Run one host step: deviceIterations weight updates, each over
 * Training.gradientAccumulation micro-batches, on every replica. Inputs must
 * have been written with all those micro-batches, in the order
 * [device iteration][replica][micro-batch]. Fails (TG_ERR_NUMERIC) if a
 * scalar output is NaN or infinite and debug.checkNaN is on, naming the
 * output, step, micro-batch and replica; every device stops. */
TG_API tg_status tg_session_run(tg_session *s);

/* Copies of output `t` one run returns under outputMode: all: every
 * micro-batch of every replica and iteration; sum and final: one per replica;
 * everyN: every micro-batch of every N-th iteration. tg_session_read of an
 * output takes that many times the tensor's bytes. */
TG_API int64_t tg_session_output_count(const tg_session *s, const tg_tensor *t);
/* Which micro-batch the k-th returned copy belongs to, as its position in
 * the input stream ([iteration][replica][micro-batch]); -1 for outputMode
 * sum (a copy is then a sum over micro-batches) or k out of range. */
TG_API int64_t tg_session_output_index(const tg_session *s, const tg_tensor *t, int64_t k);
/* Samples one run consumes: micro-batch x accumulation x iterations x
 * replicas, with the micro-batch size read from the input's first dimension. */
TG_API int64_t tg_session_samples_per_run(const tg_session *s, const tg_tensor *input);
/* The same for the graph's first input (0 for a graph without one), as the
 * program was compiled: this instance's replicas under MPI
 * (tg_options_summarize gives the whole job's before a session exists). */
TG_API int64_t tg_session_samples_per_step(const tg_session *s);

/* Loss scaling (options lossScaling*): the current scale, and the updates
 * skipped so far because a gradient overflowed. */
TG_API float tg_session_loss_scale(const tg_session *s);
TG_API int64_t tg_session_skipped_updates(const tg_session *s);
/* How the session stores tensor t (precision option): f32, f16 or bf16 for
 * floats; tg_session_write and tg_session_read always take t's own type. */
TG_API tg_dtype tg_session_storage_dtype(const tg_session *s, const tg_tensor *t);

/* Finish the profile now (autoReport.*): write its totals and give it its
 * final name. Returns the first failure writing the profile, including one
 * during an earlier run: such a failure does not fail tg_session_run (the
 * profile is dropped and training goes on), so a caller that must report it
 * calls this, after saving what matters. TG_OK when profiling is off.
 * tg_session_destroy does the same and prints a failure on stderr. */
TG_API tg_status tg_session_finish_profile(tg_session *s);

/* Record counter `name` at the host step just run (the last tg_session_run)
 * in the profile's `counters` table, for `tilegraph analyse REPORT host` and
 * the report's Host tab: the caller's own series (samples/s, loss, loader
 * queue depth). The session records the host step's time, the loss scale
 * and the memory in use itself. Does nothing when no profile is written
 * or before the first run; at most 32 names. */
TG_API tg_status tg_session_record_counter(tg_session *s, const char *name, double value);

/* Weight updates done so far; checkpoints save and restore it. */
TG_API int64_t tg_session_step(const tg_session *s);
TG_API void tg_session_set_step(tg_session *s, int64_t step);

/* Copy every parameter and state tensor of `dst` from the tensor with the same
 * name in `src` (an inference session takes a training session's weights).
 * Optimizer state is copied only where both have it. Fails naming a tensor
 * that is missing or has another shape. */
TG_API tg_status tg_session_copy_weights(tg_session *dst, const tg_session *src);

/* Bytes of all device arenas of all replicas. */
TG_API size_t tg_session_arena_bytes(const tg_session *s);
/* What the executable cache (executableFile, enableExecutableCaching) did
 * when the session was created, for a user to see hit or miss: "hit
 * (loaded, nothing compiled)", "miss (compiled and written)", ...; NULL when
 * neither option is set. A static string. */
TG_API const char *tg_session_cache(const tg_session *s);
/* Threads each device computes with. */
TG_API int tg_session_threads(const tg_session *s);
/* Devices one replica is placed over (pipeline stages share them). */
TG_API int tg_session_devices(const tg_session *s);
/* Replicas (data-parallel copies of the devices) the session runs. */
TG_API int tg_session_replicas(const tg_session *s);
/* The split the cost model chose where the options asked for one ("auto"
 * in stages or split: --stages auto, --split auto), in that option's form:
 * "B1|B2,B3,B4" for stages, "layer3.0" (the boundaries) for split. It
 * depends on the strategy: a sharded run, with one micro-batch in flight,
 * may choose another split than a pipelined one. *option (when not NULL)
 * is set to "stages" or "split". With phases auto (executionStrategy
 * phased), the phases chosen with their devices ("B1@0|B2@1") and "phases".
 * "" when the split was given or the model is not divided. The string lives
 * as long as the session. */
TG_API const char *tg_session_auto_stages(const tg_session *s, const char **option);
/* FLOPs of one run. */
TG_API double tg_session_flops(const tg_session *s);
/* Which kernels the compiler chose for the ops that choose (convolutions),
 * as one line into buf (cap bytes, truncated), e.g. "oneDNN (ISA
 * avx512_core_bf16) for 6 of 8 convolution ops, 6 in bf16"; returns buf. */
TG_API const char *tg_session_kernels(const tg_session *s, char *buf, size_t cap);
/* The storage types, rounding and loss scaling the session trains with, as
 * one line into buf (cap bytes, truncated), e.g. "bf16.bf16 (accumulators
 * bf16, moments f32 f32), half updates rounded stochastically, no loss
 * scaling"; returns buf. */
TG_API const char *tg_session_precision(const tg_session *s, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
