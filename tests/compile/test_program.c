/* tests/compile/test_program.c - the threads a program is compiled for:
 * the user's count as given, the default rule's otherwise (core/cpus.h),
 * and the warning when devices x replicas x threads exceed the cores this
 * process may use (issue 12 item 4, issue 14 item 6). */
#include "tg_test.h"

#include "compile/program.h"
#include "core/cpus.h"
#include "tilegraph/models.h"

#include <string.h>

static tg_program *compile_with(const tg_graph *g, const char *const *kv)
{
    tg_options *o = tg_options_create();
    for (int i = 0; kv[i]; i += 2)
        TG_CHECK_OK(tg_options_set(o, kv[i], kv[i + 1]));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    return p;
}

static void test_threads_given_and_default(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.9f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 8, &opt, &mg));
    int cores = tg_cpu_count();

    const char *one[] = {"threadsPerDevice", "1", NULL};
    tg_program *p = compile_with(mg.graph, one);
    TG_CHECK(p && p->n_threads == 1 && !p->threads_auto && p->threads_warning[0] == '\0');
    TG_CHECK(p && p->cpu.allowed == cores);
    tg_program_destroy(p);

    const char *dflt[] = {"threadsPerDevice", "0", NULL};
    p = compile_with(mg.graph, dflt);
    TG_CHECK(p && p->threads_auto && p->cpu.measured);
    TG_CHECK(p && p->n_threads == tg_threads_default(p->cpu.free, 1));
    TG_CHECK(p && p->n_threads <= cores && p->threads_warning[0] == '\0');
    tg_program_destroy(p);

    /* more threads than cores: the warning names the numbers and the fix */
    char many[16], want[64], fits[32];
    snprintf(many, sizeof many, "%d", cores + 1);
    const char *over[] = {"threadsPerDevice", many, NULL};
    p = compile_with(mg.graph, over);
    snprintf(want, sizeof want, "= %d threads, but this process may use %d core", cores + 1, cores);
    snprintf(fits, sizeof fits, "--threads %d", cores);
    TG_CHECK(p && p->n_threads == cores + 1);
    TG_CHECK(p && strstr(p->threads_warning, want) && strstr(p->threads_warning, fits));
    tg_program_destroy(p);

    /* two devices of two threads each on fewer than four cores */
    const char *pipe[] = {"threadsPerDevice",
                          "2",
                          "executionStrategy",
                          "pipelined",
                          "stages",
                          "B1,B2|B3,B4",
                          "Training.gradientAccumulation",
                          "4",
                          NULL};
    p = compile_with(mg.graph, pipe);
    TG_CHECK(p && p->n_devices == 2);
    TG_CHECK(p && (p->threads_warning[0] != '\0') == (cores < 4));
    if (p && cores < 4)
        TG_CHECK(strstr(p->threads_warning, "2 devices x 1 replica x 2 threads = 4 threads"));
    tg_program_destroy(p);

    /* the default never oversubscribes when there are cores enough */
    const char *pipe_default[] = {"executionStrategy",
                                  "pipelined",
                                  "stages",
                                  "B1,B2|B3,B4",
                                  "Training.gradientAccumulation",
                                  "4",
                                  NULL};
    p = compile_with(mg.graph, pipe_default);
    TG_CHECK(p && p->n_threads == tg_threads_default(p->cpu.free, 2));
    TG_CHECK(p && (p->threads_warning[0] != '\0') == (cores < 2));
    tg_program_destroy(p);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    TG_RUN(test_threads_given_and_default);
    return tg_test_finish();
}
