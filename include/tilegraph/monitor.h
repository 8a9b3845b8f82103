/* tilegraph/monitor.h - the tilegraph processes running on this host
 * (`tilegraph monitor`, gc-monitor's role).
 *
 * Every session keeps a small record of itself up to date in the registry
 * directory (one file per process, written atomically, refreshed at most
 * every two seconds at a host step, removed when the session ends). Readers
 * list the records and forget those whose process died: a record names its
 * process by pid and start time, so a pid reused by another program is not
 * mistaken for it. The directory is $TILEGRAPH_MONITOR_DIR when set, else
 * $XDG_RUNTIME_DIR/tilegraph, else /tmp/tilegraph-UID. A session does not
 * register when the engine option monitor.enable is false or the
 * environment variable TILEGRAPH_MONITOR is 0; a registry that cannot be
 * written never fails a session (one warning on stderr, then silence).
 */
#ifndef TILEGRAPH_MONITOR_H
#define TILEGRAPH_MONITOR_H

#include "tilegraph/devices.h"
#include "tilegraph/export.h"
#include "tilegraph/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MONITOR_MAX_DEVICES TG_MAX_DEVICES

typedef struct tg_monitor_entry {
    int pid;
    int64_t start_ticks;     /* the process's start time (/proc/PID/stat), to tell reused pids */
    char command[256];       /* its command line, arguments separated by spaces (cut when long) */
    char program[16];        /* "training" or "inference" */
    char target[16];         /* the target's name: "cpu", "mk2", ... */
    char strategy[16];       /* "single", "pipelined", "sharded" */
    int instance, instances; /* under MPI: this instance and the instance count; else 0 and 1 */
    int replicas, devices;   /* replicas in this process; devices per replica */
    int64_t memory[TG_MONITOR_MAX_DEVICES]; /* planned bytes per device of one replica */
    int64_t steps;                          /* host steps run */
    int64_t samples;                        /* samples consumed */
    double samples_per_second; /* over the last refresh interval; 0 before two host steps */
    double started, updated;   /* seconds since the epoch: session start, last refresh */
} tg_monitor_entry;

/* The registry directory (see above) into buf; TG_ERR_INVALID_ARG when it
 * does not fit. */
TG_API tg_status tg_monitor_dir(char *buf, size_t cap);

/* The live records, sorted by pid, into a tg_monitor_list_free'd array
 * (*out NULL and *n 0 when none or no registry). Records of dead processes
 * are removed when the directory is writable; unreadable or malformed
 * records are skipped. */
TG_API tg_status tg_monitor_list(tg_monitor_entry **out, int *n);
TG_API void tg_monitor_list_free(tg_monitor_entry *entries);

#ifdef __cplusplus
}
#endif
#endif
