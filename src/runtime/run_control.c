/* runtime/run_control.c - one run's lock, condition and abort flag. The
 * flag is written under the lock but atomically, so that spinning waiters
 * may read it without taking the lock. */
#include "runtime/run_control.h"

#include "core/alloc.h"

#include <stdio.h>

struct tg_run_control {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool abort;
    tg_status fail_status;
    char fail_message[512];
};

tg_status tg_run_control_create(tg_run_control **out)
{
    tg_run_control *r = tg_calloc(1, sizeof *r);
    if (!(*out = r))
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    return TG_OK;
}

void tg_run_control_free(tg_run_control *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->changed);
    tg_free(r);
}

void tg_run_begin(tg_run_control *r)
{
    /* no thread of the run exists yet: nobody reads it */
    r->abort = false;
    r->fail_status = TG_OK;
}

void tg_run_fail(tg_run_control *r, tg_status st, const char *msg)
{
    pthread_mutex_lock(&r->lock);
    if (!r->abort) {
        r->fail_status = st;
        snprintf(r->fail_message, sizeof r->fail_message, "%s", msg);
        __atomic_store_n(&r->abort, true, __ATOMIC_RELEASE);
    }
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
}

bool tg_run_aborted(const tg_run_control *r)
{
    return __atomic_load_n(&r->abort, __ATOMIC_ACQUIRE);
}

const bool *tg_run_abort_flag(const tg_run_control *r)
{
    return &r->abort;
}

tg_status tg_run_result(const tg_run_control *r)
{
    if (!r->abort)
        return TG_OK;
    return tg_error(r->fail_status, "%s", r->fail_message);
}

void tg_run_lock(tg_run_control *r)
{
    pthread_mutex_lock(&r->lock);
}

void tg_run_unlock(tg_run_control *r)
{
    pthread_mutex_unlock(&r->lock);
}

void tg_run_wait(tg_run_control *r, pthread_cond_t *cv)
{
    pthread_cond_wait(cv ? cv : &r->changed, &r->lock);
}

void tg_run_broadcast(tg_run_control *r)
{
    pthread_cond_broadcast(&r->changed);
}
