/* tilegraph/predict.h - predictions from the cost model, before anything
 * runs: the time of a split of the model over devices, the automatic split
 * (`--stages auto`), and the timeline of every pipeline schedule.
 *
 * Costs: each op's FLOPs and bytes at rates measured once on this machine
 * (cached in ~/.cache/tilegraph; TILEGRAPH_CALIBRATION=off uses fixed rates)
 * on the cpu target, the cycle model on mk2. Memory per stage is the
 * estimate the search uses; the compiled program's plan is the exact figure.
 *
 *     tg_split_prediction best, mine;
 *     tg_predict_split(g, o, 2, "auto", &best);
 *     tg_predict_split(g, o, 2, "B1,B2|B3,B4", &mine);
 *     printf("%s: %.3f ms per step\n", best.spec, best.step_seconds * 1e3);
 *
 * Not thread-safe with respect to the same options; calibration (the first
 * call on a machine) takes a few tens of milliseconds.
 */
#ifndef TILEGRAPH_PREDICT_H
#define TILEGRAPH_PREDICT_H

#include "tilegraph/export.h"

#include "tilegraph/graph.h"
#include "tilegraph/options.h"
#include "tilegraph/status.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_PREDICT_MAX_STAGES 64

typedef struct tg_split_prediction {
    int n_stages;
    int micro_batches;                           /* per host step */
    char spec[1024];                             /* as --stages (blocks) or --split (layers) */
    bool blocks;                                 /* spec names blocks (else split points) */
    double forward[TG_PREDICT_MAX_STAGES];       /* seconds per micro-batch */
    double backward[TG_PREDICT_MAX_STAGES];      /* seconds per micro-batch */
    double copies[TG_PREDICT_MAX_STAGES];        /* seconds per micro-batch sent by the stage */
    double stage_seconds[TG_PREDICT_MAX_STAGES]; /* forward + backward + copies + update share */
    double memory_bytes[TG_PREDICT_MAX_STAGES];  /* estimated */
    bool fits;                                   /* every stage within memoryPerDevice */
    double step_seconds;                         /* simulated host step, the options' schedule */
    double busy[TG_PREDICT_MAX_STAGES];          /* share of the step each device computes */
    bool calibrated;                             /* rates measured on this machine */
    bool cycle_model;                            /* a tiled target's cycle model (mk2) */
} tg_split_prediction;

/* The split `spec` of g over n_devices under the options (strategy,
 * schedule, accumulation, threads, target, memory per device):
 *   "auto"          the best split by the cost model (exact over the chain
 *                   of blocks, or of layer scopes when the options' split is
 *                   "auto" or the model has no blocks)
 *   "B1|B2,B3,B4"   blocks grouped into stages
 *   "layer2.0,..."  split points (layer scopes) where stages 1.. begin.
 * Errors name the block or layer at fault and list the valid ones. */
TG_API tg_status tg_predict_split(const tg_graph *g, const tg_options *o, int n_devices,
                                  const char *spec, tg_split_prediction *out);

typedef struct tg_schedule_prediction {
    char name[16]; /* "1f1b", "gpipe", ... as --schedule takes it */
    double step_seconds;
    double bubble; /* idle share of all devices over the step */
    double busy[TG_PREDICT_MAX_STAGES];
    int peak_stash[TG_PREDICT_MAX_STAGES];          /* micro-batches held at once */
    double peak_stash_bytes[TG_PREDICT_MAX_STAGES]; /* of which, kept values (estimate) */
} tg_schedule_prediction;

/* Every schedule over the split `spec` (as tg_predict_split), simulated
 * from the stages' predicted costs: up to cap entries into out, the count
 * in *n. */
TG_API tg_status tg_predict_schedules(const tg_graph *g, const tg_options *o, int n_devices,
                                      const char *spec, tg_schedule_prediction *out, int cap,
                                      int *n);

#ifdef __cplusplus
}
#endif

#endif
