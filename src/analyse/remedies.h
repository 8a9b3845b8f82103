/* analyse/remedies.h - the re-planned memory remedies of `tilegraph compile`
 * (each one the model compiled again with one change), kept with the graph
 * profile so that `analyse insights` and the report's Insights tab show them
 * for the plan they were computed on (profile table `remedies`,
 * docs/profile-format.md).
 */
#ifndef TG_ANALYSE_REMEDIES_H
#define TG_ANALYSE_REMEDIES_H

#include "tilegraph/options.h"
#include "tilegraph/status.h"

#include <stdint.h>

struct tg_program;

enum { TG_AN_MAX_REMEDIES = 16 };

typedef struct tg_an_remedy {
    char what[64];     /* "half the micro-batch" */
    int64_t need;      /* bytes the plan needs where it is fullest */
    int64_t after;     /* the same with the remedy; -1: not computed (see outcome) */
    int64_t capacity;  /* what it is held to; 0: none set */
    char outcome[200]; /* "fits", "still over", or why it was not computed */
} tg_an_remedy;

/* Write the graph profile of `p` (with the options it was compiled with) to
 * DIR/<training|inference>/profile.sqlite, with `n` remedies (none: n = 0),
 * atomically like every profile. */
tg_status tg_an_write_graph_profile(const char *dir, const struct tg_program *p,
                                    const tg_an_remedy *rows, int n);

#endif
