/* core/clock.h - the one clock the library times with: CLOCK_MONOTONIC in
 * seconds, so that durations from any layer (the cost model's kernel
 * timing, the loader's waits, the engine's events, the CPU-load sample)
 * are on the same clock and immune to changes of the wall clock. */
#ifndef TG_CORE_CLOCK_H
#define TG_CORE_CLOCK_H

/* Seconds since an arbitrary fixed point (boot), monotonic. */
double tg_clock_seconds(void);

/* CPU seconds the calling thread has run (CLOCK_THREAD_CPUTIME_ID): time
 * off the CPU (another process running, a sleep) is not counted, so a
 * single-threaded kernel timed on it reads the same on a loaded machine
 * as on an idle one. */
double tg_clock_thread_seconds(void);

#endif
