/* runtime/dist_watch.c - instances waiting for each other in different
 * collectives (issue 46, row 2).
 *
 * MPI matches collectives by order: an instance that runs one more training
 * step than another, or calls a sum the other never calls, waits for ever,
 * and so does the other in whatever it waits for next (or at the job's
 * end). The CLI agrees on its loop at start (tools/train_exchange.c), but a
 * Python script decides its steps as it runs, so here the instances watch:
 *
 * Each instance counts its training runs and its collectives over the job.
 * A wait that lasts (past its spinning, once it sleeps between tests) tells
 * every other instance where it waits (a small message on a communicator of
 * its own: its kind, number and both counts), and an instance that ends
 * tells them it has left. A waiting instance reads what the others told,
 * and two waits that can never both finish are a deadlock: instance A waits
 * for X, B for Y, X is not Y, A has not reached Y and B has not reached X
 * (a collective finishes only once every instance has called it, so if B
 * had called X, X would finish). Two waits at the same collective number
 * that are different collectives (one instance gathers, the other sums, as
 * when only one of them saves) or give different byte counts never finish
 * either: MPI matches them by order alone. A message is acted on only after a second,
 * so one that the next message (the wait ended) contradicts is not. The
 * waiting instance then fails its wait with a sentence naming both
 * instances and where each is, and the failure ends the job (the CLI and
 * the Python package abort the job on an error) instead of hanging it.
 */
#include "runtime/dist_watch.h"

#include "core/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_NOTICE = 4602, NOTICE_WORDS = 8 };

/* What an instance last told: where it waits and how far it got. */
typedef struct notice {
    int64_t kind, n, runs, world, op, bytes, group, run; /* the message, in this order */
    double at;                                           /* when it arrived here; 0: nothing yet */
} notice;

/* A message on its way: MPI reads `words` until the request completes. */
typedef struct outgoing {
    MPI_Request req;
    int64_t words[NOTICE_WORDS];
    struct outgoing *next;
} outgoing;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Comm comm = MPI_COMM_NULL;
static int me, count;
static notice *heard; /* per instance */
static outgoing *sending;
static int64_t runs, world; /* atomics: device threads read them */
static char reason[1024];
static const double settle_s = 1.0; /* a notice older than this is acted on */

void tg_dist_watch_init(MPI_Comm job, int rank, int size)
{
    me = rank, count = size;
    heard = calloc((size_t)size, sizeof *heard);
    if (heard)
        MPI_Comm_dup(job, &comm);
}

static void listen(void);
static void reap(void);

void tg_dist_watch_note_run(void)
{
    __atomic_add_fetch(&runs, 1, __ATOMIC_ACQ_REL);
    if (comm == MPI_COMM_NULL)
        return;
    /* an instance that never waits long still reads what the others told
     * it, once a run, so their messages do not pile up in MPI's queue */
    pthread_mutex_lock(&lock);
    listen();
    reap();
    pthread_mutex_unlock(&lock);
}

int64_t tg_dist_watch_note_world(void)
{
    return __atomic_add_fetch(&world, 1, __ATOMIC_ACQ_REL);
}

int64_t tg_dist_watch_runs(void)
{
    return __atomic_load_n(&runs, __ATOMIC_ACQUIRE);
}

const char *tg_dist_watch_reason(void)
{
    static _Thread_local char copy[sizeof reason]; /* device threads ask at once */
    pthread_mutex_lock(&lock);
    memcpy(copy, reason, sizeof copy);
    pthread_mutex_unlock(&lock);
    return copy;
}

/* Messages sent and delivered are freed; with the lock held. */
static void reap(void)
{
    for (outgoing **o = &sending; *o;) {
        int done = 0;
        MPI_Test(&(*o)->req, &done, MPI_STATUS_IGNORE);
        if (done) {
            outgoing *d = *o;
            *o = d->next;
            free(d);
        } else {
            o = &(*o)->next;
        }
    }
}

/* Tell every other instance; with the lock held. */
static void tell(tg_wait_kind kind, int64_t n, tg_coll what)
{
    for (int i = 0; i < count; i++) {
        outgoing *o = i == me ? NULL : malloc(sizeof *o);
        if (!o)
            continue;
        int64_t w[NOTICE_WORDS] = {
            kind,    n,          tg_dist_watch_runs(), __atomic_load_n(&world, __ATOMIC_ACQUIRE),
            what.op, what.bytes, what.group,           what.run};
        memcpy(o->words, w, sizeof w);
        MPI_Isend(o->words, NOTICE_WORDS, MPI_INT64_T, i, TAG_NOTICE, comm, &o->req);
        o->next = sending;
        sending = o;
    }
    reap();
}

/* Take every message that has arrived; with the lock held. */
static void listen(void)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_NOTICE, comm, &flag, &st);
        if (!flag)
            return;
        int64_t w[NOTICE_WORDS];
        MPI_Recv(w, NOTICE_WORDS, MPI_INT64_T, st.MPI_SOURCE, TAG_NOTICE, comm, MPI_STATUS_IGNORE);
        heard[st.MPI_SOURCE] =
            (notice){w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], tg_clock_seconds()};
    }
}

/* Whether an instance at runs r and collectives c has called (kind, n). */
static bool reached(tg_wait_kind kind, int64_t n, int64_t r, int64_t c)
{
    return kind == TG_WAIT_RUN ? r >= n : kind == TG_WAIT_WORLD ? c >= n : false;
}

static const char *coll_name(tg_coll_op op)
{
    return op == TG_COLL_SUM         ? "a sum"
           : op == TG_COLL_GATHER    ? "a gather"
           : op == TG_COLL_BROADCAST ? "a broadcast"
                                     : "a collective";
}

MPI_Comm tg_dist_watch_comm(void)
{
    return comm;
}

const char *tg_dist_watch_coll_text(char *buf, size_t cap, tg_coll what)
{
    snprintf(buf, cap, "%s of %lld byte%s from each", coll_name(what.op), (long long)what.bytes,
             what.bytes == 1 ? "" : "s");
    return buf;
}

static const char *where(char *buf, size_t cap, tg_wait_kind kind, int64_t n, int64_t r,
                         tg_coll what)
{
    char c[96];
    if (kind == TG_WAIT_WORLD && what.op != TG_COLL_NONE)
        snprintf(buf, cap,
                 "waits in its collective %lld over the job, %s, after %lld training run%s",
                 (long long)n, tg_dist_watch_coll_text(c, sizeof c, what), (long long)r,
                 r == 1 ? "" : "s");
    else if (kind == TG_WAIT_LEFT)
        snprintf(buf, cap, "has ended after %lld training run%s", (long long)r, r == 1 ? "" : "s");
    else if (kind == TG_WAIT_CLOSED)
        snprintf(buf, cap,
                 "closed its training model %lld (detachFromDevice, destroy, or the model was "
                 "freed) after %lld training run%s of it",
                 (long long)what.group, (long long)what.run, what.run == 1 ? "" : "s");
    else if (kind == TG_WAIT_RUN && what.group > 0)
        snprintf(buf, cap,
                 "waits in the gradient exchange of its training run %lld (run %lld of training "
                 "model %lld)",
                 (long long)n, (long long)what.run, (long long)what.group);
    else if (kind == TG_WAIT_RUN)
        snprintf(buf, cap, "waits in the gradient exchange of its training run %lld", (long long)n);
    else
        snprintf(buf, cap,
                 "waits in its collective %lld over the job (a sum, check or broadcast) after %lld "
                 "training run%s",
                 (long long)n, (long long)r, r == 1 ? "" : "s");
    return buf;
}

/* Whether instance i's notice is a wait at this very collective, as this
 * one calls it (then it finishes once the rest arrive). */
static bool same_wait(const notice *h, tg_wait_kind kind, int64_t n, tg_coll what)
{
    if ((tg_wait_kind)h->kind != kind || h->n != n)
        return false;
    if (kind == TG_WAIT_RUN) /* two models' exchanges never meet */
        return h->group == what.group;
    return kind != TG_WAIT_WORLD || (h->op == what.op && h->bytes == what.bytes);
}

/* Instance i's last notice against this wait: a deadlock sets the reason. */
static bool deadlocked(int i, tg_wait_kind kind, int64_t n, tg_coll what, double now)
{
    const notice *h = &heard[i];
    tg_wait_kind theirs = (tg_wait_kind)h->kind;
    /* a wait may end by the next message; having left or closed a model
     * is final, and acted on at once */
    bool final = theirs == TG_WAIT_LEFT || theirs == TG_WAIT_CLOSED;
    if (h->at == 0 || (!final && now - h->at < settle_s) || theirs == TG_WAIT_NONE ||
        same_wait(h, kind, n, what))
        return false;
    int64_t my_runs = tg_dist_watch_runs(), my_world = __atomic_load_n(&world, __ATOMIC_ACQUIRE);
    /* at one number, the other collective is the one each has called */
    bool clash = theirs == kind && h->n == n;
    /* a model closed after fewer runs than the one this instance waits in
     * never exchanges that run's gradients (its last one, still arriving
     * here, is not waited for in vain) */
    bool closed = theirs == TG_WAIT_CLOSED;
    if (closed && (kind != TG_WAIT_RUN || h->group != what.group || h->run >= what.run))
        return false;
    if (!clash && !closed &&
        (reached(theirs, h->n, my_runs, my_world) || reached(kind, n, h->runs, h->world)))
        return false;
    char a[240], b[240];
    tg_coll yours = {(tg_coll_op)h->op, h->bytes, h->group, h->run};
    snprintf(reason, sizeof reason,
             "MPI: instance %d %s, while this instance (%d) %s: they can never meet. The "
             "instances ran different numbers of steps or called different collectives; every "
             "instance must run the model the same number of times and call the same functions "
             "over the job (tilegraph.dist) in the same order",
             i, where(a, sizeof a, theirs, h->n, h->runs, yours), me,
             where(b, sizeof b, kind, n, my_runs, what));
    return true;
}

bool tg_dist_watch_stuck(tg_wait_kind kind, int64_t n, tg_coll what, bool *told)
{
    if (comm == MPI_COMM_NULL)
        return false;
    pthread_mutex_lock(&lock);
    if (!*told) {
        tell(kind, n, what);
        *told = true;
    }
    listen();
    double now = tg_clock_seconds();
    bool stuck = reason[0] != 0;
    for (int i = 0; i < count && !stuck; i++)
        stuck = i != me && deadlocked(i, kind, n, what, now);
    pthread_mutex_unlock(&lock);
    return stuck;
}

void tg_dist_watch_done(tg_wait_kind kind, int64_t n, bool told)
{
    (void)kind, (void)n;
    if (!told || comm == MPI_COMM_NULL)
        return;
    pthread_mutex_lock(&lock);
    tell(TG_WAIT_NONE, 0, (tg_coll){0});
    pthread_mutex_unlock(&lock);
}

void tg_dist_watch_closed(int64_t group, int64_t group_runs)
{
    if (comm == MPI_COMM_NULL)
        return;
    pthread_mutex_lock(&lock);
    tell(TG_WAIT_CLOSED, group, (tg_coll){TG_COLL_NONE, 0, group, group_runs});
    pthread_mutex_unlock(&lock);
}

void tg_dist_watch_end(void)
{
    if (comm == MPI_COMM_NULL)
        return;
    pthread_mutex_lock(&lock);
    tell(TG_WAIT_LEFT, 0, (tg_coll){0});
    /* every other instance's leaving, so that no message is left unread */
    for (;;) {
        listen();
        int left = 0;
        for (int i = 0; i < count; i++)
            left += i == me || heard[i].kind == TG_WAIT_LEFT;
        if (left == count)
            break;
        pthread_mutex_unlock(&lock);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&lock);
    }
    while (sending) {
        reap();
        if (sending) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_unlock(&lock);
    MPI_Comm_free(&comm);
    comm = MPI_COMM_NULL;
    free(heard);
    heard = NULL;
    runs = world = 0;
    reason[0] = 0;
}
