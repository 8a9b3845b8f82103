/* report/remedies.h - the re-planned memory remedies of `tilegraph compile`
 * (each one the model compiled again with one change), kept with the graph
 * profile so that `analyse insights` and the report's Insights tab show them
 * for the plan they were computed on (profile table `remedies`,
 * docs/profile-format.md).
 */
#ifndef TG_REPORT_REMEDIES_H
#define TG_REPORT_REMEDIES_H

#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/program.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { TG_REPORT_MAX_REMEDIES = 16 };

typedef struct tg_report_remedy {
    char what[64];     /* "half the micro-batch" */
    int64_t need;      /* bytes the plan needs where it is fullest */
    int64_t after;     /* the same with the remedy; -1: not computed (see outcome) */
    int64_t capacity;  /* what it is held to; 0: none set */
    char outcome[200]; /* "fits", "still over", or why it was not computed */
} tg_report_remedy;

/* Write the graph profile of `p` (with the options it was compiled with) to
 * DIR/<training|inference>/profile.sqlite, with `n` remedies (none: n = 0),
 * atomically like every profile. */
tg_status tg_report_write_graph_profile(const char *dir, const tg_compiled *c,
                                        const tg_report_remedy *rows, int n);

/* What is needed to compile the model again for a remedy. */
typedef struct tg_report_insight_model {
    const tg_model_spec *spec;
    const tg_model_input *input;
    const tg_optimizer *optimizer; /* NULL: inference */
    int batch;
    const tg_options *options;
} tg_report_insight_model;

/* Over, or within 10% of, the capacity (memoryPerDevice, or a tile's memory). */
bool tg_report_insights_wanted(const tg_compiled *c);
/* Print the remedies of `tilegraph compile` to `out`; with out_rows
 * (TG_REPORT_MAX_REMEDIES of them), also append each as a row there (*n_rows
 * counts them) for the profile. */
void tg_report_insights(const tg_report_insight_model *m, const tg_compiled *c, FILE *out,
                        tg_report_remedy *out_rows, int *n_rows);

#endif
