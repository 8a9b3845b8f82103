/* tests/onnx/test_onnx_frozen.c - which float initializers an import keeps
 * fixed (src/onnx/onnx_frozen.c): those a file's tilegraph.parameters list
 * leaves out, and those tg_onnx_build_config.freeze matches, become state
 * (no gradient, no optimizer state) under their names; batch norm running
 * statistics stay state; a bad or matchless pattern is refused by name.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "graph/node.h"

#include "tilegraph/models.h"
#include "tilegraph/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_cnn.onnx"

static tg_graph *build(const tg_onnx_model *m, const char *freeze, tg_status *st)
{
    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 2, .freeze = freeze};
    tg_onnx_outputs io;
    *st = tg_onnx_build(m, g, &c, &io);
    return g;
}

static bool is(tg_graph *g, const char *name, tg_role role)
{
    tg_tensor *t = tg_graph_find(g, name);
    return t && t->role == role;
}

static void test_freeze_pattern(void)
{
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(FIXTURE, &m));
    if (!m)
        return;
    tg_status st;
    tg_graph *g = build(m, "^layer1\\.|^conv1\\.", &st);
    TG_CHECK_OK(st);
    TG_CHECK(is(g, "layer1.0.conv1.weight", TG_ROLE_STATE));
    TG_CHECK(is(g, "conv1.weight", TG_ROLE_STATE));
    TG_CHECK(is(g, "layer2.0.conv1.weight", TG_ROLE_PARAM));
    TG_CHECK(is(g, "fc.weight", TG_ROLE_PARAM));
    TG_CHECK(is(g, "layer2.0.bn2.running_stats", TG_ROLE_STATE));
    tg_graph_destroy(g);

    g = build(m, "(", &st);
    TG_CHECK(st == TG_ERR_INVALID_ARG && strstr(tg_error_message(), "freeze pattern '('"));
    tg_graph_destroy(g);
    g = build(m, "^nothing$", &st);
    TG_CHECK(st == TG_ERR_NOT_FOUND &&
             strstr(tg_error_message(), "'^nothing$' matches no float initializer"));
    tg_graph_destroy(g);
    TG_CHECK(tg_onnx_check_freeze(m, "fc\\.bias") == TG_OK);
    TG_CHECK(tg_onnx_check_freeze(m, "fc\\.biass") == TG_ERR_NOT_FOUND);
    tg_onnx_model_destroy(m);
}

/* The file with metadata_props {tilegraph.parameters: list} appended: a
 * protobuf message's fields may be appended to its bytes (field 14 of
 * ModelProto, a StringStringEntryProto of key 1 and value 2). */
static tg_onnx_model *with_parameters(const char *list)
{
    FILE *f = fopen(FIXTURE, "rb");
    TG_CHECK(f != NULL);
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    const char *key = TG_ONNX_PARAMETERS_KEY;
    size_t k = strlen(key), v = strlen(list), entry = 2 + k + 2 + v;
    unsigned char *buf = malloc((size_t)n + 2 + entry);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    TG_CHECK(buf && got == (size_t)n && k < 128 && v < 128 && entry < 128);
    unsigned char *p = buf + n;
    *p++ = 14 << 3 | 2;
    *p++ = (unsigned char)entry;
    *p++ = 1 << 3 | 2;
    *p++ = (unsigned char)k;
    memcpy(p, key, k);
    p += k;
    *p++ = 2 << 3 | 2;
    *p++ = (unsigned char)v;
    memcpy(p, list, v);
    p += v;
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load_buffer(buf, (size_t)(p - buf), "tiny_cnn+parameters.onnx", &m));
    free(buf);
    return m;
}

static void test_parameters_list(void)
{
    tg_onnx_model *m = with_parameters("fc.weight\nfc.bias\nlayer2.0.conv2.weight");
    if (!m)
        return;
    tg_status st;
    tg_graph *g = build(m, NULL, &st);
    TG_CHECK_OK(st);
    TG_CHECK(is(g, "fc.weight", TG_ROLE_PARAM) && is(g, "fc.bias", TG_ROLE_PARAM));
    TG_CHECK(is(g, "layer2.0.conv2.weight", TG_ROLE_PARAM));
    TG_CHECK(is(g, "layer2.0.conv1.weight", TG_ROLE_STATE));
    TG_CHECK(is(g, "conv1.weight", TG_ROLE_STATE));
    TG_CHECK(is(g, "layer2.0.bn2.running_stats", TG_ROLE_STATE));
    tg_graph_destroy(g);
    /* a pattern freezes on top of the list */
    g = build(m, "^fc\\.bias$", &st);
    TG_CHECK_OK(st);
    TG_CHECK(is(g, "fc.bias", TG_ROLE_STATE) && is(g, "fc.weight", TG_ROLE_PARAM));
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

/* tg_model_set_freeze: ONNX specs only; the pattern is checked at once. */
static void test_model_set_freeze(void)
{
    const tg_model_spec *spec = NULL;
    TG_CHECK_OK(tg_model_open(FIXTURE, TG_LOSS_CROSS_ENTROPY, &spec));
    if (!spec)
        return;
    TG_CHECK(tg_model_set_freeze(spec, "^nope") == TG_ERR_NOT_FOUND);
    TG_CHECK_OK(tg_model_set_freeze(spec, "^layer1\\."));
    tg_model_close(spec);
    const tg_model_spec *zoo = tg_model_find("fashion-basic");
    TG_CHECK(zoo && tg_model_set_freeze(zoo, "x") == TG_ERR_INVALID_ARG &&
             strstr(tg_error_message(), "applies to an ONNX file"));
}

int main(void)
{
    TG_RUN(test_freeze_pattern);
    TG_RUN(test_parameters_list);
    TG_RUN(test_model_set_freeze);
    return tg_test_finish();
}
