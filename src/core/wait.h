/* core/wait.h - waiting that degrades gracefully on a shared machine.
 *
 * A thread that waits for another (the thread pool's workers and caller, the
 * engine's barriers and transfers) first spins, because on an idle machine
 * the other side is a few microseconds away and a sleep/wake costs more than
 * that. But when the other side has been descheduled (another process wants
 * the core), spinning burns the spinner's whole time slice and can keep the
 * very thread it waits for off the CPU. So a wait goes through three stages:
 * pause (up to a budget), sched_yield (a few times: lets a runnable thread on
 * this core go first), then the caller sleeps on its own condvar.
 *
 * The budget adapts per waiter: a wait that ended within the spin window
 * doubles it (up to the ceiling), one that did not halves it (down to
 * TG_SPIN_MIN). A waiter whose threads outnumber the free cores gets the
 * floor as its ceiling, so it barely spins at all.
 */
#ifndef TG_CORE_WAIT_H
#define TG_CORE_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>

/* Pause iterations: the ceiling on an idle machine (about a millisecond
 * of spinning on current x86), and the floor every wait still tries, so that
 * the budget can grow back once the machine is quiet again. */
#define TG_SPIN_MAX 20000
#define TG_SPIN_MIN 64
/* sched_yield calls between spinning and sleeping. */
#define TG_SPIN_YIELDS 4

/* One waiter's spin budget. Owned by one thread at a time in practice, but
 * atomic (relaxed) so that waiters sharing one may race harmlessly. */
typedef struct tg_spin {
    atomic_int budget;
    atomic_int ceiling;
} tg_spin;

/* Start at the ceiling; ceiling is clamped to [TG_SPIN_MIN, TG_SPIN_MAX].
 * For a tg_spin no thread uses yet. */
void tg_spin_init(tg_spin *s, int ceiling);
/* A new ceiling (and budget) while waiters may be using s. */
void tg_spin_set_ceiling(tg_spin *s, int ceiling);

/* The budget after a wait: `within` says whether it ended within the spin
 * window. Pure, so that the adaptation can be tested without timing. */
int tg_spin_next_budget(int budget, int ceiling, bool within);

/* The condition a wait is for; evaluated repeatedly, must be cheap. */
typedef bool (*tg_ready_fn)(void *arg);

/* Spin, then yield, until ready(arg) holds: true if it did (the caller
 * need not sleep), false when the stages ran out (the caller then sleeps
 * on its own condvar, re-checking the condition under its mutex). Adapts s.
 * Any thread may call it. */
bool tg_spin_wait(tg_spin *s, tg_ready_fn ready, void *arg);

/* The CPU hint for a spin-wait iteration (pause on x86). */
void tg_cpu_relax(void);

#endif
