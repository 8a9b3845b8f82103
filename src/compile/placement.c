/* compile/placement.c - blocks to stages to devices, for every node. */
#include "compile/placement.h"

#include "compile/stages.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TG_MAX_BLOCKS 256

typedef struct {
    const char *names[TG_MAX_BLOCKS];
    int device[TG_MAX_BLOCKS];
    int n;
    char split_names[TG_MAX_BLOCKS][8]; /* "S0".. of blocks made by split points */
    char auto_names[TG_MAX_BLOCKS][48]; /* the atoms' names, when stages are automatic */
} block_list;

static bool is_forward(const tg_tensor *t)
{
    return t->n_in > 0 && !(t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER));
}

/* "layer3.8" matches "layer3/8" and anything under it. */
static bool name_matches(const char *name, const char *split)
{
    size_t n = strlen(split);
    for (size_t i = 0; i < n; i++) {
        char a = name[i], b = split[i] == '.' ? '/' : split[i];
        if (a != b && !(a == '.' && b == '/'))
            return false;
    }
    return name[n] == '\0' || name[n] == '/';
}

/* Forward nodes' blocks from split points; returns the number of blocks. */
static tg_status blocks_from_split(const tg_graph *g, const char *spec, int *block_of,
                                   block_list *bl)
{
    char buf[1024], *points[TG_MAX_BLOCKS], *save = NULL;
    int n_points = 0;
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok_r(buf, ",", &save); tok && n_points < TG_MAX_BLOCKS - 1;
         tok = strtok_r(NULL, ",", &save))
        points[n_points++] = tok;
    int current = 0;
    bl->n = n_points + 1;
    for (int b = 0; b < bl->n; b++) {
        snprintf(bl->split_names[b], sizeof bl->split_names[b], "S%d", b);
        bl->names[b] = bl->split_names[b];
        bl->device[b] = -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!is_forward(t))
            continue;
        while (current < n_points && name_matches(t->name, points[current]))
            current++;
        block_of[i] = current;
    }
    if (current < n_points)
        return tg_error(TG_ERR_CONFIG,
                        "split point '%s' matches no op of the model (op names look like '%s')",
                        points[current], g->n_nodes ? g->nodes[g->n_nodes - 1]->name : "");
    return TG_OK;
}

/* Parse "B1,B2|B3,B4" into stage numbers for the blocks in bl. */
static tg_status stages_from_spec(const char *spec, const block_list *bl, int *stage_of_block,
                                  int *n_stages)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (int b = 0; b < bl->n; b++)
        stage_of_block[b] = -1;
    int stage = 0;
    char *save_stage = NULL;
    for (char *st = strtok_r(buf, "|", &save_stage); st; st = strtok_r(NULL, "|", &save_stage)) {
        char *at = strchr(st, '@'); /* a phase's device (phase_devices) */
        if (at)
            *at = '\0';
        char *save_block = NULL;
        for (char *name = strtok_r(st, ",", &save_block); name;
             name = strtok_r(NULL, ",", &save_block)) {
            while (*name == ' ')
                name++;
            int found = -1;
            for (int b = 0; b < bl->n; b++)
                if (strcmp(bl->names[b], name) == 0)
                    found = b;
            if (found < 0) {
                char list[512] = "";
                size_t used = 0;
                for (int b = 0; b < bl->n && used < sizeof list; b++)
                    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", b ? ", " : "",
                                             bl->names[b]);
                return tg_error(TG_ERR_CONFIG,
                                "stages \"%s\": stage %d names block '%s', which the model does "
                                "not have (its blocks: %s)",
                                spec, stage, name, list);
            }
            if (stage_of_block[found] >= 0)
                return tg_error(TG_ERR_CONFIG, "stages \"%s\": block '%s' is in two stages", spec,
                                name);
            stage_of_block[found] = stage;
        }
        stage++;
    }
    for (int b = 0; b < bl->n; b++)
        if (stage_of_block[b] < 0)
            return tg_error(TG_ERR_CONFIG, "stages \"%s\": block '%s' is in no stage", spec,
                            bl->names[b]);
    *n_stages = stage;
    return TG_OK;
}

static int count_stages(const char *spec)
{
    int n = 1;
    for (const char *c = spec; *c; c++)
        n += *c == '|';
    return n;
}

/* --stages auto / --split auto: the atoms and the cost model's best split
 * over the devices given (compile/stages.h) become the blocks and stages;
 * so do the blocks cut into parts of a user's split ("B1,B2|B2:OP,B3"). */
static tg_status auto_stages(const tg_graph *g, const tg_config *c, tg_placement *p, int *block_of,
                             block_list *bl, int *stage_of_block)
{
    const char *split = c->pipeline.split;
    bool scopes = strcmp(split, "auto") == 0;
    const char *spec = c->pipeline.auto_stages ? "auto" : c->pipeline.stages;
    if (*split && !c->pipeline.auto_stages)
        return tg_error(TG_ERR_CONFIG,
                        "stages \"%s\" cuts blocks at ops, and split \"%s\" makes other blocks: "
                        "drop --split",
                        spec, split);
    if (*split && !scopes)
        return tg_error(TG_ERR_CONFIG,
                        "stages auto with split \"%s\": automatic stages choose among blocks "
                        "or layer boundaries; use --split auto (layer boundaries) or drop "
                        "--split (the model's blocks)",
                        split);
    int n = c->pipeline.auto_stages ? (int)c->pipeline.devices : count_stages(spec);
    if (n < 1)
        return tg_error(TG_ERR_CONFIG,
                        "%s auto needs the number of devices to divide the model "
                        "over: give --devices N (option devices)",
                        scopes ? "split" : "stages");
    tg_stage_atoms *atoms = tg_calloc(1, sizeof *atoms);
    tg_stage_goal *goal = tg_calloc(1, sizeof *goal);
    tg_stage_plan *plan = tg_calloc(1, sizeof *plan);
    tg_status s = atoms && goal && plan
                      ? tg_stage_plan_auto(g, c, n, scopes, spec, atoms, goal, plan)
                      : tg_error(TG_ERR_NOMEM, "placement: out of memory");
    if (s == TG_OK) {
        bl->n = atoms->n < TG_MAX_BLOCKS ? atoms->n : TG_MAX_BLOCKS;
        for (int b = 0; b < bl->n; b++) {
            snprintf(bl->auto_names[b], sizeof bl->auto_names[b], "%s", atoms->names[b]);
            bl->names[b] = bl->auto_names[b];
            bl->device[b] = -1; /* the split decides the devices */
        }
        for (int i = 0; i < g->n_nodes; i++)
            block_of[i] = atoms->atom_of[i];
        for (int k = 0; k < plan->n_stages; k++)
            for (int x = plan->first[k]; x < plan->first[k + 1]; x++)
                stage_of_block[x] = k;
        p->n_stages = plan->n_stages;
        if (!(p->handoff = tg_calloc((size_t)plan->n_stages + 1, sizeof(bool))))
            s = tg_error(TG_ERR_NOMEM, "placement: out of memory");
        /* phases take turns on a device's memory: no weight copies there
         * (nor a '<' in the split printed) */
        for (int k = 0; k < plan->n_stages; k++) {
            plan->handoff[k] = plan->handoff[k] && !tg_placement_phased(c);
            if (p->handoff)
                p->handoff[k] = plan->handoff[k];
        }
        if (c->pipeline.auto_stages)
            tg_stage_plan_spec(atoms, plan, p->auto_spec, sizeof p->auto_spec);
    }
    if (atoms)
        tg_stage_atoms_free(atoms);
    if (goal)
        tg_cost_model_free(&goal->cost);
    tg_free(atoms);
    tg_free(goal);
    tg_free(plan);
    return s;
}

static tg_status forward_stages(const tg_graph *g, const tg_config *c, tg_placement *p,
                                int *block_of, block_list *bl, int *stage_of_block)
{
    const char *split = c->pipeline.split;
    const char *spec = tg_placement_phased(c) ? c->pipeline.phases : c->pipeline.stages;
    for (int i = 0; i < g->n_nodes; i++)
        block_of[i] = -1;
    if (c->pipeline.auto_stages ||
        (!tg_placement_phased(c) && (strchr(spec, ':') || strchr(spec, '<'))))
        return auto_stages(g, c, p, block_of, bl, stage_of_block);
    if (*split) {
        TG_TRY(blocks_from_split(g, split, block_of, bl));
    } else {
        bl->n = g->n_blocks < TG_MAX_BLOCKS ? g->n_blocks : TG_MAX_BLOCKS;
        for (int b = 0; b < bl->n; b++) {
            bl->names[b] = g->blocks[b].name;
            bl->device[b] = g->blocks[b].device_id;
        }
        for (int i = 0; i < g->n_nodes; i++)
            if (is_forward(g->nodes[i]))
                block_of[i] = g->nodes[i]->block;
    }
    if (bl->n == 0) {
        /* Flags that cannot apply are errors: silently running on one device
         * would not be what was asked for. */
        if (*spec)
            return tg_error(TG_ERR_CONFIG,
                            "stages \"%s\": the model has no blocks to group into stages; "
                            "divide it with split (--split LAYERS) first",
                            spec);
        /* with replicas, devices counted for the whole pod (PopRun's
         * IPUs) is a likely slip: say what devices counts */
        if (c->pipeline.devices > 1 && c->pipeline.replicas > 1)
            return tg_error(TG_ERR_CONFIG,
                            "devices %lld: the model has no blocks to put on several devices; "
                            "option devices counts the devices of one replica, and each of the "
                            "%d replicas already has one (%d devices in all): drop --devices, "
                            "or divide the model with split (--split LAYERS)",
                            (long long)c->pipeline.devices, c->pipeline.replicas,
                            c->pipeline.replicas);
        if (c->pipeline.devices > 1)
            return tg_error(TG_ERR_CONFIG,
                            "devices %lld: the model has no blocks to put on several devices; "
                            "divide it with split (--split LAYERS), or use replicationFactor "
                            "(--replicas) for data parallelism",
                            (long long)c->pipeline.devices);
        /* a strategy asked for by name that cannot divide the model would
         * silently run on one device: say so instead */
        const char *asked = c->pipeline.asked_strategy;
        if (strcmp(asked, "pipelined") == 0 || strcmp(asked, "sharded") == 0 ||
            strcmp(asked, "phased") == 0)
            return tg_error(TG_ERR_CONFIG,
                            "executionStrategy '%s' divides a model at its blocks, and this "
                            "model has none: split it with --split LAYERS (option split), mark "
                            "blocks with tg_block_begin_on, or use --strategy single",
                            asked);
        p->n_stages = 1;
        return TG_OK;
    }
    if (*spec) {
        TG_TRY(stages_from_spec(spec, bl, stage_of_block, &p->n_stages));
    } else {
        /* one stage per block, in the order blocks first appear in the model */
        int next = 0;
        for (int b = 0; b < bl->n; b++)
            stage_of_block[b] = -1;
        for (int i = 0; i < g->n_nodes; i++)
            if (block_of[i] >= 0 && stage_of_block[block_of[i]] < 0)
                stage_of_block[block_of[i]] = next++;
        for (int b = 0; b < bl->n; b++)
            if (stage_of_block[b] < 0)
                stage_of_block[b] = next++;
        p->n_stages = next;
    }
    return TG_OK;
}

/* Stage of every needed node; checks that data flows from earlier stages to later ones. */
static tg_status assign_nodes(const tg_graph *g, const bool *needed, tg_placement *p,
                              const int *block_of, const int *stage_of_block, const block_list *bl)
{
    int *s = p->stage_of;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        s[i] = -1;
        if (!needed[i] || !is_forward(t))
            continue;
        int in_max = 0;
        for (int k = 0; k < t->n_in; k++)
            if (t->in[k]->n_in > 0 && s[t->in[k]->id] > in_max)
                in_max = s[t->in[k]->id];
        s[i] = block_of[i] >= 0 ? stage_of_block[block_of[i]] : in_max;
        for (int k = 0; k < t->n_in; k++) {
            const tg_tensor *x = t->in[k];
            if (x->n_in > 0 && s[x->id] > s[i])
                return tg_error(TG_ERR_CONFIG,
                                "stage order runs against the data flow: '%s' (stage %d%s%s) "
                                "feeds '%s' (stage %d%s%s)",
                                x->name, s[x->id], block_of[x->id] >= 0 ? ", block " : "",
                                block_of[x->id] >= 0 ? bl->names[block_of[x->id]] : "", t->name,
                                s[i], block_of[i] >= 0 ? ", block " : "",
                                block_of[i] >= 0 ? bl->names[block_of[i]] : "");
        }
    }
    /* backward ops follow their forward op; updates follow their parameter's gradient */
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || t->n_in == 0 || is_forward(t))
            continue;
        if ((t->flags & TG_NODE_BACKWARD) && t->forward_of)
            s[i] = s[t->forward_of->id];
        else if (t->flags & TG_NODE_OPTIMIZER)
            s[i] = -2; /* resolved below, from the parameter */
        else
            for (int k = 0; k < t->n_in; k++)
                if (s[t->in[k]->id] > s[i])
                    s[i] = s[t->in[k]->id];
        if (s[i] < 0 && s[i] != -2)
            s[i] = 0;
    }
    /* leaves go with their first consumer (lowest stage): first from the
     * forward and backward ops, then updates follow their parameter, then
     * optimizer state follows its update */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g->n_nodes; i++) {
            const tg_tensor *t = g->nodes[i];
            if (!needed[i] || s[i] < 0)
                continue;
            for (int k = 0; k < t->n_in; k++) {
                const tg_tensor *x = t->in[k];
                if (x->n_in == 0 && (s[x->id] < 0 || s[i] < s[x->id]))
                    s[x->id] = s[i];
            }
        }
        for (int i = 0; pass == 0 && i < g->n_nodes; i++)
            if (needed[i] && s[i] == -2) {
                int param = s[g->nodes[i]->in[0]->id];
                s[i] = param >= 0 ? param : 0;
            }
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (needed[i] && s[i] < 0)
            s[i] = 0;
    /* input gradients handed back: after the leaves, so the weight stays
     * with its convolution and update (the stage before gets a copy) */
    for (int i = 0; p->handoff && i < g->n_nodes; i++)
        if (needed[i] && s[i] > 0 && p->handoff[s[i]] && tg_stage_handoff_node(g, g->nodes[i], s))
            s[i]--;
    return TG_OK;
}

static tg_status assign_devices(const tg_config *c, tg_placement *p, const block_list *bl,
                                const int *stage_of_block)
{
    int available = c->pipeline.devices;
    p->device_of_stage = tg_calloc((size_t)p->n_stages + 1, sizeof(int));
    if (!p->device_of_stage)
        return tg_error(TG_ERR_NOMEM, "placement: out of memory");
    for (int st = 0; st < p->n_stages; st++)
        p->device_of_stage[st] = st;
    for (int b = 0; b < bl->n; b++)
        if (bl->device[b] >= 0)
            p->device_of_stage[stage_of_block[b]] = bl->device[b];
    p->n_devices = 0;
    for (int st = 0; st < p->n_stages; st++) {
        int d = p->device_of_stage[st];
        for (int k = 0; k < st; k++)
            if (p->device_of_stage[k] == d)
                return tg_error(TG_ERR_CONFIG,
                                "stages %d and %d are both on device %d; each "
                                "stage needs a device of its own",
                                k, st, d);
        if (d + 1 > p->n_devices)
            p->n_devices = d + 1;
        if (st > 0 && d < p->device_of_stage[st - 1])
            return tg_error(TG_ERR_CONFIG,
                            "stage %d is on device %d, before stage %d's device %d: "
                            "devices must follow the stage order",
                            st, d, st - 1, p->device_of_stage[st - 1]);
    }
    if (available > 0 && p->n_devices > available)
        return tg_error(TG_ERR_CONFIG,
                        "the model needs device %d but only %d device%s available "
                        "(option devices)",
                        p->n_devices - 1, available, available == 1 ? " is" : "s are");
    if (p->n_devices != p->n_stages)
        return tg_error(TG_ERR_CONFIG,
                        "%d stages on devices up to %d: leave no device between "
                        "stages unused",
                        p->n_stages, p->n_devices - 1);
    return TG_OK;
}

bool tg_placement_phased(const tg_config *c)
{
    return strcmp(c->pipeline.strategy, "phased") == 0;
}

/* What phased execution can take: phases or the blocks as they are, each
 * phase on one device (SingleIPU). */
static tg_status check_phased(const tg_config *c)
{
    const char *phases = c->pipeline.phases;
    if (!tg_placement_phased(c)) {
        if (*phases)
            return tg_error(TG_ERR_CONFIG,
                            "phases \"%s\" group blocks for executionStrategy phased, not %s: "
                            "drop --phases, or use --strategy phased",
                            phases, c->pipeline.strategy);
        /* else it is ignored, and with devices the run is pipelined over
         * them: an error naming a device it never asked for followed */
        if (strcmp(c->pipeline.phased_type, "SingleIPU") != 0)
            return tg_error(TG_ERR_CONFIG,
                            "phasedExecutionType %s applies to executionStrategy phased, and "
                            "this run is %s: give the phases (--phases \"B1|B2|B3|B4\") or "
                            "--strategy phased, or drop --phased-execution-type",
                            c->pipeline.phased_type, c->pipeline.strategy);
        return TG_OK;
    }
    if (*c->pipeline.stages)
        return tg_error(TG_ERR_CONFIG,
                        "stages \"%s\" cannot apply with executionStrategy phased, whose phases "
                        "run one after another: give the blocks per phase with --phases",
                        c->pipeline.stages);
    /* phases "auto" is chosen before placement (compile/phases_auto.c) */
    if (!strcmp(phases, "auto") || c->pipeline.auto_stages)
        return tg_error(TG_ERR_CONFIG,
                        "executionStrategy phased with split \"%s\": automatic phases choose "
                        "among the model's blocks; use --phases auto without --split, or give "
                        "the blocks per phase, --phases \"S0|S1|S2\"",
                        c->pipeline.split);
    if (strcmp(c->pipeline.phased_type, "SingleIPU") != 0 &&
        strcmp(c->pipeline.phased_type, "ParallelIPU") != 0)
        return tg_error(TG_ERR_CONFIG, "phasedExecutionType %s: give SingleIPU or ParallelIPU",
                        c->pipeline.phased_type);
    return TG_OK;
}

/* The phases' devices in order, none skipped, within `devices`. */
static tg_status check_phase_order(const tg_config *c, tg_placement *p)
{
    p->n_devices = 0;
    for (int k = 0; k < p->n_stages; k++) {
        int d = p->device_of_stage[k];
        if (k > 0 && d < p->device_of_stage[k - 1])
            return tg_error(TG_ERR_CONFIG,
                            "phase %d is on device %d, before phase %d's device %d: phases run "
                            "in order, a device's phases one after another",
                            k, d, k - 1, p->device_of_stage[k - 1]);
        if (k > 0 && d > p->device_of_stage[k - 1] + 1)
            return tg_error(TG_ERR_CONFIG,
                            "phase %d is on device %d after phase %d's device %d: leave no "
                            "device between phases unused",
                            k, d, k - 1, p->device_of_stage[k - 1]);
        if (k == 0 && d != 0)
            return tg_error(TG_ERR_CONFIG,
                            "phase 0 is on device %d: the first phase runs on device 0", d);
        if (d + 1 > p->n_devices)
            p->n_devices = d + 1;
    }
    if (c->pipeline.devices > 0 && p->n_devices > c->pipeline.devices)
        return tg_error(TG_ERR_CONFIG,
                        "the phases need device %d but only %d device%s available (option "
                        "devices)",
                        p->n_devices - 1, c->pipeline.devices,
                        c->pipeline.devices == 1 ? " is" : "s are");
    return TG_OK;
}

/* The devices the phases spec names ("B1,B2@0|B3@1"): device[k] for phase
 * k, -1 where it names none. */
static tg_status phase_devices(const char *spec, int n, int *device)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    int k = 0;
    for (int i = 0; i < n; i++) /* phases from --split or the blocks: no spec */
        device[i] = -1;
    for (char *ph = strtok_r(buf, "|", &save); ph && k < n; ph = strtok_r(NULL, "|", &save), k++) {
        char *at = strchr(ph, '@'), *end = NULL;
        if (!at)
            continue;
        long d = strtol(at + 1, &end, 10);
        while (end && *end == ' ')
            end++;
        if (end == at + 1 || !end || *end || d < 0 || d >= TG_MAX_DEVICES)
            return tg_error(TG_ERR_CONFIG,
                            "phases \"%s\": phase %d's device '%s' is not a device index: give "
                            "\"BLOCKS@N\" with N from 0 to %d",
                            spec, k, at + 1, TG_MAX_DEVICES - 1);
        device[k] = (int)d;
    }
    return TG_OK;
}

static bool parallel_ipu(const tg_config *c)
{
    return strcmp(c->pipeline.phased_type, "ParallelIPU") == 0;
}

/* ParallelIPU: phase k on device k mod 2, as PopTorch alternates them
 * (compile/parallel_phases.c moves the values between them inside the
 * passes). A device a phase names, by "@N" or by its blocks, must be that
 * one. */
static tg_status assign_parallel_phases(const tg_config *c, tg_placement *p, const block_list *bl,
                                        const int *stage_of_block, const int *named)
{
    int n = p->n_stages;
    const char *spec = c->pipeline.phases;
    if (n < 2)
        return tg_error(TG_ERR_CONFIG,
                        "phasedExecutionType ParallelIPU alternates phases over two devices and "
                        "the model has %d phase: give two or more (--phases \"B1|B2\"), or use "
                        "SingleIPU",
                        n);
    if (c->pipeline.devices > 0 && c->pipeline.devices != 2)
        return tg_error(TG_ERR_CONFIG,
                        "devices %lld: phasedExecutionType ParallelIPU alternates the phases over "
                        "two devices; give --devices 2 or none, or use SingleIPU to spread them "
                        "over %lld in order",
                        (long long)c->pipeline.devices, (long long)c->pipeline.devices);
    for (int k = 0; k < n; k++)
        p->device_of_stage[k] = k % 2;
    for (int b = 0; b < bl->n; b++)
        if (bl->device[b] >= 0 && bl->device[b] != stage_of_block[b] % 2)
            return tg_error(TG_ERR_CONFIG,
                            "block '%s' is on device %d, but it is in phase %d, and "
                            "phasedExecutionType ParallelIPU runs even phases on device 0 and "
                            "odd ones on device 1: move the block to device %d, or use SingleIPU",
                            bl->names[b], bl->device[b], stage_of_block[b], stage_of_block[b] % 2);
    for (int k = 0; k < n; k++)
        if (named[k] >= 0 && named[k] != k % 2)
            return tg_error(TG_ERR_CONFIG,
                            "phases \"%s\": phase %d names device %d, but phasedExecutionType "
                            "ParallelIPU runs even phases on device 0 and odd ones on device 1: "
                            "give @%d or no device, or use SingleIPU",
                            spec, k, named[k], k % 2);
    p->n_devices = 2;
    return TG_OK;
}

/* Phased (SingleIPU): the phases run in order, each on one device: the one
 * its spec names ("B3@1"), else the device its blocks name
 * (tg_block_begin_on), else with `devices` N > 1 the phases spread over the
 * N devices in order, as evenly as the count allows, else device 0. A
 * device runs consecutive phases only, since values flow from one device
 * to the next (as between sharded stages). */
static tg_status assign_phases(const tg_config *c, tg_placement *p, const block_list *bl,
                               const int *stage_of_block)
{
    int n = p->n_stages, devices = c->pipeline.devices > 1 ? c->pipeline.devices : 1;
    if (devices > n)
        return tg_error(TG_ERR_CONFIG,
                        "devices %d: executionStrategy phased has %d phase%s to put on them; "
                        "each device needs a phase of its own (more phases with --phases, or "
                        "fewer --devices)",
                        devices, n, n == 1 ? "" : "s");
    p->n_phases = n;
    p->device_of_stage = tg_calloc((size_t)n + 1, sizeof(int));
    int *named = tg_calloc((size_t)n + 1, sizeof(int));
    tg_status s = p->device_of_stage && named ? phase_devices(c->pipeline.phases, n, named)
                                              : tg_error(TG_ERR_NOMEM, "placement: out of memory");
    if (s == TG_OK && parallel_ipu(c)) {
        s = assign_parallel_phases(c, p, bl, stage_of_block, named);
        tg_free(named);
        return s;
    }
    for (int k = 0; s == TG_OK && k < n; k++)
        p->device_of_stage[k] = (int)((int64_t)k * devices / n);
    for (int b = 0; s == TG_OK && b < bl->n; b++)
        if (bl->device[b] >= 0)
            p->device_of_stage[stage_of_block[b]] = bl->device[b];
    for (int k = 0; s == TG_OK && k < n; k++)
        if (named[k] >= 0)
            p->device_of_stage[k] = named[k];
    tg_free(named);
    return s == TG_OK ? check_phase_order(c, p) : s;
}

tg_status tg_place(const tg_graph *g, const tg_config *c, const bool *needed, tg_placement *p)
{
    memset(p, 0, sizeof *p);
    p->stage_of = tg_calloc((size_t)g->n_nodes + 1, sizeof(int));
    int *block_of = tg_calloc((size_t)g->n_nodes + 1, sizeof(int));
    block_list *bl = tg_calloc(1, sizeof *bl);
    int *stage_of_block = tg_calloc(TG_MAX_BLOCKS, sizeof(int));
    tg_status s = TG_OK;
    if (!p->stage_of || !block_of || !bl || !stage_of_block) {
        s = tg_error(TG_ERR_NOMEM, "placement: out of memory");
        goto done;
    }
    if ((s = check_phased(c)) != TG_OK)
        goto done;
    if (strcmp(c->pipeline.strategy, "single") == 0) {
        const char *div = *c->pipeline.stages ? "stages" : *c->pipeline.split ? "split" : NULL;
        if (div) {
            s = tg_error(TG_ERR_CONFIG,
                         "%s cannot apply with executionStrategy single (the whole model on one "
                         "device): drop --%s, or use --strategy pipelined or sharded",
                         div, div);
            goto done;
        }
        p->n_stages = p->n_devices = 1;
        p->device_of_stage = tg_calloc(1, sizeof(int));
        if (!p->device_of_stage)
            s = tg_error(TG_ERR_NOMEM, "placement: out of memory");
        for (int i = 0; i < g->n_nodes; i++)
            p->stage_of[i] = needed[i] ? 0 : -1;
        goto done;
    }
    s = forward_stages(g, c, p, block_of, bl, stage_of_block);
    if (s == TG_OK)
        s = assign_nodes(g, needed, p, block_of, stage_of_block, bl);
    if (s == TG_OK)
        s = tg_placement_phased(c) ? assign_phases(c, p, bl, stage_of_block)
                                   : assign_devices(c, p, bl, stage_of_block);
done:
    tg_free(block_of);
    tg_free(bl);
    tg_free(stage_of_block);
    if (s != TG_OK)
        tg_placement_free(p);
    return s;
}

void tg_placement_free(tg_placement *p)
{
    tg_free(p->stage_of);
    tg_free(p->device_of_stage);
    tg_free(p->handoff);
    memset(p, 0, sizeof *p);
}
