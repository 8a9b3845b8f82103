/* tilegraph/files.h - the checks tilegraph makes on the files a run reads and
 * writes, for programs that take paths from their users: an output is
 * checked before any work is done (not after an hour of training), and an
 * input that is a FIFO, a directory or a device is refused before anything
 * can block on it. Messages name the file and what is wrong with it.
 */
#ifndef TILEGRAPH_FILES_H
#define TILEGRAPH_FILES_H

#include "tilegraph/export.h"
#include "tilegraph/status.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Check, before any work is done, that PATH could be written atomically: it
 * is not a directory or other non-regular file, its directory exists and a
 * temporary can be created there (which catches missing directories,
 * read-only mounts, /proc and permissions). `what` names the output in the
 * message ("--save", "trace file"). Leaves nothing behind. */
TG_API tg_status tg_probe_writable(const char *what, const char *path);

/* The same for a directory that files will be written into (created with
 * its parents when missing: `--profile-dir`). */
TG_API tg_status tg_probe_writable_dir(const char *what, const char *dir);

/* Open PATH read-only as a stdio stream (mode "rb"), refusing anything but a
 * regular file without blocking ("PATH is a FIFO, not a regular file"). *f
 * is NULL on failure. */
TG_API tg_status tg_fopen_regular(const char *path, FILE **f);

/* "One run at a time" over a path (a profile directory's .profile.lock, a
 * checkpoint's PATH.lock): an fcntl write lock on a small file, so it goes
 * away with the process however that ends (kill -9 included) and a stale
 * lock never blocks anyone; the file holds the owner's pid for the message
 * of a run refused. TG_OK: *fd holds the lock until closed. TG_ERR_IO with
 * *fd -1: another process holds it (its pid in `owner`, "unknown" if it
 * wrote none) or the file cannot be created (owner empty; the message says
 * why). */
TG_API tg_status tg_file_lock(const char *path, int *fd, char owner[32]);
/* The pid of the process holding `path`'s lock now, or 0 (none, or no file). */
TG_API long tg_file_lock_holder(const char *path);

#ifdef __cplusplus
}
#endif

#endif
