/* tools/main.c - the `tilegraph` command: dispatch to subcommands. */
#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tilegraph/devices.h"
#include "tilegraph/dist.h"
#include "tilegraph/trace.h"

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"train", cmd_train, "train a model (Fashion-MNIST by default) and report test accuracy"},
    {"infer", cmd_infer, "classify test images with a trained checkpoint"},
    {"compile", cmd_compile, "compile a model for the devices and print its memory plan"},
    {"check", cmd_check, "check one step, tensor by tensor, against the reference kernels"},
    {"models", cmd_models, "list the built-in models"},
    {"import", cmd_import, "show an ONNX model as tilegraph imports it (for --model FILE.onnx)"},
    {"options", cmd_options, "list the session options and their defaults"},
    {"report", cmd_report, "write a self-contained HTML report of a profile (or two, compared)"},
    {"analyse", cmd_analyse, "show a profile's views: summary, memory, liveness, trace, ..."},
    {"compare", cmd_compare, "compare two profiles side by side, with differences"},
    {"devices", cmd_devices, "list the targets and devices this machine offers"},
    {"monitor", cmd_monitor, "list the tilegraph processes running on this host"},
    {"run", cmd_run, "start a training as several instances over MPI (mpirun)"},
};

#define N_SUBCOMMANDS ((int)(sizeof subcommands / sizeof subcommands[0]))

static void usage(FILE *out)
{
    fprintf(out,
            "tilegraph %s - train and run neural networks, and see where memory and time go\n\n"
            "usage: tilegraph <command> [options]\n\ncommands:\n",
            TG_VERSION);
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        fprintf(out, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "\n'tilegraph <command> --help' describes a command's options.\n");
}

/* ---- signals: stop at a step boundary, or die as usual -------------------------- */

static volatile sig_atomic_t stop_signal, polling;

/* Async-signal-safe: a flag, or the default action. A second signal always
 * gets the default action (SA_RESETHAND), so a stuck command still dies. */
static void on_stop_signal(int sig)
{
    if (!polling) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig == SIGUSR2 ? SIGTERM : sig; /* tilegraph run's stop request */
}

int cli_stop_signal(void)
{
    return stop_signal;
}
void cli_stop_agreed(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
}
void cli_stop_at_step_boundaries(void)
{
    polling = 1;
}
int cli_signal_exit_code(int sig)
{
    return 128 + sig;
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (getenv("TILEGRAPH_RUN_PID")) /* an instance of tilegraph run (tools/cmd_run.c) */
        sigaction(SIGUSR2, &sa, NULL);
}

/* The host trace is written once, at the end. Its failure is the command's
 * failure (one message, a non-zero exit), not a warning. */
static int finish_trace(int rc)
{
    if (tg_trace_shutdown() == TG_OK)
        return rc;
    fprintf(stderr, "tilegraph: %s\n", tg_error_message());
    return rc ? rc : 1;
}

static void write_trace_at_exit(void)
{
    (void)finish_trace(0);
}

/* Under mpirun this process is one instance of a job: a command that failed
 * ends every instance (its message is already on stderr), so none waits
 * for it; one that succeeded leaves the job. */
static int finish_instance(int rc)
{
    /* stopped by a signal at a host-step boundary: the instances agreed on
     * the step (cmd_train.c), so the job ends in order; aborting here could
     * cut instance 0's checkpoint short */
    bool stopped = cli_stop_signal() && rc == cli_signal_exit_code(cli_stop_signal());
    if (rc && !stopped && tg_dist_active()) {
        fprintf(stderr, "tilegraph: instance %d of %d failed (exit code %d): ending the job\n",
                tg_dist_instance(), tg_dist_instances(), rc);
        tg_dist_abort(rc);
    }
    tg_dist_finalize();
    return rc;
}

/* The commands a job's instances run (`tilegraph run` starts them). */
static int joins_job(const char *name)
{
    return !strcmp(name, "train") || !strcmp(name, "infer") || !strcmp(name, "compile");
}

/* oneDNN's OpenMP threads must sleep when idle, or after every convolution
 * they spin against the devices' own threads for the cores (measured in
 * src/backend/cpu/dnnl_util.h). libgomp reads OMP_WAIT_POLICY only when it loads,
 * before main, so the command sets it and starts itself again; a policy
 * the user chose is kept. Should the exec fail, the variable is removed
 * again and the command runs on (with more than one thread per device the
 * compiler then keeps the own convolution kernels where the batch does not
 * split evenly over the threads; backend/cpu/conv_dnnl.c). */
static void ensure_passive_openmp(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    /* by its own path, not /proc/self/exe: the process keeps its name
     * (ps, pgrep, tilegraph monitor) */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        execv(self, argv);
    }
    unsetenv("OMP_WAIT_POLICY");
}

int main(int argc, char **argv)
{
    ensure_passive_openmp(argv);
    /* TILEGRAPH_TRACE switches host tracing on for any command */
    if (tg_trace_configure_env() != TG_OK) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        return 2;
    }
    /* TILEGRAPH_ISA holds every kernel to an instruction set: a value it
     * does not know is refused before any work */
    if (tg_host_isa_check() != TG_OK) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        return 2;
    }
    atexit(write_trace_at_exit); /* for paths that call exit(); a no-op after finish_trace */
    catch_stop_signals();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        char isa[128];
        tg_host_isa_describe(isa, sizeof isa);
        printf("tilegraph %s\nkernels use %s\n", TG_VERSION, isa);
        return 0;
    }
    if (joins_job(name) && tg_dist_init(&argc, &argv) != TG_OK) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        return 1;
    }
    for (int i = 0; i < N_SUBCOMMANDS; i++)
        if (subcommands[i].run && !strcmp(name, subcommands[i].name))
            return finish_instance(finish_trace(subcommands[i].run(argc - 2, argv + 2)));
    fprintf(stderr, "tilegraph: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
