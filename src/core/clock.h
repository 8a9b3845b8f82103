/* core/clock.h - the one clock the library times with: CLOCK_MONOTONIC in
 * seconds, so that durations from any layer (the cost model's kernel
 * timing, the loader's waits, the engine's events, the CPU-load sample)
 * are on the same clock and immune to changes of the wall clock. */
#ifndef TG_CORE_CLOCK_H
#define TG_CORE_CLOCK_H

/* Seconds since an arbitrary fixed point (boot), monotonic. */
double tg_clock_seconds(void);

#endif
