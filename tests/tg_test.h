/* tests/tg_test.h - the small test harness every test links.
 *
 *     static void test_shapes(void) { TG_CHECK(tg_shape_numel(s) == 12); }
 *     int main(void) { TG_RUN(test_shapes); return tg_test_finish(); }
 *
 * A failed check prints file:line and the expression and marks the running
 * test failed; the test goes on. tg_test_finish prints "N passed, N failed"
 * and returns non-zero if any test failed.
 *
 * Op harnesses (for tests/ops/):
 *  - tg_gradcheck builds a graph with `build` (which makes its own tg_param
 *    leaves, TG_INIT_UNIFORM(-1, 1) is a good choice, and tg_input leaves),
 *    differentiates sum(out * r) for a random r, and compares every
 *    parameter's gradient with central finite differences, all in double
 *    precision through the reference kernels.
 *  - tg_check_kernels runs the same graph (forward and backward ops) through
 *    every op's fast f32 kernel on `threads` threads and compares each node's
 *    output with the double reference, relative tolerance rtol.
 * Inputs are filled with U(-1, 1) for f32 and (7k+3) mod int_range for i32.
 *  - tg_test_run_fast (exact values of the fast kernels alone),
 *    TG_CHECK_REFUSED (a build refused with its message) and
 *    TG_CHECK_PARAMS_MATCH (a session against the reference interpreter).
 *
 * And what several test files need: a path in a test's directory, its
 * leftover temporary files, gzip in memory, a file's bytes, the opening of
 * a test that trains on Fashion-MNIST. A helper a second test file would
 * copy belongs here (or in tg_test_cli.h, tg_test_train.h).
 */
#ifndef TG_TEST_H
#define TG_TEST_H

#include <stdint.h>

#include "graph/node.h"
#include "tilegraph/options.h"

#include <math.h>
#include <stdio.h>

extern int tg_test_failed_checks;

void tg_test_fail(const char *file, int line, const char *fmt, ...);
void tg_test_run(const char *name, void (*fn)(void));
/* mkdtemp(templ) that fails the test, naming the template and the reason,
 * when the directory cannot be made: a test that needs one must not pass
 * silently without it. NULL then. */
char *tg_test_mkdtemp(const char *file, int line, char *templ);
#define TG_MKDTEMP(templ) tg_test_mkdtemp(__FILE__, __LINE__, (templ))
/* "dir/name" in one of 8 static buffers used in turn: valid until 8 more
 * calls, so a few may stand in one call's arguments. One thread only. */
char *tg_test_path(const char *dir, const char *name);
/* src's len bytes gzipped into dst (cap bytes: a test failure when they do
 * not hold it); the gzipped length. For readers of .gz files. */
size_t tg_test_gzip(const void *src, size_t len, unsigned char *dst, size_t cap);
/* How many files in dir have ".tmp." in their name: the temporary files an
 * atomic write (core/atomic_file.h) left behind. */
int tg_test_count_temps(const char *dir);
int tg_test_finish(void);
/* A death test: run fn(ctx) in a child process and check that it ends by
 * SIGABRT (core/check.h's aborts) having written `expect` to its stderr;
 * a child that returns, exits or dies otherwise fails the test, with its
 * stderr shown. */
void tg_test_aborts(const char *file, int line, void (*fn)(void *), void *ctx, const char *expect);
#define TG_CHECK_ABORTS(fn, ctx, expect) tg_test_aborts(__FILE__, __LINE__, (fn), (ctx), (expect))

#define TG_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond))                                                                               \
            tg_test_fail(__FILE__, __LINE__, "check failed: %s", #cond);                           \
    } while (0)

#define TG_CHECK_OK(expr)                                                                          \
    do {                                                                                           \
        tg_status tg_s_ = (expr);                                                                  \
        if (tg_s_ != TG_OK)                                                                        \
            tg_test_fail(__FILE__, __LINE__, "%s returned %s: %s", #expr, tg_status_name(tg_s_),   \
                         tg_error_message());                                                      \
    } while (0)

#define TG_CHECK_NEAR(a, b, tol)                                                                   \
    do {                                                                                           \
        double tg_a_ = (a), tg_b_ = (b);                                                           \
        if (!(fabs(tg_a_ - tg_b_) <= (tol)))                                                       \
            tg_test_fail(__FILE__, __LINE__, "%s = %.9g, %s = %.9g (tolerance %g)", #a, tg_a_, #b, \
                         tg_b_, (double)(tol));                                                    \
    } while (0)

#define TG_RUN(fn) tg_test_run(#fn, fn)

typedef tg_tensor *(*tg_test_build_fn)(tg_graph *g, void *ctx);

typedef struct tg_check_opts {
    int int_range; /* i32 inputs are in [0, int_range); default 1 */
    double tol;    /* gradcheck: max |analytic - numeric| / max(1, |numeric|); default 1e-6 */
    double step;   /* finite-difference step; default 1e-6 */
    int max_elems; /* elements probed per parameter; default 48 */
    bool training; /* graph training mode; default false unless set */
    /* tg_check_kernels: run the ops' plan hooks (ops/op.h) as a compiled
     * program does, and count the nodes whose plan built kernel state */
    bool planned;
    int *n_planned;
    tg_dtype compute; /* with planned: tg_plan_opts.compute (TG_F32 unless set) */
    /* with planned: count the nodes whose recorded kernel contains this */
    const char *kernel_like;
    int *n_kernel_like;
} tg_check_opts;

/* Both return 1 on success (and report failures through tg_test_fail). */
int tg_gradcheck(const char *label, tg_test_build_fn build, void *ctx, tg_check_opts opts);
int tg_check_kernels(const char *label, tg_test_build_fn build, void *ctx, int threads, double rtol,
                     tg_check_opts opts);

/* Runs every node of g through the cpu backend's fast kernels on `threads`
 * threads, the n_ins inputs ins[k] holding vals[k], and copies out's values
 * into result. Outputs start as NaN bytes (the engine's buffers are reused
 * and never cleared: a kernel must write every element); views share their
 * input's buffer, as in the engine. For exact values of the fast kernels
 * alone; tg_check_kernels compares them with the reference. */
void tg_test_run_fast(tg_graph *g, tg_tensor *const *ins, const float *const *vals, int n_ins,
                      tg_tensor *out, float *result, int threads);

/* Every parameter of g in session s (f32 storage) agrees with the
 * reference interpreter ip's after the same steps, within 1e-4 + 1e-4
 * |reference| (a failure at the caller's line). */
struct tg_session;
struct tg_interp;
void tg_test_params_match(const char *file, int line, const tg_graph *g, const struct tg_session *s,
                          struct tg_interp *ip);
#define TG_CHECK_PARAMS_MATCH(g, s, ip) tg_test_params_match(__FILE__, __LINE__, (g), (s), (ip))

/* g's last build was refused: its status is s and its error contains text
 * (a failure at the caller's line shows the error). Destroys g. */
void tg_test_refused(const char *file, int line, tg_graph *g, tg_status s, const char *text);
#define TG_CHECK_REFUSED(g, s, text) tg_test_refused(__FILE__, __LINE__, (g), (s), (text))

/* Set the NULL-terminated key/value list kv (NULL: nothing) on o; a key or
 * value the options refuse is a test failure. */
void tg_test_options_set(tg_options *o, const char *const *kv);
/* Remove a directory tree a test made (a failure is a test failure). */
void tg_test_remove_dir(const char *dir);
/* Fail if the library holds another number of bytes than `live` (taken from
 * tg_alloc_live_bytes before the tests ran). */
void tg_test_check_no_leak(int64_t live);
/* The whole file, NUL-terminated (free it); NULL if it cannot be read. */
char *tg_test_read_file(const char *path, size_t *len);

/* This test executable run as 2 MPI instances (mpirun -np 2, killed after
 * bound_s seconds) with argument `args`, `env` (NULL: none) before the
 * command, output (stdout and stderr) into out; its exit code. A hang (137)
 * is a test failure. */
int tg_test_mpi_self(const char *dir, const char *env, const char *args, int bound_s, char *out,
                     size_t cap);

/* The data directory of Debian's dataset-fashion-mnist, or NULL if absent. */
const char *tg_test_fashion_dir(void);
/* The opening of a test's main that trains on Fashion-MNIST in a directory
 * of its own: 0, dir (cap bytes) a new /tmp/tg_<name>_XXXXXX; 77 (skipped,
 * saying why) without the data set; 1 (a failure) when the directory
 * cannot be made. main returns anything but 0. */
int tg_test_fashion_tmpdir(const char *name, char *dir, size_t cap);

#endif
