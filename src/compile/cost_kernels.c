/* compile/cost_kernels.c - the program's own kernels timed once per
 * signature and cached (the model is described in compile/cost.h).
 *
 * The cache is cost-kernels-<threads>t.json in the rates' directory: a
 * first line with the version, CPU and thread count it holds for, then one
 * line per signature. A file for another key is ignored (and replaced when
 * kernels are timed); a writer merges what other processes wrote since it
 * read the file, so concurrent compilations lose nothing but the race. */
#include "compile/cost.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/pool.h"
#include "graph/op_rules.h"
#include "backend/cpu/dnnl_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif
/* the caches' version: the build's, and the clock one-thread kernels are
 * timed on (the thread's CPU time: a cache of wall-clock times, taken
 * under whatever load there was, is timed again) */
#define CACHE_VERSION TG_VERSION "+cpu-clock"

/* About 10 ms of runs per kernel (five rounds of at least a run each after
 * the warm-up; three runs when timed cold), 30 s in all: what is left keeps
 * the rates this time and is timed on a later run. */
#define KERNEL_BUDGET_S 0.01
#define TOTAL_BUDGET_S 30.0
#define PROGRESS_AFTER_S 1.0
#define OP_NAME_CAP 32 /* tg_cost_kernels.op */

/* ---- signatures and the table ------------------------------------------------------ */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_shape(uint64_t h, tg_dtype dtype, const tg_shape *s)
{
    int32_t head[2] = {(int32_t)dtype, s->ndim};
    h = fnv1a(h, head, sizeof head);
    return fnv1a(h, s->dim, sizeof s->dim[0] * (size_t)(s->ndim > 0 ? s->ndim : 0));
}

uint64_t tg_cost_kernel_signature(const tg_tensor *t)
{
    /* TG_KERNELS (own kernels or oneDNN) changes the kernel a shape gets */
    int32_t head[3] = {(int32_t)t->op, t->n_in, (int32_t)tg_dnnl_mode_get()};
    uint64_t h = fnv1a(1469598103934665603ull, head, sizeof head);
    h = hash_shape(h, t->dtype, &t->shape);
    for (int k = 0; k < t->n_in; k++)
        h = hash_shape(h, t->in[k]->dtype, &t->in[k]->shape);
    /* integer parameters decide the kernel (strides, padding, transposes);
     * the float ones (rates, epsilons) do not change its work */
    h = fnv1a(h, t->p.i, sizeof t->p.i);
    unsigned char cold = tg_cost_reads_stash(t);
    return fnv1a(h, &cold, 1);
}

/* Index of sig in k, or -(insertion point) - 1. */
static int find_at(const tg_cost_kernels *k, uint64_t sig)
{
    int lo = 0, hi = k->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (k->sig[mid] < sig)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < k->n && k->sig[lo] == sig ? lo : -lo - 1;
}

double tg_cost_kernels_find(const tg_cost_kernels *k, uint64_t sig)
{
    int at = k ? find_at(k, sig) : -1;
    return at >= 0 ? k->seconds[at] : -1;
}

static bool grow(tg_cost_kernels *k)
{
    int cap = k->cap ? 2 * k->cap : 64;
    uint64_t *sig = tg_realloc(k->sig, sizeof *sig * (size_t)cap);
    if (sig)
        k->sig = sig;
    double *sec = sig ? tg_realloc(k->seconds, sizeof *sec * (size_t)cap) : NULL;
    if (sec)
        k->seconds = sec;
    char(*names)[sizeof k->op[0]] = sec ? tg_realloc(k->op, sizeof *names * (size_t)cap) : NULL;
    if (!names)
        return false;
    k->op = names;
    k->cap = cap;
    return true;
}

/* Add or (with `replace`) overwrite sig's seconds; false when out of memory. */
static bool put(tg_cost_kernels *k, uint64_t sig, const char *op, double seconds, bool replace)
{
    int at = find_at(k, sig);
    if (at >= 0) {
        if (replace)
            k->seconds[at] = seconds;
        return true;
    }
    if (k->n == k->cap && !grow(k))
        return false;
    at = -at - 1;
    size_t tail = (size_t)(k->n - at);
    memmove(&k->sig[at + 1], &k->sig[at], tail * sizeof k->sig[0]);
    memmove(&k->seconds[at + 1], &k->seconds[at], tail * sizeof k->seconds[0]);
    memmove(&k->op[at + 1], &k->op[at], tail * sizeof k->op[0]);
    k->sig[at] = sig;
    k->seconds[at] = seconds;
    snprintf(k->op[at], sizeof k->op[at], "%s", op);
    k->n++;
    return true;
}

/* ---- the cache file ---------------------------------------------------------------- */

#define HEADER_READ "{\"version\":\"%63[^\"]\",\"cpu\":\"%255[^\"]\",\"threads\":%d}"
#define HEADER_WRITE "{\"version\":\"%s\",\"cpu\":\"%s\",\"threads\":%d}\n"
#define ENTRY_READ "{\"sig\":\"%16" SCNx64 "\",\"op\":\"%31[^\"]\",\"seconds\":%lf}"
#define ENTRY_WRITE "{\"sig\":\"%016" PRIx64 "\",\"op\":\"%s\",\"seconds\":%.6g}\n"

/* Entries of the file at path into t (those t has stay as they are), when
 * the file is for this version, CPU and thread count; false when out of
 * memory. */
static bool cache_load(const char *path, const char *cpu, int threads, tg_cost_kernels *t)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    char version[64] = "", model[256] = "", line[512], op[OP_NAME_CAP];
    int th = 0;
    bool ours = fgets(line, sizeof line, f) &&
                sscanf(line, HEADER_READ, version, model, &th) == 3 &&
                strcmp(version, CACHE_VERSION) == 0 && strcmp(model, cpu) == 0 && th == threads;
    uint64_t sig;
    double sec;
    bool ok = true;
    while (ok && ours && fgets(line, sizeof line, f))
        if (sscanf(line, ENTRY_READ, &sig, op, &sec) == 3 && sec >= 0)
            ok = put(t, sig, op, sec, false);
    fclose(f);
    return ok;
}

static void cache_write(const char *dir, const char *path, const char *cpu, int threads,
                        tg_cost_kernels *t)
{
    tg_atomic_file af;
    if (!cache_load(path, cpu, threads, t) /* what others wrote meanwhile */ ||
        tg_probe_writable_dir("cost cache", dir) != TG_OK ||
        tg_atomic_file_open(path, &af) != TG_OK)
        return; /* the times are still good for this run */
    fprintf(af.f, HEADER_WRITE, CACHE_VERSION, cpu, threads);
    for (int i = 0; i < t->n; i++)
        fprintf(af.f, ENTRY_WRITE, t->sig[i], t->op[i], t->seconds[i]);
    tg_atomic_file_commit(&af);
}

/* ---- timing ------------------------------------------------------------------------ */

/* Nodes of g whose signature t does not hold yet, one per signature. */
static int untimed_nodes(const tg_graph *g, const bool *needed, const tg_cost_kernels *t, int *todo,
                         uint64_t *todo_sig)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *x = g->nodes[i];
        if (!needed[i] || x->n_in == 0 || (x->flags & TG_NODE_ALIAS))
            continue;
        uint64_t sig = tg_cost_kernel_signature(x);
        bool seen = find_at(t, sig) >= 0;
        for (int k = 0; k < n && !seen; k++)
            seen = todo_sig[k] == sig;
        if (!seen) {
            todo_sig[n] = sig;
            todo[n++] = i;
        }
    }
    return n;
}

/* Twice the last-level cache (sysfs; 32 MiB when it does not say), at
 * most 256 MiB: read through, it leaves none of a kernel's data cached. */
static size_t evict_bytes(void)
{
    size_t bytes = 32u << 20;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    unsigned long kib = 0;
    if (f && fscanf(f, "%luK", &kib) == 1 && kib > 0 && kib < (128ul << 10))
        bytes = (size_t)kib << 10;
    if (f)
        fclose(f);
    return 2 * bytes;
}

static tg_status no_memory(void)
{
    return tg_error(TG_ERR_NOMEM, "cost model: out of memory timing the program's kernels");
}

/* The buffer that evicts the caches, when some kernel is timed cold. */
static tg_status evict_buffer(const tg_graph *g, const int *todo, int n, tg_cost_evict *evict)
{
    evict->buf = NULL;
    evict->bytes = evict_bytes();
    for (int k = 0; k < n; k++)
        if (tg_cost_reads_stash(g->nodes[todo[k]])) {
            if (!(evict->buf = tg_malloc(evict->bytes)))
                return no_memory();
            memset(evict->buf, 1, evict->bytes); /* pages of its own, not the shared zero page */
            break;
        }
    return TG_OK;
}

static void progress(double spent, int k, int n, bool *shown)
{
    if (spent <= PROGRESS_AFTER_S)
        return;
    fprintf(stderr, "\rtilegraph: timing the program's kernels for the cost model: %d of %d", k + 1,
            n);
    *shown = true;
}

static tg_status time_nodes(const tg_graph *g, const int *todo, const uint64_t *sig, int n,
                            tg_pool *pool, tg_cost_kernels *t)
{
    tg_cost_evict evict;
    TG_TRY(evict_buffer(g, todo, n, &evict));
    double t0 = tg_clock_seconds();
    bool shown = false;
    tg_status s = TG_OK;
    for (int k = 0; k < n && s == TG_OK; k++) {
        double spent = tg_clock_seconds() - t0;
        if (spent > TOTAL_BUDGET_S) {
            t->left = n - k;
            break;
        }
        progress(spent, k, n, &shown);
        const tg_tensor *x = g->nodes[todo[k]];
        bool cold = tg_cost_reads_stash(x);
        double sec = tg_cost_time_kernel(x, pool, KERNEL_BUDGET_S, cold ? &evict : NULL);
        if (sec == TG_COST_NO_MEMORY || (sec >= 0 && !put(t, sig[k], tg_op_name(x->op), sec, true)))
            s = no_memory();
        else if (sec >= 0)
            t->timed++;
    }
    tg_free(evict.buf);
    if (shown)
        fprintf(stderr, " (%.1f s%s)\n", tg_clock_seconds() - t0,
                t->left ? "; the rest keep the rates until a later run" : "");
    return s;
}

static tg_status time_untimed(tg_cost_model *m, const tg_graph *g, const bool *needed, bool *timed)
{
    tg_cost_kernels *t = m->kernels;
    int *todo = tg_malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    uint64_t *todo_sig = tg_malloc(sizeof(uint64_t) * ((size_t)g->n_nodes + 1));
    tg_status s = todo && todo_sig ? TG_OK : no_memory();
    int n = s == TG_OK ? untimed_nodes(g, needed, t, todo, todo_sig) : 0;
    t->from_cache = t->n;
    t->timed = t->left = 0;
    tg_pool *pool = NULL;
    if (n > 0 && !(pool = tg_pool_create(m->rates.threads)))
        s = no_memory();
    if (pool)
        s = time_nodes(g, todo, todo_sig, n, pool, t);
    tg_pool_destroy(pool);
    tg_free(todo);
    tg_free(todo_sig);
    *timed = s == TG_OK && t->timed > 0;
    return s;
}

tg_status tg_cost_model_time_kernels(tg_cost_model *m, const tg_graph *g, const bool *needed)
{
    if (m->tiled || !m->rates.calibrated)
        return TG_OK; /* the cycle model, or TILEGRAPH_CALIBRATION=off */
    if (!m->kernels && !(m->kernels = tg_calloc(1, sizeof *m->kernels)))
        return no_memory();
    char cpu[256], dir[768], path[1024];
    int threads = m->rates.threads;
    tg_cost_cpu_model(cpu, sizeof cpu);
    bool cached = tg_cost_cache_dir(dir, sizeof dir);
    if (cached)
        snprintf(path, sizeof path, "%s/cost-kernels-%dt.json", dir, threads);
    if (cached && !cache_load(path, cpu, threads, m->kernels))
        return no_memory();
    bool timed = false;
    TG_TRY(time_untimed(m, g, needed, &timed));
    if (cached && timed)
        cache_write(dir, path, cpu, threads, m->kernels);
    return TG_OK;
}

void tg_cost_model_free(tg_cost_model *m)
{
    if (!m->kernels)
        return;
    tg_free(m->kernels->sig);
    tg_free(m->kernels->seconds);
    tg_free(m->kernels->op);
    tg_free(m->kernels);
    m->kernels = NULL;
}
