/* profile/profile.h - the profile of one compiled program: a SQLite
 * database (schema in docs/profile-format.md) holding what was planned (the
 * graph profile: target, memory plan, liveness, program tree, ops, tensors)
 * and what ran (the execution profile: the timed steps of the first runs).
 *
 * Written by the session when autoReport.* asks for it; read by the
 * analysers and by anyone with `sqlite3`.
 */
#ifndef TG_PROFILE_PROFILE_H
#define TG_PROFILE_PROFILE_H

#include "compile/program.h"
#include "tilegraph/options.h"

#define TG_PROFILE_SCHEMA_VERSION 1

typedef struct tg_profile tg_profile;
struct tg_session;

/* Start DIR/<training|inference>/profile.sqlite and write the graph profile
 * of `p` into it. `execution` says whether runs will be recorded. The file is
 * written under a temporary name (core/atomic_file.h) and replaces an older
 * profile only when tg_profile_close succeeds. The directory is locked
 * meanwhile: a second run on it fails here with a message naming it. */
tg_status tg_profile_open(const char *dir, const tg_program *p, const tg_options *o,
                          bool execution, tg_profile **out);
/* Append the events of the session's last run (run number `run`). */
tg_status tg_profile_record_run(tg_profile *pf, const struct tg_session *s, int64_t run);
/* Write the per-op totals, close the file and give it its final name. On
 * failure the temporary is removed and the previous profile kept. Frees pf. */
tg_status tg_profile_close(tg_profile *pf, const struct tg_session *s);
/* Drop the profile being written (the previous one stays). Frees pf. */
void tg_profile_abort(tg_profile *pf);
const char *tg_profile_path(const tg_profile *pf);

#endif
