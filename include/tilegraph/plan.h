/* tilegraph/plan.h - what `tilegraph compile` shows of a compiled program
 * (tilegraph/program.h): the memory plan per device, the peak of live
 * activations, the tiles of a tiled target and the cost model's predictions
 * of splits and schedules, as text or JSON; the memory remedies, each the
 * model compiled again with one change (a what-if on the real plan, not a
 * rule of thumb); and the graph profile that keeps the plan with them
 * (profile table `remedies`, docs/profile-format.md), which `analyse
 * insights` and the report's Insights tab read.
 */
#ifndef TILEGRAPH_PLAN_H
#define TILEGRAPH_PLAN_H

#include "tilegraph/export.h"
#include "tilegraph/graph.h"
#include "tilegraph/models.h"
#include "tilegraph/optim.h"
#include "tilegraph/options.h"
#include "tilegraph/program.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the plan ---- */

typedef struct tg_report_prediction_args {
    const char *compare; /* --compare-stages SPEC */
    bool schedules;      /* --compare-schedules */
    bool wanted;         /* anything to predict (auto stages or a flag above) */
    int64_t batch;
} tg_report_prediction_args;

/* The plan as text: header, threads, memory per device, peak liveness, tiles. */
TG_API void tg_report_plan_text(const tg_compiled *c, const char *model, double ms, FILE *out);
/* The plan as one JSON object (with the predictions pa asks for); nonzero
 * when a prediction failed (reported on stderr). */
TG_API int tg_report_plan_json(const tg_compiled *c, const char *model, double ms,
                               const tg_options *o, const tg_report_prediction_args *pa, FILE *out);
/* The automatic split, the user's and the schedules over graph `g`, as text;
 * nonzero when a prediction failed (reported on stderr). */
TG_API int tg_report_predictions(const tg_graph *g, const tg_options *o, const tg_compiled *c,
                                 const tg_report_prediction_args *pa, bool auto_compiled,
                                 FILE *out);

/* ---- what would make it fit ---- */

enum { TG_WHAT_IF_MAX = 16 };

/* What is needed to compile the model again with a change. */
typedef struct tg_what_if_model {
    const tg_model_spec *spec;
    const tg_model_input *input;
    const tg_optimizer *optimizer; /* NULL: inference */
    int batch;
    const tg_options *options;
} tg_what_if_model;

/* One remedy and the plan it gives. The figure is the largest need: the
 * fullest tile on a tiled target, the largest device arena otherwise. */
typedef struct tg_what_if_row {
    char what[64];     /* "half the micro-batch" */
    int64_t need;      /* bytes the plan needs where it is fullest */
    int64_t after;     /* the same with the remedy; -1: not computed (see outcome) */
    int64_t capacity;  /* what it is held to; 0: none set */
    char outcome[200]; /* "fits", "still over", or why it was not computed */
    char shown[1088];  /* what `compile` prints after `what` (an error message whole) */
} tg_what_if_row;

typedef struct tg_what_if_plan {
    char unit[32];    /* where the need is ("device 1", "tile 17 of device 0") */
    int64_t need;     /* as the rows' */
    int64_t capacity; /* 0: none set */
    int n;
    tg_what_if_row rows[TG_WHAT_IF_MAX];
} tg_what_if_plan;

/* Over, or within 10% of, the capacity (memoryPerDevice, or a tile's memory):
 * when `compile` shows the remedies without being asked. */
TG_API bool tg_what_if_wanted(const tg_compiled *c);
/* Every remedy for program `c` of model `m`, each compiled again with its one
 * change into `plan` (a remedy that does not compile, or does not apply, is a
 * row saying why). */
TG_API tg_status tg_program_what_if(const tg_compiled *c, const tg_what_if_model *m,
                                    tg_what_if_plan *plan);
/* The remedies as `compile` prints them. */
TG_API void tg_what_if_print(const tg_what_if_plan *plan, FILE *out);

/* Write the graph profile of `c` (with the options it was compiled with) to
 * DIR/<training|inference>/profile.sqlite, with the remedies of `plan`
 * (NULL: none), atomically like every profile. */
TG_API tg_status tg_compiled_write_profile(const char *dir, const tg_compiled *c,
                                           const tg_what_if_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
