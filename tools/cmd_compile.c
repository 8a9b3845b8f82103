/* tools/cmd_compile.c - `tilegraph compile`: compile a model for the devices
 * and print the plan, without running anything: per device the planned
 * memory by category, the peak of live activations, the stash depth, and the
 * FLOPs per micro-batch. "Will it fit" is answered here, in milliseconds. */
#include "cli.h"
#include "device_flags.h"

#include "compile/program.h"
#include "core/error.h"
#include "target/target.h"
#include "analyse/remedies.h"
#include "tilegraph/models.h"
#include "tilegraph/predict.h"

#include <string.h>

static int64_t peak_live(const tg_program *p, int d, int *at)
{
    const tg_device_program *dp = &p->devices[d];
    int n = dp->n_steps[0] + dp->n_steps[1] + dp->n_steps[2];
    int64_t best = 0;
    *at = 0;
    for (int s = 0; s < n; s++) {
        int64_t live = 0;
        for (int i = 0; i < p->n_buffers; i++) {
            const tg_buffer *b = &p->buffers[i];
            if (b->device == d && b->region == TG_REGION_ACTIVATION && b->first <= s &&
                s <= b->last)
                live += (int64_t)b->bytes;
        }
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

static void print_tiles_text(const tg_program *p)
{
    const tg_tile_plan *tp = p->tile_plan;
    const tg_target_desc *t = &tp->target;
    char a[32], b[32];
    printf("\ntarget %s: %d tiles per device, %s per tile (%s per device), %d workers per tile, "
           "%.2f GHz\n",
           t->name, t->tiles, cli_bytes((double)t->tile_memory, a, sizeof a),
           cli_bytes((double)t->tile_memory * t->tiles, b, sizeof b), t->workers,
           t->clock_hz / 1e9);
    for (int d = 0; d < tp->n_devices; d++) {
        const tg_tile_device *td = &tp->devices[d];
        const int64_t *row = &td->bytes[(size_t)td->max_tile * TG_TILE_CAT_COUNT];
        printf("  device %d: max tile %d holds %s (%.0f%% of its memory)%s\n", d, td->max_tile,
               cli_bytes((double)td->max_bytes, a, sizeof a),
               100.0 * (double)td->max_bytes / (double)t->tile_memory,
               td->max_bytes > t->tile_memory ? "  OUT OF MEMORY" : "");
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
            printf("    %-26s %12s on tile %d, %12s on all tiles\n",
                   tg_tile_cat_name((tg_tile_cat)c), cli_bytes((double)row[c], a, sizeof a),
                   td->max_tile, cli_bytes((double)td->total[c], b, sizeof b));
        int counts[HIST_BINS];
        histogram(tp, d, counts);
        int64_t top = hist_top(tp, d);
        printf("    tiles by memory:");
        for (int k = 0; k < HIST_BINS; k++)
            printf("%s %s-%s: %d", k ? "," : "",
                   cli_bytes((double)top * k / HIST_BINS, a, sizeof a),
                   cli_bytes((double)top * (k + 1) / HIST_BINS, b, sizeof b), counts[k]);
        printf("\n    cycles:");
        for (int ph = 0; ph < 3; ph++)
            printf("%s %s %.0f (%.3f ms, of which copies %.0f)", ph ? "," : "", phase_names[ph],
                   td->cycles[ph], td->cycles[ph] / t->clock_hz * 1e3, td->copy_cycles[ph]);
        printf(" (forward and backward per micro-batch, update per weight update)\n");
    }
}

static void print_tiles_json(const tg_program *p)
{
    const tg_tile_plan *tp = p->tile_plan;
    const tg_target_desc *t = &tp->target;
    printf(",\"target\":{\"name\":\"%s\",\"tiles\":%d,\"memory_per_tile\":%lld,"
           "\"workers_per_tile\":%d,\"clock_hz\":%.0f},\"tiles\":[",
           t->name, t->tiles, (long long)t->tile_memory, t->workers, t->clock_hz);
    for (int d = 0; d < tp->n_devices; d++) {
        const tg_tile_device *td = &tp->devices[d];
        const int64_t *row = &td->bytes[(size_t)td->max_tile * TG_TILE_CAT_COUNT];
        printf("%s{\"device\":%d,\"max_tile\":%d,\"max_tile_bytes\":%lld,\"fits\":%s,"
               "\"max_tile_memory\":{",
               d ? "," : "", d, td->max_tile, (long long)td->max_bytes,
               td->max_bytes <= t->tile_memory ? "true" : "false");
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
            printf("%s\"%s\":%lld", c ? "," : "", tg_tile_cat_name((tg_tile_cat)c),
                   (long long)row[c]);
        printf("},\"all_tiles_memory\":{");
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
            printf("%s\"%s\":%lld", c ? "," : "", tg_tile_cat_name((tg_tile_cat)c),
                   (long long)td->total[c]);
        int counts[HIST_BINS];
        histogram(tp, d, counts);
        printf("},\"histogram_bin_bytes\":%lld,\"histogram\":[",
               (long long)(hist_top(tp, d) / HIST_BINS));
        for (int k = 0; k < HIST_BINS; k++)
            printf("%s%d", k ? "," : "", counts[k]);
        printf("],\"cycles\":{");
        for (int ph = 0; ph < 3; ph++)
            printf("%s\"%s\":%.0f", ph ? "," : "", phase_names[ph], td->cycles[ph]);
        printf("}}");
    }
    printf("]");
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
static void print_threads_text(const tg_program *p)
{
    if (p->threads_auto)
        printf("threads: %d per device (default: %d of %d usable cores free, %.1f busy, %.1f "
               "niced, over %d device%s)\n",
               p->n_threads, p->cpu.free, p->cpu.allowed, p->cpu.busy, p->cpu.niced,
               p->n_devices * p->replicas, p->n_devices * p->replicas == 1 ? "" : "s");
    else
        printf("threads: %d per device (threadsPerDevice; %d usable cores)\n", p->n_threads,
               p->cpu.allowed);
    if (p->threads_warning[0])
        printf("warning: %s\n", p->threads_warning);
    printf("\n");
}

static void print_text(const tg_program *p, const char *model, double ms)
{
    char a[32], b[32], prec[16];
    printf("%s: %s program, %d device%s x %d replica%s, %d micro-batch%s per update, schedule %s, "
           "precision %s, compiled in %.1f ms\n",
           model, p->training ? "training" : "inference", p->n_devices,
           p->n_devices == 1 ? "" : "s", p->replicas, p->replicas == 1 ? "" : "s", p->micro_batches,
           p->micro_batches == 1 ? "" : "es", schedule_text(p),
           precision_text(p, prec, sizeof prec), ms);
    print_threads_text(p);
    printf("%-28s", "memory");
    for (int d = 0; d < p->n_devices; d++) {
        char h[16];
        snprintf(h, sizeof h, "device %d", d);
        printf(" %12s", h);
    }
    printf("\n");
    for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++) {
        printf("%-28s", tg_region_name((tg_region)r));
        for (int d = 0; d < p->n_devices; d++)
            printf(" %12s", cli_bytes((double)p->devices[d].region_bytes[r], a, sizeof a));
        printf("\n");
    }
    printf("%-28s", "  of which kernel scratch");
    for (int d = 0; d < p->n_devices; d++)
        printf(" %12s", cli_bytes((double)p->devices[d].scratch_peak, a, sizeof a));
    printf("\n%-28s", "total");
    for (int d = 0; d < p->n_devices; d++)
        printf(" %12s", cli_bytes((double)p->devices[d].arena_bytes, a, sizeof a));
    printf("\n%-28s", "offloaded to host");
    for (int d = 0; d < p->n_devices; d++)
        printf(" %12s", cli_bytes((double)p->devices[d].offloaded_bytes, a, sizeof a));
    printf("\n%-28s", "stash depth (slots)");
    for (int d = 0; d < p->n_devices; d++)
        printf(" %12d", p->devices[d].stash_depth);
    printf("\n%-28s", "MFLOP per micro-batch");
    for (int d = 0; d < p->n_devices; d++)
        printf(" %12.1f", (p->devices[d].flops[0] + p->devices[d].flops[1]) / 1e6);
    printf("\n\npeak liveness:\n");
    for (int d = 0; d < p->n_devices; d++) {
        int at;
        int64_t live = peak_live(p, d, &at);
        printf("  device %d: %s of activations live at step %d (%s)\n", d,
               cli_bytes((double)live, b, sizeof b), at, step_name(p, d, at));
    }
    printf("\nall devices of one replica: %s; %d replica%s: %s\n",
           cli_bytes((double)p->arena_bytes, a, sizeof a), p->replicas, p->replicas == 1 ? "" : "s",
           cli_bytes((double)p->arena_bytes * p->replicas, b, sizeof b));
    if (p->tile_plan)
        print_tiles_text(p);
}

typedef struct prediction_args {
    const char *compare; /* --compare-stages SPEC */
    bool schedules;      /* --compare-schedules */
    bool wanted;         /* anything to predict (auto stages or a flag above) */
    int64_t batch;
} prediction_args;
static int print_predictions_json(const tg_graph *g, const tg_options *o, const tg_program *p,
                                  const prediction_args *pa);

static int print_json(const tg_program *p, const char *model, double ms, const tg_options *o,
                      const prediction_args *pa)
{
    char prec[16];
    printf("{\"model\":\"%s\",\"program\":\"%s\",\"devices\":%d,\"replicas\":%d,"
           "\"micro_batches\":%d,\"iterations\":%d,\"schedule\":\"%s\",\"precision\":\"%s\","
           "\"compile_ms\":%.3f,\"arena_bytes\":%zu,",
           model, p->training ? "training" : "inference", p->n_devices, p->replicas,
           p->micro_batches, p->iterations, p->n_devices == 1 ? "none" : schedule_text(p),
           precision_text(p, prec, sizeof prec), ms, p->arena_bytes);
    printf("\"threads\":{\"per_device\":%d,\"default\":%s,\"cores_allowed\":%d,"
           "\"cores_free\":%d,\"cores_busy\":%.2f,\"cores_niced\":%.2f,\"warning\":",
           p->n_threads, p->threads_auto ? "true" : "false", p->cpu.allowed, p->cpu.free,
           p->cpu.busy, p->cpu.niced);
    if (p->threads_warning[0])
        printf("\"%s\"},\"per_device\":[", p->threads_warning); /* no quotes or backslashes */
    else
        printf("null},\"per_device\":[");
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        int at;
        int64_t live = peak_live(p, d, &at);
        printf("%s{\"device\":%d,\"total_bytes\":%zu,\"stash_depth\":%d,\"scratch_peak_bytes\":%zu,"
               "\"offloaded_bytes\":%zu,\"peak_live_bytes\":%lld,\"peak_live_step\":%d,"
               "\"memory\":{",
               d ? "," : "", d, dp->arena_bytes, dp->stash_depth, dp->scratch_peak,
               dp->offloaded_bytes, (long long)live, at);
        for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++)
            printf("%s\"%s\":%zu", r > TG_REGION_PARAM ? "," : "", tg_region_name((tg_region)r),
                   dp->region_bytes[r]);
        printf("}}");
    }
    printf("]");
    if (p->tile_plan)
        print_tiles_json(p);
    printf(",\"auto_stages\":\"%s\"", p->auto_stages); /* "": not auto */
    int r = pa->wanted ? print_predictions_json(p->graph, o, p, pa) : 0;
    printf("}\n");
    if (r)
        fprintf(stderr, "tilegraph compile: predicting stages: %s\n", tg_error_message());
    return r;
}

/* ---- predictions: --stages auto, --compare-stages, --compare-schedules ---- */

static void print_split_text(const char *title, const tg_split_prediction *sp,
                             const prediction_args *pa, const tg_program *p, bool compiled)
{
    char a[32];
    printf("%s: %s \"%s\"%s\n", title, sp->blocks ? "--stages" : "--split", sp->spec,
           sp->fits ? "" : "  (over memoryPerDevice by the estimate)");
    for (int k = 0; k < sp->n_stages; k++) {
        printf("  stage %d: %8.3f ms per micro-batch (forward %.3f, backward %.3f, copies %.3f), "
               "busy %3.0f%%, memory %s (estimate)",
               k, sp->stage_seconds[k] * 1e3, sp->forward[k] * 1e3, sp->backward[k] * 1e3,
               sp->copies[k] * 1e3, 100 * sp->busy[k], cli_bytes(sp->memory_bytes[k], a, sizeof a));
        if (compiled && k < p->n_devices)
            printf(", %s planned", cli_bytes((double)p->devices[k].arena_bytes, a, sizeof a));
        printf("\n");
    }
    printf("  predicted host step %.3f ms: %.0f samples/s\n", sp->step_seconds * 1e3,
           sp->step_seconds > 0 ? (double)pa->batch * sp->micro_batches / sp->step_seconds : 0);
}

static void print_schedules_text(const tg_schedule_prediction *sp, int n, int n_devices)
{
    printf("%-12s %12s %8s", "schedule", "step (ms)", "bubble");
    for (int d = 0; d < n_devices; d++)
        printf("  busy d%-2d stash d%-2d", d, d);
    printf("\n");
    for (int k = 0; k < n; k++) {
        printf("%-12s %12.3f %7.1f%%", sp[k].name, sp[k].step_seconds * 1e3, 100 * sp[k].bubble);
        for (int d = 0; d < n_devices; d++)
            printf("  %6.0f%% %9d", 100 * sp[k].busy[d], sp[k].peak_stash[d]);
        printf("\n");
    }
}

/* The automatic split, the user's, and the schedules, as text. */
static int print_predictions(const tg_graph *g, const tg_options *o, const tg_program *p,
                             const prediction_args *pa, bool auto_compiled)
{
    tg_split_prediction best, mine;
    int n = p->n_devices;
    if (tg_predict_split(g, o, n, "auto", &best) != TG_OK) {
        fprintf(stderr, "tilegraph compile: predicting stages: %s\n", tg_error_message());
        return 1;
    }
    printf("\npredicted by the cost model (%s):\n",
           best.cycle_model  ? "the target's cycle model"
           : best.calibrated ? "this machine's rates"
                             : "default rates, TILEGRAPH_CALIBRATION=off");
    print_split_text(auto_compiled ? "chosen split" : "best split", &best, pa, p, auto_compiled);
    if (auto_compiled && strcmp(best.spec, p->auto_stages) != 0)
        printf("  (the program was compiled with \"%s\": the plan refused the estimate's choice "
               "and the search ran again with a larger autoStages.memoryMargin)\n",
               p->auto_stages);
    if (pa->compare) {
        if (tg_predict_split(g, o, n, pa->compare, &mine) != TG_OK) {
            fprintf(stderr, "tilegraph compile: --compare-stages: %s\n", tg_error_message());
            return 2;
        }
        print_split_text("your split", &mine, pa, p, false);
        if (mine.step_seconds > 0 && best.step_seconds > 0)
            printf("  the %s split is %.2fx the speed of yours (predicted)\n",
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
        printf("\nschedules over %s \"%s\" (predicted):\n",
               pa->compare ? "your split" : (auto_compiled ? "the chosen split" : "the best split"),
               pa->compare ? pa->compare : best.spec);
        print_schedules_text(sched, ns, n);
    }
    return 0;
}

static void print_split_json(const char *key, const tg_split_prediction *sp, int64_t batch)
{
    printf(",\"%s\":{\"spec\":\"%s\",\"form\":\"%s\",\"fits\":%s,\"step_ms\":%.6f,"
           "\"samples_per_s\":%.3f,\"stages\":[",
           key, sp->spec, sp->blocks ? "stages" : "split", sp->fits ? "true" : "false",
           sp->step_seconds * 1e3,
           sp->step_seconds > 0 ? (double)batch * sp->micro_batches / sp->step_seconds : 0);
    for (int k = 0; k < sp->n_stages; k++)
        printf("%s{\"ms\":%.6f,\"forward_ms\":%.6f,\"backward_ms\":%.6f,\"copies_ms\":%.6f,"
               "\"busy\":%.4f,\"memory_bytes\":%.0f}",
               k ? "," : "", sp->stage_seconds[k] * 1e3, sp->forward[k] * 1e3,
               sp->backward[k] * 1e3, sp->copies[k] * 1e3, sp->busy[k], sp->memory_bytes[k]);
    printf("]}");
}

static int print_predictions_json(const tg_graph *g, const tg_options *o, const tg_program *p,
                                  const prediction_args *pa)
{
    tg_split_prediction sp;
    if (tg_predict_split(g, o, p->n_devices, "auto", &sp) != TG_OK)
        return 1;
    print_split_json("predicted_best", &sp, pa->batch);
    if (pa->compare) {
        if (tg_predict_split(g, o, p->n_devices, pa->compare, &sp) != TG_OK)
            return 2;
        print_split_json("predicted_compare", &sp, pa->batch);
    }
    if (pa->schedules) {
        tg_schedule_prediction sched[16];
        int ns = 0;
        if (tg_predict_schedules(g, o, p->n_devices, pa->compare ? pa->compare : "auto", sched, 16,
                                 &ns) != TG_OK)
            return 1;
        printf(",\"predicted_schedules\":[");
        for (int k = 0; k < ns; k++) {
            printf("%s{\"schedule\":\"%s\",\"step_ms\":%.6f,\"bubble\":%.4f,\"busy\":[",
                   k ? "," : "", sched[k].name, sched[k].step_seconds * 1e3, sched[k].bubble);
            for (int d = 0; d < p->n_devices; d++)
                printf("%s%.4f", d ? "," : "", sched[k].busy[d]);
            printf("],\"peak_stash\":[");
            for (int d = 0; d < p->n_devices; d++)
                printf("%s%d", d ? "," : "", sched[k].peak_stash[d]);
            printf("]}");
        }
        printf("]");
    }
    return 0;
}

/* A plan over its capacity (not a failed allocation of this process): the
 * planner's message is the one that offers debug.allowOutOfMemory. */
static bool is_over_capacity(tg_status s)
{
    return s == TG_ERR_NOMEM && strstr(tg_error_message(), "debug.allowOutOfMemory") != NULL;
}

int cmd_compile(int argc, char **argv)
{
    const char *model = "mnist-pipeline", *optimizer = "adamw", *input = NULL, *stem = NULL;
    const char *target = NULL, *target_desc = NULL, *save_exe = NULL;
    int64_t batch = 40, classes = 0;
    bool inference = false, json = false, insights = false, eight_bit = false;
    device_args dev;
    prediction_args pa = {0};
    device_args_defaults(&dev);
    cli_flag flags[64] = {
        {"--model", CLI_STRING, &model, "NAME", "model from the zoo, or an ONNX file (FILE.onnx)",
         1, 0},
        {"--batch-size", CLI_INT, &batch, "N", "samples per micro-batch", 1, 1e6},
        {"--optimizer", CLI_STRING, &optimizer, "NAME",
         "sgd, adam, adamw or lamb (its state is planned)", 1, 0},
        {"--inference", CLI_BOOL, &inference, NULL, "compile the inference program", 1, 0},
        {"--eight-bit-io", CLI_BOOL, &eight_bit, NULL,
         "u8 images in the host stream, normalised on the device", 1, 0},
        {"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0},
        {"--input", CLI_STRING, &input, "CxHxW", "input image shape (models that take any)", 1, 0},
        {"--classes", CLI_INT, &classes, "N", "class count (models that take any)", 1, 1e6},
        {"--stem", CLI_STRING, &stem, "KIND",
         "ResNets: imagenet (7x7/2 conv + pool), cifar (3x3/1) or auto (by image size)", 1, 0},
        {"--target", CLI_STRING, &target, "NAME", "cpu or mk2 (the simulated tile processor)", 1,
         0},
        {"--target-description", CLI_STRING, &target_desc, "FILE",
         "with --target mk2: a JSON file describing another tile processor", 1, 0},
        {"--insights", CLI_BOOL, &insights, NULL,
         "quantify memory remedies (shown anyway when over or near capacity)", 1, 0},
        {"--compare-stages", CLI_STRING, &pa.compare, "SPEC",
         "predict this split (\"B1|B2,B3,B4\" or split points \"layer2.0,layer4.0\") beside the "
         "best one the cost model finds",
         1, 0},
        {"--compare-schedules", CLI_BOOL, &pa.schedules, NULL,
         "predict every pipeline schedule over the split: host step, bubble, busy, stash", 1, 0},
        {"--save-executable", CLI_STRING, &save_exe, "FILE",
         "write the compiled program to FILE, for train --executable (docs/executable-cache.md)", 1,
         0},
    };
    int n = 15 + device_flags(&dev, flags + 15);
    cli_command cmd = {"compile",
                       "Compile a model for the devices and print its memory plan.",
                       "tilegraph compile --model NAME [--batch-size N] [device options]",
                       "Nothing runs: this shows what a run would hold on each device.\n"
                       "With --profile or --profile-dir DIR the plan is written as a graph "
                       "profile\n(DIR/training/profile.sqlite) with the remedies printed, for "
                       "`tilegraph analyse`\nand `tilegraph report`; a plan out of memory is "
                       "written as re-planned.\n"
                       "With --stages auto (or --split auto) the cost model chooses the split "
                       "over --devices N and\nits predicted stage times are shown; "
                       "--compare-stages and --compare-schedules add predictions.\n"
                       "Example:\n  tilegraph compile --model mnist-pipeline --strategy pipelined "
                       "--gradient-accumulation 10\n"
                       "  tilegraph compile --model mnist-pipeline --stages auto --devices 2 "
                       "--gradient-accumulation 16 --compare-stages \"B1,B2|B3,B4\" "
                       "--compare-schedules",
                       flags,
                       n};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    /* PopVision's graph profile is written at compile time: so is ours */
    bool profile = dev.profile || dev.profile_dir;
    const tg_model_spec *m = NULL;
    int kind = tg_optimizer_parse(optimizer);
    if (kind < 0 || tg_model_open(model, TG_LOSS_CROSS_ENTROPY, &m) != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s\n",
                kind < 0 ? "unknown optimizer (sgd, adam, adamw or lamb)" : tg_error_message());
        return 1;
    }
    tg_model_input in = tg_model_default_input(m);
    if (input && tg_model_input_parse(input, &in) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --input: %s\n", tg_error_message());
        tg_model_close(m);
        return 2;
    }
    if (classes > 0)
        in.classes = (int)classes;
    in.eight_bit = eight_bit;
    if (stem && tg_model_stem_parse(stem, &in) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --stem: %s\n", tg_error_message());
        tg_model_close(m);
        return 2;
    }
    tg_options *o = device_options(&dev, "compile", inference);
    if (!o) {
        tg_model_close(m);
        return 1;
    }
    if ((target && tg_options_set(o, "target", target) != TG_OK) ||
        (target_desc && tg_options_set(o, "targetDescription", target_desc) != TG_OK)) {
        fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
        tg_options_destroy(o);
        tg_model_close(m);
        return 2;
    }
    tg_optimizer opt = kind == TG_OPT_SGD     ? tg_optimizer_sgd(0.01f, 0.9f)
                       : kind == TG_OPT_ADAM  ? tg_optimizer_adam(0.001f)
                       : kind == TG_OPT_ADAMW ? tg_optimizer_adamw(0.001f)
                                              : tg_optimizer_lamb(0.001f);
    pa.batch = batch;
    tg_model_graph mg;
    tg_program *p = NULL;
    double t0 = cli_now();
    tg_status s = tg_model_graph_create_ex(m, (int)batch, inference ? NULL : &opt, &in, &mg);
    double graph_ms = (cli_now() - t0) * 1e3;
    tg_cache_result cache = TG_CACHE_OFF;
    if (s == TG_OK)
        s = tg_program_compile_cached(mg.graph, o, &p, &cache);
    double ms = (cli_now() - t0) * 1e3;
    if (s == TG_OK && save_exe && tg_executable_save(p, save_exe) != TG_OK) {
        tg_program_destroy(p); /* its message is printed below */
        p = NULL;
        s = TG_ERR_IO;
    }
    /* stages or split auto: the split chosen is shown beside the predictions */
    pa.wanted = (s == TG_OK && p->config.pipeline.auto_stages) || pa.compare || pa.schedules;
    if (s == TG_OK && cache != TG_CACHE_OFF)
        fprintf(stderr, "tilegraph compile: program %s in %.1f ms (graph built in %.1f ms)\n",
                cache == TG_CACHE_LOADED ? "loaded from the executable cache" : "compiled",
                ms - graph_ms, graph_ms);
    int status = 0;
    tg_an_remedy rows[TG_AN_MAX_REMEDIES];
    int n_rows = 0;
    tg_options *over = NULL;
    if (s != TG_OK && is_over_capacity(s) && !json) {
        /* the remedies are what a user needs most when it does not fit:
         * plan it again allowing the overflow, and quantify them */
        fprintf(stderr, "tilegraph compile: out of memory: %s\n", tg_error_message());
        status = 1;
        over = tg_options_clone(o);
        if (over && tg_options_set(over, "debug.allowOutOfMemory", "true") == TG_OK &&
            tg_program_compile(mg.graph, over, &p) == TG_OK) {
            tg_an_insight_model im = {m, &in, inference ? NULL : &opt, (int)batch, over};
            tg_an_print_insights(&im, p, stdout, rows, &n_rows);
        }
    } else if (s != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s%s\n", is_over_capacity(s) ? "out of memory: " : "",
                tg_error_message());
        status = 1;
    } else if (json) {
        if (p->threads_warning[0])
            fprintf(stderr, "tilegraph: warning: %s\n", p->threads_warning);
        status = print_json(p, m->name, ms, o, &pa);
    } else {
        if (p->threads_warning[0])
            fprintf(stderr, "tilegraph: warning: %s\n", p->threads_warning);
        print_text(p, m->name, ms);
        if (pa.wanted && p->n_devices > 1)
            status = print_predictions(mg.graph, o, p, &pa, p->config.pipeline.auto_stages);
        if (insights || tg_an_insights_wanted(p)) {
            tg_an_insight_model im = {m, &in, inference ? NULL : &opt, (int)batch, o};
            tg_an_print_insights(&im, p, stdout, rows, &n_rows);
        }
    }
    if (profile && p) {
        const char *dir = p->config.report.directory;
        if (tg_an_write_graph_profile(dir, p, rows, n_rows) != TG_OK) {
            fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
            status = 1;
        } else if (!json) {
            fprintf(stderr, "graph profile: %s/%s/profile.sqlite (%d remedies)\n", dir,
                    inference ? "inference" : "training", n_rows);
        }
    }
    tg_options_destroy(over);
    tg_program_destroy(p);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    tg_model_close(m);
    return status;
}
