/* tests/runtime/test_offload.c - optimizer state kept in host memory
 * (TensorLocations.optimizer.onChip = false): the device holds less, the
 * training numbers are bit-identical, and the traffic is in the profile. */
#include "tg_test.h"

#include "core/rng.h"
#include "profile/reader.h"
#include "runtime/session_internal.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    tg_model_graph mg;
    tg_session *s;
} run_ctx;

static void train(run_ctx *c, const char *const *kv, int runs)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 8, &opt, &c->mg));
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    for (int i = 0; kv && kv[i]; i += 2)
        TG_CHECK_OK(tg_options_set(o, kv[i], kv[i + 1]));
    TG_CHECK_OK(tg_session_create(c->mg.graph, o, &c->s));
    tg_options_destroy(o);
    int64_t n = c->s ? tg_session_samples_per_run(c->s, c->mg.images) : 0;
    float *img = malloc((size_t)n * 784 * sizeof(float));
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    tg_rng r;
    tg_rng_seed(&r, 9);
    for (int k = 0; c->s && k < runs; k++) {
        for (int64_t i = 0; i < n * 784; i++)
            img[i] = (float)tg_rng_uniform(&r);
        for (int64_t i = 0; i < n; i++)
            lab[i] = (int32_t)tg_rng_below(&r, 10);
        tg_session_write(c->s, c->mg.images, img, (size_t)n * 784 * sizeof(float));
        tg_session_write(c->s, c->mg.labels, lab, (size_t)n * sizeof(int32_t));
        TG_CHECK_OK(tg_session_run(c->s));
    }
    free(img);
    free(lab);
}

static bool same_params_and_state(const run_ctx *a, const run_ctx *b)
{
    const tg_graph *g = a->mg.graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM && t->op != TG_OP_STATE)
            continue;
        const tg_tensor *u = tg_graph_find(b->mg.graph, t->name);
        if (memcmp(tg_session_data(a->s, t), tg_session_data(b->s, u), tg_nbytes(t)) != 0)
            return false;
    }
    return true;
}

static void compare(const char *const *base, const char *const *offloaded)
{
    run_ctx on = {0}, off = {0};
    train(&on, base, 3);
    train(&off, offloaded, 3);
    if (on.s && off.s) {
        TG_CHECK(same_params_and_state(&on, &off));
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
    tg_session_destroy(on.s);
    tg_session_destroy(off.s);
    tg_model_graph_destroy(&on.mg);
    tg_model_graph_destroy(&off.mg);
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
    if (!mkdtemp(dir))
        return;
    run_ctx c = {0};
    train(&c, (const char *[]){"TensorLocations.optimizer.onChip", "false", "autoReport.all", "true",
                               "autoReport.directory", dir, NULL},
          2);
    char ckpt[128], path[128];
    snprintf(ckpt, sizeof ckpt, "%s/w.safetensors", dir);
    TG_CHECK_OK(tg_checkpoint_save(c.s, ckpt, "mnist-pipeline"));
    run_ctx d = {0};
    train(&d, (const char *[]){"TensorLocations.optimizer.onChip", "false", NULL}, 0);
    TG_CHECK_OK(tg_checkpoint_load(d.s, ckpt, "mnist-pipeline"));
    TG_CHECK(same_params_and_state(&c, &d));
    tg_session_destroy(c.s);
    tg_session_destroy(d.s);
    snprintf(path, sizeof path, "%s/training/profile.sqlite", dir);
    tg_profile_reader *r = NULL;
    TG_CHECK_OK(tg_profile_reader_open(path, &r));
    int64_t bytes = 0;
    if (r)
        TG_CHECK_OK(tg_profile_reader_int(r, "SELECT SUM(bytes) FROM trace WHERE phase = 'update' "
                                             "AND kind = 'stream from host'", 0, &bytes));
    TG_CHECK(bytes > 0);
    tg_profile_reader_close(r);
    tg_model_graph_destroy(&c.mg);
    tg_model_graph_destroy(&d.mg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tg_test_fail(__FILE__, __LINE__, "cannot remove %s", dir);
}

int main(void)
{
    TG_RUN(test_offload_is_exact_on_one_device);
    TG_RUN(test_offload_is_exact_pipelined_with_replicas);
    TG_RUN(test_offload_traffic_is_profiled_and_checkpoints_work);
    return tg_test_finish();
}
