/* tools/insights.c - what would make it fit: the reference's list of memory
 * remedies, each quantified by compiling the model again with that one
 * change (a what-if on the real plan, not a rule of thumb). The figure is the
 * largest need: the fullest tile on a tiled target, the largest device
 * arena otherwise. */
#include "insights.h"

#include "compile/program.h"
#include "core/error.h"
#include "target/target.h"

#include <string.h>

/* The largest need of a compiled program and the capacity it is held to. */
static void need_of(const tg_program *p, const tg_options *o, int64_t *need, int64_t *cap,
                    const char **unit)
{
    *need = 0;
    if (p->tile_plan) {
        for (int d = 0; d < p->tile_plan->n_devices; d++)
            if (p->tile_plan->devices[d].max_bytes > *need)
                *need = p->tile_plan->devices[d].max_bytes;
        *cap = p->tile_plan->target.tile_memory;
        *unit = "the fullest tile";
        return;
    }
    for (int d = 0; d < p->n_devices; d++)
        if ((int64_t)p->devices[d].arena_bytes > *need)
            *need = (int64_t)p->devices[d].arena_bytes;
    *cap = tg_options_get_int(o, "memoryPerDevice");
    *unit = "the largest device";
}

/* Compile the model with one change; *need < 0 when it does not compile. */
static void what_if(const insight_model *m, int batch, const char *key, const char *value,
                    int64_t *need)
{
    *need = -1;
    tg_options *o = tg_options_clone(m->options);
    tg_model_graph mg;
    tg_program *p = NULL;
    if (!o)
        return;
    tg_options_set(o, "debug.allowOutOfMemory", "true");
    if (key && tg_options_set(o, key, value) != TG_OK) {
        tg_options_destroy(o);
        return;
    }
    if (tg_model_graph_create_ex(m->spec, batch, m->optimizer, m->input, &mg) == TG_OK) {
        if (tg_program_compile(mg.graph, o, &p) == TG_OK) {
            int64_t cap;
            const char *unit;
            need_of(p, o, need, &cap, &unit);
        }
        tg_program_destroy(p);
        tg_model_graph_destroy(&mg);
    }
    tg_options_destroy(o);
}

bool insights_wanted(const tg_program *p, const tg_options *o)
{
    int64_t need, cap;
    const char *unit;
    need_of(p, o, &need, &cap, &unit);
    return cap > 0 && need * 10 > cap * 9; /* over, or within 10% of, the capacity */
}

void print_insights(const insight_model *m, const tg_program *p, FILE *out)
{
    int64_t need, cap;
    const char *unit;
    need_of(p, m->options, &need, &cap, &unit);
    char a[32], b[32], c[32];
    fprintf(out, "\ninsights: %s needs %s", unit, cli_bytes((double)need, a, sizeof a));
    if (cap > 0)
        fprintf(out, " of %s (%.0f%%)", cli_bytes((double)cap, b, sizeof b),
                100.0 * (double)need / (double)cap);
    fprintf(out, "; each remedy below is this model compiled again with that one change:\n");
    struct {
        const char *what;
        int batch;
        const char *key, *value;
        const char *unavailable;
    } remedies[] = {
        {"half the micro-batch", m->batch / 2, NULL, NULL, NULL},
        {"recomputation (keep only stage inputs)", m->batch, "recomputation", "pipeline", NULL},
        {"offload optimizer state to the host", m->batch, "TensorLocations.optimizer.onChip",
         "false", NULL},
        {"fp16 weights and activations", 0, NULL, NULL, "not yet: half precision arrives with the "
                                                       "optimisation-journey work"},
        {"recomputation checkpoints", 0, NULL, NULL,
         "mark values with tg_recomputation_checkpoint: fewer recomputed, more kept"},
        {"available memory proportion", 0, NULL, NULL, "not yet: kernel scratch is not capped"},
        {"replicated tensor sharding", 0, NULL, NULL, "not yet"},
        {"more pipeline stages", 0, NULL, NULL,
         "split the model at more layers (--split a,b or --stages) and compile again"},
    };
    for (size_t i = 0; i < sizeof remedies / sizeof remedies[0]; i++) {
        if (remedies[i].unavailable || remedies[i].batch < 1) {
            fprintf(out, "  %-42s %s\n", remedies[i].what,
                    remedies[i].unavailable ? remedies[i].unavailable : "batch already 1");
            continue;
        }
        int64_t after;
        what_if(m, remedies[i].batch, remedies[i].key, remedies[i].value, &after);
        if (after < 0) {
            fprintf(out, "  %-42s does not compile: %s\n", remedies[i].what, tg_error_message());
            continue;
        }
        fprintf(out, "  %-42s %s -> %s, saves %s (%.0f%%)%s\n", remedies[i].what,
                cli_bytes((double)need, a, sizeof a), cli_bytes((double)after, b, sizeof b),
                cli_bytes((double)(need - after), c, sizeof c),
                need ? 100.0 * (double)(need - after) / (double)need : 0.0,
                cap > 0 ? (after <= cap ? ", fits" : ", still over") : "");
    }
}
