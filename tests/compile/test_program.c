/* tests/compile/test_program.c - the threads a program is compiled for:
 * the user's count as given, the default rule's otherwise (core/cpus.h),
 * and the warning when devices x replicas x threads exceed the cores this
 * process may use (issue 12 item 4, issue 14 item 6). Compiling with each
 * of its allocations failed in turn returns TG_ERR_NOMEM with a message and
 * leaks nothing (issue 16 item 8).
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/cpus.h"
#include "tilegraph/models.h"
#include "tilegraph/optim.h"

#include <string.h>

static tg_program *compile_with(const tg_graph *g, const char *const *kv)
{
    tg_options *o = tg_options_create();
    tg_test_options_set(o, kv);
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
    TG_CHECK(p && p->n_threads == tg_threads_default(p->cpu.allowed, 1)); /* not the load */
    TG_CHECK(p && p->n_threads <= cores && p->threads_warning[0] == '\0');
    tg_program_destroy(p);

    /* more threads than cores: the warning names the numbers and the fix */
    char many[16], want[64], fits[64];
    snprintf(many, sizeof many, "%d", cores + 1);
    const char *over[] = {"threadsPerDevice", many, NULL};
    p = compile_with(mg.graph, over);
    snprintf(want, sizeof want, "= %d threads, but this process may use %d core", cores + 1, cores);
    snprintf(fits, sizeof fits, "--threads %d", cores);
    TG_CHECK(p && p->n_threads == cores + 1);
    TG_CHECK(p && strstr(p->threads_warning, want) && strstr(p->threads_warning, fits));
    /* named for Python too, where there are no flags */
    snprintf(fits, sizeof fits, "opts.set('threadsPerDevice', %d) in Python", cores);
    TG_CHECK(p && strstr(p->threads_warning, fits));
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

    /* four devices of one thread each on fewer than four cores: fewer
     * threads cannot help, so the warning does not offer them */
    const char *four[] = {"threadsPerDevice",
                          "1",
                          "executionStrategy",
                          "pipelined",
                          "stages",
                          "B1|B2|B3|B4",
                          "Training.gradientAccumulation",
                          "4",
                          NULL};
    p = compile_with(mg.graph, four);
    TG_CHECK(p && p->n_devices == 4);
    TG_CHECK(p && (p->threads_warning[0] != '\0') == (cores < 4));
    if (p && cores < 4) {
        TG_CHECK(strstr(p->threads_warning, "every device already has 1 thread: only fewer "
                                            "devices or replicas can help"));
        TG_CHECK(!strstr(p->threads_warning, "--threads") &&
                 !strstr(p->threads_warning, "threadsPerDevice"));
    }
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

/* A two-block MLP trained with momentum SGD: blocks to split into stages,
 * optimizer state, gradients to accumulate, activations to recompute. */
static tg_graph *two_block_mlp(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 6));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_block_begin(g, "B1");
    tg_scope_push(g, "layer1");
    tg_tensor *w1 = tg_param(g, "w1", tg_shape2(8, 6), (tg_init){TG_INIT_FAN_IN_UNIFORM, 6, 0});
    tg_tensor *h = tg_relu(g, tg_linear(g, x, w1, NULL));
    tg_scope_pop(g);
    tg_block_begin(g, "B2");
    tg_scope_push(g, "layer2");
    tg_tensor *w2 = tg_param(g, "w2", tg_shape2(3, 8), (tg_init){TG_INIT_FAN_IN_UNIFORM, 8, 0});
    tg_tensor *loss = tg_cross_entropy(g, tg_linear(g, h, w2, NULL), labels);
    tg_scope_pop(g);
    tg_block_end(g);
    tg_tensor_mark_output(loss);
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    TG_CHECK_OK(tg_graph_status(g));
    return g;
}

/* Fail allocation 1, 2, .. N of a compile in turn, N being what a clean
 * compile asks for: each must return TG_ERR_NOMEM with a message saying
 * so, no program, and every byte freed. */
static void compile_fails_cleanly(const tg_graph *g, const char *const *kv)
{
    tg_options *o = tg_options_create();
    tg_test_options_set(o, kv);
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p)); /* warms what is made once per process */
    tg_program_destroy(p);
    int64_t live = tg_alloc_live_bytes(), before = tg_alloc_count();
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    int64_t n_allocs = tg_alloc_count() - before;
    tg_program_destroy(p);
    printf("  compile: %lld allocations, each failed in turn\n", (long long)n_allocs);
    TG_CHECK(n_allocs > 20); /* schedule, placement, lists, plans, memory plan */
    for (int64_t n = 1; n <= n_allocs; n++) {
        p = NULL;
        tg_alloc_fail_after(n);
        tg_status s = tg_program_compile(g, o, &p);
        tg_alloc_fail_after(0);
        if (s != TG_ERR_NOMEM || !strstr(tg_error_message(), "out of memory") || p)
            tg_test_fail(__FILE__, __LINE__, "allocation %lld of %lld failed: %s, \"%s\"",
                         (long long)n, (long long)n_allocs, tg_status_name(s), tg_error_message());
        tg_program_destroy(p);
        if (tg_alloc_live_bytes() != live)
            tg_test_fail(__FILE__, __LINE__, "allocation %lld failed: %lld bytes leaked",
                         (long long)n, (long long)(tg_alloc_live_bytes() - live));
    }
    tg_options_destroy(o);
}

static void test_compile_allocation_failures(void)
{
    tg_graph *g = two_block_mlp();
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1", NULL});
    /* two stages: transfers, stash slots, accumulators, recomputation */
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1", "executionStrategy",
                                              "pipelined", "Training.gradientAccumulation", "4",
                                              "recomputation", "pipeline", NULL});
    /* the stage search over the cost model, and the tile plan of mk2 */
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1", "split", "auto", "devices",
                                              "2", "Training.gradientAccumulation", "2", NULL});
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1", "stages", "auto", "devices",
                                              "2", "Training.gradientAccumulation", "2", NULL});
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1", "target", "mk2", NULL});
    /* half storage with f32 staging, optimizer state offloaded, sharded over replicas */
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1", "precision", "16.16",
                                              "lossScaling", "dynamic", NULL});
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1",
                                              "TensorLocations.optimizer.onChip", "0", NULL});
    compile_fails_cleanly(g, (const char *[]){"threadsPerDevice", "1", "replicationFactor", "2",
                                              "TensorLocations.optimizer.replicatedTensorSharding",
                                              "1", NULL});
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_threads_given_and_default);
    TG_RUN(test_compile_allocation_failures);
    return tg_test_finish();
}
