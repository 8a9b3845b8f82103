/* core/atomic_file.h - writing files so that nothing is ever lost, and
 * reading them so that nothing ever hangs.
 *
 * Every file tilegraph writes (checkpoints, profiles, reports, traces,
 * executables) goes through tg_atomic_file: the bytes go to `PATH.tmp.PID`
 * in the same directory (so the rename cannot cross file systems), are
 * flushed and fsynced, and only then renamed over PATH; the directory is
 * synced after the rename so the new name survives a power cut. A reader of
 * PATH therefore sees the old file or the complete new one, never a torn
 * one, whatever happens to the writer (kill -9, full disk, exception). Any
 * failure removes the temporary. Temporaries left by killed processes
 * (`PATH.tmp.PID` whose PID no longer runs) are removed by the next open of
 * the same PATH.
 *
 *     tg_atomic_file af;
 *     TG_TRY(tg_atomic_file_open(path, &af));
 *     fprintf(af.f, ...);
 *     TG_TRY(tg_atomic_file_commit(&af));   (or tg_atomic_file_abort(&af))
 *
 * A writer that needs the name rather than a stream (SQLite opens its own
 * file) uses tg_atomic_file_reserve and the same commit/abort.
 *
 * Readers use tg_open_regular, which refuses FIFOs, directories, sockets and
 * devices before anything can block on them (open with O_NONBLOCK, then
 * fstat), naming the file and what it is.
 *
 * Thread safety: a tg_atomic_file belongs to one thread at a time; distinct
 * handles may be used on distinct threads. Two handles on the same PATH in one
 * process would share a temporary name: don't.
 */
#ifndef TG_CORE_ATOMIC_FILE_H
#define TG_CORE_ATOMIC_FILE_H

#include "tilegraph/files.h" /* tg_probe_writable, tg_probe_writable_dir, tg_fopen_regular */
#include "tilegraph/status.h"

#include <stddef.h>
#include <stdio.h>

typedef struct tg_atomic_file {
    char *path; /* the final name (owned copy) */
    char *tmp;  /* PATH.tmp.PID (owned) */
    FILE *f;    /* the stream on tmp; NULL after reserve, commit or abort */
} tg_atomic_file;

/* Create PATH.tmp.PID for writing and give a stream on it in af->f. Refuses a
 * PATH that exists and is not a regular file (a directory, FIFO, device).
 * The permissions of an existing PATH are kept. On failure nothing is left on
 * disk and *af is zeroed. */
tg_status tg_atomic_file_open(const char *path, tg_atomic_file *af);

/* As tg_atomic_file_open, but only choose (and clear) the temporary name,
 * af->tmp, for a writer that opens the file itself; af->f stays NULL. */
tg_status tg_atomic_file_reserve(const char *path, tg_atomic_file *af);

/* Flush and fsync the temporary, close it, rename it over PATH and sync the
 * directory. On failure the temporary is removed and PATH is untouched (the
 * message names PATH and the step that failed). Always releases *af. */
tg_status tg_atomic_file_commit(tg_atomic_file *af);

/* Close and remove the temporary; PATH is untouched. Safe on a zeroed or
 * already released handle. */
void tg_atomic_file_abort(tg_atomic_file *af);

/* The whole of buf[0..len) as PATH, atomically. */
tg_status tg_atomic_file_write(const char *path, const void *buf, size_t len);

/* Remove PATH.tmp.PID files in PATH's directory whose PID is not a running
 * process (left by killed runs). Returns how many were removed. */
int tg_atomic_file_clean_stale(const char *path);

/* The same for every NAME.tmp.PID in `dir` whose NAME starts with `prefix`:
 * for outputs whose own names carry a pid (host traces). */
int tg_atomic_file_clean_stale_prefix(const char *dir, const char *prefix);

/* Open PATH read-only, refusing anything but a regular file without blocking
 * ("PATH is a FIFO, not a regular file"). *fd is -1 on failure. */
tg_status tg_open_regular(const char *path, int *fd);

/* TG_OK if PATH exists and is a regular file; otherwise an error naming PATH
 * and saying what it is (or why it cannot be seen). Does not open it: for
 * readers such as SQLite that open the file themselves. */
tg_status tg_check_regular(const char *path);

/* "a FIFO", "a directory", "a socket", "a character device", "a block
 * device", "a regular file" or "a special file" for a st_mode. */
const char *tg_file_kind(unsigned mode);

#endif
