/* core/process.h - the library's process-wide mutable state: what it is, why
 * it is process-wide rather than a session's, and where it lives.
 *
 * A session (runtime/session.c) owns everything about one compiled program
 * and its runs; nothing here belongs to one session. What stays process-wide:
 *
 *  - Kernel-choice overrides, held here (process.c): the forced convolution
 *    method (ops/conv.h), the SIMD cap (backend/cpu/simd.h) and the forced oneDNN
 *    mode (backend/cpu/dnnl_util.h), whole-tensor staging of element-wise
 *    half-precision steps (compile/program.h), and whether inference
 *    programs keep their reordered weights (backend/cpu/weight_cache.h). They exist so tests and
 * benchmarks can run every kernel variant on one machine; kernels read them where no session is at
 * hand (reference checks, benchmarks call kernels directly). Atomics, so setting one while another
 * thread plans or runs a kernel is no data race.
 *  - CPU features: the SIMD level detected once (backend/cpu/simd.c) and the oneDNN
 *    engine made once (backend/cpu/dnnl_util.c), since the CPU is the process's.
 *  - MPI membership (runtime/dist.c): MPI_Init_thread is once per process, so
 *    rank, size and the instances on this host are the process's.
 *  - Host tracing (trace/trace.c, trace_aggregate.c, trace_config.c,
 *    chrome_trace.c): one trace of the whole process, with the threads of
 *    every session, the loader and the compiler writing into per-thread
 *    buffers under one clock; TILEGRAPH_TRACE is read from the environment
 *    of the process. Its state is guarded by the locks beside it.
 *  - Allocation counters and fault injection (core/alloc.c): they count the
 *    process's heap, which every session shares.
 *  - The machine's recent CPU load (core/cpus.c), sampled at most once a
 *    second under a lock: it measures the machine, whichever session asks.
 *  - Counters that keep names unique in the process, atomics: the
 *    monitor registry's file sequence (runtime/monitor.c) and the sessions'
 *    link-id base (runtime/session.c); and warn-once flags (a warning about
 *    the process's environment is said once, not once per session).
 *  - The weights versions (process.c): every host write of a session's
 *    weights takes the next number, so that a kernel's cache of reordered
 *    weights (backend/cpu/weight_cache.h), keyed by the weights' address, never
 *    mistakes another session's weights at a reused address for its own.
 *  - The last error message (core/error.c) is per thread, not shared.
 */
#ifndef TG_CORE_PROCESS_H
#define TG_CORE_PROCESS_H

#include <stdint.h>

/* The forced convolution method, a tg_conv_method (0: automatic choice). */
int tg_process_conv_method(void);
void tg_process_set_conv_method(int method);

/* The highest SIMD level kernels may use, a tg_simd_level (INT_MAX: no cap). */
int tg_process_simd_cap(void);
void tg_process_set_simd_cap(int level);

/* The forced oneDNN mode, a tg_dnnl_mode, and whether it is forced (else the
 * TG_KERNELS environment variable decides). */
int tg_process_dnnl_mode(int *forced);
void tg_process_set_dnnl_mode(int mode, int forced);

/* Whether steps stage half-precision operands whole through f32 instead of
 * a chunk at a time (element-wise steps) or not at all (kernels that read
 * bf16 themselves): tests compare the two. */
int tg_process_whole_staging(void);
void tg_process_set_whole_staging(int whole);

/* Whether programs compiled from now on keep an inference convolution's
 * weights in oneDNN's layout between runs (backend/cpu/weight_cache.h); on unless
 * a benchmark turns it off to measure what it saves. */
int tg_process_keep_weights(void);
void tg_process_set_keep_weights(int keep);

/* Whether programs compiled from now on run an inference program's 3x3
 * stride-1 convolutions as oneDNN's Winograd convolution first where it has
 * one (backend/cpu/conv_dnnl.c's add_winograd; the direct convolution where
 * a value is not finite): on by default, TG_CONV_WINOGRAD=0 in the
 * environment turns it off, or a test's setting (1 on, 0 off, -1 back to
 * the environment's). Its error is larger than the direct convolution's
 * (docs/performance.md, "ResNet-50 at batch 32"). */
int tg_process_winograd(void);
void tg_process_set_winograd(int on);

/* Whether programs compiled from now on fuse an inference convolution with
 * the batch norm and ReLU after it (compile/fuse.c); on unless a test or
 * benchmark turns it off to compare. */
int tg_process_fuse_inference(void);
void tg_process_set_fuse_inference(int fuse);

/* A weights version no session of the process has had: never 0. */
uint64_t tg_process_next_weights_version(void);

#endif
