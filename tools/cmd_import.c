/* tools/cmd_import.c - `tilegraph import FILE.onnx`: the model as tilegraph
 * sees it: inputs and outputs with shapes, parameters, ops by type, and the
 * top-level scopes --split and --stages work with. It builds the graph, so
 * an op or attribute the importer cannot map is reported here first. */
#include "cli.h"

#include "tilegraph/onnx.h"

#include <string.h>

typedef struct count {
    const char *name;
    size_t len; /* of the name's counted prefix */
    int n;
    int64_t elements;
} count;

/* Count `name` (only its first `len` chars) in list; returns its slot. */
static count *tally(count *list, int *n, int cap, const char *name, size_t len)
{
    for (int i = 0; i < *n; i++)
        if (list[i].len == len && !strncmp(list[i].name, name, len))
            return &list[i];
    if (*n >= cap)
        return NULL;
    list[*n] = (count){name, len, 0, 0};
    return &list[(*n)++];
}

/* A model input or output (k of them) as the file declares it: fixed sizes,
 * dynamic ones by their names ("batch", "Addlogits_dim_1"; "?" unnamed);
 * for an output also the shape the build at --batch-size gave (`built`,
 * NULL if none), which is what the names stand for. */
static void print_value(const tg_onnx_model *m, int k, bool output, const tg_tensor *built,
                        bool json, bool first)
{
    tg_onnx_value v = output ? tg_onnx_output(m, k) : tg_onnx_input(m, k);
    tg_shape b = built ? tg_tensor_shape(built) : tg_shape_of(0, NULL);
    if (json) {
        printf("%s{\"name\":\"%s\",\"dtype\":\"%s\",\"shape\":[", first ? "" : ",", v.name,
               v.dtype);
        for (int d = 0; d < v.ndim; d++)
            printf("%s%lld", d ? "," : "", (long long)v.dim[d]);
        printf("],\"dim_names\":[");
        for (int d = 0; d < v.ndim; d++)
            printf("%s\"%s\"", d ? "," : "", tg_onnx_dim_name(m, output, k, d));
        printf("]");
        if (built) {
            printf(",\"built_shape\":[");
            for (int d = 0; d < b.ndim; d++)
                printf("%s%lld", d ? "," : "", (long long)b.dim[d]);
            printf("]");
        }
        printf("}");
        return;
    }
    printf("  %-6s %-24s %-7s [", output ? "output" : "input", v.name, v.dtype);
    bool symbolic = false;
    for (int d = 0; d < v.ndim; d++) {
        const char *name = tg_onnx_dim_name(m, output, k, d);
        if (v.dim[d] >= 0)
            printf("%s%lld", d ? ", " : "", (long long)v.dim[d]);
        else
            printf("%s%s", d ? ", " : "", *name ? name : "?");
        symbolic |= v.dim[d] < 0;
    }
    printf("]");
    if (built && (symbolic || v.ndim < 0)) {
        char shape[96];
        printf(" (built: %s)", tg_shape_str(b, shape, sizeof shape));
    }
    printf("\n");
}

/* Parameters by top-level scope ("layer3.0.conv1.weight" -> "layer3"). */
static void print_params(tg_graph *g, bool json, bool list)
{
    count scopes[256];
    int n_scopes = 0, n_params = 0;
    int64_t elements = 0;
    if (json)
        printf(",\"parameters\":[");
    for (int i = 0; i < tg_graph_tensor_count(g); i++) {
        tg_tensor *t = tg_graph_tensor(g, i);
        if (!tg_tensor_is_param(t))
            continue;
        const char *name = tg_tensor_name(t);
        int64_t numel = tg_shape_numel(tg_tensor_shape(t));
        char shape[96];
        tg_shape_str(tg_tensor_shape(t), shape, sizeof shape);
        if (json)
            printf("%s{\"name\":\"%s\",\"shape\":\"%s\"}", n_params ? "," : "", name, shape);
        else if (list)
            printf("  %-40s %s\n", name, shape);
        n_params++;
        elements += numel;
        count *c = tally(scopes, &n_scopes, 256, name, strcspn(name, "./"));
        if (c) {
            c->n++;
            c->elements += numel;
        }
    }
    if (json) {
        printf("],\"parameter_count\":%d,\"parameter_elements\":%lld,\"scopes\":[", n_params,
               (long long)elements);
        for (int i = 0; i < n_scopes; i++)
            printf("%s{\"name\":\"%.*s\",\"parameters\":%d,\"elements\":%lld}", i ? "," : "",
                   (int)strcspn(scopes[i].name, "./"), scopes[i].name, scopes[i].n,
                   (long long)scopes[i].elements);
        printf("]");
        return;
    }
    printf("parameters: %d tensors, %lld elements (%.2f M)\n", n_params, (long long)elements,
           (double)elements / 1e6);
    printf("scopes (for --split NAME, in order):\n");
    for (int i = 0; i < n_scopes; i++)
        printf("  %-24.*s %3d parameters %12lld elements\n", (int)strcspn(scopes[i].name, "./"),
               scopes[i].name, scopes[i].n, (long long)scopes[i].elements);
}

static void print_ops(const tg_onnx_model *m, bool json)
{
    count ops[256];
    int n = 0;
    for (int i = 0; i < tg_onnx_node_count(m); i++) {
        const char *op = tg_onnx_node_op(m, i);
        count *c = tally(ops, &n, 256, op, strlen(op));
        if (c)
            c->n++;
    }
    printf(json ? ",\"ops\":{" : "ops: %d nodes\n", tg_onnx_node_count(m));
    for (int i = 0; i < n; i++)
        printf(json ? "%s\"%s\":%d" : "%s  %-20s %d\n", json ? (i ? "," : "") : "", ops[i].name,
               ops[i].n);
    if (json)
        printf("}");
}

static int import_model(const char *path, int64_t batch, bool json, bool list)
{
    tg_onnx_model *m = NULL;
    tg_graph *g = NULL;
    tg_onnx_build_config c = {.batch = batch};
    tg_onnx_outputs io;
    double t0 = cli_now();
    tg_status s = tg_onnx_load(path, &m);
    if (s == TG_OK) {
        g = tg_graph_create();
        tg_graph_set_training(g, false);
        s = tg_onnx_build(m, g, &c, &io);
    }
    double ms = (cli_now() - t0) * 1e3;
    if (s != TG_OK) {
        fprintf(stderr, "tilegraph import: %s\n", tg_error_message());
        tg_graph_destroy(g);
        tg_onnx_model_destroy(m);
        return 1;
    }
    if (json)
        printf("{\"file\":\"%s\",\"opset\":%d,\"producer\":\"%s\",\"import_ms\":%.1f,\"inputs\":[",
               path, tg_onnx_opset(m), tg_onnx_producer(m), ms);
    else
        printf("%s: opset %d, produced by %s, imported in %.1f ms\n", path, tg_onnx_opset(m),
               *tg_onnx_producer(m) ? tg_onnx_producer(m) : "an unnamed tool", ms);
    for (int i = 0; i < tg_onnx_input_count(m); i++)
        print_value(m, i, false, NULL, json, i == 0);
    if (json)
        printf("],\"outputs\":[");
    for (int i = 0; i < tg_onnx_output_count(m); i++)
        print_value(m, i, true, i < io.n_outputs ? io.outputs[i] : NULL, json, i == 0);
    if (json)
        printf("]");
    print_params(g, json, list);
    print_ops(m, json);
    if (json)
        printf(",\"graph_nodes\":%d}\n", tg_graph_tensor_count(g));
    else
        printf("graph: %d tilegraph nodes for batch %lld\n", tg_graph_tensor_count(g),
               (long long)batch);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
    return 0;
}

int cmd_import(int argc, char **argv)
{
    int64_t batch = 1;
    bool json = false, list = false;
    cli_flag flags[] = {
        {"--batch-size", CLI_INT, &batch, "N", "size of a dynamic batch dimension", 1, 1e6, NULL},
        {"--params", CLI_BOOL, &list, NULL, "list every parameter with its shape", 1, 0, NULL},
        {"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0, NULL},
    };
    cli_command cmd = {"import",
                       "Show an ONNX model as tilegraph imports it.",
                       "tilegraph import FILE.onnx [--batch-size N] [--params] [--json]",
                       "Prints the inputs and outputs with their shapes, the parameters (named "
                       "as in the file:\nPyTorch's state_dict names) by top-level scope, and the "
                       "ops by type. The scopes are\nwhat --split takes. Any op or attribute the "
                       "importer cannot map is reported, all at once.\n"
                       "Example:\n  tilegraph import resnet18.onnx --batch-size 32\n"
                       "  tilegraph train --model resnet18.onnx --data synthetic --split layer3.0",
                       flags,
                       (int)(sizeof flags / sizeof flags[0])};
    const char *path = NULL;
    /* the file is the one positional argument */
    char *rest[16];
    int n_rest = 0;
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] != '-' && !path && (i == 0 || strcmp(argv[i - 1], "--batch-size") != 0))
            path = argv[i];
        else if (n_rest < 16)
            rest[n_rest++] = argv[i];
    }
    int r = cli_parse(&cmd, n_rest, rest);
    if (r)
        return r > 0 ? 0 : 2;
    if (!path) {
        fprintf(stderr, "tilegraph import: give the ONNX file: %s\n", cmd.usage);
        return 2;
    }
    return import_model(path, batch, json, list);
}
