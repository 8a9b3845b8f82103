/* tests/core/test_wait.c - the adaptive spin budget (a pure rule) and
 * tg_spin_wait used as the first stage of a condvar wait by 8 threads
 * passing a token round a ring, more threads than cores. No timing is
 * asserted: the rule is checked on numbers, the waits on their results.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"

#include "core/wait.h"

#include <pthread.h>
#include <stdatomic.h>

static void test_budget_rule(void)
{
    /* a wait that ended within the window doubles the budget, up to the ceiling */
    TG_CHECK(tg_spin_next_budget(1000, TG_SPIN_MAX, true) == 2000);
    TG_CHECK(tg_spin_next_budget(15000, TG_SPIN_MAX, true) == TG_SPIN_MAX);
    /* one that did not halves it, down to the floor */
    TG_CHECK(tg_spin_next_budget(1000, TG_SPIN_MAX, false) == 500);
    TG_CHECK(tg_spin_next_budget(TG_SPIN_MIN, TG_SPIN_MAX, false) == TG_SPIN_MIN);
    TG_CHECK(tg_spin_next_budget(0, TG_SPIN_MAX, true) == TG_SPIN_MIN);
    /* ceilings outside the range are clamped to it */
    TG_CHECK(tg_spin_next_budget(5000, 0, true) == TG_SPIN_MIN);
    TG_CHECK(tg_spin_next_budget(5000, 1 << 30, true) == 10000);
    /* under load the budget reaches the floor in a few misses, and comes
     * back to the ceiling in a few hits once the machine is quiet */
    int b = TG_SPIN_MAX, misses = 0, hits = 0;
    while (b > TG_SPIN_MIN && misses < 100)
        b = tg_spin_next_budget(b, TG_SPIN_MAX, false), misses++;
    TG_CHECK(b == TG_SPIN_MIN && misses <= 10);
    while (b < TG_SPIN_MAX && hits < 100)
        b = tg_spin_next_budget(b, TG_SPIN_MAX, true), hits++;
    TG_CHECK(b == TG_SPIN_MAX && hits <= 10);
}

static bool always(void *arg)
{
    (void)arg;
    return true;
}
static bool never(void *arg)
{
    (void)arg;
    return false;
}

static void test_spin_wait_adapts(void)
{
    tg_spin s;
    tg_spin_init(&s, 1000);
    TG_CHECK(atomic_load(&s.budget) == 1000 && atomic_load(&s.ceiling) == 1000);
    TG_CHECK(!tg_spin_wait(&s, never, NULL)); /* gives up: the caller sleeps */
    TG_CHECK(atomic_load(&s.budget) == 500);
    TG_CHECK(tg_spin_wait(&s, always, NULL));
    TG_CHECK(atomic_load(&s.budget) == 1000);
    tg_spin_init(&s, -5); /* clamped */
    TG_CHECK(atomic_load(&s.ceiling) == TG_SPIN_MIN);
}

/* A ring of threads: thread i waits until the token is i (mod N), then
 * passes it on. Each wait spins within its budget, then sleeps. */
#define RING 8
#define ROUNDS 2000

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    _Atomic long token;
    long visits[RING];
} ring;

typedef struct {
    ring *r;
    int index;
    tg_spin spin;
    long want;
} ring_arg;

static bool my_turn(void *arg)
{
    ring_arg *a = arg;
    return atomic_load(&a->r->token) == a->want;
}

static void *ring_main(void *arg_)
{
    ring_arg *a = arg_;
    ring *r = a->r;
    for (int k = 0; k < ROUNDS; k++) {
        a->want = (long)k * RING + a->index;
        if (!tg_spin_wait(&a->spin, my_turn, a)) {
            pthread_mutex_lock(&r->lock);
            while (!my_turn(a))
                pthread_cond_wait(&r->changed, &r->lock);
            pthread_mutex_unlock(&r->lock);
        }
        r->visits[a->index]++; /* ordered by the token: a data race here is a bug */
        pthread_mutex_lock(&r->lock);
        atomic_fetch_add(&r->token, 1);
        pthread_cond_broadcast(&r->changed);
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

static void run_ring(int ceiling)
{
    static ring r;
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.changed, NULL);
    atomic_store(&r.token, 0);
    ring_arg args[RING];
    pthread_t th[RING];
    for (int i = 0; i < RING; i++) {
        args[i] = (ring_arg){&r, i, {0}, 0};
        r.visits[i] = 0;
        tg_spin_init(&args[i].spin, ceiling);
        TG_CHECK(pthread_create(&th[i], NULL, ring_main, &args[i]) == 0);
    }
    for (int i = 0; i < RING; i++)
        pthread_join(th[i], NULL);
    TG_CHECK(atomic_load(&r.token) == (long)RING * ROUNDS);
    for (int i = 0; i < RING; i++) {
        TG_CHECK(r.visits[i] == ROUNDS);
        int b = atomic_load(&args[i].spin.budget);
        TG_CHECK(b >= TG_SPIN_MIN && b <= atomic_load(&args[i].spin.ceiling));
    }
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.changed);
}

static void test_ring_of_eight_threads(void)
{
    run_ring(TG_SPIN_MAX);
    run_ring(TG_SPIN_MIN);
}

int main(void)
{
    TG_RUN(test_budget_rule);
    TG_RUN(test_spin_wait_adapts);
    TG_RUN(test_ring_of_eight_threads);
    return tg_test_finish();
}
