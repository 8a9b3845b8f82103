/* core/alloc.c - counting allocator with fault injection.
 *
 * Every block carries a 64-byte header holding its size, so that tg_free can
 * subtract it and so that every block is 64-byte aligned (cache lines and
 * AVX-512 loads). The counters are C11 atomics.
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "core/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define TG_ALLOC_HEADER 64

static atomic_llong live_bytes;
static atomic_llong peak_bytes;
static atomic_llong fail_countdown;
static atomic_llong calls;

static int should_fail(void)
{
    long long c = atomic_load(&fail_countdown);
    while (c > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &c, c - 1))
            return c == 1;
    }
    return 0;
}

static void count(long long delta)
{
    long long now = atomic_fetch_add(&live_bytes, delta) + delta;
    long long peak = atomic_load(&peak_bytes);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
    }
}

void *tg_malloc(size_t size)
{
    atomic_fetch_add(&calls, 1);
    if (should_fail() || size > SIZE_MAX - TG_ALLOC_HEADER)
        return NULL;
    void *raw = NULL;
    if (posix_memalign(&raw, TG_ALLOC_HEADER, size + TG_ALLOC_HEADER) != 0)
        return NULL;
    memcpy(raw, &size, sizeof size);
    count((long long)size);
    return (char *)raw + TG_ALLOC_HEADER;
}

void *tg_malloc_aligned(size_t size)
{
    return tg_malloc(size);
}

void *tg_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = tg_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static size_t block_size(void *p)
{
    size_t size;
    memcpy(&size, (char *)p - TG_ALLOC_HEADER, sizeof size);
    return size;
}

void *tg_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return tg_malloc(size);
    size_t old = block_size(ptr);
    void *p = tg_malloc(size);
    if (!p)
        return NULL;
    memcpy(p, ptr, old < size ? old : size);
    tg_free(ptr);
    return p;
}

void tg_free(void *ptr)
{
    if (!ptr)
        return;
    count(-(long long)block_size(ptr));
    free((char *)ptr - TG_ALLOC_HEADER);
}

void tg_advise_huge_pages(void *ptr, size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)ptr + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)ptr + size) & ~(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)ptr, (void)size;
#endif
}

char *tg_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = tg_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int64_t tg_alloc_live_bytes(void)
{
    return atomic_load(&live_bytes);
}
int64_t tg_alloc_peak_bytes(void)
{
    return atomic_load(&peak_bytes);
}
void tg_alloc_reset_peak(void)
{
    atomic_store(&peak_bytes, atomic_load(&live_bytes));
}
int64_t tg_alloc_count(void)
{
    return atomic_load(&calls);
}
void tg_alloc_fail_after(int64_t n)
{
    atomic_store(&fail_countdown, (long long)n);
}
