/* tools/cmd_monitor.c - `tilegraph monitor` (gc-monitor's role): the
 * tilegraph processes running on this host, from the registry every session
 * keeps up to date (tilegraph/monitor.h), once or redrawn with --watch. */
#include "cli.h"

#include "tilegraph/monitor.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_json(const tg_monitor_entry *e, int n)
{
    double now = wall_now();
    printf("[");
    for (int i = 0; i < n; i++) {
        printf("%s{\"pid\":%d,\"command\":", i ? "," : "", e[i].pid);
        cli_json_string(e[i].command);
        printf(",\"program\":\"%s\",\"target\":\"%s\",\"strategy\":\"%s\",\"instance\":%d,"
               "\"instances\":%d,\"replicas\":%d,\"devices\":%d,\"memory\":[",
               e[i].program, e[i].target, e[i].strategy, e[i].instance, e[i].instances,
               e[i].replicas, e[i].devices);
        for (int d = 0; d < e[i].devices; d++)
            printf("%s%lld", d ? "," : "", (long long)e[i].memory[d]);
        printf("],\"steps\":%lld,\"samples\":%lld,\"samples_per_second\":%.1f,"
               "\"uptime_seconds\":%.1f,\"updated_seconds_ago\":%.1f}",
               (long long)e[i].steps, (long long)e[i].samples, e[i].samples_per_second,
               now - e[i].started, now - e[i].updated);
    }
    printf("]\n");
}

/* "1.2 GiB, 800 MiB" for the devices of one replica, cut to fit. */
static void memory_text(const tg_monitor_entry *e, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (int d = 0; d < e->devices && used + 16 < cap; d++) {
        char b[32];
        used += (size_t)snprintf(out + used, cap - used, "%s%s", d ? ", " : "",
                                 cli_bytes((double)e->memory[d], b, sizeof b));
    }
}

static void print_table(const tg_monitor_entry *e, int n)
{
    double now = wall_now();
    if (n == 0) {
        printf("no tilegraph process is running on this host\n");
        return;
    }
    printf("%7s %-9s %8s %8s %7s %-6s %-10s %-26s %10s %10s  %s\n", "pid", "program", "instance",
           "replicas", "devices", "target", "strategy", "memory per device", "samples/s", "uptime",
           "command");
    for (int i = 0; i < n; i++) {
        char inst[24], mem[64], up[32];
        snprintf(inst, sizeof inst, "%d/%d", e[i].instance, e[i].instances);
        memory_text(&e[i], mem, sizeof mem);
        printf("%7d %-9s %8s %8d %7d %-6s %-10s %-26s %10.1f %10s  %.60s\n", e[i].pid, e[i].program,
               inst, e[i].replicas, e[i].devices, e[i].target, e[i].strategy, mem,
               e[i].samples_per_second, cli_duration(now - e[i].started, up, sizeof up),
               e[i].command);
    }
}

static int show(bool json)
{
    tg_monitor_entry *e = NULL;
    int n = 0;
    if (tg_monitor_list(&e, &n) != TG_OK) {
        fprintf(stderr, "tilegraph monitor: %s\n", tg_error_message());
        return 1;
    }
    if (json)
        print_json(e, n);
    else
        print_table(e, n);
    tg_monitor_list_free(e);
    fflush(stdout);
    return 0;
}

int cmd_monitor(int argc, char **argv)
{
    bool json = false;
    double watch = 0;
    cli_flag flags[] = {
        {"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0, NULL},
        {"--watch", CLI_FLOAT, &watch, "SECONDS",
         "redraw every SECONDS until Ctrl-C (--watch alone: every 2 s; with --json: one line "
         "per refresh)",
         0.1, 3600, "0: list once"},
    };
    char dir[512] = "";
    (void)tg_monitor_dir(dir, sizeof dir);
    char details[768];
    snprintf(details, sizeof details,
             "Lists the tilegraph sessions running on this host: pid, program, MPI instance, "
             "replicas,\ndevices, target, strategy, planned memory per device of one replica, "
             "samples/s and\nuptime. Sessions register in %s (TILEGRAPH_MONITOR_DIR to "
             "change;\nmonitor.enable=false or TILEGRAPH_MONITOR=0 to stay out); records of "
             "processes that\ndied are forgotten.",
             dir);
    cli_command cmd = {"monitor",
                       "List the tilegraph processes running on this host.",
                       "tilegraph monitor [--json] [--watch SECONDS]",
                       details,
                       flags,
                       2};
    /* --watch without a number (last, or before another flag) means every 2 s */
    char *args[64], two[] = "2";
    int n_args = 0;
    for (int i = 0; i < argc && n_args < 62; i++) {
        args[n_args++] = argv[i];
        if (!strcmp(argv[i], "--watch") && (i + 1 == argc || argv[i + 1][0] == '-'))
            args[n_args++] = two;
    }
    if (argc > 31) {
        fprintf(stderr, "tilegraph monitor: too many arguments (see --help)\n");
        return 2;
    }
    int r = cli_parse(&cmd, n_args, args);
    if (r)
        return r > 0 ? 0 : 2;
    if (watch <= 0)
        return show(json);
    bool tty = isatty(STDOUT_FILENO) && !json;
    for (;;) { /* ends with Ctrl-C: the default action of SIGINT */
        if (tty)
            printf("\033[H\033[2J");
        if (show(json))
            return 1;
        struct timespec ts = {(time_t)watch, (long)((watch - (double)(time_t)watch) * 1e9)};
        nanosleep(&ts, NULL);
    }
}
