/* backend/cpu/dnnl_util.h - what the oneDNN-backed kernels share: the one CPU engine,
 * tg shapes as oneDNN memory descriptors, oneDNN statuses as tg_status, the
 * OpenMP thread count of the calling device, and the kernel choice switch.
 *
 * oneDNN (Debian's libdnnl, OpenMP runtime) runs a primitive on an OpenMP
 * team of the calling thread; tg_dnnl_threads() sets that team's size to the
 * device's thread count, so that devices never oversubscribe the cores.
 */
#ifndef TG_BACKEND_CPU_DNNL_UTIL_H
#define TG_BACKEND_CPU_DNNL_UTIL_H

#include "core/error.h"
#include "graph/node.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>

/* The process's CPU engine, created on first use (thread-safe); NULL (and
 * *status set) when oneDNN cannot create it. */
dnnl_engine_t tg_dnnl_engine(tg_status *status);

/* TG_OK for dnnl_success, else TG_ERR_INTERNAL (TG_ERR_NOMEM, TG_ERR_UNSUPPORTED)
 * with "<what>: oneDNN <status name>". */
tg_status tg_dnnl_check(dnnl_status_t s, const char *what);

/* A plain (row-major) descriptor of `dims` in `dt`: nchw for 4-D, goihw for
 * 5-D (grouped weights), a for 1-D. */
dnnl_status_t tg_dnnl_plain_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims,
                               dnnl_data_type_t dt);

/* A reorder primitive from `from` to `to` on eng with attr (the kernels'
 * user-managed scratchpad), and the descriptor of the scratchpad it needs
 * (empty when none) in *scratch_md: at compile time, planned with the
 * node's scratch. */
dnnl_status_t tg_dnnl_reorder_create(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                     dnnl_engine_t eng, const_dnnl_primitive_attr_t attr,
                                     dnnl_primitive_t *prim, dnnl_memory_desc_t *scratch_md);

/* Running a primitive planned at compile time failed (oneDNN could not
 * allocate bookkeeping for memory it accepted then): kernels have no status
 * to return, so this prints "<what>: oneDNN <status>" and aborts. */
_Noreturn void tg_dnnl_run_failed(dnnl_status_t s, const char *what);

/* A memory object of md over ptr on the process's engine (NULL for an empty
 * descriptor); tg_dnnl_run_failed(what) if oneDNN refuses it. */
dnnl_memory_t tg_dnnl_memory(const dnnl_memory_desc_t *md, void *ptr, const char *what);

/* Make the calling thread's next OpenMP regions (oneDNN's) use n threads. */
void tg_dnnl_threads(int n);

/* Whether OpenMP's idle threads sleep (OMP_WAIT_POLICY=passive, read by
 * libgomp when it loads). With the default policy, a team's idle threads
 * spin for a while after each primitive and fight the device's own pool
 * threads for the cores: measured on the 2-core test machine, the tutorial
 * network with every conv on oneDNN at --threads 2 trained at 166
 * samples/s by default, 1,041 with GOMP_SPINCOUNT=1000, 2,071 passive
 * (3,003 at --threads 1), in one loaded run. */
bool tg_dnnl_passive_wait(void);

/* The ISA oneDNN's JIT kernels use on this machine, held to TILEGRAPH_ISA
 * (core/isa.h); its name ("avx512_core_bf16", ...). */
dnnl_cpu_isa_t tg_dnnl_isa(void);
const char *tg_dnnl_isa_name(void);

typedef enum tg_dnnl_mode {
    TG_DNNL_AUTO = 0, /* per node, by the measured rule of each op */
    TG_DNNL_NEVER,    /* the project's own (reference) kernels only */
    TG_DNNL_ALWAYS,   /* oneDNN wherever it can run the node */
} tg_dnnl_mode;

/* From the environment variable TG_KERNELS ("auto", "own" or "dnnl"; unset =
 * auto) unless tg_dnnl_force_mode set it. An unknown value counts as auto. */
tg_dnnl_mode tg_dnnl_mode_get(void);
/* For tests and benchmarks: override the environment (TG_DNNL_AUTO restores
 * it). Process-wide (core/process.h); set it before compiling. */
void tg_dnnl_force_mode(tg_dnnl_mode m, bool forced);

#endif
