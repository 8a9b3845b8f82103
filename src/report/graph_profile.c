/* report/graph_profile.c - a graph profile written by `compile`, with the
 * remedies it printed (tilegraph/plan.h). The profile layer writes the
 * file; this only hands it the program and the rows, so tools/ reach it
 * through the public API. */
#include "tilegraph/plan.h"

#include "compile/compiled.h"
#include "core/error.h"
#include "profile/profile.h"

tg_status tg_compiled_write_profile(const char *dir, const tg_compiled *c,
                                    const tg_what_if_plan *plan)
{
    const tg_what_if_row *rows = plan ? plan->rows : NULL;
    int n = plan ? plan->n : 0;
    tg_profile *pf = NULL;
    TG_TRY(tg_profile_open(dir, tg_compiled_program(c), false, &pf));
    tg_status s = TG_OK;
    for (int i = 0; s == TG_OK && i < n; i++)
        s = tg_profile_add_remedy(pf, rows[i].what, rows[i].need, rows[i].after, rows[i].capacity,
                                  rows[i].outcome);
    if (s != TG_OK) {
        tg_profile_abort(pf);
        return s;
    }
    return tg_profile_close(pf, NULL);
}
