/* tests/core/test_options_engine.c - engine options (what
 * TILEGRAPH_ENGINE_OPTIONS and POPLAR_ENGINE_OPTIONS may set) versus the
 * rest, refused by name with the flag to use; and option messages that
 * quote what the user wrote (issue 17: W1 and the misleading messages).
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "core/error.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_engine_keys(void)
{
    TG_CHECK(tg_options_is_engine("autoReport.all"));
    TG_CHECK(tg_options_is_engine("debug.allowOutOfMemory"));
    TG_CHECK(tg_options_is_engine("profiler.includeFlopEstimates"));
    TG_CHECK(tg_options_is_engine("trace.enable"));
    TG_CHECK(tg_options_is_engine("monitor.enable")); /* --engine-option can switch it off */
    TG_CHECK(tg_options_is_engine("streamCallbacks.multiThreadMode")); /* Poplar's, too */
    TG_CHECK(!tg_options_is_engine("deviceIterations"));
    TG_CHECK(!tg_options_is_engine("autoReport")); /* the prefix needs its dot */
    TG_CHECK(!tg_options_is_engine(NULL));
}

/* The option table's flag column: each flag well formed ("--name" or "--name
 * value") and naming one option; a training option refused from the engine
 * options' text is refused with its flag, from the same column. (That every
 * flag is one the commands take: tests/tools/test_flag_rules.c.) */
static void test_flag_column(void)
{
    int flags = 0;
    TG_CHECK(tg_options_flag(NULL) == NULL && tg_options_flag("noSuchOption") == NULL);
    TG_CHECK(!strcmp(tg_options_flag("deviceIterations"), "--device-iterations"));
    TG_CHECK(!strcmp(tg_options_flag("TensorLocations.weight.onChip"), "--offload weights"));
    TG_CHECK(tg_options_flag("lossScalingGrowthInterval") == NULL);
    for (int i = 0; i < tg_options_count(); i++) {
        const char *k = tg_options_key(i), *f = tg_options_flag(k);
        if (!f)
            continue;
        flags++;
        TG_CHECK(!strncmp(f, "--", 2) && f[2] >= 'a' && f[2] <= 'z');
        TG_CHECK(strspn(f + 2, "abcdefghijklmnopqrstuvwxyz-") == strcspn(f + 2, " "));
        for (int j = 0; j < i; j++)
            if (tg_options_flag(tg_options_key(j)) &&
                !strcmp(tg_options_flag(tg_options_key(j)), f))
                tg_test_fail(__FILE__, __LINE__, "'%s' and '%s' both have the flag %s",
                             tg_options_key(j), k, f);
        if (tg_options_is_engine(k))
            continue;
        char json[160];
        snprintf(json, sizeof json, "{\"%s\":\"1\"}", k);
        tg_options *o = tg_options_create();
        TG_CHECK(tg_options_set_engine_json(o, json, "ENV") == TG_ERR_CONFIG);
        if (!strstr(tg_error_message(), f))
            tg_test_fail(__FILE__, __LINE__, "the refusal of %s does not name %s: %s", k, f,
                         tg_error_message());
        tg_options_destroy(o);
    }
    TG_CHECK(flags >= 30);
}

static void test_engine_json_refuses_training_options(void)
{
    tg_options *o = tg_options_create();
    TG_CHECK(tg_options_set_engine_json(o, "{\"autoReport.all\":\"true\",\"deviceIterations\":10}",
                                        "ENV") == TG_ERR_CONFIG);
    const char *m = tg_error_message();
    TG_CHECK(strstr(m, "ENV: 'deviceIterations' is not an engine option") != NULL);
    TG_CHECK(strstr(m, "--device-iterations") != NULL);
    /* nothing was applied, not even the valid key before it */
    TG_CHECK(tg_options_get_int(o, "autoReport.all") == 0);
    TG_CHECK(tg_options_set_engine_json(o, "{\"lossScalingGrowthInterval\":100}", "ENV") ==
             TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "--engine-option lossScalingGrowthInterval=VALUE") != NULL);
    TG_CHECK(tg_options_set_engine_json(o, "{\"autoReport.al\":1}", "ENV") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "unknown option 'autoReport.al'") != NULL);
    TG_CHECK_OK(tg_options_set_engine_json(o, "{\"autoReport.all\":\"true\"}", "ENV"));
    TG_CHECK(tg_options_get_int(o, "autoReport.all") == 1);
    tg_options_destroy(o);
}

/* The session reads both variables; a training option in either fails it. */
static void test_session_reads_both_variables(void)
{
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 2, NULL, &mg));
    tg_session *s = NULL;
    setenv("POPLAR_ENGINE_OPTIONS", "{\"deviceIterations\":\"10\"}", 1);
    TG_CHECK(tg_session_create(mg.graph, NULL, &s) == TG_ERR_CONFIG && !s);
    TG_CHECK(strstr(tg_error_message(), "POPLAR_ENGINE_OPTIONS: 'deviceIterations'") != NULL);
    unsetenv("POPLAR_ENGINE_OPTIONS");
    setenv("TILEGRAPH_ENGINE_OPTIONS", "{\"replicationFactor\":\"2\"}", 1);
    TG_CHECK(tg_session_create(mg.graph, NULL, &s) == TG_ERR_CONFIG && !s);
    TG_CHECK(strstr(tg_error_message(), "--replicas") != NULL);
    setenv("TILEGRAPH_ENGINE_OPTIONS", "{\"debug.checkNaN\":\"false\"}", 1);
    TG_CHECK_OK(tg_session_create(mg.graph, NULL, &s));
    unsetenv("TILEGRAPH_ENGINE_OPTIONS");
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
}

static void test_messages_quote_the_input(void)
{
    tg_options *o = tg_options_create();
    TG_CHECK(tg_options_set_json(o, "{\"lossScalingFactor\": 1e-320}", "o.json") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "1e-320 is outside") != NULL);
    TG_CHECK(tg_options_set_json(o, "{\"randomSeed\": 1e23}", "o.json") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "1e+23 is outside") != NULL);
    TG_CHECK(!strstr(tg_error_message(), "9.99999"));
    TG_CHECK(tg_options_set(o, "randomSeed", "99999999999999999999") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "is outside") != NULL);
    TG_CHECK(tg_options_set(o, "randomSeed", "abc") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "'abc' is not an integer") != NULL);
    TG_CHECK(tg_options_set(o, "lossScalingFactor", "x1") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "'x1' is not a number") != NULL);
    tg_options_destroy(o);
}

/* The fuzzer's seeds (fuzz/corpus/options) replayed: the first byte picks
 * the reader, as in fuzz/fuzz_options.c; engine text never sets anything but
 * engine options, and a refusal says why. */
static void test_fuzz_corpus_replay(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz/corpus/options", TG_SOURCE_DIR);
    DIR *d = opendir(path);
    TG_CHECK(d != NULL);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char f[1300], text[4096];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        FILE *fp = fopen(f, "rb");
        size_t len = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
        if (fp)
            fclose(fp);
        if (len < 1)
            continue;
        text[len] = '\0';
        tg_options *o = tg_options_create();
        tg_error_clear();
        tg_status st = text[0] % 3 == 0   ? tg_options_set_json(o, text + 1, e->d_name)
                       : text[0] % 3 == 1 ? tg_options_set_engine_json(o, text + 1, e->d_name)
                                          : TG_OK;
        if (text[0] % 3 == 1)
            for (int i = 0; i < tg_options_count(); i++) {
                const char *k = tg_options_key(i);
                TG_CHECK(tg_options_is_engine(k) ||
                         !strcmp(tg_options_get_string(o, k), tg_options_default(i)));
            }
        TG_CHECK(st == TG_OK || tg_error_message()[0] != '\0');
        tg_options_destroy(o);
        n++;
    }
    if (d)
        closedir(d);
    TG_CHECK(n >= 5);
}

int main(void)
{
    unsetenv("TILEGRAPH_ENGINE_OPTIONS");
    unsetenv("POPLAR_ENGINE_OPTIONS");
    TG_RUN(test_engine_keys);
    TG_RUN(test_flag_column);
    TG_RUN(test_engine_json_refuses_training_options);
    TG_RUN(test_session_reads_both_variables);
    TG_RUN(test_messages_quote_the_input);
    TG_RUN(test_fuzz_corpus_replay);
    return tg_test_finish();
}
