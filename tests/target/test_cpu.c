/* tests/target/test_cpu.c - the cpu target through the target interface
 * (target/target.h): found by name, listed by `tilegraph devices` as the
 * first target, no tiles in its description and no device memory of its
 * own, no plan, check or cycle model, and a compile for it plans the ops'
 * kernels with no tile plan and no scratch cap unless memoryPerDevice says.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"

#include "compile/program.h"
#include "core/config.h"
#include "target/tiled.h"
#include "tilegraph/models.h"
#include "tilegraph/optim.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void test_found_by_name(void)
{
    TG_CHECK(tg_target_find("cpu") == &tg_target_cpu_ops);
    TG_CHECK(tg_target_find("mk2") == &tg_target_mk2_ops);
    TG_CHECK(tg_target_find("gpu") == NULL);
    TG_CHECK(tg_target_find(NULL) == NULL);
    TG_CHECK(tg_target_at(0) == &tg_target_cpu_ops);
    TG_CHECK(tg_target_at(tg_target_count()) == NULL && tg_target_at(-1) == NULL);
    TG_CHECK(!tg_target_tiled(&tg_target_cpu_ops) && tg_target_tiled(&tg_target_mk2_ops));
    TG_CHECK(!tg_target_tiled(NULL));
}

/* Every built-in target has the hooks the compiler always calls, a name of
 * its own, and lists itself under that name. */
static void test_every_target_is_complete(void)
{
    for (int i = 0; i < tg_target_count(); i++) {
        const tg_target_ops *t = tg_target_at(i);
        TG_CHECK(t && t->name && t->describe && t->limits && t->device_memory);
        TG_CHECK(tg_target_find(t->name) == t);
        tg_target_info info;
        TG_CHECK_OK(tg_target_info_get(i, &info));
        TG_CHECK(strcmp(info.name, t->name) == 0);
        TG_CHECK(info.max_devices == TG_MAX_DEVICES);
        TG_CHECK(info.takes_description == t->takes_description);
        /* a target plans tiles, checks them and simulates them, or none of it */
        TG_CHECK(!t->plan == !t->check && !t->plan == !t->simulate);
        TG_CHECK(info.tiled == (t->plan != NULL));
    }
    tg_target_info info;
    TG_CHECK(tg_target_info_get(tg_target_count(), &info) == TG_ERR_INVALID_ARG);
    char want[32];
    snprintf(want, sizeof want, "no target %d", tg_target_count());
    TG_CHECK(strstr(tg_error_message(), want) != NULL);
}

static void test_cpu_hooks(void)
{
    const tg_target_ops *t = &tg_target_cpu_ops;
    TG_CHECK(t->plan_kernels);
    TG_CHECK(!t->plan && !t->check && !t->simulate);
    tg_target_info info;
    TG_CHECK_OK(t->describe(&info));
    TG_CHECK(!info.tiled && info.tiles == 0 && info.memory_per_device == 0);
    TG_CHECK(info.threads_per_device >= 1 && info.clock_hz == 0);

    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "cpu"));
    tg_config c;
    TG_CHECK_OK(tg_config_read(o, &c));
    TG_CHECK(tg_target_of_config(&c) == t);
    tg_target_desc d;
    memset(&d, 0xff, sizeof d);
    TG_CHECK_OK(tg_target_from_config(&c, &d));
    TG_CHECK(strcmp(d.name, "cpu") == 0 && d.tiles == 0 && d.tile_memory == 0);
    TG_CHECK(t->device_memory(&d) == 0);
    tg_config_free(&c);
    tg_options_destroy(o);
}

static void test_compile_for_cpu(void)
{
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create_ex(tg_model_find("mnist-pipeline"), 4, &opt, NULL, &mg));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "cpu"));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->tile_plan == NULL && p->plan_kernels);
    TG_CHECK(p && p->scratch_cap == SIZE_MAX); /* no memoryPerDevice: no cap */
    tg_program_destroy(p);
    /* memoryPerDevice is the only capacity of a cpu device */
    TG_CHECK_OK(tg_options_set_int(o, "memoryPerDevice", 1 << 30));
    p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->scratch_cap > 0 && p->scratch_cap < ((size_t)1 << 30));
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    TG_RUN(test_found_by_name);
    TG_RUN(test_every_target_is_complete);
    TG_RUN(test_cpu_hooks);
    TG_RUN(test_compile_for_cpu);
    return tg_test_finish();
}
