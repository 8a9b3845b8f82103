/* runtime/scaling.h - the session's part for loss scaling, overflow checks
 * and gradient clipping (scaling.c): the session's loss scale and update
 * counts, the per-replica overflow marks and the clipping sums. The engine
 * asks it, once per update, whether the update runs. */
#ifndef TG_RUNTIME_SCALING_H
#define TG_RUNTIME_SCALING_H

#include "runtime/session_state.h"

typedef struct tg_scaling tg_scaling;

/* The part for program p (g: its graph): the precision's loss scale, the
 * loss gradient's seed buffer, max_grad_norm of the graph's optimizer. */
tg_status tg_scaling_create(const tg_program *p, const tg_graph *g, tg_scaling **out);
void tg_scaling_free(tg_scaling *sc);

/* Whether updates check their gradients for NaN and infinity (training with
 * loss scaling, or checks on), and the clipping norm (0: off). */
bool tg_scaling_checks_overflow(const tg_scaling *sc);
float tg_scaling_max_grad_norm(const tg_scaling *sc);
/* The loss gradient's seed buffer the loss scale is written into, or -1. */
int tg_scaling_seed_buffer(const tg_scaling *sc);
/* The loss scale the next run starts with, and the session's counts. */
float tg_scaling_loss_scale(const tg_scaling *sc);
int64_t tg_scaling_good_updates(const tg_scaling *sc);
int64_t tg_scaling_skipped_updates(const tg_scaling *sc);
/* A checkpoint's state: the skipped count always; the scale and the good
 * count only under dynamic loss scaling (a static scale is the option). */
void tg_scaling_restore(tg_scaling *sc, float loss_scale, int64_t good, int64_t skipped);
/* Whether replica `replica`'s update of host step `step` overflowed (and
 * was skipped) in the last run. */
bool tg_scaling_skipped(const tg_scaling *sc, int replica, int64_t step);

/* A run's start: device c's own copy of the scale and counts (every device
 * takes the same decisions from the same flags, so none waits to be told). */
void tg_scaling_begin_device(const tg_scaling *sc, device_ctx *c);
/* A completed training run: the session keeps device c's decisions. */
void tg_scaling_end_run(tg_scaling *sc, const device_ctx *c);
/* Whether update `it` runs: overflow check, loss scale, clipping, agreed by
 * the replica's devices; sets *ok false on failure (engine_passes.c). */
bool tg_scaling_update_runs(device_ctx *c, int64_t it, bool *ok);
/* Write the loss scale into the loss gradient's seed. */
void tg_scaling_write_seed(device_ctx *c);

#endif
