/* tools/cmd_check.c - `tilegraph check`: one step of a model as compiled
 * (with the same device options as train) against the reference, tensor
 * by tensor (tilegraph/verify.h). Prints the first tensor beyond its
 * tolerance with its neighbours, or every tensor with --all, and the
 * end-to-end distances; exits 1 when a tensor is beyond tolerance. */
#include "cli.h"
#include "device_flags.h"

#include "tilegraph/models.h"
#include "tilegraph/optim.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct check_args {
    const char *model, *input, *stem, *optimizer, *freeze;
    int64_t batch, classes, data_seed;
    double lr, tolerance;
    bool inference, json, all;
} check_args;

/* xorshift64*: the synthetic batch, the same for a seed on every machine */
static uint64_t next_random(uint64_t *x)
{
    *x ^= *x >> 12, *x ^= *x << 25, *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1Dull;
}

static double uniform(uint64_t *x)
{
    return (double)(next_random(x) >> 11) * 0x1p-53;
}

/* Random images (uniform in [-1, 1), or any byte for 8-bit input) and labels. */
static tg_status feed(tg_session *s, const tg_model_graph *mg, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    int64_t runs = tg_session_samples_per_run(s, mg->images) / tg_tensor_shape(mg->images).dim[0];
    int64_t n = runs * (int64_t)tg_shape_numel(tg_tensor_shape(mg->images));
    bool bytes = tg_tensor_dtype(mg->images) == TG_U8;
    void *images = malloc((size_t)n * (bytes ? 1 : sizeof(float)));
    /* a label per sample, or per pixel for a segmentation model ([B, H, W]) */
    int64_t n_labels = mg->labels ? runs * tg_shape_numel(tg_tensor_shape(mg->labels)) : 0;
    int32_t *labels = malloc((size_t)(n_labels + 1) * sizeof(int32_t));
    tg_status st = images && labels ? TG_OK : tg_error_set(TG_ERR_NOMEM, "check: out of memory");
    for (int64_t i = 0; st == TG_OK && i < n; i++) {
        if (bytes)
            ((uint8_t *)images)[i] = (uint8_t)(next_random(&x) >> 56);
        else
            ((float *)images)[i] = (float)(2 * uniform(&x) - 1);
    }
    for (int64_t i = 0; st == TG_OK && i < n_labels; i++)
        labels[i] = (int32_t)(next_random(&x) % (uint64_t)mg->input.classes);
    if (st == TG_OK)
        st = tg_session_write(s, mg->images, images, (size_t)n * (bytes ? 1 : sizeof(float)));
    if (st == TG_OK && mg->labels)
        st = tg_session_write(s, mg->labels, labels, (size_t)n_labels * sizeof(int32_t));
    free(images);
    free(labels);
    return st;
}

static const char *verdict_name(tg_verify_verdict v)
{
    return v == TG_VERIFY_OK ? "ok" : v == TG_VERIFY_BEYOND ? "BEYOND" : "skipped";
}

static void figure(char *buf, size_t cap, double x)
{
    if (x < 0)
        snprintf(buf, cap, "-");
    else if (isinf(x))
        snprintf(buf, cap, "inf");
    else
        snprintf(buf, cap, "%.2e", x);
}

static void print_rows(const tg_verify_report *r, int from, int to)
{
    int name_w = 6, op_w = 2, block_w = 5;
    for (int i = from; i < to; i++) {
        const tg_verify_row *w = tg_verify_row_at(r, i);
        int a = (int)strlen(w->name), b = (int)strlen(w->op), c = (int)strlen(w->block);
        name_w = a > name_w ? (a < 48 ? a : 48) : name_w;
        op_w = b > op_w ? b : op_w;
        block_w = c > block_w ? c : block_w;
    }
    printf("  %5s  %-*s  %-*s  %-*s  %10s  %9s  %9s  %9s  %9s  %s\n", "#", name_w, "tensor", op_w,
           "op", block_w, "block", "elements", "error", "relative", "tolerance", "drift",
           "verdict");
    for (int i = from; i < to; i++) {
        const tg_verify_row *w = tg_verify_row_at(r, i);
        char e[24], rel[24], tol[24], drift[24];
        figure(e, sizeof e, w->verdict == TG_VERIFY_SKIPPED ? -1 : w->max_abs);
        figure(rel, sizeof rel, w->verdict == TG_VERIFY_SKIPPED ? -1 : w->max_rel);
        figure(tol, sizeof tol, w->verdict == TG_VERIFY_SKIPPED ? -1 : w->tolerance);
        figure(drift, sizeof drift, w->drift_rel);
        printf("  %5d  %-*.*s  %-*s  %-*s  %10lld  %9s  %9s  %9s  %9s  %s%s%s\n", i, name_w, name_w,
               w->name, op_w, w->op, block_w, w->block, (long long)w->elements, e, rel, tol, drift,
               verdict_name(w->verdict), w->note[0] ? ": " : "", w->note);
    }
}

static void print_text(const tg_verify_report *r, const check_args *a, double seconds)
{
    int n = tg_verify_rows(r), first = tg_verify_first_beyond(r);
    int beyond = tg_verify_count(r, TG_VERIFY_BEYOND);
    char took[32];
    printf("checked %d tensors in %s: %d within tolerance, %d beyond, %d skipped\n", n,
           cli_duration(seconds, took, sizeof took), tg_verify_count(r, TG_VERIFY_OK), beyond,
           tg_verify_count(r, TG_VERIFY_SKIPPED));
    tg_verify_summary sm = tg_verify_summary_of(r);
    char l[24], o[24], g[24], w[24];
    figure(l, sizeof l, sm.loss), figure(o, sizeof o, sm.outputs);
    figure(g, sizeof g, sm.gradients), figure(w, sizeof w, sm.weights);
    printf("end to end, the largest difference relative to the largest value: loss %s, "
           "outputs %s, gradients %s, weights after the update %s\n",
           l, o, g, w);
    if (tg_verify_limits(r)[0])
        printf("not compared: %s\n", tg_verify_limits(r));
    if (a->all) {
        print_rows(r, 0, n);
    } else if (first >= 0) {
        int from = first > 3 ? first - 3 : 0, to = first + 6 < n ? first + 6 : n;
        printf("\nthe first tensor beyond tolerance (#%d) and its neighbours, in graph order:\n",
               first);
        print_rows(r, from, to);
    }
    if (first >= 0) {
        const tg_verify_row *w0 = tg_verify_row_at(r, first);
        printf("\nFAILED: '%s' (%s) is %.3g from the reference on its own inputs (tolerance "
               "%.3g): a fast path computes it wrongly, or the tolerance is too tight "
               "(--tolerance, %g now; docs/numerics.md).\n",
               w0->name, w0->op, w0->max_abs, w0->tolerance, a->tolerance);
    } else {
        printf("ok: every tensor within tolerance\n");
    }
}

static void json_number(const char *key, double x, bool comma)
{
    if (x < 0 || !isfinite(x))
        printf("\"%s\":%s%s", key, x < 0 ? "null" : "\"inf\"", comma ? "," : "");
    else
        printf("\"%s\":%.6g%s", key, x, comma ? "," : "");
}

static void print_json(const tg_verify_report *r, const check_args *a, double seconds)
{
    tg_verify_summary sm = tg_verify_summary_of(r);
    printf("{\"model\":");
    cli_json_string(a->model);
    printf(",\"seconds\":%.3f,\"tensors\":%d,\"within\":%d,\"beyond\":%d,\"skipped\":%d,"
           "\"first_beyond\":%d,\"end_to_end\":{",
           seconds, tg_verify_rows(r), tg_verify_count(r, TG_VERIFY_OK),
           tg_verify_count(r, TG_VERIFY_BEYOND), tg_verify_count(r, TG_VERIFY_SKIPPED),
           tg_verify_first_beyond(r));
    json_number("loss", sm.loss, true), json_number("outputs", sm.outputs, true);
    json_number("gradients", sm.gradients, true), json_number("weights", sm.weights, false);
    printf("},\"not_compared\":");
    cli_json_string(tg_verify_limits(r));
    printf(",\"rows\":[");
    int n = tg_verify_rows(r), printed = 0;
    for (int i = 0; i < n; i++) {
        const tg_verify_row *w = tg_verify_row_at(r, i);
        if (!a->all && w->verdict != TG_VERIFY_BEYOND)
            continue;
        printf("%s{\"index\":%d,\"tensor\":", printed++ ? "," : "", i);
        cli_json_string(w->name);
        printf(",\"op\":");
        cli_json_string(w->op);
        printf(",\"block\":");
        cli_json_string(w->block);
        printf(",\"elements\":%lld,", (long long)w->elements);
        json_number("error", w->max_abs, true), json_number("relative", w->max_rel, true);
        json_number("tolerance", w->tolerance, true), json_number("drift", w->drift_rel, true);
        printf("\"verdict\":\"%s\",\"note\":", verdict_name(w->verdict));
        cli_json_string(w->note);
        putchar('}');
    }
    printf("]}\n");
}

static int check_model(const check_args *a, const device_args *dev)
{
    const tg_model_spec *m = NULL;
    tg_optimizer_kind kind;
    bool bad_kind = tg_optimizer_parse(a->optimizer, &kind) != TG_OK;
    if (bad_kind || tg_model_open(a->model, TG_LOSS_CROSS_ENTROPY, &m) != TG_OK) {
        fprintf(stderr, "tilegraph check: %s\n",
                bad_kind ? "--optimizer: unknown optimizer (sgd, adam, adamw or lamb)"
                         : tg_error_message());
        return bad_kind ? 2 : 1;
    }
    if (a->freeze && tg_model_set_freeze(m, a->freeze) != TG_OK) {
        fprintf(stderr, "tilegraph check: --freeze: %s\n", tg_error_message());
        tg_model_close(m);
        return 2;
    }
    tg_model_input in = tg_model_default_input(m);
    int bad = (a->input && tg_model_input_parse(a->input, &in) != TG_OK) ||
              (a->stem && tg_model_stem_parse(a->stem, &in) != TG_OK);
    if (bad) {
        fprintf(stderr, "tilegraph check: %s: %s\n", a->input ? "--input" : "--stem",
                tg_error_message());
        tg_model_close(m);
        return 2;
    }
    if (a->classes > 0)
        in.classes = (int)a->classes;
    tg_options *o = device_options(dev, "check", a->inference);
    if (!o) {
        tg_model_close(m);
        return 1;
    }
    tg_optimizer opt = cli_optimizer(kind, (float)a->lr, 0.0f);
    tg_model_graph mg = {0};
    tg_session *s = NULL;
    double t0 = cli_now();
    tg_status st = tg_model_graph_create_ex(m, (int)a->batch, a->inference ? NULL : &opt, &in, &mg);
    if (st == TG_OK)
        st = tg_session_create(mg.graph, o, &s);
    if (st == TG_OK) {
        tg_session_verify_set_factor(s, a->tolerance);
        st = feed(s, &mg, (uint64_t)a->data_seed);
    }
    if (st == TG_OK && !a->json)
        fprintf(stderr,
                "tilegraph check: %s, one %s step of batch %lld: the program, then the "
                "reference (double precision, reference kernels, NCHW)...\n",
                m->name, a->inference ? "inference" : "training", (long long)a->batch);
    if (st == TG_OK)
        st = tg_session_verify_next_run(s);
    if (st == TG_OK)
        st = tg_session_run(s);
    int status = 0;
    if (st != TG_OK) {
        fprintf(stderr, "tilegraph check: %s\n", tg_error_message());
        status = 1;
    } else {
        const tg_verify_report *r = tg_session_verify_report(s);
        if (a->json)
            print_json(r, a, cli_now() - t0);
        else
            print_text(r, a, cli_now() - t0);
        status = tg_verify_first_beyond(r) >= 0;
    }
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    tg_model_close(m);
    return status;
}

int cmd_check(int argc, char **argv)
{
    check_args a = {.model = "mnist-pipeline",
                    .optimizer = "sgd",
                    .batch = 4,
                    .lr = 0.05,
                    .tolerance = 32,
                    .data_seed = 1};
    device_args dev;
    device_args_defaults(&dev);
    cli_flag flags[64] = {
        {"--model", CLI_STRING, &a.model, "NAME", "model from the zoo, or an ONNX file (FILE.onnx)",
         1, 0, NULL},
        {"--batch-size", CLI_INT, &a.batch, "N", "samples per micro-batch", 1, 1e6, NULL},
        {"--optimizer", CLI_STRING, &a.optimizer, "NAME", "sgd, adam, adamw or lamb", 1, 0, NULL},
        {"--lr", CLI_FLOAT, &a.lr, "X", "learning rate of the step", 0, 1e6, NULL},
        {"--inference", CLI_BOOL, &a.inference, NULL, "check the inference program", 1, 0, NULL},
        {"--input", CLI_STRING, &a.input, "CxHxW", "input image shape (models that take any)", 1, 0,
         NULL},
        {"--classes", CLI_INT, &a.classes, "N", "class count (models that take any)", 1, 1e6, NULL},
        {"--stem", CLI_STRING, &a.stem, "KIND", "ResNets: imagenet, cifar or auto", 1, 0, NULL},
        {"--data-seed", CLI_INT, &a.data_seed, "N", "seed of the random batch", 0, 9e18, NULL},
        {"--tolerance", CLI_FLOAT, &a.tolerance, "X",
         "factor on every tolerance (debug.verifyTolerance)", 1e-3, 1e9, NULL},
        {"--all", CLI_BOOL, &a.all, NULL, "print every tensor, not only the first beyond", 1, 0,
         NULL},
        {"--json", CLI_BOOL, &a.json, NULL, "print JSON for scripts", 1, 0, NULL},
        {"--freeze", CLI_STRING, &a.freeze, "REGEX",
         "ONNX models: keep the float initializers whose names match fixed (as train's)", 1, 0,
         NULL},
    };
    int n = 13 + device_flags(&dev, flags + 13, (int)(sizeof flags / sizeof flags[0]) - 13);
    cli_command cmd = {
        "check",
        "Check one step of a model, as compiled, tensor by tensor against the reference.",
        "tilegraph check --model NAME [--batch-size N] [device options]",
        "The program runs one step with the device options given (layout, kernels, precision,\n"
        "recomputation, pipelining as train would), on a random batch. Every value it computes\n"
        "for the first micro-batch is then checked against the op's reference kernel in double\n"
        "precision on the same inputs; its tolerance is --tolerance x its magnitude x\n"
        "(2^-24 x sqrt(reduction length) + its storage type's roundoff). The whole graph also\n"
        "runs in the reference, and the drift of each value from it is shown. Exit code 1 when\n"
        "a tensor is beyond tolerance (docs/numerics.md).\n"
        "Example:\n  tilegraph check --model resnet18 --input 3x32x32 --batch-size 2\n"
        "  tilegraph check --model model.onnx --precision bf16.bf16 --all",
        flags,
        n};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    return check_model(&a, &dev);
}
