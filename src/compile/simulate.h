/* compile/simulate.h - the predicted timeline of a pipeline schedule from
 * per-stage costs.
 *
 * tg_pipe_schedule_simulate (pipeline.h) counts every op as one cycle, which
 * says whether a schedule deadlocks and how its bubbles fall when stages are
 * equal. This simulator gives each op its stage's predicted time (from the
 * cost model, compile/cost.h) and each hand-over between devices its copy
 * time, so it predicts what a host step takes with the real imbalance: the
 * time per host step, the bubble fraction (idle share of all devices over
 * the step), each device's busy time and the most forwards any device holds
 * stashed at once.
 *
 * Model: a device runs its ops in the schedule's order, one at a time, and
 * starts an op when the device is free and its inputs have arrived.
 *   F(j) on d needs F(j) on d-1 done, plus the forward copy from d-1;
 *   B(j) on d needs F(j) on d, and B(j) on d+1 done plus its backward copy;
 *   W(j) on d (split schedules) needs B(j) on d.
 * Copies cost time on the link, not on either device (the engine's exchange
 * runs between the phases of the two devices). After its last backward each
 * device runs its update; the host step ends when every update has.
 *
 * A stage's backward costs time[BACKWARD] (the input gradient, what the
 * previous stage waits for) plus time[WEIGHT] (the weight gradient). A
 * schedule that splits the backward (zb-h1) runs them as two ops; the
 * others run one backward op costing their sum, so a caller that does not
 * know the split may put the whole backward in time[BACKWARD].
 */
#ifndef TG_COMPILE_SIMULATE_H
#define TG_COMPILE_SIMULATE_H

#include "compile/pipeline.h"

/* In the order of tg_pipe_pass (compile/pipeline.h). */
typedef enum tg_sim_kind {
    TG_SIM_FORWARD,
    TG_SIM_BACKWARD,
    TG_SIM_WEIGHT,
    TG_SIM_KIND_COUNT
} tg_sim_kind;

/* Predicted seconds for one stage: each kind per micro-batch, the copies it
 * sends per micro-batch (forward: to the next stage; backward: to the
 * previous one), and its update once per host step. */
typedef struct tg_stage_cost {
    double time[TG_SIM_KIND_COUNT];
    double send_forward, send_backward;
    double update;
} tg_stage_cost;

typedef struct tg_sim_result {
    double step_time; /* seconds from the first op to the last update */
    double bubble;    /* 1 - busy time of all devices / (devices x step_time) */
    int n_devices;
    double *busy_time;   /* per device: seconds computing (forward, backward, weight, update) */
    double *busy;        /* per device: busy_time / step_time */
    int *peak_stash;     /* per device: most forwards waiting for their backward (W) at once */
    double *finish_time; /* per device: when its update ends */
    /* the timeline: start and end of op (d, j, kind) at
     * [(d * micro_batches + j) * TG_SIM_KIND_COUNT + kind]; a schedule
     * that does not split the backward has no WEIGHT ops (their entries
     * stay -1 in op_end) */
    int micro_batches;
    double *op_start, *op_end;
} tg_sim_result;

/* Simulate s with costs[d] for the stage on device d (n_devices entries).
 * Fails with TG_ERR_CONFIG when the schedule deadlocks (a bug in a schedule
 * builder) and TG_ERR_INVALID_ARG on a negative or non-finite cost, naming
 * the stage. The result owns its arrays: tg_sim_result_free. */
tg_status tg_schedule_simulate_costs(const tg_pipe_schedule *s, const tg_stage_cost *costs,
                                     tg_sim_result *out);
void tg_sim_result_free(tg_sim_result *r);

#endif
