/* profile/profile_internal.h - what the profile's files share: the open
 * database and its helpers. profile.c opens, locks and closes the file;
 * profile_graph.c writes the graph profile's tables (what was planned),
 * profile_execution.c the execution profile's (what ran). Not for other layers.
 */
#ifndef TG_PROFILE_PROFILE_INTERNAL_H
#define TG_PROFILE_PROFILE_INTERNAL_H

#include "profile/profile.h"

#include "core/atomic_file.h"

#include <sqlite3.h>

struct tg_profile {
    sqlite3 *db;
    char path[1024];   /* the final name; the database is written under af.tmp */
    tg_atomic_file af; /* renamed over `path` only by a successful close */
    int lock_fd;       /* DIR/<kind>/.profile.lock, held (fcntl) while writing */
    const tg_program *program;
    /* counters per host step, written at close: one small row each, so
     * recording them costs an array append */
    char counter_names[TG_PROFILE_MAX_COUNTERS][48];
    int n_counter_names;
    struct counter_row {
        int64_t step;
        int name;
        double value;
    } * counters;
    int64_t n_counters, cap_counters;
};

extern const char *const pf_phase_names[TG_PHASE_COUNT];

/* An I/O error naming the profile and what failed (with SQLite's message). */
tg_status pf_db_error(const tg_profile *pf, const char *what);
/* Run SQL text (statements separated by ';'). */
tg_status pf_exec(tg_profile *pf, const char *sql);
/* Reset st, bind by a format string ("i" int64, "d" double, "s" text or NULL,
 * "n" null), step. The caller finalizes st. */
tg_status pf_insert(tg_profile *pf, sqlite3_stmt *st, const char *types, ...);
/* A prepared statement, or NULL (pf_db_error says why). */
sqlite3_stmt *pf_prepare(tg_profile *pf, const char *sql);

/* profile_graph.c: every table of the graph profile. */
tg_status pf_write_graph(tg_profile *pf);
/* profile_execution.c: op calls and times from the recorders (NULL: none),
 * counters and the host trace, written at close. */
tg_status pf_write_execution_end(tg_profile *pf, const tg_profile_recorder *recorders);

#endif
