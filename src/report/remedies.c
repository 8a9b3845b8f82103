/* report/remedies.c - what would make it fit: the reference's list of memory
 * remedies, each quantified by compiling the model again with that one
 * change (a what-if on the real plan, not a rule of thumb), behind one public
 * call (tg_program_what_if, tilegraph/plan.h). The figure is the largest
 * need: the fullest tile on a tiled target, the largest device arena
 * otherwise. */
#include "tilegraph/plan.h"

#include "compile/compiled.h"
#include "compile/program.h"
#include "core/error.h"
#include "report/table.h"
#include "target/target.h"

#include <stdio.h>
#include <string.h>

/* The device that needs the most memory. */
static int fullest_device(const tg_program *p)
{
    int best = 0;
    for (int d = 1; d < p->n_devices; d++)
        if (tg_target_device_need(p, d) > tg_target_device_need(p, best))
            best = d;
    return best;
}

/* The largest need of a compiled program and the capacity it is held to. */
static void need_of(const tg_program *p, int64_t *need, int64_t *cap, const char **unit)
{
    *need = tg_target_device_need(p, fullest_device(p));
    *cap = tg_target_capacity(p, unit);
}

static bool layer_of(const char *name, char *out, size_t cap);

/* The unit a forward value belongs to: its residual block ("layer3.8") in a
 * ResNet, else its top-level scope ("layer1", "B2"). */
static void unit_of(const char *name, char *out, size_t cap)
{
    if (layer_of(name, out, cap))
        return;
    const char *slash = strchr(name, '/');
    size_t n = slash ? (size_t)(slash - name) : strlen(name);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), name);
}

/* Recomputation checkpoints at every unit's output: the last forward value
 * of each unit is kept, the rest recomputed from it. */
static void checkpoint_units(tg_graph *g)
{
    char unit[64], next[64];
    tg_tensor *last = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        tg_tensor *t = g->nodes[i];
        if (t->n_in == 0 || (t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER)))
            continue;
        if (last) {
            unit_of(last->name, unit, sizeof unit);
            unit_of(t->name, next, sizeof next);
            if (strcmp(unit, next) != 0)
                tg_recomputation_checkpoint(g, last);
        }
        last = t;
    }
}

/* Compile the model with the changes kv (key, value, ..., NULL), after
 * prepare(graph) when given; *need < 0 when it does not compile. */
static void what_if(const tg_what_if_model *m, int batch, const char *const *kv,
                    void (*prepare)(tg_graph *), int64_t *need)
{
    *need = -1;
    tg_options *o = tg_options_clone(m->options);
    tg_model_graph mg;
    tg_program *p = NULL;
    if (!o)
        return;
    tg_options_set(o, "debug.allowOutOfMemory", "true");
    for (int i = 0; kv && kv[i]; i += 2)
        if (tg_options_set(o, kv[i], kv[i + 1]) != TG_OK) {
            tg_options_destroy(o);
            return;
        }
    if (tg_model_graph_create_ex(m->spec, batch, m->optimizer, m->input, &mg) == TG_OK) {
        if (prepare)
            prepare(mg.graph);
        if (tg_program_compile(mg.graph, o, &p) == TG_OK) {
            int64_t cap;
            const char *unit;
            need_of(p, need, &cap, &unit);
        }
        tg_program_destroy(p);
        tg_model_graph_destroy(&mg);
    }
    tg_options_destroy(o);
}

/* "layer3/8/conv1/..." -> "layer3.8" (torchvision's module path, what
 * --split takes); false for names outside such a layer. */
static bool layer_of(const char *name, char *out, size_t cap)
{
    const char *slash = strncmp(name, "layer", 5) == 0 ? strchr(name, '/') : NULL;
    const char *end = slash ? strchr(slash + 1, '/') : NULL;
    if (!end || (size_t)(end - name) >= cap)
        return false;
    memcpy(out, name, (size_t)(end - name));
    out[end - name] = '\0';
    out[slash - name] = '.';
    return true;
}

/* Index of the first forward node inside layer `point` ("layer3.8"). */
static int first_node_of(const tg_graph *g, const char *point)
{
    char name[64];
    for (int i = 0; i < g->n_nodes; i++)
        if (layer_of(g->nodes[i]->name, name, sizeof name) && strcmp(name, point) == 0)
            return i;
    return g->n_nodes;
}

/* The split list `old` with `point` added, in forward order (as --split wants). */
static bool add_split_point(const tg_graph *g, const char *old, const char *point, char *out,
                            size_t cap)
{
    char buf[512], *points[33], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof buf, "%s", old);
    for (char *tok = strtok_r(buf, ",", &save); tok && n < 32; tok = strtok_r(NULL, ",", &save))
        points[n++] = tok;
    points[n++] = (char *)point;
    for (int i = 1; i < n; i++) /* insertion sort by position in the model */
        for (int j = i; j > 0 && first_node_of(g, points[j]) < first_node_of(g, points[j - 1]);
             j--) {
            char *t = points[j];
            points[j] = points[j - 1];
            points[j - 1] = t;
        }
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? "," : "", points[i]);
    return used < cap;
}

/* One more pipeline stage: split the fullest device's layers where half of
 * its bytes lie on each side (every value of a layer: its activations, and
 * its weights with their gradients and optimizer state). Fills split (the
 * option's new value) and point; false when there are no layers to split at. */
#define MAX_LAYERS 256
static bool split_further(const tg_program *p, char *split, size_t cap, char *point,
                          size_t point_cap)
{
    const tg_graph *g = p->graph;
    int d = fullest_device(p), n = 0;
    char names[MAX_LAYERS][64]; /* 16 KiB: the command's thread, not a kernel's */
    double bytes[MAX_LAYERS] = {0}, total = 0;
    char name[64];
    /* layers in forward order, then every value's bytes to its layer */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->n_nodes; i++) {
            const tg_tensor *t = g->nodes[i];
            bool forward = t->n_in > 0 && !(t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER));
            if (p->device_of[i] != d || !layer_of(t->name, name, sizeof name) ||
                (pass == 0 && !forward))
                continue;
            int k = 0;
            while (k < n && strcmp(names[k], name) != 0)
                k++;
            if (k == n && pass == 0 && n < MAX_LAYERS)
                snprintf(names[n++], sizeof names[0], "%s", name);
            if (pass == 1 && k < n && p->home[i] >= 0) {
                bytes[k] += (double)tg_program_node_bytes(p, t);
                total += (double)tg_program_node_bytes(p, t);
            }
        }
    double seen = 0;
    for (int k = 0; k < n; k++) {
        if (k > 0 && seen * 2 >= total) {
            snprintf(point, point_cap, "%s", names[k]);
            return add_split_point(g, p->config.pipeline.split, names[k], split, cap);
        }
        seen += bytes[k];
    }
    return false;
}

bool tg_what_if_wanted(const tg_compiled *c)
{
    const tg_program *p = tg_compiled_program(c);
    int64_t need, cap;
    const char *unit;
    need_of(p, &need, &cap, &unit);
    return cap > 0 && need * 10 > cap * 9; /* over, or within 10% of, the capacity */
}

tg_status tg_program_what_if(const tg_compiled *compiled, const tg_what_if_model *m,
                             tg_what_if_plan *plan)
{
    const tg_program *p = tg_compiled_program(compiled);
    int64_t need, cap;
    const char *unit;
    need_of(p, &need, &cap, &unit);
    memset(plan, 0, sizeof *plan);
    snprintf(plan->unit, sizeof plan->unit, "%s", unit);
    plan->need = need;
    plan->capacity = cap;
    char a[32], b[32], c[32];
    char split[512], devices[16], point[64], where[80] = "";
    bool can_split = split_further(p, split, sizeof split, point, sizeof point);
    snprintf(devices, sizeof devices, "%d", p->n_devices + 1);
    if (can_split)
        snprintf(where, sizeof where, "at %s too", point);
    bool half = p->precision.model != TG_F32;
    char replicas[16];
    snprintf(replicas, sizeof replicas, "%d", p->replicas > 1 ? p->replicas : 2);
    bool rts = p->config.memory.location[TG_TENSOR_OPTIMIZER].sharded && p->replicas > 1;
    bool offloading = p->config.memory.location[TG_TENSOR_OPTIMIZER].off_chip;
    const tg_tensor_location *weights = &p->config.memory.location[TG_TENSOR_WEIGHT];
    bool weights_rts = weights->sharded && p->replicas > 1, weights_offloaded = weights->off_chip;
    /* phased over the devices the plan has: its stages (or blocks) as the phases */
    char phased_devices[16];
    snprintf(phased_devices, sizeof phased_devices, "%d", p->n_devices);
    const char *phases = p->config.pipeline.stages;
    bool phased_now = !strcmp(p->config.pipeline.strategy, "phased");
    bool phases_auto = p->auto_phases[0] != '\0';
    if (phased_now || !strcmp(phases, "auto"))
        phases = p->config.pipeline.phases;
    struct {
        const char *what;
        int batch;
        const char *kv[20];
        const char *unavailable;
        void (*prepare)(tg_graph *);
    } remedies[] = {
        {"half the micro-batch", m->batch / 2, {NULL}, NULL, NULL},
        {"fp16 weights, activations, gradients",
         m->batch,
         {"precision", "16.16", NULL},
         half ? "already stored in half precision" : NULL,
         NULL},
        {"recomputation (keep only stage inputs)",
         m->batch,
         {"recomputation", "pipeline", NULL},
         NULL,
         NULL},
        {"offload optimizer state to the host",
         m->batch,
         {"TensorLocations.optimizer.onChip", "false", NULL},
         NULL,
         NULL},
        {"weights, accumulators, optimizer off chip",
         m->batch,
         {"TensorLocations.weight.onChip", "false", "TensorLocations.accumulator.onChip", "false",
          "TensorLocations.optimizer.onChip", "false", NULL},
         NULL,
         NULL},
        {"one more pipeline stage",
         m->batch,
         {"split", split, "devices", devices, "executionStrategy", "pipelined", NULL},
         can_split ? NULL
                   : "split the model at more layers (--split a,b or --stages) and compile again",
         NULL},
        {"recomputation, a checkpoint per block",
         m->batch,
         {"recomputation", "pipeline", NULL},
         NULL,
         checkpoint_units},
        {"available memory proportion 0.1",
         m->batch,
         {"availableMemoryProportion", "0.1", NULL},
         cap > 0 ? NULL : "needs a capacity (memoryPerDevice or a tiled target)",
         NULL},
        {p->replicas > 1 ? "replicated tensor sharding" : "replicated tensor sharding, 2 replicas",
         m->batch,
         {"TensorLocations.optimizer.replicatedTensorSharding", "true", "replicationFactor",
          replicas, "TensorLocations.optimizer.minElementsForReplicatedTensorSharding", replicas,
          NULL},
         rts          ? "already sharded"
         : offloading ? "the state is off chip: sharding it saves host memory, not the device's"
                      : NULL,
         NULL},
        /* the stages as phases, one after another, with everything streamed */
        {"phased, everything off chip",
         m->batch,
         {"executionStrategy", "phased", "stages", "", "phases", phases, "devices", phased_devices,
          "TensorLocations.weight.onChip", "false", "TensorLocations.activation.onChip", "false",
          "TensorLocations.accumulator.onChip", "false", "TensorLocations.optimizer.onChip",
          "false", NULL},
         p->graph->n_blocks < 2 && !*p->config.pipeline.split
             ? "the model has no blocks to make phases of (split it with --split)"
             : NULL,
         NULL},
        /* phases auto's choice of devices (up to the plan's) and locations */
        {"phased, the compiler's plan (phases auto)",
         m->batch,
         {"executionStrategy", "phased", "stages", "", "split", "", "phases", "auto", "devices",
          phased_devices, NULL},
         /* a model without blocks of its own is divided by --split, which
          * phases auto does not take: that is the reason, not "no blocks" */
         p->graph->n_blocks < 1 && *p->config.pipeline.split
             ? "phases auto does not take --split's division; it needs blocks in the model "
               "(tg_block_begin)"
         : p->graph->n_blocks < 1 ? "the model has no blocks to make phases of"
         : phases_auto            ? "already phases auto"
                                  : NULL,
         NULL},
        /* ZeRO-3: the weights and, with them, their optimizer state */
        {p->replicas > 1 ? "weights sharded over the replicas" : "weights sharded, 2 replicas",
         m->batch,
         {"TensorLocations.weight.replicatedTensorSharding", "true", "replicationFactor", replicas,
          "TensorLocations.weight.minElementsForReplicatedTensorSharding", replicas, NULL},
         weights_rts ? "already sharded"
         : weights_offloaded
             ? "the weights are off chip: sharding saves host memory, not the device's"
             : NULL,
         NULL},
    };
    for (size_t i = 0; i < sizeof remedies / sizeof remedies[0] && plan->n < TG_WHAT_IF_MAX; i++) {
        tg_what_if_row *row = &plan->rows[plan->n++];
        snprintf(row->what, sizeof row->what, "%s", remedies[i].what);
        row->need = need;
        row->after = -1;
        row->capacity = cap;
        if (remedies[i].unavailable || remedies[i].batch < 1) {
            const char *why = remedies[i].unavailable ? remedies[i].unavailable : "batch already 1";
            snprintf(row->shown, sizeof row->shown, "%s", why);
            snprintf(row->outcome, sizeof row->outcome, "%s", why);
            continue;
        }
        int64_t after;
        what_if(m, remedies[i].batch, remedies[i].kv, remedies[i].prepare, &after);
        if (after < 0) {
            snprintf(row->shown, sizeof row->shown, "does not compile: %s", tg_error_message());
            snprintf(row->outcome, sizeof row->outcome, "does not compile: %s", tg_error_message());
            continue;
        }
        /* a remedy can cost memory here (f16 staging, say): "adds", not "saves -N B" */
        int64_t saved = need - after;
        bool split_row = remedies[i].kv[0] && !strcmp(remedies[i].kv[0], "split");
        snprintf(row->shown, sizeof row->shown, "%s -> %s, %s %s (%.0f%%)%s%s%s",
                 tg_an_format(TG_AN_BYTES, (double)need, a, sizeof a),
                 tg_an_format(TG_AN_BYTES, (double)after, b, sizeof b),
                 saved < 0 ? "adds" : "saves",
                 tg_an_format(TG_AN_BYTES, (double)(saved < 0 ? -saved : saved), c, sizeof c),
                 need ? 100.0 * (double)(saved < 0 ? -saved : saved) / (double)need : 0.0,
                 cap > 0 ? (after <= cap ? ", fits" : ", still over") : "",
                 split_row ? "; split " : "", split_row ? where : "");
        row->after = after;
        snprintf(row->outcome, sizeof row->outcome, "%s%s%s",
                 cap > 0 ? (after <= cap ? "fits" : "still over") : "no capacity set",
                 split_row ? "; split " : "", split_row ? where : "");
    }
    return TG_OK;
}

void tg_what_if_print(const tg_what_if_plan *plan, FILE *out)
{
    char a[32], b[32];
    fprintf(out, "\ninsights: %s needs %s", plan->unit,
            tg_an_format(TG_AN_BYTES, (double)plan->need, a, sizeof a));
    if (plan->capacity > 0)
        fprintf(out, " of %s (%.0f%%)",
                tg_an_format(TG_AN_BYTES, (double)plan->capacity, b, sizeof b),
                100.0 * (double)plan->need / (double)plan->capacity);
    fprintf(out, "; each remedy below is this model compiled again with that one change:\n");
    for (int i = 0; i < plan->n; i++)
        fprintf(out, "  %-42s %s\n", plan->rows[i].what, plan->rows[i].shown);
}
