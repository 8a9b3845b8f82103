/* tests/trace/test_trace.c - host trace instrumentation and its Chrome
 * trace-event export: nesting and unmatched ends, channels on and off,
 * series and heatmap aggregation, configuration errors, recording from many
 * threads while another reads and exports, and an exported file parsed back
 * and checked event by event.
 *
 * TG_TEST_LABELS: threads quick
 */
#include "core/alloc.h"
#include "core/arena.h"
#include "core/json.h"
#include "tg_test.h"
#include "tilegraph/trace.h"
#include "trace/trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_DIR TG_BINARY_DIR "/trace_test_out"

/* Stop, forget every event, then apply `json`. */
static void reset(const char *json)
{
    tg_trace_disable();
    tg_trace_clear();
    TG_CHECK_OK(tg_trace_configure(json, "test"));
}

/* ---- collecting what was recorded ---------------------------------------------- */

#define MAX_EVENTS 40000

typedef struct collected {
    tg_trace_event ev[MAX_EVENTS];
    char names[MAX_EVENTS][32];
    int n;
    int threads;
    char thread_names[16][64];
    uint64_t thread_events[16];
} collected;

static int collect_thread(const tg_trace_thread_info *t, void *ctx)
{
    collected *c = ctx;
    if (c->threads < 16) {
        snprintf(c->thread_names[c->threads], sizeof c->thread_names[0], "%s", t->name);
        c->thread_events[c->threads] = t->events;
    }
    c->threads++;
    return 0;
}

static int collect_event(const tg_trace_event *e, void *ctx)
{
    collected *c = ctx;
    if (c->n < MAX_EVENTS) {
        c->ev[c->n] = *e;
        snprintf(c->names[c->n], sizeof c->names[0], "%s", e->name);
        c->ev[c->n].name = c->names[c->n];
        c->n++;
    }
    return 0;
}

static collected *collect(void)
{
    collected *c = calloc(1, sizeof *c);
    TG_CHECK_OK(tg_trace_visit(collect_thread, collect_event, c));
    return c;
}

static const tg_trace_event *find(const collected *c, tg_trace_kind kind, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (c->ev[i].kind == kind && !strcmp(c->ev[i].name, name))
            return &c->ev[i];
    return NULL;
}

/* ---- nesting ------------------------------------------------------------------------ */

static void test_nesting(void)
{
    reset("{\"enable\":\"true\",\"channels\":[\"t.nest\",\"t.other\"]}");
    tg_trace_channel *ch = tg_trace_channel_get("t.nest");
    tg_trace_channel *other = tg_trace_channel_get("t.other");
    TG_CHECK(ch && other && tg_trace_channel_enabled(ch));

    tg_trace_begin(ch, "A");
    tg_trace_begin(ch, "B");
    tg_trace_end(ch);
    TG_TRACE_SCOPE(ch, "C")
    {
        TG_TRACE_SCOPE(ch, "D")
        {
            tg_trace_instant(ch, "tick");
        }
    }
    tg_trace_end(ch);

    collected *c = collect();
    TG_CHECK(c->n == 5 && c->threads == 1);
    const tg_trace_event *a = find(c, TG_TRACE_REGION, "A"), *b = find(c, TG_TRACE_REGION, "B"),
                         *cc = find(c, TG_TRACE_REGION, "C"), *d = find(c, TG_TRACE_REGION, "D");
    TG_CHECK(a && b && cc && d);
    if (a && b && cc && d) {
        TG_CHECK(a->depth == 0 && b->depth == 1 && cc->depth == 1 && d->depth == 2);
        TG_CHECK(a->start_ns <= b->start_ns && b->end_ns <= cc->start_ns);
        TG_CHECK(cc->start_ns <= d->start_ns && d->end_ns <= cc->end_ns && cc->end_ns <= a->end_ns);
        TG_CHECK(b->start_ns <= b->end_ns && a->end_ns >= 0);
        TG_CHECK(!strcmp(a->channel, "t.nest"));
        /* events come in the order they began */
        TG_CHECK(a == &c->ev[0] && b == &c->ev[1] && cc == &c->ev[2] && d == &c->ev[3]);
    }
    const tg_trace_event *tick = find(c, TG_TRACE_INSTANT, "tick");
    TG_CHECK(tick && tick->depth == 3 && d && tick->start_ns >= d->start_ns &&
             tick->start_ns <= d->end_ns);
    free(c);
    TG_CHECK(tg_trace_get_stats().unmatched_ends == 0);

    /* An end with nothing open: reported, nothing else changes. */
    tg_trace_end(ch);
    tg_trace_stats s = tg_trace_get_stats();
    TG_CHECK(s.unmatched_ends == 1 && s.events == 6);
    c = collect();
    const tg_trace_event *u = find(c, TG_TRACE_INSTANT, "unmatched end");
    TG_CHECK(u && !strcmp(u->channel, "t.nest") && u->depth == 0);
    free(c);

    /* An end on another channel than the innermost region's: reported, and
     * the region stays open until its own end. */
    tg_trace_begin_link(ch, "E", 42);
    tg_trace_end(other);
    TG_CHECK(tg_trace_get_stats().unmatched_ends == 2);
    c = collect();
    const tg_trace_event *e = find(c, TG_TRACE_REGION, "E");
    TG_CHECK(e && e->end_ns == -1 && e->link == 42);
    free(c);
    tg_trace_end(ch);
    c = collect();
    e = find(c, TG_TRACE_REGION, "E");
    TG_CHECK(e && e->end_ns >= e->start_ns && e->depth == 0);
    free(c);

    /* Regions deeper than the recorder keeps are counted as dropped, and
     * their ends still match their begins. */
    for (int i = 0; i < 70; i++)
        tg_trace_begin(ch, "deep");
    for (int i = 0; i < 70; i++)
        tg_trace_end(ch);
    s = tg_trace_get_stats();
    TG_CHECK(s.dropped == 6 && s.unmatched_ends == 2);
    tg_trace_begin(ch, "after");
    tg_trace_end(ch);
    c = collect();
    const tg_trace_event *after = find(c, TG_TRACE_REGION, "after");
    TG_CHECK(after && after->depth == 0 && after->end_ns >= after->start_ns);
    free(c);

    /* NULL channels are ignored. */
    tg_trace_begin(NULL, "x");
    tg_trace_end(NULL);
    tg_trace_value(NULL, "x", 1.0);
    TG_CHECK(tg_trace_get_stats().events == s.events + 1);
}

/* ---- channels ---------------------------------------------------------------------- */

static void record_everything(tg_trace_channel *ch)
{
    tg_trace_begin(ch, "region");
    tg_trace_instant(ch, "instant");
    tg_trace_value(ch, "series", 1.5);
    tg_trace_heatmap(ch, "heat", 3.0);
    tg_trace_end(ch);
}

static void test_channels(void)
{
    reset("{\"enable\":\"true\",\"channels\":[\"t.on\"]}");
    tg_trace_channel *on = tg_trace_channel_get("t.on"), *off = tg_trace_channel_get("t.off");
    TG_CHECK(on && off && on != off);
    TG_CHECK(tg_trace_channel_get("t.on") == on); /* one channel per name */
    TG_CHECK(!strcmp(tg_trace_channel_name(on), "t.on"));
    TG_CHECK(tg_trace_channel_enabled(on) && !tg_trace_channel_enabled(off));
    TG_CHECK(tg_trace_is_on());

    record_everything(off);
    tg_trace_stats s = tg_trace_get_stats();
    TG_CHECK(s.events == 0 && s.threads == 0 && s.unmatched_ends == 0);
    record_everything(on);
    TG_CHECK(tg_trace_get_stats().events == 4);

    /* A disabled region inside an enabled one: nothing recorded, no
     * unmatched end, and the outer end still closes the outer region. */
    tg_trace_begin(on, "outer");
    tg_trace_begin(off, "inner");
    tg_trace_end(off);
    tg_trace_end(on);
    s = tg_trace_get_stats();
    TG_CHECK(s.events == 5 && s.unmatched_ends == 0);

    /* A channel created after the configuration follows it. */
    reset("{\"enable\":true,\"channels\":[\"t.later\"]}");
    tg_trace_channel *later = tg_trace_channel_get("t.later");
    TG_CHECK(tg_trace_channel_enabled(later) && !tg_trace_channel_enabled(on));

    /* tg_trace_enable adds channels; "*" all of them. */
    TG_CHECK_OK(tg_trace_enable("t.on, t.off"));
    TG_CHECK(tg_trace_channel_enabled(on) && tg_trace_channel_enabled(off) &&
             tg_trace_channel_enabled(later));
    tg_trace_disable();
    TG_CHECK(!tg_trace_is_on() && !tg_trace_channel_enabled(later));
    record_everything(on);
    TG_CHECK(tg_trace_get_stats().events == 0); /* disabled records nothing */
    TG_CHECK_OK(tg_trace_enable("t.off"));      /* replaces the list when nothing was on */
    TG_CHECK(tg_trace_channel_enabled(off) && !tg_trace_channel_enabled(on));
    TG_CHECK_OK(tg_trace_enable("*"));
    TG_CHECK(tg_trace_channel_enabled(on) && tg_trace_channel_enabled(later));
    record_everything(later);
    TG_CHECK(tg_trace_get_stats().events == 4);

    /* Disabling keeps what was recorded. */
    tg_trace_disable();
    TG_CHECK(tg_trace_get_stats().events == 4);

    /* Bad names. */
    TG_CHECK(tg_trace_channel_get("") == NULL);
    TG_CHECK(tg_trace_channel_get("has space") == NULL);
    TG_CHECK(strstr(tg_error_message(), "has space") != NULL);
    TG_CHECK(tg_trace_channel_get("a-very-long-channel-name-of-40-bytes-xxxx") == NULL);
    TG_CHECK(tg_trace_channel_get(NULL) == NULL);
    TG_CHECK(tg_trace_enable("") == TG_ERR_INVALID_ARG);
    TG_CHECK(tg_trace_enable("ok,bad name") == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "bad name") != NULL);
    TG_CHECK(!tg_trace_is_on()); /* a failed enable changes nothing */
}

/* ---- series and heatmaps ----------------------------------------------------------- */

static void test_series(void)
{
    reset("{\"enable\":\"true\"}");
    tg_trace_channel *ch = tg_trace_channel_get("t.series");
    const double points[] = {0.9, 0.5, NAN, 0.7, 0.3};
    for (int i = 0; i < 5; i++)
        tg_trace_value(ch, "loss", points[i]);
    tg_trace_value(ch, "other", 100.0);
    tg_trace_series_summary s;
    TG_CHECK_OK(tg_trace_series("t.series", "loss", &s));
    TG_CHECK(s.count == 5);
    TG_CHECK_NEAR(s.min, 0.3, 0);
    TG_CHECK_NEAR(s.max, 0.9, 0);
    TG_CHECK_NEAR(s.mean, (0.9 + 0.5 + 0.7 + 0.3) / 4, 1e-15);
    TG_CHECK_NEAR(s.last, 0.3, 0);
    TG_CHECK(s.first_ns <= s.last_ns && s.first_ns >= tg_trace_origin_ns());
    TG_CHECK(tg_trace_series("t.series", "absent", &s) == TG_ERR_NOT_FOUND);
    TG_CHECK(tg_trace_series("t.none", "loss", &s) == TG_ERR_NOT_FOUND);
}

typedef struct slices {
    int n;
    char name[8][32];
    int64_t start[8], end[8];
    int n_edges[8];
    uint64_t counts[8][8];
} slices;

static int collect_slice(const tg_trace_heatmap_slice *s, void *ctx)
{
    slices *c = ctx;
    if (c->n < 8) {
        snprintf(c->name[c->n], sizeof c->name[0], "%s", s->name);
        c->start[c->n] = s->start_ns;
        c->end[c->n] = s->end_ns;
        c->n_edges[c->n] = s->n_edges;
        for (int b = 0; b <= s->n_edges && b < 8; b++)
            c->counts[c->n][b] = s->counts[b];
    }
    c->n++;
    return 0;
}

/* Spin until the trace clock has moved on by at least `ns`. */
static void spin_ns(int64_t ns)
{
    int64_t t0 = tg_trace_clock_ns();
    while (tg_trace_clock_ns() - t0 < ns) {
    }
}

static void test_heatmap(void)
{
    /* One slice of an hour: everything lands in it. */
    reset("{\"enable\":\"true\",\"heatmapIntervalMs\":\"3600000\"}");
    tg_trace_channel *ch = tg_trace_channel_get("t.heat");
    const double edges[] = {0, 10, 20};
    TG_CHECK_OK(tg_trace_heatmap_bins(ch, "depth", edges, 3));
    const double samples[] = {-5, 0, 5, 10, 15, 25, 100, NAN, 19.999};
    for (int i = 0; i < 9; i++)
        tg_trace_heatmap(ch, "depth", samples[i]);
    tg_trace_heatmap(ch, "bytes", 3); /* default bins: 0 1 2 4 8 ... 1024 */
    tg_trace_heatmap(ch, "bytes", 4);
    tg_trace_heatmap(ch, "bytes", 5000);
    slices c = {0};
    TG_CHECK_OK(tg_trace_heatmap_visit(collect_slice, &c));
    TG_CHECK(c.n == 2);
    /* grouped by name: "bytes" before "depth" */
    TG_CHECK(!strcmp(c.name[0], "bytes") && !strcmp(c.name[1], "depth"));
    TG_CHECK(c.n_edges[1] == 3);
    TG_CHECK(c.counts[1][0] == 1 && c.counts[1][1] == 2 && c.counts[1][2] == 3 &&
             c.counts[1][3] == 2); /* <0 | [0,10) | [10,20) | >=20; NaN ignored */
    TG_CHECK(c.n_edges[0] == 12);
    uint64_t bytes_bins[13] = {0};
    bytes_bins[3] = 1;  /* [2,4) */
    bytes_bins[4] = 1;  /* [4,8) */
    bytes_bins[12] = 1; /* >=1024 */
    int same = 1;
    for (int b = 0; b < 8; b++)
        same &= c.counts[0][b] == bytes_bins[b];
    TG_CHECK(same);
    TG_CHECK(c.start[1] == tg_trace_origin_ns() && c.end[1] - c.start[1] == 3600000000000LL);

    /* Redefining the bins applies to the samples already recorded. */
    const double one[] = {10};
    TG_CHECK_OK(tg_trace_heatmap_bins(ch, "depth", one, 1));
    c = (slices){0};
    TG_CHECK_OK(tg_trace_heatmap_visit(collect_slice, &c));
    TG_CHECK(c.n == 2 && c.n_edges[1] == 1 && c.counts[1][0] == 3 && c.counts[1][1] == 5);

    /* Slices of 2 us, samples at least 3 us apart: one slice each, in time
     * order, aligned to the origin. */
    reset("{\"enable\":\"true\",\"heatmapIntervalMs\":0.002}");
    for (int i = 0; i < 5; i++) {
        tg_trace_heatmap(ch, "depth", 5.0 * i);
        spin_ns(3000);
    }
    c = (slices){0};
    TG_CHECK_OK(tg_trace_heatmap_visit(collect_slice, &c));
    TG_CHECK(c.n == 5);
    for (int i = 0; i < c.n && i < 5; i++) {
        TG_CHECK((c.start[i] - tg_trace_origin_ns()) % 2000 == 0 && c.end[i] - c.start[i] == 2000);
        TG_CHECK(i == 0 || c.start[i] >= c.end[i - 1]);
        TG_CHECK(c.counts[i][0] + c.counts[i][1] == 1);
        TG_CHECK(c.counts[i][1] == (i >= 2)); /* 0, 5 below the edge 10; 10, 15, 20 at or above */
    }

    /* Bad bins. */
    const double down[] = {1, 0};
    TG_CHECK(tg_trace_heatmap_bins(ch, "x", down, 2) == TG_ERR_INVALID_ARG);
    TG_CHECK(tg_trace_heatmap_bins(ch, "x", edges, 0) == TG_ERR_INVALID_ARG);
    const double inf[] = {0, INFINITY};
    TG_CHECK(tg_trace_heatmap_bins(ch, "x", inf, 2) == TG_ERR_INVALID_ARG);
    TG_CHECK(tg_trace_heatmap_bins(NULL, "x", edges, 3) == TG_ERR_INVALID_ARG);
}

/* ---- configuration ------------------------------------------------------------------ */

static void expect_config_error(const char *json, const char *fragment)
{
    tg_status s = tg_trace_configure(json, "TILEGRAPH_TRACE");
    if (s != TG_ERR_CONFIG || !strstr(tg_error_message(), fragment))
        tg_test_fail(__FILE__, __LINE__, "configure(%s) gave %s '%s', expected one naming '%s'",
                     json, tg_status_name(s), tg_error_message(), fragment);
}

static void test_config_errors(void)
{
    reset("{\"enable\":\"true\",\"channels\":[\"t.cfg\"]}");
    tg_trace_channel *ch = tg_trace_channel_get("t.cfg");
    TG_CHECK(tg_trace_channel_enabled(ch));

    expect_config_error("{\"enabled\":\"true\"}", "unknown key 'enabled'");
    TG_CHECK(strstr(tg_error_message(),
                    "valid keys: enable, directory, channels, maxEventsPerThread, "
                    "heatmapIntervalMs") != NULL);
    TG_CHECK(strstr(tg_error_message(), "TILEGRAPH_TRACE:1:12") != NULL);
    expect_config_error("{\"enable\":\"yes\"}", "'enable'");
    expect_config_error("{\"enable\":1}", "'enable'");
    expect_config_error("{\"channels\":\"engine\"}", "must be an array");
    expect_config_error("{\"channels\":[1]}", "must hold strings");
    expect_config_error("{\"channels\":[\"a b\"]}", "'a b' is not a channel name");
    expect_config_error("{\"directory\":\"\"}", "'directory'");
    expect_config_error("{\"directory\":3}", "'directory'");
    expect_config_error("{\"maxEventsPerThread\":0}", "'maxEventsPerThread'");
    expect_config_error("{\"maxEventsPerThread\":2.5}", "'maxEventsPerThread'");
    expect_config_error("{\"maxEventsPerThread\":\"many\"}", "'maxEventsPerThread'");
    expect_config_error("{\"heatmapIntervalMs\":-1}", "'heatmapIntervalMs'");
    expect_config_error("[\"enable\"]", "must be a JSON object");
    expect_config_error("{\"enable\":\"true\",}", "TILEGRAPH_TRACE:1:");
    expect_config_error("{\"enable\":\"true\",\"enable\":\"false\"}", "enable");
    expect_config_error("", "TILEGRAPH_TRACE");
    TG_CHECK(tg_trace_configure(NULL, NULL) == TG_ERR_INVALID_ARG);
    /* none of the failures changed anything */
    TG_CHECK(tg_trace_channel_enabled(ch));

    /* Numbers may be strings, as in the engine options. */
    TG_CHECK_OK(tg_trace_configure("{\"enable\":\"true\",\"maxEventsPerThread\":\"10\","
                                   "\"heatmapIntervalMs\":\"50\",\"channels\":[\"t.cfg\"]}",
                                   NULL));
    tg_trace_clear();
    for (int i = 0; i < 15; i++)
        tg_trace_value(ch, "v", i);
    tg_trace_stats st = tg_trace_get_stats();
    TG_CHECK(st.events == 10 && st.dropped == 5);

    /* The environment variable. */
    TG_CHECK(setenv("TILEGRAPH_TRACE", "{\"enable\":\"true\",\"chanels\":[]}", 1) == 0);
    TG_CHECK(tg_trace_configure_env() == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "TILEGRAPH_TRACE") &&
             strstr(tg_error_message(), "unknown key 'chanels'"));
    TG_CHECK(setenv("TILEGRAPH_TRACE", "{\"enable\":\"false\"}", 1) == 0);
    TG_CHECK_OK(tg_trace_configure_env());
    TG_CHECK(!tg_trace_channel_enabled(ch));
    TG_CHECK_OK(tg_trace_enable("t.cfg"));
    TG_CHECK_OK(tg_trace_configure_env()); /* the same text again: no change */
    TG_CHECK(tg_trace_channel_enabled(ch));
    TG_CHECK(unsetenv("TILEGRAPH_TRACE") == 0);
    TG_CHECK_OK(tg_trace_configure_env()); /* unset: no change */
    TG_CHECK(tg_trace_channel_enabled(ch));
}

/* ---- many threads ----------------------------------------------------------------- */

enum { WRITERS = 4, ROUNDS = 700 };

typedef struct writer_arg {
    int id;
    tg_trace_channel *ch;
} writer_arg;

static void *writer_main(void *p)
{
    writer_arg *a = p;
    char name[32];
    snprintf(name, sizeof name, "writer %d", a->id);
    tg_trace_thread_name(name);
    for (int i = 0; i < ROUNDS; i++) {
        TG_TRACE_SCOPE(a->ch, "round")
        {
            tg_trace_begin_link(a->ch, "step", (uint64_t)(a->id * ROUNDS + i + 1));
            tg_trace_value(a->ch, "progress", i);
            tg_trace_heatmap(a->ch, "i mod 8", i % 8);
            tg_trace_end(a->ch);
        }
    }
    return NULL;
}

/* The reader runs from before the writers start until after they end. */
typedef struct reader_arg {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int started, done; /* under lock */
    int monotonic, exports_ok;
} reader_arg;

static void *reader_main(void *p)
{
    reader_arg *a = p;
    uint64_t last = 0;
    for (int round = 0;; round++) {
        pthread_mutex_lock(&a->lock);
        int done = a->done;
        a->started = 1;
        pthread_cond_signal(&a->cond);
        pthread_mutex_unlock(&a->lock);
        tg_trace_stats s = tg_trace_get_stats();
        if (s.events < last)
            a->monotonic = 0;
        last = s.events;
        /* export while the writers write (and at least once) */
        if (round % 8 == 0 || (done && a->exports_ok == 0))
            a->exports_ok += tg_trace_write(OUT_DIR "/concurrent.json") == TG_OK;
        if (done)
            break;
    }
    return NULL;
}

static void test_threads(void)
{
    reset("{\"enable\":\"true\",\"channels\":[\"t.mt\"]}");
    tg_trace_channel *ch = tg_trace_channel_get("t.mt");
    mkdir(OUT_DIR, 0777);
    pthread_t w[WRITERS], r;
    writer_arg wa[WRITERS];
    reader_arg ra = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 1, 0};
    TG_CHECK(pthread_create(&r, NULL, reader_main, &ra) == 0);
    pthread_mutex_lock(&ra.lock);
    while (!ra.started)
        pthread_cond_wait(&ra.cond, &ra.lock);
    pthread_mutex_unlock(&ra.lock);
    for (int i = 0; i < WRITERS; i++) {
        wa[i] = (writer_arg){i, ch};
        TG_CHECK(pthread_create(&w[i], NULL, writer_main, &wa[i]) == 0);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);
    pthread_mutex_lock(&ra.lock);
    ra.done = 1;
    pthread_mutex_unlock(&ra.lock);
    pthread_join(r, NULL);
    TG_CHECK(ra.monotonic && ra.exports_ok > 0);

    /* Every event of every thread is there, in order, closed and nested. */
    collected *c = collect();
    TG_CHECK(c->threads == WRITERS && c->n == WRITERS * ROUNDS * 4);
    int seen_writer[WRITERS] = {0};
    for (int t = 0; t < c->threads && t < WRITERS; t++) {
        int id = -1;
        TG_CHECK(sscanf(c->thread_names[t], "writer %d", &id) == 1 && id >= 0 && id < WRITERS);
        if (id >= 0 && id < WRITERS)
            seen_writer[id]++;
        TG_CHECK(c->thread_events[t] == ROUNDS * 4);
    }
    for (int i = 0; i < WRITERS; i++)
        TG_CHECK(seen_writer[i] == 1);
    int bad_order = 0, bad_region = 0, rounds = 0, steps = 0;
    for (int i = 0; i < c->n; i++) {
        const tg_trace_event *e = &c->ev[i];
        if (i && c->ev[i - 1].thread == e->thread && c->ev[i - 1].start_ns > e->start_ns)
            bad_order++;
        if (e->kind != TG_TRACE_REGION)
            continue;
        if (e->end_ns < e->start_ns)
            bad_region++;
        if (!strcmp(e->name, "round"))
            rounds += e->depth == 0 && e->link == 0;
        else if (!strcmp(e->name, "step"))
            steps += e->depth == 1 && e->link != 0 && i > 0 &&
                     c->ev[i - 1].kind == TG_TRACE_REGION && c->ev[i - 1].start_ns <= e->start_ns &&
                     e->end_ns <= c->ev[i - 1].end_ns;
    }
    TG_CHECK(bad_order == 0 && bad_region == 0);
    TG_CHECK(rounds == WRITERS * ROUNDS && steps == WRITERS * ROUNDS);
    free(c);

    tg_trace_series_summary s;
    TG_CHECK_OK(tg_trace_series("t.mt", "progress", &s));
    TG_CHECK(s.count == WRITERS * ROUNDS && s.min == 0 && s.max == ROUNDS - 1);
    TG_CHECK_NEAR(s.mean, (ROUNDS - 1) / 2.0, 1e-9);
    TG_CHECK(tg_trace_get_stats().dropped == 0 && tg_trace_get_stats().unmatched_ends == 0);
    remove(OUT_DIR "/concurrent.json");
}

/* A thread named like one that has exited continues its track; one named
 * like a thread still running gets its own. */
typedef struct device_thread {
    tg_trace_channel *ch;
    pthread_mutex_t *lock;
    pthread_cond_t *cond;
    int *recorded, *release; /* under lock */
} device_thread;

static void *device_thread_main(void *p)
{
    device_thread *d = p;
    tg_trace_thread_name("replica 0 device 0");
    TG_TRACE_SCOPE(d->ch, "run")
    {
        tg_trace_value(d->ch, "x", 1);
    }
    pthread_mutex_lock(d->lock);
    (*d->recorded)++;
    pthread_cond_broadcast(d->cond);
    while (!*d->release)
        pthread_cond_wait(d->cond, d->lock);
    pthread_mutex_unlock(d->lock);
    return NULL;
}

static void test_thread_tracks(void)
{
    reset("{\"enable\":\"true\"}");
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    int recorded = 0, release = 1;
    device_thread d = {tg_trace_channel_get("t.tracks"), &lock, &cond, &recorded, &release};
    for (int run = 0; run < 3; run++) { /* one thread per run, one after the other */
        pthread_t t;
        TG_CHECK(pthread_create(&t, NULL, device_thread_main, &d) == 0);
        pthread_join(t, NULL);
    }
    collected *c = collect();
    TG_CHECK(c->threads == 1 && c->n == 6 && !strcmp(c->thread_names[0], "replica 0 device 0"));
    int ok = 1;
    for (int i = 0; i < c->n; i++)
        ok &= c->ev[i].kind != TG_TRACE_REGION || (c->ev[i].depth == 0 && c->ev[i].end_ns > 0);
    TG_CHECK(ok);
    free(c);

    /* Two alive at once: the second may adopt the exited track, but cannot
     * share the first one's. */
    release = 0;
    pthread_t t1, t2;
    TG_CHECK(pthread_create(&t1, NULL, device_thread_main, &d) == 0);
    TG_CHECK(pthread_create(&t2, NULL, device_thread_main, &d) == 0);
    pthread_mutex_lock(&lock);
    while (recorded < 5)
        pthread_cond_wait(&cond, &lock);
    release = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    c = collect();
    TG_CHECK(c->threads == 2 && c->n == 10);
    TG_CHECK(c->thread_events[0] + c->thread_events[1] == 10 &&
             (c->thread_events[0] == 8 || c->thread_events[1] == 8));
    free(c);

    /* After a clear, the name starts a new track. */
    tg_trace_clear();
    pthread_t t3;
    TG_CHECK(pthread_create(&t3, NULL, device_thread_main, &d) == 0);
    pthread_join(t3, NULL);
    TG_CHECK(tg_trace_get_stats().threads == 1 && tg_trace_get_stats().events == 2);
}

/* ---- Chrome export ---------------------------------------------------------------- */

/* The (pid, tid) pairs and pids named by metadata, and B/E stacks. */
typedef struct checker {
    int named_pids[64], n_named_pids;
    int named_threads[256][2], n_named_threads;
    char thread_names[256][64];
    char process_names[64][64];
    int used[4096][2], n_used;
    int failures;
} checker;

static int pid_named(const checker *k, int pid)
{
    for (int i = 0; i < k->n_named_pids; i++)
        if (k->named_pids[i] == pid)
            return 1;
    return 0;
}

static const char *thread_named(const checker *k, int pid, int tid)
{
    for (int i = 0; i < k->n_named_threads; i++)
        if (k->named_threads[i][0] == pid && k->named_threads[i][1] == tid)
            return k->thread_names[i];
    return NULL;
}

static const tg_json *json_field(const tg_json *ev, const char *key, tg_json_type type)
{
    const tg_json *v = tg_json_get(ev, key);
    return v && v->type == type ? v : NULL;
}

typedef struct parsed {
    tg_arena *arena;
    const tg_json *events;
} parsed;

static int parse_trace(const char *path, parsed *p)
{
    size_t len = 0;
    char *text = tg_test_read_file(path, &len);
    TG_CHECK(text != NULL);
    if (!text)
        return 0;
    p->arena = tg_arena_create(1 << 20);
    tg_json *root = NULL;
    TG_CHECK_OK(tg_json_parse(p->arena, text, len, path, &root));
    free(text);
    p->events = root ? json_field(root, "traceEvents", TG_JSON_ARRAY) : NULL;
    TG_CHECK(p->events != NULL);
    return p->events != NULL;
}

/* Check every event's required fields, that B/E nest per thread and that
 * metadata names every process and thread used. Returns the checker. */
static checker *check_trace(const tg_json *events)
{
    checker *k = calloc(1, sizeof *k);
    for (size_t i = 0; i < events->count; i++) {
        const tg_json *ev = events->items[i];
        const tg_json *ph = json_field(ev, "ph", TG_JSON_STRING);
        const tg_json *name = json_field(ev, "name", TG_JSON_STRING);
        const tg_json *ts = json_field(ev, "ts", TG_JSON_NUMBER);
        const tg_json *pid = json_field(ev, "pid", TG_JSON_NUMBER);
        const tg_json *tid = json_field(ev, "tid", TG_JSON_NUMBER);
        if (!ph || !name || !ts || !pid || !tid || !pid->is_int || !tid->is_int) {
            tg_test_fail(__FILE__, __LINE__, "event %zu lacks a required field", i);
            k->failures++;
            continue;
        }
        if (ph->string[0] == 'X' && (!json_field(ev, "dur", TG_JSON_NUMBER) ||
                                     json_field(ev, "dur", TG_JSON_NUMBER)->number < 0)) {
            tg_test_fail(__FILE__, __LINE__, "complete event %zu '%s' has no dur", i, name->string);
            k->failures++;
        }
        if (ph->string[0] == 'M') {
            const tg_json *args = json_field(ev, "args", TG_JSON_OBJECT);
            const tg_json *n = json_field(args, "name", TG_JSON_STRING);
            if (!strcmp(name->string, "process_name") && n && k->n_named_pids < 64) {
                snprintf(k->process_names[k->n_named_pids], 64, "%s", n->string);
                k->named_pids[k->n_named_pids++] = (int)pid->integer;
            } else if (!strcmp(name->string, "thread_name") && n && k->n_named_threads < 256) {
                snprintf(k->thread_names[k->n_named_threads], 64, "%s", n->string);
                k->named_threads[k->n_named_threads][0] = (int)pid->integer;
                k->named_threads[k->n_named_threads++][1] = (int)tid->integer;
            }
            continue;
        }
        if (k->n_used < 4096 && strchr("BEXi", ph->string[0])) {
            k->used[k->n_used][0] = (int)pid->integer;
            k->used[k->n_used++][1] = (int)tid->integer;
        } else if (k->n_used < 4096) {
            k->used[k->n_used][0] = (int)pid->integer;
            k->used[k->n_used++][1] = -1; /* counters and flows: the process must be named */
        }
    }
    for (int i = 0; i < k->n_used; i++) {
        if (!pid_named(k, k->used[i][0])) {
            tg_test_fail(__FILE__, __LINE__, "pid %d has no process_name", k->used[i][0]);
            k->failures++;
        }
        if (k->used[i][1] >= 0 && !thread_named(k, k->used[i][0], k->used[i][1])) {
            tg_test_fail(__FILE__, __LINE__, "pid %d tid %d has no thread_name", k->used[i][0],
                         k->used[i][1]);
            k->failures++;
        }
    }

    /* B/E nest per thread: replay each thread's B/E events in time order
     * (stable, as viewers do) against a stack of names. */
    for (int t = 0; t < k->n_named_threads; t++) {
        int pid = k->named_threads[t][0], tid = k->named_threads[t][1];
        const tg_json *list[4096];
        int n = 0;
        for (size_t i = 0; i < events->count && n < 4096; i++) {
            const tg_json *ev = events->items[i];
            const tg_json *ph = json_field(ev, "ph", TG_JSON_STRING);
            const tg_json *p = json_field(ev, "pid", TG_JSON_NUMBER);
            const tg_json *q = json_field(ev, "tid", TG_JSON_NUMBER);
            if (ph && p && q && p->integer == pid && q->integer == tid &&
                (ph->string[0] == 'B' || ph->string[0] == 'E'))
                list[n++] = ev;
        }
        for (int i = 1; i < n; i++) /* insertion sort by ts, stable */
            for (int j = i; j > 0 && json_field(list[j - 1], "ts", TG_JSON_NUMBER)->number >
                                         json_field(list[j], "ts", TG_JSON_NUMBER)->number;
                 j--) {
                const tg_json *tmp = list[j];
                list[j] = list[j - 1];
                list[j - 1] = tmp;
            }
        const char *stack[128];
        double begin_ts[128];
        int depth = 0;
        for (int i = 0; i < n; i++) {
            const char *ph = json_field(list[i], "ph", TG_JSON_STRING)->string;
            const char *name = json_field(list[i], "name", TG_JSON_STRING)->string;
            double ts = json_field(list[i], "ts", TG_JSON_NUMBER)->number;
            if (ph[0] == 'B' && depth < 128) {
                begin_ts[depth] = ts;
                stack[depth++] = name;
            } else if (ph[0] == 'E') {
                if (depth == 0 || strcmp(stack[depth - 1], name) != 0 || ts < begin_ts[depth - 1]) {
                    tg_test_fail(__FILE__, __LINE__,
                                 "pid %d tid %d: 'E' of '%s' does not close "
                                 "the innermost open region",
                                 pid, tid, name);
                    k->failures++;
                    break;
                }
                depth--;
            }
        }
        if (depth != 0) {
            tg_test_fail(__FILE__, __LINE__, "pid %d tid %d: %d regions never end", pid, tid,
                         depth);
            k->failures++;
        }
    }
    return k;
}

static int count_ph(const tg_json *events, char ph, const char *name)
{
    int n = 0;
    for (size_t i = 0; i < events->count; i++) {
        const tg_json *p = json_field(events->items[i], "ph", TG_JSON_STRING);
        const tg_json *nm = json_field(events->items[i], "name", TG_JSON_STRING);
        n += p && p->string[0] == ph && (!name || (nm && !strcmp(nm->string, name)));
    }
    return n;
}

static void *second_thread(void *p)
{
    tg_trace_channel *ch = p;
    tg_trace_thread_name("loader");
    TG_TRACE_SCOPE(ch, "load")
    {
        TG_TRACE_SCOPE(ch, "decode") {}
        tg_trace_value(ch, "queue depth", 2);
    }
    tg_trace_begin(ch, "never closed on a finished thread");
    return NULL;
}

enum { REPLICAS = 2, DEVICES = 2, STEPS = 6 };

static void test_chrome_export(void)
{
    mkdir(OUT_DIR, 0777);
    reset("{\"enable\":\"true\",\"directory\":\"" OUT_DIR "/flush/a/\",\"heatmapIntervalMs\":1}");
    tg_trace_channel *engine = tg_trace_channel_get("t.engine"),
                     *data = tg_trace_channel_get("t.data");
    tg_trace_thread_name("main \"quoted\"");
    int64_t t0 = tg_trace_clock_ns();
    /* Two host steps, each linked to the device steps it caused. */
    for (uint64_t step = 1; step <= 2; step++) {
        TG_TRACE_SCOPE_LINK(engine, "host step", step)
        {
            TG_TRACE_SCOPE(engine, "wait")
            {
                tg_trace_heatmap(engine, "queue", (double)step);
            }
            tg_trace_value(engine, "loss", 1.0 / (double)step);
        }
    }
    tg_trace_instant_link(engine, "sync", 3);
    pthread_t th;
    TG_CHECK(pthread_create(&th, NULL, second_thread, data) == 0);
    pthread_join(th, NULL);
    tg_trace_begin(engine, "still open");
    tg_trace_end(data); /* unmatched: data's innermost is not open here */

    /* Device tracks: forward and backward of each micro-batch, linked to
     * host step 1 or 2, plus the sync instant's link 3 on replica 0. */
    tg_trace_device_step steps[REPLICAS * DEVICES][STEPS + 1];
    tg_trace_device_value values[REPLICAS * DEVICES][2];
    tg_trace_device_track tracks[REPLICAS * DEVICES];
    for (int r = 0; r < REPLICAS; r++)
        for (int d = 0; d < DEVICES; d++) {
            int i = r * DEVICES + d;
            int n = 0;
            for (int k = 0; k < STEPS; k++)
                steps[i][n++] =
                    (tg_trace_device_step){k % 2 ? "backward" : "forward",
                                           t0 + 1000 * (STEPS - k) + d * 100,
                                           t0 + 1000 * (STEPS - k) + d * 100 + 800,
                                           k / 2,
                                           k % 2 ? TG_TRACE_PHASE_BACKWARD : TG_TRACE_PHASE_FORWARD,
                                           (uint64_t)(1 + (k >= 3))};
            if (r == 0) /* nested inside the first step: an enclosing step comes first */
                steps[i][n++] = (tg_trace_device_step){
                    "all-reduce", t0 + 6000 + d * 100 + 100, t0 + 6000 + d * 100 + 200,
                    -1,           TG_TRACE_PHASE_OTHER,      3};
            values[i][0] = (tg_trace_device_value){"memory", t0 + 10, 1000.0 * (d + 1)};
            values[i][1] = (tg_trace_device_value){"memory", t0 + 9000, 500.0};
            tracks[i] = (tg_trace_device_track){
                r,        d,         d == 1 && r == 1 ? "device 1 (last stage)" : NULL,
                steps[i], (size_t)n, values[i],
                2};
        }
    const char *path = OUT_DIR "/export.json";
    TG_CHECK_OK(tg_trace_export_chrome(path, tracks, REPLICAS * DEVICES));

    parsed p = {0};
    if (parse_trace(path, &p)) {
        const tg_json *ev = p.events;
        checker *k = check_trace(ev);
        TG_CHECK(k->failures == 0);
        /* host threads and every replica and device named */
        TG_CHECK(thread_named(k, 1, 1) && !strcmp(thread_named(k, 1, 1), "main \"quoted\""));
        TG_CHECK(thread_named(k, 1, 2) && !strcmp(thread_named(k, 1, 2), "loader"));
        for (int r = 0; r < REPLICAS; r++) {
            char want[32];
            snprintf(want, sizeof want, "replica %d", r);
            int found = 0;
            for (int i = 0; i < k->n_named_pids; i++)
                found += k->named_pids[i] == 2 + r && !strcmp(k->process_names[i], want);
            TG_CHECK(found == 1);
            for (int d = 0; d < DEVICES; d++)
                TG_CHECK(thread_named(k, 2 + r, 1 + d) != NULL);
        }
        TG_CHECK(!strcmp(thread_named(k, 3, 2), "device 1 (last stage)"));
        TG_CHECK(!strcmp(thread_named(k, 2, 2), "device 1"));
        free(k);
        /* every step is a complete event; host regions B/E; counters; flows */
        TG_CHECK(count_ph(ev, 'X', NULL) == REPLICAS * DEVICES * STEPS + DEVICES);
        TG_CHECK(count_ph(ev, 'B', "host step") == 2 && count_ph(ev, 'E', "host step") == 2);
        TG_CHECK(count_ph(ev, 'B', NULL) == 8 && count_ph(ev, 'E', NULL) == 8);
        TG_CHECK(count_ph(ev, 'i', "sync") == 1 && count_ph(ev, 'i', "unmatched end") == 1);
        TG_CHECK(count_ph(ev, 'C', "loss") == 2 && count_ph(ev, 'C', "queue depth") == 1);
        TG_CHECK(count_ph(ev, 'C', "memory") == 2 * REPLICAS * DEVICES);
        TG_CHECK(count_ph(ev, 'C', "queue") >= 2); /* a slice (and its return to zero) */
        /* links 1 and 2 on every track, link 3 on replica 0's devices */
        int flows = REPLICAS * DEVICES * 2 + DEVICES;
        TG_CHECK(count_ph(ev, 's', NULL) == flows && count_ph(ev, 'f', NULL) == flows);
        for (size_t i = 0; i < ev->count; i++) {
            const tg_json *e = ev->items[i];
            const char *ph = json_field(e, "ph", TG_JSON_STRING)->string;
            const char *name = json_field(e, "name", TG_JSON_STRING)->string;
            const tg_json *args = json_field(e, "args", TG_JSON_OBJECT);
            if (ph[0] == 'f') { /* each flow end has its start */
                int64_t id = json_field(e, "id", TG_JSON_NUMBER)->integer;
                int starts = 0;
                for (size_t j = 0; j < ev->count; j++) {
                    const tg_json *o = ev->items[j], *oid = json_field(o, "id", TG_JSON_NUMBER);
                    starts += json_field(o, "ph", TG_JSON_STRING)->string[0] == 's' && oid &&
                              oid->integer == id;
                }
                TG_CHECK(starts == 1 && json_field(e, "bp", TG_JSON_STRING));
            }
            if (ph[0] == 'B' && !strcmp(name, "still open"))
                TG_CHECK(json_field(args, "open", TG_JSON_BOOL) != NULL);
            if (ph[0] == 'E' && !strcmp(name, "still open")) { /* closed at the export */
                double unmatched_ts = -1;
                for (size_t j = 0; j < ev->count; j++)
                    if (!strcmp(json_field(ev->items[j], "name", TG_JSON_STRING)->string,
                                "unmatched end"))
                        unmatched_ts = json_field(ev->items[j], "ts", TG_JSON_NUMBER)->number;
                TG_CHECK(unmatched_ts >= 0 &&
                         json_field(e, "ts", TG_JSON_NUMBER)->number >= unmatched_ts);
            }
            if (ph[0] == 'B' && !strcmp(name, "host step"))
                TG_CHECK(json_field(args, "link", TG_JSON_NUMBER) != NULL);
            if (ph[0] == 'X' && !strcmp(name, "backward")) {
                const tg_json *mb = json_field(args, "micro_batch", TG_JSON_NUMBER);
                const tg_json *phase = json_field(args, "phase", TG_JSON_STRING);
                TG_CHECK(mb && mb->integer >= 0 && mb->integer < STEPS / 2 && phase &&
                         !strcmp(phase->string, "backward"));
                TG_CHECK_NEAR(json_field(e, "dur", TG_JSON_NUMBER)->number, 0.8, 1e-12);
            }
            if (ph[0] == 'C' && !strcmp(name, "queue"))
                TG_CHECK(args && args->count == 13 && tg_json_get(args, "[1,2)") &&
                         tg_json_get(args, ">=1024"));
            if (ph[0] == 'C' && !strcmp(name, "loss"))
                TG_CHECK(json_field(args, "value", TG_JSON_NUMBER) != NULL);
        }
        tg_arena_destroy(p.arena);
    }

    /* flush writes the same to the configured directory (created). */
    TG_CHECK_OK(tg_trace_flush());
    const char *out = tg_trace_output_path();
    char want[256];
    snprintf(want, sizeof want, OUT_DIR "/flush/a/tilegraph-%ld.trace.json", (long)getpid());
    TG_CHECK(!strcmp(out, want));
    p = (parsed){0};
    if (parse_trace(want, &p)) {
        checker *k = check_trace(p.events);
        TG_CHECK(k->failures == 0 && count_ph(p.events, 'X', NULL) == 0);
        TG_CHECK(count_ph(p.events, 'B', NULL) == 8);
        free(k);
        tg_arena_destroy(p.arena);
    }

    /* Bad tracks are refused before anything is written. */
    remove(path);
    tracks[1].replica = tracks[0].replica;
    tracks[1].device = tracks[0].device;
    TG_CHECK(tg_trace_export_chrome(path, tracks, 2) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "two tracks for replica 0 device 0") != NULL);
    tracks[1].device = 1;
    steps[0][0].end_ns = steps[0][0].start_ns - 1;
    TG_CHECK(tg_trace_export_chrome(path, tracks, 2) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "ends before it starts") != NULL);
    tracks[0].replica = -1;
    TG_CHECK(tg_trace_export_chrome(path, tracks, 1) == TG_ERR_INVALID_ARG);
    struct stat st;
    TG_CHECK(stat(path, &st) != 0);
    TG_CHECK(tg_trace_write(OUT_DIR "/no/such/dir/x.json") == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "no/such/dir") != NULL);

    /* Shutdown flushes, then forgets everything; a later flush writes nothing. */
    remove(want);
    TG_CHECK_OK(tg_trace_shutdown());
    TG_CHECK(stat(want, &st) == 0);
    remove(want);
    TG_CHECK(tg_trace_get_stats().events == 0 && !tg_trace_is_on());
    TG_CHECK_OK(tg_trace_flush());
    TG_CHECK(stat(want, &st) != 0);

    /* Device tracks alone, without any host tracing. */
    tracks[0].replica = 0;
    steps[0][0].end_ns = steps[0][0].start_ns + 800;
    TG_CHECK_OK(tg_trace_export_chrome(path, tracks, 1));
    p = (parsed){0};
    if (parse_trace(path, &p)) {
        checker *k = check_trace(p.events);
        TG_CHECK(k->failures == 0 && count_ph(p.events, 'X', NULL) == STEPS + 1);
        TG_CHECK(count_ph(p.events, 's', NULL) == 0);
        double min_ts = 1e300;
        for (size_t i = 0; i < p.events->count; i++)
            if (json_field(p.events->items[i], "ph", TG_JSON_STRING)->string[0] != 'M') {
                double ts = json_field(p.events->items[i], "ts", TG_JSON_NUMBER)->number;
                min_ts = ts < min_ts ? ts : min_ts;
            }
        TG_CHECK(min_ts == 0.0); /* time zero is the first device event */
        free(k);
        tg_arena_destroy(p.arena);
    }
    remove(path);
}

/* ---- interning and the allocator ------------------------------------------------- */

static void test_intern(void)
{
    char buf[32];
    snprintf(buf, sizeof buf, "op %d", 7);
    const char *a = tg_trace_intern(buf);
    snprintf(buf, sizeof buf, "op %d", 8);
    const char *b = tg_trace_intern(buf);
    snprintf(buf, sizeof buf, "op %d", 7);
    TG_CHECK(a && b && a != b && tg_trace_intern(buf) == a && !strcmp(a, "op 7"));
    for (int i = 0; i < 1000; i++) { /* grows the table; old pointers stay */
        snprintf(buf, sizeof buf, "name %d", i);
        TG_CHECK(tg_trace_intern(buf) != NULL);
    }
    TG_CHECK(tg_trace_intern("op 7") == a && tg_trace_intern(NULL) == NULL);

    /* Allocation failures lose events (counted), never crash. */
    reset("{\"enable\":\"true\"}");
    tg_trace_channel *ch = tg_trace_channel_get("t.oom");
    tg_alloc_fail_after(1);
    tg_trace_begin(ch, "lost");
    tg_trace_end(ch);
    tg_alloc_fail_after(0);
    tg_trace_stats s = tg_trace_get_stats();
    TG_CHECK(s.events == 0 && s.dropped >= 1);
    tg_trace_begin(ch, "kept");
    tg_trace_end(ch);
    TG_CHECK(tg_trace_get_stats().events == 1);
    tg_trace_disable();
    tg_trace_clear();
}

/* tg_trace_directory: the configured directory while tracing is enabled
 * (a program probes it before a run), NULL when tracing is off. */
static void test_trace_directory(void)
{
    reset("{\"enable\":\"true\",\"directory\":\"" OUT_DIR "/probed/\"}");
    const char *dir = tg_trace_directory();
    TG_CHECK(dir && !strcmp(dir, OUT_DIR "/probed/"));
    reset("{\"enable\":\"false\",\"directory\":\"" OUT_DIR "/probed/\"}");
    TG_CHECK(tg_trace_directory() == NULL);
    tg_trace_disable();
}

/* What fd 2 receives while `flush` runs, into buf. */
static void stderr_of_flush(char *buf, size_t cap)
{
    const char *path = OUT_DIR "/stderr.txt";
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    TG_CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    TG_CHECK_OK(tg_trace_flush());
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* A channel named in TILEGRAPH_TRACE that nothing registers records
 * nothing (issue 32, item 27). It cannot be refused when the variable is
 * read, since an application may register its channel later; when the
 * trace is written it is certain, and one warning names it and the
 * channels there are. The library's own channels are never unknown. */
static void test_unknown_channel_warned(void)
{
    tg_trace_disable();
    tg_trace_clear();
    setenv("TILEGRAPH_TRACE",
           "{\"enable\":\"true\",\"directory\":\"" OUT_DIR
           "/unknown\",\"channels\":[\"t.app\",\"t.typo\",\"comms\"]}",
           1);
    TG_CHECK_OK(tg_trace_configure_env());
    char msg[1024];
    TG_CHECK(tg_trace_unknown_channels(msg, sizeof msg) == 2); /* t.app not yet registered */
    tg_trace_channel *app = tg_trace_channel_get("t.app");     /* registered after the variable */
    TG_CHECK(tg_trace_channel_enabled(app));
    tg_trace_instant(app, "event");
    TG_CHECK(tg_trace_unknown_channels(msg, sizeof msg) == 1);
    TG_CHECK(strstr(msg, "trace channel 't.typo' is named") && !strstr(msg, "'comms'"));
    TG_CHECK(strstr(msg, "the channels are compile, engine, data, comms") && strstr(msg, "t.app"));
    char err[2048];
    stderr_of_flush(err, sizeof err);
    TG_CHECK(strstr(err, "tilegraph: warning: trace channel 't.typo'") != NULL);
    stderr_of_flush(err, sizeof err); /* once */
    TG_CHECK(err[0] == '\0');
    /* every channel, or only known ones: nothing to say */
    reset("{\"enable\":\"true\",\"directory\":\"" OUT_DIR
          "/unknown\",\"channels\":[\"t.app\",\"engine\"]}");
    TG_CHECK(tg_trace_unknown_channels(msg, sizeof msg) == 0 && msg[0] == '\0');
    reset("{\"enable\":\"true\",\"directory\":\"" OUT_DIR
          "/unknown\",\"channels\":[\"*\",\"t.typo\"]}");
    TG_CHECK(tg_trace_unknown_channels(msg, sizeof msg) == 0);
    TG_CHECK_OK(tg_trace_shutdown());
    /* the only channel named, misspelt: nothing was ever enabled, and the
     * warning still comes (and again after a shutdown: a new configuration) */
    setenv("TILEGRAPH_TRACE",
           "{\"enable\":\"true\",\"directory\":\"" OUT_DIR "/unknown\",\"channels\":[\"enginee\"]}",
           1);
    TG_CHECK_OK(tg_trace_configure_env());
    TG_CHECK(!tg_trace_is_on());
    stderr_of_flush(err, sizeof err);
    TG_CHECK(strstr(err, "trace channel 'enginee' is named") != NULL);
    unsetenv("TILEGRAPH_TRACE");
    TG_CHECK_OK(tg_trace_shutdown());
}

int main(void)
{
    TG_RUN(test_nesting);
    TG_RUN(test_channels);
    TG_RUN(test_series);
    TG_RUN(test_heatmap);
    TG_RUN(test_config_errors);
    TG_RUN(test_trace_directory);
    TG_RUN(test_threads);
    TG_RUN(test_thread_tracks);
    TG_RUN(test_chrome_export);
    TG_RUN(test_intern);
    TG_RUN(test_unknown_channel_warned);
    return tg_test_finish();
}
