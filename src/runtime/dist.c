/* runtime/dist.c - the MPI job: joining it, the instance index and count,
 * the per-device communicators the all-reduce uses across instances, and the
 * checks that instances agree (same program at start, same weights after
 * updates). Every MPI call of tilegraph is in this file and in
 * dist_watch.c, which finds instances waiting in different collectives.
 *
 * The job's state is the process's, as MPI's own is: an instance is a
 * process. Device threads of one session call MPI at the same time (one
 * communicator each), hence MPI_THREAD_MULTIPLE. */
#include "runtime/dist.h"
#include "runtime/dist_alive.h"
#include "runtime/dist_watch.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/error.h"
#include "core/wait.h"
#include "trace/trace_internal.h"

#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int joined;          /* tg_dist_init called MPI_Init_thread */
static int64_t groups_made; /* tg_dist_group_create's, for their ordinals */
static int rank, size = 1;
static int host_size = 1; /* instances on this host (they share its cores) */
/* this instance's CLOCK_MONOTONIC plus clock_offset is instance 0's: 0 when
 * every instance is on this host (one clock), else the barrier's estimate
 * (align_trace_clocks) */
static double clock_offset;

/* A device's gathers in flight: a request per part and the counts and
 * displacements MPI reads until the part completes ([part][instance]). */
typedef struct parts {
    int n;
    MPI_Request *reqs;
    int *counts, *displs;
} parts;

struct tg_dist_group {
    int n;
    bool spare;      /* this host has a core per instance's device */
    int64_t ordinal; /* among the job's groups, from 1, in the order made (dist_watch.h) */
    int64_t runs;    /* training runs exchanged in it (tg_dist_note_run) */
    MPI_Comm *comms;
    tg_spin *spins; /* per device: how long its all-gathers spin before sleeping */
    parts *parts;   /* per device */
};

static void align_trace_clocks(void);
static tg_status world_wait(MPI_Request *req, int64_t k, tg_coll what);
static tg_status world_start(tg_coll what, int64_t *k);
static tg_status start_heartbeats(void);
/* why this instance gave up its waits on another (dist_alive.c), written
 * once under lost_lock by the first thread to see it, then `lost` set */
static char lost_reason[512];
static int lost; /* atomic */
static pthread_mutex_t lost_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether some instance is lost: the first thread to see it keeps the
 * sentence. */
static bool instance_lost(void)
{
    if (__atomic_load_n(&lost, __ATOMIC_ACQUIRE))
        return true;
    char why[sizeof lost_reason];
    if (!tg_dist_alive_lost(why, sizeof why))
        return false;
    pthread_mutex_lock(&lost_lock);
    if (!__atomic_load_n(&lost, __ATOMIC_ACQUIRE)) {
        memcpy(lost_reason, why, sizeof why);
        __atomic_store_n(&lost, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lost_lock);
    return true;
}

/* The gradients' all-gathers (allreduce.c, buckets.c) under OpenMPI 4.1
 * run in its coll/libnbc component, its one component with non-blocking
 * all-gathers. Its MPI_Iallgather takes coll_libnbc_iallgather_algorithm
 * (0, its default, and 1: linear, every instance sending its block to
 * every other; 2: recursive doubling, log2 N rounds of pairs, on a power of
 * two of instances, linear otherwise); its MPI_Iallgatherv is linear only.
 * tilegraph asks for recursive doubling unless the job sets the parameter
 * (mpirun --mca, the environment): the same bytes reach every instance,
 * but with instances placed on hosts round-robin (as `run --host` places
 * them) half as many blocks cross a host's link as linear sends, and never
 * more. The value in force is read back after MPI_Init (MPI_T) for the
 * profile. */
static const char nbc_param[] = "coll_libnbc_iallgather_algorithm";
static int nbc_algorithm = -1; /* as read back; -1: no such parameter (not libnbc) */

static void choose_allgather(void)
{
    setenv("OMPI_MCA_coll_libnbc_iallgather_algorithm", "2", 0);
}

static void read_allgather_choice(void)
{
    int provided, idx, count;
    MPI_T_cvar_handle h;
    nbc_algorithm = -1;
    if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return;
    if (MPI_T_cvar_get_index(nbc_param, &idx) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        int v = -1;
        if (count == 1 && MPI_T_cvar_read(h, &v) == MPI_SUCCESS)
            nbc_algorithm = v;
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
}

const char *tg_dist_allgather_algorithm(bool varying)
{
    static char text[256];
    if (nbc_algorithm < 0)
        snprintf(text, sizeof text,
                 "%s: the MPI library's own choice (no %s: not OpenMPI's coll/libnbc)",
                 varying ? "MPI_Iallgatherv" : "MPI_Iallgather", nbc_param);
    else if (varying)
        snprintf(text, sizeof text, "MPI_Iallgatherv: coll/libnbc linear (its only schedule)");
    else
        snprintf(text, sizeof text, "MPI_Iallgather: coll/libnbc %s (%s=%d%s)",
                 nbc_algorithm == 2 && !(size & (size - 1)) ? "recursive doubling" : "linear",
                 nbc_param, nbc_algorithm,
                 nbc_algorithm == 2 && (size & (size - 1)) ? ", but not a power of 2 of instances"
                                                           : "");
    return text;
}

static bool under_mpirun(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v)
        v = getenv("PMI_SIZE");
    return v && *v;
}

tg_status tg_dist_init(int *argc, char ***argv)
{
    if (joined || !under_mpirun())
        return TG_OK;
    int provided = 0;
    choose_allgather();
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return tg_error(TG_ERR_IO, "MPI: cannot join the job (MPI_Init_thread failed)");
    joined = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    read_allgather_choice();
    /* errors end the job rather than return codes nobody waits for */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    MPI_Comm_size(host, &host_size);
    MPI_Comm_free(&host);
    if (size > 1) {
        align_trace_clocks();
        tg_dist_watch_init(MPI_COMM_WORLD, rank, size);
        TG_TRY(start_heartbeats());
    }
    if (provided < MPI_THREAD_MULTIPLE && size > 1)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "MPI: this MPI library gives thread level %d, and the devices of an "
                        "instance exchange gradients from their own threads "
                        "(MPI_THREAD_MULTIPLE, level %d); use an MPI built with thread support",
                        provided, MPI_THREAD_MULTIPLE);
    return TG_OK;
}

/* Seconds an instance may be silent before the others give it up
 * (TILEGRAPH_DIST_TIMEOUT; 0: never). Long enough for a loaded host's
 * scheduling and for a stopped (SIGSTOP) instance's short pauses. */
static double heartbeat_timeout(void)
{
    const char *v = getenv("TILEGRAPH_DIST_TIMEOUT");
    char *end = NULL;
    double t = v && *v ? strtod(v, &end) : 10.0;
    if (v && *v && (*end || t < 0)) {
        fprintf(stderr,
                "tilegraph: warning: TILEGRAPH_DIST_TIMEOUT='%s' is not a number of seconds "
                "(0: no timeout): using 10\n",
                v);
        t = 10.0;
    }
    return t;
}

/* Every instance's heartbeat card gathered, then the beats started
 * (dist_alive.c): a lost host is found by silence, not by MPI, whose own
 * transfers over a dead link would wait for many minutes. */
static tg_status start_heartbeats(void)
{
    tg_alive_card mine, *all = tg_malloc((size_t)size * sizeof *all);
    if (!all)
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory for %d heartbeat cards", size);
    tg_status st = tg_dist_alive_open(&mine, host_size == size);
    int ok = st == TG_OK;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    uint64_t job = ((uint64_t)getpid() << 32) ^ (uint64_t)tg_trace_clock_ns();
    MPI_Bcast(&job, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (ok) {
        MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                      MPI_COMM_WORLD);
        st = tg_dist_alive_start(all, rank, size, job, heartbeat_timeout());
    } else if (st == TG_OK) {
        st = tg_error(TG_ERR_IO, "MPI: another instance could not open its heartbeat socket");
    }
    tg_free(all);
    return st;
}

/* The trace's clocks lined up: after a barrier every instance reads its
 * clock at (nearly) the same moment, so instance 0's reading minus its own
 * is its offset; the job's time zero is the earliest instance's. */
static void align_trace_clocks(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t now = tg_trace_clock_ns(), zero = now;
    MPI_Bcast(&zero, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    int64_t offset = zero - now;
    clock_offset = host_size == size ? 0.0 : (double)offset * 1e-9;
    int64_t origin = (tg_trace_origin_ns() ? tg_trace_origin_ns() : now) + offset;
    MPI_Allreduce(MPI_IN_PLACE, &origin, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    tg_trace_set_job(rank, offset, origin);
}

enum { MAX_TRACE_BYTES = 256 << 20 }; /* per instance and file, for the merge */

/* A file's bytes (NULL, 0 when it cannot be read or is too large to send). */
static char *read_whole(const char *path, int *len)
{
    *len = 0;
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f)
        return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && n <= MAX_TRACE_BYTES && fseek(f, 0, SEEK_SET) == 0 &&
            (buf = tg_malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
            *len = (int)n;
    }
    fclose(f);
    if (!*len) {
        tg_free(buf);
        buf = NULL;
    }
    return buf;
}

/* DIR/job-NAME beside instance 0's DIR/NAME. */
static void job_path(const char *mine, char *out, size_t cap)
{
    const char *slash = strrchr(mine, '/');
    if (slash)
        snprintf(out, cap, "%.*s/job-%s", (int)(slash - mine), mine, slash + 1);
    else
        snprintf(out, cap, "job-%s", mine);
}

/* Instance 0 writes the k-th trace file of every instance as one file. */
static void merge_trace(int k)
{
    int len = 0;
    char *mine = read_whole(tg_trace_exported_path(k), &len);
    int *lens = rank == 0 ? tg_calloc((size_t)size, sizeof *lens) : NULL;
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int *displs = rank == 0 ? tg_calloc((size_t)size, sizeof *displs) : NULL;
    size_t total = 0;
    for (int i = 0; rank == 0 && displs && lens && i < size; i++) {
        displs[i] = (int)total;
        total += (size_t)lens[i];
    }
    bool fits = total < (size_t)INT32_MAX;
    char *all = rank == 0 && fits ? tg_malloc(total + 1) : NULL;
    int ok = rank != 0 || (all && displs && lens);
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (ok)
        MPI_Gatherv(mine, len, MPI_BYTE, all, lens, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0 && ok && tg_trace_exported_path(k)) {
        const char **docs = tg_calloc((size_t)size, sizeof *docs);
        size_t *sizes = tg_calloc((size_t)size, sizeof *sizes);
        char path[2048];
        job_path(tg_trace_exported_path(k), path, sizeof path);
        for (int i = 0; docs && sizes && i < size; i++) {
            docs[i] = lens[i] ? all + displs[i] : NULL;
            sizes[i] = (size_t)lens[i];
        }
        if (!docs || !sizes || tg_trace_merge_chrome(path, docs, sizes, size) != TG_OK)
            fprintf(stderr, "tilegraph: warning: the job's trace was not written: %s\n",
                    docs && sizes ? tg_error_message() : "out of memory");
        else
            fprintf(stderr, "tilegraph: the job's trace (%d instances): %s\n", size, path);
        tg_free(docs);
        tg_free(sizes);
    }
    tg_free(all);
    tg_free(displs);
    tg_free(lens);
    tg_free(mine);
}

/* Every instance's trace files merged, the k-th with the k-th, so that
 * Perfetto shows the instances together. Collective: all instances call. */
static void merge_traces(void)
{
    int n = tg_trace_exported_count();
    MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (int k = 0; k < n; k++)
        merge_trace(k);
}

static void tell_run_lost(void);

/* An instance lost while this one ends: the waits below are MPI's and the
 * watch's, which ask no heartbeat, and would wait for it for ever. */
static void lost_while_ending(const char *why)
{
    fprintf(stderr, "tilegraph: %s (while every instance was leaving the job)\n", why);
    fflush(stderr);
    tell_run_lost();
    _exit(1);
}

void tg_dist_finalize(void)
{
    if (joined) {
        if (size > 1)
            tg_dist_alive_guard(lost_while_ending);
        tg_dist_sum_f64_finish(); /* a sum still in flight: MPI_Finalize would wait anyway */
        if (size > 1) {
            tg_dist_watch_end(); /* an instance still waiting for this one fails, not hangs */
            merge_traces();
        }
        MPI_Finalize(); /* a fence over every instance: the heartbeat still guards it */
        tg_dist_alive_stop();
        joined = 0;
        rank = 0, size = 1, host_size = 1;
        clock_offset = 0;
        groups_made = 0;
    }
}

/* `tilegraph run` on this host (TILEGRAPH_RUN_PID and _HOST, which it
 * sets) is told that an instance was lost: mpirun, ending the job, waits for
 * the lost host's daemon over the dead link, and run ends it after a grace
 * period (tools/cmd_run.c). */
static void tell_run_lost(void)
{
    const char *pid = getenv("TILEGRAPH_RUN_PID"), *host = getenv("TILEGRAPH_RUN_HOST");
    char me[256] = "";
    if (!pid || !host || gethostname(me, sizeof me - 1) || strcmp(me, host))
        return;
    long p = strtol(pid, NULL, 10);
    if (p > 1)
        kill((pid_t)p, SIGUSR1);
}

void tg_dist_abort(int code)
{
    if (!joined || size < 2)
        return;
    fflush(stdout);
    fflush(stderr);
    /* an instance lost: MPI_Abort would tell the job over the dead link and
     * wait; ending this process ends its part, and mpirun sees it */
    if (__atomic_load_n(&lost, __ATOMIC_ACQUIRE)) {
        tell_run_lost();
        _exit(code ? code : 1);
    }
    MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}

bool tg_dist_active(void)
{
    return joined && size > 1;
}

int tg_dist_instance(void)
{
    return joined ? rank : 0;
}

int tg_dist_instances(void)
{
    return joined ? size : 1;
}

int tg_dist_host_instances(void)
{
    return joined ? host_size : 1;
}

double tg_dist_job_time(double local)
{
    return local + clock_offset;
}

static tg_status sum(void *values, int n, MPI_Datatype type)
{
    if (!tg_dist_active() || n <= 0)
        return TG_OK;
    MPI_Request req;
    int64_t k;
    tg_coll what = {.op = TG_COLL_SUM, .bytes = (int64_t)n * 8};
    TG_TRY(world_start(what, &k));
    if (MPI_Iallreduce(MPI_IN_PLACE, values, n, type, MPI_SUM, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return tg_error(TG_ERR_IO, "MPI: summing %d values over the instances failed", n);
    return world_wait(&req, k, what);
}

tg_status tg_dist_sum_i64(int64_t *values, int n)
{
    return sum(values, n, MPI_INT64_T);
}

tg_status tg_dist_sum_f64(double *values, int n)
{
    return sum(values, n, MPI_DOUBLE);
}

uint64_t tg_dist_hash(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Gather n hashes of every instance; the first (k, i) where instance i's
 * k-th differs from instance 0's, or k = -1. Every instance finds the same
 * pair from the same gathered table, so a collective that follows it is
 * called by all or by none. */
static tg_status first_difference(const uint64_t *hashes, int n, int *k_out, int *i_out,
                                  uint64_t *h0, uint64_t *hi)
{
    *k_out = -1;
    uint64_t *all = tg_malloc((size_t)n * (size_t)size * sizeof *all);
    if (!all)
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory comparing the instances");
    tg_status st = tg_dist_allgather(hashes, all, (size_t)n * sizeof *all);
    if (st != TG_OK) {
        tg_free(all);
        return st;
    }
    for (int k = 0; k < n && *k_out < 0; k++)
        for (int i = 1; i < size; i++)
            if (all[(size_t)i * (size_t)n + (size_t)k] != all[k]) {
                *k_out = k, *i_out = i;
                *h0 = all[k], *hi = all[(size_t)i * (size_t)n + (size_t)k];
                break;
            }
    tg_free(all);
    return TG_OK;
}

tg_status tg_dist_agree(const char *const *names, const uint64_t *hashes, int n, const char *advice)
{
    if (!tg_dist_active() || n <= 0)
        return TG_OK;
    int k, i;
    uint64_t a, b;
    TG_TRY(first_difference(hashes, n, &k, &i, &a, &b));
    if (k < 0)
        return TG_OK;
    return tg_error(TG_ERR_CONFIG,
                    "instances 0 and %d differ in their %s (checksum %016llx vs %016llx): %s", i,
                    names[k], (unsigned long long)a, (unsigned long long)b, advice);
}

#define AGREE_TEXT 160 /* bytes of a value shown in the message */

tg_status tg_dist_agree_texts(const char *const *names, const char *const *texts, int n,
                              const char *advice)
{
    if (!tg_dist_active() || n <= 0)
        return TG_OK;
    uint64_t *h = tg_malloc((size_t)n * sizeof *h);
    if (!h)
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory comparing the instances");
    for (int k = 0; k < n; k++)
        h[k] = tg_dist_hash(TG_DIST_HASH_INIT, texts[k], strlen(texts[k]) + 1);
    int k, i;
    uint64_t a, b;
    tg_status st = first_difference(h, n, &k, &i, &a, &b);
    tg_free(h);
    if (st != TG_OK || k < 0)
        return st;
    /* the values themselves, so that the message can show both */
    char mine[AGREE_TEXT], *all = tg_malloc((size_t)size * AGREE_TEXT);
    if (!all)
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory comparing the instances");
    snprintf(mine, sizeof mine, "%s", texts[k]);
    if ((st = tg_dist_allgather(mine, all, AGREE_TEXT)) != TG_OK) {
        tg_free(all);
        return st;
    }
    all[AGREE_TEXT - 1] = all[(size_t)i * AGREE_TEXT + AGREE_TEXT - 1] = 0;
    st = tg_error(TG_ERR_CONFIG, "instances 0 and %d differ in their %s ('%s' vs '%s'): %s", i,
                  names[k], all, all + (size_t)i * AGREE_TEXT, advice);
    tg_free(all);
    return st;
}

tg_status tg_dist_agree_values(const char *const *names, const int64_t *values, int n,
                               const char *advice)
{
    if (!tg_dist_active() || n <= 0)
        return TG_OK;
    int64_t *all = tg_malloc((size_t)n * (size_t)size * sizeof *all);
    if (!all)
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory comparing the instances");
    tg_status st = tg_dist_allgather(values, all, (size_t)n * sizeof *all);
    for (int k = 0; k < n && st == TG_OK; k++)
        for (int i = 1; i < size; i++) {
            int64_t v0 = all[k], vi = all[(size_t)i * (size_t)n + (size_t)k];
            if (vi != v0) {
                st = tg_error(TG_ERR_CONFIG,
                              "instances 0 and %d differ in their %s (%lld vs %lld): %s", i,
                              names[k], (long long)v0, (long long)vi, advice);
                break;
            }
        }
    tg_free(all);
    return st;
}

tg_status tg_dist_group_create(int n_devices, tg_dist_group **out)
{
    *out = NULL;
    if (!tg_dist_active())
        return TG_OK;
    tg_dist_group *g = tg_calloc(1, sizeof *g);
    if (!g || !(g->comms = tg_calloc((size_t)n_devices, sizeof *g->comms)) ||
        !(g->spins = tg_calloc((size_t)n_devices, sizeof *g->spins)) ||
        !(g->parts = tg_calloc((size_t)n_devices, sizeof *g->parts))) {
        if (g) {
            tg_free(g->comms);
            tg_free(g->spins);
        }
        tg_free(g);
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory for %d communicators", n_devices);
    }
    g->n = n_devices;
    g->ordinal = ++groups_made;
    /* spin while this host has a core per instance's device; otherwise the
     * waiting threads would take the cores of the ones they wait for */
    bool spare = tg_cpu_count() >= host_size * n_devices;
    g->spare = spare;
    for (int d = 0; d < n_devices; d++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &g->comms[d]);
        tg_spin_init(&g->spins[d], spare ? TG_SPIN_MAX : TG_SPIN_MIN);
    }
    *out = g;
    return TG_OK;
}

void tg_dist_group_destroy(tg_dist_group *g)
{
    if (!g)
        return;
    /* an instance still waiting in this model's exchange fails now, not
     * when this one ends (a script that detaches its model and goes on) */
    if (joined)
        tg_dist_watch_closed(g->ordinal, g->runs);
    for (int d = 0; d < g->n && joined; d++)
        MPI_Comm_free(&g->comms[d]);
    for (int d = 0; d < g->n; d++) {
        tg_free(g->parts[d].reqs);
        tg_free(g->parts[d].counts);
        tg_free(g->parts[d].displs);
    }
    tg_free(g->parts);
    tg_free(g->comms);
    tg_free(g->spins);
    tg_free(g);
}

typedef struct request_wait {
    MPI_Request *req;
    const bool *abort;
    bool aborted;
    /* what it waits for (dist_watch.h): past its first tests, a wait that
     * can never finish (another instance waits elsewhere) is given up */
    tg_wait_kind kind;
    int64_t n;
    bool told, stuck;
    tg_coll what; /* a collective over the job: which, and its bytes from each */
} request_wait;

/* Done, or abandoned because this instance's run was aborted (the request
 * stays pending: the job is about to end). A NULL abort: never abandoned. */
static bool request_settled(void *arg)
{
    request_wait *w = arg;
    int done = 0;
    MPI_Test(w->req, &done, MPI_STATUS_IGNORE);
    if (!done && w->abort && __atomic_load_n(w->abort, __ATOMIC_ACQUIRE))
        w->aborted = true;
    return done || w->aborted;
}

/* Test between yields for a millisecond: a collective of instances that
 * are close finishes in that time; false if it did not. */
static bool yield_briefly(request_wait *w)
{
    double end = tg_clock_seconds() + 1e-3;
    while (!request_settled(w)) {
        if (tg_clock_seconds() > end)
            return false;
        sched_yield();
    }
    return true;
}

/* Test between sleeps until the request settles: `first_ns` for the first
 * 64 tests, then `later_ns`, so a waiting instance leaves the host's cores
 * to the ones it waits for (a blocking MPI call would spin). */
static void sleep_until_settled(request_wait *w, long first_ns, long later_ns)
{
    /* the others are told of a wait past a tenth of a second: a slower
     * instance's usual lag is not worth a message, a deadlock is found in
     * about a second anyway (dist_watch.c) */
    double tell_at = tg_clock_seconds() + 0.1;
    for (long tests = 0; !request_settled(w); tests++) {
        if (w->kind != TG_WAIT_NONE && tests % 16 == 0 && tg_clock_seconds() > tell_at &&
            tg_dist_watch_stuck(w->kind, w->n, w->what, &w->told)) {
            w->stuck = w->aborted = true;
            break;
        }
        if (tests % 16 == 15 && instance_lost()) {
            w->stuck = w->aborted = true; /* silent past the timeout: gone */
            break;
        }
        struct timespec ts = {0, tests < 64 ? first_ns : later_ns};
        nanosleep(&ts, NULL);
    }
    tg_dist_watch_done(w->kind, w->n, w->told);
}

/* A collective over the job started as request *req (its number k,
 * tg_dist_watch_note_world): waited for between sleeps, or an error if
 * another instance waits where this one never gets. */
static tg_status world_wait(MPI_Request *req, int64_t k, tg_coll what)
{
    request_wait w = {req, NULL, false, TG_WAIT_WORLD, k, false, false, what};
    if (!yield_briefly(&w))
        sleep_until_settled(&w, 20000, 1000000);
    if (w.stuck)
        return tg_error(TG_ERR_CONFIG, "%s", tg_dist_stuck_reason(""));
    return TG_OK;
}

/* Count a collective over the job (*k, its number) and agree on it first:
 * MPI matches collectives by order alone, so instances at the same number
 * in different collectives (one gathers, as a save does, another sums, as
 * an evaluation does) or with other byte counts would exchange the wrong
 * bytes, fail inside MPI with a truncation, or hang. Each instance's
 * (collective, bytes) goes through a maximum and a minimum on the watch's
 * own communicator, which every instance enters at every collective; two
 * that differ refuse it, naming both, before any data moves. */
static tg_status world_start(tg_coll what, int64_t *k)
{
    *k = tg_dist_watch_note_world();
    if (tg_dist_watch_comm() == MPI_COMM_NULL) /* out of memory at the start: unchecked */
        return TG_OK;
    int64_t w[4] = {what.op, what.bytes, -(int64_t)what.op, -what.bytes};
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, w, 4, MPI_INT64_T, MPI_MAX, tg_dist_watch_comm(), &req);
    TG_TRY(world_wait(&req, *k, what));
    bool same = w[0] == what.op && w[1] == what.bytes && -w[2] == what.op && -w[3] == what.bytes;
    if (same)
        return TG_OK;
    tg_coll other = w[0] != what.op || w[1] != what.bytes
                        ? (tg_coll){.op = (tg_coll_op)w[0], .bytes = w[1]}
                        : (tg_coll){.op = (tg_coll_op)-w[2], .bytes = -w[3]};
    char mine[96], theirs[96];
    return tg_error(
        TG_ERR_CONFIG,
        "MPI: the instances called different collectives at their collective %lld over "
        "the job: this instance (%d) calls %s, another calls %s, so they can never meet. Every "
        "instance must call the same functions over the job (tilegraph.dist; --save, "
        "evaluation and checks on all instances or on none) in the same order",
        (long long)*k, rank, tg_dist_watch_coll_text(mine, sizeof mine, what),
        tg_dist_watch_coll_text(theirs, sizeof theirs, other));
}

const char *tg_dist_stuck_reason(const char *otherwise)
{
    if (__atomic_load_n(&lost, __ATOMIC_ACQUIRE))
        return lost_reason;
    const char *r = tg_dist_watch_reason();
    return r[0] ? r : otherwise;
}

void tg_dist_note_run(tg_dist_group *g)
{
    if (!tg_dist_active() || !g)
        return;
    g->runs++;
    tg_dist_watch_note_run();
}

/* The sum tg_dist_sum_f64_start started, until tg_dist_sum_f64_finish. */
static struct {
    MPI_Request req;
    bool pending;
    tg_spin spin;
    int64_t k;    /* its number among the job's collectives (dist_watch.h) */
    tg_coll what; /* a sum of how many bytes */
} started_sum = {MPI_REQUEST_NULL, false, {0}, 0, {.op = TG_COLL_SUM}};

tg_status tg_dist_sum_f64_start(double *values, int n)
{
    if (!tg_dist_active() || n <= 0)
        return TG_OK;
    if (started_sum.pending)
        return tg_error(TG_ERR_INVALID_ARG,
                        "MPI: a sum over the instances was started before the last one finished "
                        "(tg_dist_sum_f64_finish)");
    started_sum.what = (tg_coll){.op = TG_COLL_SUM, .bytes = (int64_t)n * 8};
    /* not agreed first (world_start): the agreement would wait for the
     * slowest instance, which this sum exists to leave to the next host
     * step (2.4-4.5 ms a host step of mnist-pipeline over 2 instances where
     * the sums took 0.003-0.09). Its wait is still watched, a clash there
     * named by dist_watch.c; the CLI, its one caller, agrees on its loop at
     * start. */
    started_sum.k = tg_dist_watch_note_world();
    if (MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                       &started_sum.req) != MPI_SUCCESS)
        return tg_error(TG_ERR_IO, "MPI: starting a sum of %d values over the instances failed", n);
    if (!started_sum.spin.ceiling) /* spin while the host has a core per instance */
        tg_spin_init(&started_sum.spin, tg_cpu_count() >= host_size ? TG_SPIN_MAX : TG_SPIN_MIN);
    started_sum.pending = true;
    return TG_OK;
}

tg_status tg_dist_sum_f64_finish(void)
{
    if (!started_sum.pending)
        return TG_OK;
    request_wait w = {&started_sum.req, NULL,  false, TG_WAIT_WORLD,
                      started_sum.k,    false, false, started_sum.what};
    if (!tg_spin_wait(&started_sum.spin, request_settled, &w))
        sleep_until_settled(&w, 20000, 50000);
    started_sum.pending = false;
    if (w.stuck)
        return tg_error(TG_ERR_CONFIG, "%s", tg_dist_stuck_reason(""));
    return TG_OK;
}

/* Test between yields for up to `seconds`; false if still unsettled. */
static bool yield_until_settled(request_wait *w, double seconds)
{
    double end = tg_clock_seconds() + seconds;
    while (!request_settled(w)) {
        if (tg_clock_seconds() > end)
            return false;
        sched_yield();
    }
    return true;
}

/* Spin (adaptively, core/wait.h) while the other instances are close, then
 * sleep between tests: the cores may be shared with them. Between the two,
 * with a core per device, test between yields for up to a millisecond: a
 * transfer of tens of microseconds outlasts a spin budget that one slow
 * start has shrunk to its floor, and it would then sleep at every update
 * (no sooner than 50 us, and this side's part of the transfer, made inside
 * MPI's calls, stops meanwhile); a yield still gives the core to whoever
 * else is runnable on it. */
static bool settle(tg_dist_group *g, int device, MPI_Request *req, const bool *abort)
{
    request_wait w = {req,
                      abort,
                      false,
                      TG_WAIT_RUN,
                      tg_dist_watch_runs(),
                      false,
                      false,
                      {TG_COLL_NONE, 0, g->ordinal, g->runs}};
    if (!tg_spin_wait(&g->spins[device], request_settled, &w) &&
        !(g->spare && yield_until_settled(&w, 1e-3)))
        sleep_until_settled(&w, 50000, 50000);
    return !w.aborted;
}

bool tg_dist_group_allgather(tg_dist_group *g, int device, const void *send, void *recv,
                             size_t bytes, const bool *abort)
{
    MPI_Request req;
    MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, g->comms[device], &req);
    return settle(g, device, &req, abort);
}

tg_status tg_dist_group_reserve(tg_dist_group *g, int device, int n_parts)
{
    parts *p = &g->parts[device];
    size_t n = (size_t)n_parts, cells = n * (size_t)size;
    p->reqs = tg_calloc(n + 1, sizeof *p->reqs);
    p->counts = tg_calloc(cells + 1, sizeof *p->counts);
    p->displs = tg_calloc(cells + 1, sizeof *p->displs);
    if (!p->reqs || !p->counts || !p->displs)
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory for %d gradient buckets of device %d",
                        n_parts, device);
    p->n = n_parts;
    for (int k = 0; k < n_parts; k++)
        p->reqs[k] = MPI_REQUEST_NULL;
    return TG_OK;
}

void tg_dist_group_start(tg_dist_group *g, int device, int part, void *recv, size_t offset,
                         size_t bytes, size_t pack)
{
    parts *p = &g->parts[device];
    int *counts = p->counts + (size_t)part * (size_t)size;
    int *displs = p->displs + (size_t)part * (size_t)size;
    for (int i = 0; i < size; i++) {
        counts[i] = (int)bytes;
        displs[i] = (int)((size_t)i * pack + offset);
    }
    /* in place: this instance's part is already in its block of recv, so
     * MPI does not copy it there from a send buffer */
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, counts, displs, MPI_BYTE,
                    g->comms[device], &p->reqs[part]);
}

bool tg_dist_group_test(tg_dist_group *g, int device, int part)
{
    int done = 0;
    MPI_Test(&g->parts[device].reqs[part], &done, MPI_STATUS_IGNORE);
    return done;
}

bool tg_dist_group_wait(tg_dist_group *g, int device, int part, const bool *abort)
{
    return settle(g, device, &g->parts[device].reqs[part], abort);
}

/* A broadcast's wait: no spinning, since instance 0 may be compiling on
 * these cores for seconds; watched as world_wait watches. */
static tg_status wait_politely(MPI_Request *req, int64_t k, tg_coll what)
{
    request_wait w = {req, NULL, false, TG_WAIT_WORLD, k, false, false, what};
    sleep_until_settled(&w, 20000, 1000000);
    if (w.stuck)
        return tg_error(TG_ERR_CONFIG, "%s", tg_dist_stuck_reason(""));
    return TG_OK;
}

tg_status tg_dist_broadcast(void **data, size_t *len)
{
    if (!tg_dist_active())
        return TG_OK;
    int64_t n = rank == 0 ? (*data ? (int64_t)*len : -1) : 0;
    MPI_Request req;
    int64_t k;
    tg_coll what = {.op = TG_COLL_BROADCAST, .bytes = 8};
    TG_TRY(world_start(what, &k));
    MPI_Ibcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &req);
    TG_TRY(wait_politely(&req, k, what));
    if (rank != 0) {
        *data = NULL;
        *len = 0;
        if (n < 0)
            return TG_OK;
        *data = tg_malloc((size_t)n + 1);
        if (!*data)
            return tg_error(TG_ERR_NOMEM, "MPI: out of memory receiving %lld bytes from instance 0",
                            (long long)n);
        *len = (size_t)n;
    }
    const int64_t chunk = 1 << 30; /* MPI counts are ints */
    for (int64_t at = 0; at < n; at += chunk) {
        int part = (int)(n - at < chunk ? n - at : chunk);
        what.bytes = part;
        tg_status st = world_start(what, &k);
        if (st == TG_OK) {
            MPI_Ibcast((char *)*data + at, part, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
            st = wait_politely(&req, k, what);
        }
        if (st != TG_OK) {
            if (rank != 0) {
                tg_free(*data);
                *data = NULL;
                *len = 0;
            }
            return st;
        }
    }
    return TG_OK;
}

tg_status tg_dist_allgather(const void *send, void *recv, size_t bytes)
{
    if (!tg_dist_active())
        return TG_OK;
    if (bytes > INT32_MAX)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "MPI: %zu bytes to gather at once, more than an "
                        "MPI count holds",
                        bytes);
    MPI_Request req;
    int64_t k;
    tg_coll what = {.op = TG_COLL_GATHER, .bytes = (int64_t)bytes};
    TG_TRY(world_start(what, &k));
    if (MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD,
                       &req) != MPI_SUCCESS)
        return tg_error(TG_ERR_IO, "MPI: gathering %zu bytes from every instance failed", bytes);
    return world_wait(&req, k, what);
}
