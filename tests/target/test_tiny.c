/* tests/target/test_tiny.c - a third target, `tiny` (target/tiny.c: two tiles
 * of 2 MiB), proves that a target is one file and one registration line: the
 * option takes its name from the registry, the registry describes it, a model
 * compiles onto its two tiles, trains to the same numbers as on the Mk2 (the
 * host computes both; only the tile model differs), is refused when it does
 * not fit a tile, and its profile is analysed as a tiled, simulated one.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"
#include "tg_test_train.h"

#include "analyse/analyse.h"
#include "compile/program.h"
#include "core/alloc.h"
#include "core/error.h"
#include "runtime/session_internal.h"
#include "target/tiled.h"
#include "tilegraph/devices.h"
#include "tilegraph/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The registry knows tiny by name and by capability; nothing else lists it. */
static void test_registered(void)
{
    const tg_target_ops *t = tg_target_find("tiny");
    TG_CHECK(t == &tg_target_tiny_ops);
    TG_CHECK(tg_target_tiled(t) && tg_target_has_cycle_model(t) && !t->takes_description);
    TG_CHECK(!tg_target_tiled(&tg_target_cpu_ops) &&
             !tg_target_has_cycle_model(&tg_target_cpu_ops));
    int found = -1;
    for (int i = 0; i < tg_target_count(); i++)
        if (!strcmp(tg_target_name(i), "tiny"))
            found = i;
    TG_CHECK(found >= 0 && tg_target_name(tg_target_count()) == NULL);
    tg_target_info info;
    TG_CHECK_OK(tg_target_info_get(found, &info));
    TG_CHECK(info.tiled && info.tiles == 2 && info.memory_per_tile == 2 << 20 &&
             info.memory_per_device == 4 << 20 && info.max_devices == TG_MAX_DEVICES);
    char names[128];
    TG_CHECK(strcmp(tg_target_names(names, sizeof names, " and "), "cpu, mk2 and tiny") == 0);
}

/* A registered name is a target and others are refused, listing them: by
 * tg_target_check and by compiling, where option "target" meets the
 * registry (options are core's, below the targets, and take any name but an
 * empty one). */
static void test_option_checked_against_registry(void)
{
    TG_CHECK_OK(tg_target_check("tiny"));
    TG_CHECK(tg_target_check("gpu") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "option 'target': 'gpu' is not a target") != NULL);
    TG_CHECK(strstr(tg_error_message(), "cpu, mk2 or tiny") != NULL);
    TG_CHECK(tg_target_check(NULL) == TG_ERR_CONFIG);
    tg_options *o = tg_options_create();
    TG_CHECK(tg_options_set(o, "target", "") == TG_ERR_CONFIG);
    TG_CHECK_OK(tg_options_set(o, "target", "gpu"));
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    TG_CHECK_OK(tg_model_graph_create_ex(tg_model_find("mnist-pipeline"), 4, &opt, NULL, &mg));
    tg_program *p = NULL;
    TG_CHECK(tg_program_compile(mg.graph, o, &p) == TG_ERR_CONFIG && p == NULL);
    TG_CHECK(strstr(tg_error_message(), "'gpu' is not a target; the targets are cpu, mk2 or tiny"));
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
}

static const char *const tiny_kv[] = {
    "target", "tiny", "executionStrategy", "pipelined", "Training.gradientAccumulation", "4", NULL};

/* Compiles onto two tiles per device, each within its 2 MiB, and trains to
 * the Mk2's numbers bit for bit. */
static void test_compiles_and_runs(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_test_model tiny, mk2;
    tg_test_train(&tiny, 4, &opt, tiny_kv, 2, 7, NULL);
    tg_test_train(&mk2, 4, &opt,
                  (const char *[]){"target", "mk2", "executionStrategy", "pipelined",
                                   "Training.gradientAccumulation", "4", NULL},
                  2, 7, NULL);
    const tg_program *p = tiny.s ? tg_session_program(tiny.s) : NULL;
    TG_CHECK(p && p->tile_plan && p->n_devices >= 2);
    if (p && p->tile_plan) {
        const tg_tile_plan *tp = p->tile_plan;
        TG_CHECK(strcmp(tp->target.name, "tiny") == 0 && tp->target.tiles == 2);
        for (int b = 0; b < p->n_buffers; b++)
            TG_CHECK(tp->span[b].start >= 0 && tp->span[b].start < 2 && tp->span[b].used <= 2);
        for (int d = 0; d < tp->n_devices; d++) {
            const tg_tile_device *td = &tp->devices[d];
            TG_CHECK(td->max_tile >= 0 && td->max_tile < 2);
            TG_CHECK(td->max_bytes > 0 && td->max_bytes <= tp->target.tile_memory);
            TG_CHECK(tg_tile_bytes(tp, d, 0) + tg_tile_bytes(tp, d, 1) > 0);
            TG_CHECK(td->cycles[0] > 0 && td->cycles[1] > 0);
        }
    }
    TG_CHECK(tiny.s && mk2.s && tg_test_same_weights(&tiny, &mk2, true));
    tg_test_model_destroy(&tiny);
    tg_test_model_destroy(&mk2);
}

/* A batch too large for a 2 MiB tile is refused, naming the tile; a
 * description file (for mk2's tiles) is refused naming the target. */
static void test_refusals(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_test_model c;
    tg_status s = tg_test_model_create(&c, 512, &opt, tiny_kv, 1);
    TG_CHECK(s == TG_ERR_CAPACITY);
    TG_CHECK(strstr(tg_error_message(), "device 0 tile") &&
             strstr(tg_error_message(), "tiny memory per tile"));
    tg_test_model_destroy(&c);
    s = tg_test_model_create(
        &c, 4, &opt,
        (const char *[]){"target", "tiny", "targetDescription", "/nonexistent.json", NULL}, 1);
    TG_CHECK(s == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "target tiny has fixed numbers") != NULL);
    tg_test_model_destroy(&c);
}

/* The profile of a tiny run reads as a tiled, simulated one: two tiles per
 * device, a cycle-model trace, and the views build. */
static void test_analysed(void)
{
    char dir[] = "/tmp/tg_tiny_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    const char *kv[] = {"target",
                        "tiny",
                        "executionStrategy",
                        "pipelined",
                        "Training.gradientAccumulation",
                        "4",
                        "autoReport.all",
                        "true",
                        "autoReport.directory",
                        dir,
                        NULL};
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_test_model c;
    tg_test_train(&c, 4, &opt, kv, 2, 3, NULL);
    tg_test_model_destroy(&c);
    char path[128];
    snprintf(path, sizeof path, "%s/training/profile.sqlite", dir);
    tg_profile_reader *r = NULL;
    TG_CHECK_OK(tg_analyse_open(path, -1, &r));
    if (r) {
        TG_CHECK(strcmp(tg_analyse_meta(r, "target"), "tiny") == 0);
        TG_CHECK(tg_an_trace_is_simulated(r));
        int tiles = 0;
        TG_CHECK_OK(tg_an_tiles_per_device(r, &tiles));
        TG_CHECK(tiles == 2);
        static const char *const views[] = {"summary", "memory", "trace", "insights"};
        for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
            tg_an_view v;
            memset(&v, 0, sizeof v);
            tg_an_filter f;
            tg_view_filter_defaults(&f);
            TG_CHECK_OK(tg_an_build(r, views[i], &f, &v));
            char *text = NULL;
            size_t len = 0;
            TG_CHECK_OK(tg_an_view_json(&v, &text, &len));
            TG_CHECK(text && len > 0);
            /* no hint meant for measured host time (host-stream prefetch) */
            TG_CHECK(!text || !strstr(text, "defaultPrefetchBufferingDepth=3"));
            tg_free(text);
            tg_an_view_free(&v);
        }
    }
    tg_analyse_close(r);
    tg_test_remove_dir(dir);
}

int main(void)
{
    TG_RUN(test_registered);
    TG_RUN(test_option_checked_against_registry);
    TG_RUN(test_compiles_and_runs);
    TG_RUN(test_refusals);
    TG_RUN(test_analysed);
    return tg_test_finish();
}
