/* tests/runtime/test_offload.c - tensors kept in host streaming memory
 * (TensorLocations.<kind>.onChip = false, compile/streaming.c): weights,
 * activations, accumulators and optimizer state. The device holds less, the
 * training numbers are bit-identical, executables keep the streamed copies,
 * and the traffic is in the profile. The copies run on I/O threads
 * (runtime/stream_io.c), hence the label.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"
#include "tg_test_train.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "profile/reader.h"
#include "runtime/session_internal.h"
#include "runtime/session_state.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void compare(const char *const *base, const char *const *offloaded)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_model on, off;
    tg_test_train(&on, 8, &opt, base, 3, 9, NULL);
    tg_test_train(&off, 8, &opt, offloaded, 3, 9, NULL);
    if (on.s && off.s) {
        TG_CHECK(tg_test_same_weights(&on, &off, true));
        const tg_program *pon = tg_session_program(on.s), *poff = tg_session_program(off.s);
        size_t state_on = 0, state_off = 0, host = 0;
        for (int d = 0; d < pon->n_devices; d++) {
            state_on += pon->devices[d].region_bytes[TG_REGION_STATE];
            state_off += poff->devices[d].region_bytes[TG_REGION_STATE];
            host += poff->devices[d].offloaded_bytes;
        }
        TG_CHECK(state_off == 0 && state_on > 0 && host >= state_on / 2);
        TG_CHECK(poff->arena_bytes < pon->arena_bytes);
    }
    tg_test_model_destroy(&on);
    tg_test_model_destroy(&off);
}

/* Sum over devices of a region's bytes, the arena and the offloaded bytes. */
static size_t region_total(const tg_program *p, tg_region r)
{
    size_t n = 0;
    for (int d = 0; d < p->n_devices; d++)
        n += p->devices[d].region_bytes[r];
    return n;
}

static size_t offloaded_total(const tg_program *p)
{
    size_t n = 0;
    for (int d = 0; d < p->n_devices; d++)
        n += p->devices[d].offloaded_bytes;
    return n;
}

/* Train with `base` options and with `base` plus `extra`: bit-identical
 * weights and state after 3 host steps; the offloaded run's region `gone`
 * is empty, its host copies hold at least `gone`'s bytes, and its arena is
 * smaller. Returns the offloaded run's streamed bytes, all phases. */
static size_t compare_kind(const char *const *base, const char *const *extra, tg_region gone)
{
    const char *on_kv[32] = {0}, *off_kv[32] = {0};
    int n = 0;
    for (int i = 0; base && base[i]; i++, n++)
        on_kv[n] = off_kv[n] = base[i];
    for (int i = 0; extra[i]; i++)
        off_kv[n++] = extra[i];
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_model on, off;
    tg_test_train(&on, 8, &opt, on_kv, 3, 9, NULL);
    tg_test_train(&off, 8, &opt, off_kv, 3, 9, NULL);
    size_t streamed = 0;
    if (on.s && off.s) {
        TG_CHECK(tg_test_same_weights(&on, &off, true));
        const tg_program *pon = tg_session_program(on.s), *poff = tg_session_program(off.s);
        TG_CHECK(region_total(pon, gone) > 0);
        TG_CHECK(region_total(poff, gone) == 0);
        TG_CHECK(offloaded_total(poff) >= region_total(pon, gone));
        TG_CHECK(poff->arena_bytes < pon->arena_bytes);
        for (int d = 0; d < poff->n_devices; d++)
            for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
                streamed += poff->devices[d].stream_in_bytes[ph];
        TG_CHECK(streamed > 0);
    }
    tg_test_model_destroy(&on);
    tg_test_model_destroy(&off);
    return streamed;
}

static void test_offloaded_weights_are_exact(void)
{
    compare_kind(NULL, (const char *[]){"TensorLocations.weight.onChip", "false", NULL},
                 TG_REGION_PARAM);
}

static void test_offloaded_accumulators_are_exact(void)
{
    compare_kind((const char *[]){"Training.gradientAccumulation", "3", NULL},
                 (const char *[]){"TensorLocations.accumulator.onChip", "false", NULL},
                 TG_REGION_ACCUMULATOR);
}

/* Pipelined with micro-batches in flight, the stash goes to host memory;
 * each micro-batch has its own host slot. */
static void test_offloaded_activations_are_exact_pipelined(void)
{
    compare_kind((const char *[]){"executionStrategy", "pipelined", "Training.gradientAccumulation",
                                  "4", NULL},
                 (const char *[]){"TensorLocations.activation.onChip", "false", NULL},
                 TG_REGION_STASH);
}

/* Every kind at once, over replicas, in a schedule that splits the
 * backward into input- and weight-gradient passes (each its own copies). */
static void test_everything_offloaded_zero_bubble_with_replicas(void)
{
    compare_kind((const char *[]){"executionStrategy", "pipelined", "pipelineSchedule", "zb-h1",
                                  "Training.gradientAccumulation", "4", "replicationFactor", "2",
                                  NULL},
                 (const char *[]){"TensorLocations.weight.onChip", "false",
                                  "TensorLocations.activation.onChip", "false",
                                  "TensorLocations.accumulator.onChip", "false",
                                  "TensorLocations.optimizer.onChip", "false", NULL},
                 TG_REGION_PARAM);
}

/* TensorLocations.ioSchedule: the copies on each device's I/O thread
 * ahead of their steps (preload) give the bytes of the copies on the
 * device's thread (onDemand, the default), in the schedule with the most
 * passes, one step ahead and four; the plan keeps each copy live over those
 * steps, so preload's activations are never fewer. */
static void test_preload_matches_on_demand(void)
{
#define EVERYTHING_OFF                                                                             \
    "executionStrategy", "pipelined", "pipelineSchedule", "zb-h1",                                 \
        "Training.gradientAccumulation", "4", "replicationFactor", "2",                            \
        "TensorLocations.weight.onChip", "false", "TensorLocations.activation.onChip", "false",    \
        "TensorLocations.accumulator.onChip", "false", "TensorLocations.optimizer.onChip", "false"
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_model demand, preload;
    tg_test_train(&demand, 8, &opt,
                  (const char *[]){EVERYTHING_OFF, "TensorLocations.ioSchedule", "onDemand", NULL},
                  3, 9, NULL);
    tg_test_train(&preload, 8, &opt,
                  (const char *[]){EVERYTHING_OFF, "TensorLocations.ioSchedule", "preload",
                                   "TensorLocations.preloadSteps", "1", NULL},
                  3, 9, NULL);
    tg_test_model ahead;
    tg_test_train(&ahead, 8, &opt,
                  (const char *[]){EVERYTHING_OFF, "TensorLocations.ioSchedule", "preload", NULL},
                  3, 9, NULL);
#undef EVERYTHING_OFF
    if (demand.s && ahead.s)
        TG_CHECK(tg_test_same_weights(&demand, &ahead, true));
    tg_test_model_destroy(&ahead);
    if (demand.s && preload.s) {
        TG_CHECK(tg_test_same_weights(&demand, &preload, true));
        TG_CHECK(demand.s->stream_io == NULL);
        TG_CHECK(preload.s->stream_io != NULL);
        const tg_program *pd = tg_session_program(demand.s), *pp = tg_session_program(preload.s);
        TG_CHECK(region_total(pp, TG_REGION_ACTIVATION) >= region_total(pd, TG_REGION_ACTIVATION));
    }
    tg_test_model_destroy(&demand);
    tg_test_model_destroy(&preload);
}

/* minElementsForOffChip keeps the small tensors (biases) on the device. */
static void test_min_elements_keeps_small_weights(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0);
    tg_test_model m;
    tg_test_train(&m, 8, &opt,
                  (const char *[]){"TensorLocations.weight.onChip", "false",
                                   "TensorLocations.weight.minElementsForOffChip", "1000", NULL},
                  0, 9, NULL);
    const tg_program *p = m.s ? tg_session_program(m.s) : NULL;
    int kept = 0, off = 0;
    for (int b = 0; p && b < p->n_buffers; b++) {
        const tg_tensor *t = p->graph->nodes[p->buffers[b].node];
        if (p->buffers[b].region == TG_REGION_PARAM) {
            TG_CHECK(tg_numel(t) < 1000);
            kept++;
        } else if (p->buffers[b].offloaded) {
            TG_CHECK(tg_numel(t) >= 1000);
            off++;
        }
    }
    TG_CHECK(kept > 0 && off > 0);
    tg_test_model_destroy(&m);
}

/* A saved executable keeps the offloaded buffers and their streamed copies. */
static void test_executable_keeps_streams(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_model m;
    tg_test_train(&m, 8, &opt,
                  (const char *[]){"executionStrategy", "pipelined",
                                   "Training.gradientAccumulation", "4",
                                   "TensorLocations.weight.onChip", "false",
                                   "TensorLocations.activation.onChip", "false", NULL},
                  0, 9, NULL);
    const tg_program *p = m.s ? tg_session_program(m.s) : NULL;
    void *data = NULL;
    size_t len = 0;
    tg_program *back = NULL;
    if (p) {
        TG_CHECK_OK(tg_executable_serialize(p, &data, &len));
        TG_CHECK_OK(tg_executable_parse(p->graph, &p->config, data, len, "test", &back));
    }
    for (int d = 0; back && d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
            const tg_device_program *a = &p->devices[d], *b = &back->devices[d];
            TG_CHECK(a->n_streams[ph] == b->n_streams[ph]);
            TG_CHECK(a->n_streams[ph] == 0 ||
                     !memcmp(a->streams[ph], b->streams[ph],
                             (size_t)a->n_streams[ph] * sizeof(tg_stream_op)));
            TG_CHECK(a->stream_in_bytes[ph] == b->stream_in_bytes[ph]);
        }
    /* a streamed copy pointing at a buffer that is not offloaded is refused */
    for (int b = 0; back && b < back->n_buffers; b++)
        if (back->buffers[b].copy_of >= 0) {
            const tg_buffer *home = &p->buffers[p->buffers[b].copy_of];
            TG_CHECK(home->offloaded && home->region == TG_REGION_NONE);
        }
    tg_program_destroy(back);
    tg_free(data);
    tg_test_model_destroy(&m);
}

static void test_offload_is_exact_on_one_device(void)
{
    compare(NULL, (const char *[]){"TensorLocations.optimizer.onChip", "false", NULL});
}

static void test_offload_is_exact_pipelined_with_replicas(void)
{
    compare((const char *[]){"executionStrategy", "pipelined", "Training.gradientAccumulation", "4",
                             "replicationFactor", "2", NULL},
            (const char *[]){"executionStrategy", "pipelined", "Training.gradientAccumulation", "4",
                             "replicationFactor", "2", "TensorLocations.optimizer.onChip", "false",
                             NULL});
}

static void test_offload_traffic_is_profiled_and_checkpoints_work(void)
{
    char dir[] = "/tmp/tg_offload_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_model c, d;
    tg_test_train(&c, 8, &opt,
                  (const char *[]){"TensorLocations.optimizer.onChip", "false", "autoReport.all",
                                   "true", "autoReport.directory", dir,
                                   "TensorLocations.ioSchedule", "preload", NULL},
                  2, 9, NULL);
    char ckpt[128], path[128];
    snprintf(ckpt, sizeof ckpt, "%s/w.safetensors", dir);
    TG_CHECK_OK(tg_checkpoint_save(c.s, ckpt, "mnist-pipeline"));
    tg_test_train(&d, 8, &opt, (const char *[]){"TensorLocations.optimizer.onChip", "false", NULL},
                  0, 9, NULL);
    TG_CHECK_OK(tg_checkpoint_load(d.s, ckpt, "mnist-pipeline"));
    TG_CHECK(tg_test_same_weights(&c, &d, true));
    tg_session_destroy(c.s);
    tg_session_destroy(d.s);
    c.s = d.s = NULL;
    snprintf(path, sizeof path, "%s/training/profile.sqlite", dir);
    tg_profile_reader *r = NULL;
    TG_CHECK_OK(tg_profile_reader_open(path, &r));
    int64_t bytes = 0;
    if (r)
        TG_CHECK_OK(tg_profile_reader_int(r,
                                          "SELECT SUM(bytes) FROM trace WHERE phase = 'update' "
                                          "AND kind = 'load from streaming memory'",
                                          0, &bytes));
    TG_CHECK(bytes > 0);
    /* the copies ran on the device's I/O thread (ioSchedule preload) */
    int64_t io = 0;
    if (r)
        TG_CHECK_OK(tg_profile_reader_int(r,
                                          "SELECT COUNT(*) FROM trace WHERE peer = -2 "
                                          "AND kind = 'load from streaming memory'",
                                          0, &io));
    TG_CHECK(io > 0);
    tg_profile_reader_close(r);
    tg_test_model_destroy(&c);
    tg_test_model_destroy(&d);
    tg_test_remove_dir(dir);
}

int main(void)
{
    TG_RUN(test_offload_is_exact_on_one_device);
    TG_RUN(test_offload_is_exact_pipelined_with_replicas);
    TG_RUN(test_offload_traffic_is_profiled_and_checkpoints_work);
    TG_RUN(test_offloaded_weights_are_exact);
    TG_RUN(test_offloaded_accumulators_are_exact);
    TG_RUN(test_offloaded_activations_are_exact_pipelined);
    TG_RUN(test_everything_offloaded_zero_bubble_with_replicas);
    TG_RUN(test_preload_matches_on_demand);
    TG_RUN(test_min_elements_keeps_small_weights);
    TG_RUN(test_executable_keeps_streams);
    return tg_test_finish();
}
