/* tests/onnx/test_onnx_errors.c - bad input to the ONNX importer: each
 * fault gets a clear error naming the file, the node and the fault, and
 * nothing crashes. The models are built in memory with protobuf-c and then
 * broken on purpose; a deterministic mutation loop over a real export
 * checks that corrupt bytes are refused or imported, never a crash.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "tilegraph/onnx.h"
#include "tilegraph/session.h"

#include "core/alloc.h"
#include "onnx/onnx_internal.h"
#include "runtime/interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURES TG_SOURCE_DIR "/tests/onnx/fixtures/"

/* ---- building models ------------------------------------------------------ */

typedef struct model_parts {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto nodes[4], *node_ptrs[4];
    char *ins[4][3], *outs[4][1];
    Onnx__ValueInfoProto in, out, *in_ptrs[1], *out_ptrs[1];
    Onnx__TypeProto in_type;
    Onnx__TypeProto__Tensor in_tensor;
    Onnx__TensorShapeProto in_shape;
    Onnx__TensorShapeProto__Dimension dims[2], *dim_ptrs[2];
    Onnx__TensorProto init, *init_ptrs[1];
    int64_t init_dims[2];
    float init_data[6];
    Onnx__StringStringEntryProto ext[1], *ext_ptrs[1];
    Onnx__AttributeProto attr, *attr_ptrs[1];
    int64_t pads[4];
} model_parts;

/* x [2, 3] -> Relu chain of n nodes -> y, opset 13. */
static void make_model(model_parts *p, int n_nodes)
{
    memset(p, 0, sizeof *p);
    onnx__model_proto__init(&p->model);
    onnx__graph_proto__init(&p->graph);
    onnx__operator_set_id_proto__init(&p->opset);
    p->opset.domain = "";
    p->opset.has_version = 1;
    p->opset.version = 13;
    p->opsets[0] = &p->opset;
    p->model.n_opset_import = 1;
    p->model.opset_import = p->opsets;
    p->model.has_ir_version = 1;
    p->model.ir_version = 7;
    p->model.graph = &p->graph;
    static char *names[] = {"x", "h1", "h2", "h3", "y"};
    for (int k = 0; k < n_nodes; k++) {
        Onnx__NodeProto *nd = &p->nodes[k];
        onnx__node_proto__init(nd);
        nd->op_type = "Relu";
        nd->name = k == 0 ? "/layer1/Relu" : "/layer2/Relu";
        p->ins[k][0] = names[k];
        p->outs[k][0] = k == n_nodes - 1 ? "y" : names[k + 1];
        nd->n_input = 1;
        nd->input = p->ins[k];
        nd->n_output = 1;
        nd->output = p->outs[k];
        p->node_ptrs[k] = nd;
    }
    p->graph.n_node = (size_t)n_nodes;
    p->graph.node = p->node_ptrs;
    onnx__value_info_proto__init(&p->in);
    onnx__type_proto__init(&p->in_type);
    onnx__type_proto__tensor__init(&p->in_tensor);
    onnx__tensor_shape_proto__init(&p->in_shape);
    for (int d = 0; d < 2; d++) {
        onnx__tensor_shape_proto__dimension__init(&p->dims[d]);
        p->dims[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        p->dims[d].dim_value = d ? 3 : 2;
        p->dim_ptrs[d] = &p->dims[d];
    }
    p->in_shape.n_dim = 2;
    p->in_shape.dim = p->dim_ptrs;
    p->in_tensor.has_elem_type = 1;
    p->in_tensor.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    p->in_tensor.shape = &p->in_shape;
    p->in_type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    p->in_type.tensor_type = &p->in_tensor;
    p->in.name = "x";
    p->in.type = &p->in_type;
    p->in_ptrs[0] = &p->in;
    p->graph.n_input = 1;
    p->graph.input = p->in_ptrs;
    onnx__value_info_proto__init(&p->out);
    p->out.name = "y";
    p->out_ptrs[0] = &p->out;
    p->graph.n_output = 1;
    p->graph.output = p->out_ptrs;
}

/* An initializer "w" [2, 3] with raw data of `bytes` bytes. */
static void add_initializer(model_parts *p, size_t bytes)
{
    onnx__tensor_proto__init(&p->init);
    p->init.name = "w";
    p->init.has_data_type = 1;
    p->init.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    p->init_dims[0] = 2;
    p->init_dims[1] = 3;
    p->init.n_dims = 2;
    p->init.dims = p->init_dims;
    p->init.has_raw_data = 1;
    p->init.raw_data.data = (uint8_t *)p->init_data;
    p->init.raw_data.len = bytes;
    p->init_ptrs[0] = &p->init;
    p->graph.n_initializer = 1;
    p->graph.initializer = p->init_ptrs;
}

/* Pack into a heap buffer and load it as `name`. */
static tg_status load_parts(model_parts *p, const char *name, tg_onnx_model **m)
{
    size_t n = onnx__model_proto__get_packed_size(&p->model);
    uint8_t *buf = malloc(n + 1);
    onnx__model_proto__pack(&p->model, buf);
    tg_status s = tg_onnx_load_buffer(buf, n, name, m);
    free(buf);
    return s;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

/* The load fails with `code` and a message holding each of the strings. */
static void expect_error(tg_status got, tg_status code, const char *a, const char *b, const char *c,
                         int line)
{
    const char *msg = tg_error_message();
    if (got != code)
        tg_test_fail(__FILE__, line, "got %s, expected %s: %s", tg_status_name(got),
                     tg_status_name(code), msg);
    const char *want[] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (want[i] && !strstr(msg, want[i]))
            tg_test_fail(__FILE__, line, "message lacks '%s': %s", want[i], msg);
}

#define EXPECT(got, code, a, b, c) expect_error(got, code, a, b, c, __LINE__)

/* ---- tests ---------------------------------------------------------------- */

static void test_good_model_loads(void)
{
    model_parts p;
    make_model(&p, 2);
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(load_parts(&p, "good.onnx", &m));
    TG_CHECK(m && tg_onnx_node_count(m) == 2);
    tg_onnx_model_destroy(m);
}

static void test_missing_truncated_and_wrong_files(void)
{
    tg_onnx_model *m = NULL;
    EXPECT(tg_onnx_load("/nonexistent/model.onnx", &m), TG_ERR_IO, "/nonexistent/model.onnx", NULL,
           NULL);
    /* a PNG is not a model */
    const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    EXPECT(tg_onnx_load_buffer(png, sizeof png, "picture.onnx", &m), TG_ERR_FORMAT, "picture.onnx",
           "not an ONNX model", NULL);
    /* an empty file parses as an empty message: no graph */
    EXPECT(tg_onnx_load_buffer("", 0, "empty.onnx", &m), TG_ERR_FORMAT, "empty.onnx", "no graph",
           NULL);
    /* a real export cut in half */
    FILE *f = fopen(FIXTURES "tiny_cnn.onnx", "rb");
    uint8_t *buf = malloc(1 << 20);
    size_t n = f ? fread(buf, 1, 1 << 20, f) : 0;
    if (f)
        fclose(f);
    TG_CHECK(n > 1000);
    EXPECT(tg_onnx_load_buffer(buf, n / 2, "half.onnx", &m), TG_ERR_FORMAT, "half.onnx",
           "truncated or corrupt", NULL);
    TG_CHECK(m == NULL);
    free(buf);
}

static void test_opset(void)
{
    model_parts p;
    make_model(&p, 1);
    p.opset.version = 5;
    tg_onnx_model *m = NULL;
    EXPECT(load_parts(&p, "old.onnx", &m), TG_ERR_UNSUPPORTED, "old.onnx", "opset 5", "6 to 21");
    p.opset.version = 22;
    EXPECT(load_parts(&p, "new.onnx", &m), TG_ERR_UNSUPPORTED, "opset 22", NULL, NULL);
    /* the version as the file gives it, not cut to an int ("opset 0") */
    p.opset.version = (int64_t)1 << 62;
    EXPECT(load_parts(&p, "huge.onnx", &m), TG_ERR_UNSUPPORTED, "opset 4611686018427387904", NULL,
           NULL);
    p.opset.version = -3;
    EXPECT(load_parts(&p, "negative.onnx", &m), TG_ERR_UNSUPPORTED, "opset -3", NULL, NULL);
    for (int v = 6; v <= 21; v++) {
        p.opset.version = v;
        TG_CHECK_OK(load_parts(&p, "any.onnx", &m));
        TG_CHECK(m && tg_onnx_opset(m) == v);
        tg_onnx_model_destroy(m);
        m = NULL;
    }
    p.opset.domain = "ai.onnx.ml";
    EXPECT(load_parts(&p, "ml.onnx", &m), TG_ERR_FORMAT, "no default-domain", NULL, NULL);
}

/* Two default-domain opset entries ("" and "ai.onnx" are one domain) would
 * leave the ops' semantics to whichever entry the reader kept. */
static void test_two_default_opsets(void)
{
    model_parts p;
    make_model(&p, 1);
    Onnx__OperatorSetIdProto second;
    onnx__operator_set_id_proto__init(&second);
    second.domain = "ai.onnx";
    second.has_version = 1;
    second.version = 9;
    Onnx__OperatorSetIdProto *both[2] = {&p.opset, &second};
    p.model.opset_import = both;
    p.model.n_opset_import = 2;
    tg_onnx_model *m = NULL;
    EXPECT(load_parts(&p, "twice.onnx", &m), TG_ERR_FORMAT, "twice.onnx", "opset 13", "opset 9");
    TG_CHECK(m == NULL);
}

static void test_unsupported_ops_listed_at_once(void)
{
    model_parts p;
    make_model(&p, 3);
    p.nodes[0].op_type = "Foo";
    p.nodes[1].op_type = "Bar";
    p.nodes[2].op_type = "Foo";
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(load_parts(&p, "ops.onnx", &m));
    EXPECT(tg_onnx_check_ops(m), TG_ERR_UNSUPPORTED, "2 unsupported op types",
           "Foo (node "
           "'/layer1/Relu')",
           "Supported: Conv");
    TG_CHECK(strstr(tg_error_message(), "Bar") != NULL);
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    EXPECT(tg_onnx_build(m, g, NULL, &io), TG_ERR_UNSUPPORTED, "Foo", "Bar", NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

static void test_size_mismatch(void)
{
    model_parts p;
    make_model(&p, 1);
    add_initializer(&p, 20); /* 6 floats need 24 bytes */
    tg_onnx_model *m = NULL;
    EXPECT(load_parts(&p, "size.onnx", &m), TG_ERR_FORMAT, "initializer w", "24 bytes", "20 bytes");
    p.init_dims[1] = -3;
    EXPECT(load_parts(&p, "neg.onnx", &m), TG_ERR_FORMAT, "initializer w", "dimension 1", NULL);
}

/* A model whose initializer w (6 floats) is external data at `loc`. */
static void make_external_model(model_parts *p, const char *loc)
{
    make_model(p, 1);
    add_initializer(p, 0);
    p->init.has_raw_data = 0;
    p->init.has_data_location = 1;
    p->init.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    onnx__string_string_entry_proto__init(&p->ext[0]);
    p->ext[0].key = "location";
    p->ext[0].value = (char *)loc;
    p->ext_ptrs[0] = &p->ext[0];
    p->init.n_external_data = 1;
    p->init.external_data = p->ext_ptrs;
}

static void test_external_data(void)
{
    char dir[] = "/tmp/tg_onnx_ext_XXXXXX";
    TG_CHECK(TG_MKDTEMP(dir) != NULL);
    model_parts p;
    make_external_model(&p, "weights.bin");
    size_t n = onnx__model_proto__get_packed_size(&p.model);
    uint8_t *buf = malloc(n + 256); /* room for the longer location below */
    onnx__model_proto__pack(&p.model, buf);
    char path[256], data[256];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    snprintf(data, sizeof data, "%s/weights.bin", dir);
    write_file(path, buf, n);
    tg_onnx_model *m = NULL;
    EXPECT(tg_onnx_load(path, &m), TG_ERR_IO, path, "weights.bin", "beside the model");
    /* present but short: 16 bytes for 24 */
    write_file(data, p.init_data, 16);
    EXPECT(tg_onnx_load(path, &m), TG_ERR_FORMAT, "initializer w", "16 bytes", NULL);
    /* right size: loads, and the values come through */
    float w[6] = {1, 2, 3, 4, 5, 6};
    write_file(data, w, sizeof w);
    TG_CHECK_OK(tg_onnx_load(path, &m));
    TG_CHECK(m && tg_onnx_float_elements(m) == 6);
    tg_onnx_model_destroy(m);
    m = NULL;
    /* a location that leaves the directory is refused */
    p.ext[0].value = "../../etc/passwd";
    onnx__model_proto__pack(&p.model, buf);
    write_file(path, buf, onnx__model_proto__get_packed_size(&p.model));
    EXPECT(tg_onnx_load(path, &m), TG_ERR_FORMAT, "leaves the model's directory", NULL, NULL);
    /* and from memory there is no directory at all */
    p.ext[0].value = "weights.bin";
    EXPECT(load_parts(&p, "mem.onnx", &m), TG_ERR_UNSUPPORTED, "external data", NULL, NULL);
    free(buf);
    unlink(path);
    unlink(data);
    rmdir(dir);
}

/* Issue 32 item 26: invalid models that loaded silently, and numbers in
 * messages that misled. */

/* Two initializers of one name: whichever the reader kept would win. */
static void test_duplicate_initializers(void)
{
    model_parts p;
    make_model(&p, 1);
    add_initializer(&p, 24);
    Onnx__TensorProto *two[2] = {&p.init, &p.init};
    p.graph.initializer = two;
    p.graph.n_initializer = 2;
    tg_onnx_model *m = NULL;
    EXPECT(load_parts(&p, "dup.onnx", &m), TG_ERR_FORMAT, "dup.onnx", "initializer 'w'", "twice");
    TG_CHECK(m == NULL);
}

/* Two nodes writing one tensor: its readers would see either. */
static void test_two_writers(void)
{
    model_parts p;
    make_model(&p, 3);
    p.outs[1][0] = "h1"; /* node 1 writes h1, which node 0 wrote */
    p.ins[2][0] = "h1";
    tg_onnx_model *m = NULL;
    EXPECT(load_parts(&p, "writers.onnx", &m), TG_ERR_FORMAT, "writers.onnx", "'h1'",
           "written by node 0");
    TG_CHECK(m == NULL);
}

/* A name that is not UTF-8 is shown escaped, never echoed raw. */
static void test_non_utf8_names(void)
{
    model_parts p;
    make_model(&p, 1);
    p.nodes[0].name = "bad\xff\xfename";
    tg_onnx_model *m = NULL;
    EXPECT(load_parts(&p, "utf.onnx", &m), TG_ERR_FORMAT, "utf.onnx", "bad\\xff\\xfename",
           "not UTF-8");
    TG_CHECK(strchr(tg_error_message(), 0xff) == NULL);
    make_model(&p, 1);
    p.ins[0][0] = "x\xc3"; /* a cut two-byte sequence */
    p.in.name = "x\xc3";
    EXPECT(load_parts(&p, "utf2.onnx", &m), TG_ERR_FORMAT, "x\\xc3", "not UTF-8", NULL);
}

/* A directory given as the model or as a test tensor is named as one, not
 * measured ("9223372036854775807 bytes"). */
static void test_directory_named(void)
{
    char dir[] = "/tmp/tg_onnx_dir_XXXXXX";
    TG_CHECK(TG_MKDTEMP(dir) != NULL);
    tg_onnx_model *m = NULL;
    tg_status s = tg_onnx_load(dir, &m);
    TG_CHECK(s != TG_OK && strstr(tg_error_message(), "directory") != NULL);
    TG_CHECK(strstr(tg_error_message(), "9223372036854775807") == NULL);
    tg_onnx_data d;
    s = tg_onnx_data_read_file(dir, &d);
    TG_CHECK(s != TG_OK && strstr(tg_error_message(), "directory") != NULL);
    TG_CHECK(strstr(tg_error_message(), "9223372036854775807") == NULL);
    rmdir(dir);
}

/* A declared input dim over 2^32 is shown as declared, not cut to 32 bits
 * (the tensor is refused as too large). */
static void test_huge_dims_shown_whole(void)
{
    model_parts p;
    make_model(&p, 1);
    p.dims[1].dim_value = ((int64_t)1 << 40) + 5;
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(load_parts(&p, "huge.onnx", &m));
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    tg_status s = tg_onnx_build(m, g, NULL, &io);
    TG_CHECK(s != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "1099511627781") != NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

/* A pooling window of 2^31 is refused naming that number, not a wrapped
 * "kernel -2147483648". */
static void test_huge_kernel_shown_whole(void)
{
    model_parts p;
    make_model(&p, 1);
    p.nodes[0].op_type = "MaxPool";
    p.dims[0].dim_value = 1;
    p.dims[1].dim_value = 4; /* x [1, 4]: fed as [N, C, L] below */
    Onnx__TensorShapeProto__Dimension third;
    onnx__tensor_shape_proto__dimension__init(&third);
    third.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    third.dim_value = 8;
    Onnx__TensorShapeProto__Dimension *dims[3] = {&p.dims[0], &p.dims[1], &third};
    p.in_shape.dim = dims;
    p.in_shape.n_dim = 3;
    int64_t k = (int64_t)1 << 31;
    onnx__attribute_proto__init(&p.attr);
    p.attr.name = "kernel_shape";
    p.attr.has_type = 1;
    p.attr.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    p.attr.n_ints = 1;
    p.attr.ints = &k;
    p.attr_ptrs[0] = &p.attr;
    p.nodes[0].n_attribute = 1;
    p.nodes[0].attribute = p.attr_ptrs;
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(load_parts(&p, "kernel.onnx", &m));
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    TG_CHECK(tg_onnx_build(m, g, NULL, &io) != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "2147483648") != NULL);
    TG_CHECK(strstr(tg_error_message(), "-2147483648") == NULL);
    TG_CHECK(strstr(tg_error_message(), "at least") == NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

/* Every external-data error names the model's file, not only the tensor. */
static void test_external_errors_name_model(void)
{
    char dir[] = "/tmp/tg_onnx_extp_XXXXXX";
    TG_CHECK(TG_MKDTEMP(dir) != NULL);
    model_parts p;
    make_external_model(&p, "weights.bin");
    onnx__string_string_entry_proto__init(&p.ext[0]);
    Onnx__StringStringEntryProto entries[2], *ptrs[2] = {&entries[0], &entries[1]};
    onnx__string_string_entry_proto__init(&entries[0]);
    onnx__string_string_entry_proto__init(&entries[1]);
    entries[0].key = "location";
    entries[0].value = "weights.bin";
    entries[1].key = "offset";
    entries[1].value = "-5";
    p.init.external_data = ptrs;
    p.init.n_external_data = 2;
    size_t n = onnx__model_proto__get_packed_size(&p.model);
    uint8_t *buf = malloc(n);
    onnx__model_proto__pack(&p.model, buf);
    char path[256], data[256];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    snprintf(data, sizeof data, "%s/weights.bin", dir);
    write_file(path, buf, n);
    float w[6] = {0};
    write_file(data, w, sizeof w);
    tg_onnx_model *m = NULL;
    EXPECT(tg_onnx_load(path, &m), TG_ERR_FORMAT, path, "offset '-5'", "initializer w");
    free(buf);
    unlink(path);
    unlink(data);
    rmdir(dir);
}

/* make_external_model written to dir/name. */
static void write_external_model(const char *dir, const char *name, const char *loc)
{
    model_parts p;
    make_external_model(&p, loc);
    size_t n = onnx__model_proto__get_packed_size(&p.model);
    uint8_t *buf = malloc(n);
    onnx__model_proto__pack(&p.model, buf);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, buf, n);
    free(buf);
}

/* Issue 32, items 21 and 24: a FIFO as the model or as its external data
 * is refused at once, naming it (it used to block forever waiting for a
 * writer); external data reached through a symbolic link to a file outside
 * the model's directory is refused without saying anything about that
 * file (it used to be read into the weight, or its size shown); a link
 * that stays inside the directory still loads. alarm(): a regression fails
 * instead of hanging the suite. */
static void test_external_fifo_and_symlink(void)
{
    alarm(30);
    char dir[] = "/tmp/tg_onnx_fifo_XXXXXX";
    TG_CHECK(TG_MKDTEMP(dir) != NULL);
    char path[512], data[512], link[512], fifo[512], outside[512];
    tg_onnx_model *m = NULL;
    /* the model itself a FIFO */
    snprintf(fifo, sizeof fifo, "%s/f.onnx", dir);
    TG_CHECK(mkfifo(fifo, 0600) == 0);
    EXPECT(tg_onnx_load(fifo, &m), TG_ERR_IO, fifo, "is a FIFO", "not a regular file");
    TG_CHECK(m == NULL);
    /* so is a TensorProto file (the conformance tests' inputs) */
    tg_onnx_data d;
    TG_CHECK(tg_onnx_data_read_file(fifo, &d) != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "FIFO") != NULL);
    unlink(fifo);
    /* external data a FIFO */
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    snprintf(data, sizeof data, "%s/weights.bin", dir);
    write_external_model(dir, "m.onnx", "weights.bin");
    TG_CHECK(mkfifo(data, 0600) == 0);
    EXPECT(tg_onnx_load(path, &m), TG_ERR_IO, "initializer w", "weights.bin", "is a FIFO");
    unlink(data);
    /* a link beside the model to a file outside its directory */
    snprintf(outside, sizeof outside, "%s.outside", dir);
    float secret[6] = {7, 7, 7, 7, 7, 7};
    write_file(outside, secret, sizeof secret);
    snprintf(link, sizeof link, "%s/innocent.bin", dir);
    TG_CHECK(symlink(outside, link) == 0);
    write_external_model(dir, "m.onnx", "innocent.bin");
    EXPECT(tg_onnx_load(path, &m), TG_ERR_FORMAT, "innocent.bin", "outside the model's directory",
           "inside the model's directory");
    TG_CHECK(m == NULL);
    TG_CHECK(strstr(tg_error_message(), outside) == NULL); /* the target is not named */
    TG_CHECK(strstr(tg_error_message(), "bytes") == NULL); /* nor its size */
    unlink(link);
    /* /etc/passwd, of unknown size: nothing of it shows */
    TG_CHECK(symlink("/etc/passwd", link) == 0);
    EXPECT(tg_onnx_load(path, &m), TG_ERR_FORMAT, "innocent.bin", "outside", NULL);
    TG_CHECK(strstr(tg_error_message(), "bytes") == NULL);
    TG_CHECK(strstr(tg_error_message(), "passwd") == NULL);
    unlink(link);
    /* a link inside the directory to a file inside it: read as before */
    float w[6] = {1, 2, 3, 4, 5, 6};
    write_file(data, w, sizeof w);
    TG_CHECK(symlink("weights.bin", link) == 0);
    TG_CHECK_OK(tg_onnx_load(path, &m));
    TG_CHECK(m && tg_onnx_float_elements(m) == 6);
    tg_onnx_model_destroy(m);
    m = NULL;
    /* and the plain file too */
    write_external_model(dir, "m.onnx", "weights.bin");
    TG_CHECK_OK(tg_onnx_load(path, &m));
    TG_CHECK(m && tg_onnx_float_elements(m) == 6);
    tg_onnx_model_destroy(m);
    unlink(link);
    unlink(data);
    unlink(path);
    unlink(outside);
    rmdir(dir);
    alarm(0);
}

static void test_cycle_and_dangling_input(void)
{
    model_parts p;
    make_model(&p, 3);
    /* node 0 reads what node 2 makes: x -> ... cycle h1 <- h3 */
    p.ins[0][0] = "h3";
    p.outs[2][0] = "h3";
    p.out.name = "h3";
    tg_onnx_model *m = NULL;
    EXPECT(load_parts(&p, "cycle.onnx", &m), TG_ERR_FORMAT, "cycle.onnx",
           "node '/layer1/Relu' (Relu)", "cycle");
    make_model(&p, 2);
    p.ins[1][0] = "nowhere";
    EXPECT(load_parts(&p, "dangle.onnx", &m), TG_ERR_FORMAT, "node '/layer2/Relu' (Relu)",
           "'nowhere'", "dangling");
    make_model(&p, 1);
    p.out.name = "missing";
    EXPECT(load_parts(&p, "out.onnx", &m), TG_ERR_FORMAT, "graph output 'missing'", NULL, NULL);
}

static void test_unsupported_attribute_names_node(void)
{
    model_parts p;
    make_model(&p, 1);
    onnx__attribute_proto__init(&p.attr);
    p.attr.name = "alpha";
    p.attr.has_type = 1;
    p.attr.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    p.attr.has_f = 1;
    p.attr.f = 0.5f;
    p.attr_ptrs[0] = &p.attr;
    p.nodes[0].n_attribute = 1;
    p.nodes[0].attribute = p.attr_ptrs;
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(load_parts(&p, "attr.onnx", &m));
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    EXPECT(tg_onnx_build(m, g, NULL, &io), TG_ERR_UNSUPPORTED, "attr.onnx",
           "node '/layer1/Relu' (Relu)", "attribute 'alpha'");
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

static void test_dynamic_batch_needs_size(void)
{
    model_parts p;
    make_model(&p, 1);
    p.dims[0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    p.dims[0].dim_param = "batch";
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(load_parts(&p, "dyn.onnx", &m));
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    EXPECT(tg_onnx_build(m, g, NULL, &io), TG_ERR_UNSUPPORTED, "input 'x'", "dynamic", NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 5};
    TG_CHECK_OK(tg_onnx_build(m, g, &c, &io));
    TG_CHECK(io.n_outputs == 1 && tg_tensor_shape(io.outputs[0]).dim[0] == 5);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

/* Flip, drop and overwrite bytes of a real export: every result is either
 * an error with a message or a model that builds or fails cleanly. */
static void test_mutations_never_crash(void)
{
    FILE *f = fopen(FIXTURES "tiny_cnn.onnx", "rb");
    uint8_t *orig = malloc(1 << 20), *buf = malloc(1 << 20);
    size_t n = f ? fread(orig, 1, 1 << 20, f) : 0;
    if (f)
        fclose(f);
    uint64_t state = 12345;
    int loaded = 0, refused = 0;
    for (int iter = 0; iter < 400 && n; iter++) {
        memcpy(buf, orig, n);
        size_t len = n;
        for (int k = 0; k < 1 + iter % 8; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(state >> 33) % len;
            if (k % 3 == 2)
                len = at + 1; /* truncate */
            else
                buf[at] ^= (uint8_t)(1u << ((state >> 20) & 7));
        }
        tg_onnx_model *m = NULL;
        if (tg_onnx_load_buffer(buf, len, "mutant.onnx", &m) != TG_OK) {
            TG_CHECK(strstr(tg_error_message(), "mutant.onnx") != NULL);
            refused++;
            continue;
        }
        loaded++;
        tg_graph *g = tg_graph_create();
        tg_onnx_build_config c = {.batch = 2};
        tg_onnx_outputs io;
        if (tg_onnx_build(m, g, &c, &io) != TG_OK)
            TG_CHECK(tg_error_message()[0] != '\0');
        tg_graph_destroy(g);
        tg_onnx_model_destroy(m);
    }
    TG_CHECK(loaded > 0 && refused > 0);
    free(orig);
    free(buf);
}

/* x: uint8 [2, 3] -> Cast(to) -> Relu -> y: 8-bit input becomes f32 with the
 * same values (seed 003's --eight-bit-io exports Cast then Normalize); a
 * cast of it to an integer type is refused, naming the node. */
static tg_status build_u8(int to, tg_graph *g, tg_onnx_outputs *io)
{
    model_parts p;
    make_model(&p, 2);
    p.in_tensor.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    p.nodes[0].op_type = "Cast";
    p.nodes[0].name = "/Cast";
    onnx__attribute_proto__init(&p.attr);
    p.attr.name = "to";
    p.attr.has_type = 1;
    p.attr.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    p.attr.has_i = 1;
    p.attr.i = to;
    p.attr_ptrs[0] = &p.attr;
    p.nodes[0].n_attribute = 1;
    p.nodes[0].attribute = p.attr_ptrs;
    tg_onnx_model *m = NULL;
    tg_status s = load_parts(&p, "u8.onnx", &m);
    if (s == TG_OK)
        s = tg_onnx_build(m, g, NULL, io);
    tg_onnx_model_destroy(m);
    return s;
}

static void test_uint8_input_is_cast_exactly(void)
{
    static const int to[] = {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                             ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16};
    for (int k = 0; k < 2; k++) {
        tg_graph *g = tg_graph_create();
        tg_onnx_outputs io;
        TG_CHECK_OK(build_u8(to[k], g, &io));
        if (tg_graph_status(g) == TG_OK && io.n_inputs == 1 && io.n_outputs == 1) {
            TG_CHECK(tg_tensor_dtype(io.inputs[0]) == TG_U8);
            TG_CHECK(tg_tensor_dtype(io.outputs[0]) == TG_F32);
            tg_interp *ip = NULL;
            TG_CHECK_OK(tg_interp_create(g, 0, &ip));
            const double v[6] = {0, 1, 127, 128, 254, 255};
            memcpy(tg_interp_data(ip, io.inputs[0]), v, sizeof v);
            TG_CHECK_OK(tg_interp_run(ip, 0));
            for (int i = 0; ip && i < 6; i++)
                TG_CHECK(tg_interp_data(ip, io.outputs[0])[i] == v[i]);
            tg_interp_destroy(ip);
            /* the engine's kernel: the bytes in, the same values out */
            tg_session *s = NULL;
            TG_CHECK_OK(tg_session_create(g, NULL, &s));
            const uint8_t bytes[6] = {0, 1, 127, 128, 254, 255};
            float y[6] = {0};
            TG_CHECK_OK(tg_session_write(s, io.inputs[0], bytes, sizeof bytes));
            TG_CHECK_OK(tg_session_run(s));
            TG_CHECK_OK(tg_session_read(s, io.outputs[0], y, sizeof y));
            for (int i = 0; s && i < 6; i++)
                TG_CHECK(y[i] == (float)bytes[i]);
            tg_session_destroy(s);
        }
        tg_graph_destroy(g);
    }
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    /* the cast to int32 is taken; the float op after it names the type */
    EXPECT(build_u8(ONNX__TENSOR_PROTO__DATA_TYPE__INT32, g, &io), TG_ERR_DTYPE, "(Relu)",
           "input 'cast' is i32; this op takes f32", NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    EXPECT(build_u8(ONNX__TENSOR_PROTO__DATA_TYPE__STRING, g, &io), TG_ERR_UNSUPPORTED,
           "node '/Cast' (Cast)", "string", NULL);
    tg_graph_destroy(g);
}

/* A double or float16 input is an f32 tensor (computed in float32) and
 * the model's note names it; an input of another type is refused naming
 * the types taken. */
static void test_double_input_computed_in_f32(void)
{
    static const int types[] = {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE,
                                ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
                                ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT};
    static const char *const notes[] = {"input 'x' (double) computed in float32",
                                        "input 'x' (float16) computed in float32", ""};
    for (int k = 0; k < 3; k++) {
        model_parts p;
        make_model(&p, 1);
        p.in_tensor.elem_type = types[k];
        tg_onnx_model *m = NULL;
        TG_CHECK_OK(load_parts(&p, "f64.onnx", &m));
        if (!m)
            continue;
        TG_CHECK(!strcmp(tg_onnx_reduced_note(m), notes[k]));
        tg_graph *g = tg_graph_create();
        tg_onnx_outputs io;
        TG_CHECK_OK(tg_onnx_build(m, g, NULL, &io));
        TG_CHECK(io.n_inputs == 1 && tg_tensor_dtype(io.inputs[0]) == TG_F32);
        tg_graph_destroy(g);
        tg_onnx_model_destroy(m);
    }
    model_parts p;
    make_model(&p, 1);
    p.in_tensor.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(load_parts(&p, "bf16.onnx", &m));
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    EXPECT(tg_onnx_build(m, g, NULL, &io), TG_ERR_DTYPE, "input 'x' is bfloat16",
           "(float, double, float16, int64, int32, bool and uint8 inputs are taken)", NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

/* The exporter names a nested module by its dotted path below the module
 * holding it ("/m/model/layer3/layer3.0/..."): the scope is the module path
 * m/model/layer3/0, where --split m.model.layer3.0 looks. */
static void test_nested_scopes_collapse(void)
{
    static const char *const cases[][2] = {
        {"/m/model/layer3/layer3.0/Relu", "m/model/layer3/0/"},
        {"/layer3/layer3.0/Relu", "layer3/0/"},
        {"/m/encoder/layers.1/Relu", "m/encoder/layers/1/"},
    };
    for (int k = 0; k < 3; k++) {
        model_parts p;
        make_model(&p, 1);
        p.nodes[0].name = (char *)cases[k][0];
        tg_onnx_model *m = NULL;
        TG_CHECK_OK(load_parts(&p, "scopes.onnx", &m));
        tg_graph *g = tg_graph_create();
        tg_onnx_outputs io;
        TG_CHECK_OK(tg_onnx_build(m, g, NULL, &io));
        const char *name = io.n_outputs ? tg_tensor_name(io.outputs[0]) : "";
        size_t n = strlen(cases[k][1]);
        if (strncmp(name, cases[k][1], n) != 0)
            tg_test_fail(__FILE__, __LINE__, "%s: op named '%s', expected under '%s'", cases[k][0],
                         name, cases[k][1]);
        tg_graph_destroy(g);
        tg_onnx_model_destroy(m);
    }
}

int main(void)
{
    int64_t live = tg_alloc_live_bytes();
    TG_RUN(test_good_model_loads);
    TG_RUN(test_missing_truncated_and_wrong_files);
    TG_RUN(test_opset);
    TG_RUN(test_two_default_opsets);
    TG_RUN(test_duplicate_initializers);
    TG_RUN(test_two_writers);
    TG_RUN(test_non_utf8_names);
    TG_RUN(test_directory_named);
    TG_RUN(test_huge_dims_shown_whole);
    TG_RUN(test_huge_kernel_shown_whole);
    TG_RUN(test_external_errors_name_model);
    TG_RUN(test_unsupported_ops_listed_at_once);
    TG_RUN(test_size_mismatch);
    TG_RUN(test_external_data);
    TG_RUN(test_external_fifo_and_symlink);
    TG_RUN(test_cycle_and_dangling_input);
    TG_RUN(test_unsupported_attribute_names_node);
    TG_RUN(test_dynamic_batch_needs_size);
    TG_RUN(test_uint8_input_is_cast_exactly);
    TG_RUN(test_double_input_computed_in_f32);
    TG_RUN(test_nested_scopes_collapse);
    TG_RUN(test_mutations_never_crash);
    tg_test_check_no_leak(live);
    return tg_test_finish();
}
