/* tools/cmd_run.c - `tilegraph run`: start a training as N instances over
 * MPI (PopRun's role). It checks the plan, prints which instance runs where
 * with which replicas, and starts the mpirun command that starts the
 * instances, waiting for it; each instance (tilegraph under
 * mpirun) then configures itself from MPI's environment (tilegraph/dist.h).
 * It waits rather than replacing itself with mpirun because OpenMPI's
 * mpirun exits 1 when it is signalled, whatever its instances returned: run
 * passes a stop signal on and exits 128 + its number (130, 143), as a
 * stopped single process does (docs/distributed.md, "Stopping"). */
#include "cli.h"
#include "run_output.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_HOSTS 64
#define MAX_MPI_ARGS 32

typedef struct run_args {
    long instances, replicas, per_instance, ipus_per_replica;
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
            "                     [--mpi-arg ARG]... [--dry-run] -- train [train options]\n"
            "       tilegraph run --instances N --replicas R [...] -- PROGRAM [ARGS]\n\n"
            "Start one training as N instances (processes) over MPI, R replicas in all: each\n"
            "instance runs R/N of them and loads only their samples; gradients are reduced\n"
            "across instances in replica order, so the result is bit for bit the training of\n"
            "one process with R replicas (docs/distributed.md). An instance silent for\n"
            "TILEGRAPH_DIST_TIMEOUT seconds (default 10: a host or link down) ends the job.\n"
            "Any other PROGRAM (python3 train.py) runs as the N instances with PopRun's\n"
            "POPDIST_* variables set for each (python/popdist reads them).\n\n"
            "  --instances N     processes to start (1..%d); PopRun's --num-instances\n"
            "  --replicas R      replicas in all; N must divide R (passed on as --replicas R);\n"
            "                    PopRun's --num-replicas\n"
            "  --replicas-per-instance K  instead of --replicas: R = N x K\n"
            "  --ipus-per-replica I  POPDIST_NUM_IPUS_PER_REPLICA for a PROGRAM (default 1)\n"
            "  --host LIST       comma-separated hosts, instances placed round-robin\n"
            "  --hostfile F      an OpenMPI hostfile (one host per line, slots=K)\n"
            "                    (with either, the instances' lines are tagged [host:rank]\n"
            "                    and TILEGRAPH_* variables are passed on to them)\n"
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
        } else if (!strcmp(f, "--instances") || !strcmp(f, "--num-instances")) {
            if (parse_long(f, v, 1, MAX_HOSTS, &a->instances))
                return -1;
        } else if (!strcmp(f, "--replicas") || !strcmp(f, "--num-replicas")) {
            if (parse_long(f, v, 1, 64, &a->replicas))
                return -1;
        } else if (!strcmp(f, "--replicas-per-instance")) {
            if (parse_long(f, v, 1, 64, &a->per_instance))
                return -1;
        } else if (!strcmp(f, "--ipus-per-replica")) {
            if (parse_long(f, v, 1, 64, &a->ipus_per_replica))
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

/* The instances run tilegraph's train (else a program of the user's). */
static bool is_train(const run_args *a)
{
    return a->n_command > 0 && !strcmp(a->command[0], "train");
}

/* Whether every name of a --host list is there: "h1,,h2", ",h1" or "h1,"
 * would place an instance on no host (mpirun's "--host h1:1,:1"). */
static bool hosts_named(const char *list)
{
    if (!*list || *list == ',')
        return false;
    for (const char *p = list; *p; p++)
        if (*p == ',' && (p[1] == ',' || p[1] == '\0'))
            return false;
    return true;
}

/* A command of tilegraph's own (tools/main.c), not a program on PATH. */
static bool own_command(const char *name)
{
    static const char *names[] = {"infer",  "compile", "check",   "models",  "import",  "options",
                                  "report", "analyse", "compare", "devices", "monitor", "run"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

static int check(const run_args *a)
{
    const char *bad = NULL;
    char got[320] = "";
    if (a->per_instance && a->replicas && a->replicas != a->per_instance * a->instances) {
        bad = "--replicas-per-instance K and --replicas R disagree: R must be N x K";
        snprintf(got, sizeof got, "got --instances %ld --replicas %ld --replicas-per-instance %ld",
                 a->instances, a->replicas, a->per_instance);
    } else if (!a->instances || !a->replicas) {
        bad = "--instances N and --replicas R are both required";
        snprintf(got, sizeof got, "got --instances %ld --replicas %ld", a->instances, a->replicas);
    } else if (a->replicas % a->instances) {
        bad = "--replicas must be a multiple of --instances: each instance runs R/N replicas";
        snprintf(got, sizeof got, "got --instances %ld --replicas %ld", a->instances, a->replicas);
    } else if (a->ipus_per_replica && is_train(a)) {
        bad = "--ipus-per-replica is a PROGRAM's POPDIST_NUM_IPUS_PER_REPLICA; train takes its "
              "devices per replica from the model (its --strategy)";
        snprintf(got, sizeof got, "got --ipus-per-replica %ld -- train", a->ipus_per_replica);
    } else if (a->hosts && !hosts_named(a->hosts)) {
        bad = "--host takes host names separated by commas, none of them empty: --host h1,h2";
        snprintf(got, sizeof got, "got --host '%.200s'", a->hosts);
    } else if (a->hosts && a->hostfile) {
        bad = "give --host or --hostfile, not both";
        snprintf(got, sizeof got, "got --host %s --hostfile %s", a->hosts, a->hostfile);
    } else if (a->n_command > 0 && !is_train(a) && own_command(a->command[0])) {
        bad = "of tilegraph's commands only train runs as instances (-- train [train "
              "options]); a program runs by its name or path (-- python3 train.py)";
        snprintf(got, sizeof got, "got '-- %.200s'", a->command[0]);
    } else if (a->n_command < 1) {
        bad = "after '--' comes what each instance runs: -- train [train options], or a "
              "program (-- python3 train.py)";
        snprintf(got, sizeof got, "got nothing after '--'");
    }
    for (int i = 1; !bad && is_train(a) && i < a->n_command; i++)
        if (!strcmp(a->command[i], "--replicas")) {
            bad = "give --replicas to run, not to train: run passes R on to every instance";
            snprintf(got, sizeof got, "got train --replicas %.40s",
                     i + 1 < a->n_command ? a->command[i + 1] : "");
        }
    if (!bad)
        return 0;
    fprintf(stderr, "tilegraph run: %s (%s)\n", bad, got);
    return -1;
}

/* An OpenMPI hostfile: its hosts in order and their slots (0: the line
 * gives none, and OpenMPI decides). */
typedef struct hostfile {
    int n;
    char host[MAX_HOSTS][128];
    long slots[MAX_HOSTS];
} hostfile;

/* Read --hostfile before mpirun does: a missing file or one without hosts
 * otherwise ends in OpenMPI's "internal error" message. 0 or -1 (printed). */
static int hostfile_read(const char *path, hostfile *h)
{
    memset(h, 0, sizeof *h);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr,
                "tilegraph run: cannot read --hostfile %s: %s (give a file of lines 'HOST "
                "slots=K', or --host h1,h2)\n",
                path, strerror(errno));
        return -1;
    }
    char line[1024];
    while (fgets(line, sizeof line, f) && h->n < MAX_HOSTS) {
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            continue;
        size_t len = strcspn(p, " \t\r\n#");
        snprintf(h->host[h->n], sizeof h->host[0], "%.*s", (int)len, p);
        const char *sl = strstr(p + len, "slots=");
        h->slots[h->n] =
            sl && (sl == p + len || !isalpha((unsigned char)sl[-1])) ? strtol(sl + 6, NULL, 10) : 0;
        h->n++;
    }
    fclose(f);
    if (h->n)
        return 0;
    fprintf(stderr, "tilegraph run: --hostfile %s names no host (give lines 'HOST slots=K')\n",
            path);
    return -1;
}

/* Where OpenMPI's default mapping (by slot) puts instance k: the hosts'
 * slots filled in the file's order. NULL when a line gives no slots or the
 * slots are fewer than the instances (then OpenMPI decides). */
static const char *hostfile_place(const hostfile *h, long k)
{
    for (int i = 0; i < h->n; i++) {
        if (h->slots[i] <= 0)
            return NULL;
        if (k < h->slots[i])
            return h->host[i];
        k -= h->slots[i];
    }
    return NULL;
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

static void print_plan(const run_args *a, const hostfile *hf)
{
    long per = a->replicas / a->instances;
    printf("tilegraph run: %ld instance%s x %ld replica%s = %ld replicas\n", a->instances,
           a->instances == 1 ? "" : "s", per, per == 1 ? "" : "s", a->replicas);
    for (long k = 0; k < a->instances; k++) {
        char h[256], where[512];
        const char *host = a->hostfile ? hostfile_place(hf, k) : host_of(a, k, h, sizeof h);
        if (host)
            snprintf(where, sizeof where, "on %s", host);
        else if (a->hostfile)
            snprintf(where, sizeof where, "on a host of %s (mpirun places it)", a->hostfile);
        else
            snprintf(where, sizeof where, "on this host");
        printf("  instance %ld %s: replicas %ld..%ld\n", k, where, k * per, k * per + per - 1);
    }
}

extern char **environ;

/* Passed on by name: what a program (python3) needs to find its modules
 * and libraries, as PopRun passes PATH, LD_LIBRARY_PATH and PYTHONPATH. */
static bool forwarded(const char *var, size_t len)
{
    static const char *names[] = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "OMP_NUM_THREADS"};
    if (!strncmp(var, "TILEGRAPH_", 10))
        return true;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == len && !strncmp(var, names[i], len))
            return true;
    return false;
}

/* Every TILEGRAPH_* variable of run's environment, and those of forwarded(),
 * passed on to the instances (-x NAME): a remote host's instance starts from
 * its daemon's environment, not run's (PopRun's --mpi-local-args="-x NAME"). */
static int forward_environment(char **av, int n, int cap)
{
    static char names[MAX_MPI_ARGS][128];
    int k = 0;
    for (char **e = environ; *e && k < MAX_MPI_ARGS && n + 2 < cap; e++) {
        size_t len = strcspn(*e, "=");
        if (!forwarded(*e, len) || len >= sizeof names[0])
            continue;
        snprintf(names[k], sizeof names[k], "%.*s", (int)len, *e);
        av[n++] = "-x";
        av[n++] = names[k++];
    }
    return n;
}

/* `tilegraph run INSTANCE_FLAG R I -- PROGRAM ARGS`: what mpirun starts as
 * each instance of a PROGRAM (instance_exec). */
#define INSTANCE_FLAG "--as-instance"

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
    /* mpirun runs in a process group of its own (run_mpirun): reading a
     * terminal from there would stop it, and no instance reads stdin */
    av[n++] = "--stdin";
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
    if (a->hosts || a->hostfile) {
        av[n++] = "--tag-output"; /* rewritten as [host:rank] (run_output.c) */
        /* a remote daemon behind a dead link is noticed in about 8 s, not
         * 45 min (OpenMPI's keepalive of 300 s, 9 probes 20 s apart): its
         * instances end themselves by their heartbeats (runtime/dist_alive.c),
         * and mpirun would otherwise wait for their daemon for ever */
        static char *keepalive[] = {"--mca", "oob_tcp_keepalive_time",   "4",
                                    "--mca", "oob_tcp_keepalive_intvl",  "1",
                                    "--mca", "oob_tcp_keepalive_probes", "4"};
        for (size_t i = 0; i < sizeof keepalive / sizeof *keepalive; i++)
            av[n++] = keepalive[i];
        n = forward_environment(av, n, cap - 256);
    }
    for (int i = 0; i < a->n_mpi_args; i++)
        av[n++] = (char *)a->mpi_args[i];
    static char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    av[n++] = len > 0 ? self : "tilegraph";
    snprintf(reps, 16, "%ld", a->replicas);
    if (is_train(a)) {
        av[n++] = a->command[0];
        av[n++] = "--replicas";
        av[n++] = reps;
    } else { /* this tilegraph sets the instance's POPDIST_* and runs the program */
        static char ipr[16];
        snprintf(ipr, sizeof ipr, "%ld", a->ipus_per_replica ? a->ipus_per_replica : 1);
        av[n++] = "run";
        av[n++] = INSTANCE_FLAG;
        av[n++] = reps;
        av[n++] = ipr;
        av[n++] = "--";
        av[n++] = a->command[0];
    }
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

/* The stop signal run was sent (0: none); mpirun's pid to pass it on to. */
static volatile sig_atomic_t stop_signal;
/* An instance on this host lost another (SIGUSR1, runtime/dist.c). */
static volatile sig_atomic_t instance_lost;

static void on_lost(int sig)
{
    (void)sig;
    instance_lost = 1;
}

/* Seconds mpirun has to end the job once an instance was lost: it waits
 * for the lost host's daemon over the dead link (OpenMPI 4.1 for as long
 * as TCP retransmits, many minutes). */
#define LOST_GRACE_S 5

/* Relay what is there on the open streams (none: just sleep), for up to
 * `ms`. */
static void relay(run_stream *streams, int n, const run_hosts *h, int ms)
{
    struct pollfd p[2];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (streams[i].in >= 0)
            p[k++] = (struct pollfd){streams[i].in, POLLIN, 0};
    if (poll(k ? p : NULL, (nfds_t)k, ms) <= 0)
        return;
    for (int j = 0; j < k; j++)
        for (int i = 0; i < n; i++)
            if (streams[i].in == p[j].fd && p[j].revents)
                run_output_read(&streams[i], h);
}

static bool streams_open(const run_stream *streams, int n)
{
    for (int i = 0; i < n; i++)
        if (streams[i].in >= 0)
            return true;
    return false;
}

/* Wait for mpirun, relaying its tagged output (n streams; 0: none); once an
 * instance was lost, for LOST_GRACE_S more, then end mpirun and what it
 * started here (its process group). 1: ended so. */
static int wait_mpirun(pid_t pid, int *status, run_stream *streams, int n, const run_hosts *h)
{
    double waited = 0;
    int ended = 0;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (instance_lost && waited >= LOST_GRACE_S) {
            fprintf(stderr,
                    "tilegraph run: an instance lost another (its message is above) and mpirun "
                    "had not ended the job %d s later: ending it\n",
                    LOST_GRACE_S);
            kill(-pid, SIGKILL);
            while (waitpid(pid, status, 0) < 0 && errno == EINTR)
                ;
            ended = 1;
            break;
        }
        relay(streams, n, h, 100);
        if (instance_lost)
            waited += 0.1;
    }
    /* what mpirun wrote before it ended, while a writer is left (a second) */
    for (int i = 0; i < 10 && streams_open(streams, n); i++)
        relay(streams, n, h, 100);
    return ended;
}

static volatile pid_t mpirun_pid;
/* The signal that asks the instances to stop: SIGUSR2 for train (mpirun
 * passes it on to every instance on every host, and train stops at a host
 * step boundary on it, as on SIGTERM); a program of the user's gets the
 * signal itself. mpirun's own SIGINT or SIGTERM ends the instances at once
 * (measured: no instance printed its stop or wrote its checkpoint, even
 * with odls_base_sigkill_timeout at 20 s), so the first stop never goes to
 * mpirun as it came. */
static int stop_request = SIGUSR2;
static volatile sig_atomic_t stops_sent;

/* mpirun runs in its own process group, so each stop signal reaches it
 * once, from here: Ctrl-C at a terminal, kill PID, or a signal to run's
 * whole group (timeout(1) sends one). The first becomes the instances' stop
 * request; a second Ctrl-C goes to mpirun as it came, which kills the
 * instances at once, as the user then means it. */
static void on_stop(int sig)
{
    stop_signal = sig;
    if (mpirun_pid > 0)
        kill(mpirun_pid, stops_sent++ ? sig : stop_request);
}

/* Start mpirun and wait for it: its exit code, or 128 + the stop signal run
 * was sent (mpirun exits 1 for any signal it is sent). With hosts, its
 * output comes through run, each line tagged by host and rank. */
static int run_mpirun(char **av, const run_hosts *hosts)
{
    static run_stream streams[2];
    int n_streams = 0, fds[2][2];
    if (hosts) {
        if (pipe(fds[0]) || pipe(fds[1])) {
            fprintf(stderr, "tilegraph run: cannot make pipes for the output: %s\n",
                    strerror(errno));
            return 1;
        }
        n_streams = 2;
        streams[0] = (run_stream){.in = fds[0][0], .out = STDOUT_FILENO};
        streams[1] = (run_stream){.in = fds[1][0], .out = STDERR_FILENO};
        fflush(stdout);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_lost;
    sa.sa_flags = 0; /* interrupts the wait for mpirun, which then has a grace period */
    sigaction(SIGUSR1, &sa, NULL);
    int pipefd[2]; /* closed on exec: a byte on it says exec failed, with errno */
    if (pipe(pipefd)) {
        fprintf(stderr, "tilegraph run: cannot start %s: %s\n", av[0], strerror(errno));
        return 1;
    }
    fcntl(pipefd[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* run killed (-9): the job ends too */
        close(pipefd[0]);
        for (int i = 0; i < n_streams; i++) {
            dup2(fds[i][1], i ? STDERR_FILENO : STDOUT_FILENO);
            close(fds[i][0]);
            close(fds[i][1]);
        }
        execvp(av[0], av);
        int e = errno;
        ssize_t w = write(pipefd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(pipefd[1]);
    for (int i = 0; i < n_streams; i++)
        close(fds[i][1]);
    if (pid < 0) {
        fprintf(stderr, "tilegraph run: cannot start %s: %s\n", av[0], strerror(errno));
        close(pipefd[0]);
        return 1;
    }
    setpgid(pid, pid); /* also here: no signal may find it in run's group */
    mpirun_pid = pid;
    if (stop_signal && !stops_sent++) /* a signal before mpirun_pid was set */
        kill(pid, stop_request);
    int e = 0;
    ssize_t got;
    while ((got = read(pipefd[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(pipefd[0]);
    int status = 0;
    int ended = wait_mpirun(pid, &status, streams, n_streams, hosts);
    if (got == (ssize_t)sizeof e) {
        fprintf(stderr,
                "tilegraph run: cannot start %s: %s (install openmpi-bin, or give --mpirun "
                "PATH)\n",
                av[0], strerror(e));
        return 1;
    }
    if (stop_signal)
        return 128 + stop_signal;
    if (ended)
        return 1;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* One instance of a PROGRAM, under mpirun: the POPDIST_* variables PopRun
 * sets for it (per instance, so mpirun's -x cannot give them), then the
 * program in this process's place. argv: R I -- PROGRAM ARGS. */
static int instance_exec(int argc, char **argv)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    long r = 0, ipr = 0, n = 0, k = 0, lk = 0;
    if (argc < 4 || strcmp(argv[2], "--") || parse_long("replicas", argv[0], 1, 64, &r) ||
        parse_long("ipus per replica", argv[1], 1, 64, &ipr) || !size || !rank ||
        parse_long("OMPI_COMM_WORLD_SIZE", size, 1, r, &n) ||
        parse_long("OMPI_COMM_WORLD_RANK", rank, 0, n - 1, &k) || r % n) {
        fprintf(stderr,
                "tilegraph run: %s is run's own way to start an instance under "
                "mpirun: use tilegraph run --instances N --replicas R -- PROGRAM\n",
                INSTANCE_FLAG);
        return 2;
    }
    if (local)
        parse_long("OMPI_COMM_WORLD_LOCAL_RANK", local, 0, n - 1, &lk);
    long per = r / n;
    char v[6][24];
    snprintf(v[0], 24, "%ld", r);
    snprintf(v[1], 24, "%ld", ipr);
    snprintf(v[2], 24, "%ld", per);
    snprintf(v[3], 24, "1"); /* every instance runs R/N replicas (check) */
    snprintf(v[4], 24, "%ld", k * per);
    snprintf(v[5], 24, "%ld", lk);
    static const char *names[6] = {
        "POPDIST_NUM_TOTAL_REPLICAS",   "POPDIST_NUM_IPUS_PER_REPLICA",
        "POPDIST_NUM_LOCAL_REPLICAS",   "POPDIST_UNIFORM_REPLICAS_PER_INSTANCE",
        "POPDIST_REPLICA_INDEX_OFFSET", "POPDIST_LOCAL_INSTANCE_INDEX"};
    for (int i = 0; i < 6; i++)
        setenv(names[i], v[i], 1);
    execvp(argv[3], argv + 3);
    fprintf(stderr, "tilegraph run: instance %ld cannot start %s: %s (is it on PATH there?)\n", k,
            argv[3], strerror(errno));
    return 127;
}

int cmd_run(int argc, char **argv)
{
    if (argc > 0 && !strcmp(argv[0], INSTANCE_FLAG))
        return instance_exec(argc - 1, argv + 1);
    run_args a;
    int r = parse(&a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (a.per_instance && !a.replicas)
        a.replicas = a.per_instance * a.instances;
    if (check(&a))
        return 2;
    static hostfile hf;
    if (a.hostfile && hostfile_read(a.hostfile, &hf))
        return 2;
    char np[16], reps[16], hostlist[4096];
    host_slots(&a, hostlist, sizeof hostlist);
    char *av[MAX_MPI_ARGS + 64 + 256];
    int n = build_argv(&a, av, (int)(sizeof av / sizeof *av), np, reps, hostlist);
    print_plan(&a, &hf);
    printf("mpirun line:");
    for (int i = 0; i < n; i++)
        printf(" %s", av[i]);
    printf("\n");
    fflush(stdout);
    if (a.dry_run)
        return 0;
    if (!is_train(&a))
        stop_request = SIGTERM;
    char pid[32], host[256] = "";
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (gethostname(host, sizeof host - 1) == 0) { /* for the instances here (tell_run_lost) */
        setenv("TILEGRAPH_RUN_PID", pid, 1);
        setenv("TILEGRAPH_RUN_HOST", host, 1);
    }
    static run_hosts hosts;
    for (long k = 0; k < a.instances && k < RUN_OUTPUT_RANKS; k++) {
        static char names[RUN_OUTPUT_RANKS][256];
        hosts.host[k] = a.hostfile ? hostfile_place(&hf, k) : host_of(&a, k, names[k], 256);
    }
    hosts.n = (int)a.instances;
    return run_mpirun(av, a.hosts || a.hostfile ? &hosts : NULL);
}
