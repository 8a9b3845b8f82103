/* tests/compile/test_compiled.c - the compiled program as a public handle
 * (tilegraph/program.h, compile/compiled.c), used as a client would: the
 * figures agree with the program inside and with each other; a plan over
 * memoryPerDevice is TG_ERR_CAPACITY naming the device and a failed
 * allocation TG_ERR_NOMEM, never the other way round; the executable saved
 * loads back through the cache; bad arguments are errors that name them.
 * TG_TEST_LABELS: quick isa */
#include "tg_test.h"

#include "compile/compiled.h"
#include "core/alloc.h"
#include "tilegraph/models.h"
#include "tilegraph/program.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static tg_model_graph mnist(int batch)
{
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.0f);
    tg_model_graph mg = {0};
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), batch, &opt, &mg));
    return mg;
}

static tg_options *options(const char *const *kv)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "threadsPerDevice", "1"));
    tg_test_options_set(o, kv);
    return o;
}

/* Facts and devices against the program inside, and against each other. */
static void test_facts_are_the_plan(void)
{
    tg_model_graph mg = mnist(8);
    const char *kv[] = {"devices",
                        "2",
                        "executionStrategy",
                        "pipelined",
                        "stages",
                        "auto",
                        "Training.gradientAccumulation",
                        "4",
                        NULL};
    tg_options *o = options(kv);
    tg_compiled *c = NULL;
    TG_CHECK_OK(tg_compiled_create(mg.graph, o, &c));
    const tg_program *p = tg_compiled_program(c);
    tg_compiled_facts f;
    tg_compiled_facts_get(c, &f);
    TG_CHECK(f.training && f.n_devices == 2 && f.replicas == 1 && f.micro_batches == 4);
    TG_CHECK(f.threads_per_device == 1 && !f.threads_default && f.threads_warning[0] == '\0');
    TG_CHECK(f.auto_stages && strchr(f.stages, '|') != NULL); /* "B1|B2,B3,B4" */
    TG_CHECK(!strcmp(f.stages, p->auto_stages) && f.cache == TG_COMPILED_UNCACHED);
    TG_CHECK(f.flops > 0 && f.report_dir && f.report_dir[0]);
    int n_regions = tg_compiled_region_count();
    TG_CHECK(n_regions >= 8 && n_regions <= TG_COMPILED_MAX_REGIONS);
    TG_CHECK(!strcmp(tg_compiled_region_name(0), "weights"));
    TG_CHECK(!strcmp(tg_compiled_region_name(n_regions - 1), "activations"));
    TG_CHECK(!strcmp(tg_compiled_region_name(n_regions), "?") &&
             !strcmp(tg_compiled_region_name(-1), "?"));
    int64_t arenas = 0;
    for (int d = 0; d < f.n_devices; d++) {
        tg_compiled_device dev;
        TG_CHECK_OK(tg_compiled_device_get(c, d, &dev));
        int64_t regions = 0;
        for (int r = 0; r < n_regions; r++)
            regions += dev.region_bytes[r];
        /* the regions are the arena, each one aligned part of it */
        TG_CHECK(regions > 0 && regions <= dev.arena_bytes);
        TG_CHECK(dev.arena_bytes == (int64_t)p->devices[d].arena_bytes);
        TG_CHECK(dev.scratch_peak_bytes <= dev.region_bytes[n_regions - 1]);
        TG_CHECK(dev.stash_depth >= 1 && dev.flops > 0 && dev.offloaded_bytes == 0);
        arenas += dev.arena_bytes;
    }
    TG_CHECK(arenas == f.arena_bytes);
    tg_compiled_device dev;
    TG_CHECK(tg_compiled_device_get(c, 2, &dev) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "no device 2") != NULL);
    tg_compiled_destroy(c);
    tg_compiled_destroy(NULL);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* Over memoryPerDevice: TG_ERR_CAPACITY with the planner's message, no
 * handle; debug.allowOutOfMemory compiles the same plan. */
static void test_over_capacity(void)
{
    tg_model_graph mg = mnist(40);
    const char *kv[] = {"memoryPerDevice", "2000000", NULL};
    tg_options *o = options(kv);
    tg_compiled *c = (tg_compiled *)&mg; /* must be cleared */
    TG_CHECK(tg_compiled_create(mg.graph, o, &c) == TG_ERR_CAPACITY && c == NULL);
    TG_CHECK(strstr(tg_error_message(), "device 0 needs") != NULL);
    TG_CHECK(strstr(tg_error_message(), "debug.allowOutOfMemory") != NULL);
    TG_CHECK(!strcmp(tg_status_name(TG_ERR_CAPACITY), "TG_ERR_CAPACITY"));
    TG_CHECK_OK(tg_options_set(o, "debug.allowOutOfMemory", "true"));
    TG_CHECK_OK(tg_compiled_create(mg.graph, o, &c));
    tg_compiled_device dev;
    TG_CHECK_OK(tg_compiled_device_get(c, 0, &dev));
    TG_CHECK(dev.arena_bytes > 2000000);
    tg_compiled_destroy(c);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* Every allocation of a compile failing in turn is TG_ERR_NOMEM (the
 * process), never TG_ERR_CAPACITY (the plan), with nothing leaked: the
 * plan would fit, so a capacity error here would be a misfiled malloc. */
static void test_allocation_failures_are_nomem(void)
{
    tg_model_graph mg = mnist(4);
    const char *kv[] = {"memoryPerDevice", "100000000", NULL};
    tg_options *o = options(kv);
    tg_compiled *c = NULL;
    TG_CHECK_OK(tg_compiled_create(mg.graph, o, &c)); /* warms what is made once */
    tg_compiled_destroy(c);
    int64_t live = tg_alloc_live_bytes(), before = tg_alloc_count();
    TG_CHECK_OK(tg_compiled_create(mg.graph, o, &c));
    int64_t n_allocs = tg_alloc_count() - before;
    tg_compiled_destroy(c);
    TG_CHECK(n_allocs > 20);
    for (int64_t n = 1; n <= n_allocs; n++) {
        c = NULL;
        tg_alloc_fail_after(n);
        tg_status s = tg_compiled_create(mg.graph, o, &c);
        tg_alloc_fail_after(0);
        if (s != TG_ERR_NOMEM || c)
            tg_test_fail(__FILE__, __LINE__, "allocation %lld of %lld failed: %s, \"%s\"",
                         (long long)n, (long long)n_allocs, tg_status_name(s), tg_error_message());
        tg_compiled_destroy(c);
        if (tg_alloc_live_bytes() != live)
            tg_test_fail(__FILE__, __LINE__, "allocation %lld failed: %lld bytes leaked",
                         (long long)n, (long long)(tg_alloc_live_bytes() - live));
    }
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* tg_compiled_save writes what executableFile loads: the cached create then
 * compiles nothing, and the figures are the same. */
static void test_save_and_load(void)
{
    char dir[] = "/tmp/tg_compiled_XXXXXX", path[64];
    TG_CHECK(TG_MKDTEMP(dir) != NULL);
    snprintf(path, sizeof path, "%s/mnist.tgx", dir);
    tg_model_graph mg = mnist(8);
    tg_options *o = options(NULL);
    tg_compiled *c = NULL, *loaded = NULL;
    TG_CHECK_OK(tg_compiled_create_cached(mg.graph, o, &c)); /* no cache named: a compile */
    tg_compiled_facts f, g;
    tg_compiled_facts_get(c, &f);
    TG_CHECK(f.cache == TG_COMPILED_UNCACHED);
    TG_CHECK(tg_compiled_save(c, NULL) == TG_ERR_INVALID_ARG);
    TG_CHECK_OK(tg_compiled_save(c, path));
    TG_CHECK_OK(tg_options_set(o, "executableFile", path));
    TG_CHECK_OK(tg_compiled_create_cached(mg.graph, o, &loaded));
    tg_compiled_facts_get(loaded, &g);
    TG_CHECK(g.cache == TG_COMPILED_LOADED);
    TG_CHECK(g.arena_bytes == f.arena_bytes && g.n_devices == f.n_devices && g.flops == f.flops);
    tg_compiled_destroy(loaded);
    tg_compiled_destroy(c);
    TG_CHECK(tg_compiled_create(mg.graph, o, NULL) == TG_ERR_INVALID_ARG);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    tg_test_remove_dir(dir);
}

int main(void)
{
    TG_RUN(test_facts_are_the_plan);
    TG_RUN(test_over_capacity);
    TG_RUN(test_allocation_failures_are_nomem);
    TG_RUN(test_save_and_load);
    return tg_test_finish();
}
