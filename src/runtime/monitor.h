/* runtime/monitor.h - a session's record in the process registry that
 * `tilegraph monitor` reads (tilegraph/monitor.h describes the registry).
 *
 * Cheap by design: a record is a few hundred bytes of JSON rewritten at most
 * every TG_MONITOR_PERIOD seconds, at a host step. Nothing here can fail a
 * session: a registry that cannot be written gives one warning per process
 * and the session goes on unregistered.
 */
#ifndef TG_RUNTIME_MONITOR_H
#define TG_RUNTIME_MONITOR_H

#include "compile/program.h"
#include "tilegraph/options.h"

#define TG_MONITOR_PERIOD 2.0

typedef struct tg_monitor tg_monitor;

/* Register a session running `p`, consuming samples_per_run samples per host
 * step. NULL when monitoring is off (option monitor.enable, TILEGRAPH_MONITOR=0)
 * or the registry cannot be written. */
tg_monitor *tg_monitor_start(const tg_program *p, int64_t samples_per_run);
/* After each host step: count it and refresh the record when due. */
void tg_monitor_step(tg_monitor *m);
/* Remove the record and free; NULL is a no-op. */
void tg_monitor_stop(tg_monitor *m);

/* The start time of process pid in clock ticks since boot (/proc/PID/stat),
 * or -1 when it does not run (or is a zombie) or cannot be read. */
int64_t tg_process_start_ticks(int pid);

#endif
