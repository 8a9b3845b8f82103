/* analyse/plan.h - what `tilegraph compile` shows of a compiled program: the
 * memory plan per device, the peak of live activations, the tiles of a tiled
 * target, and the cost model's predictions of splits and schedules, as text
 * or JSON. The command is a client of the library (docs/architecture.md) and
 * holds the program only as an opaque handle: compiling it, saving it and
 * the few facts it acts on come through here too.
 */
#ifndef TG_ANALYSE_PLAN_H
#define TG_ANALYSE_PLAN_H

#include "tilegraph/graph.h"
#include "tilegraph/options.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct tg_program;

/* Compile `g` with `o`. With cache_note, through the executable cache the
 * options name, and *cache_note says what the cache did ("loaded from the
 * executable cache", "compiled"), NULL when no cache is set; without it, a
 * plain compile. */
tg_status tg_an_plan_compile(const tg_graph *g, const tg_options *o, struct tg_program **out,
                             const char **cache_note);
/* Write the program to PATH, for train --executable. */
tg_status tg_an_plan_save(const struct tg_program *p, const char *path);
void tg_an_plan_free(struct tg_program *p);

/* The facts of a compiled program that the command acts on. */
typedef struct tg_an_plan_facts {
    int n_devices;
    bool auto_stages;            /* the split was chosen by the cost model */
    const char *threads_warning; /* "" when the threads fit the cores */
    const char *report_dir;      /* autoReport.directory */
} tg_an_plan_facts;
void tg_an_plan_facts_get(const struct tg_program *p, tg_an_plan_facts *out);

typedef struct tg_an_prediction_args {
    const char *compare; /* --compare-stages SPEC */
    bool schedules;      /* --compare-schedules */
    bool wanted;         /* anything to predict (auto stages or a flag above) */
    int64_t batch;
} tg_an_prediction_args;

/* The plan as text: header, threads, memory per device, peak liveness, tiles. */
void tg_an_print_plan_text(const struct tg_program *p, const char *model, double ms, FILE *out);
/* The plan as one JSON object (with the predictions pa asks for); nonzero
 * when a prediction failed (reported on stderr). */
int tg_an_print_plan_json(const struct tg_program *p, const char *model, double ms,
                          const tg_options *o, const tg_an_prediction_args *pa, FILE *out);
/* The automatic split, the user's and the schedules over graph `g`, as text;
 * nonzero when a prediction failed (reported on stderr). */
int tg_an_print_predictions(const tg_graph *g, const tg_options *o, const struct tg_program *p,
                            const tg_an_prediction_args *pa, bool auto_compiled, FILE *out);

#endif
