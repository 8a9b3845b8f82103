/* tests/profile/test_profile.c - profiles agree with the plan and the
 * schedule, profiling changes no result, and the reader rejects files that
 * are not good profiles (and survives damaged ones).
 * TG_TEST_LABELS: threads quick */
#include "tg_test.h"
#include "tg_test_train.h"

#include "core/rng.h"
#include "profile/reader.h"
#include "runtime/session_internal.h"
#include "tilegraph/models.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static const char *const pipelined[] = {"executionStrategy",
                                        "pipelined",
                                        "Training.gradientAccumulation",
                                        "4",
                                        "deviceIterations",
                                        "2",
                                        NULL};

static void train(tg_test_model *c, bool profile, int runs)
{
    const char *kv[16];
    int n = 0;
    for (; pipelined[n]; n++)
        kv[n] = pipelined[n];
    if (profile) {
        kv[n++] = "autoReport.all";
        kv[n++] = "true";
        kv[n++] = "autoReport.directory";
        kv[n++] = dir;
    }
    kv[n] = NULL;
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_train(c, 8, &opt, kv, runs, 5, NULL);
}

static int64_t query_int(tg_profile_reader *r, const char *sql)
{
    int64_t v = -1;
    TG_CHECK_OK(tg_profile_reader_int(r, sql, -1, &v));
    return v;
}

static void check_against_plan(const tg_program *p, tg_profile_reader *r)
{
    char sql[512];
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        /* memory per device by category */
        for (int reg = TG_REGION_PARAM; reg < TG_REGION_COUNT; reg++) {
            snprintf(sql, sizeof sql,
                     "SELECT bytes FROM memory WHERE device = %d AND category = '%s'", d,
                     tg_region_name((tg_region)reg));
            TG_CHECK(query_int(r, sql) == (int64_t)dp->region_bytes[reg]);
        }
        /* the peak-liveness step: its live tensors and scratch add up to its figure */
        snprintf(
            sql, sizeof sql,
            "SELECT step FROM liveness WHERE device = %d ORDER BY live_bytes DESC, step LIMIT 1",
            d);
        int64_t peak = query_int(r, sql);
        snprintf(sql, sizeof sql,
                 "SELECT live_bytes FROM liveness WHERE device = %d AND step = %lld", d,
                 (long long)peak);
        int64_t live = query_int(r, sql);
        snprintf(
            sql, sizeof sql,
            "SELECT COALESCE(SUM(bytes), 0) FROM tensors WHERE device = %d AND always_live = 0 "
            "AND first_step <= %lld AND last_step >= %lld",
            d, (long long)peak, (long long)peak);
        int64_t tensors = query_int(r, sql);
        int64_t scratch = 0, k = 0;
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int i = 0; i < dp->n_steps[ph]; i++, k++)
                if (k == peak)
                    scratch = (int64_t)dp->steps[ph][i].scratch_bytes;
        TG_CHECK(live == tensors + scratch);
        TG_CHECK(live <= (int64_t)dp->region_bytes[TG_REGION_ACTIVATION]);
        /* the program tree: one execute step per planned step */
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM steps WHERE device = %d AND kind = 'execute'", d);
        TG_CHECK(query_int(r, sql) == dp->n_steps[0] + dp->n_steps[1] + dp->n_steps[2]);
        /* the trace follows the compiled schedule, micro-batch by micro-batch */
        sqlite3_stmt *st = NULL;
        snprintf(
            sql, sizeof sql,
            "SELECT phase, micro_batch FROM trace WHERE run = 0 AND replica = 0 AND device = %d "
            "AND iteration = 0 AND kind = 'execute' AND phase != 'update' ORDER BY start_ns",
            d);
        sqlite3_prepare_v2(tg_profile_reader_db(r), sql, -1, &st, NULL);
        int pos = 0;
        while (st && sqlite3_step(st) == SQLITE_ROW) {
            const tg_pipe_op *op = &p->schedule.ops[d][pos];
            bool backward = strcmp((const char *)sqlite3_column_text(st, 0), "backward") == 0;
            TG_CHECK(pos < p->schedule.n_ops[d]);
            TG_CHECK(backward == (op->pass != TG_PASS_FORWARD) &&
                     sqlite3_column_int(st, 1) == op->micro_batch);
            pos++;
        }
        sqlite3_finalize(st);
        TG_CHECK(pos == p->schedule.n_ops[d]);
    }
    /* only the first executionProfileProgramRunCount (2) runs are recorded */
    TG_CHECK(query_int(r, "SELECT MAX(run) FROM trace") == 1);
    TG_CHECK(strcmp(tg_profile_reader_meta(r, "program"), "training") == 0);
}

static void test_profile_matches_plan_and_schedule(void)
{
    tg_test_model c;
    train(&c, true, 3);
    char path[128];
    snprintf(path, sizeof path, "%s/training/profile.sqlite", dir);
    const tg_program *p = c.s ? tg_session_program(c.s) : NULL;
    tg_session_destroy(c.s); /* flushes per-op totals; the program stays for the check */
    c.s = NULL;
    tg_profile_reader *r = NULL;
    TG_CHECK_OK(tg_profile_reader_open(path, &r));
    (void)p;
    if (r) {
        /* rebuild the plan to compare against (the session's program is gone) */
        tg_options *o = tg_options_create();
        tg_options_set(o, "threadsPerDevice", "1");
        for (int i = 0; pipelined[i]; i += 2)
            tg_options_set(o, pipelined[i], pipelined[i + 1]);
        tg_program *plan = NULL;
        TG_CHECK_OK(tg_program_compile(c.mg.graph, o, &plan));
        if (plan)
            check_against_plan(plan, r);
        TG_CHECK(query_int(r, "SELECT SUM(calls) FROM ops") > 0);
        tg_program_destroy(plan);
        tg_options_destroy(o);
    }
    tg_profile_reader_close(r);
    tg_model_graph_destroy(&c.mg);
}

static void test_profiling_changes_no_result(void)
{
    tg_test_model on, off;
    train(&on, true, 3);
    train(&off, false, 3);
    TG_CHECK(tg_test_same_weights(&on, &off, true));
    tg_test_model_destroy(&on);
    tg_test_model_destroy(&off);
}

static void copy_file(const char *from, const char *to, long keep)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[8192];
    size_t n;
    long done = 0;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (keep >= 0 && done + (long)n > keep)
            n = (size_t)(keep - done);
        fwrite(buf, 1, n, out);
        done += (long)n;
        if (keep >= 0 && done >= keep)
            break;
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

static void expect_rejected(const char *path, const char *text)
{
    tg_profile_reader *r = NULL;
    tg_status s = tg_profile_reader_open(path, &r);
    if (s == TG_OK || !strstr(tg_error_message(), text) || !strstr(tg_error_message(), path))
        tg_test_fail(__FILE__, __LINE__, "%s: expected an error with '%s', got %s: %s", path, text,
                     tg_status_name(s), tg_error_message());
    tg_profile_reader_close(r);
}

static void test_reader_rejects_bad_files(void)
{
    char good[128], bad[128];
    snprintf(good, sizeof good, "%s/training/profile.sqlite", dir);
    snprintf(bad, sizeof bad, "%s/missing.sqlite", dir);
    expect_rejected(bad, "cannot read");
    snprintf(bad, sizeof bad, "%s/text.sqlite", dir);
    FILE *f = fopen(bad, "w");
    if (f) {
        fputs("this is not a database, just text\n", f);
        fclose(f);
    }
    expect_rejected(bad, "not a tilegraph profile");
    snprintf(bad, sizeof bad, "%s/half.sqlite", dir);
    copy_file(good, bad, 8192);
    expect_rejected(bad, "damaged");
    /* a newer schema */
    snprintf(bad, sizeof bad, "%s/newer.sqlite", dir);
    copy_file(good, bad, -1);
    sqlite3 *db = NULL;
    sqlite3_open(bad, &db);
    sqlite3_exec(db, "UPDATE meta SET value = '99' WHERE key = 'schema_version'", NULL, NULL, NULL);
    sqlite3_close(db);
    expect_rejected(bad, "newer tilegraph");
    /* a table missing */
    snprintf(bad, sizeof bad, "%s/notable.sqlite", dir);
    copy_file(good, bad, -1);
    sqlite3_open(bad, &db);
    sqlite3_exec(db, "DROP TABLE liveness", NULL, NULL, NULL);
    sqlite3_close(db);
    expect_rejected(bad, "table 'liveness' is missing");
}

/* Damaged copies (bytes flipped anywhere) are rejected or read, never a crash. */
static void test_reader_survives_damage(void)
{
    char good[128], bad[128];
    snprintf(good, sizeof good, "%s/inference/profile.sqlite", dir);
    if (access(good, R_OK) != 0)
        snprintf(good, sizeof good, "%s/training/profile.sqlite", dir);
    snprintf(bad, sizeof bad, "%s/damaged.sqlite", dir);
    FILE *f = fopen(good, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    tg_rng rng;
    tg_rng_seed(&rng, 11);
    int rejected = 0;
    for (int trial = 0; trial < 60; trial++) {
        copy_file(good, bad, -1);
        FILE *w = fopen(bad, "r+b");
        for (int k = 0; w && k < 8; k++) {
            fseek(w, (long)tg_rng_below(&rng, (uint64_t)size), SEEK_SET);
            fputc((int)tg_rng_below(&rng, 256), w);
        }
        if (w)
            fclose(w);
        tg_profile_reader *r = NULL;
        if (tg_profile_reader_open(bad, &r) == TG_OK) {
            int64_t v;
            tg_profile_reader_int(r, "SELECT COUNT(*) FROM trace", 0, &v);
            tg_profile_reader_close(r);
        } else {
            rejected++;
        }
    }
    TG_CHECK(rejected > 0);
}

static void test_engine_options_from_the_environment(void)
{
    setenv("TILEGRAPH_ENGINE_OPTIONS", "{\"autoReport.al\": \"true\"}", 1);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 2, NULL, &mg));
    tg_session *s = NULL;
    TG_CHECK(tg_session_create(mg.graph, NULL, &s) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "TILEGRAPH_ENGINE_OPTIONS") != NULL);
    TG_CHECK(strstr(tg_error_message(), "unknown option 'autoReport.al'") != NULL);
    TG_CHECK(strstr(tg_error_message(), "autoReport.all") != NULL);
    unsetenv("TILEGRAPH_ENGINE_OPTIONS");
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_profile_XXXXXX");
    if (!TG_MKDTEMP(dir))
        return 1;
    TG_RUN(test_profile_matches_plan_and_schedule);
    TG_RUN(test_profiling_changes_no_result);
    TG_RUN(test_reader_rejects_bad_files);
    TG_RUN(test_reader_survives_damage);
    TG_RUN(test_engine_options_from_the_environment);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
