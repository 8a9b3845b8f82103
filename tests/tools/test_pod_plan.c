/* tests/tools/test_pod_plan.c - pod-sized plans on mk2 compile and predict
 * (issue 44, part 5): BERT-large pipelined over 4 devices with 4 and 16
 * replicas (16 and 64 devices), ResNet-50 data-parallel over 16 replicas,
 * and the 64 devices as 4 x IPU-POD16 joined by their gateways. Each plan
 * is over memory per tile (the plan is what is checked, with
 * debug.allowOutOfMemory); what must hold: every plan has its simulated
 * step and gradient all-reduce, more replicas give more samples per second
 * but less than in proportion (the all-reduce's 2(n-1)/n grows), and the
 * gateway between link domains makes the same plan's all-reduce slower. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

#define BERT                                                                                       \
    "compile --target mk2 --model bert-large --devices 4 --batch-size 1 "                          \
    "--gradient-accumulation 16 --precision 16.16 --engine-option debug.allowOutOfMemory=true "    \
    "--json"

typedef struct {
    int devices;
    double samples_per_second, allreduce_cycles, share, gateway_cycles, step_cycles;
} plan;

static plan compile_plan(tg_arena *arena, const char *args)
{
    plan r = {0};
    const tg_json *root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *step = root ? tg_json_get(root, "simulated_step") : NULL;
    const tg_json *tiles = root ? tg_json_get(root, "tiles") : NULL;
    TG_CHECK(step != NULL && tiles != NULL && tiles->type == TG_JSON_ARRAY);
    if (!step || !tiles)
        return r;
    r.devices = (int)tiles->count;
    r.samples_per_second = tg_cli_num(step, "samples_per_second");
    r.allreduce_cycles = tg_cli_num(step, "allreduce_cycles");
    r.share = tg_cli_num(step, "allreduce_share");
    r.step_cycles = tg_cli_num(step, "cycles");
    for (size_t d = 0; d < tiles->count; d++)
        r.gateway_cycles += tg_cli_num(tg_json_get(tiles->items[d], "allreduce"), "gateway_cycles");
    /* the all-reduce is a part of the step, and not nothing */
    TG_CHECK(r.samples_per_second > 0 && r.allreduce_cycles > 0);
    TG_CHECK(r.share > 0 && r.share < 1);
    return r;
}

static void test_pod_plans(void)
{
    tg_arena *arena = tg_arena_create(0);
    char desc[300], args[1024];
    plan b4 = compile_plan(arena, BERT " --replicas 4");
    plan b16 = compile_plan(arena, BERT " --replicas 16");
    TG_CHECK(b4.devices == 4 && b16.devices == 4);
    /* 4x the replicas: more throughput, but under 4x, the ring being longer */
    TG_CHECK(b16.samples_per_second > b4.samples_per_second);
    TG_CHECK(b16.samples_per_second < 4 * b4.samples_per_second);
    TG_CHECK(b16.allreduce_cycles > b4.allreduce_cycles);
    /* 64 devices in one link domain (an IPU-POD64) never cross a gateway */
    TG_CHECK(b4.gateway_cycles == 0 && b16.gateway_cycles == 0);

    /* the same 64 devices as 4 x IPU-POD16: the gateway ring is added */
    snprintf(desc, sizeof desc, "%s/pod16.json", tmpdir);
    FILE *f = fopen(desc, "w");
    TG_CHECK(f != NULL);
    if (f) {
        fputs("{\"linkDomainDevices\": 16}\n", f);
        fclose(f);
    }
    snprintf(args, sizeof args, BERT " --replicas 16 --target-description %s", desc);
    plan g16 = compile_plan(arena, args);
    TG_CHECK(g16.gateway_cycles > 0);
    TG_CHECK(g16.allreduce_cycles > b16.allreduce_cycles);
    TG_CHECK(g16.step_cycles > b16.step_cycles);

    plan r16 = compile_plan(arena, "compile --target mk2 --model resnet50 --input 3x224x224 "
                                   "--classes 1000 --replicas 16 --batch-size 16 --precision "
                                   "16.16 --engine-option debug.allowOutOfMemory=true --json");
    TG_CHECK(r16.devices == 1);
    tg_arena_destroy(arena);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_pod_plan_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return tg_test_finish();
    TG_RUN(test_pod_plans);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return tg_test_finish();
}
