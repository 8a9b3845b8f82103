/* tests/tg_fuse_test.h - what the inference fusion tests share
 * (tests/compile/test_fuse.c: convolutions, test_fuse_matmul.c: matmuls):
 * a session with fusion on or off, the count of fused chains, the
 * difference of two outputs, and the checker's verdict on fused rows. */
#ifndef TG_TESTS_FUSE_TEST_H
#define TG_TESTS_FUSE_TEST_H

#include "tg_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/process.h"
#include "core/rng.h"
#include "runtime/session_internal.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <string.h>

/* g's session at `threads` threads, randomSeed 9, fused or not, in
 * `precision` and with the executable file `exe` where not NULL. */
static inline tg_session *tg_fuse_test_open_with(tg_graph *g, int threads, bool fuse,
                                                 const char *precision, const char *exe)
{
    tg_process_set_fuse_inference(fuse);
    tg_options *o = tg_options_create();
    if (precision)
        TG_CHECK_OK(tg_options_set(o, "precision", precision));
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", 9);
    if (exe)
        TG_CHECK_OK(tg_options_set(o, "executableFile", exe));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    tg_options_destroy(o);
    tg_process_set_fuse_inference(1);
    return s;
}

/* g's session at `threads` threads, randomSeed 9, fused or not. */
static inline tg_session *tg_fuse_test_open(tg_graph *g, int threads, bool fuse)
{
    return tg_fuse_test_open_with(g, threads, fuse, NULL, NULL);
}

/* x filled from r, uniform in [-1, 1), then a run; y into out (y's
 * elements). */
static inline void tg_fuse_test_run_x(tg_session *s, tg_rng *r, tg_tensor *x, tg_tensor *y,
                                      float *out)
{
    int64_t nx = tg_numel(x);
    float *v = tg_malloc((size_t)nx * sizeof(float));
    for (int64_t i = 0; v && i < nx; i++)
        v[i] = (float)(2 * tg_rng_uniform(r) - 1);
    TG_CHECK_OK(tg_session_write(s, x, v, (size_t)nx * sizeof(float)));
    tg_free(v);
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, y, out, (size_t)tg_numel(y) * sizeof(float)));
}

/* The chains s's program fuses (nodes computing others). */
static inline int tg_fuse_test_chains(tg_session *s)
{
    const tg_program *p = tg_session_program(s);
    int n = 0;
    for (int i = 0; p->fused_tail && i < p->graph->n_nodes; i++)
        n += p->fused_tail[i] >= 0;
    return n;
}

/* The largest difference relative to the largest value of b. */
static inline double tg_fuse_test_difference(const float *a, const float *b, int64_t n)
{
    double diff = 0, most = 0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        most = fmax(most, fabs((double)b[i]));
    }
    return most > 0 ? diff / most : diff;
}

/* The checker's report of s's last verified run: no row skipped, and every
 * fused row (note containing `note`) within tolerance and none beyond, or,
 * with a fault put in, some row beyond. */
static inline void tg_fuse_test_rows(tg_session *s, const char *note, bool fault, const char *label)
{
    const tg_verify_report *r = tg_session_verify_report(s);
    int fused_ok = 0, beyond = 0;
    for (int i = 0; r && i < tg_verify_rows(r); i++) {
        const tg_verify_row *row = tg_verify_row_at(r, i);
        fused_ok += strstr(row->note, note) != NULL && row->verdict == TG_VERIFY_OK;
        beyond += row->verdict == TG_VERIFY_BEYOND;
        if (row->verdict == TG_VERIFY_SKIPPED)
            tg_test_fail(__FILE__, __LINE__, "%s: %s skipped: %s", label, row->name, row->note);
    }
    int chains = tg_fuse_test_chains(s);
    if (!r || (!fault && (beyond > 0 || fused_ok != chains)) || (fault && beyond == 0))
        tg_test_fail(__FILE__, __LINE__, "%s: %d fused rows ok of %d, %d beyond%s", label, fused_ok,
                     chains, beyond, fault ? " (a fault was put in)" : "");
}

#endif
