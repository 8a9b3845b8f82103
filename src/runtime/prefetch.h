/* runtime/prefetch.h - host streams filled ahead (prefetch.c): with
 * defaultPrefetchBufferingDepth above 1, host-stream threads copy the next
 * micro-batches' inputs into their slots while the devices compute, and a
 * device only waits when the host falls behind. Called by the engine. */
#ifndef TG_RUNTIME_PREFETCH_H
#define TG_RUNTIME_PREFETCH_H

#include "runtime/session_state.h"

/* Whether this session's inputs are filled ahead (depth above 1). */
bool tg_prefetch_on(const tg_session *s);
/* The start of a host step: the host-stream threads (started by the first
 * step) begin filling every device's first slots. */
tg_status tg_prefetch_begin(tg_session *s);
/* The end of a host step (every device ended it, or it was aborted): wait
 * for the host-stream threads to park. */
void tg_prefetch_end(tg_session *s);
/* Device c's next forward pass (micro-batch j of iteration it): wait until
 * its inputs are in their slot; false if the run was aborted. */
bool tg_prefetch_take(device_ctx *c, int64_t it, int64_t j);
/* Device c is done with its oldest micro-batch's inputs: its slot may be
 * filled again. */
void tg_prefetch_release(device_ctx *c);
/* Join the host-stream threads and free their state (session destroy). */
void tg_prefetch_stop(tg_session *s);

#endif
