/* analyse/remedies.c - a graph profile written by `compile`, with the
 * remedies it printed. The profile layer writes the file; this only hands
 * it the rows, so tools/ reach it through the analyse layer. */
#include "analyse/remedies.h"

#include "core/error.h"
#include "profile/profile.h"

tg_status tg_an_write_graph_profile(const char *dir, const struct tg_program *p,
                                    const tg_an_remedy *rows, int n)
{
    tg_profile *pf = NULL;
    TG_TRY(tg_profile_open(dir, p, false, &pf));
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
