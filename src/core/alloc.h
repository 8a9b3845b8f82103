/* core/alloc.h - the one allocator every module goes through.
 *
 * It counts live bytes (so tests can compare what the engine really holds with
 * what the memory plan says) and can be told to fail the N-th allocation (so
 * tests prove that every allocation failure is handled). Thread-safe.
 */
#ifndef TG_CORE_ALLOC_H
#define TG_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *tg_malloc(size_t size);
void *tg_calloc(size_t count, size_t size);
void *tg_realloc(void *ptr, size_t size);
/* 64-byte aligned; free with tg_free like the others. */
void *tg_malloc_aligned(size_t size);
void tg_free(void *ptr);
/* Asks the OS to back the whole 2 MiB pages inside [ptr, ptr + size) with
 * huge pages (Linux's transparent huge pages, which Debian enables only
 * where asked: "madvise" mode); a hint, nothing where the OS has none.
 * For large buffers read at every run (a session's arena, kept weights),
 * before they are first touched: with 4 KiB pages ResNet-50's 100 MiB of
 * weights and 160 MiB of activations at batch 8 are 65,000 pages, far more
 * than the TLB holds. */
void tg_advise_huge_pages(void *ptr, size_t size);
char *tg_strdup(const char *s);

/* Bytes currently allocated through this allocator, and the peak. */
int64_t tg_alloc_live_bytes(void);
int64_t tg_alloc_peak_bytes(void);
void tg_alloc_reset_peak(void);

/* Allocations asked for so far (failed ones too): a test counts a clean
 * run's, then fails each of them in turn with tg_alloc_fail_after. */
int64_t tg_alloc_count(void);
/* Make the n-th allocation from now fail (n >= 1); 0 switches it off. For tests. */
void tg_alloc_fail_after(int64_t n);

#endif
