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
 *   zb-h1        zero bubble (Qi et al. 2023, ZB-H1): the backward is split
 *                into the input gradient (B, what the previous stage waits
 *                for) and the weight gradient (W, needed only by the
 *                accumulation and the update), B is sent before W runs;
 *                1f1b's stash depth
 *   zb-h2        the same with N-1 more micro-batches in flight on each
 *                device (more warm-up forwards, W's deferred into the
 *                bubbles): fewer bubbles, more memory
 *
 * The zero-bubble orders come from running the devices on a unit clock (F,
 * B and W one cycle each) where every device, each cycle, runs its next B
 * if its inputs are there, else its next F if fewer than `cap` micro-batches
 * wait for their W, else its oldest W (cap: N-d for zb-h1, 2N-d-1 for
 * zb-h2, at most m). With F, B and W of equal cost each device idles
 * 2(N-1) cycles per weight update under zb-h1 and N-1 under zb-h2, where
 * 1f1b (a backward of two cycles) idles 3(N-1); the paper's hand-made
 * ZB-H1 reaches N-1 within 1F1B's activation memory by counting memory per
 * value (what W still needs is less than a forward's activations), which a
 * plan with one slot count per device cannot. Under zb-h1's cap every W
 * follows its B at once (nothing runs between them), so its gain is B's
 * result leaving before W runs. The orders are deadlock-free by
 * construction: the unit-clock run is a witness.
 *
 * A stash slot is held from a micro-batch's forward to the end of its
 * backward (its W in a split schedule), and W(j) needs B(j) on its device.
 *
 * Stash depths that follow (N devices, d from 0, m micro-batches, capped at
 * m): grouped 2(N-d)+1, interleaved N-d+1, 1f1b and zb-h1 N-d, zb-h2
 * 2N-d-1, gpipe m, sharded 1.
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
    TG_SCHEDULE_ZB_H1,
    TG_SCHEDULE_ZB_H2,
    TG_SCHEDULE_COUNT
} tg_schedule_kind;

/* What an op of the schedule runs for its micro-batch: the forward, the
 * backward (all of it, or in a split schedule only the input gradient B),
 * or in a split schedule the weight gradient W. */
typedef enum tg_pipe_pass { TG_PASS_FORWARD, TG_PASS_BACKWARD, TG_PASS_WEIGHT } tg_pipe_pass;

typedef struct tg_pipe_op {
    int micro_batch;
    tg_pipe_pass pass;
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
/* "grouped", "interleaved", "gpipe", "1f1b", "sharded", "zb-h1", "zb-h2"; -1 if unknown. */
int tg_schedule_parse(const char *name);
/* "forward", "backward", "weight" */
const char *tg_pipe_pass_name(tg_pipe_pass pass);

/* Whether s runs each backward as two ops, B and W (training zb-h1, zb-h2).
 * Inline: the target layer's simulator (target/tilesim.c) asks it without
 * calling into compile (scripts/check_layers.sh reads the symbols). */
static inline bool tg_pipe_schedule_splits(const tg_pipe_schedule *s)
{
    return s->training && (s->kind == TG_SCHEDULE_ZB_H1 || s->kind == TG_SCHEDULE_ZB_H2);
}

/* Whether device d of a split schedule runs anything between a B and its
 * W: then what W reads from B needs a slot per micro-batch in flight. */
bool tg_pipe_schedule_defers_weight(const tg_pipe_schedule *s, int d);

tg_status tg_pipe_schedule_build(tg_schedule_kind kind, int n_devices, int micro_batches,
                                 bool training, tg_pipe_schedule *out);
void tg_pipe_schedule_free(tg_pipe_schedule *s);

/* Run the schedule on a simulated clock (every op, F, B or W, takes one cycle, devices
 * wait for their dependencies) and return the cycles it takes; -1 if it
 * deadlocks. busy[d] (optional) receives each device's busy fraction. */
int tg_pipe_schedule_simulate(const tg_pipe_schedule *s, double *busy);

#endif
