/* runtime/engine_update.c - before a device's update runs: whether any
 * gradient overflowed (every device of a replica agrees at a barrier), the
 * dynamic loss scale, and clipping by the gradients' global norm. Split
 * from runtime/engine.c; runtime/engine_passes.c calls it once per update.
 */
#include "runtime/session_state.h"

#include "core/pool.h"
#include "core/convert.h"
#include "graph/optim_params.h"
#include "runtime/exchange.h"
#include "runtime/staging.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The parameter whose gradient (as the update will read it) holds a NaN or
 * an infinity on this device, or NULL. */
static const tg_tensor *overflowed_gradient(device_ctx *c)
{
    const tg_program *p = c->s->program;
    const tg_device_program *dp = &p->devices[c->device];
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *u = p->graph->nodes[st->node];
        int b = st->in[u->n_in - 1];
        if (!tg_is_weight_update(u) || b < 0)
            continue;
        if (tg_first_nonfinite(tg_engine_slot_ptr(c->s, c->replica, b, 0), p->buffers[b].dtype,
                               (size_t)tg_numel(u->in[0])) >= 0)
            return u->in[0];
    }
    return NULL;
}

/* The gradient-clipping work over this device's updates: each update's sum
 * of squares (or its scaling) is done whole by one thread, so spreading the
 * updates over the device's threads changes no bit. */
typedef struct clip_job {
    device_ctx *c;
    double *sums; /* indexed by node id: post the sums here... */
    float factor; /* ...or scale the gradients by this */
} clip_job;

static void clip_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const clip_job *j = ctx;
    tg_session *s = j->c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[j->c->device];
    for (int64_t k = begin; k < end; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *u = p->graph->nodes[st->node];
        int b = st->in[u->n_in - 1];
        if (!tg_is_weight_update(u) || b < 0)
            continue;
        void *grad = tg_engine_slot_ptr(s, j->c->replica, b, 0);
        if (j->sums)
            j->sums[st->node] = tg_sum_squares_typed(grad, p->buffers[b].dtype, tg_numel(u->in[0]));
        else
            tg_scale_typed(grad, p->buffers[b].dtype, tg_numel(u->in[0]), j->factor);
    }
}

static void clip_run(clip_job *j)
{
    const tg_program *p = j->c->s->program;
    int n = p->devices[j->c->device].n_steps[TG_PHASE_UPDATE];
    tg_pool *pool = j->c->s->pools[j->c->replica * p->n_devices + j->c->device];
    if (n > 1 && tg_pool_threads(pool) > 1)
        tg_pool_for(pool, n, clip_range, j);
    else if (n > 0)
        clip_range(j, 0, n, 0);
}

/* This replica's row of sums for update `it`. The rows alternate with the
 * update's parity: a device can be at most one update ahead of the others
 * (the barrier), so it never overwrites sums another still reads. */
static double *grad_squares_row(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    size_t row = (size_t)((s->step + it) & 1) * (size_t)s->program->replicas + (size_t)c->replica;
    return s->grad_squares + row * (size_t)s->graph->n_nodes;
}

/* clip_grad_norm_ over every parameter of the model: the global norm from
 * all devices' sums (posted before the barrier), added in graph order
 * whatever the placement (so one device, a pipeline and replicas agree to
 * the bit), unscaled by the loss scale the gradients were made with; then
 * this device scales its own gradients. */
static void clip_gradients(device_ctx *c, int64_t it, float loss_scale)
{
    tg_session *s = c->s;
    const tg_graph *g = s->graph;
    const double *all = grad_squares_row(c, it);
    double total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (tg_is_weight_update(g->nodes[i]))
            total += all[i];
    bool scaled = s->program->precision.loss_scaling != TG_LOSS_SCALING_NONE;
    double norm = sqrt(total) / (scaled ? (double)loss_scale : 1.0);
    clip_job j = {c, NULL, tg_grad_clip_factor(norm, s->max_grad_norm)};
    if (j.factor < 1.0f)
        clip_run(&j);
}

/* Dynamic loss scaling: halve after an overflow, double after
 * growth_interval good updates. */
static void adjust_loss_scale(device_ctx *c, bool overflow)
{
    const tg_precision *pr = &c->s->program->precision;
    bool dynamic = pr->loss_scaling == TG_LOSS_SCALING_DYNAMIC;
    if (overflow) {
        c->skipped_updates++;
        c->good_updates = 0;
        if (dynamic && c->loss_scale > 1.0f / 16384)
            c->loss_scale *= 0.5f;
    } else if (dynamic && ++c->good_updates >= pr->growth_interval) {
        c->good_updates = 0;
        if (c->loss_scale < 16777216.0f)
            c->loss_scale *= 2.0f;
    }
}

/* Whether update `it` runs. Every device of a replica checks its gradients
 * and they agree (a barrier) whether any overflowed; then each adjusts its
 * copy of the loss scale the same way. Without loss scaling an overflow is
 * an error naming the step and the parameter. With max_grad_norm the same
 * barrier carries each device's gradients' sums of squares, and every device
 * clips its gradients by the global norm before any update runs. Replicas
 * need no exchange: after the all-reduce their gradients are identical, and
 * so are their norms. Sets *ok false on failure. */
bool tg_engine_update_runs(device_ctx *c, int64_t it, bool *ok)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_precision *pr = &p->precision;
    *ok = true;
    c->grad_scale = c->loss_scale; /* before adjust_loss_scale may grow it */
    bool clip = s->max_grad_norm > 0;
    if (!s->check_overflow && !clip)
        return true;
    int64_t mark = s->step + it + 1;
    const tg_tensor *bad = s->check_overflow ? overflowed_gradient(c) : NULL;
    if (bad && pr->loss_scaling == TG_LOSS_SCALING_NONE && s->check_nan) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "step %lld, replica %d: the gradient of '%s' (stored as %s) "
                 "holds NaN or infinity; turn on loss scaling (lossScaling=dynamic), lower the "
                 "learning rate, or store the model in bf16",
                 (long long)(s->step + it), c->replica, bad->name, tg_dtype_name(pr->model));
        tg_exchange_fail(s, TG_ERR_NUMERIC, msg);
        *ok = false;
        return false;
    }
    if (bad)
        __atomic_store_n(&s->overflow_mark[c->replica], mark, __ATOMIC_RELEASE);
    if (clip) { /* this device's sums, for every device to read after the barrier */
        clip_job j = {c, grad_squares_row(c, it), 1.0f};
        clip_run(&j);
    }
    if (p->n_devices > 1 && !tg_exchange_device_barrier(s, c->replica)) {
        *ok = false;
        return false;
    }
    bool overflow = s->check_overflow &&
                    __atomic_load_n(&s->overflow_mark[c->replica], __ATOMIC_ACQUIRE) == mark;
    if (s->check_overflow)
        adjust_loss_scale(c, overflow);
    if (clip && !overflow)
        clip_gradients(c, it, c->grad_scale);
    return !overflow;
}

/* The loss gradient's seed is the loss scale. */
void tg_engine_write_loss_scale(device_ctx *c)
{
    tg_session *s = c->s;
    int b = s->seed_buffer;
    if (b >= 0 && s->program->buffers[b].device == c->device)
        memcpy(tg_engine_slot_ptr(s, c->replica, b, 0), &c->loss_scale, sizeof(float));
}
