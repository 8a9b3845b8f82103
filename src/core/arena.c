/* core/arena.c - chained-block bump allocator. */
#include "core/arena.h"

#include "core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct arena_block {
    struct arena_block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} arena_block;

struct tg_arena {
    arena_block *head;
    size_t block_size;
    size_t total_used;
};

tg_arena *tg_arena_create(size_t block_size)
{
    tg_arena *a = tg_calloc(1, sizeof *a);
    if (a)
        a->block_size = block_size ? block_size : 64 * 1024;
    return a;
}

void tg_arena_destroy(tg_arena *a)
{
    if (!a)
        return;
    for (arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        tg_free(b);
    }
    tg_free(a);
}

void *tg_arena_alloc(tg_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    arena_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t cap = size > a->block_size ? size : a->block_size;
        b = tg_malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->size = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    a->total_used += size;
    memset(p, 0, size);
    return p;
}

char *tg_arena_strdup(tg_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = tg_arena_alloc(a, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

char *tg_arena_printf(tg_arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *d = n >= 0 ? tg_arena_alloc(a, (size_t)n + 1) : NULL;
    if (d)
        vsnprintf(d, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return d;
}

size_t tg_arena_used(const tg_arena *a)
{
    return a->total_used;
}
