/* tests/profile/test_profile_histograms.c - weights and gradients per tensor
 * at the recorded runs (issue 15, "histograms of weights and gradients per
 * layer"): one weight row per parameter and recorded run whose min, max and
 * mean are those of the weights the session holds after that run, and whose
 * bins count every value; one gradient row per parameter whose gradient is
 * accumulated, equal to its accumulator; weights only without accumulation;
 * and the histograms view lists the profile's rows. */
#include "tg_test.h"
#include "tg_test_train.h"

#include "analyse/analyse.h"
#include "core/convert.h"
#include "profile/reader.h"
#include "runtime/session_internal.h"
#include "runtime/session_state.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PARAMS = 64 };

typedef struct {
    char name[128], kind[16];
    double min, max, mean;
    int64_t n;
} stats;

static void stats_of(const float *x, int64_t n, const char *name, const char *kind, stats *out)
{
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->kind, sizeof out->kind, "%s", kind);
    out->min = INFINITY;
    out->max = -INFINITY;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        out->min = x[i] < out->min ? x[i] : out->min;
        out->max = x[i] > out->max ? x[i] : out->max;
        sum += x[i];
    }
    out->mean = sum / (double)n;
    out->n = n;
}

/* What the session holds now: each parameter's weights and its accumulator. */
static int expected(const tg_session *s, stats *out)
{
    const tg_program *p = tg_session_program(s);
    const tg_graph *g = p->graph;
    int n = 0;
    for (int i = 0; i < g->n_nodes && n < MAX_PARAMS - 1; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in > 0 || !t->grad || p->home[i] < 0)
            continue;
        int64_t k = tg_numel(t);
        float *x = malloc((size_t)k * sizeof *x);
        if (!x || tg_session_value_out(s, t, x) != TG_OK) {
            free(x);
            continue;
        }
        stats_of(x, k, t->name, "weight", &out[n++]);
        const tg_device_program *dp = &p->devices[p->device_of[i]];
        for (int a = 0; a < dp->n_accumulators; a++)
            if (dp->accumulators[a].param == i) {
                int b = dp->accumulators[a].acc_buffer;
                tg_convert(tg_engine_slot_ptr(s, 0, b, 0), p->buffers[b].dtype, x, TG_F32,
                           (size_t)k);
                stats_of(x, k, t->name, "gradient", &out[n++]);
            }
        free(x);
    }
    return n;
}

/* Train `runs` host steps (all recorded) and check the last run's rows. */
static void check(const char *accumulation, int want_gradients)
{
    char dir[] = "/tmp/tg_profile_hist_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_test_model c;
    tg_test_train(&c, 8, &opt,
                  (const char *[]){"Training.gradientAccumulation", accumulation, "autoReport.all",
                                   "true", "autoReport.directory", dir, NULL},
                  2, 5, NULL);
    static stats want[MAX_PARAMS];
    int n = c.s ? expected(c.s, want) : 0;
    tg_test_model_destroy(&c);
    int gradients = 0;
    for (int i = 0; i < n; i++)
        gradients += !strcmp(want[i].kind, "gradient");
    TG_CHECK(n > 0 && gradients == want_gradients * (n - gradients));
    char path[128];
    snprintf(path, sizeof path, "%s/training/profile.sqlite", dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    TG_CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    TG_CHECK(sqlite3_prepare_v2(db,
                                "SELECT min, max, mean, elements, non_finite, bins FROM "
                                "histograms WHERE run = 1 AND tensor = ? AND kind = ?",
                                -1, &st, NULL) == SQLITE_OK);
    int matched = 0;
    for (int i = 0; st && i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, want[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, want[i].kind, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_ROW) {
            tg_test_fail(__FILE__, __LINE__, "no %s row for %s", want[i].kind, want[i].name);
            continue;
        }
        /* the bins count every value once */
        const char *bins = (const char *)sqlite3_column_text(st, 5);
        int64_t counted = 0;
        for (const char *q = bins ? bins + 1 : NULL; q && *q;
             q = strchr(q, ',') ? strchr(q, ',') + 1 : NULL)
            counted += atoll(q);
        bool ok =
            sqlite3_column_double(st, 0) == want[i].min &&
            sqlite3_column_double(st, 1) == want[i].max &&
            fabs(sqlite3_column_double(st, 2) - want[i].mean) <= 1e-9 + 1e-6 * fabs(want[i].mean) &&
            sqlite3_column_int64(st, 3) == want[i].n && sqlite3_column_int64(st, 4) == 0 &&
            counted == want[i].n;
        if (ok)
            matched++;
        else
            tg_test_fail(__FILE__, __LINE__,
                         "%s %s: profile min %g max %g mean %g n %lld bins %lld; "
                         "session %g %g %g %lld",
                         want[i].name, want[i].kind, sqlite3_column_double(st, 0),
                         sqlite3_column_double(st, 1), sqlite3_column_double(st, 2),
                         (long long)sqlite3_column_int64(st, 3), (long long)counted, want[i].min,
                         want[i].max, want[i].mean, (long long)want[i].n);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    TG_CHECK(matched == n);
    /* the view: a row per histogram of both recorded runs */
    tg_profile_reader *r = NULL;
    TG_CHECK_OK(tg_profile_reader_open(path, &r));
    tg_an_filter f;
    tg_view_filter_defaults(&f);
    tg_an_view v;
    memset(&v, 0, sizeof v);
    if (r && tg_an_build(r, "histograms", &f, &v) == TG_OK) {
        TG_CHECK(v.n_tables == 1 && v.tables[0].n_rows == 2 * n);
        bool weights_only = false;
        for (int i = 0; i < v.n_notes; i++)
            weights_only |= strstr(v.notes[i], "weights only") != NULL;
        TG_CHECK(weights_only == (want_gradients == 0));
    } else {
        TG_CHECK(!"histograms view failed");
    }
    tg_an_view_free(&v);
    tg_profile_reader_close(r);
    tg_test_remove_dir(dir);
}

static void test_histograms_accumulated(void)
{
    check("4", 1);
}

static void test_histograms_weights_only(void)
{
    check("1", 0);
}

int main(void)
{
    TG_RUN(test_histograms_accumulated);
    TG_RUN(test_histograms_weights_only);
    return tg_test_finish();
}
