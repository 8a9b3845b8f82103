/* tilegraph/program.h - a compiled program as a handle: compile a graph
 * without running it, save it as an executable, and read the figures of its
 * plan (what `tilegraph compile` prints).
 *
 * A session compiles its own program and runs it (tilegraph/session.h); this
 * handle is for the question before a run: will it fit, how is it split,
 * what does each device hold. The figures are the plan's own, the bytes the
 * engine would allocate, not estimates (tilegraph/predict.h has those).
 *
 *     tg_compiled *c;
 *     tg_status s = tg_compiled_create(g, opts, &c);
 *     if (s == TG_ERR_CAPACITY) puts(tg_error_message()); // over memoryPerDevice
 *     tg_compiled_facts f;
 *     tg_compiled_facts_get(c, &f);
 *     for (int d = 0; d < f.n_devices; d++) {
 *         tg_compiled_device dev;
 *         tg_compiled_device_get(c, d, &dev);
 *         printf("device %d: %lld bytes\n", d, (long long)dev.arena_bytes);
 *     }
 *     tg_compiled_destroy(c);
 *
 * The graph must outlive the handle. A handle is used from one thread at a
 * time; distinct handles may be used on distinct threads.
 */
#ifndef TILEGRAPH_PROGRAM_H
#define TILEGRAPH_PROGRAM_H

#include "tilegraph/export.h"

#include "tilegraph/graph.h"
#include "tilegraph/options.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_compiled tg_compiled;

/* Compile g with opts (NULL: the defaults). A plan that does not fit its
 * devices (memoryPerDevice, or a tile's memory on a tiled target) fails with
 * TG_ERR_CAPACITY, naming the device, the bytes and the largest parts, unless
 * debug.allowOutOfMemory is set; TG_ERR_NOMEM is this process failing to
 * allocate. *out is NULL on failure. */
TG_API tg_status tg_compiled_create(const tg_graph *g, const tg_options *opts, tg_compiled **out);
/* The same through the executable cache the options name (executableFile,
 * or enableExecutableCaching's directory): a current file is loaded instead
 * of compiling, and a compiled program is written for the next time
 * (tg_compiled_facts.cache says which). Without either option set, the same
 * as tg_compiled_create. */
TG_API tg_status tg_compiled_create_cached(const tg_graph *g, const tg_options *opts,
                                           tg_compiled **out);
/* NULL is fine. */
TG_API void tg_compiled_destroy(tg_compiled *c);

/* Write the program to `path` (atomically), for `train --executable` or an
 * executableFile option (docs/executable-cache.md); errors name the file. */
TG_API tg_status tg_compiled_save(const tg_compiled *c, const char *path);

/* What the executable cache did for tg_compiled_create_cached. */
typedef enum tg_compiled_cache {
    TG_COMPILED_UNCACHED, /* no cache named (or tg_compiled_create): compiled */
    TG_COMPILED_LOADED,   /* loaded from the cache, nothing compiled */
    TG_COMPILED_STORED    /* compiled, and the cache written (or warned about, on stderr) */
} tg_compiled_cache;

/* The whole program's figures. Strings belong to the handle. */
typedef struct tg_compiled_facts {
    bool training; /* a training program (else inference) */
    int n_devices; /* of one replica */
    int replicas;
    int micro_batches;           /* per weight update */
    int iterations;              /* weight updates per host step */
    int threads_per_device;      /* the final figure: threadsPerDevice or the default rule's */
    bool threads_default;        /* chosen by the default rule (threadsPerDevice unset) */
    const char *threads_warning; /* "" when the devices' threads fit the cores */
    bool auto_stages;            /* the split was chosen by the cost model (--stages auto) */
    const char *stages;          /* that split, as --stages takes it; "" when not automatic */
    int64_t arena_bytes;         /* all devices of one replica */
    double flops;                /* one host step: every micro-batch and update, every replica */
    const char *report_dir;      /* autoReport.directory, where profiles are written */
    tg_compiled_cache cache;
} tg_compiled_facts;
TG_API void tg_compiled_facts_get(const tg_compiled *c, tg_compiled_facts *out);

/* Regions of a device's arena (weights, optimizer state, ..., activations),
 * numbered from 0; at most TG_COMPILED_MAX_REGIONS. */
#define TG_COMPILED_MAX_REGIONS 16
TG_API int tg_compiled_region_count(void);
/* "weights", "pipeline stash": the names the memory table and the profile
 * use; "?" for a number out of range. */
TG_API const char *tg_compiled_region_name(int region);

/* One device's plan. */
typedef struct tg_compiled_device {
    int64_t arena_bytes;                           /* the device's arena, per replica */
    int64_t region_bytes[TG_COMPILED_MAX_REGIONS]; /* tg_compiled_region_count() of them */
    int64_t scratch_peak_bytes;                    /* kernel scratch, within activations */
    int64_t offloaded_bytes; /* kept in host memory, streamed in for the update */
    int stash_depth;         /* slots of stash and exchange buffers */
    double flops;            /* forward and backward of one micro-batch */
} tg_compiled_device;
/* TG_ERR_INVALID_ARG naming the device when it is not 0..n_devices-1. */
TG_API tg_status tg_compiled_device_get(const tg_compiled *c, int device, tg_compiled_device *out);

#ifdef __cplusplus
}
#endif
#endif
