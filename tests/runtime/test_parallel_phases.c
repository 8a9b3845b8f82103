/* tests/runtime/test_parallel_phases.c - phasedExecutionType ParallelIPU
 * (compile/parallel_phases.c): mnist-pipeline's four phases alternate over
 * two devices, each pass's values crossing between them inside it. The
 * weights and optimizer state match the one-device run bit for bit, on
 * chip and in streaming memory, copied on demand and on the I/O threads;
 * the program alternates and sends both ways inside the passes; the
 * profile holds both devices' passes and copies; executables keep the
 * transfers' places. Two device threads and their I/O threads, hence the
 * label.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"
#include "tg_test_train.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "profile/reader.h"
#include "runtime/session_internal.h"

#include <stdio.h>
#include <string.h>

#define PARALLEL                                                                                   \
    "executionStrategy", "phased", "phases", "B1|B2|B3|B4", "phasedExecutionType", "ParallelIPU"
#define EVERYTHING_OFF                                                                             \
    "TensorLocations.weight.onChip", "false", "TensorLocations.activation.onChip", "false",        \
        "TensorLocations.accumulator.onChip", "false", "TensorLocations.optimizer.onChip", "false"

/* Train `one` and `par` 3 host steps each: the same weights and state. */
static void same_training(const char *const *one, const char *const *par)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_model a, b;
    tg_test_train(&a, 8, &opt, one, 3, 9, NULL);
    tg_test_train(&b, 8, &opt, par, 3, 9, NULL);
    if (a.s && b.s) {
        TG_CHECK(tg_session_program(b.s)->n_devices == 2);
        TG_CHECK(tg_test_same_weights(&a, &b, true));
    }
    tg_test_model_destroy(&a);
    tg_test_model_destroy(&b);
}

static void test_on_chip_is_exact(void)
{
    same_training(NULL, (const char *[]){PARALLEL, NULL});
}

static void test_streaming_memory_on_demand_and_preloaded_is_exact(void)
{
    same_training(NULL, (const char *[]){PARALLEL, EVERYTHING_OFF, NULL});
    same_training(NULL, (const char *[]){PARALLEL, EVERYTHING_OFF, "TensorLocations.ioSchedule",
                                         "preload", NULL});
}

/* Two micro-batches over two replicas: four device threads. */
static void test_replicas_and_micro_batches_are_exact(void)
{
    same_training(
        (const char *[]){"Training.gradientAccumulation", "2", "replicationFactor", "2", NULL},
        (const char *[]){PARALLEL, "Training.gradientAccumulation", "2", "replicationFactor", "2",
                         "TensorLocations.weight.onChip", "false", "TensorLocations.ioSchedule",
                         "preload", NULL});
}

/* Transfers in pass ph from device `from`, sent inside the pass. */
static int sent_inside(const tg_program *p, tg_phase ph, int from)
{
    int n = 0;
    for (int t = 0; t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        n += tr->phase == ph && tr->src_device == from && tr->send_at > 0 &&
             p->devices[from].steps[ph][tr->send_at].exchange_before;
    }
    return n;
}

/* Phase k on device k mod 2, each pass one run of steps per phase, and
 * values sent inside the forward (device 0 to 1 after phase 0, 1 to 0
 * after phase 1) and the backward (0 to 1 after phase 2's, 1 to 0 after
 * phase 3's at the end of its pass); an executable keeps all of it, and a
 * transfer placed at a step that does not exist is refused. */
static void test_the_program_alternates_and_exchanges_inside_passes(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0);
    tg_test_model m;
    tg_test_train(&m, 8, &opt, (const char *[]){PARALLEL, NULL}, 0, 9, NULL);
    const tg_program *p = m.s ? tg_session_program(m.s) : NULL;
    for (int d = 0; p && d < p->n_devices; d++)
        for (int ph = TG_PHASE_FORWARD; ph <= TG_PHASE_BACKWARD; ph++) {
            const tg_device_program *dp = &p->devices[d];
            int changes = 0;
            for (int k = 0; k < dp->n_steps[ph]; k++) {
                int phase = p->phase_of[dp->steps[ph][k].node];
                TG_CHECK(phase % 2 == d);
                changes += k > 0 && phase != p->phase_of[dp->steps[ph][k - 1].node];
            }
            TG_CHECK(changes == 1); /* two phases, one run each */
        }
    if (p) {
        TG_CHECK(sent_inside(p, TG_PHASE_FORWARD, 0) > 0);
        TG_CHECK(sent_inside(p, TG_PHASE_FORWARD, 1) > 0);
        TG_CHECK(sent_inside(p, TG_PHASE_BACKWARD, 0) > 0);
    }
    void *data = NULL;
    size_t len = 0;
    tg_program *back = NULL;
    if (p) {
        TG_CHECK_OK(tg_executable_serialize(p, &data, &len));
        TG_CHECK_OK(tg_executable_parse(p->graph, &p->config, data, len, "test", &back));
    }
    for (int t = 0; back && t < p->n_transfers; t++) {
        TG_CHECK(back->transfers[t].send_at == p->transfers[t].send_at);
        TG_CHECK(back->transfers[t].recv_at[1] == p->transfers[t].recv_at[1]);
    }
    tg_program_destroy(back);
    back = NULL;
    /* corrupt the first transfer's step inside the file */
    unsigned char *bytes = data;
    const tg_transfer *first = p && p->n_transfers ? &p->transfers[0] : NULL;
    for (size_t i = 0; first && i + sizeof *first <= len; i++)
        if (!memcmp(bytes + i, first, sizeof *first)) {
            tg_transfer bad = *first;
            bad.send_at = 1 << 20;
            memcpy(bytes + i, &bad, sizeof bad);
            break;
        }
    if (first) {
        TG_CHECK(tg_executable_parse(p->graph, &p->config, data, len, "test", &back) != TG_OK);
        TG_CHECK(back == NULL);
    }
    tg_free(data);
    tg_test_model_destroy(&m);
}

/* The profile: both devices' passes, several per forward (a pass event
 * per phase), and the copies both ways. */
static void test_profile_shows_both_devices_passes_and_copies(void)
{
    char dir[] = "/tmp/tg_parallel_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0);
    tg_test_model m;
    tg_test_train(
        &m, 8, &opt,
        (const char *[]){PARALLEL, "autoReport.all", "true", "autoReport.directory", dir, NULL}, 1,
        9, NULL);
    tg_test_model_destroy(&m);
    char path[128];
    snprintf(path, sizeof path, "%s/training/profile.sqlite", dir);
    tg_profile_reader *r = NULL;
    TG_CHECK_OK(tg_profile_reader_open(path, &r));
    int64_t passes[2] = {0, 0}, copies[2] = {0, 0};
    for (int d = 0; r && d < 2; d++) {
        char q[256];
        snprintf(q, sizeof q,
                 "SELECT COUNT(*) FROM trace WHERE device = %d AND phase = 'forward' AND kind = "
                 "'execute'",
                 d);
        TG_CHECK_OK(tg_profile_reader_int(r, q, 0, &passes[d]));
        snprintf(q, sizeof q,
                 "SELECT COUNT(*) FROM trace WHERE device = %d AND peer = %d AND bytes > 0 "
                 "AND kind = 'copy to device'",
                 d, 1 - d);
        TG_CHECK_OK(tg_profile_reader_int(r, q, 0, &copies[d]));
    }
    /* one micro-batch: two phases per device, each its own forward event */
    TG_CHECK(passes[0] == 2 && passes[1] == 2);
    TG_CHECK(copies[0] >= 2 && copies[1] >= 2);
    /* every phase's event starts in the run and lasts less than it (a
     * phase once began at the clock's zero) */
    int64_t bad = -1, run_ns = 0;
    if (r) {
        TG_CHECK_OK(
            tg_profile_reader_int(r, "SELECT MAX(end_ns) - MIN(start_ns) FROM trace", 0, &run_ns));
        TG_CHECK_OK(tg_profile_reader_int(r,
                                          "SELECT COUNT(*) FROM trace WHERE kind = 'execute' AND "
                                          "(start_ns < 0 OR end_ns < start_ns)",
                                          0, &bad));
    }
    TG_CHECK(bad == 0 && run_ns > 0 && run_ns < 60000000000);
    tg_profile_reader_close(r);
    tg_test_remove_dir(dir);
}

/* Four blocks of linear + tanh, B3 also adding B1's output: a value of
 * phase 0 that phase 1 (the other device) and phase 2 (the same one) read. */
static tg_graph *skip_net(tg_tensor **x, tg_tensor **labels)
{
    tg_graph *g = tg_graph_create();
    *x = tg_input(g, "x", TG_F32, tg_shape2(4, 8));
    *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_init init = {TG_INIT_FAN_IN_UNIFORM, 8, 0};
    const char *names[] = {"B1", "B2", "B3", "B4"};
    tg_tensor *h = *x, *h1 = NULL;
    for (int k = 0; k < 4; k++) {
        tg_block_begin(g, names[k]);
        char scope[16];
        snprintf(scope, sizeof scope, "layer%d", k + 1);
        tg_scope_push(g, scope);
        h = tg_tanh(g, tg_linear(g, h, tg_param(g, "w", tg_shape2(8, 8), init), NULL));
        if (k == 2)
            h = tg_add(g, h, h1);
        h1 = k == 0 ? h : h1;
        tg_scope_pop(g);
    }
    tg_block_end(g);
    tg_tensor *loss = tg_cross_entropy(g, h, *labels);
    tg_tensor_mark_output(loss);
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    TG_CHECK_OK(tg_graph_status(g));
    return g;
}

/* The skip net trained `runs` host steps with options kv; its weights in w. */
static tg_status train_skip_net(const char *const *kv, int runs, float w[4][64])
{
    tg_tensor *x, *labels;
    tg_graph *g = skip_net(&x, &labels);
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    tg_test_options_set(o, kv);
    tg_session *s = NULL;
    tg_status st = tg_session_create(g, o, &s);
    float xs[32];
    int32_t ys[4];
    for (int r = 0; st == TG_OK && r < runs; r++) {
        for (int i = 0; i < 32; i++)
            xs[i] = (float)((i * 7 + r * 3) % 11) / 11.0f - 0.5f;
        for (int i = 0; i < 4; i++)
            ys[i] = (i + r) % 8;
        TG_CHECK_OK(tg_session_write(s, x, xs, sizeof xs));
        TG_CHECK_OK(tg_session_write(s, labels, ys, sizeof ys));
        TG_CHECK_OK(tg_session_run(s));
    }
    for (int k = 0; st == TG_OK && k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d/w", k + 1);
        const tg_tensor *t = tg_graph_find(g, name);
        TG_CHECK(t != NULL);
        if (t)
            TG_CHECK_OK(tg_session_read(s, t, w[k], 64 * sizeof(float)));
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
    return st;
}

/* A value one phase sends to the other device and a later phase of its
 * own device reads: the one-device weights on chip; in streaming memory it
 * would be stored only after that later phase, so after it is sent: refused
 * by name. */
static void test_a_value_read_two_phases_later(void)
{
    static float one[4][64], par[4][64], fewer[4][64];
    TG_CHECK_OK(train_skip_net(NULL, 3, one));
    TG_CHECK_OK(train_skip_net((const char *[]){PARALLEL, NULL}, 3, par));
    TG_CHECK(memcmp(one, par, sizeof one) == 0);
    TG_CHECK_OK(train_skip_net(NULL, 2, fewer)); /* the comparison can fail */
    TG_CHECK(memcmp(one, fewer, sizeof one) != 0);
    tg_status st = train_skip_net(
        (const char *[]){PARALLEL, "TensorLocations.activation.onChip", "false", NULL}, 3, par);
    TG_CHECK(st == TG_ERR_CONFIG && strstr(tg_error_message(), "stored after it is sent"));
}

int main(void)
{
    TG_RUN(test_on_chip_is_exact);
    TG_RUN(test_streaming_memory_on_demand_and_preloaded_is_exact);
    TG_RUN(test_replicas_and_micro_batches_are_exact);
    TG_RUN(test_the_program_alternates_and_exchanges_inside_passes);
    TG_RUN(test_profile_shows_both_devices_passes_and_copies);
    TG_RUN(test_a_value_read_two_phases_later);
    return tg_test_finish();
}
