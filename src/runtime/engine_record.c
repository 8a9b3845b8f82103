/* runtime/engine_record.c - what a recorded host step leaves behind in the
 * profile (runtime/record.h): the session's counters and the weights' and
 * gradients' histograms. Split from
 * runtime/engine.c, whose tg_session_run calls these after the step.
 */
#include "runtime/session_state.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/convert.h"
#include "profile/profile.h"
#include "runtime/allreduce.h"
#include "runtime/record.h"
#include "runtime/scaling.h"
#include "tilegraph/trace.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define now_s tg_engine_now

/* The process's resident memory (Linux /proc/self/statm); NaN elsewhere. */
static double resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    bool ok = f && fscanf(f, "%lld %lld", &size, &resident) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (double)resident * (double)page : NAN;
}

/* The counters the session knows of each host step (the caller adds its
 * own through tg_session_record_counter): one row each, cheap. */
tg_status tg_engine_record_own_counters(tg_session *s)
{
    int64_t step = s->runs - 1;
    TG_TRY(tg_profile_counter(tg_recording_profile(s->recording), step, "host step time (ns)",
                              s->last_run_seconds * 1e9));
    if (s->program->training)
        TG_TRY(tg_profile_counter(tg_recording_profile(s->recording), step, "loss scale",
                                  (double)tg_scaling_loss_scale(s->scaling)));
    TG_TRY(tg_profile_counter(tg_recording_profile(s->recording), step, "device memory (bytes)",
                              (double)tg_session_arena_bytes(s)));
    return tg_profile_counter(tg_recording_profile(s->recording), step,
                              "host memory in use (bytes)", resident_bytes());
}

/* `n` values of `dtype` at `src` as floats into the scratch `*buf` (grown). */
static const float *as_floats(const void *src, tg_dtype dtype, int64_t n, float **buf, int64_t *cap)
{
    if (n > *cap) {
        float *grown = tg_realloc(*buf, (size_t)n * sizeof(float));
        if (!grown)
            return NULL;
        *buf = grown;
        *cap = n;
    }
    tg_convert(src, dtype, *buf, TG_F32, (size_t)n);
    return *buf;
}

/* Histograms of every parameter (replica 0, gathered when sharded) and of
 * the gradient the last update used: the accumulator, which holds the mean
 * over micro-batches and replicas (loss-scaled when loss scaling is on).
 * Without accumulation there is no buffer that still holds the gradient
 * after the run, so those parameters have weights only. Recorded runs only
 * (autoReport.executionProfileProgramRunCount): a pass over the weights. */
tg_status tg_engine_record_histograms(tg_session *s, int64_t run)
{
    const tg_program *p = s->program;
    const tg_graph *g = p->graph;
    float *buf = NULL;
    unsigned char *raw = NULL;
    int64_t cap = 0, raw_cap = 0;
    tg_status st = TG_OK;
    for (int i = 0; st == TG_OK && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in > 0 || !t->grad || p->home[i] < 0)
            continue;
        int64_t n = tg_numel(t);
        tg_dtype dt = tg_session_storage_dtype(s, t);
        int64_t bytes = n * (int64_t)tg_dtype_size(dt);
        if (bytes > raw_cap) {
            unsigned char *grown = tg_realloc(raw, (size_t)bytes);
            if (!grown) {
                st = tg_error(TG_ERR_NOMEM, "profile: out of memory for histograms");
                break;
            }
            raw = grown;
            raw_cap = bytes;
        }
        st = tg_session_value_out(s, t, raw);
        const float *x = st == TG_OK ? as_floats(raw, dt, n, &buf, &cap) : NULL;
        if (st == TG_OK && !x)
            st = tg_error(TG_ERR_NOMEM, "profile: out of memory for histograms");
        if (st == TG_OK)
            st = tg_profile_histogram(tg_recording_profile(s->recording), run, t->name, "weight", x,
                                      n);
        const tg_device_program *dp = &p->devices[p->device_of[i] >= 0 ? p->device_of[i] : 0];
        for (int k = 0; st == TG_OK && k < dp->n_accumulators; k++) {
            const tg_accumulator *a = &dp->accumulators[k];
            if (a->param != i)
                continue;
            const tg_buffer *acc = &p->buffers[a->acc_buffer];
            /* never past the buffer (a sharded one holds a part) */
            int64_t m = tg_numel(g->nodes[acc->node]), begin = 0, end;
            int64_t fits = (int64_t)(acc->bytes / tg_dtype_size(acc->dtype));
            m = m < fits ? m : fits;
            if (tg_allreduce_scatters(s, a)) { /* replica 0's shard holds the mean */
                tg_shard_range(m, s->replica_offset, tg_program_shards(p), &begin, &end);
                m = end - begin;
            }
            x = as_floats(tg_engine_slot_ptr(s, 0, a->acc_buffer, 0) +
                              (size_t)begin * tg_dtype_size(acc->dtype),
                          acc->dtype, m, &buf, &cap);
            st = x ? tg_profile_histogram(tg_recording_profile(s->recording), run, t->name,
                                          "gradient", x, m)
                   : tg_error(TG_ERR_NOMEM, "profile: out of memory for histograms");
        }
    }
    tg_free(buf);
    tg_free(raw);
    return st;
}

tg_status tg_session_record_counter(tg_session *s, const char *name, double value)
{
    if (!s || !tg_recording_profile(s->recording) || s->runs < 1)
        return TG_OK;
    /* a refused counter (too many names) is the caller's error; the profile stays */
    return tg_profile_counter(tg_recording_profile(s->recording), s->runs - 1, name, value);
}
