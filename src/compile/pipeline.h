/* compile/pipeline.h - pipeline schedules: for each device, the order in
 * which it runs the forward (F) and backward (B) passes of the micro-batches
 * of one weight update.
 *
 * A schedule is fixed at compile time, so the number of activations each
 * device must stash (forward passes done whose backward has not run yet) is
 * known before anything runs, and the memory plan reserves exactly that many
 * slots. Devices are numbered in stage order: device 0 holds the first stage.
 *
 * Dependencies the engine enforces: F(j) on device d needs F(j) on d-1;
 * B(j) on device d needs B(j) on d+1 (on the last device: its own F(j)).
 * Every schedule here is deadlock-free under them (tests run them).
 *
 *   sharded      one micro-batch in the whole pipeline at a time
 *   gpipe        all forwards, then all backwards (fill-drain)
 *   1f1b         N-d-1 forwards to fill, then one forward one backward
 *   interleaved  N-d forwards to fill, then strict backward/forward turns
 *   grouped      each pipeline cycle runs a forward and a backward on every
 *                device; forwards run 2(N-d) cycles ahead of backwards
 *
 * Stash depths that follow (N devices, d from 0, m micro-batches, capped at
 * m): grouped 2(N-d)+1, interleaved N-d+1, 1f1b N-d, gpipe m, sharded 1.
 *
 * Inference schedules have forwards only, in micro-batch order.
 */
#ifndef TG_COMPILE_PIPELINE_H
#define TG_COMPILE_PIPELINE_H

#include "tilegraph/status.h"

#include <stdbool.h>

typedef enum tg_schedule_kind {
    TG_SCHEDULE_GROUPED,
    TG_SCHEDULE_INTERLEAVED,
    TG_SCHEDULE_GPIPE,
    TG_SCHEDULE_1F1B,
    TG_SCHEDULE_SHARDED,
    TG_SCHEDULE_COUNT
} tg_schedule_kind;

typedef struct tg_pipe_op {
    int micro_batch;
    bool backward;
} tg_pipe_op;

typedef struct tg_pipe_schedule {
    tg_schedule_kind kind;
    int n_devices, micro_batches;
    bool training;
    tg_pipe_op **ops; /* ops[d][k] for k < n_ops[d] */
    int *n_ops;
    int *stash_depth; /* per device: most forwards ever waiting for their backward */
} tg_pipe_schedule;

const char *tg_schedule_name(tg_schedule_kind k);
/* "grouped", "interleaved", "gpipe", "1f1b", "sharded"; -1 if unknown. */
int tg_schedule_parse(const char *name);

tg_status tg_pipe_schedule_build(tg_schedule_kind kind, int n_devices, int micro_batches,
                                 bool training, tg_pipe_schedule *out);
void tg_pipe_schedule_free(tg_pipe_schedule *s);

/* Run the schedule on a simulated clock (every op takes one cycle, devices
 * wait for their dependencies) and return the cycles it takes; -1 if it
 * deadlocks. busy[d] (optional) receives each device's busy fraction. */
int tg_pipe_schedule_simulate(const tg_pipe_schedule *s, double *busy);

#endif
