/* tilegraph/options.h - session options, by their PopTorch-style names.
 *
 * Options are key/value pairs validated against one table (docs/options.md
 * lists it): an unknown key or a malformed value is an error whose message
 * names the key and lists the valid ones. The same keys are accepted from the
 * C API, from command-line flags and from JSON.
 *
 *     tg_options *o = tg_options_create();
 *     tg_options_set(o, "randomSeed", "42");
 *     tg_options_set_int(o, "threadsPerDevice", 2);
 *     ...
 *     tg_options_destroy(o);
 */
#ifndef TILEGRAPH_OPTIONS_H
#define TILEGRAPH_OPTIONS_H

#include "tilegraph/export.h"

#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_options tg_options;

TG_API tg_options *tg_options_create(void);
TG_API void tg_options_destroy(tg_options *o);
TG_API tg_options *tg_options_clone(const tg_options *o);

/* Set from text ("42", "true", "pipelined"); validated against the table. */
TG_API tg_status tg_options_set(tg_options *o, const char *key, const char *value);
TG_API tg_status tg_options_set_int(tg_options *o, const char *key, int64_t value);
/* Apply every key of a JSON object: {"randomSeed": 42, "threadsPerDevice": "2"}.
 * `source` names the text in error messages (a file name or an env var). */
TG_API tg_status tg_options_set_json(tg_options *o, const char *json, const char *source);
/* The same for engine options only (autoReport.*, profiler.*, trace.*,
 * debug.*), as Poplar's POPLAR_ENGINE_OPTIONS takes: any other key - a
 * training or compile option such as deviceIterations - is refused by name,
 * with the command-line flag that sets it, and nothing is applied. */
TG_API tg_status tg_options_set_engine_json(tg_options *o, const char *json, const char *source);
/* Whether key is an engine option's (see above). */
TG_API bool tg_options_is_engine(const char *key);
/* The tilegraph command-line flag that sets option `key` ("--device-iterations"),
 * or the flag with the value that does ("--offload weights"); NULL when there is
 * none (set it with --options FILE or --engine-option). The option table's
 * `flag` column: the commands take their flags' names from it. */
TG_API const char *tg_options_flag(const char *key);
/* The rest of option `index`'s flag, from the same row, so that the commands
 * generate their flags from the table: the placeholder --help shows ("N"), or
 * NULL for a flag that takes no value and sets "true" (--profile); and, for an
 * integer option, true with its range (a flag checks it as it is read; any
 * other value is checked by tg_options_set). */
TG_API const char *tg_options_flag_arg(int index);
/* The values option `index` takes, "a|b|c", for one of a set (NULL for any other). */
TG_API const char *tg_options_values(int index);
TG_API bool tg_options_int_range(int index, double *min, double *max);
/* Edit distance between a[0..n) and b, for a "did you mean" on a misspelt
 * option or flag name; names over 63 characters count as far (99). */
TG_API int tg_options_name_distance(const char *a, size_t n, const char *b);

TG_API int64_t tg_options_get_int(const tg_options *o, const char *key);
TG_API double tg_options_get_float(const tg_options *o, const char *key);
TG_API const char *tg_options_get_string(const tg_options *o, const char *key);

/* How a session compiled from these options will run, for micro-batches of
 * `batch` samples: what a caller needs before the graph and the session
 * exist (a data loader, a learning-rate schedule, command-line defaults).
 * The options are read as tg_session_create reads them, so the two agree. */
typedef struct tg_options_summary {
    char strategy[16];          /* executionStrategy, auto resolved: single, pipelined, sharded */
    char output_mode[16];       /* outputMode as set: default, all, sum, final or everyN */
    int replicas;               /* replicationFactor: of the whole job under MPI */
    int64_t samples_per_update; /* batch x Training.gradientAccumulation x replicas */
    int64_t samples_per_step;   /* samples_per_update x deviceIterations: one host step */
    /* what the weights are and how they train, as a checkpoint records it */
    char target[16];            /* target: a registered target's name */
    char precision[16];         /* precision: INPUT.MODEL, "32.32" */
    char accum_type[8];         /* accumType: auto, f32, f16 or bf16 */
    char first_moment_type[8];  /* firstOrderMomentumAccumType */
    char second_moment_type[8]; /* secondOrderMomentumAccumType */
    char loss_scaling[16];      /* lossScaling: none, static or dynamic */
    double loss_scale;          /* lossScalingFactor */
    int stochastic_rounding;    /* Precision.enableStochasticRounding: 1, 0, -1 auto */
} tg_options_summary;
/* Fails, naming the options, on a combination a session would refuse
 * before compiling. */
TG_API tg_status tg_options_summarize(const tg_options *o, int64_t batch, tg_options_summary *out);

/* Number of options in the table and their names, defaults and descriptions
 * (for --help and docs). */
TG_API int tg_options_count(void);
TG_API const char *tg_options_key(int index);
TG_API const char *tg_options_default(int index);
TG_API const char *tg_options_description(int index);

#ifdef __cplusplus
}
#endif
#endif
