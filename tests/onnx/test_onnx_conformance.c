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
 * TG_TEST_LABELS: onnx
 */
#include "tg_test.h"

#include "onnx_run.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DATA_DIR "/usr/share/libonnx-testdata/data"
#define RTOL 1e-3
#define ATOL 1e-7
#define MAX_REASONS 512

typedef struct reason {
    char text[160];
    int n;
} reason;

static reason reasons[MAX_REASONS];
/* op types of the cases that passed, each counted once per case */
static reason covered[MAX_REASONS];
static int n_covered;

static void count_covered(const tg_onnx_model *m)
{
    for (int i = 0; i < tg_onnx_node_count(m); i++) {
        const char *op = tg_onnx_node_op(m, i);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(tg_onnx_node_op(m, j), op);
        int k = 0;
        while (k < n_covered && strcmp(covered[k].text, op))
            k++;
        if (seen || (k == n_covered && n_covered == MAX_REASONS))
            continue;
        if (k == n_covered)
            snprintf(covered[n_covered++].text, sizeof covered[0].text, "%s", op);
        covered[k].n++;
    }
}
static int n_reasons, passed, failed, skipped;

static void count_reason(const char *text)
{
    for (int i = 0; i < n_reasons; i++)
        if (!strcmp(reasons[i].text, text)) {
            reasons[i].n++;
            return;
        }
    if (n_reasons < MAX_REASONS) {
        snprintf(reasons[n_reasons].text, sizeof reasons[n_reasons].text, "%s", text);
        reasons[n_reasons++].n = 1;
    }
}

/* "…: 2 unsupported op types: Abs (node ''), ..." -> one reason per op. */
static void skip_unsupported_ops(const char *msg)
{
    const char *p = strstr(msg, "unsupported op type");
    p = p ? strchr(p, ':') : NULL;
    const char *end = p ? strstr(p, ". Supported:") : NULL;
    for (p = p ? p + 2 : NULL; p && p < end;) {
        char op[128];
        size_t len = strcspn(p, " ");
        snprintf(op, sizeof op, "op %.*s", (int)len, p);
        count_reason(op);
        p = strstr(p, "), ");
        p = p && p < end ? p + 3 : NULL;
    }
}

/* The reason a load or build failure gives, shortened to the fault: "Conv:
 * asymmetric pads..." (the node's op type and the message's tail), or the
 * message without the file name. */
static void skip_build_failure(const char *msg)
{
    char text[160];
    const char *op = strstr(msg, "' (");
    const char *fault = op ? strstr(op, "): ") : NULL;
    const char *file = strstr(msg, ".onnx: ");
    if (strstr(msg, "opset") && strstr(msg, "is not supported")) {
        count_reason("opset outside 11..17");
        return;
    }
    if (op && fault)
        snprintf(text, sizeof text, "%.*s: %.100s", (int)(fault - op - 3), op + 3, fault + 3);
    else
        snprintf(text, sizeof text, "%.140s", file ? file + 7 : msg);
    /* the numbers in a message make every case its own reason */
    for (char *c = text; *c; c++)
        if ((*c >= '0' && *c <= '9') || *c == '[')
            *c = '\0';
    count_reason(text);
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
    tg_onnx_model *m = NULL;
    if (tg_onnx_load(path, &m) != TG_OK) {
        skipped++;
        skip_build_failure(tg_error_message());
        return;
    }
    const char *training = needs_training_mode(m, name);
    if (tg_onnx_check_ops(m) != TG_OK || training) {
        skipped++;
        if (training)
            count_reason(training);
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
        skipped++;
        skip_build_failure(why);
    } else if (ok && sets > 0) {
        passed++;
        count_covered(m);
    } else {
        failed++;
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
    return ((const reason *)b)->n - ((const reason *)a)->n;
}

/* The passing cases when this was written; raise it as ops are added. */
#define MIN_PASSING 467

int main(void)
{
    if (!exists(DATA_DIR "/node")) {
        printf("skipped: ONNX test data not installed (Debian package libonnx-testdata)\n");
        return 77;
    }
    const char *dirs[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    for (int i = 0; i < 4; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, DATA_DIR "/%s", dirs[i]);
        run_dir(dir);
    }
    qsort(reasons, (size_t)n_reasons, sizeof *reasons, by_count);
    printf("%d passed, %d failed, %d skipped (unsupported:", passed, failed, skipped);
    for (int i = 0; i < n_reasons; i++)
        printf("%s %s x%d", i ? "," : "", reasons[i].text, reasons[i].n);
    printf(")\n");
    qsort(covered, (size_t)n_covered, sizeof *covered, by_count);
    printf("passing cases by op:");
    for (int i = 0; i < n_covered; i++)
        printf("%s %s x%d", i ? "," : "", covered[i].text, covered[i].n);
    printf("\n");
    if (failed)
        tg_test_fail(__FILE__, __LINE__, "%d conformance cases of supported ops failed", failed);
    /* A change that makes cases skip (a reader refusing what it took) must
     * not pass quietly: 428 pass today. */
    if (passed < MIN_PASSING)
        tg_test_fail(__FILE__, __LINE__,
                     "only %d conformance cases pass, fewer than the %d that "
                     "passed when this floor was set",
                     passed, MIN_PASSING);
    return failed || passed < MIN_PASSING ? 1 : 0;
}
