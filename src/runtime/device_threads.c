/* runtime/device_threads.c - the session's part that runs a host step on
 * its devices: on the caller's thread for one device of one replica, else
 * on a thread per (replica, device) that lives as long as the session
 * (or, for bench_step_overhead, a thread per device per step). Split from
 * runtime/engine.c with its state. */
#include "runtime/device_threads.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/exchange.h"
#include "tilegraph/trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The host trace's name for the thread that runs device `index`. */
static void name_device_thread(int n_devices, int index)
{
    char name[48];
    snprintf(name, sizeof name, "replica %d device %d", index / n_devices, index % n_devices);
    tg_trace_thread_name(tg_trace_intern(name));
}

/* A thread per (replica, device) lives as long as the session: started by
 * the first run that needs it, parked between host steps, stopped by
 * tg_session_destroy. Starting and joining threads at every host step cost
 * a thread start per device per step (with deviceIterations 1 that is per
 * update), and a fresh thread starts with cold caches and an empty trace
 * buffer. Handing over a step: the caller writes the devices' contexts,
 * then, under the part's `lock`, sets threads_running and bumps run_gen (release) and
 * wakes park_wake; a thread that sees the new generation (acquire) runs its
 * device, and the last to finish wakes park_done. Both waits spin within an
 * adaptive budget first (core/wait.h): back-to-back steps hand over without
 * a sleep, while a host that loads data between steps soon finds the
 * threads asleep and spinning nothing. An aborted step (tg_exchange_fail)
 * still ends in every thread, so the threads are always parked between
 * runs, and destroy only has to wake and join them. */

/* A device thread that lives as long as the session: it runs device
 * `index` (replica * n_devices + device) of every host step and parks
 * between steps. */
typedef struct tg_device_thread {
    tg_device_threads *t;
    int index;
    tg_spin spin; /* its wait for the next host step */
    pthread_t id;
} tg_device_thread;

struct tg_device_threads {
    int n, n_devices;
    device_ctx *ctx;     /* the step's devices, [replica * n_devices + device] */
    tg_spin *ceiling;    /* whose ceiling the waits take (the exchange's, session.c) */
    pthread_t *per_step; /* per-step threads (tg_engine_set_per_step_threads) */
    /* threads that live as long as the session: started by the first run of
     * several devices or replicas, parked between runs on park_wake (under
     * `lock`), stopped by tg_device_threads_stop */
    tg_device_thread *threads; /* [replica * n_devices + device], or NULL */
    pthread_mutex_t lock;
    pthread_cond_t park_wake, park_done;
    int64_t run_gen;       /* host steps handed to the threads (atomic) */
    int threads_running;   /* threads still in the current step (atomic) */
    bool threads_stop;     /* leave the loop: the session ends (atomic) */
    tg_spin done_spin;     /* the caller's wait for the step's end */
    bool per_step_threads; /* the former way: a thread per device per step */
};

typedef struct {
    tg_device_threads *s;
    int64_t seen; /* the last step this thread ran */
} park;

static bool step_or_stop(void *arg)
{
    const park *k = arg;
    return __atomic_load_n(&k->s->run_gen, __ATOMIC_ACQUIRE) != k->seen ||
           __atomic_load_n(&k->s->threads_stop, __ATOMIC_ACQUIRE);
}

static bool step_done(void *arg)
{
    const tg_device_threads *s = arg;
    return __atomic_load_n(&s->threads_running, __ATOMIC_ACQUIRE) == 0;
}

/* Spin, yield, then sleep on cv under the part's lock until ready(arg). */
static void wait_on(tg_device_threads *s, tg_spin *spin, pthread_cond_t *cv, tg_ready_fn ready,
                    void *arg)
{
    if (tg_spin_wait(spin, ready, arg))
        return;
    pthread_mutex_lock(&s->lock);
    while (!ready(arg))
        pthread_cond_wait(cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void *device_thread(void *arg)
{
    tg_device_thread *t = arg;
    tg_device_threads *s = t->t;
    name_device_thread(s->n_devices, t->index);
    park k = {s, 0};
    for (;;) {
        wait_on(s, &t->spin, &s->park_wake, step_or_stop, &k);
        if (__atomic_load_n(&s->threads_stop, __ATOMIC_ACQUIRE))
            return NULL;
        k.seen = __atomic_load_n(&s->run_gen, __ATOMIC_ACQUIRE);
        tg_engine_device_main(&s->ctx[t->index]);
        pthread_mutex_lock(&s->lock);
        if (__atomic_sub_fetch(&s->threads_running, 1, __ATOMIC_RELEASE) == 0)
            pthread_cond_signal(&s->park_done);
        pthread_mutex_unlock(&s->lock);
    }
}

/* Wake the first `started` threads to leave, join them and free them. */
static void join_threads(tg_device_threads *s, int started)
{
    pthread_mutex_lock(&s->lock);
    __atomic_store_n(&s->threads_stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->park_wake);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < started; i++)
        pthread_join(s->threads[i].id, NULL);
    tg_free(s->threads);
    s->threads = NULL;
    pthread_cond_destroy(&s->park_wake);
    pthread_cond_destroy(&s->park_done);
}

void tg_device_threads_stop(tg_device_threads *s)
{
    if (s && s->threads)
        join_threads(s, s->n);
}

void tg_device_threads_set_per_step(tg_device_threads *s, bool on)
{
    if (on)
        tg_device_threads_stop(s);
    s->per_step_threads = on;
}

/* Start the n device threads, parked until the first step is handed over.
 * They wait as long as the exchange's waits do (its ceiling is the free
 * cores' verdict, session.c). */
static tg_status start_threads(tg_device_threads *s, int n)
{
    s->threads = tg_calloc((size_t)n, sizeof *s->threads);
    if (!s->threads)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for %d device threads", n);
    pthread_cond_init(&s->park_wake, NULL);
    pthread_cond_init(&s->park_done, NULL);
    s->threads_stop = false;
    s->run_gen = 0;
    int ceiling = atomic_load_explicit(&s->ceiling->ceiling, memory_order_relaxed);
    tg_spin_init(&s->done_spin, ceiling);
    for (int i = 0; i < n; i++) {
        tg_device_thread *t = &s->threads[i];
        *t = (tg_device_thread){.t = s, .index = i};
        tg_spin_init(&t->spin, ceiling);
        int err = pthread_create(&t->id, NULL, device_thread, t);
        if (err != 0) {
            join_threads(s, i);
            return tg_error(TG_ERR_NOMEM,
                            "session: cannot start the thread of replica %d device %d (%s); "
                            "lower replicationFactor or the number of devices, or raise the "
                            "process's thread limit",
                            i / s->n_devices, i % s->n_devices, strerror(err));
        }
    }
    return TG_OK;
}

/* Hand the step to the parked threads and wait until every device ended it. */
static tg_status run_parked(tg_device_threads *s, int n)
{
    if (!s->threads)
        TG_TRY(start_threads(s, n));
    pthread_mutex_lock(&s->lock);
    __atomic_store_n(&s->threads_running, n, __ATOMIC_RELAXED);
    __atomic_store_n(&s->run_gen, s->run_gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->park_wake);
    pthread_mutex_unlock(&s->lock);
    wait_on(s, &s->done_spin, &s->park_done, step_done, s);
    return TG_OK;
}

static void *per_step_thread(void *arg)
{
    device_ctx *c = arg;
    name_device_thread(c->s->program->n_devices, c->replica * c->s->program->n_devices + c->device);
    tg_engine_device_main(c);
    return NULL;
}

/* The former way: a thread per device for this step only. */
static void run_per_step(tg_device_threads *s, int n)
{
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&s->per_step[started], NULL, per_step_thread, &s->ctx[started]) != 0) {
            tg_exchange_fail(s->ctx[0].s, TG_ERR_NOMEM, "cannot start a device thread");
            break;
        }
    for (int i = 0; i < started; i++)
        pthread_join(s->per_step[i], NULL);
}

/* One host step on every device: on the caller's thread when there is one
 * device of one replica, else on the device threads. */
tg_status tg_device_threads_run(tg_device_threads *s, device_ctx *ctx, int n)
{
    s->ctx = ctx;
    if (n == 1)
        tg_engine_device_main(&ctx[0]);
    else if (s->per_step_threads)
        run_per_step(s, n);
    else
        return run_parked(s, n);
    return TG_OK;
}

tg_status tg_device_threads_create(int replicas, int n_devices, tg_spin *ceiling,
                                   tg_device_threads **out)
{
    tg_device_threads *t = tg_calloc(1, sizeof *t);
    if (!t || !(t->per_step = tg_calloc((size_t)(replicas * n_devices), sizeof *t->per_step))) {
        tg_free(t);
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    }
    t->n = replicas * n_devices;
    t->n_devices = n_devices;
    t->ceiling = ceiling;
    pthread_mutex_init(&t->lock, NULL);
    *out = t;
    return TG_OK;
}

void tg_device_threads_free(tg_device_threads *t)
{
    if (!t)
        return;
    tg_device_threads_stop(t);
    pthread_mutex_destroy(&t->lock);
    tg_free(t->per_step);
    tg_free(t);
}

bool tg_device_threads_started(const tg_device_threads *t)
{
    return t->threads != NULL;
}

pthread_t tg_device_threads_id(const tg_device_threads *t, int i)
{
    return t->threads[i].id;
}

int64_t tg_device_threads_steps(const tg_device_threads *t)
{
    return __atomic_load_n(&t->run_gen, __ATOMIC_ACQUIRE);
}

int tg_device_threads_running(const tg_device_threads *t)
{
    return __atomic_load_n(&t->threads_running, __ATOMIC_ACQUIRE);
}
