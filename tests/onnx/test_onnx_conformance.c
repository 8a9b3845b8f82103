/* tests/onnx/test_onnx_conformance.c - ONNX's own backend test cases
 * (Debian's libonnx-testdata: data/{node,pytorch-converted,pytorch-operator,
 * simple}/<case>/model.onnx with test_data_set_N/{input,output}_K.pb).
 *
 * Every case whose ops the importer maps is built for inference, run on the
 * cpu target through the session API, and compared with the expected
 * outputs using ONNX's backend tolerances (numpy allclose, rtol 1e-3,
 * atol 1e-7, as onnx/backend/test/loader sets them). A case is skipped only
 * for a reason the importer states (an op, attribute or dtype it refuses),
 * and the skips are counted by reason. Any failure of a case the importer
 * accepted fails the test: a supported op must pass all of its cases.
 * Exits 77 (skipped) when the test data is not installed.
 *
 * It reports the cases by op (pass, fail, skip) and the skip reasons whole,
 * and checks docs/onnx.md's conformance section against that report:
 * `--markdown` prints it, `--update-docs` rewrites the section, and
 * `--verbose` names each skipped case with its reason. `--results FILE`
 * writes each case's outcome, a line "folder/case<TAB>pass|fail|skip<TAB>
 * reason", for tests/python/test_ort_conformance.py, which runs the same
 * cases on onnxruntime and prints the two runtimes side by side.
 *
 * TG_TEST_LABELS: onnx
 */
#include "tg_test.h"

#include "onnx_docs.h"
#include "onnx_run.h"

#include <dirent.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DATA_DIR "/usr/share/libonnx-testdata/data"
#define RTOL 1e-3
#define ATOL 1e-7
#define MAX_KINDS 1024

/* A reason (or an op) and the cases it counts; per op, how its cases went
 * (a case counts once for each op type its graph holds). */
typedef struct tally {
    char *text;
    int n, pass, fail, skip;
} tally;

static tally reasons[MAX_KINDS], ops[MAX_KINDS];
static int n_reasons, n_ops, passed, failed, skipped;

static tally *tally_of(tally *t, int *n, const char *text)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].text, text))
            return &t[i];
    if (*n == MAX_KINDS)
        return NULL;
    t[*n].text = strdup(text);
    return t[*n].text ? &t[(*n)++] : NULL;
}

/* The op types of the case being run (each once), from its protobuf, so
 * that a model the loader refuses is counted under its ops too. */
static char case_ops[64][80], case_name[256];
static int n_case_ops, case_opset;
static bool verbose;  /* --verbose: each case that does not pass, with its reason */
static FILE *results; /* --results FILE: each case's outcome, a line each */

static void read_case_ops(const char *path)
{
    n_case_ops = 0;
    case_opset = -1;
    size_t len = 0;
    uint8_t *buf = (uint8_t *)tg_test_read_file(path, &len);
    Onnx__ModelProto *m = buf && len ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
    free(buf);
    if (!m)
        return;
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const char *d = m->opset_import[k]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx"))
            case_opset = (int)m->opset_import[k]->version;
    }
    for (size_t k = 0; m->graph && k < m->graph->n_node; k++) {
        const Onnx__NodeProto *n = m->graph->node[k];
        char op[80];
        bool dflt = !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
        snprintf(op, sizeof op, "%s%s%s", dflt ? "" : n->domain, dflt ? "" : ".",
                 n->op_type ? n->op_type : "?");
        bool seen = false;
        for (int i = 0; i < n_case_ops && !seen; i++)
            seen = !strcmp(case_ops[i], op);
        if (!seen && n_case_ops < 64)
            snprintf(case_ops[n_case_ops++], sizeof case_ops[0], "%s", op);
    }
    onnx__model_proto__free_unpacked(m, NULL);
}

/* How the case went, counted under its ops (and its reason, when skipped;
 * a failure's reason goes to --results only). */
static void record(int outcome, const char *reason)
{
    *(outcome > 0 ? &passed : outcome < 0 ? &failed : &skipped) += 1;
    if (verbose && outcome == 0)
        printf("skip %s: %s\n", case_name, reason);
    if (results) {
        fprintf(results, "%s\t%s\t", case_name,
                outcome > 0   ? "pass"
                : outcome < 0 ? "fail"
                              : "skip");
        for (const char *c = reason ? reason : ""; *c; c++) /* one line, three fields */
            fputc(*c == '\n' || *c == '\t' ? ' ' : *c, results);
        fputc('\n', results);
    }
    if (reason && outcome == 0) {
        tally *r = tally_of(reasons, &n_reasons, reason);
        if (r)
            r->n++;
    }
    for (int i = 0; i < n_case_ops; i++) {
        tally *t = tally_of(ops, &n_ops, case_ops[i]);
        if (!t)
            continue;
        t->n++;
        *(outcome > 0 ? &t->pass : outcome < 0 ? &t->fail : &t->skip) += 1;
    }
}

/* "…: 2 unsupported op types: Abs (node ''), ..." -> "op not supported:
 * Abs, ..." (the op types, without the node names). */
static void skip_unsupported_ops(const char *msg)
{
    char text[512] = "op not supported: ";
    size_t used = strlen(text);
    const char *p = strstr(msg, "unsupported op type");
    p = p ? strchr(p, ':') : NULL;
    const char *end = p ? strstr(p, ". Supported:") : NULL;
    p = p ? p + 2 : NULL;
    for (int k = 0; p && p < end; k++) {
        size_t len = strcspn(p, " ");
        if (used < sizeof text)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s%.*s", k ? ", " : "",
                                     (int)len, p);
        p = strstr(p, "), ");
        p = p && p < end ? p + 3 : NULL;
    }
    record(0, text);
}

/* A message made one reason for all the cases it stands for: quoted tensor
 * names become '...' (each case has its own; an attribute's name stays),
 * nothing else changes. */
static void normalise(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *c = in; *c && o + 6 < cap;) {
        bool attr = c - in >= 10 && !strncmp(c - 10, "attribute ", 10);
        if (*c == '\'' && strchr(c + 1, '\'') && !attr) {
            c = strchr(c + 1, '\'') + 1;
            memcpy(out + o, "'...'", 5);
            o += 5;
        } else {
            out[o++] = *c++;
        }
    }
    out[o] = '\0';
}

/* The reason a load or build failure gives: "Conv: <the fault>" (the
 * node's op type and the message's tail), or the message without the file
 * name; an opset the loader refuses is named with its number. */
static void skip_build_failure(const char *msg)
{
    char text[1024], raw[1024];
    const char *op = strstr(msg, "' (");
    const char *fault = op ? strstr(op, "): ") : NULL;
    const char *file = strstr(msg, ".onnx: ");
    if (strstr(msg, "opset") && strstr(msg, "is not supported")) {
        snprintf(text, sizeof text, "opset %d (outside the opsets the importer reads)", case_opset);
        record(0, text);
        return;
    }
    if (op && fault)
        snprintf(raw, sizeof raw, "%.*s: %s", (int)(fault - op - 3), op + 3, fault + 3);
    else
        snprintf(raw, sizeof raw, "%s", file ? file + 7 : msg);
    normalise(raw, text, sizeof text);
    record(0, text);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Read <set>/<prefix>_K.pb for K = 0, 1, ... */
static int read_set(const char *set, const char *prefix, tg_onnx_data *d, int cap)
{
    int n = 0;
    for (; n < cap; n++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_%d.pb", set, prefix, n);
        if (!exists(path) || tg_onnx_data_read_file(path, &d[n]) != TG_OK)
            break;
    }
    return n;
}

static void to_float(tg_onnx_data *d)
{
    if (d->f || !d->i)
        return;
    d->f = tg_malloc((size_t)(d->n ? d->n : 1) * sizeof(float));
    for (int64_t k = 0; d->f && k < d->n; k++)
        d->f[k] = (float)d->i[k];
}

/* Whether float64 data holds a value float32 cannot (it was read as an
 * infinity): the importer computes float64 in float32, so such a case
 * cannot be run, only refused. (Some of pytorch-operator's cases hold
 * uninitialised doubles of 1e219 and the like.) */
static bool beyond_f32(const tg_onnx_data *d, int n)
{
    for (int k = 0; k < n; k++)
        for (int64_t j = 0; d[k].elem_type == 11 && d[k].f && j < d[k].n; j++)
            if (isinf(d[k].f[j]))
                return true;
    return false;
}

/* One data set: run and compare; a failure message in why ("" if none),
 * *refused when the importer refused the model (a reason, not a failure). */
static void run_set(const tg_onnx_model *m, const char *set, char *why, size_t cap, bool *refused)
{
    tg_onnx_data in[TG_ONNX_MAX_IO], want[TG_ONNX_MAX_IO], got[TG_ONNX_MAX_IO];
    int n_in = read_set(set, "input", in, TG_ONNX_MAX_IO);
    int n_want = read_set(set, "output", want, TG_ONNX_MAX_IO), n_got = 0;
    why[0] = '\0';
    int64_t batch = n_in && in[0].ndim ? in[0].dim[0] : 1;
    bool built = false;
    if (n_in != tg_onnx_input_count(m) || n_want != tg_onnx_output_count(m)) {
        snprintf(why, cap,
                 "test data of a type the tensor reader does not take (string, "
                 "sequence, optional, unsigned)");
        *refused = true;
        for (int k = 0; k < n_in; k++)
            tg_onnx_data_free(&in[k]);
        for (int k = 0; k < n_want; k++)
            tg_onnx_data_free(&want[k]);
        return;
    }
    if (beyond_f32(in, n_in) || beyond_f32(want, n_want)) {
        snprintf(why, cap, "float64 data beyond float32's range (float64 is computed in float32)");
        *refused = true;
        for (int k = 0; k < n_in; k++)
            tg_onnx_data_free(&in[k]);
        for (int k = 0; k < n_want; k++)
            tg_onnx_data_free(&want[k]);
        return;
    }
    tg_status s = onnx_run(m, batch, in, n_in, got, &n_got, &built);
    *refused = !built && (s == TG_ERR_UNSUPPORTED || s == TG_ERR_DTYPE);
    if (s != TG_OK)
        snprintf(why, cap, "%s", tg_error_message());
    else if (n_got != n_want)
        snprintf(why, cap, "%d outputs, expected %d", n_got, n_want);
    for (int k = 0; !why[0] && k < n_got; k++) {
        double worst = 0;
        to_float(&want[k]);
        if (want[k].n != got[k].n)
            snprintf(why, cap, "output %d has %lld values, expected %lld", k, (long long)got[k].n,
                     (long long)want[k].n);
        else if (!onnx_allclose(&got[k], &want[k], RTOL, ATOL, &worst))
            snprintf(why, cap, "output %d differs (worst excess over tolerance %g)", k, worst);
    }
    for (int k = 0; k < n_in; k++)
        tg_onnx_data_free(&in[k]);
    for (int k = 0; k < n_want; k++)
        tg_onnx_data_free(&want[k]);
    for (int k = 0; k < n_got; k++)
        tg_onnx_data_free(&got[k]);
}

/* Cases whose expected values come from random draws the importer's graph
 * cannot reproduce: Dropout and batch statistics in training mode. */
static const char *needs_training_mode(const tg_onnx_model *m, const char *name)
{
    if (strstr(name, "training_dropout") || strstr(name, "training_mode"))
        return "training-mode outputs (random masks or batch statistics; inference builds only)";
    /* numpy's generator drew the expected values: another one cannot match */
    static const char *const random_ops[] = {"Bernoulli",     "RandomUniformLike",
                                             "RandomUniform", "RandomNormalLike",
                                             "RandomNormal",  "Multinomial"};
    for (int i = 0; i < tg_onnx_node_count(m); i++)
        for (size_t k = 0; k < sizeof random_ops / sizeof random_ops[0]; k++)
            if (!strcmp(tg_onnx_node_op(m, i), random_ops[k]))
                return "random outputs (drawn by another generator than numpy's)";
    return NULL;
}

static void run_case(const char *dir, const char *name)
{
    char path[1024], why[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    snprintf(case_name, sizeof case_name, "%s/%s", strrchr(dir, '/') + 1, name);
    read_case_ops(path);
    tg_onnx_model *m = NULL;
    if (tg_onnx_load(path, &m) != TG_OK) {
        skip_build_failure(tg_error_message());
        return;
    }
    const char *training = needs_training_mode(m, name);
    if (tg_onnx_check_ops(m) != TG_OK || training) {
        if (training)
            record(0, training);
        else
            skip_unsupported_ops(tg_error_message());
        tg_onnx_model_destroy(m);
        return;
    }
    int sets = 0;
    bool ok = true, unsupported = false;
    for (int k = 0; ok && !unsupported; k++, sets++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_%d", dir, name, k);
        if (!exists(path))
            break;
        run_set(m, path, why, sizeof why, &unsupported);
        if (why[0] && !unsupported)
            ok = false;
    }
    if (unsupported) {
        skip_build_failure(why);
    } else if (ok && sets > 0) {
        record(1, NULL);
    } else {
        record(-1, why[0] ? why : "no test data");
        printf("FAILED %s/%s: %s\n", strrchr(dir, '/') + 1, name, why[0] ? why : "no test data");
    }
    tg_onnx_model_destroy(m);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        /* a directory of the suite gone missing would drop its cases silently */
        failed++;
        printf("FAILED %s: cannot open the directory: %s\n", dir, strerror(errno));
        return;
    }
    char *names[2048];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 2048;)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        run_case(dir, names[i]);
        free(names[i]);
    }
}

static int by_count(const void *a, const void *b)
{
    const tally *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->text, y->text);
}

static int by_text(const void *a, const void *b)
{
    return strcmp(((const tally *)a)->text, ((const tally *)b)->text);
}

/* A growing string for the markdown. */
typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) TG_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s)
            return;
        t->s = s, t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* The summary, the skip reasons by count and the cases by op, as the
 * markdown docs/onnx.md carries (a '|' in a reason is escaped). */
static void markdown(text *t)
{
    put(t, "%d passed, %d failed, %d skipped of %d cases.\n\n", passed, failed, skipped,
        passed + failed + skipped);
    put(t, "| cases | why they are skipped |\n| ---: | --- |\n");
    for (int i = 0; i < n_reasons; i++) {
        put(t, "| %d | ", reasons[i].n);
        for (const char *c = reasons[i].text; *c; c++)
            put(t, "%s%c", *c == '|' ? "\\" : "", *c);
        put(t, " |\n");
    }
    put(t, "\n| op | cases | pass | fail | skip |\n| --- | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n_ops; i++)
        put(t, "| %s | %d | %d | %d | %d |\n", ops[i].text, ops[i].n, ops[i].pass, ops[i].fail,
            ops[i].skip);
}

/* The passing cases when this was set; raise it as ops are added. A change
 * that makes cases skip (a reader refusing what it took) must not pass
 * quietly. */
#define MIN_PASSING 824

int main(int argc, char **argv)
{
    bool update = argc > 1 && !strcmp(argv[1], "--update-docs");
    bool print_md = argc > 1 && !strcmp(argv[1], "--markdown");
    verbose = argc > 1 && !strcmp(argv[1], "--verbose");
    const char *results_path = argc > 2 && !strcmp(argv[1], "--results") ? argv[2] : NULL;
    char results_tmp[1024];
    if (argc > 1 && !update && !print_md && !verbose && !results_path) {
        fprintf(stderr, "usage: %s [--update-docs | --markdown | --verbose | --results FILE]\n",
                argv[0]);
        return 2;
    }
    if (!exists(DATA_DIR "/node")) {
        printf("skipped: ONNX test data not installed (Debian package libonnx-testdata)\n");
        return 77;
    }
    if (results_path) { /* written whole, then renamed: a reader never sees half */
        snprintf(results_tmp, sizeof results_tmp, "%s.tmp", results_path);
        results = fopen(results_tmp, "w");
        if (!results) {
            fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], results_tmp, strerror(errno));
            return 2;
        }
    }
    const char *dirs[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    for (int i = 0; i < 4; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, DATA_DIR "/%s", dirs[i]);
        run_dir(dir);
    }
    if (results && (fclose(results) != 0 || rename(results_tmp, results_path) != 0)) {
        fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], results_path, strerror(errno));
        return 2;
    }
    qsort(reasons, (size_t)n_reasons, sizeof *reasons, by_count);
    qsort(ops, (size_t)n_ops, sizeof *ops, by_text);
    text md = {0};
    markdown(&md);
    if (print_md) {
        fputs(md.s ? md.s : "", stdout);
        free(md.s);
        return 0;
    }
    printf("%d passed, %d failed, %d skipped\nskipped, by reason:\n", passed, failed, skipped);
    for (int i = 0; i < n_reasons; i++)
        printf("  %4d  %s\n", reasons[i].n, reasons[i].text);
    printf("cases by op (pass/fail/skip):");
    for (int i = 0; i < n_ops; i++)
        printf("%s %s %d/%d/%d", i ? "," : "", ops[i].text, ops[i].pass, ops[i].fail, ops[i].skip);
    printf("\n");
    bool docs_ok = onnx_docs_section("conformance", md.s ? md.s : "", update,
                                     "build/tests/onnx_test_onnx_conformance --update-docs");
    free(md.s);
    if (failed)
        tg_test_fail(__FILE__, __LINE__, "%d conformance cases of supported ops failed", failed);
    if (passed < MIN_PASSING)
        tg_test_fail(__FILE__, __LINE__,
                     "only %d conformance cases pass, fewer than the %d that "
                     "passed when this floor was set",
                     passed, MIN_PASSING);
    if (!docs_ok)
        tg_test_fail(__FILE__, __LINE__, "docs/onnx.md's conformance table is out of date");
    return failed || passed < MIN_PASSING || !docs_ok ? 1 : 0;
}
