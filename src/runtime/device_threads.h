/* runtime/device_threads.h - the session's part that runs a host step on
 * its devices (device_threads.c): the device threads, parked between host
 * steps, and their hand-over. */
#ifndef TG_RUNTIME_DEVICE_THREADS_H
#define TG_RUNTIME_DEVICE_THREADS_H

#include "runtime/session_state.h"

typedef struct tg_device_threads tg_device_threads;

/* For replicas x n_devices devices; no thread starts before the first run
 * of several. Their waits spin as long as `ceiling`'s (the exchange's). */
tg_status tg_device_threads_create(int replicas, int n_devices, tg_spin *ceiling,
                                   tg_device_threads **out);
/* Stops the threads (joined) and frees the part; NULL: nothing. */
void tg_device_threads_free(tg_device_threads *t);
/* One host step of devices ctx[0 .. n): tg_engine_device_main of each, on
 * the caller's thread when n is 1, else on the device threads (started by
 * the first such run); returns when every device has ended the step. */
tg_status tg_device_threads_run(tg_device_threads *t, device_ctx *ctx, int n);
/* Join the threads (none started: nothing to do); between runs only, when
 * they are parked. NULL: nothing. */
void tg_device_threads_stop(tg_device_threads *t);
/* A thread per device per step instead (the former way), or back. */
void tg_device_threads_set_per_step(tg_device_threads *t, bool on);

/* What the tests see: whether the session-long threads are started, each
 * one's id, the host steps handed to them, and those still in a step. */
bool tg_device_threads_started(const tg_device_threads *t);
pthread_t tg_device_threads_id(const tg_device_threads *t, int i);
int64_t tg_device_threads_steps(const tg_device_threads *t);
int tg_device_threads_running(const tg_device_threads *t);

#endif
