/* tests/compile/test_cost.c - the cost model: calibration cached atomically
 * and read back for the same CPU, threads and version; a damaged cache is
 * measured again; TILEGRAPH_CALIBRATION off gives the fixed rates and an
 * unknown value is refused; op costs grow with their work; mk2 costs come
 * from the cycle model. No timing asserts: only that rates are positive.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "compile/cost.h"
#include "core/error.h"
#include "tilegraph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

/* tg_cost_model_from_config with the options read as the compiler reads them. */
static tg_status model_of(const tg_options *o, int n_devices, tg_cost_model *m)
{
    tg_config c;
    TG_TRY(tg_config_read(o, &c));
    tg_status s = tg_cost_model_from_config(&c, n_devices, m);
    tg_config_free(&c);
    return s;
}

static void cache_path(int threads, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/tilegraph/cost-rates-%dt.json", dir, threads);
}

static void test_calibration_is_cached(void)
{
    unsetenv("TILEGRAPH_CALIBRATION");
    tg_cost_rates a, b;
    TG_CHECK_OK(tg_cost_rates_get(1, &a));
    TG_CHECK(a.calibrated && !a.from_cache);
    TG_CHECK(a.flops_per_s[TG_COST_GEMM] > 0 && a.flops_per_s[TG_COST_CONV] > 0);
    TG_CHECK(a.bytes_per_s > 0 && a.op_overhead_s >= 0);
    char path[512];
    cache_path(1, path, sizeof path);
    TG_CHECK(access(path, R_OK) == 0);
    TG_CHECK_OK(tg_cost_rates_get(1, &b));
    TG_CHECK(b.from_cache);
    /* the file keeps 6 significant digits */
    TG_CHECK_NEAR(b.flops_per_s[TG_COST_GEMM] / a.flops_per_s[TG_COST_GEMM], 1.0, 1e-5);
    TG_CHECK_NEAR(b.bytes_per_s / a.bytes_per_s, 1.0, 1e-5);
    /* a damaged cache (another version, a torn edit) is measured again */
    FILE *f = fopen(path, "w");
    TG_CHECK(f != NULL);
    if (f) {
        fputs("{\"version\":\"0.0.0-other\"", f);
        fclose(f);
    }
    TG_CHECK_OK(tg_cost_rates_get(1, &b));
    TG_CHECK(b.calibrated && !b.from_cache);
    TG_CHECK_OK(tg_cost_rates_get(1, &b));
    TG_CHECK(b.from_cache);
}

static void test_switch(void)
{
    tg_cost_rates r, d;
    setenv("TILEGRAPH_CALIBRATION", "off", 1);
    TG_CHECK_OK(tg_cost_rates_get(2, &r));
    tg_cost_rates_default(2, &d);
    TG_CHECK(!r.calibrated && r.threads == 2);
    TG_CHECK(r.flops_per_s[TG_COST_GEMM] == d.flops_per_s[TG_COST_GEMM]);
    char path[512];
    cache_path(2, path, sizeof path);
    TG_CHECK(access(path, F_OK) != 0); /* off touches no file */
    setenv("TILEGRAPH_CALIBRATION", "sometimes", 1);
    TG_CHECK(tg_cost_rates_get(2, &r) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "TILEGRAPH_CALIBRATION") != NULL);
    setenv("TILEGRAPH_CALIBRATION", "off", 1);
}

static void test_costs_follow_work(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *small = tg_matmul(g, tg_input(g, "a", TG_F32, tg_shape2(16, 64)),
                                 tg_input(g, "b", TG_F32, tg_shape2(64, 64)), false, false);
    tg_tensor *big = tg_matmul(g, tg_input(g, "c", TG_F32, tg_shape2(64, 64)),
                               tg_input(g, "d", TG_F32, tg_shape2(64, 64)), false, false);
    tg_tensor *add = tg_add(g, big, big);
    tg_tensor *huge = tg_matmul(g, tg_input(g, "e", TG_F32, tg_shape2(1024, 1024)),
                                tg_input(g, "f", TG_F32, tg_shape2(1024, 1024)), false, false);
    TG_CHECK_OK(tg_graph_status(g));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_cost_model cpu, mk2;
    TG_CHECK_OK(model_of(o, 2, &cpu));
    TG_CHECK_OK(tg_options_set(o, "target", "mk2"));
    TG_CHECK_OK(model_of(o, 2, &mk2));
    TG_CHECK(!cpu.tiled && mk2.tiled);
    TG_CHECK(tg_cost_kind_of(TG_OP_CONV2D_BWD_WEIGHT) == TG_COST_CONV);
    TG_CHECK(tg_cost_kind_of(TG_OP_RELU) == TG_COST_MEMORY);
    const tg_cost_model *models[] = {&cpu, &mk2};
    for (int k = 0; k < 2; k++) {
        double s = tg_cost_node_seconds(models[k], small), b = tg_cost_node_seconds(models[k], big);
        /* on mk2 a 4x larger output spreads over more tiles (no slower, maybe
         * faster); one that covers every tile is slower */
        TG_CHECK(s > 0 && b > 0 && (k == 1 || b > s));
        TG_CHECK(tg_cost_node_seconds(models[k], huge) > 10 * s);
        TG_CHECK(tg_cost_node_seconds(models[k], add) > 0);
        TG_CHECK(tg_cost_copy_seconds(models[k], 2e6) > tg_cost_copy_seconds(models[k], 1e6));
    }
    TG_CHECK(tg_cost_node_seconds(&cpu, small->in[0]) == 0); /* a leaf runs nothing */
    TG_CHECK_NEAR(tg_cost_node_bytes(add), 3.0 * 64 * 64 * 4, 0);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_test_cost.XXXXXX");
    if (!TG_MKDTEMP(dir))
        return tg_test_finish();
    setenv("XDG_CACHE_HOME", dir, 1);
    TG_RUN(test_calibration_is_cached);
    TG_RUN(test_switch);
    TG_RUN(test_costs_follow_work);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
