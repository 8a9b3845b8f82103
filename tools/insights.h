/* tools/insights.h - quantified memory remedies for `tilegraph compile`. */
#ifndef TG_TOOLS_INSIGHTS_H
#define TG_TOOLS_INSIGHTS_H

#include "cli.h"

#include "analyse/remedies.h"

#include "tilegraph/models.h"
#include "tilegraph/options.h"

struct tg_program;

/* What is needed to compile the model again. */
typedef struct insight_model {
    const tg_model_spec *spec;
    const tg_model_input *input;
    const tg_optimizer *optimizer; /* NULL: inference */
    int batch;
    const tg_options *options;
} insight_model;

/* Over, or within 10% of, the capacity (memoryPerDevice, or a tile's memory). */
bool insights_wanted(const struct tg_program *p);
/* Print the remedies to `out`; with out_rows (TG_AN_MAX_REMEDIES of them),
 * also append each as a row there (*n_rows counts them) for the profile. */
void print_insights(const insight_model *m, const struct tg_program *p, FILE *out,
                    tg_an_remedy *out_rows, int *n_rows);

#endif
