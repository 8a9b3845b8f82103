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

#ifdef __cplusplus
}
#endif

#endif
