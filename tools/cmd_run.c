/* tools/cmd_run.c - `tilegraph run`: start a training as N instances over
 * MPI (PopRun's role). It checks the plan, prints which instance runs where
 * with which replicas, and replaces itself with the mpirun command that
 * starts the instances; each instance (tilegraph under mpirun) then
 * configures itself from MPI's environment (tilegraph/dist.h). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HOSTS 64
#define MAX_MPI_ARGS 32

typedef struct run_args {
    long instances, replicas;
    const char *hosts, *hostfile;
    const char *mpi_args[MAX_MPI_ARGS];
    int n_mpi_args;
    int dry_run;
    const char *mpirun;
    char **command; /* after "--": the tilegraph command each instance runs */
    int n_command;
} run_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tilegraph run --instances N --replicas R [--host h1,h2 | --hostfile F]\n"
            "                     [--mpi-arg ARG]... [--dry-run] -- train [train options]\n\n"
            "Start one training as N instances (processes) over MPI, R replicas in all: each\n"
            "instance runs R/N of them and loads only their samples; gradients are reduced\n"
            "across instances in replica order, so the result is bit for bit the training of\n"
            "one process with R replicas (docs/distributed.md).\n\n"
            "  --instances N     processes to start (1..%d)\n"
            "  --replicas R      replicas in all; N must divide R (passed on as --replicas R)\n"
            "  --host LIST       comma-separated hosts, instances placed round-robin\n"
            "  --hostfile F      an OpenMPI hostfile (one host per line, slots=K)\n"
            "  --mpi-arg ARG     one more argument for mpirun (repeatable)\n"
            "  --mpirun PATH     the mpirun to use (default: mpirun from PATH)\n"
            "  --dry-run         print the plan and the mpirun line, start nothing\n"
            "  --help            this text\n",
            MAX_HOSTS);
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || *end || x < lo || x > hi) {
        fprintf(stderr, "tilegraph run: %s takes a whole number in %ld..%ld, not '%s'\n", flag, lo,
                hi, v ? v : "(nothing)");
        return -1;
    }
    *out = x;
    return 0;
}

/* 0: parsed, 1: --help printed, -1: bad arguments (message printed). */
static int parse(run_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->mpirun = "mpirun";
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(f, "--")) {
            a->command = argv + i + 1;
            a->n_command = argc - i - 1;
            break;
        } else if (!strcmp(f, "--dry-run")) {
            a->dry_run = 1;
            continue;
        } else if (!strcmp(f, "--instances")) {
            if (parse_long(f, v, 1, MAX_HOSTS, &a->instances))
                return -1;
        } else if (!strcmp(f, "--replicas")) {
            if (parse_long(f, v, 1, 64, &a->replicas))
                return -1;
        } else if (!strcmp(f, "--host") && v) {
            a->hosts = v;
        } else if (!strcmp(f, "--hostfile") && v) {
            a->hostfile = v;
        } else if (!strcmp(f, "--mpirun") && v) {
            a->mpirun = v;
        } else if (!strcmp(f, "--mpi-arg") && v) {
            if (a->n_mpi_args == MAX_MPI_ARGS) {
                fprintf(stderr, "tilegraph run: at most %d --mpi-arg\n", MAX_MPI_ARGS);
                return -1;
            }
            a->mpi_args[a->n_mpi_args++] = v;
        } else {
            fprintf(stderr, "tilegraph run: %s '%s' (see tilegraph run --help)\n",
                    v || f[0] != '-' ? "unknown argument" : "missing value after", f);
            return -1;
        }
        i++;
    }
    return 0;
}

static int check(const run_args *a)
{
    const char *bad = NULL;
    if (!a->instances || !a->replicas)
        bad = "--instances N and --replicas R are both required";
    else if (a->replicas % a->instances)
        bad = "--replicas must be a multiple of --instances: each instance runs R/N replicas";
    else if (a->hosts && a->hostfile)
        bad = "give --host or --hostfile, not both";
    else if (a->n_command < 1 || strcmp(a->command[0], "train"))
        bad = "after '--' comes the command each instance runs: -- train [train options]";
    for (int i = 1; !bad && i < a->n_command; i++)
        if (!strcmp(a->command[i], "--replicas"))
            bad = "give --replicas to run, not to train: run passes R on to every instance";
    if (!bad)
        return 0;
    fprintf(stderr, "tilegraph run: %s (got --instances %ld --replicas %ld)\n", bad, a->instances,
            a->replicas);
    return -1;
}

/* The k-th host of --host's list (instances placed round-robin), or NULL. */
static const char *host_of(const run_args *a, long k, char *buf, size_t cap)
{
    if (!a->hosts)
        return NULL;
    int n = 1;
    for (const char *p = a->hosts; *p; p++)
        n += *p == ',';
    long want = k % n;
    const char *p = a->hosts;
    for (long i = 0; i < want; i++)
        p = strchr(p, ',') + 1;
    size_t len = strcspn(p, ",");
    snprintf(buf, cap, "%.*s", (int)(len < cap ? len : cap - 1), p);
    return buf;
}

static void print_plan(const run_args *a)
{
    long per = a->replicas / a->instances;
    printf("tilegraph run: %ld instance%s x %ld replica%s = %ld replicas\n", a->instances,
           a->instances == 1 ? "" : "s", per, per == 1 ? "" : "s", a->replicas);
    for (long k = 0; k < a->instances; k++) {
        char h[256];
        const char *host = host_of(a, k, h, sizeof h);
        printf("  instance %ld on %s: replicas %ld..%ld\n", k,
               host          ? host
               : a->hostfile ? "(as the hostfile places it)"
                             : "this host",
               k * per, k * per + per - 1);
    }
}

/* mpirun, its flags, then this tilegraph with the instance's command. */
static int build_argv(const run_args *a, char **av, int cap, char *np, char *reps, char *hostlist)
{
    int n = 0;
    av[n++] = (char *)a->mpirun;
    av[n++] = "-np";
    snprintf(np, 16, "%ld", a->instances);
    av[n++] = np;
    if (geteuid() == 0) /* OpenMPI refuses root unless told */
        av[n++] = "--allow-run-as-root";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (!a->hosts && !a->hostfile && a->instances > cores)
        av[n++] = "--oversubscribe"; /* more instances than cores on this one host */
    /* an instance spreads its device threads over its host's cores itself
     * (threadsPerDevice counts the instances there): no binding to one core */
    av[n++] = "--bind-to";
    av[n++] = "none";
    if (a->hosts) { /* round-robin over the hosts, as the plan prints */
        av[n++] = "--host";
        av[n++] = hostlist;
        av[n++] = "--map-by";
        av[n++] = "node";
    }
    if (a->hostfile) {
        av[n++] = "--hostfile";
        av[n++] = (char *)a->hostfile;
    }
    for (int i = 0; i < a->n_mpi_args; i++)
        av[n++] = (char *)a->mpi_args[i];
    static char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    av[n++] = len > 0 ? self : "tilegraph";
    av[n++] = a->command[0];
    av[n++] = "--replicas";
    snprintf(reps, 16, "%ld", a->replicas);
    av[n++] = reps;
    for (int i = 1; i < a->n_command && n < cap - 1; i++)
        av[n++] = a->command[i];
    av[n] = NULL;
    return n;
}

/* --host h1,h2 with N instances: each host once per instance it gets
 * (h1:k,h2:k), so mpirun places them round-robin as the plan says. */
static void host_slots(const run_args *a, char *out, size_t cap)
{
    out[0] = 0;
    if (!a->hosts)
        return;
    int n = 1;
    for (const char *p = a->hosts; *p; p++)
        n += *p == ',';
    size_t used = 0;
    for (int i = 0; i < n && i < a->instances; i++) {
        char h[256];
        host_of(a, i, h, sizeof h);
        long slots = a->instances / n + (i < a->instances % n);
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s:%ld", i ? "," : "",
                                 h, slots);
    }
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    int r = parse(&a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (check(&a))
        return 2;
    char np[16], reps[16], hostlist[4096];
    host_slots(&a, hostlist, sizeof hostlist);
    char *av[MAX_MPI_ARGS + 64 + 256];
    int n = build_argv(&a, av, (int)(sizeof av / sizeof *av), np, reps, hostlist);
    print_plan(&a);
    printf("mpirun line:");
    for (int i = 0; i < n; i++)
        printf(" %s", av[i]);
    printf("\n");
    fflush(stdout);
    if (a.dry_run)
        return 0;
    execvp(av[0], av);
    fprintf(stderr,
            "tilegraph run: cannot start %s: %s (install openmpi-bin, or give --mpirun PATH)\n",
            av[0], strerror(errno));
    return 1;
}
