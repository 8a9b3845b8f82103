/* runtime/record.c - a device's events while a host step is recorded
 * (the profile's recorder of that device, device_ctx.rec): called from
 * every part of the runtime, so it calls none of them. What the engine
 * does with the events after the step is runtime/engine_record.c. */
#include "runtime/session_state.h"

#define now_s tg_engine_now

/* Record an event that ran from t0 to now (seconds); no-op when not recording. */
void tg_engine_record_span(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                           int peer, double t0, double t1, int64_t bytes, double flops)
{
    tg_profile_recorder *r = c->rec;
    if (!r || r->n_events >= r->cap_events)
        return;
    double origin = c->s->t_origin;
    r->events[r->n_events++] = (tg_profile_event){(int16_t)kind,
                                                  (int16_t)ph,
                                                  (int32_t)j,
                                                  (int32_t)it,
                                                  peer,
                                                  (int64_t)((t0 - origin) * 1e9),
                                                  (int64_t)((t1 - origin) * 1e9),
                                                  bytes,
                                                  flops};
}

void tg_engine_record(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                      int peer, double t0, int64_t bytes, double flops)
{
    if (c->rec)
        tg_engine_record_span(c, kind, ph, it, j, peer, t0, now_s(), bytes, flops);
}
