/* core/wait.c - bounded, adaptive spinning before a sleep (see wait.h). */
#include "core/wait.h"

#include <sched.h>

void tg_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int clamp_ceiling(int ceiling)
{
    return ceiling < TG_SPIN_MIN ? TG_SPIN_MIN : ceiling > TG_SPIN_MAX ? TG_SPIN_MAX : ceiling;
}

void tg_spin_init(tg_spin *s, int ceiling)
{
    atomic_init(&s->ceiling, clamp_ceiling(ceiling));
    atomic_init(&s->budget, clamp_ceiling(ceiling));
}

void tg_spin_set_ceiling(tg_spin *s, int ceiling)
{
    atomic_store_explicit(&s->ceiling, clamp_ceiling(ceiling), memory_order_relaxed);
    atomic_store_explicit(&s->budget, clamp_ceiling(ceiling), memory_order_relaxed);
}

static void adapt(tg_spin *s, int budget, bool within)
{
    int ceiling = atomic_load_explicit(&s->ceiling, memory_order_relaxed);
    atomic_store_explicit(&s->budget, tg_spin_next_budget(budget, ceiling, within),
                          memory_order_relaxed);
}

int tg_spin_next_budget(int budget, int ceiling, bool within)
{
    ceiling = clamp_ceiling(ceiling);
    /* doubling back up is quick (a few waits), halving down too: under load
     * eight missed waits take the budget from the ceiling to the floor */
    long next = within ? 2L * budget : budget / 2;
    if (next < TG_SPIN_MIN)
        next = TG_SPIN_MIN;
    return next > ceiling ? ceiling : (int)next;
}

bool tg_spin_wait(tg_spin *s, tg_ready_fn ready, void *arg)
{
    int budget = atomic_load_explicit(&s->budget, memory_order_relaxed);
    for (int i = 0; i < budget; i++) {
        if (ready(arg)) {
            adapt(s, budget, true);
            return true;
        }
        tg_cpu_relax();
    }
    /* The other side did not come within the window: it is probably off the
     * CPU, so spin less next time, and let whoever is runnable here go first. */
    adapt(s, budget, false);
    for (int i = 0; i < TG_SPIN_YIELDS; i++) {
        if (ready(arg))
            return true;
        sched_yield();
    }
    return ready(arg);
}
