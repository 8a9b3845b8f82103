/* report/plan.c - the compiled program as `tilegraph compile` shows it
 * (report/plan.c, tilegraph/plan.h): read from the program itself, the whole truth about a
 * run, so the figures are those the engine will allocate and execute. */
#include "tilegraph/plan.h"

#include "compile/compiled.h"
#include "compile/program.h"
#include "core/alloc.h"
#include "report/memory_table.h"
#include "report/table.h"
#include "target/collective.h"
#include "target/target.h"
#include "target/tiled.h"
#include "tilegraph/predict.h"

#include <math.h>
#include <string.h>

static int64_t peak_live(const tg_program *p, int d, int *at)
{
    const tg_device_program *dp = &p->devices[d];
    int n = dp->n_steps[0] + dp->n_steps[1] + dp->n_steps[2];
    int64_t best = 0;
    *at = 0;
    for (int s = 0; s < n; s++) {
        int64_t live = (int64_t)tg_program_live_bytes(p, d, s);
        if (live > best) {
            best = live;
            *at = s;
        }
    }
    return best;
}

static const char *step_name(const tg_program *p, int d, int s)
{
    const tg_device_program *dp = &p->devices[d];
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
        if (s < dp->n_steps[ph])
            return p->graph->nodes[dp->steps[ph][s].node]->name;
        s -= dp->n_steps[ph];
    }
    return "";
}

#define HIST_BINS 8

/* Tiles per bin of total bytes, bins of equal width up to the larger of the
 * tile capacity and the fullest tile. */
static int64_t hist_top(const tg_tile_plan *tp, int d)
{
    int64_t top = tp->target.tile_memory;
    return tp->devices[d].max_bytes > top ? tp->devices[d].max_bytes : top;
}

static void histogram(const tg_tile_plan *tp, int d, int counts[HIST_BINS])
{
    int64_t top = hist_top(tp, d);
    for (int k = 0; k < HIST_BINS; k++)
        counts[k] = 0;
    for (int t = 0; t < tp->target.tiles; t++) {
        int64_t b = tg_tile_bytes(tp, d, t);
        int k = (int)((double)b / (double)top * HIST_BINS);
        counts[k >= HIST_BINS ? HIST_BINS - 1 : k]++;
    }
}

static const char *const phase_names[3] = {"forward", "backward", "update"};

/* With I/O tiles: where they are, their fullest, and the copy they overlap. */
static void print_io_tiles(const tg_program *p, int d, FILE *out)
{
    const tg_tile_plan *tp = p->tile_plan;
    int tiles = tp->target.tiles, first = tiles - tp->target.io_tiles, fullest = first;
    if (tp->target.io_tiles == 0)
        return;
    for (int t = first; t < tiles; t++)
        if (tg_tile_bytes(tp, d, t) > tg_tile_bytes(tp, d, fullest))
            fullest = t;
    char a[32];
    int64_t bytes = tg_tile_bytes(tp, d, fullest);
    fprintf(out,
            "    I/O tiles %d-%d (numIOTiles %d): the fullest, %d, holds %s (%.0f%%); host streams "
            "in %.0f cycles per micro-batch, beside the previous micro-batch's compute\n",
            first, tiles - 1, tp->target.io_tiles, fullest,
            tg_an_format(TG_AN_BYTES, (double)bytes, a, sizeof a),
            100.0 * (double)bytes / (double)tp->target.tile_memory, tg_tile_stream_in_cycles(p, d));
    double hidden[3];
    for (int ph = 0; ph < 3; ph++)
        hidden[ph] = tg_tile_hidden_cycles(p, d, ph);
    if (hidden[0] + hidden[1] + hidden[2] > 0)
        fprintf(out,
                "    streaming memory on the I/O tiles: copies beside the compute %.0f forward, "
                "%.0f backward, %.0f update cycles (docs/targets.md)\n",
                hidden[0], hidden[1], hidden[2]);
}

/* The simulated host step: the target's cycle model's timeline (its
 * simulate hook; target/tilesim.c on the tiled targets) ends with its last pass; copies are the
 * streams, transfers and streaming-memory traffic inside those passes. */
static tg_status step_end(void *ctx, int device, int phase, tg_tile_piece piece, int iteration,
                          int micro_batch, double start_cycles, double end_cycles)
{
    (void)device, (void)phase, (void)piece, (void)iteration, (void)micro_batch, (void)start_cycles;
    double *end = ctx;
    if (end_cycles > *end)
        *end = end_cycles;
    return TG_OK;
}

/* Cycles of one host step's passes over every device (of `cycles`, or of
 * `copy_cycles` when copies), each forward and backward once per
 * micro-batch, each update once per weight update. */
static double step_cycles(const tg_program *p, bool copies)
{
    const tg_tile_plan *tp = p->tile_plan;
    double passes = (double)p->micro_batches * p->iterations, sum = 0;
    for (int d = 0; d < tp->n_devices; d++) {
        const double *c = copies ? tp->devices[d].copy_cycles : tp->devices[d].cycles;
        sum += (c[TG_PHASE_FORWARD] + c[TG_PHASE_BACKWARD]) * passes +
               c[TG_PHASE_UPDATE] * p->iterations;
    }
    return sum;
}

/* Of the copies' cycles of a host step, those beside the compute (I/O tiles). */
static double step_hidden(const tg_program *p)
{
    double passes = (double)p->micro_batches * p->iterations, sum = 0;
    for (int d = 0; d < p->tile_plan->n_devices; d++)
        sum += (tg_tile_hidden_cycles(p, d, TG_PHASE_FORWARD) +
                tg_tile_hidden_cycles(p, d, TG_PHASE_BACKWARD)) *
                   passes +
               tg_tile_hidden_cycles(p, d, TG_PHASE_UPDATE) * p->iterations;
    return sum;
}

/* The end of the simulated host step in cycles; 0 when the target has no
 * cycle model or it fails. */
static double simulated_end(const tg_program *p)
{
    double end = 0;
    const tg_target_ops *t = tg_target_of_config(&p->config);
    if (!t || !t->simulate || t->simulate(p, step_end, &end) != TG_OK)
        return 0;
    return end;
}

/* The device whose gradient all-reduce takes longest (they run at once,
 * each stage's replicas over their own links). */
static int slowest_allreduce(const tg_tile_plan *tp)
{
    int slowest = 0;
    for (int d = 1; d < tp->n_devices; d++)
        if (tp->devices[d].allreduce_cycles > tp->devices[slowest].allreduce_cycles)
            slowest = d;
    return slowest;
}

/* The gradient all-reduce between replicas (target/collective.h): its
 * slowest device's, per weight update, and its share of the host step of
 * `end` cycles (one all-reduce per weight update). */
static void print_allreduce(const tg_program *p, double end, FILE *out)
{
    const tg_tile_plan *tp = p->tile_plan;
    int slowest = slowest_allreduce(tp);
    const tg_tile_device *td = &tp->devices[slowest];
    if (p->replicas < 2 || td->allreduce_cycles <= 0)
        return;
    tg_allreduce_cost c =
        tg_allreduce_cost_of(&tp->target, td->allreduce_bytes, p->replicas, tp->n_devices);
    double hz = tp->target.clock_hz;
    char a[32];
    fprintf(out,
            "  gradient all-reduce: %.3f ms per weight update (device %d's %s over %d replicas "
            "on %d devices: a ring of %d over IPU-Links",
            td->allreduce_cycles / hz * 1e3, slowest,
            tg_an_format(TG_AN_BYTES, td->allreduce_bytes, a, sizeof a), p->replicas,
            p->replicas * tp->n_devices, c.per_domain);
    if (c.domains > 1)
        fprintf(out, ", then of %d link domains of %lld devices over the gateways, %.3f ms",
                c.domains, (long long)tp->target.link_domain_devices,
                td->allreduce_gateway_cycles / hz * 1e3);
    fprintf(out, "), %.1f%% of the host step\n",
            100.0 * td->allreduce_cycles * p->iterations / fmax(1.0, end));
}

static void print_simulated_step(const tg_program *p, FILE *out)
{
    const tg_tile_plan *tp = p->tile_plan;
    double end = simulated_end(p);
    if (end <= 0)
        return;
    double ms = end / tp->target.clock_hz * 1e3, copies = step_cycles(p, true);
    /* the pass cycles as if nothing ran beside the compute */
    double hidden = tp->target.io_tiles > 0 ? step_hidden(p) : 0;
    fprintf(out,
            "  simulated host step: %.0f cycles, %.3f ms (%.0f samples/s); copies (host "
            "streams, transfers, streaming memory) %.0f%% of the devices' pass cycles",
            end, ms, (double)p->samples_per_step / (ms / 1e3),
            100.0 * copies / fmax(1.0, step_cycles(p, false) + hidden));
    if (hidden > 0)
        fprintf(out, ", %.0f%% of them beside the compute on the I/O tiles",
                100.0 * hidden / fmax(1.0, copies));
    fprintf(out, "\n");
    print_allreduce(p, end, out);
}

static void print_tiles_text(const tg_program *p, FILE *out)
{
    const tg_tile_plan *tp = p->tile_plan;
    const tg_target_desc *t = &tp->target;
    char a[32], b[32];
    fprintf(out,
            "\ntarget %s: %d tiles per device, %s per tile (%s per device), %d workers per tile, "
            "%.2f GHz\n",
            t->name, t->tiles, tg_an_format(TG_AN_BYTES, (double)t->tile_memory, a, sizeof a),
            tg_an_format(TG_AN_BYTES, (double)t->tile_memory * t->tiles, b, sizeof b), t->workers,
            t->clock_hz / 1e9);
    for (int d = 0; d < tp->n_devices; d++) {
        const tg_tile_device *td = &tp->devices[d];
        const int64_t *row = &td->bytes[(size_t)td->max_tile * TG_TILE_CAT_COUNT];
        fprintf(out, "  device %d: max tile %d holds %s (%.0f%% of its memory)%s\n", d,
                td->max_tile, tg_an_format(TG_AN_BYTES, (double)td->max_bytes, a, sizeof a),
                100.0 * (double)td->max_bytes / (double)t->tile_memory,
                td->max_bytes > t->tile_memory ? "  OUT OF MEMORY" : "");
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
            fprintf(out, "    %-26s %12s on tile %d, %12s on all tiles\n",
                    tg_tile_cat_name((tg_tile_cat)c),
                    tg_an_format(TG_AN_BYTES, (double)row[c], a, sizeof a), td->max_tile,
                    tg_an_format(TG_AN_BYTES, (double)td->total[c], b, sizeof b));
        int counts[HIST_BINS];
        histogram(tp, d, counts);
        int64_t top = hist_top(tp, d);
        fprintf(out, "    tiles by memory:");
        for (int k = 0; k < HIST_BINS; k++)
            fprintf(out, "%s %s-%s: %d", k ? "," : "",
                    tg_an_format(TG_AN_BYTES, (double)top * k / HIST_BINS, a, sizeof a),
                    tg_an_format(TG_AN_BYTES, (double)top * (k + 1) / HIST_BINS, b, sizeof b),
                    counts[k]);
        fprintf(out, "\n    cycles:");
        for (int ph = 0; ph < 3; ph++)
            fprintf(out, "%s %s %.0f (%.3f ms, of which copies %.0f)", ph ? "," : "",
                    phase_names[ph], td->cycles[ph], td->cycles[ph] / t->clock_hz * 1e3,
                    td->copy_cycles[ph]);
        fprintf(out, " (forward and backward per micro-batch, update per weight update)\n");
        print_io_tiles(p, d, out);
    }
    print_simulated_step(p, out);
}

/* The simulated host step and the share of it the slowest all-reduce takes
 * (one per weight update), as the text's lines say them. */
static void print_step_json(const tg_program *p, FILE *out)
{
    const tg_tile_plan *tp = p->tile_plan;
    double end = simulated_end(p);
    if (end <= 0)
        return;
    double s = end / tp->target.clock_hz;
    double allreduce = tp->devices[slowest_allreduce(tp)].allreduce_cycles * p->iterations;
    fprintf(out,
            ",\"simulated_step\":{\"cycles\":%.0f,\"seconds\":%.9g,\"samples_per_second\":%.6g,"
            "\"replicas\":%d,\"allreduce_cycles\":%.0f,\"allreduce_share\":%.6g}",
            end, s, (double)p->samples_per_step / s, p->replicas, allreduce, allreduce / end);
}

static void print_tiles_json(const tg_program *p, FILE *out)
{
    const tg_tile_plan *tp = p->tile_plan;
    const tg_target_desc *t = &tp->target;
    fprintf(out,
            ",\"target\":{\"name\":\"%s\",\"tiles\":%d,\"memory_per_tile\":%lld,"
            "\"workers_per_tile\":%d,\"clock_hz\":%.0f},\"tiles\":[",
            t->name, t->tiles, (long long)t->tile_memory, t->workers, t->clock_hz);
    for (int d = 0; d < tp->n_devices; d++) {
        const tg_tile_device *td = &tp->devices[d];
        const int64_t *row = &td->bytes[(size_t)td->max_tile * TG_TILE_CAT_COUNT];
        fprintf(out,
                "%s{\"device\":%d,\"max_tile\":%d,\"max_tile_bytes\":%lld,\"fits\":%s,"
                "\"max_tile_memory\":{",
                d ? "," : "", d, td->max_tile, (long long)td->max_bytes,
                td->max_bytes <= t->tile_memory ? "true" : "false");
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
            fprintf(out, "%s\"%s\":%lld", c ? "," : "", tg_tile_cat_name((tg_tile_cat)c),
                    (long long)row[c]);
        fprintf(out, "},\"all_tiles_memory\":{");
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
            fprintf(out, "%s\"%s\":%lld", c ? "," : "", tg_tile_cat_name((tg_tile_cat)c),
                    (long long)td->total[c]);
        int counts[HIST_BINS];
        histogram(tp, d, counts);
        fprintf(out, "},\"histogram_bin_bytes\":%lld,\"histogram\":[",
                (long long)(hist_top(tp, d) / HIST_BINS));
        for (int k = 0; k < HIST_BINS; k++)
            fprintf(out, "%s%d", k ? "," : "", counts[k]);
        fprintf(out, "],\"cycles\":{");
        for (int ph = 0; ph < 3; ph++)
            fprintf(out, "%s\"%s\":%.0f", ph ? "," : "", phase_names[ph], td->cycles[ph]);
        fprintf(out, "},\"allreduce\":{\"bytes\":%.0f,\"cycles\":%.0f,\"gateway_cycles\":%.0f}}",
                td->allreduce_bytes, td->allreduce_cycles, td->allreduce_gateway_cycles);
    }
    fprintf(out, "]");
    print_step_json(p, out);
}

void tg_an_memory_from_program(const tg_program *p, tg_an_memory *out)
{
    out->n_devices = p->n_devices < TG_AN_MAX_DEVICES ? p->n_devices : TG_AN_MAX_DEVICES;
    for (int d = 0; d < out->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        tg_an_device_memory *m = &out->devices[d];
        m->region[TG_REGION_NONE] = NAN;
        for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++)
            m->region[r] = (double)dp->region_bytes[r];
        m->scratch_peak = (double)dp->scratch_peak;
        m->total = (double)dp->arena_bytes;
        m->offloaded = (double)dp->offloaded_bytes;
        m->weight_cache = (double)tg_program_kept_bytes(p, d);
        m->stash_depth = dp->stash_depth;
        m->flops = dp->flops[TG_PHASE_FORWARD] + dp->flops[TG_PHASE_BACKWARD];
    }
}

/* The memory tables `analyse memory` shows for the profile of this program. */
/* A phased program: each phase's memory on its device (one after another,
 * so a device needs its largest phase), and its streaming-memory traffic. */
static void phase_table(const tg_program *p, tg_an_view *v)
{
    static const char *const cols[] = {"phase", "device", "steps", "persistent", "activations peak",
                                       "total", "loaded", "stored"};
    static const tg_an_kind kinds[] = {TG_AN_ID,    TG_AN_ID,    TG_AN_COUNT, TG_AN_BYTES,
                                       TG_AN_BYTES, TG_AN_BYTES, TG_AN_BYTES, TG_AN_BYTES};
    size_t n = (size_t)p->n_phases + 1;
    tg_phase_memory *pm = tg_calloc(n * (size_t)p->n_devices, sizeof *pm);
    if (!pm)
        return;
    for (int d = 0; d < p->n_devices; d++)
        tg_program_phase_memory(p, d, pm + (size_t)d * n);
    tg_an_table *t = tg_an_table_add(v, "Memory per phase", 8, cols, kinds);
    size_t most = 0;
    int at = 0, at_device = 0;
    for (int k = 0; k < p->n_phases; k++) {
        int d = 0; /* the device whose steps run the phase */
        while (d + 1 < p->n_devices && pm[(size_t)d * n + k].steps == 0)
            d++;
        const tg_phase_memory *m = &pm[(size_t)d * n + k];
        size_t total = m->persistent + m->peak_activations;
        tg_an_row(t, (double)k, (double)d, (double)m->steps, (double)m->persistent,
                  (double)m->peak_activations, (double)total, (double)m->loaded, (double)m->stored);
        if (total > most)
            most = total, at = k, at_device = d;
    }
    char a[32];
    bool parallel = tg_program_parallel_phases(p);
    tg_an_note(v,
               "phases: %d %s %d device%s%s; the largest, phase %d on device %d, needs %s "
               "(loaded and stored: bytes each phase's steps move to and from streaming memory, "
               "once each; forward and backward per micro-batch)",
               p->n_phases, parallel ? "alternate over" : "run one after another on", p->n_devices,
               p->n_devices == 1 ? "" : "s",
               parallel ? " (ParallelIPU: one loads its next phase while the other computes)" : "",
               at, at_device, tg_an_format(TG_AN_BYTES, (double)most, a, sizeof a));
    tg_free(pm);
}

static void memory_view(const tg_program *p, tg_an_view *v)
{
    tg_an_memory *m = tg_calloc(1, sizeof *m);
    if (!m)
        return; /* the tables are missing from the output; nothing else is */
    tg_an_memory_from_program(p, m);
    tg_an_memory_tables(m, -1, v);
    tg_free(m);
    if (p->n_phases > 0)
        phase_table(p, v);
}

/* "16.16" from the storage types: 32, 16 or bf16 per side. */
static const char *precision_text(const tg_program *p, char *buf, size_t cap)
{
    const char *in = p->precision.input == TG_F16    ? "16"
                     : p->precision.input == TG_BF16 ? "bf16"
                                                     : "32";
    const char *mo = p->precision.model == TG_F16    ? "16"
                     : p->precision.model == TG_BF16 ? "bf16"
                                                     : "32";
    snprintf(buf, cap, "%s.%s", in, mo);
    return buf;
}

/* A pipeline schedule means nothing on one device (it was labelled
 * "sharded" for one model and "grouped" for another): say none. */
static const char *schedule_text(const tg_program *p)
{
    return p->n_devices == 1 ? "none (one device)" : tg_schedule_name(p->schedule.kind);
}

/* The threads per device and where the number came from; the warning when
 * the devices' threads exceed the cores (also on stderr, once, at compile). */
static void print_threads_text(const tg_program *p, FILE *out)
{
    int parties = p->n_devices * p->replicas;
    if (p->threads_free)
        fprintf(out,
                "threads: %d per device (threadsPerDevice -1: %d of %d usable cores free, %.1f "
                "busy, %.1f niced, over %d device%s)\n",
                p->n_threads, p->cpu.free, p->cpu.allowed, p->cpu.busy, p->cpu.niced, parties,
                parties == 1 ? "" : "s");
    else if (p->threads_auto)
        fprintf(out,
                "threads: %d per device (default: %d usable cores over %d device%s; now %d free, "
                "%.1f busy, %.1f niced)\n",
                p->n_threads, p->cpu.allowed, parties, parties == 1 ? "" : "s", p->cpu.free,
                p->cpu.busy, p->cpu.niced);
    else
        fprintf(out, "threads: %d per device (threadsPerDevice; %d usable cores)\n", p->n_threads,
                p->cpu.allowed);
    if (p->threads_warning[0])
        fprintf(out, "warning: %s\n", p->threads_warning);
    fprintf(out, "\n");
}

void tg_report_plan_text(const tg_compiled *c, const char *model, double ms, FILE *out)
{
    const tg_program *p = tg_compiled_program(c);
    char a[32], b[32], prec[16];
    fprintf(out,
            "%s: %s program, %d device%s x %d replica%s, %d micro-batch%s per update, schedule %s, "
            "precision %s, compiled in %.1f ms\n",
            model, p->training ? "training" : "inference", p->n_devices,
            p->n_devices == 1 ? "" : "s", p->replicas, p->replicas == 1 ? "" : "s",
            p->micro_batches, p->micro_batches == 1 ? "" : "es", schedule_text(p),
            precision_text(p, prec, sizeof prec), ms);
    /* the split depends on the strategy too, so it is said before the plan */
    if (p->auto_stages[0])
        fprintf(out, "%s auto: %s (%d devices, %s)\n",
                strchr(p->auto_stages, '|') ? "stages" : "split", p->auto_stages, p->n_devices,
                p->config.pipeline.strategy);
    if (p->auto_phases[0])
        fprintf(out, "phases auto: %s (%d device%s, --offload %s)\n  %s\n", p->auto_phases,
                p->n_devices, p->n_devices == 1 ? "" : "s", p->auto_offload, p->auto_phases_why);
    print_threads_text(p, out);
    tg_an_view v = {.name = "memory"};
    memory_view(p, &v);
    tg_an_print_text(&v, out);
    tg_an_view_free(&v);
    fprintf(out, "\npeak liveness:\n");
    for (int d = 0; d < p->n_devices; d++) {
        int at;
        int64_t live = peak_live(p, d, &at);
        fprintf(out, "  device %d: %s of activations live at step %d (%s)\n", d,
                tg_an_format(TG_AN_BYTES, (double)live, b, sizeof b), at, step_name(p, d, at));
    }
    fprintf(out, "\nall devices of one replica: %s; %d replica%s: %s\n",
            tg_an_format(TG_AN_BYTES, (double)p->arena_bytes, a, sizeof a), p->replicas,
            p->replicas == 1 ? "" : "s",
            tg_an_format(TG_AN_BYTES, (double)p->arena_bytes * p->replicas, b, sizeof b));
    if (p->tile_plan)
        print_tiles_text(p, out);
}

static int print_predictions_json(const tg_graph *g, const tg_options *o, const tg_program *p,
                                  const tg_report_prediction_args *pa, FILE *out);

/* ,"memory_view":{...}: the memory tables as `analyse memory --json` gives
 * them for this program's profile. */
static void print_memory_json(const tg_program *p, FILE *out)
{
    tg_an_view v = {.name = "memory"};
    memory_view(p, &v);
    char *text = NULL;
    size_t len = 0;
    if (tg_an_view_json(&v, &text, &len) == TG_OK)
        fprintf(out, ",\"memory_view\":%.*s", (int)len, text);
    tg_free(text);
    tg_an_view_free(&v);
}

int tg_report_plan_json(const tg_compiled *c, const char *model, double ms, const tg_options *o,
                        const tg_report_prediction_args *pa, FILE *out)
{
    const tg_program *p = tg_compiled_program(c);
    char prec[16];
    fprintf(out,
            "{\"model\":\"%s\",\"program\":\"%s\",\"devices\":%d,\"replicas\":%d,"
            "\"micro_batches\":%d,\"iterations\":%d,\"schedule\":\"%s\",\"precision\":\"%s\","
            "\"compile_ms\":%.3f,\"arena_bytes\":%zu,",
            model, p->training ? "training" : "inference", p->n_devices, p->replicas,
            p->micro_batches, p->iterations, p->n_devices == 1 ? "none" : schedule_text(p),
            precision_text(p, prec, sizeof prec), ms, p->arena_bytes);
    fprintf(out,
            "\"threads\":{\"per_device\":%d,\"default\":%s,\"free_cores\":%s,"
            "\"cores_allowed\":%d,\"cores_free\":%d,\"cores_busy\":%.2f,\"cores_niced\":%.2f,"
            "\"warning\":",
            p->n_threads, p->threads_auto ? "true" : "false", p->threads_free ? "true" : "false",
            p->cpu.allowed, p->cpu.free, p->cpu.busy, p->cpu.niced);
    if (p->threads_warning[0])
        fprintf(out, "\"%s\"},\"per_device\":[", p->threads_warning); /* no quotes or backslashes */
    else
        fprintf(out, "null},\"per_device\":[");
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        int at;
        int64_t live = peak_live(p, d, &at);
        fprintf(
            out,
            "%s{\"device\":%d,\"total_bytes\":%zu,\"stash_depth\":%d,\"scratch_peak_bytes\":%zu,"
            "\"offloaded_bytes\":%zu,\"peak_live_bytes\":%lld,\"peak_live_step\":%d,"
            "\"memory\":{",
            d ? "," : "", d, dp->arena_bytes, dp->stash_depth, dp->scratch_peak,
            dp->offloaded_bytes, (long long)live, at);
        for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++)
            fprintf(out, "%s\"%s\":%zu", r > TG_REGION_PARAM ? "," : "",
                    tg_region_name((tg_region)r), dp->region_bytes[r]);
        fprintf(out, "}}");
    }
    fprintf(out, "]");
    print_memory_json(p, out);
    if (p->tile_plan)
        print_tiles_json(p, out);
    fprintf(out, ",\"auto_stages\":\"%s\"", p->auto_stages); /* "": not auto */
    /* "": not auto; the why names tensors and plans in plain words, no quotes */
    fprintf(out, ",\"auto_phases\":\"%s\",\"auto_offload\":\"%s\"", p->auto_phases,
            p->auto_offload);
    int r = pa->wanted ? print_predictions_json(p->graph, o, p, pa, out) : 0;
    fprintf(out, "}\n");
    if (r)
        fprintf(stderr, "tilegraph compile: predicting stages: %s\n", tg_error_message());
    return r;
}

/* ---- predictions: --stages auto, --compare-stages, --compare-schedules ---- */

static void print_split_text(const char *title, const tg_split_prediction *sp,
                             const tg_report_prediction_args *pa, const tg_program *p,
                             bool compiled, FILE *out)
{
    char a[32];
    fprintf(out, "%s: %s \"%s\"%s\n", title, sp->blocks ? "--stages" : "--split", sp->spec,
            sp->fits ? "" : "  (over memoryPerDevice by the estimate)");
    for (int k = 0; k < sp->n_stages; k++) {
        fprintf(out,
                "  stage %d: %8.3f ms per micro-batch (forward %.3f, backward %.3f, copies %.3f), "
                "busy %3.0f%%, memory %s (estimate)",
                k, sp->stage_seconds[k] * 1e3, sp->forward[k] * 1e3, sp->backward[k] * 1e3,
                sp->copies[k] * 1e3, 100 * sp->busy[k],
                tg_an_format(TG_AN_BYTES, sp->memory_bytes[k], a, sizeof a));
        if (compiled && k < p->n_devices)
            fprintf(out, ", %s planned",
                    tg_an_format(TG_AN_BYTES, (double)p->devices[k].arena_bytes, a, sizeof a));
        fprintf(out, "\n");
    }
    fprintf(out, "  predicted host step %.3f ms: %.0f samples/s\n", sp->step_seconds * 1e3,
            sp->step_seconds > 0 ? (double)pa->batch * sp->micro_batches / sp->step_seconds : 0);
}

static void print_schedules_text(const tg_schedule_prediction *sp, int n, int n_devices, FILE *out)
{
    fprintf(out, "%-12s %12s %8s", "schedule", "step (ms)", "bubble");
    for (int d = 0; d < n_devices; d++)
        fprintf(out, "  busy d%-2d stash d%-2d", d, d);
    fprintf(out, "\n");
    for (int k = 0; k < n; k++) {
        fprintf(out, "%-12s %12.3f %7.1f%%", sp[k].name, sp[k].step_seconds * 1e3,
                100 * sp[k].bubble);
        for (int d = 0; d < n_devices; d++)
            fprintf(out, "  %6.0f%% %9d", 100 * sp[k].busy[d], sp[k].peak_stash[d]);
        fprintf(out, "\n");
    }
}

/* The automatic split, the user's, and the schedules, as text. */
int tg_report_predictions(const tg_graph *g, const tg_options *o, const tg_compiled *c,
                          const tg_report_prediction_args *pa, bool auto_compiled, FILE *out)
{
    const tg_program *p = tg_compiled_program(c);
    tg_split_prediction best, mine;
    int n = p->n_devices;
    if (tg_predict_split(g, o, n, "auto", &best) != TG_OK) {
        fprintf(stderr, "tilegraph compile: predicting stages: %s\n", tg_error_message());
        return 1;
    }
    fprintf(out, "\npredicted by the cost model (%s):\n",
            best.cycle_model  ? "the target's cycle model"
            : best.calibrated ? "the program's kernels timed on this machine, rates for the rest"
                              : "default rates, TILEGRAPH_CALIBRATION=off");
    print_split_text(auto_compiled ? "chosen split" : "best split", &best, pa, p, auto_compiled,
                     out);
    if (auto_compiled && strcmp(best.spec, p->auto_stages) != 0)
        fprintf(out,
                "  (the program was compiled with \"%s\": the plan refused the estimate's choice "
                "and the search ran again with a larger autoStages.memoryMargin)\n",
                p->auto_stages);
    if (pa->compare) {
        if (tg_predict_split(g, o, n, pa->compare, &mine) != TG_OK) {
            fprintf(stderr, "tilegraph compile: --compare-stages: %s\n", tg_error_message());
            return 2;
        }
        print_split_text("your split", &mine, pa, p, false, out);
        if (mine.step_seconds > 0 && best.step_seconds > 0)
            fprintf(out, "  the %s split is %.2fx the speed of yours (predicted)\n",
                    auto_compiled ? "chosen" : "best", mine.step_seconds / best.step_seconds);
    }
    if (pa->schedules) {
        tg_schedule_prediction sched[16];
        int ns = 0;
        if (tg_predict_schedules(g, o, n, pa->compare ? pa->compare : "auto", sched, 16, &ns) !=
            TG_OK) {
            fprintf(stderr, "tilegraph compile: --compare-schedules: %s\n", tg_error_message());
            return 1;
        }
        fprintf(out, "\nschedules over %s \"%s\" (predicted):\n",
                pa->compare ? "your split"
                            : (auto_compiled ? "the chosen split" : "the best split"),
                pa->compare ? pa->compare : best.spec);
        print_schedules_text(sched, ns, n, out);
    }
    return 0;
}

static void print_split_json(const char *key, const tg_split_prediction *sp, int64_t batch,
                             FILE *out)
{
    fprintf(out,
            ",\"%s\":{\"spec\":\"%s\",\"form\":\"%s\",\"fits\":%s,\"step_ms\":%.6f,"
            "\"samples_per_s\":%.3f,\"stages\":[",
            key, sp->spec, sp->blocks ? "stages" : "split", sp->fits ? "true" : "false",
            sp->step_seconds * 1e3,
            sp->step_seconds > 0 ? (double)batch * sp->micro_batches / sp->step_seconds : 0);
    for (int k = 0; k < sp->n_stages; k++)
        fprintf(out,
                "%s{\"ms\":%.6f,\"forward_ms\":%.6f,\"backward_ms\":%.6f,\"copies_ms\":%.6f,"
                "\"busy\":%.4f,\"memory_bytes\":%.0f}",
                k ? "," : "", sp->stage_seconds[k] * 1e3, sp->forward[k] * 1e3,
                sp->backward[k] * 1e3, sp->copies[k] * 1e3, sp->busy[k], sp->memory_bytes[k]);
    fprintf(out, "]}");
}

static int print_predictions_json(const tg_graph *g, const tg_options *o, const tg_program *p,
                                  const tg_report_prediction_args *pa, FILE *out)
{
    tg_split_prediction sp;
    if (tg_predict_split(g, o, p->n_devices, "auto", &sp) != TG_OK)
        return 1;
    print_split_json("predicted_best", &sp, pa->batch, out);
    if (pa->compare) {
        if (tg_predict_split(g, o, p->n_devices, pa->compare, &sp) != TG_OK)
            return 2;
        print_split_json("predicted_compare", &sp, pa->batch, out);
    }
    if (pa->schedules) {
        tg_schedule_prediction sched[16];
        int ns = 0;
        if (tg_predict_schedules(g, o, p->n_devices, pa->compare ? pa->compare : "auto", sched, 16,
                                 &ns) != TG_OK)
            return 1;
        fprintf(out, ",\"predicted_schedules\":[");
        for (int k = 0; k < ns; k++) {
            fprintf(out, "%s{\"schedule\":\"%s\",\"step_ms\":%.6f,\"bubble\":%.4f,\"busy\":[",
                    k ? "," : "", sched[k].name, sched[k].step_seconds * 1e3, sched[k].bubble);
            for (int d = 0; d < p->n_devices; d++)
                fprintf(out, "%s%.4f", d ? "," : "", sched[k].busy[d]);
            fprintf(out, "],\"peak_stash\":[");
            for (int d = 0; d < p->n_devices; d++)
                fprintf(out, "%s%d", d ? "," : "", sched[k].peak_stash[d]);
            fprintf(out, "]}");
        }
        fprintf(out, "]");
    }
    return 0;
}
