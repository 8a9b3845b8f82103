/* runtime/exchange.h - the session's part for what devices and replicas
 * exchange during a run (exchange.c): inter-device copies, their flow
 * control and the barriers, called by the engine's device loop
 * (engine_passes.c), the all-reduce and the update's checks. */
#ifndef TG_RUNTIME_EXCHANGE_H
#define TG_RUNTIME_EXCHANGE_H

#include "runtime/session_state.h"
#include "tilegraph/trace.h"

typedef struct tg_exchange_state tg_exchange_state;

/* The counters and barriers of program p's runs; their waits spin within
 * spin_ceiling (core/wait.h) before sleeping. */
tg_status tg_exchange_create(const tg_program *p, int spin_ceiling, tg_exchange_state **out);
void tg_exchange_free(tg_exchange_state *x);
/* A run's start: no transfer made, nobody at a barrier. */
void tg_exchange_begin_run(tg_exchange_state *x);
/* The exchange's spin, whose ceiling the other waits of a run take. */
tg_spin *tg_exchange_spin(tg_exchange_state *x);

/* Abort the run with status st: every waiting device thread wakes up. The
 * first failure's message is the one reported. */
void tg_exchange_fail(tg_session *s, tg_status st, const char *msg);
/* A trace channel looked up once per process, safe to race on. */
tg_trace_channel *tg_exchange_cached_channel(tg_trace_channel **cache, const char *name);
/* The "comms" channel: waiting for devices and the all-reduce. */
tg_trace_channel *tg_exchange_comms_channel(void);
/* Wait until *counter >= target, spinning then sleeping on the session's
 * `changed` (traced as `what` on the comms channel); false if the run was
 * aborted meanwhile. */
bool tg_exchange_wait_for(tg_session *s, const int64_t *counter, int64_t target, const char *what);
/* Set *counter to value and wake every waiter. */
void tg_exchange_publish(tg_session *s, int64_t *counter, int64_t value);
/* The same device of every replica meets (the all-reduce); false if aborted. */
bool tg_exchange_replica_barrier(tg_session *s, int device);
/* Every device of one replica meets (agreeing on an update); false if aborted. */
bool tg_exchange_device_barrier(tg_session *s, int replica);
/* Wait for what device c receives for micro-batch g in phase ph. */
bool tg_exchange_receive(device_ctx *c, tg_phase ph, int64_t g);
/* Free the receive slots whose last use on device c was phase ph. */
void tg_exchange_release(device_ctx *c, tg_phase ph, int64_t g);
/* Copy what device c produced in phase ph to the devices that read it. */
bool tg_exchange_send(device_ctx *c, tg_phase ph, int64_t g);
/* ParallelIPU (compile/parallel_phases.c): before step k of pass ph (a
 * step with exchange_before), send what device c's finished phase made
 * and wait for what its next phase reads; false if the run was aborted. */
bool tg_exchange_at_step(device_ctx *c, tg_phase ph, int64_t g, int k);
/* Whether a value sent before step k of pass ph is read from its host copy
 * (an offloaded activation), whose store must be done first. */
bool tg_exchange_sends_offloaded(const device_ctx *c, tg_phase ph, int k);
/* Whether the run was aborted (tg_exchange_fail). */
bool tg_exchange_aborted(const tg_session *s);

#endif
