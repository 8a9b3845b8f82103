/* tests/report/test_memory_table.c - the memory table `tilegraph compile`
 * and `tilegraph analyse memory` share (report/memory_table.h): its rows
 * and columns from figures given here, the device filter, a missing figure
 * kept missing; and the two commands on one program print the same table,
 * text and JSON: compile a pipelined model with a profile directory and
 * compare compile's table with `analyse memory`'s on the profile it wrote.
 * TG_TEST_LABELS: quick isa */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "report/memory_table.h"
#include "backend/cpu/dnnl_util.h"
#include "core/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

static double cell(const tg_an_table *t, int r, int c)
{
    return t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c].num;
}

static const char *label(const tg_an_table *t, int r)
{
    return t->cells[(size_t)r * (size_t)t->n_cols].text;
}

/* Device d's figures: distinct per device and row, so a value in the wrong
 * place shows. */
static void fill(tg_an_memory *m, int n)
{
    m->n_devices = n;
    for (int d = 0; d < n; d++) {
        tg_an_device_memory *dm = &m->devices[d];
        for (int r = 0; r < TG_REGION_COUNT; r++)
            dm->region[r] = 1000.0 * (d + 1) + r;
        dm->scratch_peak = 100.0 * (d + 1);
        dm->total = 1e6 * (d + 1);
        dm->offloaded = d == 1 ? NAN : 7.0; /* a profile without the row */
        dm->weight_cache = d == 2 ? NAN : 11.0 * (d + 1);
        dm->stash_depth = d + 2;
        dm->flops = 3e6 * (d + 1);
    }
}

static void test_rows_and_columns(void)
{
    tg_an_memory *m = tg_calloc(1, sizeof *m);
    TG_CHECK(m != NULL);
    if (!m)
        return;
    fill(m, 3);
    tg_an_view v = {.name = "memory"};
    tg_an_memory_tables(m, -1, &v);
    TG_CHECK(v.n_tables == 2);
    const tg_an_table *t = &v.tables[0], *w = &v.tables[1];
    TG_CHECK(!strcmp(t->title, TG_AN_MEMORY_TITLE) && !strcmp(w->title, TG_AN_MEMORY_STASH_TITLE));
    TG_CHECK(t->n_cols == 4 && !strcmp(t->cols[0], "memory") && !strcmp(t->cols[3], "device 2"));
    TG_CHECK(t->kinds[0] == TG_AN_TEXT && t->kinds[1] == TG_AN_BYTES && w->kinds[1] == TG_AN_NUM);
    /* a row per region (not "none"), then scratch, total, offloaded, weight cache */
    int regions = TG_REGION_COUNT - TG_REGION_PARAM;
    TG_CHECK(t->n_rows == regions + 4 && w->n_rows == 2);
    for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++) {
        int row = r - TG_REGION_PARAM;
        TG_CHECK(!strcmp(label(t, row), tg_region_name((tg_region)r)) &&
                 !strcmp(tg_an_memory_region_name(r), tg_region_name((tg_region)r)));
        TG_CHECK(cell(t, row, 1) == 1000.0 + r && cell(t, row, 3) == 3000.0 + r);
    }
    TG_CHECK(!strcmp(label(t, regions), "of which kernel scratch") && cell(t, regions, 2) == 200.0);
    TG_CHECK(!strcmp(label(t, regions + 1), "total") && cell(t, regions + 1, 3) == 3e6);
    TG_CHECK(!strcmp(label(t, regions + 2), "offloaded to host") &&
             cell(t, regions + 2, 1) == 7.0 && isnan(cell(t, regions + 2, 2)));
    TG_CHECK(!strcmp(label(t, regions + 3), "weight cache") && cell(t, regions + 3, 2) == 22.0 &&
             isnan(cell(t, regions + 3, 3)));
    TG_CHECK(!strcmp(label(w, 0), "stash depth (slots)") && cell(w, 0, 3) == 4.0);
    TG_CHECK(!strcmp(label(w, 1), "MFLOP per micro-batch") && cell(w, 1, 2) == 6.0);
    tg_an_view_free(&v);

    /* one device: its column only, its own figures */
    tg_an_memory_tables(m, 1, &v);
    t = &v.tables[0];
    TG_CHECK(t->n_cols == 2 && !strcmp(t->cols[1], "device 1") && cell(t, 0, 1) == 2001.0);
    TG_CHECK(cell(&v.tables[1], 0, 1) == 3.0);
    tg_an_view_free(&v);
    /* no such device: the tables are there, empty */
    tg_an_memory_tables(m, 5, &v);
    TG_CHECK(v.n_tables == 2 && v.tables[0].n_rows == 0 && v.tables[1].n_rows == 0);
    tg_an_view_free(&v);
    tg_free(m);
}

/* The lines of the block that starts with `title` in `text`, up to the
 * next blank line, into out. */
static void block(const char *text, const char *title, char *out, size_t cap)
{
    out[0] = '\0';
    const char *at = strstr(text, title);
    if (!at)
        return;
    const char *end = strstr(at, "\n\n");
    size_t n = end ? (size_t)(end - at) : strlen(at);
    snprintf(out, cap, "%.*s", (int)n, at);
}

/* The table titled `title` of a view's JSON object. */
static const tg_json *table(const tg_json *view, const char *title)
{
    const tg_json *tables = view ? tg_json_get(view, "tables") : NULL;
    for (size_t i = 0; tables && i < tables->count; i++) {
        const tg_json *t = tg_json_get(tables->items[i], "title");
        if (t && t->type == TG_JSON_STRING && !strcmp(t->string, title))
            return tables->items[i];
    }
    tg_test_fail(__FILE__, __LINE__, "no table '%s'", title);
    return NULL;
}

#define COMPILE                                                                                    \
    "compile --model mnist-pipeline --strategy pipelined --gradient-accumulation 10 --threads 1 "

/* compile's text tables and analyse's, on the profile that compile wrote */
static void test_compile_and_analyse_text(void)
{
    static char compiled[1 << 16], a[8192], b[8192];
    char args[700];
    snprintf(args, sizeof args, COMPILE "--profile-dir %s/text", tmpdir);
    TG_CHECK(tg_cli_run(tmpdir, args, 0) == 0);
    snprintf(compiled, sizeof compiled, "%s", tg_cli_output);
    snprintf(args, sizeof args, "analyse %s/text memory", tmpdir);
    TG_CHECK(tg_cli_run(tmpdir, args, 0) == 0);
    const char *titles[2] = {TG_AN_MEMORY_TITLE, TG_AN_MEMORY_STASH_TITLE};
    for (int k = 0; k < 2; k++) {
        block(compiled, titles[k], a, sizeof a);
        block(tg_cli_output, titles[k], b, sizeof b);
        TG_CHECK(strstr(a, k ? "MFLOP per micro-batch" : "pipeline stash") &&
                 strstr(a, "device 3"));
        if (strcmp(a, b))
            tg_test_fail(__FILE__, __LINE__, "compile:\n%s\nanalyse memory:\n%s", a, b);
    }
}

/* compile --json's memory_view and analyse memory --json, all devices and one */
static void test_compile_and_analyse_json(void)
{
    tg_arena *arena = tg_arena_create(1 << 20);
    char args[700];
    snprintf(args, sizeof args, COMPILE "--json --profile-dir %s/json", tmpdir);
    const tg_json *compiled = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *mine = compiled ? tg_json_get(compiled, "memory_view") : NULL;
    TG_CHECK(mine != NULL);
    snprintf(args, sizeof args, "analyse %s/json memory --json", tmpdir);
    const tg_json *theirs = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const char *titles[2] = {TG_AN_MEMORY_TITLE, TG_AN_MEMORY_STASH_TITLE};
    for (int k = 0; k < 2; k++) {
        const tg_json *a = table(mine, titles[k]), *b = table(theirs, titles[k]);
        TG_CHECK(a && b && tg_json_equal(a, b));
    }
    /* the figures are the per_device ones compile has always printed */
    const tg_json *rows = tg_json_get(table(mine, TG_AN_MEMORY_TITLE), "rows");
    const tg_json *per = compiled ? tg_json_get(compiled, "per_device") : NULL;
    TG_CHECK(rows && per && per->count == 4);
    for (size_t r = 0; rows && per && r < rows->count; r++) {
        const tg_json *row = rows->items[r];
        if (!strcmp(tg_cli_str(row, "memory"), "total"))
            for (size_t d = 0; d < per->count; d++) {
                char col[16];
                snprintf(col, sizeof col, "device %zu", d);
                TG_CHECK(tg_cli_num(row, col) == tg_cli_num(per->items[d], "total_bytes"));
            }
    }
    /* --device 2: that column alone, the same figures */
    snprintf(args, sizeof args, "analyse %s/json memory --device 2 --json", tmpdir);
    const tg_json *one =
        table(tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__), TG_AN_MEMORY_TITLE);
    const tg_json *one_rows = one ? tg_json_get(one, "rows") : NULL;
    const tg_json *cols = one ? tg_json_get(one, "columns") : NULL;
    TG_CHECK(cols && cols->count == 2 && one_rows && rows && one_rows->count == rows->count);
    for (size_t r = 0; one_rows && rows && r < one_rows->count && r < rows->count; r++)
        TG_CHECK(tg_cli_num(one_rows->items[r], "device 2") ==
                 tg_cli_num(rows->items[r], "device 2"));
    tg_arena_destroy(arena);
}

/* The figure of row `name`, column `col` of a memory table's JSON rows. */
static double row_value(const tg_json *rows, const char *name, const char *col)
{
    for (size_t r = 0; rows && r < rows->count; r++)
        if (!strcmp(tg_cli_str(rows->items[r], "memory"), name))
            return tg_cli_num(rows->items[r], col);
    tg_test_fail(__FILE__, __LINE__, "no row '%s'", name);
    return NAN;
}

/* An inference program's convolutions keep their weights in oneDNN's layout
 * beside the arena: the table's "weight cache" row says how much (a
 * training program keeps none), and analyse memory reads the same figure
 * from the profile. With Winograd off (TG_CONV_WINOGRAD=0, inherited by the
 * command) that is the convolutions' weights; by default the 3x3 stride-1
 * ones are kept once more, transformed (6x6 tiles of each 3x3 filter, 4x
 * the bytes and some padding): more, and at most 5x the weights more, where
 * oneDNN has the kernel (AVX-512). */
static void test_weight_cache_row(void)
{
    tg_arena *arena = tg_arena_create(1 << 20);
    const char *programs[3] = {"--inference", "--inference", ""};
    double direct = 0;
    /* oneDNN has Winograd kernels on AVX-512 only (TILEGRAPH_ISA=avx2: none) */
    bool wino = strncmp(tg_dnnl_isa_name(), "avx512_core", 11) == 0;
    for (int k = 0; k < 3; k++) {
        if (k == 0)
            setenv("TG_CONV_WINOGRAD", "0", 1);
        else
            unsetenv("TG_CONV_WINOGRAD");
        char args[700];
        snprintf(args, sizeof args,
                 "compile --model resnet18 --batch-size 1 --threads 1 %s --json --profile-dir "
                 "%s/cache%d",
                 programs[k], tmpdir, k);
        const tg_json *compiled = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
        const tg_json *view = compiled ? tg_json_get(compiled, "memory_view") : NULL;
        const tg_json *rows = view ? tg_json_get(table(view, TG_AN_MEMORY_TITLE), "rows") : NULL;
        double cache = row_value(rows, "weight cache", "device 0");
        double weights = row_value(rows, "weights", "device 0");
        snprintf(args, sizeof args, "analyse %s/cache%d memory --json", tmpdir, k);
        const tg_json *theirs = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
        const tg_json *their_rows =
            theirs ? tg_json_get(table(theirs, TG_AN_MEMORY_TITLE), "rows") : NULL;
        TG_CHECK(row_value(their_rows, "weight cache", "device 0") == cache);
        printf("  resnet18 %s: weights %.0f bytes, weight cache %.0f\n",
               k == 0   ? "inference, Winograd off"
               : k == 1 ? "inference"
                        : "training",
               weights, cache);
        /* the convolutions' weights (not the classifier's, nor the norms'), aligned */
        if (k == 0)
            TG_CHECK(cache > 0.5 * weights && cache <= weights + 64.0 * 100);
        else if (k == 1)
            TG_CHECK(wino ? cache > direct && cache <= direct + 5.0 * weights : cache == direct);
        else
            TG_CHECK(cache == 0);
        direct = k == 0 ? cache : direct;
    }
    tg_arena_destroy(arena);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_memory_table_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_rows_and_columns);
    TG_RUN(test_compile_and_analyse_text);
    TG_RUN(test_compile_and_analyse_json);
    TG_RUN(test_weight_cache_row);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
