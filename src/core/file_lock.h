/* core/file_lock.h - "one run at a time" over a path, for profile
 * directories (profile/profile.c) and checkpoint paths (tools/save_lock.c).
 *
 * An fcntl write lock on a small file, so it goes away with the process
 * however that ends (kill -9 included) and a stale lock never blocks anyone;
 * the file holds the owner's pid, only for the message of a run refused. */
#ifndef TG_CORE_FILE_LOCK_H
#define TG_CORE_FILE_LOCK_H

#include "tilegraph/status.h"

/* Open (creating) and lock `path`. TG_OK: *fd holds it until closed.
 * TG_ERR_IO with *fd -1: another process holds it (its pid in `owner`,
 * "unknown" if it wrote none) or the file cannot be created (owner empty;
 * the error message says why). */
tg_status tg_file_lock(const char *path, int *fd, char owner[32]);
/* The pid of the process holding `path`'s lock now, or 0 (none, or no file). */
long tg_file_lock_holder(const char *path);

#endif
