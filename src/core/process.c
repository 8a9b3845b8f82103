/* core/process.c - the kernel-choice overrides, the process-wide state that
 * has no other home (core/process.h says what else is process-wide and why).
 * Relaxed atomics: each value stands alone, and a kernel that reads one while
 * a test sets it sees the old or the new value, never a torn one.
 */
#include "core/process.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int conv_method;          /* 0: TG_CONV_AUTO */
static atomic_int simd_cap = INT_MAX;   /* no cap */
static atomic_int dnnl_mode_and_forced; /* mode << 1 | forced, read and set as one */

int tg_process_conv_method(void)
{
    return atomic_load_explicit(&conv_method, memory_order_relaxed);
}

void tg_process_set_conv_method(int method)
{
    atomic_store_explicit(&conv_method, method, memory_order_relaxed);
}

int tg_process_simd_cap(void)
{
    return atomic_load_explicit(&simd_cap, memory_order_relaxed);
}

void tg_process_set_simd_cap(int level)
{
    atomic_store_explicit(&simd_cap, level, memory_order_relaxed);
}

int tg_process_dnnl_mode(int *forced)
{
    int v = atomic_load_explicit(&dnnl_mode_and_forced, memory_order_relaxed);
    *forced = v & 1;
    return v >> 1;
}

void tg_process_set_dnnl_mode(int mode, int forced)
{
    atomic_store_explicit(&dnnl_mode_and_forced, mode << 1 | (forced != 0), memory_order_relaxed);
}

static atomic_int whole_staging;

int tg_process_whole_staging(void)
{
    return atomic_load_explicit(&whole_staging, memory_order_relaxed);
}

void tg_process_set_whole_staging(int whole)
{
    atomic_store_explicit(&whole_staging, whole, memory_order_relaxed);
}

static atomic_int drop_weights; /* 0: keep them (the default) */

int tg_process_keep_weights(void)
{
    return !atomic_load_explicit(&drop_weights, memory_order_relaxed);
}

void tg_process_set_keep_weights(int keep)
{
    atomic_store_explicit(&drop_weights, !keep, memory_order_relaxed);
}

static atomic_int winograd = -1; /* -1: as TG_CONV_WINOGRAD says */

int tg_process_winograd(void)
{
    int on = atomic_load_explicit(&winograd, memory_order_relaxed);
    if (on >= 0)
        return on;
    const char *e = getenv("TG_CONV_WINOGRAD");
    return !e || strcmp(e, "0") != 0;
}

void tg_process_set_winograd(int on)
{
    atomic_store_explicit(&winograd, on < 0 ? -1 : on != 0, memory_order_relaxed);
}

static atomic_int no_fusion; /* 0: fuse (the default) */

int tg_process_fuse_inference(void)
{
    return !atomic_load_explicit(&no_fusion, memory_order_relaxed);
}

void tg_process_set_fuse_inference(int fuse)
{
    atomic_store_explicit(&no_fusion, !fuse, memory_order_relaxed);
}

/* 0 is never handed out: it means "unknown" to the kernels' weight caches. */
static _Atomic uint64_t weights_versions;

uint64_t tg_process_next_weights_version(void)
{
    return atomic_fetch_add_explicit(&weights_versions, 1, memory_order_relaxed) + 1;
}
