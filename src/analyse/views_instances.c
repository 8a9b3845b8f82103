/* analyse/views_instances.c - the instances of an MPI job side by side.
 *
 * A job of N instances (docs/distributed.md) writes one profile per
 * instance, DIR/instance-K/<training|inference>/profile.sqlite. The view
 * opens the profile it was given, finds its siblings from the path and the
 * profile's own record (meta instance and instances), and puts every
 * instance on a row: its host, the job's replicas it ran, its mean host
 * step, the all-reduce inside it and the part of that spent exchanging with
 * the other instances, and its samples per second over those same steps
 * (a step's samples over the mean host step, so the columns agree). That is
 * where an instance that holds the others back shows: a longer host step,
 * or a longer exchange on every instance but the slow one.
 */
#include "analyse/analyse.h"

#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The job directory holding `path` (…/instance-K/<kind>/profile.sqlite),
 * the kind's directory name and K; false when the path is not laid out so. */
static bool job_of(const char *path, char *job, size_t cap, char *kind, size_t kind_cap, int *k)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    char *file = strrchr(copy, '/');
    if (!file)
        return false;
    *file = '\0';
    char *kind_dir = strrchr(copy, '/');
    if (!kind_dir)
        return false;
    *kind_dir++ = '\0';
    char *inst = strrchr(copy, '/');
    const char *name = inst ? inst + 1 : copy;
    char *end = NULL;
    if (strncmp(name, "instance-", 9) != 0)
        return false;
    long v = strtol(name + 9, &end, 10);
    if (end == name + 9 || *end || v < 0)
        return false;
    if (inst)
        *inst = '\0';
    snprintf(job, cap, "%s", inst ? copy : ".");
    snprintf(kind, kind_cap, "%s", kind_dir);
    *k = (int)v;
    return true;
}

typedef struct instance_row {
    double steps, step_ns, all_reduce_ns, exchange_ns, buckets_ns, samples_per_s;
} instance_row;

static double query_double(tg_profile_reader *r, const char *sql)
{
    sqlite3_stmt *st = NULL;
    double v = NAN;
    if (tg_an_prepare(r, sql, &st) != TG_OK)
        return NAN;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The recorded host steps averaged: all but the first when there are
 * several, since the first also waits for the other instances to start. */
#define STEADY                                                                                     \
    "run > (SELECT CASE WHEN COUNT(DISTINCT run) > 1 THEN MIN(run) ELSE -1 END FROM trace)"

/* The time some gradient bucket of replica 0 was on its way while the
 * backward still ran (before its device's all-reduce began), summed over
 * the steady host steps and devices: the exchange the buckets overlapped
 * with the backward. Buckets in flight together overlap each other, so
 * their intervals are merged, not added. */
static double buckets_in_backward(tg_profile_reader *r)
{
    static const char *sql =
        "SELECT b.run, b.device, b.start_ns, b.end_ns, (SELECT MIN(a.start_ns) FROM trace a "
        "WHERE a.run = b.run AND a.device = b.device AND a.replica = 0 AND a.kind = "
        "'all-reduce') FROM trace b WHERE b.replica = 0 AND b.kind = 'gradient bucket to "
        "instances' AND b." STEADY " ORDER BY b.run, b.device, b.start_ns";
    sqlite3_stmt *st = NULL;
    if (tg_an_prepare(r, sql, &st) != TG_OK)
        return NAN;
    double sum = 0, reached = 0;
    int64_t run = -1, device = -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_int64(st, 0) != run || sqlite3_column_int64(st, 1) != device) {
            run = sqlite3_column_int64(st, 0);
            device = sqlite3_column_int64(st, 1);
            reached = 0;
        }
        double start = sqlite3_column_double(st, 2), end = sqlite3_column_double(st, 3);
        if (sqlite3_column_type(st, 4) != SQLITE_NULL && sqlite3_column_double(st, 4) < end)
            end = sqlite3_column_double(st, 4); /* the backward ended there */
        if (start < reached)
            start = reached;
        if (end > start)
            sum += end - start;
        if (end > reached)
            reached = end;
    }
    sqlite3_finalize(st);
    return sum;
}

/* Per recorded host step: its wall time (first start to last end over every
 * replica and device), and the all-reduce and the exchange with the other
 * instances of replica 0, averaged over its devices. */
static void read_row(tg_profile_reader *r, instance_row *row)
{
    double devices = atof(tg_profile_reader_meta(r, "devices"));
    devices = devices > 0 ? devices : 1;
    row->steps = query_double(r, "SELECT COUNT(DISTINCT run) FROM trace WHERE " STEADY);
    row->step_ns = query_double(r, "SELECT AVG(w) FROM (SELECT MAX(end_ns) - MIN(start_ns) AS w "
                                   "FROM trace WHERE " STEADY " GROUP BY run)");
    double runs = row->steps > 0 ? row->steps : NAN;
    row->all_reduce_ns = query_double(r, "SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM trace "
                                         "WHERE replica = 0 AND kind = 'all-reduce' AND " STEADY) /
                         runs / devices;
    row->exchange_ns =
        query_double(r, "SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM trace WHERE replica = 0 "
                        "AND kind = 'exchange with instances' AND " STEADY) /
        runs / devices;
    row->buckets_ns = buckets_in_backward(r) / runs / devices;
    /* the samples of the steps averaged above over their mean time: the
     * mean of each step's own rate would disagree with the host step shown */
    double samples = query_double(r, "SELECT AVG(value) FROM counters WHERE name = 'samples' AND "
                                     "step IN (SELECT DISTINCT run FROM trace WHERE " STEADY ")");
    row->samples_per_s = row->step_ns > 0 ? samples / (row->step_ns * 1e-9) : NAN;
}

/* true: the instance sent gradient buckets during the backward */
static bool add_row(tg_an_table *t, tg_profile_reader *r, int k)
{
    instance_row row;
    read_row(r, &row);
    int offset = atoi(tg_profile_reader_meta(r, "replica_offset"));
    int local = atoi(tg_profile_reader_meta(r, "replicas"));
    char replicas[48];
    if (local <= 1)
        snprintf(replicas, sizeof replicas, "%d", offset);
    else
        snprintf(replicas, sizeof replicas, "%d..%d", offset, offset + local - 1);
    const char *host = tg_profile_reader_meta(r, "host");
    char host_copy[256];
    snprintf(host_copy, sizeof host_copy, "%s", *host ? host : "-");
    double share = row.step_ns > 0 ? row.exchange_ns / row.step_ns : NAN;
    tg_an_row(t, (double)k, host_copy, replicas, row.steps, row.step_ns, row.all_reduce_ns,
              row.exchange_ns, share, row.buckets_ns, row.samples_per_s);
    return row.buckets_ns > 0;
}

static tg_an_table *instances_table(tg_an_view *v)
{
    static const char *const cols[] = {
        "instance",   "host",           "replicas",    "host steps",      "mean step",
        "all-reduce", "with instances", "of the step", "in the backward", "samples/s"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_LABEL, TG_AN_LABEL, TG_AN_COUNT, TG_AN_NS,
                                       TG_AN_NS, TG_AN_NS,    TG_AN_FRAC,  TG_AN_NS,    TG_AN_NUM};
    return tg_an_table_add(
        v,
        "Instances (the mean of the recorded host steps after the first; "
        "samples/s: a step's samples over that mean; all-reduce of replica 0; "
        "in the backward: some gradient bucket on its way while the backward ran)",
        10, cols, kinds);
}

tg_status tg_an_view_instances(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    (void)f;
    int n = atoi(tg_profile_reader_meta(r, "instances"));
    char job[4096], kind[64];
    int self = 0;
    tg_an_table *t = instances_table(v);
    if (n < 2 || !job_of(tg_profile_reader_path(r), job, sizeof job, kind, sizeof kind, &self)) {
        add_row(t, r, 0);
        tg_an_note(v, "%s is the profile of one process, not of an instance of an MPI job",
                   tg_profile_reader_path(r));
        return TG_OK;
    }
    int found = 0, bucketed = 0;
    for (int k = 0; k < n; k++) {
        if (k == self) {
            bucketed += add_row(t, r, k);
            found++;
            continue;
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/instance-%d/%s/profile.sqlite", job, k, kind);
        tg_profile_reader *other = NULL;
        if (tg_profile_reader_open(path, &other) != TG_OK) {
            tg_an_note(v, "instance %d: %s", k, tg_error_message());
            continue;
        }
        bucketed += add_row(t, other, k);
        tg_profile_reader_close(other);
        found++;
    }
    tg_an_note(v,
               "a job of %d instances (%d profiles found under %s, %s); \"with instances\" "
               "is the MPI exchange inside the all-reduce, waiting for the slowest instance "
               "included",
               n, found, job, kind);
    /* what runtime/allreduce.c and buckets.c do, and beneath them what the
     * MPI library ran (the profile's record, runtime/dist.c) */
    char wire[32];
    snprintf(wire, sizeof wire, "%s", tg_profile_reader_meta(r, "gradient_wire"));
    const char *mpi = tg_profile_reader_meta(r, bucketed ? "mpi_allgatherv" : "mpi_allgather");
    tg_an_note(v,
               "all-reduce algorithm: every instance's gradients all-gathered (%s; %s on the "
               "wire), then summed in f32 on each instance in global replica order (the sum of "
               "one process); beneath it, %s",
               bucketed ? "in buckets during the backward, MPI_Iallgatherv, the rest waited "
                          "for after it"
                        : "after the backward, MPI_Iallgather",
               *wire ? wire : "float32", *mpi ? mpi : "not recorded (an older profile)");
    return TG_OK;
}
