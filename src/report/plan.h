/* report/plan.h - what `tilegraph compile` shows of a compiled program: the
 * memory plan per device, the peak of live activations, the tiles of a tiled
 * target, and the cost model's predictions of splits and schedules, as text
 * or JSON. The command holds the program as the public handle
 * (tilegraph/program.h: compile, save, facts, destroy) and hands it here.
 */
#ifndef TG_REPORT_PLAN_H
#define TG_REPORT_PLAN_H

#include "tilegraph/graph.h"
#include "tilegraph/options.h"
#include "tilegraph/program.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tg_report_prediction_args {
    const char *compare; /* --compare-stages SPEC */
    bool schedules;      /* --compare-schedules */
    bool wanted;         /* anything to predict (auto stages or a flag above) */
    int64_t batch;
} tg_report_prediction_args;

/* The plan as text: header, threads, memory per device, peak liveness, tiles. */
void tg_report_plan_text(const tg_compiled *c, const char *model, double ms, FILE *out);
/* The plan as one JSON object (with the predictions pa asks for); nonzero
 * when a prediction failed (reported on stderr). */
int tg_report_plan_json(const tg_compiled *c, const char *model, double ms, const tg_options *o,
                        const tg_report_prediction_args *pa, FILE *out);
/* The automatic split, the user's and the schedules over graph `g`, as text;
 * nonzero when a prediction failed (reported on stderr). */
int tg_report_predictions(const tg_graph *g, const tg_options *o, const tg_compiled *c,
                          const tg_report_prediction_args *pa, bool auto_compiled, FILE *out);

#endif
