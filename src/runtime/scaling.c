/* runtime/scaling.c - the session's part for loss scaling and clipping:
 * before a device's update runs, whether any gradient overflowed (every
 * device of a replica agrees at a barrier), the dynamic loss scale, and
 * clipping by the gradients' global norm. runtime/engine_passes.c calls it
 * once per update; the rest of the runtime reads the part through
 * scaling.h. */
#include "runtime/scaling.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/convert.h"
#include "graph/optim_params.h"
#include "runtime/exchange.h"
#include "runtime/staging.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct tg_scaling {
    /* loss scaling and overflow checks (compile/precision.h) */
    bool check_overflow;
    tg_loss_scaling mode;
    float loss_scale;
    int64_t good_updates, skipped_updates;
    int64_t *overflow_mark; /* per replica: 1 + the last update that overflowed */
    int seed_buffer;        /* the loss gradient's seed, scaled; -1 none */
    /* gradient clipping by the global norm (tg_optimizer.max_grad_norm; 0: off) */
    float max_grad_norm;
    double *
        grad_squares; /* [parity of the update][replica][node]: sum g^2 of each update's gradient */
    int replicas;
};

tg_status tg_scaling_create(const tg_program *p, const tg_graph *g, tg_scaling **out)
{
    tg_scaling *sc = tg_calloc(1, sizeof *sc);
    if (!sc)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    *out = sc;
    sc->replicas = p->replicas;
    sc->mode = p->precision.loss_scaling;
    sc->check_overflow = p->training && tg_precision_checks_overflow(&p->precision);
    sc->loss_scale = p->precision.loss_scale;
    sc->seed_buffer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if ((g->nodes[i]->flags & TG_NODE_LOSS_SEED) &&
            p->precision.loss_scaling != TG_LOSS_SCALING_NONE)
            sc->seed_buffer = p->home[i];
    for (int i = 0; i < g->n_nodes && p->training; i++)
        if (tg_is_weight_update(g->nodes[i])) {
            /* one optimizer per graph: every update carries the same setting */
            float m = tg_optim_params_get(&g->nodes[i]->p).max_grad_norm;
            sc->max_grad_norm = m > 0 && isfinite(m) ? m : 0.0f;
            break;
        }
    if (sc->max_grad_norm > 0) {
        sc->grad_squares = tg_calloc((size_t)(2 * p->replicas * g->n_nodes), sizeof(double));
        if (!sc->grad_squares)
            return tg_error(TG_ERR_NOMEM, "session: out of memory");
    }
    sc->overflow_mark = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    if (!sc->overflow_mark)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    return TG_OK;
}

void tg_scaling_free(tg_scaling *sc)
{
    if (!sc)
        return;
    tg_free(sc->overflow_mark);
    tg_free(sc->grad_squares);
    tg_free(sc);
}

bool tg_scaling_checks_overflow(const tg_scaling *sc)
{
    return sc->check_overflow;
}

float tg_scaling_max_grad_norm(const tg_scaling *sc)
{
    return sc->max_grad_norm;
}

int tg_scaling_seed_buffer(const tg_scaling *sc)
{
    return sc->seed_buffer;
}

float tg_scaling_loss_scale(const tg_scaling *sc)
{
    return sc->loss_scale;
}

int64_t tg_scaling_good_updates(const tg_scaling *sc)
{
    return sc->good_updates;
}

int64_t tg_scaling_skipped_updates(const tg_scaling *sc)
{
    return sc->skipped_updates;
}

void tg_scaling_restore(tg_scaling *sc, float loss_scale, int64_t good, int64_t skipped)
{
    sc->skipped_updates = skipped;
    if (sc->mode == TG_LOSS_SCALING_DYNAMIC) {
        sc->good_updates = good;
        sc->loss_scale = loss_scale;
    }
}

bool tg_scaling_skipped(const tg_scaling *sc, int replica, int64_t step)
{
    /* tg_scaling_update_runs marks the replica's overflowed update `step + 1` */
    return sc->check_overflow && sc->overflow_mark[replica] == step + 1;
}

void tg_scaling_begin_device(const tg_scaling *sc, device_ctx *c)
{
    c->loss_scale = sc->loss_scale;
    c->good_updates = sc->good_updates;
    c->grad_scale = sc->loss_scale;
}

void tg_scaling_end_run(tg_scaling *sc, const device_ctx *c)
{
    sc->loss_scale = c->loss_scale;
    sc->good_updates = c->good_updates;
    sc->skipped_updates += c->skipped_updates;
}

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
    return s->scaling->grad_squares + row * (size_t)s->graph->n_nodes;
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
    clip_job j = {c, NULL, tg_grad_clip_factor(norm, s->scaling->max_grad_norm)};
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
bool tg_scaling_update_runs(device_ctx *c, int64_t it, bool *ok)
{
    tg_session *s = c->s;
    tg_scaling *sc = s->scaling;
    const tg_program *p = s->program;
    const tg_precision *pr = &p->precision;
    *ok = true;
    c->grad_scale = c->loss_scale; /* before adjust_loss_scale may grow it */
    bool clip = sc->max_grad_norm > 0;
    if (!sc->check_overflow && !clip)
        return true;
    int64_t mark = s->step + it + 1;
    const tg_tensor *bad = sc->check_overflow ? overflowed_gradient(c) : NULL;
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
        __atomic_store_n(&sc->overflow_mark[c->replica], mark, __ATOMIC_RELEASE);
    if (clip) { /* this device's sums, for every device to read after the barrier */
        clip_job j = {c, grad_squares_row(c, it), 1.0f};
        clip_run(&j);
    }
    if (p->n_devices > 1 && !tg_exchange_device_barrier(s, c->replica)) {
        *ok = false;
        return false;
    }
    bool overflow = sc->check_overflow &&
                    __atomic_load_n(&sc->overflow_mark[c->replica], __ATOMIC_ACQUIRE) == mark;
    if (sc->check_overflow)
        adjust_loss_scale(c, overflow);
    if (clip && !overflow)
        clip_gradients(c, it, c->grad_scale);
    return !overflow;
}

/* The loss gradient's seed is the loss scale. */
void tg_scaling_write_seed(device_ctx *c)
{
    tg_session *s = c->s;
    int b = s->scaling->seed_buffer;
    if (b >= 0 && s->program->buffers[b].device == c->device)
        memcpy(tg_engine_slot_ptr(s, c->replica, b, 0), &c->loss_scale, sizeof(float));
}
