/* core/config.h - the options read once, as a typed struct.
 *
 * tg_options is a table of texts checked one key at a time (core/options.c).
 * tg_config_read turns them into the values every layer uses, checks the
 * combinations no single key can check, and is the only place that looks an
 * option up by name: the compiler, the program it builds, the session and the
 * profile read the struct (scripts/check_options.sh keeps it so).
 *
 * A config owns a copy of the options it was read from: its strings point
 * into that copy, and the texts also feed the hashes that name a program (the
 * executable cache key, the check that MPI instances agree). Release it with
 * tg_config_free; tg_config_copy makes an independent one.
 */
#ifndef TG_CORE_CONFIG_H
#define TG_CORE_CONFIG_H

#include "tilegraph/options.h"

#include <stdbool.h>
#include <stdint.h>

/* The kinds of tensor PopTorch's TensorLocations places: on the device, or
 * off chip in host "streaming memory" (docs/memory-locations.md). */
typedef enum tg_tensor_kind {
    TG_TENSOR_WEIGHT,      /* trainable parameters */
    TG_TENSOR_ACTIVATION,  /* kept from a micro-batch's forward pass to its backward */
    TG_TENSOR_ACCUMULATOR, /* gradients summed over the micro-batches of an update */
    TG_TENSOR_OPTIMIZER,   /* optimizer state */
    TG_TENSOR_KINDS
} tg_tensor_kind;

/* TensorLocations.<kind>: TensorLocationSettings read once. */
typedef struct tg_tensor_location {
    bool off_chip;        /* !onChip */
    bool sharded;         /* replicatedTensorSharding (weights and optimizer state) */
    int64_t min_off_chip; /* minElementsForOffChip */
    int64_t min_sharded;  /* minElementsForReplicatedTensorSharding */
} tg_tensor_location;

/* The option names' middle part for each kind: "weight", "activation", ... */
const char *tg_tensor_kind_name(tg_tensor_kind k);

typedef struct tg_config {
    tg_options *options; /* owned: the texts the fields were read from */
    uint64_t seed;       /* randomSeed */
    struct {
        const char *name;        /* target: a registered target's name */
        const char *description; /* targetDescription: a JSON file, or "" */
        int io_tiles;            /* numIOTiles: tiles per device for host streams */
    } target;
    struct {
        /* threadsPerDevice as given; 0: the default rule's share of the cores */
        int per_device;
        /* instances of this job on this host (not an option: the session
         * sets it under MPI), who share its cores */
        int host_instances;
    } threads;
    struct {
        const char *asked_strategy; /* executionStrategy as given, "auto" included */
        const char *strategy;       /* "single", "pipelined" or "sharded": auto resolved */
        const char *schedule;       /* pipelineSchedule */
        const char *stages;         /* stages: "" , "auto" or "B1,B2|B3" */
        const char *split;          /* split: "", "auto" or layer names */
        const char *phases;         /* phases: "B1|B2|B3" (executionStrategy phased) */
        const char *phased_type;    /* phasedExecutionType: SingleIPU or ParallelIPU */
        bool auto_stages;           /* stages or split is "auto" */
        int devices;                /* devices available; 0: one per stage */
        double memory_margin;       /* autoStages.memoryMargin */
        int replicas;               /* replicationFactor (of this instance) */
        int accumulation;           /* Training.gradientAccumulation */
        int device_iterations;      /* deviceIterations */
    } pipeline;
    struct {
        int prefetch_depth; /* defaultPrefetchBufferingDepth */
        /* host-stream threads for prefetch: streamCallbacks.multiThreadMode
         * and numWorkerThreads resolved; 0: one per (replica, device) */
        int threads;
    } streams;
    struct {
        int instances;        /* distributed.instances */
        int64_t bucket_bytes; /* distributed.gradientBucketBytes */
        bool wire_bf16;       /* distributed.gradientWireType bfloat16 */
    } distributed;
    struct {
        const char *mode; /* outputMode */
        int period;       /* outputReturnPeriod */
    } output;
    struct {
        /* TensorLocations per kind of tensor (tg_tensor_kind) */
        tg_tensor_location location[TG_TENSOR_KINDS];
        /* TensorLocations.ioSchedule preload: streamed copies run on an I/O
         * thread preload_steps ahead (runtime/stream_io.c), else on demand */
        bool preload;
        int preload_steps;           /* TensorLocations.preloadSteps: how far ahead */
        int64_t per_device;          /* memoryPerDevice; 0: unlimited */
        double available_proportion; /* availableMemoryProportion */
    } memory;
    struct {
        bool pipeline; /* recomputation "pipeline" */
    } recompute;
    struct {
        const char *precision;     /* INPUT.MODEL */
        const char *accum;         /* accumType */
        const char *first_moment;  /* firstOrderMomentumAccumType */
        const char *second_moment; /* secondOrderMomentumAccumType */
        int stochastic_rounding;   /* Precision.enableStochasticRounding: 1, 0, or -1 for auto */
        const char *loss_scaling;  /* none, static or dynamic */
        double loss_scale;         /* lossScalingFactor */
        int growth_interval;       /* lossScalingGrowthInterval */
    } precision;
    struct {
        bool graph;            /* autoReport.all or outputGraphProfile */
        bool execution;        /* autoReport.all or outputExecutionProfile */
        const char *directory; /* autoReport.directory */
        int run_count;         /* autoReport.executionProfileProgramRunCount */
        bool flops;            /* profiler.includeFlopEstimates */
    } report;
    struct {
        bool enable;
        const char *directory;
        const char *channels; /* comma-separated, or "*" */
    } trace;
    bool monitor; /* monitor.enable */
    struct {
        const char *cache_dir; /* enableExecutableCaching; "" off */
        const char *file;      /* executableFile; "" off */
    } executable;
    struct {
        bool check_nan;           /* debug.checkNaN */
        bool allow_out_of_memory; /* debug.allowOutOfMemory */
        bool verify;              /* debug.verifyAgainstReference */
        double verify_tolerance;  /* debug.verifyTolerance */
    } debug;
} tg_config;

/* Read and check `o` (NULL: the defaults) into *out, which owns a copy of
 * them. TG_ERR_CONFIG names the options at fault; *out is then empty. */
tg_status tg_config_read(const tg_options *o, tg_config *out);
/* Change one option of a read config and read it again (the session's MPI
 * share of the replicas); on an error *c is unchanged. */
tg_status tg_config_set(tg_config *c, const char *key, const char *value);
/* An independent copy of src (with host_instances), for a program to keep. */
tg_status tg_config_copy(const tg_config *src, tg_config *out);
void tg_config_free(tg_config *c);

/* The text of option `index` (tg_options_key) in c: for the hashes and the
 * profile, which list every option. */
const char *tg_config_text(const tg_config *c, int index);

/* The samples of one weight update and of one host step, for micro-batches
 * of `batch`: batch x Training.gradientAccumulation x replicationFactor, and
 * that x deviceIterations (an inference program pipelines its iterations as
 * micro-batches and takes accumulation 1 only: the same product). Multiplied
 * out here only: tg_options_summarize, for a caller before the graph exists,
 * and the compiled program, for the session, ask here and so agree. */
int64_t tg_config_samples_per_update(const tg_config *c, int64_t batch);
int64_t tg_config_samples_per_step(const tg_config *c, int64_t batch);

#endif
