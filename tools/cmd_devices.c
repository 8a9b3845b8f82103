/* tools/cmd_devices.c - `tilegraph devices` (gc-info's role): the host's
 * cores, memory and vector instructions, and the targets with their
 * devices, as an aligned table or JSON. Only the public API is used
 * (tilegraph/devices.h). */
#include "cli.h"

#include "tilegraph/devices.h"

#include <string.h>

static void print_json(const tg_host_info *h)
{
    printf("{\"host\":{\"cpu\":");
    cli_json_string(h->cpu_model);
    printf(",\"cores_online\":%d,\"cores_usable\":%d,\"memory_total\":%lld,"
           "\"memory_available\":%lld,\"kernel_level\":\"%s\",\"isa\":{",
           h->cores_online, h->cores_usable, (long long)h->memory_total,
           (long long)h->memory_available, h->kernel_level);
    for (int i = 0; i < TG_ISA_FEATURE_COUNT; i++)
        printf("%s\"%s\":%s", i ? "," : "", tg_isa_feature_name(i), h->isa[i] ? "true" : "false");
    printf("}},\"targets\":[");
    for (int i = 0; i < tg_target_count(); i++) {
        tg_target_info t;
        if (tg_target_info_get(i, &t) != TG_OK)
            continue;
        printf("%s{\"name\":\"%s\",\"tiled\":%s,\"max_devices\":%d,\"threads_per_device\":%d,"
               "\"tiles\":%d,\"workers_per_tile\":%d,\"memory_per_tile\":%lld,"
               "\"memory_per_device\":%lld,\"clock_hz\":%.0f,\"description\":",
               i ? "," : "", t.name, t.tiled ? "true" : "false", t.max_devices,
               t.threads_per_device, t.tiles, t.workers_per_tile, (long long)t.memory_per_tile,
               (long long)t.memory_per_device, t.clock_hz);
        cli_json_string(t.description);
        printf("}");
    }
    printf("]}\n");
}

static void print_host(const tg_host_info *h)
{
    char a[32], b[32];
    printf("host\n");
    printf("  %-18s %s\n", "cpu", h->cpu_model);
    printf("  %-18s %d online, %d usable by this process\n", "cores", h->cores_online,
           h->cores_usable);
    printf("  %-18s %s total, %s available\n", "memory",
           h->memory_total ? cli_bytes((double)h->memory_total, a, sizeof a) : "unknown",
           h->memory_available ? cli_bytes((double)h->memory_available, b, sizeof b) : "unknown");
    printf("  %-18s", "instruction sets");
    for (int i = 0; i < TG_ISA_FEATURE_COUNT; i++)
        printf(" %s%s", h->isa[i] ? "" : "-", tg_isa_feature_name(i));
    printf("\n  %-18s %s\n", "kernels use", h->kernel_level);
}

static void print_targets(void)
{
    char a[32], b[32];
    printf("\n%-8s %11s %11s %8s %8s %12s %12s %9s\n", "target", "max devices", "threads/dev",
           "tiles", "workers", "memory/tile", "memory/dev", "clock");
    for (int i = 0; i < tg_target_count(); i++) {
        tg_target_info t;
        if (tg_target_info_get(i, &t) != TG_OK)
            continue;
        char threads[16], tiles[16], workers[16], clock[16];
        snprintf(threads, sizeof threads, t.tiled ? "-" : "%d", t.threads_per_device);
        snprintf(tiles, sizeof tiles, t.tiled ? "%d" : "-", t.tiles);
        snprintf(workers, sizeof workers, t.tiled ? "%d" : "-", t.workers_per_tile);
        snprintf(clock, sizeof clock, t.tiled ? "%.2f GHz" : "-", t.clock_hz / 1e9);
        printf("%-8s %11d %11s %8s %8s %12s %12s %9s\n", t.name, t.max_devices, threads, tiles,
               workers, t.tiled ? cli_bytes((double)t.memory_per_tile, a, sizeof a) : "-",
               t.tiled ? cli_bytes((double)t.memory_per_device, b, sizeof b) : "host RAM", clock);
    }
    printf("\n");
    for (int i = 0; i < tg_target_count(); i++) {
        tg_target_info t;
        if (tg_target_info_get(i, &t) == TG_OK)
            printf("%-8s %s\n", t.name, t.description);
    }
}

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    cli_flag flags[] = {{"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0, NULL}};
    cli_command cmd = {"devices",
                       "List the targets and devices this machine offers.",
                       "tilegraph devices [--json]",
                       "Shows the host's cores (all, and those this process may use), its "
                       "memory, the vector\ninstructions the kernels choose from (a leading '-' "
                       "marks one the CPU lacks), and\nthe targets option \"target\" takes, "
                       "each with its devices and a line\nsaying what it is.",
                       flags,
                       1};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    tg_host_info h;
    if (tg_host_query(&h) != TG_OK) {
        fprintf(stderr, "tilegraph devices: %s\n", tg_error_message());
        return 1;
    }
    if (json) {
        print_json(&h);
        return 0;
    }
    print_host(&h);
    print_targets();
    return 0;
}
