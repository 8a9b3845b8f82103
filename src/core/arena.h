/* core/arena.h - bump allocator for objects that die together.
 *
 * A graph's nodes, names and parameters live in one arena and are freed with
 * it, so builders never free piecemeal. Pointers stay valid until the arena
 * is destroyed (blocks are chained, never moved). Not thread-safe.
 */
#ifndef TG_CORE_ARENA_H
#define TG_CORE_ARENA_H

#include <stddef.h>

typedef struct tg_arena tg_arena;

tg_arena *tg_arena_create(size_t block_size);
void tg_arena_destroy(tg_arena *a);
/* Zeroed, 16-byte aligned memory; NULL when out of memory. */
void *tg_arena_alloc(tg_arena *a, size_t size);
char *tg_arena_strdup(tg_arena *a, const char *s);
/* printf into arena memory. */
char *tg_arena_printf(tg_arena *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
size_t tg_arena_used(const tg_arena *a);

#endif
