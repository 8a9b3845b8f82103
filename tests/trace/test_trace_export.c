/* tests/trace/test_trace_export.c - one Chrome trace of a replicated,
 * pipelined run: host steps and every (replica, device) track, each event
 * with its required fields, begin/end pairs nested, host steps linked to the
 * device steps they caused; exports from several threads at once each
 * land in the process's list of exported files once.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"

#include "core/arena.h"
#include "core/json.h"
#include "core/rng.h"
#include "trace/trace_internal.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"
#include "tilegraph/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void run_replicated_pipeline(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 4, &opt, &mg));
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    tg_options_set(o, "executionStrategy", "pipelined");
    tg_options_set(o, "stages", "B1,B2|B3,B4");
    tg_options_set(o, "replicationFactor", "2");
    tg_options_set(o, "Training.gradientAccumulation", "4");
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    int64_t n = s ? tg_session_samples_per_run(s, mg.images) : 0;
    float *img = calloc((size_t)n * 784, sizeof(float));
    int32_t *lab = calloc((size_t)n, sizeof(int32_t));
    for (int k = 0; s && k < 3; k++) {
        tg_session_write(s, mg.images, img, (size_t)n * 784 * sizeof(float));
        tg_session_write(s, mg.labels, lab, (size_t)n * sizeof(int32_t));
        TG_CHECK_OK(tg_session_run(s));
    }
    tg_session_destroy(s); /* writes the export */
    free(img);
    free(lab);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static const char *str(const tg_json *ev, const char *key)
{
    const tg_json *v = tg_json_get(ev, key);
    return v && v->type == TG_JSON_STRING ? v->string : NULL;
}

static bool num(const tg_json *ev, const char *key, double *out)
{
    const tg_json *v = tg_json_get(ev, key);
    if (!v || v->type != TG_JSON_NUMBER)
        return false;
    *out = v->number;
    return true;
}

static void test_export_of_a_replicated_pipeline(void)
{
    char dir[] = "/tmp/tg_trace_export_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    char config[256];
    snprintf(config, sizeof config, "{\"enable\":\"true\",\"directory\":\"%s\"}", dir);
    TG_CHECK_OK(tg_trace_configure(config, "test"));
    run_replicated_pipeline();
    char path[512];
    snprintf(path, sizeof path, "%s/tilegraph-%d-training.trace.json", dir, (int)getpid());
    size_t len = 0;
    char *text = tg_test_read_file(path, &len);
    TG_CHECK(text != NULL);
    tg_arena *arena = tg_arena_create(1 << 20);
    tg_json *root = NULL;
    if (text)
        TG_CHECK_OK(tg_json_parse(arena, text, len, path, &root));
    const tg_json *events = root ? tg_json_get(root, "traceEvents") : NULL;
    TG_CHECK(events && events->type == TG_JSON_ARRAY && events->count > 0);
    bool named_replica[2] = {0}, named_device[2][2] = {{0}};
    int x_steps[2][2] = {{0}}, host_steps = 0, depth[64] = {0};
    for (size_t i = 0; events && i < events->count; i++) {
        const tg_json *ev = events->items[i];
        const char *ph = str(ev, "ph"), *name = str(ev, "name");
        double pid = -1, tid = -1, ts = -1, dur = -1;
        bool has_pid = num(ev, "pid", &pid), has_tid = num(ev, "tid", &tid);
        if (!ph || !name || !has_pid || (!has_tid && strcmp(ph, "M") != 0)) {
            tg_test_fail(__FILE__, __LINE__, "event %zu lacks name, ph, pid or tid", i);
            continue;
        }
        if (strcmp(ph, "M") != 0 && !num(ev, "ts", &ts))
            tg_test_fail(__FILE__, __LINE__, "event %zu (%s) has no ts", i, name);
        if (strcmp(ph, "X") == 0) {
            if (!num(ev, "dur", &dur) || dur < 0)
                tg_test_fail(__FILE__, __LINE__, "complete event %zu (%s) has no dur", i, name);
            int r = (int)pid - 2, d = (int)tid - 1;
            if (r >= 0 && r < 2 && d >= 0 && d < 2)
                x_steps[r][d]++;
        }
        if (strcmp(ph, "B") == 0 || strcmp(ph, "E") == 0) {
            int t = (int)tid & 63;
            depth[t] += strcmp(ph, "B") == 0 ? 1 : -1;
            TG_CHECK(depth[t] >= 0); /* never an end before its begin */
            if (strcmp(ph, "B") == 0 && strcmp(name, "host step") == 0)
                host_steps++;
        }
        if (strcmp(ph, "M") == 0) {
            const tg_json *args = tg_json_get(ev, "args");
            const char *value = args ? str(args, "name") : NULL;
            if (value && strncmp(value, "replica ", 8) == 0 && pid >= 2 && pid < 4)
                named_replica[(int)pid - 2] = true;
            if (value && strncmp(value, "device ", 7) == 0 && pid >= 2 && pid < 4 && tid >= 1 &&
                tid < 3)
                named_device[(int)pid - 2][(int)tid - 1] = true;
        }
    }
    for (int t = 0; t < 64; t++)
        TG_CHECK(depth[t] == 0); /* every begin has its end */
    TG_CHECK(host_steps == 3);
    for (int r = 0; r < 2; r++) {
        TG_CHECK(named_replica[r]);
        for (int d = 0; d < 2; d++) {
            TG_CHECK(named_device[r][d]);
            /* two recorded host steps: 4 forwards, 4 backwards and an update each */
            TG_CHECK(x_steps[r][d] >= 2 * 9);
        }
    }
    tg_arena_destroy(arena);
    free(text);
    tg_trace_shutdown();
    tg_test_remove_dir(dir);
}

/* The engine options trace.* switch host tracing on like TILEGRAPH_TRACE. */
static void test_trace_from_engine_options(void)
{
    char dir[] = "/tmp/tg_trace_options_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 2, NULL, &mg));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "trace.enable", "true"));
    TG_CHECK_OK(tg_options_set(o, "trace.directory", dir));
    TG_CHECK_OK(tg_options_set(o, "trace.channels", "engine"));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    float img[2 * 784] = {0};
    if (s) {
        tg_session_write(s, mg.images, img, sizeof img);
        TG_CHECK_OK(tg_session_run(s));
    }
    tg_session_destroy(s);
    char path[256];
    snprintf(path, sizeof path, "%s/tilegraph-%d-inference.trace.json", dir, (int)getpid());
    TG_CHECK(access(path, R_OK) == 0);
    /* a channel that records nothing is refused when set, naming the channels */
    TG_CHECK(tg_options_set(o, "trace.channels", "engine,not a channel") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "compile|engine|data|comms") != NULL);
    TG_CHECK(tg_options_set(o, "trace.channels", "engine,nosuch") == TG_ERR_CONFIG);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    tg_trace_shutdown();
    tg_test_remove_dir(dir);
}

typedef struct export_job {
    char path[160];
    tg_status status;
} export_job;

static void *export_three_times(void *arg)
{
    export_job *j = arg;
    for (int k = 0; k < 3 && j->status == TG_OK; k++)
        j->status = tg_trace_write(j->path);
    return NULL;
}

/* Sessions on two threads export at once (the list of exported files is
 * process-wide): each path is listed once, in full. */
static void test_exports_from_two_threads(void)
{
    char dir[] = "/tmp/tg_trace_threads_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    export_job jobs[2];
    pthread_t t[2];
    int before = tg_trace_exported_count();
    for (int i = 0; i < 2; i++) {
        snprintf(jobs[i].path, sizeof jobs[i].path, "%s/thread%d.trace.json", dir, i);
        jobs[i].status = TG_OK;
        TG_CHECK(pthread_create(&t[i], NULL, export_three_times, &jobs[i]) == 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        TG_CHECK_OK(jobs[i].status);
    }
    TG_CHECK(tg_trace_exported_count() == before + 2);
    for (int i = 0; i < 2; i++) {
        int found = 0;
        for (int k = before; k < before + 2; k++)
            found += tg_trace_exported_path(k) && !strcmp(tg_trace_exported_path(k), jobs[i].path);
        if (found != 1)
            tg_test_fail(__FILE__, __LINE__, "'%s' is listed %d times", jobs[i].path, found);
    }
    tg_test_remove_dir(dir);
}

int main(void)
{
    TG_RUN(test_exports_from_two_threads);
    TG_RUN(test_export_of_a_replicated_pipeline);
    TG_RUN(test_trace_from_engine_options);
    return tg_test_finish();
}
