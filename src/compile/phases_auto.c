/* compile/phases_auto.c - phases "auto": the phased plan chosen from the
 * cost model and checked by compiling it (compile/phases_auto.h).
 *
 * A candidate is a number of devices D, the model's blocks cut into D runs
 * of consecutive blocks (device d runs the d-th; each block is a phase of
 * its own, in model order), and a set of tensor kinds in streaming memory.
 * Within a device the cut into phases does not change what it needs: the
 * memory plan shares the activation region by liveness, so a streamed
 * weight costs bytes only while its layer runs whatever phase holds it.
 *
 * For each D and each set of kinds (those the user put off chip always
 * included), the cut is the one whose fullest device needs least (a
 * min-max partition by dynamic programming over the blocks). Its estimate:
 * a device needs its blocks' on-chip kinds (weights; as many bytes again
 * for gradient accumulators when there are any; optimizer state;
 * activations kept for the backward pass) plus the largest working set of
 * one op; a host step streams, per micro-batch m of it, each offloaded
 * weight in for the forward and the backward and once more in and out for
 * the update (2m + 2 times its bytes), each offloaded accumulator read
 * and written as every backward adds into it and read for the update
 * (2m + 1, as compile/streaming.c counts it), offloaded optimizer state
 * in and out for the update (2), offloaded kept activations out and in (2m),
 * at the host link's rate; values crossing a device boundary go forward
 * and back once per micro-batch at the link's rate.
 *
 * Per byte saved on the device, optimizer state costs 2 streamed bytes a
 * step, activations 2m, accumulators 2m + 1 and weights 2m + 2: that is
 * the order in which the cheapest plan takes them off chip (measured on
 * BERT-large in docs/memory-locations.md), but the search weighs the
 * bytes of the model at hand (a model whose kept activations are few saves
 * little by moving them) rather than following a fixed list. Candidates are compiled
 * in order of their estimated copy seconds (ties: the smaller need first)
 * until one fits; the estimate leaves out code and tile balance, so a
 * candidate it admits may still be refused by the plan, and the search then
 * goes on to the next (at most MAX_TRIES compiles).
 */
#include "compile/phases_auto.h"

#include "compile/placement.h"
#include "compile/stages.h"
#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_TRIES = 6, KIND_SETS = 1 << TG_TENSOR_KINDS };

typedef struct candidate {
    int devices;
    int first[TG_STAGES_MAX + 1]; /* device d runs atoms first[d] .. first[d + 1] - 1 */
    unsigned off;                 /* bit k: tensor kind k in streaming memory */
    double memory;                /* estimated bytes of the fullest device */
    double streamed;              /* bytes to and from streaming memory per host step */
    double seconds;               /* estimated copies per host step */
} candidate;

typedef struct search {
    const tg_stage_atoms *a;
    tg_stage_goal goal;
    bool training, accumulate; /* accumulators on the device when on chip */
    double m;                  /* micro-batches per host step */
} search;

bool tg_phases_auto_wanted(const tg_config *c)
{
    return tg_placement_phased(c) && strcmp(c->pipeline.phases, "auto") == 0;
}

static bool on_chip(unsigned off, tg_tensor_kind k)
{
    return !(off & (1u << k));
}

/* Estimated bytes of a device running atoms [i, j], and what it streams. */
static double group_memory(const search *s, unsigned off, int i, int j, double *streamed)
{
    const tg_stage_atoms *a = s->a;
    double mem = 0, working = 0, moved = 0, m = s->m;
    for (int x = i; x <= j; x++) {
        double w = a->params[x];
        if (on_chip(off, TG_TENSOR_WEIGHT))
            mem += w;
        else
            moved += w * (s->training ? 2 * m + 2 : m);
        if (s->training) {
            /* on chip, a gradient lives until the update either way: in its
             * accumulator, or (one micro-batch) as an activation */
            if (!on_chip(off, TG_TENSOR_ACCUMULATOR)) /* added into: read, written */
                moved += w * (2 * m + 1);
            else
                mem += w;
            if (on_chip(off, TG_TENSOR_OPTIMIZER))
                mem += a->state[x];
            else
                moved += 2 * a->state[x];
            if (on_chip(off, TG_TENSOR_ACTIVATION))
                mem += a->kept[x];
            else
                moved += 2 * m * a->kept[x];
        }
        working = a->working[x] > working ? a->working[x] : working;
    }
    if (streamed)
        *streamed = moved;
    return mem + working;
}

/* Seconds to move `bytes` between the host's streaming memory and a device. */
static double stream_seconds(const tg_cost_model *cost, double bytes)
{
    if (cost->tiled)
        return bytes / (cost->target.host_bytes_per_cycle * cost->target.clock_hz);
    return bytes / cost->rates.bytes_per_s;
}

/* The cut of the atoms into c->devices runs whose fullest device needs
 * least, then its streamed bytes and copy seconds. */
static tg_status best_cut(const search *s, candidate *c)
{
    const tg_stage_atoms *a = s->a;
    int n = a->n, D = c->devices;
    /* best[k * n + j]: the least fullest device of atoms 0..j over devices
     * 0..k; from[] the first atom of device k in it */
    double *best = tg_malloc(sizeof(double) * (size_t)D * (size_t)n);
    int *from = tg_malloc(sizeof(int) * (size_t)D * (size_t)n);
    if (!best || !from) {
        tg_free(best);
        tg_free(from);
        return tg_error(TG_ERR_NOMEM, "phases auto: out of memory");
    }
    for (int k = 0; k < D; k++)
        for (int j = 0; j < n; j++) {
            double *b = &best[k * n + j];
            *b = INFINITY;
            from[k * n + j] = -1;
            for (int i = k; i <= j; i++) {
                double before = k == 0 ? (i == 0 ? 0 : INFINITY) : best[(k - 1) * n + i - 1];
                double here = group_memory(s, c->off, i, j, NULL);
                double v = before > here ? before : here;
                if (v < *b) {
                    *b = v;
                    from[k * n + j] = i;
                }
            }
        }
    c->first[D] = n;
    for (int k = D - 1, j = n - 1; k >= 0; k--) {
        c->first[k] = from[k * n + j];
        j = c->first[k] - 1;
    }
    c->memory = best[(D - 1) * n + n - 1];
    tg_free(best);
    tg_free(from);
    c->streamed = 0;
    double crossing = 0;
    for (int k = 0; k < D; k++) {
        double streamed;
        group_memory(s, c->off, c->first[k], c->first[k + 1] - 1, &streamed);
        c->streamed += streamed;
        if (k + 1 < D)
            crossing += a->cut[c->first[k + 1] - 1] * (s->training ? 2 : 1) * s->m;
    }
    c->seconds =
        stream_seconds(&s->goal.cost, c->streamed) + tg_cost_copy_seconds(&s->goal.cost, crossing);
    return TG_OK;
}

static int by_seconds(const void *x, const void *y)
{
    const candidate *a = x, *b = y;
    if (a->seconds != b->seconds)
        return a->seconds < b->seconds ? -1 : 1;
    if (a->memory != b->memory)
        return a->memory < b->memory ? -1 : 1;
    return a->devices - b->devices;
}

/* The kinds that may go off chip: the user's off-chip kinds always are;
 * kinds sharded over replicas cannot be (tensor locations refuse both);
 * inference has only weights to move. */
static void kind_limits(const tg_config *c, bool training, unsigned *floor, unsigned *allowed)
{
    *floor = *allowed = 0;
    for (int k = 0; k < TG_TENSOR_KINDS; k++) {
        const tg_tensor_location *loc = &c->memory.location[k];
        if (loc->off_chip)
            *floor |= 1u << k;
        bool relevant = training || k == TG_TENSOR_WEIGHT;
        if (relevant && !(loc->sharded && c->pipeline.replicas > 1))
            *allowed |= 1u << k;
    }
    *allowed |= *floor;
}

/* "weights, accumulators, optimizer state" (or "nothing") for a message;
 * `flag` gives --offload's spelling ("weights,accumulators,optimizer"). */
static void kinds_text(unsigned off, bool flag, char *buf, size_t cap)
{
    static const char *const words[TG_TENSOR_KINDS] = {"weights", "activations", "accumulators",
                                                       "optimizer state"};
    static const char *const flags[TG_TENSOR_KINDS] = {"weights", "activations", "accumulators",
                                                       "optimizer"};
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < TG_TENSOR_KINDS && used + 1 < cap; k++)
        if (off & (1u << k))
            used += (size_t)snprintf(buf + used, cap - used, "%s%s",
                                     used ? (flag ? "," : ", ") : "", flag ? flags[k] : words[k]);
    if (!used)
        snprintf(buf, cap, "%s", flag ? "none" : "nothing");
}

/* The phases option of a candidate: every atom a phase, on its device. */
static void phases_text(const tg_stage_atoms *a, const candidate *c, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < c->devices; d++)
        for (int x = c->first[d]; x < c->first[d + 1] && used + 1 < cap; x++)
            used +=
                (size_t)snprintf(buf + used, cap - used, "%s%s@%d", x ? "|" : "", a->names[x], d);
}

/* The config of a candidate: c with its phases, devices and locations. */
static tg_status candidate_config(const tg_config *c, const tg_stage_atoms *a, const candidate *k,
                                  bool anyway, tg_config *out)
{
    char phases[1024], devices[16], key[64];
    phases_text(a, k, phases, sizeof phases);
    snprintf(devices, sizeof devices, "%d", k->devices);
    TG_TRY(tg_config_copy(c, out));
    tg_status s = tg_config_set(out, "executionStrategy", "phased");
    if (s == TG_OK)
        s = tg_config_set(out, "stages", "");
    if (s == TG_OK)
        s = tg_config_set(out, "phases", phases);
    if (s == TG_OK)
        s = tg_config_set(out, "devices", devices);
    for (int t = 0; s == TG_OK && t < TG_TENSOR_KINDS; t++) {
        snprintf(key, sizeof key, "TensorLocations.%s.onChip", tg_tensor_kind_name(t));
        s = tg_config_set(out, key, on_chip(k->off, t) ? "true" : "false");
    }
    /* a candidate over the capacity must fail to be passed over, even when
     * the user compiles out of memory anyway (then see the end) */
    if (s == TG_OK && !anyway)
        s = tg_config_set(out, "debug.allowOutOfMemory", "false");
    if (s != TG_OK)
        tg_config_free(out);
    return s;
}

/* The atoms (the model's blocks) and the goal's cost model for c. */
static tg_status search_begin(const tg_graph *g, const tg_config *c, tg_stage_atoms *a, search *s)
{
    memset(s, 0, sizeof *s);
    if (*c->pipeline.split)
        return tg_error(TG_ERR_CONFIG,
                        "phases auto with split \"%s\": automatic phases choose among the "
                        "model's blocks; give the phases by hand (\"S0|S1|...\") or drop --split",
                        c->pipeline.split);
    if (g->n_blocks < 1)
        return tg_error(TG_ERR_CONFIG,
                        "phases auto: the model has no blocks to make phases of; mark blocks "
                        "(tg_block_begin) or give --split and the phases by hand");
    int *order = NULL, n_order = 0;
    TG_TRY(tg_schedule(g, &order, &n_order));
    bool *needed = tg_calloc((size_t)g->n_nodes + 1, sizeof(bool));
    if (!needed) {
        tg_free(order);
        return tg_error(TG_ERR_NOMEM, "phases auto: out of memory");
    }
    for (int k = 0; k < n_order; k++) {
        needed[order[k]] = true;
        s->training |= (g->nodes[order[k]]->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER)) != 0;
    }
    tg_status st = tg_stage_goal_read(c, 1, s->training, &s->goal);
    s->m = s->goal.micro_batches;
    int shares =
        c->pipeline.replicas * (c->distributed.instances > 1 ? c->distributed.instances : 1);
    s->accumulate = s->training && s->goal.micro_batches * shares > 1;
    if (st == TG_OK)
        st = tg_stage_atoms_build(g, needed, false, &s->goal.cost, s->accumulate, a);
    if (st != TG_OK)
        tg_cost_model_free(&s->goal.cost); /* the atoms free themselves on failure */
    s->a = a;
    tg_free(order);
    tg_free(needed);
    return st;
}

/* Every candidate, in the order they are tried; *n of them. */
static tg_status candidates(const tg_config *c, const search *s, candidate **out, int *n)
{
    unsigned floor, allowed;
    kind_limits(c, s->training, &floor, &allowed);
    int max_devices = c->pipeline.devices > 1 ? c->pipeline.devices : 1;
    if (max_devices > s->a->n)
        max_devices = s->a->n;
    if (max_devices > TG_STAGES_MAX)
        max_devices = TG_STAGES_MAX;
    candidate *list = tg_calloc((size_t)max_devices * KIND_SETS, sizeof *list);
    if (!list)
        return tg_error(TG_ERR_NOMEM, "phases auto: out of memory");
    *n = 0;
    for (int d = 1; d <= max_devices; d++)
        for (unsigned off = 0; off < KIND_SETS; off++) {
            if ((off & floor) != floor || (off & ~allowed))
                continue;
            candidate *k = &list[(*n)++];
            k->devices = d;
            k->off = off;
            tg_status st = best_cut(s, k);
            if (st != TG_OK) {
                tg_free(list);
                return st;
            }
        }
    qsort(list, (size_t)*n, sizeof *list, by_seconds);
    *out = list;
    return TG_OK;
}

static void describe(const search *s, const candidate *k, char *buf, size_t cap)
{
    char phases[512], kinds[96];
    phases_text(s->a, k, phases, sizeof phases);
    kinds_text(k->off, false, kinds, sizeof kinds);
    snprintf(buf, cap, "\"%s\" (%d device%s), off chip: %s", phases, k->devices,
             k->devices == 1 ? "" : "s", kinds);
}

/* Compile the candidates in order until one fits: *chosen is its index,
 * -1 when none did (the status says why). */
static tg_status try_candidates(const tg_graph *g, const tg_config *c, const search *s,
                                const candidate *list, int n, tg_program **out, int *chosen,
                                int *tried, bool *forced, char *first_over, size_t cap)
{
    *forced = false;
    double capacity = s->goal.capacity;
    *chosen = -1;
    *tried = 0;
    first_over[0] = '\0';
    /* the candidates the estimate admits; when it admits none, the one that
     * needs least by it (the estimate may be pessimistic) */
    int least = 0;
    for (int i = 1; i < n; i++)
        if (list[i].memory < list[least].memory)
            least = i;
    tg_status st = TG_ERR_CAPACITY;
    for (int i = 0; i < n && *tried < MAX_TRIES; i++) {
        bool admitted = capacity <= 0 || list[i].memory <= capacity;
        bool none_admitted = capacity > 0 && list[least].memory > capacity;
        if (!admitted && !(none_admitted && i == least))
            continue;
        tg_config cc;
        TG_TRY(candidate_config(c, s->a, &list[i], false, &cc));
        (*tried)++;
        st = tg_program_compile_config(g, &cc, out);
        tg_config_free(&cc);
        if (st == TG_OK) {
            *chosen = i;
            return TG_OK;
        }
        if (st != TG_ERR_CAPACITY)
            return st;        /* not a question of memory: the plan itself is refused */
        if (!first_over[0]) { /* the plan's message up to its list of the largest */
            char what[640];
            describe(s, &list[i], what, sizeof what);
            const char *msg = tg_error_message(), *semi = strstr(msg, "; largest");
            snprintf(first_over, cap, "%s: %.*s", what, semi ? (int)(semi - msg) : 400, msg);
        }
    }
    if (st == TG_ERR_CAPACITY && c->debug.allow_out_of_memory && n > 0) {
        /* debug.allowOutOfMemory: the plan that needs least, compiled anyway */
        tg_config cc;
        TG_TRY(candidate_config(c, s->a, &list[least], true, &cc));
        st = tg_program_compile_config(g, &cc, out);
        tg_config_free(&cc);
        if (st == TG_OK) {
            *chosen = least;
            *forced = true;
        }
    }
    return st;
}

static void search_end(tg_stage_atoms *a, search *s)
{
    tg_stage_atoms_free(a);
    tg_cost_model_free(&s->goal.cost);
}

tg_status tg_phases_auto_compile(const tg_graph *g, const tg_config *c, tg_program **out)
{
    *out = NULL;
    /* its plans give each device a run of consecutive phases (SingleIPU) */
    if (strcmp(c->pipeline.phased_type, "SingleIPU") != 0)
        return tg_error(TG_ERR_CONFIG,
                        "phases auto with phasedExecutionType %s: automatic phases give each "
                        "device consecutive phases (SingleIPU); give the phases to alternate, "
                        "--phases \"B1|B2|B3|B4\"",
                        c->pipeline.phased_type);
    tg_stage_atoms *a = tg_calloc(1, sizeof *a);
    search *s = tg_calloc(1, sizeof *s);
    candidate *list = NULL;
    int n = 0, chosen = -1, tried = 0;
    bool forced = false;
    char first_over[1536];
    tg_status st =
        a && s ? search_begin(g, c, a, s) : tg_error(TG_ERR_NOMEM, "phases auto: out of memory");
    bool begun = st == TG_OK;
    if (st == TG_OK)
        st = candidates(c, s, &list, &n);
    if (st == TG_OK)
        st = try_candidates(g, c, s, list, n, out, &chosen, &tried, &forced, first_over,
                            sizeof first_over);
    if (st == TG_OK) {
        tg_program *p = *out;
        const candidate *k = &list[chosen];
        char kinds[96], mib[32] = "";
        phases_text(a, k, p->auto_phases, sizeof p->auto_phases);
        kinds_text(k->off, true, p->auto_offload, sizeof p->auto_offload);
        kinds_text(k->off, false, kinds, sizeof kinds);
        if (s->goal.capacity > 0)
            snprintf(mib, sizeof mib, " of %.1f MiB", s->goal.capacity / 1048576.0);
        int len =
            snprintf(p->auto_phases_why, sizeof p->auto_phases_why,
                     "off chip: %s; by the estimate %.1f MiB%s on the fullest device and "
                     "%.1f MiB to and from streaming memory per host step (%.3g s of "
                     "copies): of the %d plans considered, %s",
                     kinds, k->memory / 1048576.0, mib, k->streamed / 1048576.0, k->seconds, n,
                     forced ? "none fits: the one that needs least, compiled anyway "
                              "(debug.allowOutOfMemory)"
                            : "the fewest copies that fit");
        if (first_over[0] && len > 0 && (size_t)len < sizeof p->auto_phases_why)
            snprintf(p->auto_phases_why + len, sizeof p->auto_phases_why - (size_t)len,
                     "; %d compiled %sdid not fit, the first %s", forced ? tried : tried - 1,
                     forced ? "" : "before it ", first_over);
    } else if (st == TG_ERR_CAPACITY && begun) {
        char what[640] = "";
        int least = 0;
        for (int i = 1; i < n; i++)
            if (list[i].memory < list[least].memory)
                least = i;
        if (n > 0)
            describe(s, &list[least], what, sizeof what);
        st = tg_error(
            TG_ERR_CAPACITY,
            "phases auto: no phased plan of the model's %d blocks over up to %d "
            "device%s fits: the plan that needs least, %s, needs %.1f MiB a device by "
            "the estimate%s%.1f MiB%s; compiled %d plan%s%s%s. Give more devices "
            "(--devices), a smaller micro-batch, or lower precision",
            a->n, c->pipeline.devices > 1 ? c->pipeline.devices : 1,
            c->pipeline.devices > 1 ? "s" : "", what, n > 0 ? list[least].memory / 1048576.0 : 0,
            s->goal.capacity > 0 ? " against " : "", s->goal.capacity / 1048576.0,
            s->goal.capacity > 0 ? " available (memoryPerDevice or the tiles, less "
                                   "autoStages.memoryMargin)"
                                 : "",
            tried, tried == 1 ? "" : "s", first_over[0] ? "; the first: " : "", first_over);
    }
    if (begun)
        search_end(a, s);
    tg_free(list);
    tg_free(a);
    tg_free(s);
    return st;
}

bool tg_phases_auto_suggest(const tg_graph *g, const tg_config *c, char *buf, size_t cap)
{
    tg_config cc;
    if (g->n_blocks < 1 || *c->pipeline.split || tg_config_copy(c, &cc) != TG_OK)
        return false;
    bool ok = tg_config_set(&cc, "executionStrategy", "phased") == TG_OK &&
              tg_config_set(&cc, "stages", "") == TG_OK &&
              tg_config_set(&cc, "phases", "auto") == TG_OK;
    tg_program *p = NULL;
    char saved[2048];
    snprintf(saved, sizeof saved, "%s", tg_error_message()); /* the caller's message */
    ok = ok && tg_phases_auto_compile(g, &cc, &p) == TG_OK;
    if (ok)
        snprintf(buf, cap, "--strategy phased --phases \"%s\" --devices %d%s%s", p->auto_phases,
                 p->n_devices, strcmp(p->auto_offload, "none") ? " --offload " : "",
                 strcmp(p->auto_offload, "none") ? p->auto_offload : "");
    tg_program_destroy(p);
    tg_config_free(&cc);
    tg_error(TG_ERR_CAPACITY, "%s", saved);
    return ok;
}
