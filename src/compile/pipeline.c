/* compile/pipeline.c - building pipeline schedules and measuring them. */
#include "compile/pipeline.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

static const char *const schedule_names[TG_SCHEDULE_COUNT] = {"grouped", "interleaved", "gpipe",
                                                              "1f1b", "sharded"};

const char *tg_schedule_name(tg_schedule_kind k)
{
    return (unsigned)k < TG_SCHEDULE_COUNT ? schedule_names[k] : "?";
}

int tg_schedule_parse(const char *name)
{
    for (int k = 0; name && k < TG_SCHEDULE_COUNT; k++)
        if (strcmp(name, schedule_names[k]) == 0)
            return k;
    return -1;
}

static void push(tg_pipe_schedule *s, int d, int mb, bool backward)
{
    s->ops[d][s->n_ops[d]++] = (tg_pipe_op){mb, backward};
}

/* Forwards first (`warm` of them), then alternate backward/forward, then drain. */
static void warm_then_alternate(tg_pipe_schedule *s, int d, int warm)
{
    int m = s->micro_batches, f = 0, b = 0;
    if (warm > m)
        warm = m;
    while (f < warm)
        push(s, d, f++, false);
    while (b < m) {
        push(s, d, b++, true);
        if (f < m)
            push(s, d, f++, false);
    }
}

static void build_device(tg_pipe_schedule *s, int d)
{
    int n = s->n_devices, m = s->micro_batches;
    if (!s->training) {
        for (int j = 0; j < m; j++)
            push(s, d, j, false);
        return;
    }
    switch (s->kind) {
    case TG_SCHEDULE_SHARDED:
        for (int j = 0; j < m; j++) {
            push(s, d, j, false);
            push(s, d, j, true);
        }
        return;
    case TG_SCHEDULE_GPIPE:
        for (int j = 0; j < m; j++)
            push(s, d, j, false);
        for (int j = 0; j < m; j++)
            push(s, d, j, true);
        return;
    case TG_SCHEDULE_1F1B:
        warm_then_alternate(s, d, n - d);
        return;
    case TG_SCHEDULE_INTERLEAVED:
        warm_then_alternate(s, d, n - d + 1);
        return;
    case TG_SCHEDULE_GROUPED: {
        /* cycle t: F(t - d), then B(t - (2N - d)). The backward of a
         * micro-batch starts one cycle after its forward leaves the last
         * device (the loss and the turn-around), so device d stashes
         * 2(N - d) + 1 activations: the reference's figure. */
        int lag = 2 * n - d;
        for (int t = 0; t < m + lag; t++) {
            if (t - d >= 0 && t - d < m)
                push(s, d, t - d, false);
            if (t - lag >= 0 && t - lag < m)
                push(s, d, t - lag, true);
        }
        return;
    }
    default:
        return;
    }
}

tg_status tg_pipe_schedule_build(tg_schedule_kind kind, int n_devices, int micro_batches,
                                 bool training, tg_pipe_schedule *s)
{
    memset(s, 0, sizeof *s);
    if ((unsigned)kind >= TG_SCHEDULE_COUNT || n_devices < 1 || micro_batches < 1)
        return tg_error(TG_ERR_CONFIG, "pipeline: %d devices and %d micro-batches with schedule %d",
                        n_devices, micro_batches, (int)kind);
    s->kind = kind;
    s->n_devices = n_devices;
    s->micro_batches = micro_batches;
    s->training = training;
    s->ops = tg_calloc((size_t)n_devices, sizeof *s->ops);
    s->n_ops = tg_calloc((size_t)n_devices, sizeof *s->n_ops);
    s->stash_depth = tg_calloc((size_t)n_devices, sizeof *s->stash_depth);
    if (!s->ops || !s->n_ops || !s->stash_depth)
        goto nomem;
    for (int d = 0; d < n_devices; d++) {
        s->ops[d] = tg_calloc(2 * (size_t)micro_batches, sizeof **s->ops);
        if (!s->ops[d])
            goto nomem;
        build_device(s, d);
        int live = 0;
        for (int k = 0; k < s->n_ops[d]; k++) {
            live += s->ops[d][k].backward ? -1 : 1;
            if (live > s->stash_depth[d])
                s->stash_depth[d] = live;
        }
        if (!training)
            s->stash_depth[d] = 1;
    }
    return TG_OK;
nomem:
    tg_pipe_schedule_free(s);
    return tg_error(TG_ERR_NOMEM, "pipeline: out of memory");
}

void tg_pipe_schedule_free(tg_pipe_schedule *s)
{
    for (int d = 0; s->ops && d < s->n_devices; d++)
        tg_free(s->ops[d]);
    tg_free(s->ops);
    tg_free(s->n_ops);
    tg_free(s->stash_depth);
    memset(s, 0, sizeof *s);
}

int tg_pipe_schedule_simulate(const tg_pipe_schedule *s, double *busy)
{
    int n = s->n_devices, m = s->micro_batches;
    /* done_f[d][j], done_b[d][j]: the cycle at whose end the op finished, or -1 */
    int *done = tg_malloc(sizeof(int) * (size_t)(2 * n * m));
    int *next = tg_calloc((size_t)n, sizeof(int));
    if (!done || !next) {
        tg_free(done);
        tg_free(next);
        return -1;
    }
    for (int i = 0; i < 2 * n * m; i++)
        done[i] = -1;
#define DONE_F(d, j) done[((d)*m + (j)) * 2]
#define DONE_B(d, j) done[((d)*m + (j)) * 2 + 1]
    int cycle = 0, remaining = 0, *worked = tg_calloc((size_t)n, sizeof(int));
    for (int d = 0; d < n; d++)
        remaining += s->n_ops[d];
    while (remaining > 0 && worked) {
        int progressed = 0;
        for (int d = 0; d < n; d++) {
            if (next[d] >= s->n_ops[d])
                continue;
            tg_pipe_op op = s->ops[d][next[d]];
            int j = op.micro_batch;
            bool ready;
            if (!op.backward)
                ready = d == 0 || (DONE_F(d - 1, j) >= 0 && DONE_F(d - 1, j) < cycle);
            else
                ready = DONE_F(d, j) >= 0 && DONE_F(d, j) < cycle &&
                        (d == n - 1 || (DONE_B(d + 1, j) >= 0 && DONE_B(d + 1, j) < cycle));
            if (!ready)
                continue;
            if (op.backward)
                DONE_B(d, j) = cycle;
            else
                DONE_F(d, j) = cycle;
            next[d]++;
            worked[d]++;
            remaining--;
            progressed++;
        }
        cycle++;
        if (!progressed && cycle > 4 * (2 * n * m + n)) {
            cycle = -1; /* deadlock */
            break;
        }
    }
#undef DONE_F
#undef DONE_B
    for (int d = 0; busy && d < n && cycle > 0; d++)
        busy[d] = (double)worked[d] / cycle;
    tg_free(worked);
    tg_free(done);
    tg_free(next);
    return cycle;
}
