/* tests/tg_test.c - test harness, gradient check and kernel check, and the
 * helpers several tests share (tg_test.h). */
#include "backend/backend.h"
#include "tg_test.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/rng.h"
#include "graph/init.h"
#include "ops/op.h"
#include "runtime/interp.h"
#include "runtime/session_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

int tg_test_failed_checks;
static int tests_passed, tests_failed;
static const char *current_test = "";

void tg_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  FAIL %s:%d [%s] ", file, line, current_test);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    tg_test_failed_checks++;
}

char *tg_test_mkdtemp(const char *file, int line, char *templ)
{
    char asked[256];
    snprintf(asked, sizeof asked, "%s", templ);
    char *dir = mkdtemp(templ);
    if (!dir)
        tg_test_fail(file, line, "cannot make a temporary directory from %s: %s", asked,
                     strerror(errno));
    return dir;
}

void tg_test_run(const char *name, void (*fn)(void))
{
    int before = tg_test_failed_checks;
    current_test = name;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (tg_test_failed_checks == before) {
        tests_passed++;
        printf("  ok   %-48s %8.1f ms\n", name, ms);
    } else {
        tests_failed++;
        printf("  FAIL %-48s %8.1f ms\n", name, ms);
    }
    fflush(stdout);
}

void tg_test_aborts(const char *file, int line, void (*fn)(void *), void *ctx, const char *expect)
{
    char err[] = "/tmp/tg_test_abort.XXXXXX";
    int fd = mkstemp(err);
    if (fd < 0) {
        tg_test_fail(file, line, "mkstemp %s: %s", err, strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        fn(ctx);
        _exit(0); /* returned: the test below fails it */
    }
    int ws = 0;
    bool waited = pid > 0 && waitpid(pid, &ws, 0) == pid;
    char text[2048] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    text[got > 0 ? got : 0] = 0;
    close(fd);
    unlink(err);
    if (!waited)
        tg_test_fail(file, line, "fork/waitpid failed: %s", strerror(errno));
    else if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGABRT)
        tg_test_fail(file, line, "expected an abort (SIGABRT), got %s %d; stderr: %s",
                     WIFSIGNALED(ws) ? "signal" : "exit status",
                     WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws), text);
    else if (!strstr(text, expect))
        tg_test_fail(file, line, "the abort's message lacks '%s': %s", expect, text);
}

int tg_test_finish(void)

{
    printf("%d passed, %d failed\n", tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}

void tg_test_options_set(tg_options *o, const char *const *kv)
{
    for (int i = 0; kv && kv[i]; i += 2)
        TG_CHECK_OK(tg_options_set(o, kv[i], kv[i + 1]));
}

void tg_test_remove_dir(const char *dir)
{
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tg_test_fail(__FILE__, __LINE__, "cannot remove %s", dir);
}

void tg_test_check_no_leak(int64_t live)
{
    if (tg_alloc_live_bytes() != live)
        tg_test_fail(__FILE__, __LINE__, "leaked %lld bytes",
                     (long long)(tg_alloc_live_bytes() - live));
}

char *tg_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (buf)
        buf[got] = '\0';
    if (len)
        *len = got;
    return buf;
}

const char *tg_test_fashion_dir(void)
{
    static const char *dir = "/usr/share/datasets/fashion-mnist";
    const char *env = getenv("TG_FASHION_MNIST_DIR");
    if (env && *env)
        dir = env;
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    return access(path, R_OK) == 0 ? dir : NULL;
}

char *tg_test_path(const char *dir, const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

size_t tg_test_gzip(const void *src, size_t len, unsigned char *dst, size_t cap)
{
    z_stream zs = {0};
    deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = (Bytef *)src;
    zs.avail_in = (uInt)len;
    zs.next_out = dst;
    zs.avail_out = (uInt)cap;
    int rc = deflate(&zs, Z_FINISH);
    TG_CHECK(rc == Z_STREAM_END);
    size_t n = zs.total_out;
    deflateEnd(&zs);
    return n;
}

int tg_test_count_temps(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

int tg_test_fashion_tmpdir(const char *name, char *dir, size_t cap)
{
    if (!tg_test_fashion_dir()) {
        printf("  skip: Fashion-MNIST not installed\n");
        return 77;
    }
    snprintf(dir, cap, "/tmp/tg_%s_XXXXXX", name);
    return TG_MKDTEMP(dir) ? 0 : 1;
}

/* ---- shared set-up ------------------------------------------------------------ */

static void defaults(tg_check_opts *o)
{
    if (o->int_range <= 0)
        o->int_range = 1;
    if (o->tol <= 0)
        o->tol = 1e-6;
    if (o->step <= 0)
        o->step = 1e-6;
    if (o->max_elems <= 0)
        o->max_elems = 48;
}

static void fill_inputs(const tg_graph *g, tg_interp *ip, const tg_check_opts *o)
{
    tg_rng rng;
    tg_rng_seed(&rng, 12345);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_INPUT)
            continue;
        double *d = tg_interp_data(ip, t);
        for (int64_t k = 0; k < tg_numel(t); k++)
            d[k] = t->dtype == TG_I32 || t->dtype == TG_U8 ? (double)((7 * k + 3) % o->int_range)
                                                           : 2.0 * tg_rng_uniform(&rng) - 1.0;
    }
}

static tg_tensor *build_with_loss(tg_graph *g, tg_test_build_fn build, void *ctx, tg_tensor **out_)
{
    tg_tensor *out = build(g, ctx);
    *out_ = out;
    if (!out)
        return NULL;
    tg_tensor *r = tg_input(g, "gradcheck_weights", TG_F32, out->shape);
    unsigned all = (1u << out->shape.ndim) - 1u;
    return tg_reduce_sum(g, tg_mul(g, out, r), all, false);
}

static double run_loss(tg_interp *ip, const tg_tensor *loss)
{
    if (tg_interp_run(ip, 0) != TG_OK)
        return NAN;
    return tg_interp_data(ip, loss)[0];
}

int tg_gradcheck(const char *label, tg_test_build_fn build, void *ctx, tg_check_opts o)
{
    defaults(&o);
    int ok = 1;
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, o.training);
    tg_tensor *out = NULL;
    tg_tensor *loss = build_with_loss(g, build, ctx, &out);
    if (!loss || tg_graph_status(g) != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s: building failed: %s", label, tg_graph_error(g));
        tg_graph_destroy(g);
        return 0;
    }
    if (tg_graph_backward(g, loss) != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s: backward failed: %s", label, tg_error_message());
        tg_graph_destroy(g);
        return 0;
    }
    tg_interp *ip = NULL;
    if (tg_interp_create(g, 7, &ip) != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s: %s", label, tg_error_message());
        tg_graph_destroy(g);
        return 0;
    }
    fill_inputs(g, ip, &o);
    if (tg_interp_run(ip, 0) != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s: %s", label, tg_error_message());
        ok = 0;
    }
    tg_rng rng;
    tg_rng_seed(&rng, 99);
    int n_params = 0;
    for (int i = 0; ok && i < g->n_nodes; i++) {
        tg_tensor *p = g->nodes[i];
        if (p->op != TG_OP_PARAM)
            continue;
        n_params++;
        if (!p->grad) {
            tg_test_fail(__FILE__, __LINE__, "%s: parameter '%s' got no gradient", label, p->name);
            ok = 0;
            continue;
        }
        int64_t n = tg_numel(p);
        double *analytic = malloc((size_t)n * sizeof(double));
        tg_interp_run(ip, 0);
        memcpy(analytic, tg_interp_data(ip, p->grad), (size_t)n * sizeof(double));
        double *v = tg_interp_data(ip, p);
        int probes = n < o.max_elems ? (int)n : o.max_elems;
        double worst = 0;
        int64_t worst_k = 0;
        double worst_a = 0, worst_n = 0;
        for (int j = 0; j < probes; j++) {
            int64_t k = n <= o.max_elems ? j : (int64_t)tg_rng_below(&rng, (uint64_t)n);
            double saved = v[k];
            v[k] = saved + o.step;
            double lp = run_loss(ip, loss);
            v[k] = saved - o.step;
            double lm = run_loss(ip, loss);
            v[k] = saved;
            double numeric = (lp - lm) / (2 * o.step);
            double scale = fabs(numeric) > 1 ? fabs(numeric) : 1;
            double err = fabs(analytic[k] - numeric) / scale;
            if (!(err <= worst)) {
                worst = err;
                worst_k = k;
                worst_a = analytic[k];
                worst_n = numeric;
            }
        }
        if (!(worst <= o.tol)) {
            tg_test_fail(
                __FILE__, __LINE__,
                "%s: gradient of '%s'[%lld]: analytic %.10g, numeric %.10g (error %.3g > %.3g)",
                label, p->name, (long long)worst_k, worst_a, worst_n, worst, o.tol);
            ok = 0;
        }
        free(analytic);
    }
    if (ok && n_params == 0) {
        tg_test_fail(__FILE__, __LINE__, "%s: the graph has no parameters to check", label);
        ok = 0;
    }
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
    return ok;
}

/* ---- fast kernels against the reference ------------------------------------------ */

int tg_check_kernels(const char *label, tg_test_build_fn build, void *ctx, int threads, double rtol,
                     tg_check_opts o)
{
    defaults(&o);
    int ok = 1;
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, o.training);
    tg_tensor *out = NULL;
    tg_tensor *loss = build_with_loss(g, build, ctx, &out);
    if (!loss || tg_graph_backward(g, loss) != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s: building failed: %s %s", label, tg_graph_error(g),
                     tg_error_message());
        tg_graph_destroy(g);
        return 0;
    }
    tg_interp *ip = NULL;
    tg_interp_create(g, 7, &ip);
    fill_inputs(g, ip, &o);
    tg_interp_run(ip, 0);

    tg_pool *pool = tg_pool_create(threads);
    void **buf = calloc((size_t)g->n_nodes, sizeof(void *));
    for (int i = 0; i < g->n_nodes && ok; i++) {
        tg_tensor *t = g->nodes[i];
        if (t->flags & TG_NODE_ALIAS) {
            buf[i] = buf[t->in[0]->id];
            continue;
        }
        size_t bytes = tg_nbytes(t);
        buf[i] = malloc(bytes ? bytes : 1);
        /* Outputs start as NaN bytes, so a kernel that skips elements fails. */
        memset(buf[i], 0xff, bytes ? bytes : 1);
        if (t->n_in == 0) {
            tg_convert_from_double(tg_interp_data(ip, t), buf[i], t->dtype, (size_t)tg_numel(t));
            continue;
        }
        /* the engine's kernel: the fast one, or the reference run as one
         * (tg_op_forward) for an op defined without a fast kernel */
        if (!tg_op_has_kernel(t->op)) {
            tg_test_fail(__FILE__, __LINE__, "%s: '%s' (%s) has no kernel", label, t->name,
                         tg_op_name(t->op));
            ok = 0;
            break;
        }
        tg_kernel_plan plan = {0};
        const tg_op_planner *planner = o.planned ? tg_op_planner_get(t->op) : NULL;
        if (planner && planner->plan(t, &(tg_plan_opts){.n_threads = threads, .compute = o.compute},
                                     &plan) != TG_OK) {
            tg_test_fail(__FILE__, __LINE__, "%s: planning '%s' failed: %s", label, t->name,
                         tg_error_message());
            ok = 0;
            break;
        }
        if (plan.state && o.n_planned)
            (*o.n_planned)++;
        if (o.kernel_like && o.n_kernel_like && strstr(plan.kernel, o.kernel_like))
            (*o.n_kernel_like)++;
        size_t sb = plan.state ? plan.scratch : tg_op_scratch(t, threads);
        void *scratch = sb ? malloc(sb) : NULL;
        tg_kernel_args a = {.node = t,
                            .out = buf[i],
                            .scratch = scratch,
                            .scratch_bytes = sb,
                            .pool = pool,
                            .step = 0,
                            .seed = 7,
                            .plan = plan.state};
        for (int k = 0; k < t->n_in; k++)
            a.in[k] = buf[t->in[k]->id];
        tg_op_forward(&a);
        free(scratch);
        if (plan.state)
            planner->plan_free(plan.state);
        /* Compare the node's output (mutating ops: skip, their output is empty). */
        const double *ref = tg_interp_data(ip, t);
        int64_t n = tg_numel(t);
        double max_ref = 0;
        for (int64_t k = 0; k < n; k++)
            if (fabs(ref[k]) > max_ref)
                max_ref = fabs(ref[k]);
        for (int64_t k = 0; k < n && t->dtype == TG_F32; k++) {
            double got = ((float *)buf[i])[k];
            double tol = rtol * (fabs(ref[k]) + max_ref * 0.01 + 1e-6);
            /* equal values agree, infinities included (a masked max's -inf) */
            if (got != ref[k] && !(fabs(got - ref[k]) <= tol)) {
                tg_test_fail(__FILE__, __LINE__,
                             "%s: '%s' (%s, %d threads) element %lld: fast %.8g, reference %.8g",
                             label, t->name, tg_op_name(t->op), threads, (long long)k, got, ref[k]);
                ok = 0;
                break;
            }
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (!(g->nodes[i]->flags & TG_NODE_ALIAS))
            free(buf[i]);
    free(buf);
    tg_pool_destroy(pool);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
    return ok;
}

void tg_test_run_fast(tg_graph *g, tg_tensor *const *ins, const float *const *vals, int n_ins,
                      tg_tensor *out, float *result, int threads)
{
    tg_pool *pool = tg_pool_create(threads);
    void **buf = calloc((size_t)g->n_nodes, sizeof(void *));
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *t = g->nodes[i];
        if (t->flags & TG_NODE_ALIAS) {
            buf[i] = buf[t->in[0]->id];
            continue;
        }
        buf[i] = malloc(tg_nbytes(t) + 4);
        memset(buf[i], 0xff, tg_nbytes(t) + 4);
        for (int k = 0; k < n_ins; k++)
            if (ins[k] == t)
                memcpy(buf[i], vals[k], tg_nbytes(t));
        if (t->n_in == 0)
            continue;
        tg_kernel_args a = {.node = t, .out = buf[i], .pool = pool};
        for (int k = 0; k < t->n_in; k++)
            a.in[k] = buf[t->in[k]->id];
        tg_backend_cpu.kernel(t->op)->forward(&a);
    }
    memcpy(result, buf[out->id], tg_nbytes(out));
    for (int i = 0; i < g->n_nodes; i++)
        if (!(g->nodes[i]->flags & TG_NODE_ALIAS))
            free(buf[i]);
    free(buf);
    tg_pool_destroy(pool);
}

void tg_test_params_match(const char *file, int line, const tg_graph *g, const struct tg_session *s,
                          struct tg_interp *ip)
{
    for (int i = 0; s && ip && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM)
            continue;
        const float *fast = tg_session_data(s, t);
        const double *ref = tg_interp_data(ip, t);
        for (int64_t k = 0; k < tg_numel(t); k++)
            if (!(fabs(fast[k] - ref[k]) <= 1e-4 + 1e-4 * fabs(ref[k]))) {
                tg_test_fail(file, line, "parameter '%s'[%lld]: session %.9g, reference %.9g",
                             t->name, (long long)k, fast[k], ref[k]);
                break;
            }
    }
}

void tg_test_refused(const char *file, int line, tg_graph *g, tg_status s, const char *text)
{
    const char *error = tg_graph_error(g) ? tg_graph_error(g) : "(none)";
    if (tg_graph_status(g) != s)
        tg_test_fail(file, line, "status %s, not %s (error '%s')",
                     tg_status_name(tg_graph_status(g)), tg_status_name(s), error);
    else if (!strstr(error, text))
        tg_test_fail(file, line, "error '%s' does not contain '%s'", error, text);
    tg_graph_destroy(g);
}

int tg_test_mpi_self(const char *dir, const char *env, const char *args, int bound_s, char *out,
                     size_t cap)
{
    char cmd[4096], self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
             "OMPI_MCA_rmaps_base_oversubscribe=1 %s timeout -s KILL %d mpirun -np 2 --bind-to "
             "none %s %s > %s/out.txt 2>&1",
             env ? env : "", bound_s, self, args, dir);
    int rc = system(cmd);
    int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    char path[600];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(out, 1, cap - 1, f) : 0;
    out[len] = '\0';
    if (f)
        fclose(f);
    remove(path);
    if (code == 137)
        tg_test_fail(__FILE__, __LINE__, "the job hung (killed after %d s):\n%s", bound_s, out);
    return code;
}
