/* tests/runtime/test_offload.c - optimizer state kept in host memory
 * (TensorLocations.optimizer.onChip = false): the device holds less, the
 * training numbers are bit-identical, and the traffic is in the profile. */
#include "tg_test.h"
#include "tg_test_train.h"

#include "profile/reader.h"
#include "runtime/session_internal.h"
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
                                   "true", "autoReport.directory", dir, NULL},
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
                                          "AND kind = 'stream from host'",
                                          0, &bytes));
    TG_CHECK(bytes > 0);
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
    return tg_test_finish();
}
